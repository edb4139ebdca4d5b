//! Little-endian byte records for the messages between ranks.

/// Appends values to a byte buffer.
#[derive(Debug, Default, Clone)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, x: u8) {
        self.buf.push(x);
    }
    pub(crate) fn u16(&mut self, x: u16) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, x: u32) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, x: u64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub(crate) fn u128(&mut self, x: u128) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, x: f64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }
}

/// Reads values back in the order they were written. Running past the end is a bug of the
/// sender's and receiver's agreement, so it panics.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, at: 0 }
    }
    pub(crate) fn done(&self) -> bool {
        self.at == self.data.len()
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let b: [u8; N] = self.data[self.at..self.at + N]
            .try_into()
            .expect("a message ends in the middle of a record");
        self.at += N;
        b
    }
    pub(crate) fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    pub(crate) fn u128(&mut self) -> u128 {
        u128::from_le_bytes(self.take())
    }
    pub(crate) fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
}

/// One writer per destination rank, flattened for `alltoallv`.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    pub(crate) to: Vec<Writer>,
}

impl Outbox {
    pub(crate) fn new(ranks: usize) -> Self {
        Outbox {
            to: vec![Writer::default(); ranks],
        }
    }
    /// The concatenated bytes and the count per destination.
    pub(crate) fn flatten(self) -> (Vec<u8>, Vec<usize>) {
        let counts = self.to.iter().map(|w| w.buf.len()).collect();
        let mut all = Vec::with_capacity(self.to.iter().map(|w| w.buf.len()).sum());
        for w in self.to {
            all.extend_from_slice(&w.buf);
        }
        (all, counts)
    }
}
