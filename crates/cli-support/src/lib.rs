//! What the workspace's command-line tools share (after ripgrep's `grep-cli`): the binaries
//! stay glue, and each of these ideas lives here once.
//!
//! - [`main`]: a command's `main`: its error on one line, without a backtrace;
//! - [`limits`]: the documented limits of the commands' counts and durations, checked
//!   before anything is allocated;
//! - [`emit`]: print a report on stdout; a closed pipe (`hsfc … | head`) is not an error;
//! - [`check_outputs`]: every output path of the command line tried before the run
//!   (`part_api::file::check_writable`); [`write_output`] writes one whole or not at all;
//! - [`median`]: the median of repeated timings;
//! - [`collective`]: the one error-agreement protocol (`part_api::agreed`) for `anyhow`
//!   errors, so that every rank of a distributed command stops at the same step;
//! - `power::PowerArgs` (feature `power`): the power-model flags of every command that reads a
//!   machine description (`drum powers`, `drum show`, `hier-part partition`), one
//!   `clap::Args`;
//! - `mpi::main` (feature `mpi`): a command's body as one rank of an MPI job;
//! - [`alloc::Counting`]: the benchmarks' counting allocator (live and peak heap bytes, per
//!   process and per thread);
//! - [`pin_thread`]: the calling thread onto one CPU (the benches' pinned runs);
//! - [`bandwidth`]: the host's memory bandwidth (STREAM's triad) on one thread and on several
//!   cores at once, the ceiling the benchmarks quote beside their speed-ups.
//!
//! Library crates never depend on this crate (nor on `clap` or `anyhow`): only binaries do.
//!
//! A command's tail: the median of its timing repeats and the collective agreement that the
//! step succeeded everywhere (here one process, `part_api::Serial`), then the report on stdout.
//!
//! ```
//! use part_api::Serial;
//! let mut seconds = [0.31, 0.29, 0.90, 0.30];
//! let t = cli_support::median(&mut seconds);
//! assert_eq!(t, 0.305);
//! let checked: anyhow::Result<usize> = Ok(4);
//! let runs = cli_support::collective(&Serial, checked)?;
//! cli_support::emit(&format!("{runs} runs, median {t:.3} s\n"))?;
//! # Ok::<(), anyhow::Error>(())
//! ```
#![deny(missing_docs)]

pub mod alloc;
pub mod bandwidth;
pub mod limits;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "power")]
pub mod power;

use anyhow::{Context, Result};
use part_api::Reduce;

/// The timing flags of a partitioning command: `--threads` (the library's `Par`) and
/// `--repeat` (the time reported is the median of the repeats).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct RunArgs {
    /// Threads inside the partitioner (1 = on the calling thread; at most 256).
    #[arg(long, default_value_t = 1, value_parser = limits::count(0, limits::MAX_THREADS, "threads"))]
    pub threads: usize,
    /// Repeat the partition call this many times; the time printed is the median (at most
    /// 10,000).
    #[arg(long, default_value_t = 1, value_parser = limits::count(0, limits::MAX_REPEAT, "repeats"))]
    pub repeat: usize,
}

impl RunArgs {
    /// The partitioner's parallelism.
    pub fn par(&self) -> part_api::Par {
        part_api::Par::threads(self.threads)
    }
}

/// A command's `main`: runs `body` and, on error, prints `Error: ` and the chain of causes
/// on one line (`{:#}`) on stderr, and exits with status 1. No backtrace is printed whatever
/// `RUST_BACKTRACE` says: a user's bad input is not a crash (a panic still prints one).
pub fn main(body: impl FnOnce() -> Result<()>) -> std::process::ExitCode {
    match body() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Tries every output path given on the command line (`(flag, path)`) before the run starts,
/// so that a bad path fails in the first second naming the flag and the path, not at the end
/// of a long run. Nothing is left behind (`part_api::file::check_writable`).
pub fn check_outputs<'a>(
    outputs: impl IntoIterator<Item = (&'a str, Option<&'a std::path::Path>)>,
) -> Result<()> {
    for (flag, path) in outputs {
        if let Some(p) = path {
            part_api::file::check_writable(p).with_context(|| format!("{flag} {}", p.display()))?;
        }
    }
    Ok(())
}

/// Writes an output file whole or not at all (`part_api::file::write_atomic`); the error
/// names the file.
pub fn write_output(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    Ok(part_api::file::write_atomic_bytes(path, bytes)?)
}

/// Like [`write_output`], the bytes written by `write` (buffered).
pub fn write_output_with(
    path: &std::path::Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    Ok(part_api::file::write_atomic(path, write)?)
}

/// The ranks' outcomes of a run over threads of this process (rank order): every rank's
/// value, or the error of the rank that failed first on its own, with `rank R: ` in front.
/// A rank whose error is only its reaction to another's failure (`is_reaction`: "another
/// rank found bad input", a broken collective) is reported only when no rank has an error of
/// its own, so the message is the one that names the bad object, not "see rank 5".
pub fn rank_results<T>(
    results: Vec<Result<T>>,
    is_reaction: impl Fn(&anyhow::Error) -> bool,
) -> Result<Vec<T>> {
    let mut values = Vec::with_capacity(results.len());
    let mut first: Option<(bool, usize, anyhow::Error)> = None;
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => values.push(v),
            Err(e) => {
                let reaction = is_reaction(&e);
                if first.as_ref().is_none_or(|(fr, ..)| *fr && !reaction) {
                    first = Some((reaction, rank, e));
                }
            }
        }
    }
    match first {
        None => Ok(values),
        Some((_, rank, e)) => Err(e.context(format!("rank {rank}"))),
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

/// The workspace's one median (`part_api`'s), for the commands' timing repeats.
pub use part_api::median;

/// Makes a local step of a distributed command collective (`part_api::agreed` with the
/// commands' message): `Ok` on every rank only if it is `Ok` on every rank; otherwise a rank
/// keeps its own error, and ranks that succeeded say how many others failed. Every rank then
/// stops at the same point, so no rank is left waiting in a collective for one that gave up.
pub fn collective<R, T>(ranks: &R, local: Result<T>) -> Result<T>
where
    R: Reduce,
{
    part_api::agreed(ranks, local, |ranks, _| {
        anyhow::anyhow!("{ranks} other rank(s) failed; see their messages")
    })
}

/// Pins the calling thread to CPU `c`; whether it could (`false` for a CPU outside the
/// process's affinity mask or beyond `CPU_SETSIZE`, and off Linux).
pub fn pin_thread(c: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        if c >= libc::CPU_SETSIZE as usize {
            return false;
        }
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it (c is
        // below CPU_SETSIZE, checked above).
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(c, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = c;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use part_api::Serial;

    #[test]
    fn check_outputs_names_the_flag_and_the_path_and_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("cli-support-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("summary.json");
        let bad = dir.join("missing").join("plot.svg");
        check_outputs([("--summary-json", Some(good.as_path())), ("--svg", None)]).unwrap();
        let e = check_outputs([
            ("--summary-json", Some(good.as_path())),
            ("--plot", Some(bad.as_path())),
        ])
        .unwrap_err();
        let text = format!("{e:#}");
        assert!(text.starts_with("--plot "), "{text}");
        assert!(text.contains("missing/plot.svg"), "{text}");
        assert!(text.contains("No such file"), "{text}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        write_output(&good, "{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&good).unwrap(), "{}\n");
        let e = write_output(&bad, "x").unwrap_err();
        assert!(format!("{e:#}").contains("missing/plot.svg"), "{e:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rank_results_prefer_a_rank_s_own_error_to_the_others_reactions() {
        let reaction = |e: &anyhow::Error| e.to_string().starts_with("see");
        let r: Vec<Result<u8>> = vec![
            Err(anyhow::anyhow!("see rank 2")),
            Ok(1),
            Err(anyhow::anyhow!("point 7 is NaN")),
            Err(anyhow::anyhow!("point 9 is NaN")),
        ];
        let e = rank_results(r, reaction).unwrap_err();
        assert_eq!(format!("{e:#}"), "rank 2: point 7 is NaN");
        let r: Vec<Result<u8>> = vec![Ok(1), Err(anyhow::anyhow!("see rank 0"))];
        assert_eq!(
            format!("{:#}", rank_results(r, reaction).unwrap_err()),
            "rank 1: see rank 0"
        );
        assert_eq!(rank_results(vec![Ok(1), Ok(2)], reaction).unwrap(), [1, 2]);
    }

    #[test]
    fn collective_on_one_rank_is_the_local_outcome() {
        assert_eq!(collective(&Serial, Ok(3)).unwrap(), 3);
        let e = collective::<_, ()>(&Serial, Err(anyhow::anyhow!("bad"))).unwrap_err();
        assert_eq!(e.to_string(), "bad");
    }
}
