//! The multi-rank MPI part of `cargo xtask ci`: the `comm` MPI backend's conformance driver
//! (`comm-mpi-suite`) under `mpirun` with 2 and 4 ranks, and a rank that panics or fails a
//! check ends the job with an error instead of hanging it; then the commands built with
//! `--features mpi` against their serial builds: `hsfc partition` and `hier-part partition`
//! write the serial parts file byte for byte, `fem-laplace` and `samr` give the serial run's
//! hashes, and the Zoltan-compatible library against the real Zoltan.

use crate::launch::{CheckBins, FEM_VERTICES, Launcher, RunOutput};
use crate::{project_root, run, target_dir};
use anyhow::{Context, Result, bail};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Rank counts the suite runs with.
const RANKS: [usize; 2] = [2, 4];

/// The MPI tests, with `mpirun` (found by [`crate::launch::mpirun`]); the serial binaries
/// are those the workspace's test step kept ([`CheckBins::keep_serial`]), the MPI ones are built
/// here in one go. `ci` (`CI=true`): the Zoltan comparison is required, not skipped.
pub fn ci_mpi(mpirun: &Path, ci: bool) -> Result<()> {
    CheckBins::build_mpi()?;
    let suite = CheckBins::mpi("comm-mpi-suite");

    let launcher = Launcher::detect(mpirun)?;
    for np in RANKS {
        let out = launcher.run(&suite, np, &[] as &[&str])?;
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
    expect_failure(
        &out,
        "comm-mpi-suite --panic-rank 2",
        &["rank 2 panics on purpose"],
    )?;
    let out = launcher.run(&suite, 4, &["--fail-rank", "1"])?;
    expect_failure(
        &out,
        "comm-mpi-suite --fail-rank 1",
        &["FAILED allgatherv: rank 1: failure injected"],
    )?;

    let points = cli_checks(&launcher)?;
    hier_checks(&launcher, &points)?;
    fem_checks(&launcher)?;
    crate::zoltan::ci_zoltan(&launcher, ci)?;
    samr_checks(&launcher)?;
    println!(
        "xtask: MPI tests passed (mpirun -np {RANKS:?}; a panicking and a failing rank end the job; \
         hsfc partition and hier-part partition under mpirun write the serial parts file; \
         fem-laplace under mpirun gives the serial and thread runs' meshes and errors, and so does \
         run-laplace --backend mpi with DRUM in the loop; samr under mpirun gives the thread run's \
         composite hashes)"
    );
    Ok(())
}

/// `samr --json`'s composite hash of each step.
fn samr_hashes(stdout: &str, what: &str) -> Result<Vec<String>> {
    stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).with_context(|| format!("{what}: not JSON: {l}"))?;
            v["hash"]
                .as_str()
                .map(String::from)
                .with_context(|| format!("{what}: no hash in {l}"))
        })
        .collect()
}

/// `samr` under `mpirun -np 2` and `-np 4`, with ACEHeterogeneous and with Lan et al.'s two
/// phases: the composite hash of every step equals the one-rank thread run's.
fn samr_checks(launcher: &Launcher) -> Result<()> {
    let dir = target_dir().join("mpi-cli");
    std::fs::create_dir_all(&dir)?;
    let (serial_bin, mpi_bin) = (CheckBins::serial("samr"), CheckBins::mpi("samr"));
    let base = [
        "--n0",
        "32",
        "--steps",
        "6",
        "--regrid-every",
        "2",
        "--json",
    ];
    let out = Command::new(&serial_bin)
        .args(base)
        .output()
        .context("starting samr (one thread rank)")?;
    if !out.status.success() {
        bail!("samr failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let want = samr_hashes(&String::from_utf8_lossy(&out.stdout), "samr")?;
    for np in RANKS {
        for scheme in [
            &["--partitioner", "ace"][..],
            &[
                "--scheme",
                "two-phase",
                "--link",
                "1e-4,1e-8",
                "--model-clock",
                "1e-5",
            ],
        ] {
            let mut args: Vec<&str> = base.to_vec();
            args.extend(["--backend", "mpi"]);
            args.extend(scheme);
            let res = launcher.run(&mpi_bin, np, &args)?;
            if !res.success {
                bail!(
                    "samr {scheme:?} failed under mpirun -np {np}:\n{}",
                    res.stderr
                );
            }
            let got = samr_hashes(&res.stdout, &format!("samr under mpirun -np {np}"))?;
            if got != want {
                bail!(
                    "samr {scheme:?} under mpirun -np {np}: hashes {got:?}, one thread rank {want:?}"
                );
            }
        }
        println!(
            "xtask: samr (ace and two-phase) under mpirun -np {np}: {} steps, last hash {} = one thread rank's",
            want.len(),
            want.last().map_or("-", String::as_str)
        );
    }
    Ok(())
}

/// Per step of a `fem-laplace --json` run: (mesh hash, bits of the energy error, CG
/// iterations).
fn fem_trace(stdout: &str, what: &str) -> Result<Vec<(String, u64, u64)>> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).with_context(|| format!("{what}: not JSON: {l}"))?;
            let hash = v["mesh_hash"]
                .as_str()
                .with_context(|| format!("{what}: no mesh_hash in {l}"))?
                .to_string();
            let err = v["error_energy"]
                .as_f64()
                .with_context(|| format!("{what}: no error_energy in {l}"))?;
            let cg = v["cg_iterations"].as_u64().unwrap_or(u64::MAX);
            Ok((hash, err.to_bits(), cg))
        })
        .collect()
}

/// `fem-laplace` under `mpirun -np 2` and `-np 4` on a shortened run: the mesh hash and the
/// energy error of every step equal the serial and the thread runs' bit for bit; a rank that
/// fails ends the job with its name.
fn fem_checks(launcher: &Launcher) -> Result<()> {
    let (serial_bin, mpi_bin) = (
        CheckBins::serial("fem-laplace"),
        CheckBins::mpi("fem-laplace"),
    );
    let base = ["--target-vertices", FEM_VERTICES, "--json"];
    let capture = |mut cmd: Command, what: &str| -> Result<String> {
        let out = cmd.output().with_context(|| format!("starting {what}"))?;
        if !out.status.success() {
            bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut serial = Command::new(&serial_bin);
    serial.args(base);
    let want = fem_trace(&capture(serial, "fem-laplace (serial)")?, "serial")?;
    let mut threads = Command::new(&serial_bin);
    threads.args(base).args(["--ranks", "3"]);
    let got = fem_trace(&capture(threads, "fem-laplace --ranks 3")?, "threads")?;
    if got != want {
        bail!("fem-laplace --ranks 3 differs from the serial run:\n{got:?}\n{want:?}");
    }
    for np in RANKS {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(["--backend", "mpi"]);
        let res = launcher.run(&mpi_bin, np, &args)?;
        if !res.success {
            bail!("fem-laplace failed under mpirun -np {np}:\n{}", res.stderr);
        }
        let got = fem_trace(&res.stdout, &format!("mpirun -np {np}"))?;
        if got != want {
            let first = got.iter().zip(&want).position(|(a, b)| a != b);
            bail!(
                "fem-laplace under mpirun -np {np}: {} steps, the serial run {}; first difference at step {first:?}",
                got.len(),
                want.len()
            );
        }
        println!(
            "xtask: fem-laplace --target-vertices {FEM_VERTICES} under mpirun -np {np}: {} steps, \
             last mesh hash {} = serial and threads",
            got.len(),
            got.last().map_or("-", |x| x.0.as_str())
        );
    }
    let res = launcher.run(
        &mpi_bin,
        4,
        &[
            "--backend",
            "mpi",
            "--target-vertices",
            "20000",
            "--fail-at",
            "2:3",
        ],
    )?;
    expect_failure(
        &res,
        "fem-laplace --backend mpi --fail-at 2:3 (mpirun -np 4)",
        &["rank 2 fails at step 3"],
    )?;
    let drum = CheckBins::serial("drum");
    crate::run_laplace::ci_check(&mpi_bin, &serial_bin, &drum, FEM_VERTICES)?;
    crate::vcluster::ci::check(&mpi_bin, &serial_bin, &drum, FEM_VERTICES)?;
    Ok(())
}

/// Points per file in the CLI check.
const CLI_POINTS: u64 = 200_000;

/// One point file of the CLI check.
struct CliCase {
    name: &'static str,
    /// `hsfc gen` arguments (besides `--n` and `-o`).
    gen_args: &'static [&'static str],
    /// Relative part sizes (written to a sizes file) or `None` for `--parts K` equal parts.
    sizes: Option<&'static str>,
    equal_parts: usize,
}

const CLI_CASES: [CliCase; 2] = [
    CliCase {
        name: "graded-2d-weighted",
        gen_args: &["--dim", "2", "--dist", "graded", "--weights", "random"],
        sizes: Some("16\n19\n0\n31\n34\n"),
        equal_parts: 0,
    },
    CliCase {
        name: "uniform-3d",
        gen_args: &["--dim", "3", "--dist", "uniform", "--weights", "unit"],
        sizes: None,
        equal_parts: 7,
    },
];

/// `hsfc partition` under `mpirun -np 2` and `-np 4` writes the same parts file, byte for
/// byte, as the serial command (built without MPI); errors on one rank end the job. Returns
/// the first point file (weighted, graded 2-D) for the next checks.
fn cli_checks(launcher: &Launcher) -> Result<PathBuf> {
    let started = Instant::now();
    let dir = target_dir().join("mpi-cli");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (serial_bin, mpi_bin) = (CheckBins::serial("hsfc"), CheckBins::mpi("hsfc"));
    let mut first_points = None;
    for case in &CLI_CASES {
        let points = dir.join(format!("{}.zpt", case.name));
        let mut gen_cmd = Command::new(&serial_bin);
        gen_cmd
            .args(["gen", "--n", &CLI_POINTS.to_string()])
            .args(case.gen_args)
            .arg("-o")
            .arg(&points);
        run(gen_cmd)?;
        first_points.get_or_insert_with(|| points.clone());
        let mut part_args: Vec<String> = vec!["partition".into(), path_arg(&points)?];
        match case.sizes {
            Some(text) => {
                let sizes = dir.join(format!("{}-sizes.txt", case.name));
                std::fs::write(&sizes, text)
                    .with_context(|| format!("writing {}", sizes.display()))?;
                part_args.extend(["--sizes".into(), path_arg(&sizes)?]);
            }
            None => part_args.extend(["--parts".into(), case.equal_parts.to_string()]),
        }
        let serial_out = dir.join(format!("{}-serial.u32", case.name));
        remove_stale(&serial_out)?;
        let mut serial = Command::new(&serial_bin);
        serial.args(&part_args).arg("--out").arg(&serial_out);
        eprintln!("xtask: [{:7.1} s] running {serial:?}", crate::elapsed_s());
        let res = serial
            .output()
            .with_context(|| format!("could not start {serial:?}"))?;
        let report = String::from_utf8_lossy(&res.stdout);
        print!("{report}");
        if !res.status.success() {
            bail!(
                "{serial:?} failed with {}:\n{}",
                res.status,
                String::from_utf8_lossy(&res.stderr)
            );
        }
        // The reference must come from the build without MPI (cargo puts both builds at the
        // same path): its report names no ranks.
        if report.contains("rank(s)") {
            bail!(
                "{} is not the serial build: it reports ranks",
                serial_bin.display()
            );
        }
        let want = read_fresh(&serial_out)?;
        if want.len() as u64 != 4 * CLI_POINTS {
            bail!(
                "{}: {} bytes, expected 4 per point",
                serial_out.display(),
                want.len()
            );
        }
        for np in RANKS {
            let out = dir.join(format!("{}-np{np}.u32", case.name));
            remove_stale(&out)?;
            let mut args = part_args.clone();
            args.extend(["--out".into(), path_arg(&out)?, "--json".into()]);
            let res = launcher.run(&mpi_bin, np, &args)?;
            if !res.success {
                bail!(
                    "hsfc partition {} failed under mpirun -np {np}:\n{}",
                    case.name,
                    res.stderr
                );
            }
            check_report(&res.stdout, np)
                .with_context(|| format!("hsfc partition {} under mpirun -np {np}", case.name))?;
            let got = read_fresh(&out)?;
            if let Some(i) = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)) {
                bail!(
                    "hsfc partition {}: mpirun -np {np} wrote {} bytes, the serial run {}; \
                     first difference at byte {i} (point {})",
                    case.name,
                    got.len(),
                    want.len(),
                    i / 4
                );
            }
            println!(
                "xtask: hsfc partition {} ({CLI_POINTS} points): mpirun -np {np}: {} bytes \
                 fnv1a64 {:016x} = serial: {} bytes fnv1a64 {:016x}: byte-identical",
                case.name,
                got.len(),
                fnv1a64(&got),
                want.len(),
                fnv1a64(&want)
            );
        }
    }

    // Bad data on the last rank only (its last point) and a missing file end the job with a
    // message naming the rank and the place.
    let points = first_points.expect("CLI_CASES is not empty");
    let nan = dir.join("nan-last-point.zpt");
    write_with_nan_last(&points, &nan)?;
    let missing = dir.join("no-such-file.zpt");
    remove_stale(&missing)?;
    let failures = [
        (
            &nan,
            4,
            "NaN in the last point",
            vec![
                "Error: rank 3 of 4: partitioning".to_string(),
                "(rank 3 of 4 holds points 150000..200000): point 49999: coordinate 0 is NaN"
                    .to_string(),
                "1 other rank(s) had invalid input".to_string(),
            ],
        ),
        (
            &missing,
            2,
            "missing file",
            vec![format!(
                "Error: rank 1 of 2: reading the points: {}: No such file",
                missing.display()
            )],
        ),
    ];
    for (file, np, what, needles) in &failures {
        let res = launcher.run(
            &mpi_bin,
            *np,
            &["partition", &path_arg(file)?, "--parts", "3"],
        )?;
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        expect_failure(&res, &format!("hsfc partition ({what})"), &needles)?;
    }
    println!(
        "xtask: hsfc CLI under MPI checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(points)
}

/// Machines of the hierarchical check: (file, ranks). hier-lbmethods has HSFC, RCB and RIB
/// levels and an SMP that splits among its processes.
const HIER_MACHINES: [(&str, usize); 2] = [
    ("machines/local-2core-hetero.xml", 2),
    ("machines/hier-lbmethods.xml", 11),
];

/// `hier-part partition --backend mpi` under `mpirun -np R` (one process per machine rank,
/// each reading its slice of the points) writes the serial command's parts file byte for
/// byte; a rank count that does not match the machine ends the job with a message.
fn hier_checks(launcher: &Launcher, points: &Path) -> Result<()> {
    let started = Instant::now();
    let dir = target_dir().join("mpi-cli");
    let (serial_bin, mpi_bin) = (CheckBins::serial("hier-part"), CheckBins::mpi("hier-part"));
    for (machine, np) in HIER_MACHINES {
        let machine_path = path_arg(&project_root().join(machine))?;
        let name = Path::new(machine)
            .file_stem()
            .and_then(OsStr::to_str)
            .unwrap_or("machine");
        let serial_out = dir.join(format!("hier-{name}-serial.u32"));
        let mpi_out = dir.join(format!("hier-{name}-np{np}.u32"));
        remove_stale(&serial_out)?;
        remove_stale(&mpi_out)?;
        let base = ["partition", "--machine", &machine_path, &path_arg(points)?];
        let mut serial = Command::new(&serial_bin);
        serial.args(base).arg("--out").arg(&serial_out);
        run(serial)?;
        let want = read_fresh(&serial_out)?;
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        args.extend(
            ["--backend", "mpi", "--json", "--out", &path_arg(&mpi_out)?].map(String::from),
        );
        let res = launcher.run(&mpi_bin, np, &args)?;
        if !res.success {
            bail!(
                "hier-part partition {name} failed under mpirun -np {np}:\n{}",
                res.stderr
            );
        }
        let lines: Vec<&str> = res
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let [line] = lines.as_slice() else {
            bail!(
                "hier-part under mpirun: expected rank 0's JSON line, got:\n{}",
                res.stdout
            );
        };
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("not JSON: {line}"))?;
        if v["ranks"] != np || v["backend"] != "mpi" || v["n"] != CLI_POINTS {
            bail!("hier-part under mpirun -np {np} reports: {line}");
        }
        let got = read_fresh(&mpi_out)?;
        if got != want {
            bail!(
                "hier-part partition {name}: mpirun -np {np} wrote {} bytes (fnv1a64 {:016x}), \
                 the serial run {} (fnv1a64 {:016x})",
                got.len(),
                fnv1a64(&got),
                want.len(),
                fnv1a64(&want)
            );
        }
        println!(
            "xtask: hier-part partition {name} ({CLI_POINTS} points): mpirun -np {np}: {} bytes \
             fnv1a64 {:016x} = serial: byte-identical",
            got.len(),
            fnv1a64(&got)
        );
    }
    let (machine, np) = HIER_MACHINES[0];
    let machine_path = path_arg(&project_root().join(machine))?;
    let res = launcher.run(
        &mpi_bin,
        np + 1,
        &[
            "partition",
            "--machine",
            &machine_path,
            &path_arg(points)?,
            "--backend",
            "mpi",
        ],
    )?;
    expect_failure(
        &res,
        "hier-part partition (wrong rank count)",
        &[&format!(
            "Error: rank {np} of {}: mpirun started {} ranks but",
            np + 1,
            np + 1
        )],
    )?;
    println!(
        "xtask: hier-part CLI under MPI checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn path_arg(p: &Path) -> Result<String> {
    p.to_str()
        .map(str::to_string)
        .with_context(|| format!("{} is not UTF-8", p.display()))
}

/// Removes a file left by an earlier run, so that a run that writes nothing cannot pass.
fn remove_stale(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", p.display()))
        }
        _ => Ok(()),
    }
}

fn read_fresh(p: &Path) -> Result<Vec<u8>> {
    std::fs::read(p).with_context(|| format!("reading {}", p.display()))
}

/// Rank 0 alone prints the JSON report, and it names the rank count and the whole file.
fn check_report(stdout: &str, np: usize) -> Result<()> {
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let [line] = lines.as_slice() else {
        bail!(
            "expected one JSON line (rank 0's report), got {}:\n{stdout}",
            lines.len()
        );
    };
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("not JSON: {line}"))?;
    if v["ranks"] != np || v["n"] != CLI_POINTS {
        bail!(
            "the report says ranks {} and n {}: {line}",
            v["ranks"],
            v["n"]
        );
    }
    Ok(())
}

/// Copies the ZPT1 file `from` to `to` with the first coordinate of its last point set to NaN.
fn write_with_nan_last(from: &Path, to: &Path) -> Result<()> {
    let mut bytes = read_fresh(from)?;
    let field = |o: usize, len: usize| -> Result<u64> {
        let b = bytes
            .get(o..o + len)
            .with_context(|| format!("{}: header truncated", from.display()))?;
        Ok(b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    };
    let (dim, n) = (field(4, 4)?, field(16, 8)?);
    let at = usize::try_from(24 + (n - 1) * dim * 8)?;
    bytes
        .get_mut(at..at + 8)
        .with_context(|| format!("{}: shorter than its header says", from.display()))?
        .copy_from_slice(&f64::NAN.to_le_bytes());
    std::fs::write(to, bytes).with_context(|| format!("writing {}", to.display()))
}

/// 64-bit FNV-1a of `bytes` (a short fingerprint to print; equality is checked on the bytes).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The run must have failed, saying each of `needles` on stderr.
fn expect_failure(out: &RunOutput, what: &str, needles: &[&str]) -> Result<()> {
    if out.success {
        bail!("{what} exited successfully; it must fail");
    }
    if let Some(needle) = needles.iter().find(|n| !out.stderr.contains(*n)) {
        bail!("{what} failed without saying `{needle}`:\n{}", out.stderr);
    }
    println!("xtask: {what} ended the job as it should ({})", out.status);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_reference_values() {
        // From the FNV reference (Fowler, Noll, Vo): "" and "a".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_report_must_come_from_rank_0_alone() {
        let good = format!("{{\"n\":{CLI_POINTS},\"ranks\":4}}\n");
        assert!(check_report(&good, 4).is_ok());
        let e = check_report(&good, 2).unwrap_err().to_string();
        assert!(e.starts_with("the report says ranks 4"), "{e}");
        let e = check_report(&(good.clone() + &good), 4)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("expected one JSON line"), "{e}");
        assert!(check_report("table\n", 4).is_err());
    }

    #[test]
    fn nan_goes_into_the_last_point() {
        let dir = std::env::temp_dir().join(format!("xtask-mpi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.zpt"), dir.join("b.zpt"));
        let mut file = b"ZPT1".to_vec();
        for v in [2u32, 0, 0] {
            file.extend(v.to_le_bytes());
        }
        file.extend(3u64.to_le_bytes());
        for i in 0..6 {
            file.extend(f64::from(i).to_le_bytes());
        }
        std::fs::write(&a, &file).unwrap();
        write_with_nan_last(&a, &b).unwrap();
        let got = std::fs::read(&b).unwrap();
        assert_eq!(got[..24 + 32], file[..24 + 32]);
        assert!(f64::from_le_bytes(got[56..64].try_into().unwrap()).is_nan());
        assert_eq!(got[64..], file[64..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
