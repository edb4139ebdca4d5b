//! The reproduction of the papers' experiments: the DRUM 2005 experiments (§4, Figs. 8–12),
//! Sinha & Parashar's sensing period, Lan, Taylor & Bryan's gain/cost decision and Watts,
//! Rieffel & Taylor's four ways to balance (`watts`: measured only), measured on
//! this host where they fit and simulated at cluster size (`machines/bullpen.xml`'s nodes) by
//! a model calibrated on the measured runs, written as `report.md`, SVG plots and
//! `results.json`. The binary `drum-repro` is a thin front (its flags become [`Options`]);
//! `cargo xtask reproduce` builds and runs it.
//!
//! The pieces, each with its own tests: the studies' configurations (`studies`), the
//! measured runs of the `fem-laplace` binary with pinned thread ranks and real competing
//! processes (`measured`), the serial run's meshes of every step (`meshes`), the calibration
//! of per-element costs, waiting, halo and migration bytes (`calib`), the simulator with
//! `hier-part`'s real partitions and the real policy (`sim`), and the report with verdicts
//! computed from the figures (`report`, `svg`).
//!
//! `DRUM_REPRO_DEBUG=TEXT` simulates only the cases whose `study config variant` contains
//! TEXT and prints each simulated step (elements, repartition, migration, compute, waiting).
//! `DRUM_REPRO_REUSE=DIR` reads the measured runs' files from `DIR` (an earlier
//! reproduction's `runs/`, of the same scale and repeats) instead of running them again:
//! the calibration, the simulations and the report are made afresh from them.
//!
//! ```no_run
//! use repro::{Options, Scale};
//! struct Quiet;
//! impl repro::Progress for Quiet {
//!     fn message(&mut self, _text: &str) {}
//!     fn item(&mut self, _done: usize, _total: usize, _what: &str) {}
//! }
//! let opts = Options::new(Scale::Tiny, "report".into());
//! repro::run(&opts, &mut Quiet).unwrap();
//! ```
#![deny(missing_docs)]

mod calib;
mod error;
mod measured;
mod meshes;
mod output;
mod report;
mod samr;
mod sim;
mod studies;
mod svg;
mod vcluster;
mod watts;

pub use error::{Error, Result};
pub use studies::Scale;

use error::{Context, bail};
use output::{Record, Validation, write_whole};
use std::path::PathBuf;
use std::time::Instant;
use studies::{Case, How};

/// What to reproduce and where the report goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// How much to run.
    pub scale: Scale,
    /// Where the report goes (`report.md`, `results.json`, plots, `runs/`).
    pub out: PathBuf,
    /// Repeats of each measured configuration (the median is kept); `None`: the scale's.
    pub repeats: Option<usize>,
    /// The mesh size (vertices); `None`: the scale's (PHAML's 524,500, or 4,000 when tiny).
    pub target_vertices: Option<usize>,
    /// Experiment 2 measured on the namespace cluster: runs made by `cargo xtask reproduce`,
    /// or why it could not make them.
    pub net: NetStudy,
    /// Lan et al.'s study measured on the namespace cluster of `machines/vcluster-sites.xml`
    /// (`parallel/` and `distributed/`, each with `run.json` and `steps.jsonl`), or why not.
    pub lan_net: NetStudy,
}

/// The runs of experiment 2 on a network (`cargo xtask vcluster`), which this library does
/// not make: xtask brings the namespaces up, runs `fem-laplace` under `mpirun` across them
/// and passes the directory on.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum NetStudy {
    /// Nothing was said: the report says the study was not run.
    #[default]
    NotAsked,
    /// It could not run here, and why (not root, no iproute2, …).
    Skipped(String),
    /// One subdirectory per run under this directory, each with `run.json` (`balance`,
    /// `w_comm`, `flow_on`) and the run's `summary.json`.
    Runs(PathBuf),
}

impl Options {
    /// The scale's defaults, written to `out`.
    pub fn new(scale: Scale, out: PathBuf) -> Options {
        Options {
            scale,
            out,
            repeats: None,
            target_vertices: None,
            net: NetStudy::NotAsked,
            lan_net: NetStudy::NotAsked,
        }
    }
}

/// Where a reproduction reports what it is doing (the binary draws a bar on a terminal).
pub trait Progress {
    /// A line of news (a phase starts, a warning).
    fn message(&mut self, text: &str);
    /// Item `done` of `total` (a configuration measured or simulated) finished.
    fn item(&mut self, done: usize, total: usize, what: &str);
}

/// Runs the reproduction: the serial meshes, the measured configurations, the calibration,
/// every configuration simulated (the measured ones too: the validation), then the report in
/// `opts.out`. The output is whole or absent: it is written beside `opts.out` and moved into
/// place only when the report is complete; on an error nothing new is left in `opts.out`.
pub fn run(opts: &Options, progress: &mut dyn Progress) -> Result<()> {
    if opts.repeats == Some(0) {
        bail!("--repeats 0: at least one run per configuration");
    }
    let stage = output::Staging::new(&opts.out)?;
    let runs = run_into(opts, stage.dir(), progress)?;
    stage.commit()?;
    progress.message(&format!(
        "drum-repro: {runs} runs; report in {}",
        opts.out.join("report.md").display()
    ));
    Ok(())
}

/// [`run`] writing into `out` (the staging directory); returns the number of records.
fn run_into(opts: &Options, out: &std::path::Path, progress: &mut dyn Progress) -> Result<usize> {
    let scale = opts.scale;
    let target = opts.target_vertices.unwrap_or(scale.target());
    let repeats = opts.repeats.unwrap_or(scale.repeats());
    let t0 = Instant::now();
    let runs_dir = out.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .with_context(|| format!("creating {}", runs_dir.display()))?;
    let fem = measured::fem_laplace()?;
    let host_mflops = measured::host_mflops()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        bail!("this host has {cores} core: the measured runs need 2");
    }

    progress.message(&format!(
        "drum-repro: the adaptive meshes to {target} vertices (serial run)"
    ));
    let seq = meshes::sequence(target, |k, v| {
        progress.message(&format!("  step {k}: {v} vertices"));
    })?;
    let steps = seq.len();
    let cases = studies::cases(scale, cores, steps);
    let measured_n = cases.iter().filter(|c| c.host_run().is_some()).count();
    progress.message(&format!(
        "drum-repro: {} configurations ({} measured here x {repeats}, {} simulated), {} steps",
        cases.len(),
        measured_n,
        cases.len() - measured_n,
        steps
    ));
    let host = Host {
        fem,
        runs_dir,
        mflops: host_mflops,
        target,
        repeats,
    };
    let mut items = Items {
        total: cases.len(),
        done: 0,
        progress,
    };
    let measured_runs = measure_all(&cases, &host, &mut items)?;
    let cal = calibrate(&cases, &measured_runs, &seq, host_mflops, items.progress)?;
    let (mut records, validation) =
        simulate_all(&cases, &measured_runs, &seq, &cal, host_mflops, &mut items)?;
    let net = match &opts.net {
        NetStudy::Runs(dir) => {
            let runs = vcluster::read_runs(dir).context("the vcluster runs of experiment 2")?;
            records.extend(vcluster::records(&runs));
            report::Net::Runs(runs)
        }
        NetStudy::Skipped(why) => report::Net::Skipped(why.clone()),
        NetStudy::NotAsked => report::Net::NotAsked,
    };
    report::relative_changes(&mut records);
    items
        .progress
        .message("drum-repro: the SAMR studies (Sinha & Parashar, Lan et al.)");
    let mut samr_records =
        samr::run_all(scale, |what| items.progress.message(&format!("  {what}")))?;
    if let NetStudy::Runs(dir) = &opts.lan_net {
        samr_records.extend(
            samr::read_vcluster_lan(dir).context("the vcluster runs of Lan et al.'s study")?,
        );
    }
    items.progress.message(
        "drum-repro: Watts, Rieffel & Taylor's four cases and incremental transfer (measured)",
    );
    let watts_runs = watts::run_all(
        &watts::Setup {
            fem: &host.fem,
            dir: &host.runs_dir,
            mflops: host_mflops,
            scale,
            target: watts::target(scale, target),
            repeats,
            steps,
        },
        |what| items.progress.message(&format!("  {what}")),
    )?;
    let setup = report::Setup {
        scale: format!("{scale:?}").to_lowercase(),
        target_vertices: target,
        vertices: seq.last().map_or(0, |m| m.vertices),
        steps,
        repeats,
        cores,
        host_mflops,
        calibration: cal.calib.clone(),
        seconds: t0.elapsed().as_secs_f64(),
    };
    report::write(
        out,
        &setup,
        &records,
        &validation,
        &report::Nets {
            exp2: &net,
            lan: &opts.lan_net,
        },
        &samr_records,
        &watts_runs,
    )?;
    items.progress.message(&format!(
        "drum-repro: {} runs in {:.0} s",
        records.len(),
        t0.elapsed().as_secs_f64()
    ));
    Ok(records.len())
}

/// What the measured runs share: the binary, where their files go, the host's rating, the
/// mesh size and the repeats.
struct Host {
    fem: PathBuf,
    runs_dir: PathBuf,
    mflops: f64,
    target: usize,
    repeats: usize,
}

/// Counts finished configurations for the progress report.
struct Items<'p> {
    total: usize,
    done: usize,
    progress: &'p mut dyn Progress,
}

impl Items<'_> {
    fn tick(&mut self, what: &str) {
        self.done += 1;
        self.progress.item(self.done, self.total, what);
    }
}

/// Runs every configuration that fits this host (the calibration run is the first of them);
/// the host machine files are written once per rank count.
fn measure_all(
    cases: &[Case],
    host: &Host,
    items: &mut Items<'_>,
) -> Result<Vec<Option<measured::Measured>>> {
    let mut host_files = std::collections::BTreeMap::new();
    for c in cases {
        if let How::Measured { ranks } = c.how
            && !host_files.contains_key(&ranks)
        {
            let p = host.runs_dir.join(format!("host-{ranks}.xml"));
            write_whole(&p, measured::host_xml(ranks, host.mflops))?;
            host_files.insert(ranks, p);
        }
    }
    let mut runs: Vec<Option<measured::Measured>> = vec![None; cases.len()];
    for (i, c) in cases.iter().enumerate() {
        let Some(h) = c.host_run() else { continue };
        let m = measured::run(
            &host.fem,
            &host_files[&h.ranks],
            &host.runs_dir,
            &format!("{}-{i}", c.study),
            &h,
            host.target,
            host.repeats,
        )
        .with_context(|| format!("{} {} {}", c.study, c.config, c.variant))?;
        items.tick(&format!(
            "measured {} | {} | {}: {:.3} s",
            c.study, c.config, c.variant, m.time_s
        ));
        runs[i] = Some(m);
    }
    Ok(runs)
}

/// The simulator's calibration and which measured runs it was fitted on.
struct Calibrated {
    calib: calib::Calib,
    /// The dedicated 2-rank runs (per-element costs, waiting, bytes), uniform or DRUM.
    calib_runs: Vec<usize>,
    /// The monitored run with one competitor on core 1 (κ), if the scale has it.
    stall_i: Option<usize>,
}

/// Whether each rank of a measured 2-rank case had its core to itself at each step.
fn free_cores(c: &Case, steps: usize) -> Vec<Vec<bool>> {
    (0..steps)
        .map(|k| {
            (0..2)
                .map(|r| !c.loads.iter().any(|l| l.rank == r && l.active_at(k)))
                .collect()
        })
        .collect()
}

/// Calibrates the simulator on the dedicated 2-rank runs (each step's costs the median over
/// them), fits the migration's CPU per element on every measured step that moved many
/// elements, then fits κ (the stall of a rank sharing its core) so that the loaded monitored
/// run's simulated time equals its measured time (the simulated time is linear in κ).
fn calibrate(
    cases: &[Case],
    runs: &[Option<measured::Measured>],
    seq: &[meshes::StepMesh],
    host_mflops: f64,
    progress: &mut dyn Progress,
) -> Result<Calibrated> {
    let two = |c: &Case| c.host_run().is_some_and(|h| h.ranks == 2);
    let calib_runs: Vec<usize> = (0..cases.len())
        .filter(|&i| two(&cases[i]) && cases[i].loads.is_empty() && runs[i].is_some())
        .collect();
    if calib_runs.is_empty() {
        bail!("no dedicated 2-rank run to calibrate on");
    }
    let cal_steps: Vec<&[serde_json::Value]> = calib_runs
        .iter()
        .map(|&i| runs[i].as_ref().expect("measured").steps.as_slice())
        .collect();
    let overheads: Vec<f64> = runs
        .iter()
        .flatten()
        .map(|m| m.monitor_overhead)
        .filter(|o| *o > 0.0)
        .collect();
    let overhead = overheads.iter().sum::<f64>() / overheads.len().max(1) as f64;
    let (cuts, p) = sim::equal_cuts(seq, 2)?;
    let link = calib::host_link().unwrap_or_else(|e| {
        progress.message(&format!(
            "drum-repro: warning: {e}; the host link is taken as 2 us + 6 GB/s"
        ));
        comm::LinkModel {
            alpha: 2e-6,
            beta: 1.0 / 6e9,
        }
    });
    let mut calib = calib::calibrate(&cal_steps, seq, |k| cuts[k], p, host_mflops, overhead, link)
        .context("calibrating the simulator")?;
    let moving: Vec<(&[serde_json::Value], Vec<Vec<bool>>)> = (0..cases.len())
        .filter(|&i| two(&cases[i]))
        .filter_map(|i| {
            let m = runs[i].as_ref()?;
            Some((m.steps.as_slice(), free_cores(&cases[i], m.steps.len())))
        })
        .collect();
    let (c_move, move_samples) =
        calib::migration_cost(&cal_steps, &moving).context("the migration's cost")?;
    calib.c_move = c_move;
    calib.c_move_samples = move_samples;
    let stall_i = cases.iter().position(|c| {
        two(c)
            && c.loads.len() == 1
            && c.loads[0].from == 0
            && c.loads[0].until.is_none()
            && c.loads[0].procs == 1
            && c.sizing == drum_loop::Sizing::Monitored
            && c.w_comm == 0.0
    });
    if let Some(i) = stall_i {
        let m = runs[i].as_ref().expect("measured");
        let cfg = cases[i].sim(host_mflops);
        let probe = 1e-3;
        let t0 = sim::simulate(seq, &calib, &cfg)?.time_s;
        calib.kappa = probe;
        let t1 = sim::simulate(seq, &calib, &cfg)?.time_s;
        calib.kappa = if t1 > t0 {
            (probe * (m.time_s - t0) / (t1 - t0)).max(0.0)
        } else {
            0.0
        };
    }
    Ok(Calibrated {
        calib,
        calib_runs,
        stall_i,
    })
}

/// Every case simulated; a measured case keeps its measured figures in the record and adds
/// a row to the validation (simulated against measured).
fn simulate_all(
    cases: &[Case],
    runs: &[Option<measured::Measured>],
    seq: &[meshes::StepMesh],
    cal: &Calibrated,
    host_mflops: f64,
    items: &mut Items<'_>,
) -> Result<(Vec<Record>, Vec<Validation>)> {
    let steps = seq.len();
    let mut records = Vec::new();
    let mut validation = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        if let Ok(only) = std::env::var("DRUM_REPRO_DEBUG")
            && !format!("{} {} {}", c.study, c.config, c.variant).contains(&only)
        {
            continue;
        }
        let cfg = c.sim(host_mflops);
        let s = sim::simulate(seq, &cal.calib, &cfg)
            .with_context(|| format!("simulating {} {} {}", c.study, c.config, c.variant))?;
        let last = steps - 1;
        let rc_ideal = sim::rc_ideal(&cfg.nodes, &cfg.loads, last);
        let h_cpu = sim::h_cpu(&cfg.nodes, &cfg.loads, last);
        let base = record(c, &cfg, rc_ideal, h_cpu);
        match &runs[i] {
            Some(m) => {
                let mut v = Validation {
                    config: format!("{} | {} | {}", c.study, c.config, c.variant),
                    measured_s: m.time_s,
                    simulated_s: s.time_s,
                    rel_err: (s.time_s - m.time_s) / m.time_s,
                    calibration: cal.calib_runs.contains(&i) || Some(i) == cal.stall_i,
                    spread_s: (
                        m.times_s.first().copied().unwrap_or(m.time_s),
                        m.times_s.last().copied().unwrap_or(m.time_s),
                    ),
                    shared: calib::effective_shares(&m.steps, &cal.calib, |k| {
                        sim::rank_shares(&cfg, k)
                    })
                    .with_context(|| format!("{} {} {}", c.study, c.config, c.variant))?,
                    // Where the sensing falls matters when a load starts or moves.
                    sensed_at: (c.sizing == drum_loop::Sizing::Monitored
                        && c.loads.iter().any(|l| l.from > 0 || l.until.is_some()))
                    .then(|| (measured_sensings(&m.steps), s.sensed_at.clone())),
                    mechanism: None,
                };
                v.explain();
                validation.push(v);
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
                items.tick(&format!(
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
    Ok((records, validation))
}

/// The steps of a measured run whose rebalance point renewed the powers (`balance.measured_s`
/// above 0).
fn measured_sensings(steps: &[serde_json::Value]) -> Vec<usize> {
    (steps.iter().enumerate())
        .filter(|(_, s)| s["balance"]["measured_s"].as_f64().is_some_and(|t| t > 0.0))
        .map(|(k, _)| k)
        .collect()
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
