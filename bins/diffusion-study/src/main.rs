//! `diffusion-study`: how fast the heterogeneous load transfer methods of Watts, Rieffel &
//! Taylor 1998 balance utilisations, on a ring, a 2-D grid and a random graph of processors
//! with the paper's testbed capacities (39× spread), from equal loads (the paper's uniform
//! start); and the incremental partitioner's rounds (transfer, then task selection) on a grid
//! of weighted objects. Prints tables and writes an SVG plot of imbalance against iterations.

mod plot;

use anyhow::{Result, ensure};
use clap::Parser;
use diffusion::{Capacities, Diffusion, Method, ProcGraph, Solver, Transfer, testbed};
use hsfc::generate::{RandomSource, SplitMix64};
use part_api::{Csr, Partitioner, Points, Serial};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Convergence of HBM, GDE and implicit diffusion on rings, grids and random graphs.
#[derive(Parser, Debug)]
#[command(name = "diffusion-study", version)]
struct Args {
    /// Processors per graph (the grid is the nearest w × h with w ≥ h; 2..4096).
    #[arg(long, default_value_t = 64,
          value_parser = cli_support::limits::count(2, MAX_RANKS, "ranks"))]
    ranks: usize,
    /// Stop each method at this efficiency (U_avg / U_max); the paper's implicit α is
    /// 1 − eff_min.
    #[arg(long, default_value_t = 0.99)]
    eff_min: f64,
    /// Most iterations per method (GDE sweeps, implicit steps; at most 1,000,000).
    #[arg(long, default_value_t = 20_000,
          value_parser = cli_support::limits::count(0, MAX_ITERATIONS, "iterations"))]
    max_iterations: usize,
    /// Seed of the random graph, the capacities' order and the objects' weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the plot here (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// Most processors per graph (`--ranks`): the study's time grows with their number
/// times the iterations (2,048 take seconds), its memory stays small.
const MAX_RANKS: usize = 4096;
/// Most iterations per method (`--max-iterations`): each keeps its imbalance history, eight
/// bytes an iteration for each of the 18 series.
const MAX_ITERATIONS: usize = 1_000_000;

/// One method of the study, as named in the tables and the plot.
struct Series {
    name: String,
    method: Method,
}

fn series(eff_min: f64) -> Vec<Series> {
    let implicit = |alpha: Option<f64>, solver| Method::Implicit { alpha, solver };
    let paper_alpha = 1.0 - eff_min;
    vec![
        Series {
            name: "HBM".into(),
            method: Method::Hbm,
        },
        Series {
            name: "GDE λ=1".into(),
            method: Method::GDE,
        },
        Series {
            name: "GDE λ=1.5".into(),
            method: Method::Gde { lambda: 1.5 },
        },
        Series {
            name: format!("implicit α={paper_alpha:.2} Jacobi"),
            method: implicit(None, Solver::Jacobi),
        },
        Series {
            name: "implicit α=1 Jacobi".into(),
            method: implicit(Some(1.0), Solver::Jacobi),
        },
        Series {
            name: "implicit α=10 CG".into(),
            method: implicit(Some(10.0), Solver::Cg),
        },
    ]
}

fn graphs(ranks: usize, seed: u64) -> Vec<(String, ProcGraph)> {
    let h = (1..=ranks.isqrt().max(1))
        .rev()
        .find(|&h| ranks.is_multiple_of(h))
        .unwrap_or(1);
    vec![
        (format!("ring {ranks}"), testbed::ring(ranks)),
        (
            format!("grid {}x{h}", ranks / h),
            testbed::grid(ranks / h, h),
        ),
        (
            format!("random {ranks} (degree 4)"),
            testbed::random(ranks, 4.0, &mut uniform(seed)),
        ),
    ]
}

/// The uniform numbers of the `SplitMix64` stream of `seed`.
fn uniform(seed: u64) -> impl FnMut() -> f64 {
    let mut rng = SplitMix64(seed);
    move || rng.uniform()
}

fn main() -> std::process::ExitCode {
    cli_support::main(command)
}

/// The command; [`main`] reports its error without a backtrace.
fn command() -> Result<()> {
    let args = Args::parse();
    cli_support::check_outputs([("--svg", args.svg.as_deref())])?;
    ensure!(
        args.eff_min > 0.0 && args.eff_min < 1.0,
        "--eff-min must be in (0, 1)"
    );
    let caps = Capacities::new(&testbed::paper_capacities(
        args.ranks,
        &mut uniform(args.seed),
    ))?;
    let loads = vec![1u64 << 32; args.ranks];
    let mut out = String::new();
    writeln!(
        out,
        "# Load transfer from equal loads, capacities of the paper's testbed (39x), eff_min {}",
        args.eff_min
    )?;
    writeln!(
        out,
        "imbalance = U_max / U* - 1 after the iterations shown (final: of the whole-unit loads \
         the transfers leave); moved = sum |flow| / total load.\nHBM's levels are a plan in \
         which a processor passes on load it does not hold yet, so its imbalance can rise \
         before the last level.\n"
    )?;
    let mut panels = Vec::new();
    for (gname, g) in graphs(args.ranks, args.seed) {
        writeln!(
            out,
            "{gname}: {} edges; start imbalance {:.3}",
            g.num_edges(),
            caps.imbalance(&loads) - 1.0
        )?;
        writeln!(
            out,
            "  {:<26} {:>6} {:>8} {:>9} {:>7} {:>8}  imbalance at 1, 4, 16, 64, 256, 1024 iterations",
            "method", "iters", "inner", "converged", "moved", "final"
        )?;
        let mut lines = Vec::new();
        for s in series(args.eff_min) {
            let t = Transfer {
                method: s.method,
                eff_min: args.eff_min,
                max_iterations: args.max_iterations,
            };
            let f = t.compute(&g, &loads, &caps)?;
            let imb: Vec<f64> = f.history.iter().map(|e| 1.0 / e - 1.0).collect();
            let at: Vec<String> = [1, 4, 16, 64, 256, 1024]
                .iter()
                .map(|&i| imb.get(i).map_or("-".into(), |x| format!("{x:.2e}")))
                .collect();
            let total: u64 = loads.iter().sum();
            writeln!(
                out,
                "  {:<26} {:>6} {:>8} {:>9} {:>6.1}% {:>8.1e}  {}",
                s.name,
                f.iterations(),
                f.inner_iterations,
                if f.converged { "yes" } else { "no" },
                100.0 * f.planned() as f64 / total as f64,
                caps.imbalance(&f.loads) - 1.0,
                at.join(" ")
            )?;
            lines.push(plot::Line {
                name: s.name,
                points: imb,
            });
        }
        writeln!(out)?;
        panels.push(plot::Panel {
            title: gname,
            lines,
        });
    }
    partition_rounds(&args, &mut out)?;
    if let Some(path) = &args.svg {
        let title = format!(
            "Imbalance against iterations, {} processors, capacities spread 39x (Watts, Rieffel & Taylor 1998)",
            args.ranks
        );
        cli_support::write_output(path, plot::svg(&title, &panels))?;
        writeln!(out, "plot: {}", path.display())?;
    }
    cli_support::emit(&out)
}

/// The objects of the partitioner study: a 64 × 48 grid (weights 1..9) and 16 ranks.
struct Objects {
    w: usize,
    h: usize,
    k: usize,
    coords: Vec<f64>,
    weights: Vec<f64>,
    adj: Csr,
}

impl Objects {
    fn points(&self) -> Points<'_> {
        Points::new(&self.coords, 2, Some(&self.weights))
    }

    /// Edges of the object grid between different parts.
    fn cut(&self, parts: &[u32]) -> usize {
        let n = self.w * self.h;
        let crossing = |a: usize| {
            let nb = self.adj.neighbours(a).iter();
            nb.filter(|&&b| parts[b as usize] != parts[a]).count()
        };
        (0..n).map(crossing).sum::<usize>() / 2
    }

    /// Each method's rebalance from `start` to `caps`, then the HSFC references, as rows.
    fn rows(
        &self,
        eff_min: f64,
        start: &[u32],
        caps: &[f64],
        hsfc_prev: Option<&hsfc::Partition>,
    ) -> Result<String> {
        let mut out = String::new();
        writeln!(
            out,
            "  {:<26} {:>6} {:>9} {:>8} {:>6}  imbalance before each round; objects moved per round",
            "method", "rounds", "imbalance", "moved", "cut"
        )?;
        writeln!(
            out,
            "  {:<26} {:>6} {:>9} {:>8} {:>6}",
            "(start)",
            "",
            "",
            "",
            self.cut(start)
        )?;
        let moved = |parts: &[u32]| (0..parts.len()).filter(|&o| parts[o] != start[o]).count();
        for s in series(eff_min)
            .into_iter()
            .filter(|s| !matches!(s.method, Method::Implicit { alpha: None, .. }))
        {
            let d = Diffusion {
                transfer: Transfer {
                    method: s.method,
                    ..Diffusion::default().transfer
                },
                ..Diffusion::default()
            };
            let mut parts = start.to_vec();
            let r = d.rebalance(self.points(), Some(&self.adj), caps, &mut parts)?;
            let before: Vec<String> = r
                .rounds
                .iter()
                .map(|x| format!("{:.3}", x.imbalance))
                .collect();
            let per_round: Vec<String> = r
                .rounds
                .iter()
                .map(|x| x.moved_objects.to_string())
                .collect();
            writeln!(
                out,
                "  {:<26} {:>6} {:>9.4} {:>8} {:>6}  {}; {}",
                s.name,
                r.rounds.len(),
                r.imbalance,
                moved(&parts),
                self.cut(&parts),
                before.join(" "),
                per_round.join(" ")
            )?;
        }
        // References: HSFC from scratch (ranks keep their numbers, so every object whose new
        // part differs from its old one moves) and, from an HSFC partition, KEEP_CUTS.
        let mut recut = vec![0u32; self.w * self.h];
        let hsfc = hsfc::Hsfc {
            tolerance: 0.05,
            ..Default::default()
        };
        let p = hsfc.partition(&Serial, self.points(), caps, &mut recut)?;
        let rows = [("HSFC recut", recut, p)];
        let mut rows = rows.to_vec();
        if let Some(prev) = hsfc_prev {
            let mut kept = start.to_vec();
            let mut ws = hsfc::Workspace::default();
            let p = hsfc.repartition(&mut ws, &Serial, prev, self.points(), caps, &mut kept)?;
            rows.push(("HSFC KEEP_CUTS repartition", kept, p));
        }
        for (name, parts, p) in rows {
            writeln!(
                out,
                "  {:<26} {:>6} {:>9.4} {:>8} {:>6}",
                name,
                "",
                p.imbalance(),
                moved(&parts),
                self.cut(&parts)
            )?;
        }
        Ok(out)
    }
}

/// The incremental partitioner on a grid of objects: (a) from 16 equal blocks to the paper's
/// capacities (a large change: most objects move whatever the method); (b) from an HSFC
/// partition for those capacities, one rank's capacity halved (a competing process): the
/// incremental case, against HSFC's KEEP_CUTS repartition.
fn partition_rounds(args: &Args, out: &mut String) -> Result<()> {
    let (w, h, k) = (64usize, 48usize, 16usize);
    let (coords, adj) = testbed::object_grid(w, h);
    let objects = Objects {
        w,
        h,
        k,
        weights: testbed::integer_weights(w * h, 9, &mut uniform(args.seed)),
        coords,
        adj,
    };
    let blocks: Vec<u32> = (0..w * h)
        .map(|i| ((i % w) / 16 + 4 * ((i / w) / 12)) as u32)
        .collect();
    let caps = testbed::paper_capacities(k, &mut uniform(args.seed));
    writeln!(
        out,
        "# Incremental partitioner (tolerance 5%) on {w}x{h} objects, weights 1..9, {} ranks\n\
         (a) from {k} equal blocks to the paper's capacities",
        objects.k
    )?;
    out.push_str(&objects.rows(args.eff_min, &blocks, &caps, None)?);
    let mut start = vec![0u32; w * h];
    let hsfc = hsfc::Hsfc {
        tolerance: 0.05,
        ..Default::default()
    };
    let prev = hsfc.partition(&Serial, objects.points(), &caps, &mut start)?;
    let mut halved = caps.clone();
    halved[5] /= 2.0;
    writeln!(
        out,
        "(b) from an HSFC partition for those capacities, rank 5's capacity halved ({} -> {})",
        caps[5], halved[5]
    )?;
    out.push_str(&objects.rows(args.eff_min, &start, &halved, Some(&prev))?);
    writeln!(out)?;
    Ok(())
}
