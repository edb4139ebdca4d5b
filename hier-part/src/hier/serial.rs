//! The serial walk: every level's objects are gathered from the caller's arrays and handed to
//! the level's partitioner; parts are written straight into the caller's buffer.

use super::level::Level;
use super::{Child, HierPartition, LevelCuts, Moved, Plan, Workspace};
use crate::input::check_points;
use crate::{Error, Par};
use drum_model::NodeId;
use hsfc::Points;
use hsfc::dist::Serial;
use std::collections::BTreeMap;
use std::time::Instant;

/// Where a level's objects are: the caller's arrays (the root), or one of the walk's two
/// permuted copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Caller,
    Buf(usize),
}

/// The serial walk. Each level's objects are a contiguous range `lo..hi` of its source; after
/// the level's partitioner has given every object its child, a stable counting sort writes the
/// range into the other buffer grouped by child, so each child's objects are again a
/// contiguous range, in index order (the order the partitioners break ties by).
struct Walk<'a> {
    plan: &'a Plan,
    par: Par,
    dim: usize,
    coords: &'a [f64],
    weights: Option<&'a [f64]>,
    /// Previous partition and the parts on entry (repartition).
    prev: Option<(&'a HierPartition, &'a [u32])>,
    /// Permuted copies: coordinates, weights (empty for unit weights), original indices.
    bx: [Vec<f64>; 2],
    bw: [Vec<f64>; 2],
    bi: [Vec<u32>; 2],
    /// Each object's child at the current level (indexed like the buffers).
    child: Vec<u32>,
    /// The HSFC levels' buffers.
    hsfc: hsfc::Workspace,
    /// Whether buffer 0 and 1 have been sized for this call.
    sized: [bool; 2],
    cuts: BTreeMap<NodeId, LevelCuts>,
    times: Vec<(NodeId, f64)>,
    /// Per rank: weight (summed in index order) and count.
    rank_w: Vec<f64>,
    rank_n: Vec<u64>,
}

impl Walk<'_> {
    fn coords_of(&self, src: Src) -> &[f64] {
        match src {
            Src::Caller => self.coords,
            Src::Buf(b) => &self.bx[b],
        }
    }

    fn weights_of(&self, src: Src) -> Option<&[f64]> {
        match (src, self.weights) {
            (_, None) => None,
            (Src::Caller, w) => w,
            (Src::Buf(b), Some(_)) => Some(&self.bw[b]),
        }
    }

    /// Original index of position `j` of `src`.
    #[inline(always)]
    fn index(&self, src: Src, j: usize) -> usize {
        match src {
            Src::Caller => j,
            Src::Buf(b) => self.bi[b][j] as usize,
        }
    }

    /// Assigns the objects `lo..hi` of `src` (the subtree of `id`) to ranks.
    fn walk(
        &mut self,
        id: NodeId,
        src: Src,
        lo: usize,
        hi: usize,
        parts: &mut [u32],
    ) -> Result<(), Error> {
        let node = self.plan.node(id);
        let Some(method) = node.method.as_ref() else {
            self.leaf(node.ranks[0], src, lo, hi, parts);
            return Ok(());
        };
        if node.children.len() == 1 {
            return self.descend(id, 0, src, lo, hi, parts);
        }
        let dim = self.dim;
        let mut child = std::mem::take(&mut self.child);
        if let Some((p, entry)) = self.prev.filter(|_| method.keep_cuts)
            && p.cuts.contains_key(&id)
        {
            let lookup = rank_to_child(self.plan, id);
            for j in lo..hi {
                let prev = entry[self.index(src, j)] as usize;
                child[j] = lookup.get(prev).copied().unwrap_or(u32::MAX);
            }
        }
        let level = Level {
            method,
            par: self.par,
            targets: &node.targets,
            prev: self
                .prev
                .filter(|_| method.keep_cuts)
                .and_then(|(p, _)| p.cuts.get(&id)),
        };
        let mut hsfc_ws = std::mem::take(&mut self.hsfc);
        let points = Points::new(
            &self.coords_of(src)[lo * dim..hi * dim],
            dim,
            self.weights_of(src).map(|w| &w[lo..hi]),
        );
        let t0 = Instant::now();
        let level = level
            .run(&mut hsfc_ws, &Serial, points, None, &mut child[lo..hi])
            .map_err(|e| e.at_level(&node.label, method.kind));
        self.hsfc = hsfc_ws;
        self.child = child;
        let level = level?;
        self.times.push((id, t0.elapsed().as_secs_f64()));
        if method.keep_cuts {
            self.cuts.insert(id, level);
        }
        let ends = self.group_by_child(src, lo, hi, node.children.len());
        let dst = match src {
            Src::Buf(b) => Src::Buf(1 - b),
            Src::Caller => Src::Buf(0),
        };
        let mut start = lo;
        for (c, &end) in ends.iter().enumerate() {
            self.descend(id, c, dst, start, end, parts)?;
            start = end;
        }
        Ok(())
    }

    /// Stable counting sort of `lo..hi` of `src` by `self.child` into the other buffer;
    /// returns the end of each child's range.
    fn group_by_child(&mut self, src: Src, lo: usize, hi: usize, k: usize) -> Vec<usize> {
        let mut next = vec![0usize; k];
        for &c in &self.child[lo..hi] {
            next[c as usize] += 1;
        }
        let mut at = lo;
        for n in next.iter_mut() {
            let c = *n;
            *n = at;
            at += c;
        }
        let d = match src {
            Src::Buf(b) => 1 - b,
            Src::Caller => 0,
        };
        let dim = self.dim;
        if !self.sized[d] {
            let n_all = self.coords.len() / dim;
            fit(&mut self.bx[d], n_all * dim);
            fit(&mut self.bi[d], n_all);
            fit(
                &mut self.bw[d],
                if self.weights.is_some() { n_all } else { 0 },
            );
            self.sized[d] = true;
        }
        let (mut bx, mut bw, mut bi) = (
            std::mem::take(&mut self.bx[d]),
            std::mem::take(&mut self.bw[d]),
            std::mem::take(&mut self.bi[d]),
        );
        {
            let from = Objects {
                xs: self.coords_of(src),
                ws: self.weights_of(src),
                idx: match src {
                    Src::Caller => None,
                    Src::Buf(b) => Some(&self.bi[b][..]),
                },
            };
            let to = Copies {
                bx: &mut bx,
                bw: &mut bw,
                bi: &mut bi,
            };
            let child = &self.child[lo..hi];
            match dim {
                1 => scatter::<1>(&from, child, lo, &mut next, to),
                2 => scatter::<2>(&from, child, lo, &mut next, to),
                _ => scatter::<3>(&from, child, lo, &mut next, to),
            }
        }
        self.bx[d] = bx;
        self.bw[d] = bw;
        self.bi[d] = bi;
        next
    }

    /// Objects `lo..hi` of `src` go to rank `r`.
    fn leaf(&mut self, r: usize, src: Src, lo: usize, hi: usize, parts: &mut [u32]) {
        let mut w = 0.0;
        for j in lo..hi {
            let i = self.index(src, j);
            parts[i] = r as u32;
            w += self.weights.map_or(1.0, |ws| ws[i]);
        }
        self.rank_w[r] += w;
        self.rank_n[r] += (hi - lo) as u64;
    }

    fn descend(
        &mut self,
        id: NodeId,
        c: usize,
        src: Src,
        lo: usize,
        hi: usize,
        parts: &mut [u32],
    ) -> Result<(), Error> {
        match self.plan.node(id).children[c] {
            Child::Rank(r) => {
                self.leaf(r, src, lo, hi, parts);
                Ok(())
            }
            Child::Node(next) => self.walk(next, src, lo, hi, parts),
        }
    }
}

/// Gives `v` length `len`, reusing its memory (the contents are overwritten before use).
fn fit<T: Copy + Default>(v: &mut Vec<T>, len: usize) {
    if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, T::default());
    }
}

/// The walk's buffers, kept between calls in the caller's [`super::Workspace`].
#[derive(Debug, Default)]
pub(super) struct Bufs {
    bx: [Vec<f64>; 2],
    bw: [Vec<f64>; 2],
    bi: [Vec<u32>; 2],
    child: Vec<u32>,
}

/// A level's objects where they are: coordinates, weights (`None`: unit), and their original
/// indices (`None`: the caller's arrays, where the position is the index).
#[derive(Clone, Copy)]
struct Objects<'a> {
    xs: &'a [f64],
    ws: Option<&'a [f64]>,
    idx: Option<&'a [u32]>,
}

/// The other buffer's copies the counting sort writes: coordinates, weights, original indices.
struct Copies<'a> {
    bx: &'a mut [f64],
    bw: &'a mut [f64],
    bi: &'a mut [u32],
}

/// The counting sort's write pass: object `lo + j` goes to slot `next[child[j]]++` of the
/// destination (coordinates, weight, original index).
fn scatter<const D: usize>(
    from: &Objects<'_>,
    child: &[u32],
    lo: usize,
    next: &mut [usize],
    to: Copies<'_>,
) {
    let Objects { xs, ws, idx } = *from;
    let Copies { bx, bw, bi } = to;
    for (j, &c) in (lo..).zip(child) {
        let t = next[c as usize];
        next[c as usize] += 1;
        let x: &[f64; D] = xs[j * D..j * D + D].try_into().expect("D coordinates");
        bx[t * D..t * D + D].copy_from_slice(x);
        if let Some(ws) = ws {
            bw[t] = ws[j];
        }
        bi[t] = idx.map_or(j as u32, |idx| idx[j]);
    }
}

/// For node `id`: the child index of every rank of its subtree (`u32::MAX` for other ranks).
pub(super) fn rank_to_child(plan: &Plan, id: NodeId) -> Vec<u32> {
    let mut out = vec![u32::MAX; plan.num_ranks()];
    for c in 0..plan.node(id).children.len() {
        for &r in plan.child_ranks(id, c) {
            out[r] = c as u32;
        }
    }
    out
}

/// The serial hierarchical partition (see [`super::Hier::partition`]): `prev` is the previous
/// partition and the parts on entry for a repartition. Runs on `par`'s pool.
pub(super) fn partition(
    par: Par,
    ws: &mut Workspace,
    plan: &Plan,
    points: Points<'_>,
    parts: &mut [u32],
    previous: Option<&HierPartition>,
) -> Result<HierPartition, Error> {
    let (coords, dim, weights) = points.into_parts();
    let n = check_points(coords, dim, weights, parts.len(), par)?;
    let Some(previous) = previous else {
        return par.install(|| run(par, ws, plan, points, parts, None))?;
    };
    let ranks = plan.num_ranks();
    if let Some(i) = parts.iter().position(|&p| p as usize >= ranks) {
        return Err(Error::PartOutOfRange {
            index: i,
            part: parts[i],
            k: ranks,
        });
    }
    let entry = parts.to_vec();
    let mut r = par.install(|| run(par, ws, plan, points, parts, Some((previous, &entry))))??;
    // Per rank in object order, then over the ranks in rank order (as the distributed
    // run sums it).
    let mut per_rank = vec![(0.0f64, 0u64); ranks];
    for i in 0..n {
        if parts[i] != entry[i] {
            let m = &mut per_rank[parts[i] as usize];
            m.0 += weights.map_or(1.0, |w| w[i]);
            m.1 += 1;
        }
    }
    let (weight, count) = per_rank
        .iter()
        .fold((0.0, 0), |(w, c), m| (w + m.0, c + m.1));
    r.moved = Some(Moved { count, weight });
    Ok(r)
}

fn run(
    par: Par,
    ws: &mut Workspace,
    plan: &Plan,
    points: Points<'_>,
    parts: &mut [u32],
    prev: Option<(&HierPartition, &[u32])>,
) -> Result<HierPartition, Error> {
    let (coords, dim, weights) = points.into_parts();
    let n = coords.len() / dim;
    let ranks = plan.num_ranks();
    let mut bufs = std::mem::take(&mut ws.walk);
    fit(&mut bufs.child, n);
    let mut walk = Walk {
        plan,
        par,
        dim,
        coords,
        weights,
        prev,
        bx: bufs.bx,
        bw: bufs.bw,
        bi: bufs.bi,
        child: bufs.child,
        hsfc: std::mem::take(&mut ws.hsfc),
        sized: [false; 2],
        cuts: BTreeMap::new(),
        times: Vec::new(),
        rank_w: vec![0.0; ranks],
        rank_n: vec![0; ranks],
    };
    let walked = walk.walk(plan.root(), Src::Caller, 0, n, parts);
    ws.hsfc = std::mem::take(&mut walk.hsfc);
    let kept = Bufs {
        bx: std::mem::take(&mut walk.bx),
        bw: std::mem::take(&mut walk.bw),
        bi: std::mem::take(&mut walk.bi),
        child: std::mem::take(&mut walk.child),
    };
    let result = walked.map(|()| {
        HierPartition::from_ranks(plan, dim, walk.rank_w, walk.rank_n, walk.cuts, walk.times)
    });
    ws.walk = kept;
    result
}
