//! One rank's part of the run: the hierarchy, its patches, Berger–Oliger time stepping,
//! regridding and balancing.

use crate::cluster::{Cluster, nesting_region, next_level_boxes};
use crate::exchange::{Kind, Piece, Received, send};
use crate::field::{Field, Window};
use crate::lan::TwoPhase;
use crate::partition::BoxMethod;
use crate::report::{LevelFigures, Moved, StepReport, cell_term, composite_hash, rank_figures};
use crate::schedule::{Schedule, migration};
use crate::{BoxList, BoxPartition, Domain, LevelBox, Mask, Problem, Rect, SamrError};
use comm::{Comm, LinkModel, ReduceOp};
use drum_model::monitor::thread_cpu_seconds;
use std::time::Duration;

/// The most cells per side of a run's finest level: the regrid builds bitmaps of whole levels
/// on every rank (a few of 16 MB at this size).
pub const MAX_REGRID_SIDE: i64 = 4096;

/// The kernel's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamrConfig {
    /// Level-0 cells per side.
    pub n0: i64,
    /// The finest level (0 = no refinement).
    pub max_level: u8,
    /// Regrid after every this many level-0 steps.
    pub regrid_every: usize,
    /// Berger–Rigoutsos efficiency and the minimum box size (cells of the box's level), which
    /// the partitioners keep too.
    pub cluster: Cluster,
    /// Flag a cell when its largest undivided difference exceeds this.
    pub flag_tol: f64,
    /// Grow the flags by this many cells before clustering.
    pub flag_buffer: i64,
    /// The PDE.
    pub problem: Problem,
    /// Times each patch update is computed per step (1: once). More makes the arithmetic of
    /// a step as heavy as a richer scheme's (Sinha & Parashar's RM3D, Lan et al.'s ENZO)
    /// without changing its result, so that the compute, not the collectives' latency,
    /// sets a step's time on a small host.
    pub sweeps: u32,
}

impl Default for SamrConfig {
    fn default() -> Self {
        SamrConfig {
            n0: 64,
            max_level: 2,
            regrid_every: 4,
            cluster: Cluster {
                efficiency: 0.85,
                min_box: 4,
            },
            flag_tol: 0.05,
            flag_buffer: 2,
            problem: Problem::default(),
            sweeps: 1,
        }
    }
}

impl SamrConfig {
    /// Checks every setting; the domain they describe.
    pub fn validate(&self) -> Result<Domain, SamrError> {
        let domain = Domain::new(self.n0, self.max_level)?;
        let finest = self.n0 << self.max_level;
        if finest > MAX_REGRID_SIDE {
            return Err(SamrError::BadValue {
                what: "cells per side on the finest level (n0 * 2^max_level)".into(),
                value: finest as f64,
                expected: "at most 4096: the regrid holds whole-level bitmaps on every rank",
            });
        }
        let bad = |what: &str, value: f64, expected| {
            Err(SamrError::BadValue {
                what: what.into(),
                value,
                expected,
            })
        };
        domain.check_min_box(self.cluster.min_box)?;
        if !(1..=1000).contains(&self.sweeps) {
            return bad("sweeps", f64::from(self.sweeps), "between 1 and 1000");
        }
        let e = self.cluster.efficiency;
        if !(e > 0.0 && e <= 1.0) {
            return bad("efficiency", e, "a fraction in (0, 1]");
        }
        if self.regrid_every == 0 {
            return bad("regrid_every", 0.0, "at least 1 level-0 step");
        }
        if !(self.flag_tol.is_finite() && self.flag_tol > 0.0) {
            return bad("flag_tol", self.flag_tol, "a finite number > 0");
        }
        if !(0..=self.n0).contains(&self.flag_buffer) {
            return bad(
                "flag_buffer",
                self.flag_buffer as f64,
                "between 0 and the level-0 cells per side",
            );
        }
        self.problem.validate(self.n0, self.max_level)?;
        Ok(domain)
    }
}

/// How a run spreads its boxes.
#[derive(Debug, Clone)]
pub enum Balancer {
    /// One box partitioner over all ranks, run on the whole hierarchy at each regrid (as
    /// GrACE passes its box list to the partitioner "every time the applications regrid").
    Flat(BoxMethod),
    /// Lan et al.'s global and local phases.
    TwoPhase(Box<TwoPhase>),
}

impl Balancer {
    /// Number of ranks it spreads over.
    pub fn ranks(&self) -> usize {
        match self {
            Balancer::Flat(m) => m.ranks(),
            Balancer::TwoPhase(t) => t.groups().len(),
        }
    }

    /// Gives the ranks new relative capacities `C_k` (finite, > 0; normalised here): the
    /// next layout follows them. [`BoxMethod::Sfc`], GrACE's default, splits into equal parts
    /// whatever the capacities (it is the papers' capacity-blind baseline); [`BoxMethod::Hier`]
    /// takes them as its plan's part sizes; the two-phase scheme as its processors'
    /// performance `p`.
    pub fn set_capacities(&mut self, capacities: &[f64]) -> Result<(), SamrError> {
        let caps = crate::boxes::normalise_capacities(capacities)?;
        if caps.len() != self.ranks() {
            return Err(SamrError::Length {
                what: "capacities",
                got: caps.len(),
                expected: self.ranks(),
            });
        }
        match self {
            Balancer::Flat(BoxMethod::Ace { capacities }) => *capacities = caps,
            Balancer::Flat(BoxMethod::Sfc { .. }) => {}
            Balancer::Flat(BoxMethod::Hier { plan, .. }) => **plan = plan.with_part_sizes(&caps)?,
            Balancer::TwoPhase(t) => t.set_capacities(&caps)?,
        }
        Ok(())
    }

    /// The layout of a new hierarchy; `initial` for the hierarchy of the initial data (the
    /// two-phase scheme then assigns its level-0 grids to the groups afresh).
    pub fn layout(
        &mut self,
        list: &BoxList,
        min_box: i64,
        initial: bool,
    ) -> Result<BoxPartition, SamrError> {
        match self {
            Balancer::Flat(m) => m.partition(list, min_box),
            Balancer::TwoPhase(t) if initial => t.initial_layout(list, min_box),
            Balancer::TwoPhase(t) => t.layout(list, min_box),
        }
    }
}

/// What the run reports besides the solution: the capacities `C_k` the ideal loads
/// `L_k = C_k·L` come from, the groups whose crossings are counted, and the link between
/// them when it is modelled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Relative capacity of each rank (`None`: equal).
    pub capacities: Option<Vec<f64>>,
    /// Group of each rank (`None`: the two-phase scheme's groups, or none).
    pub groups: Option<Vec<u32>>,
    /// A modelled slow link between the groups (Lan et al.'s two sites on one host, labelled
    /// as such in every report): after each exchange of patch values, a rank that received
    /// bytes from another group waits `α + β·bytes` (`LinkModel`'s latency and seconds per
    /// byte) before it reads them, as if they had crossed that link. Needs groups.
    pub slow_link: Option<LinkModel>,
}

/// Where the coarse values of a ghost fill come from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CoarseTime {
    /// The coarse level's values now (all levels at one time).
    Now,
    /// `(1 − θ)·old + θ·new` inside the coarse level's step.
    Between(f64),
}

/// One rank of a run.
#[derive(Debug)]
pub struct RankRun<C: Comm> {
    comm: C,
    cfg: SamrConfig,
    domain: Domain,
    dt0: f64,
    balancer: Balancer,
    capacities: Vec<f64>,
    groups: Option<Vec<u32>>,
    list: BoxList,
    layout: BoxPartition,
    fields: Vec<Option<Field>>,
    sched: Schedule,
    covered: Vec<Mask>,
    step: usize,
    /// This step's bytes sent to other ranks, and to other groups.
    bytes: u64,
    link_bytes: u64,
    /// This step's seconds in the patch updates, and waiting on the modelled link.
    compute_s: f64,
    link_wait_s: f64,
    slow_link: Option<LinkModel>,
}

impl<C: Comm> RankRun<C> {
    /// Checks the settings, builds the initial hierarchy (refining the initial data level by
    /// level) and spreads it. Collective.
    pub fn new(
        comm: C,
        cfg: SamrConfig,
        balancer: Balancer,
        figures: Figures,
    ) -> Result<RankRun<C>, SamrError> {
        let domain = cfg.validate()?;
        let ranks = comm.size();
        let check = |what, got: usize| {
            if got == ranks {
                Ok(())
            } else {
                Err(SamrError::Length {
                    what,
                    got,
                    expected: ranks,
                })
            }
        };
        check("the balancer's ranks", balancer.ranks())?;
        let capacities = match &figures.capacities {
            Some(c) => {
                check("capacities", c.len())?;
                crate::boxes::normalise_capacities(c)?
            }
            None => vec![1.0 / ranks as f64; ranks],
        };
        let groups = match (&balancer, figures.groups) {
            (_, Some(g)) => {
                check("groups", g.len())?;
                Some(g)
            }
            (Balancer::TwoPhase(t), None) => Some(t.groups().to_vec()),
            _ => None,
        };
        if let Some(link) = figures.slow_link {
            check_link(&link, groups.is_some())?;
        }
        let list = BoxList::new(
            domain,
            vec![LevelBox {
                level: 0,
                rect: domain.level_rect(0),
            }],
        )?;
        let mut run = RankRun {
            comm,
            cfg,
            domain,
            dt0: cfg.problem.dt0(cfg.n0),
            balancer,
            capacities,
            groups,
            layout: BoxPartition::from_pieces(Vec::new(), &[1.0]),
            list: list.clone(),
            fields: Vec::new(),
            sched: Schedule::default(),
            covered: Vec::new(),
            step: 0,
            bytes: 0,
            link_bytes: 0,
            compute_s: 0.0,
            link_wait_s: 0.0,
            slow_link: figures.slow_link,
        };
        run.start(list)?;
        Ok(run)
    }

    /// The initial hierarchy: flag the initial data, add the next level, repeat until no level
    /// is added.
    fn start(&mut self, mut list: BoxList) -> Result<(), SamrError> {
        loop {
            self.layout = self
                .balancer
                .layout(&list, self.cfg.cluster.min_box, true)?;
            self.list = list;
            self.fields = self.own_fields(|f| {
                for (i, j) in f.rect.iter() {
                    let h = 1.0 / (self.cfg.n0 << f.level) as f64;
                    let v = self
                        .cfg
                        .problem
                        .initial((i as f64 + 0.5) * h, (j as f64 + 0.5) * h);
                    f.field.set(i, j, v);
                }
            });
            self.after_layout();
            let levels = self.levels();
            list = self.regrid_boxes()?;
            if levels_of(&list) <= levels {
                return Ok(());
            }
        }
    }

    /// New fields for this rank's patches, each set up by `init`.
    fn own_fields(&self, mut init: impl FnMut(Init<'_>)) -> Vec<Option<Field>> {
        let me = self.comm.rank() as u32;
        self.layout
            .patches
            .iter()
            .map(|p| {
                (p.rank == me).then(|| {
                    let mut field = Field::new(p.b.rect);
                    init(Init {
                        rect: p.b.rect,
                        level: p.b.level,
                        field: &mut field,
                    });
                    field
                })
            })
            .collect()
    }

    /// The schedule and the coverage masks of the current layout.
    fn after_layout(&mut self) {
        self.sched = Schedule::new(&self.layout.patches, self.domain, self.comm.rank() as u32);
        let levels = self.levels();
        self.covered = (0..levels.saturating_sub(1))
            .map(|l| {
                let fine: Vec<Rect> = self.level_boxes(l + 1).map(|r| r.coarsen()).collect();
                Mask::of_rects(self.domain.level_rect(l as u8), &fine)
            })
            .collect();
    }

    /// Number of levels of the hierarchy.
    pub fn levels(&self) -> usize {
        levels_of(&self.list)
    }

    /// The hierarchy's boxes of level `l`.
    fn level_boxes(&self, l: usize) -> impl Iterator<Item = Rect> + '_ {
        self.list
            .boxes()
            .iter()
            .filter(move |b| b.level as usize == l)
            .map(|b| b.rect)
    }

    /// The current layout (the same on every rank).
    pub fn layout(&self) -> &BoxPartition {
        &self.layout
    }

    /// The hierarchy (the same on every rank and for every partitioner).
    pub fn hierarchy(&self) -> &BoxList {
        &self.list
    }

    /// Calls `f(level, i, j, value)` for each cell of this rank's part of the composite
    /// solution (cells not covered by a finer level), patch by patch in layout order.
    pub fn composite_cells(&self, mut f: impl FnMut(u8, i64, i64, f64)) {
        for (p, field) in self.layout.patches.iter().zip(&self.fields) {
            let (Some(field), l) = (field, p.b.level as usize) else {
                continue;
            };
            for (i, j) in field.rect.iter() {
                if !self.covered.get(l).is_some_and(|m| m.get(i, j)) {
                    f(p.b.level, i, j, field.get(i, j));
                }
            }
        }
    }

    /// The communicator.
    pub fn comm(&self) -> &C {
        &self.comm
    }

    /// Whether the next level-0 step ends with a regrid (and so with a new layout from the
    /// capacities then in force): the point at which a caller senses the ranks' capacities
    /// ([`RankRun::set_capacities`]).
    pub fn regrid_due(&self) -> bool {
        self.cfg.max_level > 0 && (self.step + 1).is_multiple_of(self.cfg.regrid_every)
    }

    /// Gives the ranks new relative capacities `C_k` (finite, > 0; normalised here): the
    /// reports' ideal loads `L_k = C_k·L` and the balancer's next layout follow them (see
    /// [`Balancer::set_capacities`]; the current layout stays until the next regrid).
    /// Every rank must pass the same capacities.
    pub fn set_capacities(&mut self, capacities: &[f64]) -> Result<(), SamrError> {
        self.balancer.set_capacities(capacities)?;
        self.capacities = crate::boxes::normalise_capacities(capacities)?;
        Ok(())
    }

    /// The relative capacities in force (normalised).
    pub fn capacities(&self) -> &[f64] {
        &self.capacities
    }

    /// Advances one level-0 step (Berger–Oliger), regrids when due, lets the balancer act,
    /// and reports. Collective.
    pub fn step(&mut self) -> Result<StepReport, SamrError> {
        (self.bytes, self.link_bytes) = (0, 0);
        (self.compute_s, self.link_wait_s) = (0.0, 0.0);
        let cpu0 = thread_cpu_seconds();
        let t0 = self.comm.wtime();
        self.advance(0, CoarseTime::Now)?;
        let step_seconds = self.max_over_ranks(self.comm.wtime() - t0)?;
        self.step += 1;
        let t1 = self.comm.wtime();
        let regrid = if self.step.is_multiple_of(self.cfg.regrid_every) && self.cfg.max_level > 0 {
            let list = self.regrid_boxes()?;
            let layout = self
                .balancer
                .layout(&list, self.cfg.cluster.min_box, false)?;
            Some(self.relayout(list, layout)?)
        } else {
            None
        };
        let (global, rebalanced) = self.global_phase(step_seconds)?;
        let balance_seconds = self.max_over_ranks(self.comm.wtime() - t1)?;
        let mut sums = [self.local_hash(), self.bytes, self.link_bytes];
        self.comm.allreduce_u64(ReduceOp::Sum, &mut sums)?;
        let mine = [
            self.compute_s,
            thread_cpu_seconds() - cpu0,
            self.link_wait_s,
        ];
        let mut times = vec![0.0; 3 * self.comm.size()];
        self.comm.allgather(&mine, &mut times)?;
        let mut ranks = rank_figures(&self.layout, &self.capacities);
        for (r, t) in ranks.iter_mut().zip(times.chunks_exact(3)) {
            (r.compute_s, r.cpu_s, r.link_wait_s) = (t[0], t[1], t[2]);
        }
        Ok(StepReport {
            step: self.step,
            time: self.step as f64 * self.dt0,
            hash: format!("{:016x}", sums[0]),
            levels: self.level_figures(),
            ranks,
            regrid,
            global,
            rebalanced,
            step_seconds,
            balance_seconds,
            bytes: sums[1],
            link_bytes: self.groups.as_ref().map(|_| sums[2]),
        })
    }

    /// The two-phase scheme's global phase (nothing for a flat balancer).
    fn global_phase(
        &mut self,
        step_seconds: f64,
    ) -> Result<(Option<crate::lan::GlobalPhase>, Option<Moved>), SamrError> {
        let Balancer::TwoPhase(tp) = &mut self.balancer else {
            return Ok((None, None));
        };
        let (min_box, domain) = (self.cfg.cluster.min_box, self.domain);
        let (report, new) = tp.global(&self.comm, &self.layout, step_seconds, min_box, domain)?;
        let Some(new) = new else {
            return Ok((Some(report), None));
        };
        let t = self.comm.wtime();
        let m = self.relayout(self.list.clone(), new)?;
        let delta = self.max_over_ranks(self.comm.wtime() - t)?;
        if let Balancer::TwoPhase(tp) = &mut self.balancer {
            tp.record_delta(delta);
        }
        Ok((Some(report), Some(m)))
    }

    fn max_over_ranks(&self, x: f64) -> Result<f64, SamrError> {
        let mut b = [x];
        self.comm.allreduce_f64(ReduceOp::Max, &mut b)?;
        Ok(b[0])
    }

    fn level_figures(&self) -> Vec<LevelFigures> {
        (0..self.levels())
            .map(|l| {
                let range = self.sched.levels[l].clone();
                LevelFigures {
                    level: l as u8,
                    boxes: self.level_boxes(l).count(),
                    patches: range.len(),
                    cells: self.level_boxes(l).map(|r| r.cells()).sum(),
                }
            })
            .collect()
    }

    /// This rank's terms of the composite hash.
    fn local_hash(&self) -> u64 {
        let mut terms = Vec::new();
        self.composite_cells(|l, i, j, v| terms.push(cell_term(l, i, j, v)));
        composite_hash(terms)
    }

    /// Advances level `l` by one of its steps, then its finer levels by two steps each
    /// (Berger & Oliger 1984), then averages them onto it.
    fn advance(&mut self, l: usize, time: CoarseTime) -> Result<(), SamrError> {
        self.fill_ghosts(l, time)?;
        let finer = l + 1 < self.levels();
        let h = 1.0 / (self.cfg.n0 << l) as f64;
        let dt = self.dt0 / f64::from(1u32 << l);
        let t = self.comm.wtime();
        for k in self.sched.levels[l].clone() {
            if let Some(f) = &mut self.fields[k] {
                let mut next = f.u.clone();
                // The sweeps a band of rows at a time, so that every patch, small or large,
                // repeats its arithmetic on values in the core's cache: a cell costs the same
                // in a large box as in a small one (sweeping whole large boxes made their
                // cells about 1.5 times dearer than small boxes', which the work measure,
                // cells × steps, does not see).
                let (lo, hi) = (f.rect.lo[1], f.rect.hi[1]);
                let band = sweep_band_rows(f.rect.hi[0] - f.rect.lo[0]);
                let mut j0 = lo;
                while j0 < hi {
                    let j1 = (j0 + band).min(hi);
                    for _ in 0..self.cfg.sweeps {
                        self.cfg.problem.step_rows(
                            h,
                            dt,
                            std::hint::black_box(f),
                            &mut next,
                            j0..j1,
                        );
                    }
                    j0 = j1;
                }
                let before = std::mem::replace(&mut f.u, next);
                f.old = finer.then_some(before);
            }
        }
        self.compute_s += self.comm.wtime() - t;
        if finer {
            self.advance(l + 1, CoarseTime::Between(0.0))?;
            self.advance(l + 1, CoarseTime::Between(0.5))?;
            self.restrict(l + 1)?;
            for k in self.sched.levels[l].clone() {
                if let Some(f) = &mut self.fields[k] {
                    f.old = None;
                }
            }
        }
        Ok(())
    }

    /// Fills the ghost cells of level `l`: from patches of the same level, else by
    /// interpolation from level `l − 1` at `time`; cells outside the domain stay 0.
    fn fill_ghosts(&mut self, l: usize, time: CoarseTime) -> Result<(), SamrError> {
        let pieces = std::mem::take(&mut self.sched.fill[l]);
        let fields = &self.fields;
        let recv = send(&self.comm, &pieces, |p, out| {
            let f = fields[p.src as usize].as_ref().expect("own source patch");
            match (p.kind, time) {
                (Kind::Window, CoarseTime::Between(theta)) => {
                    pack_between(f, &p.region, theta, out)
                }
                _ => pack(f, &p.region, out),
            }
        })?;
        let windows = self.receive(&recv, &pieces, l)?;
        for k in self.sched.levels[l].clone() {
            let (Some(f), cells) = (&mut self.fields[k], &self.sched.interp[k]) else {
                continue;
            };
            let Some(w) = &windows[k] else {
                continue;
            };
            for &(i, j) in cells {
                f.set(i, j, w.interpolate(i, j, l as u8)?);
            }
        }
        self.sched.fill[l] = pieces;
        Ok(())
    }

    /// Replaces the cells of level `l − 1` under level `l` by the average of the four fine
    /// cells, `((a + b) + (c + d)) / 4` in a fixed order.
    fn restrict(&mut self, l: usize) -> Result<(), SamrError> {
        let pieces = std::mem::take(&mut self.sched.restrict[l]);
        let fields = &self.fields;
        let recv = send(&self.comm, &pieces, |p, out| {
            let f = fields[p.src as usize].as_ref().expect("own source patch");
            for (i, j) in p.region.iter() {
                let (a, b) = (f.get(2 * i, 2 * j), f.get(2 * i + 1, 2 * j));
                let (c, d) = (f.get(2 * i, 2 * j + 1), f.get(2 * i + 1, 2 * j + 1));
                out.push(((a + b) + (c + d)) * 0.25);
            }
        })?;
        self.receive(&recv, &pieces, l)?;
        self.sched.restrict[l] = pieces;
        Ok(())
    }

    /// The new hierarchy from the flags of every level (all levels at one time): level 0
    /// stays; level `l + 1` from the flags of level `l` inside the nesting region of the new
    /// level `l`. Collective (one `allgatherv` of the flagged cells).
    fn regrid_boxes(&mut self) -> Result<BoxList, SamrError> {
        let levels = self.levels();
        for l in 0..levels {
            self.fill_ghosts(l, CoarseTime::Now)?;
        }
        let flagged = levels.min(self.cfg.max_level as usize);
        let mut local: Vec<u32> = Vec::new();
        for (p, f) in self.layout.patches.iter().zip(&self.fields) {
            if let Some(f) = f
                && (p.b.level as usize) < flagged
            {
                self.cfg.problem.flags(f, self.cfg.flag_tol, |i, j| {
                    local.extend([u32::from(p.b.level), i as u32, j as u32]);
                });
            }
        }
        let all = self.comm.allgatherv(&local)?;
        let mut masks: Vec<Mask> = (0..flagged)
            .map(|l| Mask::new(self.domain.level_rect(l as u8)))
            .collect();
        for c in all.data().chunks_exact(3) {
            masks[c[0] as usize].set(i64::from(c[1]), i64::from(c[2]));
        }
        let mut boxes = vec![LevelBox {
            level: 0,
            rect: self.domain.level_rect(0),
        }];
        let mut coarse = vec![self.domain.level_rect(0)];
        for (l, flags) in masks.iter().enumerate() {
            let allowed = nesting_region(self.domain.level_rect(l as u8), l as u8, &coarse);
            coarse = next_level_boxes(flags, &allowed, self.cfg.flag_buffer, &self.cfg.cluster);
            if coarse.is_empty() {
                break;
            }
            let level = l as u8 + 1;
            boxes.extend(coarse.iter().map(|&rect| LevelBox { level, rect }));
        }
        BoxList::new(self.domain, boxes)
    }

    /// Moves to a new hierarchy `list` and layout: each new patch takes the values of the old
    /// patches of its level where they overlap and interpolates the rest from the new level
    /// below (levels in order, one exchange each). Collective.
    fn relayout(&mut self, list: BoxList, layout: BoxPartition) -> Result<Moved, SamrError> {
        let groups = self.groups.as_deref();
        let m = Moved::between(&self.layout.patches, &layout.patches, groups);
        let old_layout = std::mem::replace(&mut self.layout, layout);
        let old_list = std::mem::replace(&mut self.list, list);
        let old_fields = std::mem::take(&mut self.fields);
        self.fields = self.own_fields(|_| {});
        let ranges = crate::schedule::level_ranges(&self.layout.patches);
        for (l, range) in ranges.into_iter().enumerate() {
            let union: Vec<Rect> = (old_list.boxes().iter())
                .filter(|b| b.level as usize == l)
                .map(|b| b.rect)
                .collect();
            let old_union = Mask::of_rects(self.domain.level_rect(l as u8), &union);
            let (pieces, fresh) = migration(
                &old_layout.patches,
                &self.layout.patches,
                l,
                &old_union,
                self.domain,
            );
            let new = &self.fields;
            let recv = send(&self.comm, &pieces, |p, out| {
                let src = match p.kind {
                    Kind::Copy => &old_fields[p.src as usize],
                    _ => &new[p.src as usize],
                };
                pack(src.as_ref().expect("own source patch"), &p.region, out);
            })?;
            let windows = self.receive(&recv, &pieces, l)?;
            for k in range.filter(|&k| fresh[k]) {
                let Some(f) = &mut self.fields[k] else {
                    continue;
                };
                let rect = f.rect;
                for (i, j) in rect.iter().filter(|&(i, j)| !old_union.get(i, j)) {
                    let w = windows[k].as_ref().ok_or(SamrError::Missing {
                        level: l as u8,
                        i,
                        j,
                        what: "coarse window for a new cell",
                    })?;
                    f.set(i, j, w.interpolate(i, j, l as u8)?);
                }
            }
        }
        self.after_layout();
        Ok(m)
    }

    /// Unpacks what this rank received for level `l`: ghost, copied and restricted values
    /// into its fields, coarse values into the windows it returns (one per fine patch that
    /// got any).
    fn receive(
        &mut self,
        recv: &Received,
        pieces: &[Piece],
        l: usize,
    ) -> Result<Vec<Option<Window>>, SamrError> {
        self.bytes += recv.bytes_sent;
        self.cross_groups(recv);
        let coarse = self.domain.level_rect(l.saturating_sub(1) as u8);
        let mut windows: Vec<Option<Window>> = vec![None; self.fields.len()];
        let fields = &mut self.fields;
        recv.unpack(self.comm.rank(), pieces, |p, vals| {
            let f = fields[p.dst as usize]
                .as_mut()
                .expect("own destination patch");
            match p.kind {
                Kind::Window => windows[p.dst as usize]
                    .get_or_insert_with(|| Window::around(&f.rect, coarse))
                    .put(&p.region, vals),
                Kind::Ghost | Kind::Copy | Kind::Restrict => write(f, &p.region, vals),
            }
            Ok(())
        })?;
        Ok(windows)
    }
}

impl<C: Comm> RankRun<C> {
    /// Counts the bytes this rank sent to other groups in an exchange and, on a modelled
    /// slow link, waits `α + β·b` for the `b > 0` bytes it received from other groups.
    fn cross_groups(&mut self, recv: &Received) {
        let Some(groups) = &self.groups else {
            return;
        };
        let me = groups[self.comm.rank()];
        let other = |r: &usize| groups[*r] != me;
        self.link_bytes += (recv.sent_to.iter().enumerate())
            .filter(|(r, _)| other(r))
            .map(|(_, &b)| b as u64)
            .sum::<u64>();
        let Some(link) = self.slow_link else {
            return;
        };
        let got: usize = (recv.received_from().iter().enumerate())
            .filter(|(r, _)| other(r))
            .map(|(_, &b)| b)
            .sum();
        if got > 0 {
            let wait = link.alpha + link.beta * got as f64;
            std::thread::sleep(Duration::from_secs_f64(wait));
            self.link_wait_s += wait;
        }
    }
}

/// What [`RankRun::own_fields`] hands to its initialiser.
struct Init<'a> {
    rect: Rect,
    level: u8,
    field: &'a mut Field,
}

/// A modelled link needs groups, and an `α` and `β` that are finite and ≥ 0.
fn check_link(link: &LinkModel, has_groups: bool) -> Result<(), SamrError> {
    if !has_groups {
        return Err(SamrError::Unsupported(
            "a modelled slow link joins groups, but the run has none (give the groups, or use \
             the two-phase scheme)"
                .into(),
        ));
    }
    for (what, x) in [("alpha", link.alpha), ("beta", link.beta)] {
        if !(x.is_finite() && x >= 0.0) {
            return Err(SamrError::BadValue {
                what: format!("the modelled link's {what}"),
                value: x,
                expected: "finite and >= 0",
            });
        }
    }
    Ok(())
}

/// The number of levels of a box list.
fn levels_of(list: &BoxList) -> usize {
    list.boxes()
        .iter()
        .map(|b| b.level as usize + 1)
        .max()
        .unwrap_or(0)
}

/// Appends the values of `f` over `r` (row-major).
fn pack(f: &Field, r: &Rect, out: &mut Vec<f64>) {
    out.extend(r.iter().map(|(i, j)| f.get(i, j)));
}

/// Appends `(1 − θ)·old + θ·new` of `f` over `r` (`old` at θ = 0 exactly).
fn pack_between(f: &Field, r: &Rect, theta: f64, out: &mut Vec<f64>) {
    let old = f
        .old
        .as_ref()
        .expect("a coarse level keeps its old values during its step");
    for (i, j) in r.iter() {
        let k = f.index(i, j);
        out.push(if theta == 0.0 {
            old[k]
        } else {
            (1.0 - theta) * old[k] + theta * f.u[k]
        });
    }
}

/// Writes `vals` into `f` over `r` (row-major).
fn write(f: &mut Field, r: &Rect, vals: &[f64]) {
    for ((i, j), v) in r.iter().zip(vals) {
        f.set(i, j, *v);
    }
}

/// Rows of a patch `width` cells wide that one band of sweeps covers: the band's values,
/// its two ghost rows and its results in about 24 KiB (a level-1 data cache), at least one
/// row.
fn sweep_band_rows(width: i64) -> i64 {
    const BAND_BYTES: i64 = 24 * 1024;
    let row = (width + 2) * std::mem::size_of::<f64>() as i64;
    ((BAND_BYTES / row - 2) / 2).max(1)
}
