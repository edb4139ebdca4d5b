//! `samr`: the structured AMR kernel over thread or MPI ranks with a box partitioner
//! (Sinha & Parashar's ACEHeterogeneous, GrACE's SFC default, or hier-part along the machine
//! tree) and optionally Lan, Taylor & Bryan's two-phase balancing; `samr partition`
//! partitions one box list.

mod partition;
mod setup;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use comm::Comm;
use samr_kernel::{
    Balancer, Cluster, Figures, Problem, RankRun, SamrConfig, SamrError, StepReport,
};
use setup::{RankArgs, Ranks, TwoPhaseArgs};
use std::fmt::Write as _;

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
    /// Level-0 steps (100: the pulse moves about 24 level-0 cells).
    #[arg(long, default_value_t = 100)]
    steps: usize,
    /// Level-0 cells per side.
    #[arg(long, default_value_t = SamrConfig::default().n0)]
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
    /// One JSON object per level-0 step on stdout, nothing else.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    ranks: RankArgs,
    #[command(flatten)]
    scheme: TwoPhaseArgs,
}

fn main() -> Result<()> {
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
    steps: usize,
    json: bool,
}

fn run(a: &RunArgs) -> Result<()> {
    match a.backend {
        Backend::Threads => run_threads(&setup(a, 1)?),
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
    };
    cfg.validate()?;
    let ranks = a.ranks.resolve(default_ranks)?;
    let balancer = a.scheme.balancer(&a.ranks, &ranks, a.n0)?;
    let groups = match (&balancer, RankArgs::plan(&ranks)?) {
        (Balancer::Flat(_), Some(plan)) => Some(plan.rank_groups(1)),
        _ => None,
    };
    Ok(Setup {
        cfg,
        balancer,
        figures: Figures {
            capacities: Some(ranks.capacities.clone()),
            groups,
        },
        ranks,
        steps: a.steps,
        json: a.json,
    })
}

/// One rank's loop: the steps, printed by rank 0 as they come.
fn rank_loop<C: Comm>(comm: C, s: &Setup) -> Result<(), SamrError> {
    let print = comm.rank() == 0;
    let mut run = RankRun::new(comm, s.cfg, s.balancer.clone(), s.figures.clone())?;
    if print && !s.json {
        let _ = cli_support::emit(&header(s, &run));
    }
    for _ in 0..s.steps {
        let r = run.step()?;
        if print {
            let line = if s.json {
                serde_json::to_string(&r).expect("a report serialises") + "\n"
            } else {
                line(&r)
            };
            // A closed stdout stops the printing, not the ranks' collectives.
            let _ = cli_support::emit(&line);
        }
    }
    Ok(())
}

/// Ranks as threads of this process.
fn run_threads(s: &Setup) -> Result<()> {
    let results = comm::ThreadComm::run(s.ranks.ranks, &comm::ThreadOptions::default(), |c| {
        rank_loop(c, s)
    })
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
        rank_loop(comm, &s)?;
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
fn line(r: &StepReport) -> String {
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
    s.push('\n');
    s
}
