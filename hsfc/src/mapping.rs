//! From coordinates to grid cells over the padded bounding box.

use crate::curve::bits_per_axis;

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

    /// Cell of a finite coordinate (monotone non-decreasing in `x`).
    #[inline(always)]
    pub(crate) fn cell(&self, x: f64) -> u32 {
        // Clamped to the grid, then rounded to the nearest integer by the 2^52 trick (the low
        // mantissa bits of v + 2^52 are round(v)): monotone, and it vectorises.
        let v = (x * self.pre - self.base) * self.inv + self.off;
        let v = if v > 0.0 { v } else { 0.0 };
        let v = if v < self.max_cell { v } else { self.max_cell };
        (v + 4_503_599_627_370_496.0).to_bits() as u32
    }
}

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
}
