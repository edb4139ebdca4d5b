//! Box lists, patches (boxes with an owner) and the work of a box.

use crate::{Rect, SamrError};
use serde::Serialize;

/// The computational domain: the unit square, `n0 × n0` cells at level 0, levels `0..=max_level`
/// with refinement ratio 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Domain {
    /// Level-0 cells per side.
    pub n0: i64,
    /// The finest level allowed.
    pub max_level: u8,
}

/// The finest level a domain may have (cell indices of level `l` reach `n0 · 2^l`).
pub const MAX_LEVEL: u8 = 10;

/// The most cells per side a domain's finest level may have.
pub const MAX_CELLS_PER_SIDE: i64 = 1 << 24;

impl Domain {
    /// Checks the sizes: `n0 >= 1`, `max_level <= MAX_LEVEL`, and at most
    /// [`MAX_CELLS_PER_SIDE`] cells per side on the finest level (so that cell counts and
    /// work fit a `u64` with room to spare).
    pub fn new(n0: i64, max_level: u8) -> Result<Domain, SamrError> {
        let bad = |what: &str, value: f64, expected| SamrError::BadValue {
            what: what.into(),
            value,
            expected,
        };
        if max_level > MAX_LEVEL {
            return Err(bad(
                "max_level",
                f64::from(max_level),
                "at most 10 levels of refinement",
            ));
        }
        if !(1..=MAX_CELLS_PER_SIDE >> max_level).contains(&n0) {
            return Err(bad(
                "n0",
                n0 as f64,
                "at least 1 cell, and n0 * 2^max_level at most 2^24",
            ));
        }
        Ok(Domain { n0, max_level })
    }

    /// Checks a minimum box size against the domain: at least 1, at most `n0`.
    pub fn check_min_box(&self, min_box: i64) -> Result<(), SamrError> {
        if min_box < 1 {
            return Err(SamrError::BadValue {
                what: "min_box".into(),
                value: min_box as f64,
                expected: "at least 1 cell",
            });
        }
        if min_box > self.n0 {
            return Err(SamrError::MinBoxTooLarge {
                min_box,
                n0: self.n0,
            });
        }
        Ok(())
    }

    /// The cells of level `level`: `[0, n0·2^level)²`.
    pub fn level_rect(&self, level: u8) -> Rect {
        Rect::square(self.n0 << level)
    }
}

/// A box of the grid hierarchy: a rectangle of cells of one level.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct LevelBox {
    /// The level (0 = coarsest).
    pub level: u8,
    /// Its cells, in that level's index space.
    pub rect: Rect,
}

impl LevelBox {
    /// The work of the box per level-0 step: its cells times the steps its level takes per
    /// level-0 step (`2^level` with Berger–Oliger subcycling at ratio 2).
    pub fn work(&self) -> u64 {
        self.rect.cells() << self.level
    }

    /// The work of one row of cells across `axis` (cutting the box across `axis` moves
    /// multiples of it).
    pub fn strip_work(&self, axis: usize) -> u64 {
        (self.rect.len(1 - axis) as u64) << self.level
    }

    /// Cut positions along an axis must be multiples of this, so that every piece of a
    /// level-`l ≥ 1` box is a union of whole cells of level `l − 1` (restriction and
    /// coarse–fine interpolation never share a coarse cell between two patches).
    pub fn align(&self) -> i64 {
        if self.level == 0 {
            1
        } else {
            crate::geom::RATIO
        }
    }
}

/// A validated list of boxes: every box non-empty, inside its level's domain, the boxes of one
/// level disjoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxList {
    domain: Domain,
    boxes: Vec<LevelBox>,
}

impl BoxList {
    /// Checks `boxes` against `domain` (errors name the box by its index in `boxes`).
    pub fn new(domain: Domain, boxes: Vec<LevelBox>) -> Result<BoxList, SamrError> {
        for (index, b) in boxes.iter().enumerate() {
            let why = if b.level > domain.max_level {
                Some(format!(
                    "is above the finest level {} of the domain",
                    domain.max_level
                ))
            } else if b.rect.is_empty() {
                Some("is empty".to_string())
            } else if !domain.level_rect(b.level).contains_rect(&b.rect) {
                Some(format!(
                    "lies outside the level-{} domain {}",
                    b.level,
                    domain.level_rect(b.level)
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(SamrError::BadBox {
                    index,
                    level: b.level,
                    rect: b.rect,
                    why,
                });
            }
        }
        // Disjointness: sweep each level's boxes in order of their lower x.
        let mut order: Vec<usize> = (0..boxes.len()).collect();
        order.sort_by_key(|&i| (boxes[i].level, boxes[i].rect.lo[0], i));
        for (n, &a) in order.iter().enumerate() {
            for &b in &order[n + 1..] {
                let (ba, bb) = (&boxes[a], &boxes[b]);
                if bb.level != ba.level || bb.rect.lo[0] >= ba.rect.hi[0] {
                    break;
                }
                if let Some(common) = ba.rect.intersect(&bb.rect) {
                    return Err(SamrError::Overlap {
                        a: a.min(b),
                        b: a.max(b),
                        level: ba.level,
                        common,
                    });
                }
            }
        }
        Ok(BoxList { domain, boxes })
    }

    /// The domain.
    pub fn domain(&self) -> Domain {
        self.domain
    }

    /// The boxes, in the order given.
    pub fn boxes(&self) -> &[LevelBox] {
        &self.boxes
    }

    /// Total work `L = Σ work`.
    pub fn total_work(&self) -> u64 {
        self.boxes.iter().map(LevelBox::work).sum()
    }
}

/// A box assigned to a rank.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct Patch {
    /// The box.
    #[serde(flatten)]
    pub b: LevelBox,
    /// Its owner.
    pub rank: u32,
}

/// The result of a box partitioner: the patches (pieces of the input boxes, each with its
/// rank) and the figures of Sinha & Parashar §6.2.2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoxPartition {
    /// The patches in canonical order (level, then lower y, then lower x).
    pub patches: Vec<Patch>,
    /// `W_k`: the work each rank received.
    pub work: Vec<u64>,
    /// `L_k = C_k · L`: the work each rank should have received.
    pub ideal: Vec<f64>,
}

impl BoxPartition {
    /// Builds the result from pieces and the normalised targets `c` (summing to 1).
    pub(crate) fn from_pieces(mut patches: Vec<Patch>, c: &[f64]) -> BoxPartition {
        patches.sort_by_key(|p| (p.b.level, p.b.rect.lo[1], p.b.rect.lo[0]));
        let mut work = vec![0u64; c.len()];
        for p in &patches {
            work[p.rank as usize] += p.b.work();
        }
        let total: u64 = work.iter().sum();
        let ideal = c.iter().map(|ck| ck * total as f64).collect();
        BoxPartition {
            patches,
            work,
            ideal,
        }
    }

    /// The load imbalance of each rank, Sinha & Parashar §6.2.2 eq. (2):
    /// `I_k = |W_k − L_k| / L_k × 100 %` (0 where `L_k = 0`).
    pub fn imbalance_percent(&self) -> Vec<f64> {
        imbalance_percent(&self.work, &self.ideal)
    }

    /// Number of patches of each rank.
    pub fn boxes_per_rank(&self) -> Vec<usize> {
        let mut n = vec![0; self.work.len()];
        for p in &self.patches {
            n[p.rank as usize] += 1;
        }
        n
    }
}

/// `I_k = |W_k − L_k| / L_k × 100` per rank (Sinha & Parashar §6.2.2 eq. 2; 0 where
/// `L_k = 0`).
pub(crate) fn imbalance_percent(work: &[u64], ideal: &[f64]) -> Vec<f64> {
    work.iter()
        .zip(ideal)
        .map(|(&w, &l)| {
            if l > 0.0 {
                (w as f64 - l).abs() / l * 100.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Relative capacities normalised to sum 1: each must be finite and > 0.
pub fn normalise_capacities(c: &[f64]) -> Result<Vec<f64>, SamrError> {
    if c.is_empty() {
        return Err(SamrError::Length {
            what: "capacities",
            got: 0,
            expected: 1,
        });
    }
    for (rank, &value) in c.iter().enumerate() {
        if !(value.is_finite() && value > 0.0) {
            return Err(SamrError::Capacity { rank, value });
        }
    }
    let s: f64 = c.iter().sum();
    Ok(c.iter().map(|x| x / s).collect())
}

/// Breaks `b` across its longest axis into a lower piece of at most `budget` work and the
/// rest (Sinha & Parashar §5.3: "a box is broken into two in a way that the work associated
/// with at least one of the two boxes created is less than or equal to the work the processor
/// can perform"; "a box is always broken along the longest dimension" for the aspect ratio).
/// Both pieces keep at least `min_box` cells along the cut axis, and cuts of level ≥ 1 boxes
/// fall on even indices ([`LevelBox::align`]). `None` when no such cut exists.
pub(crate) fn break_box(b: &LevelBox, budget: f64, min_box: i64) -> Option<(LevelBox, LevelBox)> {
    let axis = b.rect.longest_axis();
    let fits = (budget / b.strip_work(axis) as f64).floor();
    if fits.is_nan() || fits < 1.0 {
        return None;
    }
    let len = (fits as i64).min(b.rect.len(axis));
    cut_at(b, axis, b.rect.lo[axis] + len, min_box)
}

/// What a processor (or part) that can still take `budget` work takes of box `b`: the whole
/// box when it fits; else the largest piece that fits ([`break_box`]); else, when no
/// allowed piece fits, the smallest allowed piece (`min_box` cells across the longest axis)
/// or the whole box when it cannot be cut, but only if that leaves the processor nearer its
/// target than taking nothing (`work < 2 · budget`). The piece and the rest, or `None`.
pub(crate) fn take(
    b: &LevelBox,
    budget: f64,
    min_box: i64,
) -> Option<(LevelBox, Option<LevelBox>)> {
    if b.work() as f64 <= budget {
        return Some((*b, None));
    }
    if let Some((piece, rest)) = break_box(b, budget, min_box) {
        return Some((piece, Some(rest)));
    }
    let axis = b.rect.longest_axis();
    let (m, align) = (min_box.max(1), b.align());
    let at = b.rect.lo[axis] + m;
    let smallest = cut_at(b, axis, at + (align - at.rem_euclid(align)) % align, m)
        .map(|(p, r)| (p, Some(r)))
        .unwrap_or((*b, None));
    (smallest.0.work() as f64 > 0.0 && (smallest.0.work() as f64) < 2.0 * budget)
        .then_some(smallest)
}

/// Halves `b` across its longest axis (keeping `min_box` and the alignment), `None` when it
/// cannot be cut.
pub(crate) fn halve_box(b: &LevelBox, min_box: i64) -> Option<(LevelBox, LevelBox)> {
    let axis = b.rect.longest_axis();
    cut_at(
        b,
        axis,
        (b.rect.lo[axis] + b.rect.hi[axis]).div_euclid(2),
        min_box,
    )
}

/// Cuts `b` across `axis` at the aligned position at or below `at` that leaves both pieces
/// `min_box` cells along `axis` (the lower piece first); `None` when there is none.
fn cut_at(b: &LevelBox, axis: usize, at: i64, min_box: i64) -> Option<(LevelBox, LevelBox)> {
    let (lo, hi, m, align) = (b.rect.lo[axis], b.rect.hi[axis], min_box.max(1), b.align());
    let mut at = at.min(hi - m);
    at -= at.rem_euclid(align);
    if at - lo < m {
        return None;
    }
    let (a, c) = b.rect.split(axis, at);
    let piece = |rect| LevelBox {
        level: b.level,
        rect,
    };
    Some((piece(a), piece(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb(level: u8, lo: [i64; 2], hi: [i64; 2]) -> LevelBox {
        LevelBox {
            level,
            rect: Rect::new(lo, hi),
        }
    }

    #[test]
    fn validation_names_the_box() {
        let d = Domain::new(8, 1).unwrap();
        let e = |v: Vec<LevelBox>| BoxList::new(d, v).unwrap_err().to_string();
        assert_eq!(
            e(vec![lb(0, [0, 0], [8, 8]), lb(1, [10, 0], [20, 4])]),
            "box 1 (level 1, [10, 20) x [0, 4)) lies outside the level-1 domain [0, 16) x [0, 16)"
        );
        assert_eq!(
            e(vec![lb(2, [0, 0], [1, 1])]),
            "box 0 (level 2, [0, 1) x [0, 1)) is above the finest level 1 of the domain"
        );
        assert_eq!(
            e(vec![lb(0, [0, 0], [4, 8]), lb(0, [3, 2], [8, 4])]),
            "boxes 0 and 1 of level 0 overlap in [3, 4) x [2, 4)"
        );
        assert!(BoxList::new(d, vec![lb(0, [0, 0], [4, 8]), lb(0, [4, 0], [8, 8])]).is_ok());
        assert_eq!(
            normalise_capacities(&[1.0, 0.0]).unwrap_err().to_string(),
            "capacity of rank 1 is 0; expected a finite number > 0"
        );
    }

    #[test]
    fn breaking_respects_budget_min_size_and_alignment() {
        // 10 x 4 box at level 1: strips of 4 cells x 2 steps = 8 work.
        let b = lb(1, [0, 0], [10, 4]);
        let (p, r) = break_box(&b, 45.0, 2).unwrap();
        // 45 / 8 = 5 strips, aligned down to 4.
        assert_eq!(p.rect, Rect::new([0, 0], [4, 4]));
        assert_eq!(r.rect, Rect::new([4, 0], [10, 4]));
        assert!(break_box(&b, 7.0, 2).is_none());
        // The rest keeps min_box = 4 cells: at most 6 strips.
        let (p, _) = break_box(&b, 1000.0, 4).unwrap();
        assert_eq!(p.rect.len(0), 6);
        let (a, c) = halve_box(&lb(0, [0, 0], [5, 3]), 1).unwrap();
        assert_eq!((a.rect.len(0), c.rect.len(0)), (2, 3));
        assert!(halve_box(&lb(0, [0, 0], [3, 3]), 2).is_none());
        // take: whole when it fits, else the largest piece that fits, else the smallest
        // allowed piece (4 strips of 8 = 32 work) when that is nearer the target.
        assert_eq!(take(&b, 80.0, 2).unwrap().0.work(), 80);
        assert_eq!(take(&b, 1000.0, 4).unwrap(), (b, None));
        let (p, r) = take(&b, 20.0, 4).unwrap();
        assert_eq!((p.rect.len(0), r.unwrap().rect.len(0)), (4, 6));
        assert!(take(&b, 16.0, 4).is_none());
        // Alignment is absolute: a level-1 box starting at an odd index is cut at an even one.
        let (a, _) = halve_box(&lb(1, [1, 0], [9, 2]), 1).unwrap();
        assert_eq!(a.rect, Rect::new([1, 0], [4, 2]));
    }
}
