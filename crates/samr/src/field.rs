//! The values of one patch, with one layer of ghost cells.

use crate::{Rect, SamrError};

/// Ghost layer width: the 5-point stencils need one cell.
pub(crate) const GHOST: i64 = 1;

/// A patch's values over its cells and one ghost layer, row-major over `rect.grow(GHOST)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// The patch's own cells.
    pub(crate) rect: Rect,
    /// `rect` with the ghost layer.
    pub(crate) grown: Rect,
    /// Values over `grown`.
    pub(crate) u: Vec<f64>,
    /// The values at the start of the level's current step, kept while finer levels
    /// interpolate in time between them and `u`.
    pub(crate) old: Option<Vec<f64>>,
}

impl Field {
    pub(crate) fn new(rect: Rect) -> Field {
        let grown = rect.grow(GHOST);
        Field {
            rect,
            grown,
            u: vec![0.0; grown.cells() as usize],
            old: None,
        }
    }

    pub(crate) fn index(&self, i: i64, j: i64) -> usize {
        self.grown.index(i, j)
    }

    pub(crate) fn get(&self, i: i64, j: i64) -> f64 {
        self.u[self.index(i, j)]
    }

    pub(crate) fn set(&mut self, i: i64, j: i64, v: f64) {
        let k = self.index(i, j);
        self.u[k] = v;
    }
}

/// Coarse data around a fine patch, gathered from the coarse level's patches, for coarse–fine
/// interpolation: values and which cells arrived.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    /// The coarse cells of the window.
    pub(crate) rect: Rect,
    values: Vec<f64>,
    have: Vec<bool>,
    /// The coarse level's domain: cells outside take the boundary value 0.
    domain: Rect,
}

/// `minmod(a, b)`: the smaller slope when both have one sign, else 0.
fn minmod(a: f64, b: f64) -> f64 {
    if a * b <= 0.0 {
        0.0
    } else if a.abs() < b.abs() {
        a
    } else {
        b
    }
}

impl Window {
    /// The coarse window a fine patch `fine` (cells of the fine level) needs: the coarse
    /// cells under it and its ghost layer, and one more for the slopes.
    pub(crate) fn around(fine: &Rect, coarse_domain: Rect) -> Window {
        let rect = fine.grow(GHOST).coarsen().grow(1);
        Window {
            rect,
            values: vec![0.0; rect.cells() as usize],
            have: vec![false; rect.cells() as usize],
            domain: coarse_domain,
        }
    }

    /// Stores coarse values over `r` (row-major).
    pub(crate) fn put(&mut self, r: &Rect, vals: &[f64]) {
        for ((i, j), v) in r.iter().zip(vals) {
            let k = self.rect.index(i, j);
            self.values[k] = *v;
            self.have[k] = true;
        }
    }

    fn coarse(&self, i: i64, j: i64, level: u8) -> Result<f64, SamrError> {
        if !self.domain.contains(i, j) {
            return Ok(0.0);
        }
        let k = self.rect.index(i, j);
        if self.have[k] {
            Ok(self.values[k])
        } else {
            Err(SamrError::Missing {
                level,
                i,
                j,
                what: "coarse value for interpolation (proper nesting broken)",
            })
        }
    }

    /// The value of fine cell `(i, j)` of level `level` (one finer than the window's):
    /// the coarse value plus minmod-limited slopes,
    /// `u_f = u_c ± ¼ minmod(Δ⁺_x, Δ⁻_x) ± ¼ minmod(Δ⁺_y, Δ⁻_y)` (conservative: the four
    /// fine cells average to `u_c`).
    pub(crate) fn interpolate(&self, i: i64, j: i64, level: u8) -> Result<f64, SamrError> {
        let (ci, cj) = (i.div_euclid(2), j.div_euclid(2));
        let coarse_level = level - 1;
        let c = self.coarse(ci, cj, coarse_level)?;
        let sx = minmod(
            self.coarse(ci + 1, cj, coarse_level)? - c,
            c - self.coarse(ci - 1, cj, coarse_level)?,
        );
        let sy = minmod(
            self.coarse(ci, cj + 1, coarse_level)? - c,
            c - self.coarse(ci, cj - 1, coarse_level)?,
        );
        let dx = if i.rem_euclid(2) == 0 { -0.25 } else { 0.25 };
        let dy = if j.rem_euclid(2) == 0 { -0.25 } else { 0.25 };
        Ok(c + (dx * sx + dy * sy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_exact_for_linear_data_and_conservative() {
        let fine = Rect::new([4, 4], [8, 8]);
        let mut w = Window::around(&fine, Rect::square(16));
        let r = w.rect;
        let vals: Vec<f64> = r.iter().map(|(i, j)| (2 * i + 3 * j) as f64).collect();
        w.put(&r, &vals);
        // Fine cell (5, 4) lies in coarse (2, 2) = 10, right half, lower half.
        assert_eq!(
            w.interpolate(5, 4, 1).unwrap(),
            10.0 + 0.25 * 2.0 - 0.25 * 3.0
        );
        let sum: f64 = [(4, 4), (5, 4), (4, 5), (5, 5)]
            .iter()
            .map(|&(i, j)| w.interpolate(i, j, 1).unwrap())
            .sum();
        assert_eq!(sum / 4.0, 10.0);
        let w = Window::around(&fine, Rect::square(16));
        assert_eq!(
            w.interpolate(5, 4, 1).unwrap_err().to_string(),
            "level 0 cell (2, 2): coarse value for interpolation (proper nesting broken)"
        );
    }
}
