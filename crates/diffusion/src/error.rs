//! The crate's error type.
//!
//! Policy (as in `hsfc`): bad data (capacities, weights, coordinates, graphs, lengths that do
//! not match) is an [`Error`] naming the offending index and value; nothing in this crate
//! panics on data.

/// Why a load transfer, a task selection or a rebalance could not be computed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A slice has the wrong length.
    #[error("{what} has length {got}, expected {expected}")]
    LengthMismatch {
        /// Which argument.
        what: &'static str,
        /// Length required by the other arguments.
        expected: usize,
        /// Length given.
        got: usize,
    },
    /// No processors (no capacities, or a graph without vertices where one is needed).
    #[error("no processors: at least one capacity is needed")]
    NoProcessors,
    /// More processors than [`crate::MAX_PROCESSORS`], or more objects than a `u32` index can
    /// name.
    #[error("{count} {what} is more than are supported")]
    TooMany {
        /// `processors` or `objects`.
        what: &'static str,
        /// How many were given.
        count: usize,
    },
    /// A capacity is zero, negative, NaN or infinite (a processor of capacity 0 has no
    /// utilisation to balance; give it a small positive capacity instead).
    #[error("capacity {index} is {value}; capacities must be finite and > 0")]
    InvalidCapacity {
        /// Index of the processor.
        index: usize,
        /// The value given.
        value: f64,
    },
    /// An edge names a vertex that does not exist, or joins a vertex to itself.
    #[error("{what} edge {index}: ({u}, {v}) {reason} ({n} vertices)")]
    InvalidEdge {
        /// `processor` or `object`.
        what: &'static str,
        /// Index of the edge in the caller's list (for a CSR, the vertex).
        index: usize,
        /// One end.
        u: u64,
        /// The other end.
        v: u64,
        /// Number of vertices.
        n: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The total load does not fit the fixed-point range (sum of loads above 2^62).
    #[error("total load {total} exceeds 2^62 weight units")]
    LoadTooLarge {
        /// The total given.
        total: u128,
    },
    /// A weight is negative, NaN or infinite.
    #[error("object {index}: weight is {value}; weights must be finite and >= 0")]
    InvalidWeight {
        /// Index of the object.
        index: usize,
        /// The value given.
        value: f64,
    },
    /// A coordinate is NaN or infinite.
    #[error("object {index}: coordinate {axis} is {value}; coordinates must be finite")]
    InvalidCoordinate {
        /// Index of the object.
        index: usize,
        /// Axis (0 = x).
        axis: usize,
        /// The value given.
        value: f64,
    },
    /// `dim` is not 1, 2 or 3, or the coordinates are not whole points.
    #[error("{len} coordinates do not make points of dimension {dim} (1, 2 or 3)")]
    Dimension {
        /// The dimension given.
        dim: usize,
        /// Number of coordinate values.
        len: usize,
    },
    /// An incremental rebalance needs a current partition, and no object has a part `< k`.
    #[error(
        "none of the {objects} objects has a current part below {parts}; diffusion moves \
             objects between existing parts (partition from scratch first, e.g. with HSFC)"
    )]
    NoCurrentPartition {
        /// Number of objects.
        objects: usize,
        /// Number of parts.
        parts: usize,
    },
    /// A setting is out of its range.
    #[error("{name} = {value} is not valid: expected {expected}")]
    InvalidParameter {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
    /// An accumulated transfer does not fit an `i64` (only possible near the 2^62 load limit).
    #[error("the transfer along edge {edge} overflows 64 bits")]
    FlowOverflow {
        /// The edge.
        edge: usize,
    },
    /// The thread pool of the requested [`part_api::Par`] could not be built.
    #[error("thread pool: {0}")]
    ThreadPool(#[from] part_api::PoolError),
    /// An object graph is malformed, or the points of a k-nearest-neighbour graph are.
    #[error("object graph: {0}")]
    Graph(#[from] part_api::GraphError),
}
