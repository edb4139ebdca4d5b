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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkProbe {
    /// Size of the small message in bytes (dominated by latency). Default 8.
    pub small: usize,
    /// Size of the large message in bytes (dominated by bandwidth). Default 1 MiB.
    pub large: usize,
    /// Timed repeats of each size; the median is used. Default 7.
    pub repeats: usize,
}

impl Default for LinkProbe {
    fn default() -> Self {
        LinkProbe {
            small: 8,
            large: 1 << 20,
            repeats: 7,
        }
    }
}

/// Fitted link model `T(L) = α + β·L` (Lan et al. 2001 §4.2).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkModel {
    /// α: latency in seconds (clamped to ≥ 0; timing noise can make the fit negative).
    pub alpha: f64,
    /// β: transfer time per byte in seconds (clamped to ≥ 0).
    pub beta: f64,
    /// Median time of one exchange of `probe.small` bytes, seconds.
    pub t_small: f64,
    /// Median time of one exchange of `probe.large` bytes, seconds.
    pub t_large: f64,
    /// The probe used.
    pub probe: LinkProbe,
}

impl LinkModel {
    /// Predicted time to move `bytes`: `α + β × bytes` (Lan et al. 2001 §4.2, the
    /// communication term of eq. 1 with `W = bytes`).
    pub fn time(&self, bytes: f64) -> f64 {
        self.alpha + self.beta * bytes
    }

    /// Fits α and β through the two points `(L₁, T₁)`, `(L₂, T₂)`:
    /// `β = (T₂ − T₁) / (L₂ − L₁)`, `α = T₁ − β·L₁`, each clamped to ≥ 0.
    ///
    /// # Panics
    /// If `probe.small >= probe.large`.
    pub fn fit(probe: LinkProbe, t_small: f64, t_large: f64) -> LinkModel {
        assert!(
            probe.small < probe.large,
            "link probe: small must be below large"
        );
        let (l1, l2) = (probe.small as f64, probe.large as f64);
        let beta = ((t_large - t_small) / (l2 - l1)).max(0.0);
        let alpha = (t_small - beta * l1).max(0.0);
        LinkModel {
            alpha,
            beta,
            t_small,
            t_large,
            probe,
        }
    }
}

/// Measures α and β between ranks `a` and `b` of `comm` (collective: every rank calls it with
/// the same arguments; all get the same bit-identical model).
///
/// Each timed step is one [`Comm::alltoallv_bytes`] in which `a` and `b` send each other `L`
/// bytes at once and the other ranks send nothing; its time is the slower of `a`'s and `b`'s
/// (a max-reduction), so it includes the collective's own synchronisation, as a migration
/// through `alltoallv` would. Sizes alternate (small, large, small, …) after one untimed warm-up
/// of each, and the medians of `probe.repeats` steps give `T₁`, `T₂` for [`LinkModel::fit`].
/// `a == b` measures a rank's copy to itself.
///
/// # Panics
/// If `a` or `b` is not a rank of `comm`, `probe.repeats == 0` or `probe.small >= probe.large`.
pub fn measure_link<C: Comm>(
    comm: &C,
    a: usize,
    b: usize,
    probe: &LinkProbe,
) -> Result<LinkModel, CommError> {
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
    step(probe.large)?;
    let mut small = Vec::with_capacity(probe.repeats);
    let mut large = Vec::with_capacity(probe.repeats);
    for _ in 0..probe.repeats {
        small.push(step(probe.small)?);
        large.push(step(probe.large)?);
    }
    Ok(LinkModel::fit(
        probe.clone(),
        median(&mut small),
        median(&mut large),
    ))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_line() {
        let probe = LinkProbe {
            small: 100,
            large: 1100,
            repeats: 1,
        };
        // α = 2e-6 s, β = 1e-9 s/B.
        let m = LinkModel::fit(probe, 2e-6 + 100e-9, 2e-6 + 1100e-9);
        assert!((m.alpha - 2e-6).abs() < 1e-15, "{m:?}");
        assert!((m.beta - 1e-9).abs() < 1e-20, "{m:?}");
        assert!((m.time(1e6) - (2e-6 + 1e-3)).abs() < 1e-12);
    }

    #[test]
    fn fit_clamps_noise() {
        let probe = LinkProbe {
            small: 8,
            large: 16,
            repeats: 1,
        };
        let m = LinkModel::fit(probe, 5e-6, 4e-6);
        assert_eq!((m.alpha, m.beta), (5e-6, 0.0));
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
