//! DRUM in the loop (DRUM 2005 Fig. 2): after each adaptive step the application asks for
//! part sizes, the partitioner turns them into a new partition, the application migrates.
//!
//! Every rank creates a [`DrumLoop`] on its communicator ([`DrumLoop::start`], collective).
//! It starts DRUM's monitoring agent for the rank's own node (CPU use and run-queue time of
//! the calling thread, idle time of the node's `cpus`, memory, interfaces) and measures the
//! link between the root's groups (α, β of Lan et al. §4.2). At each rebalance point
//! ([`DrumLoop::rebalance`], collective) it
//! 1. cuts the agent's window (exact ends: the counters are read at the call) and gathers
//!    every rank's window;
//! 2. turns them into node observations and powers (DRUM 2005 §3.3 with the machine's
//!    ratings and `w_comm`), identically on every rank;
//! 3. asks the [`rebalance::Policy`] whether to rebalance: Watts' `eff` of the loads the ranks hold now
//!    against the new part sizes, the drift of the powers since the current partition was
//!    made, and Lan's `Gain > γ·Cost` with the measured link, the predicted migration volume
//!    and the last migration's time;
//! 4. if so, repartitions with `hier_part::Hier::repartition` (KEEP_CUTS) into the new sizes.
//!
//! What the sizes are is the [`Sizing`]: equal parts, static ratings, or monitored powers.
//! The agents run in every sizing (the reports show what they measured), so the three cost
//! the same.
//!
//! ## Robust powers
//! A live rank never gets a zero part and the run never stops for a measurement:
//! - a window shorter than [`LoopConfig::min_window`] (the first, tiny steps) stays open
//!   into the next steps until it is long enough (the CPUs' idle time comes in 10 ms ticks);
//!   the powers stay as they were;
//! - a rank that was runnable for less than [`MIN_EVIDENCE`] in the window (it had nothing
//!   to do) says nothing about its node's speed: the node keeps its previous observation;
//! - a rank whose agent failed (an unreadable or garbled `/proc` file, a non-finite value)
//!   makes its node keep its previous observation, with a warning naming the rank and the
//!   cause; a node never observed uses the static observation (every CPU idle);
//! - a node measured at (near) zero is raised to the power floor of `drum_model`
//!   (`drum_model::PowerConfig::floor`, 5 % of its idle-CPU power by default), with a warning;
//! - powers that cannot be computed at all keep the previous part sizes, with a warning.

//!
//! ```no_run
//! use comm::{Comm, ThreadComm, ThreadOptions};
//! use drum_loop::{DrumLoop, LoopConfig};
//! use drum_model::Machine;
//! use part_api::Points;
//!
//! let machine = Machine::from_file("machines/local-2core-hetero.xml").unwrap();
//! let ranks = machine.num_ranks();
//! ThreadComm::run(ranks, &ThreadOptions::default(), |comm| {
//!     let mut drum = DrumLoop::start(&comm, machine.clone(), LoopConfig::default())?;
//!     // This rank's objects (here one point each) and their current rank.
//!     let coords = [0.25 + comm.rank() as f64 * 0.5, 0.5];
//!     let mut parts = [comm.rank() as u32];
//!     for _step in 0..3 {
//!         // ... compute, adapt ...
//!         let report = drum.rebalance(&comm, Points::new(&coords, 2, None), &mut parts)?;
//!         println!("{}", report.decision.text);
//!         // ... migrate the objects whose part changed ...
//!     }
//!     drum.stop()?;
//!     Ok::<_, drum_loop::Error>(())
//! })
//! .unwrap();
//! ```
#![deny(missing_docs)]

mod balancing;
mod capacity;
mod cost;
mod error;
pub mod rebalance;
mod run;
mod window;

pub use balancing::{Balancer, Balancing, FLAT_TOLERANCE};
pub use capacity::LoadMeasure;
pub use cost::RebalanceCost;
pub use error::Error;
pub use run::{
    DEFAULT_BYTES_PER_WEIGHT, DecisionReport, DrumLoop, LoopConfig, LoopReport, LoopSummary,
    MIN_EVIDENCE, PointFigures, RankMeasure, RebalanceMode, Sensed, Sensing, Sizing,
};
