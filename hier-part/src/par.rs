//! Caller-controlled parallelism.

use std::num::NonZeroUsize;

/// How much parallelism a call may use (after faer's `Par`).
///
/// A library embedded in someone's MPI+threads code must not grab every core on its own, so
/// the caller decides. [`Par::Rayon`] runs on the rayon thread pool the call is made from: wrap
/// the call in [`rayon::ThreadPool::install`] to choose the pool, and give the number of
/// concurrent tasks the call may create. Every partitioner in this crate returns bit-identical
/// results for [`Par::Seq`] and for `Par::Rayon(n)` with any `n` on any pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Par {
    /// Run on the calling thread only.
    #[default]
    Seq,
    /// Run on the current rayon pool with at most this many concurrent tasks in the
    /// recursion (data-parallel loops inside a task may use the whole pool).
    Rayon(NonZeroUsize),
}

impl Par {
    /// `Par::Rayon(n)`, or the current pool's thread count when `n` is 0.
    pub fn rayon(n: usize) -> Par {
        let n = if n == 0 {
            rayon::current_num_threads()
        } else {
            n
        };
        Par::Rayon(NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN))
    }

    /// The number of concurrent tasks this allows (1 for [`Par::Seq`]).
    pub fn degree(self) -> usize {
        match self {
            Par::Seq => 1,
            Par::Rayon(n) => n.get(),
        }
    }

    /// Whether data-parallel loops may run on the pool.
    pub(crate) fn is_parallel(self) -> bool {
        self.degree() > 1
    }

    /// Splits the task budget between two subtasks (`None` when they must run in turn).
    pub(crate) fn fork(self) -> Option<(Par, Par)> {
        let n = self.degree();
        if n < 2 {
            return None;
        }
        Some((Par::rayon_exact(n.div_ceil(2)), Par::rayon_exact(n / 2)))
    }

    fn rayon_exact(n: usize) -> Par {
        if n <= 1 {
            Par::Seq
        } else {
            Par::Rayon(NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_splits_the_budget() {
        assert_eq!(Par::Seq.fork(), None);
        assert_eq!(Par::rayon(1).fork(), None);
        assert_eq!(Par::rayon(2).fork(), Some((Par::Seq, Par::Seq)));
        assert_eq!(Par::rayon(5).fork(), Some((Par::rayon(3), Par::rayon(2))));
        assert!(Par::rayon(0).degree() >= 1);
    }
}
