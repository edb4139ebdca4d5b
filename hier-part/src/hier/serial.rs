//! The serial walk: every level's objects are gathered from the caller's arrays and handed to
//! the level's partitioner; parts are written straight into the caller's buffer.

use super::{Child, Hier, HierPartition, LevelCuts, LevelMethod, MethodKind, Moved, Plan};
use crate::input::check_points;
use crate::{Error, Par, Rcb, Rib};
use drum_model::NodeId;
use std::collections::BTreeMap;
use std::time::Instant;

/// `hsfc`'s setting for the same parallelism.
pub(super) fn hsfc_par(par: Par) -> hsfc::Par {
    hsfc::Par::threads(par.degree())
}

/// The `hsfc` repartition tolerance of a level: `IMBALANCE_TOL − 1`, below `hsfc`'s limit of 1.
pub(super) fn hsfc_tolerance(m: &LevelMethod) -> f64 {
    (m.imbalance_tol - 1.0).clamp(0.0, 0.99)
}

/// Runs a level's method on one set of objects (serial), writing each object's child into
/// `out`. With `prev` (KEEP_CUTS) and an HSFC level, `out` holds each object's previous child
/// on entry (`u32::MAX` for objects that come from another subtree).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_level(
    method: &LevelMethod,
    par: Par,
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    targets: &[f64],
    out: &mut [u32],
    prev: Option<&LevelCuts>,
) -> Result<LevelCuts, Error> {
    Ok(match method.kind {
        MethodKind::Hsfc => {
            let h = hsfc::Hsfc {
                par: hsfc_par(par),
                tolerance: hsfc_tolerance(method),
            };
            LevelCuts::Hsfc(match prev {
                Some(LevelCuts::Hsfc(p)) if p.num_parts() == targets.len() && p.dim() == dim => {
                    h.repartition(p, coords, dim, weights, targets, out)?
                }
                _ => h.partition(coords, dim, weights, targets, out)?,
            })
        }
        MethodKind::Rcb => LevelCuts::Bisection(
            Rcb {
                keep_ties: method.keep_ties,
                par,
            }
            .partition(coords, dim, weights, targets, out)?,
        ),
        MethodKind::Rib => LevelCuts::Bisection(
            Rib {
                keep_ties: method.keep_ties,
                par,
            }
            .partition(coords, dim, weights, targets, out)?,
        ),
    })
}

struct Walk<'a> {
    plan: &'a Plan,
    par: Par,
    dim: usize,
    coords: &'a [f64],
    weights: Option<&'a [f64]>,
    /// Previous partition and the parts on entry (repartition).
    prev: Option<(&'a HierPartition, &'a [u32])>,
    cuts: BTreeMap<NodeId, LevelCuts>,
    times: Vec<(NodeId, f64)>,
}

impl Walk<'_> {
    /// Assigns the objects `idx` (ascending; `None` = all) of the subtree of `id` to ranks.
    fn walk(&mut self, id: NodeId, idx: Option<Vec<u32>>, parts: &mut [u32]) -> Result<(), Error> {
        let node = self.plan.node(id);
        let Some(method) = node.method.as_ref() else {
            let r = node.ranks[0] as u32;
            match idx {
                None => parts.fill(r),
                Some(idx) => idx.iter().for_each(|&i| parts[i as usize] = r),
            }
            return Ok(());
        };
        if node.children.len() == 1 {
            return self.descend(id, 0, idx, parts);
        }
        let dim = self.dim;
        let (sub_coords, sub_weights);
        let (coords, weights) = match &idx {
            None => (self.coords, self.weights),
            Some(idx) => {
                sub_coords = gather(self.coords, dim, idx);
                sub_weights = self.weights.map(|w| gather(w, 1, idx));
                (&sub_coords[..], sub_weights.as_deref())
            }
        };
        let m = coords.len() / dim;
        let mut child = vec![0u32; m];
        let prev = match self.prev {
            Some((p, entry)) if method.keep_cuts => {
                let lookup = rank_to_child(self.plan, id);
                for (j, c) in child.iter_mut().enumerate() {
                    let i = idx.as_ref().map_or(j, |idx| idx[j] as usize);
                    *c = lookup.get(entry[i] as usize).copied().unwrap_or(u32::MAX);
                }
                p.cuts.get(&id)
            }
            _ => None,
        };
        let t0 = Instant::now();
        let level = run_level(
            method,
            self.par,
            coords,
            dim,
            weights,
            &node.targets,
            &mut child,
            prev,
        )
        .map_err(|e| e.at_level(&node.label, method.kind))?;
        self.times.push((id, t0.elapsed().as_secs_f64()));
        if method.keep_cuts {
            self.cuts.insert(id, level);
        }
        // Bucket the objects by child, keeping them ascending.
        let k = node.children.len();
        let mut counts = vec![0usize; k];
        for &c in &child {
            counts[c as usize] += 1;
        }
        let mut buckets: Vec<Vec<u32>> = counts.iter().map(|&c| Vec::with_capacity(c)).collect();
        for (j, &c) in child.iter().enumerate() {
            let i = idx.as_ref().map_or(j as u32, |idx| idx[j]);
            buckets[c as usize].push(i);
        }
        drop(child);
        drop(idx);
        for (c, b) in buckets.into_iter().enumerate() {
            self.descend(id, c, Some(b), parts)?;
        }
        Ok(())
    }

    fn descend(
        &mut self,
        id: NodeId,
        c: usize,
        idx: Option<Vec<u32>>,
        parts: &mut [u32],
    ) -> Result<(), Error> {
        match self.plan.node(id).children[c] {
            Child::Rank(r) => {
                match idx {
                    None => parts.fill(r as u32),
                    Some(idx) => idx.iter().for_each(|&i| parts[i as usize] = r as u32),
                }
                Ok(())
            }
            Child::Node(next) => self.walk(next, idx, parts),
        }
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

/// The rows `idx` of a row-major array with `width` values per row.
fn gather(a: &[f64], width: usize, idx: &[u32]) -> Vec<f64> {
    fn rows<const W: usize>(a: &[f64], idx: &[u32]) -> Vec<f64> {
        let mut out = vec![0.0; idx.len() * W];
        for (o, &i) in out.chunks_exact_mut(W).zip(idx) {
            let i = i as usize * W;
            o.copy_from_slice(&a[i..i + W]);
        }
        out
    }
    match width {
        1 => rows::<1>(a, idx),
        2 => rows::<2>(a, idx),
        _ => rows::<3>(a, idx),
    }
}

/// Per-rank weights (summed in object order) and counts of a complete assignment.
fn rank_figures(parts: &[u32], weights: Option<&[f64]>, ranks: usize) -> (Vec<f64>, Vec<u64>) {
    let mut w = vec![0.0; ranks];
    let mut n = vec![0u64; ranks];
    for (i, &p) in parts.iter().enumerate() {
        n[p as usize] += 1;
        w[p as usize] += weights.map_or(1.0, |w| w[i]);
    }
    (w, n)
}

impl Hier {
    /// Partitions the points `coords` (interleaved, `dim` = 1, 2 or 3; HSFC levels need 2 or
    /// 3) with optional non-negative `weights` over the ranks of `plan`, writing each point's
    /// rank into `parts`.
    ///
    /// Level by level from the root, each node that splits divides its objects among its
    /// children in proportion to the children's powers with its own method; every object gets
    /// exactly one rank. Deterministic: the same for every [`Par`] and equal to
    /// [`Hier::partition_dist`] on any spread of the points over the ranks.
    pub fn partition(
        &self,
        plan: &Plan,
        coords: &[f64],
        dim: usize,
        weights: Option<&[f64]>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        check_points(coords, dim, weights, parts.len(), self.par)?;
        self.run(plan, coords, dim, weights, parts, None)
    }

    /// Repartitions after the load changed (KEEP_CUTS): `parts` holds each point's current
    /// rank on entry and its new rank on return. HSFC levels with `KEEP_CUTS="1"` start from
    /// `previous`'s cuts and keep each cut wherever the parts beside it stay within the level's
    /// `IMBALANCE_TOL`, so little moves; other levels partition afresh (their cuts are exact and
    /// deterministic, so an unchanged load gives unchanged cuts). [`HierPartition::moved`]
    /// reports what changed rank.
    pub fn repartition(
        &self,
        plan: &Plan,
        previous: &HierPartition,
        coords: &[f64],
        dim: usize,
        weights: Option<&[f64]>,
        parts: &mut [u32],
    ) -> Result<HierPartition, Error> {
        let n = check_points(coords, dim, weights, parts.len(), self.par)?;
        let ranks = plan.num_ranks();
        if let Some(i) = parts.iter().position(|&p| p as usize >= ranks) {
            return Err(Error::PartOutOfRange {
                index: i,
                part: parts[i],
                k: ranks,
            });
        }
        let entry = parts.to_vec();
        let mut r = self.run(plan, coords, dim, weights, parts, Some((previous, &entry)))?;
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
        &self,
        plan: &Plan,
        coords: &[f64],
        dim: usize,
        weights: Option<&[f64]>,
        parts: &mut [u32],
        prev: Option<(&HierPartition, &[u32])>,
    ) -> Result<HierPartition, Error> {
        let mut walk = Walk {
            plan,
            par: self.par,
            dim,
            coords,
            weights,
            prev,
            cuts: BTreeMap::new(),
            times: Vec::new(),
        };
        walk.walk(plan.root(), None, parts)?;
        let (w, n) = rank_figures(parts, weights, plan.num_ranks());
        Ok(HierPartition::from_ranks(
            plan, dim, w, n, walk.cuts, walk.times,
        ))
    }
}
