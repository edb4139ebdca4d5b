//! The messages between ranks: pieces of patches (a rectangle of cell values) and flagged
//! cells, as little-endian records with fallible reads that name what was short.
//!
//! (The workspace is to get one wire format in `comm` (issue 19); this module is the one
//! place the kernel encodes and decodes, so it moves there in one step.)

use crate::SamrError;

/// Appends values to a byte buffer.
#[derive(Debug, Default, Clone)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u32(&mut self, x: u32) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub(crate) fn f64s(&mut self, xs: &[f64]) {
        self.buf.reserve(8 * xs.len());
        for x in xs {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// Reads back what a [`Writer`] wrote, in order; running short is an error naming the sender
/// and what was being read.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    from: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], from: usize) -> Self {
        Reader { data, at: 0, from }
    }

    pub(crate) fn error(&self, what: String) -> SamrError {
        SamrError::Wire {
            from: self.from,
            what,
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], SamrError> {
        match self.data.get(self.at..self.at + n) {
            Some(b) => {
                self.at += n;
                Ok(b)
            }
            None => Err(self.error(format!(
                "{what}: {n} bytes wanted at byte {} of {}",
                self.at,
                self.data.len()
            ))),
        }
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, SamrError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    pub(crate) fn f64s(
        &mut self,
        n: usize,
        out: &mut Vec<f64>,
        what: &str,
    ) -> Result<(), SamrError> {
        let b = self.take(8 * n, what)?;
        out.clear();
        out.extend(
            b.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))),
        );
        Ok(())
    }

    /// An error unless every byte was read.
    pub(crate) fn finish(&self) -> Result<(), SamrError> {
        if self.at == self.data.len() {
            Ok(())
        } else {
            Err(self.error(format!(
                "{} bytes left over after the expected records",
                self.data.len() - self.at
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_reads() {
        let mut w = Writer::default();
        w.u32(7);
        w.f64s(&[1.5, -0.0]);
        let mut r = Reader::new(&w.buf, 3);
        assert_eq!(r.u32("id").unwrap(), 7);
        let mut v = Vec::new();
        r.f64s(2, &mut v, "values").unwrap();
        assert_eq!(v, vec![1.5, -0.0]);
        r.finish().unwrap();
        let mut r = Reader::new(&w.buf[..10], 3);
        r.u32("id").unwrap();
        assert_eq!(
            r.f64s(2, &mut v, "values of piece 0")
                .unwrap_err()
                .to_string(),
            "message from rank 3: values of piece 0: 16 bytes wanted at byte 4 of 10"
        );
    }
}
