//! The hierarchical balancing method for heterogeneous capacities.

use super::{Flows, Problem, round_div};
use crate::Error;
use crate::ProcGraph;

/// The hierarchical balancing method (Watts, Rieffel & Taylor 1998, "Load transfer
/// calculation"): the processors are divided into two halves, the load of each half is
/// summed, and the transfer from the first to the second is the one that makes the load per
/// capacity of the two halves equal,
///
/// `ΔL_{1,2} = (C_2 L_1 − C_1 L_2) / (C_1 + C_2)`,
///
/// with `L_1, L_2` the halves' loads and `C_1, C_2` their total capacities; the halves are then
/// divided and balanced independently, down to single processors.
///
/// On a general graph the halves are connected (a breadth-first prefix from a
/// pseudo-peripheral vertex, with any piece of the rest that the prefix cuts off joined to the
/// prefix), and `ΔL_{1,2}` is spread evenly over the edges between the halves. The loads
/// inside a half change by what crosses, and the half's own recursion redistributes it, so a
/// processor may pass on more than it holds: the transfers are a plan that task selection
/// meets over rounds. `ΔL` is rounded to whole units, so each half's total stays `≥ 0` and
/// every final load is `≥ 0`, within one unit per level of its balanced share.
/// One pass; `history` has one entry per level (`⌈log2 P⌉` levels for a path or a grid).
pub(super) fn run(p: &Problem) -> Result<Flows, Error> {
    let g = p.graph;
    let n = g.num_vertices();
    let units = p.caps.units();
    let mut virt: Vec<i128> = p.loads.iter().map(|&l| i128::from(l)).collect();
    let mut flows = vec![0i128; g.num_edges()];
    let mut sets = p.members();
    let mut scratch = Scratch {
        tag: vec![0; n],
        seen: vec![0; n],
        stamp: 0,
    };
    let mut history = vec![p.eff(|v| virt[v] as f64)];
    let mut splits = 0;
    loop {
        sets.retain(|s| s.len() >= 2);
        if sets.is_empty() {
            break;
        }
        let mut next = Vec::with_capacity(2 * sets.len());
        for set in &sets {
            let (s1, s2) = scratch.halves(g, set);
            let sum = |s: &[u32], f: &dyn Fn(usize) -> i128| s.iter().map(|&v| f(v as usize)).sum();
            let (l1, l2): (i128, i128) = (sum(&s1, &|v| virt[v]), sum(&s2, &|v| virt[v]));
            let c1: i128 = sum(&s1, &|v| i128::from(units[v]));
            let c2: i128 = sum(&s2, &|v| i128::from(units[v]));
            let delta = round_div(c2 * l1 - c1 * l2, c1 + c2);
            scratch.spread(g, &s1, &s2, delta, &mut virt, &mut flows);
            next.push(s1);
            next.push(s2);
            splits += 1;
        }
        sets = next;
        history.push(p.eff(|v| virt[v] as f64));
    }
    p.finish(flows, history, splits, true)
}

/// Marks reused over the splits: `tag[v] == stamp` for the vertices of the set being split,
/// `seen` for a search inside it.
struct Scratch {
    tag: Vec<u32>,
    seen: Vec<u32>,
    stamp: u32,
}

impl Scratch {
    fn next_stamp(&mut self) -> u32 {
        self.stamp += 1;
        self.stamp
    }

    /// The vertices tagged `within`, reached from `start` breadth first, in visiting order.
    fn bfs(&mut self, g: &ProcGraph, start: u32, within: u32) -> Vec<u32> {
        let s = self.next_stamp();
        self.seen[start as usize] = s;
        let mut order = vec![start];
        let mut head = 0;
        while let Some(&v) = order.get(head) {
            head += 1;
            for &(w, _) in g.neighbours(v as usize) {
                let w_ = w as usize;
                if self.tag[w_] == within && self.seen[w_] != s {
                    self.seen[w_] = s;
                    order.push(w);
                }
            }
        }
        order
    }

    /// Two connected halves of the connected vertex set `set` (at least 2 vertices).
    fn halves(&mut self, g: &ProcGraph, set: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let whole = self.next_stamp();
        for &v in set {
            self.tag[v as usize] = whole;
        }
        // A pseudo-peripheral start: the last vertex reached from the set's first.
        let far = *self.bfs(g, set[0], whole).last().expect("start is reached");
        let order = self.bfs(g, far, whole);
        let h = order.len().div_ceil(2);
        let mut first = order[..h].to_vec();
        // The rest, in connected pieces; the largest stays the second half (a tie: the piece
        // met first), the others join the first (each touches it: the set is connected).
        let rest = self.next_stamp();
        for &v in &order[h..] {
            self.tag[v as usize] = rest;
        }
        let mut pieces: Vec<Vec<u32>> = Vec::new();
        for &v in &order[h..] {
            if self.tag[v as usize] == rest {
                let piece = self.bfs(g, v, rest);
                let done = self.next_stamp();
                for &w in &piece {
                    self.tag[w as usize] = done;
                }
                pieces.push(piece);
            }
        }
        let big = (0..pieces.len())
            .max_by(|&a, &b| pieces[a].len().cmp(&pieces[b].len()).then(b.cmp(&a)))
            .expect("the rest is not empty");
        let second = pieces.swap_remove(big);
        for piece in pieces {
            first.extend(piece);
        }
        (first, second)
    }

    /// Moves `delta` from half `s1` to half `s2`, evenly over the edges between them (the
    /// remainder one unit each to the first edges, by id).
    fn spread(
        &mut self,
        g: &ProcGraph,
        s1: &[u32],
        s2: &[u32],
        delta: i128,
        virt: &mut [i128],
        flows: &mut [i128],
    ) {
        let second = self.next_stamp();
        for &v in s2 {
            self.tag[v as usize] = second;
        }
        let mut crossing: Vec<(u32, u32, u32)> = Vec::new();
        for &v in s1 {
            for &(w, e) in g.neighbours(v as usize) {
                if self.tag[w as usize] == second {
                    crossing.push((e, v, w));
                }
            }
        }
        crossing.sort_unstable();
        let m = crossing.len() as i128;
        let (base, rem) = (delta / m, delta % m);
        for (k, &(e, v, w)) in crossing.iter().enumerate() {
            let a = base
                + if (k as i128) < rem.abs() {
                    rem.signum()
                } else {
                    0
                };
            virt[v as usize] -= a;
            virt[w as usize] += a;
            flows[e as usize] += if v < w { a } else { -a };
        }
    }
}
