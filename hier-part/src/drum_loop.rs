//! DRUM in the loop (DRUM 2005 Fig. 2): after each adaptive step the application asks for
//! part sizes, the partitioner turns them into a new partition, the application migrates.
//!
//! Every rank creates a [`DrumLoop`] on its communicator ([`DrumLoop::start`], collective).
//! It starts DRUM's monitoring agent for the rank's own node (CPU use and run-queue time of
//! the calling thread, idle time of the node's `cpus`, memory, interfaces) and measures the
//! link between the root's groups (α, β of Lan et al. §4.2). At each rebalance point
//! ([`DrumLoop::rebalance`], collective) it
//! 1. cuts the agent's window (exact ends: the counters are read at the call) and gathers
//!    every rank's window;
//! 2. turns them into node observations and powers (DRUM 2005 §3.3 with the machine's
//!    ratings and `w_comm`), identically on every rank;
//! 3. asks the [`Policy`] whether to rebalance: Watts' `eff` of the loads the ranks hold now
//!    against the new part sizes, the drift of the powers since the current partition was
//!    made, and Lan's `Gain > γ·Cost` with the measured link, the predicted migration volume
//!    and the last migration's time;
//! 4. if so, repartitions with [`Hier::repartition`] (KEEP_CUTS) into the new sizes.
//!
//! What the sizes are is the [`Sizing`]: equal parts, static ratings, or monitored powers.
//! The agents run in every sizing (the reports show what they measured), so the three cost
//! the same.
//!
//! ## Robust powers
//! A live rank never gets a zero part and the run never stops for a measurement:
//! - a window shorter than [`LoopConfig::min_window`] (the first, tiny steps) stays open
//!   into the next steps until it is long enough (the CPUs' idle time comes in 10 ms ticks);
//!   the powers stay as they were;
//! - a rank that was runnable for less than [`MIN_EVIDENCE`] in the window (it had nothing
//!   to do) says nothing about its node's speed: the node keeps its previous observation;
//! - a rank whose agent failed (an unreadable or garbled `/proc` file, a non-finite value)
//!   makes its node keep its previous observation, with a warning naming the rank and the
//!   cause; a node never observed uses the static observation (every CPU idle);
//! - a node measured at (near) zero is raised to the power floor of `drum_model`
//!   ([`PowerConfig::floor`], 5 % of its idle-CPU power by default), with a warning;
//! - powers that cannot be computed at all keep the previous part sizes, with a warning.

use crate::rebalance::{Decision, Migration, Observation, Policy, Reason, measure_group_link};
use crate::{Error, Hier, HierPartition, Plan, Workspace};
use comm::{Comm, LinkModel, LinkProbe};
use drum_model::monitor::{
    Monitor, MonitorConfig, MonitorStats, MonitorTarget, ProcFs, ProcessRef, Window,
    start_monitoring,
};
use drum_model::power::{IfaceObservation, IfaceRates, MemoryObservation};
use drum_model::{
    Machine, NodeObservation, Observations, PowerConfig, Powers, compute_powers, static_powers,
    uniform_powers,
};
use hsfc::Points;
use hsfc::dist::Reduce;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// Where the part sizes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sizing {
    /// Equal parts (the "uniform" runs of DRUM 2005 §4).
    Uniform,
    /// The machine file's static ratings (`mflops`, `bandwidth`): DESIGN.md §2.
    Static,
    /// The powers of the monitored window since the last rebalance point.
    #[default]
    Monitored,
}

impl Sizing {
    /// `uniform`, `static` or `monitored`.
    pub fn name(&self) -> &'static str {
        match self {
            Sizing::Uniform => "uniform",
            Sizing::Static => "static",
            Sizing::Monitored => "monitored",
        }
    }
}

impl std::str::FromStr for Sizing {
    type Err = String;
    fn from_str(s: &str) -> Result<Sizing, String> {
        match s {
            "uniform" => Ok(Sizing::Uniform),
            "static" => Ok(Sizing::Static),
            "monitored" => Ok(Sizing::Monitored),
            _ => Err(format!(
                "`{s}` is not a balance: expected uniform, static or monitored"
            )),
        }
    }
}

impl fmt::Display for Sizing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a rebalance point may repartition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RebalanceMode {
    /// As the [`Policy`] decides (Watts' eff_min, the power drift, Lan's gain > γ·cost).
    #[default]
    Policy,
    /// At every point ("always rebalance", Lan et al.'s baseline).
    Always,
    /// Never after the initial partition ("never rebalance").
    Never,
}

impl RebalanceMode {
    /// The decision this mode imposes on the policy's (`None`: the policy's stands).
    pub fn forced(self) -> Option<bool> {
        match self {
            RebalanceMode::Policy => None,
            RebalanceMode::Always => Some(true),
            RebalanceMode::Never => Some(false),
        }
    }
}

impl std::str::FromStr for RebalanceMode {
    type Err = String;
    fn from_str(s: &str) -> Result<RebalanceMode, String> {
        match s {
            "policy" => Ok(RebalanceMode::Policy),
            "always" => Ok(RebalanceMode::Always),
            "never" => Ok(RebalanceMode::Never),
            _ => Err(format!(
                "`{s}` is not a rebalance mode: expected policy, always or never"
            )),
        }
    }
}

/// How often the monitored powers are renewed (Sinha & Parashar's sensing frequency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensing {
    /// At the first rebalance point with a long enough window, then at every `n`-th (the
    /// window then covers the `n` steps since).
    Every(usize),
    /// Once, from the first window long enough; never again.
    Once,
}

impl Sensing {
    /// Whether the powers are renewed at this point, `since` points after they last were
    /// (`sensed`: whether they ever were).
    pub fn due(self, sensed: bool, since: usize) -> bool {
        match self {
            Sensing::Every(n) => !sensed || since >= n,
            Sensing::Once => !sensed,
        }
    }
}

impl Default for Sensing {
    fn default() -> Self {
        Sensing::Every(1)
    }
}

impl std::str::FromStr for Sensing {
    type Err = String;
    fn from_str(s: &str) -> Result<Sensing, String> {
        match s {
            "once" => Ok(Sensing::Once),
            n => match n.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(Sensing::Every(k)),
                _ => Err(format!(
                    "`{s}` is not a sensing period: expected a number of steps >= 1 or `once`"
                )),
            },
        }
    }
}

/// A rank that was runnable for less than this in a window had (almost) nothing to do: its
/// window says nothing about its node's speed.
pub const MIN_EVIDENCE: Duration = Duration::from_millis(2);

/// Bytes a migration moves per unit of weight until a migration has been measured
/// ([`DrumLoop::record_migration`]).
pub const DEFAULT_BYTES_PER_WEIGHT: f64 = 256.0;

/// Settings of a [`DrumLoop`].
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Where the part sizes come from.
    pub sizing: Sizing,
    /// The power model (DRUM 2005 with `w_comm`, ...), its utilisation basis and floor.
    pub power: PowerConfig,
    /// When to rebalance.
    pub policy: Policy,
    /// Whether the policy decides, or every point rebalances, or none after the first.
    pub rebalance: RebalanceMode,
    /// How often the monitored powers are renewed.
    pub sensing: Sensing,
    /// The agents' sampling period (their samples make the recording; the windows have
    /// exact ends whatever the period).
    pub period: Duration,
    /// A window shorter than this (default 30 ms) is not cut (it stays open into the next
    /// step), and
    /// measurements shorter than this do not change powers: /proc/stat counts CPU time in
    /// 10 ms ticks.
    pub min_window: Duration,
    /// Where `/proc` and `/sys` are (tests use fake trees).
    pub procfs: ProcFs,
    /// How α and β are measured at start-up; `None`: no profitability test.
    pub probe: Option<LinkProbe>,
    /// The partitioner (its parallelism).
    pub hier: Hier,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            sizing: Sizing::default(),
            power: PowerConfig::default(),
            policy: Policy::default(),
            rebalance: RebalanceMode::default(),
            sensing: Sensing::default(),
            period: Duration::from_millis(50),
            min_window: Duration::from_millis(30),
            procfs: ProcFs::default(),
            probe: Some(LinkProbe::default()),
            hier: Hier::default(),
        }
    }
}

/// What one rank measured over a window, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankMeasure {
    /// The rank.
    pub rank: usize,
    /// Seconds covered.
    pub seconds: f64,
    /// CPU fraction of the window the rank used.
    pub util: f64,
    /// Fraction of the window the rank was runnable (running or waiting for a CPU), if known.
    pub runnable: Option<f64>,
    /// Mean idle fraction of its node's CPUs.
    pub idle: f64,
    /// False when the window says nothing about the node (the rank barely ran, or its agent
    /// failed): the node kept its previous observation.
    pub evidence: bool,
    /// Bytes in and out of its node's interfaces over the window (loopback excluded): the
    /// traffic λ + μ of the available bandwidth (DRUM 2005 §3.3.2).
    pub net_bytes: f64,
    /// The mean capacity C of those interfaces, Mbit/s, if known.
    pub capacity_mbps: Option<f64>,
}

/// The figures of a rebalance decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionReport {
    /// Repartitioned?
    pub rebalance: bool,
    /// `initial`, `balanced`, `imbalance`, `power drift`, `imbalance and power drift`,
    /// `not profitable`; `always` or `never` when the [`RebalanceMode`] overrides the policy
    /// (whose figures stay).
    pub reason: String,
    /// Watts' `eff = U_avg / U_max` of the loads held now against the new sizes.
    pub eff: f64,
    /// The threshold.
    pub eff_min: f64,
    /// Largest relative change of a power share since the current partition was made.
    pub drift: Option<f64>,
    /// Lan's gain, seconds (eq. 4, over the predicted next step).
    pub gain_s: Option<f64>,
    /// Lan's cost, seconds (α + βW + δ).
    pub cost_s: Option<f64>,
    /// γ.
    pub gamma: f64,
    /// W: bytes the rebalance would move.
    pub bytes: Option<f64>,
    /// The decision as one line (the policy's own wording).
    pub text: String,
}

impl DecisionReport {
    fn initial() -> DecisionReport {
        DecisionReport {
            rebalance: true,
            reason: "initial".into(),
            eff: 0.0,
            eff_min: 0.0,
            drift: None,
            gain_s: None,
            cost_s: None,
            gamma: 0.0,
            bytes: None,
            text: "rebalance (initial partition)".into(),
        }
    }

    fn of(d: &Decision) -> DecisionReport {
        let reason = match d.reason {
            Reason::Balanced => "balanced",
            Reason::Imbalance => "imbalance",
            Reason::PowerDrift => "power drift",
            Reason::ImbalanceAndDrift => "imbalance and power drift",
            Reason::NotProfitable => "not profitable",
        };
        DecisionReport {
            rebalance: d.rebalance,
            reason: reason.into(),
            eff: d.eff,
            eff_min: d.eff_min,
            drift: d.drift.map(|x| x.max_rel_change),
            gain_s: d.profit.map(|p| p.gain),
            cost_s: d.profit.map(|p| p.cost),
            gamma: d.profit.map_or(0.0, |p| p.gamma),
            bytes: d.profit.map(|p| p.bytes),
            text: d.to_string(),
        }
    }
}

/// What one rebalance point did (the same on every rank, but `partition_s`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopReport {
    /// `uniform`, `static` or `monitored`.
    pub sizing: &'static str,
    /// Seconds since the previous rebalance point (the longest over the ranks).
    pub window_s: f64,
    /// Seconds of measurement the powers were computed from (0: the window was too short
    /// and is being extended; the measured powers are the previous ones).
    pub measured_s: f64,
    /// Per rank, what its agent measured over `measured_s`.
    pub measured: Vec<RankMeasure>,
    /// Part sizes from the monitored powers (whatever the sizing).
    pub monitored_sizes: Vec<f64>,
    /// The part sizes of this rebalance (the sizing's).
    pub targets: Vec<f64>,
    /// The fraction of the total weight each rank held before (after the application's
    /// refinement).
    pub loads: Vec<f64>,
    /// The fraction each rank holds after.
    pub achieved: Vec<f64>,
    /// The decision and its figures.
    pub decision: DecisionReport,
    /// Seconds the partitioner took on this rank (0 when the partition was kept).
    pub partition_s: f64,
    /// Weight that changed rank.
    pub moved_weight: f64,
    /// What went wrong and was worked around (each names the rank or node and the cause).
    pub warnings: Vec<String>,
}

/// The agents' cost at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoopSummary {
    /// Wall seconds the agent ran.
    pub wall_s: f64,
    /// CPU seconds of the agent thread and of the window cuts.
    pub cpu_s: f64,
    /// `cpu_s / wall_s` (0.004 = 0.4 % of one core).
    pub overhead: f64,
    /// Sampling periods completed.
    pub periods: usize,
    /// Windows cut.
    pub windows: usize,
}

/// One rank's measurement accumulated over one or more windows (sums of value × seconds).
#[derive(Debug, Clone, Default)]
struct Accum {
    seconds: f64,
    util_s: f64,
    runnable_s: Option<f64>,
    idle_s: Vec<f64>,
    mem: Option<(f64, f64)>,
    /// Interface name, capacity, and bytes/packets (rx, tx, rx, tx) over the windows.
    ifaces: Vec<(String, Option<f64>, [f64; 4])>,
    /// The agent failed: why.
    error: Option<String>,
}

impl Accum {
    fn add(&mut self, w: &Window) {
        let (Some(s), Some(rates)) = (w.samples.first(), w.rates.first()) else {
            self.error = Some("the agent's window has no sample".into());
            return;
        };
        let dt = w.seconds;
        let finite = dt.is_finite()
            && s.proc_util.iter().chain(&s.cpu_idle).all(|x| x.is_finite())
            && s.proc_runnable.iter().flatten().all(|x| x.is_finite());
        if !finite || s.proc_util.len() != 1 {
            self.error = Some(format!(
                "the agent's window holds a non-finite or missing value (utilisation {:?}, \
                 idle {:?}, {dt} s)",
                s.proc_util, s.cpu_idle
            ));
            return;
        }
        let first = self.seconds == 0.0;
        self.seconds += dt;
        self.util_s += s.proc_util[0] * dt;
        self.runnable_s = match (&s.proc_runnable, first) {
            (Some(r), true) => Some(r[0] * dt),
            (Some(r), false) => self.runnable_s.map(|x| x + r[0] * dt),
            (None, _) => None,
        };
        if self.idle_s.len() != s.cpu_idle.len() {
            self.idle_s = vec![0.0; s.cpu_idle.len()];
        }
        for (a, i) in self.idle_s.iter_mut().zip(&s.cpu_idle) {
            *a += i * dt;
        }
        self.mem = Some((s.mem_total, s.mem_avail));
        for (f, r) in s.ifaces.iter().zip(rates) {
            let v = [r.rx_bytes, r.tx_bytes, r.rx_packets, r.tx_packets].map(|x| x * dt);
            match self.ifaces.iter_mut().find(|e| e.0 == f.name) {
                Some(e) => {
                    for (a, b) in e.2.iter_mut().zip(v) {
                        *a += b;
                    }
                    e.1 = f.capacity_mbps.or(e.1);
                }
                None => self.ifaces.push((f.name.clone(), f.capacity_mbps, v)),
            }
        }
    }

    /// The wire form (one rank's contribution to the allgather).
    fn encode(&self) -> Vec<u8> {
        let mut w = Wire::default();
        match &self.error {
            Some(e) => {
                w.u8(1);
                w.str(e);
            }
            None => {
                w.u8(0);
                w.f64(self.seconds);
                w.f64(self.util_s);
                w.opt(self.runnable_s);
                w.u32(self.idle_s.len() as u32);
                for &x in &self.idle_s {
                    w.f64(x);
                }
                w.opt(self.mem.map(|m| m.0));
                w.opt(self.mem.map(|m| m.1));
                w.u32(self.ifaces.len() as u32);
                for (name, cap, v) in &self.ifaces {
                    w.str(name);
                    w.opt(*cap);
                    for &x in v {
                        w.f64(x);
                    }
                }
            }
        }
        w.0
    }

    fn decode(b: &[u8]) -> Accum {
        let mut r = Read(b);
        let garbled = || Accum {
            error: Some("its measurement arrived garbled".into()),
            ..Accum::default()
        };
        let go = |r: &mut Read<'_>| -> Option<Accum> {
            if r.u8()? == 1 {
                return Some(Accum {
                    error: Some(r.str()?),
                    ..Accum::default()
                });
            }
            let seconds = r.f64()?;
            let util_s = r.f64()?;
            let runnable_s = r.opt()?;
            let n = r.u32()? as usize;
            let idle_s = (0..n).map(|_| r.f64()).collect::<Option<Vec<_>>>()?;
            let mem = match (r.opt()?, r.opt()?) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            };
            let k = r.u32()? as usize;
            let mut ifaces = Vec::with_capacity(k);
            for _ in 0..k {
                let name = r.str()?;
                let cap = r.opt()?;
                let v = [r.f64()?, r.f64()?, r.f64()?, r.f64()?];
                ifaces.push((name, cap, v));
            }
            Some(Accum {
                seconds,
                util_s,
                runnable_s,
                idle_s,
                mem,
                ifaces,
                error: None,
            })
        };
        go(&mut r).unwrap_or_else(garbled)
    }

    fn measure(&self, rank: usize) -> RankMeasure {
        let t = self.seconds.max(1e-12);
        RankMeasure {
            rank,
            seconds: self.seconds,
            util: self.util_s / t,
            runnable: self.runnable_s.map(|x| x / t),
            idle: if self.idle_s.is_empty() {
                0.0
            } else {
                self.idle_s.iter().sum::<f64>() / t / self.idle_s.len() as f64
            },
            evidence: self.error.is_none() && self.evidence(),
            net_bytes: self.ifaces.iter().fold(0.0, |a, (_, _, v)| a + v[0] + v[1]),
            capacity_mbps: {
                let caps: Vec<f64> = self.ifaces.iter().filter_map(|(_, c, _)| *c).collect();
                (!caps.is_empty()).then(|| caps.iter().sum::<f64>() / caps.len() as f64)
            },
        }
    }

    /// Did the rank run enough in the window to judge its node?
    fn evidence(&self) -> bool {
        let busy = self.runnable_s.unwrap_or(self.util_s);
        self.seconds > 0.0 && busy >= MIN_EVIDENCE.as_secs_f64()
    }
}

#[derive(Default)]
struct Wire(Vec<u8>);

impl Wire {
    fn u8(&mut self, x: u8) {
        self.0.push(x);
    }
    fn u32(&mut self, x: u32) {
        self.0.extend(x.to_le_bytes());
    }
    fn f64(&mut self, x: f64) {
        self.0.extend(x.to_le_bytes());
    }
    fn opt(&mut self, x: Option<f64>) {
        match x {
            Some(v) => {
                self.u8(1);
                self.f64(v);
            }
            None => self.u8(0),
        }
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend(s.as_bytes());
    }
}

struct Read<'a>(&'a [u8]);

impl Read<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn opt(&mut self) -> Option<Option<f64>> {
        match self.u8()? {
            0 => Some(None),
            _ => Some(Some(self.f64()?)),
        }
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// One rank's side of DRUM in the loop (see the module documentation).
pub struct DrumLoop {
    machine: Machine,
    cfg: LoopConfig,
    rank: usize,
    monitor: Option<Monitor>,
    /// Why the agent could not start, reported with the first rebalance.
    start_warning: Option<String>,
    /// The sizing's part sizes.
    powers: Powers,
    /// The monitored powers (the static ones until a window was measured).
    monitored: Powers,
    plan: Plan,
    previous: Option<HierPartition>,
    /// The part sizes the current partition was made for.
    partition_sizes: Option<Vec<f64>>,
    link: Option<LinkModel>,
    pending: Accum,
    /// Rebalance points since the powers were last renewed, and whether they ever were.
    since_sensed: usize,
    sensed: bool,
    /// When the last rebalance point was, and when the agent's window was last cut.
    last_point: Instant,
    last_cut: Instant,
    /// The last observation of every computing node (the static one until measured).
    nodes: BTreeMap<u32, NodeObservation>,
    last_total: Option<f64>,
    bytes_per_weight: f64,
    delta: f64,
}

impl fmt::Debug for DrumLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrumLoop")
            .field("rank", &self.rank)
            .field("sizing", &self.cfg.sizing)
            .field("parts", &self.powers.parts)
            .finish()
    }
}

impl DrumLoop {
    /// Starts the loop on this rank (collective over `comm`, whose ranks are the machine's):
    /// the sizing's powers and plan, the agent for this rank's node (measuring the calling
    /// thread), and α, β between the root's groups. An agent that cannot start is not an
    /// error: the rank's node keeps its static observation, and the first report says why.
    pub fn start<C: Comm + Reduce>(
        comm: &C,
        machine: Machine,
        cfg: LoopConfig,
    ) -> Result<DrumLoop, Error> {
        if Comm::size(comm) != machine.num_ranks() {
            return Err(Error::RankCount {
                comm: Comm::size(comm),
                machine: machine.num_ranks(),
            });
        }
        let rank = Comm::rank(comm);
        let statics = static_powers(&machine, &cfg.power)?;
        let powers = match cfg.sizing {
            Sizing::Uniform => uniform_powers(&machine, cfg.power.model.clone())?,
            Sizing::Static | Sizing::Monitored => statics.clone(),
        };
        let plan = Plan::new(&machine, &powers)?;
        // The probe first: its traffic is not the application's, so the agent's first window
        // (which the communication power reads) starts after it.
        let (link, link_warning) = match (&cfg.probe, Comm::size(comm) > 1) {
            (Some(probe), true) => match measure_link(comm, &plan, probe)? {
                Ok(link) => (Some(link), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "the link between the root's groups could not be measured ({e}); \
                         rebalancing without Lan's profitability test"
                    )),
                ),
            },
            _ => (None, None),
        };
        let node = machine.rank_node(rank);
        let mcfg = MonitorConfig {
            period: cfg.period,
            procfs: cfg.procfs.clone(),
            targets: vec![MonitorTarget::for_node(
                &machine,
                node,
                vec![ProcessRef::current_thread()],
            )],
        };
        let (monitor, monitor_warning) = match start_monitoring(mcfg) {
            Ok(m) => (Some(m), None),
            Err(e) => (
                None,
                Some(format!(
                    "rank {rank} ({}): the monitoring agent did not start ({e}); its node keeps \
                     its static observation",
                    machine.node(node).label()
                )),
            ),
        };
        let start_warning = match (monitor_warning, link_warning) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        let nodes = Observations::idle(&machine).nodes;
        Ok(DrumLoop {
            rank,
            monitor,
            start_warning,
            monitored: statics,
            powers,
            plan,
            previous: None,
            partition_sizes: None,
            link,
            pending: Accum::default(),
            since_sensed: 0,
            sensed: false,
            last_point: Instant::now(),
            last_cut: Instant::now(),
            nodes,
            last_total: None,
            bytes_per_weight: DEFAULT_BYTES_PER_WEIGHT,
            delta: 0.0,
            machine,
            cfg,
        })
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The part sizes in use.
    pub fn part_sizes(&self) -> &[f64] {
        &self.powers.parts
    }

    /// The link measured at start-up between the root's groups.
    pub fn link(&self) -> Option<LinkModel> {
        self.link
    }

    /// The rebalance point (collective): measures, decides and, if the decision says so,
    /// repartitions `points` (this rank's objects with their work weights). `parts` holds
    /// each object's current rank on entry (this rank, for objects it created) and its new
    /// rank on return.
    pub fn rebalance<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<LoopReport, Error> {
        let mut warnings: Vec<String> = self.start_warning.take().into_iter().collect();
        // Seconds since the last point and since the agents' window was last cut (the
        // longest over the ranks, so that all of them cut or none does).
        let now = Instant::now();
        let mut since = [
            now.duration_since(self.last_point).as_secs_f64(),
            now.duration_since(self.last_cut).as_secs_f64(),
        ];
        comm.allreduce_f64(comm::ReduceOp::Max, &mut since)?;
        self.last_point = now;
        let window_s = since[0];
        // A window shorter than min_window stays open: /proc/stat counts CPU time in 10 ms
        // ticks, so a few ticks would read as all idle or all busy.
        if since[1] >= self.cfg.min_window.as_secs_f64() {
            self.cut_window();
            self.last_cut = Instant::now();
        }
        let all = comm.allgatherv_bytes(&self.pending.encode())?;
        let ranks = Comm::size(comm);
        let accs: Vec<Accum> = (0..ranks).map(|r| Accum::decode(all.get(r))).collect();
        let longest = accs.iter().map(|a| a.seconds).fold(0.0, f64::max);
        self.since_sensed += 1;
        let due = self.cfg.sensing.due(self.sensed, self.since_sensed);
        let measured_s = if longest >= self.cfg.min_window.as_secs_f64() && due {
            self.observe(&accs, &mut warnings);
            self.pending = Accum::default();
            self.since_sensed = 0;
            self.sensed = true;
            if self.cfg.sizing == Sizing::Monitored {
                self.powers = self.monitored.clone();
                self.plan = Plan::new(&self.machine, &self.powers)?;
            }
            longest
        } else {
            if self.cfg.sensing == Sensing::Once && self.sensed {
                self.pending = Accum::default(); // measured once: windows are not kept
            }
            0.0
        };
        let measured = accs.iter().enumerate().map(|(r, a)| a.measure(r)).collect();

        // The loads the ranks hold now.
        let (_, _, weights) = points.into_parts();
        let n = parts.len();
        let local = weights.map_or(n as f64, |w| w.iter().sum());
        let mut loads = vec![0.0; ranks];
        comm.allgather(&[local], &mut loads)?;
        let total: f64 = loads.iter().sum();
        let fractions: Vec<f64> = loads.iter().map(|l| l / total.max(1e-300)).collect();
        let targets = self.powers.parts.clone();

        let decision = match &self.previous {
            None => DecisionReport::initial(),
            Some(_) => {
                let growth = self.last_total.map_or(1.0, |t| total / t.max(1e-300));
                let capacities: Vec<f64> = targets.iter().map(|&t| t.max(1e-12)).collect();
                let obs = Observation {
                    loads: &fractions,
                    capacities: &capacities,
                    partition_powers: self.partition_sizes.as_deref(),
                    step_time: Some(window_s * growth),
                    migration: self.link.map(|link| Migration {
                        link,
                        bytes_per_load: self.bytes_per_weight * total,
                        delta: self.delta,
                    }),
                };
                let mut d = DecisionReport::of(&self.cfg.policy.decide(&obs)?);
                if let Some(forced) = self.cfg.rebalance.forced() {
                    let (what, mode) = if forced {
                        ("rebalance", "always")
                    } else {
                        ("keep", "never")
                    };
                    d.rebalance = forced;
                    d.reason = mode.into();
                    d.text = format!("{what} ({mode}; the policy: {})", d.text);
                }
                d
            }
        };
        self.last_total = Some(total);

        let (achieved, partition_s, moved_weight) = if decision.rebalance && total > 0.0 {
            let t0 = Instant::now();
            let hier = self.cfg.hier;
            // A workspace per repartition: kept between steps, its buffers would sit on top
            // of the application's peak.
            let mut ws = Workspace::default();
            let result = match &self.previous {
                Some(prev) => hier.repartition(&mut ws, comm, &self.plan, prev, points, parts)?,
                None => hier.partition_with(&mut ws, comm, &self.plan, points, parts)?,
            };
            let secs = t0.elapsed().as_secs_f64();
            let achieved = result
                .rank_weights
                .iter()
                .map(|w| w / result.total_weight.max(1e-300))
                .collect();
            let moved = result.moved.map_or(0.0, |m| m.weight);
            self.previous = Some(result);
            self.partition_sizes = Some(targets.clone());
            (achieved, secs, moved)
        } else {
            (fractions.clone(), 0.0, 0.0)
        };
        Ok(LoopReport {
            sizing: self.cfg.sizing.name(),
            window_s,
            measured_s,
            measured,
            monitored_sizes: self.monitored.parts.clone(),
            targets,
            loads: fractions,
            achieved,
            decision,
            partition_s,
            moved_weight,
            warnings,
        })
    }

    /// What the last migration cost, for Lan's test at the next rebalance: `seconds` of
    /// repartition, migration and rebuild (δ), `bytes` moved for `weight` moved. Every rank
    /// must pass the same figures (e.g. the slowest rank's time, global sums), or the ranks'
    /// decisions could differ.
    pub fn record_migration(&mut self, seconds: f64, bytes: f64, weight: f64) {
        if seconds.is_finite() && seconds >= 0.0 {
            self.delta = seconds;
        }
        if weight > 0.0 && bytes.is_finite() && bytes >= 0.0 {
            self.bytes_per_weight = bytes / weight;
        }
    }

    /// Stops the agent and reports its cost.
    pub fn stop(mut self) -> Result<Option<LoopSummary>, Error> {
        let Some(m) = self.monitor.take() else {
            return Ok(None);
        };
        let rec = m.stop()?;
        Ok(Some(summary(&rec.stats)))
    }

    /// Cuts this rank's window into the pending measurement; returns its length (0 if the
    /// agent is not running or failed; a failure is kept as the pending measurement's error).
    fn cut_window(&mut self) {
        let Some(m) = &self.monitor else {
            self.pending
                .error
                .get_or_insert_with(|| "no monitoring agent".into());
            return;
        };
        match m.window() {
            Ok(w) => self.pending.add(&w),
            Err(e) => self.pending.error = Some(e.to_string()),
        }
    }

    /// New node observations from the ranks' windows, then the monitored powers.
    fn observe(&mut self, accs: &[Accum], warnings: &mut Vec<String>) {
        for node in self.machine.computing_nodes() {
            let range = node.rank_range();
            if range.is_empty() {
                continue;
            }
            let of_node = &accs[range.clone()];
            if let Some((r, e)) = of_node
                .iter()
                .enumerate()
                .find_map(|(i, a)| a.error.as_ref().map(|e| (range.start + i, e)))
            {
                warnings.push(format!(
                    "rank {r} ({}): {e}; its node keeps its previous measurement",
                    node.label()
                ));
                continue;
            }
            if !of_node.iter().all(Accum::evidence) {
                continue; // a rank with (almost) nothing to do: no news of its node
            }
            let first = &of_node[0];
            let t = first.seconds.max(1e-12);
            let runnable: Option<Vec<f64>> = of_node
                .iter()
                .map(|a| a.runnable_s.map(|x| x / a.seconds.max(1e-12)))
                .collect();
            let obs = NodeObservation {
                cpu_idle: first
                    .idle_s
                    .iter()
                    .map(|x| (x / t).clamp(0.0, 1.0))
                    .collect(),
                proc_util: of_node
                    .iter()
                    .map(|a| a.util_s / a.seconds.max(1e-12))
                    .collect(),
                proc_runnable: runnable.unwrap_or_default(),
                memory: first
                    .mem
                    .map(|(total, available)| MemoryObservation { total, available }),
                ifaces: first
                    .ifaces
                    .iter()
                    .map(|(name, cap, v)| IfaceObservation {
                        name: name.clone(),
                        capacity_mbps: *cap,
                        rates: Some(IfaceRates {
                            rx_bytes: v[0] / t,
                            tx_bytes: v[1] / t,
                            rx_packets: v[2] / t,
                            tx_packets: v[3] / t,
                        }),
                    })
                    .collect(),
            };
            self.nodes.insert(node.nodenum, obs);
        }
        let obs = Observations {
            nodes: self.nodes.clone(),
            rank_work: BTreeMap::new(),
        };
        match compute_powers(&self.machine, &self.cfg.power, &obs) {
            Ok(p) => {
                warnings.extend(p.warnings.iter().map(|w| w.to_string()));
                self.monitored = p;
            }
            Err(e) => warnings.push(format!(
                "the monitored powers could not be computed ({e}); the previous part sizes stay"
            )),
        }
    }
}

/// α, β between the root's groups; timings too noisy to fit (a busy host: the large message
/// was not slower) are measured once more with three times the repeats, and then given up
/// (the inner error) rather than failing the run.
fn measure_link<C: Comm + Reduce>(
    comm: &C,
    plan: &Plan,
    probe: &LinkProbe,
) -> Result<Result<LinkModel, comm::LinkFitError>, Error> {
    let mut probe = probe.clone();
    for attempt in 0..2 {
        match measure_group_link(comm, plan, plan.root(), &probe) {
            Ok(link) => return Ok(Ok(link)),
            Err(Error::DegenerateTimings(e)) if attempt == 1 => return Ok(Err(e)),
            Err(Error::DegenerateTimings(_)) => probe.repeats *= 3,
            Err(e) => return Err(e),
        }
    }
    unreachable!("the second attempt returns")
}

fn summary(s: &MonitorStats) -> LoopSummary {
    LoopSummary {
        wall_s: s.wall_seconds,
        cpu_s: s.cpu_seconds + s.window_cpu_seconds,
        overhead: s.overhead(),
        periods: s.periods,
        windows: s.windows,
    }
}

#[cfg(test)]
mod tests;
