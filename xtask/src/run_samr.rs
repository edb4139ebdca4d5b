//! `cargo xtask run-samr`: the structured AMR kernel with DRUM in the loop on a machine
//! description (default `machines/local-2core-hetero.xml`, with the competing process its
//! file describes): thread ranks pinned to their nodes' CPUs, each rank's agent measuring
//! it, the powers sensed before each regrid becoming the capacities of Sinha & Parashar's
//! ACEHeterogeneous. Results in `out/run-samr/`: `steps.jsonl` (samr's JSON steps),
//! `hierarchy.svg` (the last hierarchy, patches coloured by rank) and `summary.json`, and
//! a summary on stdout. `--compare` first runs GrACE's default (SFC into equal parts) on
//! the same machine and load and prints both times.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Options of `run-samr`.
#[derive(Debug)]
struct Options {
    machine: String,
    compare: bool,
    out: PathBuf,
    /// Passed to `samr` (after the defaults, so they override them).
    samr_args: Vec<String>,
}

/// The run's size unless the caller's flags say otherwise: 128² level-0 cells, two finer
/// levels, 100 level-0 steps, each patch update computed 60 times (as the reproduction's
/// SAMR studies do, so that the arithmetic, not the collectives' latency, sets a step's
/// time; a few seconds on two cores).
const DEFAULTS: [&str; 8] = [
    "--n0",
    "128",
    "--max-level",
    "2",
    "--steps",
    "100",
    "--sweeps",
    "60",
];

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        machine: "machines/local-2core-hetero.xml".into(),
        compare: false,
        out: PathBuf::from("out/run-samr"),
        samr_args: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value"))
        };
        match a.as_str() {
            "--machine" => o.machine = value("--machine")?,
            "--out" => o.out = PathBuf::from(value("--out")?),
            "--compare" => o.compare = true,
            "--json" | "--svg" | "--partitioner" | "--balance" => bail!(
                "{a} is set by run-samr (JSON steps, the picture in --out, ace with monitored \
                 powers; --compare adds sfc with equal parts)"
            ),
            _ => o.samr_args.push(a.clone()),
        }
    }
    Ok(o)
}

/// The arguments of one run: `partitioner` with `balance`, outputs named with `tag`.
fn samr_args(o: &Options, partitioner: &str, balance: &str, tag: &str) -> Vec<String> {
    let mut a: Vec<String> = DEFAULTS.iter().map(|s| s.to_string()).collect();
    a.extend(
        [
            "--machine",
            &o.machine,
            "--machine-load",
            "--partitioner",
            partitioner,
            "--balance",
            balance,
            "--json",
            "--svg",
        ]
        .map(String::from),
    );
    a.push(
        o.out
            .join(format!("{tag}hierarchy.svg"))
            .display()
            .to_string(),
    );
    a.extend(o.samr_args.iter().cloned());
    a
}

/// What a run's steps add up to.
#[derive(Debug)]
struct Summary {
    partitioner: String,
    balance: String,
    steps: usize,
    /// Σ over the steps of the level-0 step and its regrid (the slowest rank's).
    time_s: f64,
    /// Mean over the steps of the largest `I_k` (against the capacities in force).
    mean_max_imbalance_percent: f64,
    /// Mean over the regrids of the capacities DRUM gave.
    mean_capacities: Vec<f64>,
    /// Each rank's share of the work, mean over the steps.
    mean_work_share: Vec<f64>,
}

impl Summary {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "partitioner": self.partitioner,
            "balance": self.balance,
            "steps": self.steps,
            "time_s": self.time_s,
            "mean_max_imbalance_percent": self.mean_max_imbalance_percent,
            "mean_capacities": self.mean_capacities,
            "mean_work_share": self.mean_work_share,
        })
    }
}

fn summarise(partitioner: &str, balance: &str, jsonl: &str) -> Result<Summary> {
    let mut s = Summary {
        partitioner: partitioner.into(),
        balance: balance.into(),
        steps: 0,
        time_s: 0.0,
        mean_max_imbalance_percent: 0.0,
        mean_capacities: Vec::new(),
        mean_work_share: Vec::new(),
    };
    let mut sensed = 0usize;
    for line in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).context("a samr step line")?;
        let f = |key: &str| {
            v[key]
                .as_f64()
                .with_context(|| format!("a step without {key}"))
        };
        s.time_s += f("step_seconds")? + f("balance_seconds")?;
        let ranks = v["ranks"].as_array().context("a step without ranks")?;
        let work: Vec<f64> = ranks.iter().filter_map(|r| r["work"].as_f64()).collect();
        let total: f64 = work.iter().sum::<f64>().max(1.0);
        s.mean_work_share.resize(work.len(), 0.0);
        for (m, w) in s.mean_work_share.iter_mut().zip(&work) {
            *m += w / total;
        }
        let worst = ranks
            .iter()
            .filter_map(|r| r["imbalance_percent"].as_f64())
            .fold(0.0, f64::max);
        s.mean_max_imbalance_percent += worst;
        if let Some(c) = v["sensed"]["capacities"].as_array() {
            s.mean_capacities.resize(c.len(), 0.0);
            for (m, x) in s.mean_capacities.iter_mut().zip(c) {
                *m += x.as_f64().unwrap_or(0.0);
            }
            sensed += 1;
        }
        s.steps += 1;
    }
    if s.steps == 0 {
        bail!("samr printed no steps");
    }
    let n = s.steps as f64;
    s.mean_max_imbalance_percent /= n;
    s.mean_work_share.iter_mut().for_each(|x| *x /= n);
    s.mean_capacities
        .iter_mut()
        .for_each(|x| *x /= sensed.max(1) as f64);
    Ok(s)
}

/// One run of `samr`, its steps written to `{tag}steps.jsonl`.
fn run_once(
    o: &Options,
    samr: &std::path::Path,
    p: &str,
    balance: &str,
    tag: &str,
) -> Result<Summary> {
    let root = crate::project_root();
    let mut cmd = Command::new(samr);
    cmd.current_dir(&root)
        .args(samr_args(o, p, balance, tag))
        .stderr(Stdio::inherit());
    eprintln!("xtask: running {cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!("samr failed with {}", out.status);
    }
    let text = String::from_utf8(out.stdout).context("samr's output is not UTF-8")?;
    let path = root.join(&o.out).join(format!("{tag}steps.jsonl"));
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    summarise(p, balance, &text)
}

pub fn run_samr(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    let bins = crate::release(&["--quiet", "-p", "samr-cli", "--bin", "samr"])?;
    let samr = bins.join("samr");
    let dir = crate::project_root().join(&o.out);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut runs = Vec::new();
    if o.compare {
        runs.push(run_once(&o, &samr, "sfc", "uniform", "default-")?);
    }
    let tag = if o.compare { "sensitive-" } else { "" };
    runs.push(run_once(&o, &samr, "ace", "monitored", tag)?);
    for r in &runs {
        let shares: Vec<String> = r
            .mean_work_share
            .iter()
            .map(|x| format!("{:.1}%", 100.0 * x))
            .collect();
        let caps: Vec<String> = r
            .mean_capacities
            .iter()
            .map(|x| format!("{:.1}%", 100.0 * x))
            .collect();
        println!(
            "run-samr: {} ({}): {} steps in {:.3} s; work shares {}; capacities sensed {}; mean max I_k {:.1}%",
            r.partitioner,
            r.balance,
            r.steps,
            r.time_s,
            shares.join(" "),
            if caps.is_empty() {
                "-".into()
            } else {
                caps.join(" ")
            },
            r.mean_max_imbalance_percent
        );
    }
    if let [d, s] = &runs[..] {
        println!(
            "run-samr: system-sensitive / default time = {:.3} (Sinha & Parashar's Table I: 6-18 %% less time with 4-32 processors, i.e. 0.82-0.94)",
            s.time_s / d.time_s
        );
    }
    let path = dir.join("summary.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&runs.iter().map(Summary::json).collect::<Vec<_>>())? + "\n",
    )
    .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "run-samr: results in {}/ (steps.jsonl, hierarchy.svg, summary.json)",
        o.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn defaults_pass_through_and_refusals() {
        let o = parse(&args("--steps 10 --compare")).unwrap();
        assert!(o.compare);
        let a = samr_args(&o, "ace", "monitored", "x-").join(" ");
        assert!(
            a.contains("--machine machines/local-2core-hetero.xml --machine-load"),
            "{a}"
        );
        assert!(a.contains("--svg out/run-samr/x-hierarchy.svg"), "{a}");
        assert!(a.ends_with("--steps 10"), "{a}");
        let e = parse(&args("--json")).unwrap_err().to_string();
        assert!(e.contains("set by run-samr"), "{e}");
        let e = parse(&args("--out")).unwrap_err().to_string();
        assert!(e.contains("--out needs a value"), "{e}");
    }

    #[test]
    fn summaries_add_the_steps() {
        let l1 = r#"{"step_seconds":1.0,"balance_seconds":0.5,"ranks":[{"work":30,"imbalance_percent":5.0},{"work":10,"imbalance_percent":2.0}],"sensed":{"capacities":[0.7,0.3]}}"#;
        let l2 = r#"{"step_seconds":2.0,"balance_seconds":0.0,"ranks":[{"work":20,"imbalance_percent":1.0},{"work":20,"imbalance_percent":3.0}]}"#;
        let s = summarise("ace", "monitored", &format!("{l1}\n{l2}\n")).unwrap();
        assert_eq!(s.steps, 2);
        assert!((s.time_s - 3.5).abs() < 1e-12);
        assert!((s.mean_max_imbalance_percent - 4.0).abs() < 1e-12);
        assert_eq!(s.mean_capacities, vec![0.7, 0.3]);
        assert!((s.mean_work_share[0] - 0.625).abs() < 1e-12);
        assert!(summarise("ace", "monitored", "").is_err());
        assert!(summarise("ace", "monitored", "{}\n").is_err());
    }
}
