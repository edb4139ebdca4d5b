//! The small reduction interface through which `hsfc` runs distributed.
//!
//! `hsfc` does not know MPI or threads-as-ranks: a caller that holds its points spread over
//! several ranks passes anything implementing [`Reduce`]. The `comm` crate implements it for
//! its thread and MPI communicators; [`Serial`] is the one-rank implementation.

/// Collective reductions over the ranks of a group.
///
/// Every rank of the group must call the same methods in the same order with buffers of the
/// same length (a contract violation, not a data error). After a call every rank holds the
/// element-wise result. An implementation whose peers have failed (a rank that panicked or
/// died) returns its error instead of hanging.
pub trait Reduce {
    /// Why a collective failed.
    type Error: std::error::Error + Send + Sync + 'static;
    /// This rank's index, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks in the group.
    fn size(&self) -> usize;
    /// Element-wise sum of `buf` over all ranks, in place.
    ///
    /// Floating-point sums may depend on the order of the ranks; callers that need
    /// bit-identical results for any rank count reduce integers (`sum_u64`) instead.
    fn sum_f64(&self, buf: &mut [f64]) -> Result<(), Self::Error>;
    /// Element-wise minimum of `buf` over all ranks, in place.
    fn min_f64(&self, buf: &mut [f64]) -> Result<(), Self::Error>;
    /// Element-wise maximum of `buf` over all ranks, in place.
    fn max_f64(&self, buf: &mut [f64]) -> Result<(), Self::Error>;
    /// Element-wise wrapping sum of `buf` over all ranks, in place (exact, order independent).
    fn sum_u64(&self, buf: &mut [u64]) -> Result<(), Self::Error>;
}

/// The one-rank group: every reduction is the identity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serial;

impl Reduce for Serial {
    type Error = std::convert::Infallible;
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn sum_f64(&self, _buf: &mut [f64]) -> Result<(), Self::Error> {
        Ok(())
    }
    fn min_f64(&self, _buf: &mut [f64]) -> Result<(), Self::Error> {
        Ok(())
    }
    fn max_f64(&self, _buf: &mut [f64]) -> Result<(), Self::Error> {
        Ok(())
    }
    fn sum_u64(&self, _buf: &mut [u64]) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_is_identity() {
        let mut a = [1.5, -2.0];
        let mut b = [7u64, u64::MAX];
        Serial.sum_f64(&mut a).unwrap();
        Serial.max_f64(&mut a).unwrap();
        Serial.sum_u64(&mut b).unwrap();
        assert_eq!(a, [1.5, -2.0]);
        assert_eq!(b, [7, u64::MAX]);
        assert_eq!((Serial.rank(), Serial.size()), (0, 1));
    }
}
