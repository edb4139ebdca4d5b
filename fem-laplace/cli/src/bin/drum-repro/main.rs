//! `drum-repro`: the DRUM 2005 experiments (§4, Figs. 8–12), Sinha & Parashar's sensing
//! period and Lan, Taylor & Bryan's gain/cost decision, measured on this host where they fit
//! and simulated at cluster size (`machines/bullpen.xml`'s nodes) by a model calibrated on
//! the measured runs, written as `report.md`, SVG plots and `results.json`.
//! `cargo xtask reproduce` builds and runs it.
//!
//! `DRUM_REPRO_DEBUG=TEXT` simulates only the cases whose `study config variant` contains
//! TEXT and prints each simulated step (elements, repartition, migration, compute, waiting).

mod calib;
mod measured;
mod meshes;
mod report;
mod sim;
mod studies;
mod svg;

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;
use studies::{Case, How, Scale};

#[derive(Debug, Parser)]
#[command(
    name = "drum-repro",
    about = "Reproduce the DRUM 2005 experiments, Sinha-Parashar's sensing study and Lan et al.'s gain/cost study: measured here, simulated at cluster size"
)]
struct Args {
    /// One repeat per measured configuration (instead of 3).
    #[arg(long)]
    quick: bool,
    /// One small configuration per study (4,000 vertices): the end-to-end test.
    #[arg(long, conflicts_with = "quick")]
    tiny: bool,
    /// Where the report goes.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Repeats of each measured configuration (the median is kept); default 3, 1 with
    /// --quick or --tiny.
    #[arg(long)]
    repeats: Option<usize>,
    /// The mesh size (vertices); default 524,500 (PHAML's).
    #[arg(long)]
    target_vertices: Option<usize>,
}

/// One run of a study, as `results.json` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub study: &'static str,
    pub config: String,
    pub variant: String,
    pub mode: &'static str,
    pub ranks: usize,
    pub balance: &'static str,
    pub w_comm: f64,
    pub loads: Vec<String>,
    pub rebalance: String,
    pub sensing: String,
    /// Seconds: the median of the repeats (measured), the model's (simulated).
    pub time_s: f64,
    /// Every repeat's time (measured).
    pub times_s: Vec<f64>,
    /// 1 − t / t_uniform of the same configuration and mode.
    pub rc: Option<f64>,
    /// RC_ideal of the configuration (with the loads of its last step).
    pub rc_ideal: f64,
    /// H_cpu of the processes' speeds (ratings times CPU shares).
    pub h_cpu: f64,
    pub rebalances: usize,
    pub migrated_elements: u64,
    pub migrated_bytes: f64,
    /// Mean per-step imbalance.
    pub imbalance: f64,
    /// Simulated: the slowest rank's compute and communication, summed over the steps.
    pub compute_s: Option<f64>,
    pub comm_s: Option<f64>,
}

/// The simulator against a measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub config: String,
    pub measured_s: f64,
    pub simulated_s: f64,
    pub rel_err: f64,
    /// The run the model was calibrated on (its error says little).
    pub calibration: bool,
}

/// Progress on stderr: a bar redrawn in place on a terminal, else a line per item.
struct Progress {
    total: usize,
    done: usize,
    bar: bool,
    t0: Instant,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            bar: std::io::stderr().is_terminal(),
            t0: Instant::now(),
        }
    }

    fn tick(&mut self, what: &str) {
        self.done += 1;
        let t = self.t0.elapsed().as_secs_f64();
        if self.bar {
            let w = 30;
            let f = w * self.done / self.total.max(1);
            eprint!(
                "\r\x1b[2K[{}{}] {}/{} {:.0}s  {}",
                "#".repeat(f),
                ".".repeat(w - f),
                self.done,
                self.total,
                t,
                what.chars().take(70).collect::<String>()
            );
            if self.done == self.total {
                eprintln!();
            }
        } else {
            eprintln!("[{}/{}] {:.0}s {what}", self.done, self.total, t);
        }
        let _ = std::io::stderr().flush();
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("drum-repro: error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args = Args::parse();
    let scale = if args.tiny {
        Scale::Tiny
    } else if args.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
    let target = args.target_vertices.unwrap_or(scale.target());
    let repeats = args.repeats.unwrap_or(scale.repeats());
    if repeats == 0 {
        bail!("--repeats 0: at least one run per configuration");
    }
    let t0 = Instant::now();
    let out = &args.out;
    let runs_dir = out.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .with_context(|| format!("creating {}", runs_dir.display()))?;
    let fem = measured::fem_laplace()?;
    let host_mflops = measured::host_mflops()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        bail!("this host has {cores} core: the measured runs need 2");
    }

    eprintln!("drum-repro: the adaptive meshes to {target} vertices (serial run)");
    let seq = meshes::sequence(target, |k, v| {
        eprint!("\r  step {k}: {v} vertices");
    })?;
    eprintln!();
    let steps = seq.len();
    let cases = studies::cases(scale, cores, steps);
    let measured_n = cases.iter().filter(|c| c.host_run().is_some()).count();
    eprintln!(
        "drum-repro: {} configurations ({} measured here x {repeats}, {} simulated), {} steps",
        cases.len(),
        measured_n,
        cases.len() - measured_n,
        steps
    );

    // The host machines, written once.
    let mut host_files = std::collections::BTreeMap::new();
    for c in &cases {
        if let How::Measured { ranks } = c.how
            && !host_files.contains_key(&ranks)
        {
            let p = runs_dir.join(format!("host-{ranks}.xml"));
            std::fs::write(&p, measured::host_xml(ranks, host_mflops))
                .with_context(|| format!("writing {}", p.display()))?;
            host_files.insert(ranks, p);
        }
    }

    // Measured runs first (the calibration run is the first of them), then the simulated.
    let mut progress = Progress::new(cases.len());
    let mut measured_runs: Vec<Option<measured::Measured>> = vec![None; cases.len()];
    for (i, c) in cases.iter().enumerate() {
        let Some(h) = c.host_run() else { continue };
        let m = measured::run(
            &fem,
            &host_files[&h.ranks],
            &runs_dir,
            &format!("{}-{i}", c.study),
            &h,
            target,
            repeats,
        )
        .with_context(|| format!("{} {} {}", c.study, c.config, c.variant))?;
        progress.tick(&format!(
            "measured {} | {} | {}: {:.3} s",
            c.study, c.config, c.variant, m.time_s
        ));
        measured_runs[i] = Some(m);
    }
    let calib_i = cases
        .iter()
        .position(|c| {
            c.host_run().is_some_and(|h| h.ranks == 2)
                && c.loads.is_empty()
                && c.sizing == hier_part::drum_loop::Sizing::Uniform
        })
        .context("no dedicated uniform 2-rank run to calibrate on")?;
    let calib_run = measured_runs[calib_i].as_ref().expect("measured");
    let overheads: Vec<f64> = measured_runs
        .iter()
        .flatten()
        .map(|m| m.monitor_overhead)
        .filter(|o| *o > 0.0)
        .collect();
    let overhead = overheads.iter().sum::<f64>() / overheads.len().max(1) as f64;
    let (cuts, p) = sim::equal_cuts(&seq, 2)?;
    let link = calib::host_link().unwrap_or_else(|e| {
        eprintln!("drum-repro: warning: {e:#}; the host link is taken as 2 us + 6 GB/s");
        comm::LinkModel {
            alpha: 2e-6,
            beta: 1.0 / 6e9,
        }
    });
    let mut calib = calib::calibrate(
        &calib_run.steps,
        &seq,
        |k| cuts[k],
        p,
        host_mflops,
        overhead,
        link,
    )
    .context("calibrating the simulator")?;
    // κ: from the measured monitored run with one competitor on core 1 (half its CPU).
    let stall_i = cases.iter().position(|c| {
        c.host_run().is_some_and(|h| h.ranks == 2)
            && c.loads.len() == 1
            && c.loads[0].from == 0
            && c.loads[0].until.is_none()
            && c.loads[0].procs == 1
            && c.sizing == hier_part::drum_loop::Sizing::Monitored
            && c.w_comm == 0.0
    });
    if let Some(i) = stall_i {
        // The simulated time is linear in κ: the κ that gives this run's measured time.
        let m = measured_runs[i].as_ref().expect("measured");
        let cfg = cases[i].sim(host_mflops);
        let probe = 1e-3;
        let t0 = sim::simulate(&seq, &calib, &cfg)?.time_s;
        calib.kappa = probe;
        let t1 = sim::simulate(&seq, &calib, &cfg)?.time_s;
        calib.kappa = if t1 > t0 {
            (probe * (m.time_s - t0) / (t1 - t0)).max(0.0)
        } else {
            0.0
        };
    }
    // Every case simulated (the measured ones on the host's model: the validation).
    let mut records = Vec::new();
    let mut validation = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        if let Ok(only) = std::env::var("DRUM_REPRO_DEBUG")
            && !format!("{} {} {}", c.study, c.config, c.variant).contains(&only)
        {
            continue;
        }
        let cfg = c.sim(host_mflops);
        let s = sim::simulate(&seq, &calib, &cfg)
            .with_context(|| format!("simulating {} {} {}", c.study, c.config, c.variant))?;
        let last = steps - 1;
        let rc_ideal = sim::rc_ideal(&cfg.nodes, &cfg.loads, last);
        let h_cpu = sim::h_cpu(&cfg.nodes, &cfg.loads, last);
        let base = record(c, &cfg, rc_ideal, h_cpu);
        match &measured_runs[i] {
            Some(m) => {
                validation.push(Validation {
                    config: format!("{} | {} | {}", c.study, c.config, c.variant),
                    measured_s: m.time_s,
                    simulated_s: s.time_s,
                    rel_err: (s.time_s - m.time_s) / m.time_s,
                    calibration: i == calib_i || Some(i) == stall_i,
                });
                records.push(Record {
                    time_s: m.time_s,
                    times_s: m.times_s.clone(),
                    rebalances: m.rebalances,
                    migrated_elements: m.migrated_elements,
                    migrated_bytes: m.migrated_bytes,
                    imbalance: m.imbalance,
                    ..base
                });
            }
            None => {
                progress.tick(&format!(
                    "simulated {} | {} | {}: {:.2} s",
                    c.study, c.config, c.variant, s.time_s
                ));
                records.push(Record {
                    time_s: s.time_s,
                    rebalances: s.rebalances,
                    migrated_elements: s.migrated_elements,
                    migrated_bytes: s.migrated_bytes,
                    imbalance: s.imbalance,
                    compute_s: Some(s.compute_s),
                    comm_s: Some(s.comm_s),
                    ..base
                });
            }
        }
    }
    report::relative_changes(&mut records);
    let setup = report::Setup {
        scale: format!("{scale:?}").to_lowercase(),
        target_vertices: target,
        vertices: seq.last().map_or(0, |m| m.vertices),
        steps,
        repeats,
        cores,
        host_mflops,
        calibration: calib.clone(),
        seconds: t0.elapsed().as_secs_f64(),
    };
    report::write(out, &setup, &records, &validation)?;
    eprintln!(
        "drum-repro: {} runs in {:.0} s; report in {}",
        records.len(),
        t0.elapsed().as_secs_f64(),
        out.join("report.md").display()
    );
    Ok(())
}

fn record(c: &Case, cfg: &sim::SimConfig, rc_ideal: f64, h_cpu: f64) -> Record {
    Record {
        study: c.study,
        config: c.config.clone(),
        variant: c.variant.clone(),
        mode: c.mode(),
        ranks: cfg.nodes.iter().map(|n| n.procs).sum(),
        balance: c.sizing.name(),
        w_comm: c.w_comm,
        loads: c.loads.iter().map(measured::load_arg).collect(),
        rebalance: c.rebalance_name().into(),
        sensing: c.sensing_name(),
        time_s: 0.0,
        times_s: Vec::new(),
        rc: None,
        rc_ideal,
        h_cpu,
        rebalances: 0,
        migrated_elements: 0,
        migrated_bytes: 0.0,
        imbalance: 0.0,
        compute_s: None,
        comm_s: None,
    }
}
