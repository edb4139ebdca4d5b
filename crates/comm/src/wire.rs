//! The one wire format of every message the runs exchange: values appended little-endian by
//! a [`Writer`], read back in the same order by a [`Reader`] whose reads fail with a
//! [`WireError`] naming what was short (never a panic, never a read past the end).
//!
//! The typed collectives ([`crate::Scalar`]) move their elements in this format too, so the
//! bytes a rank sends do not depend on the host's byte order.
//!
//! ```
//! use comm::wire::{Reader, Writer};
//! let mut w = Writer::default();
//! w.u32(7);
//! w.f64(0.5);
//! w.str("node 3");
//! w.opt_f64(None);
//! let bytes = w.into_bytes();
//! let mut r = Reader::new(&bytes, "an example");
//! assert_eq!(r.u32().unwrap(), 7);
//! assert_eq!(r.f64().unwrap(), 0.5);
//! assert_eq!(r.str().unwrap(), "node 3");
//! assert_eq!(r.opt_f64().unwrap(), None);
//! assert!(r.done());
//! let e = r.u64().unwrap_err();
//! assert_eq!(
//!     e.to_string(),
//!     "an example of 23 bytes ends at byte 23, inside a u64 (8 bytes)"
//! );
//! ```

use std::mem::MaybeUninit;

/// A message that ended before a value (or held a malformed one): which message, how long it
/// was, where the read stopped and what it was reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} of {len} bytes ends at byte {at}, inside a {what} ({need} bytes)")]
pub struct WireError {
    /// The kind of message (the reader's label, e.g. "a halo request").
    pub message: &'static str,
    /// Its length in bytes.
    pub len: usize,
    /// Where the failed read started.
    pub at: usize,
    /// What was being read (`u64`, `string of 12 bytes`, `UTF-8 string`, …).
    pub what: String,
    /// Bytes the read needed.
    pub need: usize,
}

/// Appends values to a byte buffer, little-endian.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Writer {
    buf: Vec<u8>,
}

macro_rules! put {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Appends a `", stringify!($t), "`.")]
        pub fn $name(&mut self, x: $t) {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    )*};
}

impl Writer {
    /// An empty writer with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> Writer {
        Writer {
            buf: Vec::with_capacity(bytes),
        }
    }

    put!(u8: u8, u16: u16, u32: u32, u64: u64, u128: u128, i32: i32, i64: i64, f32: f32, f64: f64);

    /// Appends a length or count as a `u64`.
    pub fn usize(&mut self, x: usize) {
        self.u64(x as u64);
    }

    /// Appends a flag byte and, for `Some`, the value.
    pub fn opt_f64(&mut self, x: Option<f64>) {
        match x {
            Some(v) => {
                self.u8(1);
                self.f64(v);
            }
            None => self.u8(0),
        }
    }

    /// Appends a string: its length (`u32`), then its UTF-8 bytes.
    ///
    /// # Panics
    /// If the string is 4 GiB or longer (a contract violation: messages carry names).
    pub fn str(&mut self, s: &str) {
        let n = u32::try_from(s.len()).expect("a string of a message is shorter than 4 GiB");
        self.u32(n);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Appends the values of `xs`, each as its own method would (the reader must know how
    /// many there are): one copy of the whole slice, into the buffer's spare capacity.
    pub fn scalars<T: crate::Scalar>(&mut self, xs: &[T]) {
        let n = xs.len() * T::SIZE;
        self.buf.reserve(n);
        T::write_uninit(xs, &mut self.buf.spare_capacity_mut()[..n]);
        // SAFETY: `write_uninit` wrote each of the `n` bytes after the length, within the
        // capacity just reserved.
        unsafe { self.buf.set_len(self.buf.len() + n) };
    }

    /// Appends raw bytes (the reader must know their length).
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes written.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The message.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// A value of fixed size in the wire format (the [`crate::Scalar`] types): its bytes.
pub(crate) trait Fixed: Copy {
    const SIZE: usize;
    /// Writes the value's `SIZE` bytes into `dst`.
    fn put(self, dst: &mut [u8]);
    /// The value of the `SIZE` bytes `src`.
    fn get(src: &[u8]) -> Self;
}

macro_rules! fixed {
    ($($t:ty),*) => {$(
        impl Fixed for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn put(self, dst: &mut [u8]) {
                dst.copy_from_slice(&self.to_le_bytes());
            }
            #[inline(always)]
            fn get(src: &[u8]) -> Self {
                <$t>::from_le_bytes(src.try_into().expect("a value's bytes"))
            }
        }
    )*};
}

fixed!(u8, u16, u32, u64, i32, i64, f32, f64);

/// Writes the values `src` into `dst`, each as [`Writer`] writes it: whole values in a loop
/// without checks (a copy on little-endian hosts).
///
/// # Panics
/// If `dst.len() != src.len() · SIZE`.
pub(crate) fn put_all<T: Fixed>(src: &[T], dst: &mut [u8]) {
    assert_eq!(dst.len(), src.len() * T::SIZE, "byte length does not match");
    for (d, &x) in dst.chunks_exact_mut(T::SIZE).zip(src) {
        x.put(d);
    }
}

/// [`put_all`] into bytes not written yet (each is written).
///
/// # Panics
/// If `dst.len() != src.len() · SIZE`.
pub(crate) fn put_all_uninit<T: Fixed>(src: &[T], dst: &mut [MaybeUninit<u8>]) {
    assert_eq!(dst.len(), src.len() * T::SIZE, "byte length does not match");
    for (d, &x) in dst.chunks_exact_mut(T::SIZE).zip(src) {
        let mut b = [0u8; 8];
        x.put(&mut b[..T::SIZE]);
        d.write_copy_of_slice(&b[..T::SIZE]);
    }
}

/// [`get_all`] into values not written yet (each is written).
///
/// # Panics
/// If `src.len() != dst.len() · SIZE`.
pub(crate) fn get_all_uninit<T: Fixed>(src: &[u8], dst: &mut [MaybeUninit<T>]) {
    assert_eq!(src.len(), dst.len() * T::SIZE, "byte length does not match");
    for (d, b) in dst.iter_mut().zip(src.chunks_exact(T::SIZE)) {
        d.write(T::get(b));
    }
}

/// Reads the values `dst` from `src`, the other way of [`put_all`].
///
/// # Panics
/// If `src.len() != dst.len() · SIZE`.
pub(crate) fn get_all<T: Fixed>(src: &[u8], dst: &mut [T]) {
    assert_eq!(src.len(), dst.len() * T::SIZE, "byte length does not match");
    for (d, b) in dst.iter_mut().zip(src.chunks_exact(T::SIZE)) {
        *d = T::get(b);
    }
}

/// Reads values back in the order a [`Writer`] wrote them; every read checks the length.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    message: &'static str,
}

macro_rules! get {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Reads a `", stringify!($t), "`.")]
        pub fn $name(&mut self) -> Result<$t, WireError> {
            Ok(<$t>::from_le_bytes(self.take(stringify!($t))?))
        }
    )*};
}

impl<'a> Reader<'a> {
    /// A reader of `data`, a message of the kind `message` (named in errors, e.g. "a halo
    /// request from rank 3" is built by the caller's context; here a short label).
    pub fn new(data: &'a [u8], message: &'static str) -> Reader<'a> {
        Reader {
            data,
            at: 0,
            message,
        }
    }

    /// Whether every byte was read.
    pub fn done(&self) -> bool {
        self.at == self.data.len()
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    fn short(&self, what: impl Into<String>, need: usize) -> WireError {
        WireError {
            message: self.message,
            len: self.data.len(),
            at: self.at,
            what: what.into(),
            need,
        }
    }

    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], WireError> {
        let b = self.bytes_named(N, what)?;
        Ok(b.try_into().expect("bytes_named returns N bytes"))
    }

    fn bytes_named(&mut self, n: usize, what: &str) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(self.short(what, n));
        }
        let b = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(b)
    }

    get!(u8: u8, u16: u16, u32: u32, u64: u64, u128: u128, i32: i32, i64: i64, f32: f32, f64: f64);

    /// Reads a length or count written by [`Writer::usize`]; one beyond this platform's
    /// `usize` is an error.
    pub fn usize(&mut self) -> Result<usize, WireError> {
        let at = self.at;
        let x = self.u64()?;
        usize::try_from(x).map_err(|_| WireError {
            at,
            ..self.short(format!("count {x} (beyond usize)"), 8)
        })
    }

    /// Reads an optional value written by [`Writer::opt_f64`].
    pub fn opt_f64(&mut self) -> Result<Option<f64>, WireError> {
        match self.u8()? {
            0 => Ok(None),
            _ => Ok(Some(self.f64()?)),
        }
    }

    /// Reads a string written by [`Writer::str`].
    pub fn str(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        let at = self.at;
        let b = self.bytes_named(n, &format!("string of {n} bytes"))?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError {
            at,
            ..self.short("UTF-8 string", n)
        })
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        self.bytes_named(n, &format!("run of {n} bytes"))
    }
}

/// One writer per destination rank, flattened for `alltoallv_bytes`.
#[derive(Debug, Clone)]
pub struct Outbox {
    to: Vec<Writer>,
}

impl Outbox {
    /// An outbox for `ranks` destinations.
    pub fn new(ranks: usize) -> Outbox {
        Outbox {
            to: vec![Writer::default(); ranks],
        }
    }

    /// The writer of the message to rank `r`.
    ///
    /// # Panics
    /// If `r` is not below the number of destinations.
    pub fn to(&mut self, r: usize) -> &mut Writer {
        &mut self.to[r]
    }

    /// Bytes written to every destination together.
    pub fn total_len(&self) -> usize {
        self.to.iter().map(Writer::len).sum()
    }

    /// The concatenated bytes and the count per destination, as `alltoallv_bytes` takes them.
    /// A message to one rank only (a migration over two ranks) is not copied.
    pub fn flatten(self) -> (Vec<u8>, Vec<usize>) {
        let counts = self.to.iter().map(Writer::len).collect();
        if self.to.iter().filter(|w| !w.is_empty()).count() <= 1 {
            let only = self.to.into_iter().find(|w| !w.is_empty());
            return (only.map(|w| w.buf).unwrap_or_default(), counts);
        }
        let mut all = Vec::with_capacity(self.to.iter().map(Writer::len).sum());
        for w in self.to {
            all.extend_from_slice(&w.buf);
        }
        (all, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        let mut w = Writer::with_capacity(64);
        w.u8(255);
        w.u16(65_535);
        w.u32(7);
        w.u64(u64::MAX);
        w.u128(1 << 100);
        w.i32(-3);
        w.i64(i64::MIN);
        w.f32(1.5);
        w.f64(-0.0);
        w.usize(12);
        w.opt_f64(Some(f64::INFINITY));
        w.str("é");
        w.bytes(&[9, 8]);
        let b = w.into_bytes();
        let mut r = Reader::new(&b, "a test message");
        assert_eq!(r.u8().unwrap(), 255);
        assert_eq!(r.u16().unwrap(), 65_535);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert_eq!(r.u128().unwrap(), 1 << 100);
        assert_eq!(r.i32().unwrap(), -3);
        assert_eq!(r.i64().unwrap(), i64::MIN);
        assert_eq!(r.f32().unwrap(), 1.5);
        assert_eq!(r.f64().unwrap().to_bits(), (-0.0f64).to_bits());
        assert_eq!(r.usize().unwrap(), 12);
        assert_eq!(r.opt_f64().unwrap(), Some(f64::INFINITY));
        assert_eq!(r.str().unwrap(), "é");
        assert_eq!(r.bytes(2).unwrap(), &[9, 8]);
        assert!(r.done());
    }

    #[test]
    fn short_and_malformed_messages_are_errors_that_say_where() {
        let mut w = Writer::default();
        w.u32(10); // a string of 10 bytes, but only 3 follow
        w.bytes(b"abc");
        let b = w.into_bytes();
        let e = Reader::new(&b, "a name").str().unwrap_err();
        assert_eq!(
            e.to_string(),
            "a name of 7 bytes ends at byte 4, inside a string of 10 bytes (10 bytes)"
        );
        let bad = [2u8, 0, 0, 0, 0xff, 0xfe];
        let e = Reader::new(&bad, "a name").str().unwrap_err();
        assert_eq!(e.at, 4);
        assert!(e.to_string().contains("UTF-8 string"), "{e}");
        let e = Reader::new(&[1, 2, 3], "a count").u32().unwrap_err();
        assert_eq!((e.at, e.need, e.len), (0, 4, 3));
    }

    #[test]
    fn outbox_flattens_in_rank_order() {
        let mut o = Outbox::new(3);
        o.to(2).u8(5);
        o.to(0).u16(1);
        let (all, counts) = o.flatten();
        assert_eq!(counts, vec![2, 0, 1]);
        assert_eq!(all, vec![1, 0, 5]);
        // One destination (its buffer handed over as it is), and none.
        let mut o = Outbox::new(3);
        o.to(1).u16(0x0201);
        assert_eq!(o.flatten(), (vec![1, 2], vec![0, 2, 0]));
        assert_eq!(Outbox::new(2).flatten(), (vec![], vec![0, 0]));
    }
}
