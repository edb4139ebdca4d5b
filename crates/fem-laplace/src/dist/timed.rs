//! A communicator that measures what each rank spends in its calls: the time, the calls
//! themselves (what costs latency), the messages and the bytes sent, per phase of the step.

use comm::{Comm, CommError, Exchange, PerRank, ReduceOp};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

/// The phases of a step, as the reports split its time and its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Marking.
    Mark,
    /// Refinement.
    Refine,
    /// The rebalance point: measurement, decision, partitioner.
    Partition,
    /// Migration and the ghost layer.
    Migrate,
    /// Halo and skeleton set-up.
    Setup,
    /// Assembly and the preconditioner's set-up.
    Assemble,
    /// Conjugate gradients.
    Solve,
    /// The estimator.
    Estimate,
    /// Errors against the exact solution.
    Error,
    /// The step's figures and hash to rank 0, the global counts.
    Report,
}

impl Phase {
    /// Every phase, in step order.
    pub const ALL: [Phase; 10] = [
        Phase::Mark,
        Phase::Refine,
        Phase::Partition,
        Phase::Migrate,
        Phase::Setup,
        Phase::Assemble,
        Phase::Solve,
        Phase::Estimate,
        Phase::Error,
        Phase::Report,
    ];

    /// The phase's name in the reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Mark => "mark",
            Phase::Refine => "refine",
            Phase::Partition => "partition",
            Phase::Migrate => "migrate",
            Phase::Setup => "setup",
            Phase::Assemble => "assemble",
            Phase::Solve => "solve",
            Phase::Estimate => "estimate",
            Phase::Error => "error",
            Phase::Report => "report",
        }
    }
}

/// What a rank's calls into the communicator cost: calls (every collective, exchange and
/// agreement round alike: each may wait for the slowest rank), messages (ranks a call sends
/// to), bytes sent, and the microseconds spent inside the calls (waiting for the other ranks,
/// mostly).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Traffic {
    /// Calls into the communicator.
    pub collectives: u64,
    /// Messages sent (one per other rank a call sends to).
    pub messages: u64,
    /// Bytes sent to other ranks.
    pub bytes: u64,
    /// Microseconds inside the calls.
    pub wait_us: u64,
}

impl Traffic {
    /// Field by field `self − earlier`.
    pub fn since(self, earlier: Traffic) -> Traffic {
        Traffic {
            collectives: self.collectives - earlier.collectives,
            messages: self.messages - earlier.messages,
            bytes: self.bytes - earlier.bytes,
            wait_us: self.wait_us - earlier.wait_us,
        }
    }

    /// Field by field sum.
    pub fn plus(self, other: Traffic) -> Traffic {
        Traffic {
            collectives: self.collectives + other.collectives,
            messages: self.messages + other.messages,
            bytes: self.bytes + other.bytes,
            wait_us: self.wait_us + other.wait_us,
        }
    }
}

/// Running totals of one rank (shared by the communicators split from it).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    nanos: AtomicU64,
    phase: AtomicU8,
    /// Per phase: calls, messages, bytes, nanoseconds in the calls.
    per: [[AtomicU64; 4]; Phase::ALL.len()],
}

impl Stats {
    /// Seconds spent in collectives so far.
    pub(crate) fn seconds(&self) -> f64 {
        self.nanos.load(Ordering::Relaxed) as f64 * 1e-9
    }

    /// Every phase's traffic so far, in [`Phase::ALL`] order.
    pub(crate) fn traffic(&self) -> [Traffic; Phase::ALL.len()] {
        std::array::from_fn(|p| {
            let [c, m, b, ns] = &self.per[p];
            Traffic {
                collectives: c.load(Ordering::Relaxed),
                messages: m.load(Ordering::Relaxed),
                bytes: b.load(Ordering::Relaxed),
                wait_us: ns.load(Ordering::Relaxed) / 1000,
            }
        })
    }
}

/// `C` with every call measured: the seconds a rank spends in collectives, and per phase of
/// the step ([`Timed::enter`]) its calls, messages and bytes sent; shared by the
/// communicators split from it.
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

    /// Counts the calls from now on in phase `p`.
    pub fn enter(&self, p: Phase) {
        self.stats.phase.store(p as u8, Ordering::Relaxed);
    }

    #[inline]
    fn time<T>(&self, bytes: usize, messages: usize, f: impl FnOnce(&C) -> T) -> T {
        self.time_calls(1, bytes, messages, f)
    }

    /// [`Timed::time`] counting `calls` calls (0 for the second half of a split-phase call).
    #[inline]
    fn time_calls<T>(
        &self,
        calls: u64,
        bytes: usize,
        messages: usize,
        f: impl FnOnce(&C) -> T,
    ) -> T {
        let t0 = Instant::now();
        let r = f(&self.inner);
        let nanos = t0.elapsed().as_nanos() as u64;
        self.stats.nanos.fetch_add(nanos, Ordering::Relaxed);
        let p = self.stats.phase.load(Ordering::Relaxed) as usize;
        let [c, m, b, ns] = &self.stats.per[p];
        ns.fetch_add(nanos, Ordering::Relaxed);
        c.fetch_add(calls, Ordering::Relaxed);
        m.fetch_add(messages as u64, Ordering::Relaxed);
        b.fetch_add(bytes as u64, Ordering::Relaxed);
        r
    }

    /// Bytes and messages to other ranks of a personalised exchange.
    fn sent(&self, send: &[u8], send_counts: &[usize]) -> (usize, usize) {
        let own = send_counts.get(self.rank()).copied().unwrap_or(0);
        let to = send_counts
            .iter()
            .enumerate()
            .filter(|&(r, &n)| r != self.rank() && n > 0)
            .count();
        (send.len() - own, to)
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
        self.time(0, self.others(), |c| c.barrier())
    }
    fn allreduce_f64(&self, op: ReduceOp, buf: &mut [f64]) -> Result<(), CommError> {
        self.time(8 * buf.len() * self.others().min(1), self.others(), |c| {
            c.allreduce_f64(op, buf)
        })
    }
    fn allreduce_u64(&self, op: ReduceOp, buf: &mut [u64]) -> Result<(), CommError> {
        self.time(8 * buf.len() * self.others().min(1), self.others(), |c| {
            c.allreduce_u64(op, buf)
        })
    }
    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CommError> {
        self.time(send.len() * self.others(), self.others(), |c| {
            c.allgather_bytes(send, recv)
        })
    }
    fn allgatherv_bytes(&self, send: &[u8]) -> Result<PerRank<u8>, CommError> {
        self.time(send.len() * self.others(), self.others(), |c| {
            c.allgatherv_bytes(send)
        })
    }
    fn gatherv_bytes(&self, root: usize, send: &[u8]) -> Result<Option<PerRank<u8>>, CommError> {
        let (b, m) = if self.rank() == root {
            (0, 0)
        } else {
            (send.len(), 1)
        };
        self.time(b, m, |c| c.gatherv_bytes(root, send))
    }
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> Result<(), CommError> {
        let (b, m) = if self.rank() == root {
            (buf.len() * self.others(), self.others())
        } else {
            (0, 0)
        };
        self.time(b, m, |c| c.broadcast_bytes(root, buf))
    }
    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
    ) -> Result<PerRank<u8>, CommError> {
        let (bytes, to) = self.sent(send, send_counts);
        self.time(bytes, to, |c| c.alltoallv_bytes(send, send_counts))
    }
    /// One call, with its messages and bytes; its time is the start's plus the finish's.
    fn exchange_start(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<Exchange, CommError> {
        let (bytes, to) = self.sent(send, send_counts);
        self.time(bytes, to, |c| {
            c.exchange_start(send, send_counts, recv_counts)
        })
    }
    fn exchange_finish(&self, x: Exchange) -> Result<PerRank<u8>, CommError> {
        self.time_calls(0, 0, 0, |c| c.exchange_finish(x))
    }
    fn split(&self, colour: u32, key: i32) -> Result<Self, CommError> {
        let inner = self.time(0, self.others(), |c| c.split(colour, key))?;
        Ok(Timed {
            inner,
            stats: Arc::clone(&self.stats),
        })
    }
    fn split_node(&self) -> Result<Self, CommError> {
        let inner = self.time(0, self.others(), |c| c.split_node())?;
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

comm::impl_reduce!([C: Comm] Timed<C>, |s| s);
