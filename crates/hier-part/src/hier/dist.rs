//! The distributed walk: the ranks of each subtree partition its objects together on a
//! communicator split from their parent's, then the objects move to the ranks of the child they
//! went to, level after level, until every rank holds its own objects.
//!
//! Every level's partitioner gives the serial result on the union of the objects (HSFC through
//! `hsfc::Hsfc` on the group, RCB/RIB through the distributed bisection keyed by the objects'
//! global index), so the whole partition equals the serial one on the concatenation of the
//! ranks' points.

use super::level::Level;
use super::serial::rank_to_child;
use super::{Child, Hier, HierPartition, LevelCuts, Moved, Plan};
use crate::bisect::dist::{agreed, agreed_summing};
use crate::{Error, Par};
use comm::wire::{Reader, Writer};
use comm::{Comm, ReduceOp};
use drum_model::{NodeId, PartitionMethod};
use part_api::Points;
use part_api::Reduce;
use std::collections::BTreeMap;
use std::time::Instant;

/// An object on its way to its rank.
#[derive(Debug, Clone, Copy)]
struct Obj {
    /// Global index (rank-order position in the union of the inputs).
    gid: u64,
    /// The rank that holds it in the caller's arrays, and its index there.
    origin: u32,
    index: u32,
    /// Its rank before a repartition (`u32::MAX` for a fresh partition).
    prev: u32,
    /// Its rank, once the walk knows it (`u32::MAX` until then; never on the wire).
    dest: u32,
    w: f64,
    x: [f64; 3],
}

impl Obj {
    /// Words per object on the wire for dimension `dim`.
    fn width(dim: usize) -> usize {
        4 + dim
    }

    fn push(&self, dim: usize, out: &mut Vec<u64>) {
        out.push(self.gid);
        out.push((self.origin as u64) << 32 | self.index as u64);
        out.push(self.prev as u64);
        out.push(self.w.to_bits());
        out.extend(self.x[..dim].iter().map(|x| x.to_bits()));
    }

    fn read(r: &[u64], dim: usize) -> Obj {
        let mut x = [0.0; 3];
        for a in 0..dim {
            x[a] = f64::from_bits(r[4 + a]);
        }
        Obj {
            gid: r[0],
            origin: (r[1] >> 32) as u32,
            index: r[1] as u32,
            prev: r[2] as u32,
            dest: u32::MAX,
            w: f64::from_bits(r[3]),
            x,
        }
    }
}

/// The communicator of the current level: the caller's, or one split from it.
enum Group<'a, C> {
    World(&'a C),
    Split(C),
}

impl<C> Group<'_, C> {
    fn get(&self) -> &C {
        match self {
            Group::World(c) => c,
            Group::Split(c) => c,
        }
    }
}

/// What the walk leaves on this rank.
struct Walked {
    objs: Vec<Obj>,
    cuts: BTreeMap<NodeId, LevelCuts>,
    times: Vec<(NodeId, f64)>,
}

/// The distributed hierarchical partition (see [`Hier::partition`]) on a group of more than
/// one rank: one rank per rank of the machine (world rank r is machine rank r).
///
/// Level by level, the ranks of a subtree partition its objects together on a communicator
/// split from their parent's, then the objects move to ranks of the child they were given;
/// at the end every rank holds exactly its own objects, and the parts go back to the ranks
/// that passed the points. Bad data on any rank is an error on every rank.
impl Hier {
    pub(super) fn run_dist<C: Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
        comm: &C,
        plan: &Plan,
        previous: Option<&HierPartition>,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        let (coords, dim, weights) = points.into_parts();
        if Comm::size(comm) != plan.num_ranks() {
            return Err(Error::RankCount {
                comm: Comm::size(comm),
                machine: plan.num_ranks(),
            });
        }
        let me = Comm::rank(comm);
        let ranks = plan.num_ranks();
        let local = crate::input::check_points(coords, dim, weights, parts.len(), self.par)
            .and_then(|n| {
                if let (Some(_), Some(i)) =
                    (previous, parts.iter().position(|&p| p as usize >= ranks))
                {
                    return Err(Error::PartOutOfRange {
                        index: i,
                        part: parts[i],
                        k: ranks,
                    });
                }
                Ok(n)
            });
        let (n, weighted, counts) = census(comm, local, weights.is_some())?;
        let offset: u64 = counts[..me].iter().sum();
        let total: u64 = counts.iter().sum();
        let walk = Walk {
            plan,
            previous,
            par: self.par,
            dim,
            weighted,
        };
        let root = plan.node(plan.root());
        let one_level = root.method.is_some() && root.children.len() > 1 && plan_is_one_level(plan);
        if one_level && total <= SMALL {
            return walk.small(comm, Points::new(coords, dim, weights), &counts, parts);
        }
        let gids: Vec<u64> = (offset..offset + n as u64).collect();
        if one_level {
            // One level of single ranks: the level runs on the caller's arrays as they are.
            let points = Points::new(coords, dim, weights);
            return walk.one_level(ws, comm, points, &gids, parts);
        }
        let objs: Vec<Obj> = (0..n)
            .map(|i| {
                let mut x = [0.0; 3];
                x[..dim].copy_from_slice(&coords[i * dim..(i + 1) * dim]);
                Obj {
                    gid: gids[i],
                    origin: me as u32,
                    index: i as u32,
                    prev: if previous.is_some() {
                        parts[i]
                    } else {
                        u32::MAX
                    },
                    dest: u32::MAX,
                    w: weights.map_or(1.0, |w| w[i]),
                    x,
                }
            })
            .collect();
        let walked = walk.run(ws, comm, objs);
        let Walked { objs, cuts, times } = agreed(comm, walked)?;
        let result = summarise(
            comm,
            plan,
            dim,
            weighted,
            objs.iter().map(Obj::fig),
            (cuts, times),
            previous.is_some(),
        )?;

        // The parts go back to the ranks that passed the points. When the root's children are
        // single ranks no object ever left its rank.
        if plan_is_one_level(plan) {
            for o in &objs {
                parts[o.index as usize] = o.dest;
            }
        } else {
            let mut send: Vec<Vec<u64>> = vec![Vec::new(); ranks];
            for o in &objs {
                send[o.origin as usize].push(u64::from(o.index) << 32 | u64::from(o.dest));
            }
            let counts: Vec<usize> = send.iter().map(Vec::len).collect();
            let flat: Vec<u64> = send.concat();
            let back = comm.alltoallv(&flat, &counts)?;
            for &x in back.data() {
                parts[(x >> 32) as usize] = x as u32;
            }
        }
        Ok(result)
    }
}

/// The walk's first round, in one collective: every rank's input check (an error on every
/// rank if one failed), whether ranks with points pass weights (mixing is an error), and
/// every rank's number of points. Returns this rank's count, whether the walk is weighted,
/// and the counts.
fn census<C: Comm>(
    comm: &C,
    local: Result<usize, Error>,
    has_weights: bool,
) -> Result<(usize, bool, Vec<u64>), Error> {
    let (me, size) = (Comm::rank(comm), Comm::size(comm));
    let mut sums = vec![0u64; 2 + size];
    if let Ok(n) = &local {
        sums[0] = u64::from(*n > 0 && has_weights);
        sums[1] = u64::from(*n > 0 && !has_weights);
        sums[2 + me] = *n as u64;
    }
    let n = agreed_summing(comm, local, &mut sums)?;
    if sums[0] > 0 && sums[1] > 0 {
        return Err(Error::Inconsistent {
            what: "some ranks pass weights and others do not",
        });
    }
    Ok((n, sums[0] > 0, sums.split_off(2)))
}

/// Points in all up to which a one-level walk gathers every point on every rank and runs the
/// serial walk there (`Walk::small`): two collectives instead of the distributed level's
/// dozen. Measured on the two-core machine with a competing process on one core, a
/// collective costs about 0.5 ms and the serial walk about 240 ns per point on the loaded
/// core: they cross near 25,000 points.
const SMALL: u64 = 16_384;

impl Walk<'_> {
    /// A one-level walk of at most [`SMALL`] points in all: every rank gathers every rank's
    /// points, weights and previous parts (one `allgatherv`) and runs the serial walk on their
    /// concatenation in rank order, which the distributed walk equals by construction (the
    /// same parts, figures and cuts on every rank); each rank keeps its own slice of the parts.
    /// `counts`: every rank's number of points.
    fn small<C: Comm>(
        &self,
        comm: &C,
        points: Points<'_>,
        counts: &[u64],
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        let (plan, previous, weighted) = (self.plan, self.previous, self.weighted);
        let (coords, dim, weights) = points.into_parts();
        let n = parts.len();
        let mut w = Writer::with_capacity(n * (8 * dim + 12));
        for &x in coords {
            w.f64(x);
        }
        if weighted {
            for i in 0..n {
                w.f64(weights.map_or(1.0, |w| w[i]));
            }
        }
        if previous.is_some() {
            for &p in parts.iter() {
                w.u32(p);
            }
        }
        let all = comm.allgatherv_bytes(w.as_bytes())?;
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut x = Vec::with_capacity(total * dim);
        let mut wt = Vec::with_capacity(if weighted { total } else { 0 });
        let mut prev = Vec::with_capacity(if previous.is_some() { total } else { 0 });
        for (r, &c) in counts.iter().enumerate() {
            let mut rd = Reader::new(all.get(r), "a rank's points for a small partition");
            let mut read = |rd: &mut Reader<'_>| -> Result<(), comm::wire::WireError> {
                for _ in 0..c as usize * dim {
                    x.push(rd.f64()?);
                }
                if weighted {
                    for _ in 0..c {
                        wt.push(rd.f64()?);
                    }
                }
                if previous.is_some() {
                    for _ in 0..c {
                        prev.push(rd.u32()?);
                    }
                }
                Ok(())
            };
            read(&mut rd).map_err(comm::CommError::from)?;
        }
        let offset: usize = counts[..Comm::rank(comm)].iter().map(|&c| c as usize).sum();
        let mut all_parts = if previous.is_some() {
            prev
        } else {
            vec![u32::MAX; total]
        };
        let points = Points::new(&x, dim, weighted.then_some(&wt[..]));
        let mut ws = super::Workspace::default();
        let result =
            super::serial::partition(self.par, &mut ws, plan, points, &mut all_parts, previous)?;
        parts.copy_from_slice(&all_parts[offset..offset + n]);
        Ok(result)
    }
}

/// True when every child of the root is one rank: the walk is one level and no object moves.
fn plan_is_one_level(plan: &Plan) -> bool {
    let root = plan.root();
    (0..plan.node(root).children.len()).all(|c| plan.child_ranks(root, c).len() == 1)
}

/// Per rank: (weight, count, moved weight, moved count) of the objects it ends with.
type Figures = Vec<(f64, u64, f64, u64)>;

/// What the figures need of an object: its global index, weight, previous and new rank.
#[derive(Debug, Clone, Copy)]
struct Fig {
    gid: u64,
    w: f64,
    prev: u32,
    dest: u32,
}

impl Obj {
    fn fig(&self) -> Fig {
        Fig {
            gid: self.gid,
            w: self.w,
            prev: self.prev,
            dest: self.dest,
        }
    }
}

/// Each rank's figures (unit or weighted), then the partition's summary.
fn summarise<C: Comm>(
    comm: &C,
    plan: &Plan,
    dim: usize,
    weighted: bool,
    objs: impl Iterator<Item = Fig>,
    walked: (BTreeMap<NodeId, LevelCuts>, Vec<(NodeId, f64)>),
    repartition: bool,
) -> Result<HierPartition, Error> {
    let (me, ranks) = (Comm::rank(comm), plan.num_ranks());
    let figures = if weighted {
        weighted_figures(comm, me, ranks, objs)?
    } else {
        unit_figures(comm, ranks, objs)?
    };
    Ok(summary(plan, dim, figures, walked, repartition))
}

/// The partition's summary from each rank's figures.
fn summary(
    plan: &Plan,
    dim: usize,
    figures: Figures,
    walked: (BTreeMap<NodeId, LevelCuts>, Vec<(NodeId, f64)>),
    repartition: bool,
) -> HierPartition {
    let rank_weights: Vec<f64> = figures.iter().map(|f| f.0).collect();
    let rank_counts: Vec<u64> = figures.iter().map(|f| f.1).collect();
    let (cuts, times) = walked;
    let mut result = HierPartition::from_ranks(plan, dim, rank_weights, rank_counts, cuts, times);
    if repartition {
        let moved = figures
            .iter()
            .fold((0.0, 0), |(w, n), f| (w + f.2, n + f.3));
        result.moved = Some(Moved {
            weight: moved.0,
            count: moved.1,
        });
    }
    result
}

/// Unit weights: every sum is a count, exact in any order.
fn unit_figures<C: Comm>(
    comm: &C,
    ranks: usize,
    objs: impl Iterator<Item = Fig>,
) -> Result<Figures, Error> {
    let mut c = unit_counts(ranks, objs);
    comm.allreduce_u64(ReduceOp::Sum, &mut c)?;
    Ok(unit_figures_of(&c))
}

/// The local part of [`unit_figures`]: per rank, the objects it ends with and how many of
/// them moved.
fn unit_counts(ranks: usize, objs: impl Iterator<Item = Fig>) -> Vec<u64> {
    let mut c = vec![0u64; 2 * ranks];
    for o in objs {
        c[2 * o.dest as usize] += 1;
        c[2 * o.dest as usize + 1] += u64::from(o.prev != o.dest);
    }
    c
}

/// [`unit_figures`] from the summed counts.
fn unit_figures_of(c: &[u64]) -> Figures {
    c.chunks(2)
        .map(|x| (x[0] as f64, x[0], x[1] as f64, x[1]))
        .collect()
}

/// Weights: each rank's figures are summed over its objects in global order, as the serial
/// walk sums in index order, so the results are the same to the bit. The objects a rank holds
/// but does not own send their (index, weight, moved) to their rank first.
fn weighted_figures<C: Comm>(
    comm: &C,
    me: usize,
    ranks: usize,
    objs: impl Iterator<Item = Fig>,
) -> Result<Figures, Error> {
    let mut send: Vec<Vec<u64>> = vec![Vec::new(); ranks];
    let mut mine: Vec<(u64, f64, bool)> = Vec::new();
    for o in objs {
        let moved = o.prev != o.dest;
        if o.dest as usize == me {
            mine.push((o.gid, o.w, moved));
        } else {
            let s = &mut send[o.dest as usize];
            s.push(o.gid << 1 | u64::from(moved));
            s.push(o.w.to_bits());
        }
    }
    let counts: Vec<usize> = send.iter().map(Vec::len).collect();
    let flat: Vec<u64> = send.concat();
    drop(send);
    let got = comm.alltoallv(&flat, &counts)?;
    mine.extend(
        got.data()
            .chunks_exact(2)
            .map(|p| (p[0] >> 1, f64::from_bits(p[1]), p[0] & 1 == 1)),
    );
    // Runs of increasing global index (a stable sort finds them).
    mine.sort_by_key(|m| m.0);
    let (mut w, mut moved_w, mut moved_n) = (0.0f64, 0.0f64, 0u64);
    for &(_, x, moved) in &mine {
        w += x;
        if moved {
            moved_w += x;
            moved_n += 1;
        }
    }
    let figures = [w.to_bits(), mine.len() as u64, moved_w.to_bits(), moved_n];
    let mut all = vec![0u64; 4 * ranks];
    comm.allgather(&figures, &mut all)?;
    Ok(all
        .chunks(4)
        .map(|c| (f64::from_bits(c[0]), c[1], f64::from_bits(c[2]), c[3]))
        .collect())
}

/// What every level of one rank's walk shares.
struct Walk<'a> {
    plan: &'a Plan,
    previous: Option<&'a HierPartition>,
    par: Par,
    dim: usize,
    weighted: bool,
}

impl Walk<'_> {
    /// Walks from the root to this rank's computing node; returns the objects this rank ends
    /// with (all of them its own).
    fn run<C: Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
        world: &C,
        mut objs: Vec<Obj>,
    ) -> Result<Walked, Error> {
        let plan = self.plan;
        let me = Comm::rank(world);
        let mut group = Group::World(world);
        let mut cuts = BTreeMap::new();
        let mut times = Vec::new();
        let mut id = plan.root();
        loop {
            let node = plan.node(id);
            let Some(method) = node.method.as_ref() else {
                break;
            };
            let mine = plan
                .child_of_rank(id, me)
                .expect("a rank walks down its own path");
            if node.children.len() > 1 {
                let g = group.get();
                let t0 = Instant::now();
                let (child, level) = self
                    .level(ws, g, id, &objs)
                    .map_err(|e| e.at_level(&node.label, method.kind))?;
                times.push((id, t0.elapsed().as_secs_f64()));
                if method.keep_cuts {
                    cuts.insert(id, level);
                }
                let k = node.children.len();
                if (0..k).all(|c| plan.child_ranks(id, c).len() == 1) {
                    // The last split: every child is one rank, so each object's rank is known
                    // and it need not move (the figures and the parts go to their ranks).
                    for (o, &c) in objs.iter_mut().zip(&child) {
                        o.dest = plan.child_ranks(id, c as usize)[0] as u32;
                    }
                    return Ok(Walked { objs, cuts, times });
                }
                objs = migrate(g, plan, id, me, objs, &child, self.dim)?;
                group = Group::Split(g.split(mine as u32, me as i32)?);
            }
            match node.children[mine] {
                Child::Rank(_) => break,
                Child::Node(next) => id = next,
            }
        }
        // A single-rank subtree: every object here is this rank's.
        for o in &mut objs {
            o.dest = me as u32;
        }
        Ok(Walked { objs, cuts, times })
    }

    /// The walk when every child of the root is one rank: the root's level runs on this
    /// rank's own arrays (no objects built, no copies), and each point's part is its child's
    /// rank. The same partition and figures as the general walk, and the same collectives but
    /// one: with unit weights the level's agreement travels in the figures' round.
    fn one_level<C: Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
        comm: &C,
        points: Points<'_>,
        gids: &[u64],
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        let (plan, id) = (self.plan, self.plan.root());
        let node = plan.node(id);
        let method = node.method.as_ref().expect("a splitting root has a method");
        let (coords, dim, weights) = points.into_parts();
        let n = parts.len();
        let prev: Vec<u32> = if self.previous.is_some() {
            parts.to_vec()
        } else {
            vec![u32::MAX; n]
        };
        // Weighted runs pass weights on every rank, empty where a rank has no points.
        let w = self.weighted.then(|| weights.unwrap_or(&[]));
        let t0 = Instant::now();
        let run = self
            .level_on(ws, comm, id, Points::new(coords, dim, w), gids, &prev)
            .map_err(|e| e.at_level(&node.label, method.kind));
        let elapsed = t0.elapsed().as_secs_f64();
        let rank_of: Vec<u32> = (0..node.children.len())
            .map(|c| plan.child_ranks(id, c)[0] as u32)
            .collect();
        let figs = |child: &[u32]| -> Vec<u64> {
            let objs = (0..n).map(|i| Fig {
                gid: gids[i],
                w: 1.0,
                prev: prev[i],
                dest: rank_of[child[i] as usize],
            });
            unit_counts(plan.num_ranks(), objs)
        };
        // Unit weights: the level's outcome is agreed on in the round that sums the figures
        // (one collective fewer); the parts are written once every rank has succeeded.
        let ((child, level), unit) = if self.weighted {
            (agreed(comm, run)?, None)
        } else {
            let mut c = match &run {
                Ok((child, _)) => figs(child),
                Err(_) => vec![0; 2 * plan.num_ranks()],
            };
            (
                agreed_summing(comm, run, &mut c)?,
                Some(unit_figures_of(&c)),
            )
        };
        for (p, &c) in parts.iter_mut().zip(&child) {
            *p = rank_of[c as usize];
        }
        let mut cuts = BTreeMap::new();
        if method.keep_cuts {
            cuts.insert(id, level);
        }
        let walked = (cuts, vec![(id, elapsed)]);
        let repartition = self.previous.is_some();
        match unit {
            Some(f) => Ok(summary(plan, dim, f, walked, repartition)),
            None => {
                let objs = (0..n).map(|i| Fig {
                    gid: gids[i],
                    w: weights.map_or(1.0, |w| w[i]),
                    prev: prev[i],
                    dest: parts[i],
                });
                summarise(comm, plan, dim, true, objs, walked, repartition)
            }
        }
    }

    /// Runs the level of node `id` on the group's objects: each object's child, and the cuts.
    fn level<C: Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
        g: &C,
        id: NodeId,
        objs: &[Obj],
    ) -> Result<(Vec<u32>, LevelCuts), Error> {
        let dim = self.dim;
        let mut coords: Vec<f64> = Vec::with_capacity(objs.len() * dim);
        for o in objs {
            coords.extend_from_slice(&o.x[..dim]);
        }
        let w: Option<Vec<f64>> = self.weighted.then(|| objs.iter().map(|o| o.w).collect());
        let gids: Vec<u64> = objs.iter().map(|o| o.gid).collect();
        let prev: Vec<u32> = objs.iter().map(|o| o.prev).collect();
        let points = Points::new(&coords, dim, w.as_deref());
        self.level_on(ws, g, id, points, &gids, &prev)
    }

    /// The level of node `id` on points with their global indices and previous ranks
    /// (`u32::MAX` for none): each point's child, and the cuts.
    fn level_on<C: Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
        g: &C,
        id: NodeId,
        points: Points<'_>,
        gids: &[u64],
        prev: &[u32],
    ) -> Result<(Vec<u32>, LevelCuts), Error> {
        let (plan, dim) = (self.plan, self.dim);
        let node = plan.node(id);
        let method = node.method.as_ref().expect("a splitting node has a method");
        let mut child = vec![0u32; prev.len()];
        let level = Level {
            method,
            par: self.par,
            targets: &node.targets,
            prev: self
                .previous
                .filter(|_| method.keep_cuts)
                .and_then(|p| p.cuts.get(&id)),
            from_previous: false,
        };
        let from_previous = level.keeps_hsfc_cuts(dim).is_some()
            || (self.previous.is_some() && method.kind == PartitionMethod::Diffusion);
        let level = Level {
            from_previous,
            ..level
        };
        if from_previous {
            let lookup = rank_to_child(plan, id);
            for (c, &p) in child.iter_mut().zip(prev) {
                *c = lookup.get(p as usize).copied().unwrap_or(u32::MAX);
            }
        }
        let cuts = level.run((ws, None), g, points, Some(gids), &mut child)?;
        Ok((child, cuts))
    }
}

/// Moves the objects of node `id`'s group to ranks of the child each was given. An object
/// already on a rank of its child stays; the others are spread in equal chunks over the
/// child's ranks (starting at a different one on each sender).
fn migrate<C: Comm>(
    g: &C,
    plan: &Plan,
    id: NodeId,
    me: usize,
    objs: Vec<Obj>,
    child: &[u32],
    dim: usize,
) -> Result<Vec<Obj>, Error> {
    let members = &plan.node(id).ranks;
    let group_rank = |world: usize| {
        members
            .binary_search(&world)
            .expect("a child's ranks belong to its parent")
    };
    let k = plan.node(id).children.len();
    let mut by_child: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, &c) in child.iter().enumerate() {
        by_child[c as usize].push(i);
    }
    let width = Obj::width(dim);
    let mut send: Vec<Vec<u64>> = vec![Vec::new(); members.len()];
    let mut keep = Vec::new();
    let shift = g.rank();
    for (c, list) in by_child.iter().enumerate() {
        let dest = plan.child_ranks(id, c);
        if dest.binary_search(&me).is_ok() {
            keep.extend(list.iter().map(|&i| objs[i]));
            continue;
        }
        let chunk = list.len().div_ceil(dest.len()).max(1);
        for (j, part) in list.chunks(chunk).enumerate() {
            let to = group_rank(dest[(j + shift) % dest.len()]);
            for &i in part {
                objs[i].push(dim, &mut send[to]);
            }
        }
    }
    let counts: Vec<usize> = send.iter().map(Vec::len).collect();
    let flat: Vec<u64> = send.concat();
    let got = g.alltoallv(&flat, &counts)?;
    keep.extend(got.data().chunks(width).map(|r| Obj::read(r, dim)));
    Ok(keep)
}
