//! `hier-part`: partition a ZPT1 point file over the ranks of a DRUM machine, level by level
//! along its tree with the method each level names. Glue only: parse, call the library, print.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use cli_support::power::PowerArgs;
use cli_support::{RunArgs, emit, median};
use comm::{Comm, ThreadComm, ThreadOptions};
use drum_model::Machine;
use hier_part::{Csr, Hier, HierPartition, Par, Plan, Quality, picture};
use hier_part::{Points, Serial, Workspace};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "hier-part",
    version,
    about = "Hierarchical partitioning along a DRUM machine tree"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Partition a ZPT1 point file for the machine's ranks (part i = rank i).
    Partition(Box<PartitionArgs>),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    /// One process, the serial walk.
    Serial,
    /// One thread rank per machine rank (comm's ThreadComm), each holding a contiguous slice
    /// of the points: the distributed walk, in one process.
    Threads,
    /// Under `mpirun -np R` with R = the machine's ranks (build with `--features mpi`): each
    /// rank reads its own contiguous slice of the point file (rank r: points
    /// [r·n/R, (r+1)·n/R)); rank 0 writes the whole parts file and prints the report.
    Mpi,
}

#[derive(clap::Args, Debug)]
struct PartitionArgs {
    /// The machine description (DrumHead XML).
    #[arg(long)]
    machine: PathBuf,
    /// ZPT1 point file (DESIGN.md §3).
    points: PathBuf,
    /// Where the powers come from (as `drum powers`).
    #[command(flatten)]
    power: PowerArgs,
    /// Write the rank of every point here (u32 little endian).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Threads inside each level's partitioner, and repeats.
    #[command(flatten)]
    run: RunArgs,
    /// Where the partition runs.
    #[arg(long, value_enum, default_value_t = Backend::Serial)]
    backend: Backend,
    /// Also measure the edge cut on a k-nearest-neighbour graph of the points, per level of
    /// the tree (k = this value; 0 = no graph).
    #[arg(long, default_value_t = 0)]
    knn: usize,
    /// Also draw the ranks' regions (ASCII, 2-D; 3-D seen along z).
    #[arg(long)]
    picture: bool,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
    /// The limit of `--backend threads`' ranks.
    #[command(flatten)]
    max_ranks: cli_support::limits::MaxRanks,
}

/// Whether a rank's error is only its reaction to another rank's failure.
fn is_reaction(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<hier_part::Error>(),
            Some(hier_part::Error::InvalidOnOtherRank { .. } | hier_part::Error::Comm(_))
        ) || matches!(
            c.downcast_ref::<hsfc::Error>(),
            Some(hsfc::Error::InvalidOnOtherRank { .. } | hsfc::Error::Comm(_))
        ) || c.is::<comm::CommError>()
    })
}

/// One rank's part of a distributed run, `repeat` times: the result, this rank's parts and
/// the time of each call (the slowest rank's).
fn rank_run<C>(
    c: &C,
    a: &PartitionArgs,
    plan: &Plan,
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
) -> Result<(HierPartition, Vec<u32>, Vec<f64>)>
where
    C: Comm + part_api::Reduce,
{
    let hier = Hier { par: a.run.par() };
    let mut mine = vec![0u32; coords.len() / dim];
    let mut times = Vec::with_capacity(a.run.repeat);
    let mut level_times: Vec<Vec<f64>> = Vec::new();
    let mut result: Option<HierPartition> = None;
    // Reused by every repeat, as a simulation reuses it every step.
    let mut ws = Workspace::default();
    for _ in 0..a.run.repeat {
        Comm::barrier(c)?;
        let t0 = c.wtime();
        let points = Points::new(coords, dim, weights);
        let r = hier.partition_with(&mut ws, c, plan, points, &mut mine)?;
        let mut t = [c.wtime() - t0];
        c.allreduce_f64(comm::ReduceOp::Max, &mut t)?;
        times.push(t[0]);
        level_times.resize(r.level_times.len(), Vec::new());
        for (all, (_, t)) in level_times.iter_mut().zip(&r.level_times) {
            all.push(*t);
        }
        result = Some(r);
    }
    let mut result = result.context("--repeat must be at least 1")?;
    // Each level's time: the median over the repeats, as the total's.
    for ((_, t), all) in result.level_times.iter_mut().zip(&mut level_times) {
        *t = median(all);
    }
    Ok((result, mine, times))
}

/// Runs the partition `repeat` times in this process (serial or thread ranks); returns the
/// result, the parts and the time of each call.
fn run(
    a: &PartitionArgs,
    plan: &Plan,
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
) -> Result<(HierPartition, Vec<u32>, Vec<f64>)> {
    let n = coords.len() / dim;
    match a.backend {
        // The serial run is the one-rank group.
        Backend::Serial => rank_run(&Serial, a, plan, coords, dim, weights),
        Backend::Threads => {
            let ranks = plan.num_ranks();
            let out = ThreadComm::run(ranks, &ThreadOptions::default(), |c| {
                let r = part_api::block_range(n as u64, c.rank(), ranks);
                let (lo, hi) = (r.start as usize, r.end as usize);
                rank_run(
                    &c,
                    a,
                    plan,
                    &coords[lo * dim..hi * dim],
                    dim,
                    weights.map(|w| &w[lo..hi]),
                )
            })?;
            let mut parts = Vec::with_capacity(n);
            let mut first = None;
            for (r, mine, times) in cli_support::rank_results(out, is_reaction)? {
                parts.extend_from_slice(&mine);
                first.get_or_insert((r, times));
            }
            let (r, times) = first.context("no ranks")?;
            Ok((r, parts, times))
        }
        Backend::Mpi => bail!("--backend mpi runs under mpirun (see run_mpi)"),
    }
}

fn partition(a: &PartitionArgs) -> Result<()> {
    if a.run.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let machine = Machine::from_file(&a.machine)?;
    if a.backend == Backend::Threads {
        let what = format!("--backend threads on {}", a.machine.display());
        a.max_ranks.check(&what, machine.num_ranks())?;
    }
    let (powers, origin) = a.power.compute(&machine)?;
    let plan = Plan::new(&machine, &powers)?;
    if a.backend == Backend::Mpi {
        return run_mpi(a, &plan, &origin);
    }
    check_out(a)?;
    for w in plan.warnings() {
        eprintln!("warning: {w}");
    }
    let set = hier_part_points(&a.points)?;
    let (r, parts, times) = run(a, &plan, &set.coords, set.dim, set.weights.as_deref())
        .with_context(|| format!("partitioning {}", a.points.display()))?;
    report(a, (&plan, &origin), &set, None, (&r, &parts, &times))
}

/// `--backend mpi`: each rank reads its slice and partitions with the others; rank 0 writes the
/// parts file and prints. Every step ends with all ranks agreeing on success, so an error on
/// one rank ends the job instead of leaving the others waiting.
#[cfg(feature = "mpi")]
fn run_mpi(a: &PartitionArgs, plan: &Plan, origin: &str) -> Result<()> {
    cli_support::mpi::main(|world| mpi_rank(world, a, plan, origin))
}

#[cfg(feature = "mpi")]
fn mpi_rank(world: &comm::MpiComm, a: &PartitionArgs, plan: &Plan, origin: &str) -> Result<()> {
    let (me, size) = (Comm::rank(world), Comm::size(world));
    let read = (|| {
        if size != plan.num_ranks() {
            bail!(
                "mpirun started {size} ranks but {} has {}: run mpirun -np {}",
                a.machine.display(),
                plan.num_ranks(),
                plan.num_ranks()
            );
        }
        if me == 0 {
            check_out(a)?;
        }
        let head = hsfc::io::read_point_header(&a.points).context("reading the points")?;
        let range = part_api::block_range(head.n, me, size);
        hsfc::io::read_points_range(&a.points, range).context("reading the points")
    })();
    let set = cli_support::collective(world, read)?;
    if me == 0 {
        for w in plan.warnings() {
            eprintln!("warning: {w}");
        }
    }
    let (r, mine, times) = rank_run(world, a, plan, &set.coords, set.dim, set.weights.as_deref())
        .with_context(|| format!("partitioning {}", a.points.display()))?;
    let all = world.gatherv(0, &mine).map_err(anyhow::Error::from)?;
    let Some(all) = all else {
        return Ok(());
    };
    let parts = all.into_data();
    let n = parts.len();
    // The report's figures need the whole point set only for --knn and --picture.
    let whole = if a.knn > 0 || a.picture {
        hier_part_points(&a.points)?
    } else {
        hsfc::io::PointSet {
            dim: set.dim,
            coords: Vec::new(),
            weights: None,
        }
    };
    report(
        a,
        (plan, origin),
        &whole,
        Some((n, size)),
        (&r, &parts, &times),
    )
}

/// Tries `--out` before the run (the rank that writes it), so a bad path fails at once.
fn check_out(a: &PartitionArgs) -> Result<()> {
    cli_support::check_outputs([("--out", a.out.as_deref())])
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: &PartitionArgs, _: &Plan, _: &str) -> Result<()> {
    bail!(
        "this hier-part was built without MPI: build it with `cargo build --release -p hier-part-cli --features mpi` and run it under mpirun"
    )
}

/// Writes the parts file and prints the report (table or JSON). `mpi` = (points, ranks) of an
/// MPI run, whose `set` may hold no coordinates; `run`: the result, every point's rank and the
/// time of each repeat.
fn report(
    a: &PartitionArgs,
    (plan, origin): (&Plan, &str),
    set: &hsfc::io::PointSet,
    mpi: Option<(usize, usize)>,
    run: (&HierPartition, &[u32], &[f64]),
) -> Result<()> {
    let (r, parts, times) = run;
    let dim = set.dim;
    let (coords, weights) = (&set.coords[..], set.weights.as_deref());
    let n = mpi.map_or(coords.len() / dim, |m| m.0);
    let time_s = median(&mut times.to_vec());
    if let Some(out) = &a.out {
        hsfc::io::write_parts(out, parts).context("writing the parts")?;
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    let quality = if a.knn > 0 {
        let g = Csr::knn(
            coords,
            dim,
            a.knn,
            Par::threads(std::thread::available_parallelism().map_or(1, |n| n.get())),
        )?;
        let q = Quality::new(parts, weights, plan.part_sizes(), Some(&g))?;
        let per_level = (1..=plan.depth())
            .map(|d| q.grouped(&plan.rank_groups(d)))
            .collect::<Result<Vec<_>, _>>()?;
        Some((q, per_level))
    } else {
        None
    };
    let backend = format!("{:?}", a.backend).to_lowercase();
    if a.json {
        let parts_json: Vec<_> = (0..plan.num_ranks())
            .map(|rk| {
                let node = plan.node(*plan.path(rk).last().expect("a path"));
                serde_json::json!({
                    "rank": rk,
                    "node": node.nodenum,
                    "name": node.label,
                    "count": r.rank_counts[rk],
                    "weight": r.rank_weights[rk],
                    "target": r.targets[rk],
                })
            })
            .collect();
        let levels: Vec<_> = r
            .levels(plan)
            .iter()
            .map(|l| {
                serde_json::json!({
                    "node": plan.node(l.node).nodenum,
                    "depth": l.depth,
                    "method": l.method.kind.as_str(),
                    "imbalance_tol": l.method.imbalance_tol,
                    "weights": l.weights,
                    "targets": l.targets,
                    "max_ratio": l.max_ratio,
                })
            })
            .collect();
        let level_times: Vec<_> = r
            .level_times
            .iter()
            .map(|(id, t)| serde_json::json!({"node": plan.node(*id).nodenum, "time_s": t}))
            .collect();
        let mut j = serde_json::json!({
            "ranks": plan.num_ranks(),
            "n": n,
            "dim": dim,
            "backend": backend,
            "threads": a.run.threads,
            "powers": origin,
            "time_s": time_s,
            "times_s": times,
            "max_rel_dev": r.max_rel_dev,
            "max_ratio": r.max_ratio,
            "parts": parts_json,
            "levels": levels,
            "level_times_s": level_times,
            "warnings": r.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        if let Some((q, per_level)) = &quality {
            j["edge_cut"] = serde_json::json!(q.edge_cut);
            j["edge_cut_per_level"] =
                serde_json::json!(per_level.iter().map(|q| q.edge_cut).collect::<Vec<_>>());
        }
        emit(&format!("{j}\n"))
    } else {
        let mut s = format!(
            "{}: {} ranks ({origin}); {}: {n} points, dim {dim}{}\npartition {:.3} ms (median of {}, {backend} backend, {} thread(s) per rank)\n",
            a.machine.display(),
            plan.num_ranks(),
            a.points.display(),
            if r.total_weight != n as f64 || weights.is_some() {
                ", weighted"
            } else {
                ""
            },
            time_s * 1e3,
            a.run.repeat,
            a.run.threads
        );
        s += &r.table(plan);
        if let Some((q, per_level)) = &quality {
            s += &format!(
                "\nquality on a {}-nearest-neighbour graph, per rank:\n{q}",
                a.knn
            );
            for (d, q) in per_level.iter().enumerate() {
                s += &format!("\ngrouped by the nodes at depth {}:\n{q}", d + 1);
            }
        }
        if a.picture {
            s += "\n";
            s += &picture(coords, dim, parts, 72, 30);
        }
        emit(&s)
    }
}

/// Reads a ZPT1 point file.
fn hier_part_points(path: &std::path::Path) -> Result<hsfc::io::PointSet> {
    hsfc::io::read_points(path).context("reading the points")
}

fn main() -> std::process::ExitCode {
    cli_support::main(command)
}

/// The command; [`main`] reports its error without a backtrace.
fn command() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Partition(a) => partition(&a),
    }
}
