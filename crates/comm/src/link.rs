//! Measuring the latency α and per-byte time β of the link between two ranks.
//!
//! Lan, Taylor and Bryan (2001), §4.2, model the time to move `L` bytes between two groups of
//! processors as `T_comm = α + β × L` and obtain α and β by sending two messages of different
//! sizes between the groups; redistributing `W` bytes then costs `α + β × W`, the
//! communication part of their redistribution cost `Cost = (α + β × W) + δ` (their eq. 1).
//! [`measure_link`] does exactly that between two ranks (for two groups, pass one
//! representative rank of each, e.g. their leaders).

use crate::{Comm, CommError, ReduceOp};

/// The two message sizes and the number of timed repeats of [`measure_link`].
#[derive(Debug, Clone, PartialEq)]
pub struct LinkProbe {
    /// Size of the small message in bytes (dominated by latency). Default 8.
    pub small: usize,
    /// Size of the large message in bytes (dominated by bandwidth): the most a probe sends.
    /// Default 1 MiB.
    pub large: usize,
    /// Timed repeats of each size; the median is used. Default 7.
    pub repeats: usize,
    /// How long one exchange of the large message should take, seconds (default 0.05): the
    /// large size is the first of 4 KiB, 8 KiB, … (doubling, at most `large`) whose exchange
    /// takes this long, so a slow link is probed in a fraction of a second rather than
    /// 2·(repeats + 1) MiB (12 s over 10 Mbit/s) while a fast one still gets `large`.
    /// 0 or less: always `large`.
    pub target_s: f64,
}

impl Default for LinkProbe {
    fn default() -> Self {
        LinkProbe {
            small: 8,
            large: 1 << 20,
            repeats: 7,
            target_s: 0.05,
        }
    }
}

/// The first size of the ladder `from`, `2·from`, … whose exchange (`time`, agreed by every
/// rank) takes `target_s`, at most `large`.
fn ladder(
    from: usize,
    large: usize,
    target_s: f64,
    mut time: impl FnMut(usize) -> Result<f64, CommError>,
) -> Result<usize, CommError> {
    if target_s <= 0.0 || from >= large {
        return Ok(large);
    }
    let mut size = from;
    loop {
        if time(size)? >= target_s || size >= large {
            return Ok(size);
        }
        size = (2 * size).min(large);
    }
}

/// What [`measure_link`] measured: the median time of one exchange of each probe size.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkTimings {
    /// Median time of one exchange of `probe.small` bytes, seconds.
    pub t_small: f64,
    /// Median time of one exchange of `probe.large` bytes, seconds.
    pub t_large: f64,
    /// The probe used.
    pub probe: LinkProbe,
}

impl LinkTimings {
    /// The link model through the two timings ([`LinkModel::fit`]).
    pub fn fit(&self) -> Result<LinkModel, LinkFitError> {
        LinkModel::fit(
            (self.probe.small as f64, self.t_small),
            (self.probe.large as f64, self.t_large),
        )
    }
}

/// Fitted link model `T(L) = α + β·L` (Lan et al. 2001 §4.2): the one in the workspace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkModel {
    /// Latency α (s).
    pub alpha: f64,
    /// Inverse bandwidth β (s/B).
    pub beta: f64,
}

/// Two message timings that give no latency and transfer rate (see [`LinkModel::fit`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot fit T = alpha + beta*L to ({b1} B, {t1} s) and ({b2} B, {t2} s): {reason}")]
pub struct LinkFitError {
    /// Size of the first message in bytes.
    pub b1: f64,
    /// Its time in seconds.
    pub t1: f64,
    /// Size of the second message in bytes.
    pub b2: f64,
    /// Its time in seconds.
    pub t2: f64,
    /// Why no fit exists.
    pub reason: &'static str,
}

impl LinkModel {
    /// α and β from two timed messages `(bytes, seconds)` of different sizes, "the scheme
    /// sends two messages between groups, and calculates the network performance parameters α
    /// and β" (Lan et al. §4.2): the line through the two points, `β = (T₂ − T₁) / (L₂ − L₁)`,
    /// `α = T₁ − β·L₁`.
    ///
    /// One policy for impossible figures: an error, never a clamped value (a clamped β of 0
    /// would price a migration at nothing). It errs when the sizes are equal, a figure is
    /// negative or not finite, the larger message was not slower (β ≤ 0) or the line has a
    /// negative latency — measure again with more repetitions.
    pub fn fit(a: (f64, f64), b: (f64, f64)) -> Result<LinkModel, LinkFitError> {
        let fail = |reason| {
            Err(LinkFitError {
                b1: a.0,
                t1: a.1,
                b2: b.0,
                t2: b.1,
                reason,
            })
        };
        if ![a.0, a.1, b.0, b.1]
            .iter()
            .all(|x| x.is_finite() && *x >= 0.0)
        {
            return fail("sizes and times must be finite and >= 0");
        }
        if a.0 == b.0 {
            return fail("both messages have the same size");
        }
        let (s, l) = if a.0 < b.0 { (a, b) } else { (b, a) };
        let beta = (l.1 - s.1) / (l.0 - s.0);
        if beta <= 0.0 {
            return fail("the larger message was not slower (beta <= 0)");
        }
        let alpha = s.1 - beta * s.0;
        if alpha < 0.0 {
            return fail("the line through them has a negative latency (alpha < 0)");
        }
        Ok(LinkModel { alpha, beta })
    }

    /// Predicted time to move `bytes`: `α + β × bytes` (Lan et al. 2001 §4.2, the
    /// communication term of eq. 1 with `W = bytes`).
    pub fn time(&self, bytes: f64) -> f64 {
        self.alpha + self.beta * bytes
    }
}

impl std::fmt::Display for LinkModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "alpha = {:.3e} s, beta = {:.3e} s/B ({:.1} MB/s)",
            self.alpha,
            self.beta,
            1e-6 / self.beta
        )
    }
}

/// Measures the link between ranks `a` and `b` of `comm` (collective: every rank calls it with
/// the same arguments; all get the same bit-identical timings, which [`LinkTimings::fit`]
/// turns into α and β).
///
/// Each timed step is one [`Comm::alltoallv_bytes`] in which `a` and `b` send each other `L`
/// bytes at once and the other ranks send nothing; its time is the slower of `a`'s and `b`'s
/// (a max-reduction), so it includes the collective's own synchronisation, as a migration
/// through `alltoallv` would. The large size is chosen first (`probe.target_s`: doubling from
/// 4 KiB until one exchange takes that long, at most `probe.large`; the times are agreed, so
/// every rank chooses the same); then sizes alternate (small, large, small, …) after one
/// untimed warm-up of each, and the medians of `probe.repeats` steps give `T₁`, `T₂`. The
/// returned timings carry the probe with the large size used.
/// `a == b` measures a rank's copy to itself.
///
/// # Panics
/// If `a` or `b` is not a rank of `comm`, `probe.repeats == 0` or `probe.small >= probe.large`.
pub fn measure_link<C: Comm>(
    comm: &C,
    a: usize,
    b: usize,
    probe: &LinkProbe,
) -> Result<LinkTimings, CommError> {
    let size = comm.size();
    assert!(
        a < size && b < size,
        "measure_link: ranks {a}, {b} out of range for {size} ranks"
    );
    assert!(probe.repeats > 0, "measure_link: repeats must be positive");
    assert!(
        probe.small < probe.large,
        "measure_link: small must be below large"
    );
    let me = comm.rank();
    let step = |bytes: usize| -> Result<f64, CommError> {
        let mut counts = vec![0usize; size];
        if me == a {
            counts[b] += bytes;
        }
        if me == b && a != b {
            counts[a] += bytes;
        }
        let send = vec![0x5au8; counts.iter().sum()];
        comm.barrier()?;
        let t0 = comm.wtime();
        let got = comm.alltoallv_bytes(&send, &counts)?;
        let mut t = [comm.wtime() - t0];
        debug_assert_eq!(got.data().len(), if me == a || me == b { bytes } else { 0 });
        comm.allreduce_f64(ReduceOp::Max, &mut t)?;
        Ok(t[0])
    };
    step(probe.small)?;
    let size = ladder(
        (2 * probe.small).max(4096),
        probe.large,
        probe.target_s,
        &step,
    )?;
    step(size)?;
    let mut small = Vec::with_capacity(probe.repeats);
    let mut large = Vec::with_capacity(probe.repeats);
    for _ in 0..probe.repeats {
        small.push(step(probe.small)?);
        large.push(step(size)?);
    }
    Ok(LinkTimings {
        t_small: part_api::median(&mut small),
        t_large: part_api::median(&mut large),
        probe: LinkProbe {
            large: size,
            ..probe.clone()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_stops_where_an_exchange_takes_the_target() {
        // A 1.25 MB/s link with 3.6 ms latency: 64 KiB is the first to take 50 ms.
        let slow = |n: usize| Ok(3.6e-3 + n as f64 / 1.25e6);
        let mut asked = Vec::new();
        let got = ladder(4096, 1 << 20, 0.05, |n| {
            asked.push(n);
            slow(n)
        })
        .unwrap();
        assert_eq!(got, 1 << 16);
        assert_eq!(asked, [4096, 8192, 16384, 32768, 65536]);
        // A fast link reaches the cap; no target means the cap at once.
        let fast = ladder(4096, 1 << 20, 0.05, |n| Ok(n as f64 * 1e-10)).unwrap();
        assert_eq!(fast, 1 << 20);
        assert_eq!(
            ladder(4096, 1 << 20, 0.0, |_| unreachable!()).unwrap(),
            1 << 20
        );
        assert_eq!(ladder(4096, 3000, 0.05, |_| unreachable!()).unwrap(), 3000);
    }

    #[test]
    fn fit_recovers_a_line() {
        let t = LinkTimings {
            t_small: 2e-6 + 100e-9,
            t_large: 2e-6 + 1100e-9,
            // α = 2e-6 s, β = 1e-9 s/B.
            probe: LinkProbe {
                small: 100,
                large: 1100,
                repeats: 1,
                target_s: 0.0,
            },
        };
        let m = t.fit().unwrap();
        assert!((m.alpha - 2e-6).abs() < 1e-15, "{m:?}");
        assert!((m.beta - 1e-9).abs() < 1e-20, "{m:?}");
        assert!((m.time(1e6) - (2e-6 + 1e-3)).abs() < 1e-12);
    }

    #[test]
    fn noise_is_an_error_not_a_clamped_model() {
        let t = LinkTimings {
            t_small: 5e-6,
            t_large: 4e-6,
            probe: LinkProbe {
                small: 8,
                large: 16,
                repeats: 1,
                target_s: 0.0,
            },
        };
        assert!(t.fit().unwrap_err().reason.contains("beta <= 0"));
    }
}
