//! One level of the walk: a node's method on the objects of its subtree. The one place where
//! the method a `<lbmethod>` names becomes a partitioner call, for the serial and the
//! distributed walk alike.

use super::{LevelCuts, LevelMethod};
use crate::bisect::{Bisector, dist::bisect_dist};
use crate::{Error, Method, Par};
use drum_model::PartitionMethod;
use part_api::Reduce;
use part_api::{Partitioner, Points};

/// A node's split: its method, the threads, its children's targets, and with KEEP_CUTS its
/// previous cuts.
pub(super) struct Level<'a> {
    pub(super) method: &'a LevelMethod,
    pub(super) par: Par,
    pub(super) targets: &'a [f64],
    pub(super) prev: Option<&'a LevelCuts>,
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
    /// one-rank group (the serial walk, which has checked every point at the root).
    pub(super) fn run<C: comm::Comm + Reduce>(
        &self,
        ws: &mut hsfc::Workspace,
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
            PartitionMethod::Rcb => bisector(Method::Rcb),
            PartitionMethod::Rib => bisector(Method::Rib),
        };
        Ok(LevelCuts::Bisection(match gids {
            Some(gids) => bisect_dist(group, &b, points, gids, self.targets, out)?,
            // The serial walk checked every point at the root.
            None => b.run_checked(points, self.targets, out)?,
        }))
    }
}

/// The `hsfc` repartition tolerance of a level: `IMBALANCE_TOL − 1`, below `hsfc`'s limit of 1.
fn hsfc_tolerance(m: &LevelMethod) -> f64 {
    (m.imbalance_tol - 1.0).clamp(0.0, 0.99)
}
