//! `samr`: the structured AMR kernel over thread or MPI ranks with a box partitioner
//! (Sinha & Parashar's ACEHeterogeneous, GrACE's SFC default, or hier-part along the machine
//! tree) and optionally Lan, Taylor & Bryan's two-phase balancing; `samr partition`
//! partitions one box list.

mod drum;
mod partition;
mod setup;
mod svg;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use comm::Comm;
use drum::DrumArgs;
use samr_kernel::drum::{DrumSetup, RankDrum, Sensed};
use samr_kernel::lan::LinkModel;
use samr_kernel::{
    Balancer, Cluster, Figures, Problem, RankRun, SamrConfig, SamrError, StepReport,
};
use setup::{RankArgs, Ranks, TwoPhaseArgs, parse_link};
use std::fmt::Write as _;
use std::path::PathBuf;

/// A structured AMR kernel (a pulse carried round the unit square on a Berger–Oliger
/// hierarchy) over ranks, with the box partitioners of Sinha & Parashar and the two-phase
/// balancing of Lan, Taylor & Bryan. The solution is the same to the bit for any rank count
/// and partitioner (see the hash of each step).
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Partition a list of boxes once and print each rank's work and patches.
    Partition(partition::PartitionArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// Ranks as threads of this process.
    Threads,
    /// One process per rank under mpirun (a build with feature `mpi`).
    Mpi,
}

/// The run's flags.
#[derive(Debug, Args)]
struct RunArgs {
    /// `threads` or `mpi` (under mpirun, -np equal to the ranks).
    #[arg(long, value_enum, default_value_t = Backend::Threads)]
    backend: Backend,
    /// Level-0 steps (100: the pulse moves about 24 level-0 cells; at most 100,000).
    #[arg(long, default_value_t = 100,
          value_parser = cli_support::limits::count(0, MAX_STEPS, "steps"))]
    steps: usize,
    /// Level-0 cells per side (1..4096, and n0 * 2^max_level at most 4096).
    #[arg(long, default_value_t = SamrConfig::default().n0, value_parser = parse_n0)]
    n0: i64,
    /// The finest level (0: no refinement).
    #[arg(long, default_value_t = SamrConfig::default().max_level)]
    max_level: u8,
    /// Regrid after every this many level-0 steps.
    #[arg(long, default_value_t = SamrConfig::default().regrid_every)]
    regrid_every: usize,
    /// Berger–Rigoutsos efficiency: accept a box when this fraction of it is flagged.
    #[arg(long, default_value_t = SamrConfig::default().cluster.efficiency)]
    efficiency: f64,
    /// Minimum box size (cells of the box's level), for clustering and partitioning.
    #[arg(long, default_value_t = SamrConfig::default().cluster.min_box)]
    min_box: i64,
    /// Flag a cell when its largest undivided difference exceeds this.
    #[arg(long, default_value_t = SamrConfig::default().flag_tol)]
    flag_tol: f64,
    /// Grow the flagged region by this many cells.
    #[arg(long, default_value_t = SamrConfig::default().flag_buffer)]
    buffer: i64,
    /// Compute each patch update this many times per step (the arithmetic of a heavier
    /// scheme; the result is the same).
    #[arg(long, default_value_t = SamrConfig::default().sweeps)]
    sweeps: u32,
    /// One JSON object per level-0 step on stdout, nothing else.
    #[arg(long)]
    json: bool,
    /// Model a slow link between the groups ("ALPHA,BETA": seconds, seconds per byte; Lan
    /// et al.'s two sites on one host): a rank that received values from another group
    /// waits ALPHA + BETA * bytes before reading them. Needs groups (a --machine whose root
    /// has several children, or --scheme two-phase).
    #[arg(long, value_name = "ALPHA,BETA", value_parser = parse_link)]
    slow_link: Option<LinkModel>,
    /// Write the final hierarchy as an SVG picture (patches coloured by rank) to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    #[command(flatten)]
    ranks: RankArgs,
    #[command(flatten)]
    scheme: TwoPhaseArgs,
    #[command(flatten)]
    drum: DrumArgs,
    /// The limit of `--backend threads`' ranks.
    #[command(flatten)]
    max_ranks: cli_support::limits::MaxRanks,
}

/// Most level-0 steps of a run (`--steps`): a thousand times the default, minutes of a
/// default run on one core.
const MAX_STEPS: usize = 100_000;

/// `--n0`: 1 to [`samr_kernel::MAX_REGRID_SIDE`] level-0 cells per side (the finest level's
/// side, n0 * 2^max_level, is checked against the same limit with the configuration).
fn parse_n0(s: &str) -> Result<i64, String> {
    let max = samr_kernel::MAX_REGRID_SIDE as usize;
    cli_support::limits::count(1, max, "level-0 cells per side")(s).map(|n| n as i64)
}

fn main() -> std::process::ExitCode {
    cli_support::main(command)
}

/// The command; [`main`] reports its error without a backtrace.
fn command() -> Result<()> {
    // Output goes through `cli_support::emit`: `samr --json | head` is fine.
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Partition(a)) => partition::run(a),
        None => run(&cli.run),
    }
}

/// Everything a rank needs to run.
struct Setup {
    cfg: SamrConfig,
    balancer: Balancer,
    figures: Figures,
    ranks: Ranks,
    drum: DrumSetup,
    steps: usize,
    json: bool,
    svg: Option<PathBuf>,
}

fn run(a: &RunArgs) -> Result<()> {
    match a.backend {
        Backend::Threads => {
            let s = setup(a, 1)?;
            a.max_ranks.check("--backend threads", s.ranks.ranks)?;
            run_threads(&s)
        }
        Backend::Mpi => run_mpi(a),
    }
}

/// The settings of a run; `default_ranks` when neither --ranks, --machine nor --capacities
/// says how many.
fn setup(a: &RunArgs, default_ranks: usize) -> Result<Setup> {
    let cfg = SamrConfig {
        n0: a.n0,
        max_level: a.max_level,
        regrid_every: a.regrid_every,
        cluster: Cluster {
            efficiency: a.efficiency,
            min_box: a.min_box,
        },
        flag_tol: a.flag_tol,
        flag_buffer: a.buffer,
        problem: Problem::default(),
        sweeps: a.sweeps,
    };
    cfg.validate()?;
    cli_support::check_outputs([("--svg", a.svg.as_deref())])?;
    let ranks = a.ranks.resolve(default_ranks)?;
    let balancer = a.scheme.balancer(&a.ranks, &ranks, a.n0)?;
    let groups = match (&balancer, RankArgs::plan(&ranks)?) {
        (Balancer::Flat(_), Some(plan)) => Some(plan.rank_groups(1)),
        _ => None,
    };
    let drum = a.drum.setup(
        ranks.machine.as_ref().map(|(m, _)| m),
        a.ranks.power.config(),
    )?;
    if a.drum.balance.is_some()
        && matches!(balancer, Balancer::Flat(samr_kernel::BoxMethod::Sfc { .. }))
    {
        eprintln!(
            "samr: note: --partitioner sfc splits into equal parts whatever the capacities DRUM senses (GrACE's default)"
        );
    }
    Ok(Setup {
        cfg,
        balancer,
        figures: Figures {
            capacities: Some(ranks.capacities.clone()),
            groups,
            slow_link: a.slow_link,
        },
        ranks,
        drum,
        steps: a.steps,
        json: a.json,
        svg: a.svg.clone(),
    })
}

/// One rank's loop: the steps, printed by rank 0 as they come; `pin_self` when the rank
/// is a process of its own (MPI) and pins itself.
fn rank_loop<C: Comm + part_api::Reduce>(
    comm: C,
    s: &Setup,
    pin_self: bool,
) -> Result<(), SamrError> {
    let print = Comm::rank(&comm) == 0;
    let mut drum = RankDrum::start(&comm, &s.drum, pin_self)?;
    let mut run = RankRun::new(comm, s.cfg, s.balancer.clone(), s.figures.clone())?;
    if print && !s.json {
        let _ = cli_support::emit(&header(s, &run));
    }
    for k in 0..s.steps {
        let (events, sensed) = drum.before_step(&mut run, k)?;
        for line in events.iter().filter_map(|e| drum::describe(e, k)) {
            eprintln!("samr: rank {}: {line}", Comm::rank(run.comm()));
        }
        let r = run.step()?;
        if print {
            let line = if s.json {
                json_line(&r, run.capacities(), sensed.as_ref())
            } else {
                line(&r, sensed.as_ref())
            };
            // A closed stdout stops the printing, not the ranks' collectives.
            let _ = cli_support::emit(&line);
        }
    }
    let (procs, cpu_s) = drum.stop()?;
    if procs > 0 {
        eprintln!(
            "samr: rank {}: its {procs} competing process(es) used {cpu_s:.2} CPU s",
            Comm::rank(run.comm())
        );
    }
    if print && let Some(path) = &s.svg {
        let picture = svg::hierarchy(run.layout(), run.hierarchy().domain(), s.ranks.ranks);
        part_api::file::write_atomic_bytes(path, picture).map_err(|e| {
            SamrError::Unsupported(format!("writing the picture: {e}: {}", e.source))
        })?;
    }
    Ok(())
}

/// A step's JSON object: the report, the capacities in force and what DRUM sensed.
fn json_line(r: &StepReport, capacities: &[f64], sensed: Option<&Sensed>) -> String {
    let mut v = serde_json::to_value(r).expect("a report serialises");
    if let Some(o) = v.as_object_mut() {
        o.insert("capacities".into(), serde_json::json!(capacities));
        if let Some(x) = sensed {
            o.insert("sensed".into(), serde_json::json!(x));
        }
    }
    v.to_string() + "\n"
}

/// Ranks as threads of this process.
fn run_threads(s: &Setup) -> Result<()> {
    let opts = comm::ThreadOptions {
        cpus: s.drum.cpus.clone(),
        ..comm::ThreadOptions::default()
    };
    let results = comm::ThreadComm::run(s.ranks.ranks, &opts, |c| rank_loop(c, s, false))
        .context("the run over threads")?;
    first_rank_error(results)
}

/// The error of a run over thread ranks: the lowest rank's own failure, preferred to the
/// other ranks' reactions to it (a failed peer, a failed collective), as `rank R: …`; `Ok`
/// when every rank succeeded.
fn first_rank_error(results: Vec<Result<(), SamrError>>) -> Result<()> {
    let mut errs: Vec<(usize, SamrError)> = results
        .into_iter()
        .enumerate()
        .filter_map(|(r, x)| x.err().map(|e| (r, e)))
        .collect();
    errs.sort_by_key(|(_, e)| matches!(e, SamrError::Comm(_)));
    match errs.into_iter().next() {
        None => Ok(()),
        Some((r, e)) => Err(anyhow::Error::new(e).context(format!("rank {r}"))),
    }
}

/// One MPI process per rank, under mpirun (as many as mpirun started unless --ranks,
/// --machine or --capacities say otherwise, which must then agree).
#[cfg(feature = "mpi")]
fn run_mpi(a: &RunArgs) -> Result<()> {
    cli_support::mpi::main(|world| {
        let size = world.size();
        let s = setup(a, size)?;
        if size != s.ranks.ranks {
            bail!(
                "{} ranks asked for (--ranks, --machine or --capacities) but mpirun started {size} processes: they must match",
                s.ranks.ranks
            );
        }
        // The run owns its communicator: a duplicate of the world's.
        let comm = world.split(0, world.rank() as i32)?;
        rank_loop(comm, &s, true)?;
        Ok(())
    })
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &RunArgs) -> Result<()> {
    bail!(
        "this samr was built without MPI: build it with `cargo build --release -p samr-cli --features mpi` and run it under mpirun"
    )
}

/// The run's settings, before the steps.
fn header<C: Comm>(s: &Setup, run: &RankRun<C>) -> String {
    let scheme = match &s.balancer {
        Balancer::Flat(m) => format!("flat {}", m.name()),
        Balancer::TwoPhase(t) => format!("two-phase over groups {:?}", t.groups()),
    };
    format!(
        "samr: {} x {} cells at level 0, up to level {}, regrid every {} steps; {} ranks, {scheme}; capacities {:?}\n\
         initial hierarchy: {} levels, {} boxes\n",
        s.cfg.n0,
        s.cfg.n0,
        s.cfg.max_level,
        s.cfg.regrid_every,
        s.ranks.ranks,
        s.ranks.capacities,
        run.levels(),
        run.hierarchy().boxes().len()
    )
}

/// One line per step.
fn line(r: &StepReport, sensed: Option<&Sensed>) -> String {
    let mut s = format!(
        "step {:>4}  t {:.4}  hash {}  cells",
        r.step, r.time, r.hash
    );
    for l in &r.levels {
        let _ = write!(s, " {}", l.cells);
    }
    s.push_str("  work");
    for k in &r.ranks {
        let _ = write!(s, " {}", k.work);
    }
    let worst = r
        .ranks
        .iter()
        .map(|k| k.imbalance_percent)
        .fold(0.0, f64::max);
    let _ = write!(s, "  max I_k {worst:.1}%");
    if let Some(m) = &r.regrid {
        let _ = write!(s, "  regrid moved {} B", m.bytes);
    }
    if let Some(g) = &r.global {
        let _ = write!(s, "  global: {}", g.decision);
    }
    if let Some(m) = &r.rebalanced {
        let _ = write!(s, " (moved {} B)", m.bytes);
    }
    if let Some(x) = sensed {
        let c: Vec<String> = x.capacities.iter().map(|c| format!("{c:.3}")).collect();
        let _ = write!(s, "  capacities {}", c.join(" "));
    }
    s.push('\n');
    s
}
