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
//! | partition, migration | [`Balancer`], `local` | element centroids with weights, flat HSFC or `hier-part`; elements move with vertices, ancestors and solution values; count and key checksum checked |
//! | ghosts, ownership | `local` | a coordinator rank per interface vertex names its owner and the ranks around it, which exchange their elements |
//! | assembly | [`crate::System`] | own rows only, entries in curve order as in the whole mesh |
//! | CG | [`crate::solver`] | halo exchange before each product; dot products summed exactly ([`crate::exact::ExactSum`]) |
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
mod wire;

pub use hash::mesh_hash;
pub use run::{DistConfig, DistStepReport, MigrationReport, RankRun, RankStep, RankTimes};
pub use timed::Timed;

use crate::FemError;
use crate::exact::{ExactSum, WORDS};
use comm::{Comm, CommError, ReduceOp};

/// The exact sum of every rank's `s` (an integer reduction: the same bits on every backend
/// and for any number of ranks).
pub(crate) fn global_sum<C: Comm>(comm: &C, s: &ExactSum) -> Result<ExactSum, CommError> {
    if comm.size() == 1 {
        return Ok(s.clone());
    }
    let mut w = s.words();
    comm.allreduce_u64(ReduceOp::Sum, &mut w)?;
    debug_assert_eq!(w.len(), WORDS);
    Ok(ExactSum::from_words(&w))
}

/// How elements are assigned to ranks after each refinement: by the centroids of the leaf
/// elements and their work weights (one per element). A specification: every rank's
/// [`RankRun`] starts its own state from it.
#[derive(Debug, Clone)]
pub enum Balancer {
    /// Flat HSFC into equal parts; after the first step a KEEP_CUTS repartition from the
    /// previous cuts, every step.
    Flat,
    /// DRUM in the loop ([`hier_part::drum_loop`]): `hier-part` along the machine's tree
    /// (one rank per rank of the machine) with the part sizes of `config.sizing` (equal,
    /// static ratings, or monitored powers), a rebalance policy, and each rank's monitoring
    /// agent.
    Drum {
        /// The machine.
        machine: Box<drum_model::Machine>,
        /// The loop's settings.
        config: Box<hier_part::drum_loop::LoopConfig>,
    },
}

/// A balancer's state on one rank, kept from one step to the next.
pub(crate) enum Balancing {
    Flat {
        /// The last partition (its cuts).
        previous: Option<Box<hsfc::Partition>>,
    },
    Drum(Box<hier_part::drum_loop::DrumLoop>),
}

impl Balancer {
    /// Flat HSFC into equal parts.
    pub fn flat() -> Balancer {
        Balancer::Flat
    }

    /// DRUM in the loop on `machine` with `config`.
    pub fn drum(
        machine: drum_model::Machine,
        config: hier_part::drum_loop::LoopConfig,
    ) -> Balancer {
        Balancer::Drum {
            machine: Box::new(machine),
            config: Box::new(config),
        }
    }

    /// The number of ranks this balancer needs, if fixed.
    pub fn ranks(&self) -> Option<usize> {
        match self {
            Balancer::Flat => None,
            Balancer::Drum { machine, .. } => Some(machine.num_ranks()),
        }
    }

    fn check(&self, size: usize) -> Result<(), FemError> {
        match self.ranks() {
            Some(r) if r != size => Err(FemError::InvalidConfig {
                field: "ranks",
                value: size.to_string(),
                reason: "must equal the number of ranks of the machine description",
            }),
            _ => Ok(()),
        }
    }

    /// This rank's state (collective for [`Balancer::Drum`]: the agents start and the link
    /// is measured).
    pub(crate) fn start<C: Comm>(&self, comm: &Timed<C>) -> Result<Balancing, FemError> {
        self.check(comm.size())?;
        Ok(match self {
            Balancer::Flat => Balancing::Flat { previous: None },
            Balancer::Drum { machine, config } => Balancing::Drum(Box::new(
                hier_part::drum_loop::DrumLoop::start(
                    comm,
                    machine.as_ref().clone(),
                    config.as_ref().clone(),
                )
                .map_err(|e| FemError::Partition(e.to_string()))?,
            )),
        })
    }
}

impl Balancing {
    /// Writes each local element's new rank into `parts` (which holds this rank on entry);
    /// returns the loop's report for [`Balancer::Drum`].
    fn partition<C>(
        &mut self,
        comm: &Timed<C>,
        xy: &[f64],
        weights: &[f64],
        parts: &mut [u32],
    ) -> Result<Option<hier_part::drum_loop::LoopReport>, FemError>
    where
        C: Comm,
    {
        use hsfc::Partitioner;
        let size = comm.size();
        let bad = |e: &dyn std::fmt::Display| FemError::Partition(e.to_string());
        let points = hsfc::Points::new(xy, 2, Some(weights));
        match self {
            Balancing::Flat { .. } if size == 1 => {
                parts.fill(0);
                Ok(None)
            }
            Balancing::Flat { previous } => {
                // A workspace per step: kept between steps, its buffers (sized for the step's
                // elements) would sit on top of the solve's peak, +8 % of the run's heap at 2
                // ranks; allocating them takes far less than partitioning.
                let ws = &mut hsfc::Workspace::default();
                let targets = vec![1.0; size];
                let h = hsfc::Hsfc::default();
                let p = match previous.as_deref() {
                    Some(prev) => h.repartition(ws, comm, prev, points, &targets, parts),
                    None => h.partition_with(ws, comm, points, &targets, parts),
                }
                .map_err(|e| bad(&e))?;
                *previous = Some(Box::new(p));
                Ok(None)
            }
            Balancing::Drum(lp) => Ok(Some(
                lp.rebalance(comm, points, parts).map_err(|e| bad(&e))?,
            )),
        }
    }
}

#[cfg(test)]
mod tests;
