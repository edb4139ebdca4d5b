//! A communicator that measures the time a rank spends in collectives and the bytes it sends.

use comm::{Comm, CommError, PerRank, ReduceOp};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Running totals of one rank (shared by the communicators split from it).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    nanos: AtomicU64,
    bytes: AtomicU64,
}

impl Stats {
    /// Seconds spent in collectives and bytes sent so far.
    pub(crate) fn read(&self) -> (f64, u64) {
        (
            self.nanos.load(Ordering::Relaxed) as f64 * 1e-9,
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// `C` with every collective timed: the seconds a rank spends in collectives and the bytes it
/// sends, shared by the communicators split from it.
#[derive(Debug, Clone)]
pub struct Timed<C> {
    inner: C,
    stats: Arc<Stats>,
}

impl<C: Comm> Timed<C> {
    /// Wraps `inner`.
    pub fn new(inner: C) -> Self {
        Timed {
            inner,
            stats: Arc::new(Stats::default()),
        }
    }

    /// The wrapped communicator.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    #[inline]
    fn time<T>(&self, bytes: usize, f: impl FnOnce(&C) -> T) -> T {
        let t0 = Instant::now();
        let r = f(&self.inner);
        self.stats
            .nanos
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        r
    }

    fn others(&self) -> usize {
        self.inner.size().saturating_sub(1)
    }
}

impl<C: Comm> Comm for Timed<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn barrier(&self) -> Result<(), CommError> {
        self.time(0, |c| c.barrier())
    }
    fn allreduce_f64(&self, op: ReduceOp, buf: &mut [f64]) -> Result<(), CommError> {
        self.time(8 * buf.len() * self.others().min(1), |c| {
            c.allreduce_f64(op, buf)
        })
    }
    fn allreduce_u64(&self, op: ReduceOp, buf: &mut [u64]) -> Result<(), CommError> {
        self.time(8 * buf.len() * self.others().min(1), |c| {
            c.allreduce_u64(op, buf)
        })
    }
    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CommError> {
        self.time(send.len() * self.others(), |c| {
            c.allgather_bytes(send, recv)
        })
    }
    fn allgatherv_bytes(&self, send: &[u8]) -> Result<PerRank<u8>, CommError> {
        self.time(send.len() * self.others(), |c| c.allgatherv_bytes(send))
    }
    fn gatherv_bytes(&self, root: usize, send: &[u8]) -> Result<Option<PerRank<u8>>, CommError> {
        let b = if self.rank() == root { 0 } else { send.len() };
        self.time(b, |c| c.gatherv_bytes(root, send))
    }
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> Result<(), CommError> {
        let b = if self.rank() == root {
            buf.len() * self.others()
        } else {
            0
        };
        self.time(b, |c| c.broadcast_bytes(root, buf))
    }
    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
    ) -> Result<PerRank<u8>, CommError> {
        let own = send_counts.get(self.rank()).copied().unwrap_or(0);
        self.time(send.len() - own, |c| c.alltoallv_bytes(send, send_counts))
    }
    fn split(&self, colour: u32, key: i32) -> Result<Self, CommError> {
        let inner = self.time(0, |c| c.split(colour, key))?;
        Ok(Timed {
            inner,
            stats: Arc::clone(&self.stats),
        })
    }
    fn split_node(&self) -> Result<Self, CommError> {
        let inner = self.time(0, |c| c.split_node())?;
        Ok(Timed {
            inner,
            stats: Arc::clone(&self.stats),
        })
    }
    fn processor_name(&self) -> String {
        self.inner.processor_name()
    }
    fn wtime(&self) -> f64 {
        self.inner.wtime()
    }
}

impl<C: Comm> part_api::Reduce for Timed<C> {
    type Error = CommError;
    fn rank(&self) -> usize {
        Comm::rank(self)
    }
    fn size(&self) -> usize {
        Comm::size(self)
    }
    fn sum_f64(&self, buf: &mut [f64]) -> Result<(), CommError> {
        self.allreduce_f64(ReduceOp::Sum, buf)
    }
    fn min_f64(&self, buf: &mut [f64]) -> Result<(), CommError> {
        self.allreduce_f64(ReduceOp::Min, buf)
    }
    fn max_f64(&self, buf: &mut [f64]) -> Result<(), CommError> {
        self.allreduce_f64(ReduceOp::Max, buf)
    }
    fn sum_u64(&self, buf: &mut [u64]) -> Result<(), CommError> {
        self.allreduce_u64(ReduceOp::Sum, buf)
    }
}
