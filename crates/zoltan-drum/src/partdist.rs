//! Which process holds which part: Zoltan's rules for `NUM_GLOBAL_PARTS` and
//! `NUM_LOCAL_PARTS` (user's guide, load-balancing parameters; `Zoltan_LB_Build_PartDist`).
//!
//! - Neither set, or `NUM_GLOBAL_PARTS` equal to the process count: part p is process p.
//! - `NUM_GLOBAL_PARTS` = P > N processes: process i gets ⌊P/N⌋ consecutive parts, the last
//!   `P mod N` processes one more.
//! - P < N: part p spreads over consecutive processes, ⌊N/P⌋ or one more each (the boundary
//!   of part p moves up one when P − (p + 1) ≤ N mod P, as Zoltan computes it); an object of a
//!   spread part stays on its process if that process holds the part, else goes to one of the
//!   part's processes chosen by a hash of its global id.
//! - `NUM_LOCAL_PARTS` set on some processes: those get that many parts, the parts left over
//!   (P − their sum, P = `NUM_GLOBAL_PARTS` or that sum) are spread over the others as above.

use crate::error::Error;
use comm::{Comm, ReduceOp};

/// The distribution of parts over processes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PartDist {
    /// Number of parts.
    pub k: usize,
    /// `first[p]..first[p + 1]` are the processes of part p when parts spread, or
    /// `first[p]` is the process of part p (non-decreasing in p); `first[k]` = N.
    first: Vec<usize>,
    /// Every part on one process.
    single: bool,
    /// Parts are processes (Zoltan's `PartDist == NULL`).
    pub identity: bool,
}

impl PartDist {
    /// Builds the distribution from each process's `NUM_GLOBAL_PARTS` and `NUM_LOCAL_PARTS`
    /// (collective: one allreduce, plus one allgather when `NUM_LOCAL_PARTS` is set
    /// somewhere).
    pub(crate) fn build<C: Comm>(
        comm: &C,
        global: Option<usize>,
        local: Option<usize>,
    ) -> Result<PartDist, Error> {
        let n = comm.size();
        let mut sums = [
            u64::from(global.is_some()),
            u64::from(local.is_some()),
            local.unwrap_or(0) as u64,
        ];
        comm.allreduce_u64(ReduceOp::Sum, &mut sums)?;
        let mut max_global = [global.unwrap_or(0) as u64];
        comm.allreduce_u64(ReduceOp::Max, &mut max_global)?;
        let (global_set, local_set, sum_local) = (sums[0] > 0, sums[1], sums[2] as usize);
        let max_global = max_global[0] as usize;
        if local_set == 0 {
            if !global_set || max_global == n {
                return Ok(PartDist::identity(n));
            }
            return Ok(if max_global > n {
                Self::blocks(max_global, n)
            } else {
                Self::spread(max_global, n)
            });
        }
        let k = if global_set { max_global } else { sum_local };
        if sum_local > k {
            return Err(Error::BadInput(format!(
                "the sum of NUM_LOCAL_PARTS ({sum_local}) exceeds NUM_GLOBAL_PARTS ({k})"
            )));
        }
        if sum_local < k && local_set as usize == n {
            return Err(Error::BadInput(format!(
                "the sum of NUM_LOCAL_PARTS ({sum_local}) is less than NUM_GLOBAL_PARTS ({k})"
            )));
        }
        if k == 0 {
            return Err(Error::BadInput("zero parts requested".into()));
        }
        let mut all = vec![0u64; n];
        let mine = local.map_or(u64::MAX, |x| x as u64);
        comm.allgather(&[mine], &mut all)?;
        let others = n - local_set as usize;
        let (frac, rest) = match others {
            0 => (0, 0),
            o => ((k - sum_local) / o, (k - sum_local) % o),
        };
        let mut proc_of_part = Vec::with_capacity(k + 1);
        let mut seen_others = 0;
        for (i, &l) in all.iter().enumerate() {
            let count = if l == u64::MAX {
                seen_others += 1;
                frac + usize::from(others - (seen_others - 1) <= rest)
            } else {
                l as usize
            };
            proc_of_part.extend(std::iter::repeat_n(i, count));
        }
        proc_of_part.push(n);
        Ok(PartDist {
            k,
            first: proc_of_part,
            single: true,
            identity: false,
        })
    }

    fn identity(n: usize) -> PartDist {
        PartDist {
            k: n,
            first: (0..=n).collect(),
            single: true,
            identity: true,
        }
    }

    /// k > n parts: process i gets ⌊k/n⌋ parts, the last `k mod n` processes one more.
    fn blocks(k: usize, n: usize) -> PartDist {
        let (frac, rest) = (k / n, k % n);
        let mut first = Vec::with_capacity(k + 1);
        for i in 0..n {
            first.extend(std::iter::repeat_n(i, frac + usize::from(n - i <= rest)));
        }
        first.push(n);
        PartDist {
            k,
            first,
            single: true,
            identity: false,
        }
    }

    /// k < n parts: part p spans ⌊n/k⌋ processes or one more (Zoltan's boundaries).
    fn spread(k: usize, n: usize) -> PartDist {
        let (frac, rest) = (n / k, n % k);
        let mut first = vec![0; k + 1];
        for p in 1..k {
            first[p] = first[p - 1] + frac + usize::from(k - p <= rest);
        }
        first[k] = n;
        PartDist {
            k,
            first,
            single: false,
            identity: false,
        }
    }

    /// The processes of part `p` (one unless parts spread).
    pub(crate) fn procs_of(&self, p: usize) -> std::ops::Range<usize> {
        if self.single {
            self.first[p]..self.first[p] + 1
        } else {
            self.first[p]..self.first[p + 1].max(self.first[p] + 1)
        }
    }

    /// The process an object of part `p` goes to: the part's process; for a spread part,
    /// `me` if it holds the part, else one chosen by `gid`'s hash (`None`: the first).
    pub(crate) fn proc_of(&self, p: usize, gid: Option<&[u32]>, me: usize) -> usize {
        let r = self.procs_of(p);
        if r.len() <= 1 || (gid.is_some() && r.contains(&me)) {
            return if r.len() > 1 { me } else { r.start };
        }
        match gid {
            Some(g) => r.start + (fnv(g) % r.len() as u64) as usize,
            None => r.start,
        }
    }

    /// The parts process `proc` holds (Zoltan's `Proc_To_Part`): empty if none; a process
    /// inside a spread part holds that part.
    pub(crate) fn parts_of(&self, proc: usize) -> std::ops::Range<usize> {
        let lo = (0..self.k).find(|&p| self.procs_of(p).contains(&proc));
        match lo {
            None => 0..0,
            Some(lo) => {
                let hi = (lo..self.k)
                    .take_while(|&p| self.procs_of(p).contains(&proc))
                    .count();
                lo..lo + hi
            }
        }
    }
}

/// 64-bit FNV-1a of a global id's words.
fn fnv(words: &[u32]) -> u64 {
    words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::{ThreadComm, ThreadOptions};

    fn build(n: usize, global: Vec<Option<usize>>, local: Vec<Option<usize>>) -> PartDist {
        let out = ThreadComm::run(n, &ThreadOptions::default(), |c| {
            PartDist::build(&c, global[c.rank()], local[c.rank()])
        })
        .unwrap();
        let first = out[0].as_ref().unwrap().clone();
        assert!(out.iter().all(|d| d.as_ref().unwrap() == &first));
        first
    }

    #[test]
    fn zoltan_rules() {
        // Nothing set: identity.
        let d = build(3, vec![None; 3], vec![None; 3]);
        assert!(d.identity);
        assert_eq!(d.proc_of(2, None, 0), 2);
        // 7 parts on 3 processes: 2, 2, 3 (the last one more).
        let d = build(3, vec![Some(7); 3], vec![None; 3]);
        let owners: Vec<usize> = (0..7).map(|p| d.proc_of(p, None, 0)).collect();
        assert_eq!(owners, [0, 0, 1, 1, 2, 2, 2]);
        assert_eq!(d.parts_of(1), 2..4);
        // 2 parts on 5 processes: 3 and 2 processes (Zoltan's boundaries).
        let d = build(5, vec![Some(2); 5], vec![None; 5]);
        assert_eq!(d.procs_of(0), 0..3);
        assert_eq!(d.procs_of(1), 3..5);
        assert_eq!(
            d.proc_of(1, Some(&[9]), 3),
            3,
            "stays on a process of its part"
        );
        assert!(d.procs_of(1).contains(&d.proc_of(1, Some(&[9]), 0)));
        assert_eq!(d.parts_of(4), 1..2);
        // NUM_LOCAL_PARTS on process 0 only: 3 there, the other 3 of 6 spread.
        let d = build(3, vec![Some(6); 3], vec![Some(3), None, None]);
        let owners: Vec<usize> = (0..6).map(|p| d.proc_of(p, None, 0)).collect();
        assert_eq!(owners, [0, 0, 0, 1, 2, 2]);
    }

    #[test]
    fn inconsistent_local_parts_are_an_error_on_every_rank() {
        let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
            PartDist::build(&c, Some(3), Some(2))
        })
        .unwrap();
        for r in out {
            let e = r.unwrap_err();
            assert!(e.to_string().contains("exceeds NUM_GLOBAL_PARTS"), "{e}");
        }
    }
}
