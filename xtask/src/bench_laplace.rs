//! `cargo xtask bench laplace`: the PHAML-size adaptive run in one process and over thread
//! ranks, in one invocation (the `laplace-bench` binary of `fem-laplace-cli`, release): medians
//! of the whole-run times, ratios to the serial run, where the time of the distributed run
//! goes, and the ranks' peak heap against the serial peak.

use anyhow::{Result, bail};
use std::process::Command;

/// Runs the benchmark; `args` are passed to `laplace-bench` (`--repeats R`,
/// `--ranks 1,2,3,4`, `--target-vertices N`).
pub fn bench_laplace(args: &[String]) -> Result<()> {
    for a in args {
        if a.starts_with('-')
            && !matches!(
                a.as_str(),
                "--repeats" | "--ranks" | "--target-vertices" | "--help" | "-h"
            )
        {
            bail!(
                "bench laplace: unknown flag `{a}` (known: --repeats R, --ranks LIST, --target-vertices N)"
            );
        }
    }
    let release = crate::release(&["-p", "fem-laplace-cli", "--bin", "laplace-bench"])?;
    eprintln!("xtask: load average {}", crate::bench::uptime());
    let mut bench = Command::new(release.join("laplace-bench"));
    bench.args(args);
    crate::bench::run_reporting_steal(bench)
}
