//! A small structured AMR (SAMR) kernel over ranks, and the box partitioners of two papers.
//!
//! The kernel ([`RankRun`]) solves an advection–diffusion problem with a pulse carried round
//! the unit square ([`Problem`]) on a hierarchy of cell-centred boxes, levels `0..=L` with
//! refinement ratio 2: Berger–Oliger time stepping (level `l + 1` takes two steps per step of
//! level `l`, with coarse values interpolated in time at its ghost cells and its values
//! averaged onto level `l` after), regridding every N level-0 steps by Berger–Rigoutsos
//! clustering of flagged cells ([`cluster`]) inside the properly nested region, ghost
//! exchange between the patches of one level and coarse–fine interpolation, on any
//! [`comm::Comm`] (threads or MPI). The work of a box is its cells times its level's steps
//! per level-0 step ([`LevelBox::work`]).
//!
//! Box partitioners take the hierarchy's boxes and cut them into patches with ranks:
//! - [`Ace`]: Sinha & Parashar's *ACEHeterogeneous* (capacities from their capacity metric,
//!   sorted boxes and capacities, a too-large box broken along its longest axis, minimum box
//!   size);
//! - [`Sfc`]: the boxes along a Hilbert curve into equal parts, GrACE's default (their
//!   baseline);
//! - [`HierBoxes`]: the project's own: box centres with work weights through
//!   `hier_part::Hier` along the machine tree, boxes larger than a part's share split first;
//! - [`TwoPhase`]: Lan, Taylor & Bryan's distributed scheme, a global phase between groups of
//!   processors that moves only level-0 grids when `Gain > γ·Cost`, and a local phase
//!   inside each group.
//!
//! Determinism: every rank holds the box list and the layout and computes the same
//! hierarchy, schedules and decisions; each cell's value is computed by one formula from the
//! same inputs whatever patch and rank hold it, and the regrid reads a gathered bitmap of
//! flags, so the hierarchy and the solution are the same to the bit for any rank count and
//! any partitioner; [`StepReport::hash`] checks it.
//!
//! ```
//! use comm::{ThreadComm, ThreadOptions};
//! use samr_kernel::{Balancer, BoxMethod, Figures, RankRun, SamrConfig};
//! let cfg = SamrConfig { n0: 32, ..SamrConfig::default() };
//! let hashes = ThreadComm::run(2, &ThreadOptions::default(), |comm| {
//!     let balancer = Balancer::Flat(BoxMethod::Ace { capacities: vec![1.0, 3.0] });
//!     let mut run = RankRun::new(comm, cfg, balancer, Figures::default())?;
//!     let report = run.step()?;
//!     assert!(report.ranks[1].work > report.ranks[0].work);
//!     Ok::<_, samr_kernel::SamrError>(report.hash)
//! })
//! .unwrap();
//! assert_eq!(hashes[0].as_ref().unwrap(), hashes[1].as_ref().unwrap());
//! ```
#![deny(missing_docs)]

mod boxes;
pub mod cluster;
pub mod drum;
mod error;
mod exchange;
mod field;
mod geom;
pub mod lan;
mod machine;
mod partition;
mod problem;
mod report;
mod run;
mod schedule;

pub use boxes::{
    BoxList, BoxPartition, Domain, LevelBox, MAX_CELLS_PER_SIDE, MAX_LEVEL, Patch,
    normalise_capacities,
};
pub use cluster::Cluster;
pub use error::SamrError;
pub use geom::{Mask, RATIO, Rect};
pub use lan::{Clock, LinkSource, LocalMethod, TwoPhase, TwoPhaseConfig};
pub use machine::{SwitchNode, switch_plan};
pub use partition::{Ace, BoxMethod, HierBoxes, Sfc};
pub use problem::Problem;
pub use report::{LevelFigures, Moved, RankFigures, StepReport, composite_hash};
pub use run::{Balancer, Figures, MAX_REGRID_SIDE, RankRun, SamrConfig};
pub use schedule::{Exchange, step_exchanges};
