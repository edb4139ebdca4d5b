//! Heterogeneity and improvement metrics used in DRUM 2004/2005 §4 and by Watts et al.

use crate::error::{Error, Result};

/// System CPU heterogeneity of Xiao et al. as used in DRUM 2005 §4.3:
///
/// W_cpu(j) = V_cpu(j) / max_i V_cpu(i),  W̄_cpu = (1/P) Σ_j W_cpu(j),
/// H_cpu = sqrt( Σ_{j=1}^P (W̄_cpu − W_cpu(j))² / P ),
///
/// with V_cpu the MFLOPS rating of each of the P processors (DRUM substitutes MFLOPS for MIPS).
pub fn h_cpu(ratings: &[f64]) -> Result<f64> {
    if ratings.is_empty() {
        return Err(Error::Parameter("H_cpu of no processors".into()));
    }
    if let Some(v) = ratings.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(Error::Parameter(format!(
            "H_cpu: rating {v} is not finite and > 0"
        )));
    }
    let max = ratings.iter().copied().fold(0.0, f64::max);
    let p = ratings.len() as f64;
    let w: Vec<f64> = ratings.iter().map(|v| v / max).collect();
    let w_bar = w.iter().sum::<f64>() / p;
    Ok((w.iter().map(|wj| (w_bar - wj).powi(2)).sum::<f64>() / p).sqrt())
}

/// Relative change in execution time (DRUM 2004/2005 §4.1): RC = (t_uniform − t_DRUM) / t_uniform.
pub fn relative_change(t_uniform: f64, t_drum: f64) -> Result<f64> {
    if !(t_uniform.is_finite() && t_uniform > 0.0 && t_drum.is_finite() && t_drum >= 0.0) {
        return Err(Error::Parameter(format!(
            "RC needs t_uniform > 0 and t_DRUM >= 0, got {t_uniform} and {t_drum}"
        )));
    }
    Ok((t_uniform - t_drum) / t_uniform)
}

/// Ideal relative change, DRUM 2005 §4.1: RC_ideal = 1 − n / Σ_i h_i, with h_i the ratio of
/// processor i's speed to the slowest one's and n the number of processors running the
/// application.
pub fn rc_ideal(speeds: &[f64]) -> Result<f64> {
    if speeds.is_empty() {
        return Err(Error::Parameter("RC_ideal of no processors".into()));
    }
    if let Some(v) = speeds.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(Error::Parameter(format!(
            "RC_ideal: speed {v} is not finite and > 0"
        )));
    }
    let slowest = speeds.iter().copied().fold(f64::INFINITY, f64::min);
    let sum_h: f64 = speeds.iter().map(|s| s / slowest).sum();
    Ok(1.0 - speeds.len() as f64 / sum_h)
}

/// Ideal relative change, DRUM 2004 §4.1: RC_ideal = (h − 1) f / (s + h f) for s processes on
/// slow nodes, f on fast ones, fast nodes h times faster. Equal to [`rc_ideal`] on s speeds of 1
/// and f of h when s ≥ 1 (with s = 0 the 2005 form measures h against the slowest processor
/// used, giving 0, while this one still measures it against the unused slow ones).
pub fn rc_ideal_2004(s: usize, f: usize, h: f64) -> Result<f64> {
    if !(h.is_finite() && h > 0.0) || s + f == 0 {
        return Err(Error::Parameter(format!(
            "RC_ideal needs h > 0 and at least one process, got h = {h}, s = {s}, f = {f}"
        )));
    }
    let (s, f) = (s as f64, f as f64);
    Ok((h - 1.0) * f / (s + h * f))
}

/// Load-balance efficiency of Watts, Rieffel & Taylor 1998 ("Profitability determination"):
/// eff = U_avg / U_max over the computers' utilisations U_i.
pub fn efficiency(utilizations: &[f64]) -> Result<f64> {
    if utilizations.is_empty() {
        return Err(Error::Parameter("efficiency of no computers".into()));
    }
    if let Some(u) = utilizations.iter().find(|u| !(u.is_finite() && **u >= 0.0)) {
        return Err(Error::Parameter(format!(
            "efficiency: utilisation {u} is not finite and >= 0"
        )));
    }
    let max = utilizations.iter().copied().fold(0.0, f64::max);
    if max == 0.0 {
        return Ok(1.0);
    }
    let avg = utilizations.iter().sum::<f64>() / utilizations.len() as f64;
    Ok(avg / max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }

    #[test]
    fn h_cpu_by_hand() {
        // Ratings 60, 40: W = 1, 2/3; W̄ = 5/6; deviations ±1/6; H = 1/6.
        close(h_cpu(&[60.0, 40.0]).unwrap(), 1.0 / 6.0);
        close(h_cpu(&[5.0, 5.0, 5.0]).unwrap(), 0.0);
        assert!(h_cpu(&[]).is_err());
        assert!(h_cpu(&[1.0, f64::NAN]).is_err());
    }

    #[test]
    fn rc_by_hand() {
        close(relative_change(100.0, 80.0).unwrap(), 0.2);
        assert!(relative_change(0.0, 1.0).is_err());
    }

    #[test]
    fn rc_ideal_forms_agree() {
        // 4 fast (h = 1.5) and 2 slow: 1 − 6/(2 + 6) = 0.25; (0.5·4)/(2 + 6) = 0.25.
        let speeds = [1.5, 1.5, 1.5, 1.5, 1.0, 1.0];
        close(rc_ideal(&speeds).unwrap(), 0.25);
        close(rc_ideal_2004(2, 4, 1.5).unwrap(), 0.25);
        for (s, f, h) in [(1, 1, 1.5), (3, 8, 2.0), (5, 0, 1.5), (1, 4, 3.0)] {
            let mut v = vec![1.0; s];
            v.extend(std::iter::repeat_n(h, f));
            close(rc_ideal(&v).unwrap(), rc_ideal_2004(s, f, h).unwrap());
        }
        // Without slow processes the 2004 form still counts h against the absent slow ones.
        close(rc_ideal(&[3.0; 4]).unwrap(), 0.0);
        close(rc_ideal_2004(0, 4, 3.0).unwrap(), 2.0 / 3.0);
    }

    #[test]
    fn efficiency_by_hand() {
        close(efficiency(&[1.0, 2.0, 3.0]).unwrap(), 2.0 / 3.0);
        close(efficiency(&[0.0, 0.0]).unwrap(), 1.0);
        assert!(efficiency(&[-1.0]).is_err());
    }
}
