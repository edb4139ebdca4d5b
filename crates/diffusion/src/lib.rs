//! Heterogeneous load transfer and task selection: incremental repartitioning after Watts,
//! Rieffel & Taylor, "Dynamic Management of Heterogeneous Resources" (1998).
//!
//! The paper separates an abstract *load* `L_i` (objects, cells, element work: the same on
//! every machine) from the *utilisation* `U_i = L_i / C_i` it causes on a processor of
//! *capacity* `C_i`, and balances utilisations. This crate is its load transfer calculation
//! and task selection, on a processor graph (ranks as vertices, an edge where ranks' objects
//! touch):
//!
//! - [`ProcGraph`], from rank pairs or from each object's neighbours ([`Adjacency`], which
//!   `part_api::Csr` implements); [`Capacities`] (integers, so the arithmetic is exact);
//! - [`Transfer`] with a [`Method`]: the hierarchical balancing method, the generalised
//!   dimension exchange, implicit heterogeneous heat diffusion; each returns whole-unit
//!   transfers per edge ([`Flows`]) that conserve load exactly;
//! - [`select`]: the objects that carry the transfers, boundary first (a greedy 0-1 knapsack
//!   with a locality cost);
//! - [`Diffusion`]: the two repeated until the imbalance meets a tolerance, as an incremental
//!   partitioner (points, weights, current parts and capacities in; new parts out).
//!
//! ```
//! use diffusion::{Capacities, Method, Solver, Transfer, testbed};
//! use hsfc::generate::{RandomSource, SplitMix64};
//! // A ring of 10 processors with the paper's testbed speeds (39× spread), equal loads.
//! let graph = testbed::ring(10);
//! let mut rng = SplitMix64(1);
//! let caps = Capacities::new(&testbed::paper_capacities(10, &mut || rng.uniform())).unwrap();
//! let loads = vec![1_000_000u64; 10];
//! // Implicit diffusion is stable for any time step α; a large one needs few steps.
//! let implicit = Method::Implicit { alpha: Some(10.0), solver: Solver::Cg };
//! for method in [Method::Hbm, Method::GDE, implicit] {
//!     let t = Transfer { method, eff_min: 0.99, ..Default::default() };
//!     let f = t.compute(&graph, &loads, &caps).unwrap();
//!     assert_eq!(f.loads.iter().sum::<u64>(), 10_000_000); // conserved exactly
//!     assert!(caps.efficiency(&f.loads) > 0.98, "{}", method.name());
//! }
//! ```
//!
//! Like `hsfc`, this crate knows nothing of machines, XML, MPI or meshes; loads are
//! fixed-point integers, so results are the same for every thread count.

#![deny(missing_docs)]

mod capacity;
mod error;
mod graph;
mod rebalance;
mod select;
pub mod testbed;
mod transfer;

pub use capacity::{CAPACITY_BITS, Capacities, MAX_PROCESSORS, MAX_TOTAL_LOAD};
pub use error::Error;
pub use graph::{Adjacency, ProcGraph};
pub use rebalance::{Diffusion, Rebalance, Round};
pub use select::{Selection, Sent, Tasks, select};
pub use transfer::{Flows, Method, Solver, Transfer};
