//! Communicators: ranks as threads of one process (default) or MPI processes (feature `mpi`).
//!
//! `comm` is the only crate that names MPI (see `ARCHITECTURE.md`). Everything above it
//! (`hier-part`, `fem-laplace`, the `hsfc` distributed entry point through
//! [`part_api::Reduce`]) is written once against the [`Comm`] trait and runs on either
//! backend:
//!
//! - [`ThreadComm`]: `N` ranks as threads of one process, optionally pinned to CPU sets. The
//!   default; needs nothing installed. A rank that panics (or returns while the others still
//!   call collectives) makes every other rank's pending or next collective fail with an error
//!   naming it; nothing hangs.
//! - `MpiComm` (feature `mpi`): MPI processes through the `mpi` crate (Open MPI or MPICH).
//!
//! ```
//! use comm::{Comm, ReduceOp, ThreadComm, ThreadOptions};
//!
//! let sums = ThreadComm::run(3, &ThreadOptions::default(), |comm| {
//!     let mut x = [comm.rank() as f64, 1.0];
//!     comm.allreduce_f64(ReduceOp::Sum, &mut x)?;
//!     Ok::<_, comm::CommError>(x)
//! })
//! .unwrap();
//! assert!(sums.iter().all(|s| *s.as_ref().unwrap() == [3.0, 3.0]));
//! ```
//!
//! Guarantees every backend gives (checked by [`conformance`], which both backends run):
//! every rank of a collective receives bit-identical results; the same inputs on the same
//! number of ranks and the same backend give bit-identical results run after run;
//! [`ThreadComm`] folds reductions in rank order (`((x₀ ∘ x₁) ∘ x₂) ∘ …`). Integer sums and
//! min/max are exact, so they agree across backends and rank counts; floating-point sums may
//! differ in the last bits between backends (MPI chooses its own reduction tree).
//!
//! Error policy: a local contract violation (an `alltoallv` count vector of the wrong length,
//! a root out of range, a colour above `i32::MAX`) panics with a message, which the backends
//! turn into a failure of that rank for the others. Disagreements between ranks (buffers of
//! different lengths in an allreduce, different collectives called at the same time) are
//! detected collectively and return the same [`CommError`] on every rank, which keeps the
//! communicator usable.
#![deny(missing_docs)]

mod affinity;
pub mod conformance;
mod error;
pub mod link;
#[cfg(feature = "mpi")]
mod mpi_backend;
mod scalar;
mod serial;
mod thread;
pub mod wire;

pub use error::CommError;
pub use link::{LinkFitError, LinkModel, LinkProbe, LinkTimings, measure_link};
#[cfg(feature = "mpi")]
pub use mpi_backend::{MpiComm, RawComm, mpi_is_initialized};
pub use scalar::Scalar;
pub use thread::{DEFAULT_SPIN, LONG_SPIN, ThreadComm, ThreadOptions};

/// Pins the calling thread to `cpus` (Linux `sched_setaffinity`), as [`ThreadOptions::cpus`]
/// does for thread ranks: for one process per rank (MPI), each rank pins itself. `rank` only
/// names the rank in errors. Errors: an empty list, a CPU this process may not use, the
/// system call failing, or a platform other than Linux.
pub fn pin_current_thread(rank: usize, cpus: &[usize]) -> Result<(), CommError> {
    affinity::validate(&[cpus.to_vec()]).map_err(|e| match e {
        CommError::InvalidCpu { cpu, allowed, .. } => CommError::InvalidCpu { rank, cpu, allowed },
        CommError::Options(m) => CommError::Options(m.replace("rank 0", &format!("rank {rank}"))),
        other => other,
    })?;
    #[cfg(target_os = "linux")]
    {
        affinity::pin_current_thread(rank, cpus)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(CommError::Options(
            "pinning ranks to CPUs is only supported on Linux".into(),
        ))
    }
}

use std::sync::OnceLock;
use std::time::Instant;

/// An element-wise reduction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (wrapping for integers).
    Sum,
    /// Minimum. For `f64` a NaN contribution gives an unspecified result (validate first).
    Min,
    /// Maximum. For `f64` a NaN contribution gives an unspecified result (validate first).
    Max,
}

/// A group of ranks that call collectives together.
///
/// Every rank of the group must call the same collectives in the same order. Methods return
/// [`CommError`] when a peer has failed or the ranks disagree (see the crate documentation);
/// all ranks then get the same error for that call.
pub trait Comm {
    /// This rank's index in the group, `0..size()`.
    fn rank(&self) -> usize;

    /// Number of ranks in the group.
    fn size(&self) -> usize;

    /// Waits until every rank of the group has entered the barrier.
    fn barrier(&self) -> Result<(), CommError>;

    /// Element-wise reduction of `buf` over all ranks, in place; every rank must pass the same
    /// length.
    fn allreduce_f64(&self, op: ReduceOp, buf: &mut [f64]) -> Result<(), CommError>;

    /// Element-wise reduction of `buf` over all ranks, in place (exact; sums wrap); every rank
    /// must pass the same length.
    fn allreduce_u64(&self, op: ReduceOp, buf: &mut [u64]) -> Result<(), CommError>;

    /// Gathers `send` (the same length on every rank) from all ranks into `recv`, rank `r`'s
    /// bytes at `recv[r·send.len()..(r+1)·send.len()]`.
    ///
    /// # Panics
    /// If `recv.len() != size() · send.len()` (a local contract violation).
    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CommError>;

    /// Gathers `send` (any length per rank) from all ranks; every rank gets every piece.
    fn allgatherv_bytes(&self, send: &[u8]) -> Result<PerRank<u8>, CommError>;

    /// Gathers `send` (any length per rank) on `root` only: `Some` there, `None` elsewhere.
    /// Every rank must name the same root.
    ///
    /// # Panics
    /// If `root >= size()`.
    fn gatherv_bytes(&self, root: usize, send: &[u8]) -> Result<Option<PerRank<u8>>, CommError>;

    /// Replaces `buf` on every rank with `root`'s `buf` (other ranks' contents and lengths are
    /// ignored). Every rank must name the same root.
    ///
    /// # Panics
    /// If `root >= size()`.
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> Result<(), CommError>;

    /// Personalised all-to-all exchange: this rank sends `send[off_d..off_d + send_counts[d]]`
    /// to rank `d` (pieces laid out in rank order) and receives one piece from every rank.
    ///
    /// # Panics
    /// If `send_counts.len() != size()` or the counts do not add up to `send.len()`.
    fn alltoallv_bytes(&self, send: &[u8], send_counts: &[usize])
    -> Result<PerRank<u8>, CommError>;

    /// Starts a personalised exchange whose receive counts are known on both sides (a halo,
    /// set up once and repeated): this rank sends `send[off_d..off_d + send_counts[d]]` to rank
    /// `d` and expects `recv_counts[s]` bytes from rank `s`. The call returns as soon as this
    /// rank's pieces are handed over; the caller may compute on anything but the pieces'
    /// destination and finishes with [`exchange_finish`](Comm::exchange_finish), which
    /// returns what every rank sent here. No other call into this communicator may come in
    /// between (one exchange in flight per rank). Every rank must start and finish the same
    /// exchanges in the same order, like any collective; with known counts it needs no round
    /// to learn them (compare [`alltoallv_bytes`](Comm::alltoallv_bytes)).
    ///
    /// Counts that do not pair up (rank `s` sends `n` bytes to `d` but `d` expects `m ≠ n`):
    /// the thread backend returns [`CommError::LengthMismatch`] on every rank; the default
    /// (this method over `alltoallv_bytes`, for backends without a split phase) and MPI treat
    /// it as a contract violation and panic on the receiving rank.
    ///
    /// # Panics
    /// If `send_counts.len()` or `recv_counts.len()` is not `size()` or the send counts do not
    /// add up to `send.len()`.
    fn exchange_start(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<Exchange, CommError> {
        check_recv_counts(self.size(), recv_counts);
        let got = self.alltoallv_bytes(send, send_counts)?;
        check_received(&got.counts(), recv_counts);
        Ok(Exchange {
            state: ExchangeState::Done(got),
        })
    }

    /// Waits for the exchange `x` started on this communicator and returns the pieces every
    /// rank sent here, in rank order (see [`exchange_start`](Comm::exchange_start)).
    ///
    /// # Panics
    /// If `x` was started on a communicator of another backend.
    fn exchange_finish(&self, x: Exchange) -> Result<PerRank<u8>, CommError> {
        match x.state {
            ExchangeState::Done(got) => Ok(got),
            _ => panic!("exchange_finish: the exchange was started on another backend"),
        }
    }

    /// Splits the group: ranks passing the same `colour` form a new communicator of the same
    /// backend, ordered by `key` and then by their rank here (MPI `MPI_Comm_split` semantics).
    ///
    /// # Panics
    /// If `colour > i32::MAX as u32` (MPI's limit; `MPI_UNDEFINED` is not supported: every
    /// rank gets a communicator).
    fn split(&self, colour: u32, key: i32) -> Result<Self, CommError>
    where
        Self: Sized;

    /// Splits the group into the ranks that share a node (a host with shared memory),
    /// ordered by their rank here.
    fn split_node(&self) -> Result<Self, CommError>
    where
        Self: Sized;

    /// The name of the node this rank runs on (`MPI_Get_processor_name`; for threads the
    /// host label given in [`ThreadOptions::hosts`] or the host name).
    fn processor_name(&self) -> String;

    /// Wall-clock time in seconds since an arbitrary fixed point (`MPI_Wtime` for MPI).
    /// Only differences are meaningful, and only on one rank.
    fn wtime(&self) -> f64 {
        wall_time()
    }

    /// Typed [`allgather_bytes`](Comm::allgather_bytes): `recv.len()` must be
    /// `size() · send.len()`.
    fn allgather<T: Scalar>(&self, send: &[T], recv: &mut [T]) -> Result<(), CommError> {
        check_allgather_len(self.size(), send.len(), recv.len());
        let mut bytes = vec![0u8; recv.len() * T::SIZE];
        self.allgather_bytes(&T::to_bytes(send), &mut bytes)?;
        T::copy_from_bytes(&bytes, recv);
        Ok(())
    }

    /// Typed [`allgatherv_bytes`](Comm::allgatherv_bytes).
    fn allgatherv<T: Scalar>(&self, send: &[T]) -> Result<PerRank<T>, CommError> {
        Ok(PerRank::from_bytes(
            self.allgatherv_bytes(&T::to_bytes(send))?,
        ))
    }

    /// Typed [`gatherv_bytes`](Comm::gatherv_bytes).
    fn gatherv<T: Scalar>(&self, root: usize, send: &[T]) -> Result<Option<PerRank<T>>, CommError> {
        Ok(self
            .gatherv_bytes(root, &T::to_bytes(send))?
            .map(PerRank::from_bytes))
    }

    /// Typed [`broadcast_bytes`](Comm::broadcast_bytes).
    fn broadcast<T: Scalar>(&self, root: usize, buf: &mut Vec<T>) -> Result<(), CommError> {
        let mut bytes = if self.rank() == root {
            T::to_bytes(buf)
        } else {
            Vec::new()
        };
        self.broadcast_bytes(root, &mut bytes)?;
        if self.rank() != root {
            *buf = T::vec_from_bytes(&bytes);
        }
        Ok(())
    }

    /// Typed [`alltoallv_bytes`](Comm::alltoallv_bytes); counts are in elements.
    fn alltoallv<T: Scalar>(
        &self,
        send: &[T],
        send_counts: &[usize],
    ) -> Result<PerRank<T>, CommError> {
        let byte_counts: Vec<usize> = send_counts.iter().map(|&c| c * T::SIZE).collect();
        Ok(PerRank::from_bytes(
            self.alltoallv_bytes(&T::to_bytes(send), &byte_counts)?,
        ))
    }
}

/// A personalised exchange in flight ([`Comm::exchange_start`]); hand it to
/// [`Comm::exchange_finish`] on the communicator that started it. Dropping it unfinished
/// waits for the exchange's data to leave (MPI) but leaves the round open: the next call into
/// the communicator is then a contract violation.
#[must_use = "an exchange in flight is finished with Comm::exchange_finish"]
#[derive(Debug)]
pub struct Exchange {
    state: ExchangeState,
}

#[derive(Debug)]
enum ExchangeState {
    /// Completed at the start (a backend without a split phase).
    Done(PerRank<u8>),
    /// A thread-backend round this rank has joined.
    Thread(thread::InFlight),
    /// An `MPI_Ialltoallv` in flight.
    #[cfg(feature = "mpi")]
    Mpi(Box<mpi_backend::InFlight>),
}

/// Checks the local contract of [`Comm::exchange_start`]'s receive counts.
pub(crate) fn check_recv_counts(size: usize, recv_counts: &[usize]) {
    assert_eq!(
        recv_counts.len(),
        size,
        "exchange: {} receive counts for a communicator of {size} ranks",
        recv_counts.len()
    );
}

/// Checks that every rank sent here what `expected` says.
pub(crate) fn check_received(got: &[usize], expected: &[usize]) {
    for (s, (&g, &e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(
            g, e,
            "exchange: rank {s} sent {g} bytes where {e} were expected (the ranks' counts do not pair up)"
        );
    }
}

/// One piece of data per rank, stored contiguously in rank order (the receive side of the
/// `v` collectives).
#[derive(Debug, Clone, PartialEq)]
pub struct PerRank<T> {
    data: Vec<T>,
    offsets: Vec<usize>,
}

impl<T> PerRank<T> {
    /// Builds from concatenated `data` and one count per rank.
    ///
    /// # Panics
    /// If the counts do not add up to `data.len()`.
    pub fn from_counts(data: Vec<T>, counts: &[usize]) -> Self {
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        let mut at = 0usize;
        offsets.push(0);
        for &c in counts {
            at += c;
            offsets.push(at);
        }
        assert_eq!(
            at,
            data.len(),
            "PerRank: counts add up to {at}, data holds {}",
            data.len()
        );
        PerRank { data, offsets }
    }

    /// Number of ranks (pieces).
    pub fn ranks(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The piece from (or for) rank `r`.
    ///
    /// # Panics
    /// If `r >= ranks()`.
    pub fn get(&self, r: usize) -> &[T] {
        &self.data[self.offsets[r]..self.offsets[r + 1]]
    }

    /// Length of each piece, in rank order.
    pub fn counts(&self) -> Vec<usize> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// All pieces concatenated in rank order.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The concatenated data, consuming `self`.
    pub fn into_data(self) -> Vec<T> {
        self.data
    }

    /// The pieces in rank order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[T]> + '_ {
        (0..self.ranks()).map(move |r| self.get(r))
    }
}

impl<T: Scalar> PerRank<T> {
    fn from_bytes(bytes: PerRank<u8>) -> Self {
        let counts: Vec<usize> = bytes.counts().iter().map(|c| c / T::SIZE).collect();
        PerRank::from_counts(T::vec_from_bytes(&bytes.data), &counts)
    }
}

/// Seconds since the first call in this process (monotonic).
pub fn wall_time() -> f64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Which collective a rank called; used to detect ranks that call different collectives at
/// the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Op {
    Barrier = 1,
    AllreduceF64Sum,
    AllreduceF64Min,
    AllreduceF64Max,
    AllreduceU64Sum,
    AllreduceU64Min,
    AllreduceU64Max,
    Allgather,
    Allgatherv,
    Gatherv,
    Broadcast,
    Alltoallv,
    Split,
    SplitNode,
    Exchange,
}

// The MPI backend decodes collective codes; the thread backend compares `Op`s directly.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl Op {
    pub(crate) const ALL: [Op; 15] = [
        Op::Barrier,
        Op::AllreduceF64Sum,
        Op::AllreduceF64Min,
        Op::AllreduceF64Max,
        Op::AllreduceU64Sum,
        Op::AllreduceU64Min,
        Op::AllreduceU64Max,
        Op::Allgather,
        Op::Allgatherv,
        Op::Gatherv,
        Op::Broadcast,
        Op::Alltoallv,
        Op::Split,
        Op::SplitNode,
        Op::Exchange,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Barrier => "barrier",
            Op::AllreduceF64Sum => "allreduce_f64(Sum)",
            Op::AllreduceF64Min => "allreduce_f64(Min)",
            Op::AllreduceF64Max => "allreduce_f64(Max)",
            Op::AllreduceU64Sum => "allreduce_u64(Sum)",
            Op::AllreduceU64Min => "allreduce_u64(Min)",
            Op::AllreduceU64Max => "allreduce_u64(Max)",
            Op::Allgather => "allgather",
            Op::Allgatherv => "allgatherv",
            Op::Gatherv => "gatherv",
            Op::Broadcast => "broadcast",
            Op::Alltoallv => "alltoallv",
            Op::Split => "split",
            Op::SplitNode => "split_node",
            Op::Exchange => "exchange",
        }
    }

    pub(crate) fn from_code(code: u64) -> Option<Op> {
        Op::ALL.into_iter().find(|op| *op as u64 == code)
    }

    pub(crate) fn reduce_f64(op: ReduceOp) -> Op {
        match op {
            ReduceOp::Sum => Op::AllreduceF64Sum,
            ReduceOp::Min => Op::AllreduceF64Min,
            ReduceOp::Max => Op::AllreduceF64Max,
        }
    }

    /// The reduction a reduction collective performs.
    pub(crate) fn reduce_op(self) -> Option<ReduceOp> {
        match self {
            Op::AllreduceF64Sum | Op::AllreduceU64Sum => Some(ReduceOp::Sum),
            Op::AllreduceF64Min | Op::AllreduceU64Min => Some(ReduceOp::Min),
            Op::AllreduceF64Max | Op::AllreduceU64Max => Some(ReduceOp::Max),
            _ => None,
        }
    }

    pub(crate) fn reduce_u64(op: ReduceOp) -> Op {
        match op {
            ReduceOp::Sum => Op::AllreduceU64Sum,
            ReduceOp::Min => Op::AllreduceU64Min,
            ReduceOp::Max => Op::AllreduceU64Max,
        }
    }
}

/// Folds `x` into `acc` element-wise (`acc ∘ x`), the rank-order reduction step.
pub(crate) fn fold_f64(op: ReduceOp, acc: &mut [f64], x: &[f64]) {
    match op {
        ReduceOp::Sum => acc.iter_mut().zip(x).for_each(|(a, b)| *a += b),
        ReduceOp::Min => acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.min(*b)),
        ReduceOp::Max => acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.max(*b)),
    }
}

/// Folds `x` into `acc` element-wise (`acc ∘ x`); sums wrap.
pub(crate) fn fold_u64(op: ReduceOp, acc: &mut [u64], x: &[u64]) {
    match op {
        ReduceOp::Sum => acc
            .iter_mut()
            .zip(x)
            .for_each(|(a, b)| *a = a.wrapping_add(*b)),
        ReduceOp::Min => acc.iter_mut().zip(x).for_each(|(a, b)| *a = (*a).min(*b)),
        ReduceOp::Max => acc.iter_mut().zip(x).for_each(|(a, b)| *a = (*a).max(*b)),
    }
}

/// Checks the local `allgather` contract: `recv` holds one `send` per rank.
pub(crate) fn check_allgather_len(size: usize, send: usize, recv: usize) {
    assert_eq!(
        recv,
        size * send,
        "allgather: recv holds {recv} elements, expected size {size} × send {send}"
    );
}

/// Checks the local `alltoallv` contract; returns the send offsets (length `size + 1`).
pub(crate) fn send_offsets(size: usize, send_len: usize, send_counts: &[usize]) -> Vec<usize> {
    assert_eq!(
        send_counts.len(),
        size,
        "alltoallv: {} send counts for a communicator of {size} ranks",
        send_counts.len()
    );
    let mut offsets = Vec::with_capacity(size + 1);
    let mut at = 0usize;
    offsets.push(0);
    for &c in send_counts {
        at = at
            .checked_add(c)
            .expect("alltoallv: send counts overflow usize");
        offsets.push(at);
    }
    assert_eq!(
        at, send_len,
        "alltoallv: send counts add up to {at} but the send buffer holds {send_len}"
    );
    offsets
}

/// Implements `part_api::Reduce` by forwarding to [`Comm`]: the one forwarding of the
/// workspace. `impl_reduce!(Type)` for a communicator type; with generics and the
/// communicator reached from `self` by an expression:
/// `impl_reduce!([C: comm::Comm] Wrapper<C>, |s| &s.inner)`.
#[macro_export]
macro_rules! impl_reduce {
    ([$($g:tt)*] $ty:ty, |$s:ident| $comm:expr) => {
        impl<$($g)*> $crate::__part_api::Reduce for $ty {
            type Error = $crate::CommError;
            fn rank(&self) -> usize {
                let $s = self;
                $crate::Comm::rank($comm)
            }
            fn size(&self) -> usize {
                let $s = self;
                $crate::Comm::size($comm)
            }
            fn sum_f64(&self, buf: &mut [f64]) -> Result<(), Self::Error> {
                let $s = self;
                $crate::Comm::allreduce_f64($comm, $crate::ReduceOp::Sum, buf)
            }
            fn min_f64(&self, buf: &mut [f64]) -> Result<(), Self::Error> {
                let $s = self;
                $crate::Comm::allreduce_f64($comm, $crate::ReduceOp::Min, buf)
            }
            fn max_f64(&self, buf: &mut [f64]) -> Result<(), Self::Error> {
                let $s = self;
                $crate::Comm::allreduce_f64($comm, $crate::ReduceOp::Max, buf)
            }
            fn sum_u64(&self, buf: &mut [u64]) -> Result<(), Self::Error> {
                let $s = self;
                $crate::Comm::allreduce_u64($comm, $crate::ReduceOp::Sum, buf)
            }
        }
    };
    ($ty:ty) => {
        $crate::impl_reduce!([] $ty, |s| s);
    };
}

#[doc(hidden)]
pub use part_api as __part_api;

/// Any [`Comm`] as a `part_api::Reduce`, for generic code bound by `Comm` alone (such as
/// `part_api::agree` called from a distributed algorithm written against `Comm`).
#[derive(Debug, Clone, Copy)]
pub struct AsReduce<'a, C>(pub &'a C);

impl_reduce!(['a, C: Comm] AsReduce<'a, C>, |s| s.0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_rank_pieces() {
        let p = PerRank::from_counts(vec![1, 2, 3, 4], &[1, 0, 3]);
        assert_eq!(p.ranks(), 3);
        assert_eq!(p.get(0), &[1]);
        assert!(p.get(1).is_empty());
        assert_eq!(p.get(2), &[2, 3, 4]);
        assert_eq!(p.counts(), vec![1, 0, 3]);
        assert_eq!(
            p.iter().map(<[i32]>::len).collect::<Vec<_>>(),
            vec![1, 0, 3]
        );
    }

    #[test]
    #[should_panic(expected = "counts add up to 3, data holds 4")]
    fn per_rank_rejects_bad_counts() {
        PerRank::from_counts(vec![1, 2, 3, 4], &[1, 2]);
    }

    #[test]
    fn op_codes_round_trip() {
        for op in Op::ALL {
            assert_eq!(Op::from_code(op as u64), Some(op));
        }
        assert_eq!(Op::from_code(0), None);
    }

    #[test]
    #[should_panic(expected = "send counts add up to 3 but the send buffer holds 4")]
    fn send_offsets_checks_total() {
        send_offsets(2, 4, &[1, 2]);
    }
}
