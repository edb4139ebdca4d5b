//! The MPI main of a command: its body as one rank of an MPI job.

use anyhow::{Context, Result};
use comm::{Comm, MpiComm};

/// Initialises MPI, runs `body` on the world communicator, and finalises MPI on every rank,
/// after an error too. `body` must agree on its errors ([`crate::agreed`]) so that every rank
/// fails at the same step.
///
/// With one rank (a plain process, no `mpirun`) an error is returned as usual. With several,
/// each rank prints its error as one line `Error: rank r of R: …` (one write, so that mpirun
/// does not interleave ranks' lines), all wait until every rank has written (mpirun ends the
/// job at the first non-zero exit), and the process exits with status 1.
pub fn main<T>(body: impl FnOnce(&MpiComm) -> Result<T>) -> Result<T> {
    let world = MpiComm::init().context("starting MPI")?;
    let (rank, size) = (Comm::rank(&world), Comm::size(&world));
    let result = body(&world);
    if let Err(e) = &result
        && size > 1
    {
        let line = format!("Error: rank {rank} of {size}: {e:#}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        let _ = world.barrier();
        drop(world);
        std::process::exit(1);
    }
    drop(world);
    result
}
