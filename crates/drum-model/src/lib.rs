//! The DRUM machine model (Faik, Teresco et al. 2004, 2005): a tree of network and computing
//! nodes, read from DrumHead XML, whose monitored capabilities are distilled into "power", the
//! fraction of the load each node and each process should get.
//!
//! `drum-model` knows no partitioner and no mesh (see `ARCHITECTURE.md`).
//!
//! ```
//! use drum_model::{Machine, PowerConfig, PowerModel, static_powers};
//! let xml = r#"<machinemodel>
//!   <node type="NETWORK" nodenum="0" name="switch" parent="-1" bandwidth="100">
//!     <lbmethod lbm="HSFC" KEEP_CUTS="1"/>
//!   </node>
//!   <node type="MULTIPLE_COMPUTING" nodenum="1" name="fast" parent="0" numprocs="2" mflops="60"/>
//!   <node type="SINGLE_COMPUTING" nodenum="2" name="slow" parent="0" mflops="40"/>
//! </machinemodel>"#;
//! let machine = Machine::parse_str(xml, "example.xml")?;
//! let powers = static_powers(&machine, &PowerConfig::default())?;
//! // 2 × 60 vs 40 MFLOPS: the SMP gets 3/4, each of its two processes 3/8, the slow node 1/4.
//! assert!((powers.part_size(0) - 0.375).abs() < 1e-12);
//! assert!((powers.part_size(2) - 0.25).abs() < 1e-12);
//! # Ok::<(), drum_model::Error>(())
//! ```
#![deny(missing_docs)]

pub mod bench;
pub mod error;
pub mod forecast;
pub mod load;
pub mod machine;
pub mod metrics;
pub mod monitor;
pub mod power;
pub mod render;
pub mod samples;
pub mod usage;
mod validate;
mod xml;

pub use error::{Error, Location, Problem, Result};
pub use machine::{CpuList, LbMethod, Machine, Node, NodeId, NodeKind, PartitionMethod};
pub use power::{
    DEFAULT_POWER_FLOOR, NodeObservation, Observations, PowerConfig, PowerModel, PowerWarning,
    Powers, RankWork, UtilBasis, compute_powers, load_average, static_powers, uniform_powers,
};
pub use xml::Attribute;
