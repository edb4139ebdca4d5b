//! One level of the walk: a node's method on the objects of its subtree. The one place where
//! the method a `<lbmethod>` names becomes a partitioner call, for the serial and the
//! distributed walk alike.

use super::{Diffused, LevelCuts, LevelMethod};
use crate::bisect::dist::{GlobalIds, bisect_dist};
use crate::bisect::{Bisector, Scratch};
use crate::{Error, Method, Par};
use comm::ReduceOp;
use drum_model::PartitionMethod;
use part_api::Reduce;
use part_api::{Partitioner, Points};

/// The buffers of one level that runs, kept by the serial walk from level to level and from
/// call to call: `hsfc`'s for an HSFC level, the bisection's objects for RCB and RIB.
#[derive(Debug, Default)]
pub(super) struct LevelWorkspace {
    pub(super) hsfc: hsfc::Workspace,
    pub(super) bisect: Scratch,
    /// The most objects it served as `hsfc`'s (`[0]`) and the bisection's (`[1]`) buffers:
    /// the walk hands a level the workspace that already fits it ([`LevelWorkspace::fit`]).
    pub(super) served: [usize; 2],
}

impl LevelWorkspace {
    /// The buffers a level of `method` uses (the index into `served`): hsfc's (0), or the
    /// bisection's (1).
    pub(super) fn kind_of(method: PartitionMethod) -> usize {
        usize::from(matches!(
            method,
            PartitionMethod::Rcb | PartitionMethod::Rib
        ))
    }

    /// How well this workspace fits a level of `n` objects using the buffers `kind` (see
    /// `served`): the smallest that holds `n` already fits best (its pages are there), then
    /// the largest (which grows least). Smaller is better.
    fn fit(&self, kind: usize, n: usize) -> (bool, usize) {
        let s = self.served[kind];
        if s >= n {
            (false, s)
        } else {
            (true, usize::MAX - s)
        }
    }

    /// The index in `pool` of the workspace that fits a level of `n` objects using the
    /// buffers `kind` best ([`LevelWorkspace::fit`]); `None` for an empty pool.
    pub(super) fn best_fit(pool: &[LevelWorkspace], kind: usize, n: usize) -> Option<usize> {
        (0..pool.len()).min_by_key(|&i| pool[i].fit(kind, n))
    }
}

/// A node's split: its method, the threads, its children's targets, and with KEEP_CUTS its
/// previous cuts.
pub(super) struct Level<'a> {
    pub(super) method: &'a LevelMethod,
    pub(super) par: Par,
    pub(super) targets: &'a [f64],
    pub(super) prev: Option<&'a LevelCuts>,
    /// Whether `out` holds each object's previous child on entry (`u32::MAX` for objects
    /// that were in another subtree): a repartition of a level that starts from them.
    pub(super) from_previous: bool,
}

impl Level<'_> {
    /// Whether this level repartitions from previous HSFC cuts (then `out` must hold each
    /// object's previous child on entry, `u32::MAX` for objects from another subtree).
    pub(super) fn keeps_hsfc_cuts(&self, dim: usize) -> Option<&hsfc::Partition> {
        match self.prev {
            Some(LevelCuts::Hsfc(p)) if p.num_parts() == self.targets.len() && p.dim() == dim => {
                Some(p)
            }
            _ => None,
        }
    }

    /// Runs the level on `group`'s objects `points`, writing each object's child into `out`.
    /// `gids`: the objects' global ids when they are spread over the group in an order other
    /// than rank order (the distributed walk); `None` for objects in index order on a
    /// one-rank group (the serial walk, which has checked every point at the root). `ws`:
    /// `hsfc`'s buffers, and the serial bisection's (the serial walk's, kept from level to
    /// level; `None`: fresh ones).
    pub(super) fn run<C: comm::Comm + Reduce>(
        &self,
        (ws, scratch): (&mut hsfc::Workspace, Option<&mut Scratch>),
        group: &C,
        points: Points<'_>,
        gids: Option<&[u64]>,
        out: &mut [u32],
    ) -> Result<LevelCuts, Error> {
        let bisector = |method| Bisector {
            method,
            keep_ties: self.method.keep_ties,
            par: self.par,
        };
        let b = match self.method.kind {
            PartitionMethod::Hsfc => {
                let h = hsfc::Hsfc {
                    par: self.par,
                    tolerance: hsfc_tolerance(self.method),
                };
                return Ok(LevelCuts::Hsfc(match self.keeps_hsfc_cuts(points.dim) {
                    Some(p) => h.repartition(ws, group, p, points, self.targets, out)?,
                    None => h.partition_with(ws, group, points, self.targets, out)?,
                }));
            }
            PartitionMethod::Diffusion => return self.diffuse(ws, group, points, gids, out),
            PartitionMethod::Rcb => bisector(Method::Rcb),
            PartitionMethod::Rib => bisector(Method::Rib),
        };
        Ok(LevelCuts::Bisection(match gids {
            Some(gids) => {
                let ids = GlobalIds::Given(gids);
                bisect_dist(group, &b, points, ids, self.targets, out)?
            }
            // The serial walk checked every point at the root.
            None => match scratch {
                Some(s) => b.run_checked(s, points, self.targets, out)?,
                None => b.run_checked(&mut Scratch::default(), points, self.targets, out)?,
            },
        }))
    }
}

impl Level<'_> {
    /// A DIFFUSION level: from the previous children in `out`, objects move between
    /// neighbouring children until the level's `IMBALANCE_TOL` is met
    /// ([`diffusion::Diffusion`], with the level's `METHOD` and `EFF_MIN`). With no previous
    /// child to start from (the first partition, or no object of the group was in this
    /// subtree before) the level partitions afresh with HSFC.
    ///
    /// Over several ranks every rank gathers the group's objects and runs the same serial
    /// rebalance on them in global-id order (the serial walk's order), so the result is the
    /// serial one for every rank count; memory is the group's objects on each rank. The
    /// kNN graph, the costly part, is built together: each rank queries its own objects.
    fn diffuse<C: comm::Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
        group: &C,
        points: Points<'_>,
        gids: Option<&[u64]>,
        out: &mut [u32],
    ) -> Result<LevelCuts, Error> {
        let k = self.targets.len();
        let mut known = [if self.from_previous {
            out.iter().filter(|&&c| (c as usize) < k).count() as u64
        } else {
            0
        }];
        if gids.is_some() {
            group.allreduce_u64(ReduceOp::Sum, &mut known)?;
        }
        if known[0] == 0 {
            let h = hsfc::Hsfc {
                par: self.par,
                tolerance: hsfc_tolerance(self.method),
            };
            return Ok(LevelCuts::Hsfc(h.partition_with(
                ws,
                group,
                points,
                self.targets,
                out,
            )?));
        }
        let d = diffusion::Diffusion {
            transfer: diffusion::Transfer {
                method: self.method.transfer,
                eff_min: self.method.eff_min,
                ..diffusion::Diffusion::default().transfer
            },
            tolerance: self.method.imbalance_tol - 1.0,
            par: self.par,
            ..diffusion::Diffusion::default()
        };
        let r = match gids {
            None => d.rebalance(points, None, self.targets, out)?,
            Some(gids) => rebalance_gathered(&d, group, points, gids, self.targets, out)?,
        };
        let mut part_counts = vec![0usize; k];
        for &c in out.iter() {
            part_counts[c as usize] += 1;
        }
        if gids.is_some() {
            let mut all: Vec<u64> = part_counts.iter().map(|&c| c as u64).collect();
            group.allreduce_u64(ReduceOp::Sum, &mut all)?;
            part_counts = all.iter().map(|&c| c as usize).collect();
        }
        Ok(LevelCuts::Diffusion(Diffused {
            part_counts,
            rounds: r.rounds.len(),
            imbalance: r.imbalance,
            met: r.met,
        }))
    }
}

/// [`diffusion::Diffusion::rebalance`] of the objects of every rank of `group`: each rank
/// gathers them all (coordinates, weights, global ids, previous children), orders them by
/// global id, runs the same rebalance, and keeps its own objects' children.
fn rebalance_gathered<C: comm::Comm>(
    d: &diffusion::Diffusion,
    group: &C,
    points: Points<'_>,
    gids: &[u64],
    targets: &[f64],
    out: &mut [u32],
) -> Result<diffusion::Rebalance, Error> {
    let (coords, dim, weights) = points.into_parts();
    let all_x = group.allgatherv::<f64>(coords)?;
    let all_w = match weights {
        Some(w) => Some(group.allgatherv::<f64>(w)?),
        None => None,
    };
    let mut ids_prev: Vec<u64> = Vec::with_capacity(2 * gids.len());
    for (&g, &c) in gids.iter().zip(out.iter()) {
        ids_prev.push(g);
        ids_prev.push(u64::from(c));
    }
    let all_ids = group.allgatherv::<u64>(&ids_prev)?;
    let ids = all_ids.data();
    let n = ids.len() / 2;
    // Positions in gathered order, sorted by global id (ids are distinct).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&i| ids[2 * i]);
    let x = all_x.data();
    let sorted_x: Vec<f64> = (order.iter())
        .flat_map(|&i| x[i * dim..(i + 1) * dim].iter().copied())
        .collect();
    let sorted_w: Option<Vec<f64>> = all_w.map(|w| order.iter().map(|&i| w.data()[i]).collect());
    let mut parts: Vec<u32> = order.iter().map(|&i| ids[2 * i + 1] as u32).collect();
    // This rank's objects' places in the sorted order.
    let mine = gids
        .iter()
        .map(|g| {
            order
                .binary_search_by_key(g, |&i| ids[2 * i])
                .map(|at| at as u32)
                .map_err(|_| Error::Inconsistent {
                    what: "an object's global id is missing from its group's gather",
                })
        })
        .collect::<Result<Vec<u32>, Error>>()?;
    let graph = knn_shared(group, d, &sorted_x, dim, &mine, &order)?;
    let r = d.rebalance(
        Points::new(&sorted_x, dim, sorted_w.as_deref()),
        Some(&graph),
        targets,
        &mut parts,
    )?;
    for (c, &at) in out.iter_mut().zip(&mine) {
        *c = parts[at as usize];
    }
    Ok(r)
}

/// The k-nearest-neighbour graph of a gathered group ([`part_api::Csr::knn`] of `sorted_x`,
/// the group's objects in global-id order), built by every rank of `group` together: each
/// queries its own objects (`mine`: their places in that order) and one `allgatherv` shares
/// the lists, so a rank does its share of the queries rather than all of them (a rank on a
/// loaded core holds fewer objects). The graph is the same for every rank count.
fn knn_shared<C: comm::Comm>(
    group: &C,
    d: &diffusion::Diffusion,
    sorted_x: &[f64],
    dim: usize,
    mine: &[u32],
    order: &[usize],
) -> Result<part_api::Csr, Error> {
    let n = order.len();
    let k = d.neighbours.min(n.saturating_sub(1));
    let own = part_api::Csr::nearest_lists(sorted_x, dim, d.neighbours, Some(mine), d.par)?;
    let all = group.allgatherv::<u32>(&own)?;
    // The gather is in the group's gathered order: entry i is the object at order⁻¹(i).
    let mut lists = vec![0u32; n * k];
    if k > 0 {
        for (&i, at) in order.iter().zip(0..) {
            let src = &all.data()[i * k..(i + 1) * k];
            lists[at * k..(at + 1) * k].copy_from_slice(src);
        }
    }
    Ok(part_api::Csr::from_nearest(n, d.neighbours, &lists)?)
}

/// The `hsfc` repartition tolerance of a level: `IMBALANCE_TOL − 1`, below `hsfc`'s limit of 1.
fn hsfc_tolerance(m: &LevelMethod) -> f64 {
    (m.imbalance_tol - 1.0).clamp(0.0, 0.99)
}

#[cfg(test)]
mod tests {
    use super::LevelWorkspace;

    /// The smallest workspace that holds the level, else the largest; by the buffers the
    /// level uses. (Before, the pool handed out whichever came back last, so a large level
    /// running beside a small one grew the small workspace on the second call.)
    #[test]
    fn a_level_gets_the_workspace_that_fits_it() {
        let ws = |h: usize, b: usize| LevelWorkspace {
            served: [h, b],
            ..Default::default()
        };
        let pool = [ws(1000, 10), ws(100, 5000), ws(500, 0)];
        assert_eq!(LevelWorkspace::best_fit(&pool, 0, 400), Some(2));
        assert_eq!(LevelWorkspace::best_fit(&pool, 0, 600), Some(0));
        assert_eq!(LevelWorkspace::best_fit(&pool, 0, 50), Some(1));
        assert_eq!(LevelWorkspace::best_fit(&pool, 0, 9999), Some(0));
        assert_eq!(LevelWorkspace::best_fit(&pool, 1, 20), Some(1));
        assert_eq!(LevelWorkspace::best_fit(&pool, 1, 9), Some(0));
        assert_eq!(LevelWorkspace::best_fit(&[], 1, 9), None);
    }
}
