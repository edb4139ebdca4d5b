//! From coordinates to grid cells over the padded bounding box.

use crate::curve::{SUB_BITS, bits_per_axis};

/// The axis-aligned box of the input points (smallest and largest coordinate per axis).
///
/// Keys are computed over this box padded by `2^-16` of its extent on each side, so that no
/// input point lies in a corner cell of the grid (the curve's first and last cells): input keys
/// are never 0 or `u64::MAX`. An axis of zero extent (all points share the coordinate) maps
/// to one middle cell. Points outside the box are projected onto it (coordinates clamped).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundingBox {
    /// Smallest coordinate per axis (entries past `dim` are 0).
    pub lo: [f64; 3],
    /// Largest coordinate per axis (entries past `dim` are 0).
    pub hi: [f64; 3],
}

/// Precomputed scaling of one axis: `cell = (x·pre − lo·pre)·inv + off`, saturated to the
/// grid, where `off` is the padding in cells (added after the subtraction, so that it is not
/// absorbed when the coordinates are large compared with the extent).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Axis {
    pre: f64,
    base: f64,
    inv: f64,
    off: f64,
    max_cell: f64,
}

impl Axis {
    fn new(lo: f64, hi: f64, bits: u32) -> Axis {
        let max_cell = (bits as f64).exp2() - 1.0;
        let cells = (bits as f64).exp2();
        let ext1 = hi - lo;
        if ext1 == 0.0 || hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
            // Zero extent: every (finite) coordinate maps to the middle cell.
            let off = f64::from(1u32 << (bits - 1));
            return Axis {
                pre: 0.0,
                base: 0.0,
                inv: 0.0,
                off,
                max_cell,
            };
        }
        // Work in quarters when the extent (with padding) would overflow.
        let pre = if (ext1 * 2.0).is_finite() { 1.0 } else { 0.25 };
        let ext = hi * pre - lo * pre;
        let pad = ext * (-16f64).exp2();
        let base = lo * pre;
        let inv = cells / (ext + 2.0 * pad);
        Axis {
            pre,
            base,
            inv,
            off: pad * inv,
            max_cell,
        }
    }

    /// The coordinate in cell units, clamped to the grid.
    #[inline(always)]
    fn scaled(&self, x: f64) -> f64 {
        let v = (x * self.pre - self.base) * self.inv + self.off;
        let v = if v > 0.0 { v } else { 0.0 };
        if v < self.max_cell { v } else { self.max_cell }
    }

    /// Cell of a finite coordinate (monotone non-decreasing in `x`).
    #[inline(always)]
    pub(crate) fn cell(&self, x: f64) -> u32 {
        // Clamped to the grid, then rounded to the nearest integer by the 2^52 trick (the low
        // mantissa bits of v + 2^52 are round(v)): monotone, and it vectorises.
        (self.scaled(x) + TWO52).to_bits() as u32
    }

    /// Cell of a finite coordinate and the position inside it on a grid of `2^SUB_BITS` steps:
    /// cell `c` covers `v ∈ [c − ½, c + ½]` (the rounding of [`Axis::cell`], which it
    /// returns unchanged), and the position is `⌊(v − c + ½)·2^SUB_BITS⌋`, clamped. The pair is
    /// monotone (lexicographically) in `x`: every operation is.
    #[inline]
    pub(crate) fn cell_sub(&self, x: f64) -> (u32, u32) {
        let v = self.scaled(x);
        let r = v + TWO52;
        let c = r.to_bits() as u32;
        // v − c is exact (Sterbenz), and so is the scaling by a power of two.
        let frac = (v - (r - TWO52)) + 0.5;
        let sub = ((frac * f64::from(1u32 << SUB_BITS)) as u32).min((1 << SUB_BITS) - 1);
        (c, sub)
    }
}

const TWO52: f64 = 4_503_599_627_370_496.0;

/// The map from points to cells for one bounding box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Mapping {
    pub dim: usize,
    pub bbox: BoundingBox,
    pub axes: [Axis; 3],
}

impl Mapping {
    pub(crate) fn new(dim: usize, bbox: BoundingBox) -> Mapping {
        let bits = bits_per_axis(dim);
        let mut axes = [Axis::new(0.0, 0.0, bits); 3];
        for (a, axis) in axes.iter_mut().enumerate().take(dim) {
            *axis = Axis::new(bbox.lo[a], bbox.hi[a], bits);
        }
        Mapping { dim, bbox, axes }
    }

    /// Cell of a point of the box; for a point outside, the cell of its projection.
    pub(crate) fn clamped_cell(&self, x: &[f64]) -> [u32; 3] {
        let mut c = [0u32; 3];
        for a in 0..self.dim {
            let v = x[a].max(self.bbox.lo[a]).min(self.bbox.hi[a]);
            c[a] = self.axes[a].cell(v);
        }
        c
    }

    /// Cell and position inside it ([`Axis::cell_sub`]) of a point of the box; for a point
    /// outside, those of its projection.
    #[inline]
    pub(crate) fn clamped_cell_sub(&self, x: &[f64]) -> ([u32; 3], [u32; 3]) {
        let mut c = [0u32; 3];
        let mut s = [0u32; 3];
        for a in 0..self.dim {
            let v = x[a].max(self.bbox.lo[a]).min(self.bbox.hi[a]);
            (c[a], s[a]) = self.axes[a].cell_sub(v);
        }
        (c, s)
    }

    /// Position inside its cell ([`Axis::cell_sub`]) of a point of the box; for a point
    /// outside, that of its projection.
    #[inline]
    pub(crate) fn clamped_sub(&self, x: &[f64]) -> [u32; 3] {
        self.clamped_cell_sub(x).1
    }

    /// Fine key (see [`crate::curve::fine_key_of_cell`]) of a point of the box; for a point
    /// outside, that of its projection.
    pub(crate) fn fine_key(&self, x: &[f64]) -> u128 {
        let (c, s) = self.clamped_cell_sub(x);
        crate::curve::fine_key_of_cell(&c[..self.dim], &s[..self.dim])
    }

    /// Fine coordinate (`cell·2^SUB_BITS + sub`) of each axis of a point (projected).
    pub(crate) fn clamped_fine_coord(&self, x: &[f64]) -> [u64; 3] {
        let (c, s) = self.clamped_cell_sub(x);
        let mut f = [0u64; 3];
        for a in 0..self.dim {
            f[a] = (u64::from(c[a]) << SUB_BITS) | u64::from(s[a]);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_maps_inside_the_corner_cells() {
        for (lo, hi) in [
            (0.0, 1.0),
            (-1e300, 1.7e308),
            (-f64::MAX, f64::MAX),
            (1e16, 1e16 + 2.0),
        ] {
            for bits in [21u32, 32] {
                let a = Axis::new(lo, hi, bits);
                let max = if bits == 32 {
                    u32::MAX
                } else {
                    (1 << bits) - 1
                };
                let (cl, ch) = (a.cell(lo), a.cell(hi));
                assert!(
                    cl >= 1 && ch < max && cl < ch,
                    "{lo} {hi} {bits}: {cl} {ch}"
                );
            }
        }
        let a = Axis::new(5.0, 5.0, 32);
        assert_eq!(a.cell(5.0), 1 << 31);
    }

    #[test]
    fn cells_are_monotone() {
        let a = Axis::new(-3.0, 7.0, 32);
        let mut prev = 0;
        for i in 0..=10_000 {
            let x = -3.0 + 10.0 * f64::from(i) / 10_000.0;
            let c = a.cell(x);
            assert!(c >= prev);
            prev = c;
        }
    }

    #[test]
    fn positions_inside_cells_are_monotone_and_nested() {
        // Through whole cells (including exact cell boundaries, where the rounding is to
        // even), at the bottom and the top of the grid, and between adjacent doubles.
        for bits in [21u32, 32] {
            let a = Axis::new(0.0, 1.0, bits);
            let step = 1.0 / (bits as f64).exp2() / 64.0;
            for start in [0.0, 0.5, 1.0 - 64.0 * step] {
                let mut prev = (0u32, 0u32);
                let mut x = start - 8.0 * step;
                while x <= start + 64.0 * step {
                    let (c, s) = a.cell_sub(x);
                    assert_eq!(c, a.cell(x), "the cell is Axis::cell's");
                    assert!(s < 1 << SUB_BITS);
                    assert!(
                        (c, s) >= prev,
                        "{bits} bits at {x}: {prev:?} -> {:?}",
                        (c, s)
                    );
                    prev = (c, s);
                    x += step / 3.0;
                }
            }
            let mut x = 0.3f64;
            let mut prev = a.cell_sub(x);
            for _ in 0..10_000 {
                x = x.next_up();
                let cur = a.cell_sub(x);
                assert!(cur >= prev);
                prev = cur;
            }
        }
        // In 3-D the fine grid resolves about 2^-42 of the box.
        let a = Axis::new(0.0, 1.0, 21);
        assert_ne!(a.cell_sub(0.25), a.cell_sub(0.25 + 4.0 * (-42f64).exp2()));
        // A zero-extent axis: the middle cell, the middle of it.
        let z = Axis::new(5.0, 5.0, 21);
        assert_eq!(z.cell_sub(5.0), (1 << 20, 1 << (SUB_BITS - 1)));
    }
}
