//! Plain numeric element types that typed collectives move in the wire format
//! ([`crate::wire`]: little-endian).

use crate::wire::{Reader, Writer};
use std::mem::MaybeUninit;

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
    /// Writes the wire bytes of `src` into `dst`.
    ///
    /// # Panics
    /// If `dst.len() != src.len() · SIZE`.
    fn write_bytes(src: &[Self], dst: &mut [u8]);
    /// Writes the wire bytes of `src` into `dst`, bytes not written yet (each is written).
    ///
    /// # Panics
    /// If `dst.len() != src.len() · SIZE`.
    fn write_uninit(src: &[Self], dst: &mut [MaybeUninit<u8>]);
    /// Decodes `src` (a multiple of `SIZE` bytes) into `dst`.
    ///
    /// # Panics
    /// If `src.len() != dst.len() · SIZE`.
    fn copy_from_bytes(src: &[u8], dst: &mut [Self]);
    /// Decodes `src` into `dst`, values not written yet (each is written).
    ///
    /// # Panics
    /// If `src.len() != dst.len() · SIZE`.
    fn decode_uninit(src: &[u8], dst: &mut [MaybeUninit<Self>]);
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
                w.scalars(src);
                w.into_bytes()
            }
            fn write_bytes(src: &[Self], dst: &mut [u8]) {
                crate::wire::put_all(src, dst);
            }
            fn write_uninit(src: &[Self], dst: &mut [MaybeUninit<u8>]) {
                crate::wire::put_all_uninit(src, dst);
            }
            fn copy_from_bytes(src: &[u8], dst: &mut [Self]) {
                crate::wire::get_all(src, dst);
            }
            fn decode_uninit(src: &[u8], dst: &mut [MaybeUninit<Self>]) {
                crate::wire::get_all_uninit(src, dst);
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
        let mut u = [MaybeUninit::<i64>::uninit(); 2];
        i64::decode_uninit(&i64::to_bytes(&[-3, i64::MAX]), &mut u);
        // SAFETY: `decode_uninit` wrote both values.
        let u = unsafe { [u[0].assume_init(), u[1].assume_init()] };
        assert_eq!(u, [-3, i64::MAX]);
        let mut v = [MaybeUninit::<u8>::uninit(); 8];
        f32::write_uninit(&[1.5, -2.0], &mut v);
        // SAFETY: `write_uninit` wrote the 8 bytes.
        let v = v.map(|b| unsafe { b.assume_init() });
        let mut one = Writer::default();
        one.f32(1.5);
        one.f32(-2.0);
        assert_eq!(&v[..], one.as_bytes());
    }

    #[test]
    fn a_slice_is_written_as_its_values_one_by_one() {
        let (a, b) = ([7u32, u32::MAX, 0x0102_0304], [-1i32, 5]);
        let mut one = Writer::default();
        a.iter().for_each(|&x| one.u32(x));
        b.iter().for_each(|&x| one.i32(x));
        let mut bulk = Writer::default();
        bulk.scalars(&a);
        bulk.scalars(&b);
        assert_eq!(one.as_bytes(), bulk.as_bytes());
        assert_eq!(&bulk.as_bytes()[8..12], &[4, 3, 2, 1]);
    }

    #[test]
    #[should_panic(expected = "5 bytes are not a whole number of u32")]
    fn rejects_ragged_bytes() {
        u32::vec_from_bytes(&[0; 5]);
    }
}
