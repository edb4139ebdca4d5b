//! Caller-controlled parallelism: [`Par`].

use crate::Error;
use std::num::NonZeroUsize;

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
    pub fn install<T: Send>(self, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
        match crate::exec::pool(self)? {
            None => Ok(f()),
            Some(pool) => Ok(pool.install(f)),
        }
    }
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
