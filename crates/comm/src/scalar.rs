//! Plain numeric element types that typed collectives move in the wire format
//! ([`crate::wire`]: little-endian).

use crate::wire::{Reader, Writer};

mod sealed {
    pub trait Sealed {}
}

/// A fixed-size number that typed collectives (`allgather`, `allgatherv`, `alltoallv`, …) can
/// move. Sealed: implemented for `u8`, `u16`, `u32`, `u64`, `i32`, `i64`, `f32`, `f64`.
///
/// Values travel in the one wire format ([`crate::wire`], little-endian), whatever the host.
pub trait Scalar: Copy + Send + Sync + 'static + sealed::Sealed {
    /// Size in bytes.
    const SIZE: usize;
    /// The wire bytes of `src`, concatenated.
    fn to_bytes(src: &[Self]) -> Vec<u8>;
    /// Decodes `src` (a multiple of `SIZE` bytes) into `dst`.
    ///
    /// # Panics
    /// If `src.len() != dst.len() · SIZE`.
    fn copy_from_bytes(src: &[u8], dst: &mut [Self]);
    /// Decodes `src` (a multiple of `SIZE` bytes).
    ///
    /// # Panics
    /// If `src.len()` is not a multiple of `SIZE`.
    fn vec_from_bytes(src: &[u8]) -> Vec<Self>;
}

macro_rules! scalar {
    ($($t:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn to_bytes(src: &[Self]) -> Vec<u8> {
                let mut w = Writer::with_capacity(src.len() * Self::SIZE);
                for &x in src {
                    w.$t(x);
                }
                w.into_bytes()
            }
            fn copy_from_bytes(src: &[u8], dst: &mut [Self]) {
                assert_eq!(src.len(), dst.len() * Self::SIZE, "byte length does not match");
                let mut r = Reader::new(src, "a typed collective's buffer");
                for d in dst.iter_mut() {
                    *d = r.$t().expect("the length was checked");
                }
            }
            fn vec_from_bytes(src: &[u8]) -> Vec<Self> {
                assert!(
                    src.len().is_multiple_of(Self::SIZE),
                    "{} bytes are not a whole number of {}",
                    src.len(),
                    stringify!($t)
                );
                let mut r = Reader::new(src, "a typed collective's buffer");
                (0..src.len() / Self::SIZE)
                    .map(|_| r.$t().expect("the length was checked"))
                    .collect()
            }
        }
    )*};
}

scalar!(u8, u16, u32, u64, i32, i64, f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let x = [1.5f64, -0.0, f64::INFINITY, f64::MIN_POSITIVE];
        let b = f64::to_bytes(&x);
        assert_eq!(b.len(), 32);
        let y = f64::vec_from_bytes(&b);
        assert_eq!(
            x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let mut z = [0u32; 2];
        u32::copy_from_bytes(&u32::to_bytes(&[7, u32::MAX]), &mut z);
        assert_eq!(z, [7, u32::MAX]);
    }

    #[test]
    #[should_panic(expected = "5 bytes are not a whole number of u32")]
    fn rejects_ragged_bytes() {
        u32::vec_from_bytes(&[0; 5]);
    }
}
