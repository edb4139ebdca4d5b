//! `drum`: check, show and compute powers of DrumHead machine descriptions; monitor this host;
//! benchmark it; describe it as XML. Glue only: parse arguments, call `drum_model`, print.

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use cli_support::emit;
use cli_support::power::{PowerArgs, describe_model};
use drum_model::bench::{LinpackConfig, MAX_LINPACK_N, MAX_LINPACK_REPEATS, discover, linpack};
use drum_model::metrics::{h_cpu, rc_ideal};
use drum_model::monitor::{MonitorConfig, ProcFs, ProcessRef, start_monitoring};
use drum_model::samples::write_jsonl;
use drum_model::{Machine, render};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Longest `drum monitor --seconds` (a week).
const MAX_MONITOR_SECONDS: f64 = 604_800.0;

#[derive(Parser, Debug)]
#[command(
    name = "drum",
    version,
    about = "DRUM machine models: check, powers, monitor, benchmark"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate a machine file and print its tree (exit 1 and FILE:LINE:COL: message if bad).
    Check {
        /// The machine description (DrumHead XML).
        file: PathBuf,
        /// Print the validated tree as JSON: {"source", "ranks", "nodes": [{"nodenum", "name",
        /// "type", "parent", "bandwidth", "cpus", "ranks": [first, end), "mflops", "load"}]}
        /// (document order; `parent` is a nodenum, null for the root).
        #[arg(long)]
        json: bool,
    },
    /// Compute node powers and per-rank part sizes (static unless --replay).
    Powers {
        /// The machine description.
        file: PathBuf,
        #[command(flatten)]
        power: PowerArgs,
        /// Print JSON: {"w_comm", "nodes": [{"nodenum","name","power"}], "parts": [{"rank","node","size"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Print the tree with powers, or draw it as SVG.
    Show {
        /// The machine description.
        file: PathBuf,
        /// Write an SVG picture of the tree with powers here.
        #[arg(long, value_name = "OUT.svg")]
        svg: Option<PathBuf>,
        #[command(flatten)]
        power: PowerArgs,
    },
    /// Sample this host's CPUs, memory and interfaces; report the monitor's own overhead.
    Monitor {
        /// How long to monitor, seconds (at most a week, 604800).
        #[arg(long, default_value_t = 10.0, value_parser = cli_support::limits::seconds(MAX_MONITOR_SECONDS))]
        seconds: f64,
        /// Sampling period, milliseconds (1 to 3,600,000).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        period_ms: u64,
        /// Write the samples as JSON Lines (replayable with `drum powers --replay`).
        #[arg(long, value_name = "OUT.jsonl")]
        record: Option<PathBuf>,
        /// Sample each computing node of this machine (bound to its `cpus`) instead of the
        /// whole host as one node.
        #[arg(long, value_name = "FILE")]
        machine: Option<PathBuf>,
        /// Application process IDs in rank order (their CPU use becomes proc_util).
        #[arg(long = "pid", value_name = "PID")]
        pids: Vec<u32>,
        /// nodenum written in the samples when monitoring the whole host.
        #[arg(long, default_value_t = 0)]
        node: u32,
    },
    /// LINPACK-style LU benchmark of one core: MFLOPS = (2/3 n³ + 2 n²)/t, median of repeats.
    Bench {
        /// Matrix order (2 to 4096).
        #[arg(long, default_value_t = 1000, value_parser = cli_support::limits::count(2, MAX_LINPACK_N, "(matrix order)"))]
        n: usize,
        /// Timed repeats (1 to 1000).
        #[arg(long, default_value_t = 5, value_parser = cli_support::limits::count(1, MAX_LINPACK_REPEATS, "repeats"))]
        repeats: usize,
    },
    /// Describe this host (cores, memory, interfaces, measured MFLOPS) as a machine file.
    Discover {
        /// Write the XML here instead of standard output.
        #[arg(long, value_name = "OUT.xml")]
        out: Option<PathBuf>,
        /// Benchmark matrix order (2 to 4096).
        #[arg(long, default_value_t = 1000, value_parser = cli_support::limits::count(2, MAX_LINPACK_N, "(matrix order)"))]
        n: usize,
        /// Benchmark repeats (1 to 1000).
        #[arg(long, default_value_t = 3, value_parser = cli_support::limits::count(1, MAX_LINPACK_REPEATS, "repeats"))]
        repeats: usize,
    },
}

fn load(file: &Path) -> Result<Machine> {
    Ok(Machine::from_file(file)?)
}

/// Runs the command; returns what it prints on stdout.
fn run(cli: Cli) -> Result<String> {
    let mut out = String::new();
    match cli.command {
        Command::Check { file, json: true } => {
            writeln!(out, "{}", tree_json(&load(&file)?))?;
        }
        Command::Check { file, json: false } => {
            let m = load(&file)?;
            writeln!(out, "{}", render::summary(&m))?;
            if let (Some(all), Some(used)) =
                (m.processor_ratings(), m.application_processor_ratings())
            {
                write!(
                    out,
                    "heterogeneity over {} processors: H_cpu = {:.4}, ",
                    all.len(),
                    h_cpu(&all)?
                )?;
                if used.len() == all.len() {
                    writeln!(out, "RC_ideal = {:.4}", rc_ideal(&used)?)?;
                } else {
                    writeln!(
                        out,
                        "RC_ideal = {:.4} over the {} processors the ranks use",
                        rc_ideal(&used)?,
                        used.len()
                    )?;
                }
            }
            write!(out, "{}", render::tree_text(&m, None))?;
        }
        Command::Powers { file, power, json } => {
            let m = load(&file)?;
            let (p, origin) = power.compute(&m)?;
            if json {
                writeln!(out, "{}", p.to_json_string(&m))?;
            } else {
                writeln!(out, "{}", render::summary(&m))?;
                writeln!(out, "model {}; {origin}", describe_model(&p))?;
                write!(out, "{}", render::tree_text(&m, Some(&p)))?;
                writeln!(out, "rank  node  part size")?;
                for (r, s) in p.parts.iter().enumerate() {
                    writeln!(out, "{r:>4}  {:>4}  {s:.6}", m.node(m.rank_node(r)).nodenum)?;
                }
            }
        }
        Command::Show { file, svg, power } => {
            let m = load(&file)?;
            let (p, origin) = power.compute(&m)?;
            match svg {
                Some(out) => {
                    cli_support::write_output(&out, render::svg(&m, Some(&p)))?;
                    eprintln!("wrote {} ({}; {origin})", out.display(), describe_model(&p));
                }
                None => {
                    writeln!(out, "{}", render::summary(&m))?;
                    writeln!(out, "model {}; {origin}", describe_model(&p))?;
                    write!(out, "{}", render::tree_text(&m, Some(&p)))?;
                }
            }
        }
        Command::Monitor {
            seconds,
            period_ms,
            record,
            machine,
            pids,
            node,
        } => out = monitor(seconds, period_ms, record, machine, pids, node)?,
        Command::Bench { n, repeats } => {
            let r = linpack(&LinpackConfig {
                n,
                repeats,
                ..Default::default()
            })?;
            let runs: Vec<String> = r.runs.iter().map(|x| format!("{x:.1}")).collect();
            let secs: Vec<String> = r.seconds.iter().map(|x| format!("{x:.4}")).collect();
            writeln!(
                out,
                "LINPACK-style LU (nalgebra), n = {n}, {repeats} repeats, one core"
            )?;
            writeln!(out, "MFLOPS per run: {}", runs.join(" "))?;
            writeln!(out, "seconds per run: {}", secs.join(" "))?;
            writeln!(out, "median: {:.1} MFLOPS", r.median)?;
        }
        Command::Discover {
            out: file,
            n,
            repeats,
        } => {
            cli_support::check_outputs([("--out", file.as_deref())])?;
            eprintln!("benchmarking one core (LINPACK n = {n}, {repeats} repeats)...");
            let r = linpack(&LinpackConfig {
                n,
                repeats,
                ..Default::default()
            })?;
            eprintln!("median {:.1} MFLOPS", r.median);
            let m = discover(&ProcFs::default(), r.median)?;
            let xml = m.to_xml();
            match file {
                Some(path) => {
                    cli_support::write_output(&path, &xml)?;
                    eprintln!("wrote {}", path.display());
                }
                None => out = xml,
            }
        }
    }
    Ok(out)
}

fn monitor(
    seconds: f64,
    period_ms: u64,
    record: Option<PathBuf>,
    machine: Option<PathBuf>,
    pids: Vec<u32>,
    node: u32,
) -> Result<String> {
    let mut out = String::new();
    if !(seconds.is_finite() && seconds > 0.0) {
        bail!("--seconds must be > 0, got {seconds}");
    }
    cli_support::check_outputs([("--record", record.as_deref())])?;
    let period = Duration::from_millis(period_ms);
    let procs: Vec<ProcessRef> = pids.iter().map(|&p| ProcessRef::Pid(p)).collect();
    let config = match &machine {
        Some(file) => {
            let m = load(file)?;
            MonitorConfig::for_machine(&m, &procs, period)
        }
        None => {
            let mut c = MonitorConfig::host(node, period);
            c.targets[0].processes = procs;
            c
        }
    };
    let targets = config.targets.len();
    let mon = start_monitoring(config)?;
    let start = Instant::now();
    let total = Duration::from_secs_f64(seconds);
    let mut stderr = std::io::stderr();
    while start.elapsed() < total {
        std::thread::sleep(Duration::from_millis(250).min(total.saturating_sub(start.elapsed())));
        let latest = mon.latest();
        let mut line = format!(
            "\r[{:>6.1}/{:.1} s] {} samples",
            start.elapsed().as_secs_f64(),
            seconds,
            mon.sample_count()
        );
        if let Some(s) = latest.first() {
            let idle: f64 = latest.iter().map(|s| s.cpu_idle.iter().sum::<f64>()).sum();
            let cpus: usize = latest.iter().map(|s| s.cpu_idle.len()).sum();
            line.push_str(&format!(
                ", idle {idle:.2}/{cpus} CPUs, mem avail {:.1}/{:.1} GB",
                s.mem_avail / 1e9,
                s.mem_total / 1e9
            ));
            let procs: f64 = latest.iter().map(|s| s.proc_util.iter().sum::<f64>()).sum();
            if latest.iter().any(|s| !s.proc_util.is_empty()) {
                line.push_str(&format!(", app CPU {procs:.2}"));
            }
        }
        let _ = write!(stderr, "{line}   ");
        let _ = stderr.flush();
    }
    let rec = mon.stop()?;
    eprintln!();
    let st = rec.stats;
    writeln!(
        out,
        "monitor overhead: {:.3} ms CPU over {:.3} s wall = {:.4}% of one CPU ({} periods of {} ms, {} node(s))",
        st.cpu_seconds * 1e3,
        st.wall_seconds,
        100.0 * st.overhead(),
        st.periods,
        period_ms,
        targets
    )?;
    if let Some(path) = record {
        cli_support::write_output_with(&path, |w| write_jsonl(&rec.samples, w))?;
        writeln!(
            out,
            "recorded {} samples to {}",
            rec.samples.len(),
            path.display()
        )?;
    }
    Ok(out)
}

/// `drum check --json`: the validated tree, for tools that read machines without linking this
/// workspace (xtask's vcluster).
fn tree_json(m: &Machine) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = m
        .nodes()
        .iter()
        .map(|n| {
            let r = n.rank_range();
            serde_json::json!({
                "nodenum": n.nodenum,
                "name": n.name,
                "type": n.kind.as_str(),
                "parent": n.parent().map(|p| m.node(p).nodenum),
                "bandwidth": n.bandwidth,
                "cpus": n.cpus.as_ref().map(|c| c.cpus().to_vec()),
                "ranks": [r.start, r.end],
                "mflops": n.mflops,
                "load": n.load,
            })
        })
        .collect();
    serde_json::json!({"source": m.source(), "ranks": m.num_ranks(), "nodes": nodes})
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).and_then(|out| emit(&out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
