//! `cargo xtask bench fem`: the whole 17-step PHAML-size adaptive run on one core, in
//! release, repeated (medians per phase per step), with memory per vertex and a sparse direct
//! solve of the final system by faer in the same process, and the whole `fem-laplace`
//! process's default run in bandwidth sweeps (STREAM triad, measured in the same run). All figures are printed by the
//! `fem-bench` binary of `fem-laplace-cli` (built with its `faer` feature); this only builds and
//! runs it.

use anyhow::{Result, bail};
use std::process::Command;

/// Runs the benchmark; `args` are passed to `fem-bench` (`--repeats R`,
/// `--target-vertices N`).
pub fn bench_fem(args: &[String]) -> Result<()> {
    for a in args {
        if a.starts_with('-')
            && !matches!(
                a.as_str(),
                "--repeats" | "--target-vertices" | "--help" | "-h"
            )
        {
            bail!("bench fem: unknown flag `{a}` (known: --repeats R, --target-vertices N)");
        }
    }
    let release = crate::release(&[
        "-p",
        "fem-laplace-cli",
        "--features",
        "faer",
        "--bin",
        "fem-bench",
        "--bin",
        "fem-laplace",
    ])?;
    eprintln!("xtask: load average {}", crate::bench::uptime());
    let exe = release.join("fem-bench");
    let mut bench = Command::new(exe);
    // The whole default run of the application, timed by fem-bench in bandwidth sweeps.
    let args: Vec<String> = (args.iter().cloned())
        .chain([
            "--process".into(),
            release.join("fem-laplace").display().to_string(),
        ])
        .collect();
    // One core, as the target says: pin to CPU 0 when taskset is available.
    if Command::new("taskset").arg("--version").output().is_ok() {
        let mut pinned = Command::new("taskset");
        pinned.args(["-c", "0"]).arg(bench.get_program()).args(args);
        bench = pinned;
    } else {
        bench.args(args);
    }
    crate::bench::run_reporting_steal(bench)
}
