//! Hierarchical partitioning driven level by level along a DRUM machine tree.
//!
//! [`Hier`] partitions objects over the ranks of a machine: [`Plan`] reads each node's
//! `<lbmethod>` and its children's powers, and from the root down every node splits its
//! objects among its children with its own method (serial: [`Hier::partition`]; one rank per
//! machine rank on any [`comm::Comm`]: the same [`Hier::partition`] on that group, equal to the serial result;
//! KEEP_CUTS repartition and point assign through the tree). It is built from:
//! - [`Rcb`] and [`Rib`]: recursive coordinate and inertial bisection to arbitrary target part
//!   sizes (any k ≥ 1, zero-size parts allowed), weighted, deterministic for every [`Par`],
//!   returning a [`Bisection`] with per-part weights, imbalance and the cuts
//!   ([`Bisection::point_assign`]);
//! - [`quality`]: per-part weight against target, imbalance, edge cut and neighbour parts of a
//!   partition on a graph ([`Csr`], [`Csr::knn`]: `part_api`'s), aggregated per level of a machine tree
//!   ([`Quality::grouped`]), with a table and an ASCII picture ([`picture`]);
//!
//! When to repartition, and DRUM in the loop around it, are the runtime crate's (`drum-loop`).
//!
//! The test and benchmark point sets come from `hsfc::generate` (one generator for the
//! workspace; `hier-part`'s tests draw from its `Xoshiro256` stream).
#![deny(missing_docs)]

mod bisect;
mod error;
mod hier;
mod input;
pub mod quality;

pub use bisect::{Bisection, Cut, Method, Plane, Rcb, Rib};
pub use drum_model::PartitionMethod;
pub use error::Error;
pub use hier::{
    Child, DEFAULT_EFF_MIN, DEFAULT_IMBALANCE_TOL, Diffused, Hier, HierPartition, LevelCuts,
    LevelMethod, LevelReport, Moved, OnPlan, Plan, PlanNode, ToleranceWarning, Workspace,
};
/// The one parallelism setting of the workspace (`part_api`'s): `Seq`, or a local rayon pool
/// of that many threads (never rayon's global pool).
pub use part_api::Par;
/// The one graph type of the workspace: a mesh's neighbours, or a k-nearest-neighbour graph.
pub use part_api::{Csr, GraphError};
/// The one partitioner interface ([`Rcb`], [`Rib`], [`Hier`] and `hsfc::Hsfc` implement it),
/// its input view, and the one-rank group (a serial call).
pub use part_api::{Partitioner, Points, Serial};
pub use quality::{Quality, picture};
