//! The simulator: the real meshes of every step, partitioned by the real `hier-part` for the
//! simulated machine's ranks and part sizes (KEEP_CUTS repartitions, the real rebalance
//! policy), timed by a model calibrated on a run measured on this host:
//!
//! - compute: `a_k` seconds per element at step k on one of this host's cores (measured),
//!   scaled by the host core's MFLOPS over the node's, divided by the CPU share the node's
//!   processes get beside its competing processes;
//! - the partitioner: `p` seconds per element and rank when a step repartitions (measured);
//! - communication: on this host, the measured common waiting of each step; on a cluster, an
//!   α–β model per message from the tree's bandwidth, with the halo volumes and neighbour
//!   counts the partitions actually produce (bytes per cut edge and CG iteration measured),
//!   the off-node traffic of a node's processes sharing its interface;
//! - migration: the elements the repartition moves, times the measured bytes per element;
//! - a step ends at its slowest rank.

use crate::calib::Calib;
use crate::error::{Context, Result, bail};
use comm::LinkModel;
use drum_loop::rebalance::{Migration, Observation, Policy};
use drum_loop::{RebalanceMode, Sensing, Sizing};
use drum_model::{Machine, PowerConfig, PowerModel};
use hier_part::{Hier, HierPartition, Plan, Points, Serial, Workspace};

use crate::meshes::StepMesh;

/// The network of a simulated machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Net {
    /// This host: the common waiting per step measured by the calibration run (2 ranks).
    Host,
    /// A switched network: latency (s) and bandwidth (bytes/s) of each node's interface.
    Switched { alpha: f64, bytes_per_s: f64 },
}

/// Messages to each neighbour rank per CG iteration (the matrix-vector product and the
/// preconditioner's exchange): an assumption of the model, not a measurement.
pub const MESSAGES_PER_ITERATION: f64 = 2.0;
/// Reductions per CG iteration (two dot products): from the algorithm.
pub const REDUCTIONS_PER_ITERATION: f64 = 2.0;
/// Collectives per step outside CG (marking's selection, the estimator's sums, the
/// partitioner's rounds, the migration's counts): an estimate.
pub const COLLECTIVES_PER_STEP: f64 = 30.0;

/// A computing node of a simulated machine.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    /// LINPACK rating of one CPU.
    pub mflops: f64,
    /// CPUs.
    pub cpus: usize,
    /// Application processes (ranks) on it.
    pub procs: usize,
}

impl NodeSpec {
    pub fn new(name: &str, mflops: f64, cpus: usize, procs: usize) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            mflops,
            cpus,
            procs,
        }
    }
}

/// A DrumHead file for `nodes` under one switch of `mbit` Mbit/s (HSFC, KEEP_CUTS at every
/// level).
pub fn machine_xml(nodes: &[NodeSpec], mbit: f64) -> String {
    let mut s = format!(
        "<machinemodel>\n  <node type=\"NETWORK\" nodenum=\"0\" name=\"switch\" parent=\"-1\" bandwidth=\"{mbit}\">\n    <lbmethod lbm=\"HSFC\" KEEP_CUTS=\"1\"/>\n  </node>\n"
    );
    for (i, n) in nodes.iter().enumerate() {
        if n.cpus > 1 || n.procs > 1 {
            s += &format!(
                "  <node type=\"MULTIPLE_COMPUTING\" nodenum=\"{}\" name=\"{}\" parent=\"0\" numprocs=\"{}\" ranks=\"{}\" mflops=\"{}\">\n    <lbmethod lbm=\"HSFC\" KEEP_CUTS=\"1\"/>\n  </node>\n",
                i + 1,
                n.name,
                n.cpus,
                n.procs,
                n.mflops
            );
        } else {
            s += &format!(
                "  <node type=\"SINGLE_COMPUTING\" nodenum=\"{}\" name=\"{}\" parent=\"0\" mflops=\"{}\"/>\n",
                i + 1,
                n.name,
                n.mflops
            );
        }
    }
    s + "</machinemodel>\n"
}

fn machine(nodes: &[NodeSpec]) -> Result<Machine> {
    Machine::parse_str(&machine_xml(nodes, 100.0), "simulated machine")
        .context("the simulated machine")
}

/// Competing compute-bound processes on the node of `rank`, from step `from` to step `until`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimLoad {
    pub rank: usize,
    pub procs: usize,
    pub from: usize,
    pub until: Option<usize>,
}

impl SimLoad {
    pub(crate) fn active_at(&self, k: usize) -> bool {
        k >= self.from && self.until.is_none_or(|u| k < u)
    }
}

/// One simulated configuration.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub nodes: Vec<NodeSpec>,
    pub net: Net,
    pub sizing: Sizing,
    pub w_comm: f64,
    pub loads: Vec<SimLoad>,
    pub rebalance: RebalanceMode,
    pub sensing: Sensing,
    pub policy: Policy,
    /// The shortest window the monitors sense on, seconds (the loop's
    /// `LoopConfig::min_window`): a due sensing waits until the window is this long.
    pub min_window: f64,
}

/// What a simulated run gives.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimResult {
    /// Sum of the steps' times, seconds.
    pub time_s: f64,
    /// Each step's time.
    pub step_s: Vec<f64>,
    /// Of which the slowest rank's compute, summed over the steps.
    pub compute_s: f64,
    /// Communication (halo, reductions, migration) on the slowest rank, summed.
    pub comm_s: f64,
    /// Repartitions (the initial one included).
    pub rebalances: usize,
    /// The steps whose rebalance point renewed the monitored powers.
    pub sensed_at: Vec<usize>,
    /// Elements that changed rank after step 0.
    pub migrated_elements: u64,
    /// Their bytes.
    pub migrated_bytes: f64,
    /// Mean over the steps of the slowest rank's compute over the mean.
    pub imbalance: f64,
}

/// Each rank's node index.
fn rank_nodes(nodes: &[NodeSpec]) -> Vec<usize> {
    nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| std::iter::repeat_n(i, n.procs))
        .collect()
}

/// The CPU share each node's processes get at step `k` beside the loads active then.
fn shares(nodes: &[NodeSpec], loads: &[SimLoad], rank_node: &[usize], k: usize) -> Vec<f64> {
    let mut extra = vec![0usize; nodes.len()];
    for l in loads.iter().filter(|l| l.active_at(k)) {
        extra[rank_node[l.rank]] += l.procs;
    }
    nodes
        .iter()
        .zip(&extra)
        .map(|(n, &e)| (n.cpus as f64 / (n.procs + e) as f64).min(1.0))
        .collect()
}

/// Each rank's CPU share under `cfg`'s loads at step `k` (its node's: `cpus` over its
/// processes and competitors, at most 1).
pub(crate) fn rank_shares(cfg: &SimConfig, k: usize) -> Vec<f64> {
    let rn = rank_nodes(&cfg.nodes);
    let share = shares(&cfg.nodes, &cfg.loads, &rn, k);
    rn.iter().map(|&n| share[n]).collect()
}

/// The machine the partitioner sees (the ratings times the CPU shares DRUM measured, for
/// monitored sizes) and its powers under `sizing`.
fn powers(
    nodes: &[NodeSpec],
    sizing: Sizing,
    w_comm: f64,
    share: &[f64],
) -> Result<(Machine, drum_model::Powers)> {
    let model = PowerModel::Drum { w_comm };
    let cfg = PowerConfig {
        model: model.clone(),
        ..PowerConfig::default()
    };
    Ok(match sizing {
        Sizing::Uniform => {
            let m = machine(nodes)?;
            let p = drum_model::uniform_powers(&m, model)?;
            (m, p)
        }
        Sizing::Static => {
            let m = machine(nodes)?;
            let p = drum_model::static_powers(&m, &cfg)?;
            (m, p)
        }
        Sizing::Monitored => {
            let seen: Vec<NodeSpec> = nodes
                .iter()
                .zip(share)
                .map(|(n, s)| NodeSpec {
                    mflops: n.mflops * s,
                    ..n.clone()
                })
                .collect();
            let m = machine(&seen)?;
            let p = drum_model::static_powers(&m, &cfg)?;
            (m, p)
        }
    })
}

/// Cut edges between every pair of ranks (`cut[r * R + s]`, counted on both sides).
fn cuts(mesh: &StepMesh, owner: &[u32], ranks: usize) -> Vec<f64> {
    let mut cut = vec![0.0; ranks * ranks];
    for (t, nb) in mesh.nbr.iter().enumerate() {
        let r = owner[t] as usize;
        for &n in nb {
            if let Some(&s) = owner.get(n as usize)
                && s as usize != r
            {
                cut[r * ranks + s as usize] += 1.0;
            }
        }
    }
    cut
}

/// The link between ranks `r` and `s` (same node: this host's; else the network's, its
/// bandwidth shared by the node's `procs` processes).
fn link(
    net: Net,
    calib: &Calib,
    nodes: &[NodeSpec],
    rn: &[usize],
    r: usize,
    s: usize,
) -> LinkModel {
    match net {
        Net::Switched { alpha, bytes_per_s } if rn[r] != rn[s] => LinkModel {
            alpha,
            beta: nodes[rn[r]].procs.max(nodes[rn[s]].procs) as f64 / bytes_per_s,
        },
        _ => calib.link,
    }
}

/// Simulates `cfg` over the meshes `seq`.
pub fn simulate(seq: &[StepMesh], calib: &Calib, cfg: &SimConfig) -> Result<SimResult> {
    if seq.len() != calib.a.len() {
        bail!(
            "the calibration has {} steps, the meshes {}",
            calib.a.len(),
            seq.len()
        );
    }
    let mut run = Run::new(seq, calib, cfg);
    for k in 0..seq.len() {
        run.step(k)?;
    }
    let mut out = run.out;
    out.imbalance /= seq.len().max(1) as f64;
    Ok(out)
}

/// A simulated run between its steps: the partition, the sensing window and the sizes in
/// use, which each step reads and leaves for the next.
struct Run<'a> {
    seq: &'a [StepMesh],
    calib: &'a Calib,
    cfg: &'a SimConfig,
    /// Each rank's node index.
    rn: Vec<usize>,
    ranks: usize,
    hier: Hier,
    ws: Workspace,
    /// Each element's rank after the last step.
    owner: Vec<u32>,
    previous: Option<HierPartition>,
    /// The part sizes of the last repartition.
    used_sizes: Option<Vec<f64>>,
    /// Whether the powers were ever sensed, and rebalance points since they last were.
    sensed: bool,
    since: usize,
    /// The powers and the partitioner's plan for the CPU shares last sensed.
    current: Option<(Vec<f64>, drum_model::Powers, Plan)>,
    /// The link a migration is priced on by the policy.
    link0: LinkModel,
    /// The CPU shares the monitors last reported.
    seen_share: Vec<f64>,
    /// The window since the last sensing: each node's CPU seconds, and its wall seconds.
    acc: Vec<f64>,
    acc_t: f64,
    last_step_s: f64,
    out: SimResult,
}

/// What a step's migration moved: the elements each rank sent and received, its partners,
/// which pairs of ranks exchanged (`pair[a * R + b]`, from a to b), and the total.
struct Moves {
    by_rank: Vec<f64>,
    partners: Vec<f64>,
    pair: Vec<bool>,
    total: u64,
}

impl Moves {
    /// What moved from `inherited` to `parts` at step `k` (nothing at step 0: the initial
    /// partition migrates nothing).
    fn between(inherited: &[u32], parts: &[u32], ranks: usize, k: usize) -> Moves {
        let mut m = Moves {
            by_rank: vec![0.0; ranks],
            partners: vec![0.0; ranks],
            pair: vec![false; ranks * ranks],
            total: 0,
        };
        if k > 0 {
            for (&a, &b) in inherited.iter().zip(parts) {
                if a != b {
                    m.total += 1;
                    m.by_rank[a as usize] += 1.0;
                    m.by_rank[b as usize] += 1.0;
                    m.pair[a as usize * ranks + b as usize] = true;
                }
            }
            for r in 0..ranks {
                m.partners[r] = (0..ranks).filter(|&s| m.exchanged(r, s)).count() as f64;
            }
        }
        m
    }

    /// Whether ranks `r` and `s` exchanged elements (either way).
    fn exchanged(&self, r: usize, s: usize) -> bool {
        let ranks = self.by_rank.len();
        self.pair[r * ranks + s] || self.pair[s * ranks + r]
    }
}

/// One step's times: each rank's compute, the slowest rank's (total, compute,
/// communication), and the common waiting.
struct StepTimes {
    computes: Vec<f64>,
    slowest: (f64, f64, f64),
    wait: f64,
}

impl<'a> Run<'a> {
    fn new(seq: &'a [StepMesh], calib: &'a Calib, cfg: &'a SimConfig) -> Run<'a> {
        let rn = rank_nodes(&cfg.nodes);
        let nodes = cfg.nodes.len();
        Run {
            seq,
            calib,
            cfg,
            ranks: rn.len(),
            rn,
            hier: Hier {
                par: hier_part::Par::Seq,
            },
            ws: Workspace::default(),
            owner: Vec::new(),
            previous: None,
            used_sizes: None,
            sensed: false,
            since: 0,
            current: None,
            link0: match cfg.net {
                Net::Host => calib.link,
                Net::Switched { alpha, bytes_per_s } => LinkModel {
                    alpha,
                    beta: 1.0 / bytes_per_s,
                },
            },
            seen_share: vec![1.0; nodes],
            acc: vec![0.0; nodes],
            acc_t: 0.0,
            last_step_s: 0.0,
            out: SimResult {
                time_s: 0.0,
                step_s: Vec::new(),
                compute_s: 0.0,
                comm_s: 0.0,
                rebalances: 0,
                sensed_at: Vec::new(),
                migrated_elements: 0,
                migrated_bytes: 0.0,
                imbalance: 0.0,
            },
        }
    }

    /// Step `k`: sense, decide, repartition, migrate, time the ranks, record.
    fn step(&mut self, k: usize) -> Result<()> {
        let seq = self.seq;
        let mesh = &seq[k];
        let n = mesh.elements();
        let inherited: Vec<u32> = if k == 0 {
            vec![0; n]
        } else {
            mesh.parent
                .iter()
                .map(|&p| self.owner[p as usize])
                .collect()
        };
        let mut before = vec![0.0; self.ranks];
        for &p in &inherited {
            before[p as usize] += 1.0;
        }
        let share = shares(&self.cfg.nodes, &self.cfg.loads, &self.rn, k);
        let pre_s = self.pre_phase(k, &before, &share);
        self.sense(k, pre_s, &share);
        self.renew_plan()?;
        let sizes = self.current.as_ref().expect("just set").1.parts.clone();
        let delta = self.calib.p * n as f64 / self.ranks as f64;
        let rebalance = self.decide(k, &inherited, &sizes, delta)?;
        let mut parts = inherited.clone();
        let mut partition_s = 0.0;
        if rebalance {
            self.repartition(mesh, &mut parts)?;
            self.used_sizes = Some(sizes.clone());
            self.out.rebalances += 1;
            partition_s = delta;
        }
        let moves = Moves::between(&inherited, &parts, self.ranks, k);
        self.owner = parts;
        let mut work = vec![0.0; self.ranks];
        for &p in &self.owner {
            work[p as usize] += 1.0;
        }
        let times = self.times(k, [&before, &work], &share, &moves, partition_s);
        if std::env::var_os("DRUM_REPRO_DEBUG").is_some() {
            eprintln!(
                "step {k}: {n} elements, repartition {rebalance}, {} moved, slowest rank \
                 compute {:.3} s + communication {:.3} s, common wait {:.3} s; sizes {:.3?}, \
                 elements per rank {work:?}",
                moves.total, times.slowest.1, times.slowest.2, times.wait, sizes
            );
        }
        self.record(k, &times, moves.total, &share, pre_s);
        Ok(())
    }

    /// The seconds step `k` spends before its rebalance point (marking and refining the
    /// inherited elements `before`, at the CPU `share`s of step `k`): the slowest rank's.
    fn pre_phase(&self, k: usize, before: &[f64], share: &[f64]) -> f64 {
        let c = self.calib;
        (0..self.ranks)
            .map(|r| {
                let node = &self.cfg.nodes[self.rn[r]];
                c.cpu_seconds(k, before[r], 0.0, 0.0, 1.0) * (c.host_mflops / node.mflops)
                    / share[self.rn[r]]
            })
            .fold(0.0, f64::max)
    }

    /// The rebalance point of a monitored run: the window since the last sensing, which
    /// reaches into step `k` (its first `pre_s` seconds, marking and refining at the CPU
    /// `share`s of step `k`, as the real monitors' window does), becomes the CPU shares
    /// seen, if the sensing is due and the window at least `min_window` long.
    fn sense(&mut self, k: usize, pre_s: f64, share: &[f64]) {
        if k > 0 && self.cfg.sizing == Sizing::Monitored {
            for (a, s) in self.acc.iter_mut().zip(share) {
                *a += pre_s * s;
            }
            self.acc_t += pre_s;
            self.since += 1;
            // As the real loop: a due sensing waits until the window is long enough (the
            // early steps take milliseconds), and the count runs on meanwhile.
            if self.cfg.sensing.due(self.sensed, self.since)
                && self.acc_t > 0.0
                && self.acc_t >= self.cfg.min_window
            {
                self.seen_share = self.acc.iter().map(|a| a / self.acc_t).collect();
                self.acc.iter_mut().for_each(|a| *a = 0.0);
                self.acc_t = 0.0;
                self.sensed = true;
                self.out.sensed_at.push(k);
                self.since = 0;
            }
        }
    }

    /// The powers and the plan for the shares seen, when they changed.
    fn renew_plan(&mut self) -> Result<()> {
        if self.current.as_ref().is_none_or(|c| c.0 != self.seen_share) {
            let (m, p) = powers(
                &self.cfg.nodes,
                self.cfg.sizing,
                self.cfg.w_comm,
                &self.seen_share,
            )?;
            let plan = Plan::new(&m, &p)?;
            self.current = Some((self.seen_share.clone(), p, plan));
        }
        Ok(())
    }

    /// Whether step `k` repartitions: the first step always, then the forced mode or the
    /// policy on the inherited parts' loads against `sizes` (a migration priced on the
    /// network's link, the repartition costing `delta`).
    fn decide(&self, k: usize, inherited: &[u32], sizes: &[f64], delta: f64) -> Result<bool> {
        Ok(match (&self.used_sizes, self.cfg.rebalance.forced()) {
            (None, _) => true,
            (Some(_), Some(forced)) => forced,
            (Some(used), None) => {
                let n = inherited.len();
                let mut counts = vec![0.0; self.ranks];
                for &p in inherited {
                    counts[p as usize] += 1.0;
                }
                let fractions: Vec<f64> = counts.iter().map(|c| c / n as f64).collect();
                let capacities: Vec<f64> = sizes.iter().map(|s| s.max(1e-12)).collect();
                let growth = n as f64 / self.seq[k - 1].elements() as f64;
                let obs = Observation {
                    loads: &fractions,
                    capacities: &capacities,
                    partition_powers: Some(used),
                    step_time: Some(self.last_step_s * growth),
                    migration: Some(Migration {
                        link: self.link0,
                        bytes_per_load: self.calib.bytes_per_element * n as f64,
                        delta,
                    }),
                    memory: None,
                };
                self.cfg.policy.decide(&obs)?.rebalance
            }
        })
    }

    /// The real `hier-part` on the mesh's points for the current plan (KEEP_CUTS after the
    /// first partition).
    fn repartition(&mut self, mesh: &StepMesh, parts: &mut [u32]) -> Result<()> {
        let (_, _, plan) = self.current.as_ref().expect("planned before");
        let points = Points::new(&mesh.xy, 2, None);
        let result = match &self.previous {
            Some(prev) => {
                self.hier
                    .repartition(&mut self.ws, &Serial, plan, prev, points, parts)?
            }
            None => self
                .hier
                .partition_with(&mut self.ws, &Serial, plan, points, parts)?,
        };
        self.previous = Some(result);
        Ok(())
    }

    /// Step `k`'s times: each rank's compute (at its node's speed and CPU `share`: the
    /// marking and refinement on the elements it inherited, `work[0]`, the rest on its
    /// elements after the repartition, `work[1]`, the repartition's `partition_s`, and the
    /// CPU its migration takes per element it sends or receives) and communication (halo
    /// and reductions on a switched network, its migration over its slowest link), then the
    /// common waiting.
    fn times(
        &self,
        k: usize,
        [before, work]: [&[f64]; 2],
        share: &[f64],
        moves: &Moves,
        partition_s: f64,
    ) -> StepTimes {
        let (calib, cfg, nodes, rn, ranks) =
            (self.calib, self.cfg, &self.cfg.nodes, &self.rn, self.ranks);
        let mesh = &self.seq[k];
        let cut = cuts(mesh, &self.owner, ranks);
        let iters = mesh.cg_iterations as f64;
        let overhead = if cfg.sizing == Sizing::Monitored {
            1.0 + calib.monitor_overhead
        } else {
            1.0
        };
        let spans = rn.iter().any(|&i| i != rn[0]);
        let mut slowest = (0.0, 0.0, 0.0);
        let mut computes = Vec::with_capacity(ranks);
        for r in 0..ranks {
            let node = &nodes[rn[r]];
            let cpu = calib.cpu_seconds(k, before[r], work[r], moves.by_rank[r], overhead)
                * (calib.host_mflops / node.mflops);
            let compute = cpu / share[rn[r]] + partition_s / share[rn[r]];
            let mut comm = 0.0;
            if let Net::Switched { alpha, .. } = cfg.net {
                for s in (0..ranks).filter(|&s| cut[r * ranks + s] > 0.0) {
                    let l = link(cfg.net, calib, nodes, rn, r, s);
                    comm += iters
                        * (MESSAGES_PER_ITERATION * l.alpha
                            + calib.bytes_per_cut_iteration * cut[r * ranks + s] * l.beta);
                }
                let a = if spans { alpha } else { calib.link.alpha };
                comm += (iters * REDUCTIONS_PER_ITERATION + COLLECTIVES_PER_STEP)
                    * a
                    * (ranks as f64).log2().ceil();
            }
            // Migration: the bytes this rank sends and receives, over its slowest link.
            if moves.by_rank[r] > 0.0 {
                let worst = (0..ranks)
                    .filter(|&s| moves.exchanged(r, s))
                    .map(|s| link(cfg.net, calib, nodes, rn, r, s))
                    .fold(calib.link, |a, b| if b.beta > a.beta { b } else { a });
                comm += moves.partners[r] * worst.alpha
                    + moves.by_rank[r] * calib.bytes_per_element * worst.beta;
            }
            computes.push(compute);
            if compute + comm > slowest.0 {
                slowest = (compute + comm, compute, comm);
            }
        }
        let wait = self.common_wait(k, share, &computes, iters);
        StepTimes {
            computes,
            slowest,
            wait,
        }
    }

    /// The waiting every rank shares at step `k`: this host's measured waiting (host net),
    /// and the stall of a rank that shares its CPU.
    ///
    /// A rank that shares its CPU is off it for the competitors' time slices: every
    /// exchange that needs it then waits (calibrated on a measured loaded run).
    /// Not when a shared rank is clearly the slowest (10 % above every other): the others
    /// wait for it anyway, and its slices off the CPU are in its compute time already.
    fn common_wait(&self, k: usize, share: &[f64], computes: &[f64], iters: f64) -> f64 {
        let (rn, ranks) = (&self.rn, self.ranks);
        let least = share.iter().copied().fold(1.0, f64::min);
        let shared_max = (0..ranks)
            .filter(|&r| share[rn[r]] <= least)
            .map(|r| computes[r])
            .fold(0.0, f64::max);
        let others_max = (0..ranks)
            .filter(|&r| share[rn[r]] > least)
            .map(|r| computes[r])
            .fold(0.0, f64::max);
        let stall = if least < 1.0 && shared_max <= 1.1 * others_max {
            self.calib.kappa * iters * (1.0 - least)
        } else {
            0.0
        };
        stall
            + match self.cfg.net {
                Net::Host => self.calib.l[k],
                Net::Switched { .. } => 0.0,
            }
    }

    /// Adds step `k` to the result and its CPU shares after its first `pre_s` seconds (which
    /// [`Run::sense`] counted) to the sensing window.
    fn record(&mut self, k: usize, t: &StepTimes, moved: u64, share: &[f64], pre_s: f64) {
        let step = t.slowest.0 + t.wait;
        let out = &mut self.out;
        let mean = t.computes.iter().sum::<f64>() / self.ranks as f64;
        let max = t.computes.iter().copied().fold(0.0, f64::max);
        out.imbalance += if mean > 0.0 { max / mean } else { 1.0 };
        out.compute_s += t.slowest.1;
        out.comm_s += t.slowest.2 + t.wait;
        out.step_s.push(step);
        out.time_s += step;
        if k > 0 {
            out.migrated_elements += moved;
            out.migrated_bytes += moved as f64 * self.calib.bytes_per_element;
        }
        let counted = if k > 0 && self.cfg.sizing == Sizing::Monitored {
            pre_s.min(step)
        } else {
            0.0
        };
        for (a, s) in self.acc.iter_mut().zip(share) {
            *a += (step - counted) * s;
        }
        self.acc_t += step - counted;
        self.last_step_s = step;
    }
}

/// DRUM 2005 §4.1's RC_ideal for `nodes` with the loads active at step `k`: each process's
/// speed its CPU's rating times its share.
pub fn rc_ideal(nodes: &[NodeSpec], loads: &[SimLoad], k: usize) -> f64 {
    let rn = rank_nodes(nodes);
    let share = shares(nodes, loads, &rn, k);
    let speeds: Vec<f64> = rn.iter().map(|&i| nodes[i].mflops * share[i]).collect();
    drum_model::metrics::rc_ideal(&speeds).unwrap_or(0.0)
}

/// DRUM 2005 §4.3's H_cpu of the processes' CPUs (one rating per process).
pub fn h_cpu(nodes: &[NodeSpec], loads: &[SimLoad], k: usize) -> f64 {
    let rn = rank_nodes(nodes);
    let share = shares(nodes, loads, &rn, k);
    let speeds: Vec<f64> = rn.iter().map(|&i| nodes[i].mflops * share[i]).collect();
    drum_model::metrics::h_cpu(&speeds).unwrap_or(0.0)
}

/// Cut edges (both sides counted) of an equal `ranks`-way partition of every step's mesh
/// under the simulated machine of `ranks` equal nodes, as the calibration run partitions it;
/// and the seconds per element and rank the partition of the last mesh takes here (median
/// of 3, divided by `ranks`).
pub fn equal_cuts(seq: &[StepMesh], ranks: usize) -> Result<(Vec<f64>, f64)> {
    let nodes: Vec<NodeSpec> = (0..ranks)
        .map(|r| NodeSpec::new(&format!("n{r}"), 1.0, 1, 1))
        .collect();
    let (m, p) = powers(&nodes, Sizing::Uniform, 0.0, &vec![1.0; ranks])?;
    let plan = Plan::new(&m, &p)?;
    let hier = Hier {
        par: hier_part::Par::Seq,
    };
    let mut ws = Workspace::default();
    let mut cut = Vec::with_capacity(seq.len());
    let mut times = Vec::new();
    for (k, mesh) in seq.iter().enumerate() {
        let last = k + 1 == seq.len();
        for _ in 0..if last { 3 } else { 1 } {
            let mut parts = vec![0u32; mesh.elements()];
            let t0 = std::time::Instant::now();
            hier.partition_with(
                &mut ws,
                &Serial,
                &plan,
                Points::new(&mesh.xy, 2, None),
                &mut parts,
            )?;
            if last {
                times.push(t0.elapsed().as_secs_f64());
            }
            if times.len() <= 1 {
                cut.push(cuts(mesh, &parts, ranks).iter().sum());
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let n = seq.last().map_or(1, |m| m.elements()).max(1) as f64;
    Ok((
        cut,
        times.get(1).or(times.first()).copied().unwrap_or(0.0) / n / ranks as f64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meshes::sequence;

    fn calib(steps: usize) -> Calib {
        Calib {
            a: vec![1e-6; steps],
            pre: vec![0.0; steps],
            c_move: 0.0,
            c_move_samples: 0,
            l: vec![1e-4; steps],
            p: 1e-7,
            host_mflops: 100.0,
            bytes_per_cut_iteration: 16.0,
            bytes_per_element: 100.0,
            monitor_overhead: 0.0,
            kappa: 0.0,
            link: LinkModel {
                alpha: 1e-6,
                beta: 1e-10,
            },
        }
    }

    fn config(nodes: Vec<NodeSpec>, sizing: Sizing, loads: Vec<SimLoad>) -> SimConfig {
        SimConfig {
            nodes,
            net: Net::Host,
            sizing,
            w_comm: 0.0,
            loads,
            rebalance: RebalanceMode::Policy,
            sensing: Sensing::Every(1),
            policy: Policy::default(),
            min_window: 0.0,
        }
    }

    /// The sizes a monitored run uses at each step, from `seq[..steps]`.
    fn sizes_per_step(seq: &[StepMesh], c: &Calib, cfg: &SimConfig, steps: usize) -> Vec<f64> {
        let mut run = Run::new(seq, c, cfg);
        (0..steps)
            .map(|k| {
                run.step(k).unwrap();
                run.current.as_ref().unwrap().1.parts[1]
            })
            .collect()
    }

    #[test]
    fn the_monitors_window_reaches_into_the_step_that_repartitions() {
        // A load on rank 1 from step 5: the real monitors see it at step 5's rebalance point,
        // after the step's marking and refinement ran under it; with no marking time (pre 0)
        // the model's window ends before step 5 and sees it only at step 6.
        let seq = sequence(3_000, |_, _| {}).unwrap();
        let nodes = vec![
            NodeSpec::new("a", 100.0, 1, 1),
            NodeSpec::new("b", 100.0, 1, 1),
        ];
        let loads = vec![SimLoad {
            rank: 1,
            procs: 1,
            from: 5,
            until: None,
        }];
        let cfg = config(nodes, Sizing::Monitored, loads);
        let mut c = calib(seq.len());
        let late = sizes_per_step(&seq, &c, &cfg, 7);
        assert!((late[5] - 0.5).abs() < 1e-9 && late[6] < 0.45, "{late:?}");
        c.pre = vec![0.3; seq.len()];
        let early = sizes_per_step(&seq, &c, &cfg, 7);
        // Step 5's window: step 4 unloaded, then step 5's marking and refinement loaded.
        assert!(early[4] == 0.5 && early[5] < 0.49, "{early:?}");
        // A due sensing waits for a window of `min_window`: none of these is that long.
        let waiting = SimConfig {
            min_window: 1e3,
            ..cfg.clone()
        };
        let none = sizes_per_step(&seq, &c, &waiting, 7);
        assert!(none.iter().all(|&s| s == 0.5), "{none:?}");
        let r = simulate(&seq, &c, &waiting).unwrap();
        assert!(r.sensed_at.is_empty(), "{:?}", r.sensed_at);
        let r = simulate(&seq, &c, &cfg).unwrap();
        assert_eq!(r.sensed_at, (1..seq.len()).collect::<Vec<_>>());
    }

    #[test]
    fn marking_falls_on_the_inherited_elements_and_moves_cost_cpu() {
        let seq = sequence(3_000, |_, _| {}).unwrap();
        let nodes = vec![
            NodeSpec::new("a", 100.0, 1, 1),
            NodeSpec::new("b", 100.0, 1, 1),
        ];
        let cfg = config(nodes, Sizing::Uniform, Vec::new());
        let mut c = calib(seq.len());
        let mut run = Run::new(&seq, &c, &cfg);
        run.owner = vec![0; seq[1].elements()];
        let moves = Moves::between(&[0, 0, 0, 1], &[0, 1, 1, 1], 2, 1);
        let t = run.times(1, [&[3.0, 1.0], &[1.0, 3.0]], &[1.0, 1.0], &moves, 0.0);
        assert_eq!(t.computes, [1e-6, 3e-6]);
        c.pre = vec![0.5; seq.len()];
        c.c_move = 1e-5;
        let mut run = Run::new(&seq, &c, &cfg);
        run.owner = vec![0; seq[1].elements()];
        let t = run.times(1, [&[3.0, 1.0], &[1.0, 3.0]], &[1.0, 0.5], &moves, 0.0);
        // Each rank: half of a_k on 2 + 2 elements, and 2 moved elements at c_move (rank 1
        // at half a CPU).
        let expect = [2e-6 + 2e-5, (2e-6 + 2e-5) / 0.5];
        for (got, want) in t.computes.iter().zip(expect) {
            assert!((got - want).abs() < 1e-15, "{:?}", t.computes);
        }
    }

    #[test]
    fn the_machine_files_parse_with_one_rank_per_process() {
        let nodes = vec![
            NodeSpec::new("a", 67.5, 4, 3),
            NodeSpec::new("b", 45.0, 1, 1),
        ];
        let m = Machine::parse_str(&machine_xml(&nodes, 100.0), "t").unwrap();
        assert_eq!(m.num_ranks(), 4);
        assert_eq!(rank_nodes(&nodes), [0, 0, 0, 1]);
        // 3 processes and 2 competitors on 4 CPUs: 4/5 each; the uniprocessor alone: 1.
        let s = shares(
            &nodes,
            &[SimLoad {
                rank: 1,
                procs: 2,
                from: 0,
                until: None,
            }],
            &[0, 0, 0, 1],
            0,
        );
        assert_eq!(s, [0.8, 1.0]);
    }

    #[test]
    fn a_slow_node_gets_a_smaller_part_and_the_run_is_faster_than_uniform() {
        let seq = sequence(3_000, |_, _| {}).unwrap();
        let c = calib(seq.len());
        let nodes = vec![
            NodeSpec::new("f", 100.0, 1, 1),
            NodeSpec::new("s", 100.0, 1, 1),
        ];
        let loads = vec![SimLoad {
            rank: 1,
            procs: 1,
            from: 0,
            until: None,
        }];
        let uni = simulate(
            &seq,
            &c,
            &config(nodes.clone(), Sizing::Uniform, loads.clone()),
        )
        .unwrap();
        let mon = simulate(
            &seq,
            &c,
            &config(nodes.clone(), Sizing::Monitored, loads.clone()),
        )
        .unwrap();
        let stat = simulate(&seq, &c, &config(nodes.clone(), Sizing::Static, loads)).unwrap();
        // Uniform: the loaded rank computes half the elements at half speed.
        let n: f64 = seq.last().unwrap().elements() as f64;
        // (within the policy's eff_min: a kept partition may be 10 % off)
        assert!(
            uni.step_s.last().unwrap() > &(c.a[0] * n * 0.85),
            "{:?} {n}",
            uni.step_s
        );
        assert!(
            mon.time_s < 0.85 * uni.time_s,
            "{} vs {}",
            mon.time_s,
            uni.time_s
        );
        assert!((stat.time_s - uni.time_s).abs() < 0.05 * uni.time_s); // equal ratings
        // Never rebalancing after step 0 migrates nothing.
        let mut never = config(nodes, Sizing::Monitored, Vec::new());
        never.rebalance = RebalanceMode::Never;
        let r = simulate(&seq, &c, &never).unwrap();
        assert_eq!((r.rebalances, r.migrated_elements), (1, 0));
    }

    /// Every phase of the step (sensing, the policy, repartitions, migration over the
    /// network's links, the stall of shared CPUs) on a few configurations: their results to
    /// the bit (`{:?}` of an f64 round-trips), compared with a snapshot.
    #[test]
    fn the_simulated_runs_are_the_snapshot() {
        let seq = sequence(3_000, |_, _| {}).unwrap();
        let mut c = calib(seq.len());
        c.kappa = 2e-5;
        c.monitor_overhead = 0.01;
        c.l = (0..seq.len()).map(|k| 1e-4 * (k + 1) as f64).collect();
        let nodes = vec![
            NodeSpec::new("smp", 67.5, 2, 2),
            NodeSpec::new("slow", 45.0, 1, 1),
            NodeSpec::new("fast", 100.0, 1, 1),
        ];
        let coming = vec![SimLoad {
            rank: 2,
            procs: 1,
            from: 2,
            until: Some(5),
        }];
        let switched = Net::Switched {
            alpha: 5e-5,
            bytes_per_s: 12.5e6,
        };
        let mut runs = Vec::new();
        for (net_name, net) in [("host", Net::Host), ("switched", switched)] {
            for sizing in [Sizing::Uniform, Sizing::Static, Sizing::Monitored] {
                for (mode_name, mode) in [
                    ("policy", RebalanceMode::Policy),
                    ("always", RebalanceMode::Always),
                    ("never", RebalanceMode::Never),
                ] {
                    let mut cfg = config(nodes.clone(), sizing, coming.clone());
                    cfg.net = net;
                    cfg.w_comm = 0.1;
                    cfg.rebalance = mode;
                    let r = simulate(&seq, &c, &cfg).unwrap();
                    runs.push(format!("{net_name} {sizing:?} {mode_name}: {r:?}"));
                }
            }
        }
        let mut once = config(nodes, Sizing::Monitored, coming);
        once.sensing = Sensing::Once;
        once.net = switched;
        let r = simulate(&seq, &c, &once).unwrap();
        runs.push(format!("switched Monitored sensing once: {r:?}"));
        insta::assert_snapshot!(runs.join("\n"));
    }

    #[test]
    fn rc_ideal_and_h_cpu_follow_the_shares() {
        let nodes = vec![
            NodeSpec::new("f", 60.0, 1, 1),
            NodeSpec::new("s", 60.0, 1, 1),
        ];
        let loads = [SimLoad {
            rank: 1,
            procs: 1,
            from: 2,
            until: Some(4),
        }];
        assert_eq!(rc_ideal(&nodes, &loads, 0), 0.0);
        assert!((rc_ideal(&nodes, &loads, 3) - 1.0 / 3.0).abs() < 1e-12);
        assert!((h_cpu(&nodes, &loads, 3) - 0.25).abs() < 1e-12);
        assert_eq!(h_cpu(&nodes, &loads, 4), 0.0);
    }
}
