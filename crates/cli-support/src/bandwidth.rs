//! The host's memory bandwidth as the benchmarks quote it: STREAM's triad
//! `a[i] = b[i] + s·c[i]` over three arrays far beyond the caches, on one thread or on
//! several cores at once.
//!
//! The second figure is the one a distributed run on one host meets: two ranks on two cores
//! share the memory system, so a phase that streams its arrays can gain at most
//! `triad_on(&[0, 1]) / triad_on(&[0])` from the second rank, however little it
//! synchronises. On a 2-core virtual machine of this project (AMD EPYC, 2026-12-06) it was
//! 1.47: 22 GB/s on one core, 32.5 GB/s on both.
//!
//! ```no_run
//! let one = cli_support::bandwidth::triad_on(&[0]);
//! let two = cli_support::bandwidth::triad_on(&[0, 1]);
//! println!("{:.1} GB/s on one core, {:.2}x that on two", one.bytes_per_s / 1e9, two.bytes_per_s / one.bytes_per_s);
//! ```

use std::sync::Barrier;
use std::time::Instant;

/// Doubles per array: 2^23 (64 MiB each, 192 MiB per thread).
const N: usize = 1 << 23;
/// Timed passes; the best counts (STREAM's rule).
const PASSES: usize = 7;

/// A triad measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Triad {
    /// Bytes per second over all threads together (24 bytes per element per thread: two
    /// arrays read, one written, as STREAM counts it), in the best pass.
    pub bytes_per_s: f64,
    /// Whether every thread ran on the core it was given (`false`: some could not be
    /// pinned, e.g. a core outside the process's affinity mask; the figure is then the
    /// scheduler's placement).
    pub pinned: bool,
}

/// The triad on the calling thread, where it runs now (not pinned).
pub fn triad() -> Triad {
    let mut arrays = Arrays::new();
    let mut best = f64::INFINITY;
    for pass in 0..PASSES {
        let t = Instant::now();
        arrays.pass(pass);
        best = best.min(t.elapsed().as_secs_f64());
    }
    Triad {
        bytes_per_s: 24.0 * N as f64 / best,
        pinned: false,
    }
}

/// The triad on one thread per core of `cores`, each pinned to its core, all passes run
/// together (a barrier before each): the bandwidth of the best pass, timed from the barrier
/// to the last thread's end. An empty list measures nothing (0 bytes/s).
pub fn triad_on(cores: &[usize]) -> Triad {
    if cores.is_empty() {
        return Triad {
            bytes_per_s: 0.0,
            pinned: true,
        };
    }
    let start = Barrier::new(cores.len());
    let end = Barrier::new(cores.len());
    let results: Vec<(bool, Vec<f64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = cores
            .iter()
            .map(|&c| {
                let (start, end) = (&start, &end);
                s.spawn(move || {
                    let pinned = crate::pin_thread(c);
                    // Each thread's arrays are touched first on its own core.
                    let mut arrays = Arrays::new();
                    let mut ends = Vec::with_capacity(PASSES);
                    for pass in 0..PASSES {
                        start.wait();
                        let t = Instant::now();
                        arrays.pass(pass);
                        ends.push(t.elapsed().as_secs_f64());
                        end.wait();
                    }
                    (pinned, ends)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((false, vec![f64::INFINITY; PASSES])))
            .collect()
    });
    // A pass lasts until its slowest thread is done.
    let best = (0..PASSES)
        .map(|p| results.iter().map(|r| r.1[p]).fold(0.0, f64::max))
        .fold(f64::INFINITY, f64::min);
    Triad {
        bytes_per_s: 24.0 * N as f64 * cores.len() as f64 / best,
        pinned: results.iter().all(|r| r.0),
    }
}

/// The host's two-CPU scaling as the benchmarks print it ([`ceiling`]): the triad on CPU 0
/// and, when the host has two CPUs, on CPUs 0 and 1 together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ceiling {
    /// The best triad on CPU 0.
    pub one: Triad,
    /// The best triad on CPUs 0 and 1 together (`None`: fewer than two CPUs).
    pub two: Option<Triad>,
    /// Rounds each measurement kept the best of.
    pub rounds: usize,
}

/// Rounds of [`ceiling`] the benches use (each measurement keeps its best of them).
pub const ROUNDS: usize = 3;

impl Ceiling {
    /// Whether every measurement ran on the cores it was given.
    pub fn pinned(&self) -> bool {
        self.one.pinned && self.two.is_none_or(|t| t.pinned)
    }

    /// Two CPUs' bandwidth over one's: the most a phase that streams memory can gain from a
    /// second thread or rank on this host, however little it synchronises.
    pub fn ratio(&self) -> Option<f64> {
        self.two.map(|t| t.bytes_per_s / self.one.bytes_per_s)
    }

    /// One line for a bench's header: what was measured, both figures and their ratio.
    pub fn describe(&self) -> String {
        let how = format!(
            "STREAM triad, 3 x 64 MiB per CPU, best of {} x {PASSES} passes",
            self.rounds
        );
        let one = self.one.bytes_per_s / 1e9;
        match (self.two, self.ratio()) {
            (Some(two), Some(ratio)) => format!(
                "memory bandwidth ({how}): {one:.1} GB/s on CPU 0, {:.1} GB/s on CPUs 0 and 1 \
                 together{}: {ratio:.2}x one CPU, the most a phase that streams memory can gain \
                 from a second CPU on this host",
                two.bytes_per_s / 1e9,
                if self.pinned() { "" } else { " (not pinned)" }
            ),
            _ => format!("memory bandwidth ({how}): {one:.1} GB/s on CPU 0"),
        }
    }
}

/// The triad on CPU 0 and (with `two_cpus`) on CPUs 0 and 1 together, alternating in
/// `rounds` rounds (at least one), each keeping its best: on a shared virtual machine one
/// CPU's triad was seen to move between 16 and 30 GB/s from one bench to the next, and
/// alternating lets a slow minute hit both alike.
pub fn ceiling(rounds: usize, two_cpus: bool) -> Ceiling {
    let best = |a: Triad, b: Triad| Triad {
        bytes_per_s: a.bytes_per_s.max(b.bytes_per_s),
        pinned: a.pinned && b.pinned,
    };
    let rounds = rounds.max(1);
    let mut one = triad_on(&[0]);
    let mut two = two_cpus.then(|| triad_on(&[0, 1]));
    for _ in 1..rounds {
        one = best(one, triad_on(&[0]));
        if let Some(t) = two.as_mut() {
            *t = best(*t, triad_on(&[0, 1]));
        }
    }
    Ceiling { one, two, rounds }
}

/// The three arrays of one thread.
struct Arrays {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Arrays {
    fn new() -> Arrays {
        Arrays {
            a: vec![0.0; N],
            b: vec![1.0; N],
            c: vec![2.0; N],
        }
    }

    /// One pass of the triad (its scalar differs from pass to pass, so that no pass can be
    /// skipped as a repeat of the previous one).
    fn pass(&mut self, pass: usize) {
        let s = 0.5 + pass as f64;
        for ((x, &y), &z) in self.a.iter_mut().zip(&self.b).zip(&self.c) {
            *x = y + s * z;
        }
        std::hint::black_box(&mut self.a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_measurements_give_a_bandwidth() {
        let one = triad();
        assert!(
            one.bytes_per_s.is_finite() && one.bytes_per_s > 1e8,
            "{one:?}"
        );
        assert!(!one.pinned);
        let on = triad_on(&[0]);
        assert!(on.bytes_per_s.is_finite() && on.bytes_per_s > 1e8, "{on:?}");
        let c = ceiling(1, false);
        assert!(
            c.one.bytes_per_s > 1e8 && c.two.is_none() && c.ratio().is_none(),
            "{c:?}"
        );
        assert!(c.describe().contains("GB/s on CPU 0"), "{}", c.describe());
        assert_eq!(triad_on(&[]).bytes_per_s, 0.0);
    }

    #[test]
    fn a_core_that_does_not_exist_is_reported_unpinned() {
        let t = triad_on(&[1 << 20]);
        assert!(!t.pinned);
        assert!(t.bytes_per_s > 1e8);
    }
}
