//! The multi-rank MPI part of `cargo xtask ci`: builds the `comm` MPI backend and its
//! conformance driver (`comm-mpi-suite`), lints it, and runs it under `mpirun` with 2 and 4
//! ranks; then checks that a rank that panics or fails a check ends the job with an error
//! instead of hanging it.

use crate::{cargo, project_root, run};
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str = "apt-get install libopenmpi-dev openmpi-bin libclang-dev pkg-config";
/// Rank counts the suite runs with.
const RANKS: [usize; 2] = [2, 4];
/// A run that takes longer than this is treated as hung.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Runs the MPI tests when `mpicc` (or `$MPICC`) and `mpirun` exist; otherwise prints why they
/// are skipped, and fails if `CI=true` (CI must run them).
pub fn ci_mpi() -> Result<()> {
    let mpicc = std::env::var_os("MPICC")
        .map(PathBuf::from)
        .or_else(|| find_on_path("mpicc"));
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let mpirun = match availability(mpicc, find_on_path("mpirun"), ci)? {
        Available::Yes(mpirun) => mpirun,
        Available::Skip(why) => {
            println!("{why}");
            return Ok(());
        }
    };

    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "-p",
        "comm",
        "--all-targets",
        "--features",
        "mpi",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)?;
    let mut build = cargo();
    build.args([
        "build",
        "-p",
        "comm",
        "--features",
        "mpi",
        "--bin",
        "comm-mpi-suite",
    ]);
    run(build)?;
    let suite = target_dir().join("debug").join("comm-mpi-suite");

    let launcher = Launcher::detect(&mpirun)?;
    for np in RANKS {
        let out = launcher.run(&suite, np, &[])?;
        if !out.success {
            bail!(
                "comm-mpi-suite failed under mpirun -np {np}:\n{}",
                out.stderr
            );
        }
        let want = "passed, 0 failed";
        if !out
            .stdout
            .lines()
            .any(|l| l.starts_with("comm-mpi-suite: ") && l.ends_with(want))
        {
            bail!("comm-mpi-suite under mpirun -np {np} did not report `{want}`");
        }
    }

    // Failures must end the job, not hang it, and name the rank.
    let out = launcher.run(&suite, 4, &["--panic-rank", "2"])?;
    expect_failure(&out, "--panic-rank 2", "rank 2 panics on purpose")?;
    let out = launcher.run(&suite, 4, &["--fail-rank", "1"])?;
    expect_failure(
        &out,
        "--fail-rank 1",
        "FAILED allgatherv: rank 1: failure injected",
    )?;
    println!(
        "xtask: MPI tests passed (mpirun -np {RANKS:?}; a panicking and a failing rank end the job)"
    );
    Ok(())
}

enum Available {
    /// Run the tests with this `mpirun`.
    Yes(PathBuf),
    /// Skip them, saying why.
    Skip(String),
}

/// Whether the MPI tests can run; without MPI they are skipped, or fail under `CI=true`.
fn availability(mpicc: Option<PathBuf>, mpirun: Option<PathBuf>, ci: bool) -> Result<Available> {
    match (mpicc, mpirun) {
        (Some(_), Some(mpirun)) => Ok(Available::Yes(mpirun)),
        _ if ci => bail!(
            "MPI tests are required with CI=true, but Open MPI is not installed ({INSTALL_HINT})"
        ),
        _ => Ok(Available::Skip(format!(
            "skipping MPI tests: Open MPI not installed ({INSTALL_HINT})"
        ))),
    }
}

fn expect_failure(out: &RunOutput, what: &str, needle: &str) -> Result<()> {
    if out.success {
        bail!("comm-mpi-suite {what} exited successfully; it must fail");
    }
    if !out.stderr.contains(needle) {
        bail!(
            "comm-mpi-suite {what} failed without saying `{needle}`:\n{}",
            out.stderr
        );
    }
    println!(
        "xtask: comm-mpi-suite {what} ended the job as it should ({})",
        out.status
    );
    Ok(())
}

/// `mpirun` and the flags it needs here.
struct Launcher {
    mpirun: PathBuf,
    flags: Vec<&'static str>,
}

impl Launcher {
    fn detect(mpirun: &Path) -> Result<Launcher> {
        let version = Command::new(mpirun)
            .arg("--version")
            .output()
            .with_context(|| format!("could not run {}", mpirun.display()))?;
        let text = String::from_utf8_lossy(&version.stdout).into_owned()
            + &String::from_utf8_lossy(&version.stderr);
        let mut flags = Vec::new();
        if text.contains("Open MPI") || text.contains("OpenRTE") {
            // More ranks than cores is fine for tests; Open MPI refuses root without the flag.
            flags.push("--oversubscribe");
            if is_root() {
                flags.push("--allow-run-as-root");
            }
        }
        Ok(Launcher {
            mpirun: mpirun.to_path_buf(),
            flags,
        })
    }

    /// Runs `mpirun <flags> -np N program args`, echoing its output, killing it after
    /// [`TIMEOUT`].
    fn run(&self, program: &Path, np: usize, args: &[&str]) -> Result<RunOutput> {
        let mut cmd = Command::new(&self.mpirun);
        cmd.args(&self.flags)
            .arg("-np")
            .arg(np.to_string())
            .arg(program)
            .args(args);
        cmd.current_dir(project_root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        eprintln!("xtask: running {cmd:?}");
        let mut child = cmd
            .spawn()
            .with_context(|| format!("could not start {cmd:?}"))?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = stderr.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{cmd:?} hung: killed after {} s", TIMEOUT.as_secs());
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        print!("{stdout}");
        eprint!("{stderr}");
        Ok(RunOutput {
            success: status.success(),
            status: status.to_string(),
            stdout,
            stderr,
        })
    }
}

struct RunOutput {
    success: bool,
    status: String,
    stdout: String,
    stderr: String,
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_mpi_skips_locally_and_fails_in_ci() {
        let some = || Some(PathBuf::from("/usr/bin/x"));
        assert!(matches!(
            availability(some(), some(), true),
            Ok(Available::Yes(_))
        ));
        match availability(None, some(), false) {
            Ok(Available::Skip(why)) => assert_eq!(
                why,
                "skipping MPI tests: Open MPI not installed (apt-get install libopenmpi-dev \
                 openmpi-bin libclang-dev pkg-config)"
            ),
            _ => panic!("expected a skip"),
        }
        let e = availability(some(), None, true)
            .err()
            .expect("CI=true must fail");
        assert!(
            e.to_string()
                .starts_with("MPI tests are required with CI=true"),
            "{e}"
        );
    }
}
