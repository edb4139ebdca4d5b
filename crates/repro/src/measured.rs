//! Runs measured on this host: the `fem-laplace` command over thread ranks pinned to cores,
//! with real competing processes and DRUM's real monitors.

use crate::error::{Context, Result, bail};
use crate::sim::SimLoad;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The rating of one core of this host: the one `machines/local-2core-hetero.xml` gives.
pub fn host_mflops() -> Result<f64> {
    let m = drum_model::Machine::parse_str(
        include_str!("../../../machines/local-2core-hetero.xml"),
        "machines/local-2core-hetero.xml",
    )?;
    m.computing_nodes()
        .next()
        .and_then(|n| n.mflops)
        .context("machines/local-2core-hetero.xml rates no core")
}

/// A machine file of `ranks` single-core nodes (cores 0, 1, …) rated `mflops` each: the
/// host's machine without its `load` attribute (the runs start their loads themselves).
pub fn host_xml(ranks: usize, mflops: f64) -> String {
    host_xml_rated(&vec![mflops; ranks])
}

/// A machine file of single-core nodes (cores 0, 1, …), node `r` rated `mflops[r]`.
pub fn host_xml_rated(mflops: &[f64]) -> String {
    let mut s = String::from(
        "<machinemodel>\n  <node type=\"NETWORK\" nodenum=\"0\" name=\"localhost\" parent=\"-1\" bandwidth=\"48000\">\n    <lbmethod lbm=\"HSFC\" KEEP_CUTS=\"1\" IMBALANCE_TOL=\"1.02\"/>\n  </node>\n",
    );
    for (r, mflops) in mflops.iter().enumerate() {
        s += &format!(
            "  <node type=\"SINGLE_COMPUTING\" nodenum=\"{}\" name=\"core{r}\" parent=\"0\" cpus=\"{r}\" mflops=\"{mflops}\"/>\n",
            r + 1
        );
    }
    s + "</machinemodel>\n"
}

/// A run's command-line form of a load.
pub fn load_arg(l: &SimLoad) -> String {
    let mut s = format!("{}:{}@{}", l.rank, l.procs, l.from);
    if let Some(u) = l.until {
        s += &format!("-{u}");
    }
    s
}

/// How one measured configuration runs.
#[derive(Debug, Clone)]
pub struct HostRun {
    pub ranks: usize,
    pub balance: &'static str,
    pub w_comm: f64,
    pub loads: Vec<SimLoad>,
    pub rebalance: &'static str,
    pub sensing: String,
    /// More flags (`--capacity`, `--transfer`).
    pub extra: Vec<String>,
}

/// What the repeats of a measured configuration gave.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Median total time (sum of the steps' wall times).
    pub time_s: f64,
    /// Every repeat's.
    pub times_s: Vec<f64>,
    pub rebalances: usize,
    pub migrated_elements: u64,
    pub migrated_bytes: f64,
    /// Mean per-step imbalance (slowest rank's busy time over the mean).
    pub imbalance: f64,
    /// The agents' CPU over wall, mean over the ranks.
    pub monitor_overhead: f64,
    /// The step lines of the median repeat.
    pub steps: Vec<serde_json::Value>,
}

/// The `fem-laplace` binary: `$DRUM_REPRO_FEM_LAPLACE`, else the one beside this program.
pub fn fem_laplace() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("DRUM_REPRO_FEM_LAPLACE") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe().context("where is drum-repro?")?;
    let p = me.with_file_name("fem-laplace");
    if !p.exists() {
        bail!(
            "{} not found: build it (cargo build --release -p fem-laplace-cli) or set \
             DRUM_REPRO_FEM_LAPLACE",
            p.display()
        );
    }
    Ok(p)
}

/// Runs `cfg` `repeats` times on the machine file `machine` to `target` vertices; files go
/// to `dir` under `tag`.
pub fn run(
    fem: &Path,
    machine: &Path,
    dir: &Path,
    tag: &str,
    cfg: &HostRun,
    target: usize,
    repeats: usize,
) -> Result<Measured> {
    let reuse = std::env::var_os("DRUM_REPRO_REUSE").map(PathBuf::from);
    let mut reps = Vec::new();
    for rep in 0..repeats {
        let jsonl = dir.join(format!("{tag}-{rep}.jsonl"));
        let summary = dir.join(format!("{tag}-{rep}.summary.json"));
        if let Some(from) = &reuse {
            for f in [&jsonl, &summary] {
                let src = from.join(f.file_name().expect("a file name"));
                std::fs::copy(&src, f).with_context(|| {
                    format!(
                        "DRUM_REPRO_REUSE: copying {} to {}",
                        src.display(),
                        f.display()
                    )
                })?;
            }
            reps.push(read_repeat(&jsonl, &summary)?);
            continue;
        }
        let mut cmd = Command::new(fem);
        cmd.arg("--machine")
            .arg(machine)
            .args(["--balance", cfg.balance])
            .args(["--w-comm", &cfg.w_comm.to_string()])
            .args(["--rebalance", cfg.rebalance])
            .args(["--sensing", &cfg.sensing])
            .args(["--target-vertices", &target.to_string()])
            .arg("--no-hash")
            .arg("--jsonl")
            .arg(&jsonl)
            .arg("--summary-json")
            .arg(&summary)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for l in &cfg.loads {
            cmd.args(["--load", &load_arg(l)]);
        }
        cmd.args(&cfg.extra);
        let out = cmd
            .output()
            .with_context(|| format!("could not start {}", fem.display()))?;
        if !out.status.success() {
            bail!(
                "{cmd:?} failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        reps.push(read_repeat(&jsonl, &summary)?);
    }
    let mut times: Vec<f64> = reps.iter().map(|r| r.time_s).collect();
    let mut order: Vec<usize> = (0..reps.len()).collect();
    order.sort_by(|&a, &b| times[a].total_cmp(&times[b]));
    let mid = order.get(order.len() / 2).copied().context("no repeat")?;
    let mut m = reps.swap_remove(mid);
    times.sort_by(f64::total_cmp);
    m.times_s = times;
    Ok(m)
}

/// One repeat's figures from its step lines and summary.
fn read_repeat(jsonl: &Path, summary: &Path) -> Result<Measured> {
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(summary)
            .with_context(|| format!("reading {}", summary.display()))?,
    )
    .with_context(|| format!("{}: not JSON", summary.display()))?;
    let steps: Vec<serde_json::Value> = std::fs::read_to_string(jsonl)
        .with_context(|| format!("reading {}", jsonl.display()))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{}: not JSON lines", jsonl.display()))?;
    let imb = s["imbalance"]
        .as_array()
        .context("summary without imbalance")?;
    let overheads: Vec<f64> = s["per_rank"]
        .as_array()
        .context("summary without per_rank")?
        .iter()
        .filter_map(|r| r["end"]["monitor"]["overhead"].as_f64())
        .collect();
    Ok(Measured {
        time_s: s["wall_s"].as_f64().context("summary without wall_s")?,
        times_s: Vec::new(),
        rebalances: s["rebalances"].as_u64().unwrap_or(0) as usize,
        migrated_elements: s["migrated_elements"].as_u64().unwrap_or(0),
        migrated_bytes: s["migrated_bytes"].as_f64().unwrap_or(0.0),
        imbalance: imb.iter().filter_map(|v| v.as_f64()).sum::<f64>() / imb.len().max(1) as f64,
        monitor_overhead: overheads.iter().sum::<f64>() / overheads.len().max(1) as f64,
        steps,
    })
}
