//! The small reduction interface through which the partitioners run distributed.
//!
//! A partitioner does not know MPI or threads-as-ranks: a caller that holds its points spread
//! over several ranks passes anything implementing [`Reduce`]. The `comm` crate implements it
//! for its thread and MPI communicators; [`Serial`] is the one-rank implementation.
//! [`block_range`] is the usual contiguous distribution of `n` objects over the ranks (the
//! `hsfc` CLI under `mpirun` reads its points that way).

use std::ops::Range;

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

/// How a step that [`agree`] made collective failed: on this rank (its own error), or only on
/// others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed<E> {
    /// This rank failed, with this error (other ranks may have failed too).
    Here(E),
    /// This rank succeeded but `ranks` others failed, the lowest of them `first`.
    Elsewhere {
        /// How many ranks failed.
        ranks: u64,
        /// The lowest failed rank.
        first: usize,
    },
}

/// The one protocol for agreeing on errors before the next collective: every rank passes the
/// outcome of its local step, and every rank learns whether all succeeded, so that no rank
/// is left waiting in a collective for one that gave up. Each rank gets its own value when
/// every rank succeeded, its own error when it failed, and [`Failed::Elsewhere`] (how many
/// ranks failed, and the lowest) when only others did.
///
/// `sums` rides along: it is summed over the ranks in the same collective (one `sum_u64` of
/// `[failed, sums..]` when every rank succeeds; a `min_f64` more when one failed). The outer
/// `Result` is the reduction's own failure (a peer died).
///
/// ```
/// use part_api::{Failed, Serial, agree};
/// let mut n = [5u64];
/// assert_eq!(agree(&Serial, Ok::<_, ()>(7), &mut n).unwrap(), Ok(7));
/// assert_eq!(n, [5]);
/// assert_eq!(agree(&Serial, Err::<(), _>("bad"), &mut []).unwrap(), Err(Failed::Here("bad")));
/// ```
pub fn agree<R: Reduce, T, E>(
    group: &R,
    local: Result<T, E>,
    sums: &mut [u64],
) -> Result<Result<T, Failed<E>>, R::Error> {
    let mut buf = Vec::with_capacity(1 + sums.len());
    buf.push(u64::from(local.is_err()));
    buf.extend_from_slice(sums);
    group.sum_u64(&mut buf)?;
    sums.copy_from_slice(&buf[1..]);
    let failed = buf[0];
    if failed == 0 {
        return Ok(local.map_err(Failed::Here));
    }
    // Ranks are below 2^53, exact in an f64.
    let mut first = [match local {
        Err(_) => group.rank() as f64,
        Ok(_) => f64::INFINITY,
    }];
    group.min_f64(&mut first)?;
    Ok(match local {
        Err(e) => Err(Failed::Here(e)),
        Ok(_) => Err(Failed::Elsewhere {
            ranks: failed,
            first: first[0] as usize,
        }),
    })
}

/// [`agree`] for a caller with one error type `E`: `Ok` on every rank only if every rank
/// succeeded; a failed rank gets its own error back, the others `elsewhere(ranks, first)` (how
/// many failed, and the lowest of them), and a failure of the reduction itself becomes an `E`.
/// The one adapter of the workspace's crates and commands (each names its own "another rank
/// failed" error).
///
/// ```
/// use part_api::{Serial, agreed};
/// #[derive(Debug, PartialEq)]
/// enum MyError {
///     Bad,
///     OtherRanks(u64, usize),
/// }
/// // The reduction's own failure (here: none can happen).
/// impl From<std::convert::Infallible> for MyError {
///     fn from(e: std::convert::Infallible) -> MyError {
///         match e {}
///     }
/// }
/// let other = |ranks, first| MyError::OtherRanks(ranks, first);
/// assert_eq!(agreed(&Serial, Ok::<_, MyError>(7), other), Ok(7));
/// assert_eq!(agreed(&Serial, Err::<(), _>(MyError::Bad), other), Err(MyError::Bad));
/// ```
pub fn agreed<R, T, E>(
    group: &R,
    local: Result<T, E>,
    elsewhere: impl FnOnce(u64, usize) -> E,
) -> Result<T, E>
where
    R: Reduce,
    E: From<R::Error>,
{
    match agree(group, local, &mut [])? {
        Ok(x) => Ok(x),
        Err(Failed::Here(e)) => Err(e),
        Err(Failed::Elsewhere { ranks, first }) => Err(elsewhere(ranks, first)),
    }
}

/// The contiguous block of `n` objects that rank `rank` of `size` holds:
/// `[rank·n/size, (rank+1)·n/size)` (rounded down). The blocks of ranks `0..size` tile `0..n`
/// in rank order and differ in length by at most one.
///
/// # Panics
/// If `size == 0` or `rank >= size` (a programming error).
///
/// ```
/// use part_api::block_range;
/// assert_eq!(block_range(10, 0, 4), 0..2);
/// assert_eq!(block_range(10, 3, 4), 7..10);
/// assert_eq!(block_range(2, 1, 4), 0..1);
/// ```
pub fn block_range(n: u64, rank: usize, size: usize) -> Range<u64> {
    assert!(
        rank < size,
        "block_range: rank {rank} of a group of {size} ranks"
    );
    // In u128: r·n overflows u64 for large n.
    let at = |r: usize| (u128::from(n) * r as u128 / size as u128) as u64;
    at(rank)..at(rank + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_tile_the_range() {
        for n in [0u64, 1, 2, 7, 100, u64::MAX] {
            for size in 1..=5 {
                let blocks: Vec<Range<u64>> = (0..size).map(|r| block_range(n, r, size)).collect();
                assert_eq!(blocks[0].start, 0);
                assert_eq!(blocks[size - 1].end, n);
                for w in blocks.windows(2) {
                    assert_eq!(w[0].end, w[1].start, "n {n}, size {size}");
                }
                let lens: Vec<u64> = blocks.iter().map(|b| b.end - b.start).collect();
                let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(hi - lo <= 1, "n {n}, size {size}: {lens:?}");
            }
        }
        assert_eq!(block_range(5, 2, 3), 3..5);
    }

    #[test]
    #[should_panic(expected = "block_range: rank 3 of a group of 3 ranks")]
    fn block_of_a_missing_rank_is_a_contract_violation() {
        block_range(5, 3, 3);
    }

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
