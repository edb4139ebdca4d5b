//! The runtime's error type.

/// Everything that can go wrong in DRUM in the loop with bad data or a failed peer (not
/// programmer error). Each message names the figure, the rank or the node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A measurement or parameter of a rebalance decision is out of its domain.
    #[error("{what} is {value}; expected {expected}")]
    BadValue {
        /// Which figure, with its index if it is one of many (`"powers[3]"`).
        what: String,
        /// The value found.
        value: f64,
        /// The domain it must lie in.
        expected: &'static str,
    },
    /// A list of measurements is empty.
    #[error("{what} is empty")]
    Empty {
        /// Which list.
        what: &'static str,
    },
    /// Two lists of figures that go together differ in length.
    #[error("{what} has {got} entries, expected {expected} (one per {per})")]
    LengthMismatch {
        /// Which argument.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length it should have.
        expected: usize,
        /// What it should have one entry for.
        per: &'static str,
    },
    /// Two message timings cannot give a latency and a transfer rate.
    #[error(transparent)]
    DegenerateTimings(#[from] comm::LinkFitError),
    /// The partitioner failed, or the loop was started with a communicator whose size is not
    /// the machine's number of ranks ([`hier_part::Error::RankCount`]).
    #[error(transparent)]
    Partition(#[from] hier_part::Error),
    /// The machine model failed (powers of bad figures, a monitor that could not stop).
    #[error(transparent)]
    Model(#[from] drum_model::Error),
    /// A collective failed (a rank died, ranks disagreed).
    #[error("communication failed: {0}")]
    Comm(#[from] comm::CommError),
}
