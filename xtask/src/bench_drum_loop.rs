//! `cargo xtask bench drum-loop`: DRUM in the loop on `machines/local-2core-hetero.xml` (two
//! thread ranks pinned to cores 0 and 1, one compute-bound competing process pinned to core
//! 1), in one invocation, medians of R runs (round-robin over the cases, so drifts of the
//! machine hit every case alike):
//! - RC = 1 − t_monitored / t_uniform with the load from the start (issue 20: target ≥ 0.27,
//!   goal ≥ 0.30; also printed against RC_ideal);
//! - the load switched on at step 12: monitored ≤ 0.85 × static;
//! - no load: monitored ≤ 1.05 × uniform (the cost of monitoring and rebalancing);
//! - the load from the start: monitored ≤ 0.85 × the serial run pinned to the free core 0
//!   beside the same kind of competing process on core 1 (a compute-bound shell loop pinned
//!   with taskset), measured in the same invocation;
//!
//! and where the monitored run's time goes against the ideal: the ranks' mean busy time,
//! the imbalance (slowest rank's busy time over the mean), the waiting common to both, and
//! the partitioner; and, per case, the worst rebalance point of its median run against a
//! flat HSFC of as many points as that step has elements (`hsfc partition --parts 2`, 1
//! thread, a corner-graded 2-D point set, timed in the same invocation; target: worst step ≤
//! 3× the flat HSFC). A point's cost is rank 0's `balance.cost` (window, exchange, decision,
//! partitioner; the exchange includes rank 0's wait for the last rank to arrive); beside it,
//! the step's partition phase on the rank that spent least in it. Two tables: the worst over
//! every step, and over the steps of at least 10^5 elements (on a few hundred elements a flat
//! HSFC takes 0.2 ms and the ratio is the latency of one collective).

use crate::bench::{median, uptime};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

const MACHINE: &str = "machines/local-2core-hetero.xml";

/// One configuration of the benchmark.
struct Case {
    name: &'static str,
    /// `None`: the serial run pinned to core 0 beside a competing process on core 1.
    balance: Option<&'static str>,
    load: &'static [&'static str],
}

const CASES: [Case; 7] = [
    Case {
        name: "load: uniform",
        balance: Some("uniform"),
        load: &["--machine-load"],
    },
    Case {
        name: "load: monitored",
        balance: Some("monitored"),
        load: &["--machine-load"],
    },
    Case {
        name: "load@12: static",
        balance: Some("static"),
        load: &["--load", "1:1@12"],
    },
    Case {
        name: "load@12: monitored",
        balance: Some("monitored"),
        load: &["--load", "1:1@12"],
    },
    Case {
        name: "no load: uniform",
        balance: Some("uniform"),
        load: &[],
    },
    Case {
        name: "no load: monitored",
        balance: Some("monitored"),
        load: &[],
    },
    Case {
        name: "load: serial, core 0",
        balance: None,
        load: &[],
    },
];

/// A compute-bound process pinned to `cpu` (killed and reaped when dropped).
struct Spinner(std::process::Child);

impl Spinner {
    fn start(cpu: usize) -> Result<Spinner> {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .context("could not start the competing process (taskset from util-linux)")?;
        Ok(Spinner(child))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one run gives.
#[derive(Debug, Clone)]
struct Run {
    wall: f64,
    /// The whole process (start to exit).
    process: f64,
    rc_ideal: Option<f64>,
    /// Sums over the steps: mean busy, slowest busy − mean busy, wall − slowest busy, and
    /// the slowest rank's partitioner time.
    split: [f64; 4],
    /// The rebalance points that cost rank 0 the most: over every step, and over the steps
    /// of at least [`BIG_STEP`] elements.
    worst: [Option<Worst>; 2],
    /// Rank 1's elements per busy second over rank 0's, over the last four steps (NaN for
    /// the serial run).
    speed: f64,
}

/// The smallest step for the second worst-point table: below it a flat HSFC takes well under
/// a millisecond, and the ratio measures the latency of the point's one collective (tens to
/// hundreds of µs, a scheduler slice on the loaded core) rather than a partitioner.
const BIG_STEP: u64 = 100_000;

/// The costliest rebalance point of a run (rank 0's `balance.cost`).
#[derive(Debug, Clone, Copy)]
struct Worst {
    step: u64,
    elements: u64,
    /// window, exchange, decision, partitioner, total (seconds; rank 0's `balance.cost`).
    cost: [f64; 5],
    /// The step's partition phase on the rank that spent least in it (`ranks[i].times.
    /// partition`: the rebalance point and the application's centroids), for comparison:
    /// the last rank to arrive at the gather waited for nobody there, but on the loaded core
    /// it may lose the CPU to the competing process (a scheduler slice, some 3 ms).
    last_in: f64,
}

/// The costliest rebalance point among the steps' JSON lines of at least `min_elements`
/// elements, by rank 0's total (`None` without `balance`).
fn worst_of(steps: &[serde_json::Value], min_elements: u64) -> Result<Option<Worst>> {
    let mut worst: Option<Worst> = None;
    for v in steps {
        let elements = v["elements"].as_u64().context("a step without elements")?;
        if elements < min_elements {
            continue;
        }
        let c = &v["balance"]["cost"];
        if c.is_null() {
            continue;
        }
        let f = |k: &str| {
            c[k].as_f64()
                .with_context(|| format!("balance.cost lacks {k}"))
        };
        let cost = [
            f("window_s")?,
            f("exchange_s")?,
            f("decision_s")?,
            f("partition_s")?,
            f("total_s")?,
        ];
        let last_in = (v["ranks"].as_array().context("a step without ranks")?)
            .iter()
            .filter_map(|r| r["times"]["partition"].as_f64())
            .fold(f64::INFINITY, f64::min);
        if !last_in.is_finite() {
            bail!("step {} has no ranks' partition times", v["step"]);
        }
        if worst.is_none_or(|w| cost[4] > w.cost[4]) {
            worst = Some(Worst {
                step: v["step"].as_u64().context("a step without step")?,
                elements,
                cost,
                last_in,
            });
        }
    }
    Ok(worst)
}

/// A run's steps, one JSON value per line.
fn steps_of(jsonl: &Path) -> Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(jsonl).with_context(|| format!("reading {}", jsonl.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .with_context(|| format!("{}: not JSON: {line}", jsonl.display()))
        })
        .collect()
}

/// A step's wall time (rank 0's), its ranks' figures and each rank's busy time: the wall less
/// its time in collectives.
fn busy_of(v: &serde_json::Value) -> Result<(f64, &Vec<serde_json::Value>, Vec<f64>)> {
    let wall = v["wall_s"].as_f64().context("no wall_s")?;
    let ranks = v["ranks"].as_array().context("no ranks")?;
    let busy = ranks
        .iter()
        .map(|r| (wall - r["wait_s"].as_f64().unwrap_or(0.0)).max(0.0))
        .collect();
    Ok((wall, ranks, busy))
}

/// Rank 1's speed over rank 0's in the last four steps: each rank's owned elements over its
/// busy time ([`busy_of`]), summed over those steps. 1 on equal cores without load; with the
/// competing process on core 1, the share of core 0's speed that the loaded rank gets (what
/// a partition should give it).
fn speed_of(steps: &[serde_json::Value]) -> Result<f64> {
    let (mut work, mut busy) = ([0.0f64; 2], [0.0f64; 2]);
    for v in steps.iter().rev().take(4) {
        let (_, ranks, b) = busy_of(v)?;
        for (i, r) in ranks.iter().take(2).enumerate() {
            work[i] += r["owned"].as_f64().context("a rank without owned")?;
            busy[i] += b[i];
        }
    }
    Ok((work[1] / busy[1]) / (work[0] / busy[0]))
}

/// Per-step sums from a run's steps.
fn split_of(steps: &[serde_json::Value]) -> Result<[f64; 4]> {
    let mut s = [0.0; 4];
    for v in steps {
        let (wall, ranks, busy) = busy_of(v)?;
        let mean = busy.iter().sum::<f64>() / busy.len().max(1) as f64;
        let max = busy.iter().copied().fold(0.0, f64::max);
        let part = ranks
            .iter()
            .map(|r| r["times"]["partition"].as_f64().unwrap_or(0.0))
            .fold(0.0, f64::max);
        s[0] += mean;
        s[1] += max - mean;
        s[2] += wall - max;
        s[3] += part;
    }
    Ok(s)
}

fn run_case(bin: &Path, dir: &Path, case: &Case, rep: usize, extra: &[String]) -> Result<Run> {
    let tag = format!("{}-{rep}", case.name.replace([':', ' ', '@'], "_"));
    let summary = dir.join(format!("{tag}.summary.json"));
    let jsonl = dir.join(format!("{tag}.jsonl"));
    let (mut cmd, spinner) = match case.balance {
        Some(balance) => {
            let mut cmd = Command::new(bin);
            cmd.args(["--machine", MACHINE, "--balance", balance]);
            (cmd, None)
        }
        None => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", "0"]).arg(bin);
            (cmd, Some(Spinner::start(1)?))
        }
    };
    cmd.current_dir(crate::project_root())
        .arg("--no-hash")
        .args(case.load)
        .args(extra);
    if spinner.is_none() {
        cmd.arg("--summary-json")
            .arg(&summary)
            .arg("--jsonl")
            .arg(&jsonl);
    }
    let t0 = std::time::Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    let process = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    if spinner.is_some() {
        // The serial run writes no summary: its wall time is the process's.
        return Ok(Run {
            wall: process,
            process,
            rc_ideal: None,
            split: [0.0; 4],
            worst: [None, None],
            speed: f64::NAN,
        });
    }
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&summary)
            .with_context(|| format!("reading {}", summary.display()))?,
    )?;
    let steps = steps_of(&jsonl)?;
    Ok(Run {
        wall: v["wall_s"].as_f64().context("summary without wall_s")?,
        process,
        rc_ideal: v["rc_ideal"].as_f64(),
        split: split_of(&steps)?,
        worst: [worst_of(&steps, 0)?, worst_of(&steps, BIG_STEP)?],
        speed: speed_of(&steps)?,
    })
}

/// Runs the benchmark (`--repeats R`, `--target-vertices N`).
pub fn bench_drum_loop(args: &[String]) -> Result<()> {
    let mut repeats = 3usize;
    let mut extra = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repeats" => {
                repeats = it
                    .next()
                    .context("--repeats needs a value")?
                    .parse()
                    .context("--repeats")?;
                if repeats == 0 {
                    bail!("--repeats must be at least 1");
                }
            }
            "--target-vertices" => {
                extra.push(a.clone());
                extra.push(
                    it.next()
                        .context("--target-vertices needs a value")?
                        .clone(),
                );
            }
            other => bail!(
                "bench drum-loop: unknown flag `{other}` (known: --repeats R, --target-vertices N)"
            ),
        }
    }
    let bin = crate::run_laplace::build(crate::run_laplace::Backend::Threads)?.fem;
    let dir: PathBuf = crate::project_root().join("target/bench-drum-loop");
    std::fs::create_dir_all(&dir)?;
    eprintln!(
        "xtask: load average {} (it counts the benchmark's own competing process)",
        uptime()
    );
    let steal = crate::bench::Steal::start();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); CASES.len()];
    for rep in 0..repeats {
        for (k, case) in CASES.iter().enumerate() {
            let r = run_case(&bin, &dir, case, rep, &extra)?;
            eprintln!(
                "  run {}/{repeats} {:<20} {:.3} s",
                rep + 1,
                case.name,
                r.wall
            );
            runs[k].push(r);
        }
    }
    let med: Vec<f64> = runs
        .iter()
        .map(|r| median(&r.iter().map(|x| x.wall).collect::<Vec<_>>()))
        .collect();
    println!("\nDRUM in the loop, {MACHINE}, 2 thread ranks (cores 0 and 1), medians of {repeats}");
    println!(
        "{:<20} {:>9} {:>9} {:>9}",
        "case", "median s", "min s", "max s"
    );
    for (k, case) in CASES.iter().enumerate() {
        let w: Vec<f64> = runs[k].iter().map(|x| x.wall).collect();
        println!(
            "{:<20} {:>9.3} {:>9.3} {:>9.3}",
            case.name,
            med[k],
            w.iter().copied().fold(f64::INFINITY, f64::min),
            w.iter().copied().fold(0.0, f64::max)
        );
    }
    let rc = 1.0 - med[1] / med[0];
    let rc_ideal = runs[1].first().and_then(|r| r.rc_ideal).unwrap_or(f64::NAN);
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "RC = 1 - monitored/uniform (load from the start) = {rc:.3}   target >= 0.27: {} \
         (goal 0.30: {}); RC_ideal = {rc_ideal:.3}, RC/RC_ideal = {:.2}",
        verdict(rc >= 0.27),
        verdict(rc >= 0.30),
        rc / rc_ideal
    );
    let r12 = med[3] / med[2];
    println!(
        "load from step 12: monitored/static = {r12:.3}   target <= 0.85: {}",
        verdict(r12 <= 0.85)
    );
    let r0 = med[5] / med[4];
    println!(
        "no load: monitored/uniform = {r0:.3}   target <= 1.05: {}",
        verdict(r0 <= 1.05)
    );
    let process = |k: usize| median(&runs[k].iter().map(|x| x.process).collect::<Vec<_>>());
    let rs = process(1) / process(6);
    println!(
        "load from the start, whole processes: monitored {:.3} s / serial on the free core {:.3} s \
         = {rs:.3}   target <= 0.85: {} (goal 0.75, ideal 0.667)",
        process(1),
        process(6),
        verdict(rs <= 0.85)
    );
    // Where the time goes, for the median run of each loaded case.
    println!(
        "\nwhere the time goes (sums over the steps of the median run; busy = wall - time in collectives):"
    );
    println!(
        "{:<20} {:>8} {:>10} {:>10} {:>10} {:>11} {:>12}",
        "case", "wall", "mean busy", "imbalance", "both wait", "partitioner", "speed 1/0"
    );
    for k in 0..6 {
        let mut sorted = runs[k].clone();
        sorted.sort_by(|a, b| a.wall.total_cmp(&b.wall));
        let r = &sorted[sorted.len() / 2];
        let speed = median(&runs[k].iter().map(|x| x.speed).collect::<Vec<_>>());
        println!(
            "{:<20} {:>8.3} {:>10.3} {:>10.3} {:>10.3} {:>11.3} {:>12.2}",
            CASES[k].name, r.wall, r.split[0], r.split[1], r.split[2], r.split[3], speed
        );
    }
    println!(
        "(speed 1/0: rank 1's elements per busy second over rank 0's in the last 4 steps, median \
         of the runs; the machine file rates the cores equal, so 1 without load, and with the \
         load the share of core 0's speed the loaded rank has)"
    );
    let ideal = med[0] * (1.0 - rc_ideal);
    println!(
        "ideal monitored time (t_uniform x (1 - RC_ideal)) = {ideal:.3} s; the monitored run is {:.3} s above it",
        med[1] - ideal
    );
    worst_steps(&dir, &runs)?;
    println!("{}", steal.report());
    println!("(data in {})", dir.display());
    Ok(())
}

/// Per balanced case, the worst rebalance point of its median run against a flat HSFC of as
/// many points as that step has elements (timed here, medians of 5 calls).
fn worst_steps(dir: &Path, runs: &[Vec<Run>]) -> Result<()> {
    let release = crate::release(&["-p", "hsfc-cli", "--bin", "hsfc"])?;
    let hsfc = release.join("hsfc");
    let mut flat: std::collections::BTreeMap<u64, f64> = Default::default();
    println!(
        "\nthe worst rebalance point of each case's median run (ms) against a flat HSFC of as many \
         corner-graded 2-D points (hsfc partition --parts 2, 1 thread, median of 5): rank 0's \
         balance.cost (its exchange includes its wait for the last rank to arrive), and `last \
         in`, the step's partition phase on the rank that spent least in it (with the \
         application's centroids); over every step, then over the steps of at least {BIG_STEP} \
         elements:"
    );
    let big = format!("steps of at least {BIG_STEP} elements");
    for (sel, what) in [(0, "every step"), (1, big.as_str())] {
        println!(
            "{:<20} {:>5} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9}",
            "case",
            "step",
            "elements",
            "window",
            "exchange",
            "decision",
            "partit.",
            "total",
            "last in",
            "flat",
            "ratio",
            "last/flat"
        );
        let (mut worst_ratio, mut worst_last) = (0.0f64, 0.0f64);
        for (k, case) in CASES.iter().enumerate().take(6) {
            let mut sorted = runs[k].clone();
            sorted.sort_by(|a, b| a.wall.total_cmp(&b.wall));
            let Some(w) = sorted[sorted.len() / 2].worst[sel] else {
                continue;
            };
            let f = match flat.get(&w.elements) {
                Some(&f) => f,
                None => {
                    let f = flat_hsfc(&hsfc, dir, w.elements)?;
                    flat.insert(w.elements, f);
                    f
                }
            };
            let (ratio, last) = (w.cost[4] / f, w.last_in / f);
            worst_ratio = worst_ratio.max(ratio);
            worst_last = worst_last.max(last);
            let ms = w.cost.map(|c| c * 1e3);
            println!(
                "{:<20} {:>5} {:>9} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7.2} {:>9.2}",
                case.name,
                w.step,
                w.elements,
                ms[0],
                ms[1],
                ms[2],
                ms[3],
                ms[4],
                w.last_in * 1e3,
                f * 1e3,
                ratio,
                last
            );
        }
        println!(
            "{what}: worst rebalance point / flat HSFC of its elements: {worst_ratio:.2}   target <= 3: {}   (last in / flat: {worst_last:.2})\n",
            if worst_ratio <= 3.0 { "met" } else { "MISSED" }
        );
    }
    Ok(())
}

/// Median seconds of `hsfc partition --parts 2` on `n` corner-graded 2-D points, unit weights.
fn flat_hsfc(hsfc: &Path, dir: &Path, n: u64) -> Result<f64> {
    let file = dir.join(format!("flat-{n}.zpt"));
    if !file.exists() {
        let mut g = Command::new(hsfc);
        g.args([
            "gen",
            "--n",
            &n.to_string(),
            "--dim",
            "2",
            "--dist",
            "graded",
        ])
        .args(["--weights", "unit", "--seed", "12345", "-o"])
        .arg(&file);
        crate::run(g)?;
    }
    let mut cmd = Command::new(hsfc);
    cmd.arg("partition").arg(&file).args([
        "--parts",
        "2",
        "--threads",
        "1",
        "--repeat",
        "5",
        "--json",
    ]);
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).with_context(|| format!("{cmd:?}: not JSON"))?;
    v["time_s"].as_f64().context("hsfc --json lacks time_s")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 1's speed over rank 0's from the last four steps only: elements over the step's
    /// wall less each rank's time in collectives.
    #[test]
    fn speed_is_elements_per_busy_second_over_the_last_four_steps() {
        let step = |wall: f64, w0: f64, w1: f64, o0: u64, o1: u64| {
            serde_json::json!({"wall_s": wall, "ranks": [
                {"owned": o0, "wait_s": w0}, {"owned": o1, "wait_s": w1}]})
        };
        // An early step with the speeds reversed, then four where rank 1 does 60 elements in
        // 0.8 s against rank 0's 100 in 1.0 s: 75 / 100.
        let mut steps = vec![step(1.0, 0.9, 0.0, 10, 1000)];
        steps.extend((0..4).map(|_| step(1.0, 0.0, 0.2, 100, 60)));
        let s = speed_of(&steps).unwrap();
        assert!((s - 0.75).abs() < 1e-12, "{s}");
        assert!(speed_of(&[serde_json::json!({"ranks": []})]).is_err());
    }
}
