//! Human-readable renderings of a [`Partition`]: a per-part table and a small ASCII map.

use crate::Partition;
use std::fmt::Write;

/// One character per part: `0-9`, `a-z`, `A-Z`, then `#`.
pub fn part_char(p: u32) -> char {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    DIGITS.get(p as usize).map_or('#', |&c| c as char)
}

/// A per-part table: points, weight, target, `W/T − 1`, and a bar of the weight.
///
/// ```text
/// part   points      weight      target    W/T-1
///    0      100       100.0       100.0   +0.0e0  ##########
/// ```
pub fn table(p: &Partition) -> String {
    let mut s = String::new();
    let wmax = p.part_weights().iter().copied().fold(0.0, f64::max);
    let _ = writeln!(
        s,
        "part {:>9} {:>14} {:>14} {:>10}",
        "points", "weight", "target", "W/T-1"
    );
    for (k, ((&n, &w), &t)) in p
        .part_counts()
        .iter()
        .zip(p.part_weights())
        .zip(p.targets())
        .enumerate()
    {
        let dev = if t > 0.0 {
            format!("{:+.2e}", w / t - 1.0)
        } else {
            "-".to_string()
        };
        let bar = if wmax > 0.0 {
            (20.0 * w / wmax).round() as usize
        } else {
            0
        };
        let _ = writeln!(
            s,
            "{k:>4} {n:>9} {w:>14.6} {t:>14.6} {dev:>10}  {}",
            "#".repeat(bar)
        );
    }
    let _ = writeln!(
        s,
        "total {} points, weight {:.6}; max |W/T-1| = {:.3e}; max |W-T| = {:.6} \
         (limit: the heaviest group of points sharing a key; heaviest point {:.6})",
        p.num_points(),
        p.total_weight(),
        p.max_rel_dev(),
        p.max_abs_dev(),
        p.max_weight()
    );
    s
}

/// The parts over the bounding box as a `width × height` character map (2-D; in 3-D the
/// slice through the middle of the z range), one [`part_char`] per cell centre, north up.
pub fn ascii_map(p: &Partition, width: usize, height: usize) -> String {
    let b = p.bbox();
    let mut s = String::new();
    let mid_z = 0.5 * (b.lo[2] + b.hi[2]);
    for row in (0..height).rev() {
        for col in 0..width {
            let x = b.lo[0] + (b.hi[0] - b.lo[0]) * (col as f64 + 0.5) / width as f64;
            let y = b.lo[1] + (b.hi[1] - b.lo[1]) * (row as f64 + 0.5) / height as f64;
            let part = if p.dim() == 2 {
                p.point_assign(&[x, y])
            } else {
                p.point_assign(&[x, y, mid_z])
            };
            s.push(part.map_or('?', part_char));
        }
        s.push('\n');
    }
    s
}
