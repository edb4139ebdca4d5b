//! What a level-0 step reports, the composite hash, and the data a layout change moved.

use crate::boxes::imbalance_percent;
use crate::lan::GlobalPhase;
use crate::{BoxPartition, Patch};
use serde::Serialize;

/// One level of the hierarchy after a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelFigures {
    /// The level.
    pub level: u8,
    /// Boxes of the hierarchy (Berger–Rigoutsos boxes, the same for every partitioner).
    pub boxes: usize,
    /// Patches (pieces of the boxes after partitioning).
    pub patches: usize,
    /// Cells.
    pub cells: u64,
}

/// One rank after a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankFigures {
    /// The rank.
    pub rank: usize,
    /// `W_k`: cells × steps per level-0 step of its patches.
    pub work: u64,
    /// Its patches.
    pub boxes: usize,
    /// Its cells (all levels).
    pub cells: u64,
    /// `L_k = C_k · L` with the run's capacities `C_k`.
    pub ideal: f64,
    /// `I_k = |W_k − L_k| / L_k × 100` (Sinha & Parashar eq. 2).
    pub imbalance_percent: f64,
    /// Wall seconds of its patch updates in the step (the arithmetic, no communication).
    pub compute_s: f64,
    /// CPU seconds its thread used in the step (`CLOCK_THREAD_CPUTIME_ID`): the updates,
    /// packing, regrid and balancing, and any spinning in collectives.
    pub cpu_s: f64,
    /// Seconds it waited on the modelled slow link in the step (0 without one).
    pub link_wait_s: f64,
}

/// What a change of layout moved between ranks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Moved {
    /// Cells of each level whose rank changed.
    pub cells: Vec<u64>,
    /// Cells of each level whose group changed (when the run has groups).
    pub cross_group: Option<Vec<u64>>,
    /// Bytes of those cells' values (8 per cell).
    pub bytes: u64,
}

/// The report of one level-0 step, the same on every rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// Level-0 steps done.
    pub step: usize,
    /// Simulated time.
    pub time: f64,
    /// The composite hash ([`composite_hash`]) as 16 hex digits.
    pub hash: String,
    /// Each level.
    pub levels: Vec<LevelFigures>,
    /// Each rank.
    pub ranks: Vec<RankFigures>,
    /// What the regrid after this step moved (when it regridded).
    pub regrid: Option<Moved>,
    /// Lan et al.'s global phase (two-phase balancing).
    pub global: Option<GlobalPhase>,
    /// What the global phase moved (when it redistributed).
    pub rebalanced: Option<Moved>,
    /// Wall seconds of the level-0 step (the slowest rank; regrid and balancing excluded).
    pub step_seconds: f64,
    /// Wall seconds of regrid and balancing after it (the slowest rank).
    pub balance_seconds: f64,
    /// Bytes all ranks sent to other ranks during the step, regrid and balancing included.
    pub bytes: u64,
    /// The part of `bytes` sent between groups (over the slow link, when the run has
    /// groups).
    pub link_bytes: Option<u64>,
}

/// One cell's term of the composite hash: a 64-bit mix (SplitMix64's finaliser) of its level,
/// its indices and the bits of its value.
pub(crate) fn cell_term(level: u8, i: i64, j: i64, value: f64) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let key = (u64::from(level) << 58) ^ ((i as u64) << 29) ^ (j as u64);
    mix(mix(key ^ 0x9e37_79b9_7f4a_7c15) ^ value.to_bits())
}

/// The composite hash: the wrapping sum of one term per cell of the composite solution (each
/// level's cells not covered by the next finer level), the term a 64-bit mix of the cell's
/// level, indices and value bits. A sum, so it needs no order and reduces exactly over
/// ranks; it depends on the hierarchy and the values, not on how boxes were cut into
/// patches or spread over ranks.
pub fn composite_hash(terms: impl IntoIterator<Item = u64>) -> u64 {
    terms.into_iter().fold(0u64, u64::wrapping_add)
}

impl Moved {
    /// The cells that changed rank (and, with the ranks' `groups`, group) from the `old` to
    /// the `new` patches.
    pub fn between(old: &[Patch], new: &[Patch], groups: Option<&[u32]>) -> Moved {
        let levels = old
            .iter()
            .chain(new)
            .map(|p| p.b.level as usize + 1)
            .max()
            .unwrap_or(0);
        let mut m = Moved {
            cells: vec![0; levels],
            cross_group: groups.map(|_| vec![0; levels]),
            bytes: 0,
        };
        for q in new {
            for p in old
                .iter()
                .filter(|p| p.b.level == q.b.level && p.rank != q.rank)
            {
                if let Some(common) = p.b.rect.intersect(&q.b.rect) {
                    let l = q.b.level as usize;
                    m.cells[l] += common.cells();
                    if let (Some(g), Some(c)) = (groups, m.cross_group.as_mut())
                        && g[p.rank as usize] != g[q.rank as usize]
                    {
                        c[l] += common.cells();
                    }
                }
            }
        }
        m.bytes = 8 * m.cells.iter().sum::<u64>();
        m
    }
}

/// Each rank's figures in `layout`, against the run's relative capacities `c` (sum 1).
pub(crate) fn rank_figures(layout: &BoxPartition, c: &[f64]) -> Vec<RankFigures> {
    let total: u64 = layout.work.iter().sum();
    let mut out: Vec<RankFigures> = (0..c.len())
        .map(|rank| RankFigures {
            rank,
            work: layout.work[rank],
            boxes: 0,
            cells: 0,
            ideal: c[rank] * total as f64,
            imbalance_percent: 0.0,
            compute_s: 0.0,
            cpu_s: 0.0,
            link_wait_s: 0.0,
        })
        .collect();
    for p in &layout.patches {
        let r = &mut out[p.rank as usize];
        r.boxes += 1;
        r.cells += p.b.rect.cells();
    }
    let ideal: Vec<f64> = out.iter().map(|r| r.ideal).collect();
    for (r, i) in out.iter_mut().zip(imbalance_percent(&layout.work, &ideal)) {
        r.imbalance_percent = i;
    }
    out
}
