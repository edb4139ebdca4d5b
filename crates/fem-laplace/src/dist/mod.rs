//! The adaptive run over ranks: the same steps, marks, meshes and solutions as the serial
//! run ([`crate::Adaptive`]), to the bit, for any number of ranks, on any [`comm::Comm`]
//! (threads by default, MPI with `comm`'s `mpi` feature).
//!
//! | piece | module | what is distributed, and how it stays bit-identical |
//! |---|---|---|
//! | identities | `keys` | elements by refinement-tree key, vertices by exact dyadic coordinates, a vertex's place in the serial numbering by its birth (step, level, creating element, edge) |
//! | local part | `local` | owned elements + one ghost layer in curve order; vertices and their ancestors; owner of a vertex = owner of the first element around it along the curve |
//! | marking | `mark` | min-label propagation of the serial order along the closure rules, then a selection: exactly the serial marks |
//! | refinement | `local` | owned elements bisected as in the serial code; interface vertices created on both sides with the same key and birth |
//! | partition, migration | [`Balancer`] (`drum_loop::Balancing`), `local` | element centroids with weights, flat HSFC or `hier-part`; elements move with vertices, ancestors and solution values; count and key checksum checked |
//! | ghosts, ownership | `local` | a coordinator rank per interface vertex names its owner and the ranks around it, which exchange their elements (on a kept partition each rank knows both from the last rebuild and its refinement) |
//! | assembly | [`crate::System`] | own rows only, entries in curve order as in the whole mesh |
//! | CG | [`crate::solver`] | each product starts the halo exchange (`Comm::exchange_start`), computes the rows that do not read the halo while it travels, then the rest; dot products summed exactly ([`crate::exact::ExactSum`]) |
//! | preconditioner | `skeleton` | each rank sweeps its bulk; the skeleton (parents of vertices owned elsewhere, and their ancestors) is replicated and swept by every rank in the serial order |
//! | estimator, errors | [`crate::estimate`] | own elements, neighbours from the ghost layer; exact global sums |
//!
//! ```
//! use comm::{ThreadComm, ThreadOptions};
//! use fem_laplace::dist::{Balancer, DistConfig, RankRun};
//! use fem_laplace::{AdaptConfig, Adaptive, CornerSingularity};
//! let adapt = AdaptConfig { target_vertices: 3_000, ..AdaptConfig::default() };
//! let exact = CornerSingularity;
//! let runs = ThreadComm::run(3, &ThreadOptions::default(), |comm| {
//!     let mut run = RankRun::new(comm, &exact, DistConfig::new(adapt), Balancer::flat())?;
//!     let mut last = None;
//!     while let Some(r) = run.step()? {
//!         last = Some(r);
//!     }
//!     Ok::<_, fem_laplace::FemError>(last.unwrap())
//! })
//! .unwrap();
//! let dist = runs.into_iter().next().unwrap()?; // rank 0's report
//! let mut serial = Adaptive::new(&exact, adapt)?;
//! let mut last = None;
//! while let Some(r) = serial.step()? {
//!     last = Some(r);
//! }
//! let s = last.unwrap();
//! assert_eq!(dist.base.error_energy.unwrap().to_bits(), s.error_energy.unwrap().to_bits());
//! let hash = fem_laplace::dist::mesh_hash(serial.mesh());
//! assert_eq!(dist.mesh_hash.unwrap(), format!("{hash:016x}"));
//! # Ok::<(), fem_laplace::FemError>(())
//! ```

mod halo;
mod hash;
mod keys;
mod local;
mod mark;
mod run;
mod skeleton;
mod timed;

/// How elements are assigned to ranks after each refinement (the runtime crate's).
pub use drum_loop::Balancer;
pub use hash::mesh_hash;
pub use run::{
    DistConfig, DistStepReport, GainHorizon, MigrationReport, Phases, RankRun, RankStep, RankTimes,
};
pub use timed::{Phase, Timed, Traffic};

use crate::exact::{ExactSum, WORDS};
use comm::{Comm, CommError, ReduceOp};

/// Replaces each of `sums` by the exact sum of every rank's, in one reduction (an integer
/// reduction: the same bits on every backend and for any number of ranks).
pub(crate) fn global_sums<C: Comm>(comm: &C, sums: &mut [ExactSum]) -> Result<(), CommError> {
    if comm.size() == 1 {
        return Ok(());
    }
    let mut w: Vec<u64> = sums.iter().flat_map(|s| s.words()).collect();
    comm.allreduce_u64(ReduceOp::Sum, &mut w)?;
    debug_assert_eq!(w.len(), WORDS * sums.len());
    for (s, words) in sums.iter_mut().zip(w.chunks_exact(WORDS)) {
        *s = ExactSum::from_words(words);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
