//! Adaptive P1 finite elements for −Δu = 0 on the unit square (the PHAML experiments of DRUM
//! 2005 §4: 17 adaptive steps to a 524,500-vertex mesh).
//!
//! `fem-laplace` is the only crate that knows meshes (see `ARCHITECTURE.md`). The loop is
//! [`Adaptive`]; the mesh ([`Mesh`]) keeps its leaf elements in Sierpiński-curve order with
//! centroids and work weights ready for a partitioner. See `README.md` next to this crate for
//! the data layout and the method.
//!
//! ```
//! use fem_laplace::{AdaptConfig, Adaptive, CornerSingularity};
//! let exact = CornerSingularity;
//! let cfg = AdaptConfig { target_vertices: 2_000, ..AdaptConfig::default() };
//! let mut run = Adaptive::new(&exact, cfg)?;
//! let reports = run.run(|_, _| {})?;
//! let last = reports.last().unwrap();
//! assert!(last.vertices >= 2_000);
//! assert!(last.error_energy.unwrap() < reports[3].error_energy.unwrap());
//! // Centroids for a partitioner, in curve order:
//! let mut xy = vec![0.0; 2 * run.mesh().num_elements()];
//! run.mesh().centroids_into(&mut xy);
//! # Ok::<(), fem_laplace::FemError>(())
//! ```
#![deny(missing_docs)]

pub mod adapt;
pub mod assemble;
mod corner;
pub mod dist;
pub mod error;
pub mod estimate;
pub mod exact;
pub mod mark;
pub mod memory;
pub mod mesh;
pub mod output;
pub mod problem;
pub mod solver;

pub use adapt::{AdaptConfig, Adaptive, PHAML_TARGET_VERTICES, StepReport, StepTimes};
pub use assemble::System;
pub use error::FemError;
pub use mark::Marking;
pub use mesh::{Marks, Mesh, MeshSummary, NONE, WeightKind};
pub use problem::{CornerSingularity, ExactSolution, FnSolution, Problem, SmoothHarmonic};
pub use solver::{CgConfig, Multilevel, SolveStats};
