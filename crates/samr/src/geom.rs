//! Rectangles of cells in one level's index space.

use serde::Serialize;
use std::fmt;

/// The refinement ratio between consecutive levels (in space and in time).
pub const RATIO: i64 = 2;

/// A half-open rectangle of cells `[lo, hi)` in one level's index space: cell `(i, j)` of
/// level `l` covers `[i·h_l, (i+1)·h_l) × [j·h_l, (j+1)·h_l)` with `h_l = 1 / (n0 · 2^l)`.
///
/// ```
/// use samr_kernel::Rect;
/// let r = Rect::new([2, 0], [6, 3]);
/// assert_eq!(r.cells(), 12);
/// assert_eq!(r.refine(), Rect::new([4, 0], [12, 6]));
/// assert_eq!(r.refine().coarsen(), r);
/// assert_eq!(r.intersect(&Rect::new([5, 1], [9, 9])), Some(Rect::new([5, 1], [6, 3])));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize)]
pub struct Rect {
    /// Lowest cell (inclusive), `[i, j]`.
    pub lo: [i64; 2],
    /// Highest cell (exclusive), `[i, j]`.
    pub hi: [i64; 2],
}

impl fmt::Display for Rect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, {}) x [{}, {})",
            self.lo[0], self.hi[0], self.lo[1], self.hi[1]
        )
    }
}

impl Rect {
    /// `[lo, hi)`; empty when `hi <= lo` along an axis.
    pub const fn new(lo: [i64; 2], hi: [i64; 2]) -> Rect {
        Rect { lo, hi }
    }

    /// The square `[0, n)²`.
    pub const fn square(n: i64) -> Rect {
        Rect::new([0, 0], [n, n])
    }

    /// Length along `axis` (0 when empty).
    pub fn len(&self, axis: usize) -> i64 {
        (self.hi[axis] - self.lo[axis]).max(0)
    }

    /// No cell.
    pub fn is_empty(&self) -> bool {
        self.len(0) == 0 || self.len(1) == 0
    }

    /// Number of cells.
    pub fn cells(&self) -> u64 {
        (self.len(0) * self.len(1)) as u64
    }

    /// The axis of the longest side (x on a tie).
    pub fn longest_axis(&self) -> usize {
        usize::from(self.len(1) > self.len(0))
    }

    /// The common cells, if any.
    pub fn intersect(&self, o: &Rect) -> Option<Rect> {
        let r = Rect::new(
            [self.lo[0].max(o.lo[0]), self.lo[1].max(o.lo[1])],
            [self.hi[0].min(o.hi[0]), self.hi[1].min(o.hi[1])],
        );
        (!r.is_empty()).then_some(r)
    }

    /// Whether every cell of `o` is in `self` (an empty `o` is).
    pub fn contains_rect(&self, o: &Rect) -> bool {
        o.is_empty()
            || (0..2).all(|a| self.lo[a] <= o.lo[a] && o.hi[a] <= self.hi[a] && !self.is_empty())
    }

    /// Whether cell `(i, j)` is in `self`.
    pub fn contains(&self, i: i64, j: i64) -> bool {
        self.lo[0] <= i && i < self.hi[0] && self.lo[1] <= j && j < self.hi[1]
    }

    /// Grown by `n` cells on every side.
    pub fn grow(&self, n: i64) -> Rect {
        Rect::new(
            [self.lo[0] - n, self.lo[1] - n],
            [self.hi[0] + n, self.hi[1] + n],
        )
    }

    /// The cells of the next finer level that cover `self`.
    pub fn refine(&self) -> Rect {
        Rect::new(
            [self.lo[0] * RATIO, self.lo[1] * RATIO],
            [self.hi[0] * RATIO, self.hi[1] * RATIO],
        )
    }

    /// The cells of the next coarser level that `self` touches.
    pub fn coarsen(&self) -> Rect {
        Rect::new(
            [self.lo[0].div_euclid(RATIO), self.lo[1].div_euclid(RATIO)],
            [
                (self.hi[0] + RATIO - 1).div_euclid(RATIO),
                (self.hi[1] + RATIO - 1).div_euclid(RATIO),
            ],
        )
    }

    /// Whether `self` is a union of whole cells of the next coarser level.
    pub fn is_aligned(&self) -> bool {
        self.lo.iter().chain(&self.hi).all(|x| x % RATIO == 0)
    }

    /// The two pieces of a cut across `axis` at `at` (`lo < at < hi` along that axis): the
    /// lower piece first.
    ///
    /// # Panics
    /// If `at` is not strictly inside the rectangle along `axis`.
    pub fn split(&self, axis: usize, at: i64) -> (Rect, Rect) {
        assert!(
            self.lo[axis] < at && at < self.hi[axis],
            "Rect::split: {at} is not inside {self} along axis {axis}"
        );
        let (mut a, mut b) = (*self, *self);
        a.hi[axis] = at;
        b.lo[axis] = at;
        (a, b)
    }

    /// Index of cell `(i, j)` in a row-major array over `self` (x fastest).
    pub fn index(&self, i: i64, j: i64) -> usize {
        debug_assert!(self.contains(i, j), "({i}, {j}) outside {self}");
        ((j - self.lo[1]) * self.len(0) + (i - self.lo[0])) as usize
    }

    /// The cells in row-major order (x fastest).
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        let (x0, x1) = (self.lo[0], self.hi[0]);
        (self.lo[1]..self.hi[1]).flat_map(move |j| (x0..x1).map(move |i| (i, j)))
    }

    /// The centre in level-0 cell units (`2^level` cells of this level per level-0 cell).
    pub fn centre_level0(&self, level: u8) -> [f64; 2] {
        let s = 0.5 / f64::from(1u32 << level);
        [
            (self.lo[0] + self.hi[0]) as f64 * s,
            (self.lo[1] + self.hi[1]) as f64 * s,
        ]
    }
}

/// A bitmap over a rectangle of cells (flags, coverage, the proper-nesting region).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Mask {
    rect: Rect,
    bits: Vec<bool>,
}

impl Mask {
    /// All cells of `rect` unset.
    pub fn new(rect: Rect) -> Mask {
        Mask {
            rect,
            bits: vec![false; rect.cells() as usize],
        }
    }

    /// The cells of `rects` (clipped to `over`) set.
    pub fn of_rects<'a>(over: Rect, rects: impl IntoIterator<Item = &'a Rect>) -> Mask {
        let mut m = Mask::new(over);
        for r in rects {
            m.set_rect(r);
        }
        m
    }

    /// The rectangle the mask spans.
    pub fn rect(&self) -> Rect {
        self.rect
    }

    /// Whether `(i, j)` is set (false outside the mask's rectangle).
    pub fn get(&self, i: i64, j: i64) -> bool {
        self.rect.contains(i, j) && self.bits[self.rect.index(i, j)]
    }

    /// Sets `(i, j)` (ignored outside the mask's rectangle).
    pub fn set(&mut self, i: i64, j: i64) {
        if self.rect.contains(i, j) {
            let k = self.rect.index(i, j);
            self.bits[k] = true;
        }
    }

    /// Sets every cell of `r` inside the mask.
    pub fn set_rect(&mut self, r: &Rect) {
        if let Some(r) = r.intersect(&self.rect) {
            for (i, j) in r.iter() {
                let k = self.rect.index(i, j);
                self.bits[k] = true;
            }
        }
    }

    /// Number of set cells in `r`.
    pub fn count_in(&self, r: &Rect) -> u64 {
        r.intersect(&self.rect).map_or(0, |r| {
            r.iter().filter(|&(i, j)| self.get(i, j)).count() as u64
        })
    }

    /// The smallest rectangle holding every set cell of `r`, if any.
    pub fn bounding_box_in(&self, r: &Rect) -> Option<Rect> {
        let r = r.intersect(&self.rect)?;
        let mut b: Option<Rect> = None;
        for (i, j) in r.iter().filter(|&(i, j)| self.get(i, j)) {
            let c = Rect::new([i, j], [i + 1, j + 1]);
            b = Some(match b {
                None => c,
                Some(b) => Rect::new(
                    [b.lo[0].min(i), b.lo[1].min(j)],
                    [b.hi[0].max(c.hi[0]), b.hi[1].max(c.hi[1])],
                ),
            });
        }
        b
    }

    /// The mask grown by `n` cells in every direction (a cell is set if one within Chebyshev
    /// distance `n` was), within the mask's rectangle.
    pub fn dilate(&self, n: i64) -> Mask {
        self.morph(n, true)
    }

    /// The cells whose every neighbour within Chebyshev distance `n` is set; cells outside
    /// the mask's rectangle count as set (the domain boundary does not erode).
    pub fn erode(&self, n: i64) -> Mask {
        self.morph(n, false)
    }

    /// Dilation (`any`) or erosion over the square of radius `n`, one axis at a time.
    fn morph(&self, n: i64, any: bool) -> Mask {
        let mut cur = self.clone();
        for axis in 0..2 {
            let mut next = Mask::new(self.rect);
            for (i, j) in self.rect.iter() {
                let mut hit = !any;
                for d in -n..=n {
                    let (a, b) = if axis == 0 { (i + d, j) } else { (i, j + d) };
                    let v = if self.rect.contains(a, b) {
                        cur.get(a, b)
                    } else {
                        !any
                    };
                    if any && v {
                        hit = true;
                        break;
                    }
                    if !any && !v {
                        hit = false;
                        break;
                    }
                }
                if hit {
                    next.set(i, j);
                }
            }
            cur = next;
        }
        cur
    }

    /// Cell-wise `self and other` (the same rectangle).
    ///
    /// # Panics
    /// If the rectangles differ.
    pub fn and(&self, other: &Mask) -> Mask {
        assert_eq!(self.rect, other.rect, "Mask::and over different rectangles");
        Mask {
            rect: self.rect,
            bits: self
                .bits
                .iter()
                .zip(&other.bits)
                .map(|(a, b)| *a && *b)
                .collect(),
        }
    }

    /// The set cells in row-major order.
    pub fn cells(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.rect.iter().filter(|&(i, j)| self.get(i, j))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarsen_covers_and_refine_inverts() {
        let r = Rect::new([-1, 3], [5, 8]);
        assert_eq!(r.coarsen(), Rect::new([-1, 1], [3, 4]));
        assert!(r.coarsen().refine().contains_rect(&r));
        assert!(!r.is_aligned());
        assert!(r.coarsen().refine().is_aligned());
        assert_eq!(r.longest_axis(), 0);
        assert_eq!(Rect::new([0, 0], [2, 3]).longest_axis(), 1);
    }

    #[test]
    fn split_and_index() {
        let r = Rect::new([0, 0], [4, 2]);
        let (a, b) = r.split(0, 1);
        assert_eq!((a.cells(), b.cells()), (2, 6));
        assert_eq!(r.index(3, 1), 7);
        assert_eq!(r.iter().nth(5), Some((1, 1)));
    }

    #[test]
    fn morphology_at_the_boundary() {
        let dom = Rect::square(6);
        let m = Mask::of_rects(dom, &[Rect::new([0, 0], [4, 4])]);
        // Eroding by 1: the domain edge does not erode, the inner edge does.
        let e = m.erode(1);
        assert_eq!(e.bounding_box_in(&dom), Some(Rect::new([0, 0], [3, 3])));
        assert_eq!(e.count_in(&dom), 9);
        let mut one = Mask::new(dom);
        one.set(2, 2);
        assert_eq!(one.dilate(1).count_in(&dom), 9);
        assert_eq!(one.dilate(5).count_in(&dom), 36);
    }
}
