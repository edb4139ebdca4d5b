//! Caller-controlled parallelism: [`Par`], and the one executor behind it (local rayon pools,
//! one per size, built on first use and kept).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

/// A local thread pool could not be built (the operating system refused the threads).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not build a thread pool of {threads} threads: {message}")]
pub struct PoolError {
    /// Threads requested.
    pub threads: usize,
    /// The pool builder's message.
    pub message: String,
}

/// How much parallelism a call may use (after faer's `Par`). The library never sizes a pool
/// on its own, and never uses rayon's global pool: a library embedded in someone's
/// MPI+threads code must not grab every core.
///
/// Every partitioner of the workspace (`hsfc`, and `hier-part`'s RCB, RIB and hierarchical
/// walk) takes this one type with this one meaning, and returns bit-identical results for
/// every setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Par {
    /// Run on the calling thread.
    #[default]
    Seq,
    /// Run on a local rayon pool of this many threads (built on first use of this size and
    /// kept for later calls; rayon's global pool is never used).
    Rayon(NonZeroUsize),
}

impl Par {
    /// `Seq` for 0 or 1 threads, `Rayon(n)` otherwise.
    pub fn threads(n: usize) -> Par {
        match NonZeroUsize::new(n) {
            Some(n) if n.get() > 1 => Par::Rayon(n),
            _ => Par::Seq,
        }
    }

    /// Number of threads this setting uses.
    pub fn degree(self) -> usize {
        match self {
            Par::Seq => 1,
            Par::Rayon(n) => n.get(),
        }
    }

    /// Whether this setting runs on more than one thread.
    pub fn is_parallel(self) -> bool {
        self.degree() > 1
    }

    /// Splits the thread budget between two concurrent subtasks (a recursive bisection's two
    /// halves, sibling subtrees): `None` when they must run in turn.
    pub fn fork(self) -> Option<(Par, Par)> {
        let n = self.degree();
        if n < 2 {
            return None;
        }
        Some((Par::threads(n.div_ceil(2)), Par::threads(n / 2)))
    }

    /// Runs `f` on this setting's pool ([`Par::Seq`]: on the calling thread), so that rayon
    /// calls inside `f` (`join`, parallel iterators) use exactly the threads given here.
    /// The pool of each size is built on first use and kept (idle threads sleep).
    pub fn install<T: Send>(self, f: impl FnOnce() -> T + Send) -> Result<T, PoolError> {
        match self.pool()? {
            None => Ok(f()),
            Some(pool) => Ok(pool.install(f)),
        }
    }

    /// The local pool this setting runs on: `None` for [`Par::Seq`]. Pools
    /// are built on first use for each size and kept (idle threads sleep), so repeated calls
    /// do not pay for thread creation; rayon's global pool is never used.
    pub fn pool(self) -> Result<Option<Arc<rayon::ThreadPool>>, PoolError> {
        match self {
            Par::Seq => Ok(None),
            Par::Rayon(n) => pool_of(n.get()).map(Some),
        }
    }
}

fn pool_of(threads: usize) -> Result<Arc<rayon::ThreadPool>, PoolError> {
    static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(n, _)| *n == threads) {
        return Ok(p.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("par-{i}"))
        .build()
        .map_err(|e| PoolError {
            threads,
            message: e.to_string(),
        })?;
    let pool = Arc::new(pool);
    pools.push((threads, pool.clone()));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_splits_the_budget() {
        assert_eq!(Par::Seq.fork(), None);
        assert_eq!(Par::threads(1).fork(), None);
        assert_eq!(Par::threads(2).fork(), Some((Par::Seq, Par::Seq)));
        assert_eq!(
            Par::threads(5).fork(),
            Some((Par::threads(3), Par::threads(2)))
        );
        assert_eq!(Par::threads(0), Par::Seq);
    }

    #[test]
    fn install_runs_on_a_pool_of_that_size() {
        assert_eq!(Par::Seq.install(|| 7).unwrap(), 7);
        assert_eq!(
            Par::threads(3).install(rayon::current_num_threads).unwrap(),
            3
        );
    }
}
