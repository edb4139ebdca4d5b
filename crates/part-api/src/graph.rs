//! Undirected graphs in compressed sparse row form: a mesh's element neighbours, or the
//! k-nearest-neighbour graph of points. The one CSR type of the workspace: `hier-part`
//! measures partition quality on it, `diffusion` moves objects along it.

use crate::Par;
use rayon::prelude::*;

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
        // Both orientations of every edge, bucketed by their first end (a counting sort):
        // linear in the edges, then each row sorted and its repeats merged.
        let edges: Vec<(u32, u32)> = edges.into_iter().collect();
        let mut xadj = vec![0usize; n + 1];
        for &(a, b) in &edges {
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
                xadj[u as usize + 1] += 1;
            }
        }
        for v in 0..n {
            xadj[v + 1] += xadj[v];
        }
        let mut fill = xadj.clone();
        let mut adjncy = vec![0u32; xadj[n]];
        for (a, b) in edges {
            for (u, v) in [(a, b), (b, a)] {
                adjncy[fill[u as usize]] = v;
                fill[u as usize] += 1;
            }
        }
        // Sort each row and drop its repeats, compacting the rows in place.
        let mut w = 0usize;
        for v in 0..n {
            let (lo, hi) = (xadj[v], xadj[v + 1]);
            adjncy[lo..hi].sort_unstable();
            xadj[v] = w;
            let mut last = None;
            for i in lo..hi {
                let u = adjncy[i];
                if last != Some(u) {
                    adjncy[w] = u;
                    w += 1;
                    last = Some(u);
                }
            }
        }
        xadj[n] = w;
        adjncy.truncate(w);
        Ok(Csr { xadj, adjncy })
    }

    /// The symmetrised `k`-nearest-neighbour graph of points `coords` (interleaved, `dim` = 1,
    /// 2 or 3, finite): `u` and `v` are joined when either is among the other's `k` nearest
    /// (Euclidean distance, ties broken by index). Built with a k-d tree, so graded point
    /// sets cost no more than uniform ones; the same graph for every `par`.
    pub fn knn(coords: &[f64], dim: usize, k: usize, par: Par) -> Result<Csr, GraphError> {
        let n = coords.len() / dim.max(1);
        let lists = Csr::nearest_lists(coords, dim, k, None, par)?;
        Csr::from_nearest(n, k, &lists)
    }

    /// The `k` nearest other points (fewer, `n − 1`, when there are not `k` others) of each
    /// point of `queries` (every point when `None`), as [`Csr::knn`] finds them: one list of
    /// `min(k, n − 1)` indices per query, in the order of `queries`, each ordered by
    /// (distance, index). Ranks that hold the same points can each query their own share and
    /// exchange the lists: [`Csr::from_nearest`] of all of them is [`Csr::knn`]'s graph.
    pub fn nearest_lists(
        coords: &[f64],
        dim: usize,
        k: usize,
        queries: Option<&[u32]>,
        par: Par,
    ) -> Result<Vec<u32>, GraphError> {
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
        if let Some(&q) = queries.and_then(|q| q.iter().find(|&&q| q as usize >= n)) {
            return Err(GraphError::Edge {
                vertex: q as usize,
                neighbour: q.into(),
                reason: "no such point to query",
            });
        }
        let k = k.min(n.saturating_sub(1));
        let tree = KdTree::new(coords, dim);
        // The queries in tree order (a leaf's points one after another, so consecutive
        // queries walk the same nodes), with the slot each answer goes to.
        let todo: Vec<(u32, u32)> = match queries {
            None => (0..n).map(|at| (tree.idx[at], tree.idx[at])).collect(),
            Some(q) => {
                let mut place = vec![u32::MAX; n];
                for (at, &i) in tree.idx.iter().enumerate() {
                    place[i as usize] = at as u32;
                }
                let mut t: Vec<(u32, u32)> = (q.iter().enumerate())
                    .map(|(slot, &i)| (i, slot as u32))
                    .collect();
                t.sort_unstable_by_key(|&(i, _)| place[i as usize]);
                t
            }
        };
        let mut in_tree = vec![0u32; todo.len() * k];
        if k > 0 {
            let query = |s: &mut Scratch, (at, out): (usize, &mut [u32])| {
                tree.nearest_into(todo[at].0 as usize, s, out);
            };
            if par.is_parallel() {
                par.install(|| {
                    (in_tree.par_chunks_mut(k).enumerate())
                        .with_min_len(1024)
                        .for_each_init(Scratch::default, query);
                })?;
            } else {
                let mut s = Scratch::default();
                in_tree
                    .chunks_exact_mut(k)
                    .enumerate()
                    .for_each(|x| query(&mut s, x));
            }
        }
        let mut lists = vec![0u32; todo.len() * k];
        if k > 0 {
            for (list, &(_, slot)) in in_tree.chunks_exact(k).zip(&todo) {
                lists[slot as usize * k..(slot as usize + 1) * k].copy_from_slice(list);
            }
        }
        Ok(lists)
    }

    /// The symmetrised graph of every point's nearest-neighbour list (`lists`: point `i`'s
    /// `min(k, n − 1)` neighbours at `i·min(k, n − 1)`, as [`Csr::nearest_lists`] gives them).
    pub fn from_nearest(n: usize, k: usize, lists: &[u32]) -> Result<Csr, GraphError> {
        let k = k.min(n.saturating_sub(1));
        if lists.len() != n * k {
            return Err(GraphError::Offsets {
                reason: format!(
                    "{} neighbour entries for {n} points of {k} neighbours each",
                    lists.len()
                ),
            });
        }
        let edges = (lists.chunks_exact(k.max(1)).enumerate())
            .flat_map(|(i, l)| l.iter().map(move |&j| (i as u32, j)))
            .take(n * k);
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

    /// The `out.len()` nearest other points of point `q`, ordered by (distance, index), into
    /// `out` (there must be at least that many other points).
    fn nearest_into(&self, q: usize, s: &mut Scratch, out: &mut [u32]) {
        let k = out.len();
        if k == 0 || self.nodes.is_empty() {
            return;
        }
        let q = q as u32;
        let qx = &self.coords[q as usize * self.dim..(q as usize + 1) * self.dim];
        // The best k so far, sorted: the worst of them last.
        let best = &mut s.best;
        best.clear();
        let stack = &mut s.stack;
        stack.clear();
        stack.push((0usize, 0.0f64));
        while let Some((node, bound)) = stack.pop() {
            if best.len() == k && bound > best[k - 1].0.0 {
                continue;
            }
            match self.nodes[node] {
                Node::Leaf { lo, hi } => {
                    let pts = self.sorted[lo * self.dim..hi * self.dim].chunks_exact(self.dim);
                    for (&i, p) in self.idx[lo..hi].iter().zip(pts) {
                        if i == q {
                            continue;
                        }
                        let d2 = qx.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
                        let c = (Ord64(d2), i);
                        if best.len() == k {
                            if c >= best[k - 1] {
                                continue;
                            }
                            best.pop();
                        }
                        let at = best.partition_point(|b| *b < c);
                        best.insert(at, c);
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
        for (o, b) in out.iter_mut().zip(best.iter()) {
            *o = b.1;
        }
    }

    /// [`KdTree::nearest_into`] into a new vector (the tests' brute-force comparison).
    #[cfg(test)]
    fn nearest(&self, q: usize, k: usize) -> Vec<u32> {
        let n = self.idx.len();
        let mut out = vec![0u32; k.min(n.saturating_sub(1))];
        self.nearest_into(q, &mut Scratch::default(), &mut out);
        out
    }
}

/// A k-nearest query's working memory, reused from one query to the next.
#[derive(Default)]
struct Scratch {
    best: Vec<(Ord64, u32)>,
    stack: Vec<(usize, f64)>,
}

/// A finite `f64` with a total order (for the best-k list).
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

    /// Queries split into shares (as ranks split them) give every point's list as the query
    /// of all points does, and the lists put together give `knn`'s graph.
    #[test]
    fn nearest_lists_of_shares_make_the_knn_graph() {
        let n = 700;
        let coords: Vec<f64> = (0..2 * n).map(|i| scrambled(i).powi(3)).collect();
        let k = 6;
        let all = Csr::nearest_lists(&coords, 2, k, None, Par::Seq).unwrap();
        let odd: Vec<u32> = (0..n as u32).rev().filter(|i| i % 3 != 0).collect();
        let rest: Vec<u32> = (0..n as u32).filter(|i| i % 3 == 0).collect();
        let mut put = vec![0u32; n * k];
        for share in [&odd, &rest] {
            let lists = Csr::nearest_lists(&coords, 2, k, Some(share), Par::threads(2)).unwrap();
            for (&q, l) in share.iter().zip(lists.chunks_exact(k)) {
                assert_eq!(l, &all[q as usize * k..(q as usize + 1) * k], "point {q}");
                put[q as usize * k..(q as usize + 1) * k].copy_from_slice(l);
            }
        }
        let g = Csr::from_nearest(n, k, &put).unwrap();
        assert_eq!(g, Csr::knn(&coords, 2, k, Par::Seq).unwrap());
        // Fewer points than k + 1: n − 1 neighbours each.
        let three = [0.0, 0.0, 1.0, 0.0, 0.0, 2.0];
        assert_eq!(
            Csr::nearest_lists(&three, 2, 8, None, Par::Seq).unwrap(),
            [1, 2, 0, 2, 0, 1]
        );
        let e = Csr::nearest_lists(&three, 2, 1, Some(&[3]), Par::Seq).unwrap_err();
        assert_eq!(
            e.to_string(),
            "vertex 3 lists neighbour 3: no such point to query"
        );
        let e = Csr::from_nearest(3, 2, &[1, 2]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "2 neighbour entries for 3 points of 2 neighbours each"
        );
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
