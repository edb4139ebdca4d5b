//! Node power: DRUM 2005 §3.3 (and the 2004 CAF variant), the Sinha–Parashar capacity metric and
//! the Watts et al. measured capacity, all behind [`PowerModel`].
//!
//! Every model produces, for every node, its **share of its parent** (siblings' shares sum to 1;
//! the root's is 1) and, for every rank, its **part size** (the product of shares along the path
//! from the root, times the rank's share of its node; part sizes sum to 1). The raw
//! (un-normalised) quantities are kept too, for display.

use crate::error::{Error, Result};
use crate::machine::{Machine, Node, NodeId};
use std::collections::BTreeMap;

/// Which power formula to use.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PowerModel {
    /// DRUM 2005 §3.3: processing power and available-bandwidth communication power,
    /// power_n = w_comm ĉ_n + (1 − w_comm) p̂_n.
    Drum {
        /// w_n^comm in [0, 1] (the same at every node); w_n^cpu = 1 − w_comm.
        w_comm: f64,
    },
    /// DRUM 2004 §3.3: as [`PowerModel::Drum`] but communication power is 1 / mean CAF.
    Drum2004 {
        /// w_n^comm in [0, 1].
        w_comm: f64,
    },
    /// Sinha & Parashar §5.2: C_k = w_p P_k + w_m M_k + w_b B_k (weights sum to 1).
    SinhaParashar {
        /// Weight of the available CPU fraction.
        w_p: f64,
        /// Weight of the available memory.
        w_m: f64,
        /// Weight of the link bandwidth.
        w_b: f64,
    },
    /// Watts, Rieffel & Taylor 1998: capacity = work done / CPU time, as reported by the
    /// application per rank ([`Observations::rank_work`]).
    Measured,
    /// Watts, Rieffel & Taylor 1998, "Load measurement": the static ratings divided by each
    /// node's load average over the window ([`load_average`]), "a measure of the average
    /// number of processes competing for CPU time".
    LoadAverage,
}

impl PowerModel {
    /// The model's communication weight (0 for the models that have none).
    pub fn w_comm(&self) -> f64 {
        match self {
            PowerModel::Drum { w_comm } | PowerModel::Drum2004 { w_comm } => *w_comm,
            _ => 0.0,
        }
    }

    /// Short name as used on the command line (`drum`, `drum2004`, `sinha`, `measured`).
    pub fn name(&self) -> &'static str {
        match self {
            PowerModel::Drum { .. } => "drum",
            PowerModel::Drum2004 { .. } => "drum2004",
            PowerModel::SinhaParashar { .. } => "sinha",
            PowerModel::Measured => "measured",
            PowerModel::LoadAverage => "loadavg",
        }
    }
}

/// A model plus the options shared by all models.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerConfig {
    /// The formula.
    pub model: PowerModel,
    /// DRUM 2005 §5: memory counts only when available/total memory falls below this threshold
    /// (see [`memory_factor`]); `None` ignores memory. Applies to the DRUM models.
    pub memory_threshold: Option<f64>,
    /// What a process's CPU utilisation u_{n,j} is measured against (DRUM models and
    /// Sinha–Parashar): the whole window (DRUM 2005) or the time the process was runnable.
    pub basis: UtilBasis,
    /// The least processing power a computing node keeps, as a fraction of what its processes
    /// would have on idle CPUs (b_n per process for the DRUM models, one CPU per process for
    /// Sinha–Parashar): a node measured at (near) zero still gets a part, and the result says
    /// so in [`Powers::warnings`]. 0 turns the floor off (a node may then get nothing, and
    /// all-zero siblings are an error). Default [`DEFAULT_POWER_FLOOR`].
    pub floor: f64,
}

/// The default [`PowerConfig::floor`]: 5 % of the idle-CPU power.
pub const DEFAULT_POWER_FLOOR: f64 = 0.05;

impl Default for PowerConfig {
    fn default() -> Self {
        PowerConfig {
            model: PowerModel::Drum { w_comm: 0.0 },
            memory_threshold: Some(0.1),
            basis: UtilBasis::default(),
            floor: DEFAULT_POWER_FLOOR,
        }
    }
}

/// The time a process's CPU use u_{n,j} is a fraction of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UtilBasis {
    /// The whole monitoring window (DRUM 2005 §3.3.1 as written). A process that waits for
    /// its peers (a message, a barrier) while a competing process takes its CPU is measured
    /// slower than it is: its u drops and the node shows no idle time, so a rank that got too
    /// little work keeps getting too little.
    Window,
    /// The time the process was runnable (running, or in a run queue waiting for a CPU;
    /// the kernel's schedstat): the share of a CPU the process gets when it wants one, which
    /// is what its next step will get. Where the observation has no runnable time (a replay
    /// of older samples, a kernel without schedstat), or the process was runnable for less
    /// than 1 % of the window, the window is the basis.
    #[default]
    Runnable,
}

impl UtilBasis {
    /// Short name (`window`, `runnable`).
    pub fn name(&self) -> &'static str {
        match self {
            UtilBasis::Window => "window",
            UtilBasis::Runnable => "runnable",
        }
    }
}

/// Below this runnable fraction of the window, [`UtilBasis::Runnable`] falls back to the
/// window.
pub const MIN_RUNNABLE: f64 = 0.01;

/// The utilisations u_{n,j} of a node's processes on `basis` (see [`UtilBasis`]).
pub fn utilisations(o: &NodeObservation, basis: UtilBasis) -> Vec<f64> {
    let runnable = basis == UtilBasis::Runnable && o.proc_runnable.len() == o.proc_util.len();
    o.proc_util
        .iter()
        .enumerate()
        .map(|(j, &u)| match runnable {
            true if o.proc_runnable[j] >= MIN_RUNNABLE => (u / o.proc_runnable[j]).min(1.0),
            _ => u,
        })
        .collect()
}

/// Measured memory of a node, bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryObservation {
    /// Physical memory.
    pub total: f64,
    /// Memory available to new work.
    pub available: f64,
}

/// Traffic rates of an interface over the monitoring window, per second.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IfaceRates {
    /// Bytes received per second.
    pub rx_bytes: f64,
    /// Bytes sent per second.
    pub tx_bytes: f64,
    /// Packets received per second (λ).
    pub rx_packets: f64,
    /// Packets sent per second (μ).
    pub tx_packets: f64,
}

/// One (non-loopback) network interface of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceObservation {
    /// Interface name (`eth0`).
    pub name: String,
    /// Link capacity C_i in Mbit/s, if known.
    pub capacity_mbps: Option<f64>,
    /// Traffic over the window; `None` if it could not be measured (a single sample).
    pub rates: Option<IfaceRates>,
}

/// What was observed on one node over a monitoring window (already reduced to one value per
/// quantity: a window mean or a forecast).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeObservation {
    /// i_t: fraction of time each CPU t of the node was idle.
    pub cpu_idle: Vec<f64>,
    /// u_{n,j}: CPU fraction used by each application process j (empty: not running yet,
    /// taken as 0 for each of the k_n processes).
    pub proc_util: Vec<f64>,
    /// Fraction of the window each process j was runnable (running or waiting for a CPU);
    /// empty when unknown. Used by [`UtilBasis::Runnable`].
    pub proc_runnable: Vec<f64>,
    /// Memory, if measured.
    pub memory: Option<MemoryObservation>,
    /// Interfaces (loopback excluded).
    pub ifaces: Vec<IfaceObservation>,
}

/// Work reported by one rank for the Watts et al. measured capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankWork {
    /// Abstract work done (cells, particles, element updates).
    pub work: f64,
    /// CPU seconds spent doing it.
    pub cpu_seconds: f64,
}

/// Everything the power models consume.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observations {
    /// Per node, by `nodenum`. Computing nodes need one; a network node with one counts as
    /// probed (DRUM 2005 §3.3.2).
    pub nodes: BTreeMap<u32, NodeObservation>,
    /// Per rank, for [`PowerModel::Measured`].
    pub rank_work: BTreeMap<usize, RankWork>,
}

impl Observations {
    /// The static observation of DESIGN.md §2: every CPU idle, no process running yet (so each
    /// process can use a whole CPU when k_n ≤ m), every interface idle at the capacity of its
    /// link ([`Machine::link_bandwidth`]), memory all free (`memory` attribute). No network
    /// node is probed.
    pub fn idle(machine: &Machine) -> Observations {
        let mut nodes = BTreeMap::new();
        for n in machine.computing_nodes() {
            let ifaces = vec![IfaceObservation {
                name: "link".into(),
                capacity_mbps: machine.link_bandwidth(n.id),
                rates: Some(IfaceRates::default()),
            }];
            nodes.insert(
                n.nodenum,
                NodeObservation {
                    cpu_idle: vec![1.0; n.processors()],
                    proc_util: vec![0.0; n.processes()],
                    proc_runnable: Vec::new(),
                    memory: n.memory.map(|mb| MemoryObservation {
                        total: mb * 1e6,
                        available: mb * 1e6,
                    }),
                    ifaces,
                },
            );
        }
        Observations {
            nodes,
            rank_work: BTreeMap::new(),
        }
    }
}

/// Power of one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodePower {
    /// The node's share of its parent (siblings sum to 1; the root has 1). This is the "power"
    /// of DRUM 2005 §3.3 and the target part size hier-part uses at the parent.
    pub share: f64,
    /// The node's fraction of the whole machine (product of shares from the root).
    pub fraction: f64,
    /// Raw processing quantity: p_n in MFLOPS for the DRUM models, the available CPU 𝒫 for
    /// Sinha–Parashar, the capacity for Measured.
    pub processing: f64,
    /// Raw communication quantity (ABW c_n in Mbit/s, or 1/CAF), if it was needed.
    pub communication: Option<f64>,
    /// Raw memory quantity (available bytes), if it was needed.
    pub memory: Option<f64>,
}

/// The result of a power computation.
#[derive(Debug, Clone, PartialEq)]
pub struct Powers {
    /// The model that produced it.
    pub model: PowerModel,
    /// Per node, indexed by [`NodeId`].
    pub nodes: Vec<NodePower>,
    /// Per rank: the part size (fraction of the total load), summing to 1.
    pub parts: Vec<f64>,
    /// Per rank: its share of its computing node (1/k_n except under [`PowerModel::Measured`]).
    pub rank_shares: Vec<f64>,
    /// What the computation had to correct (a node raised to the power floor), one per node.
    pub warnings: Vec<PowerWarning>,
}

/// A correction [`compute_powers`] made, naming the node and its ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerWarning {
    /// The node's `nodenum`.
    pub nodenum: u32,
    /// The node's name.
    pub name: String,
    /// The node's ranks.
    pub ranks: std::ops::Range<usize>,
    /// What happened.
    pub message: String,
}

impl std::fmt::Display for PowerWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranks = match self.ranks.len() {
            0 => String::new(),
            1 => format!(" (rank {})", self.ranks.start),
            _ => format!(" (ranks {}-{})", self.ranks.start, self.ranks.end - 1),
        };
        write!(
            f,
            "node {} \"{}\"{ranks}: {}",
            self.nodenum, self.name, self.message
        )
    }
}

impl Powers {
    /// The share of node `id` in its parent.
    pub fn share(&self, id: NodeId) -> f64 {
        self.nodes[id.0].share
    }

    /// The part size of `rank` (DRUM_getLocalPartSize).
    pub fn part_size(&self, rank: usize) -> f64 {
        self.parts[rank]
    }

    /// All part sizes in rank order.
    pub fn part_sizes(&self) -> &[f64] {
        &self.parts
    }

    /// The target fractions for splitting node `id`'s objects: its children's shares (network
    /// node) or its ranks' shares (computing node), in order; they sum to 1.
    pub fn targets(&self, machine: &Machine, id: NodeId) -> Vec<f64> {
        let node = machine.node(id);
        if node.kind.is_computing() {
            node.rank_range().map(|r| self.rank_shares[r]).collect()
        } else {
            node.children()
                .iter()
                .map(|c| self.nodes[c.0].share)
                .collect()
        }
    }

    /// The `drum powers --json` document: `{"w_comm": W, "nodes": [{"nodenum": N, "name":
    /// "..", "power": P}, ...], "parts": [{"rank": R, "node": N, "size": S}, ...]}` where
    /// `power` is the node's share of its parent. A `Value` sorts keys; [`Powers::to_json_string`]
    /// prints them in this order.
    pub fn to_json(&self, machine: &Machine) -> serde_json::Value {
        #[derive(serde::Serialize)]
        struct NodeJson<'a> {
            nodenum: u32,
            name: &'a str,
            power: f64,
        }
        #[derive(serde::Serialize)]
        struct PartJson {
            rank: usize,
            node: u32,
            size: f64,
        }
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            w_comm: f64,
            nodes: Vec<NodeJson<'a>>,
            parts: Vec<PartJson>,
        }
        let doc = Doc {
            w_comm: self.model.w_comm(),
            nodes: machine
                .nodes()
                .iter()
                .map(|n| NodeJson {
                    nodenum: n.nodenum,
                    name: &n.name,
                    power: self.nodes[n.id.0].share,
                })
                .collect(),
            parts: self
                .parts
                .iter()
                .enumerate()
                .map(|(r, &size)| PartJson {
                    rank: r,
                    node: machine.node(machine.rank_node(r)).nodenum,
                    size,
                })
                .collect(),
        };
        serde_json::to_value(&doc).unwrap_or(serde_json::Value::Null)
    }

    /// [`Powers::to_json`] as pretty-printed text, keys in schema order.
    pub fn to_json_string(&self, machine: &Machine) -> String {
        // `to_json` goes through `Value`, whose maps sort keys; print from the structs instead.
        let v = self.to_json(machine);
        let mut out = String::from("{\n");
        out.push_str(&format!(
            "  \"w_comm\": {},\n  \"nodes\": [\n",
            json_num(self.model.w_comm())
        ));
        json_rows(&mut out, &v["nodes"], ["nodenum", "name", "power"]);
        out.push_str("  ],\n  \"parts\": [\n");
        json_rows(&mut out, &v["parts"], ["rank", "node", "size"]);
        out.push_str("  ]\n}");
        out
    }
}

/// The objects of the array `rows`, one a line with the fields `keys` in that order, commas
/// between them.
fn json_rows(out: &mut String, rows: &serde_json::Value, keys: [&str; 3]) {
    let rows = rows.as_array().map_or(&[][..], Vec::as_slice);
    for (i, r) in rows.iter().enumerate() {
        let [a, b, c] = keys;
        out.push_str(&format!(
            "    {{\"{a}\": {}, \"{b}\": {}, \"{c}\": {}}}{}\n",
            r[a],
            r[b],
            r[c],
            if i + 1 < rows.len() { "," } else { "" }
        ));
    }
}

fn json_num(x: f64) -> String {
    serde_json::Value::from(x).to_string()
}

// ---------------------------------------------------------------------------------------------
// The formulas, one function each.

/// Processing power of a computing node (DRUM 2005 §3.3.1, identical in 2004 §3.3.1).
///
/// For node n with m CPUs (idle fractions i_t) running k_n processes (CPU utilisations u_{n,j}):
///
/// ū_n = (1/k_n) Σ_j u_{n,j},  ī_n = (1/k_n) min(k_n − Σ_j u_{n,j}, Σ_{t=1}^m i_t),
/// p_{n,j} = b_n (ū_n + ī_n),  p_n = k_n p_{n,1}.
///
/// The min is what makes k_n < m right: k_n processes can use at most k_n CPUs. Returns p_n.
/// `u` may be empty (processes not running yet: u_{n,j} = 0). If Σu > k_n (multi-threaded
/// processes), the exploitable idle time is taken as 0 rather than negative.
pub fn processing_power(b_n: f64, k_n: usize, u: &[f64], idle: &[f64]) -> f64 {
    if k_n == 0 {
        return 0.0;
    }
    let k = k_n as f64;
    let sum_u: f64 = u.iter().sum();
    let sum_i: f64 = idle.iter().sum();
    let u_bar = sum_u / k;
    let i_bar = (k - sum_u).min(sum_i).max(0.0) / k;
    let p_nj = b_n * (u_bar + i_bar);
    k * p_nj
}

/// Communication power from available bandwidth (DRUM 2005 §3.3.2).
///
/// For each interface i with capacity C_i and traffic λ_i + μ_i over the window [t, t+T]:
/// A_i(t, T) = (1/T) ∫_t^{t+T} (C_i − (λ_i + μ_i)) dt, and for s interfaces
/// c_n = (1/s) Σ_{i=1}^s A_i(t, T).
///
/// `ifaces` holds (C_i, mean traffic) pairs in Mbit/s (the integral over T divided by T is the
/// mean rate). A_i is clamped at 0 (a full-duplex link can carry more than C_i in total).
/// Returns `None` for s = 0.
pub fn available_bandwidth(ifaces: &[(f64, f64)]) -> Option<f64> {
    if ifaces.is_empty() {
        return None;
    }
    let s = ifaces.len() as f64;
    Some(
        ifaces
            .iter()
            .map(|&(c, traffic)| (c - traffic).max(0.0))
            .sum::<f64>()
            / s,
    )
}

/// Mean communication activity factor of a node (DRUM 2004 §3.3.2): CAF_{n,i} = λ_i + μ_i
/// (packets per second in and out of interface i), averaged over the s interfaces whose CAF is
/// not 0 ("interfaces with CAF = 0 are ignored"). 0 if every interface is idle.
pub fn mean_caf(cafs: &[f64]) -> f64 {
    let busy: Vec<f64> = cafs.iter().copied().filter(|&c| c > 0.0).collect();
    if busy.is_empty() {
        0.0
    } else {
        busy.iter().sum::<f64>() / busy.len() as f64
    }
}

/// Communication power from CAF (DRUM 2004 §3.3.2):
/// c_n = 1 / ((1/s) Σ_{i=1}^s CAF_{n,i}).
///
/// A node with no traffic at all has c_n = +∞ (the limit); [`sibling_shares`] splits equally
/// among the infinite siblings.
pub fn caf_power(mean_caf: f64) -> f64 {
    if mean_caf > 0.0 {
        1.0 / mean_caf
    } else {
        f64::INFINITY
    }
}

/// The memory threshold rule (DRUM 2005 §5: memory "should be a factor in the computation of a
/// node's power only when the ratio of available memory to total memory becomes smaller than a
/// specified threshold").
///
/// With r = available/total and threshold θ, the processing power is multiplied by
/// min(1, r/θ): untouched while r ≥ θ, falling linearly to 0 as memory runs out. (The paper
/// gives the rule, not the factor; this is the simplest continuous one.)
pub fn memory_factor(total: f64, available: f64, threshold: f64) -> f64 {
    if total <= 0.0 {
        return 1.0;
    }
    let r = (available / total).clamp(0.0, 1.0);
    if r >= threshold { 1.0 } else { r / threshold }
}

/// Normalisation among siblings (DESIGN.md §2): x̂_k = x_k / Σ_i x_i. If some values are +∞
/// (idle links under the CAF model) they share equally and the finite ones get 0. Finite
/// values whose sum overflows (`mflops="1e308"` on two nodes) are divided by their largest
/// first, which leaves the shares as they are. `None` if the sum is 0 (nothing to normalise
/// by).
pub fn sibling_shares(values: &[f64]) -> Option<Vec<f64>> {
    let infinite = values.iter().filter(|v| v.is_infinite()).count();
    if infinite > 0 {
        let s = 1.0 / infinite as f64;
        return Some(
            values
                .iter()
                .map(|v| if v.is_infinite() { s } else { 0.0 })
                .collect(),
        );
    }
    let sum: f64 = values.iter().sum();
    if sum > 0.0 && sum.is_finite() {
        Some(values.iter().map(|v| v / sum).collect())
    } else if sum == f64::INFINITY {
        let max = values.iter().copied().fold(0.0, f64::max);
        let sum: f64 = values.iter().map(|v| v / max).sum();
        Some(values.iter().map(|v| v / max / sum).collect())
    } else {
        None
    }
}

/// The combined power of DRUM 2005 §3.3 in normalised form:
/// power_n = w_n^comm ĉ_n + w_n^cpu p̂_n with w^comm + w^cpu = 1, where ĉ, p̂ are the sibling
/// shares of c and p.
pub fn combined_power(w_comm: f64, c_hat: f64, p_hat: f64) -> f64 {
    w_comm * c_hat + (1.0 - w_comm) * p_hat
}

/// The relative capacity of Sinha & Parashar §5.2, eq. (1), for K siblings:
/// P_k = 𝒫_k / Σ_i 𝒫_i, M_k = ℳ_k / Σ_i ℳ_i, B_k = ℬ_k / Σ_i ℬ_i and
/// C_k = w_p P_k + w_m M_k + w_b B_k, w_p + w_m + w_b = 1, so Σ_k C_k = 1.
///
/// Terms with weight 0 are skipped (their inputs may be empty). `Err(which)` names the term
/// whose sum is 0.
pub fn sinha_parashar_capacity(
    cpu: &[f64],
    mem: &[f64],
    bw: &[f64],
    (w_p, w_m, w_b): (f64, f64, f64),
) -> Result<Vec<f64>, &'static str> {
    let k = cpu.len().max(mem.len()).max(bw.len());
    let mut c = vec![0.0; k];
    for (w, xs, what) in [
        (w_p, cpu, "CPU"),
        (w_m, mem, "memory"),
        (w_b, bw, "bandwidth"),
    ] {
        if w == 0.0 {
            continue;
        }
        let shares = sibling_shares(xs).ok_or(what)?;
        for (ck, s) in c.iter_mut().zip(shares) {
            *ck += w * s;
        }
    }
    Ok(c)
}

/// Measured capacity (Watts, Rieffel & Taylor 1998, "Load measurement"): with load L (abstract
/// work) and utilisation U (CPU seconds), U = L / C, so C = L / U: "dividing the former by the
/// latter, one can calculate the capacity of the system dynamically during execution".
pub fn measured_capacity(work: f64, cpu_seconds: f64) -> f64 {
    work / cpu_seconds
}

/// A node's load average over a window (Watts, Rieffel & Taylor 1998, "Load measurement":
/// "divide the processing capacity for a given machine by its 'load average', which is a
/// measure of the average number of processes competing for CPU time"), as its application
/// processes saw it: `L_n = Σ_j r_j / Σ_j u_j`, with r_j the fraction of the window process j
/// was runnable and u_j the fraction it ran. On a fairly shared CPU a process that wants it
/// gets 1/L of it when L tasks (itself included) compete, so L_n is the mean number of tasks
/// competing for the node's CPUs while its processes wanted one; 1 on a dedicated node.
/// The kernel's `/proc/loadavg` is not used: it is one figure per host (the same for the
/// emulated nodes of one host) and a one-minute average, slower than a step.
///
/// 1 when the observation has no runnable times (no process measured, a static observation,
/// a kernel without schedstat) or its processes barely ran (Σ r_j below [`MIN_RUNNABLE`]
/// per process); never below 1.
pub fn load_average(o: &NodeObservation) -> f64 {
    if o.proc_runnable.len() != o.proc_util.len() || o.proc_util.is_empty() {
        return 1.0;
    }
    let r: f64 = o.proc_runnable.iter().sum();
    let u: f64 = o.proc_util.iter().sum();
    if !(r.is_finite() && u.is_finite()) || r < MIN_RUNNABLE * o.proc_util.len() as f64 || u <= 0.0
    {
        return 1.0;
    }
    (r / u).max(1.0)
}

// ---------------------------------------------------------------------------------------------
// The tree computation.

fn power_err(machine: &Machine, id: NodeId, message: impl Into<String>) -> Error {
    let n = machine.node(id);
    Error::Power {
        nodenum: n.nodenum,
        name: n.name.clone(),
        message: message.into(),
    }
}

fn check_weight(name: &str, w: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&w) {
        return Err(Error::Parameter(format!(
            "{name} must be in [0, 1], got {w}"
        )));
    }
    Ok(())
}

/// Raw per-node quantities before normalisation.
#[derive(Clone, Copy, Default)]
struct Raw {
    p: f64,
    c: Option<f64>,
    /// 2004: mean CAF (aggregated instead of c).
    caf: Option<f64>,
    m: Option<f64>,
}

/// Validates the observation of a computing node.
fn check_observation(machine: &Machine, id: NodeId, o: &NodeObservation) -> Result<()> {
    let node = machine.node(id);
    let bad = |m: String| Err(power_err(machine, id, m));
    if o.cpu_idle.is_empty() {
        return bad("the observation has no cpu_idle values".into());
    }
    for (t, &i) in o.cpu_idle.iter().enumerate() {
        if !(i.is_finite() && (0.0..=1.0 + 1e-9).contains(&i)) {
            return bad(format!("cpu_idle[{t}] = {i} is not a fraction in [0, 1]"));
        }
    }
    if !o.proc_util.is_empty() && o.proc_util.len() != node.processes() {
        return bad(format!(
            "the node hosts {} processes but the observation has {} proc_util values",
            node.processes(),
            o.proc_util.len()
        ));
    }
    for (j, &u) in o.proc_util.iter().enumerate() {
        if !(u.is_finite() && u >= 0.0) {
            return bad(format!(
                "proc_util[{j}] = {u} is not a finite fraction >= 0"
            ));
        }
    }
    if !o.proc_runnable.is_empty() && o.proc_runnable.len() != o.proc_util.len() {
        return bad(format!(
            "{} proc_runnable values for {} proc_util values",
            o.proc_runnable.len(),
            o.proc_util.len()
        ));
    }
    for (j, &r) in o.proc_runnable.iter().enumerate() {
        if !(r.is_finite() && r >= 0.0) {
            return bad(format!(
                "proc_runnable[{j}] = {r} is not a finite fraction >= 0"
            ));
        }
    }
    if let Some(m) = o.memory
        && !(m.total.is_finite() && m.available.is_finite() && m.total >= 0.0 && m.available >= 0.0)
    {
        return bad(format!(
            "memory {} of {} is not finite and >= 0",
            m.available, m.total
        ));
    }
    for i in &o.ifaces {
        if let Some(c) = i.capacity_mbps
            && !(c.is_finite() && c > 0.0)
        {
            return bad(format!("interface {} has capacity {c} Mbit/s", i.name));
        }
        if let Some(r) = i.rates {
            for v in [r.rx_bytes, r.tx_bytes, r.rx_packets, r.tx_packets] {
                if !(v.is_finite() && v >= 0.0) {
                    return bad(format!("interface {} has a traffic rate of {v}", i.name));
                }
            }
        }
    }
    Ok(())
}

/// ABW c_n of a node from its observation (Mbit/s), or an error naming the node.
///
/// C_i is the interface's measured capacity if the observation has one (sysfs link speed),
/// else the machine file's link capacity of the node ([`Machine::link_bandwidth`]: its own
/// `bandwidth` or its nearest ancestor's), so replayed samples recorded without a capacity
/// still use the one the machine file gives.
fn abw_of(machine: &Machine, id: NodeId, o: &NodeObservation) -> Result<f64> {
    let mut pairs = Vec::new();
    for i in &o.ifaces {
        let c = i.capacity_mbps.or_else(|| machine.link_bandwidth(id)).ok_or_else(|| {
            power_err(
                machine,
                id,
                format!(
                    "interface {} has no known capacity (set bandwidth=\"Mbit/s\" on the node or \
                     an ancestor)",
                    i.name
                ),
            )
        })?;
        let r = rates_of(machine, id, i)?;
        pairs.push((c, (r.rx_bytes + r.tx_bytes) * 8.0 / 1e6));
    }
    available_bandwidth(&pairs).ok_or_else(|| {
        power_err(
            machine,
            id,
            "no network interface observed; communication power needs one (w_comm > 0)",
        )
    })
}

fn rates_of(machine: &Machine, id: NodeId, i: &IfaceObservation) -> Result<IfaceRates> {
    i.rates.ok_or_else(|| {
        power_err(
            machine,
            id,
            format!(
                "no traffic rate for interface {} (rates need two samples)",
                i.name
            ),
        )
    })
}

fn caf_of(machine: &Machine, id: NodeId, o: &NodeObservation) -> Result<f64> {
    let mut cafs = Vec::new();
    for i in &o.ifaces {
        let r = rates_of(machine, id, i)?;
        cafs.push(r.rx_packets + r.tx_packets);
    }
    Ok(mean_caf(&cafs))
}

/// Computes every node's share and every rank's part size (DRUM_computePowers).
///
/// Each [`PowerModel`] has its own function (`drum_powers` for both DRUM variants,
/// `sinha_parashar_powers`, `measured_powers`) giving every node's raw figures, each rank's
/// share of its node and each node's share among its siblings; the fractions along the paths
/// and the part sizes are common (`assemble`).
///
/// Errors (never a panic, never a NaN in the result): a weight outside [0, 1], a computing node
/// without an observation or with inconsistent values, a missing `mflops` on some but not all
/// computing nodes, zero total power under a node, a non-finite result; each names the node.
pub fn compute_powers(
    machine: &Machine,
    config: &PowerConfig,
    obs: &Observations,
) -> Result<Powers> {
    check_config(config)?;
    let model = match config.model {
        PowerModel::Drum { w_comm } => drum_powers(machine, config, obs, w_comm, Comm::Abw)?,
        PowerModel::Drum2004 { w_comm } => drum_powers(machine, config, obs, w_comm, Comm::Caf)?,
        PowerModel::SinhaParashar { w_p, w_m, w_b } => {
            sinha_parashar_powers(machine, config, obs, (w_p, w_m, w_b))?
        }
        PowerModel::Measured => measured_powers(machine, obs)?,
        PowerModel::LoadAverage => load_average_powers(machine, obs)?,
    };
    assemble(machine, &config.model, model)
}

/// The weights of the model and the memory threshold are in range.
fn check_config(config: &PowerConfig) -> Result<()> {
    match config.model {
        PowerModel::Drum { w_comm } | PowerModel::Drum2004 { w_comm } => {
            check_weight("w_comm", w_comm)?
        }
        PowerModel::SinhaParashar { w_p, w_m, w_b } => {
            check_weight("w_p", w_p)?;
            check_weight("w_m", w_m)?;
            check_weight("w_b", w_b)?;
            if ((w_p + w_m + w_b) - 1.0).abs() > 1e-9 {
                return Err(Error::Parameter(format!(
                    "w_p + w_m + w_b must be 1, got {}",
                    w_p + w_m + w_b
                )));
            }
        }
        PowerModel::Measured | PowerModel::LoadAverage => {}
    }
    if !(0.0..=1.0).contains(&config.floor) {
        return Err(Error::Parameter(format!(
            "the power floor must be in [0, 1], got {}",
            config.floor
        )));
    }
    if let Some(t) = config.memory_threshold
        && !(t > 0.0 && t <= 1.0)
    {
        return Err(Error::Parameter(format!(
            "memory threshold must be in (0, 1], got {t}"
        )));
    }
    Ok(())
}

/// What a model gives before the common assembly: each node's raw figures, each rank's share
/// of its node, and each node's share among its siblings (the root's is 1).
struct ModelPowers {
    raw: Vec<Raw>,
    rank_share: Vec<f64>,
    share: Vec<f64>,
    warnings: Vec<PowerWarning>,
}

/// Raises a computing node's processing power `p` to `floor` times `idle_power` (its power on
/// idle CPUs), recording a warning that names the node, its ranks and the measurement.
fn apply_floor(
    node: &Node,
    config: &PowerConfig,
    p: f64,
    idle_power: f64,
    u: &[f64],
    o: &NodeObservation,
    warnings: &mut Vec<PowerWarning>,
) -> f64 {
    let least = config.floor * idle_power;
    if p >= least || config.floor <= 0.0 {
        return p;
    }
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    warnings.push(PowerWarning {
        nodenum: node.nodenum,
        name: node.name.clone(),
        ranks: node.rank_range(),
        message: format!(
            "measured processing power {:.1}% of its idle-CPU power ({}, CPU idle [{}]): \
             raised to the floor of {}%",
            100.0 * p / idle_power,
            if u.is_empty() {
                "no application process measured".to_string()
            } else {
                format!(
                    "utilisation [{}] on a {} basis",
                    fmt(u),
                    config.basis.name()
                )
            },
            fmt(&o.cpu_idle),
            100.0 * config.floor
        ),
    });
    least
}

/// How a DRUM model measures communication: available bandwidth (2005), or the mean
/// communication activity factor (2004, `c_n = 1/CAF` after aggregation).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Comm {
    Abw,
    Caf,
}

/// DRUM 2005 §3.3 (`Comm::Abw`) or the 2004 CAF variant (`Comm::Caf`): p_{n,j} = b_n (ū_n +
/// ī_n) per process with the memory rule, c_n from the links when `w_comm > 0`, and
/// power_n = w_comm ĉ_n + (1 − w_comm) p̂_n among siblings.
fn drum_powers(
    machine: &Machine,
    config: &PowerConfig,
    obs: &Observations,
    w_comm: f64,
    comm: Comm,
) -> Result<ModelPowers> {
    check_ratings(machine)?;
    let need_comm = w_comm > 0.0;
    let mut warnings = Vec::new();
    let (mut raw, rank_share) = observed_leaves(machine, obs, |node, k, o| {
        let b = node.mflops.unwrap_or(1.0);
        let u = utilisations(o, config.basis);
        let idle_power = processing_power(b, k, &[], &vec![1.0; o.cpu_idle.len()]);
        let mut p = processing_power(b, k, &u, &o.cpu_idle);
        p = apply_floor(node, config, p, idle_power, &u, o, &mut warnings);
        if let (Some(t), Some(m)) = (config.memory_threshold, o.memory) {
            p *= memory_factor(m.total, m.available, t);
        }
        let mut r = Raw {
            p,
            ..Raw::default()
        };
        if need_comm {
            match comm {
                Comm::Abw => r.c = Some(abw_of(machine, node.id, o)?),
                Comm::Caf => r.caf = Some(caf_of(machine, node.id, o)?),
            }
        }
        Ok(r)
    })?;
    aggregate(machine, obs, &mut raw, need_comm.then_some(comm), false)?;
    if comm == Comm::Caf {
        for r in raw.iter_mut() {
            r.c = r.caf.map(caf_power);
        }
    }
    let share = sibling_shares_by(machine, &raw, |zero, kids| {
        let ps: Vec<f64> = kids.iter().map(|r| r.p).collect();
        let p_hat = sibling_shares(&ps).ok_or_else(|| {
            zero("processing power (no idle CPU time and no application CPU use observed)")
        })?;
        if !need_comm {
            return Ok(p_hat);
        }
        let cs: Vec<f64> = kids.iter().map(|r| r.c.unwrap_or(0.0)).collect();
        let c_hat = sibling_shares(&cs)
            .ok_or_else(|| zero("communication power (every link saturated?)"))?;
        Ok(p_hat
            .iter()
            .zip(&c_hat)
            .map(|(&p, &c)| combined_power(w_comm, c, p))
            .collect())
    })?;
    Ok(ModelPowers {
        raw,
        rank_share,
        share,
        warnings,
    })
}

/// Sinha–Parashar: C_k = w_p P_k + w_m M_k + w_b B_k among siblings, from the CPUs available
/// to the processes, the available memory (when `w_m > 0`) and the available bandwidth (when
/// `w_b > 0`).
fn sinha_parashar_powers(
    machine: &Machine,
    config: &PowerConfig,
    obs: &Observations,
    (w_p, w_m, w_b): (f64, f64, f64),
) -> Result<ModelPowers> {
    let mut warnings = Vec::new();
    let (mut raw, rank_share) = observed_leaves(machine, obs, |node, k, o| {
        // 𝒫: CPUs available to the node's processes (NWS "percentage of CPU available").
        let u = utilisations(o, config.basis);
        let p = processing_power(1.0, k, &u, &o.cpu_idle);
        let idle_power = processing_power(1.0, k, &[], &vec![1.0; o.cpu_idle.len()]);
        let mut r = Raw {
            p: apply_floor(node, config, p, idle_power, &u, o, &mut warnings),
            ..Raw::default()
        };
        if w_m > 0.0 {
            let m = o.memory.ok_or_else(|| {
                power_err(
                    machine,
                    node.id,
                    "no memory measurement (set memory=\"MB\" on the node for static powers)",
                )
            })?;
            r.m = Some(m.available);
        }
        if w_b > 0.0 {
            r.c = Some(abw_of(machine, node.id, o)?);
        }
        Ok(r)
    })?;
    aggregate(
        machine,
        obs,
        &mut raw,
        (w_b > 0.0).then_some(Comm::Abw),
        w_m > 0.0,
    )?;
    let share = sibling_shares_by(machine, &raw, |zero, kids| {
        let ps: Vec<f64> = kids.iter().map(|r| r.p).collect();
        let ms: Vec<f64> = kids.iter().map(|r| r.m.unwrap_or(0.0)).collect();
        let bs: Vec<f64> = kids.iter().map(|r| r.c.unwrap_or(0.0)).collect();
        sinha_parashar_capacity(&ps, &ms, &bs, (w_p, w_m, w_b)).map_err(zero)
    })?;
    Ok(ModelPowers {
        raw,
        rank_share,
        share,
        warnings,
    })
}

/// Watts et al. with competing programs: C_n = P_n / L_n, the node's static power divided by
/// its [`load_average`] (P_n: what its k_n processes get on idle CPUs rated b_n = `mflops`
/// each, 1 when the machine rates no node: DESIGN.md §2's static power); ranks share their
/// node equally.
fn load_average_powers(machine: &Machine, obs: &Observations) -> Result<ModelPowers> {
    check_ratings(machine)?;
    let (raw, rank_share) = observed_leaves(machine, obs, |node, k, o| {
        let idle = vec![1.0; o.cpu_idle.len()];
        Ok(Raw {
            p: processing_power(node.mflops.unwrap_or(1.0), k, &[], &idle) / load_average(o),
            ..Raw::default()
        })
    })?;
    processing_only(machine, obs, raw, rank_share, "rating over load average")
}

/// The common end of the models with processing power alone: internal nodes sum their
/// children's, siblings share by it (`what` names it when siblings have none).
fn processing_only(
    machine: &Machine,
    obs: &Observations,
    mut raw: Vec<Raw>,
    rank_share: Vec<f64>,
    what: &str,
) -> Result<ModelPowers> {
    aggregate(machine, obs, &mut raw, None, false)?;
    let share = sibling_shares_by(machine, &raw, |zero, kids| {
        let ps: Vec<f64> = kids.iter().map(|r| r.p).collect();
        sibling_shares(&ps).ok_or_else(|| zero(what))
    })?;
    Ok(ModelPowers {
        raw,
        rank_share,
        share,
        warnings: Vec::new(),
    })
}

/// Watts et al.: each rank's capacity is its work per CPU second; a node's is the sum over
/// its ranks, and ranks share their node in proportion to their capacities.
fn measured_powers(machine: &Machine, obs: &Observations) -> Result<ModelPowers> {
    let mut raw = vec![Raw::default(); machine.nodes().len()];
    let mut rank_share = vec![0.0; machine.num_ranks()];
    for node in machine.computing_nodes() {
        let (id, range) = (node.id, node.rank_range());
        let mut caps = Vec::with_capacity(node.processes());
        for r in range.clone() {
            let w = obs
                .rank_work
                .get(&r)
                .ok_or_else(|| power_err(machine, id, format!("no measured work for rank {r}")))?;
            if !(w.work.is_finite() && w.work > 0.0 && w.cpu_seconds.is_finite())
                || w.cpu_seconds <= 0.0
            {
                return Err(power_err(
                    machine,
                    id,
                    format!(
                        "rank {r} reports work {} in {} CPU seconds; both must be finite and > 0",
                        w.work, w.cpu_seconds
                    ),
                ));
            }
            caps.push(measured_capacity(w.work, w.cpu_seconds));
        }
        let total: f64 = caps.iter().sum();
        for (r, c) in range.zip(caps) {
            rank_share[r] = c / total;
        }
        raw[id.0].p = total;
    }
    processing_only(machine, obs, raw, rank_share, "measured capacity")
}

/// b_n: all computing nodes rated (`mflops`), or none (then all equal).
fn check_ratings(machine: &Machine) -> Result<()> {
    let rated = machine
        .computing_nodes()
        .filter(|c| c.mflops.is_some())
        .count();
    let all = machine.computing_nodes().count();
    if rated != 0 && rated != all {
        let missing = machine
            .computing_nodes()
            .find(|c| c.mflops.is_none())
            .expect("some");
        return Err(power_err(
            machine,
            missing.id,
            "no `mflops` rating while other computing nodes have one; rate all or none",
        ));
    }
    Ok(())
}

/// Every computing node's raw figures from its (checked) observation by `leaf(node, k_n,
/// observation)`, and its ranks' equal shares of it.
fn observed_leaves(
    machine: &Machine,
    obs: &Observations,
    mut leaf: impl FnMut(&Node, usize, &NodeObservation) -> Result<Raw>,
) -> Result<(Vec<Raw>, Vec<f64>)> {
    let mut raw = vec![Raw::default(); machine.nodes().len()];
    let mut rank_share = vec![0.0; machine.num_ranks()];
    for node in machine.computing_nodes() {
        let id = node.id;
        let k = node.processes();
        let o = obs.nodes.get(&node.nodenum).ok_or_else(|| {
            power_err(
                machine,
                id,
                "no observation (sample) for this computing node",
            )
        })?;
        check_observation(machine, id, o)?;
        for r in node.rank_range() {
            rank_share[r] = 1.0 / k as f64;
        }
        raw[id.0] = leaf(node, k, o)?;
    }
    Ok((raw, rank_share))
}

/// Internal nodes, children before parents: p is the sum of the children's; communication
/// (`comm`) and memory (`memory`) likewise, except that DRUM 2005 §3.3.2 lets a network node
/// that was probed use its own links when every non-root network node was probed.
fn aggregate(
    machine: &Machine,
    obs: &Observations,
    raw: &mut [Raw],
    comm: Option<Comm>,
    memory: bool,
) -> Result<()> {
    let probed = |id: NodeId| obs.nodes.get(&machine.node(id).nodenum);
    let all_probed = machine
        .nodes()
        .iter()
        .filter(|x| !x.kind.is_computing() && x.id != machine.root())
        .all(|x| probed(x.id).is_some_and(|o| !o.ifaces.is_empty()));
    for &id in machine.breadth_first().iter().rev() {
        let node = machine.node(id);
        if node.kind.is_computing() {
            continue;
        }
        let kids = node.children();
        let sum =
            |f: fn(&Raw) -> Option<f64>| kids.iter().map(|c| f(&raw[c.0]).unwrap_or(0.0)).sum();
        let mut agg = Raw {
            p: kids.iter().map(|c| raw[c.0].p).sum(),
            ..Raw::default()
        };
        let own = if all_probed && id != machine.root() {
            probed(id)
        } else {
            None
        };
        match comm {
            None => {}
            Some(Comm::Caf) => {
                agg.caf = Some(match own {
                    Some(o) => caf_of(machine, id, o)?,
                    None => sum(|r| r.caf),
                });
            }
            Some(Comm::Abw) => {
                agg.c = Some(match own {
                    Some(o) => abw_of(machine, id, o)?,
                    None => sum(|r| r.c),
                });
            }
        }
        if memory {
            agg.m = Some(sum(|r| r.m));
        }
        raw[id.0] = agg;
    }
    Ok(())
}

/// Every node's share among its siblings, from `shares(zero, children's raw figures)`
/// (`zero(what)` is the error for children whose total `what` is zero).
fn sibling_shares_by(
    machine: &Machine,
    raw: &[Raw],
    shares: impl Fn(&dyn Fn(&str) -> Error, &[Raw]) -> Result<Vec<f64>>,
) -> Result<Vec<f64>> {
    let mut share = vec![0.0; raw.len()];
    share[machine.root().0] = 1.0;
    for &id in &machine.breadth_first() {
        let kids = machine.children(id);
        if kids.is_empty() {
            continue;
        }
        let zero = |what: &str| {
            power_err(
                machine,
                id,
                format!("the children of this node have zero total {what}"),
            )
        };
        let kid_raw: Vec<Raw> = kids.iter().map(|c| raw[c.0]).collect();
        for (c, s) in kids.iter().zip(shares(&zero, &kid_raw)?) {
            share[c.0] = s;
        }
    }
    Ok(share)
}

/// The common end of every model: fractions along the paths (products of shares), part sizes
/// (a rank's node's fraction times its share of the node), checks, and the result.
fn assemble(machine: &Machine, model: &PowerModel, m: ModelPowers) -> Result<Powers> {
    let ModelPowers {
        raw,
        rank_share,
        share,
        warnings,
    } = m;
    let n = machine.nodes().len();
    let mut fraction = vec![0.0; n];
    for &id in &machine.breadth_first() {
        fraction[id.0] = match machine.parent(id) {
            None => 1.0,
            Some(p) => fraction[p.0] * share[id.0],
        };
    }
    let parts: Vec<f64> = (0..machine.num_ranks())
        .map(|r| fraction[machine.rank_node(r).0] * rank_share[r])
        .collect();
    for node in machine.nodes() {
        let (s, f) = (share[node.id.0], fraction[node.id.0]);
        if !(s.is_finite() && f.is_finite() && s >= 0.0) {
            return Err(power_err(machine, node.id, format!("non-finite power {s}")));
        }
    }
    let total: f64 = parts.iter().sum();
    if !(total - 1.0).abs().lt(&1e-9) {
        return Err(power_err(
            machine,
            machine.root(),
            format!("part sizes sum to {total}, not 1 (non-finite input?)"),
        ));
    }
    let nodes = machine
        .nodes()
        .iter()
        .map(|nd| {
            let r = raw[nd.id.0];
            NodePower {
                share: share[nd.id.0],
                fraction: fraction[nd.id.0],
                processing: r.p,
                communication: r.c,
                memory: r.m,
            }
        })
        .collect();
    Ok(Powers {
        model: model.clone(),
        nodes,
        parts,
        rank_shares: rank_share,
        warnings,
    })
}

/// Equal part sizes: every rank gets 1/R, and each node's share of its parent is its share
/// of the parent's ranks (the "uniform" baseline of DRUM 2005 §4). `model` is only recorded.
pub fn uniform_powers(machine: &Machine, model: PowerModel) -> Result<Powers> {
    let mut raw = vec![Raw::default(); machine.nodes().len()];
    let mut rank_share = vec![0.0; machine.num_ranks()];
    for node in machine.nodes() {
        raw[node.id.0].p = machine.subtree_ranks(node.id).len() as f64;
        if node.kind.is_computing() {
            let k = node.processes() as f64;
            for r in node.rank_range() {
                rank_share[r] = 1.0 / k;
            }
        }
    }
    let share = sibling_shares_by(machine, &raw, |zero, kids| {
        let ps: Vec<f64> = kids.iter().map(|r| r.p).collect();
        sibling_shares(&ps).ok_or_else(|| zero("ranks"))
    })?;
    assemble(
        machine,
        &model,
        ModelPowers {
            raw,
            rank_share,
            share,
            warnings: Vec::new(),
        },
    )
}

/// Static powers (DESIGN.md §2): [`compute_powers`] on [`Observations::idle`].
pub fn static_powers(machine: &Machine, config: &PowerConfig) -> Result<Powers> {
    compute_powers(machine, config, &Observations::idle(machine))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }

    fn machine(xml: &str) -> Machine {
        Machine::parse_str(xml, "t.xml").unwrap()
    }

    #[test]
    fn processing_power_by_hand() {
        // k = 2 processes using 0.5 and 0.3 of a CPU on m = 4 CPUs idle 0.9, 0.8, 0.1, 0:
        // k − Σu = 1.2 < Σi = 1.8, so ī = 0.6, ū = 0.4, p_nj = 100 · 1.0, p_n = 200.
        close(
            processing_power(100.0, 2, &[0.5, 0.3], &[0.9, 0.8, 0.1, 0.0]),
            200.0,
        );
        // k = 4 on m = 2, Σu = 0.8, Σi = 0.2: ī = 0.05, ū = 0.2, p_nj = 80 · 0.25 = 20, p_n = 80.
        close(processing_power(80.0, 4, &[0.2; 4], &[0.1, 0.1]), 80.0);
        // One process on an idle 4-way SMP can use one CPU only: p_n = b.
        close(processing_power(50.0, 1, &[], &[1.0; 4]), 50.0);
        // Over-subscribed, idle node: 3 processes on 2 idle CPUs: p_n = 2b.
        close(processing_power(10.0, 3, &[], &[1.0, 1.0]), 20.0);
        // Multi-threaded processes using more than k CPUs: idle term clamps at 0.
        close(processing_power(10.0, 1, &[1.5], &[0.5]), 15.0);
        close(processing_power(10.0, 0, &[], &[1.0]), 0.0);
    }

    #[test]
    fn communication_formulas_by_hand() {
        // A = (100 − 30) and max(0, 100 − 130): c = (70 + 0)/2.
        close(
            available_bandwidth(&[(100.0, 30.0), (100.0, 130.0)]).unwrap(),
            35.0,
        );
        assert_eq!(available_bandwidth(&[]), None);
        close(mean_caf(&[0.0, 10.0, 30.0]), 20.0);
        close(caf_power(20.0), 0.05);
        assert_eq!(caf_power(0.0), f64::INFINITY);
    }

    #[test]
    fn memory_and_normalisation_by_hand() {
        close(memory_factor(8.0, 0.4, 0.1), 0.5);
        close(memory_factor(8.0, 4.0, 0.1), 1.0);
        close(memory_factor(0.0, 0.0, 0.1), 1.0);
        assert_eq!(sibling_shares(&[1.0, 3.0]).unwrap(), vec![0.25, 0.75]);
        assert_eq!(
            sibling_shares(&[f64::INFINITY, 1.0, f64::INFINITY]).unwrap(),
            vec![0.5, 0.0, 0.5]
        );
        assert_eq!(sibling_shares(&[0.0, 0.0]), None);
        close(combined_power(0.25, 0.4, 0.8), 0.25 * 0.4 + 0.75 * 0.8);
    }

    #[test]
    fn sinha_parashar_by_hand() {
        let third = 1.0 / 3.0;
        let c = sinha_parashar_capacity(
            &[1.0, 1.0],
            &[2.0, 6.0],
            &[100.0, 300.0],
            (third, third, third),
        )
        .unwrap();
        // P = (.5, .5), M = (.25, .75), B = (.25, .75): C = (1/3, 2/3).
        close(c[0], 1.0 / 3.0);
        close(c[1], 2.0 / 3.0);
        assert_eq!(
            sinha_parashar_capacity(&[1.0], &[0.0], &[], (0.5, 0.5, 0.0)),
            Err("memory")
        );
        close(measured_capacity(1000.0, 5.0), 200.0);
    }

    const TWO: &str = r#"<machinemodel>
      <node type="NETWORK" nodenum="0" name="sw" parent="-1" bandwidth="100"/>
      <node type="MULTIPLE_COMPUTING" nodenum="1" name="a" parent="0" numprocs="2" mflops="60" bandwidth="1000"/>
      <node type="SINGLE_COMPUTING" nodenum="2" name="b" parent="0" mflops="40"/>
    </machinemodel>"#;

    #[test]
    fn static_powers_two_nodes_by_hand() {
        let m = machine(TWO);
        let p = static_powers(&m, &PowerConfig::default()).unwrap();
        // p = 120 and 40.
        close(p.share(NodeId(1)), 0.75);
        close(p.share(NodeId(2)), 0.25);
        assert_eq!(p.parts.len(), 3);
        close(p.parts[0], 0.375);
        close(p.parts[1], 0.375);
        close(p.parts[2], 0.25);
        assert_eq!(p.targets(&m, NodeId(1)), vec![0.5, 0.5]);
        assert_eq!(p.targets(&m, NodeId(0)), vec![0.75, 0.25]);

        // w_comm = 0.5: c = 1000 and 100 (inherited), ĉ = 10/11, 1/11.
        let cfg = PowerConfig {
            model: PowerModel::Drum { w_comm: 0.5 },
            ..Default::default()
        };
        let p = static_powers(&m, &cfg).unwrap();
        close(p.share(NodeId(1)), 0.5 * 0.75 + 0.5 * 10.0 / 11.0);
        close(p.share(NodeId(2)), 0.5 * 0.25 + 0.5 * 1.0 / 11.0);
        close(p.parts.iter().sum::<f64>(), 1.0);

        // 2004 variant, static: every link idle, CAF = 0, ĉ equal.
        let cfg = PowerConfig {
            model: PowerModel::Drum2004 { w_comm: 0.5 },
            ..Default::default()
        };
        let p = static_powers(&m, &cfg).unwrap();
        close(p.share(NodeId(1)), 0.5 * 0.75 + 0.25);
    }

    fn obs(
        cpu_idle: Vec<f64>,
        proc_util: Vec<f64>,
        traffic: Option<(f64, f64)>,
    ) -> NodeObservation {
        NodeObservation {
            cpu_idle,
            proc_util,
            proc_runnable: Vec::new(),
            memory: None,
            ifaces: traffic
                .map(|(bytes, packets)| IfaceObservation {
                    name: "eth0".into(),
                    capacity_mbps: Some(100.0),
                    rates: Some(IfaceRates {
                        rx_bytes: bytes,
                        tx_bytes: 0.0,
                        rx_packets: packets,
                        tx_packets: 0.0,
                    }),
                })
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn dynamic_powers_with_load_and_traffic_by_hand() {
        let m = machine(TWO);
        let mut o = Observations::default();
        // Node a: 2 processes using 0.9 each, CPUs idle 0.05 each → k − Σu = 0.2, Σi = 0.1,
        // p_n = 60 (1.8 + 0.1) = 114. 2.5e6 B/s = 20 Mbit/s of 100: A = 80.
        o.nodes.insert(
            1,
            obs(vec![0.05, 0.05], vec![0.9, 0.9], Some((2.5e6, 10.0))),
        );
        // Node b: an external load takes half its CPU: u = 0.5, i = 0 → p = 40 · 0.5 = 20.
        // 5e6 B/s = 40 Mbit/s: A = 60.
        o.nodes
            .insert(2, obs(vec![0.0], vec![0.5], Some((5e6, 30.0))));
        let cfg = PowerConfig {
            model: PowerModel::Drum { w_comm: 0.25 },
            ..Default::default()
        };
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.nodes[1].processing, 114.0);
        close(p.nodes[2].processing, 20.0);
        close(p.nodes[1].communication.unwrap(), 80.0);
        close(p.nodes[2].communication.unwrap(), 60.0);
        close(
            p.share(NodeId(1)),
            0.25 * 80.0 / 140.0 + 0.75 * 114.0 / 134.0,
        );

        // CAF: 10 and 30 packets/s → c = 0.1 and 1/30 → ĉ = 0.75, 0.25.
        let cfg = PowerConfig {
            model: PowerModel::Drum2004 { w_comm: 0.25 },
            ..Default::default()
        };
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.share(NodeId(1)), 0.25 * 0.75 + 0.75 * 114.0 / 134.0);
    }

    #[test]
    fn runnable_basis_sees_through_waiting() {
        let m = machine(TWO);
        let mut o = Observations::idle(&m);
        // Node b shares its CPU with a competing process and waited for its peers 40 % of
        // the window: it ran 30 % of the window, was runnable 60 %: half the CPU when it
        // wants it. The window basis says 0.3 (p = 12); the runnable basis 0.5 (p = 20).
        let mut b = obs(vec![0.0], vec![0.3], None);
        b.proc_runnable = vec![0.6];
        o.nodes.insert(2, b.clone());
        let p = compute_powers(&m, &PowerConfig::default(), &o).unwrap();
        close(p.nodes[2].processing, 20.0);
        assert!(p.warnings.is_empty());
        let window = PowerConfig {
            basis: UtilBasis::Window,
            ..Default::default()
        };
        let p = compute_powers(&m, &window, &o).unwrap();
        close(p.nodes[2].processing, 12.0);
        // Runnable for under 1 % of the window: no basis to judge, the window is used.
        b.proc_util = vec![0.004];
        b.proc_runnable = vec![0.005];
        o.nodes.insert(2, b);
        let p = compute_powers(&m, &PowerConfig::default(), &o).unwrap();
        close(p.nodes[2].processing, 40.0 * 0.05); // the floor: 0.16 < 2
        assert_eq!(utilisations(&o.nodes[&2], UtilBasis::Runnable), vec![0.004]);
        // Inconsistent lengths are an error naming the node.
        o.nodes.get_mut(&2).unwrap().proc_runnable = vec![0.5, 0.5];
        let e = compute_powers(&m, &PowerConfig::default(), &o).unwrap_err();
        assert!(
            e.to_string()
                .contains("2 proc_runnable values for 1 proc_util values"),
            "{e}"
        );
    }

    #[test]
    fn uniform_powers_give_every_rank_the_same() {
        let m = machine(TWO);
        let p = uniform_powers(&m, PowerModel::Drum { w_comm: 0.0 }).unwrap();
        for &x in &p.parts {
            close(x, 1.0 / 3.0);
        }
        close(p.share(NodeId(1)), 2.0 / 3.0);
        assert_eq!(p.targets(&m, NodeId(1)), vec![0.5, 0.5]);
    }

    #[test]
    fn floor_keeps_a_part_and_warns() {
        let m = machine(TWO);
        let mut o = Observations::idle(&m);
        // Node b measured at zero: no idle time, its process not running.
        o.nodes.insert(2, obs(vec![0.0], vec![0.0], None));
        let p = compute_powers(&m, &PowerConfig::default(), &o).unwrap();
        // Floor: 5 % of b's idle-CPU power 40 → 2, against a's 120.
        close(p.nodes[2].processing, 2.0);
        close(p.parts[2], 2.0 / 122.0);
        assert_eq!(p.warnings.len(), 1);
        let w = p.warnings[0].to_string();
        assert!(
            w.starts_with(
                "node 2 \"b\" (rank 2): measured processing power 0.0% of its idle-CPU power"
            ),
            "{w}"
        );
        assert!(w.ends_with("raised to the floor of 5%"), "{w}");
        // Without the floor: the node gets nothing; all nodes at zero is an error.
        let off = PowerConfig {
            floor: 0.0,
            ..Default::default()
        };
        let p = compute_powers(&m, &off, &o).unwrap();
        assert_eq!(p.parts[2], 0.0);
        assert!(p.warnings.is_empty());
        o.nodes.insert(1, obs(vec![0.0, 0.0], vec![0.0, 0.0], None));
        assert!(compute_powers(&m, &off, &o).is_err());
        let p = compute_powers(&m, &PowerConfig::default(), &o).unwrap();
        assert_eq!(p.warnings.len(), 2);
        close(p.parts.iter().sum::<f64>(), 1.0);
        // Out-of-range floors are parameter errors.
        for bad in [-0.1, 1.5, f64::NAN] {
            let cfg = PowerConfig {
                floor: bad,
                ..Default::default()
            };
            assert!(matches!(
                compute_powers(&m, &cfg, &o),
                Err(Error::Parameter(_))
            ));
        }
    }

    #[test]
    fn memory_threshold_cuts_processing_power() {
        let m = machine(TWO);
        let mut o = Observations::idle(&m);
        o.nodes.get_mut(&2).unwrap().memory = Some(MemoryObservation {
            total: 1e9,
            available: 0.05e9,
        });
        // r = 0.05 < θ = 0.1: node b's p = 40 · 0.5 = 20 against 120.
        let p = compute_powers(&m, &PowerConfig::default(), &o).unwrap();
        close(p.share(NodeId(2)), 20.0 / 140.0);
        let off = PowerConfig {
            memory_threshold: None,
            ..Default::default()
        };
        close(compute_powers(&m, &off, &o).unwrap().share(NodeId(2)), 0.25);
    }

    const ROUTED: &str = r#"<machinemodel>
      <node type="NETWORK" nodenum="0" parent="-1"/>
      <node type="NETWORK" nodenum="1" name="r1" parent="0"/>
      <node type="NETWORK" nodenum="2" name="r2" parent="0"/>
      <node type="SINGLE_COMPUTING" nodenum="3" parent="1" mflops="10"/>
      <node type="SINGLE_COMPUTING" nodenum="4" parent="1" mflops="10"/>
      <node type="SINGLE_COMPUTING" nodenum="5" parent="2" mflops="20"/>
    </machinemodel>"#;

    #[test]
    fn unprobed_routers_sum_their_children() {
        let m = machine(ROUTED);
        let mut o = Observations::default();
        // Leaves: ABW 100 − 8·bytes/1e6: 80, 60, 90.
        o.nodes
            .insert(3, obs(vec![1.0], vec![], Some((2.5e6, 1.0))));
        o.nodes.insert(4, obs(vec![1.0], vec![], Some((5e6, 1.0))));
        o.nodes
            .insert(5, obs(vec![1.0], vec![], Some((1.25e6, 1.0))));
        // Only r1 probed (ABW 10): not every non-root network node can be probed, so both
        // routers use the sum of their children: 140 and 90.
        o.nodes
            .insert(1, obs(vec![1.0], vec![], Some((11.25e6, 1.0))));
        let cfg = PowerConfig {
            model: PowerModel::Drum { w_comm: 1.0 },
            ..Default::default()
        };
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.nodes[1].communication.unwrap(), 140.0);
        close(p.share(NodeId(1)), 140.0 / 230.0);
        // Both probed (r2 ABW 30): each router uses its own: 10 and 30.
        o.nodes
            .insert(2, obs(vec![1.0], vec![], Some((8.75e6, 1.0))));
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.nodes[1].communication.unwrap(), 10.0);
        close(p.share(NodeId(1)), 0.25);
        close(p.share(NodeId(3)), 80.0 / 140.0);
        close(p.part_size(0), 0.25 * 80.0 / 140.0);
    }

    #[test]
    fn sinha_parashar_on_a_tree() {
        let m = machine(
            r#"<machinemodel>
              <node type="NETWORK" nodenum="0" parent="-1" bandwidth="100"/>
              <node type="SINGLE_COMPUTING" nodenum="1" parent="0" memory="2000"/>
              <node type="MULTIPLE_COMPUTING" nodenum="2" parent="0" numprocs="2" memory="6000" bandwidth="300"/>
            </machinemodel>"#,
        );
        let third = 1.0 / 3.0;
        let cfg = PowerConfig {
            model: PowerModel::SinhaParashar {
                w_p: third,
                w_m: third,
                w_b: third,
            },
            ..Default::default()
        };
        let p = static_powers(&m, &cfg).unwrap();
        // 𝒫 = 1, 2 CPUs → (1/3, 2/3); ℳ → (1/4, 3/4); ℬ 100, 300 → (1/4, 3/4).
        close(p.share(NodeId(1)), third * (third + 0.25 + 0.25));
        close(p.parts[1], p.parts[2]);
        // No memory known: an error naming the node when w_m > 0.
        let bare = machine(TWO);
        let e = static_powers(&bare, &cfg).unwrap_err().to_string();
        assert!(e.contains("node 1 (\"a\")") && e.contains("memory"), "{e}");
    }

    #[test]
    fn measured_capacity_per_rank() {
        let m = machine(TWO);
        let mut o = Observations::default();
        // Ranks 0 and 1 on node a: 100/1 and 300/1; rank 2 on b: 200/2.
        o.rank_work.insert(
            0,
            RankWork {
                work: 100.0,
                cpu_seconds: 1.0,
            },
        );
        o.rank_work.insert(
            1,
            RankWork {
                work: 300.0,
                cpu_seconds: 1.0,
            },
        );
        o.rank_work.insert(
            2,
            RankWork {
                work: 200.0,
                cpu_seconds: 2.0,
            },
        );
        let cfg = PowerConfig {
            model: PowerModel::Measured,
            ..Default::default()
        };
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.parts[0], 0.2);
        close(p.parts[1], 0.6);
        close(p.parts[2], 0.2);
        assert_eq!(p.targets(&m, NodeId(1)), vec![0.25, 0.75]);
        o.rank_work.remove(&2);
        let e = compute_powers(&m, &cfg, &o).unwrap_err().to_string();
        assert_eq!(e, "node 2 (\"b\"): no measured work for rank 2");
    }

    #[test]
    fn load_average_divides_the_ratings() {
        let m = machine(TWO);
        let cfg = PowerConfig {
            model: PowerModel::LoadAverage,
            ..Default::default()
        };
        // Static observations: no process measured, L = 1: the ratings (120 and 40).
        let p = static_powers(&m, &cfg).unwrap();
        close(p.share(NodeId(1)), 0.75);
        // Node a's two processes runnable all the window but running a third of it: two
        // competitors beside each (L = 3); b's process ran whenever it wanted (L = 1).
        let mut o = Observations::default();
        let mut a = obs(vec![0.0, 0.0], vec![1.0 / 3.0, 1.0 / 3.0], None);
        a.proc_runnable = vec![1.0, 1.0];
        let mut b = obs(vec![0.5], vec![0.5], None);
        b.proc_runnable = vec![0.5];
        assert_eq!(load_average(&a), 3.0);
        assert_eq!(load_average(&b), 1.0);
        o.nodes.insert(1, a.clone());
        o.nodes.insert(2, b);
        let p = compute_powers(&m, &cfg, &o).unwrap();
        // 120 / 3 = 40 against 40: equal shares, the ranks of a a quarter each.
        close(p.share(NodeId(1)), 0.5);
        close(p.parts[0], 0.25);
        close(p.parts[2], 0.5);
        // Without runnable times (or a process that barely ran) the node counts as unloaded.
        a.proc_runnable.clear();
        assert_eq!(load_average(&a), 1.0);
        a.proc_runnable = vec![0.001, 0.001];
        assert_eq!(load_average(&a), 1.0);
    }

    #[test]
    fn bad_data_errors_name_the_node() {
        let m = machine(TWO);
        let cfg = PowerConfig {
            floor: 0.0,
            ..Default::default()
        };
        // Zero total power without the floor: both nodes fully used by foreign processes.
        let mut o = Observations::default();
        o.nodes.insert(1, obs(vec![0.0, 0.0], vec![], None));
        o.nodes.insert(2, obs(vec![0.0], vec![], None));
        let e = compute_powers(&m, &cfg, &o).unwrap_err().to_string();
        assert_eq!(
            e,
            "node 0 (\"sw\"): the children of this node have zero total processing power (no idle \
             CPU time and no application CPU use observed)"
        );
        // NaN.
        o.nodes.insert(1, obs(vec![f64::NAN, 0.0], vec![], None));
        let e = compute_powers(&m, &cfg, &o).unwrap_err().to_string();
        assert!(e.starts_with("node 1 (\"a\"): cpu_idle[0] = NaN"), "{e}");
        // A missing observation.
        o.nodes.remove(&1);
        let e = compute_powers(&m, &cfg, &o).unwrap_err().to_string();
        assert!(e.starts_with("node 1 (\"a\"): no observation"), "{e}");
        // Wrong number of processes.
        o.nodes.insert(1, obs(vec![1.0, 1.0], vec![0.5], None));
        let e = compute_powers(&m, &cfg, &o).unwrap_err().to_string();
        assert!(
            e.contains("hosts 2 processes but the observation has 1"),
            "{e}"
        );
        // Weights.
        let bad = PowerConfig {
            model: PowerModel::Drum { w_comm: 1.5 },
            ..Default::default()
        };
        assert!(matches!(static_powers(&m, &bad), Err(Error::Parameter(_))));
        let bad = PowerConfig {
            model: PowerModel::Drum { w_comm: f64::NAN },
            ..Default::default()
        };
        assert!(matches!(static_powers(&m, &bad), Err(Error::Parameter(_))));
        // A rating on some nodes only.
        let half = machine(
            r#"<machinemodel><node type="NETWORK" nodenum="0" parent="-1"/>
               <node type="SINGLE_COMPUTING" nodenum="1" parent="0" mflops="5"/>
               <node type="SINGLE_COMPUTING" nodenum="7" name="x" parent="0"/></machinemodel>"#,
        );
        let e = static_powers(&half, &cfg).unwrap_err().to_string();
        assert!(e.starts_with("node 7 (\"x\"): no `mflops`"), "{e}");
        // Communication power without any capacity known.
        let nobw = machine(
            r#"<machinemodel><node type="NETWORK" nodenum="0" parent="-1"/>
               <node type="SINGLE_COMPUTING" nodenum="1" name="y" parent="0"/></machinemodel>"#,
        );
        let wc = PowerConfig {
            model: PowerModel::Drum { w_comm: 0.1 },
            ..Default::default()
        };
        let e = static_powers(&nobw, &wc).unwrap_err().to_string();
        assert!(
            e.starts_with("node 1 (\"y\"): interface link has no known capacity"),
            "{e}"
        );
    }

    #[test]
    fn unrated_machines_share_by_processes() {
        let m = machine(
            r#"<machinemodel><node type="NETWORK" nodenum="0" parent="-1"/>
               <node type="MULTIPLE_COMPUTING" nodenum="1" parent="0" numprocs="3"/>
               <node type="SINGLE_COMPUTING" nodenum="2" parent="0"/></machinemodel>"#,
        );
        let p = static_powers(&m, &PowerConfig::default()).unwrap();
        for r in 0..4 {
            close(p.parts[r], 0.25);
        }
    }

    #[test]
    fn unknown_interface_capacity_falls_back_to_the_machine_file() {
        // Node a's sample has no capacity: C = its `bandwidth` (1000); node b's neither, and
        // b has no `bandwidth` of its own: C = the switch's 100. Traffic 20 Mbit/s on each.
        let m = machine(TWO);
        let mut o = Observations::default();
        for (num, cpus) in [(1, 2), (2, 1)] {
            let mut n = obs(vec![1.0; cpus], vec![], Some((2.5e6, 10.0)));
            n.ifaces[0].capacity_mbps = None;
            o.nodes.insert(num, n);
        }
        let cfg = PowerConfig {
            model: PowerModel::Drum { w_comm: 1.0 },
            ..Default::default()
        };
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.nodes[1].communication.unwrap(), 980.0);
        close(p.nodes[2].communication.unwrap(), 80.0);
        close(p.share(NodeId(1)), 980.0 / 1060.0);
        // A measured capacity wins over the machine file.
        o.nodes.get_mut(&1).unwrap().ifaces[0].capacity_mbps = Some(100.0);
        let p = compute_powers(&m, &cfg, &o).unwrap();
        close(p.nodes[1].communication.unwrap(), 80.0);
    }
}
