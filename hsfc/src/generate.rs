//! Seeded test point sets: uniform, or graded towards a corner as in the Zoltan peer's
//! `gen.py` (same distribution; not the same numbers, the generators differ).
//!
//! `hsfc gen` writes these to files; distributed tests generate the same set on every rank and
//! keep a slice of it. The output depends on the arguments only (the same on every machine).
//!
//! ```
//! use hsfc::generate::{Distribution, WeightKind, points};
//! let (coords, weights) = points(100, 3, Distribution::Graded, WeightKind::Random, 7);
//! assert_eq!(coords.len(), 300);
//! assert!(coords.iter().all(|c| (0.0..=1.0).contains(c)));
//! assert!(weights.unwrap().iter().all(|w| (1.0..10.0).contains(w)));
//! ```

/// Where the points lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform in the unit square or cube.
    Uniform,
    /// Graded towards the corner 0: uniform direction, radial fraction `t = 1e-6^(1-u)`.
    Graded,
}

/// Which weights the points get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightKind {
    /// No weights (unit weights).
    Unit,
    /// Weights uniform in `[1, 10)`.
    Random,
}

/// SplitMix64: small, fast, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (-53f64).exp2()
    }
    /// Standard normal (Box–Muller, one value per call).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// `n` points in `dim` dimensions (interleaved) and their weights (`None` for unit weights).
///
/// Graded: each point has a uniform direction in the positive orthant from the corner 0 and a
/// radial fraction `t = 1e-6^(1-u)` (u uniform) of the way to the unit square's or cube's
/// boundary in that direction: the same number of points per decade of distance, density
/// ~1/r^dim, no point closer than 1e-6 (a mesh refined level by level towards a corner).
///
/// # Panics
/// If `dim` is not 1, 2 or 3 (a programming error).
pub fn points(
    n: usize,
    dim: usize,
    dist: Distribution,
    weights: WeightKind,
    seed: u64,
) -> (Vec<f64>, Option<Vec<f64>>) {
    assert!((1..=3).contains(&dim), "generate::points: dim {dim}");
    let mut r = Rng(seed);
    let mut coords = Vec::with_capacity(n * dim);
    let mut g = [0.0f64; 3];
    for _ in 0..n {
        match dist {
            Distribution::Uniform => {
                for _ in 0..dim {
                    coords.push(r.unit());
                }
            }
            Distribution::Graded => {
                let mut norm = 0.0f64;
                for v in g.iter_mut().take(dim) {
                    *v = r.normal().abs();
                    norm += *v * *v;
                }
                let norm = norm.sqrt().max(f64::MIN_POSITIVE);
                let mut top = 0.0f64;
                for v in g.iter_mut().take(dim) {
                    *v /= norm;
                    top = top.max(*v);
                }
                let reach = 1.0 / top.max(f64::MIN_POSITIVE);
                let t = 1e-6f64.powf(1.0 - r.unit());
                for v in g.iter().take(dim) {
                    coords.push((v * t * reach).clamp(0.0, 1.0));
                }
            }
        }
    }
    let w = match weights {
        WeightKind::Unit => None,
        WeightKind::Random => Some((0..n).map(|_| 1.0 + 9.0 * r.unit()).collect()),
    };
    (coords, w)
}
