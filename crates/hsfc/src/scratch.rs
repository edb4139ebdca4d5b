//! The caller-owned buffers of the refinement ([`crate::refine`]): histograms and candidate
//! lists, kept in the [`crate::Workspace`] between calls.

use std::sync::Mutex;

/// A candidate of the refinement: a local point in an active cell (one that a target reaches).
#[derive(Clone, Copy)]
pub(crate) struct Cand {
    /// Its key (of the cell, or inside a cell being refined by sub-key, its sub-key).
    pub key: u64,
    /// Its fixed-point weight.
    pub w: u64,
    /// Its local index.
    pub idx: u32,
    /// Its active cell's slot in the round.
    pub slot: u32,
}

/// Buffers kept between calls in the caller's [`crate::Workspace`] (histograms and candidate
/// lists), so that repeated partitions do not fault fresh pages in (page faults also
/// serialise threads on the address space). Shared by the chunks of a pass, hence the locks.
#[derive(Default)]
pub(crate) struct Scratch {
    u64s: Mutex<Vec<Vec<u64>>>,
    cands: Mutex<Vec<Vec<Cand>>>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let h = self.u64s.lock().map_or(0, |v| v.len());
        let c = self.cands.lock().map_or(0, |v| v.len());
        write!(f, "Scratch({h} histograms, {c} candidate lists)")
    }
}

impl Scratch {
    /// At most this many buffers of each kind are kept.
    const KEEP: usize = 64;

    /// The kept buffer that best fits `want` elements: the smallest with room for them, else
    /// the largest (so that buffers of different sizes are not grown in turn, which would
    /// fault fresh pages in on every call).
    fn take<T>(pool: &Mutex<Vec<Vec<T>>>, want: usize) -> Option<Vec<T>> {
        let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
        let fits = (0..pool.len())
            .filter(|&i| pool[i].capacity() >= want)
            .min_by_key(|&i| pool[i].capacity());
        let i = fits.or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].capacity()))?;
        Some(pool.swap_remove(i))
    }

    /// A zeroed buffer of `len` words.
    pub(crate) fn zeroed(&self, len: usize) -> Vec<u64> {
        match Self::take(&self.u64s, len) {
            Some(mut v) => {
                v.clear();
                v.resize(len, 0);
                v
            }
            None => vec![0; len],
        }
    }

    pub(crate) fn give_u64(&self, v: Vec<u64>) {
        let mut pool = self.u64s.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < Self::KEEP {
            pool.push(v);
        }
    }

    /// An empty candidate list with room for `cap`.
    pub(crate) fn cands(&self, cap: usize) -> Vec<Cand> {
        let mut v = Self::take(&self.cands, cap).unwrap_or_default();
        v.clear();
        v.reserve(cap);
        v
    }

    pub(crate) fn give_cands(&self, v: Vec<Cand>) {
        let mut pool = self.cands.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < Self::KEEP {
            pool.push(v);
        }
    }
}
