//! `laplace-bench`: the PHAML-size adaptive run in one process and over R ranks (threads),
//! in one invocation: medians of whole-run times, ratios to the serial run, where the time
//! of the distributed run goes (phases, waiting, migration), and peak heap per rank. Run it
//! through `cargo xtask bench laplace`.
//!
//! Times are the method's (mark, refine, partition, migration, set-up, assembly, solve,
//! estimate); the error against the exact solution and the mesh hash are diagnostics and
//! are off. The serial run and R = 1 are pinned to CPU 0; rank r to CPU r mod #CPUs. The
//! runs go round-robin (each repeat: the serial run, then each rank count), so that a drift of
//! the machine's speed hits every row alike; beside the ratio of the medians, the median of
//! each repeat's own ratio.

use anyhow::{Context, Result};
use clap::Parser;
use comm::{ThreadComm, ThreadOptions};
use fem_laplace::dist::{Balancer, DistConfig, DistStepReport, Phase, RankRun, RankTimes};
use fem_laplace::{AdaptConfig, Adaptive, CornerSingularity};
use std::time::Instant;

#[global_allocator]
static ALLOC: cli_support::alloc::Counting = cli_support::alloc::Counting;

/// The PHAML-size adaptive run in one process and over R thread ranks: medians of whole-run
/// times, ratios to the serial run, where the time goes, peak heap per rank.
#[derive(Debug, Parser)]
#[command(name = "laplace-bench")]
struct Opts {
    /// Whole runs of each configuration (the medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    repeats: u64,
    /// The mesh size (vertices); PHAML's by default (at most 20,000,000).
    #[arg(long, default_value_t = fem_laplace::PHAML_TARGET_VERTICES, value_parser =
          cli_support::limits::count(0, fem_laplace::memory::MAX_TARGET_VERTICES, "vertices"))]
    target_vertices: usize,
    /// Rank counts to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4",
          value_parser = clap::value_parser!(u64).range(1..=cli_support::limits::DEFAULT_MAX_RANKS as u64))]
    ranks: Vec<u64>,
}

/// The median of `v` (one definition for the workspace: `cli_support::median`).
fn median(mut v: Vec<f64>) -> f64 {
    cli_support::median(&mut v)
}

/// The CPUs of this host (read once, before the bench pins itself).
fn cpus() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Lets the calling thread run on every CPU again (the ranks pin themselves).
fn unpin() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it, every CPU
    // of the machine (fewer than CPU_SETSIZE on the hosts this bench runs on).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..cpus() {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One whole serial run: method seconds and peak heap; the phase sums in `phases`
/// (mark, refine without marking, assemble, solve, estimate).
fn serial(cfg: AdaptConfig, phases: &mut [f64; 5]) -> Result<(f64, isize)> {
    let exact = CornerSingularity;
    let base = cli_support::alloc::reset_peak();
    let t0 = Instant::now();
    let mut run = Adaptive::new(&exact, cfg)?;
    let mut method = 0.0;
    *phases = [0.0; 5];
    while let Some(r) = run.step()? {
        method += r.times.method();
        let t = r.times;
        for (p, x) in
            phases
                .iter_mut()
                .zip([t.mark, t.refine - t.mark, t.assemble, t.solve, t.estimate])
        {
            *p += x;
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    drop(run);
    let _ = wall;
    Ok((method, cli_support::alloc::peak() - base))
}

/// One distributed run on `r` thread ranks: the sum of step walls on rank 0, rank 0's
/// reports, the process's peak heap (all ranks at the worst moment) and each rank's peak.
struct DistRun {
    wall: f64,
    reports: Vec<DistStepReport>,
    peak: isize,
    rank_peaks: Vec<isize>,
}

impl DistRun {
    /// The run's rank count.
    fn ranks(&self) -> usize {
        self.rank_peaks.len()
    }
}

fn dist(cfg: AdaptConfig, r: usize) -> Result<DistRun> {
    let exact = CornerSingularity;
    let base = cli_support::alloc::reset_peak();
    let n = cpus();
    let opts = ThreadOptions {
        cpus: Some((0..r).map(|k| vec![k % n]).collect()),
        ..Default::default()
    };
    let out = ThreadComm::run(
        r,
        &opts,
        |comm| -> Result<(Vec<DistStepReport>, isize), fem_laplace::FemError> {
            cli_support::alloc::reset_thread();
            let mut dc = DistConfig::new(cfg);
            dc.mesh_hash = false;
            let mut run = RankRun::new(comm, &exact, dc, Balancer::flat())?;
            let mut reports = Vec::new();
            while let Some(rep) = run.step()? {
                reports.push(rep);
            }
            drop(run);
            Ok((reports, cli_support::alloc::thread_peak()))
        },
    )
    .context("the ranks")?;
    let peak = cli_support::alloc::peak() - base;
    let mut reports = Vec::new();
    let mut rank_peaks = Vec::new();
    for (k, x) in out.into_iter().enumerate() {
        let (rep, p) = x?;
        if k == 0 {
            reports = rep;
        }
        rank_peaks.push(p);
    }
    let wall = reports.iter().map(|x| x.wall_s).sum();
    Ok(DistRun {
        wall,
        reports,
        peak,
        rank_peaks,
    })
}

fn main() -> std::process::ExitCode {
    cli_support::main(run)
}

fn run() -> Result<()> {
    let tuned = fem_laplace::memory::keep_freed_memory();
    let o = Opts::parse();
    let cfg = AdaptConfig {
        target_vertices: o.target_vertices,
        errors: false,
        ..AdaptConfig::default()
    };
    println!(
        "laplace-bench: corner problem, double marking, target {} vertices, medians of {} runs, {} CPUs",
        o.target_vertices,
        o.repeats,
        cpus()
    );
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at start: {}", l.trim());
    }
    println!(
        "allocator: freed blocks {} (fem_laplace::memory::keep_freed_memory)",
        if tuned {
            "kept in the process"
        } else {
            "returned to the system (not glibc)"
        }
    );
    let ceiling = print_bandwidth(&o.ranks);
    // Warm-up (page cache, allocator), then the runs round-robin: each repeat times the
    // serial run and then every rank count, so that the machine's drift (on a shared virtual
    // machine its speed moves by tens of percent from minute to minute) hits every row alike.
    cpus();
    let pinned = cli_support::pin_thread(0);
    let mut phases = [0.0; 5];
    serial(cfg, &mut phases)?;
    unpin();
    let ranks: Vec<usize> = o.ranks.iter().map(|&r| r as usize).collect();
    for &r in &ranks {
        dist(cfg, r)?;
    }
    let mut s_time = Vec::new();
    let mut s_peak = 0isize;
    let mut runs: Vec<Vec<DistRun>> = ranks.iter().map(|_| Vec::new()).collect();
    for _ in 0..o.repeats {
        cli_support::pin_thread(0);
        let (t, p) = serial(cfg, &mut phases)?;
        unpin();
        s_time.push(t);
        s_peak = s_peak.max(p);
        for (i, &r) in ranks.iter().enumerate() {
            runs[i].push(dist(cfg, r)?);
        }
    }
    let ts = median(s_time.clone());
    let vertices = o.target_vertices.max(1) as f64;
    println!(
        "\nserial: {:.3} s (runs {:.3}–{:.3}){}, peak heap {:.1} MB ({:.0} bytes/vertex)",
        ts,
        s_time.iter().copied().fold(f64::INFINITY, f64::min),
        s_time.iter().copied().fold(0.0, f64::max),
        if pinned { ", CPU 0" } else { "" },
        s_peak as f64 / 1e6,
        s_peak as f64 / vertices
    );
    println!(
        "serial phases (s, the last run): mark {:.3}, refine {:.3}, assemble {:.3}, solve {:.3}, estimate {:.3}",
        phases[0], phases[1], phases[2], phases[3], phases[4]
    );
    println!(
        "\n{:>5} {:>9} {:>9} {:>9} {:>11} {:>11} {:>9} {:>12} {:>10} {:>12} {:>10}",
        "ranks",
        "time s",
        "vs serial",
        "speed-up",
        "wait s max",
        "moved elem",
        "moved MB",
        "sum peak MB",
        "sum/serial",
        "max rank MB",
        "calls/step"
    );
    let mut targets: Vec<String> = Vec::new();
    let mut phase_rows = Vec::new();
    let mut scaling = Vec::new();
    for (&r, rr) in ranks.iter().zip(runs) {
        scaling.push((r, Scaling::of(&rr)));
        let times: Vec<f64> = rr.iter().map(|d| d.wall).collect();
        // Each repeat's serial time over its own rank run (the same minute of the machine).
        let paired = median(s_time.iter().zip(&times).map(|(s, t)| s / t).collect());
        let peak = rr.iter().map(|d| d.peak).max().unwrap_or(0);
        let rank_peak_sum = (rr.iter())
            .map(|d| d.rank_peaks.iter().sum())
            .max()
            .unwrap_or(0);
        let last = rr.into_iter().last();
        let t = median(times);
        let d = last.context("at least one run")?;
        let wait: f64 = (0..r)
            .map(|k| d.reports.iter().map(|x| x.ranks[k].wait_s).sum::<f64>())
            .fold(0.0, f64::max);
        let moved: u64 = d.reports.iter().map(|x| x.migration.elements).sum();
        let bytes: u64 = d.reports.iter().map(|x| x.migration.bytes).sum();
        let calls = calls_per_step(&d.reports, 5);
        println!(
            "{:>5} {:>8.3} {:>9.3} {:>8.2} {:>10.3} {:>10} {:>8.2} {:>9.1} {:>9.2} {:>10.1} {:>9.2} {:>10.1}",
            r,
            t,
            t / ts,
            ts / t,
            wait,
            moved,
            bytes as f64 / 1e6,
            peak as f64 / 1e6,
            peak as f64 / s_peak as f64,
            rank_peak_sum as f64 / 1e6,
            rank_peak_sum as f64 / s_peak as f64,
            calls
        );
        match r {
            1 => targets.push(format!(
                "R = 1: {:.3}x the serial run (target <= 1.05; median of the repeats' own \
                 ratios {:.3})",
                t / ts,
                1.0 / paired
            )),
            2 => targets.push(format!(
                "2 ranks: {:.2}x faster than the serial run (target >= 1.7, goal 1.85; median of \
                 the repeats' own ratios {paired:.2}); {calls:.1} collectives per rank and step \
                 over the last 5 steps (target <= 30, goal 15)",
                ts / t
            )),
            _ => {}
        }
        // Where the time goes: per phase, the largest rank's sum over the steps.
        let mut per = vec![RankTimes::default(); r];
        for x in &d.reports {
            for (k, rk) in x.ranks.iter().enumerate() {
                let a = &mut per[k];
                let b = &rk.times;
                a.mark += b.mark;
                a.refine += b.refine;
                a.partition += b.partition;
                a.migrate += b.migrate;
                a.setup += b.setup;
                a.assemble += b.assemble;
                a.solve += b.solve;
                a.estimate += b.estimate;
            }
        }
        // Of which inside the communicator (mostly waiting for the other ranks), per phase.
        let mut waits = vec![[0.0f64; 8]; r];
        for x in &d.reports {
            for (k, rk) in x.ranks.iter().enumerate() {
                for (i, p) in WAIT_PHASES.iter().enumerate() {
                    waits[k][i] += rk.phases.get(*p).wait_us as f64 * 1e-6;
                }
            }
        }
        phase_rows.push((r, per, waits));
    }
    for line in &targets {
        println!("{line}");
    }
    println!("\nwhere the time goes (seconds over the run, per rank; the last run of each row):");
    println!(
        "{:>5} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>8}",
        "ranks",
        "rank",
        "mark",
        "refine",
        "part.",
        "migr.",
        "setup",
        "assemble",
        "solve",
        "estimate"
    );
    for (r, per, waits) in &phase_rows {
        for (k, (p, w)) in per.iter().zip(waits).enumerate() {
            println!(
                "{:>5} {:>5} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>8.3} {:>7.3} {:>8.3}",
                r,
                k,
                p.mark,
                p.refine,
                p.partition,
                p.migrate,
                p.setup,
                p.assemble,
                p.solve,
                p.estimate
            );
            if *r > 1 {
                println!(
                    "{:>5} {:>5} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>8.3} {:>7.3} {:>8.3}",
                    "", "wait", w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]
                );
            }
        }
    }
    println!(
        "(`wait`: the part of each phase spent inside the communicator's calls, mostly waiting \
         for the other ranks)"
    );
    print_scaling(&scaling, ceiling);
    Ok(())
}

/// Measures and prints the host's triad bandwidth on CPU 0 and, when a rank count above 1 is
/// asked for and the host has two CPUs, on CPUs 0 and 1 together
/// ([`cli_support::bandwidth::ceiling`], [`cli_support::bandwidth::ROUNDS`] rounds); returns
/// their ratio (the most a phase that streams memory can gain from a second rank here), if
/// measured.
fn print_bandwidth(ranks: &[u64]) -> Option<f64> {
    let two_cpus = cpus() >= 2 && ranks.iter().any(|&r| r > 1);
    let c = cli_support::bandwidth::ceiling(cli_support::bandwidth::ROUNDS, two_cpus);
    println!("{}", c.describe());
    c.ratio()
}

/// The phases of [`Scaling`], in order, with the names the bench prints.
const SCALING_PHASES: [&str; 8] = [
    "mark",
    "refine",
    "partition",
    "migrate",
    "setup",
    "assemble",
    "solve",
    "estimate",
];

/// Per phase ([`SCALING_PHASES`]), the median over a row's repeats of the slowest rank's time:
/// summed over the run, and at the last step; and the last step's method time.
#[derive(Debug, Clone, Copy)]
struct Scaling {
    run: [f64; 8],
    last: [f64; 8],
    last_step: f64,
}

impl Scaling {
    fn of(runs: &[DistRun]) -> Scaling {
        let phases = |t: &RankTimes| {
            [
                t.mark,
                t.refine,
                t.partition,
                t.migrate,
                t.setup,
                t.assemble,
                t.solve,
                t.estimate,
            ]
        };
        let slowest = |rep: &DistStepReport, i: usize| {
            (rep.ranks.iter())
                .map(|k| phases(&k.times)[i])
                .fold(0.0, f64::max)
        };
        let mut run = [0.0; 8];
        let mut last = [0.0; 8];
        for i in 0..8 {
            let per_run = |d: &DistRun| {
                let n = d.ranks();
                (0..n)
                    .map(|k| {
                        (d.reports.iter())
                            .map(|x| phases(&x.ranks[k].times)[i])
                            .sum::<f64>()
                    })
                    .fold(0.0, f64::max)
            };
            run[i] = median(runs.iter().map(per_run).collect());
            last[i] = median(
                (runs.iter())
                    .filter_map(|d| d.reports.last().map(|x| slowest(x, i)))
                    .collect(),
            );
        }
        let last_step = median(
            (runs.iter())
                .filter_map(|d| d.reports.last().map(|x| x.wall_s))
                .collect(),
        );
        Scaling {
            run,
            last,
            last_step,
        }
    }
}

/// Each rank count's phase speed-ups over R = 1 (when it ran), over the run and at the last
/// step, beside the host's triad ceiling; and the last step's share of set-up, partition and
/// migration (issue 20: each of the method's phases >= 1.6x on 2 ranks at the last step,
/// set-up + partition + migration <= 10 % of the step).
fn print_scaling(rows: &[(usize, Scaling)], ceiling: Option<f64>) {
    let Some(one) = rows.iter().find(|(r, _)| *r == 1).map(|x| x.1) else {
        return;
    };
    println!(
        "\nphase speed-up over R = 1 (the slowest rank; medians of the repeats), over the run / \
         at the last step{}:",
        ceiling.map_or(String::new(), |c| format!(
            "; this host's triad ceiling for a second rank: {c:.2}"
        ))
    );
    let shown = [0usize, 1, 5, 6, 7];
    print!("{:>5}", "ranks");
    for &i in &shown {
        print!(" {:>15}", SCALING_PHASES[i]);
    }
    println!(" {:>22}", "setup+part.+migr. share");
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    for (r, s) in rows.iter().filter(|(r, _)| *r > 1) {
        print!("{r:>5}");
        for &i in &shown {
            print!(
                " {:>7.2} / {:>5.2}",
                ratio(one.run[i], s.run[i]),
                ratio(one.last[i], s.last[i])
            );
        }
        let overhead = s.last[2] + s.last[3] + s.last[4];
        println!(
            " {:>21.1} %",
            100.0 * overhead / s.last_step.max(f64::MIN_POSITIVE)
        );
    }
    println!(
        "(targets, issue 20: each phase >= 1.6 on 2 ranks at the last step; set-up + partition \
         + migration <= 10 % of the step. The error diagnostics are off in this bench.)"
    );
}

/// The calls into the communicator per rank and step over the last `n` steps of `reports`:
/// each step's most over the ranks, averaged.
fn calls_per_step(reports: &[DistStepReport], n: usize) -> f64 {
    let last = &reports[reports.len().saturating_sub(n)..];
    let most = |x: &DistStepReport| x.ranks.iter().map(|k| k.collectives).max().unwrap_or(0);
    last.iter().map(most).sum::<u64>() as f64 / last.len().max(1) as f64
}

/// The phases of the table, in its column order: the step's phases up to the estimate.
const WAIT_PHASES: &[Phase] = Phase::ALL.split_at(8).0;
