//! `cargo xtask bench hier [--quick] [--machine FILE]`: hierarchical partitioning of 10^6
//! points over the Fig. 3 machine (default `machines/fig3-cluster-of-clusters.xml`) against a
//! flat HSFC into the same part sizes, and Zoltan's HIER and HSFC (the peer driver) side by
//! side, on the same point files.
//!
//! - serial: ours `hier-part partition` (1 and 2 threads) vs ours `hsfc partition` into the
//!   machine's `drum powers` part sizes (1 and 2 threads) vs Zoltan HSFC on 1 rank;
//! - distributed, one rank per machine rank (oversubscribed on this host): ours with thread
//!   ranks (`--backend threads`) vs Zoltan HIER under `mpirun` with a regular two-level
//!   approximation of the tree (Zoltan's HIER needs fan-outs whose product is the rank count).
//!
//! Data and the Zoltan driver live in `target/bench-hier/` and `target/bench-hsfc/`.

use crate::bench_hsfc::{Run, build_zoltan, output, run_ours, uptime, zoltan_result};
use crate::{cargo, project_root, run};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn json(line: &str) -> Result<serde_json::Value> {
    serde_json::from_str(line.trim()).with_context(|| format!("parsing `{line}`"))
}

fn num(v: &serde_json::Value, k: &str) -> Result<f64> {
    v[k].as_f64()
        .with_context(|| format!("no number `{k}` in {v}"))
}

pub(crate) fn bench_hier(args: &[String]) -> Result<()> {
    let root = project_root();
    let mut quick = false;
    let mut machine = root.join("machines/fig3-cluster-of-clusters.xml");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--machine" => {
                machine = PathBuf::from(it.next().context("--machine needs a file")?);
            }
            other => bail!(
                "bench hier: unknown argument `{other}` (usage: bench hier [--quick] [--machine FILE])"
            ),
        }
    }
    let work = root.join("target/bench-hier");
    std::fs::create_dir_all(&work).context("creating target/bench-hier")?;
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "hsfc-cli",
        "-p",
        "hier-part-cli",
        "-p",
        "drum-cli",
        "--bins",
    ]);
    run(build)?;
    let bin = |name: &str| root.join("target/release").join(name);
    let (hsfc, hier, drum) = (bin("hsfc"), bin("hier-part"), bin("drum"));

    // The machine's part sizes, as the flat partitioners' targets.
    let mut p = Command::new(&drum);
    p.arg("powers").arg(&machine).arg("--json");
    let powers = json(&output(p)?)?;
    let sizes: Vec<f64> = powers["parts"]
        .as_array()
        .context("drum powers --json lacks parts")?
        .iter()
        .map(|p| p["size"].as_f64().context("part size"))
        .collect::<Result<_>>()?;
    let ranks = sizes.len();
    let sizes_file = work.join("sizes.txt");
    let text: String = sizes.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&sizes_file, text).context("writing the sizes")?;

    let zdriver = match build_zoltan(&root, &root.join("target/bench-hsfc")) {
        Ok(z) => Some(z),
        Err(e) => {
            eprintln!("xtask: Zoltan columns left empty: {e:#}");
            None
        }
    };
    let fan = two_level_fanout(ranks);

    let reps = if quick { 3 } else { 9 };
    let load = uptime();
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| dist | weights | hier 1t ms | flat HSFC 1t ms | hier/flat 1t | hier 2t ms | flat 2t ms | hier/flat 2t | Zoltan HSFC 1 rank ms | hier dev | flat dev | Zoltan HSFC dev | ours dist {ranks} thread ranks ms | Zoltan HIER {ranks} MPI ranks ms | Zoltan HIER dev |"
    );
    let _ = writeln!(
        table,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut ratios = Vec::new();
    for dist in ["uniform", "graded"] {
        for weights in ["unit", "random"] {
            let file = work.join(format!("{}_1e6_{weights}.zpt", &dist[..1]));
            if !file.exists() {
                let mut g = Command::new(&hsfc);
                g.args([
                    "gen",
                    "--n",
                    "1e6",
                    "--dist",
                    dist,
                    "--weights",
                    weights,
                    "--seed",
                    "12345",
                    "-o",
                ])
                .arg(&file);
                run(g)?;
            }
            let h1 = run_hier(&hier, &machine, &file, 1, "serial", reps)?;
            let (f1, _) = run_ours(&hsfc, &file, &sizes_file, 1, reps)?;
            let h2 = run_hier(&hier, &machine, &file, 2, "serial", reps)?;
            let (f2, _) = run_ours(&hsfc, &file, &sizes_file, 2, reps)?;
            let hd = if quick {
                None
            } else {
                Some(run_hier(&hier, &machine, &file, 1, "threads", 3)?)
            };
            let (zf, zh) = match &zdriver {
                Some(z) => (
                    Some(run_zoltan(z, &file, &sizes_file, "HSFC", None, 3)?),
                    if quick {
                        None
                    } else {
                        Some(run_zoltan(z, &file, &sizes_file, "HIER", Some(&fan), 1)?)
                    },
                ),
                None => (None, None),
            };
            let ms = |r: Option<Run>| r.map_or("-".into(), |r| format!("{:.1}", r.time * 1e3));
            let dev = |r: Option<Run>| r.map_or("-".into(), |r| format!("{:.1e}", r.dev));
            ratios.push((h1.time / f1.time, h2.time / f2.time));
            let _ = writeln!(
                table,
                "| {dist} | {weights} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} | {} | {:.1e} | {:.1e} | {} | {} | {} | {} |",
                h1.time * 1e3,
                f1.time * 1e3,
                h1.time / f1.time,
                h2.time * 1e3,
                f2.time * 1e3,
                h2.time / f2.time,
                ms(zf),
                h1.dev,
                f1.dev,
                dev(zf),
                ms(hd),
                ms(zh),
                dev(zh),
            );
            eprint!(".");
        }
    }
    eprintln!();
    println!(
        "hier bench: {} ({ranks} ranks), 10^6 points; time = median of the partition call alone ({reps} repeats, Zoltan 3 or 1);",
        machine.display()
    );
    println!(
        "dev = max_r |W_r/T_r - 1| against the drum powers part sizes; flat = hsfc partition --sizes (same sizes);"
    );
    println!(
        "distributed columns run {ranks} ranks on this host's cores (oversubscribed): ours = hier-part --backend threads,"
    );
    println!(
        "Zoltan HIER = mpirun -np {ranks} zdriver -m HIER -H {} -M HSFC,RCB (its tree must be regular, so it is an approximation of the machine's).",
        fan.0
    );
    println!("load before: {load}; after: {}", uptime());
    println!();
    print!("{table}");
    println!();
    let worst1 = ratios.iter().map(|r| r.0).fold(0.0f64, f64::max);
    let worst2 = ratios.iter().map(|r| r.1).fold(0.0f64, f64::max);
    println!(
        "hier / flat HSFC: worst {worst1:.2} on 1 thread, {worst2:.2} on 2 threads   (target <= 1.2)"
    );
    Ok(())
}

/// A two-level fan-out `a × b = ranks` for Zoltan's HIER (the most balanced factor pair; a
/// prime rank count gives `1 × ranks`).
fn two_level_fanout(ranks: usize) -> (String, usize) {
    let mut a = (ranks as f64).sqrt() as usize;
    while a > 1 && !ranks.is_multiple_of(a) {
        a -= 1;
    }
    (format!("{a},{}", ranks / a.max(1)), a.max(1))
}

fn run_hier(
    bin: &Path,
    machine: &Path,
    file: &Path,
    threads: usize,
    backend: &str,
    reps: usize,
) -> Result<Run> {
    let mut cmd = Command::new(bin);
    cmd.args(["partition", "--machine"])
        .arg(machine)
        .arg(file)
        .args([
            "--threads",
            &threads.to_string(),
            "--repeat",
            &reps.to_string(),
            "--backend",
            backend,
            "--json",
        ]);
    let v = json(&output(cmd)?)?;
    Ok(Run {
        time: num(&v, "time_s")?,
        dev: num(&v, "max_rel_dev")?,
    })
}

fn run_zoltan(
    bin: &Path,
    file: &Path,
    sizes: &Path,
    method: &str,
    hier: Option<&(String, usize)>,
    reps: usize,
) -> Result<Run> {
    let text = std::fs::read_to_string(sizes)?;
    let ranks = text.lines().filter(|l| !l.trim().is_empty()).count();
    let mut cmd = match hier {
        None => Command::new(bin),
        Some(_) => {
            let mut c = Command::new("mpirun");
            c.args(["--oversubscribe", "-np", &ranks.to_string()]);
            if crate::mpi::is_root() {
                c.arg("--allow-run-as-root");
            }
            c.arg(bin);
            c
        }
    };
    cmd.arg("-i")
        .arg(file)
        .args(["-m", method, "-s"])
        .arg(sizes)
        .args(["-r", &reps.to_string()]);
    if let Some((fan, _)) = hier {
        cmd.args(["-H", fan, "-M", "HSFC,RCB"]);
    }
    zoltan_result(cmd)
}
