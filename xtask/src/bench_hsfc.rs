//! `cargo xtask bench hsfc [--quick]`: our `hsfc` CLI against the real Zoltan HSFC (the peer
//! driver in `../shared/peers/zoltan`, built here with make) and coupe 0.1.0's Hilbert curve,
//! on the same generated point files. Prints one table: time medians, the ratios
//! Zoltan/ours (1 thread) and ours 1 thread / 2 threads, and every run's max_rel_dev.
//!
//! Everything it makes lives in `target/bench-hsfc/` (data files are reused when present).

use crate::{cargo, project_root, run};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One input set: distribution, size, weights.
struct Input {
    dist: &'static str,
    n: &'static str,
    weights: &'static str,
}

/// Part sizes, as in the peer's `make_inputs.sh`.
const SIZES: [(&str, &str); 5] = [
    ("u8", "8 equal"),
    ("u64", "64 equal"),
    ("fs8", "8, fast:slow 1.5:1 interleaved"),
    ("fs64", "64, fast:slow 1.5:1 interleaved"),
    ("q4", "16/19/31/34 %"),
];

fn sizes_of(name: &str) -> Vec<f64> {
    match name {
        "u8" => vec![1.0; 8],
        "u64" => vec![1.0; 64],
        "fs8" => (0..8).map(|i| if i % 2 == 0 { 1.5 } else { 1.0 }).collect(),
        "fs64" => (0..64)
            .map(|i| if i % 2 == 0 { 1.5 } else { 1.0 })
            .collect(),
        "q4" => vec![16.0, 19.0, 31.0, 34.0],
        _ => unreachable!("sizes name from SIZES"),
    }
}

/// A measured run: median time (s) and max |W_k/T_k − 1|.
#[derive(Clone, Copy)]
pub(crate) struct Run {
    pub(crate) time: f64,
    pub(crate) dev: f64,
}

pub(crate) fn bench_hsfc(args: &[String]) -> Result<()> {
    let mut quick = false;
    for a in args {
        match a.as_str() {
            "--quick" => quick = true,
            other => bail!("bench hsfc: unknown argument `{other}` (usage: bench hsfc [--quick])"),
        }
    }
    let root = project_root();
    let work = root.join("target/bench-hsfc");
    std::fs::create_dir_all(work.join("data")).context("creating target/bench-hsfc")?;

    // Our binaries (and the coupe peer), release.
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "hsfc-cli",
        "--features",
        "coupe",
        "--bins",
    ]);
    run(build)?;
    let ours = root.join("target/release/hsfc");
    let coupe = root.join("target/release/hsfc-coupe");

    let zdriver = build_zoltan(&root, &work)?;

    let ns: &[&str] = if quick { &["1e6"] } else { &["1e6", "4e6"] };
    let sizes: Vec<&str> = if quick {
        vec!["u64", "q4"]
    } else {
        SIZES.iter().map(|s| s.0).collect()
    };
    let reps = if quick { 3 } else { 9 };
    for (name, _) in SIZES {
        let path = work.join(format!("data/sizes_{name}.txt"));
        let text: String = sizes_of(name).iter().map(|v| format!("{v}\n")).collect();
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }

    let mut inputs = Vec::new();
    for &n in ns {
        for dist in ["uniform", "graded"] {
            for weights in ["unit", "random"] {
                inputs.push(Input { dist, n, weights });
            }
        }
    }
    let load = uptime();
    eprintln!("xtask: machine load before: {load}");
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| n | dist | weights | sizes | ours 1t ms | ours 2t ms | Zoltan ms | coupe ms | Zoltan/ours | 1t/2t | dev ours | dev Zoltan | dev coupe |"
    );
    let _ = writeln!(
        table,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut ratios = Vec::new();
    let mut speedups = Vec::new();
    let mut at_limit = true;
    for inp in &inputs {
        let file = work.join(format!(
            "data/{}_{}_{}.zpt",
            &inp.dist[..1],
            inp.n,
            inp.weights
        ));
        if !file.exists() {
            let mut g = Command::new(&ours);
            g.args([
                "gen",
                "--n",
                inp.n,
                "--dist",
                inp.dist,
                "--weights",
                inp.weights,
                "--seed",
                "12345",
                "-o",
            ])
            .arg(&file);
            run(g)?;
        }
        for &s in &sizes {
            let sizes_file = work.join(format!("data/sizes_{s}.txt"));
            let (o1, lim1) = run_ours(&ours, &file, &sizes_file, 1, reps)?;
            let (o2, lim2) = run_ours(&ours, &file, &sizes_file, 2, reps)?;
            at_limit &= lim1 && lim2;
            let z = run_zoltan(&zdriver, &file, &sizes_file, 3)?;
            let c = match s.strip_prefix('u') {
                Some(k) => Some(run_coupe(&coupe, &file, k, reps)?),
                None => None,
            };
            let ratio = z.time / o1.time;
            let speedup = o1.time / o2.time;
            ratios.push(ratio);
            speedups.push(speedup);
            let _ = writeln!(
                table,
                "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.2} | {:.1e} | {:.1e} | {} |",
                inp.n,
                inp.dist,
                inp.weights,
                s,
                o1.time * 1e3,
                o2.time * 1e3,
                z.time * 1e3,
                c.map_or("-".to_string(), |c| format!("{:.1}", c.time * 1e3)),
                ratio,
                speedup,
                o1.dev,
                z.dev,
                c.map_or("-".to_string(), |c| format!("{:.1e}", c.dev)),
            );
            eprint!(".");
        }
    }
    eprintln!();
    println!(
        "hsfc bench: time = median of the partition call alone ({reps} repeats ours/coupe, 3 Zoltan);"
    );
    println!(
        "dev = max_k |W_k/T_k - 1|; ours 1t/2t = threads; Zoltan = zdriver -m HSFC on 1 rank;"
    );
    println!("coupe 0.1.0 HilbertCurve (order 31, equal parts only, RAYON_NUM_THREADS=1).");
    println!("load before: {load}; after: {}", uptime());
    println!();
    print!("{table}");
    println!();
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (rmin, rmed) = (
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        med(&mut ratios.clone()),
    );
    let (smin, smed) = (
        speedups.iter().copied().fold(f64::INFINITY, f64::min),
        med(&mut speedups.clone()),
    );
    println!("Zoltan/ours (1 thread): min {rmin:.1}, median {rmed:.1}   (target >= 10)");
    println!("ours 1t/2t:             min {smin:.2}, median {smed:.2}   (target >= 1.7)");
    println!(
        "balance at the limit (|W_k - T_k| <= largest weight, every part, every run): {}",
        if at_limit { "yes" } else { "NO" }
    );
    Ok(())
}

pub(crate) fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Copies the peer driver into target/ and builds it; a clear error when Zoltan is missing.
pub(crate) fn build_zoltan(root: &Path, work: &Path) -> Result<PathBuf> {
    let peer = root.join("../shared/peers/zoltan");
    if !peer.join("zdriver.c").exists() {
        bail!(
            "the Zoltan peer driver is missing: expected {}",
            peer.join("zdriver.c").display()
        );
    }
    let have_zoltan = Path::new("/usr/include/trilinos/zoltan.h").exists();
    let have_mpicc = Command::new("mpicc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_zoltan || !have_mpicc {
        bail!(
            "Zoltan or MPI is not installed (need /usr/include/trilinos/zoltan.h and mpicc).\n\
             Install them with: apt-get install libtrilinos-zoltan-dev openmpi-bin libopenmpi-dev make"
        );
    }
    let dir = work.join("zoltan");
    std::fs::create_dir_all(&dir)?;
    for f in ["zdriver.c", "Makefile"] {
        std::fs::copy(peer.join(f), dir.join(f)).with_context(|| format!("copying {f}"))?;
    }
    let mut make = Command::new("make");
    make.current_dir(&dir).arg("zdriver");
    run(make)?;
    Ok(dir.join("zdriver"))
}

fn json_field(line: &str, key: &str) -> Result<f64> {
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("parsing `{line}`"))?;
    v[key]
        .as_f64()
        .with_context(|| format!("no number `{key}` in `{line}`"))
}

pub(crate) fn output(mut cmd: Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs our CLI; also checks the balance limit on every part.
pub(crate) fn run_ours(
    bin: &Path,
    file: &Path,
    sizes: &Path,
    threads: usize,
    reps: usize,
) -> Result<(Run, bool)> {
    let mut cmd = Command::new(bin);
    cmd.arg("partition").arg(file).arg("--sizes").arg(sizes);
    cmd.args([
        "--threads",
        &threads.to_string(),
        "--repeat",
        &reps.to_string(),
        "--json",
    ]);
    let line = output(cmd)?;
    let v: serde_json::Value = serde_json::from_str(line.trim()).context("parsing hsfc --json")?;
    let num = |k: &str| {
        v[k].as_f64()
            .with_context(|| format!("hsfc --json lacks {k}"))
    };
    let arr = |k: &str| -> Result<Vec<f64>> {
        v[k].as_array()
            .with_context(|| format!("hsfc --json lacks {k}"))?
            .iter()
            .map(|x| x.as_f64().context("number"))
            .collect()
    };
    let (w, t, wmax) = (arr("weights")?, arr("targets")?, num("max_weight")?);
    let slack = 1e-9 * w.iter().sum::<f64>();
    let at_limit = w.iter().zip(&t).all(|(a, b)| (a - b).abs() <= wmax + slack);
    Ok((
        Run {
            time: num("time_s")?,
            dev: num("max_rel_dev")?,
        },
        at_limit,
    ))
}

fn run_zoltan(bin: &Path, file: &Path, sizes: &Path, reps: usize) -> Result<Run> {
    let mut cmd = Command::new(bin);
    cmd.arg("-i")
        .arg(file)
        .args(["-m", "HSFC", "-s"])
        .arg(sizes)
        .args(["-r", &reps.to_string()]);
    zoltan_result(cmd)
}

/// Runs a `zdriver` command and reads `t_med` and `max_rel_dev` from its RESULT line.
pub(crate) fn zoltan_result(cmd: Command) -> Result<Run> {
    let out = output(cmd)?;
    let line = out
        .lines()
        .find(|l| l.starts_with("RESULT"))
        .with_context(|| format!("no RESULT line from zdriver:\n{out}"))?;
    let field = |k: &str| -> Result<f64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .with_context(|| format!("zdriver RESULT lacks {k}: {line}"))?
            .parse()
            .with_context(|| format!("zdriver {k} is not a number: {line}"))
    };
    Ok(Run {
        time: field("t_med")?,
        dev: field("max_rel_dev")?,
    })
}

fn run_coupe(bin: &Path, file: &Path, k: &str, reps: usize) -> Result<Run> {
    let mut cmd = Command::new(bin);
    cmd.arg(file)
        .args([k, &reps.to_string(), "31"])
        .env("RAYON_NUM_THREADS", "1");
    let line = output(cmd)?;
    Ok(Run {
        time: json_field(line.trim(), "time_s")?,
        dev: json_field(line.trim(), "max_rel_dev")?,
    })
}
