//! Undirected graphs in compressed sparse row form: a mesh's element neighbours, or the
//! k-nearest-neighbour graph of points. The one CSR type of the workspace: `hier-part`
//! measures partition quality on it, `diffusion` moves objects along it.

use crate::Par;
use rayon::prelude::*;
use std::collections::BinaryHeap;

/// Why a graph could not be built. Messages name the vertex or the point.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// CSR offsets are malformed.
    #[error("{reason}")]
    Offsets {
        /// What is wrong with `xadj`.
        reason: String,
    },
    /// A vertex names a neighbour that does not exist, itself, or one twice.
    #[error("vertex {vertex} lists neighbour {neighbour}: {reason}")]
    Edge {
        /// The vertex whose adjacency list is wrong.
        vertex: usize,
        /// The neighbour entry.
        neighbour: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An edge has no reverse edge.
    #[error("edge {u} -> {v} has no reverse edge {v} -> {u} (the graph must be symmetric)")]
    Asymmetric {
        /// Source vertex.
        u: usize,
        /// Target vertex.
        v: usize,
    },
    /// More vertices than a `u32` can name.
    #[error("{count} vertices are more than a u32 can name")]
    TooMany {
        /// How many were given.
        count: usize,
    },
    /// The points of a k-nearest-neighbour graph are not whole points of dimension 1 to 3.
    #[error("{len} coordinates do not make points of dimension {dim} (1, 2 or 3)")]
    Dimension {
        /// The dimension given.
        dim: usize,
        /// Number of coordinate values.
        len: usize,
    },
    /// A coordinate of a k-nearest-neighbour graph's points is NaN or infinite.
    #[error("point {index}: coordinate {axis} is {value}; coordinates must be finite")]
    Coordinate {
        /// Index of the point.
        index: usize,
        /// Axis (0 = x).
        axis: usize,
        /// The value given.
        value: f64,
    },
    /// The caller's thread pool could not be built.
    #[error(transparent)]
    Pool(#[from] crate::PoolError),
}

/// A symmetric graph without self-loops or repeated edges, in compressed sparse row form: the
/// neighbours of vertex `v` are `adjncy[xadj[v]..xadj[v + 1]]`, sorted. Every undirected edge
/// appears in both rows.
///
/// ```
/// use part_api::{Csr, Par};
/// let path = Csr::from_edges(3, [(1, 0), (1, 2), (0, 1)]).unwrap();
/// assert_eq!((path.n(), path.edges()), (3, 2));
/// assert_eq!(path.neighbours(1), &[0, 2]);
/// // Four points on a line, each joined to its nearest other point.
/// let knn = Csr::knn(&[0.0, 1.0, 3.0, 7.0], 1, 1, Par::Seq).unwrap();
/// assert_eq!(knn.neighbours(1), &[0, 2]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    xadj: Vec<usize>,
    adjncy: Vec<u32>,
}

impl Csr {
    /// Checks and takes a CSR graph (rows are sorted here). Errors name the vertex: offsets
    /// that do not start at 0, decrease or do not end at `adjncy.len()`; a neighbour out of
    /// range, the vertex itself or listed twice; an edge without its reverse.
    pub fn new(xadj: Vec<usize>, mut adjncy: Vec<u32>) -> Result<Csr, GraphError> {
        let bad = |reason: String| Err(GraphError::Offsets { reason });
        if xadj.is_empty() {
            return bad("xadj is empty; it needs n + 1 offsets".into());
        }
        if xadj[0] != 0 {
            return bad(format!("xadj[0] is {}, not 0", xadj[0]));
        }
        if let Some(v) = (0..xadj.len() - 1).find(|&v| xadj[v + 1] < xadj[v]) {
            return bad(format!(
                "xadj decreases at vertex {v} ({} then {})",
                xadj[v],
                xadj[v + 1]
            ));
        }
        let last = xadj[xadj.len() - 1];
        if last != adjncy.len() {
            return bad(format!(
                "xadj ends at {last} but adjncy has {} entries",
                adjncy.len()
            ));
        }
        let n = xadj.len() - 1;
        if n > u32::MAX as usize {
            return Err(GraphError::TooMany { count: n });
        }
        for v in 0..n {
            let row = &mut adjncy[xadj[v]..xadj[v + 1]];
            row.sort_unstable();
            for (i, &u) in row.iter().enumerate() {
                let reason = if u as usize >= n {
                    "no such vertex"
                } else if u as usize == v {
                    "a vertex cannot neighbour itself"
                } else if i > 0 && row[i - 1] == u {
                    "listed twice"
                } else {
                    continue;
                };
                return Err(GraphError::Edge {
                    vertex: v,
                    neighbour: u64::from(u),
                    reason,
                });
            }
        }
        let g = Csr { xadj, adjncy };
        for v in 0..n {
            for &u in g.neighbours(v) {
                if g.neighbours(u as usize).binary_search(&(v as u32)).is_err() {
                    return Err(GraphError::Asymmetric {
                        u: v,
                        v: u as usize,
                    });
                }
            }
        }
        Ok(g)
    }

    /// The graph on `n` vertices with the given undirected edges (either orientation; repeats
    /// are merged). An end `>= n` or a self-loop is an error naming the vertex.
    pub fn from_edges(
        n: usize,
        edges: impl IntoIterator<Item = (u32, u32)>,
    ) -> Result<Csr, GraphError> {
        if n > u32::MAX as usize {
            return Err(GraphError::TooMany { count: n });
        }
        let mut both = Vec::new();
        for (a, b) in edges {
            for (u, v) in [(a, b), (b, a)] {
                if u as usize >= n || v as usize >= n || u == v {
                    return Err(GraphError::Edge {
                        vertex: u as usize,
                        neighbour: u64::from(v),
                        reason: if u == v {
                            "a vertex cannot neighbour itself"
                        } else {
                            "no such vertex"
                        },
                    });
                }
                both.push((u, v));
            }
        }
        both.sort_unstable();
        both.dedup();
        let mut xadj = vec![0usize; n + 1];
        for &(u, _) in &both {
            xadj[u as usize + 1] += 1;
        }
        for v in 0..n {
            xadj[v + 1] += xadj[v];
        }
        let adjncy = both.into_iter().map(|(_, v)| v).collect();
        Ok(Csr { xadj, adjncy })
    }

    /// The symmetrised `k`-nearest-neighbour graph of points `coords` (interleaved, `dim` = 1,
    /// 2 or 3, finite): `u` and `v` are joined when either is among the other's `k` nearest
    /// (Euclidean distance, ties broken by index). Built with a k-d tree, so graded point
    /// sets cost no more than uniform ones; the same graph for every `par`.
    pub fn knn(coords: &[f64], dim: usize, k: usize, par: Par) -> Result<Csr, GraphError> {
        if !(1..=3).contains(&dim) || !coords.len().is_multiple_of(dim) {
            return Err(GraphError::Dimension {
                dim,
                len: coords.len(),
            });
        }
        if let Some(i) = coords.iter().position(|c| !c.is_finite()) {
            return Err(GraphError::Coordinate {
                index: i / dim,
                axis: i % dim,
                value: coords[i],
            });
        }
        let n = coords.len() / dim;
        if n > u32::MAX as usize {
            return Err(GraphError::TooMany { count: n });
        }
        let tree = KdTree::new(coords, dim);
        let query = |i: usize| tree.nearest(i, k);
        let lists: Vec<Vec<u32>> = if par.is_parallel() {
            par.install(|| {
                (0..n)
                    .into_par_iter()
                    .with_min_len(1024)
                    .map(query)
                    .collect()
            })?
        } else {
            (0..n).map(query).collect()
        };
        let edges = lists
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.iter().map(move |&j| (i as u32, j)));
        Csr::from_edges(n, edges)
    }

    /// Number of vertices.
    pub fn n(&self) -> usize {
        self.xadj.len() - 1
    }

    /// Number of undirected edges.
    pub fn edges(&self) -> usize {
        self.adjncy.len() / 2
    }

    /// The sorted neighbours of `v`.
    pub fn neighbours(&self, v: usize) -> &[u32] {
        &self.adjncy[self.xadj[v]..self.xadj[v + 1]]
    }

    /// Row offsets (`n + 1` entries).
    pub fn xadj(&self) -> &[usize] {
        &self.xadj
    }

    /// Concatenated sorted rows.
    pub fn adjncy(&self) -> &[u32] {
        &self.adjncy
    }
}

/// A k-d tree over point indices, split at the median of the widest side, leaves of ≤ 16.
struct KdTree<'a> {
    coords: &'a [f64],
    dim: usize,
    idx: Vec<u32>,
    /// Coordinates in tree order (`dim` per entry of `idx`), so a leaf is contiguous.
    sorted: Vec<f64>,
    nodes: Vec<Node>,
}

enum Node {
    Leaf {
        lo: usize,
        hi: usize,
    },
    Split {
        axis: usize,
        value: f64,
        low: usize,
        high: usize,
    },
}

impl<'a> KdTree<'a> {
    fn new(coords: &'a [f64], dim: usize) -> Self {
        let n = coords.len() / dim;
        let mut t = KdTree {
            coords,
            dim,
            idx: (0..n as u32).collect(),
            sorted: Vec::new(),
            nodes: Vec::new(),
        };
        if n > 0 {
            t.build(0, n);
        }
        t.sorted = t
            .idx
            .iter()
            .flat_map(|&i| &coords[i as usize * dim..(i as usize + 1) * dim])
            .copied()
            .collect();
        t
    }

    fn x(&self, i: u32, j: usize) -> f64 {
        self.coords[i as usize * self.dim + j]
    }

    fn build(&mut self, lo: usize, hi: usize) -> usize {
        let me = self.nodes.len();
        self.nodes.push(Node::Leaf { lo, hi });
        if hi - lo <= 16 {
            return me;
        }
        let mut axis = 0;
        let mut best = -1.0;
        for j in 0..self.dim {
            let (mn, mx) = self.idx[lo..hi]
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &i| {
                    (a.min(self.x(i, j)), b.max(self.x(i, j)))
                });
            if mx - mn > best {
                best = mx - mn;
                axis = j;
            }
        }
        let mid = (lo + hi) / 2;
        let (coords, dim) = (self.coords, self.dim);
        let key = |i: &u32| (coords[*i as usize * dim + axis], *i);
        self.idx[lo..hi].select_nth_unstable_by(mid - lo, |a, b| {
            key(a).partial_cmp(&key(b)).expect("coordinates are finite")
        });
        let value = self.x(self.idx[mid], axis);
        let low = self.build(lo, mid);
        let high = self.build(mid, hi);
        self.nodes[me] = Node::Split {
            axis,
            value,
            low,
            high,
        };
        me
    }

    #[cfg(test)]
    fn dist2(&self, a: u32, b: u32) -> f64 {
        (0..self.dim)
            .map(|j| {
                let d = self.x(a, j) - self.x(b, j);
                d * d
            })
            .sum()
    }

    /// The `k` nearest other points of point `q`, ordered by (distance, index).
    fn nearest(&self, q: usize, k: usize) -> Vec<u32> {
        if k == 0 || self.nodes.is_empty() {
            return Vec::new();
        }
        let q = q as u32;
        // Max-heap of (distance², index): the worst of the best k on top.
        let mut heap: BinaryHeap<(Ord64, u32)> = BinaryHeap::with_capacity(k + 1);
        let mut stack = vec![(0usize, 0.0f64)];
        while let Some((node, bound)) = stack.pop() {
            if heap.len() == k && bound > heap.peek().map_or(f64::INFINITY, |t| t.0.0) {
                continue;
            }
            match self.nodes[node] {
                Node::Leaf { lo, hi } => {
                    let qx = &self.coords[q as usize * self.dim..(q as usize + 1) * self.dim];
                    let pts = self.sorted[lo * self.dim..hi * self.dim].chunks_exact(self.dim);
                    for (&i, p) in self.idx[lo..hi].iter().zip(pts) {
                        if i == q {
                            continue;
                        }
                        let d2 = qx.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
                        let c = (Ord64(d2), i);
                        if heap.len() < k {
                            heap.push(c);
                        } else if c < *heap.peek().expect("k > 0") {
                            heap.pop();
                            heap.push(c);
                        }
                    }
                }
                Node::Split {
                    axis,
                    value,
                    low,
                    high,
                } => {
                    let d = self.x(q, axis) - value;
                    let (near, far) = if d < 0.0 { (low, high) } else { (high, low) };
                    stack.push((far, bound.max(d * d)));
                    stack.push((near, bound));
                }
            }
        }
        let mut v = heap.into_sorted_vec();
        v.truncate(k);
        v.into_iter().map(|(_, i)| i).collect()
    }
}

/// A finite `f64` with a total order (for the heap).
#[derive(Clone, Copy, PartialEq)]
struct Ord64(f64);
impl Eq for Ord64 {}
impl PartialOrd for Ord64 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ord64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scrambled sequence in [0, 1) (the golden-ratio sequence of a multiplied index).
    fn scrambled(i: usize) -> f64 {
        ((i as u64).wrapping_mul(0x9e37_79b9) % 1_000_003) as f64 / 1_000_003.0
    }

    #[test]
    fn knn_matches_brute_force() {
        for dim in 1..=3 {
            for n in [0, 1, 2, 10, 300] {
                // Few distinct values: many ties, broken by index.
                let coords: Vec<f64> = (0..n * dim)
                    .map(|i| (7.0 * scrambled(i)).floor() * scrambled(i + 7919).round())
                    .collect();
                let tree = KdTree::new(&coords, dim);
                for k in [1, 3, 8] {
                    for q in 0..n {
                        let mut all: Vec<(f64, u32)> = (0..n as u32)
                            .filter(|&i| i as usize != q)
                            .map(|i| (tree.dist2(q as u32, i), i))
                            .collect();
                        all.sort_by(|a, b| a.partial_cmp(b).unwrap());
                        let want: Vec<u32> = all.iter().take(k).map(|p| p.1).collect();
                        assert_eq!(tree.nearest(q, k), want, "dim {dim} n {n} k {k} q {q}");
                    }
                }
            }
        }
    }

    #[test]
    fn knn_graph_is_symmetric() {
        let coords: Vec<f64> = (0..2 * 500).map(scrambled).collect();
        let g = Csr::knn(&coords, 2, 5, Par::Seq).unwrap();
        // Csr::new checks symmetry, sortedness and repeats.
        let again = Csr::new(g.xadj().to_vec(), g.adjncy().to_vec()).unwrap();
        assert_eq!(g, again);
        assert!((0..500).all(|v| g.neighbours(v).len() >= 5));
        assert_eq!(g, Csr::knn(&coords, 2, 5, Par::threads(3)).unwrap());
        let e = |c: &[f64], d| Csr::knn(c, d, 2, Par::Seq).unwrap_err().to_string();
        assert_eq!(
            e(&[0.0, 1.0, 2.0], 2),
            "3 coordinates do not make points of dimension 2 (1, 2 or 3)"
        );
        assert_eq!(
            e(&[0.0, 1.0, f64::NAN, 2.0], 2),
            "point 1: coordinate 0 is NaN; coordinates must be finite"
        );
    }

    #[test]
    fn bad_graphs_are_named() {
        let e = |x: Vec<usize>, a: Vec<u32>| Csr::new(x, a).unwrap_err().to_string();
        assert_eq!(e(vec![], vec![]), "xadj is empty; it needs n + 1 offsets");
        assert_eq!(e(vec![1, 1], vec![0]), "xadj[0] is 1, not 0");
        assert_eq!(
            e(vec![0, 2, 1], vec![1, 1]),
            "xadj decreases at vertex 1 (2 then 1)"
        );
        assert_eq!(
            e(vec![0, 1, 2], vec![1]),
            "xadj ends at 2 but adjncy has 1 entries"
        );
        assert_eq!(
            e(vec![0, 1, 2], vec![5, 0]),
            "vertex 0 lists neighbour 5: no such vertex"
        );
        assert_eq!(
            e(vec![0, 1, 2], vec![1, 1]),
            "vertex 1 lists neighbour 1: a vertex cannot neighbour itself"
        );
        assert_eq!(
            e(vec![0, 2, 3], vec![1, 1, 0]),
            "vertex 0 lists neighbour 1: listed twice"
        );
        assert_eq!(
            e(vec![0, 1, 1], vec![1]),
            "edge 0 -> 1 has no reverse edge 1 -> 0 (the graph must be symmetric)"
        );
        assert_eq!(
            Csr::from_edges(3, [(0, 1), (2, 2)])
                .unwrap_err()
                .to_string(),
            "vertex 2 lists neighbour 2: a vertex cannot neighbour itself"
        );
        let g = Csr::from_edges(3, [(0, 1), (1, 0), (2, 1)]).unwrap();
        assert_eq!((g.n(), g.edges()), (3, 2));
        assert_eq!(g.neighbours(1), &[0, 2]);
    }
}
