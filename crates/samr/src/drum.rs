//! DRUM in the loop for the kernel: each rank's monitoring agent senses the part sizes
//! before each regrid (the ranks' capacities `C_k` for the next layout), the ranks are pinned
//! to their nodes' CPUs, and a run starts the competing processes it is given (Sinha &
//! Parashar §6.1.1's synthetic load).

use crate::{RankRun, SamrError};
use comm::Comm;
use drum_loop::{DrumLoop, LoopConfig, LoopReport};
use drum_model::Machine;
use drum_model::load::{LoadEvent, LoadSpec, StepLoads};
use part_api::{Points, Reduce};
use serde::Serialize;

/// What a rank does besides the kernel: its loads and its DRUM agent.
#[derive(Debug, Clone, Default)]
pub struct DrumSetup {
    /// The machine (its `cpus` for pinning and loads).
    pub machine: Option<Machine>,
    /// The loop's settings (`None`: no agent, the capacities stay as given).
    pub config: Option<LoopConfig>,
    /// Every rank's loads.
    pub loads: Vec<LoadSpec>,
    /// The CPUs of each rank, when the ranks are pinned.
    pub cpus: Option<Vec<Vec<usize>>>,
}

/// What DRUM sensed before a regrid, as the step's JSON shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Sensed {
    /// Seconds of measurement the powers came from (0: unchanged, the window was too short
    /// or sensing was not due).
    pub measured_s: f64,
    /// Part sizes from the monitored powers (whatever the sizing).
    pub monitored_sizes: Vec<f64>,
    /// The capacities given to the balancer (the sizing's part sizes).
    pub capacities: Vec<f64>,
    /// What went wrong and was worked around.
    pub warnings: Vec<String>,
}

impl Sensed {
    fn of(r: LoopReport) -> Sensed {
        Sensed {
            measured_s: r.measured_s,
            monitored_sizes: r.monitored_sizes,
            capacities: r.targets,
            warnings: r.warnings,
        }
    }
}

/// One rank's side: its loads and its DRUM agent.
#[derive(Debug)]
pub struct RankDrum {
    loads: StepLoads,
    drum: Option<DrumLoop>,
}

impl RankDrum {
    /// Starts the agent (collective when DRUM is in the loop) and pins this rank when the
    /// ranks are pinned and it runs in its own process (thread ranks are pinned by
    /// `comm::ThreadComm::run`).
    pub fn start<C: Comm + Reduce>(
        comm: &C,
        s: &DrumSetup,
        pin_self: bool,
    ) -> Result<RankDrum, SamrError> {
        let rank = Comm::rank(comm);
        if pin_self && let Some(cpus) = &s.cpus {
            comm::pin_current_thread(rank, &cpus[rank])?;
        }
        let node_cpus: Vec<u32> = s
            .machine
            .as_ref()
            .and_then(|m| m.node(m.rank_node(rank)).cpus.as_ref())
            .map(|c| c.cpus().to_vec())
            .unwrap_or_default();
        let drum = match (&s.machine, &s.config) {
            (Some(m), Some(cfg)) => Some(DrumLoop::start(comm, m.clone(), cfg.clone())?),
            _ => None,
        };
        Ok(RankDrum {
            loads: StepLoads::new(rank, &node_cpus, &s.loads),
            drum,
        })
    }

    /// Before level-0 step `step` (0-based): starts and stops the loads due; when the step
    /// ends with a regrid, senses the capacities and gives them to the run (collective).
    pub fn before_step<C: Comm + Reduce>(
        &mut self,
        run: &mut RankRun<C>,
        step: usize,
    ) -> Result<(Vec<LoadEvent>, Option<Sensed>), SamrError> {
        let events = self.loads.at_step(step)?;
        let Some(drum) = &mut self.drum else {
            return Ok((events, None));
        };
        if !run.regrid_due() {
            return Ok((events, None));
        }
        let rank = Comm::rank(run.comm()) as u32;
        let (mut centres, mut work) = (Vec::new(), Vec::new());
        for p in run.layout().patches.iter().filter(|p| p.rank == rank) {
            centres.extend(p.b.rect.centre_level0(p.b.level));
            work.push(p.b.work() as f64);
        }
        let mut parts = vec![rank; work.len()];
        let report = drum.rebalance(
            run.comm(),
            Points::new(&centres, 2, Some(&work)),
            &mut parts,
        )?;
        run.set_capacities(&report.targets)?;
        Ok((events, Some(Sensed::of(report))))
    }

    /// Stops the loads and the agent: the loads' processes and CPU seconds.
    pub fn stop(mut self) -> Result<(usize, f64), SamrError> {
        let loads = self.loads.stop()?;
        if let Some(d) = self.drum.take() {
            d.stop()?;
        }
        Ok(loads)
    }
}
