//! Which pieces move where, computed once per layout from the patch list every rank holds.

use crate::exchange::{Kind, Piece};
use crate::field::{GHOST, Window};
use crate::{BoxPartition, Domain, Mask, Patch, Rect};
use std::ops::Range;

/// The patches of each level, as index ranges (patches are sorted by level).
pub(crate) fn level_ranges(patches: &[Patch]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (k, p) in patches.iter().enumerate() {
        let l = p.b.level as usize;
        while out.len() <= l {
            out.push(k..k);
        }
        out[l].end = k + 1;
    }
    out
}

/// A piece from patch `s` to patch `d` over `region`.
fn piece(kind: Kind, patches: (&[Patch], &[Patch]), s: usize, d: usize, region: Rect) -> Piece {
    Piece {
        kind,
        src: s as u32,
        dst: d as u32,
        from: patches.0[s].rank,
        to: patches.1[d].rank,
        region,
    }
}

/// The exchanges of one layout.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schedule {
    /// Per level: ghost pieces from the same level, then window pieces from the level below.
    pub(crate) fill: Vec<Vec<Piece>>,
    /// Per level `l ≥ 1`: averages of level `l` onto level `l − 1` (empty for level 0).
    pub(crate) restrict: Vec<Vec<Piece>>,
    /// Per patch of this rank: its ghost cells that coarse–fine interpolation fills (in the
    /// domain, under no patch of its level); empty for other ranks' patches.
    pub(crate) interp: Vec<Vec<(i64, i64)>>,
    /// Patch index ranges per level.
    pub(crate) levels: Vec<Range<usize>>,
}

impl Schedule {
    /// The schedule of `patches` for rank `me`.
    pub(crate) fn new(patches: &[Patch], domain: Domain, me: u32) -> Schedule {
        let levels = level_ranges(patches);
        let mut s = Schedule {
            fill: vec![Vec::new(); levels.len()],
            restrict: vec![Vec::new(); levels.len()],
            interp: vec![Vec::new(); patches.len()],
            levels: levels.clone(),
        };
        let both = (patches, patches);
        for (l, range) in levels.iter().enumerate() {
            let dom = domain.level_rect(l as u8);
            for q in range.clone() {
                let grown = patches[q].b.rect.grow(GHOST);
                let near: Vec<usize> = range
                    .clone()
                    .filter(|&p| p != q && patches[p].b.rect.intersect(&grown).is_some())
                    .collect();
                for &p in &near {
                    let region = patches[p].b.rect.intersect(&grown).expect("near");
                    s.fill[l].push(piece(Kind::Ghost, both, p, q, region));
                }
                let own = &patches[q].b.rect;
                let bare: Vec<(i64, i64)> = grown
                    .iter()
                    .filter(|&(i, j)| {
                        !own.contains(i, j)
                            && dom.contains(i, j)
                            && !near.iter().any(|&p| patches[p].b.rect.contains(i, j))
                    })
                    .collect();
                if l == 0 || bare.is_empty() {
                    continue;
                }
                let w = Window::around(own, domain.level_rect(l as u8 - 1)).rect;
                for p in levels[l - 1].clone() {
                    if let Some(region) = patches[p].b.rect.intersect(&w) {
                        s.fill[l].push(piece(Kind::Window, both, p, q, region));
                    }
                }
                if patches[q].rank == me {
                    s.interp[q] = bare;
                }
            }
            if l > 0 {
                for f in range.clone() {
                    let cover = patches[f].b.rect.coarsen();
                    for c in levels[l - 1].clone() {
                        if let Some(region) = patches[c].b.rect.intersect(&cover) {
                            s.restrict[l].push(piece(Kind::Restrict, both, f, c, region));
                        }
                    }
                }
            }
        }
        s
    }
}

/// The pieces that fill the new patches of level `level` after a regrid or a repartition:
/// the cells of `old` patches of that level that the new ones hold (`Copy`), and, for each
/// new patch with cells outside `old_union` (the old level's cells), the coarse window from
/// the new level below (`Window`). Returns them and the new patches that need interpolation.
pub(crate) fn migration(
    old: &[Patch],
    new: &[Patch],
    level: usize,
    old_union: &Mask,
    domain: Domain,
) -> (Vec<Piece>, Vec<bool>) {
    let (old_levels, new_levels) = (level_ranges(old), level_ranges(new));
    let empty = 0..0;
    let old_range = old_levels.get(level).unwrap_or(&empty).clone();
    let new_range = new_levels.get(level).unwrap_or(&empty).clone();
    let mut pieces = Vec::new();
    let mut fresh = vec![false; new.len()];
    for q in new_range {
        let rect = new[q].b.rect;
        for p in old_range.clone() {
            if let Some(region) = old[p].b.rect.intersect(&rect) {
                pieces.push(piece(Kind::Copy, (old, new), p, q, region));
            }
        }
        if level == 0 || old_union.count_in(&rect) == rect.cells() {
            continue;
        }
        fresh[q] = true;
        let w = Window::around(&rect, domain.level_rect(level as u8 - 1)).rect;
        for p in new_levels[level - 1].clone() {
            if let Some(region) = new[p].b.rect.intersect(&w) {
                pieces.push(piece(Kind::Window, (new, new), p, q, region));
            }
        }
    }
    (pieces, fresh)
}

/// The patch values one exchange of a level-0 step moves between ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// What it fills: `ghosts of level l` or `restriction onto level l − 1`.
    pub what: String,
    /// How many times a level-0 step performs it (level `l` steps `2^l` times).
    pub times: usize,
    /// Bytes from rank `a` to rank `b` at `a · R + b` (`R` ranks), as the wire carries them
    /// (a 4-byte patch index and 8 bytes per value per piece; none from a rank to itself).
    pub bytes: Vec<u64>,
}

/// The exchanges of a level-0 step on `layout` (Berger–Oliger, no regrid): for each level `l`
/// its ghost fill (`2^l` times), and for `l ≥ 1` its restriction (`2^(l−1)` times), in the
/// run's order of kinds. What a model of the run's communication needs: the same pieces the
/// run sends ([`RankRun`](crate::RankRun)), without running it.
pub fn step_exchanges(layout: &BoxPartition, domain: Domain) -> Vec<Exchange> {
    let ranks = layout.work.len();
    let s = Schedule::new(&layout.patches, domain, 0);
    let bytes = |pieces: &[Piece]| {
        let mut m = vec![0u64; ranks * ranks];
        for p in pieces.iter().filter(|p| p.from != p.to) {
            m[p.from as usize * ranks + p.to as usize] += 4 + 8 * p.region.cells();
        }
        m
    };
    let mut out = Vec::new();
    for l in 0..s.levels.len() {
        out.push(Exchange {
            what: format!("ghosts of level {l}"),
            times: 1 << l,
            bytes: bytes(&s.fill[l]),
        });
        if l > 0 {
            out.push(Exchange {
                what: format!("restriction onto level {}", l - 1),
                times: 1 << (l - 1),
                bytes: bytes(&s.restrict[l]),
            });
        }
    }
    out
}
