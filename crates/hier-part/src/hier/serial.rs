//! The serial walk: every level's objects are gathered from the caller's arrays and handed to
//! the level's partitioner; parts are written straight into the caller's buffer. Sibling
//! subtrees run concurrently when the thread budget allows ([`Par::fork`]).

use super::level::{Level, LevelWorkspace};
use super::{Child, HierPartition, LevelCuts, Moved, Plan, Workspace};
use crate::input::check_points;
use crate::{Error, Par};
use drum_model::{NodeId, PartitionMethod};
use part_api::Points;
use part_api::Serial;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// The caller's parts buffer, written by the walk's tasks at the original indices of their
/// objects: each object is written exactly once, by the one task whose subtree it ends in, so
/// concurrent sibling subtrees never write the same entry.
struct PartsOut<'a>(&'a [AtomicU32]);

// `AtomicU32` is documented to have the size of `u32`; its alignment must match too.
const _: () = assert!(align_of::<AtomicU32>() == align_of::<u32>());

impl<'a> PartsOut<'a> {
    fn new(parts: &'a mut [u32]) -> PartsOut<'a> {
        // SAFETY: `AtomicU32` has the same size and (checked above) alignment as `u32`, so the
        // slice has the same layout; the exclusive borrow of `parts` is held for `'a`, so all
        // access goes through this view (as `AtomicU32::from_mut_slice` does).
        PartsOut(unsafe { &*(std::ptr::from_mut(parts) as *const [AtomicU32]) })
    }

    #[inline(always)]
    fn set(&self, i: usize, rank: u32) {
        self.0[i].store(rank, Ordering::Relaxed);
    }
}

/// What the walk's tasks share: the plan, the caller's points, the previous partition and the
/// parts on entry (repartition), the output, and the levels' workspaces (one per task that
/// runs at a time, kept for the next call).
struct Ctx<'a> {
    plan: &'a Plan,
    dim: usize,
    coords: &'a [f64],
    weights: Option<&'a [f64]>,
    prev: Option<(&'a HierPartition, &'a [u32])>,
    parts: PartsOut<'a>,
    hsfc: Mutex<Vec<LevelWorkspace>>,
}

/// What a task found, merged after the walk: per rank, weight (summed in index order) and
/// count; the kept cuts; the levels' times.
struct Acc {
    rank_w: Vec<f64>,
    rank_n: Vec<u64>,
    cuts: BTreeMap<NodeId, LevelCuts>,
    times: Vec<(NodeId, f64)>,
}

impl Acc {
    fn new(ranks: usize) -> Acc {
        Acc {
            rank_w: vec![0.0; ranks],
            rank_n: vec![0; ranks],
            cuts: BTreeMap::new(),
            times: Vec::new(),
        }
    }

    /// Adds a sibling task's findings (its ranks are not this task's, so every sum is one of
    /// a value and 0, exact).
    fn merge(&mut self, o: Acc) {
        for (a, b) in self.rank_w.iter_mut().zip(o.rank_w) {
            *a += b;
        }
        for (a, b) in self.rank_n.iter_mut().zip(o.rank_n) {
            *a += b;
        }
        self.cuts.extend(o.cuts);
        self.times.extend(o.times);
    }
}

/// One of the walk's two permuted copies of the objects, over one task's range: coordinates,
/// weights (empty for unit weights), original indices.
struct Copy<'b> {
    x: &'b mut [f64],
    w: &'b mut [f64],
    i: &'b mut [u32],
}

impl<'b> Copy<'b> {
    /// The first `n` objects and the rest.
    fn split_at(self, n: usize, dim: usize) -> (Copy<'b>, Copy<'b>) {
        let (xa, xb) = self.x.split_at_mut(n * dim);
        let (wa, wb) = self.w.split_at_mut(n.min(self.w.len()));
        let (ia, ib) = self.i.split_at_mut(n);
        (
            Copy {
                x: xa,
                w: wa,
                i: ia,
            },
            Copy {
                x: xb,
                w: wb,
                i: ib,
            },
        )
    }
}

/// A task's range of the walk's buffers: both copies and the children the level writes.
struct Range<'b> {
    bufs: [Copy<'b>; 2],
    child: &'b mut [u32],
}

impl<'b> Range<'b> {
    fn split_at(self, n: usize, dim: usize) -> (Range<'b>, Range<'b>) {
        let [b0, b1] = self.bufs;
        let (a0, c0) = b0.split_at(n, dim);
        let (a1, c1) = b1.split_at(n, dim);
        let (ca, cc) = self.child.split_at_mut(n);
        (
            Range {
                bufs: [a0, a1],
                child: ca,
            },
            Range {
                bufs: [c0, c1],
                child: cc,
            },
        )
    }

    /// Consecutive sub-ranges of lengths `lens` from the start.
    fn split(self, lens: &[usize], dim: usize) -> Vec<Range<'b>> {
        let mut out = Vec::with_capacity(lens.len());
        let mut rest = self;
        for &n in lens {
            let (a, b) = rest.split_at(n, dim);
            out.push(a);
            rest = b;
        }
        out
    }
}

/// Where [`Ctx::distribute`] sends the objects: each child's rank (`u32::MAX` for a node
/// child), the next slot of each node child in the other copy, and that copy.
struct Out<'o, 'b> {
    rank_of: &'o [u32],
    next: &'o mut [usize],
    to: &'o mut Copy<'b>,
}

/// Where a level's objects are: the caller's arrays (the root), or one of the two copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Caller,
    Buf(usize),
}

/// A level's objects where they are: coordinates, weights (`None`: unit), and their original
/// indices (`None`: the caller's arrays, where the position is the index).
#[derive(Clone, Copy)]
struct Objects<'a> {
    xs: &'a [f64],
    ws: Option<&'a [f64]>,
    idx: Option<&'a [u32]>,
}

impl Objects<'_> {
    /// Original index of object `j`.
    #[inline(always)]
    fn index(&self, j: usize) -> usize {
        self.idx.map_or(j, |idx| idx[j] as usize)
    }

    /// Weight of object `j` (1 for unit weights).
    #[inline(always)]
    fn weight(&self, j: usize) -> f64 {
        self.ws.map_or(1.0, |w| w[j])
    }
}

impl Ctx<'_> {
    /// The objects of a task's `src` (of `n` objects; the caller's arrays are the root's).
    fn objects<'a>(&'a self, src: Src, bufs: &'a [Copy<'_>; 2], n: usize) -> Objects<'a> {
        match src {
            Src::Caller => Objects {
                xs: self.coords,
                ws: self.weights,
                idx: None,
            },
            Src::Buf(b) => Objects {
                xs: &bufs[b].x[..n * self.dim],
                ws: self.weights.map(|_| &bufs[b].w[..n]),
                idx: Some(&bufs[b].i[..n]),
            },
        }
    }

    /// The objects of `src` (the task's range `r`) go to rank `rank`.
    fn leaf(&self, acc: &mut Acc, rank: usize, src: Src, r: &Range<'_>) {
        let objs = self.objects(src, &r.bufs, r.child.len());
        let mut w = 0.0;
        for j in 0..r.child.len() {
            self.parts.set(objs.index(j), rank as u32);
            w += objs.weight(j);
        }
        // Unit weights: a sum of ones, the count.
        acc.rank_w[rank] += w;
        acc.rank_n[rank] += r.child.len() as u64;
    }

    /// Assigns the objects of the task's range `r` (read from `src`; the subtree of `id`) to
    /// ranks.
    fn walk(
        &self,
        acc: &mut Acc,
        par: Par,
        id: NodeId,
        src: Src,
        mut r: Range<'_>,
    ) -> Result<(), Error> {
        let node = self.plan.node(id);
        let Some(method) = node.method.as_ref() else {
            self.leaf(acc, node.ranks[0], src, &r);
            return Ok(());
        };
        if node.children.len() == 1 {
            return self.descend(acc, par, node.children[0], src, r);
        }
        let n = r.child.len();
        let (dim, kids) = (self.dim, node.children.len());
        let diffusion = method.kind == PartitionMethod::Diffusion;
        let from_previous = self
            .prev
            .is_some_and(|(p, _)| diffusion || (method.keep_cuts && p.cuts.contains_key(&id)));
        if let Some((_, entry)) = self.prev.filter(|_| from_previous) {
            let lookup = rank_to_child(self.plan, id);
            let objs = self.objects(src, &r.bufs, n);
            for (j, c) in r.child.iter_mut().enumerate() {
                *c = lookup
                    .get(entry[objs.index(j)] as usize)
                    .copied()
                    .unwrap_or(u32::MAX);
            }
        }
        let level = Level {
            method,
            par,
            targets: &node.targets,
            prev: self
                .prev
                .filter(|_| method.keep_cuts)
                .and_then(|(p, _)| p.cuts.get(&id)),
            from_previous,
        };
        let kind = LevelWorkspace::kind_of(method.kind);
        let mut lw = self.take_hsfc(kind, n);
        let t0 = Instant::now();
        let run = {
            let objs = self.objects(src, &r.bufs, n);
            let points = Points::new(objs.xs, dim, objs.ws);
            let ws = (&mut lw.hsfc, Some(&mut lw.bisect));
            level
                .run(ws, &Serial, points, None, &mut *r.child)
                .map_err(|e| e.at_level(&node.label, method.kind))
        };
        self.give_hsfc(lw, kind, n);
        let cuts = run?;
        acc.times.push((id, t0.elapsed().as_secs_f64()));
        let keep = method.keep_cuts.then_some(());
        // The objects of rank children get their part; those of node children are grouped by
        // child into the other copy, in index order (a stable counting sort, whose counts the
        // level's result gives).
        let mut next: Vec<usize> = match &cuts {
            LevelCuts::Hsfc(p) => p.part_counts().iter().map(|&c| c as usize).collect(),
            LevelCuts::Bisection(b) => b.part_counts.clone(),
            LevelCuts::Diffusion(d) => d.part_counts.clone(),
        };
        debug_assert_eq!(next.len(), kids);
        debug_assert_eq!(next.iter().sum::<usize>(), n);
        // Every rank child's objects are counted here (and, for unit weights, weighed).
        for (c, kid) in node.children.iter().enumerate() {
            if let Some(rank) = self.rank_of(kid) {
                acc.rank_n[rank] += next[c] as u64;
                if self.weights.is_none() {
                    acc.rank_w[rank] += next[c] as f64;
                }
            }
        }
        let mut lens = Vec::new();
        let mut at = 0;
        for (c, kid) in node.children.iter().enumerate() {
            let count = next[c];
            next[c] = match self.rank_of(kid) {
                Some(_) => usize::MAX,
                None => {
                    lens.push(count);
                    at += count;
                    at - count
                }
            };
        }
        let dst = match src {
            Src::Buf(b) => 1 - b,
            Src::Caller => 0,
        };
        self.distribute(
            acc,
            par,
            (src, dst),
            node.children.as_slice(),
            &mut next,
            &mut r,
        );
        if keep.is_some() {
            acc.cuts.insert(id, cuts);
        }
        // Then the node children's subtrees, from their ranges of the other copy.
        let nodes: Vec<NodeId> = node
            .children
            .iter()
            .filter_map(|c| match c {
                Child::Node(id) if self.rank_of(c).is_none() => Some(*id),
                _ => None,
            })
            .collect();
        let (ranges, _) = r.split_at(at, dim);
        let ranges = ranges.split(&lens, dim);
        self.subtrees(acc, par, &nodes, &lens, ranges, Src::Buf(dst))
    }

    /// One pass over the level's objects: those of a rank child get their part (their weight
    /// summed in index order), those of a node child are copied to `next[child]++` of the
    /// other copy.
    fn distribute(
        &self,
        acc: &mut Acc,
        par: Par,
        (src, dst): (Src, usize),
        children: &[Child],
        next: &mut [usize],
        r: &mut Range<'_>,
    ) {
        let n = r.child.len();
        let dim = self.dim;
        let [b0, b1] = &mut r.bufs;
        let (from, to): (&Copy<'_>, &mut Copy<'_>) = if dst == 0 { (b1, b0) } else { (b0, b1) };
        let objs = match src {
            Src::Caller => Objects {
                xs: self.coords,
                ws: self.weights,
                idx: None,
            },
            Src::Buf(_) => Objects {
                xs: &from.x[..n * dim],
                ws: self.weights.map(|_| &from.w[..n]),
                idx: Some(&from.i[..n]),
            },
        };
        let rank_of: Vec<u32> = children
            .iter()
            .map(|c| self.rank_of(c).map_or(u32::MAX, |r| r as u32))
            .collect();
        let out = Out {
            rank_of: &rank_of,
            next,
            to,
        };
        if par.is_parallel() && n >= DISTRIBUTE_PAR_MIN {
            let blocks = par.degree();
            return match dim {
                1 => self.distribute_blocks::<1>(acc, &objs, r.child, out, blocks),
                2 => self.distribute_blocks::<2>(acc, &objs, r.child, out, blocks),
                _ => self.distribute_blocks::<3>(acc, &objs, r.child, out, blocks),
            };
        }
        match dim {
            1 => self.distribute_d::<1>(acc, &objs, r.child, out),
            2 => self.distribute_d::<2>(acc, &objs, r.child, out),
            _ => self.distribute_d::<3>(acc, &objs, r.child, out),
        }
    }

    /// [`Ctx::distribute_d`] in `blocks` runs of consecutive objects side by side: each block
    /// counts its objects per child, then writes them where the stable counting sort puts
    /// them (every node child's range holds the blocks' pieces in block order, so every object
    /// lands where the sequential pass puts it); the weights of the rank children are then
    /// summed in index order, as there.
    fn distribute_blocks<const D: usize>(
        &self,
        acc: &mut Acc,
        objs: &Objects<'_>,
        child: &[u32],
        out: Out<'_, '_>,
        blocks: usize,
    ) {
        let Out { rank_of, to, .. } = out;
        let (n, kids) = (child.len(), rank_of.len());
        let bounds = |b: usize| b * n / blocks..(b + 1) * n / blocks;
        let counts: Vec<Vec<usize>> = (0..blocks)
            .into_par_iter()
            .map(|b| {
                let mut c = vec![0usize; kids];
                for &k in &child[bounds(b)] {
                    c[k as usize] += 1;
                }
                c
            })
            .collect();
        // The node children's ranges follow one another from the start of `to`, in child
        // order; each is cut into one piece per block. Rank children get empty pieces.
        let empty = || Copy {
            x: &mut [],
            w: &mut [],
            i: &mut [],
        };
        let mut pieces: Vec<Vec<Copy<'_>>> = (0..blocks)
            .map(|_| (0..kids).map(|_| empty()).collect())
            .collect();
        let mut rest = Copy {
            x: &mut *to.x,
            w: &mut *to.w,
            i: &mut *to.i,
        };
        for c in (0..kids).filter(|&c| rank_of[c] == u32::MAX) {
            for (b, p) in pieces.iter_mut().enumerate() {
                let (piece, tail) = rest.split_at(counts[b][c], D);
                p[c] = piece;
                rest = tail;
            }
        }
        pieces.into_par_iter().enumerate().for_each(|(b, mut p)| {
            let mut at = vec![0usize; kids];
            for j in bounds(b) {
                let c = child[j] as usize;
                let i = objs.index(j);
                match rank_of[c] {
                    u32::MAX => {
                        let (to, t) = (&mut p[c], at[c]);
                        at[c] += 1;
                        to.x[t * D..t * D + D].copy_from_slice(&objs.xs[j * D..j * D + D]);
                        if let Some(ws) = objs.ws {
                            to.w[t] = ws[j];
                        }
                        to.i[t] = i as u32;
                    }
                    rank => self.parts.set(i, rank),
                }
            }
        });
        // Summed in index order; unit weights are counted by the caller.
        if let Some(ws) = objs.ws {
            for (&c, &w) in child.iter().zip(ws) {
                let rank = rank_of[c as usize];
                if rank != u32::MAX {
                    acc.rank_w[rank as usize] += w;
                }
            }
        }
    }

    /// [`Ctx::distribute`] for `D` coordinates per object.
    fn distribute_d<const D: usize>(
        &self,
        acc: &mut Acc,
        objs: &Objects<'_>,
        child: &[u32],
        out: Out<'_, '_>,
    ) {
        let Out { rank_of, next, to } = out;
        for (j, &c) in child.iter().enumerate() {
            let c = c as usize;
            let i = objs.index(j);
            match rank_of[c] {
                u32::MAX => {
                    let t = next[c];
                    next[c] += 1;
                    let x: &[f64; D] = objs.xs[j * D..j * D + D].try_into().expect("D coordinates");
                    to.x[t * D..t * D + D].copy_from_slice(x);
                    if let Some(ws) = objs.ws {
                        to.w[t] = ws[j];
                    }
                    to.i[t] = i as u32;
                }
                rank => {
                    self.parts.set(i, rank);
                    // Summed in index order; unit weights are counted by the caller.
                    if let Some(ws) = objs.ws {
                        acc.rank_w[rank as usize] += ws[j];
                    }
                }
            }
        }
    }

    /// The subtrees of `nodes` (with `lens` objects each, in `ranges` of the copies, read from
    /// `src`): in turn, or, when there are threads, as two halves of consecutive siblings side
    /// by side, recursively (each with the whole budget: rayon's work stealing gives the
    /// threads of a half that is done to the other's levels). The first error in document
    /// order wins either way.
    fn subtrees(
        &self,
        acc: &mut Acc,
        par: Par,
        nodes: &[NodeId],
        lens: &[usize],
        ranges: Vec<Range<'_>>,
        src: Src,
    ) -> Result<(), Error> {
        let total: usize = lens.iter().sum();
        if !(par.is_parallel() && nodes.len() > 1 && total >= FORK_MIN) {
            for (&id, r) in nodes.iter().zip(ranges) {
                self.walk(acc, par, id, src, r)?;
            }
            return Ok(());
        }
        // Split where the first half's objects come nearest half (at least one each).
        let mut split = 1;
        let mut before = lens[0];
        while split + 1 < nodes.len() && (before + lens[split]) * 2 <= total {
            before += lens[split];
            split += 1;
        }
        let mut ranges = ranges;
        let second = ranges.split_off(split);
        let mut other = Acc::new(acc.rank_w.len());
        let (a, b) = rayon::join(
            || self.subtrees(acc, par, &nodes[..split], &lens[..split], ranges, src),
            || {
                self.subtrees(
                    &mut other,
                    par,
                    &nodes[split..],
                    &lens[split..],
                    second,
                    src,
                )
            },
        );
        acc.merge(other);
        a.and(b)
    }

    fn descend(
        &self,
        acc: &mut Acc,
        par: Par,
        child: Child,
        src: Src,
        r: Range<'_>,
    ) -> Result<(), Error> {
        match child {
            Child::Rank(rank) => {
                self.leaf(acc, rank, src, &r);
                Ok(())
            }
            Child::Node(next) => self.walk(acc, par, next, src, r),
        }
    }

    /// The rank a child is: a rank, or a computing node with one rank (no method: its
    /// objects would only be copied to get that rank). `None` for a node that splits.
    fn rank_of(&self, child: &Child) -> Option<usize> {
        match *child {
            Child::Rank(r) => Some(r),
            Child::Node(id) => {
                let n = self.plan.node(id);
                n.method
                    .is_none()
                    .then(|| n.ranks.first().copied())
                    .flatten()
            }
        }
    }

    /// The pooled workspace that fits a level of `n` objects best ([`LevelWorkspace::fit`]):
    /// with siblings side by side, a large level taking a small workspace would grow it (a
    /// page fault per fresh page, about a pass over the objects) while a large one sits idle.
    fn take_hsfc(&self, kind: usize, n: usize) -> LevelWorkspace {
        let mut pool = self.hsfc.lock().unwrap_or_else(|e| e.into_inner());
        let best = LevelWorkspace::best_fit(&pool, kind, n);
        best.map(|i| pool.swap_remove(i)).unwrap_or_default()
    }

    fn give_hsfc(&self, mut ws: LevelWorkspace, kind: usize, n: usize) {
        ws.served[kind] = ws.served[kind].max(n);
        self.hsfc.lock().unwrap_or_else(|e| e.into_inner()).push(ws);
    }
}

/// Levels with at least this many objects hand them to their children in blocks side by side
/// when the thread budget allows.
const DISTRIBUTE_PAR_MIN: usize = 1 << 14;

/// Sibling subtrees with at least this many objects in all run side by side when the thread
/// budget allows.
const FORK_MIN: usize = 1 << 14;

/// Gives `v` length `len`, reusing its memory (the contents are overwritten before use).
fn fit<T: Clone + Default>(v: &mut Vec<T>, len: usize) {
    if v.len() >= len {
        v.truncate(len);
    } else {
        v.resize(len, T::default());
    }
}

/// The walk's buffers, kept between calls in the caller's [`super::Workspace`]: the two
/// permuted copies (coordinates, weights, original indices) and each object's child.
#[derive(Debug, Default)]
pub(super) struct Bufs {
    bx: [Vec<f64>; 2],
    bw: [Vec<f64>; 2],
    bi: [Vec<u32>; 2],
    child: Vec<u32>,
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
    let bufs = &mut ws.walk;
    for b in 0..2 {
        fit(&mut bufs.bx[b], n * dim);
        fit(&mut bufs.bw[b], if weights.is_some() { n } else { 0 });
        fit(&mut bufs.bi[b], n);
    }
    fit(&mut bufs.child, n);
    let ctx = Ctx {
        plan,
        dim,
        coords,
        weights,
        prev,
        parts: PartsOut::new(parts),
        hsfc: Mutex::new(std::mem::take(&mut ws.hsfc)),
    };
    let [bx0, bx1] = &mut bufs.bx;
    let [bw0, bw1] = &mut bufs.bw;
    let [bi0, bi1] = &mut bufs.bi;
    let range = Range {
        bufs: [
            Copy {
                x: bx0,
                w: bw0,
                i: bi0,
            },
            Copy {
                x: bx1,
                w: bw1,
                i: bi1,
            },
        ],
        child: &mut bufs.child,
    };
    let mut acc = Acc::new(ranks);
    let walked = ctx.walk(&mut acc, par, plan.root(), Src::Caller, range);
    ws.hsfc = ctx.hsfc.into_inner().unwrap_or_else(|e| e.into_inner());
    walked?;
    // The levels' times in preorder, whichever task ran them.
    let order = plan.split_nodes();
    acc.times
        .sort_by_key(|(id, _)| order.iter().position(|o| o == id));
    Ok(HierPartition::from_ranks(
        plan, dim, acc.rank_w, acc.rank_n, acc.cuts, acc.times,
    ))
}
