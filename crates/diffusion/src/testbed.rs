//! Processor graphs and capacities for tests and convergence studies: rings, 2-D grids,
//! random connected graphs, and the capacities of Watts, Rieffel & Taylor's testbed. The random
//! ones draw from the caller's source of uniform numbers in [0, 1) (`hsfc::generate`'s, in the
//! tests and the study).
//!
//! ```
//! use diffusion::testbed;
//! use hsfc::generate::{RandomSource, SplitMix64};
//! let g = testbed::grid(4, 3);
//! assert_eq!((g.num_vertices(), g.num_edges()), (12, 17));
//! let mut rng = SplitMix64(1);
//! let c = testbed::paper_capacities(12, &mut || rng.uniform());
//! let spread = c.iter().copied().fold(0.0, f64::max) / c.iter().copied().fold(f64::MAX, f64::min);
//! assert!(spread > 38.0);
//! ```

use crate::ProcGraph;
use part_api::Csr;

/// The relative speeds of the ten computers of the paper's testbed (Figure 2): a spread of 39×.
pub const PAPER_SPEEDS: [f64; 10] = [1.0, 4.4, 6.0, 6.0, 6.0, 6.8, 8.6, 13.0, 38.0, 39.0];

/// The ring of `n ≥ 3` processors (`i` joined to `i + 1 mod n`); a path for `n = 2`.
pub fn ring(n: usize) -> ProcGraph {
    let pairs = (0..n as u32).map(|i| (i, (i + 1) % n as u32));
    ProcGraph::from_pairs(n, pairs.filter(|&(a, b)| a != b)).expect("valid ring")
}

/// The `w × h` grid (4-neighbour), processor `x + w·y`.
pub fn grid(w: usize, h: usize) -> ProcGraph {
    let mut pairs = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let v = (x + w * y) as u32;
            if x + 1 < w {
                pairs.push((v, v + 1));
            }
            if y + 1 < h {
                pairs.push((v, v + w as u32));
            }
        }
    }
    ProcGraph::from_pairs(w * h, pairs).expect("valid grid")
}

/// A random connected graph on `n` processors with mean degree about `degree` (at least 2): a
/// random recursive tree (each processor `v > 0` joined to a uniform earlier one) plus random
/// extra edges, drawn from `uniform` (numbers in [0, 1)).
pub fn random(n: usize, degree: f64, uniform: &mut impl FnMut() -> f64) -> ProcGraph {
    let mut below = |m: usize| ((uniform() * m as f64) as usize).min(m - 1) as u32;
    let mut pairs: Vec<(u32, u32)> = (1..n).map(|v| (v as u32, below(v))).collect();
    let extra = ((degree.max(2.0) - 2.0) * n as f64 / 2.0).round() as usize;
    if n > 1 {
        for _ in 0..extra {
            let (a, b) = (below(n), below(n));
            if a != b {
                pairs.push((a, b));
            }
        }
    }
    ProcGraph::from_pairs(n, pairs).expect("valid random graph")
}

/// A `w × h` grid of objects (object `x + w·y` at the centre of its unit cell,
/// `(x + 0.5, y + 0.5)`) and its 4-neighbour adjacency: a structured mesh's cells.
pub fn object_grid(w: usize, h: usize) -> (Vec<f64>, Csr) {
    let coords = (0..w * h)
        .flat_map(|i| [(i % w) as f64 + 0.5, (i / w) as f64 + 0.5])
        .collect();
    let edges = grid(w, h)
        .edges()
        .iter()
        .map(|&[a, b]| (a, b))
        .collect::<Vec<_>>();
    let graph = Csr::from_edges(w * h, edges).expect("valid grid");
    (coords, graph)
}

/// `n` whole weights uniform in `1..=max`, drawn from `uniform` (numbers in [0, 1)).
pub fn integer_weights(n: usize, max: u32, uniform: &mut impl FnMut() -> f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            1.0 + (uniform() * f64::from(max))
                .floor()
                .min(f64::from(max) - 1.0)
        })
        .collect()
}

/// `n` capacities drawn from the paper's testbed speeds ([`PAPER_SPEEDS`]): each of the ten
/// in turn, in an order shuffled by `uniform` (numbers in [0, 1)), so every run of ten holds
/// the whole 39× spread.
pub fn paper_capacities(n: usize, uniform: &mut impl FnMut() -> f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut block = PAPER_SPEEDS;
        for i in (1..block.len()).rev() {
            let j = ((uniform() * (i + 1) as f64) as usize).min(i);
            block.swap(i, j);
        }
        out.extend(block.iter().take(n - out.len()));
    }
    out
}

/// The uniform numbers of `hsfc::generate`'s `SplitMix64` stream of `seed` (the tests').
#[cfg(test)]
pub(crate) fn stream(seed: u64) -> impl FnMut() -> f64 {
    use hsfc::generate::{RandomSource, SplitMix64};
    let mut rng = SplitMix64(seed);
    move || rng.uniform()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let r = ring(5);
        assert_eq!(r.num_edges(), 5);
        assert_eq!(ring(2).num_edges(), 1);
        let g = random(50, 4.0, &mut stream(3));
        assert_eq!(g.components().1, 1);
        let mean = 2.0 * g.num_edges() as f64 / 50.0;
        assert!((3.0..=4.5).contains(&mean), "{mean}");
        assert_eq!(random(50, 4.0, &mut stream(3)), g);
        let c = paper_capacities(25, &mut stream(9));
        assert_eq!(c.len(), 25);
        let mut first: Vec<f64> = c[..10].to_vec();
        first.sort_by(f64::total_cmp);
        assert_eq!(first, PAPER_SPEEDS);
    }
}
