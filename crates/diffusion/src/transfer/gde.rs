//! The generalised dimension exchange for heterogeneous capacities.

use super::{Flows, Problem, Transfer, round_div};
use crate::Error;
use crate::ProcGraph;

/// The generalised dimension exchange (Watts, Rieffel & Taylor 1998, "Load transfer
/// calculation"; Xu & Lau 1997): the edges are coloured so that no processor has two edges of
/// the same colour, the colours are iterated over, and along each edge `(i, j)` of the current
/// colour the transfer accumulates
///
/// `ΔL_{i,j}^(k) = ΔL_{i,j}^(k−1) + λ (C_j L_i^(k−1) − C_i L_j^(k−1)) / (C_i + C_j)`,
///
/// with the loads adjusted by the earlier transfers; λ = 1 makes the two utilisations equal.
/// Each exchange moves a whole number of units (exact for λ = 1, rounded otherwise), never
/// more than the sender holds and never past twice the equalising amount, so load is
/// conserved, stays `≥ 0`, and no exchange raises the larger utilisation of the pair. A sweep is one pass over
/// all colours; the sweeps stop at `eff ≥ eff_min`, at a sweep that moves nothing (the integer
/// fixed point: every edge balanced to within a unit), or after `max_iterations`.
pub(super) fn run(p: &Problem, cfg: &Transfer, lambda: f64) -> Result<Flows, Error> {
    let g = p.graph;
    let units = p.caps.units();
    let classes = colour_classes(g);
    let mut virt: Vec<i128> = p.loads.iter().map(|&l| i128::from(l)).collect();
    let mut flows = vec![0i128; g.num_edges()];
    let mut history = vec![p.eff(|v| virt[v] as f64)];
    let mut exchanges = 0;
    let mut converged = history[0] >= cfg.eff_min;
    while !converged && history.len() <= cfg.max_iterations {
        let mut moved = false;
        for class in &classes {
            for &e in class {
                let [i, j] = g.edges()[e as usize].map(|v| v as usize);
                let (ci, cj) = (i128::from(units[i]), i128::from(units[j]));
                let (num, den) = (cj * virt[i] - ci * virt[j], ci + cj);
                let d = if lambda == 1.0 {
                    round_div(num, den)
                } else {
                    (lambda * num as f64 / den as f64).round() as i128
                };
                let d = [d, round_div(num, den)]
                    .into_iter()
                    .find(|&d| decreases(d, num, den))
                    .unwrap_or(0)
                    .clamp(-virt[j], virt[i]);
                if d != 0 {
                    virt[i] -= d;
                    virt[j] += d;
                    flows[e as usize] += d;
                    exchanges += 1;
                    moved = true;
                }
            }
        }
        history.push(p.eff(|v| virt[v] as f64));
        converged = *history.last().expect("pushed") >= cfg.eff_min;
        if !moved {
            break;
        }
    }
    p.finish(flows, history, exchanges, converged)
}

/// Whether moving `d` units along an edge whose equalising transfer is `num / den` brings the
/// two utilisations strictly closer (`d` strictly between 0 and twice it). Whole units can
/// overshoot (λ > 1, or an equalising amount of half a unit); such a move is replaced by the
/// rounded equalising one, or none, so that every move lowers `Σ (L_i − L_i*)² / C_i` and the
/// sweeps end at a fixed point instead of cycling.
fn decreases(d: i128, num: i128, den: i128) -> bool {
    d != 0 && (d > 0) == (num > 0) && (d * den).abs() < 2 * num.abs()
}

/// A proper edge colouring, greedy in edge order (each edge takes the least colour free at
/// both ends: at most `2Δ − 1` colours), as lists of edge ids per colour.
pub(crate) fn colour_classes(g: &ProcGraph) -> Vec<Vec<u32>> {
    let n = g.num_vertices();
    // used[v]: the colours at v so far, as a bit set grown on demand.
    let mut used: Vec<Vec<u64>> = vec![Vec::new(); n];
    let mut classes: Vec<Vec<u32>> = Vec::new();
    let taken = |set: &Vec<u64>, c: usize| set.get(c / 64).is_some_and(|w| w >> (c % 64) & 1 == 1);
    for (e, &[a, b]) in g.edges().iter().enumerate() {
        let (a, b) = (a as usize, b as usize);
        let c = (0..)
            .find(|&c| !taken(&used[a], c) && !taken(&used[b], c))
            .expect("a colour is free");
        for v in [a, b] {
            if used[v].len() <= c / 64 {
                used[v].resize(c / 64 + 1, 0);
            }
            used[v][c / 64] |= 1 << (c % 64);
        }
        if classes.len() <= c {
            classes.resize(c + 1, Vec::new());
        }
        classes[c].push(e as u32);
    }
    classes
}
