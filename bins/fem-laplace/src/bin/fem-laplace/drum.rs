//! DRUM in the loop from the command line: the balancer `--machine` asks for, the ranks'
//! pinning, the competing loads, and the run's summary.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use drum_loop::rebalance::Policy;
use drum_loop::{LoadMeasure, LoopConfig, LoopSummary, RebalanceMode, Sensing, Sizing};
use drum_model::load::{Load, LoadReport, LoadSpec, NetLoadSpec, Watch};
use drum_model::{Machine, PartitionMethod, PowerConfig, PowerModel, UtilBasis};
use fem_laplace::dist::{Balancer, DistStepReport};
use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
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
    /// The ratings divided by each node's load average over the window (the mean number of
    /// tasks competing for its CPUs while its ranks wanted one), renewed at the rebalance
    /// points.
    Loadavg,
    /// No capacities (equal parts), each rank's measured seconds per unit of work taken as
    /// its objects' load: the paper's homogeneous balancing "with CPU time as the task
    /// loads" (`--balance uniform`).
    Homogeneous,
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
    /// `NODE[:MBIT][@STEP[-END]]`: a competing TCP flow from the machine node named NODE to
    /// `--net-sink` at MBIT Mbit/s (default: as fast as the link allows), from the start of
    /// step STEP (default 0) to the start of step END (default: the end), started by the
    /// node's first rank (so from the node's network namespace on a vcluster); repeatable.
    /// It always stops with the run.
    #[arg(
        long = "net-load",
        value_name = "NODE[:MBIT][@STEP[-END]]",
        requires = "net_sink"
    )]
    pub net_load: Vec<NetLoadSpec>,
    /// Where the flows of `--net-load` go: the ADDR:PORT of a TCP sink outside the compute
    /// nodes (`cargo xtask run-laplace --vcluster` runs one).
    #[arg(long, value_name = "ADDR:PORT")]
    pub net_sink: Option<SocketAddr>,
    /// Do not pin each rank to its node's `cpus`.
    #[arg(long)]
    pub no_pin: bool,
    /// With thread ranks: how long a waiting rank spins before it sleeps, in microseconds, the
    /// same for every rank (0 sleeps at once, leaving a shared core to the process beside
    /// it). Default: each rank by its core, 1000 on a core of its own, 50 on a core it shares
    /// with another busy process (`comm::LONG_SPIN`, `comm::DEFAULT_SPIN`).
    #[arg(long, value_name = "US")]
    pub spin_us: Option<u64>,
    /// Over how many steps Lan et al.'s profitability test counts a rebalance's gain: `next`
    /// (the next step, as the paper) or `run` (the next step and every step left until the
    /// target, each growing as the mesh does: known under double marking, the next step
    /// alone under Dörfler's). The cost counts the partitioner, migration and rebuild of a
    /// mesh of the current size (measured at the last repartition of at least 16,384
    /// elements) either way.
    #[arg(long, value_enum, default_value = "run")]
    pub gain_horizon: GainHorizonArg,
    /// Repartition incrementally (Watts, Rieffel & Taylor 1998): every level that splits
    /// becomes `lbm="DIFFUSION"` with this load transfer calculation (`hbm`, `gde` or
    /// `implicit`), keeping its `IMBALANCE_TOL`; the first partition is HSFC. Default: each
    /// level's own `<lbmethod>`.
    #[arg(long, value_parser = str::parse::<diffusion::Method>)]
    pub transfer: Option<diffusion::Method>,
    /// Capacities as Watts et al. measure them: `static` (the ratings, as `--balance
    /// static`), `measured` (work ÷ the seconds of each rank's window it took), `loadavg`
    /// (ratings ÷ the node's load average) or `homogeneous` (equal parts of the ranks'
    /// measured time). Default: DRUM's powers as `--balance` says.
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
        let drum = PowerModel::Drum {
            w_comm: self.w_comm,
        };
        let (sizing, model, load) = match (self.capacity, self.balance) {
            (None, b) => (b.unwrap_or_default(), drum, LoadMeasure::Work),
            (Some(CapacityArg::Static), None | Some(Sizing::Static)) => {
                (Sizing::Static, drum, LoadMeasure::Work)
            }
            (Some(CapacityArg::Measured), None | Some(Sizing::Monitored)) => {
                (Sizing::Monitored, PowerModel::Measured, LoadMeasure::Work)
            }
            (Some(CapacityArg::Loadavg), None | Some(Sizing::Monitored)) => (
                Sizing::Monitored,
                PowerModel::LoadAverage,
                LoadMeasure::Work,
            ),
            (Some(CapacityArg::Homogeneous), None | Some(Sizing::Uniform)) => {
                (Sizing::Uniform, drum, LoadMeasure::Time)
            }
            (Some(c), Some(b)) => bail!(
                "--capacity {} and --balance {b} disagree: --capacity static is --balance \
                 static, measured and loadavg are monitored, homogeneous is uniform",
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
            load,
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
        drum_model::load::check_load_limits(&specs).context("--load and the machine's `load`")?;
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

    /// The flows to run (`--net-load`), each with the rank that starts it: its node's first.
    pub fn net_loads(&self, machine: &Machine) -> Result<Vec<NetLoad>> {
        let Some(sink) = self.net_sink else {
            return Ok(Vec::new());
        };
        self.net_load
            .iter()
            .map(|spec| {
                let mut named = machine.computing_nodes().filter(|n| n.name == spec.node);
                let (Some(node), None) = (named.next(), named.next()) else {
                    let names: Vec<&str> =
                        machine.computing_nodes().map(|n| n.name.as_str()).collect();
                    bail!(
                        "--net-load {spec}: {} has no single computing node named {:?} (its \
                         computing nodes: {names:?})",
                        machine.source(),
                        spec.node
                    );
                };
                Ok(NetLoad {
                    rank: node.rank_range().start,
                    spec: spec.clone(),
                    sink,
                })
            })
            .collect()
    }
}

/// A `--net-load` flow with the rank that starts it and its sink.
#[derive(Debug, Clone, PartialEq)]
pub struct NetLoad {
    /// The first rank of the flow's node.
    pub rank: usize,
    /// The flag.
    pub spec: NetLoadSpec,
    /// Where it sends.
    pub sink: SocketAddr,
}

/// One competing load of a rank: compute-bound processes or a flow.
#[derive(Debug, Clone, PartialEq)]
enum Competing {
    Cpu(LoadSpec),
    Net(NetLoad),
}

impl Competing {
    fn steps(&self) -> (usize, Option<usize>) {
        match self {
            Competing::Cpu(s) => (s.from_step, s.until_step),
            Competing::Net(n) => (n.spec.from_step, n.spec.until_step),
        }
    }
}

impl fmt::Display for Competing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Competing::Cpu(s) => write!(f, "--load {s}"),
            Competing::Net(n) => write!(f, "--net-load {}", n.spec),
        }
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

/// One rank's competing loads and flows: started at their steps, stopped (and reaped) at
/// their end step, at the end of the run, or when dropped. A watch reports at once each
/// process that ends on its own.
pub struct Loads<'m> {
    machine: &'m Machine,
    rank: usize,
    specs: Vec<Competing>,
    /// Each running load with the index of its spec.
    running: Vec<(usize, Load)>,
    /// What the loads already stopped did.
    stopped: Stopped,
    /// Reports on stderr, at once, each process that ends on its own.
    watch: Watch,
}

/// The figures of stopped loads: processes, CPU seconds, bytes the flows sent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stopped {
    /// Compute-bound processes.
    pub procs: usize,
    /// Their CPU seconds.
    pub cpu_s: f64,
    /// Bytes the flows' sinks acknowledged.
    pub net_bytes: u64,
    /// Processes that ended on their own before their end (killed from outside, crashed).
    pub died: usize,
}

impl Stopped {
    fn add(&mut self, spec: &Competing, r: &LoadReport) {
        match spec {
            Competing::Cpu(_) => {
                self.procs += r.procs;
                self.cpu_s += r.cpu_seconds;
            }
            Competing::Net(_) => self.net_bytes += r.bytes_sent.unwrap_or(0),
        }
    }
}

impl<'m> Loads<'m> {
    /// The loads of `rank` among `specs` and its flows among `nets`.
    pub fn new(
        machine: &'m Machine,
        rank: usize,
        specs: &[LoadSpec],
        nets: &[NetLoad],
    ) -> Loads<'m> {
        let cpu = specs.iter().filter(|s| s.rank == rank).copied();
        let net = nets.iter().filter(|n| n.rank == rank).cloned();
        Loads {
            machine,
            rank,
            specs: cpu
                .map(Competing::Cpu)
                .chain(net.map(Competing::Net))
                .collect(),
            running: Vec::new(),
            stopped: Stopped::default(),
            watch: Watch::to_stderr(),
        }
    }

    /// Counts every load process that ended on its own since the last look (each reported
    /// by the watch, now if its thread had not yet seen it).
    fn count_deaths(&mut self) {
        self.watch.sweep();
        for (_, load) in &mut self.running {
            for e in load.exited() {
                self.stopped.died += 1;
                self.stopped.cpu_s += e.cpu_seconds;
            }
        }
    }

    /// Stops the loads whose end is `step` and starts those due at the start of `step`.
    pub fn at_step(&mut self, step: usize) -> Result<()> {
        self.count_deaths();
        self.watch.set_step(step);
        let mut i = 0;
        while i < self.running.len() {
            if self.specs[self.running[i].0].steps().1 == Some(step) {
                let (k, load) = self.running.swap_remove(i);
                let r: LoadReport = load.stop()?;
                self.stopped.add(&self.specs[k], &r);
                let what = match r.bytes_sent {
                    Some(b) => format!("{:.2} MB sent", b as f64 / 1e6),
                    None => format!("{:.2} CPU s", r.cpu_seconds),
                };
                eprintln!("load: {} stopped at step {step} ({what})", self.specs[k]);
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
        for (k, spec) in self.specs.iter().enumerate() {
            if spec.steps().0 != step {
                continue;
            }
            let load = match spec {
                Competing::Cpu(s) => Load::start(&cpus, s.procs),
                Competing::Net(n) => Load::flow(&cpus, n.sink, n.spec.mbit),
            }
            .with_context(|| format!("{spec} (rank {})", self.rank))?;
            self.watch
                .add(&load, format!("{spec} on rank {}", self.rank))?;
            match spec {
                Competing::Cpu(s) => eprintln!(
                    "load: {} competing process{} (pid {:?}) on CPU {:?} of rank {} ({}) from step {step}",
                    s.procs,
                    if s.procs == 1 { "" } else { "es" },
                    load.pids(),
                    load.cpus(),
                    self.rank,
                    node.label()
                ),
                Competing::Net(n) => eprintln!(
                    "load: a TCP flow (pid {:?}) from rank {} ({}) to {} at {} from step {step}",
                    load.pids(),
                    self.rank,
                    node.label(),
                    n.sink,
                    n.spec
                        .mbit
                        .map_or("the link's speed".into(), |m| format!("{m} Mbit/s")),
                ),
            }
            self.running.push((k, load));
        }
        Ok(())
    }

    /// Stops the watch (joined) and every load; what all of them did over the run.
    pub fn stop(&mut self) -> Result<Stopped> {
        self.watch.stop();
        self.count_deaths();
        for (k, l) in std::mem::take(&mut self.running) {
            let r: LoadReport = l.stop()?;
            self.stopped.add(&self.specs[k], &r);
        }
        Ok(self.stopped)
    }
}

/// What each rank reports at the end (gathered on rank 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct RankEnd {
    /// The monitoring agent's cost.
    pub monitor: Option<LoopSummary>,
    /// Competing processes the rank ran to their end.
    pub load_procs: usize,
    /// Competing processes of the rank that died on their own during the run.
    pub load_died: usize,
    /// Their CPU seconds.
    pub load_cpu_s: f64,
    /// Bytes its `--net-load` flows sent (acknowledged by the sink).
    pub net_load_bytes: u64,
}

impl RankEnd {
    /// As numbers for a gather.
    pub fn to_words(self) -> [f64; 10] {
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
            self.net_load_bytes as f64,
            self.load_died as f64,
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
            net_load_bytes: w[8] as u64,
            load_died: w[9] as usize,
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

/// The loads running at step `k`, less the processes that died on their own (each rank's
/// `load_died`, taken from its specs in order): what RC_ideal is computed for.
fn running_at_end(loads: &[LoadSpec], k: usize, ends: &[RankEnd]) -> Vec<LoadSpec> {
    let mut died: Vec<usize> = ends.iter().map(|e| e.load_died).collect();
    loads
        .iter()
        .filter(|s| s.active_at(k))
        .filter_map(|s| {
            let d = died.get_mut(s.rank).map_or(0, |d| {
                let gone = (*d).min(s.procs);
                *d -= gone;
                gone
            });
            (s.procs > d).then_some(LoadSpec {
                procs: s.procs - d,
                ..*s
            })
        })
        .collect()
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
    /// The host it ran on (its processor name: the node's hostname on a vcluster).
    pub host: String,
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
    /// Builds the summary; `hosts[r]` is where rank r ran.
    pub fn new(
        reports: &[DistStepReport],
        ends: &[RankEnd],
        hosts: &[String],
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
                host: hosts.get(k).cloned().unwrap_or_default(),
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
                rc_ideal(m, &running_at_end(loads, k, ends))
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
            let load = if r.end.load_died > 0 {
                let (n, died) = (r.end.load_procs, r.end.load_died);
                format!("{n}+{died} died ({:.2} s)", r.end.load_cpu_s)
            } else if r.end.load_procs > 0 {
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
                None => (
                    "equal".into(),
                    "flat HSFC when a part is over 1 % above equal".into(),
                ),
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
        let died: usize = self.per_rank.iter().map(|r| r.end.load_died).sum();
        if died > 0 {
            writeln!(
                out,
                "load: {died} competing process(es) died during the run (see above); RC_ideal \
                 counts only those still running at the end"
            )?;
        }
        if let Some(rc) = self.rc_ideal {
            writeln!(
                out,
                "RC_ideal (DRUM 2005 §4.1) of this machine with its loads: {rc:.3}"
            )?;
        }
        for r in self.per_rank.iter().filter(|r| r.end.net_load_bytes > 0) {
            writeln!(
                out,
                "net load: rank {} ({} on {}) sent {:.2} MB",
                r.rank,
                r.node,
                r.host,
                r.end.net_load_bytes as f64 / 1e6
            )?;
        }
        for w in &self.warnings {
            writeln!(out, "warning: {w}")?;
        }
        Ok(())
    }
}

/// `--gain-horizon`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GainHorizonArg {
    /// The next step (Lan et al. 2001, eq. 4).
    Next,
    /// Every step left of the run.
    Run,
}

impl From<GainHorizonArg> for fem_laplace::dist::GainHorizon {
    fn from(a: GainHorizonArg) -> Self {
        match a {
            GainHorizonArg::Next => fem_laplace::dist::GainHorizon::Next,
            GainHorizonArg::Run => fem_laplace::dist::GainHorizon::Run,
        }
    }
}
