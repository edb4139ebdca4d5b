//! The crate's error type.

use crate::Rect;

/// Why a partition, a configuration or a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SamrError {
    /// A setting out of its range.
    #[error("{what} is {value}; expected {expected}")]
    BadValue {
        /// The setting.
        what: String,
        /// Its value.
        value: f64,
        /// What it should be.
        expected: &'static str,
    },
    /// The minimum box size exceeds the level-0 domain.
    #[error("minimum box size {min_box} is larger than the domain ({n0} x {n0} cells at level 0)")]
    MinBoxTooLarge {
        /// The minimum box side, in cells.
        min_box: i64,
        /// Level-0 cells per side.
        n0: i64,
    },
    /// A box outside its level's domain, empty, or above the finest level.
    #[error("box {index} (level {level}, {rect}) {why}")]
    BadBox {
        /// Index of the box in its list.
        index: usize,
        /// Its level.
        level: u8,
        /// Its cells.
        rect: Rect,
        /// What is wrong, e.g. `lies outside the level-1 domain [0, 64) x [0, 64)`.
        why: String,
    },
    /// Two boxes of one level share cells.
    #[error("boxes {a} and {b} of level {level} overlap in {common}")]
    Overlap {
        /// Index of the first box.
        a: usize,
        /// Index of the second box.
        b: usize,
        /// Their level.
        level: u8,
        /// The shared cells.
        common: Rect,
    },
    /// A rank's capacity (relative power or target) is not a finite number > 0.
    #[error("capacity of rank {rank} is {value}; expected a finite number > 0")]
    Capacity {
        /// The rank.
        rank: usize,
        /// Its capacity.
        value: f64,
    },
    /// A list of the wrong length (capacities for another rank count, …).
    #[error("{what} has {got} entries, expected {expected}")]
    Length {
        /// The list.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length it needs.
        expected: usize,
    },
    /// A box method or scheme cannot be used with these settings.
    #[error("{0}")]
    Unsupported(String),
    /// The communicator failed (a peer died, ranks disagreed).
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    /// A message between ranks ended early (`comm::wire`'s error names what was short).
    #[error("message from rank {from}: {source}")]
    Wire {
        /// The sending rank.
        from: usize,
        /// What was short.
        source: comm::wire::WireError,
    },
    /// A message between ranks held something else than the schedule both ends computed.
    #[error("message from rank {from}: {what}")]
    Garbled {
        /// The sending rank.
        from: usize,
        /// What was wrong.
        what: String,
    },
    /// The data a step needs was not there (a broken nesting or schedule: a bug).
    #[error("level {level} cell ({i}, {j}): {what}")]
    Missing {
        /// The level.
        level: u8,
        /// Cell x index.
        i: i64,
        /// Cell y index.
        j: i64,
        /// What is missing.
        what: &'static str,
    },
    /// The curve ordering of `hsfc` failed.
    #[error("space-filling curve: {0}")]
    Hsfc(#[from] hsfc::Error),
    /// A machine made on the fly was not valid (a rank count of 0, a rating that is not a
    /// finite number > 0).
    #[error("a switch machine: {0}")]
    Model(Box<drum_model::Error>),
    /// The hierarchical partitioner failed.
    #[error(transparent)]
    HierPart(#[from] hier_part::Error),
    /// The rebalance test or the link measurement of the runtime failed.
    #[error(transparent)]
    Loop(Box<drum_loop::Error>),
}

impl From<drum_model::Error> for SamrError {
    fn from(e: drum_model::Error) -> Self {
        SamrError::Model(Box::new(e))
    }
}

impl From<drum_loop::Error> for SamrError {
    fn from(e: drum_loop::Error) -> Self {
        SamrError::Loop(Box::new(e))
    }
}
