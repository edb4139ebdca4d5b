//! The coupe 0.1.0 peer for `cargo xtask bench hsfc`: its Hilbert-curve partitioner on a ZPT1
//! file, timed like `hsfc partition` (median of the partition call alone), equal parts only,
//! 2-D only. Threads come from coupe's global rayon pool (set `RAYON_NUM_THREADS`).
//!
//! `hsfc-coupe POINTS K REPEAT ORDER` prints one JSON object with the same fields as
//! `hsfc partition --json`.

use anyhow::{Context, Result, bail};
use coupe::Partition as _;
use std::time::Instant;

fn main() -> std::process::ExitCode {
    cli_support::main(command)
}

/// The command; [`main`] reports its error without a backtrace.
fn command() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, k, repeat, order] = &args[..] else {
        bail!("usage: hsfc-coupe POINTS K REPEAT ORDER");
    };
    let k: usize = k.parse().context("K")?;
    let repeat: usize = repeat.parse().context("REPEAT")?;
    let order: u32 = order.parse().context("ORDER")?;
    let set = hsfc::io::read_points(path).context("reading the points")?;
    if set.dim != 2 {
        bail!(
            "coupe's Hilbert curve is 2-D only; {path} has dim {}",
            set.dim
        );
    }
    let points: Vec<coupe::Point2D> = set
        .coords
        .chunks_exact(2)
        .map(|p| coupe::Point2D::new(p[0], p[1]))
        .collect();
    let weights: Vec<f64> = set
        .weights
        .clone()
        .unwrap_or_else(|| vec![1.0; points.len()]);
    let mut parts = vec![0usize; points.len()];
    let mut times = Vec::new();
    for _ in 0..repeat.max(1) {
        let t0 = Instant::now();
        coupe::HilbertCurve {
            part_count: k,
            order,
        }
        .partition(&mut parts, (&points, &weights))
        .map_err(|e| anyhow::anyhow!("coupe: {e}"))?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len() / 2;
    let time_s = if sorted.len() % 2 == 1 {
        sorted[m]
    } else {
        0.5 * (sorted[m - 1] + sorted[m])
    };
    let mut w = vec![0.0f64; k];
    for (&p, &x) in parts.iter().zip(&weights) {
        w[p] += x;
    }
    let total: f64 = weights.iter().sum();
    let target = total / k as f64;
    let max_rel_dev = w
        .iter()
        .map(|&x| (x / target - 1.0).abs())
        .fold(0.0, f64::max);
    let j = serde_json::json!({
        "n": points.len(), "k": k, "time_s": time_s, "times_s": times,
        "max_rel_dev": max_rel_dev, "weights": w, "targets": vec![target; k],
    });
    println!("{j}");
    Ok(())
}
