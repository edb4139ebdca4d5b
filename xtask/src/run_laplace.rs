//! `cargo xtask run-laplace`: the main job. Loads a machine file (default
//! `machines/local-2core-hetero.xml`), prints the part size DRUM gives each of its ranks, and
//! runs the adaptive Laplace solve of the DRUM experiments (PHAML's 17 steps to 524,500
//! vertices) with the release `fem-laplace` binary.
//!
//! The finite-element run is still one process: distributing it over the machine's ranks and
//! rebalancing it with the monitored powers after each refinement is the next fem issue. This
//! command says so when it runs, rather than pretending otherwise.

use anyhow::{Result, bail};
use std::process::Command;

/// Options of `run-laplace`, parsed from its arguments.
#[derive(Debug)]
struct Options {
    machine: String,
    w_comm: String,
    /// Passed through to `fem-laplace` (`--target-vertices`, `--svg`, `--vtk`, `--json`, ...).
    fem_args: Vec<String>,
}

const FEM_FLAGS_WITH_VALUE: &[&str] = &[
    "--target-vertices",
    "--problem",
    "--marking",
    "--cg-tol-factor",
    "--vtk",
    "--svg",
];

fn parse(args: &[String]) -> Result<Options> {
    let mut opts = Options {
        machine: "machines/local-2core-hetero.xml".into(),
        w_comm: "0".into(),
        fem_args: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| match it.next() {
            Some(v) => Ok(v.clone()),
            None => bail!("run-laplace: {flag} needs a value"),
        };
        match a.as_str() {
            "--machine" => opts.machine = value("--machine")?,
            "--w-comm" => opts.w_comm = value("--w-comm")?,
            "--json" => opts.fem_args.push(a.clone()),
            f if FEM_FLAGS_WITH_VALUE.contains(&f) => {
                let v = value(f)?;
                opts.fem_args.extend([a.clone(), v]);
            }
            other => bail!(
                "run-laplace: unknown flag `{other}` (known: --machine FILE, --w-comm W, \
                 --target-vertices N, --problem P, --marking M, --cg-tol-factor F, --vtk DIR, \
                 --svg FILE, --json)"
            ),
        }
    }
    Ok(opts)
}

/// Runs the main job with `args`.
pub fn run_laplace(args: &[String]) -> Result<()> {
    let opts = parse(args)?;
    let mut build = crate::cargo();
    build.args([
        "build",
        "--release",
        "--quiet",
        "--bin",
        "drum",
        "--bin",
        "fem-laplace",
    ]);
    crate::run(build)?;
    let root = crate::project_root();
    let bin = |name: &str| {
        let mut cmd = Command::new(root.join("target/release").join(name));
        cmd.current_dir(&root);
        cmd
    };

    eprintln!("run-laplace: machine {}", opts.machine);
    let mut powers = bin("drum");
    powers.args(["powers", &opts.machine, "--w-comm", &opts.w_comm]);
    crate::run(powers)?;

    eprintln!(
        "run-laplace: the finite-element solve runs as one process for now; distributing it \
         over the machine's ranks with the part sizes above is the next fem issue"
    );
    let mut fem = bin("fem-laplace");
    fem.args(&opts.fem_args);
    crate::run(fem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn defaults_and_pass_through() {
        let o = parse(&args("--target-vertices 2000 --json --svg m.svg")).unwrap();
        assert_eq!(o.machine, "machines/local-2core-hetero.xml");
        assert_eq!(
            o.fem_args,
            args("--target-vertices 2000 --json --svg m.svg")
        );
        let o = parse(&args("--machine machines/bullpen.xml --w-comm 0.1")).unwrap();
        assert_eq!(
            (o.machine.as_str(), o.w_comm.as_str()),
            ("machines/bullpen.xml", "0.1")
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let e = parse(&args("--ranks 4")).unwrap_err().to_string();
        assert!(e.contains("unknown flag `--ranks`"), "{e}");
        let e = parse(&args("--machine")).unwrap_err().to_string();
        assert!(e.contains("--machine needs a value"), "{e}");
    }
}
