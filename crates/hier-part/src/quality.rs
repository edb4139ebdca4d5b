//! How good a partition is: per-part weight against target, imbalance, and on a graph the
//! edge cut and neighbour parts — for the parts, and for any grouping of the parts (the levels
//! of a machine tree: [`Quality::grouped`]). [`Quality`] prints as a table, [`picture`] draws
//! the parts of a 2-D point set in ASCII.

use crate::Csr;
use crate::bisect::imbalance;
use crate::input::{check_weights, fractions};
use crate::{Error, Par};
use std::collections::HashMap;
use std::fmt;

/// Figures of one part (or group of parts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartStats {
    /// Number of objects.
    pub count: usize,
    /// Weight `W_k` (sum of object weights, or object count).
    pub weight: f64,
    /// Target weight `T_k = W · t_k / Σ t`.
    pub target: f64,
    /// Graph edges with exactly one end in this part (0 without a graph).
    pub cut_edges: u64,
    /// Number of other parts joined to this one by an edge (0 without a graph).
    pub neighbours: usize,
}

/// Quality of a partition into `k` parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Quality {
    /// Per-part figures.
    pub parts: Vec<PartStats>,
    /// Total weight `W`.
    pub total_weight: f64,
    /// max_k W_k / T_k over parts with T_k > 0 (1 when W = 0).
    pub max_ratio: f64,
    /// max_k |W_k − T_k| / T_k over parts with T_k > 0.
    pub max_rel_dev: f64,
    /// max_k |W_k − T_k|.
    pub max_abs_dev: f64,
    /// Undirected edges of the graph, if one was given.
    pub edges: Option<u64>,
    /// Edges whose ends lie in different parts, if a graph was given.
    pub edge_cut: Option<u64>,
    /// Cut edges between each pair of parts `a < b` that share any, sorted.
    pub pairs: Vec<(u32, u32, u64)>,
}

impl Quality {
    /// Measures the partition `parts` (one part id per object, each `< targets.len()`) of
    /// objects with optional `weights` (unit when `None`) against the relative part sizes
    /// `targets`, and, given a graph on the objects, its edge cut.
    pub fn new(
        parts: &[u32],
        weights: Option<&[f64]>,
        targets: &[f64],
        graph: Option<&Csr>,
    ) -> Result<Quality, Error> {
        let t = fractions(targets)?;
        let k = t.len();
        let n = parts.len();
        if let Some(w) = weights {
            check_weights(w, n, "object", Par::Seq)?;
        }
        if let Some(g) = graph
            && g.n() != n
        {
            return Err(Error::LengthMismatch {
                what: "graph",
                got: g.n(),
                expected: n,
                per: "object (vertices)",
            });
        }
        let mut stats = vec![PartStats::default(); k];
        for (index, &p) in parts.iter().enumerate() {
            let s = stats
                .get_mut(p as usize)
                .ok_or(Error::PartOutOfRange { index, part: p, k })?;
            s.count += 1;
            s.weight += weights.map_or(1.0, |w| w[index]);
        }
        let total_weight: f64 = stats.iter().map(|s| s.weight).sum();
        for (s, f) in stats.iter_mut().zip(&t) {
            s.target = f * total_weight;
        }
        let mut pairs = Vec::new();
        let mut edges = None;
        if let Some(g) = graph {
            let mut count: HashMap<(u32, u32), u64> = HashMap::new();
            for u in 0..n {
                let pu = parts[u];
                for &v in g.neighbours(u) {
                    let pv = parts[v as usize];
                    if (u as u32) < v && pu != pv {
                        *count.entry((pu.min(pv), pu.max(pv))).or_default() += 1;
                    }
                }
            }
            pairs = count.into_iter().map(|((a, b), c)| (a, b, c)).collect();
            pairs.sort_unstable();
            edges = Some(g.edges() as u64);
        }
        let mut q = Quality {
            parts: stats,
            total_weight,
            max_ratio: 0.0,
            max_rel_dev: 0.0,
            max_abs_dev: 0.0,
            edges,
            edge_cut: None,
            pairs,
        };
        if graph.is_some() {
            q.edge_cut = Some(q.apply_pairs());
        }
        q.update_imbalance();
        Ok(q)
    }

    /// Number of parts.
    pub fn k(&self) -> usize {
        self.parts.len()
    }

    /// The quality of the coarser partition that puts part `p` in group `group_of[p]`: weights,
    /// targets and counts add up, and only edges between different groups stay cut. Applied
    /// with the part → subtree map of each level of a machine tree, this gives the quality per
    /// level.
    pub fn grouped(&self, group_of: &[u32]) -> Result<Quality, Error> {
        if group_of.len() != self.k() {
            return Err(Error::LengthMismatch {
                what: "group_of",
                got: group_of.len(),
                expected: self.k(),
                per: "part",
            });
        }
        let g = group_of.iter().map(|&x| x as usize + 1).max().unwrap_or(0);
        let mut parts = vec![PartStats::default(); g];
        for (p, s) in self.parts.iter().enumerate() {
            let t = &mut parts[group_of[p] as usize];
            t.count += s.count;
            t.weight += s.weight;
            t.target += s.target;
        }
        let mut count: HashMap<(u32, u32), u64> = HashMap::new();
        for &(a, b, c) in &self.pairs {
            let (ga, gb) = (group_of[a as usize], group_of[b as usize]);
            if ga != gb {
                *count.entry((ga.min(gb), ga.max(gb))).or_default() += c;
            }
        }
        let mut pairs: Vec<(u32, u32, u64)> =
            count.into_iter().map(|((a, b), c)| (a, b, c)).collect();
        pairs.sort_unstable();
        let mut q = Quality {
            parts,
            total_weight: self.total_weight,
            max_ratio: 0.0,
            max_rel_dev: 0.0,
            max_abs_dev: 0.0,
            edges: self.edges,
            edge_cut: None,
            pairs,
        };
        if self.edges.is_some() {
            q.edge_cut = Some(q.apply_pairs());
        }
        q.update_imbalance();
        Ok(q)
    }

    /// Fills per-part cut edges and neighbour counts from `pairs`; returns the edge cut.
    fn apply_pairs(&mut self) -> u64 {
        let mut cut = 0;
        for &(a, b, c) in &self.pairs {
            cut += c;
            for p in [a, b] {
                let s = &mut self.parts[p as usize];
                s.cut_edges += c;
                s.neighbours += 1;
            }
        }
        cut
    }

    fn update_imbalance(&mut self) {
        let w: Vec<f64> = self.parts.iter().map(|s| s.weight).collect();
        let t: Vec<f64> = self.parts.iter().map(|s| s.target).collect();
        (self.max_ratio, self.max_rel_dev, self.max_abs_dev) = imbalance(&w, &t);
    }
}

/// A table: one line per part (objects, weight, target, W/T, cut edges, neighbour parts) and a
/// summary line.
impl fmt::Display for Quality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let graph = self.edges.is_some();
        write!(
            f,
            "{:>5} {:>9} {:>14} {:>14} {:>8}",
            "part", "objects", "weight", "target", "W/T"
        )?;
        if graph {
            write!(f, " {:>7} {:>5}", "cut", "nbrs")?;
        }
        writeln!(f)?;
        for (p, s) in self.parts.iter().enumerate() {
            let ratio = if s.target > 0.0 {
                format!("{:.4}", s.weight / s.target)
            } else if s.weight > 0.0 {
                "inf".into()
            } else {
                "-".into()
            };
            write!(
                f,
                "{p:>5} {:>9} {:>14.3} {:>14.3} {ratio:>8}",
                s.count, s.weight, s.target
            )?;
            if graph {
                write!(f, " {:>7} {:>5}", s.cut_edges, s.neighbours)?;
            }
            writeln!(f)?;
        }
        write!(
            f,
            "k = {}, W = {:.3}, max W/T = {:.4}, max |W-T|/T = {:.2e}",
            self.k(),
            self.total_weight,
            self.max_ratio,
            self.max_rel_dev
        )?;
        if let (Some(e), Some(c)) = (self.edges, self.edge_cut) {
            let pct = if e > 0 {
                100.0 * c as f64 / e as f64
            } else {
                0.0
            };
            write!(f, ", edge cut = {c} of {e} ({pct:.2}%)")?;
        }
        writeln!(f)
    }
}

/// The character drawn for part `p`: `0-9`, `a-z`, `A-Z`, then again from `0`.
pub fn part_char(p: u32) -> char {
    const C: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    C[p as usize % C.len()] as char
}

/// An ASCII picture of the parts of a point set: `width × height` cells over the bounding box
/// of the first two coordinates (y up; 1-D points on one row, 3-D points seen along z), each
/// cell showing the part holding most of its points ([`part_char`]; the lowest part on a tie)
/// and `.` where there is none. `coords`, `dim` and `parts` are as for the partitioners.
///
/// # Panics
/// If `dim` is 0 or `parts.len() != coords.len() / dim`.
pub fn picture(coords: &[f64], dim: usize, parts: &[u32], width: usize, height: usize) -> String {
    assert!(
        dim > 0 && coords.len() / dim == parts.len(),
        "picture: one part per point"
    );
    let (w, h) = (width.max(1), if dim == 1 { 1 } else { height.max(1) });
    let n = parts.len();
    let xy = |i: usize| {
        let x = coords[i * dim];
        (x, if dim > 1 { coords[i * dim + 1] } else { 0.0 })
    };
    let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for i in 0..n {
        let (x, y) = xy(i);
        lo = [lo[0].min(x), lo[1].min(y)];
        hi = [hi[0].max(x), hi[1].max(y)];
    }
    let cell = |v: f64, j: usize, m: usize| {
        let ext = hi[j] - lo[j];
        if ext > 0.0 {
            (((v - lo[j]) / ext * m as f64) as usize).min(m - 1)
        } else {
            0
        }
    };
    let mut tally: Vec<HashMap<u32, usize>> = vec![HashMap::new(); w * h];
    for (i, &p) in parts.iter().enumerate() {
        let (x, y) = xy(i);
        let (cx, cy) = (cell(x, 0, w), cell(y, 1, h));
        *tally[(h - 1 - cy) * w + cx].entry(p).or_default() += 1;
    }
    let mut s = String::with_capacity((w + 1) * h + 80);
    if n > 0 {
        s.push_str(&format!(
            "x in [{:.4}, {:.4}], y in [{:.4}, {:.4}]\n",
            lo[0], hi[0], lo[1], hi[1]
        ));
    }
    for row in tally.chunks(w) {
        for t in row {
            let best = t
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(&p, _)| part_char(p));
            s.push(best.unwrap_or('.'));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_graph() {
        // 0-1-2-3-4-5 in parts 0 0 1 1 2 2: two cut edges.
        let g = Csr::from_edges(6, (0..5).map(|i| (i, i + 1))).unwrap();
        let q = Quality::new(&[0, 0, 1, 1, 2, 2], None, &[1.0, 1.0, 2.0], Some(&g)).unwrap();
        assert_eq!(q.edge_cut, Some(2));
        assert_eq!(q.edges, Some(5));
        assert_eq!(q.pairs, vec![(0, 1, 1), (1, 2, 1)]);
        let nb: Vec<usize> = q.parts.iter().map(|s| s.neighbours).collect();
        assert_eq!(nb, vec![1, 2, 1]);
        assert_eq!(q.parts[2].target, 3.0);
        assert_eq!(q.max_ratio, 2.0 / 1.5);
        // Groups {0, 1} and {2}: one cut edge left.
        let g2 = q.grouped(&[0, 0, 1]).unwrap();
        assert_eq!(g2.edge_cut, Some(1));
        assert_eq!(g2.parts[0].count, 4);
        assert_eq!(g2.parts[0].target, 3.0);
        assert_eq!(g2.max_rel_dev, 1.0 / 3.0);
        // One group: no cut at all.
        assert_eq!(q.grouped(&[0, 0, 0]).unwrap().edge_cut, Some(0));
    }

    #[test]
    fn bad_input() {
        let e = |r: Result<Quality, Error>| r.unwrap_err().to_string();
        assert_eq!(
            e(Quality::new(&[0, 3], None, &[1.0, 1.0], None)),
            "object 1 is in part 3, but there are only 2 parts"
        );
        assert_eq!(
            e(Quality::new(&[0, 1], Some(&[1.0]), &[1.0, 1.0], None)),
            "weights has 1 entries, expected 2 (one per object)"
        );
        assert_eq!(
            e(Quality::new(&[0, 1], Some(&[1.0, -1.0]), &[1.0, 1.0], None)),
            "weight of object 1 is -1; weights must be finite and non-negative"
        );
        let g = Csr::from_edges(3, [(0, 1)]).unwrap();
        assert_eq!(
            e(Quality::new(&[0, 1], None, &[1.0, 1.0], Some(&g))),
            "graph has 3 entries, expected 2 (one per object (vertices))"
        );
        let q = Quality::new(&[0, 1], None, &[1.0, 1.0], None).unwrap();
        assert_eq!(
            e(q.grouped(&[0])),
            "group_of has 1 entries, expected 2 (one per part)"
        );
    }

    #[test]
    fn picture_of_halves() {
        let coords = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let s = picture(&coords, 2, &[0, 1, 0, 1], 4, 2);
        assert_eq!(
            s,
            "x in [0.0000, 1.0000], y in [0.0000, 1.0000]\n0..1\n0..1\n"
        );
    }
}
