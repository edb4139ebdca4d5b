//! Load transfer calculation (Watts, Rieffel & Taylor 1998, "Load transfer calculation"): how
//! much load to move along each edge of the processor graph so that the utilisations
//! `U_i = L_i / C_i` equalise.
//!
//! Three methods ([`Method`]): the hierarchical balancing method (recursive halves), the
//! generalised dimension exchange (coloured edges, one colour at a time), and implicit
//! heterogeneous heat diffusion (backward Euler, unconditionally stable). All three take
//! integer loads and return integer transfers per edge, so load is conserved exactly (each
//! unit that leaves one end of an edge arrives at the other) and the result is the same on
//! every machine and for every thread count.
//!
//! A disconnected graph is balanced component by component (load cannot cross between
//! components); [`ProcGraph::bridged`] joins the components first when that is not wanted.

mod gde;
mod hbm;
mod implicit;

use crate::{Capacities, Error, ProcGraph, capacity::MAX_TOTAL_LOAD};

/// How the transfers are computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// The hierarchical balancing method: halve the processors recursively and move
    /// `ΔL_{1,2} = (C_2 L_1 − C_1 L_2) / (C_1 + C_2)` between the halves.
    Hbm,
    /// The generalised dimension exchange: colour the edges, and exchange along one colour
    /// at a time `ΔL_{i,j} += λ (C_j L_i − C_i L_j) / (C_i + C_j)`.
    Gde {
        /// λ in (0, 2): 1 equalises the two utilisations at each exchange; above 1
        /// over-relaxes (Xu & Lau).
        lambda: f64,
    },
    /// Implicit heterogeneous heat diffusion (the paper's Figure 1): backward-Euler steps of
    /// the heat equation on the graph, each a linear system solved to accuracy `1 − eff_min`.
    Implicit {
        /// The time step α of `D_i` and `T_{i,j}`; `None`: the paper's `α = 1 − eff_min`.
        alpha: Option<f64>,
        /// How each step's linear system is solved.
        solver: Solver,
    },
}

impl Method {
    /// GDE with λ = 1.
    pub const GDE: Method = Method::Gde { lambda: 1.0 };
    /// Implicit diffusion with the paper's α and its Jacobi iteration.
    pub const IMPLICIT: Method = Method::Implicit {
        alpha: None,
        solver: Solver::Jacobi,
    };

    /// `hbm`, `gde` or `implicit`.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Hbm => "hbm",
            Method::Gde { .. } => "gde",
            Method::Implicit { .. } => "implicit",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;

    /// `hbm`, `gde` (λ = 1) or `implicit` (the paper's α and Jacobi), ignoring ASCII case:
    /// the names of `--transfer` and of `METHOD=` in a machine file.
    fn from_str(s: &str) -> Result<Method, String> {
        [Method::Hbm, Method::GDE, Method::IMPLICIT]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("`{s}` is not a transfer method: expected hbm, gde or implicit"))
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::Hbm => f.write_str("hbm"),
            Method::Gde { lambda } => write!(f, "gde λ={lambda}"),
            Method::Implicit { alpha, solver } => {
                let solver = match solver {
                    Solver::Jacobi => "jacobi",
                    Solver::Cg => "cg",
                };
                match alpha {
                    Some(a) => write!(f, "implicit α={a} {solver}"),
                    None => write!(f, "implicit α=1−eff_min {solver}"),
                }
            }
        }
    }
}

/// The linear solver of an implicit diffusion step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// The paper's Jacobi iteration, `m = ⌈ln α / ln ρ⌉` sweeps.
    Jacobi,
    /// Conjugate gradients (diagonally preconditioned) on the symmetric form of the system,
    /// to relative residual `1 − eff_min`.
    Cg,
}

/// The settings of a load transfer calculation (public fields; build with
/// `..Default::default()`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    /// The method.
    pub method: Method,
    /// Stop once `eff ≥ eff_min` (Watts et al.'s user-specified minimum efficiency), in
    /// (0, 1]. HBM ignores it (it balances in one pass).
    pub eff_min: f64,
    /// Most iterations: GDE sweeps over all colours, implicit diffusion steps.
    pub max_iterations: usize,
}

impl Default for Transfer {
    fn default() -> Self {
        Transfer {
            method: Method::Hbm,
            eff_min: 0.9,
            max_iterations: 1000,
        }
    }
}

/// The result of a transfer calculation.
#[derive(Debug, Clone, PartialEq)]
pub struct Flows {
    /// Per edge of the graph (in [`ProcGraph::edges`] order): the load to move, positive from
    /// `edges()[e][0]` to `edges()[e][1]`, negative the other way.
    pub flows: Vec<i64>,
    /// The loads once every transfer is made (conserved: they sum to the loads given).
    pub loads: Vec<u64>,
    /// `eff` of the loads given, then after each iteration (HBM: each level of halves; GDE:
    /// each sweep over the colours; implicit: each time step). For a disconnected graph the
    /// least `eff` of its components.
    pub history: Vec<f64>,
    /// Inner iterations in all (implicit: Jacobi sweeps or CG iterations; GDE: exchanges
    /// that moved load; HBM: splits).
    pub inner_iterations: usize,
    /// Whether `eff ≥ eff_min` was reached (HBM: whether every component is balanced to
    /// within one unit per level).
    pub converged: bool,
}

impl Flows {
    /// Iterations run (`history.len() − 1`).
    pub fn iterations(&self) -> usize {
        self.history.len().saturating_sub(1)
    }

    /// The sum of `|flow|` over the edges (the load planned to move).
    pub fn planned(&self) -> u64 {
        self.flows.iter().map(|f| f.unsigned_abs()).sum()
    }
}

impl Transfer {
    /// The transfers along the edges of `graph` that equalise the utilisations of `loads`
    /// (one per processor, weight units, summing to at most [`MAX_TOTAL_LOAD`]) with
    /// `capacities`.
    pub fn compute(
        &self,
        graph: &ProcGraph,
        loads: &[u64],
        capacities: &Capacities,
    ) -> Result<Flows, Error> {
        self.check(graph, loads, capacities)?;
        let p = Problem {
            graph,
            loads,
            caps: capacities,
            comps: graph.components(),
        };
        match self.method {
            Method::Hbm => hbm::run(&p),
            Method::Gde { lambda } => gde::run(&p, self, lambda),
            Method::Implicit { alpha, solver } => {
                let alpha = alpha.unwrap_or(1.0 - self.eff_min);
                if !(alpha.is_finite() && alpha > 0.0) {
                    return Err(Error::InvalidParameter {
                        name: "alpha",
                        value: alpha,
                        expected: "a finite time step > 0 (the default 1 − eff_min needs \
                                   eff_min < 1)",
                    });
                }
                implicit::run(&p, self, alpha, solver)
            }
        }
    }

    fn check(&self, graph: &ProcGraph, loads: &[u64], caps: &Capacities) -> Result<(), Error> {
        let n = graph.num_vertices();
        for (what, got) in [("loads", loads.len()), ("capacities", caps.len())] {
            if got != n {
                return Err(Error::LengthMismatch {
                    what,
                    expected: n,
                    got,
                });
            }
        }
        let total: u128 = loads.iter().map(|&l| u128::from(l)).sum();
        if total > u128::from(MAX_TOTAL_LOAD) {
            return Err(Error::LoadTooLarge { total });
        }
        if !(self.eff_min > 0.0 && self.eff_min <= 1.0) {
            return Err(Error::InvalidParameter {
                name: "eff_min",
                value: self.eff_min,
                expected: "a number in (0, 1]",
            });
        }
        if let Method::Gde { lambda } = self.method
            && !(lambda > 0.0 && lambda < 2.0)
        {
            return Err(Error::InvalidParameter {
                name: "lambda",
                value: lambda,
                expected: "a number in (0, 2)",
            });
        }
        Ok(())
    }
}

/// What every method reads: the graph, the loads, the capacities, and the components.
struct Problem<'a> {
    graph: &'a ProcGraph,
    loads: &'a [u64],
    caps: &'a Capacities,
    comps: (Vec<u32>, usize),
}

impl Problem<'_> {
    /// The least `eff` over the components of real-valued loads (one pass).
    fn eff(&self, loads: impl Fn(usize) -> f64) -> f64 {
        let (comp, count) = &self.comps;
        let units = self.caps.units();
        // Per component: total load, total capacity, largest utilisation.
        let mut acc = vec![(0.0, 0.0, f64::NEG_INFINITY); *count];
        for (v, &c) in comp.iter().enumerate() {
            let (l, u) = (loads(v), units[v] as f64);
            let a = &mut acc[c as usize];
            *a = (a.0 + l, a.1 + u, a.2.max(l / u));
        }
        acc.into_iter()
            .map(|(l, c, umax)| {
                if l > 0.0 && umax > 0.0 {
                    (l / c) / umax
                } else {
                    1.0
                }
            })
            .fold(1.0, f64::min)
    }

    /// The vertices of each component, ascending.
    fn members(&self) -> Vec<Vec<u32>> {
        let (comp, count) = &self.comps;
        let mut out = vec![Vec::new(); *count];
        for (v, &c) in comp.iter().enumerate() {
            out[c as usize].push(v as u32);
        }
        out
    }

    /// The result of integer transfers `flows` (each method leaves no load `< 0`).
    fn finish(
        &self,
        flows: Vec<i128>,
        history: Vec<f64>,
        inner: usize,
        ok: bool,
    ) -> Result<Flows, Error> {
        let loads = apply(self.graph, self.loads, &flows)
            .into_iter()
            .map(|l| u64::try_from(l).expect("the methods leave no negative load"))
            .collect();
        let flows = (flows.into_iter().enumerate())
            .map(|(edge, f)| i64::try_from(f).map_err(|_| Error::FlowOverflow { edge }))
            .collect::<Result<_, _>>()?;
        Ok(Flows {
            flows,
            loads,
            history,
            inner_iterations: inner,
            converged: ok,
        })
    }
}

/// `loads` after moving `flows` along the edges of `graph`.
fn apply(graph: &ProcGraph, loads: &[u64], flows: &[i128]) -> Vec<i128> {
    let mut out: Vec<i128> = loads.iter().map(|&l| i128::from(l)).collect();
    for (e, &[a, b]) in graph.edges().iter().enumerate() {
        out[a as usize] -= flows[e];
        out[b as usize] += flows[e];
    }
    out
}

/// `num / den` rounded to the nearest integer (halves up), `den > 0`.
fn round_div(num: i128, den: i128) -> i128 {
    (2 * num + den).div_euclid(2 * den)
}

#[cfg(test)]
mod tests;
