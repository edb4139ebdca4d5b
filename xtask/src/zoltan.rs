//! `libzoltan_drum` tested as a user would (part of `cargo xtask ci`'s MPI checks) and timed
//! (`cargo xtask bench zoltan`): the C programs of `crates/zoltan-drum/c/` are compiled with
//! `mpicc` against the real Zoltan (Debian's `libtrilinos-zoltan-dev`: `zoltan.h` under
//! `/usr/include/trilinos`, `-ltrilinos_zoltan`) and against ours, and run under `mpirun`.

use crate::bench::median;
use crate::launch::{self, Launcher, find_on_path};
use crate::target_dir;
use crate::{cargo, project_root, run};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

const ZOLTAN_INCLUDE: &str = "/usr/include/trilinos";
const ZOLTAN_HINT: &str = "apt-get install libtrilinos-zoltan-dev";

/// The two libraries a program is linked with.
#[derive(Clone, Copy, PartialEq)]
enum Lib {
    Zoltan,
    Ours,
}

impl Lib {
    fn name(self) -> &'static str {
        match self {
            Lib::Zoltan => "zoltan",
            Lib::Ours => "zoltan-drum",
        }
    }
}

fn crate_dir() -> PathBuf {
    project_root().join("crates/zoltan-drum")
}

/// Whether the real Zoltan's header and library are installed.
fn real_zoltan() -> bool {
    Path::new(ZOLTAN_INCLUDE).join("zoltan.h").is_file()
}

/// Builds `libzoltan_drum` (debug; already built by `CheckBins::build_mpi`); returns the
/// folder it is in.
fn build_lib() -> Result<PathBuf> {
    let mut build = cargo();
    build.arg("build");
    launch::mpi_selection(&mut build);
    build.arg("--lib");
    run(build)?;
    Ok(target_dir().join("debug"))
}

/// `mpicc` compiles `source` (in `crates/zoltan-drum/c/`) into `out` against `lib`.
fn compile(source: &str, out: &Path, lib: Lib, libdir: &Path) -> Result<()> {
    let mpicc = std::env::var_os("MPICC")
        .map(PathBuf::from)
        .or_else(|| find_on_path("mpicc"))
        .context("mpicc not found")?;
    let mut cmd = Command::new(mpicc);
    cmd.args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(crate_dir().join("c").join(source))
        .arg("-o")
        .arg(out);
    match lib {
        Lib::Zoltan => {
            cmd.arg(format!("-I{ZOLTAN_INCLUDE}"))
                .arg("-ltrilinos_zoltan");
        }
        Lib::Ours => {
            cmd.arg(format!("-I{}", crate_dir().join("include").display()))
                .arg(format!("-L{}", libdir.display()))
                .arg("-lzoltan_drum")
                .arg(format!("-Wl,-rpath,{}", libdir.display()));
        }
    }
    cmd.arg("-lm");
    run(cmd)
}

/// The lines a run printed that start with `same:`.
fn same_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("same:")).collect()
}

/// Cases run against both libraries: (method, dimension, points).
const BOTH: [(&str, &str, &str); 3] = [
    ("HSFC", "3", "40000"),
    ("RCB", "2", "40000"),
    ("RIB", "3", "40000"),
];

/// `ci`'s Zoltan part: the library's own tests and API documentation (it needs MPI, so the
/// workspace's test and doc steps leave it out), the declarations against the real
/// `zoltan.h`, `zoltan_check` against both libraries under `mpirun -np 2` and `-np 4` (the
/// `same:` lines equal), with DRUM's sizes and HIER (ours), and the `drum.h` loop program.
pub(crate) fn ci_zoltan(launcher: &Launcher, ci: bool) -> Result<()> {
    // The MPI part's selection (nothing below recompiles): zoltan-drum's tests, and comm's
    // unit tests with its MPI backend.
    let mut test = cargo();
    test.arg("test");
    launch::mpi_selection(&mut test);
    test.args(["--lib", "--test", "header", "--test", "zoltan_api"])
        .env("INSTA_UPDATE", "no");
    run(test)?;
    let mut doc = cargo();
    doc.args(["doc", "--no-deps"]);
    launch::mpi_selection(&mut doc);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    run(doc)?;
    let have_zoltan = real_zoltan();
    if !have_zoltan {
        if ci {
            bail!(
                "the Zoltan comparison is required with CI=true, but {ZOLTAN_INCLUDE}/zoltan.h is missing ({ZOLTAN_HINT})"
            );
        }
        println!(
            "skipping the comparison with the real Zoltan: {ZOLTAN_INCLUDE}/zoltan.h is missing ({ZOLTAN_HINT})"
        );
    }
    let libdir = build_lib()?;
    let dir = target_dir().join("zoltan-c");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if have_zoltan {
        let abi = dir.join("abi_check");
        let mut cmd = Command::new(
            std::env::var_os("MPICC")
                .map(PathBuf::from)
                .or_else(|| find_on_path("mpicc"))
                .context("mpicc not found")?,
        );
        cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{ZOLTAN_INCLUDE}"))
            .arg(crate_dir().join("c/abi_check.c"))
            .arg("-o")
            .arg(&abi)
            .arg(format!("-L{}", libdir.display()))
            .arg("-lzoltan_drum")
            .arg(format!("-Wl,-rpath,{}", libdir.display()));
        run(cmd)?;
        run(Command::new(&abi))?;
    }
    let ours = dir.join("zoltan_check-ours");
    compile("zoltan_check.c", &ours, Lib::Ours, &libdir)?;
    let real = dir.join("zoltan_check-zoltan");
    if have_zoltan {
        compile("zoltan_check.c", &real, Lib::Zoltan, &libdir)?;
    }
    for np in [2, 4] {
        for (method, dim, n) in BOTH {
            let args = [method, dim, n];
            let got = check_run(launcher, &ours, np, &args, Lib::Ours)?;
            if have_zoltan {
                let want = check_run(launcher, &real, np, &args, Lib::Zoltan)?;
                if same_lines(&got) != same_lines(&want) {
                    bail!(
                        "zoltan_check {method} {dim}-D, mpirun -np {np}: zoltan-drum and Zoltan \
                         differ:\n{got}\n{want}"
                    );
                }
                println!(
                    "xtask: zoltan_check {method} {dim}-D {n} objects, mpirun -np {np}: Zoltan and \
                     zoltan-drum pass the same checks"
                );
            }
        }
    }
    drum_checks(launcher, &ours)?;
    drum_loop_program(launcher, &dir, &libdir)
}

/// Runs `zoltan_check` with `lib`; it must pass. Its stdout.
fn check_run(
    launcher: &Launcher,
    exe: &Path,
    np: usize,
    args: &[&str],
    lib: Lib,
) -> Result<String> {
    let res = launcher.run(exe, np, args)?;
    if !res.success || !res.stdout.contains("same: checks passed") {
        bail!(
            "zoltan_check {} against {} failed under mpirun -np {np}:\n{}",
            args.join(" "),
            lib.name(),
            res.stderr
        );
    }
    Ok(res.stdout)
}

/// `USE_DRUM=1`: the partition follows DRUM's static sizes of the test machines (HSFC, RCB,
/// HIER), and with monitoring it runs and balances.
fn drum_checks(launcher: &Launcher, ours: &Path) -> Result<()> {
    let machine = |f: &str| crate_dir().join("c").join(f).display().to_string();
    let (m2, m4) = (machine("hetero-2.xml"), machine("hetero-4.xml"));
    let cases: [(usize, Vec<&str>); 4] = [
        (2, vec!["HSFC", "2", "30000", "--drum", &m2, "0.25,0.75"]),
        (
            2,
            vec!["RCB", "3", "30000", "--drum", &m2, "0.25,0.75", "--monitor"],
        ),
        (
            4,
            vec!["RCB", "2", "30000", "--drum", &m4, "0.125,0.125,0.25,0.5"],
        ),
        (
            4,
            vec!["HIER", "2", "30000", "--drum", &m4, "0.125,0.125,0.25,0.5"],
        ),
    ];
    for (np, args) in &cases {
        check_run(launcher, ours, *np, args, Lib::Ours)?;
        println!(
            "xtask: zoltan_check {} under mpirun -np {np}: DRUM's part sizes honoured",
            args.join(" ")
        );
    }
    Ok(())
}

/// `drum_loop.c` (DRUM's own C API) under `mpirun -np 2`: it runs the loop on a toy
/// computation and checks what it gets.
fn drum_loop_program(launcher: &Launcher, dir: &Path, libdir: &Path) -> Result<()> {
    let exe = dir.join("drum_loop");
    compile("drum_loop.c", &exe, Lib::Ours, libdir)?;
    let machine = crate_dir().join("c/hetero-2.xml");
    let res = launcher.run(&exe, 2, &[machine.display().to_string()])?;
    if !res.success || !res.stdout.contains("drum_loop: passed") {
        bail!(
            "drum_loop failed under mpirun -np 2:\n{}{}",
            res.stdout,
            res.stderr
        );
    }
    println!("xtask: drum_loop (drum.h) under mpirun -np 2: passed");
    Ok(())
}

/// `cargo xtask bench zoltan [--n N] [--repeats R]`.
pub(crate) fn bench_zoltan(args: &[String]) -> Result<()> {
    let (mut n, mut repeats) = (1_000_000u64, 5usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--n" => n = value()?.parse::<f64>().context("--n")? as u64,
            "--repeats" => repeats = value()?.parse().context("--repeats")?,
            other => bail!("unknown flag {other} (bench zoltan takes --n N and --repeats R)"),
        }
    }
    if !real_zoltan() {
        bail!(
            "bench zoltan compares with the real Zoltan: {ZOLTAN_INCLUDE}/zoltan.h is missing ({ZOLTAN_HINT})"
        );
    }
    let mpirun =
        find_on_path("mpirun").context("mpirun not found (apt-get install openmpi-bin)")?;
    let launcher = Launcher::detect(&mpirun)?;
    let libdir = crate::release(&["-p", "zoltan-drum"])?;
    let dir = target_dir().join("bench-zoltan");
    std::fs::create_dir_all(&dir)?;
    let exes = [
        (Lib::Zoltan, dir.join("zoltan_bench-zoltan")),
        (Lib::Ours, dir.join("zoltan_bench-ours")),
    ];
    for (lib, exe) in &exes {
        compile("zoltan_bench.c", exe, *lib, &libdir)?;
    }
    println!(
        "bench zoltan: {n} points, mpirun -np 2, {repeats} runs each, alternating; load average {}",
        crate::bench::uptime()
    );
    for (method, dim) in [("HSFC", "2"), ("RCB", "2")] {
        // [library][wall, CPU, page faults]
        let mut runs = [
            [Vec::new(), Vec::new(), Vec::new()],
            [Vec::new(), Vec::new(), Vec::new()],
        ];
        for _ in 0..repeats {
            for (i, (_, exe)) in exes.iter().enumerate() {
                let res = launcher.run(exe, 2, &[method, dim, &n.to_string(), "1"])?;
                if !res.success {
                    bail!("{} failed:\n{}", exe.display(), res.stderr);
                }
                let line = |key: &str| -> Result<Vec<f64>> {
                    let l = res.stdout.lines().find_map(|l| l.strip_prefix(key));
                    let l = l.with_context(|| format!("no `{key}` line"))?;
                    l.split_whitespace()
                        .map(|x| x.parse::<f64>().context("a number"))
                        .collect()
                };
                let (t, c) = (line("time ")?, line("cpu ")?);
                runs[i][0].push(t[0]);
                runs[i][1].push(c[0]);
                runs[i][2].push(c[1]);
            }
        }
        let m = |i: usize, k: usize| median(&runs[i][k]);
        println!(
            "bench zoltan: {method} {dim}-D: Zoltan median {:.4} s, zoltan-drum median {:.4} s, \
             ratio Zoltan/zoltan-drum {:.2} (target >= 5); CPU of the slowest rank: Zoltan \
             {:.4} s, zoltan-drum {:.4} s, ratio {:.2}; page faults {:.0} and {:.0}",
            m(0, 0),
            m(1, 0),
            m(0, 0) / m(1, 0),
            m(0, 1),
            m(1, 1),
            m(0, 1) / m(1, 1),
            m(0, 2),
            m(1, 2)
        );
    }
    Ok(())
}
