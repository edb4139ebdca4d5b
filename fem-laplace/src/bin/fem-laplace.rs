//! `fem-laplace`: the adaptive loop of PHAML's Laplace experiment (DRUM 2005 §4), one process.

use anyhow::{Context, Result};
use clap::Parser;
use fem_laplace::output::{VtuFields, write_pvd, write_svg, write_vtu};
use fem_laplace::{
    AdaptConfig, Adaptive, CgConfig, Marking, PHAML_TARGET_VERTICES, Problem, StepReport,
};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Adaptive P1 solution of −Δu = 0 on the unit square (PHAML's experiment in DRUM 2005 §4).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Stop once the mesh has at least this many vertices.
    #[arg(long, default_value_t = PHAML_TARGET_VERTICES)]
    target_vertices: usize,
    /// The exact solution giving the Dirichlet data: `corner` (r^{2/3} sin(2θ/3)) or `smooth`.
    #[arg(long, default_value = "corner")]
    problem: String,
    /// `double` (PHAML: N_0·2^k vertices after step k) or `doerfler:θ`.
    #[arg(long, default_value = "double")]
    marking: String,
    /// CG stops when its estimated algebraic error is below this factor times the estimate.
    #[arg(long, default_value_t = CgConfig::default().tol_factor)]
    cg_tol_factor: f64,
    /// One JSON object per step on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Write a `.vtu` file per step (and `steps.pvd`) into this directory.
    #[arg(long)]
    vtk: Option<PathBuf>,
    /// Write an SVG picture of the final mesh.
    #[arg(long)]
    svg: Option<PathBuf>,
}

fn main() -> Result<()> {
    match run() {
        // `fem-laplace --json | head` is fine.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        other => other,
    }
}

fn run() -> Result<()> {
    let args = Args::parse();
    let problem: Problem = args.problem.parse().context("--problem")?;
    let marking: Marking = args.marking.parse().context("--marking")?;
    let cfg = AdaptConfig {
        target_vertices: args.target_vertices,
        marking,
        cg: CgConfig {
            tol_factor: args.cg_tol_factor,
            ..CgConfig::default()
        },
        errors: true,
        element_errors: args.vtk.is_some(),
        ..AdaptConfig::default()
    };
    if let Some(dir) = &args.vtk {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let exact = problem.solution();
    let mut run = Adaptive::new(exact.as_ref(), cfg)?;
    let progress = !args.json && std::io::stderr().is_terminal();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if !args.json {
        writeln!(
            out,
            "fem-laplace: −Δu = 0 on (0,1)², u = {} on the boundary, marking {}, target {} vertices",
            exact.name(),
            marking,
            args.target_vertices
        )?;
        writeln!(
            out,
            "{:>4} {:>9} {:>9} {:>4} {:>10} {:>10} {:>10} {:>4} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "step",
            "vertices",
            "elements",
            "lev",
            "err_energy",
            "err_max",
            "estimate",
            "cg",
            "κ",
            "refine",
            "assemble",
            "solve",
            "estim.",
            "total"
        )?;
    }
    let mut vtus = Vec::new();
    let mut total = 0.0;
    let mut reports: Vec<StepReport> = Vec::new();
    loop {
        if progress {
            let k = reports.len();
            let goal = match marking {
                Marking::Double => run.step_target(k),
                Marking::Doerfler(_) => args.target_vertices,
            };
            if k == 0 {
                eprint!("\r  step 0: solving on the initial mesh…\x1b[K");
            } else {
                eprint!("\r  step {k}: refining towards {goal} vertices, solving…\x1b[K");
            }
        }
        let Some(r) = run.step()? else { break };
        if progress {
            eprint!("\r\x1b[K");
        }
        total += r.times.method();
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&r)?)?;
        } else {
            let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.4e}"));
            writeln!(
                out,
                "{:>4} {:>9} {:>9} {:>4} {:>10} {:>10} {:>10.4e} {:>4} {:>5.1} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
                r.step,
                r.vertices,
                r.elements,
                r.max_level,
                f(r.error_energy),
                f(r.error_max),
                r.estimate,
                r.cg_iterations,
                r.condition_estimate,
                r.times.refine,
                r.times.assemble,
                r.times.solve,
                r.times.estimate,
                total
            )?;
        }
        out.flush()?;
        if let Some(dir) = &args.vtk {
            let name = format!("step_{:02}.vtu", r.step);
            let path = dir.join(&name);
            let fields = VtuFields {
                solution: run.solution(),
                indicators: run.indicators(),
                element_errors: run.element_errors(),
            };
            write_vtu(&path, run.mesh(), &fields)?;
            vtus.push((r.step, name));
        }
        reports.push(r);
    }
    if let Some(dir) = &args.vtk {
        write_pvd(&dir.join("steps.pvd"), &vtus)?;
    }
    if !args.json {
        if let (Some(first), Some(last)) =
            (reports.get(reports.len().saturating_sub(6)), reports.last())
            && let (Some(e0), Some(e1)) = (first.error_energy, last.error_energy)
        {
            let rate = (e1 / e0).ln() / (last.vertices as f64 / first.vertices as f64).ln();
            writeln!(
                out,
                "energy error ~ N^{rate:.3} over the last steps (optimal for P1: N^-0.5)"
            )?;
        }
        writeln!(
            out,
            "method time (refine+assemble+solve+estimate): {total:.3} s"
        )?;
    }
    if let Some(svg) = &args.svg {
        let title = format!("fem-laplace, {} problem, {} marking", exact.name(), marking);
        write_svg(svg, run.mesh(), &title)?;
        if !args.json {
            writeln!(out, "mesh picture: {}", svg.display())?;
        }
    }
    Ok(())
}
