//! Runs the `comm` conformance suite under MPI: `mpirun -np 4 comm-mpi-suite`.
//!
//! Rank 0 prints one line per check; any failure prints the rank and message and aborts the
//! job with a non-zero exit code. Two flags check that failures end the job instead of hanging
//! it: `--panic-rank R` makes rank R panic between two collectives; `--fail-rank R` makes rank
//! R report a failed check (the driver's own failure path).

use anyhow::{Context, Result, bail};
use comm::conformance;
use comm::{Comm, LinkProbe, MpiComm, ReduceOp, measure_link};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut panic_rank, mut fail_rank) = (None, None);
    match args.as_slice() {
        [] => {}
        [flag, r] if flag == "--panic-rank" => {
            panic_rank = Some(r.parse::<usize>().context("--panic-rank takes a rank")?);
        }
        [flag, r] if flag == "--fail-rank" => {
            fail_rank = Some(r.parse::<usize>().context("--fail-rank takes a rank")?);
        }
        _ => bail!("usage: comm-mpi-suite [--panic-rank R | --fail-rank R]"),
    }
    let world = MpiComm::init()?;
    let (rank, size) = (world.rank(), world.size());
    if let Some(victim) = panic_rank {
        let mut x = [1.0];
        world.allreduce_f64(ReduceOp::Sum, &mut x)?;
        if rank == victim {
            panic!("rank {rank} panics on purpose (--panic-rank)");
        }
        world.barrier()?;
        bail!("rank {rank}: the barrier returned although rank {victim} panicked");
    }
    if rank == 0 {
        println!(
            "comm-mpi-suite: {size} ranks, {}",
            world.library_version().lines().next().unwrap_or("")
        );
    }
    let checks = conformance::checks::<MpiComm>();
    let started = world.wtime();
    for (name, check) in &checks {
        let t = world.wtime();
        let result = if fail_rank == Some(rank) && *name == "allgatherv" {
            Err(conformance::CheckFailure(format!(
                "rank {rank}: failure injected (--fail-rank)"
            )))
        } else {
            check(&world)
        };
        if let Err(e) = result {
            eprintln!("comm-mpi-suite: FAILED {name}: {e}");
            // Other ranks may be inside a collective of this check: end the whole job.
            world.abort(1);
        }
        world.barrier()?;
        if rank == 0 {
            println!("ok {name} ({:.1} ms)", 1e3 * (world.wtime() - t));
        }
    }
    let names = world.allgatherv_bytes(world.processor_name().as_bytes())?;
    let node = world.split_node()?;
    let link = measure_link(&world, 0, size - 1, &LinkProbe::default())?;
    if rank == 0 {
        let hosts: Vec<String> = names
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        println!("hosts by rank: {}", hosts.join(" "));
        match link.fit() {
            Ok(m) => println!(
                "link rank 0 <-> rank {}: alpha = {:.2} us, beta = {:.3} ns/B ({:.2} GB/s)",
                size - 1,
                m.alpha * 1e6,
                m.beta * 1e9,
                1e-9 / m.beta
            ),
            // Timing noise on a fast link: the two medians give no line.
            Err(e) => println!("link rank 0 <-> rank {}: {e}", size - 1),
        }
        println!("node of rank 0: {} ranks", node.size());
        println!("suite time: {:.2} s", world.wtime() - started);
        println!("comm-mpi-suite: {} passed, 0 failed", checks.len());
    }
    Ok(())
}
