//! The one interface an application balances through: a [`Balancer`] (what to do, the same
//! on every rank) starts a [`Balancing`] (one rank's state), which the application calls at
//! each rebalance point without knowing which balancer it is.

use crate::{DrumLoop, Error, LoopConfig, LoopReport, LoopSummary, PointFigures};
use comm::Comm;
use drum_model::Machine;
use part_api::{Partitioner, Points, Reduce};

/// How objects are assigned to ranks at each rebalance point (by their positions and work
/// weights). A specification: every rank starts its own [`Balancing`] from it.
#[derive(Debug, Clone)]
pub enum Balancer {
    /// Flat HSFC into equal parts; after the first point a KEEP_CUTS repartition from the
    /// previous cuts, at every point whose parts are more than [`FLAT_TOLERANCE`] above
    /// equal (an application that knows every rank's load asks [`Balancing::keeps`] and
    /// skips the others).
    Flat,
    /// DRUM in the loop ([`DrumLoop`]): `hier-part` along the machine's tree (one rank per
    /// rank of the machine) with the part sizes of `config.sizing` (equal, static ratings,
    /// or monitored powers), a rebalance policy, and each rank's monitoring agent.
    Drum {
        /// The machine.
        machine: Box<Machine>,
        /// The loop's settings.
        config: Box<LoopConfig>,
    },
}

impl Balancer {
    /// Flat HSFC into equal parts.
    pub fn flat() -> Balancer {
        Balancer::Flat
    }

    /// DRUM in the loop on `machine` with `config`.
    pub fn drum(machine: Machine, config: LoopConfig) -> Balancer {
        Balancer::Drum {
            machine: Box::new(machine),
            config: Box::new(config),
        }
    }

    /// The number of ranks this balancer needs, if fixed (a machine's).
    pub fn ranks(&self) -> Option<usize> {
        match self {
            Balancer::Flat => None,
            Balancer::Drum { machine, .. } => Some(machine.num_ranks()),
        }
    }

    /// This rank's state (collective over `comm`; for [`Balancer::Drum`] the agents start and
    /// the link between the root's groups is measured). A communicator of another size than
    /// [`Balancer::ranks`] is an [`Error::Partition`] of
    /// [`hier_part::Error::RankCount`].
    pub fn start<C: Comm + Reduce>(&self, comm: &C) -> Result<Balancing, Error> {
        Ok(Balancing(match self {
            Balancer::Flat => State::Flat { previous: None },
            Balancer::Drum { machine, config } => State::Drum(Box::new(DrumLoop::start(
                comm,
                machine.as_ref().clone(),
                config.as_ref().clone(),
            )?)),
        }))
    }
}

/// How far above the mean the heaviest rank's load may be before [`Balancer::Flat`]
/// repartitions (1 %): a point within it keeps every object where it is (no partitioner, no
/// migration), a point beyond it repartitions into exactly equal parts.
pub const FLAT_TOLERANCE: f64 = 0.01;

/// One rank's balancing state, kept from one rebalance point to the next.
#[derive(Debug)]
pub struct Balancing(State);

#[derive(Debug)]
enum State {
    Flat {
        /// The last partition (its cuts).
        previous: Option<Box<hsfc::Partition>>,
    },
    Drum(Box<DrumLoop>),
}

impl Balancing {
    /// The rebalance point (collective): writes each local object's new rank into `parts`
    /// (which holds its current rank on entry); returns the loop's report for
    /// [`Balancer::Drum`].
    pub fn rebalance<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<Option<LoopReport>, Error> {
        let size = Comm::size(comm);
        match &mut self.0 {
            State::Flat { .. } if size == 1 => {
                parts.fill(0);
                Ok(None)
            }
            State::Flat { previous } => {
                // A workspace per point: kept between points, its buffers (sized for the
                // step's objects) would sit on top of the application's peak; allocating
                // them takes far less than partitioning.
                let ws = &mut hsfc::Workspace::default();
                let targets = vec![1.0; size];
                let h = hsfc::Hsfc::default();
                let p = match previous.as_deref() {
                    Some(prev) => h.repartition(ws, comm, prev, points, &targets, parts),
                    None => h.partition_with(ws, comm, points, &targets, parts),
                }
                .map_err(hier_part::Error::from)?;
                *previous = Some(Box::new(p));
                Ok(None)
            }
            State::Drum(lp) => Ok(Some(lp.rebalance(comm, points, parts)?)),
        }
    }

    /// [`Balancing::rebalance`] with points made only when they are needed
    /// ([`DrumLoop::rebalance_lazy`]): `fill` writes the coordinates of the `n` local
    /// objects into its first vector (returning their dimension) and their current ranks
    /// into its second. [`Balancer::Flat`] always partitions, so always fills;
    /// [`Balancer::Drum`] fills only when its policy repartitions. Returns the loop's report
    /// (for [`Balancer::Drum`]) and each object's new rank (`None`: every object stays).
    pub fn rebalance_lazy<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        n: usize,
        weights: Option<&[f64]>,
        fill: impl FnOnce(&mut Vec<f64>, &mut Vec<u32>) -> usize,
    ) -> Result<(Option<LoopReport>, Option<Vec<u32>>), Error> {
        if let State::Drum(lp) = &mut self.0 {
            let (report, parts) = lp.rebalance_lazy(comm, n, weights, fill)?;
            return Ok((Some(report), parts));
        }
        let (coords, mut parts, dim) = crate::run::made_points(n, fill)?;
        let report = self.rebalance(comm, Points::new(&coords, dim, weights), &mut parts)?;
        Ok((report, Some(parts)))
    }

    /// This rank's figures for a rebalance point carried on a collective of the
    /// application's ([`DrumLoop::point_figures`]) for [`Balancer::Drum`]; `None` for
    /// [`Balancer::Flat`], which has none (its points need no gather of their own).
    pub fn point_figures(&mut self, weights: Option<&[f64]>, n: usize) -> Option<PointFigures> {
        match &mut self.0 {
            State::Drum(lp) => Some(lp.point_figures(weights, n)),
            State::Flat { .. } => None,
        }
    }

    /// [`Balancing::rebalance_lazy`] on gathered figures ([`Balancing::point_figures`] on
    /// every rank; `all[r]`: rank r's bytes): [`DrumLoop::rebalance_lazy_gathered`] for
    /// [`Balancer::Drum`]. Figures from another balancer than this one are an error.
    pub fn rebalance_lazy_gathered<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        mine: PointFigures,
        all: &[&[u8]],
        n: usize,
        weights: Option<&[f64]>,
        fill: impl FnOnce(&mut Vec<f64>, &mut Vec<u32>) -> usize,
    ) -> Result<(Option<LoopReport>, Option<Vec<u32>>), Error> {
        let State::Drum(lp) = &mut self.0 else {
            return Err(Error::Empty {
                what: "a flat balancer's rebalance-point figures",
            });
        };
        let (report, parts) = lp.rebalance_lazy_gathered(comm, mine, all, n, weights, fill)?;
        Ok((Some(report), parts))
    }

    /// Whether this rebalance point keeps the current partition, from every rank's load
    /// (`loads[r]`: the weight rank r holds; the same slice on every rank, so every rank
    /// answers alike): for [`Balancer::Flat`] after its first point, when the heaviest is
    /// within [`FLAT_TOLERANCE`] of the mean. Then the application skips
    /// [`Balancing::rebalance`] (and computing the points it would pass) and keeps every
    /// object where it is. Always `false` for [`Balancer::Drum`], whose policy decides inside
    /// the rebalance, and for loads that are not finite and positive.
    pub fn keeps(&self, loads: &[f64]) -> bool {
        match &self.0 {
            State::Flat { previous: Some(_) } if !loads.is_empty() => {
                let total: f64 = loads.iter().sum();
                let max = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mean = total / loads.len() as f64;
                total.is_finite() && total > 0.0 && max <= (1.0 + FLAT_TOLERANCE) * mean
            }
            _ => false,
        }
    }

    /// What the last migration cost ([`DrumLoop::record_migration`]: every rank passes the
    /// same figures); nothing for [`Balancer::Flat`].
    pub fn record_migration(&mut self, seconds: f64, bytes: f64, weight: f64) {
        if let State::Drum(lp) = &mut self.0 {
            lp.record_migration(seconds, bytes, weight);
        }
    }

    /// [`DrumLoop::record_repartition`] ([`Balancer::Drum`]; else nothing).
    pub fn record_repartition(&mut self, seconds: f64, total_weight: f64) {
        if let State::Drum(lp) = &mut self.0 {
            lp.record_repartition(seconds, total_weight);
        }
    }

    /// [`DrumLoop::set_remaining_steps`] ([`Balancer::Drum`]; else nothing).
    pub fn set_remaining_steps(&mut self, steps: Option<u32>) {
        if let State::Drum(lp) = &mut self.0 {
            lp.set_remaining_steps(steps);
        }
    }

    /// Whether [`Balancing::record_migration`] is used (the application may skip measuring).
    pub fn wants_migration_costs(&self) -> bool {
        matches!(self.0, State::Drum(_))
    }

    /// The machine, for [`Balancer::Drum`].
    pub fn machine(&self) -> Option<&Machine> {
        match &self.0 {
            State::Drum(lp) => Some(lp.machine()),
            State::Flat { .. } => None,
        }
    }

    /// Stops this rank's monitoring agent ([`Balancer::Drum`]) and reports its cost; the
    /// state becomes a flat one.
    pub fn stop(&mut self) -> Result<Option<LoopSummary>, Error> {
        match std::mem::replace(&mut self.0, State::Flat { previous: None }) {
            State::Drum(lp) => lp.stop(),
            State::Flat { .. } => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use part_api::Serial;

    /// The flat balancer keeps a partition within 1 % of equal after its first point, never
    /// before it, never for bad loads; the first point itself partitions.
    #[test]
    fn flat_keeps_only_near_equal_parts_after_its_first_point() {
        let mut b = Balancing(State::Flat { previous: None });
        assert!(!b.keeps(&[100.0, 100.0]), "no partition yet");
        b.0 = State::Flat {
            previous: Some(Box::new(first_partition())),
        };
        assert!(b.keeps(&[100.0, 100.0]));
        assert!(b.keeps(&[100.9, 99.1]));
        assert!(!b.keeps(&[101.1, 98.9]));
        assert!(!b.keeps(&[]));
        assert!(!b.keeps(&[0.0, 0.0]));
        assert!(!b.keeps(&[f64::NAN, 1.0]));
        assert!(!b.keeps(&[f64::INFINITY, 1.0]));
    }

    /// The flat balancer fills at every point, through the same length checks as DRUM's.
    #[test]
    fn flat_lazy_points_are_made_and_checked() {
        let comm = Serial;
        let mut b = Balancing(State::Flat { previous: None });
        let xy = [0.0, 0.0, 1.0, 1.0, 0.5, 0.25, 0.75, 0.5];
        let (report, parts) = b
            .rebalance_lazy(&comm, 4, None, |c, p| {
                c.extend_from_slice(&xy);
                p.resize(4, 0);
                2
            })
            .unwrap();
        assert!(report.is_none());
        assert_eq!(parts, Some(vec![0; 4]));
        let e = b
            .rebalance_lazy(&comm, 4, None, |c, p| {
                c.extend_from_slice(&xy[..6]);
                p.resize(4, 0);
                2
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("coordinates has 6 entries, expected 8"), "{e}");
    }

    /// A flat balancer has no rebalance-point figures, and figures handed to it are an error
    /// naming it, before any point is made.
    #[test]
    fn flat_has_no_point_figures_and_refuses_gathered_ones() {
        let mut b = Balancing(State::Flat { previous: None });
        assert!(b.point_figures(None, 4).is_none());
        let e = b
            .rebalance_lazy_gathered(
                &Serial,
                PointFigures {
                    bytes: Vec::new(),
                    cut_s: 0.0,
                },
                &[&[]],
                4,
                None,
                |_, _| unreachable!("no points"),
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a flat balancer's rebalance-point figures"),
            "{e}"
        );
    }

    fn first_partition() -> hsfc::Partition {
        let xy = [0.0, 0.0, 1.0, 1.0, 0.5, 0.25, 0.75, 0.5];
        let mut parts = [0u32; 4];
        let h = hsfc::Hsfc::default();
        h.partition_with(
            &mut hsfc::Workspace::default(),
            &Serial,
            Points::new(&xy, 2, None),
            &[1.0, 1.0],
            &mut parts,
        )
        .unwrap()
    }
}
