//! DRUM by a parameter (DRUM 2004 and 2005: "applications that already use Zoltan can make
//! use of DRUM simply by setting a Zoltan parameter"): `USE_DRUM=1` with
//! `DRUM_MACHINE_FILE=path` gives every `Zoltan_LB_Partition` DRUM's part size for each
//! process (MPI rank r of the Zoltan communicator is the machine's rank r, DESIGN §2), from
//! the file's static ratings, or with `DRUM_MONITORING=1` from the window the monitoring agent
//! measured since the previous call; `LB_METHOD=HIER` partitions along the machine tree.
//!
//! This is the one place the Zoltan side touches the DRUM loop (`hier_part::drum_loop`).

use crate::error::Error;
use comm::{Comm, MpiComm};
use drum_model::{Machine, PowerConfig, PowerModel, static_powers};
use hier_part::Plan;
// The DRUM loop and the policy, for this file and `drum.rs` (they move to a crate of their
// own: the one place to change then).
pub(crate) use hier_part::drum_loop::{DrumLoop, LoopConfig, RebalanceMode, Sizing};
pub(crate) use hier_part::rebalance::{Observation, Policy, Reason};
use std::time::Duration;

/// Where the sizes come from.
enum Source {
    /// The machine file's ratings: fixed sizes and plan.
    Static { sizes: Vec<f64>, plan: Box<Plan> },
    /// A running agent for this rank's node.
    Monitored(Box<DrumLoop>),
}

/// The DRUM side of one Zoltan structure.
pub(crate) struct DrumState {
    source: Source,
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
            let powers = static_powers(&machine, &power)?;
            let plan = Plan::new(&machine, &powers)?;
            Source::Static {
                sizes: powers.parts,
                plan: Box::new(plan),
            }
        };
        Ok(DrumState {
            source,
            warnings: Vec::new(),
        })
    }

    /// Renews the monitored sizes from the window since the last call (collective; nothing
    /// to do for static sizes).
    pub(crate) fn refresh(&mut self, comm: &MpiComm) -> Result<(), Error> {
        if let Source::Monitored(l) = &mut self.source {
            let sensed = l.sense(comm)?;
            self.warnings.extend(sensed.warnings);
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
        match &self.source {
            Source::Static { plan, .. } => plan,
            Source::Monitored(l) => l.plan(),
        }
    }

    /// Stops the agent, if any.
    pub(crate) fn stop(self) -> Result<(), Error> {
        if let Source::Monitored(l) = self.source {
            l.stop()?;
        }
        Ok(())
    }
}
