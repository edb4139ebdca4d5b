//! The one interface an application balances through: a [`Balancer`] (what to do, the same
//! on every rank) starts a [`Balancing`] (one rank's state), which the application calls at
//! each rebalance point without knowing which balancer it is.

use crate::{DrumLoop, Error, LoopConfig, LoopReport, LoopSummary};
use comm::Comm;
use drum_model::Machine;
use part_api::{Partitioner, Points, Reduce};

/// How objects are assigned to ranks at each rebalance point (by their positions and work
/// weights). A specification: every rank starts its own [`Balancing`] from it.
#[derive(Debug, Clone)]
pub enum Balancer {
    /// Flat HSFC into equal parts; after the first point a KEEP_CUTS repartition from the
    /// previous cuts, at every point.
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

    /// What the last migration cost ([`DrumLoop::record_migration`]: every rank passes the
    /// same figures); nothing for [`Balancer::Flat`].
    pub fn record_migration(&mut self, seconds: f64, bytes: f64, weight: f64) {
        if let State::Drum(lp) = &mut self.0 {
            lp.record_migration(seconds, bytes, weight);
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
