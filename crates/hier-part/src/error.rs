//! The crate's error type.

use drum_model::Location;
use drum_model::PartitionMethod;

/// Everything that can go wrong in `hier-part` with bad data (not programmer error).
///
/// Each message names the place: the point, the coordinate, the index of the weight or target,
/// the graph vertex, the measurement.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `dim` is not 1, 2 or 3.
    #[error("dim = {dim} is not supported: points must have 1, 2 or 3 coordinates")]
    UnsupportedDim {
        /// The dimension given.
        dim: usize,
    },
    /// The coordinate array does not hold whole points.
    #[error("coords has {len} values, which is not a multiple of dim = {dim}")]
    CoordsLength {
        /// Length of the coordinate slice.
        len: usize,
        /// The dimension given.
        dim: usize,
    },
    /// A coordinate is NaN or infinite.
    #[error("point {point}: coordinate {axis} is {value}, not a finite number")]
    NonFiniteCoord {
        /// Index of the point.
        point: usize,
        /// Axis (0 = x).
        axis: usize,
        /// The value found.
        value: f64,
    },
    /// An array does not have one entry per point (or per part, or per group).
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
    /// A weight is negative, NaN or infinite.
    #[error("weight of object {index} is {value}; weights must be finite and non-negative")]
    BadWeight {
        /// Index of the object.
        index: usize,
        /// The value found.
        value: f64,
    },
    /// No parts were asked for (k = 0).
    #[error("targets is empty: at least one part (k >= 1) is needed")]
    NoParts,
    /// A target part size is negative, NaN or infinite.
    #[error("targets[{index}] is {value}; part sizes must be finite and non-negative")]
    BadTarget {
        /// Index of the part.
        index: usize,
        /// The value found.
        value: f64,
    },
    /// Every target part size is zero.
    #[error("the {k} target part sizes are all zero: at least one part must have a positive size")]
    ZeroTargets {
        /// Number of parts.
        k: usize,
    },
    /// More objects or parts than a `u32` id can address.
    #[error("{count} {what}: at most {max} are supported (ids are u32)", max = u32::MAX)]
    TooMany {
        /// "objects" or "parts".
        what: &'static str,
        /// How many were given.
        count: usize,
    },
    /// A part id in a partition is not below the number of parts.
    #[error("object {index} is in part {part}, but there are only {k} parts")]
    PartOutOfRange {
        /// Index of the object (or of the part, for a group map).
        index: usize,
        /// The part (or group) id found.
        part: u32,
        /// Number of parts (or groups).
        k: usize,
    },
    /// A graph is malformed (CSR offsets, a neighbour, a missing reverse edge) or its points
    /// are.
    #[error("graph: {0}")]
    Graph(#[from] part_api::GraphError),
    /// A parameter is out of its domain.
    #[error("{what} is {value}; expected {expected}")]
    BadValue {
        /// Which figure, with its index if it is one of many (`"powers[3]"`).
        what: String,
        /// The value found.
        value: f64,
        /// The domain it must lie in.
        expected: &'static str,
    },
    /// A known `<lbmethod>` parameter has a bad value.
    #[error("{location}: {node}: lbmethod parameter {name}=\"{value}\" is not {expected}")]
    BadParameter {
        /// Where the parameter is.
        location: Location,
        /// The node, as `node 3 ("name")`.
        node: String,
        /// The parameter's name.
        name: String,
        /// Its value.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A level's partitioner failed; `source` says why.
    #[error("{node} ({method} level): {source}")]
    Level {
        /// The node that was splitting, as `node 3 ("name")`.
        node: String,
        /// Its method.
        method: PartitionMethod,
        /// The partitioner's error.
        source: Box<Error>,
    },
    /// An error of the `hsfc` partitioner.
    #[error(transparent)]
    Hsfc(#[from] hsfc::Error),
    /// The local thread pool could not be built.
    #[error(transparent)]
    ThreadPool(#[from] part_api::PoolError),
    /// An error of the machine model (a metric of bad figures).
    #[error(transparent)]
    Model(#[from] drum_model::Error),
    /// A collective failed (a rank died, ranks disagreed).
    #[error("communication failed: {0}")]
    Comm(#[from] comm::CommError),
    /// A distributed run was started with a communicator whose size is not the machine's
    /// number of ranks.
    #[error(
        "the communicator has {comm} ranks but the machine has {machine}: run one process (or thread rank) per rank of the machine"
    )]
    RankCount {
        /// Size of the communicator.
        comm: usize,
        /// Ranks of the machine.
        machine: usize,
    },
    /// Another rank of a distributed run found bad input (it reports the details).
    #[error(
        "{ranks} rank(s) found bad input, the first being rank {rank} (its error names the object)"
    )]
    InvalidOnOtherRank {
        /// How many ranks found bad input.
        ranks: u64,
        /// The first of them.
        rank: u64,
    },
    /// Ranks of a distributed run passed inconsistent arguments.
    #[error("ranks disagree: {what}")]
    Inconsistent {
        /// What differs.
        what: &'static str,
    },
    /// A point assign through the hierarchy reached a level whose cuts were not kept.
    #[error(
        "{node}: no cuts kept for this level (set KEEP_CUTS=\"1\" on its lbmethod, and in a distributed run ask a rank that took part in it)"
    )]
    NoCuts {
        /// The node, as `node 3 ("name")`.
        node: String,
    },
    /// A point assign reached a DIFFUSION level, whose parts are sets of objects, not regions.
    #[error("a DIFFUSION level has no cuts to assign a point by: its parts are sets of objects")]
    NoCutsInDiffusion,
    /// An error of a DIFFUSION level's load transfer or task selection.
    #[error("diffusion: {0}")]
    Diffusion(Box<diffusion::Error>),
}

impl From<diffusion::Error> for Error {
    fn from(e: diffusion::Error) -> Error {
        Error::Diffusion(Box::new(e))
    }
}

impl Error {
    /// Wraps an error of a level's partitioner with the node and the method.
    pub(crate) fn at_level(self, node: &str, method: PartitionMethod) -> Error {
        Error::Level {
            node: node.to_string(),
            method,
            source: Box::new(self),
        }
    }
}
