//! `fem-bench`: the whole PHAML-size adaptive run on one core, repeated, with medians per
//! phase per step, memory per vertex, in-process reference kernels and (with the `faer`
//! feature) a sparse direct solve of the final system. Run it through `cargo xtask bench fem`.

use anyhow::Result;
use clap::Parser;
use fem_laplace::{AdaptConfig, Adaptive, CornerSingularity, StepReport, System};
use std::time::Instant;

#[global_allocator]
static ALLOC: cli_support::alloc::Counting = cli_support::alloc::Counting;

/// The whole PHAML-size adaptive run on one core, repeated: medians per phase per step,
/// memory per vertex, reference kernels (and a sparse direct solve with feature `faer`).
#[derive(Debug, Parser)]
#[command(name = "fem-bench")]
struct Opts {
    /// Whole runs to time (the medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    repeats: u64,
    /// The mesh size (vertices); PHAML's by default (at most 20,000,000).
    #[arg(long, default_value_t = fem_laplace::PHAML_TARGET_VERTICES, value_parser =
          cli_support::limits::count(0, fem_laplace::memory::MAX_TARGET_VERTICES, "vertices"))]
    target_vertices: usize,
    /// The `fem-laplace` binary whose whole default run (serial, no `--json`) is timed and
    /// expressed in bandwidth sweeps (`cargo xtask bench fem` passes the release build).
    #[arg(long)]
    process: Option<std::path::PathBuf>,
}

/// Bytes a bandwidth sweep moves per vertex of the final mesh (issue 20's unit).
const SWEEP_BYTES_PER_VERTEX: f64 = 104.0;

/// Wall seconds of `exe`'s default run (stdout and stderr discarded), `repeats` times.
fn whole_process(exe: &std::path::Path, repeats: usize) -> Result<Vec<f64>> {
    let mut walls = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        let status = std::process::Command::new(exe)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", exe.display()))?;
        if !status.success() {
            anyhow::bail!("{} failed: {status}", exe.display());
        }
        walls.push(t.elapsed().as_secs_f64());
    }
    Ok(walls)
}

/// The median of `v` (one definition for the workspace: `cli_support::median`).
fn median(mut v: Vec<f64>) -> f64 {
    cli_support::median(&mut v)
}

/// User + system CPU seconds of this process so far (/proc/self/stat, clock ticks of 10 ms).
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Peak resident set (VmHWM) of this process in bytes.
fn vm_hwm() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn main() -> std::process::ExitCode {
    cli_support::main(run)
}

fn run() -> Result<()> {
    let o = Opts::parse();
    let exact = CornerSingularity;
    let cfg = AdaptConfig {
        target_vertices: o.target_vertices,
        ..AdaptConfig::default()
    };
    println!(
        "fem-bench: corner problem, double marking, target {} vertices, {} repeats, one thread",
        o.target_vertices, o.repeats as usize
    );
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at start: {}", l.trim());
    }

    let mut runs: Vec<Vec<StepReport>> = Vec::new();
    let mut totals = Vec::new();
    let mut cpu_share = Vec::new();
    let mut peak_heap = 0usize;
    let mut last: Option<(fem_laplace::Mesh, Vec<f64>)> = None;
    for rep in 0..o.repeats {
        drop(last.take());
        let base = cli_support::alloc::reset_peak();
        let c0 = cpu_seconds();
        let t0 = Instant::now();
        let mut a = Adaptive::new(&exact, cfg)?;
        let rs = a.run(|_, _| {})?;
        let wall = t0.elapsed().as_secs_f64();
        if let (Some(c0), Some(c1)) = (c0, cpu_seconds()) {
            cpu_share.push((c1 - c0) / wall);
        }
        peak_heap = peak_heap.max((cli_support::alloc::peak() - base).max(0) as usize);
        let method: f64 = rs.iter().map(|r| r.times.method()).sum();
        eprintln!(
            "  run {}/{}: method {:.3} s, wall incl. error evaluation {:.3} s",
            rep + 1,
            o.repeats as usize,
            method,
            wall
        );
        totals.push(method);
        last = Some((a.mesh().clone(), a.solution().to_vec()));
        drop(a);
        runs.push(rs);
    }
    let hwm = vm_hwm();
    let steps = runs[0].len();
    let med =
        |f: &dyn Fn(&StepReport) -> f64, k: usize| median(runs.iter().map(|r| f(&r[k])).collect());

    println!();
    println!(
        "{:>4} {:>8} {:>8} {:>10} {:>10} {:>3} {:>5} | {:>8} {:>8} {:>8} {:>8} {:>8} | {:>8}",
        "step",
        "vertices",
        "elements",
        "err_energy",
        "estimate",
        "cg",
        "κ",
        "refine",
        "assemble",
        "solve",
        "estimate",
        "total",
        "(error)"
    );
    println!(
        "{:>62} {:>8} {:>8} {:>8} {:>8} {:>8}   {:>8}",
        "", "ms", "ms", "ms", "ms", "ms", "ms"
    );
    for (k, r) in runs[0].iter().enumerate() {
        println!(
            "{:>4} {:>8} {:>8} {:>10.4e} {:>10.4e} {:>3} {:>5.1} | {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} | {:>8.2}",
            r.step,
            r.vertices,
            r.elements,
            r.error_energy.unwrap_or(f64::NAN),
            r.estimate,
            r.cg_iterations,
            r.condition_estimate,
            1e3 * med(&|r| r.times.refine, k),
            1e3 * med(&|r| r.times.assemble, k),
            1e3 * med(&|r| r.times.solve, k),
            1e3 * med(&|r| r.times.estimate, k),
            1e3 * med(&|r| r.times.method(), k),
            1e3 * med(&|r| r.times.error, k),
        );
    }
    let fin = steps - 1;
    let final_r = &runs[0][fin];
    let nv = final_r.vertices;
    let whole = median(totals.clone());
    println!();
    println!(
        "whole run (sum over steps of refine+assemble+solve+estimate), median of {}: {:.3} s   target ≤ 1.000 s   ratio {:.2}",
        o.repeats as usize,
        whole,
        whole / 1.0
    );
    println!(
        "  (min {:.3} s, max {:.3} s; error evaluation against the exact solution is a diagnostic and not counted)",
        totals.iter().cloned().fold(f64::INFINITY, f64::min),
        totals.iter().cloned().fold(0.0, f64::max)
    );
    type Phase<'a> = (&'a str, &'a dyn Fn(&StepReport) -> f64, f64);
    if !cpu_share.is_empty() {
        println!(
            "  CPU time / wall time of the runs (median): {:.2}; below 1 the process was waiting for the CPU (machine busy)",
            median(cpu_share.clone())
        );
    }
    let phases: [Phase<'_>; 5] = [
        ("final cycle", &|r| r.times.method(), 0.5),
        ("  refine", &|r| r.times.refine, 0.15),
        ("  assemble", &|r| r.times.assemble, 0.10),
        ("  solve", &|r| r.times.solve, 0.15),
        ("  estimate", &|r| r.times.estimate, 0.05),
    ];
    let minimum = |f: &dyn Fn(&StepReport) -> f64, k: usize| {
        runs.iter().map(|r| f(&r[k])).fold(f64::INFINITY, f64::min)
    };
    for (name, f, target) in phases {
        let m = med(f, fin);
        println!(
            "{name:<12} {:>8.1} ms (min {:>6.1})   target ≤ {:>5.0} ms   ratio {:.2}",
            1e3 * m,
            1e3 * minimum(f, fin),
            1e3 * target,
            m / target
        );
    }
    let (err, asm) = (
        med(&|r| r.times.error, fin),
        med(&|r| r.times.assemble, fin),
    );
    println!(
        "error evaluation (diagnostic) at the last step {:.1} ms = {:.2}× the assembly   target ≤ 0.50",
        1e3 * err,
        err / asm.max(1e-12)
    );
    let iters: Vec<usize> = runs[0].iter().map(|r| r.cg_iterations).collect();
    println!("CG iterations per step: {iters:?}");
    println!(
        "  of which the marking inside refine: {:.1} ms",
        1e3 * med(&|r| r.times.mark, fin)
    );
    println!();
    println!(
        "memory: peak live heap during a run {:.1} MB = {:.0} bytes/vertex (target ≤ 300)",
        peak_heap as f64 / 1e6,
        peak_heap as f64 / nv as f64
    );
    if let Some(h) = hwm {
        println!(
            "        peak RSS (VmHWM) of the process {:.1} MB = {:.0} bytes/vertex (includes binary and allocator slack)",
            h as f64 / 1e6,
            h as f64 / nv as f64
        );
    }

    let triad = cli_support::bandwidth::triad().bytes_per_s;
    let sweep = SWEEP_BYTES_PER_VERTEX * nv as f64 / triad;
    println!(
        "bandwidth: triad {:.2} GB/s; one sweep ({SWEEP_BYTES_PER_VERTEX:.0} bytes per final vertex) {:.2} ms",
        triad / 1e9,
        1e3 * sweep
    );
    if let Some(exe) = &o.process {
        let walls = whole_process(exe, o.repeats as usize)?;
        let m = median(walls.clone());
        println!(
            "whole process `{}` (serial default run), median of {}: {:.3} s = {:.0} sweeps   target ≤ 250 (min {:.3} s, max {:.3} s)",
            exe.display(),
            walls.len(),
            m,
            m / sweep,
            walls.iter().cloned().fold(f64::INFINITY, f64::min),
            walls.iter().cloned().fold(0.0, f64::max)
        );
    }

    // In-process reference kernels on the final mesh.
    let (mesh, u) = last.expect("at least one run");
    let sys = System::assemble(&mesh, &u);
    let mut y = vec![0.0; nv];
    let mut ts = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        sys.apply(&u, &mut y);
        ts.push(t.elapsed().as_secs_f64());
    }
    let spmv = median(ts);
    let nnz = sys.num_offdiagonal() + nv;
    println!();
    println!(
        "reference kernels on the final mesh ({nv} rows, {nnz} stored entries incl. diagonal):"
    );
    println!(
        "  one SpMV: {:.2} ms = {:.1} ns/row  (brief's machine figure: 9.5 ms per 10^6-row P1 Laplacian = 9.5 ns/row; ratio {:.2})",
        1e3 * spmv,
        1e9 * spmv / nv as f64,
        (1e9 * spmv / nv as f64) / 9.5
    );
    let solve = med(&|r| r.times.solve, fin);
    println!(
        "  final solve = {:.1} SpMVs ({} CG iterations)",
        solve / spmv,
        final_r.cg_iterations
    );
    let refine = med(&|r| r.times.refine, fin);
    let new_elems = (final_r.elements - runs[0][fin - 1].elements) as f64;
    println!(
        "  final refine: {:.1} ns per bisection (≈ new elements; brief: 90 ns)",
        1e9 * refine / new_elems
    );
    let asm = med(&|r| r.times.assemble, fin);
    println!(
        "  final assemble (matrix + multilevel set-up): {:.1} ns per element (brief: 39 ns)",
        1e9 * asm / final_r.elements as f64
    );
    let mut ts = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let s = System::assemble(&mesh, &u);
        ts.push(t.elapsed().as_secs_f64());
        drop(s);
    }
    let a = median(ts);
    println!(
        "  matrix assembly alone, median of 7: {:.1} ms = {:.1} ns per element (ratio to brief {:.2})",
        1e3 * a,
        1e9 * a / final_r.elements as f64,
        (1e9 * a / final_r.elements as f64) / 39.0
    );
    // Uniform newest-vertex bisection: every element of a 2^19-element mesh once.
    let mut uni = fem_laplace::Mesh::unit_square();
    while uni.num_elements() < (1 << 19) {
        let mut m = fem_laplace::Marks::new(uni.num_elements());
        for t in 0..uni.num_elements() {
            m.mark_element(&uni, t);
        }
        uni.refine(&m)?;
    }
    let mut ts = Vec::new();
    for _ in 0..5 {
        let mut mesh2 = uni.clone();
        let t = Instant::now();
        let mut m = fem_laplace::Marks::new(mesh2.num_elements());
        for e in 0..mesh2.num_elements() {
            m.mark_element(&mesh2, e);
        }
        mesh2.refine(&m)?;
        ts.push(t.elapsed().as_secs_f64());
    }
    let ub = median(ts);
    println!(
        "  uniform bisection of {} elements (marking + refinement), median of 5: {:.1} ms = {:.1} ns per bisection (ratio to brief's 90 ns: {:.2})",
        uni.num_elements(),
        1e3 * ub,
        1e9 * ub / uni.num_elements() as f64,
        (1e9 * ub / uni.num_elements() as f64) / 90.0
    );
    drop(uni);
    direct::compare(&mesh, &sys, &u, solve, final_r)?;
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at end: {}", l.trim());
    }
    Ok(())
}

#[cfg(feature = "faer")]
mod direct {
    use super::*;
    use faer::prelude::*;
    use faer::sparse::SparseColMat;
    use faer::sparse::linalg::solvers::{Cholesky, SymbolicCholesky};

    pub fn compare(
        mesh: &fem_laplace::Mesh,
        sys: &System,
        u: &[f64],
        cg_solve: f64,
        r: &StepReport,
    ) -> Result<()> {
        // Interior unknowns only (the Dirichlet rows are identities).
        let bnd = mesh.boundary_vertices();
        let nv = mesh.num_vertices();
        let mut idx = vec![u32::MAX; nv];
        let mut n = 0usize;
        for v in 0..nv {
            if !bnd[v] {
                idx[v] = n as u32;
                n += 1;
            }
        }
        let (rp, col, val) = sys.csr();
        let t = Instant::now();
        let mut trip = Vec::with_capacity(n + val.len() / 2);
        for v in 0..nv {
            if bnd[v] {
                continue;
            }
            let i = idx[v] as usize;
            trip.push((i, i, sys.diagonal()[v]));
            for p in rp[v] as usize..rp[v + 1] as usize {
                let j = idx[col[p] as usize] as usize;
                if j > i {
                    trip.push((j, i, val[p]));
                }
            }
        }
        let a = SparseColMat::<usize, f64>::try_new_from_triplets(n, n, &trip)
            .map_err(|e| anyhow::anyhow!("faer matrix: {e:?}"))?;
        drop(trip);
        let t_build = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let sym = SymbolicCholesky::try_new(a.symbolic(), faer::Side::Lower)
            .map_err(|e| anyhow::anyhow!("faer symbolic: {e:?}"))?;
        let t_sym = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let chol = Cholesky::try_new_with_symbolic(sym, a.as_ref(), faer::Side::Lower)
            .map_err(|e| anyhow::anyhow!("faer numeric: {e:?}"))?;
        let t_num = t.elapsed().as_secs_f64();
        let mut rhs = Col::<f64>::zeros(n);
        for v in 0..nv {
            if !bnd[v] {
                rhs[idx[v] as usize] = sys.rhs()[v];
            }
        }
        let t = Instant::now();
        let x = chol.solve(&rhs);
        let t_solve = t.elapsed().as_secs_f64();
        // Energy norm of the difference between the CG iterate and the direct solution.
        let mut d = vec![0.0; nv];
        for v in 0..nv {
            if !bnd[v] {
                d[v] = u[v] - x[idx[v] as usize];
            }
        }
        let mut ad = vec![0.0; nv];
        sys.apply(&d, &mut ad);
        let e: f64 = d
            .iter()
            .zip(&ad)
            .map(|(a, b)| a * b)
            .sum::<f64>()
            .max(0.0)
            .sqrt();
        let total = t_sym + t_num + t_solve;
        // CG to a tight tolerance from zero (Dirichlet data only), as a direct solver would.
        let mut ut: Vec<f64> = u
            .iter()
            .zip(bnd)
            .map(|(&x, &b)| if b { x } else { 0.0 })
            .collect();
        let mut pre = fem_laplace::Multilevel::new(mesh, sys);
        let tight = fem_laplace::CgConfig {
            tol_factor: 0.0,
            rel_residual: 1e-10,
            max_iter: 1000,
        };
        let t = Instant::now();
        let st = fem_laplace::solver::pcg(
            mesh,
            sys,
            &mut pre,
            &mut ut,
            0.0,
            &tight,
            &mut Default::default(),
        );
        let t_tight = t.elapsed().as_secs_f64();
        println!();
        println!(
            "sparse direct solve of the final system with faer (simplicial/supernodal Cholesky, AMD), same process, one thread:"
        );
        println!(
            "  {n} unknowns; triplets→CSC {:.1} ms, symbolic {:.1} ms, numeric {:.1} ms, triangular solves {:.1} ms, total {:.1} ms",
            1e3 * t_build,
            1e3 * t_sym,
            1e3 * t_num,
            1e3 * t_solve,
            1e3 * total
        );
        println!(
            "  multilevel CG (nested iteration, {} iterations) {:.1} ms: {:.1}× faster than factor+solve",
            r.cg_iterations,
            1e3 * cg_solve,
            total / cg_solve
        );
        println!(
            "  multilevel CG from zero to a 1e-10 relative residual: {} iterations, {:.1} ms ({:.1}× faster than faer)",
            st.iterations,
            1e3 * t_tight,
            total / t_tight
        );
        println!(
            "  ‖u_cg − u_direct‖_A = {:.2e}, vs energy error ‖u − u_h‖ = {:.2e} and estimate η = {:.2e}",
            e,
            r.error_energy.unwrap_or(f64::NAN),
            r.estimate
        );
        if let Some(h) = vm_hwm() {
            println!(
                "  (peak RSS after the direct solve: {:.1} MB)",
                h as f64 / 1e6
            );
        }
        Ok(())
    }
}

#[cfg(not(feature = "faer"))]
mod direct {
    use super::*;
    pub fn compare(
        _: &fem_laplace::Mesh,
        _: &System,
        _: &[f64],
        _: f64,
        _: &StepReport,
    ) -> Result<()> {
        println!();
        println!(
            "sparse direct comparison skipped: build with `--features faer` (cargo xtask bench fem does)"
        );
        Ok(())
    }
}
