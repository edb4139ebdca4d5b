//! Errors of the partitioner.
//!
//! Policy: bad data (coordinates, weights, target sizes, lengths that do not match) is an
//! [`Error`] naming the offending index and value; nothing in this crate panics on data.

/// Why a partition, a repartition or an assignment could not be computed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `dim` is not 2 or 3.
    #[error("dimension {dim} is not supported (2 or 3)")]
    Dimension {
        /// The dimension given.
        dim: usize,
    },
    /// No target sizes were given (k = 0).
    #[error("no parts requested (k = 0)")]
    NoParts,
    /// More parts than a `u32` part id can name.
    #[error("{k} parts requested; at most {} are supported", u32::MAX)]
    TooManyParts {
        /// The number of parts requested.
        k: usize,
    },
    /// More points on one rank than a `u32` index can name (split them over ranks).
    #[error("{n} points on one rank; at most {} are supported", u32::MAX)]
    TooManyPoints {
        /// The number of points given.
        n: usize,
    },
    /// A target size is negative, NaN or infinite.
    #[error("target size {index} is {value}; sizes must be finite and >= 0")]
    InvalidTarget {
        /// Index of the part.
        index: usize,
        /// The value given.
        value: f64,
    },
    /// Every target size is 0.
    #[error("all {k} target sizes are 0")]
    ZeroTargets {
        /// The number of parts.
        k: usize,
    },
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
    /// A coordinate is NaN or infinite.
    #[error("point {index}: coordinate {axis} is {value}; coordinates must be finite")]
    InvalidCoordinate {
        /// Index of the point (on this rank).
        index: usize,
        /// Axis (0 = x).
        axis: usize,
        /// The value given.
        value: f64,
    },
    /// A weight is negative, NaN or infinite.
    #[error("point {index}: weight is {value}; weights must be finite and >= 0")]
    InvalidWeight {
        /// Index of the point (on this rank).
        index: usize,
        /// The value given.
        value: f64,
    },
    /// The tolerance is not in `[0, 1)`.
    #[error("tolerance {value} is not in [0, 1)")]
    InvalidTolerance {
        /// The value given.
        value: f64,
    },
    /// A box given to `box_assign` has `lo > hi` or a non-finite bound.
    #[error("box axis {axis}: [{lo}, {hi}] is not a finite interval with lo <= hi")]
    InvalidBox {
        /// Axis (0 = x).
        axis: usize,
        /// Lower bound given.
        lo: f64,
        /// Upper bound given.
        hi: f64,
    },
    /// A repartition was asked with a different dimension or part count than the previous
    /// partition.
    #[error("previous partition has dim {prev_dim} and {prev_k} parts; got dim {dim} and {k}")]
    IncompatiblePrevious {
        /// Dimension of the previous partition.
        prev_dim: usize,
        /// Parts of the previous partition.
        prev_k: usize,
        /// Dimension given now.
        dim: usize,
        /// Parts given now.
        k: usize,
    },
    /// Another rank of a distributed call had bad input (it reports the details itself).
    #[error("{ranks} other rank(s) had invalid input; see their errors")]
    InvalidOnOtherRank {
        /// How many other ranks failed validation.
        ranks: u64,
    },
    /// A collective reduction failed (a peer died or the communicator broke).
    #[error("collective reduction failed: {0}")]
    Comm(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The local thread pool could not be built.
    #[error("could not build a thread pool of {threads} threads: {message}")]
    ThreadPool {
        /// Threads requested.
        threads: usize,
        /// The pool builder's message.
        message: String,
    },
    /// The weights' total is beyond the largest `f64` (each weight is finite, but part
    /// weights and targets in weight units could not be reported).
    #[error(
        "the weights sum to about {total:e}, beyond the largest float (1.8e308): scale them down"
    )]
    WeightOverflow {
        /// The total (infinite) as far as it could be summed.
        total: f64,
    },
    /// In a distributed call, some ranks with points pass weights and others pass none.
    #[error(
        "some ranks with points pass weights and others do not: pass weights on every rank or on none"
    )]
    MixedWeights,
}

impl From<part_api::PoolError> for Error {
    fn from(e: part_api::PoolError) -> Error {
        Error::ThreadPool {
            threads: e.threads,
            message: e.message,
        }
    }
}
