//! Capability assessment (DRUM 2005 §3.2): a LINPACK-style dense LU benchmark giving the MFLOPS
//! rating b_n, a user-supplied calibration closure, and discovery of this host as a machine
//! description.

use crate::error::{Error, Result};
use crate::machine::{CpuList, Machine};
use crate::monitor::ProcFs;
use nalgebra::{DMatrix, DVector};
use std::time::Instant;

/// Benchmark settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinpackConfig {
    /// Matrix order n.
    pub n: usize,
    /// Timed repeats (the median is reported).
    pub repeats: usize,
    /// Seed of the pseudo-random matrix.
    pub seed: u64,
}

impl Default for LinpackConfig {
    fn default() -> Self {
        LinpackConfig {
            n: 1000,
            repeats: 5,
            seed: 1325,
        }
    }
}

/// A benchmark or calibration result.
#[derive(Debug, Clone, PartialEq)]
pub struct Rating {
    /// Median rate (MFLOPS for [`linpack`], work units per second for [`calibrate`]).
    pub median: f64,
    /// Each repeat's rate, in run order.
    pub runs: Vec<f64>,
    /// Each repeat's time, seconds.
    pub seconds: Vec<f64>,
}

/// LINPACK's operation count for factoring and solving an n × n system:
/// 2/3 n³ + 2 n² (Dongarra et al., LINPACK User's Guide; DESIGN.md §2).
pub fn linpack_flops(n: usize) -> f64 {
    let n = n as f64;
    2.0 / 3.0 * n * n * n + 2.0 * n * n
}

/// A deterministic matrix with entries in [-0.5, 0.5) (64-bit LCG, like LINPACK's `matgen`).
fn matgen(n: usize, seed: u64) -> DMatrix<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    DMatrix::from_fn(n, n, |_, _| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    })
}

/// Largest matrix order of [`linpack`] (4096: three matrices of 128 MiB).
pub const MAX_LINPACK_N: usize = 4096;
/// Most repeats of [`linpack`].
pub const MAX_LINPACK_REPEATS: usize = 1000;

/// LINPACK-style benchmark: LU with partial pivoting of a random n × n matrix and one solve,
/// timed together; MFLOPS = (2/3 n³ + 2 n²) / t / 10⁶, median over the repeats. Each solve is
/// checked with LINPACK's normalised residual ‖Ax − b‖∞ / (n ‖A‖∞ ‖x‖∞ ε), which must stay below
/// 100, so a broken factorisation cannot report a rating.
pub fn linpack(config: &LinpackConfig) -> Result<Rating> {
    if !(2..=MAX_LINPACK_N).contains(&config.n)
        || !(1..=MAX_LINPACK_REPEATS).contains(&config.repeats)
    {
        return Err(Error::Parameter(format!(
            "linpack needs 2 <= n <= {MAX_LINPACK_N} and 1 <= repeats <= {MAX_LINPACK_REPEATS} \
             (the limits), got n = {} and repeats = {}",
            config.n, config.repeats
        )));
    }
    let n = config.n;
    let a = matgen(n, config.seed);
    let x_true = DVector::from_element(n, 1.0);
    let b = &a * &x_true;
    let norm_a = (0..n)
        .map(|i| a.row(i).iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max);
    let flops = linpack_flops(n);
    let mut runs = Vec::with_capacity(config.repeats);
    let mut seconds = Vec::with_capacity(config.repeats);
    for _ in 0..config.repeats {
        let work = a.clone();
        let t0 = Instant::now();
        let lu = work.lu();
        let x = lu.solve(&b);
        let t = t0.elapsed().as_secs_f64();
        let x = x.ok_or_else(|| Error::Benchmark("the benchmark matrix is singular".into()))?;
        let r = &a * &x - &b;
        let resid = r.amax() / (n as f64 * norm_a * x.amax() * f64::EPSILON);
        if !(resid.is_finite() && resid < 100.0) {
            return Err(Error::Benchmark(format!(
                "normalised residual {resid:.3e} is too large"
            )));
        }
        seconds.push(t);
        runs.push(flops / t.max(1e-12) / 1e6);
    }
    Ok(Rating {
        median: part_api::median(&mut runs.clone()),
        runs,
        seconds,
    })
}

/// Calibration with the application's own work (DRUM 2005 §3.2: "user-specified callbacks that
/// could be used to calibrate the machine model, likely using the same software that will be
/// used for the actual computation"). `work` does one unit of real computation and returns how
/// much work it did (in any unit: flops, element updates); the rating is work per second, the
/// median over `repeats` calls. Put it into the model with [`Machine::set_mflops`].
pub fn calibrate<F: FnMut() -> f64>(repeats: usize, mut work: F) -> Result<Rating> {
    if repeats == 0 {
        return Err(Error::Parameter(
            "calibrate needs at least one repeat".into(),
        ));
    }
    let mut runs = Vec::with_capacity(repeats);
    let mut seconds = Vec::with_capacity(repeats);
    for i in 0..repeats {
        let t0 = Instant::now();
        let w = work();
        let t = t0.elapsed().as_secs_f64();
        if !(w.is_finite() && w > 0.0) {
            return Err(Error::Benchmark(format!(
                "the calibration closure reported work {w} on call {i}; it must be > 0"
            )));
        }
        seconds.push(t);
        runs.push(w / t.max(1e-12));
    }
    Ok(Rating {
        median: part_api::median(&mut runs.clone()),
        runs,
        seconds,
    })
}

/// Describes this host as a machine: a `NETWORK` root with the fastest non-loopback link's
/// speed as `bandwidth`, and one computing node (`SINGLE_COMPUTING` on one CPU, else
/// `MULTIPLE_COMPUTING` with `numprocs` = CPUs and `cpus` listing them) carrying `mflops`,
/// `memory` (MB) and the interfaces (an `interfaces="eth0:1000,..."` attribute, kept on round
/// trips). The result is validated like any file.
pub fn discover(fs: &ProcFs, mflops: f64) -> Result<Machine> {
    let cpus: Vec<u32> = fs.cpu_times()?.keys().copied().collect();
    let (mem_total, _) = fs.memory()?;
    let ifaces = fs.interfaces()?;
    let host = fs.hostname().unwrap_or_else(|| "localhost".into());
    let mut speeds = Vec::new();
    for d in &ifaces {
        let s = fs.link_speed(&d.name);
        speeds.push(format!(
            "{}:{}",
            d.name,
            s.map_or("unknown".into(), |v| v.to_string())
        ));
    }
    let bandwidth = ifaces
        .iter()
        .filter_map(|d| fs.link_speed(&d.name))
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))));
    let esc = |s: &str| {
        let mut o = String::new();
        crate::xml::push_attr(&mut o, "v", s);
        o[4..o.len() - 1].to_string()
    };
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<machinemodel>\n");
    xml.push_str("  <node type=\"NETWORK\" nodenum=\"0\" name=\"localnet\" parent=\"-1\"");
    if let Some(b) = bandwidth {
        xml.push_str(&format!(" bandwidth=\"{b}\""));
    }
    xml.push_str(">\n    <lbmethod lbm=\"HSFC\"/>\n  </node>\n");
    let kind = if cpus.len() == 1 {
        "type=\"SINGLE_COMPUTING\"".to_string()
    } else {
        format!("type=\"MULTIPLE_COMPUTING\" numprocs=\"{}\"", cpus.len())
    };
    xml.push_str(&format!(
        "  <node {kind} nodenum=\"1\" name=\"{}\" parent=\"0\" mflops=\"{}\" memory=\"{}\" \
         cpus=\"{}\" interfaces=\"{}\"",
        esc(&host),
        (mflops * 10.0).round() / 10.0,
        (mem_total / 1e6).round(),
        CpuList::from_cpus(cpus.clone()),
        esc(&speeds.join(","))
    ));
    if cpus.len() > 1 {
        xml.push_str(">\n    <lbmethod lbm=\"HSFC\"/>\n  </node>\n");
    } else {
        xml.push_str("/>\n");
    }
    xml.push_str("</machinemodel>\n");
    Machine::parse_str(&xml, "<discovered>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_count_is_linpacks() {
        assert_eq!(linpack_flops(3), 2.0 / 3.0 * 27.0 + 18.0);
        assert_eq!(linpack_flops(1000), 2.0 / 3.0 * 1e9 + 2e6);
    }

    #[test]
    fn small_linpack_runs_and_checks_its_residual() {
        let r = linpack(&LinpackConfig {
            n: 60,
            repeats: 3,
            seed: 7,
        })
        .unwrap();
        assert_eq!(r.runs.len(), 3);
        assert!(r.median > 0.0 && r.median.is_finite());
        assert!(
            linpack(&LinpackConfig {
                n: 1,
                repeats: 1,
                seed: 7
            })
            .is_err()
        );
    }

    #[test]
    fn calibration_divides_work_by_time() {
        let r = calibrate(3, || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            10.0
        })
        .unwrap();
        // 10 units in at least 5 ms: at most 2000 units per second.
        assert!(r.median <= 2000.0 && r.median > 10.0, "{r:?}");
        assert!(
            calibrate(2, || 0.0)
                .unwrap_err()
                .to_string()
                .contains("must be > 0")
        );
        assert!(calibrate(0, || 1.0).is_err());
    }
}
