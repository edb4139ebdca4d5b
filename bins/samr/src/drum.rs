//! DRUM in the loop for the SAMR run: each rank's monitoring agent, the part sizes it
//! senses before each regrid (the ranks' capacities `C_k` for the next layout), the ranks
//! pinned to their nodes' CPUs, and the competing processes a run starts (Sinha & Parashar
//! §6.1.1's synthetic load).

use anyhow::{Result, bail};
use clap::Args;
use comm::Comm;
use drum_loop::{DrumLoop, LoopConfig, LoopReport, RebalanceMode, Sensing, Sizing};
use drum_model::Machine;
use drum_model::load::{LoadEvent, LoadSpec, StepLoads, check_loads, machine_loads};
use part_api::{Points, Reduce};
use samr_kernel::{RankRun, SamrError};
use serde::Serialize;
use std::time::Duration;

/// The flags of DRUM in the loop.
#[derive(Debug, Clone, Args)]
pub struct DrumArgs {
    /// DRUM in the loop (needs --machine): the ranks' capacities before each regrid are
    /// equal parts (`uniform`), the machine's ratings (`static`), or the powers DRUM's agents
    /// measure (`monitored`, with the power model of --model).
    #[arg(long, value_name = "uniform|static|monitored")]
    pub balance: Option<Sizing>,
    /// With --balance monitored: renew the powers at every Nth regrid (`1`: each), or
    /// `once` (at the first regrid with enough measurement, then never).
    #[arg(long, default_value = "1")]
    pub sensing: Sensing,
    /// The agents' sampling period in milliseconds.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub monitor_period_ms: u64,
    /// N competing processes on the CPUs of rank RANK's node from level-0 step STEP to END
    /// (RANK[:N][@STEP[-END]]; repeatable; needs --machine with `cpus`).
    #[arg(long, value_name = "RANK[:N][@STEP[-END]]")]
    pub load: Vec<LoadSpec>,
    /// Also start the competing processes the machine file describes (`load` attributes).
    #[arg(long)]
    pub machine_load: bool,
    /// Do not pin the ranks to their nodes' `cpus` (they are pinned when every computing
    /// node of --machine lists them).
    #[arg(long)]
    pub no_pin: bool,
}

/// What a rank does besides the kernel: its loads and its DRUM agent.
#[derive(Debug, Clone)]
pub struct DrumSetup {
    /// The machine (its `cpus` for pinning and loads).
    pub machine: Option<Machine>,
    /// The loop's settings, with --balance.
    pub config: Option<LoopConfig>,
    /// Every rank's loads.
    pub loads: Vec<LoadSpec>,
    /// The CPUs of each rank, when the ranks are pinned.
    pub cpus: Option<Vec<Vec<usize>>>,
}

impl DrumArgs {
    /// Checks the flags against the machine and the power flags' configuration.
    pub fn setup(
        &self,
        machine: Option<&Machine>,
        power: drum_model::PowerConfig,
    ) -> Result<DrumSetup> {
        let Some(m) = machine else {
            if self.balance.is_some() || !self.load.is_empty() || self.machine_load {
                bail!(
                    "--balance, --load and --machine-load need --machine (its nodes' cpus and ratings)"
                );
            }
            return Ok(DrumSetup {
                machine: None,
                config: None,
                loads: Vec::new(),
                cpus: None,
            });
        };
        let mut loads = self.load.clone();
        if self.machine_load {
            loads.extend(machine_loads(m));
        }
        check_loads(m, &loads).map_err(|e| anyhow::anyhow!("--load: {e}"))?;
        let config = self.balance.map(|sizing| LoopConfig {
            sizing,
            power,
            // The kernel lays out its boxes itself: DRUM only senses the part sizes, and
            // its own partition of the patches' centres is made once, unused.
            rebalance: RebalanceMode::Never,
            sensing: self.sensing,
            period: Duration::from_millis(self.monitor_period_ms),
            probe: None,
            ..LoopConfig::default()
        });
        if let Some(c) = &config {
            drum_model::static_powers(m, &c.power)
                .map_err(|e| anyhow::anyhow!("the powers of {}: {e}", m.source()))?;
        }
        let cpus = m.rank_cpus().filter(|_| !self.no_pin).map(|c| {
            c.iter()
                .map(|r| r.iter().map(|&x| x as usize).collect())
                .collect()
        });
        Ok(DrumSetup {
            machine: Some(m.clone()),
            config,
            loads,
            cpus,
        })
    }
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

/// A load event as a line of the run's log.
pub fn describe(e: &LoadEvent, step: usize) -> String {
    match e {
        LoadEvent::Started { spec, pids, cpus } => format!(
            "--load {spec}: {} competing process(es) (pid {pids:?}) on CPU {cpus:?} from step {step}",
            spec.procs
        ),
        LoadEvent::Stopped { spec, report } => format!(
            "--load {spec} stopped at step {step} ({:.2} CPU s)",
            report.cpu_seconds
        ),
    }
}
