//! The neighbours of points when the caller has no adjacency: a k-nearest-neighbour graph.

use crate::{Error, ObjectGraph};
use hsfc::Par;
use rayon::prelude::*;

/// The symmetrised `k`-nearest-neighbour graph of the points `coords` (interleaved, `dim` per
/// point, finite): `a` and `b` are joined when either is among the other's `k` nearest
/// (Euclidean distance, ties to the lower index). A sweep along the axis of largest extent:
/// each point scans outwards in that order until the gap along the axis exceeds its `k`-th
/// distance. Exact and the same for every `par`.
pub fn knn_graph(coords: &[f64], dim: usize, k: usize, par: Par) -> Result<ObjectGraph, Error> {
    let n = coords.len().checked_div(dim).unwrap_or(0);
    if n < 2 || k == 0 {
        return ObjectGraph::from_edges(n, []);
    }
    let x = |i: usize, a: usize| coords[i * dim + a];
    let axis = (0..dim)
        .map(|a| {
            let (lo, hi) = (0..n).fold((f64::MAX, f64::MIN), |(lo, hi), i| {
                (lo.min(x(i, a)), hi.max(x(i, a)))
            });
            hi - lo
        })
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .map_or(0, |(a, _)| a);
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        x(a as usize, axis)
            .total_cmp(&x(b as usize, axis))
            .then(a.cmp(&b))
    });
    let mut rank = vec![0usize; n];
    for (r, &i) in order.iter().enumerate() {
        rank[i as usize] = r;
    }
    let d2 = |a: usize, b: usize| (0..dim).map(|c| (x(a, c) - x(b, c)).powi(2)).sum::<f64>();
    let nearest = |i: usize| -> Vec<u32> {
        // The k best (distance², index), ascending.
        let mut best: Vec<(f64, u32)> = Vec::with_capacity(k + 1);
        let (mut left, mut right) = (rank[i], rank[i] + 1);
        loop {
            let gap = |r: usize| (x(order[r] as usize, axis) - x(i, axis)).abs();
            let side = match (left > 0, right < n) {
                (false, false) => break,
                (true, false) => left - 1,
                (false, true) => right,
                (true, true) if gap(left - 1) <= gap(right) => left - 1,
                (true, true) => right,
            };
            let g = gap(side);
            if best.len() == k && g * g > best[k - 1].0 {
                break;
            }
            if side < left {
                left -= 1;
            } else {
                right += 1;
            }
            let j = order[side];
            let cand = (d2(i, j as usize), j);
            let at =
                best.partition_point(|b| b.0.total_cmp(&cand.0).then(b.1.cmp(&cand.1)).is_lt());
            if at < k {
                best.insert(at, cand);
                best.truncate(k);
            }
        }
        best.into_iter().map(|(_, j)| j).collect()
    };
    let lists: Vec<Vec<u32>> = par
        .install(|| (0..n).into_par_iter().map(nearest).collect())
        .map_err(Error::ThreadPool)?;
    let edges = lists
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |&j| (i as u32, j)));
    ObjectGraph::from_edges(n, edges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Adjacency;
    use hsfc::generate::{Distribution, WeightKind, points};

    /// The k nearest by brute force (the obviously correct reference).
    fn brute(coords: &[f64], dim: usize, k: usize) -> ObjectGraph {
        let n = coords.len() / dim;
        let mut edges = Vec::new();
        for i in 0..n {
            let mut d: Vec<(f64, u32)> = (0..n)
                .filter(|&j| j != i)
                .map(|j| {
                    let s = (0..dim)
                        .map(|a| (coords[i * dim + a] - coords[j * dim + a]).powi(2))
                        .sum::<f64>();
                    (s, j as u32)
                })
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            edges.extend(d.iter().take(k).map(|&(_, j)| (i as u32, j)));
        }
        ObjectGraph::from_edges(n, edges).unwrap()
    }

    #[test]
    fn sweep_equals_brute_force() {
        for (dim, dist) in [
            (2, Distribution::Uniform),
            (3, Distribution::Graded),
            (1, Distribution::Uniform),
        ] {
            let (c, _) = points(300, dim, dist, WeightKind::Unit, 5);
            for k in [1, 4, 8] {
                let g = knn_graph(&c, dim, k, Par::Seq).unwrap();
                assert_eq!(g, brute(&c, dim, k), "dim {dim} k {k}");
                assert_eq!(g, knn_graph(&c, dim, k, Par::threads(3)).unwrap());
            }
        }
        // Duplicates and a tiny set.
        let c = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        let g = knn_graph(&c, 2, 1, Par::Seq).unwrap();
        // 0 and 1 coincide; 2 is as far from both and takes the lower index.
        assert_eq!(g.neighbours(0), &[1, 2]);
        assert_eq!(g.neighbours(2), &[0]);
        assert_eq!(knn_graph(&[], 2, 3, Par::Seq).unwrap().num_objects(), 0);
    }
}
