//! Hilbert space-filling-curve partitioning with weighted cuts to arbitrary part sizes.
//!
//! `hsfc` knows nothing of machines, XML, MPI or meshes (see `ARCHITECTURE.md`): it takes
//! points as interleaved coordinates (`dim` = 2 or 3), optional weights, and relative target
//! sizes, and writes one part id per point into a buffer the caller owns.
//!
//! ```
//! use hsfc::Hsfc;
//! use part_api::{Par, Partitioner, Points, Serial};
//! // Four points on a line, weights 1, 1, 1, 3; two parts, the second twice the first.
//! let points = [0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0];
//! let weights = [1.0, 1.0, 1.0, 3.0];
//! let mut parts = [0u32; 4];
//! // `Serial`: this process holds all the points (a `comm` communicator spreads them).
//! let p = Hsfc { par: Par::Seq, ..Default::default() }
//!     .partition(&Serial, Points::new(&points, 2, Some(&weights)), &[1.0, 2.0], &mut parts)
//!     .unwrap();
//! assert_eq!(p.part_weights(), &[2.0, 4.0]);
//! // Any point, in the box or not, is assigned as the partition would assign it.
//! assert_eq!(p.point_assign(&[3.0, 0.0]).unwrap(), parts[3]);
//! ```
//!
//! How it works (see `hsfc/README.md` for the design note):
//! 1. one pass finds the bounding box, the largest weight and checks the input;
//! 2. one pass computes a 64-bit Hilbert key per point ([`Partition::key`]) with a
//!    table-driven encoder and a weight histogram over the top key bits;
//! 3. the histogram is refined only in the bins where a cut falls, a few key bits at a time,
//!    over the points of those bins only, until each cut is exact to one object; where a cut
//!    falls in a cell of the 64-bit keys that holds several points, the refinement goes on
//!    inside the cell along the curve continued there ([`Partition::fine_key`]), so cuts are
//!    fine keys ([`Partition::fine_cuts`]);
//! 4. one pass writes the parts and sums the weight of each part.
//!
//! Weights are summed as fixed-point integers (see [`Partition::weight_quantum`]), so every
//! sum is exact and independent of the order of summation: the result is bit-identical for
//! every thread count (`part_api::Par`) and every rank count (the group of
//! `part_api::Partitioner::partition`).

#![deny(missing_docs)]

mod curve;
mod error;
mod exec;
pub mod generate;
pub mod io;
mod mapping;
mod partition;
mod refine;
mod scratch;
pub mod simd;
pub mod summary;
#[cfg(test)]
mod tests;
mod workspace;

pub use error::Error;
pub use mapping::BoundingBox;
use part_api::{Partitioner, Points, Reduce};
pub use partition::{Migration, Partition};
pub use simd::{Simd, SimdError};
pub use workspace::Workspace;

/// The partitioner's settings (public fields; build with `..Default::default()`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hsfc {
    /// Threads to use.
    pub par: part_api::Par,
    /// Relative imbalance a repartition may accept per part to keep a previous cut
    /// ([`Hsfc::repartition`]): a cut stays where it was when every part next to it stays
    /// within `tolerance · T_k` of its target. 0 (the default) keeps a previous cut only where
    /// it is still optimal. Must lie in `[0, 1)`. A fresh partition is always at the balance
    /// limit and ignores it.
    pub tolerance: f64,
}

impl Default for Hsfc {
    fn default() -> Self {
        Hsfc {
            par: part_api::Par::Seq,
            tolerance: 0.0,
        }
    }
}

impl<R: Reduce> Partitioner<R> for Hsfc {
    type Output = Partition;
    type Error = Error;
    type Workspace = Workspace;

    /// Partitions the points into `targets.len()` parts with relative sizes `targets`
    /// (normalised; zeros allowed), writing the part of point `i` into `parts[i]`. Points are
    /// 2-D or 3-D; weights are non-negative and finite (`None`: unit weights).
    ///
    /// Parts follow the curve: part `k` owns the fine keys in `[fine_cuts[k-1], fine_cuts[k])`
    /// ([`Partition::fine_cuts`]). Every part `k` with weight `W_k` and target `T_k` satisfies
    /// `|W_k − T_k| ≤` the largest weight of the points that share one fine key: points with
    /// identical fine keys (duplicates, or points in one cell of the fine grid: 2^53 cells per
    /// axis of the padded box in 2-D, 2^42 in 3-D) always go to one part, so for distinct
    /// points the bound is the largest single weight. Parts with target 0 get no point.
    ///
    /// Distributed (`group` of several ranks): each rank passes its own points and parts
    /// buffer, and the same `targets` and settings. Every rank returns the same [`Partition`],
    /// and the parts are those the serial call (`part_api::Serial`) would give on the union of
    /// the points, for any number of ranks. Bad input on one rank makes every rank return an
    /// error (the others get [`Error::InvalidOnOtherRank`]).
    fn partition_with(
        &self,
        ws: &mut Workspace,
        group: &R,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Partition, Error> {
        partition::run(self, ws, group, points, targets, parts, None)
    }
}

impl Hsfc {
    /// Repartitions from `previous` (Zoltan's KEEP_CUTS): the same bounding box and curve are
    /// kept when the points still fit in it, and each new cut stays as close to the previous
    /// one as the balance allows (see [`Hsfc::tolerance`]), so a slowly changing load moves
    /// little. `parts` holds each point's current part on entry (for instance from
    /// [`Partition::assign`]) and its new part on return; the moved weight is reported in
    /// [`Partition::migration`]. `targets.len()` and the dimension must match `previous`.
    /// Distributed as [`Partitioner::partition`] (every rank passes the same `previous`).
    /// `ws`: the caller's buffers, as for [`Partitioner::partition_with`] (a repartition is
    /// the call that repeats).
    pub fn repartition<R: Reduce>(
        &self,
        ws: &mut Workspace,
        group: &R,
        previous: &Partition,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Partition, Error> {
        partition::run(self, ws, group, points, targets, parts, Some(previous))
    }
}
