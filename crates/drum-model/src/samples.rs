//! Monitor samples, their JSON Lines record/replay format, and their reduction to
//! [`Observations`] for the power models.
//!
//! One JSON object per line (counters cumulative, rates taken between consecutive lines of the
//! same node):
//!
//! ```text
//! {"t": 12.5, "node": 3, "cpu_idle": [0.9, 0.1], "proc_util": [0.95], "mem_total": 8.0e9,
//!  "mem_avail": 6.1e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 1234,
//!  "tx_bytes": 99, "rx_packets": 10, "tx_packets": 3}]}
//! ```
//!
//! `cpu_idle`: fraction of each CPU idle over the last period; `proc_util`: each application
//! process's CPU fraction over it; `proc_runnable` (optional): the fraction of the period each
//! process was runnable (on a CPU or waiting for one, from the kernel's schedstat); `t` in
//! seconds; memory in bytes; `capacity_mbps` may be `null` when unknown.

use crate::error::{Error, Location, Result};
use crate::forecast::forecast_series;
use crate::machine::Machine;
use crate::power::{
    IfaceObservation, IfaceRates, MemoryObservation, NodeObservation, Observations, PowerConfig,
    Powers, compute_powers,
};
use crate::usage::{CpuIdle, IfaceUsage, ProcUsage, Usage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Cumulative counters of one interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfaceCounters {
    /// Interface name.
    pub name: String,
    /// Link capacity, Mbit/s (`null` when unknown).
    pub capacity_mbps: Option<f64>,
    /// Bytes received since boot.
    pub rx_bytes: u64,
    /// Bytes sent since boot.
    pub tx_bytes: u64,
    /// Packets received since boot.
    pub rx_packets: u64,
    /// Packets sent since boot.
    pub tx_packets: u64,
}

/// One sample of one node: one line of the JSON Lines file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// Time, seconds (any origin; increasing per node).
    pub t: f64,
    /// The node's `nodenum`.
    pub node: u32,
    /// Idle fraction of each CPU of the node over the last period.
    pub cpu_idle: Vec<f64>,
    /// CPU fraction of each application process of the node over the last period.
    pub proc_util: Vec<f64>,
    /// Fraction of the last period each application process was runnable (running, or
    /// waiting in a run queue for a CPU), from the scheduler's counters; absent where the
    /// kernel does not keep them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc_runnable: Option<Vec<f64>>,
    /// Physical memory, bytes.
    pub mem_total: f64,
    /// Available memory, bytes.
    pub mem_avail: f64,
    /// Cumulative interface counters (loopback excluded).
    pub ifaces: Vec<IfaceCounters>,
}

/// A sample with the place it was read from (for error messages).
#[derive(Debug, Clone, PartialEq)]
pub struct LocatedSample {
    /// The sample.
    pub sample: Sample,
    /// Where its line starts.
    pub location: Location,
}

/// Writes samples as JSON Lines.
pub fn write_jsonl(samples: &[Sample], mut out: impl std::io::Write) -> std::io::Result<()> {
    for s in samples {
        let line = serde_json::to_string(s).map_err(std::io::Error::other)?;
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Parses JSON Lines text (blank lines allowed). Errors are `FILE:LINE:COL: message`.
pub fn parse_jsonl(text: &str, source: &str) -> Result<Vec<LocatedSample>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if line.trim().is_empty() {
            continue;
        }
        let sample: Sample = serde_json::from_str(line).map_err(|e| Error::Samples {
            location: Location::new(
                source,
                lineno,
                u32::try_from(e.column()).unwrap_or(1).max(1),
            ),
            message: format!("not a sample: {}", serde_message(&e)),
        })?;
        let location = Location::new(source, lineno, 1);
        check_sample(&sample, &location)?;
        out.push(LocatedSample { sample, location });
    }
    Ok(out)
}

/// Largest samples file read (256 MiB, about a day of one-second samples of 30 nodes): a
/// larger or endless file is refused before it fills memory.
pub const MAX_SAMPLES_FILE_BYTES: u64 = 256 << 20;

/// Reads a JSON Lines file (at most [`MAX_SAMPLES_FILE_BYTES`]).
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<Vec<LocatedSample>> {
    let path = path.as_ref();
    let bytes = part_api::file::read_bounded(path, MAX_SAMPLES_FILE_BYTES, "a samples file")
        .map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?;
    let name = path.display().to_string();
    let text = std::str::from_utf8(&bytes).map_err(|e| Error::Samples {
        location: Location::new(
            &name,
            u32::try_from(
                bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1,
            )
            .unwrap_or(u32::MAX),
            1,
        ),
        message: "not valid UTF-8".into(),
    })?;
    parse_jsonl(text, &name)
}

/// serde_json's message without its own " at line L column C" (our location says it).
fn serde_message(e: &serde_json::Error) -> String {
    let m = e.to_string();
    match m.rfind(" at line ") {
        Some(i) => m[..i].to_string(),
        None => m,
    }
}

fn check_sample(s: &Sample, at: &Location) -> Result<()> {
    let bad = |m: String| {
        Err(Error::Samples {
            location: at.clone(),
            message: m,
        })
    };
    if !s.t.is_finite() {
        return bad(format!("t = {} is not finite", s.t));
    }
    if s.cpu_idle.is_empty() {
        return bad("cpu_idle is empty".into());
    }
    for (i, &x) in s.cpu_idle.iter().enumerate() {
        if !(x.is_finite() && (0.0..=1.0 + 1e-9).contains(&x)) {
            return bad(format!("cpu_idle[{i}] = {x} is not a fraction in [0, 1]"));
        }
    }
    for (i, &x) in s.proc_util.iter().enumerate() {
        if !(x.is_finite() && x >= 0.0) {
            return bad(format!(
                "proc_util[{i}] = {x} is not a finite fraction >= 0"
            ));
        }
    }
    if let Some(r) = &s.proc_runnable {
        if r.len() != s.proc_util.len() {
            return bad(format!(
                "{} proc_runnable values for {} proc_util values",
                r.len(),
                s.proc_util.len()
            ));
        }
        for (i, &x) in r.iter().enumerate() {
            if !(x.is_finite() && x >= 0.0) {
                return bad(format!(
                    "proc_runnable[{i}] = {x} is not a finite fraction >= 0"
                ));
            }
        }
    }
    if !(s.mem_total.is_finite() && s.mem_total >= 0.0) {
        return bad(format!(
            "mem_total = {} is not a finite number >= 0",
            s.mem_total
        ));
    }
    if !(s.mem_avail.is_finite() && s.mem_avail >= 0.0) {
        return bad(format!(
            "mem_avail = {} is not a finite number >= 0",
            s.mem_avail
        ));
    }
    for f in &s.ifaces {
        if let Some(c) = f.capacity_mbps
            && !(c.is_finite() && c > 0.0)
        {
            return bad(format!(
                "interface {}: capacity_mbps = {c} is not > 0",
                f.name
            ));
        }
    }
    Ok(())
}

/// How a node's series of samples is reduced to one value per quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Smoothing {
    /// The mean over the monitoring window (DRUM 2005 §3.3: A_i(t, T) averages over T);
    /// traffic rates are total bytes over total time.
    #[default]
    WindowMean,
    /// The NWS-style forecast of the next value ([`crate::forecast`]).
    Forecast,
}

/// Reduces samples to observations, node by node (file order within each node): each line
/// becomes the [`Usage`] of its period (its fractions with weight 1, so the window mean is the
/// mean of the lines; the interfaces' counters give the bytes since the node's previous
/// line), and the node's usages go through the monitors' arithmetic ([`Usage::merge`] and
/// [`Usage::observation`]) or, with [`Smoothing::Forecast`], through the forecaster value by
/// value.
///
/// Errors (with the offending line): `t` not increasing within a node, the number of CPUs or
/// processes changing within a node, a counter going backwards.
pub fn observations_from_samples(
    samples: &[LocatedSample],
    smoothing: Smoothing,
) -> Result<Observations> {
    let mut by_node: BTreeMap<u32, Vec<&LocatedSample>> = BTreeMap::new();
    for s in samples {
        by_node.entry(s.sample.node).or_default().push(s);
    }
    let mut nodes = BTreeMap::new();
    for (num, list) in by_node {
        let spans = usages_of_node(num, &list)?;
        let obs = match smoothing {
            Smoothing::WindowMean => {
                let mut all = Usage::default();
                for u in &spans {
                    all.merge(u);
                }
                all.observation()
            }
            Smoothing::Forecast => forecast_observation(&spans),
        };
        nodes.insert(num, obs);
    }
    Ok(Observations {
        nodes,
        rank_work: BTreeMap::new(),
    })
}

/// Each line of one node as the usage of its period (checked against the previous line).
fn usages_of_node(num: u32, list: &[&LocatedSample]) -> Result<Vec<Usage>> {
    let mut spans = Vec::with_capacity(list.len());
    for (i, l) in list.iter().enumerate() {
        let b = &l.sample;
        let bad = |m: String| {
            Err(Error::Samples {
                location: l.location.clone(),
                message: m,
            })
        };
        let prev = i.checked_sub(1).map(|p| &list[p].sample);
        if let Some(a) = prev {
            if b.t <= a.t {
                return bad(format!(
                    "node {num}: t = {} does not increase (previous sample of this node has t = {})",
                    b.t, a.t
                ));
            }
            for (what, now, then) in [
                ("cpu_idle", b.cpu_idle.len(), a.cpu_idle.len()),
                ("proc_util", b.proc_util.len(), a.proc_util.len()),
            ] {
                if now != then {
                    return bad(format!(
                        "node {num}: {now} {what} values, the previous sample of this node had {then}"
                    ));
                }
            }
        }
        let mut ifaces = Vec::with_capacity(b.ifaces.len());
        for f in &b.ifaces {
            let before = prev.and_then(|a| a.ifaces.iter().find(|x| x.name == f.name));
            let d = |x: u64, y: u64, what: &str| -> Result<f64> {
                y.checked_sub(x)
                    .map(|v| v as f64)
                    .ok_or_else(|| Error::Samples {
                        location: l.location.clone(),
                        message: format!(
                            "node {num}: interface {}: {what} went backwards ({x} -> {y})",
                            f.name
                        ),
                    })
            };
            ifaces.push(match (prev, before) {
                (Some(a), Some(g)) => IfaceUsage {
                    name: f.name.clone(),
                    capacity_mbps: f.capacity_mbps,
                    seconds: b.t - a.t,
                    rx_bytes: d(g.rx_bytes, f.rx_bytes, "rx_bytes")?,
                    tx_bytes: d(g.tx_bytes, f.tx_bytes, "tx_bytes")?,
                    rx_packets: d(g.rx_packets, f.rx_packets, "rx_packets")?,
                    tx_packets: d(g.tx_packets, f.tx_packets, "tx_packets")?,
                },
                _ => IfaceUsage {
                    name: f.name.clone(),
                    capacity_mbps: f.capacity_mbps,
                    ..IfaceUsage::default()
                },
            });
        }
        let runnable = b.proc_runnable.as_ref();
        spans.push(Usage {
            seconds: 1.0,
            cpus: b
                .cpu_idle
                .iter()
                .map(|&idle| CpuIdle { idle, total: 1.0 })
                .collect(),
            procs: b
                .proc_util
                .iter()
                .enumerate()
                .map(|(j, &u)| ProcUsage {
                    seconds: 1.0,
                    cpu_s: u,
                    runnable_s: runnable.map(|r| r[j]),
                })
                .collect(),
            mem_total: b.mem_total,
            mem_available_s: b.mem_avail,
            ifaces,
        });
    }
    Ok(spans)
}

/// The NWS-style forecast of each value of a node's series of usages (each interface's rate
/// from the periods that measured it).
fn forecast_observation(spans: &[Usage]) -> NodeObservation {
    let series: Vec<NodeObservation> = spans.iter().map(Usage::observation).collect();
    let predict = |f: &dyn Fn(&NodeObservation) -> Option<f64>| {
        let v: Vec<f64> = series.iter().filter_map(f).collect();
        forecast_series(&v).unwrap_or(0.0)
    };
    let last = series.last().expect("a node with samples");
    let cpus = last.cpu_idle.len();
    let procs = last.proc_util.len();
    let runnable_known = series.iter().all(|o| o.proc_runnable.len() == procs);
    let mut all = Usage::default();
    for u in spans {
        all.merge(u);
    }
    let merged = all.observation();
    NodeObservation {
        cpu_idle: (0..cpus)
            .map(|t| predict(&|o| o.cpu_idle.get(t).copied()))
            .collect(),
        proc_util: (0..procs)
            .map(|j| predict(&|o| o.proc_util.get(j).copied()))
            .collect(),
        proc_runnable: if runnable_known && procs > 0 {
            (0..procs)
                .map(|j| predict(&|o| o.proc_runnable.get(j).copied()))
                .collect()
        } else {
            Vec::new()
        },
        memory: merged.memory.map(|m| MemoryObservation {
            total: m.total,
            available: predict(&|o| o.memory.map(|m| m.available)),
        }),
        ifaces: merged
            .ifaces
            .iter()
            .map(|f| IfaceObservation {
                name: f.name.clone(),
                capacity_mbps: f.capacity_mbps,
                rates: f.rates.map(|_| {
                    let rate = |k: fn(&IfaceRates) -> f64| {
                        predict(&|o| {
                            o.ifaces
                                .iter()
                                .find(|x| x.name == f.name)
                                .and_then(|x| x.rates.as_ref())
                                .map(k)
                        })
                    };
                    IfaceRates {
                        rx_bytes: rate(|r| r.rx_bytes),
                        tx_bytes: rate(|r| r.tx_bytes),
                        rx_packets: rate(|r| r.rx_packets),
                        tx_packets: rate(|r| r.tx_packets),
                    }
                }),
            })
            .collect(),
    }
}

/// Powers from recorded samples: [`observations_from_samples`] then
/// [`compute_powers`]. Samples of nodes the machine does not have are an error (a replay
/// recorded on another machine), as is a computing node without samples.
pub fn powers_from_samples(
    machine: &Machine,
    config: &PowerConfig,
    samples: &[LocatedSample],
    smoothing: Smoothing,
) -> Result<Powers> {
    for s in samples {
        if machine.find(s.sample.node).is_none() {
            return Err(Error::Samples {
                location: s.location.clone(),
                message: format!(
                    "sample for node {}, which {} does not have",
                    s.sample.node,
                    machine.source()
                ),
            });
        }
    }
    let obs = observations_from_samples(samples, smoothing)?;
    compute_powers(machine, config, &obs)
}

/// Attaches a synthetic location (`<memory>:i+1:1`) to samples held in memory.
pub fn locate(samples: Vec<Sample>, source: &str) -> Vec<LocatedSample> {
    samples
        .into_iter()
        .enumerate()
        .map(|(i, sample)| LocatedSample {
            sample,
            location: Location::new(source, u32::try_from(i + 1).unwrap_or(u32::MAX), 1),
        })
        .collect()
}

/// One line of a `--work` file for the measured-capacity model:
/// `{"rank": 0, "work": 125000, "cpu_seconds": 5.0}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkRecord {
    /// The rank.
    pub rank: usize,
    /// Abstract work done.
    pub work: f64,
    /// CPU seconds spent on it.
    pub cpu_seconds: f64,
}

/// Parses a JSON Lines file of [`WorkRecord`]s into per-rank work (a later line for the same
/// rank adds to the earlier ones). Errors are `FILE:LINE:COL: message`.
pub fn parse_work(text: &str, source: &str) -> Result<BTreeMap<usize, crate::power::RankWork>> {
    let mut out: BTreeMap<usize, crate::power::RankWork> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if line.trim().is_empty() {
            continue;
        }
        let r: WorkRecord = serde_json::from_str(line).map_err(|e| Error::Samples {
            location: Location::new(
                source,
                lineno,
                u32::try_from(e.column()).unwrap_or(1).max(1),
            ),
            message: format!("not a work record: {}", serde_message(&e)),
        })?;
        if !(r.work.is_finite()
            && r.work >= 0.0
            && r.cpu_seconds.is_finite()
            && r.cpu_seconds >= 0.0)
        {
            return Err(Error::Samples {
                location: Location::new(source, lineno, 1),
                message: format!(
                    "rank {}: work {} and cpu_seconds {} must be finite and >= 0",
                    r.rank, r.work, r.cpu_seconds
                ),
            });
        }
        let e = out.entry(r.rank).or_insert(crate::power::RankWork {
            work: 0.0,
            cpu_seconds: 0.0,
        });
        e.work += r.work;
        e.cpu_seconds += r.cpu_seconds;
    }
    Ok(out)
}
