//! The commands' documented limits: every count or duration a user gives on the command line
//! is checked against one of these before anything is allocated, forked or started, and a
//! value over its limit is refused (never clamped) with an error naming the flag and the
//! limit. The defaults sit well inside what a 2-core, 24 GiB host survives; the limits of
//! input files and of machine attributes live in the libraries that read them
//! (`drum_model::machine::MAX_MACHINE_FILE_BYTES`, `hsfc::io::MAX_POINTS`, ...), and the
//! table of all of them is in the repository's README ("Limits").
//!
//! ```
//! use cli_support::limits::{MAX_THREADS, count};
//! let threads = count(1, MAX_THREADS, "threads");
//! assert_eq!(threads("4"), Ok(4));
//! assert_eq!(threads("1e2"), Ok(100));
//! assert_eq!(threads("100000"), Err("100000 is over the limit of 256 threads".to_string()));
//! assert!(threads("0").is_err());
//! ```

/// Most threads of a partitioner's pool (`--threads`).
pub const MAX_THREADS: usize = 256;
/// Most repeats of a timed call (`--repeat`).
pub const MAX_REPEAT: usize = 10_000;
/// Default limit of the ranks of a run whose ranks are threads of one process
/// (`--backend threads`); `--max-ranks` raises it.
pub const DEFAULT_MAX_RANKS: usize = 256;

/// `--max-ranks`: the limit of the ranks of a run over threads of this process, which a user
/// with a bigger host raises on purpose.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct MaxRanks {
    /// Most ranks of a run whose ranks are threads of this process (default 256, at most
    /// 2^20): a machine or `--ranks` over it is refused before any rank starts.
    #[arg(long, default_value_t = DEFAULT_MAX_RANKS,
          value_parser = count(1, 1 << 20, "ranks"))]
    pub max_ranks: usize,
}

impl MaxRanks {
    /// Refuses `ranks` thread ranks over the limit; `what` says where the count comes from
    /// (`--ranks 1000`, `--machine big.xml`).
    pub fn check(&self, what: &str, ranks: usize) -> anyhow::Result<()> {
        check(what, ranks, self.max_ranks, "ranks", Some("--max-ranks"))
    }
}

/// A clap value parser for a count in `min..=max` of `unit`s (`"threads"`): accepts `12`
/// and `1e6`; a value out of range is refused with the limit in the message (clap adds the
/// flag).
pub fn count(
    min: usize,
    max: usize,
    unit: &'static str,
) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let v: f64 = match s.trim().parse::<u64>() {
            Ok(v) => v as f64,
            Err(_) => s
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("`{s}` is not a whole number"))?,
        };
        if !(v.is_finite() && v.fract() == 0.0 && v >= 0.0) {
            return Err(format!("`{s}` is not a whole number"));
        }
        if v > max as f64 {
            return Err(format!("{s} is over the limit of {max} {unit}"));
        }
        if v < min as f64 {
            return Err(format!("{s} is below the minimum of {min} {unit}"));
        }
        Ok(v as usize)
    }
}

/// A clap value parser for a duration in seconds, finite and in `(0, max]`.
pub fn seconds(max: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a number of seconds"))?;
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("{s} s is not a positive, finite duration"));
        }
        if v > max {
            return Err(format!("{s} s is over the limit of {max} s"));
        }
        Ok(v)
    }
}

/// Refuses `value` over `max` for `what` (a flag and its value: `--ranks 1000`), naming the
/// limit and, if there is one, the flag that raises it (`raise`: `"--max-ranks"`).
pub fn check(
    what: &str,
    value: usize,
    max: usize,
    unit: &str,
    raise: Option<&str>,
) -> anyhow::Result<()> {
    if value <= max {
        return Ok(());
    }
    match raise {
        Some(flag) => anyhow::bail!(
            "{what}: {value} {unit} is over the limit of {max} {unit} (raise it with {flag})"
        ),
        None => anyhow::bail!("{what}: {value} {unit} is over the limit of {max} {unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations_are_refused_over_their_limits() {
        let parts = count(1, 10, "parts");
        assert_eq!(parts("10"), Ok(10));
        assert_eq!(
            parts("4294967296").unwrap_err(),
            "4294967296 is over the limit of 10 parts"
        );
        assert_eq!(parts("1.5").unwrap_err(), "`1.5` is not a whole number");
        assert_eq!(parts("nan").unwrap_err(), "`nan` is not a whole number");
        let secs = seconds(60.0);
        assert_eq!(
            secs("1e20").unwrap_err(),
            "1e20 s is over the limit of 60 s"
        );
        assert!(secs("inf").is_err() && secs("-1").is_err() && secs("0").is_err());
        assert_eq!(secs("0.5"), Ok(0.5));
        let e = check("--ranks 1000", 1000, 256, "ranks", Some("--max-ranks")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--ranks 1000: 1000 ranks is over the limit of 256 ranks (raise it with --max-ranks)"
        );
        check("--ranks 2", 2, 256, "ranks", None).unwrap();
    }
}
