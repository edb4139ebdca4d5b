//! The adaptive loop on one rank of a distributed run, and the reports it produces.

use super::halo::Halo;
use super::hash;
use super::local::{Local, Moved};
use super::skeleton::Skeleton;
use super::timed::{Phase, Timed, Traffic};
use super::{Balancer, global_sums};
use crate::FemError;
use crate::adapt::{AdaptConfig, StepReport, StepTimes};
use crate::assemble::System;
use crate::estimate::{ErrorsPart, errors_part, estimate_part};
use crate::exact::{ExactSum, WORDS};
use crate::mark::Marking;
use crate::problem::ExactSolution;
use crate::solver::{CgOps, CgWork, Multilevel, SolveStats, pcg_with};
use comm::wire::{Reader, Writer};
use comm::{Comm, CommError, PerRank, ReduceOp};
use drum_loop::{Balancing, PointFigures};
use drum_model::monitor::thread_cpu_seconds;
use serde::Serialize;
use std::time::Instant;

/// How a distributed run is set up.
#[derive(Debug, Clone)]
pub struct DistConfig {
    /// The adaptive loop's settings (the same as for one process).
    pub adapt: AdaptConfig,
    /// Compute the mesh hash of every step ([`DistStepReport::mesh_hash`]; costs a gather of
    /// the whole mesh on rank 0 and a sort, outside the timed phases).
    pub mesh_hash: bool,
    /// For tests of failure handling: this rank panics at the start of this step.
    pub fail_at: Option<(usize, usize)>,
    /// For tests of migration: at the rebalance point of step `.0` every rank but the last
    /// hands the last fraction `.1` (in curve order) of its elements to the next rank,
    /// whatever the balancer says: a large move of contiguous parts, as when the part sizes
    /// jump, checked like any migration; the balancer's next point moves most of it back.
    pub shift_at: Option<(usize, f64)>,
    /// Over how many steps DRUM's profitability test counts a rebalance's gain: the next
    /// step only (Lan et al. 2001), or every step left of the run
    /// ([`drum_loop::DrumLoop::set_remaining_steps`]; known under [`Marking::Double`], whose
    /// steps' targets are set).
    pub gain_horizon: GainHorizon,
}

/// See [`DistConfig::gain_horizon`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GainHorizon {
    /// The next step (Lan et al.'s eq. 4).
    Next,
    /// The next step and every one after it until the target (under [`Marking::Double`];
    /// the next step alone under Dörfler marking, whose number of steps is not known).
    #[default]
    Run,
}

impl DistConfig {
    /// A run with `adapt`'s settings, hashes on, no failure, the gain over the run.
    pub fn new(adapt: AdaptConfig) -> Self {
        DistConfig {
            adapt,
            mesh_hash: true,
            fail_at: None,
            shift_at: None,
            gain_horizon: GainHorizon::Run,
        }
    }

    /// How many steps follow step `k` (which refines to `step_target(k)` vertices) before the
    /// target is reached, when the marking says ([`GainHorizon::Run`], [`Marking::Double`]).
    fn remaining_after(&self, k: usize, step_target: impl Fn(usize) -> usize) -> Option<u32> {
        let t = self.adapt.target_vertices;
        match (self.gain_horizon, self.adapt.marking) {
            (GainHorizon::Run, Marking::Double) => {
                Some((k..k + 64).take_while(|&j| step_target(j) < t).count() as u32)
            }
            _ => None,
        }
    }
}

/// Elements below which a repartition's cost is mostly fixed (collectives, and hier-part's
/// walk gathers every point on every rank below 16,384): its cost per element is measured on
/// larger meshes only (see [`drum_loop::DrumLoop::record_repartition`]).
const COST_PER_ELEMENT_FROM: u64 = 1 << 14;

/// Seconds one rank spent in each phase of a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RankTimes {
    /// Marking (label propagation and selection across ranks).
    pub mark: f64,
    /// Bisection of the owned elements, new vertices, prolongation.
    pub refine: f64,
    /// The partitioner (centroids and weights of the owned elements).
    pub partition: f64,
    /// Migration, ghost layer, ownership (the rebuild of the local part).
    pub migrate: f64,
    /// Halo and skeleton set-up.
    pub setup: f64,
    /// Assembly of the own rows and the preconditioner's set-up.
    pub assemble: f64,
    /// Conjugate gradients.
    pub solve: f64,
    /// The estimator.
    pub estimate: f64,
    /// Errors against the exact solution (diagnostic).
    pub error: f64,
}

impl RankTimes {
    const FIELDS: usize = 9;
    fn to_array(self) -> [f64; Self::FIELDS] {
        [
            self.mark,
            self.refine,
            self.partition,
            self.migrate,
            self.setup,
            self.assemble,
            self.solve,
            self.estimate,
            self.error,
        ]
    }
    fn from_array(a: [f64; Self::FIELDS]) -> Self {
        RankTimes {
            mark: a[0],
            refine: a[1],
            partition: a[2],
            migrate: a[3],
            setup: a[4],
            assemble: a[5],
            solve: a[6],
            estimate: a[7],
            error: a[8],
        }
    }
    /// Every phase but the error diagnostic.
    pub fn method(&self) -> f64 {
        self.to_array()[..Self::FIELDS - 1].iter().sum()
    }
}

/// One rank's share of a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankStep {
    /// The rank.
    pub rank: usize,
    /// Owned leaf elements.
    pub owned: usize,
    /// Ghost elements (copies of neighbours owned elsewhere).
    pub ghosts: usize,
    /// Owned vertices.
    pub owned_vertices: usize,
    /// Work weight of the owned elements (the partitioner's weights).
    pub work: f64,
    /// Phase times.
    pub times: RankTimes,
    /// Seconds inside collectives (waiting for the others, and the transfers).
    pub wait_s: f64,
    /// Calls this rank made into the communicator in this step (reductions, gathers,
    /// exchanges, agreement rounds alike: each may wait for the slowest rank).
    pub collectives: u64,
    /// Messages it sent (one per other rank a call sends to).
    pub messages: u64,
    /// Bytes it sent to other ranks.
    pub bytes: u64,
    /// The same per phase.
    pub phases: Phases,
    /// Vertices of the skeleton (replicated) and this rank's external children.
    pub skeleton: usize,
}

/// Calls, messages and bytes per phase of a step ([`Phase::ALL`] order); serialised as an
/// object keyed by the phase's name.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases(pub [Traffic; Phase::ALL.len()]);

impl Phases {
    /// The phase's figures.
    pub fn get(&self, p: Phase) -> Traffic {
        self.0[p as usize]
    }

    /// Every phase together.
    pub fn total(&self) -> Traffic {
        self.0.iter().fold(Traffic::default(), |a, &b| a.plus(b))
    }
}

impl Serialize for Phases {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(Phase::ALL.len()))?;
        for p in Phase::ALL {
            m.serialize_entry(p.name(), &self.0[p as usize])?;
        }
        m.end()
    }
}

/// The migration of a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MigrationReport {
    /// Elements that changed rank.
    pub elements: u64,
    /// Bytes of the migration messages.
    pub bytes: u64,
    /// The global element count is the same before and after.
    pub count_ok: bool,
    /// The order-independent checksum of the element keys is the same before and after.
    pub checksum_ok: bool,
}

/// One step of a distributed run, as rank 0 reports it (`--json` prints one per line).
#[derive(Debug, Clone, Serialize)]
pub struct DistStepReport {
    /// The same fields as a serial step; `times` holds the largest time of each phase over
    /// the ranks (mark + refine in `refine`, the partition, migration and set-up in
    /// `assemble`'s neighbours: see `ranks` for the split).
    #[serde(flatten)]
    pub base: StepReport,
    /// FNV-1a 64 of the mesh (see `fem_laplace::dist::mesh_hash`), as 16 hex digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh_hash: Option<String>,
    /// Wall-clock seconds of the step on rank 0 (the hash excluded).
    pub wall_s: f64,
    /// Number of ranks.
    pub nranks: usize,
    /// Per rank.
    pub ranks: Vec<RankStep>,
    /// The migration after this step's refinement.
    pub migration: MigrationReport,
    /// DRUM in the loop ([`Balancer::Drum`]): the window measured, the part sizes, the
    /// decision and its figures, the sizes achieved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<drum_loop::LoopReport>,
}

/// The adaptive loop on one rank. Every rank of the communicator creates one and calls
/// [`RankRun::step`] in lockstep; rank 0's reports hold every rank's figures.
pub struct RankRun<'a, C: Comm> {
    pub(crate) comm: Timed<C>,
    cfg: DistConfig,
    exact: &'a dyn ExactSolution,
    balancing: Balancing,
    pub(crate) l: Local,
    pub(crate) halo: Halo,
    pub(crate) skel: Skeleton,
    eta2: Vec<f64>,
    /// The global histogram of the marking entries of `eta2` (over ranks; see
    /// [`super::mark::entry_histogram`]).
    entry_hist: Vec<u64>,
    /// The time `entry_hist` took on this rank (counted in the next step's marking).
    entry_hist_s: f64,
    element_errors: Vec<f64>,
    step: usize,
    n0: usize,
    done: bool,
    nv: u64,
    estimate: f64,
}

impl<C: Comm> std::fmt::Debug for RankRun<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankRun")
            .field("rank", &self.comm.rank())
            .field("step", &self.step)
            .finish()
    }
}

/// Everything but the report of the first step (the initial partition is step 0's
/// migration).
struct Figures {
    times: RankTimes,
    moved: Moved,
    migration: MigrationReport,
    balance: Option<drum_loop::LoopReport>,
}

/// The census of a refined mesh ([`RankRun::adapt`]): the owned elements' count and key
/// checksum summed over the ranks, this rank's, and each rank's owned elements.
struct Census {
    sums: [u64; 2],
    local: [u64; 2],
    owned: Vec<f64>,
    /// DRUM's rebalance-point figures, gathered in the same collective.
    carried: Option<Carried>,
}

/// A rebalance point's figures carried on the refinement's agreement
/// ([`Balancing::point_figures`]): this rank's, and every rank's bytes after the agreement's
/// own words.
struct Carried {
    mine: PointFigures,
    all: PerRank<u8>,
    head: usize,
}

/// A step's migration until the set-up's gather sums its census: the census before (summed
/// over the ranks) and this rank's after (count, checksum, moved elements and bytes, owned
/// vertices, unknowns, partitioner seconds as bits).
struct Pending {
    before: [u64; 2],
    local: [u64; 8],
}

/// The global counts of a step, and this rank's owned elements.
struct Counts {
    vertices: u64,
    elements: u64,
    unknowns: u64,
    max_level: u8,
    owned_elements: usize,
}

/// The halo and the skeleton of `l`'s mesh (the skeleton with 1/D from `inv`) in two
/// `allgatherv`: every rank's halo requests travel with its skeleton candidates, and with
/// `extra` (the step's census after the migration): every rank's `extra`, by rank, is
/// returned.
pub(crate) fn setup<C: Comm>(
    comm: &C,
    l: &Local,
    inv: &[f64],
    extra: &[u64],
) -> Result<(Halo, Skeleton, Vec<Vec<u64>>), CommError> {
    let recv = Halo::requests(l);
    let mut halo_w = Writer::default();
    Halo::write_requests(l, &recv, &mut halo_w);
    let mut w = Writer::default();
    // Every rank sends as many numbers (the same code runs everywhere).
    for &x in extra {
        w.u64(x);
    }
    w.usize(halo_w.len());
    w.bytes(halo_w.as_bytes());
    Skeleton::write_candidates(l, &mut w);
    let all = comm.allgatherv_bytes(w.as_bytes())?;
    let mut asked = Vec::with_capacity(comm.size());
    let mut candidates = Vec::with_capacity(comm.size());
    let mut extras = Vec::with_capacity(comm.size());
    for r in 0..comm.size() {
        let mut rd = Reader::new(
            all.get(r),
            "a rank's census, halo requests and skeleton candidates",
        );
        extras.push(
            (0..extra.len())
                .map(|_| rd.u64())
                .collect::<Result<Vec<u64>, _>>()?,
        );
        let n = rd.usize()?;
        asked.push(rd.bytes(n)?);
        candidates.push(rd.bytes(rd.remaining())?);
    }
    let halo = Halo::from_requests(l, recv, &asked)?;
    let skel = Skeleton::build(comm, l, &candidates, inv)?;
    Ok((halo, skel, extras))
}

/// The step's phase times as the serial report gives them: each phase's largest time over
/// the ranks (mark + refine in `refine`; partition, migration and set-up in `assemble`).
fn step_times(ranks: &[RankStep]) -> StepTimes {
    let mut times = StepTimes::default();
    for r in ranks {
        let t = &r.times;
        times.mark = times.mark.max(t.mark);
        times.refine = times.refine.max(t.mark + t.refine);
        times.assemble = times
            .assemble
            .max(t.partition + t.migrate + t.setup + t.assemble);
        times.solve = times.solve.max(t.solve);
        times.estimate = times.estimate.max(t.estimate);
        times.error = times.error.max(t.error);
    }
    times
}

impl<'a, C: Comm> RankRun<'a, C> {
    /// Starts a run on this rank: every rank builds the initial mesh; rank 0 holds its four
    /// elements until step 0's partition spreads them.
    pub fn new(
        comm: C,
        exact: &'a dyn ExactSolution,
        cfg: DistConfig,
        balancer: Balancer,
    ) -> Result<Self, FemError> {
        cfg.adapt.validate()?;
        let comm = Timed::new(comm);
        let (rank, size) = (comm.rank(), comm.size());
        if balancer.ranks().is_some_and(|r| r != size) {
            return Err(FemError::InvalidConfig {
                field: "ranks",
                value: size.to_string(),
                reason: "must equal the number of ranks of the machine description",
            });
        }
        let balancing = balancer.start(&comm)?;
        let mut l = Local::initial(rank, size);
        // A rank's share of the final mesh, with room for an uneven split and the ghosts.
        l.vertex_hint = (cfg.adapt.target_vertices / size)
            .saturating_add(cfg.adapt.target_vertices / size / 8)
            .saturating_add(4096);
        for v in 0..l.mesh.coords.len() {
            if l.mesh.boundary[v] {
                let p = l.mesh.coords[v];
                l.u[v] = crate::problem::dirichlet_value(exact, p[0], p[1])?;
            }
        }
        Ok(RankRun {
            comm,
            cfg,
            exact,
            balancing,
            l,
            halo: Halo::default(),
            skel: Skeleton::default(),
            eta2: Vec::new(),
            entry_hist: Vec::new(),
            entry_hist_s: 0.0,
            element_errors: Vec::new(),
            step: 0,
            n0: 5,
            done: false,
            nv: 5,
            estimate: 0.0,
        })
    }

    /// The rank's communicator.
    pub fn comm(&self) -> &C {
        self.comm.inner()
    }

    /// The number of the step the next [`RankRun::step`] runs.
    pub fn next_step(&self) -> usize {
        self.step
    }

    /// The balancer's machine, for [`Balancer::Drum`].
    pub fn machine(&self) -> Option<&drum_model::Machine> {
        self.balancing.machine()
    }

    /// Stops this rank's monitoring agent ([`Balancer::Drum`]) and reports its cost.
    pub fn stop_monitoring(&mut self) -> Result<Option<drum_loop::LoopSummary>, FemError> {
        Ok(self.balancing.stop()?)
    }

    /// The target of step k under [`Marking::Double`] (as [`crate::Adaptive::step_target`]).
    pub fn step_target(&self, k: usize) -> usize {
        let t = (self.n0 as u128) << k.min(100);
        t.min(self.cfg.adapt.target_vertices as u128) as usize
    }

    /// Runs one step (see [`crate::Adaptive::step`]); `None` once the target was reached.
    /// Rank 0's report holds every rank; the others' `ranks` are empty. The phases mirror the
    /// serial step: mark and refine, the rebalance point (repartition and migration),
    /// assembly, set-up and solve, estimate, errors, report.
    pub fn step(&mut self) -> Result<Option<DistStepReport>, FemError> {
        if self.done {
            return Ok(None);
        }
        if let Some((r, s)) = self.cfg.fail_at
            && r == self.comm.rank()
            && s == self.step
        {
            panic!("rank {r} fails at step {s} (fault injection)");
        }
        let t_step = Instant::now();
        let before = (self.comm.stats().seconds(), self.comm.stats().traffic());
        let prev = (self.nv, self.estimate);
        let mut fig = Figures {
            times: RankTimes::default(),
            moved: Moved::default(),
            migration: MigrationReport {
                elements: 0,
                bytes: 0,
                count_ok: true,
                checksum_ok: true,
            },
            balance: None,
        };
        let census = if self.step == 0 {
            None
        } else if let Some(c) = self.adapt(&mut fig)? {
            Some(c)
        } else {
            return Ok(None);
        };
        self.comm.enter(Phase::Partition);
        let pending = self.repartition(&mut fig, census)?;
        let (sys, mut pre) = self.assemble(&mut fig);
        let extras = self.setup(&mut fig, pre.inv_diag(), &pending.local)?;
        let sums = self.finish_migration(&mut fig, &pending, &extras)?;
        let owned_e: Vec<bool> = (0..self.l.ekey.len())
            .map(|t| self.l.owns_element(t))
            .collect();
        let counts = self.counts(&owned_e, sums);
        self.nv = counts.vertices;
        let (stats, tol) = self.solve(&mut fig, prev, &sys, &mut pre)?;
        let (grad, eta2) = self.estimate(&mut fig, &owned_e);
        let errs = self.errors(&mut fig, &grad, &owned_e);
        let (energy, own_max) = self.sum_up(&mut fig, eta2, errs)?;
        let wall = t_step.elapsed().as_secs_f64();
        let me = RankStep {
            rank: self.comm.rank(),
            owned: counts.owned_elements,
            ghosts: owned_e.len() - counts.owned_elements,
            owned_vertices: self.l.n_owned,
            work: counts.owned_elements as f64,
            times: fig.times,
            wait_s: self.comm.stats().seconds() - before.0,
            collectives: 0,
            messages: 0,
            bytes: 0,
            phases: Phases::default(),
            skeleton: self.skel.size().0,
        };
        self.comm.enter(Phase::Report);
        let mesh_hash = if self.cfg.mesh_hash {
            self.hash()?.map(|h| format!("{h:016x}"))
        } else {
            None
        };
        let (ranks, maxima) =
            self.gather_ranks(me, [own_max, f64::from(counts.max_level)], &before.1)?;
        let base = StepReport {
            step: self.step,
            vertices: counts.vertices as usize,
            elements: counts.elements as usize,
            unknowns: counts.unknowns as usize,
            max_level: maxima[1] as u8,
            error_energy: energy,
            error_max: self.cfg.adapt.errors.then_some(maxima[0]),
            estimate: self.estimate,
            cg_iterations: stats.iterations,
            algebraic_error: stats.algebraic_error,
            cg_tolerance: tol,
            condition_estimate: stats.condition_estimate(),
            times: step_times(&ranks),
        };
        self.step += 1;
        Ok(Some(DistStepReport {
            base,
            mesh_hash,
            wall_s: wall,
            nranks: self.comm.size(),
            ranks,
            migration: fig.migration,
            balance: fig.balance,
        }))
    }

    /// Marks and refines (every step but the first); the census of the refined mesh (see
    /// [`Local::census`]), or `None` once the target was reached.
    fn adapt(&mut self, fig: &mut Figures) -> Result<Option<Census>, FemError> {
        if self.nv >= self.cfg.adapt.target_vertices as u64 {
            self.done = true;
            return Ok(None);
        }
        if self.step > self.cfg.adapt.max_steps {
            return Err(FemError::InvalidConfig {
                field: "max_steps",
                value: self.cfg.adapt.max_steps.to_string(),
                reason: "reached before the target number of vertices",
            });
        }
        self.comm.enter(Phase::Mark);
        let t0 = Instant::now();
        let target = match self.cfg.adapt.marking {
            Marking::Double => self.step_target(self.step),
            Marking::Doerfler(_) => self.cfg.adapt.target_vertices,
        } as u64;
        let bits = if self.comm.size() == 1 {
            // One rank holds the whole mesh: the serial marking is the same marks.
            crate::mark::mark(
                &self.l.mesh,
                &self.eta2,
                self.cfg.adapt.marking,
                target as usize,
            )
            .bits
        } else if target > self.nv {
            super::mark::mark(
                &self.comm,
                &self.l,
                &self.eta2,
                self.cfg.adapt.marking,
                target - self.nv,
                Some(&self.entry_hist),
            )?
        } else {
            vec![0u8; self.l.ekey.len()]
        };
        fig.times.mark = t0.elapsed().as_secs_f64() + self.entry_hist_s;
        self.comm.enter(Phase::Refine);
        let t0 = Instant::now();
        self.eta2 = Vec::new();
        self.entry_hist = Vec::new();
        let refined = self.l.refine(bits, self.step, self.exact);
        // The census, and every rank's owned elements (for the balancer's keep test), ride on
        // the agreement that every rank refined.
        let [c0, c1] = refined.as_ref().map_or([0, 0], |c| *c);
        let mut sums = vec![0u64; 2 + self.comm.size()];
        sums[..2].copy_from_slice(&[c0, c1]);
        sums[2 + self.comm.rank()] = c0;
        // So do DRUM's rebalance-point figures (the point then needs no gather of its own).
        let figures = (self.comm.size() > 1)
            .then(|| self.balancing.point_figures(None, self.l.ekey.len()))
            .flatten();
        let carried = match figures {
            Some(mine) => {
                let (all, head) = agreed_gathering(&self.comm, refined, &mut sums, mine.bytes())?;
                Some(Carried { mine, all, head })
            }
            None => {
                self.agreed_summing(refined, &mut sums)?;
                None
            }
        };
        fig.times.refine = t0.elapsed().as_secs_f64();
        Ok(Some(Census {
            sums: [sums[0], sums[1]],
            local: [c0, c1],
            owned: sums[2..].iter().map(|&c| c as f64).collect(),
            carried,
        }))
    }

    /// The step's counts from the global sums `c` (vertices, elements, unknowns; summed with
    /// the census after the migration, [`RankRun::repartition`]); the deepest level is this
    /// rank's (the report's is the largest over the ranks, from [`RankRun::gather_ranks`]).
    fn counts(&self, owned_e: &[bool], c: [u64; 3]) -> Counts {
        let owned_elements = owned_e.iter().filter(|&&o| o).count();
        let max_level = (self.l.mesh.level.iter().zip(owned_e))
            .filter(|x| *x.1)
            .map(|x| *x.0)
            .max()
            .unwrap_or(0);
        Counts {
            vertices: c[0],
            elements: c[1],
            unknowns: c[2],
            max_level,
            owned_elements,
        }
    }

    /// Assembles the own rows and the preconditioner's diagonal (no communication).
    fn assemble(&mut self, fig: &mut Figures) -> (System, Multilevel) {
        self.comm.enter(Phase::Assemble);
        let t0 = Instant::now();
        let n_own = self.l.n_owned;
        let mut sys = System::default();
        if self.comm.size() == 1 {
            sys.assemble_into(&self.l.mesh, &self.l.u);
        } else {
            sys.assemble_rows(&self.l.mesh, &self.l.u, |i| i < n_own);
        }
        let pre = Multilevel::new(&self.l.mesh, &sys);
        fig.times.assemble = t0.elapsed().as_secs_f64();
        (sys, pre)
    }

    /// The halo and the skeleton of this mesh in two `allgatherv`: every rank's halo requests
    /// with its skeleton candidates (and `extra`: every rank's, by rank, is returned), then
    /// the skeleton's second round with the diagonal.
    fn setup(
        &mut self,
        fig: &mut Figures,
        inv: &[f64],
        extra: &[u64],
    ) -> Result<Vec<Vec<u64>>, CommError> {
        self.comm.enter(Phase::Setup);
        let t0 = Instant::now();
        let (halo, skel, extras) = setup(&self.comm, &self.l, inv, extra)?;
        self.halo = halo;
        self.skel = skel;
        fig.times.setup = t0.elapsed().as_secs_f64();
        Ok(extras)
    }

    /// Solves (nested iteration from the prolongated solution, stopped against the predicted
    /// estimate of this mesh); the statistics and tolerance.
    fn solve(
        &mut self,
        fig: &mut Figures,
        prev: (u64, f64),
        sys: &System,
        pre: &mut Multilevel,
    ) -> Result<(SolveStats, f64), FemError> {
        let n_own = self.l.n_owned;
        self.comm.enter(Phase::Solve);
        let t0 = Instant::now();
        let tol = if self.step == 0 {
            0.0
        } else {
            let ratio = prev.0 as f64 / self.nv as f64;
            self.cfg.adapt.cg.tol_factor * prev.1 * ratio.sqrt()
        };
        let mut u = std::mem::take(&mut self.l.u);
        let stats = {
            let mut ops = RankOps {
                comm: &self.comm,
                l: &self.l,
                sys,
                pre,
                skel: &mut self.skel,
                halo: &self.halo,
                n_owned: n_own,
            };
            // Fresh work vectors, freed with the step's system (as in the serial loop).
            pcg_with(
                &mut ops,
                &mut u,
                tol,
                &self.cfg.adapt.cg,
                &mut CgWork::default(),
            )?
        };
        // (CG kept the ghost entries of u equal to their owners'.)
        self.l.u = u;
        fig.times.solve = t0.elapsed().as_secs_f64();
        Ok((stats, tol))
    }

    /// The estimator on the owned elements (neighbours from the ghost layer): the gradients
    /// for the errors and this rank's part of η² (summed over the ranks in
    /// [`RankRun::sum_up`]).
    fn estimate(&mut self, fig: &mut Figures, owned_e: &[bool]) -> (Vec<[f64; 2]>, ExactSum) {
        self.comm.enter(Phase::Estimate);
        let t0 = Instant::now();
        let mut grad = Vec::new();
        let mut eta2 = Vec::new();
        let (mesh, u) = (&self.l.mesh, &self.l.u);
        let local = if self.comm.size() == 1 {
            // Alone, a rank owns every element.
            estimate_part(mesh, u, self.exact, &mut grad, &mut eta2, |_| true)
        } else {
            estimate_part(mesh, u, self.exact, &mut grad, &mut eta2, |t| owned_e[t])
        };
        self.eta2 = eta2;
        fig.times.estimate = t0.elapsed().as_secs_f64();
        (grad, local)
    }

    /// This rank's part of the errors against the exact solution (energy and largest vertex
    /// error), if asked.
    fn errors(
        &mut self,
        fig: &mut Figures,
        grad: &[[f64; 2]],
        owned_e: &[bool],
    ) -> Result<Option<ErrorsPart>, FemError> {
        if !self.cfg.adapt.errors {
            return Ok(None);
        }
        self.comm.enter(Phase::Error);
        let t0 = Instant::now();
        let n_own = self.l.n_owned;
        let pe = if self.cfg.adapt.element_errors {
            Some(&mut self.element_errors)
        } else {
            None
        };
        let (mesh, u, exact) = (&self.l.mesh, &self.l.u, self.exact);
        let part = if self.comm.size() == 1 {
            // Alone, a rank owns every vertex and element.
            errors_part(mesh, u, grad, exact, pe, |_| true, |_| true)
        } else {
            errors_part(mesh, u, grad, exact, pe, |v| v < n_own, |t| owned_e[t])
        };
        fig.times.error = t0.elapsed().as_secs_f64();
        part.map(Some)
    }

    /// The step's sums in one reduction that also agrees on the errors' outcome: η (kept for
    /// the next step's tolerance) and the energy error; returns the energy error and this
    /// rank's largest vertex error (the largest over the ranks comes with the rank figures).
    fn sum_up(
        &mut self,
        fig: &mut Figures,
        eta2: ExactSum,
        errs: Result<Option<ErrorsPart>, FemError>,
    ) -> Result<(Option<f64>, f64), FemError> {
        self.comm.enter(Phase::Estimate);
        let t0 = Instant::now();
        let energy2 = errs.as_ref().ok().and_then(|e| e.as_ref()?.energy2.clone());
        let mut sums: Vec<u64> = eta2.words().to_vec();
        sums.extend(energy2.as_ref().map_or([0; WORDS], ExactSum::words));
        // The next marking's bound rides on this reduction (over ranks only).
        // Its time is the marking's (added to the next step's).
        let t_hist = Instant::now();
        if self.comm.size() > 1 {
            let double = matches!(self.cfg.adapt.marking, Marking::Double);
            sums.extend(super::mark::entry_histogram(&self.l, &self.eta2, double));
        }
        self.entry_hist_s = t_hist.elapsed().as_secs_f64();
        let agreed = self.agreed_summing(errs, &mut sums)?;
        self.entry_hist = sums.split_off(2 * WORDS);
        self.estimate = ExactSum::from_words(&sums[..WORDS]).value().sqrt();
        let energy = energy2.map(|_| ExactSum::from_words(&sums[WORDS..]).value().sqrt());
        fig.times.estimate += t0.elapsed().as_secs_f64() - self.entry_hist_s;
        Ok((energy, agreed.map_or(0.0, |e| e.max_vertex)))
    }

    /// Partitions the owned elements (all elements, after a refinement) and moves them,
    /// checking that no element is lost or duplicated; returns the global numbers of vertices,
    /// elements and unknowns of the new layout (in the census's reduction).
    fn repartition(
        &mut self,
        fig: &mut Figures,
        mut census: Option<Census>,
    ) -> Result<Pending, FemError> {
        let t0 = Instant::now();
        let carried = census.as_mut().and_then(|c| c.carried.take());
        let ne = self.l.ekey.len();
        let several = self.comm.size() > 1;
        // (A rank alone has nowhere to send its elements.)
        let keep = census
            .as_ref()
            .is_some_and(|c| !several || self.balancing.keeps(&c.owned));
        let census_before = census.as_ref().map(|c| c.local);
        let before = match census {
            Some(c) => c.sums,
            None if several => {
                let mut c = self.l.census();
                self.comm.allreduce_u64(ReduceOp::Sum, &mut c)?;
                c
            }
            None => [0, 0],
        };
        // Every element stays here unless the partitioner (or a test's shift) says otherwise.
        // The centroids and the ranks array are made only for a partitioner that runs: DRUM's
        // policy decides from the counts alone, and keeps the partition at most points.
        let rank = self.comm.rank() as u32;
        let mut parts = Vec::new();
        if several && !keep {
            let tp = Instant::now();
            let mut tc = 0.0;
            let remaining = self.cfg.remaining_after(self.step, |j| self.step_target(j));
            self.balancing.set_remaining_steps(remaining);
            let mesh = &self.l.mesh;
            // Unit weights (one per element): `None` says so without an array of ones.
            let fill = |xy: &mut Vec<f64>, p: &mut Vec<u32>| {
                let tf = Instant::now();
                xy.resize(2 * ne, 0.0);
                mesh.centroids_into(xy);
                p.resize(ne, rank);
                tc = tf.elapsed().as_secs_f64();
                2
            };
            let (balance, new) = match carried {
                Some(Carried { mine, all, head }) => {
                    let all: Vec<&[u8]> = all.iter().map(|b| &b[head..]).collect();
                    (self.balancing).rebalance_lazy_gathered(&self.comm, mine, &all, ne, None, fill)
                }
                None => self.balancing.rebalance_lazy(&self.comm, ne, None, fill),
            }?;
            fig.balance = balance;
            if let Some(new) = new {
                parts = new;
            }
            if std::env::var_os("FEM_DEBUG_TIMES").is_some() {
                eprintln!(
                    "    partition: census {:.2} ms, centroids {:.2} ms, rebalance point {:.2} ms",
                    (tp - t0).as_secs_f64() * 1e3,
                    tc * 1e3,
                    (tp.elapsed().as_secs_f64() - tc) * 1e3
                );
            }
        }
        if parts.is_empty() && self.cfg.shift_at.is_some() {
            parts = vec![rank; ne];
        }
        fig.times.partition = t0.elapsed().as_secs_f64();
        self.comm.enter(Phase::Migrate);
        let t0 = Instant::now();
        // Nothing moves when the balancer kept the partition, or DRUM's policy did (the same
        // decision on every rank): no migration round.
        let kept = keep || (fig.balance.as_ref()).is_some_and(|b| !b.decision.rebalance);
        let shifted = self.shift(&mut parts);
        let kept = kept && !shifted;
        let debug = std::env::var_os("FEM_DEBUG_TIMES").is_some();
        let cpu0 = if debug { thread_cpu_seconds() } else { 0.0 };
        fig.moved = self
            .l
            .rebuild(&self.comm, (!kept).then_some(parts.as_slice()))?;
        fig.times.migrate = t0.elapsed().as_secs_f64();
        if debug {
            let cpu = thread_cpu_seconds() - cpu0;
            eprintln!(
                "    migrate: rank {} step {} sent {} elements: {:.2} ms, {:.2} ms CPU",
                self.comm.rank(),
                self.step,
                fig.moved.elements,
                fig.times.migrate * 1e3,
                cpu * 1e3
            );
        }
        // The census after (the refinement's when nothing moved: the owned elements are the
        // same), what moved and the step's counts (the owned vertices are `0..n_owned`),
        // summed in the set-up's gather ([`RankRun::finish_migration`]).
        let [c0, c1] = match census_before {
            Some(c) if kept => c,
            _ => self.l.census(),
        };
        let n_own = self.l.n_owned;
        let unknowns = self.l.mesh.boundary[..n_own]
            .iter()
            .filter(|&&b| !b)
            .count();
        let local = [
            c0,
            c1,
            fig.moved.elements as u64,
            fig.moved.bytes as u64,
            n_own as u64,
            unknowns as u64,
            fig.times.partition.to_bits(),
            // What a repartition cost here in all (0 for a kept partition).
            if kept {
                0.0f64.to_bits()
            } else {
                (fig.times.partition + fig.times.migrate).to_bits()
            },
        ];
        Ok(Pending { before, local })
    }

    /// [`DistConfig::shift_at`]: at its step, every rank but the last gives the last
    /// fraction of its elements to the next rank (`parts`); whether it did.
    fn shift(&self, parts: &mut [u32]) -> bool {
        let Some((step, fraction)) = self.cfg.shift_at else {
            return false;
        };
        let (rank, size) = (self.comm.rank(), self.comm.size());
        if step != self.step || size == 1 {
            return false;
        }
        let ne = parts.len();
        let keep = ne - ((ne as f64 * fraction.clamp(0.0, 1.0)) as usize).min(ne);
        for (t, p) in parts.iter_mut().enumerate() {
            *p = if t < keep || rank + 1 == size {
                rank
            } else {
                rank + 1
            } as u32;
        }
        true
    }

    /// The migration's checks and figures from every rank's census after it (`extras`, by
    /// rank, from the set-up's gather): the step's counts (vertices, elements, unknowns).
    fn finish_migration(
        &mut self,
        fig: &mut Figures,
        pending: &Pending,
        extras: &[Vec<u64>],
    ) -> Result<[u64; 3], FemError> {
        let several = self.comm.size() > 1;
        let mut sums = [0u64; 6];
        let (mut slowest, mut slowest_all) = (0.0f64, 0.0f64);
        for e in extras {
            for (s, &x) in sums.iter_mut().zip(e) {
                *s = s.wrapping_add(x);
            }
            slowest = slowest.max(f64::from_bits(e[6]));
            slowest_all = slowest_all.max(f64::from_bits(e[7]));
        }
        let before = pending.before;
        let after = [sums[0], sums[1]];
        let moved = [sums[2], sums[3]];
        let counts = [sums[4], sums[0], sums[5]];
        if self.balancing.wants_migration_costs() {
            // δ and bytes per unit of weight (one per element) for Lan's cost next time, the
            // same on every rank so every rank decides alike: δ's fixed part is the slowest
            // rank's rebalance point where the partition was kept; a repartition of a mesh
            // large enough gives the part per element, from the slowest rank's partitioner,
            // migration and rebuild (the transfer is Lan's α + βW).
            let elements = after[0];
            let repartitioned = slowest_all > 0.0;
            if repartitioned && elements >= COST_PER_ELEMENT_FROM {
                self.balancing
                    .record_repartition(slowest_all, elements as f64);
            }
            let fixed = if repartitioned { f64::NAN } else { slowest };
            self.balancing
                .record_migration(fixed, moved[1] as f64, moved[0] as f64);
        }
        fig.migration = MigrationReport {
            elements: moved[0],
            bytes: moved[1],
            count_ok: !several || before[0] == after[0],
            checksum_ok: !several || before[1] == after[1],
        };
        if !(fig.migration.count_ok && fig.migration.checksum_ok) {
            return Err(FemError::Migration {
                step: self.step,
                rank: self.comm.rank(),
                detail: format!(
                    "{} elements (checksum {:016x}) before, {} (checksum {:016x}) after",
                    before[0], before[1], after[0], after[1]
                ),
            });
        }
        Ok(counts)
    }

    /// Agrees on a local result before the next collective (`part_api::agree`, the
    /// workspace's one protocol): if any rank failed, every rank returns an error, the failing
    /// rank its own, the others [`FemError::PeerFailed`] naming the lowest failed rank.
    pub fn agreed<T>(&self, r: Result<T, FemError>) -> Result<T, FemError> {
        self.agreed_summing(r, &mut [])
    }

    /// [`RankRun::agreed`] that also sums `sums` over the ranks in the same reduction.
    fn agreed_summing<T>(&self, r: Result<T, FemError>, sums: &mut [u64]) -> Result<T, FemError> {
        let rank = self.comm.rank();
        match part_api::agree(&self.comm, r, sums)? {
            Ok(x) => Ok(x),
            Err(part_api::Failed::Here(e)) => Err(e),
            Err(part_api::Failed::Elsewhere { first, .. }) => Err(FemError::PeerFailed {
                rank,
                failed: first,
            }),
        }
    }

    /// Every rank's figures to every rank (one `allgatherv`), with each rank's calls, messages
    /// and bytes since `before` (this gather's own cost added to each rank's report phase) and
    /// the largest of each of `maxima` over the ranks. Rank 0 keeps the figures; the other
    /// ranks return none.
    fn gather_ranks<const M: usize>(
        &self,
        mut me: RankStep,
        maxima: [f64; M],
        before: &[Traffic; Phase::ALL.len()],
    ) -> Result<(Vec<RankStep>, [f64; M]), CommError> {
        let now = self.comm.stats().traffic();
        let mut w = Writer::default();
        for x in maxima {
            w.f64(x);
        }
        w.u64(me.owned as u64);
        w.u64(me.ghosts as u64);
        w.u64(me.owned_vertices as u64);
        w.f64(me.work);
        for x in me.times.to_array() {
            w.f64(x);
        }
        w.f64(me.wait_s);
        for (n, b) in now.iter().zip(before) {
            let t = n.since(*b);
            w.u64(t.collectives);
            w.u64(t.messages);
            w.u64(t.bytes);
            w.u64(t.wait_us);
        }
        w.u64(me.skeleton as u64);
        let all = self.comm.allgatherv_bytes(w.as_bytes())?;
        let mut ranks = Vec::with_capacity(self.comm.size());
        let mut largest = maxima;
        let others = (self.comm.size() - 1) as u64;
        for r in 0..self.comm.size() {
            let piece = all.get(r);
            let mut rd = Reader::new(piece, "a rank's step figures");
            for m in &mut largest {
                *m = m.max(rd.f64()?);
            }
            if self.comm.rank() != 0 {
                continue;
            }
            me.rank = r;
            me.owned = rd.u64()? as usize;
            me.ghosts = rd.u64()? as usize;
            me.owned_vertices = rd.u64()? as usize;
            me.work = rd.f64()?;
            let mut t = [0.0; RankTimes::FIELDS];
            for x in &mut t {
                *x = rd.f64()?;
            }
            me.times = RankTimes::from_array(t);
            me.wait_s = rd.f64()?;
            for p in &mut me.phases.0 {
                *p = Traffic {
                    collectives: rd.u64()?,
                    messages: rd.u64()?,
                    bytes: rd.u64()?,
                    wait_us: rd.u64()?,
                };
            }
            me.skeleton = rd.u64()? as usize;
            // This gather: one call, and the rank's piece sent to every other rank.
            me.phases.0[Phase::Report as usize] = me.phases.get(Phase::Report).plus(Traffic {
                collectives: 1,
                messages: others,
                bytes: others * piece.len() as u64,
                wait_us: 0,
            });
            let total = me.phases.total();
            me.collectives = total.collectives;
            me.messages = total.messages;
            me.bytes = total.bytes;
            ranks.push(me.clone());
        }
        Ok((ranks, largest))
    }

    /// The mesh hash, on rank 0.
    fn hash(&self) -> Result<Option<u64>, CommError> {
        let mut recs: Vec<hash::Record> = (0..self.l.ekey.len())
            .filter(|&t| self.l.owns_element(t))
            .map(|t| hash::record(&self.l.mesh, t))
            .collect();
        recs.sort_unstable();
        let flat: Vec<u64> = recs.iter().flatten().copied().collect();
        let Some(all) = self.comm.gatherv(0, &flat)? else {
            return Ok(None);
        };
        let runs: Vec<Vec<hash::Record>> = all
            .iter()
            .map(|p| {
                p.chunks_exact(6)
                    .map(|c| c.try_into().expect("six words"))
                    .collect()
            })
            .collect();
        Ok(Some(hash::fnv(hash::merge_sorted(runs))))
    }

    /// The current local part (for output).
    pub fn local_mesh(&self) -> (&crate::Mesh, Vec<bool>) {
        (
            &self.l.mesh,
            (0..self.l.ekey.len())
                .map(|t| self.l.owns_element(t))
                .collect(),
        )
    }

    /// Writes this rank's owned elements of the last step as the piece
    /// `dir/step_SS_rRRRR.vtu`, and (rank 0) the parallel file `dir/step_SS.pvtu` that joins
    /// the pieces. Returns the `.pvtu` file name on rank 0.
    pub fn write_vtu(
        &self,
        dir: &std::path::Path,
        step: usize,
    ) -> Result<Option<String>, FemError> {
        let (mesh, owned) = self.local_mesh();
        let name = |r: usize| format!("step_{step:02}_r{r:04}.vtu");
        let fields = crate::output::VtuFields {
            solution: &self.l.u,
            indicators: &self.eta2,
            element_errors: &self.element_errors,
            rank: self.comm.rank() as u32,
        };
        let written = crate::output::write_vtu_piece(
            &dir.join(name(self.comm.rank())),
            mesh,
            &owned,
            &fields,
        );
        self.agreed(written)?;
        if self.comm.rank() != 0 {
            return Ok(None);
        }
        let pieces: Vec<String> = (0..self.comm.size()).map(name).collect();
        let pvtu = format!("step_{step:02}.pvtu");
        let with_error = self.element_errors.len() == self.eta2.len();
        crate::output::write_pvtu(&dir.join(&pvtu), &pieces, with_error)?;
        Ok(Some(pvtu))
    }

    /// The whole mesh on rank 0, every element with its own three vertices (for pictures),
    /// and the rank that owns each element; `None` on the other ranks.
    pub fn gather_partition(&self) -> Result<Option<(crate::Mesh, Vec<u32>)>, FemError> {
        let mut flat: Vec<f64> = Vec::new();
        for t in 0..self.l.ekey.len() {
            if self.l.owns_element(t) {
                for v in self.l.mesh.tri[t] {
                    flat.extend(self.l.mesh.coords[v as usize]);
                }
                flat.push(f64::from(self.l.mesh.level[t]));
            }
        }
        let Some(all) = self.comm.gatherv(0, &flat)? else {
            return Ok(None);
        };
        let mut m = crate::Mesh::unit_square();
        m.coords.clear();
        m.parents.clear();
        m.boundary.clear();
        m.tri.clear();
        m.nbr.clear();
        m.level.clear();
        let mut ranks = Vec::new();
        for (r, piece) in all.iter().enumerate() {
            for e in piece.chunks_exact(7) {
                let v0 = m.coords.len() as u32;
                for i in 0..3 {
                    m.coords.push([e[2 * i], e[2 * i + 1]]);
                    m.parents.push([crate::mesh::NONE; 2]);
                    m.boundary.push(false);
                }
                m.tri.push([v0, v0 + 1, v0 + 2]);
                m.nbr.push([crate::mesh::NONE; 3]);
                m.level.push(e[6] as u8);
                ranks.push(r as u32);
            }
        }
        Ok(Some((m, ranks)))
    }

    /// Which local vertices this rank owns.
    pub fn owned_vertices(&self) -> Vec<bool> {
        (0..self.l.mesh.coords.len())
            .map(|v| v < self.l.n_owned)
            .collect()
    }

    /// The solution on the local vertices.
    pub fn solution(&self) -> &[f64] {
        &self.l.u
    }

    /// The squared indicators of the local elements (valid on owned ones).
    pub fn indicators(&self) -> &[f64] {
        &self.eta2
    }

    /// Per-element squared energy errors of the last step (owned elements; empty unless
    /// `element_errors`).
    pub fn element_errors(&self) -> &[f64] {
        &self.element_errors
    }
}

/// Conjugate gradients over one rank's rows.
struct RankOps<'a, C: Comm> {
    comm: &'a Timed<C>,
    l: &'a Local,
    sys: &'a System,
    pre: &'a mut Multilevel,
    skel: &'a mut Skeleton,
    halo: &'a Halo,
    /// This rank's rows are 0..n_owned.
    n_owned: usize,
}

impl<C: Comm> CgOps for RankOps<'_, C> {
    type Error = CommError;
    fn len(&self) -> usize {
        self.sys.num_rows()
    }
    fn rhs(&self) -> &[f64] {
        self.sys.rhs()
    }
    fn matvec(&mut self, x: &mut [f64], y: &mut [f64], dot: bool) -> Result<ExactSum, CommError> {
        if self.comm.size() == 1 {
            return Ok(self.sys.apply_rows(x, y, dot, 0..self.n_owned));
        }
        // The halo travels while the rows that do not read it are computed.
        let halo_rows = &self.sys.halo_rows;
        let started = self.halo.start(self.comm, x)?;
        let mut sum = self
            .sys
            .apply_rows_except(x, y, dot, self.n_owned, halo_rows);
        self.halo.finish(self.comm, started, x)?;
        self.sys.apply_rows_listed(x, y, dot, halo_rows, &mut sum);
        Ok(sum)
    }
    fn precondition(&mut self, r: &[f64], z: &mut [f64]) -> Result<(), CommError> {
        self.skel.apply(self.comm, self.pre, self.l, r, z)
    }
    fn local_dot(&self, a: &[f64], b: &[f64]) -> ExactSum {
        ExactSum::dot(&a[..self.n_owned], &b[..self.n_owned])
    }
    fn global(&mut self, s: &mut [ExactSum]) -> Result<(), CommError> {
        global_sums(self.comm, s)
    }
}

/// [`RankRun::agreed_summing`] over `comm` in one `allgatherv` that also carries `extra` (any bytes)
/// from every rank to every rank: the same outcome and sums, the failed ranks read from
/// every rank's flag (no second round), and the gathered messages with the offset of the
/// extra bytes in each.
fn agreed_gathering<C: Comm, T>(
    comm: &C,
    r: Result<T, FemError>,
    sums: &mut [u64],
    extra: &[u8],
) -> Result<(PerRank<u8>, usize), FemError> {
    let mut w = Writer::default();
    w.u8(u8::from(r.is_err()));
    sums.iter().for_each(|&x| w.u64(x));
    let head = w.len();
    w.bytes(extra);
    let all = comm.allgatherv_bytes(w.as_bytes())?;
    sums.fill(0);
    let mut failed = None;
    for q in 0..all.ranks() {
        let mut rd = Reader::new(all.get(q), "a rank's refinement agreement");
        if rd.u8().map_err(CommError::from)? != 0 {
            failed.get_or_insert(q);
        }
        for s in sums.iter_mut() {
            *s = s.wrapping_add(rd.u64().map_err(CommError::from)?);
        }
    }
    match (r, failed) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(first)) => Err(FemError::PeerFailed {
            rank: comm.rank(),
            failed: first,
        }),
        (Ok(_), None) => Ok((all, head)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::{ThreadComm, ThreadOptions};

    fn bad() -> FemError {
        FemError::InvalidConfig {
            field: "test",
            value: String::new(),
            reason: "injected",
        }
    }

    /// The gathering agreement sums like `part_api::agree` (wrapping, as the reduction does),
    /// hands every rank every rank's extra bytes, and when ranks fail gives each failed rank
    /// its own error and the others the lowest failed rank, in its one collective.
    #[test]
    fn the_gathering_agreement_sums_carries_and_names_the_failed() {
        for failing in [vec![], vec![1], vec![2, 1]] {
            let out = ThreadComm::run(3, &ThreadOptions::default(), |comm| {
                let comm = Timed::new(comm);
                let calls = |c: &Timed<ThreadComm>| -> u64 {
                    c.stats().traffic().iter().map(|t| t.collectives).sum()
                };
                let me = comm.rank();
                let r = if failing.contains(&me) {
                    Err(bad())
                } else {
                    Ok(me)
                };
                let mut sums = [me as u64 + 1, u64::MAX];
                let extra = vec![me as u8; me + 1];
                let before = calls(&comm);
                let got = agreed_gathering(&comm, r, &mut sums, &extra)
                    .map(|(all, head)| all.iter().map(|b| b[head..].to_vec()).collect::<Vec<_>>());
                let after = calls(&comm);
                (got, sums, after - before)
            })
            .unwrap();
            for (me, (got, sums, calls)) in out.into_iter().enumerate() {
                assert_eq!(calls, 1, "rank {me}: {calls} collectives");
                match got {
                    Ok(extras) => {
                        assert!(failing.is_empty());
                        assert_eq!(sums, [6, u64::MAX - 2]);
                        assert_eq!(extras, vec![vec![0], vec![1, 1], vec![2, 2, 2]]);
                    }
                    Err(FemError::InvalidConfig { .. }) => assert!(failing.contains(&me)),
                    Err(FemError::PeerFailed { rank, failed }) => {
                        assert!(!failing.contains(&me));
                        assert_eq!((rank, failed), (me, 1));
                    }
                    Err(e) => panic!("rank {me}: {e}"),
                }
            }
        }
    }

    /// Under double marking the steps left after step k are those whose targets are still
    /// below the run's; Dörfler marking and the `Next` horizon say none is known.
    #[test]
    fn remaining_steps_follow_the_double_marking_targets() {
        let adapt = AdaptConfig {
            target_vertices: 100,
            ..AdaptConfig::default()
        };
        let mut cfg = DistConfig::new(adapt);
        // Targets 5, 10, 20, 40, 80, 100, 100, ...
        let target = |j: usize| (5usize << j).min(100);
        assert_eq!(cfg.remaining_after(0, target), Some(5));
        assert_eq!(cfg.remaining_after(3, target), Some(2));
        assert_eq!(cfg.remaining_after(5, target), Some(0));
        cfg.gain_horizon = GainHorizon::Next;
        assert_eq!(cfg.remaining_after(0, target), None);
        cfg.gain_horizon = GainHorizon::Run;
        cfg.adapt.marking = Marking::Doerfler(0.5);
        assert_eq!(cfg.remaining_after(0, target), None);
    }
}
