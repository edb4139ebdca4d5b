//! DRUM by a parameter (DRUM 2004 and 2005: "applications that already use Zoltan can make
//! use of DRUM simply by setting a Zoltan parameter"): `USE_DRUM=1` with
//! `DRUM_MACHINE_FILE=path` gives every `Zoltan_LB_Partition` DRUM's part size for each
//! process (MPI rank r of the Zoltan communicator is the machine's rank r, DESIGN §2), from
//! the file's static ratings, or with `DRUM_MONITORING=1` from the window the monitoring agent
//! measured since the previous call; `LB_METHOD=HIER` partitions along the machine tree.
//!
//! This is the one place the Zoltan side touches the DRUM loop (`drum_loop::DrumLoop`).

use crate::error::Error;
use comm::{Comm, MpiComm};
use drum_loop::{DrumLoop, LoopConfig, RebalanceMode, Sizing};
use drum_model::{Machine, PowerConfig, PowerModel, static_powers};
use hier_part::Plan;
use std::time::Duration;

/// Where the sizes come from.
enum Source {
    /// The machine file's ratings: fixed sizes.
    Static { sizes: Vec<f64> },
    /// A running agent for this rank's node.
    Monitored(Box<DrumLoop>),
}

/// The DRUM side of one Zoltan structure.
pub(crate) struct DrumState {
    source: Source,
    /// The machine tree with each level's method and its children's targets from the sizes
    /// in use (renewed with them).
    plan: Plan,
    /// The agent's warnings not yet shown.
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for DrumState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrumState")
            .field("monitored", &matches!(self.source, Source::Monitored(_)))
            .finish()
    }
}

/// What DRUM needs from the parameters.
#[derive(Debug, Clone)]
pub(crate) struct DrumParams<'a> {
    pub file: &'a str,
    pub monitoring: bool,
    pub w_comm: f64,
    pub period_ms: u64,
}

impl DrumState {
    /// Reads and validates the machine file (errors name file:line:col), checks that it has
    /// one rank per process of `comm`, and under monitoring starts this rank's agent (local:
    /// no collective, so it may run inside `Zoltan_Set_Param`). The agent measures the calling
    /// thread, the application's.
    pub(crate) fn start(comm: &MpiComm, p: &DrumParams<'_>) -> Result<DrumState, Error> {
        let machine = Machine::from_file(p.file)?;
        if machine.num_ranks() != comm.size() {
            return Err(Error::BadInput(format!(
                "{}: the machine has {} ranks, the Zoltan communicator {} processes (MPI rank r \
                 is the machine's rank r)",
                p.file,
                machine.num_ranks(),
                comm.size()
            )));
        }
        let power = PowerConfig {
            model: PowerModel::Drum { w_comm: p.w_comm },
            ..PowerConfig::default()
        };
        // The levels' methods come from the file; the children's targets from the sizes in
        // use (the ratings' until the agent measured).
        let powers = static_powers(&machine, &power)?;
        let plan = Plan::new(&machine, &powers)?;
        let source = if p.monitoring {
            let cfg = LoopConfig {
                sizing: Sizing::Monitored,
                power,
                rebalance: RebalanceMode::Always,
                period: Duration::from_millis(p.period_ms),
                // No link probe: starting stays local to this rank.
                probe: None,
                ..LoopConfig::default()
            };
            Source::Monitored(Box::new(DrumLoop::start(comm, machine, cfg)?))
        } else {
            Source::Static {
                sizes: powers.parts,
            }
        };
        Ok(DrumState {
            source,
            plan,
            warnings: Vec::new(),
        })
    }

    /// Renews the monitored sizes from the window since the last call, and the plan's
    /// targets with them (collective; nothing to do for static sizes).
    pub(crate) fn refresh(&mut self, comm: &MpiComm) -> Result<(), Error> {
        if let Source::Monitored(l) = &mut self.source {
            let sensed = l.measure(comm)?;
            self.warnings.extend(sensed.warnings);
            if sensed.measured_s > 0.0 {
                self.plan = self.plan.with_part_sizes(l.part_sizes())?;
            }
        }
        Ok(())
    }

    /// Each rank's part size.
    pub(crate) fn sizes(&self) -> &[f64] {
        match &self.source {
            Source::Static { sizes, .. } => sizes,
            Source::Monitored(l) => l.part_sizes(),
        }
    }

    /// The machine tree with each level's method and its children's targets.
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Stops the agent, if any.
    pub(crate) fn stop(self) -> Result<(), Error> {
        if let Source::Monitored(l) = self.source {
            l.stop()?;
        }
        Ok(())
    }
}
