//! The flags of DRUM in the loop for the SAMR run (the work is `samr_kernel::drum`'s).

use anyhow::{Result, bail};
use clap::Args;
use drum_loop::{LoopConfig, RebalanceMode, Sensing, Sizing};
use drum_model::Machine;
use drum_model::load::{LoadEvent, LoadSpec, check_loads, machine_loads};
use samr_kernel::drum::DrumSetup;
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

/// A load event as a line of the run's log (`None`: a death the loads' watch already
/// reported, at once, with its step).
pub fn describe(e: &LoadEvent, step: usize) -> Option<String> {
    Some(match e {
        LoadEvent::Started { spec, pids, cpus } => format!(
            "--load {spec}: {} competing process(es) (pid {pids:?}) on CPU {cpus:?} from step {step}",
            spec.procs
        ),
        LoadEvent::Stopped { spec, report } => format!(
            "--load {spec} stopped at step {step} ({:.2} CPU s)",
            report.cpu_seconds
        ),
        LoadEvent::Died { exited, .. } if exited.reported => return None,
        LoadEvent::Died { spec, exited } => format!(
            "--load {spec}: load process {} of rank {} died before step {step} ({}); the run \
             goes on with one competing process fewer",
            exited.pid, spec.rank, exited.how
        ),
    })
}
