//! The one partitioner interface of the workspace: a [`Points`] view in, parts out.

/// A view of the objects to partition: interleaved coordinates (`dim` per point, the ZPT1
/// layout), and optional non-negative weights (`None`: unit weights). The partitioner checks
/// the lengths and values and reports the first bad one by index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Points<'a> {
    /// Interleaved coordinates, `len() · dim` values.
    pub coords: &'a [f64],
    /// Coordinates per point (`hsfc`: 2 or 3; RCB and RIB also take 1).
    pub dim: usize,
    /// One weight per point, or `None` for unit weights.
    pub weights: Option<&'a [f64]>,
}

impl<'a> Points<'a> {
    /// The view of `coords` (interleaved, `dim` per point) with optional `weights`.
    pub fn new(coords: &'a [f64], dim: usize, weights: Option<&'a [f64]>) -> Points<'a> {
        Points {
            coords,
            dim,
            weights,
        }
    }

    /// Number of points (`coords.len() / dim`, rounded down; 0 for `dim` 0).
    pub fn len(&self) -> usize {
        self.coords.len().checked_div(self.dim).unwrap_or(0)
    }

    /// The view's fields `(coords, dim, weights)`, for code that works on them one by one.
    pub fn into_parts(self) -> (&'a [f64], usize, Option<&'a [f64]>) {
        (self.coords, self.dim, self.weights)
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A geometric partitioner into parts of arbitrary relative sizes (after coupe's `Partition`
/// trait), run by a group of ranks `G`: [`crate::Serial`] when this process holds all
/// the points, a communicator (`comm::ThreadComm`, `comm::MpiComm`) when each rank holds some.
/// Serial is the one-rank case of the distributed call, and the parts of a distributed call
/// equal those of the serial call on the union of the ranks' points, for any rank count.
///
/// Implemented by `hsfc::Hsfc` (for any [`crate::Reduce`] group), by `hier-part`'s `Rcb`
/// and `Rib` (for any `comm::Comm`) and by `hier_part::Hier` (the walk along a machine tree). Every object gets exactly one part `< targets.len()`
/// in the caller-owned `parts`; parts of target 0 get no object.
///
/// Memory is the caller's: [`Partitioner::partition_with`] takes a workspace that keeps its
/// buffers between calls (a repartition every step of a simulation then neither allocates nor
/// faults pages in again); [`Partitioner::partition`] uses a fresh one. Nothing is kept
/// behind the caller's back, so there is nothing global to release.
pub trait Partitioner<G: ?Sized> {
    /// The result: cuts (for point assign later) and per-part figures.
    type Output;
    /// Why a call failed (bad data names its index; a failed peer its rank).
    type Error;
    /// Buffers a call may reuse from an earlier one (dropping it frees them).
    type Workspace: Default;

    /// Partitions `points` (this rank's) into `targets.len()` parts of relative sizes
    /// `targets` (normalised by the callee), writing point `i`'s part into `parts[i]`, with
    /// the buffers of `ws`.
    fn partition_with(
        &self,
        ws: &mut Self::Workspace,
        group: &G,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Self::Output, Self::Error>;

    /// [`Partitioner::partition_with`] with a fresh workspace.
    fn partition(
        &self,
        group: &G,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Self::Output, Self::Error> {
        self.partition_with(
            &mut Self::Workspace::default(),
            group,
            points,
            targets,
            parts,
        )
    }
}
