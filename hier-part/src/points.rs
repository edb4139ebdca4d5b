//! Point sets for tests and benchmarks: uniform and corner-graded, as the Zoltan comparison's
//! `gen.py` (`../shared/peers/zoltan/gen.py`) makes them, from a small deterministic generator
//! (the same points on every platform and version; not NumPy's stream).

/// xoshiro256** seeded through SplitMix64: small, fast, reproducible.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
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

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// How points are spread over the unit square or cube.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Uniform in [0, 1)^dim.
    Uniform,
    /// Concentrated at the corner 0: a uniform direction in the positive orthant and a radial
    /// fraction `t = rmin^(1−u)` (u uniform) of the way to the boundary, so there are as many
    /// points per decade of distance, like a mesh refined level by level around a corner
    /// singularity. `gen.py --dist graded` uses `rmin = 1e-6`.
    Graded {
        /// Smallest radial fraction.
        rmin: f64,
    },
}

/// How points are weighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// No weights (all 1).
    Unit,
    /// Uniform in [1, 10).
    Random,
    /// Log-normal with μ = 0, σ = 1.
    LogNormal,
}

/// `n` points of dimension `dim` (interleaved) and their weights (`None` for [`Weights::Unit`]).
pub fn points(
    dist: Dist,
    n: usize,
    dim: usize,
    weights: Weights,
    seed: u64,
) -> (Vec<f64>, Option<Vec<f64>>) {
    let mut rng = Rng::new(seed);
    let mut x = Vec::with_capacity(n * dim);
    for _ in 0..n {
        match dist {
            Dist::Uniform => {
                for _ in 0..dim {
                    x.push(rng.uniform());
                }
            }
            Dist::Graded { rmin } => {
                let mut g = [0.0f64; 3];
                let mut norm = 0.0;
                for gj in g.iter_mut().take(dim) {
                    *gj = rng.normal().abs();
                    norm += *gj * *gj;
                }
                let norm = norm.sqrt().max(f64::MIN_POSITIVE);
                let gmax = g[..dim].iter().fold(0.0f64, |a, &b| a.max(b)) / norm;
                let reach = if gmax > 0.0 { 1.0 / gmax } else { 1.0 };
                let t = rmin.powf(1.0 - rng.uniform());
                for gj in g.iter().take(dim) {
                    x.push((gj / norm * t * reach).clamp(0.0, 1.0));
                }
            }
        }
    }
    let w = match weights {
        Weights::Unit => None,
        Weights::Random => Some((0..n).map(|_| 1.0 + 9.0 * rng.uniform()).collect()),
        Weights::LogNormal => Some((0..n).map(|_| rng.normal().exp()).collect()),
    };
    (x, w)
}

/// `k` part sizes alternating `ratio`, 1, `ratio`, 1, … (`gen.py sizes --kind fastslow`).
pub fn fast_slow(k: usize, ratio: f64) -> Vec<f64> {
    (0..k)
        .map(|i| if i % 2 == 0 { ratio } else { 1.0 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graded_points_crowd_the_corner() {
        let (x, w) = points(Dist::Graded { rmin: 1e-6 }, 20_000, 2, Weights::Unit, 1);
        assert!(w.is_none());
        assert!(x.iter().all(|v| (0.0..=1.0).contains(v)));
        let near = x.chunks(2).filter(|p| p[0].hypot(p[1]) < 1e-3).count();
        // Half the decades of [1e-6, 1] lie below 1e-3.
        assert!((9_000..11_000).contains(&near), "{near}");
    }

    #[test]
    fn uniform_random_weights() {
        let (x, w) = points(Dist::Uniform, 1000, 3, Weights::Random, 7);
        assert_eq!(x.len(), 3000);
        let w = w.unwrap();
        assert!(w.iter().all(|v| (1.0..10.0).contains(v)));
        let (x2, _) = points(Dist::Uniform, 1000, 3, Weights::Random, 7);
        assert_eq!(x, x2);
    }
}
