//! `cargo xtask bench hier [--quick] [--machine FILE]`: hierarchical partitioning of 10^6
//! points over the Fig. 3 machine (`machines/fig3-cluster-of-clusters.xml`) and the per-level
//! methods example (`machines/hier-lbmethods.xml`; `--machine` for one file) against a flat
//! HSFC into the same part sizes, and Zoltan's HIER and HSFC (the peer driver) side by side,
//! on the same point files: 2-D and 3-D, uniform and corner-graded, unit and random weights.
//!
//! - serial: ours `hier-part partition` (1 and 2 threads) vs ours `hsfc partition` into the
//!   machine's `drum powers` part sizes (1 and 2 threads) vs Zoltan HSFC on 1 rank, all
//!   measured in this one run; and each level's time (medians) against the whole call;
//! - distributed, one rank per machine rank (oversubscribed on this host): ours with thread
//!   ranks (`--backend threads`) vs Zoltan HIER under `mpirun` with a regular two-level
//!   approximation of the tree (Zoltan's HIER needs fan-outs whose product is the rank count).
//!
//! Before the runs, `hsfc bandwidth` measures the host's triad on one CPU and on two: their
//! ratio, printed beside hier 1t/2t, is the most a second thread can gain in a pass that
//! streams memory here.
//!
//! Data and the Zoltan driver live in `target/bench-hier/` and `target/bench-hsfc/`.

use crate::bench::{
    Run, build_zoltan, json, json_run, min_max, num, output, uptime, zoltan_result,
};
use crate::bench_hsfc::run_ours;
use crate::{project_root, run};
use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One point set of the bench: dimension, distribution, weights.
struct Set {
    dim: u8,
    dist: &'static str,
    weights: &'static str,
}

/// A row of the bench: a hierarchical run on 1 and 2 threads against the flat HSFC.
struct Row {
    h1: HierRun,
    h2: HierRun,
    f1: Run,
    f2: Run,
}

pub(crate) fn bench_hier(args: &[String]) -> Result<()> {
    let root = project_root();
    let mut quick = false;
    let mut machines = vec![
        root.join("machines/fig3-cluster-of-clusters.xml"),
        root.join("machines/hier-lbmethods.xml"),
    ];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--machine" => {
                machines = vec![PathBuf::from(it.next().context("--machine needs a file")?)];
            }
            other => bail!(
                "bench hier: unknown argument `{other}` (usage: bench hier [--quick] [--machine FILE])"
            ),
        }
    }
    let work = root.join("target/bench-hier");
    std::fs::create_dir_all(&work).context("creating target/bench-hier")?;
    let release = crate::release(&[
        "-p",
        "hsfc-cli",
        "-p",
        "hier-part-cli",
        "-p",
        "drum-cli",
        "--bins",
    ])?;
    let bin = |name: &str| release.join(name);
    let (hsfc, hier, drum) = (bin("hsfc"), bin("hier-part"), bin("drum"));
    let zdriver = match build_zoltan(&root, &root.join("target/bench-hsfc")) {
        Ok(z) => Some(z),
        Err(e) => {
            eprintln!("xtask: Zoltan columns left empty: {e:#}");
            None
        }
    };
    let mut sets = Vec::new();
    for dim in [2, 3] {
        for dist in ["uniform", "graded"] {
            for weights in ["unit", "random"] {
                if !quick || (dist, weights) == ("uniform", "unit") || dim == 3 && dist == "graded"
                {
                    sets.push(Set { dim, dist, weights });
                }
            }
        }
    }
    let reps = if quick { 3 } else { 9 };
    let bw = crate::bench::bandwidth(&hsfc)?;
    let load = uptime();
    let steal = crate::bench::Steal::start();
    let mut out = String::new();
    let mut ratios = Vec::new();
    for machine in &machines {
        let (table, levels, r) = bench_machine(
            &work,
            (&hsfc, &hier, &drum),
            machine,
            &sets,
            (zdriver.as_deref(), quick, reps),
        )?;
        let _ = writeln!(out, "{table}");
        let _ = writeln!(out, "{levels}");
        ratios.extend(r);
    }
    eprintln!();
    println!(
        "hier bench: 10^6 points; time = median of the partition call alone ({reps} repeats, Zoltan 3 or 1), all in this one run;"
    );
    println!(
        "dev = max_r |W_r/T_r - 1| against the drum powers part sizes; flat = hsfc partition --sizes (same sizes);"
    );
    println!(
        "hier 1t/2t = hier on 1 thread / on 2 threads; distributed columns run one thread rank (ours, --backend threads) or MPI rank"
    );
    println!(
        "(Zoltan HIER -H a,b -M HSFC,RCB, a regular two-level approximation of the tree) per machine rank, oversubscribed on this host."
    );
    println!(
        "load before: {load}; after: {}; {}",
        uptime(),
        steal.report()
    );
    println!("{} (measured before the runs)", bw.description);
    println!();
    print!("{out}");
    let range = |f: fn(&Row) -> f64| min_max(&ratios.iter().map(f).collect::<Vec<_>>());
    let worst = |f: fn(&Row) -> f64| range(f).1;
    let least = |f: fn(&Row) -> f64| range(f).0;
    println!(
        "hier / flat HSFC, 1 thread: worst {:.2}   (target <= 2.5, goal <= 1.5)",
        worst(|r| r.h1.run.time / r.f1.time)
    );
    println!(
        "hier / flat HSFC, 2 threads: worst {:.2}",
        worst(|r| r.h2.run.time / r.f2.time)
    );
    println!(
        "hier 1 thread / 2 threads: least {:.2}   (target >= 1.7{})",
        least(|r| r.h1.run.time / r.h2.run.time),
        bw.against()
    );
    Ok(())
}

/// The rows of one machine: the main table, the per-level table, and the runs.
fn bench_machine(
    work: &Path,
    (hsfc, hier, drum): (&Path, &Path, &Path),
    machine: &Path,
    sets: &[Set],
    (zdriver, quick, reps): (Option<&Path>, bool, usize),
) -> Result<(String, String, Vec<Row>)> {
    // The machine's part sizes, as the flat partitioners' targets.
    let mut p = Command::new(drum);
    p.arg("powers").arg(machine).arg("--json");
    let powers = json(&output(p)?)?;
    let sizes: Vec<f64> = powers["parts"]
        .as_array()
        .context("drum powers --json lacks parts")?
        .iter()
        .map(|p| p["size"].as_f64().context("part size"))
        .collect::<Result<_>>()?;
    let ranks = sizes.len();
    let stem = machine
        .file_stem()
        .map_or("machine".into(), |s| s.to_string_lossy().into_owned());
    let sizes_file = work.join(format!("sizes-{stem}.txt"));
    let text: String = sizes.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&sizes_file, text).context("writing the sizes")?;
    let fan = two_level_fanout(ranks);

    let mut table = String::new();
    let _ = writeln!(
        table,
        "{} ({ranks} ranks)\n\n| dim | dist | weights | hier 1t ms | flat 1t ms | hier/flat 1t | hier 2t ms | flat 2t ms | hier/flat 2t | hier 1t/2t | Zoltan HSFC 1 rank ms | hier dev | flat dev | ours dist {ranks} thread ranks ms | Zoltan HIER {ranks} MPI ranks ms | Zoltan HIER dev |",
        machine.display()
    );
    let _ = writeln!(
        table,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut levels = String::new();
    let mut rows = Vec::new();
    for set in sets {
        let file = work.join(format!(
            "{}d_{}_1e6_{}.zpt",
            set.dim,
            &set.dist[..1],
            set.weights
        ));
        if !file.exists() {
            let mut g = Command::new(hsfc);
            g.args([
                "gen",
                "--n",
                "1e6",
                "--dim",
                &set.dim.to_string(),
                "--dist",
                set.dist,
                "--weights",
                set.weights,
                "--seed",
                "12345",
                "-o",
            ])
            .arg(&file);
            run(g)?;
        }
        let h1 = run_hier(hier, machine, &file, 1, "serial", reps)?;
        let (f1, _) = run_ours(hsfc, &file, &sizes_file, (1, None), reps)?;
        let h2 = run_hier(hier, machine, &file, 2, "serial", reps)?;
        let (f2, _) = run_ours(hsfc, &file, &sizes_file, (2, None), reps)?;
        let hd = if quick {
            None
        } else {
            Some(run_hier(hier, machine, &file, 1, "threads", 3)?.run)
        };
        let (zf, zh) = match zdriver {
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
        let _ = writeln!(
            table,
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {:.1e} | {:.1e} | {} | {} | {} |",
            set.dim,
            set.dist,
            set.weights,
            h1.run.time * 1e3,
            f1.time * 1e3,
            h1.run.time / f1.time,
            h2.run.time * 1e3,
            f2.time * 1e3,
            h2.run.time / f2.time,
            h1.run.time / h2.run.time,
            ms(zf),
            h1.run.dev,
            f1.dev,
            ms(hd),
            ms(zh),
            dev(zh),
        );
        if levels.is_empty() {
            let names: Vec<String> = h1.levels.iter().map(|(name, _)| name.clone()).collect();
            let _ = writeln!(
                levels,
                "per level, {}: median ms of each level's partitioner call (node, method); sum = of the levels;\n\
                 walk = total - sum on 1 thread (grouping objects by child, writing parts, checks);\n\
                 on 2 threads sibling subtrees run side by side, so their levels overlap and sum can exceed total:\n",
                machine.display()
            );
            let _ = writeln!(
                levels,
                "| dim | dist | weights | threads | {} | sum | walk | total |",
                names.join(" | ")
            );
            let _ = writeln!(levels, "|{}", "---|".repeat(names.len() + 7));
        }
        for (t, h) in [(1, &h1), (2, &h2)] {
            let sum: f64 = h.levels.iter().map(|(_, s)| s).sum();
            let cells: Vec<String> = h
                .levels
                .iter()
                .map(|(_, s)| format!("{:.1}", s * 1e3))
                .collect();
            let walk = if t == 1 {
                format!("{:.1}", (h.run.time - sum) * 1e3)
            } else {
                "-".into()
            };
            let _ = writeln!(
                levels,
                "| {} | {} | {} | {t} | {} | {:.1} | {walk} | {:.1} |",
                set.dim,
                set.dist,
                set.weights,
                cells.join(" | "),
                sum * 1e3,
                h.run.time * 1e3
            );
        }
        rows.push(Row { h1, h2, f1, f2 });
        eprint!(".");
    }
    Ok((table, levels, rows))
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

/// A hierarchical run: time and deviation, and each level's median time by node.
struct HierRun {
    run: Run,
    levels: Vec<(String, f64)>,
}

fn run_hier(
    bin: &Path,
    machine: &Path,
    file: &Path,
    threads: usize,
    backend: &str,
    reps: usize,
) -> Result<HierRun> {
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
    // Each level named by its node number and method (from the report's levels).
    let method = |node: &serde_json::Value| {
        v["levels"].as_array().and_then(|ls| {
            ls.iter()
                .find(|l| l["node"] == *node)
                .and_then(|l| l["method"].as_str())
        })
    };
    let levels = v["level_times_s"]
        .as_array()
        .context("hier-part --json lacks level_times_s")?
        .iter()
        .map(|l| {
            let name = format!("{} {}", l["node"], method(&l["node"]).unwrap_or("?"));
            Ok((name, num(l, "time_s")?))
        })
        .collect::<Result<_>>()?;
    Ok(HierRun {
        run: json_run(&v)?,
        levels,
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
            if crate::is_root() {
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
