//! `fem-laplace`: the adaptive loop of PHAML's Laplace experiment (DRUM 2005 §4), in one
//! process or over ranks (threads, or MPI processes under `mpirun`).

mod drum;
mod plot;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use drum::{DrumArgs, Loads, NetLoad, RankEnd, Summary};
use drum_model::Machine;
use drum_model::load::LoadSpec;
use fem_laplace::dist::{Balancer, DistConfig, DistStepReport, RankRun, mesh_hash};
use fem_laplace::output::{VtuFields, write_pvd, write_svg, write_svg_ranks, write_vtu};
use fem_laplace::{
    AdaptConfig, Adaptive, CgConfig, ExactSolution, FemError, Marking, PHAML_TARGET_VERTICES,
    Problem, StepReport,
};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Adaptive P1 solution of −Δu = 0 on the unit square (PHAML's experiment in DRUM 2005 §4),
/// in one process or distributed over ranks with the same result to the bit.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Stop once the mesh has at least this many vertices (at most 20,000,000).
    #[arg(long, default_value_t = PHAML_TARGET_VERTICES, value_parser =
          cli_support::limits::count(0, fem_laplace::memory::MAX_TARGET_VERTICES, "vertices"))]
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
    /// Write a `.vtu` file per step (and `steps.pvd`) into this directory; over ranks, one
    /// piece per rank and a `.pvtu` per step.
    #[arg(long)]
    vtk: Option<PathBuf>,
    /// With `--vtk`: write only the last step's files.
    #[arg(long, requires = "vtk")]
    vtk_last: bool,
    /// Write an SVG picture of the final mesh (over ranks: coloured by rank).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Run over this many ranks (with `--backend mpi`: must equal mpirun's -np). Without it
    /// (and without `--machine`) the run is one process.
    #[arg(long)]
    ranks: Option<usize>,
    /// `threads` (ranks as threads of this process) or `mpi` (one process per rank, under
    /// mpirun; needs a build with the `mpi` feature).
    #[arg(long, value_enum, default_value_t = Backend::Threads)]
    backend: Backend,
    /// Run DRUM in the loop on this machine description: its ranks are the run's ranks, each
    /// pinned to its node's `cpus` and monitored by its agent; after each refinement the
    /// elements are repartitioned with `hier-part` along the machine's tree when the policy
    /// says so (see `--balance`). Default: flat HSFC into equal parts, at every step where
    /// a rank holds more than 1 % above the mean element count (`drum_loop::FLAT_TOLERANCE`).
    #[arg(long)]
    machine: Option<PathBuf>,
    #[command(flatten)]
    drum: DrumArgs,
    /// Also write the steps' JSON lines to this file.
    #[arg(long)]
    jsonl: Option<PathBuf>,
    /// Over ranks: write an SVG plot of the part sizes and per-rank times over the steps.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Over ranks: write the run's summary (per-rank power, work share, utilisation, monitor
    /// cost; imbalance per step; migrations; RC_ideal) as JSON to this file.
    #[arg(long)]
    summary_json: Option<PathBuf>,
    /// One progress line per step on stderr (a bar when stderr is a terminal).
    #[arg(long)]
    progress: bool,
    /// Leave out the per-step mesh hash (it gathers the whole mesh on rank 0).
    #[arg(long)]
    no_hash: bool,
    /// For tests of failure handling: `RANK:STEP` makes that rank fail at that step.
    #[arg(long, hide = true)]
    fail_at: Option<String>,
    /// The limit of the ranks of a run over threads.
    #[command(flatten)]
    max_ranks: cli_support::limits::MaxRanks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    Threads,
    Mpi,
}

fn main() -> std::process::ExitCode {
    fem_laplace::memory::keep_freed_memory();
    cli_support::main(|| match run() {
        // `fem-laplace --json | head` is fine.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        // Every file's error names the file: a bare I/O error is the report's, on stdout.
        Err(e) if e.chain().count() == 1 && e.is::<std::io::Error>() => {
            Err(e.context("writing to stdout"))
        }
        other => other,
    })
}

/// Settings shared by every path.
struct Setup {
    args: Args,
    problem: Problem,
    marking: Marking,
    cfg: AdaptConfig,
    /// `--machine`, read.
    machine: Option<Machine>,
    /// The competing loads to run.
    loads: Vec<LoadSpec>,
    /// The competing flows to run.
    net_loads: Vec<NetLoad>,
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
    // Every output is tried now, not at the end of a long run.
    cli_support::check_outputs([
        (
            "--vtk",
            args.vtk.as_ref().map(|d| d.join("steps.pvd")).as_deref(),
        ),
        ("--svg", args.svg.as_deref()),
        ("--jsonl", args.jsonl.as_deref()),
        ("--plot", args.plot.as_deref()),
        ("--summary-json", args.summary_json.as_deref()),
    ])?;
    if args.ranks == Some(0) {
        bail!("--ranks 0: a run needs at least one rank");
    }
    let machine = match &args.machine {
        Some(path) => Some(
            Machine::from_file(path).with_context(|| format!("--machine {}", path.display()))?,
        ),
        None => {
            let d = &args.drum;
            if d.balance.is_some()
                || !d.load.is_empty()
                || d.machine_load
                || !d.net_load.is_empty()
                || d.transfer.is_some()
                || d.capacity.is_some()
            {
                bail!(
                    "--balance, --capacity, --load, --machine-load, --net-load and --transfer need \
                     --machine (the ranks' nodes)"
                );
            }
            None
        }
    };
    check_size(&args, machine.as_ref())?;
    let (loads, net_loads) = match &machine {
        Some(m) => (args.drum.loads(m)?, args.drum.net_loads(m)?),
        None => (Vec::new(), Vec::new()),
    };
    let setup = Setup {
        args,
        problem,
        marking,
        cfg,
        machine,
        loads,
        net_loads,
    };
    match (setup.args.backend, setup.args.ranks, &setup.args.machine) {
        (Backend::Mpi, ..) => run_mpi(&setup),
        (Backend::Threads, None, None) => run_serial(&setup),
        (Backend::Threads, ..) => run_threads(&setup),
    }
}

/// Refuses, before any rank starts, a run over thread ranks with more ranks than
/// `--max-ranks` or whose estimated peak memory (`fem_laplace::memory::run_bytes`) is over
/// what the host has available, with the figures.
fn check_size(args: &Args, machine: Option<&Machine>) -> Result<()> {
    if args.backend == Backend::Mpi {
        return Ok(());
    }
    let (ranks, what) = match (machine, args.ranks) {
        (Some(m), _) => (m.num_ranks(), format!("--machine {}", m.source())),
        (None, Some(r)) => (r, format!("--ranks {r}")),
        (None, None) => (1, "the serial run".to_string()),
    };
    args.max_ranks.check(&what, ranks)?;
    let need = fem_laplace::memory::run_bytes(ranks, args.target_vertices);
    let have = fem_laplace::memory::available_bytes();
    if let Some(why) = fem_laplace::memory::refusal(need, have, "the run") {
        bail!(
            "{what} with --target-vertices {} ({ranks} rank(s)): {why}",
            args.target_vertices
        );
    }
    Ok(())
}

/// [`check_size`] for a run under MPI, before it allocates: the processes on this rank's
/// host (`Comm::split_node`) against the host's available memory; every rank stops if one
/// host's would not fit.
#[cfg(feature = "mpi")]
fn check_mpi_size(world: &comm::MpiComm, args: &Args) -> Result<()> {
    use comm::Comm;
    let local = world.split_node()?.size();
    let size = world.size();
    let need = fem_laplace::memory::host_bytes(size, local, args.target_vertices);
    let have = fem_laplace::memory::available_bytes();
    let fits = match fem_laplace::memory::refusal(need, have, "they") {
        Some(why) => Err(anyhow::anyhow!(
            "--backend mpi with --target-vertices {}: {local} of the run's {size} process(es) \
             share the host {}, and {why}",
            args.target_vertices,
            world.processor_name()
        )),
        None => Ok(()),
    };
    cli_support::collective(world, fits)
}

fn header(
    out: &mut impl Write,
    s: &Setup,
    exact: &dyn ExactSolution,
    ranks: Option<usize>,
) -> Result<()> {
    if s.args.json {
        return Ok(());
    }
    let over = match ranks {
        Some(r) => format!(", {r} ranks ({:?})", s.args.backend).to_lowercase(),
        None => String::new(),
    };
    writeln!(
        out,
        "fem-laplace: −Δu = 0 on (0,1)², u = {} on the boundary, marking {}, target {} vertices{over}",
        exact.name(),
        s.marking,
        s.args.target_vertices
    )?;
    write!(
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
    if ranks.is_some() {
        write!(
            out,
            " {:>7} {:>7} {:>8} {:>5}",
            "balance", "imbal.", "moved", "coll."
        )?;
    }
    writeln!(out)?;
    Ok(())
}

fn row(out: &mut impl Write, r: &StepReport, total: f64) -> Result<()> {
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.4e}"));
    write!(
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
    Ok(())
}

fn rate_line(out: &mut impl Write, reports: &[StepReport]) -> Result<()> {
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
    Ok(())
}

fn progress(on: bool, k: usize, goal: usize) {
    if on {
        if k == 0 {
            eprint!("\r  step 0: solving on the initial mesh…\x1b[K");
        } else {
            eprint!("\r  step {k}: refining towards {goal} vertices, solving…\x1b[K");
        }
    }
}

/// One process: the serial [`Adaptive`] loop.
fn run_serial(s: &Setup) -> Result<()> {
    let exact = s.problem.solution();
    let mut run = Adaptive::new(exact.as_ref(), s.cfg)?;
    let progress_on = !s.args.json && std::io::stderr().is_terminal();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    header(&mut out, s, exact.as_ref(), None)?;
    let mut vtus = Vec::new();
    let mut total = 0.0;
    let mut reports: Vec<StepReport> = Vec::new();
    loop {
        let k = reports.len();
        let goal = match s.marking {
            Marking::Double => run.step_target(k),
            Marking::Doerfler(_) => s.args.target_vertices,
        };
        progress(progress_on, k, goal);
        let Some(r) = run.step()? else { break };
        if progress_on {
            eprint!("\r\x1b[K");
        }
        total += r.times.method();
        if s.args.json {
            let mut v = serde_json::to_value(r)?;
            if !s.args.no_hash {
                v["mesh_hash"] = format!("{:016x}", mesh_hash(run.mesh())).into();
            }
            writeln!(out, "{v}")?;
        } else {
            row(&mut out, &r, total)?;
            writeln!(out)?;
        }
        out.flush()?;
        if let Some(dir) = &s.args.vtk
            && !s.args.vtk_last
        {
            vtus.push(serial_vtu(dir, &run, r.step)?);
            // Rewritten whole each step: a run stopped at any point leaves a valid collection.
            write_pvd(&dir.join("steps.pvd"), &vtus)?;
        }
        reports.push(r);
    }
    if let (Some(dir), true, Some(r)) = (&s.args.vtk, s.args.vtk_last, reports.last()) {
        vtus.push(serial_vtu(dir, &run, r.step)?);
    }
    if let Some(dir) = &s.args.vtk {
        write_pvd(&dir.join("steps.pvd"), &vtus)?;
    }
    if !s.args.json {
        rate_line(&mut out, &reports)?;
        writeln!(
            out,
            "method time (refine+assemble+solve+estimate): {total:.3} s"
        )?;
    }
    if let Some(svg) = &s.args.svg {
        let title = format!(
            "fem-laplace, {} problem, {} marking",
            exact.name(),
            s.marking
        );
        write_svg(svg, run.mesh(), &title)?;
        if !s.args.json {
            writeln!(out, "mesh picture: {}", svg.display())?;
        }
    }
    Ok(())
}

/// Writes the serial run's current mesh as `dir/step_SS.vtu`; returns (step, file name).
fn serial_vtu(dir: &std::path::Path, run: &Adaptive, step: usize) -> Result<(usize, String)> {
    let name = format!("step_{step:02}.vtu");
    let fields = VtuFields {
        solution: run.solution(),
        indicators: run.indicators(),
        element_errors: run.element_errors(),
        rank: 0,
    };
    write_vtu(&dir.join(&name), run.mesh(), &fields)?;
    Ok((step, name))
}

/// The balancer of the run and its number of ranks (`--machine` or flat).
fn balancer(s: &Setup, size: Option<usize>) -> Result<(Balancer, usize)> {
    let Some(machine) = &s.machine else {
        let r = size.or(s.args.ranks).unwrap_or(1);
        return Ok((Balancer::flat(), r));
    };
    let n = machine.num_ranks();
    for (what, r) in [("--ranks", s.args.ranks), ("the MPI world", size)] {
        if let Some(r) = r
            && r != n
        {
            bail!(
                "{what} has {r} ranks but {} describes {n}: they must match",
                machine.source()
            );
        }
    }
    Ok((s.args.drum.balancer(machine)?, n))
}

fn fail_at(s: &Setup) -> Result<Option<(usize, usize)>> {
    let Some(f) = &s.args.fail_at else {
        return Ok(None);
    };
    let (r, k) = f
        .split_once(':')
        .with_context(|| format!("--fail-at {f}: expected RANK:STEP"))?;
    Ok(Some((
        r.parse().context("--fail-at rank")?,
        k.parse().context("--fail-at step")?,
    )))
}

/// What rank 0 passes to the printer.
enum Event {
    Step(Box<DistStepReport>),
    /// Every rank's host (its processor name), before the first step.
    Hosts(Vec<String>),
    /// Every rank's end figures (monitor cost, loads).
    End(Vec<RankEnd>),
    Done,
}

/// The loop of one rank: loads, steps, files; rank 0 sends its reports to `tx`.
fn rank_loop<C: comm::Comm>(
    comm: C,
    s: &Setup,
    exact: &dyn ExactSolution,
    balancer: Balancer,
    tx: &dyn Fn(Event),
) -> Result<()> {
    let mut cfg = DistConfig::new(s.cfg);
    cfg.mesh_hash = !s.args.no_hash && (s.args.json || s.args.jsonl.is_some());
    cfg.fail_at = fail_at(s)?;
    cfg.gain_horizon = s.args.drum.gain_horizon.into();
    let rank = comm.rank();
    let host = comm.processor_name();
    if let Some(all) = comm.gatherv_bytes(0, host.as_bytes())? {
        let hosts = all
            .iter()
            .map(|h| String::from_utf8_lossy(h).into_owned())
            .collect();
        tx(Event::Hosts(hosts));
    }
    let mut loads = s
        .machine
        .as_ref()
        .map(|m| Loads::new(m, rank, &s.loads, &s.net_loads));
    let mut run = RankRun::new(comm, exact, cfg, balancer)?;
    let mut pvtus = Vec::new();
    let mut last = None;
    loop {
        if let Some(l) = &mut loads {
            let started = l.at_step(run.next_step());
            part_api::agreed(&comm::AsReduce(run.comm()), started, |_, failed| {
                FemError::PeerFailed { rank, failed }.into()
            })?;
        }
        let Some(r) = run.step()? else { break };
        last = Some(r.base.step);
        if let Some(dir) = &s.args.vtk
            && !s.args.vtk_last
            && let Some(name) = run.write_vtu(dir, r.base.step)?
        {
            pvtus.push((r.base.step, name));
            // Rewritten whole each step: a run stopped at any point leaves a valid collection.
            write_pvd(&dir.join("steps.pvd"), &pvtus)?;
        }
        if rank == 0 {
            tx(Event::Step(Box::new(r)));
        }
    }
    if let (Some(dir), true, Some(k)) = (&s.args.vtk, s.args.vtk_last, last)
        && let Some(name) = run.write_vtu(dir, k)?
    {
        pvtus.push((k, name));
    }
    let monitor = run.stop_monitoring()?;
    let stopped = match &mut loads {
        Some(l) => l.stop()?,
        None => drum::Stopped::default(),
    };
    let end = RankEnd {
        monitor,
        load_procs: stopped.procs,
        load_died: stopped.died,
        load_cpu_s: stopped.cpu_s,
        net_load_bytes: stopped.net_bytes,
    };
    if let Some(all) = run.comm().gatherv(0, &end.to_words())? {
        let ends = (0..run.comm().size())
            .map(|r| RankEnd::from_words(all.get(r)))
            .collect();
        tx(Event::End(ends));
    }
    if let Some(dir) = &s.args.vtk
        && rank == 0
    {
        write_pvd(&dir.join("steps.pvd"), &pvtus)?;
    }
    if let Some(svg) = &s.args.svg
        && let Some((mesh, ranks)) = run.gather_partition()?
    {
        let title = format!(
            "fem-laplace over {} ranks, {} problem, {} marking: the partition",
            run.comm().size(),
            exact.name(),
            s.marking
        );
        write_svg_ranks(svg, &mesh, &ranks, &title)?;
    }
    Ok(())
}

/// Where progress goes: nowhere, one line per step, or a bar redrawn in place (a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    Off,
    Lines,
    Bar,
}

impl Progress {
    fn of(s: &Setup) -> Progress {
        let tty = std::io::stderr().is_terminal();
        match (s.args.progress, tty && !s.args.json) {
            (_, true) => Progress::Bar,
            (true, false) => Progress::Lines,
            (false, false) => Progress::Off,
        }
    }
}

/// Steps of a run to `target` vertices under PHAML's doubling (None for Dörfler).
fn planned_steps(s: &Setup) -> Option<usize> {
    match s.marking {
        Marking::Double => {
            let mut k = 0;
            while (5u128 << k.min(100)) < s.args.target_vertices as u128 {
                k += 1;
            }
            Some(k)
        }
        Marking::Doerfler(_) => None,
    }
}

/// Prints rank 0's reports as they come, keeps them for the summary.
struct Printer {
    json: bool,
    total: f64,
    reports: Vec<DistStepReport>,
    ends: Vec<RankEnd>,
    /// Each rank's host, once known.
    hosts: Vec<String>,
    progress: Progress,
    last_step: Option<usize>,
    /// `--jsonl`: its path and the file, flushed after every step.
    jsonl: Option<(PathBuf, std::fs::File)>,
}

impl Printer {
    fn new(s: &Setup) -> Result<Printer> {
        let jsonl = match &s.args.jsonl {
            Some(p) => Some((
                p.clone(),
                std::fs::File::create(p)
                    .with_context(|| format!("--jsonl: cannot create {}", p.display()))?,
            )),
            None => None,
        };
        Ok(Printer {
            json: s.args.json,
            total: 0.0,
            reports: Vec::new(),
            ends: Vec::new(),
            hosts: Vec::new(),
            progress: Progress::of(s),
            last_step: planned_steps(s),
            jsonl,
        })
    }

    fn step(&mut self, out: &mut impl Write, r: &DistStepReport) -> Result<()> {
        if self.progress == Progress::Bar {
            eprint!("\r\x1b[K");
        }
        self.total += r.wall_s;
        let mut v = serde_json::to_value(r)?;
        if let Some(ranks) = v["ranks"].as_array_mut() {
            for (entry, host) in ranks.iter_mut().zip(&self.hosts) {
                entry["host"] = host.as_str().into();
            }
        }
        let line = v.to_string();
        if let Some((p, f)) = &mut self.jsonl {
            // One write per step, unbuffered: a kill loses at most the step being written.
            f.write_all(format!("{line}\n").as_bytes())
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        if self.json {
            writeln!(out, "{line}")?;
        } else {
            row(out, &r.base, self.total)?;
            let owned: Vec<usize> = r.ranks.iter().map(|x| x.owned).collect();
            let mean = owned.iter().sum::<usize>() as f64 / owned.len().max(1) as f64;
            let max = owned.iter().copied().max().unwrap_or(0) as f64;
            let balance = r
                .ranks
                .iter()
                .map(|x| x.times.partition + x.times.migrate + x.times.setup)
                .fold(0.0, f64::max);
            let calls = r.ranks.iter().map(|x| x.collectives).max().unwrap_or(0);
            writeln!(
                out,
                " {:>7.4} {:>7.3} {:>8} {:>5}",
                balance,
                max / mean.max(1.0),
                r.migration.elements,
                calls
            )?;
        }
        out.flush()?;
        self.progress_line(r);
        self.reports.push(r.clone());
        Ok(())
    }

    fn progress_line(&self, r: &DistStepReport) {
        if self.progress == Progress::Off {
            return;
        }
        let of = self.last_step.map_or(String::new(), |n| format!("/{n}"));
        let bar = match self.last_step {
            Some(n) if n > 0 => {
                // Work doubles each step: the bar fills with the work done, 2^k of 2^(n+1).
                let frac =
                    (2f64.powi(r.base.step as i32 + 1) - 1.0) / (2f64.powi(n as i32 + 1) - 1.0);
                let w = 24;
                let k = ((frac * w as f64).round() as usize).min(w);
                format!("[{}{}] ", "#".repeat(k), "-".repeat(w - k))
            }
            _ => String::new(),
        };
        let sizes = r.balance.as_ref().map_or(String::new(), |b| {
            format!(
                "  sizes {}  {}",
                b.achieved
                    .iter()
                    .map(|x| format!("{x:.3}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                if b.decision.rebalance {
                    format!("rebalanced ({})", b.decision.reason)
                } else {
                    format!("kept ({})", b.decision.reason)
                }
            )
        });
        let text = format!(
            "step {}{of} {bar}{} vertices  {:.3} s (total {:.3} s){sizes}",
            r.base.step, r.base.vertices, r.wall_s, self.total
        );
        match self.progress {
            Progress::Bar => eprint!("\r{text}\x1b[K"),
            _ => eprintln!("{text}"),
        }
    }

    fn summary(&mut self, out: &mut impl Write, s: &Setup) -> Result<()> {
        if self.progress == Progress::Bar {
            eprintln!();
        }
        let summary = Summary::new(
            &self.reports,
            &self.ends,
            &self.hosts,
            s.machine.as_ref(),
            &s.loads,
        );
        if let Some(p) = &s.args.summary_json {
            cli_support::write_output(p, serde_json::to_string_pretty(&summary)? + "\n")?;
        }
        if let Some(p) = &s.args.plot {
            let title = format!(
                "fem-laplace over {} ranks, {} balance",
                summary.ranks, summary.balance
            );
            plot::write(p, &self.reports, &title)?;
        }
        if self.json {
            return Ok(());
        }
        let base: Vec<StepReport> = self.reports.iter().map(|r| r.base).collect();
        rate_line(out, &base)?;
        writeln!(
            out,
            "wall time of the steps on rank 0: {:.3} s over {} ranks",
            self.total, summary.ranks
        )?;
        writeln!(out, "{}", calls_line(&self.reports))?;
        if s.machine.is_some() {
            summary.print(out, &self.reports)?;
        }
        for (what, p) in [
            ("plot", &s.args.plot),
            ("summary", &s.args.summary_json),
            ("partition picture", &s.args.svg),
        ] {
            if let Some(p) = p {
                writeln!(out, "{what}: {}", p.display())?;
            }
        }
        Ok(())
    }

    fn event(&mut self, out: &mut impl Write, e: Event) -> Result<bool> {
        match e {
            Event::Step(r) => self.step(out, &r)?,
            Event::End(ends) => self.ends = ends,
            Event::Hosts(hosts) => self.hosts = hosts,
            Event::Done => return Ok(false),
        }
        Ok(true)
    }
}

/// Calls into the communicator per rank and step (the most of any rank), over the run and
/// over the last five steps, with the phases of the last step that make them.
fn calls_line(reports: &[DistStepReport]) -> String {
    let most = |r: &DistStepReport| r.ranks.iter().map(|x| x.collectives).max().unwrap_or(0);
    let all: Vec<u64> = reports.iter().map(most).collect();
    let last5 = &all[all.len().saturating_sub(5)..];
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let phases = reports
        .last()
        .and_then(|r| r.ranks.iter().max_by_key(|x| x.collectives))
        .map(|x| {
            fem_laplace::dist::Phase::ALL
                .iter()
                .map(|&p| (p.name(), x.phases.get(p).collectives))
                .filter(|&(_, c)| c > 0)
                .map(|(n, c)| format!("{n} {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    format!(
        "collectives per rank and step: {:.1} over the run, {:.1} over the last {} steps (last step: {phases})",
        mean(&all),
        mean(last5),
        last5.len()
    )
}

/// Ranks as threads of this process (each pinned to its node's `cpus` with a machine).
fn run_threads(s: &Setup) -> Result<()> {
    let (balancer, n) = balancer(s, None)?;
    let exact = s.problem.solution();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    header(&mut out, s, exact.as_ref(), Some(n))?;
    let (tx, rx) = std::sync::mpsc::channel::<Event>();
    let tx = std::sync::Mutex::new(tx);
    let mut printer = Printer::new(s)?;
    let options = comm::ThreadOptions {
        cpus: s
            .machine
            .as_ref()
            .filter(|_| !s.args.drum.no_pin)
            .and_then(drum::rank_cpus),
        spin: s.args.drum.spin_us.map(std::time::Duration::from_micros),
        ..comm::ThreadOptions::default()
    };
    let results = std::thread::scope(|scope| {
        let exact = exact.as_ref();
        let handle = scope.spawn(|| {
            let r = comm::ThreadComm::run(n, &options, |c| {
                let send = |e: Event| {
                    let _ = tx.lock().map(|t| t.send(e));
                };
                rank_loop(c, s, exact, balancer.clone(), &send)
            });
            // However the ranks ended, the printer stops waiting.
            let _ = tx.lock().map(|t| t.send(Event::Done));
            r
        });
        let mut printed: Result<()> = Ok(());
        for e in rx.iter() {
            if printed.is_ok() {
                match printer.event(&mut out, e) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(err) => printed = Err(err),
                }
            } else if matches!(e, Event::Done) {
                break;
            }
        }
        (handle.join(), printed)
    });
    let (joined, printed) = results;
    let per_rank = joined
        .map_err(|_| anyhow::anyhow!("the ranks' thread panicked"))?
        .context("the run over threads failed")?;
    cli_support::rank_results(per_rank, |e| {
        matches!(
            e.downcast_ref::<FemError>(),
            Some(FemError::PeerFailed { .. } | FemError::Comm(_))
        )
    })?;
    printed?;
    printer.summary(&mut out, s)?;
    Ok(())
}

/// One MPI process per rank, under mpirun (`cli_support::mpi::main`: an error on any rank
/// ends the job with that rank's message).
#[cfg(feature = "mpi")]
fn run_mpi(s: &Setup) -> Result<()> {
    use comm::Comm;
    cli_support::mpi::main(|world| {
        let (rank, size) = (world.rank(), world.size());
        if let Some(r) = s.args.ranks
            && r != size
        {
            bail!("--ranks {r} but mpirun started {size} processes: they must match");
        }
        check_mpi_size(world, &s.args)?;
        let (balancer, _) = balancer(s, Some(size))?;
        let pinned = match s
            .machine
            .as_ref()
            .filter(|_| !s.args.drum.no_pin)
            .and_then(drum::rank_cpus)
        {
            Some(cpus) => comm::pin_current_thread(rank, &cpus[rank]).with_context(|| {
                format!("pinning rank {rank} to its node's cpus (--no-pin skips it)")
            }),
            None => Ok(()),
        };
        // One rank may fail alone (its CPUs are not its to use): all stop here together.
        cli_support::collective(world, pinned)?;
        let exact = s.problem.solution();
        let stdout = std::io::stdout();
        let out = std::cell::RefCell::new(stdout.lock());
        if rank == 0 {
            header(&mut *out.borrow_mut(), s, exact.as_ref(), Some(size))?;
        }
        let printer = std::cell::RefCell::new(Printer::new(s)?);
        let printed = std::cell::RefCell::new(Ok(()));
        let send = |e: Event| {
            if printed.borrow().is_ok() {
                let res = printer.borrow_mut().event(&mut *out.borrow_mut(), e);
                *printed.borrow_mut() = res.map(|_| ());
            }
        };
        // The run owns its communicator: a duplicate of the world's.
        let comm = world.split(0, rank as i32)?;
        rank_loop(comm, s, exact.as_ref(), balancer, &send)?;
        printed.into_inner()?;
        if rank == 0 {
            printer.borrow_mut().summary(&mut *out.borrow_mut(), s)?;
        }
        Ok(())
    })
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &Setup) -> Result<()> {
    bail!(
        "this fem-laplace was built without MPI: build it with `cargo build --release -p fem-laplace-cli --features mpi` and run it under mpirun"
    )
}
