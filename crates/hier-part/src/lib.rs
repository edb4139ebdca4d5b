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
//!
//! A machine of a switch joining a two-CPU SMP and a single-CPU node, each CPU as powerful
//! as the others: the switch cuts with RCB (two thirds of the objects to the SMP), the SMP
//! with HSFC, and each of the three ranks gets a third of a 60 × 50 grid.
//!
//! ```
//! use drum_model::{Machine, PowerConfig, static_powers};
//! use hier_part::{Hier, Plan, Points, Rcb, Serial};
//! use part_api::Partitioner;
//! let xml = r#"<machinemodel>
//!   <node type="NETWORK" nodenum="0" name="switch" parent="-1"><lbmethod lbm="RCB"/></node>
//!   <node type="MULTIPLE_COMPUTING" nodenum="1" name="smp" parent="0" numprocs="2" mflops="100">
//!     <lbmethod lbm="HSFC"/>
//!   </node>
//!   <node type="SINGLE_COMPUTING" nodenum="2" name="node" parent="0" mflops="100"/>
//! </machinemodel>"#;
//! let machine = Machine::parse_str(xml, "example.xml")?;
//! let plan = Plan::new(&machine, &static_powers(&machine, &PowerConfig::default())?)?;
//! let coords: Vec<f64> = (0..3000).flat_map(|i| [(i % 60) as f64, (i / 60) as f64]).collect();
//! let points = Points::new(&coords, 2, None);
//! let mut parts = vec![0u32; 3000];
//! let result = Hier::default().partition(&Serial, &plan, points, &mut parts)?;
//! assert_eq!(result.rank_counts, vec![1000, 1000, 1000]);
//! // One level alone: RCB into parts of a quarter and three quarters.
//! let r = Rcb::default().partition(&Serial, points, &[1.0, 3.0], &mut parts)?;
//! assert_eq!(r.part_weights, vec![750.0, 2250.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
