//! Experiment 2 measured on a real network: the runs `cargo xtask reproduce` makes on the
//! namespace cluster of `machines/vcluster-2.xml` (two nodes of one CPU, links shaped to
//! 100 Mbit/s both ways, MPI ranks over TCP, each node's agent reading its own namespace's
//! interface counters), with and without a competing TCP flow on one node's link. xtask
//! writes one directory per run (`run.json`: w_comm, balance and the flow; the run's
//! `summary.json` and `steps.jsonl`); this module reads them into the study `exp2_net`.

use crate::error::{Context, Result, bail};
use crate::output::Record;
use std::path::Path;

/// The study key of these runs.
pub const STUDY: &str = "exp2_net";

/// One node's part in a run.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePart {
    /// The node's `name` in the machine file.
    pub node: String,
    /// The host its rank ran on (the namespace's hostname).
    pub host: String,
    /// The part size DRUM gave it at the end (the partitioner's target).
    pub target: f64,
    /// The share of the work it held, over the run.
    pub work_share: f64,
}

/// One measured run on the vcluster.
#[derive(Debug, Clone, PartialEq)]
pub struct NetRun {
    /// The run's directory name.
    pub name: String,
    /// `uniform` or `monitored`.
    pub balance: &'static str,
    /// The communication weight.
    pub w_comm: f64,
    /// The node whose link carried a competing flow, if any.
    pub flow_on: Option<String>,
    /// Sum of the steps' wall times, seconds.
    pub time_s: f64,
    /// Each rank's node and part.
    pub parts: Vec<NodePart>,
    pub rebalances: usize,
    pub migrated_elements: u64,
    pub migrated_bytes: f64,
    /// Mean per-step imbalance.
    pub imbalance: f64,
}

impl NetRun {
    /// The configuration's name in the report.
    pub fn config(&self) -> String {
        match &self.flow_on {
            Some(n) => format!("vcluster-2, a competing flow on {n}'s link"),
            None => "vcluster-2, dedicated links".into(),
        }
    }

    /// The variant's name in the report (as the simulated exp. 2's).
    pub fn variant(&self) -> String {
        match self.balance {
            "uniform" => "uniform".into(),
            _ => format!("DRUM w_comm={}", self.w_comm),
        }
    }

    /// The part of `node`, if one of the run's ranks is on it.
    pub fn part_of(&self, node: &str) -> Option<&NodePart> {
        self.parts.iter().find(|p| p.node == node)
    }
}

/// Reads one run's directory (`run.json`, `summary.json`).
pub fn read_run(dir: &Path) -> Result<NetRun> {
    let json = |name: &str| -> Result<serde_json::Value> {
        let p = dir.join(name);
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", p.display()))
    };
    let (run, s) = (json("run.json")?, json("summary.json")?);
    let field = |v: &serde_json::Value, k: &str, what: &str| -> Result<f64> {
        v[k].as_f64()
            .with_context(|| format!("{}: {what} without a number `{k}`", dir.display()))
    };
    let balance = match run["balance"].as_str() {
        Some("uniform") => "uniform",
        Some("monitored") => "monitored",
        other => bail!(
            "{}/run.json: balance {other:?}, expected \"uniform\" or \"monitored\"",
            dir.display()
        ),
    };
    let per_rank = s["per_rank"]
        .as_array()
        .with_context(|| format!("{}/summary.json without per_rank", dir.display()))?;
    let parts = per_rank
        .iter()
        .map(|r| {
            Ok(NodePart {
                node: r["node"].as_str().unwrap_or("?").into(),
                host: r["host"].as_str().unwrap_or("?").into(),
                target: field(r, "target", "a per_rank entry")?,
                work_share: field(r, "work_share", "a per_rank entry")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let imb = s["imbalance"].as_array().map_or(&[][..], Vec::as_slice);
    Ok(NetRun {
        name: dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        balance,
        w_comm: field(&run, "w_comm", "run.json")?,
        flow_on: run["flow_on"].as_str().map(String::from),
        time_s: field(&s, "wall_s", "summary.json")?,
        parts,
        rebalances: s["rebalances"].as_u64().unwrap_or(0) as usize,
        migrated_elements: s["migrated_elements"].as_u64().unwrap_or(0),
        migrated_bytes: s["migrated_bytes"].as_f64().unwrap_or(0.0),
        imbalance: imb.iter().filter_map(|v| v.as_f64()).sum::<f64>() / imb.len().max(1) as f64,
    })
}

/// Every run under `dir` (one subdirectory each, in name order).
pub fn read_runs(dir: &Path) -> Result<Vec<NetRun>> {
    let mut dirs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("run.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        bail!(
            "{}: no vcluster run (no subdirectory with run.json)",
            dir.display()
        );
    }
    dirs.iter().map(|d| read_run(d)).collect()
}

/// The runs as the report's records (measured; the nodes' CPUs are equal: RC_ideal 0).
pub fn records(runs: &[NetRun]) -> Vec<Record> {
    runs.iter()
        .map(|r| Record {
            study: STUDY,
            config: r.config(),
            variant: r.variant(),
            mode: "measured",
            ranks: r.parts.len(),
            balance: r.balance,
            w_comm: r.w_comm,
            loads: r.flow_on.iter().map(|n| format!("flow on {n}")).collect(),
            rebalance: "always".into(),
            sensing: "1".into(),
            time_s: r.time_s,
            times_s: vec![r.time_s],
            rc: None,
            rc_ideal: 0.0,
            h_cpu: 0.0,
            rebalances: r.rebalances,
            migrated_elements: r.migrated_elements,
            migrated_bytes: r.migrated_bytes,
            imbalance: r.imbalance,
            compute_s: None,
            comm_s: None,
        })
        .collect()
}

/// The loaded node's part at w_comm = 0 and at `w` (DRUM runs with the flow), if both ran.
pub fn loaded_parts(runs: &[NetRun], w: f64) -> Option<(String, f64, f64)> {
    let loaded = |w_comm: f64| {
        runs.iter().find(|r| {
            r.balance == "monitored" && r.flow_on.is_some() && (r.w_comm - w_comm).abs() < 1e-9
        })
    };
    let (a, b) = (loaded(0.0)?, loaded(w)?);
    let node = a.flow_on.clone()?;
    Some((
        node.clone(),
        a.part_of(&node)?.target,
        b.part_of(&node)?.target,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_run(root: &Path, name: &str, balance: &str, w: f64, flow: bool, t2: f64) {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let run = serde_json::json!({
            "balance": balance,
            "w_comm": w,
            "flow_on": flow.then_some("node2"),
        });
        std::fs::write(d.join("run.json"), run.to_string()).unwrap();
        let summary = serde_json::json!({
            "wall_s": 10.0 + w,
            "rebalances": 17,
            "imbalance": [1.0, 1.5],
            "per_rank": [
                {"node": "node1", "host": "node1", "target": 1.0 - t2, "work_share": 0.5},
                {"node": "node2", "host": "node2", "target": t2, "work_share": 0.5},
            ],
        });
        std::fs::write(d.join("summary.json"), summary.to_string()).unwrap();
    }

    #[test]
    fn runs_are_read_into_records_and_the_loaded_part_found() {
        let root = std::env::temp_dir().join(format!("repro-vc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        write_run(&root, "a-uniform-flow", "uniform", 0.0, true, 0.5);
        write_run(&root, "b-w0-flow", "monitored", 0.0, true, 0.48);
        write_run(&root, "c-w0.5-flow", "monitored", 0.5, true, 0.27);
        write_run(&root, "d-w0.5-none", "monitored", 0.5, false, 0.5);
        std::fs::create_dir_all(root.join("not-a-run")).unwrap();
        let runs = read_runs(&root).unwrap();
        assert_eq!(runs.len(), 4);
        assert_eq!(runs[2].variant(), "DRUM w_comm=0.5");
        assert_eq!(runs[0].variant(), "uniform");
        assert_eq!(runs[3].config(), "vcluster-2, dedicated links");
        assert_eq!(runs[2].part_of("node2").unwrap().host, "node2");
        assert_eq!(runs[1].imbalance, 1.25);
        let (node, at0, at) = loaded_parts(&runs, 0.5).unwrap();
        assert_eq!((node.as_str(), at0, at), ("node2", 0.48, 0.27));
        let recs = records(&runs);
        assert_eq!(recs[2].study, STUDY);
        assert_eq!(recs[2].loads, vec!["flow on node2".to_string()]);
        assert_eq!(recs[2].time_s, 10.5);
        assert!(loaded_parts(&runs, 0.25).is_none());
        // A run whose balance is neither is named.
        write_run(&root, "e-bad", "static", 0.0, false, 0.5);
        let e = read_runs(&root).unwrap_err().to_string();
        assert!(e.contains("e-bad/run.json: balance"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
        let e = read_runs(&root).unwrap_err().to_string();
        assert!(e.contains("reading"), "{e}");
    }
}
