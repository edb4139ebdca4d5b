//! The adaptive loop: SOLVE → ESTIMATE → MARK → REFINE, PHAML style.

use crate::FemError;
use crate::assemble::System;
use crate::estimate::{Errors, errors, estimate_into, gradients_into};
use crate::mark::{Marking, mark};
use crate::mesh::{Marks, Mesh};
use crate::problem::{ExactSolution, dirichlet_value};
use crate::solver::{CgConfig, CgWork, Multilevel, SolveStats, pcg, prolongate};
use serde::Serialize;
use std::time::Instant;

/// The number of vertices of PHAML's run in DRUM 2005 §4 (17 refinement steps).
pub const PHAML_TARGET_VERTICES: usize = 524_500;

/// Configuration of the adaptive loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptConfig {
    /// Stop once the mesh has at least this many vertices.
    pub target_vertices: usize,
    /// How elements are marked.
    pub marking: Marking,
    /// When CG stops (relative to the estimated error).
    pub cg: CgConfig,
    /// Compute the errors against the exact solution each step (a diagnostic: timed apart).
    pub errors: bool,
    /// Keep the per-element squared energy error of the last step (for the VTK output).
    pub element_errors: bool,
    /// Refuse to run more than this many steps.
    pub max_steps: usize,
}

impl Default for AdaptConfig {
    fn default() -> Self {
        AdaptConfig {
            target_vertices: PHAML_TARGET_VERTICES,
            marking: Marking::Double,
            cg: CgConfig::default(),
            errors: true,
            element_errors: false,
            max_steps: 200,
        }
    }
}

impl AdaptConfig {
    pub(crate) fn validate(&self) -> Result<(), FemError> {
        let bad = |field, value: String, reason| {
            Err(FemError::InvalidConfig {
                field,
                value,
                reason,
            })
        };
        if self.target_vertices < 5 {
            return bad(
                "target_vertices",
                self.target_vertices.to_string(),
                "must be at least 5",
            );
        }
        if u32::try_from(self.target_vertices.saturating_mul(3)).is_err() {
            return bad(
                "target_vertices",
                self.target_vertices.to_string(),
                "too large for u32 indices",
            );
        }
        if !(self.cg.tol_factor >= 0.0 && self.cg.tol_factor.is_finite()) {
            return bad(
                "cg.tol_factor",
                self.cg.tol_factor.to_string(),
                "must be finite and ≥ 0",
            );
        }
        if let Marking::Doerfler(t) = self.marking
            && !(t > 0.0 && t <= 1.0)
        {
            return bad("marking", t.to_string(), "Dörfler θ must lie in (0, 1]");
        }
        Ok(())
    }
}

/// Wall-clock seconds of each phase of one step.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct StepTimes {
    /// Marking and refinement (bisection, closure, vertex creation, solution prolongation).
    pub refine: f64,
    /// The marking part of `refine`.
    pub mark: f64,
    /// Assembly of the stiffness matrix and the multilevel set-up.
    pub assemble: f64,
    /// Conjugate gradients.
    pub solve: f64,
    /// The residual indicators.
    pub estimate: f64,
    /// Errors against the exact solution (diagnostic; not part of the method).
    pub error: f64,
}

impl StepTimes {
    /// refine + assemble + solve + estimate: the method's own time.
    pub fn method(&self) -> f64 {
        self.refine + self.assemble + self.solve + self.estimate
    }
}

/// What one step produced. `--json` prints one of these per line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepReport {
    /// 0 for the initial mesh, then one per refinement.
    pub step: usize,
    /// Number of vertices.
    pub vertices: usize,
    /// Number of leaf elements.
    pub elements: usize,
    /// Number of interior vertices (unknowns).
    pub unknowns: usize,
    /// Deepest element level.
    pub max_level: u8,
    /// ‖∇(u − u_h)‖ (if computed and the exact gradient is known).
    pub error_energy: Option<f64>,
    /// max over vertices |u − u_h| (if computed).
    pub error_max: Option<f64>,
    /// The residual estimate η.
    pub estimate: f64,
    /// CG iterations.
    pub cg_iterations: usize,
    /// CG's estimate of the algebraic error in the energy norm at exit.
    pub algebraic_error: f64,
    /// The stopping threshold that CG used (tol_factor × predicted η).
    pub cg_tolerance: f64,
    /// Estimated condition number of the preconditioned operator (0 if fewer than 2 steps).
    pub condition_estimate: f64,
    /// Phase times in seconds.
    pub times: StepTimes,
}

/// The state of an adaptive run. Call [`Adaptive::step`] until it returns `None`, or
/// [`Adaptive::run`].
pub struct Adaptive<'a> {
    cfg: AdaptConfig,
    exact: &'a dyn ExactSolution,
    mesh: Mesh,
    u: Vec<f64>,
    eta2: Vec<f64>,
    estimate: f64,
    element_errors: Vec<f64>,
    step: usize,
    n0: usize,
    done: bool,
}

impl std::fmt::Debug for Adaptive<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adaptive")
            .field("problem", &self.exact.name())
            .field("step", &self.step)
            .field("vertices", &self.mesh.num_vertices())
            .finish()
    }
}

impl<'a> Adaptive<'a> {
    /// Starts from PHAML's initial mesh with the Dirichlet data of `exact`.
    pub fn new(exact: &'a dyn ExactSolution, cfg: AdaptConfig) -> Result<Self, FemError> {
        cfg.validate()?;
        let mesh = Mesh::unit_square();
        let mut u = vec![0.0; mesh.num_vertices()];
        for (v, p) in mesh.coords().iter().enumerate() {
            if mesh.boundary_vertices()[v] {
                u[v] = dirichlet_value(exact, p[0], p[1])?;
            }
        }
        let n0 = mesh.num_vertices();
        Ok(Adaptive {
            cfg,
            exact,
            mesh,
            u,
            eta2: Vec::new(),
            estimate: 0.0,
            element_errors: Vec::new(),
            step: 0,
            n0,
            done: false,
        })
    }

    /// The current mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }
    /// The current discrete solution (one value per vertex).
    pub fn solution(&self) -> &[f64] {
        &self.u
    }
    /// The squared indicators η_T² of the current mesh.
    pub fn indicators(&self) -> &[f64] {
        &self.eta2
    }
    /// The per-element squared energy error of the last step (empty unless
    /// `element_errors` is set).
    pub fn element_errors(&self) -> &[f64] {
        &self.element_errors
    }
    /// The configuration.
    pub fn config(&self) -> &AdaptConfig {
        &self.cfg
    }
    /// The number of vertices step `k` aims at under [`Marking::Double`]: N_0 · 2^k capped
    /// at the final target (PHAML's `set_target` for `DOUBLE_NEQ`).
    pub fn step_target(&self, k: usize) -> usize {
        let t = (self.n0 as u128) << k.min(100);
        t.min(self.cfg.target_vertices as u128) as usize
    }

    /// The marks the next step would use (for predictive weights before a rebalance).
    pub fn next_marks(&self) -> Marks {
        let target = match self.cfg.marking {
            Marking::Double => self.step_target(self.step),
            Marking::Doerfler(_) => self.cfg.target_vertices,
        };
        mark(&self.mesh, &self.eta2, self.cfg.marking, target)
    }

    /// Runs one step: the first call solves on the initial mesh; later calls mark, refine,
    /// assemble, solve and estimate. Returns `None` once the target was reached.
    pub fn step(&mut self) -> Result<Option<StepReport>, FemError> {
        if self.done {
            return Ok(None);
        }
        let mut times = StepTimes::default();
        let prev = (self.mesh.num_vertices(), self.estimate);
        if self.step > 0 {
            if self.mesh.num_vertices() >= self.cfg.target_vertices {
                self.done = true;
                return Ok(None);
            }
            if self.step > self.cfg.max_steps {
                return Err(FemError::InvalidConfig {
                    field: "max_steps",
                    value: self.cfg.max_steps.to_string(),
                    reason: "reached before the target number of vertices",
                });
            }
            let t0 = Instant::now();
            let marks = self.next_marks();
            times.mark = t0.elapsed().as_secs_f64();
            self.eta2 = Vec::new();
            let new = self.mesh.refine(&marks)?;
            drop(marks);
            let exact = self.exact;
            prolongate(&self.mesh, &mut self.u, new, |p| {
                dirichlet_value(exact, p[0], p[1])
            })?;
            times.refine = t0.elapsed().as_secs_f64();
        }

        let t0 = Instant::now();
        let sys = System::assemble(&self.mesh, &self.u);
        let mut pre = Multilevel::new(&self.mesh, &sys);
        times.assemble = t0.elapsed().as_secs_f64();

        let t0 = Instant::now();
        // Predicted estimate of this mesh: η decays like N^{−1/2} under optimal refinement.
        let tol = if self.step == 0 {
            0.0
        } else {
            let ratio = prev.0 as f64 / self.mesh.num_vertices() as f64;
            self.cfg.cg.tol_factor * prev.1 * ratio.sqrt()
        };
        let stats: SolveStats = pcg(
            &self.mesh,
            &sys,
            &mut pre,
            &mut self.u,
            tol,
            &self.cfg.cg,
            &mut CgWork::default(),
        );
        drop(pre);
        drop(sys);
        times.solve = t0.elapsed().as_secs_f64();

        let t0 = Instant::now();
        let mut grad = Vec::new();
        let mut eta2 = Vec::new();
        self.estimate = estimate_into(&self.mesh, &self.u, self.exact, &mut grad, &mut eta2);
        self.eta2 = eta2;
        times.estimate = t0.elapsed().as_secs_f64();

        let mut errs = None;
        if self.cfg.errors {
            let t0 = Instant::now();
            let pe = if self.cfg.element_errors {
                Some(&mut self.element_errors)
            } else {
                None
            };
            let e: Errors = errors(&self.mesh, &self.u, &grad, self.exact, pe)?;
            errs = Some(e);
            times.error = t0.elapsed().as_secs_f64();
        }

        let report = StepReport {
            step: self.step,
            vertices: self.mesh.num_vertices(),
            elements: self.mesh.num_elements(),
            unknowns: self.mesh.num_interior_vertices(),
            max_level: self.mesh.max_level(),
            error_energy: errs.and_then(|e| e.energy),
            error_max: errs.map(|e| e.max_vertex),
            estimate: self.estimate,
            cg_iterations: stats.iterations,
            algebraic_error: stats.algebraic_error,
            cg_tolerance: tol,
            condition_estimate: stats.condition_estimate(),
            times,
        };
        self.step += 1;
        Ok(Some(report))
    }

    /// Runs every step, calling `on_step` after each; returns the reports.
    pub fn run(
        &mut self,
        mut on_step: impl FnMut(&StepReport, &Adaptive<'_>),
    ) -> Result<Vec<StepReport>, FemError> {
        let mut out = Vec::new();
        while let Some(r) = self.step()? {
            on_step(&r, self);
            out.push(r);
        }
        Ok(out)
    }

    /// Recomputes the element gradients of the current solution (for output).
    pub fn gradients(&self) -> Vec<[f64; 2]> {
        let mut g = Vec::new();
        gradients_into(&self.mesh, &self.u, &mut g);
        g
    }
}
