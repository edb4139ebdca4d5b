//! RCB and RIB on 10^6 points: medians per case, and the ratio to a reference timed in the
//! same process (an unstable sort of the n x-coordinates, `sort`).
//!
//! ```text
//! cargo bench -p hier-part --bench bisect -- [--n N] [--dim D] [--repeat R] [--threads T]
//!                                            [--json] [--filter WORD]
//! ```
//! `--threads T` runs `Par::Rayon(T)` in a pool of T threads (default: sequential). `--json`
//! prints one JSON object per case instead of the table (for `cargo xtask bench hier`).
//! `--quality` also builds the 6-nearest-neighbour graph of each point set (timed) and reports
//! each partition's edge cut on it. `--extra` adds two hard cases: a lattice (ties on every
//! cut) and points already sorted along a line.

use cli_support::median;
use hier_part::{Bisection, Csr, Error, Par, Quality, Rcb, Rib};
use hier_part::{Partitioner, Points, Serial};
use hsfc::generate::{Distribution, WeightKind, Xoshiro256, fast_slow, points_with};
use std::time::Instant;

struct Args {
    n: usize,
    dim: usize,
    repeat: usize,
    threads: usize,
    json: bool,
    filter: Option<String>,
    profile: bool,
    quality: bool,
    extra: bool,
}

fn parse() -> Args {
    let mut a = Args {
        n: 1_000_000,
        dim: 2,
        repeat: 7,
        threads: 1,
        json: false,
        filter: None,
        profile: false,
        quality: false,
        extra: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val =
            |name: &str| -> String { it.next().unwrap_or_else(|| panic!("{name} needs a value")) };
        match arg.as_str() {
            "--n" => a.n = val("--n").parse::<f64>().expect("--n: a number") as usize,
            "--dim" => a.dim = val("--dim").parse().expect("--dim: 1, 2 or 3"),
            "--repeat" => a.repeat = val("--repeat").parse().expect("--repeat: a count"),
            "--threads" => a.threads = val("--threads").parse().expect("--threads: a count"),
            "--filter" => a.filter = Some(val("--filter")),
            "--json" => a.json = true,
            "--profile" => a.profile = true,
            "--quality" => a.quality = true,
            "--extra" => a.extra = true,
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// CPU seconds used by this process so far (all threads).
fn cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Median wall seconds, minimum wall seconds and median CPU seconds of `repeat` runs of `f`.
fn time<T>(repeat: usize, mut f: impl FnMut() -> T) -> (f64, f64, f64, T) {
    let mut times = Vec::with_capacity(repeat);
    let mut cpu = Vec::with_capacity(repeat);
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let c = cpu_time();
        let t = Instant::now();
        let r = std::hint::black_box(f());
        times.push(t.elapsed().as_secs_f64());
        cpu.push(cpu_time() - c);
        last = Some(r);
    }
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    (
        median(&mut times),
        min,
        median(&mut cpu),
        last.expect("at least one run"),
    )
}

fn main() {
    let args = parse();
    let par = Par::threads(args.threads);
    let mut dists = vec![
        ("uniform", Some(Distribution::Uniform)),
        ("graded", Some(Distribution::Corner { rmin: 1e-6 })),
    ];
    if args.extra {
        // Hard cases for a selection: a lattice (every cut splits ties) and points already
        // sorted along a line.
        dists.push(("lattice", None));
        dists.push(("sorted", None));
    }
    let weights = [("unit", WeightKind::Unit), ("random", WeightKind::Random)];
    if !args.json {
        println!(
            "# hier-part bisect bench: n = {}, dim = {}, repeat = {}, threads = {} ({:?})",
            args.n, args.dim, args.repeat, args.threads, par
        );
        println!(
            "| method | dist | weights | sizes | k | median ms | min ms | cpu ms | us/pt | x sort | max W/T | max rel dev | cut % |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    }
    for (dname, dist) in dists {
        for (wname, wkind) in weights {
            let (coords, w) = match dist {
                Some(dist) => {
                    points_with(&mut Xoshiro256::new(12345), args.n, args.dim, dist, wkind)
                }
                None => {
                    let (_, w) = points_with(
                        &mut Xoshiro256::new(12345),
                        args.n,
                        args.dim,
                        Distribution::Uniform,
                        wkind,
                    );
                    let side = (args.n as f64).powf(1.0 / args.dim as f64).ceil() as usize;
                    let c = (0..args.n)
                        .flat_map(|i| {
                            (0..args.dim).map(move |j| {
                                if dname == "sorted" {
                                    i as f64 / args.n as f64
                                } else {
                                    ((i / side.pow(j as u32)) % side) as f64
                                }
                            })
                        })
                        .collect();
                    (c, w)
                }
            };
            // The yardstick: sorting the n x-coordinates once.
            let xs: Vec<f64> = coords.iter().step_by(args.dim).copied().collect();
            let (sort_med, _, _, _) = time(if args.profile { 1 } else { args.repeat }, || {
                let mut v = xs.clone();
                v.sort_unstable_by(f64::total_cmp);
                v[0]
            });
            let graph = args.quality.then(|| {
                let t = Instant::now();
                let g = Csr::knn(&coords, args.dim, 6, par).expect("knn graph");
                if !args.json {
                    println!(
                        "# {dname} {wname}: 6-NN graph of {} edges built in {:.2} s",
                        g.edges(),
                        t.elapsed().as_secs_f64()
                    );
                }
                g
            });
            for k in [8usize, 64] {
                for (sname, sizes) in [("uniform", vec![1.0; k]), ("fastslow", fast_slow(k, 1.5))] {
                    for method in ["RCB", "RIB"] {
                        let label = format!("{method} {dname} {wname} {sname} {k}");
                        if let Some(f) = &args.filter
                            && !label.contains(f.as_str())
                        {
                            continue;
                        }
                        let mut parts = vec![0u32; args.n];
                        let run = |parts: &mut [u32]| -> Result<Bisection, Error> {
                            match method {
                                "RCB" => Rcb {
                                    par,
                                    ..Default::default()
                                }
                                .partition(
                                    &Serial,
                                    Points::new(&coords, args.dim, w.as_deref()),
                                    &sizes,
                                    parts,
                                ),
                                _ => Rib {
                                    par,
                                    ..Default::default()
                                }
                                .partition(
                                    &Serial,
                                    Points::new(&coords, args.dim, w.as_deref()),
                                    &sizes,
                                    parts,
                                ),
                            }
                        };
                        let (med, min, cpu, r) = time(args.repeat, || run(&mut parts));
                        let r = r.expect("partition");
                        let cut = graph.as_ref().map_or(-1.0, |g| {
                            let q = Quality::new(&parts, w.as_deref(), &sizes, Some(g))
                                .expect("quality");
                            100.0 * q.edge_cut.unwrap_or(0) as f64 / g.edges() as f64
                        });
                        let us = med * 1e6 / args.n as f64;
                        if args.json {
                            println!(
                                "{{\"method\":\"{method}\",\"dist\":\"{dname}\",\"weights\":\"{wname}\",\"sizes\":\"{sname}\",\"k\":{k},\"n\":{},\"dim\":{},\"threads\":{},\"median_s\":{med:.6},\"min_s\":{min:.6},\"cpu_s\":{cpu:.6},\"us_per_pt\":{us:.4},\"sort_median_s\":{sort_med:.6},\"max_ratio\":{:.6},\"max_rel_dev\":{:.3e},\"edge_cut_pct\":{cut:.3}}}",
                                args.n, args.dim, args.threads, r.max_ratio, r.max_rel_dev
                            );
                        } else {
                            println!(
                                "| {method} | {dname} | {wname} | {sname} | {k} | {:.2} | {:.2} | {:.2} | {us:.4} | {:.2} | {:.6} | {:.2e} | {} |",
                                med * 1e3,
                                min * 1e3,
                                cpu * 1e3,
                                med / sort_med,
                                r.max_ratio,
                                r.max_rel_dev,
                                if cut < 0.0 {
                                    "-".into()
                                } else {
                                    format!("{cut:.2}")
                                }
                            );
                        }
                    }
                }
            }
        }
    }
}
