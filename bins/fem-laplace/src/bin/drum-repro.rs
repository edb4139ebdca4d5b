//! `drum-repro`: the DRUM 2005 experiments, Sinha & Parashar's sensing period and Lan, Taylor
//! & Bryan's gain/cost decision, measured here and simulated at cluster size (the library
//! `repro` does the work; this is its command line and progress bar).

use clap::Parser;
use repro::{NetStudy, Options, Scale};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

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
    /// The mesh size (vertices); default 524,500 (PHAML's; at most 20,000,000).
    #[arg(long, value_parser =
          cli_support::limits::count(0, fem_laplace::memory::MAX_TARGET_VERTICES, "vertices"))]
    target_vertices: Option<usize>,
    /// Experiment 2 measured on the namespace cluster: the runs `cargo xtask reproduce` made
    /// (one subdirectory each with run.json and summary.json).
    #[arg(long, value_name = "DIR")]
    vcluster_runs: Option<PathBuf>,
    /// Why the namespace runs could not be made here (the report says so).
    #[arg(long, value_name = "WHY", conflicts_with = "vcluster_runs")]
    vcluster_skipped: Option<String>,
    /// Lan et al.'s study measured on the namespace cluster of vcluster-sites.xml: the runs
    /// `cargo xtask reproduce` made (`parallel/` and `distributed/`, each with steps.jsonl).
    #[arg(long, value_name = "DIR")]
    lan_vcluster_runs: Option<PathBuf>,
    /// Why Lan et al.'s namespace runs could not be made here (the report says so).
    #[arg(long, value_name = "WHY", conflicts_with = "lan_vcluster_runs")]
    lan_vcluster_skipped: Option<String>,
}

/// The runs given, or why there are none.
fn net_study(runs: Option<PathBuf>, skipped: Option<String>) -> NetStudy {
    match (runs, skipped) {
        (Some(dir), _) => NetStudy::Runs(dir),
        (None, Some(why)) => NetStudy::Skipped(why),
        (None, None) => NetStudy::NotAsked,
    }
}

/// Progress on stderr: a bar redrawn in place on a terminal, else a line per item.
struct Bar {
    bar: bool,
    t0: Instant,
}

impl repro::Progress for Bar {
    fn message(&mut self, text: &str) {
        eprintln!("{text}");
    }

    fn item(&mut self, done: usize, total: usize, what: &str) {
        let t = self.t0.elapsed().as_secs_f64();
        if self.bar {
            let w = 30;
            let f = w * done / total.max(1);
            eprint!(
                "\r\x1b[2K[{}{}] {done}/{total} {t:.0}s  {}",
                "#".repeat(f),
                ".".repeat(w - f),
                what.chars().take(70).collect::<String>()
            );
            if done == total {
                eprintln!();
            }
        } else {
            eprintln!("[{done}/{total}] {t:.0}s {what}");
        }
        let _ = std::io::stderr().flush();
    }
}

fn main() -> std::process::ExitCode {
    cli_support::main(run)
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    let scale = if args.tiny {
        Scale::Tiny
    } else if args.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
    let opts = Options {
        repeats: args.repeats,
        target_vertices: args.target_vertices,
        net: net_study(args.vcluster_runs, args.vcluster_skipped),
        lan_net: net_study(args.lan_vcluster_runs, args.lan_vcluster_skipped),
        ..Options::new(scale, args.out)
    };
    let mut bar = Bar {
        bar: std::io::stderr().is_terminal(),
        t0: Instant::now(),
    };
    Ok(repro::run(&opts, &mut bar)?)
}
