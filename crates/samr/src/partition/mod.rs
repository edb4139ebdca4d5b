//! Box partitioners: a list of boxes in, patches (pieces of the boxes, each with a rank) out.
//!
//! Every partitioner here gives each cell of the input exactly one patch: the patches of a
//! level are disjoint and their union is the union of that level's input boxes (tests in
//! `tests/partitioners.rs`). They run on the whole box list, which every rank holds (as in
//! GrACE and ENZO), so they need no communication and give the same patches on every rank.

mod ace;
mod hier;
mod sfc;

pub use ace::Ace;
pub use hier::HierBoxes;
pub use sfc::Sfc;

use crate::{BoxList, BoxPartition, SamrError};
use hier_part::Plan;

/// The box partitioner of a run, with what it needs besides the boxes.
#[derive(Debug, Clone)]
pub enum BoxMethod {
    /// [`Ace`] with one relative capacity per rank.
    Ace {
        /// Relative capacities `C_k`, one per rank.
        capacities: Vec<f64>,
    },
    /// [`Sfc`] into equal parts, one per rank (GrACE's default).
    Sfc {
        /// Number of ranks.
        ranks: usize,
    },
    /// [`HierBoxes`] along the machine tree of `plan` (one rank per rank of the machine).
    Hier {
        /// The machine tree with its powers.
        plan: Box<Plan>,
        /// [`HierBoxes::max_share`].
        max_share: f64,
    },
}

impl BoxMethod {
    /// Its name on the command line: `ace`, `sfc` or `hier`.
    pub fn name(&self) -> &'static str {
        match self {
            BoxMethod::Ace { .. } => "ace",
            BoxMethod::Sfc { .. } => "sfc",
            BoxMethod::Hier { .. } => "hier",
        }
    }

    /// Number of ranks it partitions for.
    pub fn ranks(&self) -> usize {
        match self {
            BoxMethod::Ace { capacities } => capacities.len(),
            BoxMethod::Sfc { ranks } => *ranks,
            BoxMethod::Hier { plan, .. } => plan.num_ranks(),
        }
    }

    /// Partitions `list` with minimum box size `min_box`.
    pub fn partition(&self, list: &BoxList, min_box: i64) -> Result<BoxPartition, SamrError> {
        match self {
            BoxMethod::Ace { capacities } => Ace { min_box }.partition(list, capacities),
            BoxMethod::Sfc { ranks } => Sfc { min_box }.partition(list, &vec![1.0; *ranks]),
            BoxMethod::Hier { plan, max_share } => HierBoxes {
                min_box,
                max_share: *max_share,
            }
            .partition(list, plan),
        }
    }
}
