//! The processor graph (ranks as vertices, an edge where two ranks' objects touch) and the
//! object adjacency it is built from.

use crate::Error;
use part_api::Csr;

/// The neighbours of each object: what "touch" means for the processor graph and locality
/// for task selection. Listed pairs are taken as undirected for the processor graph (the parts
/// of both ends become neighbours); task selection follows the lists as given, so a symmetric
/// structure (every `b` in `neighbours(a)` has `a` in `neighbours(b)`) gives the best
/// locality. Neighbours `>= num_objects()` are ignored. Implemented by [`part_api::Csr`] (a
/// mesh's neighbours from an edge list, or the k-nearest-neighbour graph of points); a caller
/// with its own structure implements it without copying.
pub trait Adjacency: Sync {
    /// Number of objects.
    fn num_objects(&self) -> usize;
    /// The neighbours of object `i` (indices `< num_objects()`).
    fn neighbours(&self, i: usize) -> &[u32];
}

impl Adjacency for Csr {
    fn num_objects(&self) -> usize {
        self.n()
    }

    fn neighbours(&self, i: usize) -> &[u32] {
        Csr::neighbours(self, i)
    }
}

fn check_edge(what: &'static str, index: usize, a: u32, b: u32, n: usize) -> Result<(), Error> {
    let reason = if a as usize >= n || b as usize >= n {
        "names a vertex that does not exist"
    } else if a == b {
        "joins a vertex to itself"
    } else {
        return Ok(());
    };
    Err(Error::InvalidEdge {
        what,
        index,
        u: a.into(),
        v: b.into(),
        n,
        reason,
    })
}

/// The processor graph: `n` processors (ranks, parts) and the undirected edges along which
/// load may move. Edges are kept sorted as `[u, v]` with `u < v`; a transfer along edge `e`
/// is positive from `edges()[e][0]` to `edges()[e][1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcGraph {
    edges: Vec<[u32; 2]>,
    xadj: Vec<usize>,
    /// (neighbour, edge id), sorted by neighbour within each row.
    adj: Vec<(u32, u32)>,
}

impl ProcGraph {
    /// The graph on `n` processors with the given pairs (either orientation; repeats merged).
    /// An end `>= n` or a pair `(r, r)` is an error naming the pair.
    pub fn from_pairs(
        n: usize,
        pairs: impl IntoIterator<Item = (u32, u32)>,
    ) -> Result<ProcGraph, Error> {
        if n > u32::MAX as usize {
            return Err(Error::TooMany {
                what: "processors",
                count: n,
            });
        }
        let mut edges = Vec::new();
        for (index, (a, b)) in pairs.into_iter().enumerate() {
            check_edge("processor", index, a, b, n)?;
            edges.push([a.min(b), a.max(b)]);
        }
        Ok(ProcGraph::from_edge_list(n, edges))
    }

    /// The processor graph of a partition: processors `p != q` (both `< k`) are joined when an
    /// object of part `p` has a neighbour of part `q` in `objects`. Objects whose part is
    /// `>= k` (not assigned) join nothing. `parts` has one entry per object.
    pub fn from_objects(
        k: usize,
        parts: &[u32],
        objects: &dyn Adjacency,
    ) -> Result<ProcGraph, Error> {
        if parts.len() != objects.num_objects() {
            return Err(Error::LengthMismatch {
                what: "parts",
                expected: objects.num_objects(),
                got: parts.len(),
            });
        }
        let mut pairs = Vec::new();
        for (a, &p) in parts.iter().enumerate() {
            for &b in objects.neighbours(a) {
                if let Some(&q) = parts.get(b as usize)
                    && p < q
                    && (q as usize) < k
                {
                    pairs.push((p, q));
                }
            }
        }
        ProcGraph::from_pairs(k, pairs)
    }

    /// The graph on `n` vertices with edges `[u, v]`, `u < v < n` (repeats merged).
    pub(crate) fn from_edge_list(n: usize, mut edges: Vec<[u32; 2]>) -> ProcGraph {
        edges.sort_unstable();
        edges.dedup();
        let mut xadj = vec![0usize; n + 1];
        for e in &edges {
            xadj[e[0] as usize + 1] += 1;
            xadj[e[1] as usize + 1] += 1;
        }
        for v in 0..n {
            xadj[v + 1] += xadj[v];
        }
        let mut fill = xadj.clone();
        let mut adj = vec![(0u32, 0u32); 2 * edges.len()];
        for (id, e) in edges.iter().enumerate() {
            for (a, b) in [(e[0], e[1]), (e[1], e[0])] {
                adj[fill[a as usize]] = (b, id as u32);
                fill[a as usize] += 1;
            }
        }
        for v in 0..n {
            adj[xadj[v]..xadj[v + 1]].sort_unstable();
        }
        ProcGraph { edges, xadj, adj }
    }

    /// Number of processors.
    pub fn num_vertices(&self) -> usize {
        self.xadj.len() - 1
    }

    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }

    /// The edges, `[u, v]` with `u < v`, sorted.
    pub fn edges(&self) -> &[[u32; 2]] {
        &self.edges
    }

    /// The neighbours of `v` with the id of the edge to each, by neighbour.
    pub fn neighbours(&self, v: usize) -> &[(u32, u32)] {
        &self.adj[self.xadj[v]..self.xadj[v + 1]]
    }

    /// The id of the edge between `u` and `v`, if there is one.
    pub fn edge(&self, u: usize, v: usize) -> Option<usize> {
        let row = self.neighbours(u);
        row.binary_search_by_key(&(v as u32), |&(w, _)| w)
            .ok()
            .map(|i| row[i].1 as usize)
    }

    /// The connected components: each vertex's component number, components numbered in
    /// order of their lowest vertex, and the number of components.
    pub fn components(&self) -> (Vec<u32>, usize) {
        let n = self.num_vertices();
        let mut comp = vec![u32::MAX; n];
        let mut count = 0u32;
        let mut stack = Vec::new();
        for s in 0..n {
            if comp[s] != u32::MAX {
                continue;
            }
            comp[s] = count;
            stack.push(s);
            while let Some(v) = stack.pop() {
                for &(w, _) in self.neighbours(v) {
                    if comp[w as usize] == u32::MAX {
                        comp[w as usize] = count;
                        stack.push(w as usize);
                    }
                }
            }
            count += 1;
        }
        (comp, count as usize)
    }

    /// This graph made connected: each component after the first (in order of lowest vertex)
    /// is joined to the union of the earlier ones by one new edge `(a, b)`, `a` in the
    /// component and `b` before it, the pair of least `cost(a, b)` (ties: the smallest
    /// `(a, b)`). Returns the graph and the number of edges added (0: it was connected).
    /// Costs `O(n²)` evaluations of `cost` in the worst case; only disconnected graphs pay.
    pub fn bridged(&self, cost: impl Fn(u32, u32) -> f64) -> (ProcGraph, usize) {
        let (comp, count) = self.components();
        if count <= 1 {
            return (self.clone(), 0);
        }
        let n = self.num_vertices();
        let mut edges = self.edges.clone();
        for c in 1..count as u32 {
            let mut best: Option<(f64, u32, u32)> = None;
            for a in (0..n as u32).filter(|&a| comp[a as usize] == c) {
                for b in (0..n as u32).filter(|&b| comp[b as usize] < c) {
                    let x = cost(a, b);
                    if best.is_none_or(|(y, _, _)| x.total_cmp(&y).is_lt()) {
                        best = Some((x, a, b));
                    }
                }
            }
            let (_, a, b) = best.expect("components before c are not empty");
            edges.push([a.min(b), a.max(b)]);
        }
        (ProcGraph::from_edge_list(n, edges), count - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_merged_and_sorted() {
        let g = ProcGraph::from_pairs(4, [(1, 0), (0, 1), (3, 2), (2, 1)]).unwrap();
        assert_eq!(g.edges(), &[[0, 1], [1, 2], [2, 3]]);
        assert_eq!(g.neighbours(1), &[(0, 0), (2, 1)]);
        assert_eq!(g.edge(3, 2), Some(2));
        assert_eq!(g.edge(0, 3), None);
        assert!(matches!(
            ProcGraph::from_pairs(3, [(0, 3)]),
            Err(Error::InvalidEdge { index: 0, .. })
        ));
        assert!(matches!(
            ProcGraph::from_pairs(3, [(0, 1), (2, 2)]),
            Err(Error::InvalidEdge { index: 1, .. })
        ));
    }

    #[test]
    fn processor_graph_of_a_partition() {
        // A path of 6 objects, parts 0 0 1 1 2 0: part 2 touches 1 and 0.
        let objects = Csr::from_edges(6, (0..5).map(|i| (i, i + 1))).unwrap();
        let g = ProcGraph::from_objects(3, &[0, 0, 1, 1, 2, 0], &objects).unwrap();
        assert_eq!(g.edges(), &[[0, 1], [0, 2], [1, 2]]);
        // Unassigned objects (part >= k) join nothing.
        let g = ProcGraph::from_objects(3, &[0, 0, 9, 1, 1, 2], &objects).unwrap();
        assert_eq!(g.edges(), &[[1, 2]]);
    }

    #[test]
    fn bridges_join_components_by_least_cost() {
        let g = ProcGraph::from_pairs(5, [(0, 1), (3, 4)]).unwrap();
        let (comp, count) = g.components();
        assert_eq!((comp, count), (vec![0, 0, 1, 2, 2], 3));
        let pos: [f64; 5] = [0.0, 1.0, 5.0, 2.0, 3.0];
        let (b, added) = g.bridged(|a, b| (pos[a as usize] - pos[b as usize]).abs());
        assert_eq!(added, 2);
        // 2 joins 1 (distance 4 < 5); {3, 4} then joins 1 through 3 (distance 1).
        assert_eq!(b.edges(), &[[0, 1], [1, 2], [1, 3], [3, 4]]);
        assert_eq!(b.components().1, 1);
    }
}
