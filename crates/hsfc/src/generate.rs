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
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Uniform in the unit square or cube.
    Uniform,
    /// Graded towards the corner 0 with `rmin = 1e-6` ([`Distribution::Corner`]; `gen.py
    /// --dist graded`).
    Graded,
    /// Graded towards the corner 0: a uniform direction in the positive orthant and a radial
    /// fraction `t = rmin^(1−u)` (u uniform) of the way to the boundary, so there are as many
    /// points per decade of distance, like a mesh refined level by level around a corner
    /// singularity.
    Corner {
        /// Smallest radial fraction.
        rmin: f64,
    },
}

/// Which weights the points get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightKind {
    /// No weights (unit weights).
    Unit,
    /// Weights uniform in `[1, 10)`.
    Random,
    /// Log-normal weights, μ = 0, σ = 1.
    LogNormal,
}

/// A stream of random bits, and the two variates the generator draws from it.
pub trait RandomSource {
    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64;

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (-53f64).exp2()
    }

    /// Standard normal (Box–Muller, one value per call).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// SplitMix64: small, fast, and the same on every machine (the stream of [`points`], so of
/// `hsfc gen`'s files).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl RandomSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// xoshiro256** seeded through SplitMix64 (the stream of `hier-part`'s tests, benchmarks and
/// snapshots).
#[derive(Debug, Clone)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Xoshiro256 {
        let mut z = SplitMix64(seed);
        Xoshiro256 {
            s: [z.next_u64(), z.next_u64(), z.next_u64(), z.next_u64()],
        }
    }
}

impl RandomSource for Xoshiro256 {
    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let r = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }
}

/// `k` part sizes alternating `ratio`, 1, `ratio`, 1, … (`gen.py sizes --kind fastslow`).
pub fn fast_slow(k: usize, ratio: f64) -> Vec<f64> {
    (0..k)
        .map(|i| if i % 2 == 0 { ratio } else { 1.0 })
        .collect()
}

/// `n` points in `dim` dimensions (interleaved) and their weights (`None` for unit weights),
/// from the [`SplitMix64`] stream of `seed` (see [`points_with`]).
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
    points_with(&mut SplitMix64(seed), n, dim, dist, weights)
}

/// `n` points in `dim` dimensions (interleaved) and their weights (`None` for unit weights),
/// drawn from `rng`: the one generator of the workspace's test point sets.
///
/// Graded: each point has a uniform direction in the positive orthant from the corner 0 and a
/// radial fraction `t = rmin^(1-u)` (u uniform) of the way to the unit square's or cube's
/// boundary in that direction: the same number of points per decade of distance, density
/// ~1/r^dim, no point closer than `rmin` (a mesh refined level by level towards a corner).
///
/// # Panics
/// If `dim` is not 1, 2 or 3 (a programming error).
pub fn points_with(
    rng: &mut impl RandomSource,
    n: usize,
    dim: usize,
    dist: Distribution,
    weights: WeightKind,
) -> (Vec<f64>, Option<Vec<f64>>) {
    assert!((1..=3).contains(&dim), "generate::points: dim {dim}");
    let mut coords = Vec::with_capacity(n * dim);
    let mut g = [0.0f64; 3];
    for _ in 0..n {
        let rmin = match dist {
            Distribution::Uniform => {
                for _ in 0..dim {
                    coords.push(rng.uniform());
                }
                continue;
            }
            Distribution::Graded => 1e-6,
            Distribution::Corner { rmin } => rmin,
        };
        let mut norm = 0.0f64;
        for v in g.iter_mut().take(dim) {
            *v = rng.normal().abs();
            norm += *v * *v;
        }
        let norm = norm.sqrt().max(f64::MIN_POSITIVE);
        let mut top = 0.0f64;
        for v in g.iter_mut().take(dim) {
            *v /= norm;
            top = top.max(*v);
        }
        let reach = 1.0 / top.max(f64::MIN_POSITIVE);
        let t = rmin.powf(1.0 - rng.uniform());
        for v in g.iter().take(dim) {
            coords.push((v * t * reach).clamp(0.0, 1.0));
        }
    }
    let w = match weights {
        WeightKind::Unit => None,
        WeightKind::Random => Some((0..n).map(|_| 1.0 + 9.0 * rng.uniform()).collect()),
        WeightKind::LogNormal => Some((0..n).map(|_| rng.normal().exp()).collect()),
    };
    (coords, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graded_points_crowd_the_corner() {
        let c = Distribution::Corner { rmin: 1e-6 };
        let (x, w) = points_with(&mut Xoshiro256::new(1), 20_000, 2, c, WeightKind::Unit);
        assert!(w.is_none());
        assert!(x.iter().all(|v| (0.0..=1.0).contains(v)));
        let near = x.chunks(2).filter(|p| p[0].hypot(p[1]) < 1e-3).count();
        // Half the decades of [1e-6, 1] lie below 1e-3.
        assert!((9_000..11_000).contains(&near), "{near}");
        // `Graded` is `Corner` at 1e-6.
        let graded = points_with(
            &mut Xoshiro256::new(1),
            20_000,
            2,
            Distribution::Graded,
            WeightKind::Unit,
        );
        assert_eq!(graded.0, x);
    }

    #[test]
    fn the_same_seed_gives_the_same_points() {
        let (x, w) = points(1000, 3, Distribution::Uniform, WeightKind::Random, 7);
        assert_eq!(x.len(), 3000);
        assert!(w.as_ref().unwrap().iter().all(|v| (1.0..10.0).contains(v)));
        assert_eq!(
            (x, w),
            points(1000, 3, Distribution::Uniform, WeightKind::Random, 7)
        );
    }
}
