//! [`DrumLoop`]: one rank's side of DRUM in the loop (see the crate documentation).

use crate::Error;
use crate::capacity::{
    LoadMeasure, WorkLedger, held_work, node_memory, seconds_per_work, time_loads, time_weights,
};
use crate::cost::{Lap, RebalanceCost};
use crate::rebalance::{Decision, Migration, Observation, Policy, measure_group_link};
use crate::window::RankWindow;
use comm::wire::{Reader, Writer};
use comm::{Comm, CommError, LinkModel, LinkProbe};
use drum_model::monitor::{
    Monitor, MonitorConfig, MonitorStats, MonitorTarget, ProcFs, ProcessRef, start_monitoring,
};
use drum_model::usage::Usage;
use drum_model::{
    Machine, NodeObservation, Observations, PowerConfig, PowerModel, Powers, RankWork,
    compute_powers, static_powers, uniform_powers,
};
use hier_part::{Hier, HierPartition, Plan, Workspace};
use part_api::{Points, Reduce};
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
    /// Powers are renewed only from windows at least this long (default 30 ms; shorter ones
    /// add up into the next points): /proc/stat counts CPU time in 10 ms ticks.
    pub min_window: Duration,
    /// Where `/proc` and `/sys` are (tests use fake trees).
    pub procfs: ProcFs,
    /// How α and β are measured at start-up; `None`: no profitability test.
    pub probe: Option<LinkProbe>,
    /// The partitioner (its parallelism).
    pub hier: Hier,
    /// What each rank's load is: its objects' work, or its measured time (Watts et al.'s
    /// homogeneous balancing with [`Sizing::Uniform`]).
    pub load: LoadMeasure,
}

impl LoopConfig {
    /// The power configuration of the partition before any window was measured: a model
    /// that needs measurements ([`PowerModel::Measured`]) starts from DRUM's static ratings.
    pub fn starting_power(&self) -> PowerConfig {
        match self.power.model {
            PowerModel::Measured => PowerConfig {
                model: PowerModel::Drum { w_comm: 0.0 },
                ..self.power.clone()
            },
            _ => self.power.clone(),
        }
    }
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
            load: LoadMeasure::default(),
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
        DecisionReport {
            rebalance: d.rebalance,
            reason: d.reason.name().into(),
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
    /// Where this rank's seconds of the rebalance point went (window, exchange, decision,
    /// partitioner).
    pub cost: RebalanceCost,
    /// What went wrong and was worked around (each names the rank or node and the cause).
    pub warnings: Vec<String>,
}

/// What [`DrumLoop::measure`] found (the same on every rank).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensed {
    /// Seconds since the previous rebalance point (the longest over the ranks).
    pub window_s: f64,
    /// Seconds of measurement the powers were computed from (0: the window was too short
    /// or sensing was not due; the powers stay as they were).
    pub measured_s: f64,
    /// Per rank, what its agent measured over `measured_s`.
    pub measured: Vec<RankMeasure>,
    /// Part sizes from the monitored powers (whatever the sizing).
    pub monitored_sizes: Vec<f64>,
    /// What went wrong and was worked around.
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

/// One rank's figures for a rebalance point that rides on a collective of the application's
/// own ([`DrumLoop::point_figures`]): the bytes to gather from every rank, and what this rank
/// keeps of its cut.
#[derive(Debug)]
#[must_use = "the figures are passed back to DrumLoop::rebalance_lazy_gathered"]
pub struct PointFigures {
    pub(crate) bytes: Vec<u8>,
    pub(crate) cut_s: f64,
}

impl PointFigures {
    /// This rank's contribution: time since the last point, load and pending window (a few
    /// dozen bytes; the same layout as the point's own gather).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// What every rank learns at a rebalance point, in one collective.
struct Gathered {
    /// Seconds since the previous point (the longest over the ranks).
    window_s: f64,
    /// The weight each rank holds.
    loads: Vec<f64>,
    /// Each rank's pending window.
    windows: Vec<RankWindow>,
    /// Seconds this rank took to cut its own window.
    cut_s: f64,
}

/// The points of a lazy rebalance point ([`DrumLoop::rebalance_lazy`],
/// [`crate::Balancing::rebalance_lazy`]): the coordinates, the current ranks and the dimension
/// `fill` writes for `n` objects, checked against `n`.
pub(crate) fn made_points(
    n: usize,
    fill: impl FnOnce(&mut Vec<f64>, &mut Vec<u32>) -> usize,
) -> Result<(Vec<f64>, Vec<u32>, usize), Error> {
    let (mut coords, mut parts) = (Vec::new(), Vec::new());
    let dim = fill(&mut coords, &mut parts);
    if parts.len() != n {
        return Err(Error::LengthMismatch {
            what: "rebalance_lazy's current ranks",
            got: parts.len(),
            expected: n,
            per: "local object",
        });
    }
    if coords.len() != n * dim {
        return Err(Error::LengthMismatch {
            what: "rebalance_lazy's coordinates",
            got: coords.len(),
            expected: n * dim,
            per: "local object and dimension",
        });
    }
    Ok((coords, parts, dim))
}

/// A rebalance point decided and not yet finished ([`DrumLoop::decide_point`]).
struct Decided {
    lap: Lap,
    warnings: Vec<String>,
    point: Gathered,
    /// Seconds of the gather, the sensing and the decision.
    laps: [f64; 3],
    measured_s: f64,
    total: f64,
    per_work: Option<Vec<f64>>,
    fractions: Vec<f64>,
    targets: Vec<f64>,
    decision: DecisionReport,
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
    pending: RankWindow,
    /// Rebalance points since the powers were last renewed, and whether they ever were.
    since_sensed: usize,
    sensed: bool,
    /// When the last rebalance point was.
    last_point: Instant,
    /// The last observation of every computing node (the static one until measured).
    nodes: BTreeMap<u32, NodeObservation>,
    last_total: Option<f64>,
    /// Each rank's latest work and CPU seconds (Watts' measured capacity), kept while a
    /// window says nothing of it.
    work: BTreeMap<usize, RankWork>,
    /// The work each rank did over the pending window.
    ledger: WorkLedger,
    bytes_per_weight: f64,
    /// δ's fixed part: what the last rebalance point that kept its partition cost.
    delta: f64,
    /// δ's part per unit of weight, from the last repartition ([`DrumLoop::record_repartition`]).
    delta_per_weight: f64,
    /// How many steps after the next one the application expects
    /// ([`DrumLoop::set_remaining_steps`]).
    remaining: Option<u32>,
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
            return Err(hier_part::Error::RankCount {
                comm: Comm::size(comm),
                machine: machine.num_ranks(),
            }
            .into());
        }
        let rank = Comm::rank(comm);
        let statics = static_powers(&machine, &cfg.starting_power())?;
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
            pending: RankWindow::default(),
            since_sensed: 0,
            sensed: false,
            last_point: Instant::now(),
            nodes,
            last_total: None,
            work: BTreeMap::new(),
            ledger: WorkLedger::default(),
            bytes_per_weight: DEFAULT_BYTES_PER_WEIGHT,
            delta: 0.0,
            delta_per_weight: 0.0,
            remaining: None,
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

    /// The sensing half of a rebalance point alone (collective), for a caller that partitions
    /// itself (zoltan-drum asks for sizes at every `Zoltan_LB_Partition`): gathers the
    /// windows and, when sensing is due, renews the monitored powers (and, under
    /// [`Sizing::Monitored`], the part sizes in use, [`DrumLoop::part_sizes`]). Nothing is
    /// decided or partitioned.
    pub fn measure<C: Comm>(&mut self, comm: &C) -> Result<Sensed, Error> {
        let mut warnings: Vec<String> = self.start_warning.take().into_iter().collect();
        let point = self.gather(comm, None, 0)?;
        let measured_s = self.sense(&point, &mut warnings)?;
        Ok(Sensed {
            window_s: point.window_s,
            measured_s,
            measured: measures(&point),
            monitored_sizes: self.monitored.parts.clone(),
            warnings,
        })
    }

    /// The rebalance point (collective): measures, decides and, if the decision says so,
    /// repartitions `points` (this rank's objects with their work weights). `parts` holds
    /// each object's current rank on entry (this rank, for objects it created) and its new
    /// rank on return.
    ///
    /// Collectives: one `allgatherv` (every rank's time since the last point, load and
    /// pending window) when the partition is kept; the partitioner's own when it is not.
    pub fn rebalance<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        points: Points<'_>,
        parts: &mut [u32],
    ) -> Result<LoopReport, Error> {
        let (_, _, weights) = points.into_parts();
        let d = self.decide_point(comm, weights, parts.len())?;
        let objects = d.decision.rebalance.then_some((points, parts));
        self.finish_point(comm, d, objects)
    }

    /// [`DrumLoop::rebalance`] for an application whose points cost something to make (an
    /// element's centroid, say): the `n` local objects' weights (`None`: one each) are all
    /// the decision needs, and `fill` is called only when the decision repartitions, to write
    /// the coordinates (`n × dim` of them, into the empty vector it is given; it returns
    /// `dim`) and each object's current rank (`n` of them). Returns the report and, when the
    /// decision repartitioned, each object's new rank. The same decision, parts and
    /// collectives as [`DrumLoop::rebalance`] on the same objects; a kept partition costs
    /// neither the coordinates nor the ranks array.
    pub fn rebalance_lazy<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        n: usize,
        weights: Option<&[f64]>,
        fill: impl FnOnce(&mut Vec<f64>, &mut Vec<u32>) -> usize,
    ) -> Result<(LoopReport, Option<Vec<u32>>), Error> {
        let d = self.decide_point(comm, weights, n)?;
        self.finish_lazy(comm, d, n, weights, fill)
    }

    /// The first half of a rebalance point that rides on a collective the application makes
    /// anyway (its agreement after a refinement, say), saving the point's own gather: cuts
    /// this rank's window and returns its figures. Every rank passes the bytes of its own to
    /// the application's collective, then the figures and every rank's bytes, in rank order,
    /// to [`DrumLoop::rebalance_lazy_gathered`], with no other call of the loop between.
    pub fn point_figures(&mut self, weights: Option<&[f64]>, n: usize) -> PointFigures {
        let (bytes, cut_s) = self.figures(weights, n);
        PointFigures { bytes, cut_s }
    }

    /// [`DrumLoop::rebalance_lazy`] on figures the application gathered
    /// ([`DrumLoop::point_figures`]; `all[r]`: rank r's bytes): the same decision, parts and
    /// report, without the point's own collective when the partition is kept (the report's
    /// exchange is then the decoding alone). Figures of another count than the ranks, or
    /// garbled in their fixed part, are an error; a garbled window becomes that rank's warning
    /// as in the point's own gather.
    pub fn rebalance_lazy_gathered<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        mine: PointFigures,
        all: &[&[u8]],
        n: usize,
        weights: Option<&[f64]>,
        fill: impl FnOnce(&mut Vec<f64>, &mut Vec<u32>) -> usize,
    ) -> Result<(LoopReport, Option<Vec<u32>>), Error> {
        let ranks = Comm::size(comm);
        if all.len() != ranks {
            return Err(Error::LengthMismatch {
                what: "a rebalance point's gathered figures",
                got: all.len(),
                expected: ranks,
                per: "rank",
            });
        }
        let mut lap = Lap::start();
        let point = self.decoded(all.iter().copied(), mine.cut_s)?;
        let gather_s = mine.cut_s + lap.lap();
        let d = self.decided(lap, point, gather_s)?;
        self.finish_lazy(comm, d, n, weights, fill)
    }

    /// The second half of [`DrumLoop::rebalance_lazy`]: the points made only when the decision
    /// repartitions.
    fn finish_lazy<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        mut d: Decided,
        n: usize,
        weights: Option<&[f64]>,
        fill: impl FnOnce(&mut Vec<f64>, &mut Vec<u32>) -> usize,
    ) -> Result<(LoopReport, Option<Vec<u32>>), Error> {
        if !d.decision.rebalance {
            return Ok((self.finish_point(comm, d, None)?, None));
        }
        let (coords, mut parts, dim) = made_points(n, fill)?;
        // The application's own work, not the rebalance point's.
        d.lap.lap();
        let points = Points::new(&coords, dim, weights);
        let report = self.finish_point(comm, d, Some((points, &mut parts)))?;
        Ok((report, Some(parts)))
    }

    /// The first half of a rebalance point: the gather, the sensing and the decision, which
    /// need only the local objects' count and weights.
    fn decide_point<C: Comm>(
        &mut self,
        comm: &C,
        weights: Option<&[f64]>,
        n: usize,
    ) -> Result<Decided, Error> {
        let mut lap = Lap::start();
        let point = self.gather(comm, weights, n)?;
        let gather_s = lap.lap();
        self.decided(lap, point, gather_s)
    }

    /// The sensing and the decision on the gathered `point` (`gather_s`: the seconds it took).
    fn decided(&mut self, mut lap: Lap, point: Gathered, gather_s: f64) -> Result<Decided, Error> {
        let mut warnings: Vec<String> = self.start_warning.take().into_iter().collect();
        let measured_s = self.sense(&point, &mut warnings)?;
        let sense_s = lap.lap();
        let total: f64 = point.loads.iter().sum();
        let per_work = (self.cfg.load == LoadMeasure::Time)
            .then(|| seconds_per_work(&self.work, point.loads.len()))
            .flatten();
        let loads = time_loads(&point.loads, per_work.as_deref());
        let sum: f64 = loads.iter().sum();
        let fractions: Vec<f64> = loads.iter().map(|l| l / sum.max(1e-300)).collect();
        let targets = self.powers.parts.clone();
        let decision = self.decide(&fractions, &targets, total, point.window_s, &point.loads)?;
        self.last_total = Some(total);
        let decision_s = lap.lap();
        Ok(Decided {
            lap,
            warnings,
            point,
            laps: [gather_s, sense_s, decision_s],
            measured_s,
            total,
            per_work,
            fractions,
            targets,
            decision,
        })
    }

    /// The second half of a rebalance point: the repartition of `objects` (given exactly
    /// when the decision rebalances) and the report.
    fn finish_point<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        d: Decided,
        objects: Option<(Points<'_>, &mut [u32])>,
    ) -> Result<LoopReport, Error> {
        let Decided {
            mut lap,
            warnings,
            point,
            laps: [gather_s, sense_s, decision_s],
            measured_s,
            total,
            per_work,
            fractions,
            targets,
            decision,
        } = d;
        let measured = measures(&point);
        let (achieved, partition_s, moved_weight) = match objects {
            Some((points, parts)) if decision.rebalance && total > 0.0 => {
                let scaled = per_work.map(|f| time_weights(points, parts.len(), f[self.rank]));
                let timed = Points {
                    weights: scaled.as_deref().or(points.weights),
                    ..points
                };
                let r = self.repartition(comm, timed, parts, &targets)?;
                self.ledger.hold(match scaled {
                    None => r.0.iter().map(|a| a * total).collect(),
                    Some(_) => held_work(comm, points, parts)?,
                });
                r
            }
            _ => {
                self.ledger.hold(point.loads.clone());
                (fractions.clone(), 0.0, 0.0)
            }
        };
        // The rebalance's own time (the partitioner: a diffusion level's kNN graph, say) is
        // not the application's work, and Watts et al.'s capacity divides work by the
        // window's seconds: the next window starts here, not at this point's cut.
        self.restart_window();
        let cost = RebalanceCost {
            window_s: point.cut_s + sense_s,
            exchange_s: gather_s - point.cut_s,
            decision_s,
            partition_s,
            total_s: gather_s + sense_s + decision_s + lap.lap(),
        };
        Ok(LoopReport {
            sizing: self.cfg.sizing.name(),
            window_s: point.window_s,
            measured_s,
            measured,
            monitored_sizes: self.monitored.parts.clone(),
            targets,
            loads: fractions,
            achieved,
            decision,
            partition_s,
            moved_weight,
            cost,
            warnings,
        })
    }

    /// Cuts this rank's window into the pending measurement and gathers, in one collective,
    /// every rank's time since the last point, load (the weight it holds) and pending
    /// window. A cut window that is too short is not lost: the pending measurement adds it
    /// up ([`Usage::merge`]), so cutting at every point equals keeping it open.
    fn gather<C: Comm>(
        &mut self,
        comm: &C,
        weights: Option<&[f64]>,
        n: usize,
    ) -> Result<Gathered, Error> {
        let (mine, cut_s) = self.figures(weights, n);
        let all = comm.allgatherv_bytes(&mine)?;
        self.decoded((0..Comm::size(comm)).map(|r| all.get(r)), cut_s)
    }

    /// Cuts this rank's window into the pending measurement: this rank's figures for the
    /// point's gather (time since the last point, load, pending window) and the seconds the
    /// cut took.
    fn figures(&mut self, weights: Option<&[f64]>, n: usize) -> (Vec<u8>, f64) {
        let now = Instant::now();
        let since = now.duration_since(self.last_point).as_secs_f64();
        self.last_point = now;
        self.cut_window();
        let cut_s = now.elapsed().as_secs_f64();
        let load = weights.map_or(n as f64, |w| w.iter().sum());
        let mut w = Writer::default();
        w.f64(since);
        w.f64(load);
        w.bytes(&self.pending.encode());
        (w.into_bytes(), cut_s)
    }

    /// Every rank's figures ([`DrumLoop::figures`], in rank order) decoded.
    fn decoded<'a>(
        &mut self,
        all: impl ExactSizeIterator<Item = &'a [u8]>,
        cut_s: f64,
    ) -> Result<Gathered, Error> {
        let ranks = all.len();
        let mut window_s = 0.0f64;
        let mut loads = Vec::with_capacity(ranks);
        let mut windows = Vec::with_capacity(ranks);
        for figures in all {
            let mut rd = Reader::new(figures, "a rank's rebalance-point figures");
            window_s = window_s.max(rd.f64().map_err(CommError::from)?);
            loads.push(rd.f64().map_err(CommError::from)?);
            windows.push(RankWindow::decode(
                rd.bytes(rd.remaining()).map_err(CommError::from)?,
            ));
        }
        self.ledger.close_interval(ranks);
        Ok(Gathered {
            window_s,
            loads,
            windows,
            cut_s,
        })
    }

    /// Renews the monitored powers from the gathered windows when the longest is at least
    /// `min_window` and sensing is due; returns the seconds measured (0: powers unchanged).
    fn sense(&mut self, point: &Gathered, warnings: &mut Vec<String>) -> Result<f64, Error> {
        let longest = point
            .windows
            .iter()
            .map(RankWindow::seconds)
            .fold(0.0, f64::max);
        self.since_sensed += 1;
        let due = self.cfg.sensing.due(self.sensed, self.since_sensed);
        if longest >= self.cfg.min_window.as_secs_f64() && due {
            let work = self.ledger.take();
            self.observe(&point.windows, &work, warnings);
            self.pending = RankWindow::default();
            self.since_sensed = 0;
            self.sensed = true;
            if self.cfg.sizing == Sizing::Monitored {
                self.powers = self.monitored.clone();
                self.plan = Plan::new(&self.machine, &self.powers)?;
            }
            return Ok(longest);
        }
        if self.cfg.sensing == Sensing::Once && self.sensed {
            self.pending = RankWindow::default(); // measured once: windows are not kept
            self.ledger.take();
        }
        Ok(0.0)
    }

    /// The policy's decision on the loads the ranks hold now (fractions of `total`) against
    /// `targets`, or the initial partition; [`RebalanceMode`] overrides keep its figures.
    fn decide(
        &self,
        fractions: &[f64],
        targets: &[f64],
        total: f64,
        window_s: f64,
        work: &[f64],
    ) -> Result<DecisionReport, Error> {
        if self.previous.is_none() {
            return Ok(DecisionReport::initial());
        }
        let growth = self.last_total.map_or(1.0, |t| total / t.max(1e-300));
        let capacities: Vec<f64> = targets.iter().map(|&t| t.max(1e-12)).collect();
        let memory = node_memory(
            &self.machine,
            &self.nodes,
            work,
            self.bytes_per_weight,
            growth,
        );
        // The time the new partition would serve: the next step's (the window's, grown with
        // the load), and with the application's remaining steps each of theirs, the load
        // growing as it did (Lan et al.'s gain is over the next step alone).
        let horizon = gain_horizon(self.remaining, growth);
        let obs = Observation {
            loads: fractions,
            capacities: &capacities,
            partition_powers: self.partition_sizes.as_deref(),
            step_time: Some(window_s * growth * horizon),
            migration: self.link.map(|link| Migration {
                link,
                bytes_per_load: self.bytes_per_weight * total,
                // δ for the load as it is now: the fixed part and the part that grows with it.
                delta: self.delta + self.delta_per_weight * total,
            }),
            memory: Some(&memory),
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
        Ok(d)
    }

    /// KEEP_CUTS repartition into `targets` (a fresh partition the first time): the weight
    /// fractions achieved, the partitioner's seconds and the weight moved.
    fn repartition<C: Comm + Reduce>(
        &mut self,
        comm: &C,
        points: Points<'_>,
        parts: &mut [u32],
        targets: &[f64],
    ) -> Result<(Vec<f64>, f64, f64), Error> {
        let t0 = Instant::now();
        let hier = self.cfg.hier;
        // A workspace per repartition: kept between steps, its buffers would sit on top of
        // the application's peak.
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
        self.partition_sizes = Some(targets.to_vec());
        Ok((achieved, secs, moved))
    }

    /// What the last migration cost, for Lan's test at the next rebalance: `seconds` of
    /// repartition, migration and rebuild (δ; its fixed part when the application also
    /// calls [`DrumLoop::record_repartition`]; not finite: δ stays as it was), `bytes` moved
    /// for `weight` moved. Every rank must pass the same figures (e.g. the slowest rank's
    /// time, global sums), or the ranks' decisions could differ.
    pub fn record_migration(&mut self, seconds: f64, bytes: f64, weight: f64) {
        if seconds.is_finite() && seconds >= 0.0 {
            self.delta = seconds;
        }
        if weight > 0.0 && bytes.is_finite() && bytes >= 0.0 {
            self.bytes_per_weight = bytes / weight;
        }
    }

    /// What the last repartition cost in all (`seconds`: partitioner, migration and rebuild;
    /// the slowest rank's, the same on every rank) when the ranks held `total_weight`: the
    /// part above [`DrumLoop::record_migration`]'s fixed δ grows with the load, so Lan's test
    /// at a later point charges `δ + seconds_above · total_now / total_weight` (a fixed δ
    /// measured on a kept point undercounts a repartition of a large mesh many times over).
    pub fn record_repartition(&mut self, seconds: f64, total_weight: f64) {
        if let Some(b) = delta_per_weight(seconds, self.delta, total_weight) {
            self.delta_per_weight = b;
        }
    }

    /// How many steps the application expects after the next one (`None`: unknown, Lan et
    /// al.'s gain over the next step alone). A partition made now serves every one of them:
    /// the gain is counted over the next step and these, each step's time growing by the
    /// load's growth since the last point, so a rebalance that pays over the rest of the run
    /// is made early and one that cannot pay back before the end is not made late.
    pub fn set_remaining_steps(&mut self, steps: Option<u32>) {
        self.remaining = steps;
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

    /// Drops what the agent measured since the last cut: the next window starts now (and the
    /// time to the next point, Lan's step time, too). An unreadable counter leaves the cut
    /// where it was: the next window then also covers the rebalance.
    fn restart_window(&mut self) {
        if let Some(m) = &self.monitor {
            let _ = m.window();
        }
        self.last_point = Instant::now();
    }

    /// New node observations from the ranks' windows, then the monitored powers. `loads`:
    /// the work each rank did over the window, for [`drum_model::PowerModel::Measured`]
    /// (Watts et al. 1998: capacity = work ÷ the seconds of the window it took).
    fn observe(&mut self, accs: &[RankWindow], loads: &[f64], warnings: &mut Vec<String>) {
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
            if !of_node.iter().all(RankWindow::evidence) {
                continue; // a rank with (almost) nothing to do: no news of its node
            }
            let usages: Vec<Usage> = of_node.iter().map(|a| a.usage.clone()).collect();
            self.nodes
                .insert(node.nodenum, Usage::join(&usages).observation());
        }
        self.work.extend(rank_work(accs, loads));
        let obs = Observations {
            nodes: self.nodes.clone(),
            rank_work: self.work.clone(),
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

/// What every rank's agent measured, from the gathered windows.
fn measures(point: &Gathered) -> Vec<RankMeasure> {
    let windows = point.windows.iter().enumerate();
    windows.map(|(r, a)| a.measure(r)).collect()
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

/// Each rank's work over its window and the seconds it took, for the ranks whose window has
/// both and enough evidence. The seconds are those the rank was runnable (on its CPU or
/// waiting for it; its CPU seconds where the kernel does not say): on a CPU shared with
/// competing programs, work ÷ CPU seconds measures the core and not the share the rank gets,
/// which Watts et al. adjust for by the load average (work ÷ CPU seconds ÷ (runnable ÷ CPU
/// seconds), see `drum_model::power::load_average`).
fn rank_work(accs: &[RankWindow], loads: &[f64]) -> BTreeMap<usize, RankWork> {
    (accs.iter().zip(loads).enumerate())
        .filter_map(|(r, (a, &work))| {
            let p = a.usage.procs.first()?;
            let cpu_seconds = p.runnable_s.filter(|&s| s >= p.cpu_s).unwrap_or(p.cpu_s);
            (a.error.is_none() && a.evidence() && work > 0.0 && cpu_seconds > 0.0)
                .then_some((r, RankWork { work, cpu_seconds }))
        })
        .collect()
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

/// The time a partition made now serves, in units of the next step's: 1 without `remaining`
/// (Lan et al.), else the next step and the `remaining` after it, each `growth` (the load's
/// growth since the last point, at least 1, at most 16) times the one before.
pub(crate) fn gain_horizon(remaining: Option<u32>, growth: f64) -> f64 {
    remaining.map_or(1.0, |r| {
        let g = if growth.is_finite() {
            growth.clamp(1.0, 16.0)
        } else {
            1.0
        };
        (0..=r.min(64)).map(|j| g.powi(j as i32)).sum()
    })
}

/// δ's part per unit of weight from a repartition that cost `seconds` in all with
/// `total_weight` held, above the fixed part `fixed` (never below 0); `None` for figures that
/// say nothing.
pub(crate) fn delta_per_weight(seconds: f64, fixed: f64, total_weight: f64) -> Option<f64> {
    (seconds.is_finite() && seconds >= 0.0 && total_weight > 0.0 && total_weight.is_finite())
        .then(|| (seconds - fixed).max(0.0) / total_weight)
}
