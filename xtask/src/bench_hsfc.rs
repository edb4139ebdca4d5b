//! `cargo xtask bench hsfc [--quick]`: our `hsfc` CLI against the real Zoltan HSFC (the peer
//! driver in `../shared/peers/zoltan`, built here with make) and coupe 0.1.0's Hilbert curve,
//! on the same generated point files: 2-D uniform and corner-graded sets, and 3-D
//! corner-graded ones (8 to 1,024 parts). Prints one table: time medians, the ratios
//! Zoltan/ours and ours/Zoltan (1 thread) and ours 1 thread / 2 threads, and every run's
//! max_rel_dev, all measured in one run. Each row runs in rounds (ours on 1 and 2 threads,
//! Zoltan, coupe, one right after the other), and its ratios are the medians of the rounds'
//! ratios, so that the host's drifts hit both sides of a ratio alike. Before the runs,
//! `hsfc bandwidth` measures the host's triad on one CPU and on two: their ratio, printed
//! beside 1t/2t, is the most a second thread can gain in a pass that streams memory here.
//!
//! `--simd scalar|avx2|avx512` runs our CLI with `HSFC_SIMD` set to it (a machine with
//! AVX-512 measured as one without it would run); the table's footer names the path every run
//! reported (`hsfc --json`'s `simd`), and a run that reports another is an error.
//!
//! Everything it makes lives in `target/bench-hsfc/` (data files are reused when present).

use crate::bench::{
    Run, build_zoltan, json, json_run, median, min_max, num, output, uptime, zoltan_result,
};
use crate::{project_root, run};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// One input set: dimension, distribution, size, weights.
struct Input {
    dim: u8,
    dist: &'static str,
    n: &'static str,
    weights: &'static str,
}

/// Part sizes, as in the peer's `make_inputs.sh`, and for the 3-D rows 64 graded sizes
/// (1, 1.5, 2, …, 32.5) and 1,024 equal parts.
const SIZES: [(&str, &str); 7] = [
    ("u8", "8 equal"),
    ("u64", "64 equal"),
    ("fs8", "8, fast:slow 1.5:1 interleaved"),
    ("fs64", "64, fast:slow 1.5:1 interleaved"),
    ("q4", "16/19/31/34 %"),
    ("g64", "64 graded, 1 + i/2"),
    ("u1024", "1024 equal"),
];

fn sizes_of(name: &str) -> Vec<f64> {
    match name {
        "u8" => vec![1.0; 8],
        "u64" => vec![1.0; 64],
        "u1024" => vec![1.0; 1024],
        "fs8" => (0..8).map(|i| if i % 2 == 0 { 1.5 } else { 1.0 }).collect(),
        "fs64" => (0..64)
            .map(|i| if i % 2 == 0 { 1.5 } else { 1.0 })
            .collect(),
        "q4" => vec![16.0, 19.0, 31.0, 34.0],
        "g64" => (0..64).map(|i| 1.0 + 0.5 * f64::from(i)).collect(),
        _ => unreachable!("sizes name from SIZES"),
    }
}

/// Rounds per row: ours (1 and 2 threads), Zoltan and coupe once each per round.
const ROUNDS: usize = 3;

const USAGE: &str = "usage: bench hsfc [--quick] [--simd scalar|avx2|avx512]";

pub(crate) fn bench_hsfc(args: &[String]) -> Result<()> {
    let mut quick = false;
    let mut simd: Option<&str> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--simd" => match it.next().map(String::as_str) {
                Some(v @ ("scalar" | "avx2" | "avx512")) => simd = Some(v),
                Some(v) => bail!("bench hsfc: --simd {v}: unknown path ({USAGE})"),
                None => bail!("bench hsfc: --simd needs a value ({USAGE})"),
            },
            other => bail!("bench hsfc: unknown argument `{other}` ({USAGE})"),
        }
    }
    let root = project_root();
    let work = root.join("target/bench-hsfc");
    std::fs::create_dir_all(work.join("data")).context("creating target/bench-hsfc")?;

    // Our binaries (and the coupe peer), release.
    let release = crate::release(&["-p", "hsfc-cli", "--features", "coupe", "--bins"])?;
    let ours = release.join("hsfc");
    let coupe = release.join("hsfc-coupe");

    let zdriver = build_zoltan(&root, &work)?;

    let ns: &[&str] = if quick { &["1e6"] } else { &["1e6", "4e6"] };
    // 2-D: the peer's sizes; 3-D graded: 8 to 1,024 parts.
    let sizes_2d: Vec<&str> = if quick {
        vec!["u64", "q4"]
    } else {
        vec!["u8", "u64", "fs8", "fs64", "q4"]
    };
    let sizes_3d: Vec<&str> = if quick {
        vec!["u8", "g64", "u1024"]
    } else {
        vec!["u8", "u64", "g64", "fs64", "q4", "u1024"]
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
                inputs.push(Input {
                    dim: 2,
                    dist,
                    n,
                    weights,
                });
            }
        }
    }
    for weights in ["unit", "random"] {
        inputs.push(Input {
            dim: 3,
            dist: "graded",
            n: "1e6",
            weights,
        });
    }
    let bw = crate::bench::bandwidth(&ours)?;
    let load = uptime();
    let steal = crate::bench::Steal::start();
    eprintln!("xtask: machine load before: {load}");
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| dim | n | dist | weights | sizes | ours 1t ms | ours 2t ms | Zoltan ms | coupe ms | Zoltan/ours | ours/Zoltan | 1t/2t | dev ours | dev Zoltan | dev coupe |"
    );
    let _ = writeln!(
        table,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut ratios = Vec::new();
    let mut ratios_3d = Vec::new();
    let mut speedups = Vec::new();
    let mut at_limit = true;
    for inp in &inputs {
        // 2-D files keep their old names (`u_1e6_unit.zpt`), so that existing data is reused.
        let dim = if inp.dim == 2 {
            String::new()
        } else {
            format!("{}d_", inp.dim)
        };
        let file = work.join(format!(
            "data/{dim}{}_{}_{}.zpt",
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
                "--dim",
                &inp.dim.to_string(),
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
        let sizes = if inp.dim == 2 { &sizes_2d } else { &sizes_3d };
        for &s in sizes {
            let sizes_file = work.join(format!("data/sizes_{s}.txt"));
            // Round-robin: each round runs ours on 1 and 2 threads, then Zoltan (and coupe),
            // one right after the other, so that the host's drifts (its speed moves by tens
            // of per cent over a minute) hit the ratios' two sides alike; a ratio is the
            // median of its rounds' ratios, a time the median of its rounds' times.
            let (mut o1s, mut o2s, mut zs, mut cs) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                let (o1, lim1) = run_ours(&ours, &file, &sizes_file, (1, simd), reps)?;
                let (o2, lim2) = run_ours(&ours, &file, &sizes_file, (2, simd), reps)?;
                at_limit &= lim1 && lim2;
                zs.push(run_zoltan(&zdriver, &file, &sizes_file, 1)?);
                // coupe's Hilbert curve is 2-D, equal parts only.
                if let Some(k) = s.strip_prefix('u').filter(|_| inp.dim == 2) {
                    cs.push(run_coupe(&coupe, &file, k, reps)?);
                }
                o1s.push(o1);
                o2s.push(o2);
            }
            let per = |a: &[Run], b: &[Run]| -> f64 {
                let r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a.time / b.time).collect();
                median(&r)
            };
            let (ratio, ours_over_z, speedup) = (per(&zs, &o1s), per(&o1s, &zs), per(&o1s, &o2s));
            let (o1, o2, z) = (over_rounds(&o1s), over_rounds(&o2s), over_rounds(&zs));
            let c = (!cs.is_empty()).then(|| over_rounds(&cs));
            if inp.dim == 2 {
                ratios.push(ratio);
            } else {
                ratios_3d.push(ours_over_z);
            }
            speedups.push(speedup);
            let _ = writeln!(
                table,
                "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {:.3} | {:.2} | {:.1e} | {:.1e} | {} |",
                inp.dim,
                inp.n,
                inp.dist,
                inp.weights,
                s,
                o1.time * 1e3,
                o2.time * 1e3,
                z.time * 1e3,
                c.map_or("-".to_string(), |c| format!("{:.1}", c.time * 1e3)),
                ratio,
                ours_over_z,
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
        "hsfc bench: time = median of the partition call alone over {ROUNDS} rounds (each: ours 1t, ours 2t, Zoltan, coupe,"
    );
    println!(
        "one after the other; ours and coupe the median of {reps} repeats in the round, Zoltan 1); ratios = medians of the rounds' ratios;"
    );
    println!(
        "dev = max_k |W_k/T_k - 1|; ours 1t/2t = threads; Zoltan = zdriver -m HSFC on 1 rank;"
    );
    println!("coupe 0.1.0 HilbertCurve (order 31, equal parts only, RAYON_NUM_THREADS=1).");
    println!(
        "load before: {load}; after: {}; {}",
        uptime(),
        steal.report()
    );
    println!("{} (measured before the runs)", bw.description);
    println!();
    print!("{table}");
    println!();
    let (rmin, _) = min_max(&ratios);
    let (smin, _) = min_max(&speedups);
    let (_, w3) = min_max(&ratios_3d);
    println!(
        "2-D, Zoltan/ours (1 thread): min {rmin:.1}, median {:.1}   (target >= 10)",
        median(&ratios)
    );
    println!(
        "3-D graded, ours/Zoltan (1 thread): worst {w3:.3}, median {:.3}   (target <= 0.10, goal <= 0.05)",
        median(&ratios_3d),
    );
    println!(
        "SIMD path of our runs: {} ({})",
        simd_paths(),
        simd.map_or("the best here; --simd chooses", |_| "asked with --simd")
    );
    println!(
        "ours 1t/2t: min {smin:.2}, median {:.2}   (target >= 1.7{})",
        median(&speedups),
        bw.against()
    );
    println!(
        "balance at the limit (|W_k - T_k| <= largest weight, every part, every run): {}",
        if at_limit { "yes" } else { "NO" }
    );
    Ok(())
}

/// One row's runs over its rounds (at least one): the median time, and the first round's
/// deviation (every run partitions alike).
fn over_rounds(runs: &[Run]) -> Run {
    Run {
        time: median(&runs.iter().map(|r| r.time).collect::<Vec<_>>()),
        dev: runs[0].dev,
    }
}

/// The SIMD paths our runs reported (`hsfc --json`'s `simd`).
static SIMD_PATHS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The SIMD paths our runs reported so far, joined.
fn simd_paths() -> String {
    let paths = SIMD_PATHS.lock().unwrap_or_else(|e| e.into_inner());
    if paths.is_empty() {
        return "not reported".to_string();
    }
    paths.join(", ")
}

/// Runs our CLI on `threads` threads, with `HSFC_SIMD=simd` when given (a run that reports
/// another path is an error); also checks the balance limit on every part.
pub(crate) fn run_ours(
    bin: &Path,
    file: &Path,
    sizes: &Path,
    (threads, simd): (usize, Option<&str>),
    reps: usize,
) -> Result<(Run, bool)> {
    let mut cmd = Command::new(bin);
    if let Some(s) = simd {
        cmd.env("HSFC_SIMD", s);
    }
    cmd.arg("partition").arg(file).arg("--sizes").arg(sizes);
    cmd.args([
        "--threads",
        &threads.to_string(),
        "--repeat",
        &reps.to_string(),
        "--json",
    ]);
    let v = json(&output(cmd)?)?;
    let arr = |k: &str| -> Result<Vec<f64>> {
        v[k].as_array()
            .with_context(|| format!("hsfc --json lacks {k}"))?
            .iter()
            .map(|x| x.as_f64().context("number"))
            .collect()
    };
    let path = v["simd"].as_str().context("hsfc --json lacks simd")?;
    if let Some(s) = simd
        && s != path
    {
        bail!(
            "asked for HSFC_SIMD={s}, but {} reports {path}",
            bin.display()
        );
    }
    let mut paths = SIMD_PATHS.lock().unwrap_or_else(|e| e.into_inner());
    if !paths.iter().any(|p| p == path) {
        paths.push(path.to_string());
    }
    drop(paths);
    let (w, t, wmax) = (arr("weights")?, arr("targets")?, num(&v, "max_weight")?);
    let slack = 1e-9 * w.iter().sum::<f64>();
    let at_limit = w.iter().zip(&t).all(|(a, b)| (a - b).abs() <= wmax + slack);
    Ok((json_run(&v)?, at_limit))
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

fn run_coupe(bin: &Path, file: &Path, k: &str, reps: usize) -> Result<Run> {
    let mut cmd = Command::new(bin);
    cmd.arg(file)
        .args([k, &reps.to_string(), "31"])
        .env("RAYON_NUM_THREADS", "1");
    json_run(&json(&output(cmd)?)?)
}
