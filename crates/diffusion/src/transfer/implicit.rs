//! Implicit heterogeneous heat diffusion.

use super::{Flows, Problem, Solver, Transfer, apply};
use crate::{Error, capacity::apportion};

/// Implicit heterogeneous heat diffusion (Watts, Rieffel & Taylor 1998, Figure 1; Heirich &
/// Taylor 1995). Each time step solves the backward-Euler system of processor `i`
///
/// `D_i L_i − Σ_{j∈N_i} T_{i,j} L_j = L_i^(0)`, `D_i = 1 + α Σ_{j∈N_i} C_j / (C_i + C_j)`,
/// `T_{i,j} = α C_i / (C_i + C_j)`,
///
/// i.e. the flux along edge `(i, j)` is `α (C_j L_i − C_i L_j) / (C_i + C_j)` evaluated at the
/// new loads: heat flows from high to low utilisation `U = L / C`, and the fixed point has
/// every `U_i` equal. Backward Euler is unconditionally stable: any time step α > 0 decays
/// every imbalance mode, with no oscillation; α is also the accuracy of each step's solve
/// (the paper takes `α = 1 − eff_min`; here the accuracy is always `1 − eff_min` and α
/// defaults to it). Steps repeat `while eff < eff_min` (or `max_iterations`).
///
/// In utilisations `u = L / C` the system is `(diag(C) + α Λ) u = L^(0)` with Λ the graph
/// Laplacian of edge weights `w_{i,j} = C_i C_j / (C_i + C_j)`: symmetric positive definite,
/// so [`Solver::Cg`] applies. [`Solver::Jacobi`] runs the paper's iteration
/// `L_i^(k) = D_i^−1 (L_i^(0) + Σ_j T_{i,j} L_j^(k−1))` for
/// `m = ⌈ln α / ln ρ⌉` sweeps, with the contraction bound taken in utilisations,
/// `ρ = max_i (D_i − 1) / D_i < 1`: the paper's `max_i D_i^−1 Σ_j T_{i,j}` (the row sums in
/// loads) exceeds 1 where a processor is much faster than its neighbours (40× with four
/// neighbours: 3.6), which would make `m` meaningless.
///
/// The transfer of each step is the flux evaluated at the solved utilisations on both ends of
/// each edge, so the two ends agree and load is conserved whatever the solve's accuracy (the
/// paper's per-processor update `ΔL_{i,j} += D_i^−1 T_{i,j} (C_j/C_i L_i^(0) − L_j^(m−1))`
/// is computed by `i` alone and need not be the negative of `j`'s). The real transfers are
/// rounded to whole units at the end, and the rounding is corrected along a spanning tree so
/// that the final loads are the real ones rounded to sum exactly to the total.
pub(super) fn run(p: &Problem, cfg: &Transfer, alpha: f64, solver: Solver) -> Result<Flows, Error> {
    let sys = System::new(p, alpha);
    let acc = (1.0 - cfg.eff_min).clamp(1e-12, 0.5);
    let mut loads: Vec<f64> = p.loads.iter().map(|&l| l as f64).collect();
    let mut real = vec![0.0; p.graph.num_edges()];
    let mut history = vec![p.eff(|v| loads[v])];
    let mut inner = 0;
    while history[history.len() - 1] < cfg.eff_min && history.len() <= cfg.max_iterations {
        let (u, its) = match solver {
            Solver::Jacobi => sys.jacobi(&loads, acc),
            Solver::Cg => sys.cg(&loads, acc),
        };
        inner += its;
        for (e, &[a, b]) in p.graph.edges().iter().enumerate() {
            let f = alpha * sys.w[e] * (u[a as usize] - u[b as usize]);
            real[e] += f;
            loads[a as usize] -= f;
            loads[b as usize] += f;
        }
        history.push(p.eff(|v| loads[v]));
    }
    let converged = history[history.len() - 1] >= cfg.eff_min;
    let flows = round_flows(p, &real, &loads);
    p.finish(flows, history, inner, converged)
}

/// The system `(diag(C) + α Λ) u = L` of one step, capacities scaled to at most 1.
struct System<'a> {
    p: &'a Problem<'a>,
    alpha: f64,
    c: Vec<f64>,
    /// Per edge, `w = C_i C_j / (C_i + C_j)`.
    w: Vec<f64>,
    /// `C_i D_i = C_i + α Σ_j w_{i,j}`.
    diag: Vec<f64>,
}

impl<'a> System<'a> {
    fn new(p: &'a Problem<'a>, alpha: f64) -> System<'a> {
        let units = p.caps.units();
        let top = units.iter().copied().max().unwrap_or(1) as f64;
        let c: Vec<f64> = units.iter().map(|&x| x as f64 / top).collect();
        let w: Vec<f64> = (p.graph.edges().iter())
            .map(|&[a, b]| {
                let (ca, cb) = (c[a as usize], c[b as usize]);
                ca * cb / (ca + cb)
            })
            .collect();
        let mut diag = c.clone();
        for (e, &[a, b]) in p.graph.edges().iter().enumerate() {
            diag[a as usize] += alpha * w[e];
            diag[b as usize] += alpha * w[e];
        }
        System {
            p,
            alpha,
            c,
            w,
            diag,
        }
    }

    /// `α Σ_j w_{i,j} u_j` for every `i`.
    fn off(&self, u: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; u.len()];
        for (e, &[a, b]) in self.p.graph.edges().iter().enumerate() {
            let (a, b) = (a as usize, b as usize);
            out[a] += self.alpha * self.w[e] * u[b];
            out[b] += self.alpha * self.w[e] * u[a];
        }
        out
    }

    /// The paper's Jacobi iteration from `u = L / C`, `⌈ln acc / ln ρ⌉` sweeps (at most
    /// `10 n + 1000`: a huge time step makes ρ close to 1, and then CG is the solver to use).
    fn jacobi(&self, rhs: &[f64], acc: f64) -> (Vec<f64>, usize) {
        let rho = (0..self.c.len())
            .map(|i| (self.diag[i] - self.c[i]) / self.diag[i])
            .fold(0.0, f64::max);
        let cap = 10 * self.c.len() + 1000;
        let m = if rho <= 0.0 {
            1
        } else {
            ((acc.ln() / rho.ln()).ceil().max(1.0) as usize).min(cap)
        };
        let mut u: Vec<f64> = rhs.iter().zip(&self.c).map(|(l, c)| l / c).collect();
        for _ in 0..m {
            let off = self.off(&u);
            for i in 0..u.len() {
                u[i] = (rhs[i] + off[i]) / self.diag[i];
            }
        }
        (u, m)
    }

    /// Diagonally preconditioned conjugate gradients from `u = L / C` to
    /// `‖r‖ ≤ acc ‖r_0‖` (at most `10 n + 50` iterations).
    fn cg(&self, rhs: &[f64], acc: f64) -> (Vec<f64>, usize) {
        let n = rhs.len();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let apply = |u: &[f64]| -> Vec<f64> {
            let off = self.off(u);
            (0..n).map(|i| self.diag[i] * u[i] - off[i]).collect()
        };
        let mut u: Vec<f64> = rhs.iter().zip(&self.c).map(|(l, c)| l / c).collect();
        let au = apply(&u);
        let mut r: Vec<f64> = (0..n).map(|i| rhs[i] - au[i]).collect();
        let stop = acc * dot(&r, &r).sqrt();
        let mut z: Vec<f64> = (0..n).map(|i| r[i] / self.diag[i]).collect();
        let mut d = z.clone();
        let mut rz = dot(&r, &z);
        let mut its = 0;
        while its < 10 * n + 50 && dot(&r, &r).sqrt() > stop && rz > 0.0 {
            let ad = apply(&d);
            let step = rz / dot(&d, &ad);
            for i in 0..n {
                u[i] += step * d[i];
                r[i] -= step * ad[i];
                z[i] = r[i] / self.diag[i];
            }
            let rz_new = dot(&r, &z);
            for i in 0..n {
                d[i] = z[i] + rz_new / rz * d[i];
            }
            rz = rz_new;
            its += 1;
        }
        (u, its)
    }
}

/// Whole-unit transfers for the real transfers `real` that leave the real loads `loads`: the
/// rounded transfers, corrected along a breadth-first spanning tree of each component so that
/// the final loads are `loads` clamped at 0 and rounded to sum to the component's total.
fn round_flows(p: &Problem, real: &[f64], loads: &[f64]) -> Vec<i128> {
    let g = p.graph;
    let n = g.num_vertices();
    let mut flows: Vec<i128> = real.iter().map(|f| f.round() as i128).collect();
    let got = apply(g, p.loads, &flows);
    let mut want = vec![0u64; n];
    for members in p.members() {
        let members: Vec<usize> = members.into_iter().map(|v| v as usize).collect();
        let total: u64 = members.iter().map(|&v| p.loads[v]).sum();
        let top = members.iter().map(|&v| loads[v]).fold(0.0, f64::max);
        let mut shares: Vec<u64> = members
            .iter()
            .map(|&v| match top > 0.0 {
                true => (loads[v].max(0.0) / top * 2f64.powi(40)).round() as u64,
                false => 0,
            })
            .collect();
        if shares.iter().all(|&s| s == 0) {
            shares = members.iter().map(|&v| p.caps.units()[v]).collect();
        }
        for (&v, x) in members.iter().zip(apportion(total, &shares)) {
            want[v] = x;
        }
    }
    // Breadth-first forest from each component's lowest vertex; corrections pushed up from
    // the leaves, each tree edge carrying what its subtree lacks.
    let mut parent: Vec<Option<(u32, u32)>> = vec![None; n];
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let start = order.len();
        order.push(root as u32);
        let mut head = start;
        while let Some(&v) = order.get(head) {
            head += 1;
            for &(w, e) in g.neighbours(v as usize) {
                if !seen[w as usize] {
                    seen[w as usize] = true;
                    parent[w as usize] = Some((v, e));
                    order.push(w);
                }
            }
        }
    }
    let mut lack: Vec<i128> = (0..n).map(|v| i128::from(want[v]) - got[v]).collect();
    for &v in order.iter().rev() {
        if let Some((u, e)) = parent[v as usize] {
            let s = lack[v as usize];
            flows[e as usize] += if u < v { s } else { -s };
            lack[u as usize] += s;
        }
    }
    flows
}
