//! `cargo xtask <command>`: repository automation. xtask only drives: it runs cargo and the
//! workspace's binaries, and uses no workspace crate as a library.

mod bench;
mod bench_hier;
mod bench_hsfc;
mod mpi;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

mod bench_drum_loop;
mod bench_fem;
mod bench_laplace;
mod launch;
mod run_laplace;
mod run_samr;
mod vcluster;
mod zoltan;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  run-laplace [--machine FILE] [--backend threads|mpi] [--hostfile F] [--balance B] [--w-comm W]
              [--load RANK[:N][@STEP[-END]]] [--no-load] [--compare] [--json] [--out DIR] [fem flags]
              [--vcluster [--net-load NODE[:MBIT][@STEP[-END]]]]
          the main job: DRUM in the loop. The adaptive Laplace run to 524,500 vertices over the
          machine's ranks (default machines/local-2core-hetero.xml, 2 thread ranks, with the
          competing load its file describes), pinned and monitored, rebalanced with the
          monitored powers (--balance monitored|static|uniform); progress per step on stderr, a
          summary on stdout, results in out/run-laplace/. --compare: uniform then monitored,
          RC and RC_ideal. --vcluster: MPI ranks across the namespaces of `vcluster` (brought
          up for the run if needed; default machines/vcluster-2.xml); --net-load: a competing
          TCP flow on a node's link
  vcluster up [--machine FILE] | status | down
          a real cluster on this host (root, iproute2): one network namespace per computing
          node of the machine file (default machines/vcluster-2.xml) with the node's name as
          hostname, links of veth pairs into bridges shaped with tbf to the file's bandwidth
          (both directions; a network node slower than its children is a shaped uplink), a
          head namespace for mpirun, a hostfile and an rsh agent in /run/drumvc/; down removes
          all of it (also after a crash: /run/drumvc/state.json). check: the vcluster part of
          ci alone (run on vcluster-2 against the thread run, faults, down)
  run-samr [--machine FILE] [--compare] [--out DIR] [samr flags]
          the structured AMR kernel with DRUM in the loop on the machine's ranks (default
          machines/local-2core-hetero.xml with its competing process): thread ranks pinned,
          monitored, ACEHeterogeneous with the powers sensed before each regrid; steps.jsonl,
          hierarchy.svg and summary.json in out/run-samr/, a summary on stdout. --compare:
          GrACE's default (SFC, equal parts) first, and the ratio of times
  reproduce [--quick] [--out DIR] [--repeats R]
          the DRUM 2005 experiments 1-4, Sinha-Parashar's sensing period and Lan et al.'s
          gain/cost decision, both SAMR papers on samr-kernel (studies sinha, lan), and Watts et al.'s
          four cases and incremental transfer (studies watts, transfer): measured on this host (thread ranks pinned to cores, real
          competing processes, real monitors) and simulated on Bullpen's nodes by a model
          calibrated on the measured runs; report.md, SVG plots and results.json in DIR
          (default report/). --quick: one repeat per measured run (default 3). As root with
          iproute2: experiment 2 also measured on the vcluster of machines/vcluster-2.xml
          (uniform and w_comm 0-0.5, with and without a competing flow on node2's link; runs
          in DIR/vcluster/), else the report says why not
  bench drum-loop [--repeats R] [--target-vertices N]
          DRUM in the loop on machines/local-2core-hetero.xml, medians of R (default 3):
          RC with the load on core 1, monitored vs static with the load from step 12, and
          monitored vs uniform without load
  ci      the whole gate: fmt --check, clippy -D warnings, cargo test --workspace and
          cargo doc (both without zoltan-drum, which needs MPI), and the multi-rank MPI tests
          when Open MPI is installed (required when CI=true): the comm suite under mpirun -np
          2 and 4, hsfc partition under mpirun byte-identical to the serial command, and
          zoltan-drum's tests, docs and C programs against the real Zoltan (when
          libtrilinos-zoltan-dev is installed; required when CI=true)
  bench fem [--repeats R] [--target-vertices N]
          the 17-step adaptive Laplace run to 524,500 vertices on one core (release):
          medians per phase per step, bytes per vertex, faer direct solve comparison
  bench laplace [--repeats R] [--ranks 1,2,3,4] [--target-vertices N]
          the 17-step run in one process and over thread ranks (release, one invocation):
          medians, ratios to serial, per-phase times, waiting, migration, peak heap per rank
  bench hsfc [--quick] [--simd scalar|avx2|avx512]
          hsfc vs Zoltan HSFC (peer driver, built with make) and coupe 0.1.0 on 10^6 and
          4*10^6 2-D points and 10^6 corner-graded 3-D points (8 to 1,024 parts): time
          medians, ratios, balance (data in target/bench-hsfc/)
  bench zoltan [--n N] [--repeats R]
          libzoltan_drum against the real Zoltan (Debian's libtrilinos-zoltan) on the same C
          program (crates/zoltan-drum/c/zoltan_bench.c), N points (default 10^6), HSFC and
          RCB, mpirun -np 2, R runs of each (default 5): medians and the ratio Zoltan/ours
  bench hier [--quick] [--machine FILE]
          hierarchical partitioning of 10^6 2-D and 3-D points over the Fig. 3 machine and
          machines/hier-lbmethods.xml vs a flat HSFC into the same part sizes (1 and 2
          threads), Zoltan HSFC and Zoltan HIER; each level's time (data in target/bench-hier/)
";

/// The subcommands, parsed once from the command line.
#[derive(Debug)]
enum Task {
    Ci,
    RunLaplace(Vec<String>),
    RunSamr(Vec<String>),
    /// `reproduce [args]`.
    Reproduce(Vec<String>),
    BenchFem(Vec<String>),
    /// `bench laplace [args]`.
    BenchLaplace(Vec<String>),
    /// `bench hsfc [args]`.
    BenchHsfc(Vec<String>),
    /// `bench hier [args]`.
    BenchHier(Vec<String>),
    /// `bench drum-loop [args]`.
    BenchDrumLoop(Vec<String>),
    /// `bench zoltan [args]`.
    BenchZoltan(Vec<String>),
    /// `vcluster up|status|down [args]`.
    Vcluster(Vec<String>),
    Help,
}

fn parse(args: &[String]) -> Result<Task> {
    match args.first().map(String::as_str) {
        None | Some("help" | "-h" | "--help") => Ok(Task::Help),
        Some("ci") => Ok(Task::Ci),
        Some("run-laplace") => Ok(Task::RunLaplace(args[1..].to_vec())),
        Some("run-samr") => Ok(Task::RunSamr(args[1..].to_vec())),
        Some("reproduce") => Ok(Task::Reproduce(args[1..].to_vec())),
        Some("vcluster") => Ok(Task::Vcluster(args[1..].to_vec())),
        Some("bench") => match args.get(1).map(String::as_str) {
            Some("fem") => Ok(Task::BenchFem(args[2..].to_vec())),
            Some("laplace") => Ok(Task::BenchLaplace(args[2..].to_vec())),
            Some("hsfc") => Ok(Task::BenchHsfc(args[2..].to_vec())),
            Some("hier") => Ok(Task::BenchHier(args[2..].to_vec())),
            Some("drum-loop") => Ok(Task::BenchDrumLoop(args[2..].to_vec())),
            Some("zoltan") => Ok(Task::BenchZoltan(args[2..].to_vec())),
            _ => bail!(
                "usage: cargo xtask bench (fem|laplace|hsfc|hier|drum-loop|zoltan) [options]\n\n{USAGE}"
            ),
        },
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

fn main() -> Result<()> {
    elapsed_s();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args)? {
        Task::Help => {
            print!("{USAGE}");
            Ok(())
        }
        Task::Ci => ci(),
        Task::RunLaplace(rest) => run_laplace::run_laplace(&rest),
        Task::RunSamr(rest) => run_samr::run_samr(&rest),
        Task::Reproduce(rest) => reproduce(&rest),
        Task::BenchFem(rest) => bench_fem::bench_fem(&rest),
        Task::BenchLaplace(rest) => bench_laplace::bench_laplace(&rest),
        Task::BenchHsfc(a) => bench_hsfc::bench_hsfc(&a),
        Task::BenchHier(a) => bench_hier::bench_hier(&a),
        Task::BenchDrumLoop(a) => bench_drum_loop::bench_drum_loop(&a),
        Task::BenchZoltan(a) => zoltan::bench_zoltan(&a),
        Task::Vcluster(a) => vcluster::vcluster(&a),
    }
}

/// The workspace root, from this crate's manifest directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The cargo target directory (`CARGO_TARGET_DIR` or `<root>/target`).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => project_root().join(d),
        None => project_root().join("target"),
    }
}

/// Whether this process runs as root (uid 0), from `/proc/self/status`.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().next().map(|x| x == "0"))
        })
        .unwrap_or(false)
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(project_root());
    cmd
}

/// `cargo build --release` with `args` (packages, features, binaries); returns the
/// directory the release binaries are in.
pub(crate) fn release(args: &[&str]) -> Result<PathBuf> {
    let mut build = cargo();
    build.args(["build", "--release"]).args(args);
    run(build)?;
    Ok(project_root().join("target/release"))
}

/// Runs `cmd`, echoing it first; fails with its exit status.
/// When xtask started: `run` stamps each command with the time since, so a slow CI names its
/// slow step.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Seconds since xtask started.
pub(crate) fn elapsed_s() -> f64 {
    STARTED
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

fn run(mut cmd: Command) -> Result<()> {
    let t0 = elapsed_s();
    eprintln!("xtask: [{t0:7.1} s] running {cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    eprintln!(
        "xtask: [{:7.1} s] done in {:.1} s",
        elapsed_s(),
        elapsed_s() - t0
    );
    Ok(())
}

/// `cargo xtask reproduce`: builds `fem-laplace` and `drum-repro` (release) and runs the
/// latter from the workspace root, passing the flags on.
fn reproduce(args: &[String]) -> Result<()> {
    let bins = release(&[
        "--quiet",
        "-p",
        "fem-laplace-cli",
        "--bin",
        "fem-laplace",
        "--bin",
        "drum-repro",
    ])?;
    let mut cmd = Command::new(bins.join("drum-repro"));
    cmd.current_dir(project_root()).args(args);
    if !args.iter().any(|a| a == "-h" || a == "--help") {
        cmd.args(reproduce_on_vcluster(args)?);
    }
    run(cmd)
}

/// The namespace-cluster runs when namespaces can be made here, else why not: experiment 2
/// on `vcluster-2.xml` (runs in `OUT/vcluster/`; `drum-repro --vcluster-runs DIR` or
/// `--vcluster-skipped WHY`) and Lan et al.'s study on `vcluster-sites.xml` (runs in
/// `OUT/vcluster-lan/`; `--lan-vcluster-runs DIR` or `--lan-vcluster-skipped WHY`).
fn reproduce_on_vcluster(args: &[String]) -> Result<Vec<String>> {
    let after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let tiny = args.iter().any(|a| a == "--tiny");
    let target = match tiny {
        true => Some("4000"),
        false => after("--target-vertices"),
    };
    let out = project_root().join(after("--out").unwrap_or("report"));
    let mut flags = Vec::new();
    match vcluster::exp2::skip_reason()? {
        Some(why) => {
            println!("xtask: reproduce: experiment 2 on the vcluster skipped: {why}");
            flags.extend(["--vcluster-skipped".into(), why]);
        }
        None => {
            let dir = vcluster::exp2::run(&out.join("vcluster"), target)?;
            flags.extend(["--vcluster-runs".into(), dir.display().to_string()]);
        }
    }
    match vcluster::lan::skip_reason()? {
        Some(why) => {
            println!("xtask: reproduce: Lan et al. on the vcluster skipped: {why}");
            flags.extend(["--lan-vcluster-skipped".into(), why]);
        }
        None => {
            let dir = vcluster::lan::run(&out.join("vcluster-lan"), tiny)?;
            flags.extend(["--lan-vcluster-runs".into(), dir.display().to_string()]);
        }
    }
    Ok(flags)
}

fn ci() -> Result<()> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    run(fmt)?;

    // With MPI (always under CI=true) one lint of the whole workspace with every `mpi`
    // feature on, zoltan-drum included; without it, everything but zoltan-drum (which needs
    // MPI). The few `cfg(not(feature = "mpi"))` fallbacks are then compiled by the test step,
    // not linted.
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let mpirun = match launch::mpirun(in_ci)? {
        launch::Available::Yes(mpirun) => Some(mpirun),
        launch::Available::Skip(why) => {
            println!("{why}");
            None
        }
    };
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets"]);
    if mpirun.is_some() {
        clippy.args(["--features", launch::MPI_FEATURES]);
    } else {
        clippy.args(["--exclude", "zoltan-drum"]);
    }
    clippy.args(["--", "-D", "warnings"]);
    run(clippy)?;

    let mut test = cargo();
    test.args(["test", "--workspace", "--exclude", "zoltan-drum"])
        .env("INSTA_UPDATE", "no");
    run(test)?;

    // The API documentation a user reads: no broken link, no collision of a command with its
    // library's page (zoltan-drum's, which needs MPI, in the MPI part).
    let mut doc = cargo();
    doc.args([
        "doc",
        "--no-deps",
        "--workspace",
        "--exclude",
        "zoltan-drum",
    ])
    .env("RUSTDOCFLAGS", "-D warnings");
    run(doc)?;

    if let Some(mpirun) = mpirun {
        // The commands just tested are the serial side of the MPI checks.
        launch::CheckBins::keep_serial()?;
        mpi::ci_mpi(&mpirun, in_ci)?;
    }
    Ok(())
}
