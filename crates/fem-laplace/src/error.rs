//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in `fem-laplace` with data supplied from outside (problem
/// definitions, configuration values, output files). Programming errors (a mesh array of the
/// wrong length) panic instead, with a message that names the contract.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FemError {
    /// A configuration value is outside its domain.
    #[error("invalid configuration: {field} = {value}: {reason}")]
    InvalidConfig {
        /// The name of the field (as in the config struct or the command line).
        field: &'static str,
        /// The offending value, formatted.
        value: String,
        /// What the value must satisfy.
        reason: &'static str,
    },
    /// A marking strategy string could not be parsed.
    #[error(
        "invalid marking `{input}`: {reason} (expected `double` or `doerfler:θ` with 0 < θ ≤ 1)"
    )]
    BadMarking {
        /// The text given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A problem name could not be parsed.
    #[error("unknown problem `{0}` (expected `corner` or `smooth`)")]
    BadProblem(String),
    /// The exact solution returned a value that is not finite.
    #[error(
        "exact solution `{name}` returned {value} at vertex ({x}, {y}); Dirichlet data must be finite"
    )]
    NonFiniteData {
        /// The solution's name.
        name: String,
        /// The x coordinate of the point.
        x: f64,
        /// The y coordinate of the point.
        y: f64,
        /// The value returned.
        value: f64,
    },
    /// Refinement would make an element deeper than the mesh supports.
    #[error("element {element} at level {level} cannot be bisected further (level limit {limit})")]
    LevelLimit {
        /// The element (index in SFC order).
        element: usize,
        /// Its level.
        level: u8,
        /// The deepest level supported.
        limit: u8,
    },
    /// The mesh fails a structural check (used by tests and by `Mesh::check`).
    #[error("mesh check failed: {0}")]
    MeshCheck(String),
    /// A collective failed: a peer rank panicked, died or disagreed.
    #[error("communication failed: {0}")]
    Comm(#[from] comm::CommError),
    /// Another rank failed in a local phase; every rank stops (the failing one reports why).
    #[error("rank {rank} stops: rank {failed} failed (see its error)")]
    PeerFailed {
        /// This rank.
        rank: usize,
        /// The lowest rank that failed.
        failed: usize,
    },
    /// A migration lost or duplicated elements.
    #[error("step {step}, rank {rank}: the migration lost or duplicated elements: {detail}")]
    Migration {
        /// The step.
        step: usize,
        /// The rank that noticed.
        rank: usize,
        /// Counts and checksums.
        detail: String,
    },
    /// Balancing failed: the partitioner, the monitors' powers, the policy or a collective of
    /// the runtime (`drum-loop`); the source names the figure, node or rank.
    #[error("balancing the elements failed: {0}")]
    Balance(#[from] drum_loop::Error),
    /// Writing an output file failed. (The cause is in the message and not also a `source`,
    /// so that an error chain prints it once.)
    #[error("cannot write {path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
}
