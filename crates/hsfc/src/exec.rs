//! Running chunked passes on the calling thread or on a local rayon pool.

use crate::Error;
use crate::scratch::Scratch;
use crate::simd::Simd;
use part_api::Par;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Arc;

/// Where passes run: the calling thread, or a local pool of exactly the requested size (never
/// rayon's global pool, so an embedding code keeps control of its cores). Pools are built on
/// first use for each size and kept (idle threads sleep), so repeated calls do not pay for
/// thread creation.
pub(crate) struct Exec<'w> {
    pool: Option<Arc<rayon::ThreadPool>>,
    threads: usize,
    /// The vector instructions the passes take.
    pub(crate) simd: Simd,
    /// The caller's buffers for the passes' histograms and candidate lists.
    pub(crate) scratch: &'w Scratch,
}

impl std::fmt::Debug for Exec<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Exec({} threads, {})", self.threads, self.simd.name())
    }
}

impl<'w> Exec<'w> {
    pub(crate) fn new(par: Par, simd: Simd, scratch: &'w Scratch) -> Result<Exec<'w>, Error> {
        Ok(Exec {
            pool: par.pool()?,
            threads: par.degree(),
            simd,
            scratch,
        })
    }

    /// Chunk length for `n` items: one chunk when sequential, else about four per thread
    /// (so a thread slowed by another process does not hold the others up), at least `min`.
    fn chunk_len(&self, n: usize, min: usize) -> usize {
        if self.pool.is_none() {
            return n.max(1);
        }
        n.div_ceil(4 * self.threads).max(min).max(1)
    }

    /// Threads of the pool (1 when sequential).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Whether work of `n` items is worth spreading over threads.
    pub(crate) fn parallel_for(&self, n: usize) -> bool {
        self.pool.is_some() && n >= 1 << 14
    }

    /// `f` over consecutive ranges covering `0..n`; results in range order.
    pub(crate) fn map_ranges<T, F>(&self, n: usize, f: F) -> Vec<T>
    where
        T: Send,
        F: Fn(Range<usize>) -> T + Sync + Send,
    {
        let len = self.chunk_len(n, 4096);
        match &self.pool {
            Some(pool) if self.parallel_for(n) => pool.install(|| {
                (0..n.div_ceil(len))
                    .into_par_iter()
                    .map(|c| f(c * len..((c + 1) * len).min(n)))
                    .collect()
            }),
            _ => vec![f(0..n)],
        }
    }

    /// `f` over each item, in parallel on the pool (sequentially without one); results in order.
    pub(crate) fn map_items<T, R, F>(&self, items: Vec<T>, f: F) -> Vec<R>
    where
        T: Send,
        R: Send,
        F: Fn(T) -> R + Sync + Send,
    {
        match &self.pool {
            Some(pool) => pool.install(|| items.into_par_iter().map(f).collect()),
            None => items.into_iter().map(f).collect(),
        }
    }

    /// `f(range, &mut out[range])` over consecutive ranges covering `out`; results in order.
    pub(crate) fn map_chunks_mut<O, T, F>(&self, out: &mut [O], f: F) -> Vec<T>
    where
        O: Send,
        T: Send,
        F: Fn(Range<usize>, &mut [O]) -> T + Sync + Send,
    {
        let len = self.chunk_len(out.len(), 4096);
        self.map_chunks_mut_len(out, len, f)
    }

    /// [`Exec::map_chunks_mut`] with one chunk per thread: for passes whose chunks each build
    /// a large histogram, so that there are few to zero and merge.
    pub(crate) fn map_chunks_mut_few<O, T, F>(&self, out: &mut [O], f: F) -> Vec<T>
    where
        O: Send,
        T: Send,
        F: Fn(Range<usize>, &mut [O]) -> T + Sync + Send,
    {
        let len = out.len().div_ceil(self.threads).max(4096);
        self.map_chunks_mut_len(out, len, f)
    }

    /// [`Exec::map_chunks_mut`] over two outputs cut at the same places; `b` may be empty
    /// (`with_b` false), and then each chunk gets an empty slice.
    pub(crate) fn map_chunks_mut2<A, B, T, F>(
        &self,
        a: &mut [A],
        b: &mut [B],
        with_b: bool,
        f: F,
    ) -> Vec<T>
    where
        A: Send,
        B: Send,
        T: Send,
        F: Fn(Range<usize>, &mut [A], &mut [B]) -> T + Sync + Send,
    {
        let n = a.len();
        assert!(!with_b || b.len() == n, "map_chunks_mut2: lengths differ");
        let len = self.chunk_len(n, 4096);
        match &self.pool {
            Some(pool) if self.parallel_for(n) => pool.install(|| {
                let bs: Vec<&mut [B]> = if with_b {
                    b.chunks_mut(len).collect()
                } else {
                    (0..n.div_ceil(len)).map(|_| &mut [][..]).collect()
                };
                a.par_chunks_mut(len)
                    .zip(bs)
                    .enumerate()
                    .map(|(c, (ca, cb))| f(c * len..c * len + ca.len(), ca, cb))
                    .collect()
            }),
            _ => vec![f(0..n, a, b)],
        }
    }

    fn map_chunks_mut_len<O, T, F>(&self, out: &mut [O], len: usize, f: F) -> Vec<T>
    where
        O: Send,
        T: Send,
        F: Fn(Range<usize>, &mut [O]) -> T + Sync + Send,
    {
        let n = out.len();
        match &self.pool {
            Some(pool) if self.parallel_for(n) => pool.install(|| {
                out.par_chunks_mut(len)
                    .enumerate()
                    .map(|(c, chunk)| f(c * len..c * len + chunk.len(), chunk))
                    .collect()
            }),
            _ => vec![f(0..n, out)],
        }
    }
}
