//! Lan, Taylor & Bryan (2001): distributed dynamic load balancing in two phases, global
//! (between groups of processors joined by a slow network) and local (inside each group).
//!
//! This is the one module of the crate that uses the rebalance test of the runtime
//! (`drum_loop::rebalance`: Lan's Gain, Cost and γ, Watts' efficiency).

use crate::boxes::{BoxList, BoxPartition, LevelBox, Patch, normalise_capacities};
use crate::partition::{Ace, Sfc};
use crate::{Rect, SamrError};
use comm::{Comm, LinkProbe};
use drum_loop::rebalance::{Decision, Migration, Observation, measure_group_link};
use hier_part::Plan;
use hsfc::Hsfc;
use part_api::{Partitioner, Points, Serial};
use serde::Serialize;

/// The rebalance test's settings and link model (`drum_loop::rebalance`), re-exported from
/// here alone.
pub use drum_loop::rebalance::{LinkModel, Policy};

/// Bytes that move per unit of level-0 work: one `f64` per cell (level-0 work is one per cell
/// and step), Lan's `W` in `Cost = α + β·W + δ`.
pub const BYTES_PER_CELL: f64 = 8.0;

/// How each group spreads its boxes over its processors (the local phase, Lan's "parallel
/// DLB scheme": evenly inside a homogeneous group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalMethod {
    /// [`Ace`] with the group's processors' capacities.
    Ace,
    /// [`Sfc`] into equal parts.
    Sfc,
}

/// Where α and β come from.
#[derive(Debug, Clone)]
pub enum LinkSource {
    /// Given (a modelled link, or a measurement made elsewhere).
    Fixed(LinkModel),
    /// Measured between the groups, the children of the root of `plan`
    /// (`drum_loop::rebalance::measure_group_link`: "the scheme sends two messages between
    /// groups, and calculates the network performance parameters α and β", Lan §4.2), at
    /// the first global phase and then at every `every`-th (1: at each, as in the paper;
    /// a probe costs many small steps of a small run).
    Measured {
        /// The machine (its ranks are the run's).
        plan: Box<Plan>,
        /// The probe sizes and repeats.
        probe: LinkProbe,
        /// Measure at every this many global phases (at least 1).
        every: usize,
    },
}

/// Where the times of the test come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    /// `T(t)`: the wall time of the last level-0 step; `δ`: the wall time of the last global
    /// redistribution (0 before the first), both the slowest rank's.
    Measured,
    /// A model: `T(t) = seconds_per_work · max_r W_r / (R · c_r)` (the slowest rank at
    /// `seconds_per_work` per unit of work when its capacity share `c_r` is `1/R`) and a fixed
    /// `δ`. Deterministic, for tests and simulations.
    Model {
        /// Seconds per unit of work of an average processor.
        seconds_per_work: f64,
        /// δ (s).
        delta: f64,
    },
}

/// The settings of the two-phase scheme.
#[derive(Debug, Clone)]
pub struct TwoPhaseConfig {
    /// Group of each rank (`0..G`, every group non-empty): the children of the machine
    /// tree's root (`Plan::rank_groups(1)`).
    pub groups: Vec<u32>,
    /// Relative performance `p` of each rank (finite, > 0).
    pub capacities: Vec<f64>,
    /// The local phase's partitioner.
    pub local: LocalMethod,
    /// Level-0 cells per side of a level-0 grid, the unit the global phase moves.
    pub block: i64,
    /// `γ` and the imbalance trigger `eff_min` of the global phase.
    pub policy: Policy,
    /// α and β.
    pub link: LinkSource,
    /// T(t) and δ.
    pub clock: Clock,
}

/// One group's figures at a global phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupFigures {
    /// The group.
    pub group: u32,
    /// Its ranks.
    pub ranks: Vec<usize>,
    /// `W_group(t) = Σ_i W^i_group(t) · N^i_iter(t)` (Lan eq. 2–3): cells × steps per level-0
    /// step over all levels.
    pub work: u64,
    /// The part of it on levels ≥ 1.
    pub fine_work: u64,
    /// `n · p`: the sum of its processors' relative performance.
    pub capacity: f64,
}

/// The figures and outcome of one global phase (Lan §4.2–4.4).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GlobalPhase {
    /// Each group.
    pub groups: Vec<GroupFigures>,
    /// `T(t)` (s).
    pub step_time: f64,
    /// α (s).
    pub alpha: f64,
    /// β (s/B).
    pub beta: f64,
    /// δ (s).
    pub delta: f64,
    /// Watts' `eff` over the groups (the imbalance trigger) and its threshold.
    pub eff: f64,
    /// The threshold.
    pub eff_min: f64,
    /// `Gain` (s), eq. (4) over the groups' utilisations `W_group / (n·p)`.
    pub gain: f64,
    /// `Cost` (s), eq. (1).
    pub cost: f64,
    /// γ.
    pub gamma: f64,
    /// `W` (bytes) in the cost.
    pub bytes: f64,
    /// Redistribute?
    pub rebalance: bool,
    /// Why (`Balanced`, `Imbalance`, `NotProfitable`).
    pub reason: String,
    /// The decision as one line.
    pub decision: String,
    /// Level-0 grids that changed group.
    pub moved_grids: usize,
    /// Why the link model is not a fresh measurement, when it is not (measured at an earlier
    /// phase, or the probe's timings gave no line).
    pub link_note: Option<String>,
}

/// Lan, Taylor & Bryan's distributed DLB (§4) over a box hierarchy.
///
/// The level-0 domain is cut into fixed square grids (`block` cells per side); each belongs to
/// one group, and the groups' grids are consecutive runs along `hsfc`'s Hilbert curve, so
/// that moving work between groups moves the boundaries between the runs. Finer boxes are cut
/// along the grids beneath them and belong to the group of their grid when they are made (at
/// a regrid): children live in their parent's group.
///
/// - **Global phase**, after each level-0 step ([`TwoPhase::global`]): the groups' workloads
///   `W_group` over all levels (eq. 2–3) against their capacities `n·p`; when Watts'
///   efficiency is below `eff_min` and `Gain > γ·Cost` (eq. 4 and 1, from
///   `drum_loop::rebalance::Policy::decide`), only level-0 grids move between groups: the runs
///   are re-cut so that each group's columns (its level-0 grids with the finer work above
///   them) come to `W · n_g p_g / Σ n p` (Lan: the workload split "in proportion to
///   `n_A p_A`" by "moving the groups' boundaries"); the finer boxes stay where they are and
///   follow their grids at the next regrid.
/// - **Local phase**, inside each group: the group's boxes over its processors by the local
///   partitioner. In this kernel the hierarchy changes only at regrids (every N level-0
///   steps, all levels at once), so the local phase runs at each regrid and after each global
///   redistribution, the only times a group's boxes change.
#[derive(Debug, Clone)]
pub struct TwoPhase {
    cfg: TwoPhaseConfig,
    caps: Vec<f64>,
    ngroups: usize,
    grids: Vec<Rect>,
    grid_group: Vec<u32>,
    /// The finer boxes cut along the grids: each piece, its grid and its group (the grid's
    /// group when the piece was made).
    fine: Vec<(LevelBox, usize, u32)>,
    delta: f64,
    last_link: Option<LinkModel>,
    phases: usize,
}

impl TwoPhase {
    /// Checks `cfg` against the level-0 domain of `n0` cells per side.
    pub fn new(cfg: TwoPhaseConfig, n0: i64) -> Result<TwoPhase, SamrError> {
        let caps = normalise_capacities(&cfg.capacities)?;
        if cfg.groups.len() != caps.len() {
            return Err(SamrError::Length {
                what: "groups",
                got: cfg.groups.len(),
                expected: caps.len(),
            });
        }
        let ngroups = cfg.groups.iter().max().map_or(0, |&g| g as usize + 1);
        if let Some(g) = (0..ngroups as u32).find(|g| !cfg.groups.contains(g)) {
            return Err(SamrError::Unsupported(format!(
                "group {g} has no rank (groups must be numbered 0..G without gaps)"
            )));
        }
        if !(1..=n0).contains(&cfg.block) {
            return Err(SamrError::BadValue {
                what: "two-phase grid size".into(),
                value: cfg.block as f64,
                expected: "between 1 and the level-0 cells per side",
            });
        }
        if let Clock::Model {
            seconds_per_work,
            delta,
        } = cfg.clock
            && !(seconds_per_work.is_finite()
                && seconds_per_work >= 0.0
                && delta.is_finite()
                && delta >= 0.0)
        {
            return Err(SamrError::BadValue {
                what: "modelled clock".into(),
                value: seconds_per_work.min(delta),
                expected: "seconds per work and delta finite and >= 0",
            });
        }
        cfg.policy.validate()?;
        let b = cfg.block;
        let mut grids = Vec::new();
        for j in (0..n0).step_by(b as usize) {
            for i in (0..n0).step_by(b as usize) {
                grids.push(Rect::new([i, j], [(i + b).min(n0), (j + b).min(n0)]));
            }
        }
        Ok(TwoPhase {
            cfg,
            caps,
            ngroups,
            grids,
            grid_group: Vec::new(),
            fine: Vec::new(),
            delta: 0.0,
            last_link: None,
            phases: 0,
        })
    }

    /// The group of each rank.
    pub fn groups(&self) -> &[u32] {
        &self.cfg.groups
    }

    /// The group of each level-0 grid, and the grids.
    pub fn grids(&self) -> (&[Rect], &[u32]) {
        (&self.grids, &self.grid_group)
    }

    /// The capacity `n·p` of each group.
    fn group_capacities(&self) -> Vec<f64> {
        let mut c = vec![0.0; self.ngroups];
        for (r, &g) in self.cfg.groups.iter().enumerate() {
            c[g as usize] += self.caps[r];
        }
        c
    }

    /// The layout of the initial hierarchy: the grids assigned to groups afresh (runs along
    /// the curve balancing their columns, with the finer work of `list`), then as
    /// [`TwoPhase::layout`].
    pub fn initial_layout(
        &mut self,
        list: &BoxList,
        min_box: i64,
    ) -> Result<BoxPartition, SamrError> {
        self.grid_group.clear();
        self.layout(list, min_box)
    }

    /// The layout of a new hierarchy (at each regrid): finer boxes cut along the level-0
    /// grids and given to their grid's group, then the local phase. The grids keep their
    /// groups (only the global phase moves them); the first call assigns them.
    pub fn layout(&mut self, list: &BoxList, min_box: i64) -> Result<BoxPartition, SamrError> {
        self.fine.clear();
        for b in list.boxes().iter().filter(|b| b.level > 0) {
            for (k, g) in self.grids.iter().enumerate() {
                let under = Rect::new(
                    [g.lo[0] << b.level, g.lo[1] << b.level],
                    [g.hi[0] << b.level, g.hi[1] << b.level],
                );
                if let Some(rect) = b.rect.intersect(&under) {
                    let piece = LevelBox {
                        level: b.level,
                        rect,
                    };
                    self.fine.push((piece, k, 0));
                }
            }
        }
        if self.grid_group.is_empty() {
            self.grid_group = self.assign_grids(&self.group_capacities())?;
        }
        for (_, k, g) in &mut self.fine {
            *g = self.grid_group[*k];
        }
        self.local_phase(list.domain(), min_box)
    }

    /// The grids' groups: consecutive runs along the Hilbert curve of the grids' centres
    /// with relative sizes `targets`, each grid weighing its column, its own cells and the
    /// work of the finer pieces above it. A grid that changes group takes its column along
    /// at the next regrid, when the finer boxes above it are made again in its new group
    /// (Lan §4.4: "the finer grids would be reconstructed completely from the grids at level
    /// 0"), so balancing columns balances the groups' totals `W_group`.
    fn assign_grids(&self, targets: &[f64]) -> Result<Vec<u32>, SamrError> {
        let mut weights: Vec<f64> = self.grids.iter().map(|g| g.cells() as f64).collect();
        for (b, k, _) in &self.fine {
            weights[*k] += b.work() as f64;
        }
        let coords: Vec<f64> = self.grids.iter().flat_map(|g| g.centre_level0(0)).collect();
        let mut parts = vec![0u32; self.grids.len()];
        Hsfc::default().partition(
            &Serial,
            Points::new(&coords, 2, Some(&weights)),
            targets,
            &mut parts,
        )?;
        Ok(parts)
    }

    /// Each group's boxes (its level-0 grids and its finer pieces) over its ranks.
    fn local_phase(&self, domain: crate::Domain, min_box: i64) -> Result<BoxPartition, SamrError> {
        let mut all = Vec::new();
        for g in 0..self.ngroups as u32 {
            let ranks: Vec<usize> = (0..self.caps.len())
                .filter(|&r| self.cfg.groups[r] == g)
                .collect();
            let mut items: Vec<LevelBox> = (self.grids.iter().zip(&self.grid_group))
                .filter(|(_, gg)| **gg == g)
                .map(|(rect, _)| LevelBox {
                    level: 0,
                    rect: *rect,
                })
                .collect();
            items.extend(self.fine.iter().filter(|f| f.2 == g).map(|f| f.0));
            if items.is_empty() {
                continue;
            }
            let list = BoxList::new(domain, items)?;
            let caps: Vec<f64> = ranks.iter().map(|&r| self.caps[r]).collect();
            let part = match self.cfg.local {
                LocalMethod::Ace => Ace { min_box }.partition(&list, &caps)?,
                LocalMethod::Sfc => Sfc { min_box }.partition(&list, &vec![1.0; ranks.len()])?,
            };
            all.extend(part.patches.into_iter().map(|p| Patch {
                b: p.b,
                rank: ranks[p.rank as usize] as u32,
            }));
        }
        Ok(BoxPartition::from_pieces(all, &self.caps))
    }

    /// New relative performances `p` of the ranks (finite, > 0; one per rank): the groups'
    /// capacities `n·p` and the local phase follow them from the next phase on.
    pub fn set_capacities(&mut self, capacities: &[f64]) -> Result<(), SamrError> {
        let caps = normalise_capacities(capacities)?;
        if caps.len() != self.caps.len() {
            return Err(SamrError::Length {
                what: "capacities",
                got: caps.len(),
                expected: self.caps.len(),
            });
        }
        self.cfg.capacities = capacities.to_vec();
        self.caps = caps;
        Ok(())
    }

    /// Records δ, the time the last global redistribution took (for [`Clock::Measured`]).
    pub fn record_delta(&mut self, seconds: f64) {
        self.delta = seconds;
    }

    /// The global phase after a level-0 step that took `step_seconds` (the slowest rank's):
    /// the test, and when it passes the new layout (only level-0 grids change group).
    /// Collective when the link is measured; every rank gets the same outcome.
    pub fn global<C: Comm>(
        &mut self,
        comm: &C,
        layout: &BoxPartition,
        step_seconds: f64,
        min_box: i64,
        domain: crate::Domain,
    ) -> Result<(GlobalPhase, Option<BoxPartition>), SamrError> {
        let groups = self.figures(layout);
        let loads: Vec<f64> = groups.iter().map(|g| g.work as f64).collect();
        let capacities: Vec<f64> = groups.iter().map(|g| g.capacity).collect();
        let (step_time, delta) = match self.cfg.clock {
            Clock::Measured => (step_seconds, self.delta),
            Clock::Model {
                seconds_per_work,
                delta,
            } => {
                let r = self.caps.len() as f64;
                let slowest = (layout.work.iter().zip(&self.caps))
                    .map(|(&w, c)| w as f64 / (r * c))
                    .fold(0.0, f64::max);
                (seconds_per_work * slowest, delta)
            }
        };
        let (link, link_note) = match (&self.cfg.link, self.last_link) {
            (LinkSource::Fixed(m), _) => (*m, None),
            (LinkSource::Measured { every, .. }, Some(m))
                if !self.phases.is_multiple_of((*every).max(1)) =>
            {
                (
                    m,
                    Some(format!("measured {} phase(s) ago", self.phases % every)),
                )
            }
            (LinkSource::Measured { plan, probe, .. }, last) => measure(comm, plan, probe, last)?,
        };
        self.last_link = Some(link);
        self.phases += 1;
        let d = self.cfg.policy.decide(&Observation {
            loads: &loads,
            capacities: &capacities,
            partition_powers: None,
            step_time: Some(step_time),
            migration: Some(Migration {
                link,
                bytes_per_load: BYTES_PER_CELL,
                delta,
            }),
            memory: None,
        })?;
        let mut report = phase_report(groups, &d, step_time, delta);
        report.link_note = link_note;
        if !d.rebalance || self.ngroups < 2 {
            return Ok((report, None));
        }
        let new = self.assign_grids(&capacities)?;
        report.moved_grids = new
            .iter()
            .zip(&self.grid_group)
            .filter(|(a, b)| a != b)
            .count();
        if report.moved_grids == 0 {
            return Ok((report, None));
        }
        self.grid_group = new;
        Ok((report, Some(self.local_phase(domain, min_box)?)))
    }

    /// Each group's work (Lan eq. 2–3) and capacity in `layout`.
    fn figures(&self, layout: &BoxPartition) -> Vec<GroupFigures> {
        let caps = self.group_capacities();
        let mut out: Vec<GroupFigures> = (0..self.ngroups)
            .map(|g| GroupFigures {
                group: g as u32,
                ranks: (0..self.caps.len())
                    .filter(|&r| self.cfg.groups[r] as usize == g)
                    .collect(),
                work: 0,
                fine_work: 0,
                capacity: caps[g],
            })
            .collect();
        for p in &layout.patches {
            let g = &mut out[self.cfg.groups[p.rank as usize] as usize];
            g.work += p.b.work();
            if p.b.level > 0 {
                g.fine_work += p.b.work();
            }
        }
        out
    }
}

/// The report of a decision.
fn phase_report(
    groups: Vec<GroupFigures>,
    d: &Decision,
    step_time: f64,
    delta: f64,
) -> GlobalPhase {
    let p = d
        .profit
        .expect("the two-phase test always gives the step time and migration");
    GlobalPhase {
        groups,
        step_time,
        alpha: p.link.alpha,
        beta: p.link.beta,
        delta,
        eff: d.eff,
        eff_min: d.eff_min,
        gain: p.gain,
        cost: p.cost,
        gamma: p.gamma,
        bytes: p.bytes,
        rebalance: d.rebalance,
        reason: format!("{:?}", d.reason),
        decision: d.to_string(),
        moved_grids: 0,
        link_note: None,
    }
}

/// Tries to measure the link between the root's children at most this many times.
const LINK_TRIES: usize = 3;

/// α and β between the groups. Timings that give no line (noise on a shared host: the large
/// message not slower than the small one) are measured again, up to [`LINK_TRIES`] times;
/// then the last good model is kept, with a note saying so, or, without one, it is an error.
/// Every rank gets the same timings, so every rank takes the same branch.
fn measure<C: Comm>(
    comm: &C,
    plan: &Plan,
    probe: &LinkProbe,
    last: Option<LinkModel>,
) -> Result<(LinkModel, Option<String>), SamrError> {
    let mut failure = None;
    for _ in 0..LINK_TRIES {
        match measure_group_link(comm, plan, plan.root(), probe) {
            Ok(m) => return Ok((m, None)),
            Err(drum_loop::Error::DegenerateTimings(e)) => failure = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    let e = failure.expect("LINK_TRIES > 0");
    match last {
        Some(m) => Ok((m, Some(format!("kept the previous link model: {e}")))),
        None => Err(drum_loop::Error::DegenerateTimings(e).into()),
    }
}
