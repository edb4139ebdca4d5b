//! What the workspace's command-line tools share (after ripgrep's `grep-cli`): the binaries
//! stay glue, and each of these ideas lives here once.
//!
//! - [`emit`]: print a report on stdout; a closed pipe (`hsfc … | head`) is not an error;
//! - [`median`]: the median of repeated timings;
//! - [`agreed`]: the one error-agreement protocol (`hsfc::dist::agree`) for `anyhow` errors, so
//!   that every rank of a distributed command stops at the same step;
//! - `power::PowerArgs` (feature `power`): the power-model flags of every command that reads a
//!   machine description (`drum powers`, `drum show`, `hier-part partition`), one
//!   `clap::Args`;
//! - `mpi::main` (feature `mpi`): a command's body as one rank of an MPI job.
//!
//! Library crates never depend on this crate (nor on `clap` or `anyhow`): only binaries do.
#![deny(missing_docs)]

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "power")]
pub mod power;

use anyhow::{Context, Result};
use hsfc::dist::{Failed, Reduce};

/// The timing flags of a partitioning command: `--threads` (the library's `Par`) and
/// `--repeat` (the time reported is the median of the repeats).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct RunArgs {
    /// Threads inside the partitioner (1 = on the calling thread).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Repeat the partition call this many times; the time printed is the median.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
}

impl RunArgs {
    /// The partitioner's parallelism.
    pub fn par(&self) -> hsfc::Par {
        hsfc::Par::threads(self.threads)
    }
}

/// Prints `text` to stdout as one write; a closed pipe (`… | head`) is not an error.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// The median of `v` (the mean of the two middle values for an even count; NaN when empty),
/// sorting `v` in place.
///
/// ```
/// assert_eq!(cli_support::median(&mut [3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(cli_support::median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
/// ```
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[m],
        _ => 0.5 * (v[m - 1] + v[m]),
    }
}

/// Makes a local step of a distributed command collective (`hsfc::dist::agree`): `Ok` on every
/// rank only if it is `Ok` on every rank; otherwise a rank keeps its own error, and ranks that
/// succeeded say how many others failed. Every rank then stops at the same point, so no rank
/// is left waiting in a collective for one that gave up.
pub fn agreed<R, T>(ranks: &R, local: Result<T>) -> Result<T>
where
    R: Reduce,
{
    match hsfc::dist::agree(ranks, local, &mut [])? {
        Ok(v) => Ok(v),
        Err(Failed::Here(e)) => Err(e),
        Err(Failed::Elsewhere { ranks, .. }) => {
            anyhow::bail!("{ranks} other rank(s) failed; see their messages")
        }
    }
}

/// The error of a run over thread ranks: the lowest rank's own failure, preferred to the
/// other ranks' reactions to it (`is_reaction`: a failed peer, a failed collective), as
/// `rank R: …`; `Ok` when every rank succeeded.
pub fn first_rank_error<E>(
    results: Vec<Result<(), E>>,
    is_reaction: impl Fn(&E) -> bool,
) -> Result<()>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut errs: Vec<(usize, E)> = results
        .into_iter()
        .enumerate()
        .filter_map(|(r, x)| x.err().map(|e| (r, e)))
        .collect();
    errs.sort_by_key(|(_, e)| is_reaction(e));
    match errs.into_iter().next() {
        None => Ok(()),
        Some((r, e)) => Err(anyhow::Error::new(e).context(format!("rank {r}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsfc::dist::Serial;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [5.0]), 5.0);
        assert_eq!(median(&mut [2.0, 1.0]), 1.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn agreed_on_one_rank_is_the_local_outcome() {
        assert_eq!(agreed(&Serial, Ok(3)).unwrap(), 3);
        let e = agreed::<_, ()>(&Serial, Err(anyhow::anyhow!("bad"))).unwrap_err();
        assert_eq!(e.to_string(), "bad");
    }
}
