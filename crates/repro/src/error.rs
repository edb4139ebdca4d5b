//! The reproduction's error type: what failed, with the chain of what was being done.

/// Everything that can stop a reproduction: a failed run, an unreadable output, a simulation
/// of bad figures. [`Error::Context`] wraps an error with what was being done, so the message
/// reads from the outside in (`measured fig8 ...: could not start fem-laplace: ...`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// What was being done when `source` happened.
    #[error("{what}: {source}")]
    Context {
        /// The step, as a phrase.
        what: String,
        /// What went wrong in it.
        source: Box<Error>,
    },
    /// A figure or a result is not what the reproduction needs (the message says which).
    #[error("{0}")]
    Invalid(String),
    /// Reading or writing a file, or starting a process.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A run's output is not the JSON it should be.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The adaptive run failed.
    #[error(transparent)]
    Fem(#[from] fem_laplace::FemError),
    /// The partitioner failed.
    #[error(transparent)]
    Partition(#[from] hier_part::Error),
    /// The rebalance policy failed (figures out of its domain).
    #[error(transparent)]
    Loop(#[from] drum_loop::Error),
    /// The machine model failed.
    #[error(transparent)]
    Model(#[from] drum_model::Error),
    /// A collective of the link measurement failed.
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    /// The link timings could not be fitted.
    #[error(transparent)]
    LinkFit(#[from] comm::LinkFitError),
}

/// The reproduction's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds what was being done to an error (or turns a missing value into one).
pub trait Context<T> {
    /// Wraps the error with `what`.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Wraps the error with `what()`, computed only on failure.
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what.into(),
            source: Box::new(e.into()),
        })
    }
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what().into(),
            source: Box::new(e.into()),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(what.into()))
    }
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(what().into()))
    }
}

/// Returns an [`Error::Invalid`] with a formatted message.
macro_rules! bail {
    ($($t:tt)*) => {
        return Err($crate::error::Error::Invalid(format!($($t)*)))
    };
}
pub(crate) use bail;
