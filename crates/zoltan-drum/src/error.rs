//! Why a call failed, and how a failure crosses the C boundary: Zoltan's return codes
//! (`ZOLTAN_WARN`, `ZOLTAN_FATAL`, `ZOLTAN_MEMERR`) with a message on stderr, or one of
//! `drum.h`'s status codes with a message kept for `drum_last_error_message`.

use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// `ZOLTAN_OK`: success.
pub const ZOLTAN_OK: c_int = 0;
/// `ZOLTAN_WARN`: done, with a warning (printed on stderr).
pub const ZOLTAN_WARN: c_int = 1;
/// `ZOLTAN_FATAL`: failed (the message is on stderr).
pub const ZOLTAN_FATAL: c_int = -1;
/// `ZOLTAN_MEMERR`: an allocation failed.
pub const ZOLTAN_MEMERR: c_int = -2;

/// Everything that can go wrong in this library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A collective failed (a peer died, or the ranks disagreed).
    #[error("communication failed: {0}")]
    Comm(#[from] comm::CommError),
    /// HSFC rejected the input.
    #[error("HSFC: {0}")]
    Hsfc(#[from] hsfc::Error),
    /// RCB, RIB or the hierarchical partitioner failed.
    #[error("{0}")]
    Hier(#[from] hier_part::Error),
    /// The DRUM loop (its agent, powers or policy) failed.
    #[error("{0}")]
    Loop(#[from] drum_loop::Error),
    /// A message from another rank was short or garbled (which rank, what was short).
    #[error("a message from rank {from}: {source}")]
    Message {
        /// The rank that sent it.
        from: usize,
        /// What the read found.
        source: comm::wire::WireError,
    },
    /// The machine file or the power computation failed (with file:line:col).
    #[error("{0}")]
    Machine(#[from] drum_model::Error),
    /// An application query function set `*ierr` to an error.
    #[error("the application's {what} query function returned ierr = {code}")]
    Callback {
        /// Which one (`ZOLTAN_OBJ_LIST_FN`, ...).
        what: &'static str,
        /// The code it set.
        code: c_int,
    },
    /// A query function the call needs was never registered.
    #[error("no {what} query function is registered (call {setter})")]
    NoCallback {
        /// Which one.
        what: &'static str,
        /// The function that registers it.
        setter: &'static str,
    },
    /// A query function the call needs was registered in neither of its two forms.
    #[error(
        "no {} or {} query function is registered (call {} or {})",
        .what[0], .what[1], .setter[0], .setter[1]
    )]
    NoForm {
        /// Which one: its multi form, then its single form.
        what: [&'static str; 2],
        /// The functions that register them.
        setter: [&'static str; 2],
    },
    /// The input does not make sense (the message says where).
    #[error("{0}")]
    BadInput(String),
    /// Zoltan does this, this library does not (the message says what instead).
    #[error("{0}")]
    Unsupported(String),
    /// Another rank of the collective call failed (it printed why).
    #[error("{ranks} rank(s) failed (the first is rank {first}; see its message)")]
    OtherRank {
        /// How many ranks failed.
        ranks: u64,
        /// The lowest of them.
        first: usize,
    },
    /// A required pointer is NULL.
    #[error("{0} is NULL")]
    Null(&'static str),
    /// An allocation for the caller failed.
    #[error("could not allocate {bytes} bytes")]
    Memory {
        /// How many.
        bytes: usize,
    },
    /// A panic was caught at the boundary: a bug in this library.
    #[error("internal error (a Rust panic was caught): {0}")]
    Panic(String),
}

impl Error {
    /// The Zoltan return code of this failure.
    pub fn zoltan_code(&self) -> c_int {
        match self {
            Error::Memory { .. } => ZOLTAN_MEMERR,
            _ => ZOLTAN_FATAL,
        }
    }
}

/// Prints one Zoltan-style line on stderr: `[rank] Zoltan WARNING in fn: message` (one write,
/// so that ranks' lines do not interleave under mpirun).
pub(crate) fn report(rank: Option<usize>, kind: &str, function: &str, message: &str) {
    let who = rank.map_or("[?]".to_string(), |r| format!("[{r}]"));
    let line = format!("{who} Zoltan {kind} in {function} (zoltan-drum): {message}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// What a Zoltan entry point returns when it did not fail: `ZOLTAN_OK`, or `ZOLTAN_WARN`
/// with the warning (printed by [`zoltan_guard`]; an empty one is not printed: the warning of
/// a collective call is printed by rank 0 alone).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Done {
    Ok,
    Warn(String),
}

/// Runs one Zoltan entry point: a failure prints its message and returns its code, a warning
/// prints and returns `ZOLTAN_WARN`, a panic becomes `ZOLTAN_FATAL` (never unwinds into C).
pub(crate) fn zoltan_guard(
    rank: Option<usize>,
    function: &str,
    f: impl FnOnce() -> Result<Done, Error>,
) -> c_int {
    let result = match crate::huge::within_call(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(r) => r,
        Err(payload) => Err(Error::Panic(part_api::panic_message(payload))),
    };
    let (code, kind, message) = match result {
        Ok(Done::Ok) => return ZOLTAN_OK,
        // A warning rank 0 prints for all.
        Ok(Done::Warn(w)) if w.is_empty() => return ZOLTAN_WARN,
        Ok(Done::Warn(w)) => (ZOLTAN_WARN, "WARNING", w),
        Err(e) => (e.zoltan_code(), "ERROR", e.to_string()),
    };
    let _ = catch_unwind(AssertUnwindSafe(|| report(rank, kind, function, &message)));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_fatal_and_never_unwinds() {
        assert_eq!(
            zoltan_guard(Some(0), "test", || panic!("boom")),
            ZOLTAN_FATAL
        );
        assert_eq!(zoltan_guard(None, "test", || Ok(Done::Ok)), ZOLTAN_OK);
        assert_eq!(
            zoltan_guard(None, "test", || Ok(Done::Warn("w".into()))),
            ZOLTAN_WARN
        );
        assert_eq!(
            zoltan_guard(None, "test", || Err(Error::Memory { bytes: 8 })),
            ZOLTAN_MEMERR
        );
    }
}
