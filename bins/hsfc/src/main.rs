//! `hsfc`: partition ZPT1 point files with the Hilbert-curve partitioner, or generate them.
//!
//! Built with the feature `mpi` and started under `mpirun -np R`, `hsfc partition` runs
//! distributed: rank r reads only points `[r·n/R, (r+1)·n/R)` of the file, the ranks partition
//! together (`Partitioner::partition` over `comm::MpiComm`), and rank 0 gathers and writes the
//! whole parts file, byte-identical to the serial run's, and prints the report.

mod ranks;
#[cfg(test)]
mod tests;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use cli_support::{RunArgs, collective, emit, median};
use hsfc::Hsfc;
use hsfc::Workspace;
use hsfc::generate::{Distribution, WeightKind};
use part_api::{Partitioner, Points};
use ranks::Ranks;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "hsfc",
    version,
    about = "Hilbert space-filling-curve partitioning to arbitrary part sizes"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Partition a ZPT1 point file into K parts (equal, or sized by a sizes file).
    ///
    /// The environment variable HSFC_SIMD=scalar|avx2|avx512 chooses the vector
    /// instructions (default: the best this processor has; one it lacks is an error).
    Partition(PartitionArgs),
    /// Write a ZPT1 point file: uniform or corner-graded points, unit or random weights.
    Gen(GenArgs),
    /// Measure this host's memory bandwidth (STREAM triad) on CPU 0 and on CPUs 0 and 1
    /// together: their ratio bounds what a second thread can gain in a pass that streams
    /// memory (`cargo xtask bench hsfc` and `bench hier` print it beside 1t/2t).
    Bandwidth {
        /// Print one JSON object (`one_gbs`, `two_gbs`, `ratio`, `pinned`, `rounds`).
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args, Debug)]
struct PartitionArgs {
    /// ZPT1 point file (see DESIGN.md §3).
    points: PathBuf,
    /// Number of equal parts (at most 2^20 = 1,048,576).
    #[arg(long, conflicts_with = "sizes", required_unless_present = "sizes",
          value_parser = cli_support::limits::count(0, hsfc::io::MAX_PARTS, "parts"))]
    parts: Option<usize>,
    /// Text file of relative part sizes, one per line.
    #[arg(long)]
    sizes: Option<PathBuf>,
    /// Write the part of every point here (u32 little endian).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Threads and repeats.
    #[command(flatten)]
    run: RunArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Dist {
    /// Uniform in the unit square or cube.
    Uniform,
    /// Graded towards the corner 0: uniform direction, radial fraction t = 1e-6^(1-u).
    Graded,
}

impl From<Dist> for Distribution {
    fn from(d: Dist) -> Self {
        match d {
            Dist::Uniform => Distribution::Uniform,
            Dist::Graded => Distribution::Graded,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Weights {
    /// No weights in the file (unit weights).
    Unit,
    /// Weights uniform in [1, 10).
    Random,
}

impl From<Weights> for WeightKind {
    fn from(w: Weights) -> Self {
        match w {
            Weights::Unit => WeightKind::Unit,
            Weights::Random => WeightKind::Random,
        }
    }
}

#[derive(clap::Args, Debug)]
struct GenArgs {
    /// Number of points (accepts 1e6 style; at most 2^27 = 134,217,728).
    #[arg(long, value_parser = parse_count)]
    n: usize,
    /// Dimension, 2 or 3.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=3))]
    dim: u8,
    /// Point distribution.
    #[arg(long, value_enum, default_value_t = Dist::Uniform)]
    dist: Dist,
    /// Weights.
    #[arg(long, value_enum, default_value_t = Weights::Unit)]
    weights: Weights,
    /// Seed of the generator (the output depends on it only).
    #[arg(long, default_value_t = 12345)]
    seed: u64,
    /// Output file.
    #[arg(short, long)]
    out: PathBuf,
}

fn parse_count(s: &str) -> Result<usize, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if !(v >= 0.0 && v.fract() == 0.0) {
        return Err(format!("`{s}` is not a point count"));
    }
    if v > hsfc::io::MAX_POINTS as f64 {
        return Err(format!(
            "{s} is over the limit of {} points of a point file",
            hsfc::io::MAX_POINTS
        ));
    }
    Ok(v as usize)
}

/// What one rank read: the targets, the file's point count and its own slice of the points.
struct Input {
    targets: Vec<f64>,
    n: u64,
    range: std::ops::Range<u64>,
    set: hsfc::io::PointSet,
}

/// Reads this rank's input. Touches no other rank, so a failure here can be agreed on.
fn read_input<R: Ranks>(ranks: &R, a: &PartitionArgs) -> Result<Input> {
    if ranks.rank() == 0 {
        cli_support::check_outputs([("--out", a.out.as_deref())])?;
    }
    let head = hsfc::io::read_point_header(&a.points).context("reading the points")?;
    let range = part_api::block_range(head.n, ranks.rank(), ranks.size());
    let set =
        hsfc::io::read_points_range(&a.points, range.clone()).context("reading the points")?;
    let targets = match (&a.sizes, a.parts) {
        (Some(path), _) => hsfc::io::read_sizes(path).context("reading the part sizes")?,
        (None, Some(k)) => vec![1.0; k],
        (None, None) => bail!("give --parts K or --sizes FILE"),
    };
    if a.run.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    Ok(Input {
        targets,
        n: head.n,
        range,
        set,
    })
}

/// What rank 0 prints after a partition.
struct Report<'a> {
    /// The rank count of a distributed run (`None` for the serial command).
    ranks: Option<usize>,
    n: u64,
    dim: usize,
    /// The slowest rank's median time of the partition call.
    time_s: f64,
    /// Per repeat, the slowest rank's time.
    times: &'a [f64],
    partition: &'a hsfc::Partition,
}

impl Report<'_> {
    fn render(&self, a: &PartitionArgs) -> String {
        let p = self.partition;
        if a.json {
            let mut j = serde_json::json!({
                "n": self.n,
                "k": p.num_parts(),
                "dim": self.dim,
                "threads": a.run.threads,
                "repeat": a.run.repeat,
                "time_s": self.time_s,
                "times_s": self.times,
                "max_rel_dev": p.max_rel_dev(),
                "max_abs_dev": p.max_abs_dev(),
                "max_weight": p.max_weight(),
                "imbalance": p.imbalance(),
                "weights": p.part_weights(),
                "targets": p.targets(),
                "counts": p.part_counts(),
            });
            // The vector instructions the passes took (HSFC_SIMD, else the best here).
            j["simd"] = hsfc::Simd::active().name().into();
            if let Some(ranks) = self.ranks {
                j["ranks"] = ranks.into();
            }
            format!("{j}\n")
        } else {
            let (group, of) = match self.ranks {
                Some(r) => (format!("{r} rank(s) × "), "max over ranks of the median"),
                None => (String::new(), "median"),
            };
            let head = format!(
                "{}: {} points, dim {}, {} parts, {group}{} thread(s): partition {:.3} ms \
                 ({of} of {})\n",
                a.points.display(),
                self.n,
                self.dim,
                p.num_parts(),
                a.run.threads,
                self.time_s * 1e3,
                a.run.repeat
            );
            head + &hsfc::summary::table(p)
        }
    }
}

/// `hsfc partition` on a group of ranks (one, for the serial command). Every rank reads its
/// block of the point file; rank 0 writes the whole parts file and returns the report to
/// print (`None` on the other ranks). Errors are agreed on: every rank returns an error at the
/// same step, so none waits for another.
fn partition<R: Ranks>(ranks: &R, a: &PartitionArgs) -> Result<Option<String>> {
    let (rank, size) = (ranks.rank(), ranks.size());
    let Input {
        targets,
        n,
        range,
        set,
    } = collective(ranks, read_input(ranks, a))?;
    let cfg = Hsfc {
        par: a.run.par(),
        ..Default::default()
    };
    let mut parts = vec![0u32; set.len()];
    let mut times = Vec::with_capacity(a.run.repeat);
    let mut result = None;
    // Reused by every repeat, as a simulation reuses it every step.
    let mut ws = Workspace::default();
    for _ in 0..a.run.repeat {
        let t0 = Instant::now();
        // Data errors are agreed on inside (every rank returns an error).
        let p = cfg
            .partition_with(
                &mut ws,
                ranks,
                Points::new(&set.coords, set.dim, set.weights.as_deref()),
                &targets,
                &mut parts,
            )
            .with_context(|| {
                if ranks.distributed() {
                    format!(
                        "partitioning {} (rank {rank} of {size} holds points {}..{})",
                        a.points.display(),
                        range.start,
                        range.end
                    )
                } else {
                    format!("partitioning {}", a.points.display())
                }
            })?;
        times.push(t0.elapsed().as_secs_f64());
        result = Some(p);
    }
    let p = result.expect("repeat >= 1");
    if p.ordered_fallback() && rank == 0 {
        eprintln!(
            "warning: {}: the points' bounding box cannot separate them (a huge outlier or a \
             box of subnormal width); they were put on the curve by the order of their \
             coordinates instead",
            a.points.display()
        );
    }
    // The slowest rank's median, and per repeat the slowest rank's time.
    let mut time_s = [median(&mut times.clone())];
    ranks.max_f64(&mut time_s)?;
    ranks.max_f64(&mut times)?;
    let time_s = time_s[0];
    let gathered = ranks.gather_parts(&parts)?;
    // Rank 0 writes and formats; the outcome is agreed on, so that a failure to write ends
    // every rank with an error.
    let report = gathered.map_or(Ok(None), |all_parts| {
        if let Some(out) = &a.out {
            hsfc::io::write_parts(out, &all_parts).context("writing the parts")?;
        }
        let report = Report {
            ranks: ranks.distributed().then_some(size),
            n,
            dim: set.dim,
            time_s,
            times: &times,
            partition: &p,
        };
        Ok(Some(report.render(a)))
    });
    collective(ranks, report)
}

/// `hsfc partition` in this process alone.
#[cfg(not(feature = "mpi"))]
fn partition_cmd(a: &PartitionArgs) -> Result<()> {
    match partition(&part_api::Serial, a)? {
        Some(text) => emit(&text),
        None => Ok(()),
    }
}

/// `hsfc partition` as one rank of an MPI job (a single process without `mpirun`).
#[cfg(feature = "mpi")]
fn partition_cmd(a: &PartitionArgs) -> Result<()> {
    match cli_support::mpi::main(|world| partition(world, a))? {
        Some(text) => emit(&text),
        None => Ok(()),
    }
}

fn main() -> std::process::ExitCode {
    cli_support::main(run)
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Partition(a) => {
            // A bad HSFC_SIMD is refused here (the library would ignore it).
            hsfc::Simd::from_env()?;
            partition_cmd(&a)
        }
        Cmd::Bandwidth { json } => {
            let two_cpus = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
            let c = cli_support::bandwidth::ceiling(cli_support::bandwidth::ROUNDS, two_cpus);
            if json {
                let v = serde_json::json!({
                    "one_gbs": c.one.bytes_per_s / 1e9,
                    "two_gbs": c.two.map(|t| t.bytes_per_s / 1e9),
                    "ratio": c.ratio(),
                    "pinned": c.pinned(),
                    "rounds": c.rounds,
                    "description": c.describe(),
                });
                println!("{v}");
            } else {
                println!("{}", c.describe());
            }
            Ok(())
        }
        Cmd::Gen(g) => {
            cli_support::check_outputs([("--out", Some(g.out.as_path()))])?;
            let (coords, w) = hsfc::generate::points(
                g.n,
                usize::from(g.dim),
                g.dist.into(),
                g.weights.into(),
                g.seed,
            );
            hsfc::io::write_points(&g.out, usize::from(g.dim), &coords, w.as_deref())
                .context("writing the points")?;
            Ok(())
        }
    }
}
