//! DRUM in the loop from the command line: the balancer `--machine` asks for, the ranks'
//! pinning, the competing loads, and the run's summary.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use drum_loop::rebalance::Policy;
use drum_loop::{LoopConfig, LoopSummary, RebalanceMode, Sensing, Sizing};
use drum_model::load::{Load, LoadReport, LoadSpec};
use drum_model::{Machine, PartitionMethod, PowerConfig, PowerModel, UtilBasis};
use fem_laplace::dist::{Balancer, DistStepReport};
use std::io::Write;
use std::time::Duration;

/// `--util-basis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BasisArg {
    /// The whole window (DRUM 2005 §3.3.1 as written).
    Window,
    /// The time the rank was runnable (kernel schedstat).
    Runnable,
}

/// `--capacity`: where the capacities (part sizes) come from, as Watts, Rieffel & Taylor 1998
/// measure them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CapacityArg {
    /// The machine file's ratings (`--balance static`).
    Static,
    /// Each rank's work (the weight it holds) ÷ the CPU seconds of its window, renewed at
    /// the rebalance points (the paper's dynamic capacities); the static ratings until the
    /// first window.
    Measured,
}

/// The flags of DRUM in the loop (with `--machine`).
#[derive(Debug, Clone, clap::Args)]
pub struct DrumArgs {
    /// With `--machine`: where the part sizes come from: `monitored` (DRUM in the loop: the
    /// powers of the window since the last rebalance), `static` (the machine file's ratings)
    /// or `uniform` (equal parts). Default: monitored.
    #[arg(long, value_parser = str::parse::<Sizing>)]
    pub balance: Option<Sizing>,
    /// Communication weight w_comm in [0, 1] of the powers (DRUM 2005 §3.3).
    #[arg(long, default_value_t = 0.0)]
    pub w_comm: f64,
    /// Sampling period of each rank's monitoring agent, milliseconds (windows have exact ends
    /// whatever the period).
    #[arg(long, default_value_t = 50)]
    pub monitor_period_ms: u64,
    /// Rebalance when Watts' eff = U_avg / U_max of the loads against the new sizes falls
    /// below this.
    #[arg(long, default_value_t = 0.95)]
    pub eff_min: f64,
    /// Lan's γ: redistribute only when Gain > γ·Cost.
    #[arg(long, default_value_t = Policy::default().gamma)]
    pub gamma: f64,
    /// Rebalance when a power share changed by more than this fraction.
    #[arg(long, default_value_t = Policy::default().drift_threshold)]
    pub drift: f64,
    /// Who decides at a rebalance point: `policy` (eff_min, drift, Lan's gain > γ·cost),
    /// `always` (every point repartitions) or `never` (only the initial partition).
    #[arg(long, default_value = "policy", value_parser = str::parse::<RebalanceMode>)]
    pub rebalance: RebalanceMode,
    /// How often the monitored powers are renewed: every N rebalance points (the window then
    /// covers the N steps since) or `once` (the first window only).
    #[arg(long, default_value = "1", value_parser = str::parse::<Sensing>)]
    pub sensing: Sensing,
    /// What a rank's CPU use is a fraction of in the powers.
    #[arg(long, value_enum, default_value_t = BasisArg::Runnable)]
    pub util_basis: BasisArg,
    /// The least processing power a node keeps, as a fraction of its idle-CPU power.
    #[arg(long, default_value_t = drum_model::DEFAULT_POWER_FLOOR)]
    pub power_floor: f64,
    /// `RANK[:N][@STEP[-END]]`: N compute-bound processes (default 1) pinned to the CPUs of
    /// rank RANK's node, from the start of step STEP (default 0) to the start of step END
    /// (default: the end); repeatable. They always stop with the run.
    #[arg(long = "load", value_name = "RANK[:N][@STEP[-END]]")]
    pub load: Vec<LoadSpec>,
    /// Start the competing processes the machine file's `load` attributes describe (on each
    /// such node's first rank, from step 0).
    #[arg(long)]
    pub machine_load: bool,
    /// Do not pin each rank to its node's `cpus`.
    #[arg(long)]
    pub no_pin: bool,
    /// Repartition incrementally (Watts, Rieffel & Taylor 1998): every level that splits
    /// becomes `lbm="DIFFUSION"` with this load transfer calculation (`hbm`, `gde` or
    /// `implicit`), keeping its `IMBALANCE_TOL`; the first partition is HSFC. Default: each
    /// level's own `<lbmethod>`.
    #[arg(long, value_parser = str::parse::<diffusion::Method>)]
    pub transfer: Option<diffusion::Method>,
    /// Capacities as Watts et al. measure them: `static` (the ratings, as `--balance
    /// static`) or `measured` (work ÷ CPU seconds of each rank's window). Default: DRUM's
    /// powers as `--balance` says.
    #[arg(long, value_enum)]
    pub capacity: Option<CapacityArg>,
}

impl DrumArgs {
    /// The loop's configuration.
    pub fn config(&self) -> Result<LoopConfig> {
        if self.monitor_period_ms < 10 {
            bail!(
                "--monitor-period-ms {}: the agents sample at most every 10 ms",
                self.monitor_period_ms
            );
        }
        let policy = Policy {
            eff_min: self.eff_min,
            gamma: self.gamma,
            drift_threshold: self.drift,
        };
        policy.validate().context("--eff-min, --gamma or --drift")?;
        let (sizing, model) = match (self.capacity, self.balance) {
            (None, b) => (
                b.unwrap_or_default(),
                PowerModel::Drum {
                    w_comm: self.w_comm,
                },
            ),
            (Some(CapacityArg::Static), None | Some(Sizing::Static)) => (
                Sizing::Static,
                PowerModel::Drum {
                    w_comm: self.w_comm,
                },
            ),
            (Some(CapacityArg::Measured), None | Some(Sizing::Monitored)) => {
                (Sizing::Monitored, PowerModel::Measured)
            }
            (Some(c), Some(b)) => bail!(
                "--capacity {} and --balance {b} disagree: --capacity static is --balance \
                 static, measured is monitored",
                c.to_possible_value()
                    .map_or("?".into(), |v| v.get_name().to_string())
            ),
        };
        Ok(LoopConfig {
            sizing,
            power: PowerConfig {
                model,
                basis: match self.util_basis {
                    BasisArg::Window => UtilBasis::Window,
                    BasisArg::Runnable => UtilBasis::Runnable,
                },
                floor: self.power_floor,
                ..PowerConfig::default()
            },
            policy,
            rebalance: self.rebalance,
            sensing: self.sensing,
            period: Duration::from_millis(self.monitor_period_ms),
            ..LoopConfig::default()
        })
    }

    /// The balancer for `machine` (with `--transfer`, its levels diffusing).
    pub fn balancer(&self, machine: &Machine) -> Result<Balancer> {
        // Check the powers now, so a bad flag is one clear error before any rank starts.
        let cfg = self.config()?;
        let mut machine = machine.clone();
        if let Some(t) = self.transfer {
            let name = t.name().to_ascii_uppercase();
            machine.set_every_lbmethod(
                PartitionMethod::Diffusion,
                &[("METHOD", &name)],
                "--transfer",
            );
        }
        let powers = drum_model::static_powers(&machine, &cfg.starting_power())
            .with_context(|| format!("powers of {}", machine.source()))?;
        hier_part::Plan::new(&machine, &powers)
            .with_context(|| format!("the levels of {}", machine.source()))?;
        Ok(Balancer::drum(machine, cfg))
    }

    /// The loads to run: `--load`, and with `--machine-load` the file's.
    pub fn loads(&self, machine: &Machine) -> Result<Vec<LoadSpec>> {
        let mut specs = self.load.clone();
        if self.machine_load {
            for n in machine.computing_nodes() {
                if let Some(procs) = n.load {
                    specs.push(LoadSpec {
                        rank: n.rank_range().start,
                        procs: procs as usize,
                        from_step: 0,
                        until_step: None,
                    });
                }
            }
        }
        for s in &specs {
            if s.rank >= machine.num_ranks() {
                bail!(
                    "--load {s}: {} has ranks 0..{}",
                    machine.source(),
                    machine.num_ranks()
                );
            }
            let node = machine.node(machine.rank_node(s.rank));
            if node.cpus.is_none() {
                bail!(
                    "--load {s}: {} has no `cpus`, so the load cannot be pinned to it",
                    node.label()
                );
            }
        }
        Ok(specs)
    }
}

/// The CPUs of each rank's node, if every computing node lists them.
pub fn rank_cpus(machine: &Machine) -> Option<Vec<Vec<usize>>> {
    (0..machine.num_ranks())
        .map(|r| {
            machine
                .node(machine.rank_node(r))
                .cpus
                .as_ref()
                .map(|c| c.cpus().iter().map(|&x| x as usize).collect())
        })
        .collect()
}

/// One rank's competing loads: started at their steps, stopped (and reaped) at their end
/// step, at the end of the run, or when dropped.
pub struct Loads<'m> {
    machine: &'m Machine,
    rank: usize,
    specs: Vec<LoadSpec>,
    /// Each running load with the index of its spec.
    running: Vec<(usize, Load)>,
    /// Processes and CPU seconds of the loads already stopped.
    stopped: (usize, f64),
}

impl<'m> Loads<'m> {
    /// The loads of `rank` among `specs`.
    pub fn new(machine: &'m Machine, rank: usize, specs: &[LoadSpec]) -> Loads<'m> {
        Loads {
            machine,
            rank,
            specs: specs.iter().filter(|s| s.rank == rank).copied().collect(),
            running: Vec::new(),
            stopped: (0, 0.0),
        }
    }

    /// Stops the loads whose end is `step` and starts those due at the start of `step`.
    pub fn at_step(&mut self, step: usize) -> Result<()> {
        let mut i = 0;
        while i < self.running.len() {
            if self.specs[self.running[i].0].until_step == Some(step) {
                let (k, load) = self.running.swap_remove(i);
                let r: LoadReport = load.stop()?;
                self.stopped.0 += r.procs;
                self.stopped.1 += r.cpu_seconds;
                eprintln!(
                    "load: --load {} stopped at step {step} ({:.2} CPU s)",
                    self.specs[k], r.cpu_seconds
                );
            } else {
                i += 1;
            }
        }
        let node = self.machine.node(self.machine.rank_node(self.rank));
        let cpus = node
            .cpus
            .as_ref()
            .map(|c| c.cpus().to_vec())
            .unwrap_or_default();
        for (k, s) in self.specs.iter().enumerate() {
            if s.from_step != step {
                continue;
            }
            let load = Load::start(&cpus, s.procs)
                .with_context(|| format!("--load {s} (rank {})", self.rank))?;
            eprintln!(
                "load: {} competing process{} (pid {:?}) on CPU {:?} of rank {} ({}) from step {step}",
                s.procs,
                if s.procs == 1 { "" } else { "es" },
                load.pids(),
                load.cpus(),
                self.rank,
                node.label()
            );
            self.running.push((k, load));
        }
        Ok(())
    }

    /// Stops every load; the processes and CPU seconds of all of them over the run.
    pub fn stop(&mut self) -> Result<(usize, f64)> {
        let mut out = self.stopped;
        for (_, l) in self.running.drain(..) {
            let r: LoadReport = l.stop()?;
            out.0 += r.procs;
            out.1 += r.cpu_seconds;
        }
        Ok(out)
    }
}

/// What each rank reports at the end (gathered on rank 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct RankEnd {
    /// The monitoring agent's cost.
    pub monitor: Option<LoopSummary>,
    /// Competing processes the rank ran.
    pub load_procs: usize,
    /// Their CPU seconds.
    pub load_cpu_s: f64,
}

impl RankEnd {
    /// As numbers for a gather.
    pub fn to_words(self) -> [f64; 8] {
        let m = self.monitor;
        [
            f64::from(u8::from(m.is_some())),
            m.map_or(0.0, |m| m.wall_s),
            m.map_or(0.0, |m| m.cpu_s),
            m.map_or(0.0, |m| m.overhead),
            m.map_or(0.0, |m| m.periods as f64),
            m.map_or(0.0, |m| m.windows as f64),
            self.load_procs as f64,
            self.load_cpu_s,
        ]
    }

    /// Back from [`RankEnd::to_words`].
    pub fn from_words(w: &[f64]) -> RankEnd {
        RankEnd {
            monitor: (w[0] != 0.0).then(|| LoopSummary {
                wall_s: w[1],
                cpu_s: w[2],
                overhead: w[3],
                periods: w[4] as usize,
                windows: w[5] as usize,
            }),
            load_procs: w[6] as usize,
            load_cpu_s: w[7],
        }
    }
}

/// RC_ideal of DRUM 2005 §4.1 for `machine` with `loads` running: each rank's speed is its
/// node's rating times its share of the node's CPUs (k ranks and L load processes on m CPUs
/// share them when k + L > m).
pub fn rc_ideal(machine: &Machine, loads: &[LoadSpec]) -> Option<f64> {
    let speeds: Vec<f64> = (0..machine.num_ranks())
        .map(|r| {
            let node = machine.node(machine.rank_node(r));
            let l: usize = loads
                .iter()
                .filter(|s| machine.rank_node(s.rank) == node.id)
                .map(|s| s.procs)
                .sum();
            let (k, m) = (node.processes(), node.processors());
            let share = if k + l > m {
                m as f64 / (k + l) as f64
            } else {
                1.0
            };
            node.mflops.unwrap_or(1.0) * share
        })
        .collect();
    drum_model::metrics::rc_ideal(&speeds).ok()
}

/// The run's figures, from rank 0's reports and every rank's end figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// `uniform`, `static`, `monitored` (or `flat` without a machine).
    pub balance: String,
    /// Number of ranks.
    pub ranks: usize,
    /// Steps run.
    pub steps: usize,
    /// Vertices at the end.
    pub vertices: usize,
    /// Sum of the steps' wall times on rank 0, seconds.
    pub wall_s: f64,
    /// Per rank.
    pub per_rank: Vec<RankSummary>,
    /// Per step: max over ranks of the busy time (step wall − time in collectives) over its
    /// mean.
    pub imbalance: Vec<f64>,
    /// Rebalances done (the initial partition included).
    pub rebalances: usize,
    /// Elements that changed rank over the run.
    pub migrated_elements: u64,
    /// Bytes of the migrations.
    pub migrated_bytes: u64,
    /// RC_ideal for the machine with the loads running at the last step (DRUM 2005 §4.1).
    pub rc_ideal: Option<f64>,
    /// Warnings of the powers, each with the step it happened at.
    pub warnings: Vec<String>,
}

/// One rank in the [`Summary`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct RankSummary {
    /// The rank.
    pub rank: usize,
    /// Its node's name.
    pub node: String,
    /// Its part size at the last rebalance (the sizing's).
    pub target: f64,
    /// Its monitored part size at the end.
    pub monitored: f64,
    /// Its share of the elements in the last step.
    pub work_share: f64,
    /// 1 − (time in collectives) / (wall time), over the run.
    pub busy: f64,
    /// CPU share it got while runnable, over the measured windows (schedstat), if known.
    pub cpu_share: Option<f64>,
    /// Its agent's cost.
    pub end: RankEnd,
}

impl Summary {
    /// Builds the summary.
    pub fn new(
        reports: &[DistStepReport],
        ends: &[RankEnd],
        machine: Option<&Machine>,
        loads: &[LoadSpec],
    ) -> Summary {
        let last = reports.last();
        let ranks = last.map_or(0, |r| r.nranks);
        let wall_s = reports.iter().map(|r| r.wall_s).sum();
        let balance = last
            .and_then(|r| r.balance.as_ref())
            .map_or("flat".to_string(), |b| b.sizing.to_string());
        let mut per_rank = Vec::with_capacity(ranks);
        for k in 0..ranks {
            let (mut wait, mut wall) = (0.0, 0.0);
            let (mut cpu, mut runnable) = (0.0, 0.0);
            for r in reports {
                if let Some(x) = r.ranks.get(k) {
                    wait += x.wait_s;
                    wall += r.wall_s;
                }
                if let Some(m) = r.balance.as_ref().and_then(|b| b.measured.get(k))
                    && r.balance.as_ref().is_some_and(|b| b.measured_s > 0.0)
                    && let Some(run) = m.runnable
                {
                    cpu += m.util * m.seconds;
                    runnable += run * m.seconds;
                }
            }
            let work_total: f64 = last.map_or(0.0, |l| l.ranks.iter().map(|x| x.work).sum());
            let bal = last.and_then(|l| l.balance.as_ref());
            per_rank.push(RankSummary {
                rank: k,
                node: machine.map_or(String::new(), |m| m.node(m.rank_node(k)).name.clone()),
                target: bal.map_or(1.0 / ranks as f64, |b| b.targets[k]),
                monitored: bal.map_or(f64::NAN, |b| b.monitored_sizes[k]),
                work_share: last.map_or(0.0, |l| l.ranks[k].work / work_total.max(1.0)),
                busy: if wall > 0.0 { 1.0 - wait / wall } else { 0.0 },
                cpu_share: (runnable > 0.0).then(|| cpu / runnable),
                end: ends.get(k).copied().unwrap_or_default(),
            });
        }
        let imbalance = reports
            .iter()
            .map(|r| {
                let busy: Vec<f64> = r
                    .ranks
                    .iter()
                    .map(|x| (r.wall_s - x.wait_s).max(0.0))
                    .collect();
                let mean = busy.iter().sum::<f64>() / busy.len().max(1) as f64;
                let max = busy.iter().copied().fold(0.0, f64::max);
                if mean > 0.0 { max / mean } else { 1.0 }
            })
            .collect();
        let rebalances = reports
            .iter()
            .filter(|r| r.balance.as_ref().is_none_or(|b| b.decision.rebalance))
            .count();
        let warnings = reports
            .iter()
            .flat_map(|r| {
                r.balance
                    .iter()
                    .flat_map(|b| &b.warnings)
                    .map(move |w| format!("step {}: {w}", r.base.step))
            })
            .collect();
        Summary {
            balance,
            ranks,
            steps: reports.len(),
            vertices: last.map_or(0, |r| r.base.vertices),
            wall_s,
            per_rank,
            imbalance,
            rebalances,
            migrated_elements: reports.iter().map(|r| r.migration.elements).sum(),
            migrated_bytes: reports.iter().map(|r| r.migration.bytes).sum(),
            rc_ideal: machine.and_then(|m| {
                let k = reports.last().map_or(0, |r| r.base.step);
                let active: Vec<LoadSpec> =
                    loads.iter().filter(|s| s.active_at(k)).copied().collect();
                rc_ideal(m, &active)
            }),
            warnings,
        }
    }

    /// The summary as text.
    pub fn print(&self, out: &mut impl Write, reports: &[DistStepReport]) -> Result<()> {
        writeln!(
            out,
            "\nsummary: {} balance over {} ranks, {} steps to {} vertices, {:.3} s (sum of the steps' wall time)",
            self.balance, self.ranks, self.steps, self.vertices, self.wall_s
        )?;
        writeln!(
            out,
            "{:>4}  {:<14} {:>8} {:>9} {:>10} {:>6} {:>9} {:>9} {:>10}",
            "rank",
            "node",
            "size",
            "monitored",
            "work share",
            "busy",
            "cpu share",
            "monitor",
            "load"
        )?;
        for r in &self.per_rank {
            let load = if r.end.load_procs > 0 {
                format!("{} ({:.2} s)", r.end.load_procs, r.end.load_cpu_s)
            } else {
                "-".into()
            };
            writeln!(
                out,
                "{:>4}  {:<14} {:>8.4} {:>9} {:>10.4} {:>6.3} {:>9} {:>9} {:>10}",
                r.rank,
                r.node,
                r.target,
                if r.monitored.is_nan() {
                    "-".to_string()
                } else {
                    format!("{:.4}", r.monitored)
                },
                r.work_share,
                r.busy,
                r.cpu_share.map_or("-".into(), |c| format!("{c:.3}")),
                r.end
                    .monitor
                    .map_or("-".into(), |m| format!("{:.2}%", 100.0 * m.overhead)),
                load
            )?;
        }
        writeln!(
            out,
            "(size: the part size of the last rebalance; monitored: DRUM's from the last window; busy: \
             1 - time in collectives / wall; cpu share: CPU time over runnable time; monitor: the agent's \
             CPU over wall)"
        )?;
        writeln!(
            out,
            "{:>4} {:>9} {:>8} {:>6}  {:<23} decision",
            "step", "vertices", "wall", "imbal", "sizes target→achieved"
        )?;
        for (r, imb) in reports.iter().zip(&self.imbalance) {
            let (sizes, decision) = match &r.balance {
                Some(b) => (
                    b.targets
                        .iter()
                        .zip(&b.achieved)
                        .map(|(t, a)| format!("{t:.2}→{a:.2}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    b.decision.text.clone(),
                ),
                None => ("equal".into(), "flat HSFC, every step".into()),
            };
            writeln!(
                out,
                "{:>4} {:>9} {:>8.4} {:>6.3}  {:<23} {}",
                r.base.step, r.base.vertices, r.wall_s, imb, sizes, decision
            )?;
        }
        writeln!(
            out,
            "migrations: {} rebalances, {} elements ({:.2} MB) moved",
            self.rebalances,
            self.migrated_elements,
            self.migrated_bytes as f64 / 1e6
        )?;
        if let Some(rc) = self.rc_ideal {
            writeln!(
                out,
                "RC_ideal (DRUM 2005 §4.1) of this machine with its loads: {rc:.3}"
            )?;
        }
        for w in &self.warnings {
            writeln!(out, "warning: {w}")?;
        }
        Ok(())
    }
}
