//! Adaptive P1 finite elements for −Δu = 0 on the unit square (the PHAML experiments of DRUM).
//!
//! `fem-laplace` is the only crate that knows meshes (see `ARCHITECTURE.md`).
#![deny(missing_docs)]

pub mod adapt;
pub mod assemble;
pub mod error;
pub mod estimate;
pub mod mark;
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
