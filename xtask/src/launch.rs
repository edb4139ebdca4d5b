//! What the MPI checks of `cargo xtask ci` (and `vcluster check`) run and how: `mpirun` with
//! the flags this host needs ([`Launcher`]), and the binaries, each built once ([`CheckBins`]).

use crate::{cargo, is_root, project_root, run, target_dir};
use anyhow::{Context, Result, bail};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str = "apt-get install libopenmpi-dev openmpi-bin libclang-dev pkg-config";
/// A run that takes longer than this is treated as hung.
const TIMEOUT: Duration = Duration::from_secs(300);
/// Vertices of the shortened adaptive run of the fem-laplace checks.
pub(crate) const FEM_VERTICES: &str = "60000";

/// Every command package's `mpi` feature: the MPI binaries are built, and the workspace is
/// linted, with all of them at once.
pub(crate) const MPI_FEATURES: &str =
    "comm/mpi,cli-support/mpi,hsfc-cli/mpi,hier-part-cli/mpi,fem-laplace-cli/mpi,samr-cli/mpi";

/// The packages of the MPI part: the ones with MPI binaries and zoltan-drum.
const MPI_PACKAGES: [&str; 6] = [
    "comm",
    "hsfc-cli",
    "hier-part-cli",
    "fem-laplace-cli",
    "samr-cli",
    "zoltan-drum",
];

/// Selects [`MPI_PACKAGES`] with [`MPI_FEATURES`]. Every cargo command of the MPI part (build,
/// zoltan-drum's tests and docs) selects the same packages, so cargo resolves the same
/// features each time and the crates below compile once: `-p zoltan-drum` alone resolves
/// `syn`'s features differently and recompiled the whole stack (96 s).
pub(crate) fn mpi_selection(cmd: &mut Command) {
    for package in MPI_PACKAGES {
        cmd.args(["-p", package]);
    }
    cmd.args(["--features", MPI_FEATURES]);
}

/// The commands the checks run without MPI: (package, binary).
const SERIAL: [(&str, &str); 5] = [
    ("hsfc-cli", "hsfc"),
    ("hier-part-cli", "hier-part"),
    ("fem-laplace-cli", "fem-laplace"),
    ("samr-cli", "samr"),
    ("drum-cli", "drum"),
];

/// The binaries built with MPI: (package, binary).
const WITH_MPI: [(&str, &str); 5] = [
    ("comm", "comm-mpi-suite"),
    ("hsfc-cli", "hsfc"),
    ("hier-part-cli", "hier-part"),
    ("fem-laplace-cli", "fem-laplace"),
    ("samr-cli", "samr"),
];

/// The binaries of the MPI checks, in `target/mpi-cli/`: `NAME-serial` (built without MPI)
/// and `NAME-mpi`. Cargo puts every feature set's binary at the same `target/debug/NAME`, so
/// each is copied aside once built.
pub(crate) struct CheckBins;

impl CheckBins {
    fn dir() -> PathBuf {
        target_dir().join("mpi-cli")
    }

    /// `name` built without MPI.
    pub(crate) fn serial(name: &str) -> PathBuf {
        Self::dir().join(format!("{name}-serial"))
    }

    /// `name` built with MPI.
    pub(crate) fn mpi(name: &str) -> PathBuf {
        Self::dir().join(format!("{name}-mpi"))
    }

    /// Copies aside the commands that `cargo test --workspace` built for the command
    /// packages' tests: the serial binaries are the ones just tested, and nothing is built
    /// again (a `cargo build` of one package resolves features differently from the
    /// workspace's test build and would recompile the crates below it).
    pub(crate) fn keep_serial() -> Result<()> {
        std::fs::create_dir_all(Self::dir())
            .with_context(|| format!("creating {}", Self::dir().display()))?;
        for (package, bin) in SERIAL {
            let built = target_dir().join("debug").join(bin);
            if !built.is_file() {
                bail!(
                    "{} is missing: the test build of {package} did not leave it",
                    built.display()
                );
            }
            copy(&built, &Self::serial(bin))?;
        }
        Ok(())
    }

    /// Builds the serial commands (one `cargo build`) and copies them aside, for a check run
    /// on its own (`vcluster check`).
    pub(crate) fn build_serial() -> Result<()> {
        let mut build = cargo();
        build.arg("build");
        for (package, bin) in SERIAL {
            build.args(["-p", package, "--bin", bin]);
        }
        run(build)?;
        Self::keep_serial()
    }

    /// Builds every MPI binary and libzoltan_drum in one `cargo build` of [`mpi_selection`]
    /// and copies the binaries aside.
    pub(crate) fn build_mpi() -> Result<()> {
        std::fs::create_dir_all(Self::dir())
            .with_context(|| format!("creating {}", Self::dir().display()))?;
        let mut build = cargo();
        build.arg("build");
        mpi_selection(&mut build);
        for (_, bin) in WITH_MPI {
            build.args(["--bin", bin]);
        }
        build.arg("--lib");
        run(build)?;
        for (_, bin) in WITH_MPI {
            copy(&target_dir().join("debug").join(bin), &Self::mpi(bin))?;
        }
        Ok(())
    }
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// The `mpirun` to use, or why the MPI checks are skipped (an error when `ci`, i.e. under
/// `CI=true`: CI must run them).
pub(crate) fn mpirun(ci: bool) -> Result<Available> {
    let mpicc = std::env::var_os("MPICC")
        .map(PathBuf::from)
        .or_else(|| find_on_path("mpicc"));
    availability(mpicc, find_on_path("mpirun"), ci)
}

pub(crate) enum Available {
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

/// `mpirun` and the flags it needs here.
pub(crate) struct Launcher {
    mpirun: PathBuf,
    flags: Vec<&'static str>,
}

impl Launcher {
    pub(crate) fn detect(mpirun: &Path) -> Result<Launcher> {
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
    pub(crate) fn run<S: AsRef<OsStr>>(
        &self,
        program: &Path,
        np: usize,
        args: &[S],
    ) -> Result<RunOutput> {
        let mut cmd = Command::new(&self.mpirun);
        cmd.args(&self.flags)
            .arg("-np")
            .arg(np.to_string())
            .arg(program)
            .args(args);
        // `cargo xtask` runs under `cargo run`, which puts target/debug and its deps on
        // LD_LIBRARY_PATH; that path outranks a program's own run path, so a C program linked
        // against target/release/libzoltan_drum.so would load a stale debug build instead.
        cmd.current_dir(project_root())
            .env_remove("LD_LIBRARY_PATH")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        eprintln!("xtask: [{:7.1} s] running {cmd:?}", crate::elapsed_s());
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

pub(crate) struct RunOutput {
    pub(crate) success: bool,
    pub(crate) status: String,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
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
