//! Errors of `drum-model`: every bad-data error names its place (a file position, a node, a
//! `/proc` file), programmer errors (an out-of-range [`crate::NodeId`]) panic.

use std::fmt;
use std::path::PathBuf;

/// A position in a source file: `FILE:LINE:COL` (1-based line, 1-based column in characters).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The file name as given by the caller (or `<input>` for in-memory text).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub column: u32,
}

impl Location {
    /// A location at `line:column` of `file`.
    pub fn new(file: impl Into<String>, line: u32, column: u32) -> Self {
        Location {
            file: file.into(),
            line,
            column,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// What is wrong with a machine description; carried by [`Error::Invalid`] with its location.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// The XML parser rejected the text.
    NotWellFormed(String),
    /// The file is empty or holds only whitespace and comments.
    Empty,
    /// The bytes are not UTF-8.
    NotUtf8,
    /// The document element is not `<machinemodel>` or there are two document elements.
    WrongRoot(String),
    /// An element other than `<node>` / `<lbmethod>` where those are expected.
    UnknownElement {
        /// The element found.
        element: String,
        /// Where it was found (`machinemodel`, `node`, `lbmethod`).
        inside: String,
    },
    /// Non-whitespace text inside an element (attributes must be on the tag).
    TextContent(String),
    /// `type` is not one of `NETWORK`, `SINGLE_COMPUTING`, `MULTIPLE_COMPUTING`.
    UnknownNodeType(String),
    /// A required attribute is missing.
    MissingAttribute {
        /// The attribute's name.
        attr: &'static str,
        /// The element that lacks it.
        element: &'static str,
    },
    /// An attribute that must be a number (or boolean, or CPU list) is not.
    BadValue {
        /// The attribute's name.
        attr: String,
        /// Its text.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A number is negative, zero where it must be positive, infinite or NaN.
    OutOfRange {
        /// The attribute's name.
        attr: String,
        /// Its text.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// An attribute that makes no sense on this kind of node.
    NotAllowed {
        /// The attribute's name.
        attr: String,
        /// Why.
        why: &'static str,
    },
    /// Two nodes share a `nodenum`.
    DuplicateNodenum {
        /// The number.
        nodenum: u32,
        /// Where it first appeared.
        first: Location,
    },
    /// A node names a parent that does not exist.
    MissingParent {
        /// The node.
        nodenum: u32,
        /// The parent it names.
        parent: u32,
    },
    /// A nested `<node>` has a `parent` attribute that differs from the enclosing node.
    ParentMismatch {
        /// The node.
        nodenum: u32,
        /// The `parent` attribute.
        parent: u32,
        /// The enclosing node's number.
        enclosing: u32,
    },
    /// No node has `parent="-1"`.
    NoRoot,
    /// A second node has `parent="-1"`.
    TwoRoots {
        /// The first root.
        first: u32,
        /// The second root.
        second: u32,
    },
    /// Parent links form a cycle (listed in order).
    Cycle(Vec<u32>),
    /// A computing node has a child.
    ComputingHasChildren {
        /// The computing node.
        nodenum: u32,
        /// One of its children.
        child: u32,
    },
    /// A network node has no children, so it hosts no process.
    NetworkLeaf(u32),
    /// Two `<lbmethod>` elements in one node.
    DuplicateLbMethod,
    /// `<lbmethod lbm="...">` names a method that is not one of
    /// [`crate::PartitionMethod::NAMES`].
    UnknownLbMethod {
        /// The node, as `node 3 ("name")`.
        node: String,
        /// The name found.
        method: String,
    },
    /// A `numprocs`/`cpus` inconsistency or a size limit.
    Inconsistent(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NotWellFormed(m) => write!(f, "not well-formed XML: {m}"),
            Problem::Empty => write!(f, "empty machine description (no <machinemodel> element)"),
            Problem::NotUtf8 => write!(f, "the file is not valid UTF-8"),
            Problem::WrongRoot(m) => write!(f, "{m}"),
            Problem::UnknownElement { element, inside } => {
                write!(f, "unknown element <{element}> inside <{inside}>")
            }
            Problem::TextContent(t) => write!(
                f,
                "unexpected text {t:?}: attributes belong on the <node ...> tag (Fig. 4 of DRUM \
                 2005 prints them garbled as text)"
            ),
            Problem::UnknownNodeType(t) => write!(
                f,
                "unknown node type {t:?} (expected NETWORK, SINGLE_COMPUTING or MULTIPLE_COMPUTING)"
            ),
            Problem::MissingAttribute { attr, element } => {
                write!(f, "<{element}> lacks the required attribute `{attr}`")
            }
            Problem::BadValue {
                attr,
                value,
                expected,
            } => {
                write!(f, "`{attr}` is {value:?}, expected {expected}")
            }
            Problem::OutOfRange {
                attr,
                value,
                expected,
            } => {
                write!(f, "`{attr}` is {value:?}, expected {expected}")
            }
            Problem::NotAllowed { attr, why } => write!(f, "attribute `{attr}` not allowed: {why}"),
            Problem::DuplicateNodenum { nodenum, first } => {
                write!(f, "duplicate nodenum {nodenum} (first used at {first})")
            }
            Problem::MissingParent { nodenum, parent } => {
                write!(
                    f,
                    "node {nodenum} names parent {parent}, which does not exist"
                )
            }
            Problem::ParentMismatch {
                nodenum,
                parent,
                enclosing,
            } => write!(
                f,
                "node {nodenum} says parent=\"{parent}\" but is nested inside node {enclosing}"
            ),
            Problem::NoRoot => write!(f, "no root node (no node has parent=\"-1\")"),
            Problem::TwoRoots { first, second } => write!(
                f,
                "two root nodes: {first} and {second} both have parent=\"-1\" (or are top-level \
                 without a parent)"
            ),
            Problem::Cycle(nodes) => {
                let list: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
                write!(
                    f,
                    "parent links form a cycle: {} -> {}",
                    list.join(" -> "),
                    list[0]
                )
            }
            Problem::ComputingHasChildren { nodenum, child } => write!(
                f,
                "computing node {nodenum} has a child (node {child}); computing nodes must be \
                 leaves"
            ),
            Problem::NetworkLeaf(n) => write!(
                f,
                "network node {n} has no children; every leaf must be a computing node"
            ),
            Problem::DuplicateLbMethod => write!(f, "a second <lbmethod> in the same node"),
            Problem::UnknownLbMethod { node, method } => write!(
                f,
                "{node}: unknown lbmethod `{method}` (known: {})",
                crate::PartitionMethod::NAMES.join(", ")
            ),
            Problem::Inconsistent(m) => write!(f, "{m}"),
        }
    }
}

/// Every error of `drum-model`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A machine description (XML) is malformed or invalid; displayed as `FILE:LINE:COL: message`.
    #[error("{location}: {problem}")]
    Invalid {
        /// Where.
        location: Location,
        /// What.
        problem: Problem,
    },
    /// A JSON Lines sample file is malformed or inconsistent; `FILE:LINE:COL: message`.
    #[error("{location}: {message}")]
    Samples {
        /// Where.
        location: Location,
        /// What.
        message: String,
    },
    /// A power could not be computed (zero total power, NaN, a missing rating or sample, ...).
    #[error("node {nodenum} ({name:?}): {message}")]
    Power {
        /// The node the problem is about.
        nodenum: u32,
        /// Its name.
        name: String,
        /// What.
        message: String,
    },
    /// A `/proc` (or `/sys`) file is unreadable or garbled.
    #[error("{}: {message}", path.display())]
    Proc {
        /// The file.
        path: PathBuf,
        /// What.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause (printed in the message, so not also a `source()`: a report that walks
        /// the chain, such as anyhow's `{:#}`, would print it twice).
        error: std::io::Error,
    },
    /// A parameter given by the caller is out of range (a weight not in [0, 1], a zero period).
    #[error("invalid parameter: {0}")]
    Parameter(String),
    /// The monitor thread failed or a monitor was used wrongly (stopped twice).
    #[error("monitor: {0}")]
    Monitor(String),
    /// Starting or stopping a synthetic load failed.
    #[error("load: {0}")]
    Load(String),
    /// The benchmark failed (e.g. its residual check).
    #[error("benchmark: {0}")]
    Benchmark(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
