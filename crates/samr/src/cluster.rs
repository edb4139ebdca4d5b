//! Regridding: flagged cells into boxes (Berger & Rigoutsos 1991), properly nested.
//!
//! Everything here works on whole-level bitmaps that every rank holds alike, so the new
//! hierarchy does not depend on the partition.

use crate::{Mask, Rect};

/// Coarse cells of level `l` that a box of level `l + 1` keeps between itself and the edge of
/// level `l` (inside the domain): a fine ghost cell lies in a coarse cell next to the box's
/// coarse cover, and its interpolation reads one coarse cell further.
pub const NEST: i64 = 2;

/// Berger–Rigoutsos settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cluster {
    /// Accept a box when its flagged cells are at least this fraction of it, in (0, 1].
    pub efficiency: f64,
    /// No cut leaves a side shorter than this (cells of the level clustered).
    pub min_box: i64,
}

/// Berger & Rigoutsos (1991, "An algorithm for point clustering and grid generation"): covers
/// the set cells of `flags` with disjoint boxes. A box is first shrunk to the bounding box of
/// its flags; it is accepted when the flagged fraction reaches `efficiency` or no cut is
/// allowed; otherwise it is cut, by preference, (1) at a hole, a row or column without
/// flags (the one nearest the middle), (2) at the strongest inflection of the signatures
/// `Σ_x`, `Σ_y` (the largest jump of the discrete Laplacian `Δ_p = Σ_{p−1} − 2Σ_p + Σ_{p+1}`
/// where it changes sign), (3) across the middle of the longest side; both pieces keep
/// `min_box` cells along the cut axis. The longer axis is tried first; ties go to the
/// position nearest the middle, then the lower one. Deterministic.
pub fn berger_rigoutsos(flags: &Mask, cfg: &Cluster) -> Vec<Rect> {
    let mut out = Vec::new();
    let mut stack = vec![flags.rect()];
    while let Some(r) = stack.pop() {
        let Some(b) = flags.bounding_box_in(&r) else {
            continue;
        };
        if flags.count_in(&b) as f64 >= cfg.efficiency * b.cells() as f64 {
            out.push(b);
            continue;
        }
        match cut(flags, &b, cfg.min_box.max(1)) {
            Some((axis, at)) => {
                let (lo, hi) = b.split(axis, at);
                stack.push(hi);
                stack.push(lo);
            }
            None => out.push(b),
        }
    }
    out
}

/// Flag counts of the slices of `b` across `axis`, one per index along `axis`.
fn signature(flags: &Mask, b: &Rect, axis: usize) -> Vec<i64> {
    (b.lo[axis]..b.hi[axis])
        .map(|p| {
            let mut s = *b;
            s.lo[axis] = p;
            s.hi[axis] = p + 1;
            flags.count_in(&s) as i64
        })
        .collect()
}

/// The axes, longer first.
fn axes(b: &Rect) -> [usize; 2] {
    let a = b.longest_axis();
    [a, 1 - a]
}

/// Where to cut `b` (axis, position), or `None` when no cut keeps `m` cells on both sides.
fn cut(flags: &Mask, b: &Rect, m: i64) -> Option<(usize, i64)> {
    let allowed = |axis: usize, at: i64| at - b.lo[axis] >= m && b.hi[axis] - at >= m;
    let off_centre = |axis: usize, at: i64| (2 * at - b.lo[axis] - b.hi[axis]).abs();
    let sigs = [signature(flags, b, 0), signature(flags, b, 1)];
    // (1) Holes.
    for axis in axes(b) {
        let sig = &sigs[axis];
        let hole = (1..sig.len())
            .map(|p| b.lo[axis] + p as i64)
            .filter(|&at| allowed(axis, at) && sig[(at - b.lo[axis]) as usize] == 0)
            .min_by_key(|&at| (off_centre(axis, at), at));
        if let Some(at) = hole {
            return Some((axis, at));
        }
    }
    // (2) Inflections: the strongest sign change of the Laplacian of a signature.
    let mut best: Option<(i64, usize, i64)> = None;
    for axis in axes(b) {
        let sig = &sigs[axis];
        let lap: Vec<i64> = (1..sig.len().saturating_sub(1))
            .map(|p| sig[p - 1] - 2 * sig[p] + sig[p + 1])
            .collect();
        for p in 0..lap.len().saturating_sub(1) {
            let (a, c) = (lap[p], lap[p + 1]);
            // lap[p] is at index p + 1 of the signature: cut between it and the next.
            let at = b.lo[axis] + p as i64 + 2;
            if a.signum() * c.signum() < 0 && allowed(axis, at) {
                let strength = (c - a).abs();
                let better = match best {
                    None => true,
                    Some((s, ax, x)) => {
                        strength > s
                            || (strength == s
                                && ax == axis
                                && off_centre(axis, at) < off_centre(ax, x))
                    }
                };
                if better {
                    best = Some((strength, axis, at));
                }
            }
        }
    }
    if let Some((_, axis, at)) = best {
        return Some((axis, at));
    }
    // (3) The middle of the longest side that may be cut.
    axes(b)
        .into_iter()
        .map(|axis| (axis, (b.lo[axis] + b.hi[axis]).div_euclid(2)))
        .find(|&(axis, at)| allowed(axis, at))
}

/// Cuts `r` until every piece lies in `allowed`, keeping every flagged cell (the flags must
/// lie in `allowed`): each piece is shrunk to the bounding box of its flags; a piece not
/// wholly allowed is cut where the slices across an axis change from wholly allowed to not
/// (nearest the middle, the longer axis first), or else across the middle of its longest
/// side. Pieces may end below the minimum box size: proper nesting comes first.
pub fn nest(r: Rect, flags: &Mask, allowed: &Mask, out: &mut Vec<Rect>) {
    let mut stack = vec![r];
    while let Some(r) = stack.pop() {
        let Some(b) = flags.bounding_box_in(&r) else {
            continue;
        };
        if allowed.count_in(&b) == b.cells() {
            out.push(b);
            continue;
        }
        let whole = |axis: usize, p: i64| {
            let mut s = b;
            s.lo[axis] = p;
            s.hi[axis] = p + 1;
            allowed.count_in(&s) == s.cells()
        };
        let off_centre = |axis: usize, at: i64| (2 * at - b.lo[axis] - b.hi[axis]).abs();
        let transition = axes(&b).into_iter().find_map(|axis| {
            (b.lo[axis] + 1..b.hi[axis])
                .filter(|&at| whole(axis, at - 1) != whole(axis, at))
                .min_by_key(|&at| (off_centre(axis, at), at))
                .map(|at| (axis, at))
        });
        // A flagged cell is allowed, so a piece with a forbidden cell has two cells or more.
        let (axis, at) = transition.unwrap_or_else(|| {
            let axis = b.longest_axis();
            (axis, (b.lo[axis] + b.hi[axis]).div_euclid(2))
        });
        let (lo, hi) = b.split(axis, at);
        stack.push(hi);
        stack.push(lo);
    }
}

/// The cells of level `l ≥ 1` in which boxes of level `l + 1` may lie: those at least
/// [`NEST`] cells (Chebyshev) inside the union of level `l`'s boxes, the domain edge not
/// counting as an edge. For level 0 it is the whole domain.
pub fn nesting_region(domain: Rect, level: u8, boxes: &[Rect]) -> Mask {
    if level == 0 {
        Mask::of_rects(domain, &[domain])
    } else {
        Mask::of_rects(domain, boxes).erode(NEST)
    }
}

/// The boxes of level `l + 1` from the flags of level `l`: flags grown by `buffer` cells,
/// kept inside `allowed` (the [`nesting_region`] of level `l`), clustered by
/// [`berger_rigoutsos`] (with `min_box` halved to level-`l` cells), the boxes cut to lie in
/// `allowed` by [`nest`], and refined. Ordered canonically (lower y, then lower x).
pub fn next_level_boxes(flags: &Mask, allowed: &Mask, buffer: i64, cfg: &Cluster) -> Vec<Rect> {
    let f = flags.dilate(buffer).and(allowed);
    let coarse_cfg = Cluster {
        efficiency: cfg.efficiency,
        min_box: (cfg.min_box + 1) / 2,
    };
    let mut nested = Vec::new();
    for b in berger_rigoutsos(&f, &coarse_cfg) {
        nest(b, &f, allowed, &mut nested);
    }
    let mut fine: Vec<Rect> = nested.iter().map(Rect::refine).collect();
    fine.sort_by_key(|r| (r.lo[1], r.lo[0]));
    fine
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers_all_disjoint(flags: &Mask, boxes: &[Rect]) {
        for (i, j) in flags.cells() {
            assert_eq!(
                boxes.iter().filter(|b| b.contains(i, j)).count(),
                1,
                "({i}, {j})"
            );
        }
        for (a, x) in boxes.iter().enumerate() {
            for y in &boxes[a + 1..] {
                assert!(x.intersect(y).is_none(), "{x} and {y}");
            }
        }
    }

    fn cluster(efficiency: f64, min_box: i64) -> Cluster {
        Cluster {
            efficiency,
            min_box,
        }
    }

    #[test]
    fn two_blobs_split_at_the_hole() {
        let blobs = [Rect::new([1, 2], [5, 6]), Rect::new([11, 10], [15, 14])];
        let f = Mask::of_rects(Rect::square(20), &blobs);
        assert_eq!(berger_rigoutsos(&f, &cluster(0.8, 2)), blobs.to_vec());
    }

    #[test]
    fn an_l_shape_splits_at_its_inflection() {
        // An L: a 8x2 bar and a 2x6 bar above its left end.
        let bars = [Rect::new([0, 0], [8, 2]), Rect::new([0, 2], [2, 8])];
        let f = Mask::of_rects(Rect::square(8), &bars);
        let b = berger_rigoutsos(&f, &cluster(0.9, 1));
        covers_all_disjoint(&f, &b);
        assert_eq!(b.len(), 2);
        assert!(b.iter().all(|r| f.count_in(r) == r.cells()), "{b:?}");
    }

    #[test]
    fn nested_boxes_stay_inside_the_region() {
        // Level 1 is an L-shaped union; flags near its inner corner.
        let dom = Rect::square(16);
        let level1 = [Rect::new([0, 0], [16, 8]), Rect::new([0, 8], [8, 16])];
        let allowed = nesting_region(dom, 1, &level1);
        assert!(!allowed.get(7, 12) && allowed.get(5, 12) && !allowed.get(10, 6));
        let mut flags = Mask::new(dom);
        for (i, j) in [(3, 3), (12, 4), (4, 12), (12, 5)] {
            flags.set(i, j);
        }
        let fine = next_level_boxes(&flags, &allowed, 1, &cluster(0.5, 2));
        let grown = flags.dilate(1).and(&allowed);
        for b in &fine {
            assert!(b.is_aligned());
            assert_eq!(allowed.count_in(&b.coarsen()), b.coarsen().cells(), "{b}");
        }
        let coarse: Vec<Rect> = fine.iter().map(Rect::coarsen).collect();
        covers_all_disjoint(&grown, &coarse);
    }
}
