//! The PDE: advection–diffusion of a pulse carried round the centre of the unit square.

use crate::SamrError;
use crate::field::Field;
use serde::Serialize;

/// `u_t + a·∇u = ν Δu` on the unit square with the rigid rotation
/// `a = ω (−(y − ½), x − ½)` (divergence-free: the pulse turns round the centre once every
/// `2π/ω`), `u = 0` outside the square, and a Gaussian pulse
/// `u₀ = exp(−|x − c|² / σ²)` at the start: a feature that moves, so the hierarchy follows it.
///
/// Discretisation (cell-centred, per level `l` with `h_l = 1/(n0·2^l)`, `Δt_l = Δt_0 / 2^l`):
/// first-order upwind advection and central diffusion in flux form,
/// `u ← u − (Δt/h)(F_{i+½} − F_{i−½} + G_{j+½} − G_{j−½})`,
/// `F_{i+½} = a_x u_{upwind} − ν (u_{i+1} − u_i)/h` with the face velocity of the face centre;
/// `Δt_0 = cfl · h_0 / ω` (the largest `|a_x| + |a_y|` on the square is `ω`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Problem {
    /// Angular velocity ω (radians per unit time).
    pub omega: f64,
    /// Diffusion coefficient ν.
    pub nu: f64,
    /// The pulse's centre at t = 0.
    pub centre: [f64; 2],
    /// The pulse's width σ.
    pub sigma: f64,
    /// Courant number of the advection, in (0, 1].
    pub cfl: f64,
}

impl Default for Problem {
    fn default() -> Self {
        Problem {
            omega: 2.0 * std::f64::consts::PI,
            nu: 1e-4,
            centre: [0.8, 0.5],
            sigma: 0.04,
            cfl: 0.8,
        }
    }
}

impl Problem {
    /// `u₀` at `(x, y)`.
    pub fn initial(&self, x: f64, y: f64) -> f64 {
        let (dx, dy) = (x - self.centre[0], y - self.centre[1]);
        (-(dx * dx + dy * dy) / (self.sigma * self.sigma)).exp()
    }

    /// The level-0 time step `Δt_0 = cfl · h_0 / ω`.
    pub fn dt0(&self, n0: i64) -> f64 {
        self.cfl / (n0 as f64 * self.omega.abs())
    }

    /// Checks the parameters and the stability of the finest level: with subcycling the
    /// advective Courant number is the same on every level, the diffusive one doubles per
    /// level, and explicit Euler needs `cfl + 4 ν Δt_L / h_L² ≤ 1`.
    pub fn validate(&self, n0: i64, max_level: u8) -> Result<(), SamrError> {
        let bad = |what: &str, value: f64, expected| {
            Err(SamrError::BadValue {
                what: what.into(),
                value,
                expected,
            })
        };
        if !(self.omega.is_finite() && self.omega != 0.0) {
            return bad("omega", self.omega, "a finite number other than 0");
        }
        if !(self.nu.is_finite() && self.nu >= 0.0) {
            return bad("nu", self.nu, "a finite number >= 0");
        }
        if !(self.sigma.is_finite() && self.sigma > 0.0) {
            return bad("sigma", self.sigma, "a finite number > 0");
        }
        if !(self.cfl > 0.0 && self.cfl <= 1.0) {
            return bad("cfl", self.cfl, "a number in (0, 1]");
        }
        for (a, c) in self.centre.iter().enumerate() {
            if !c.is_finite() {
                return bad(&format!("centre[{a}]"), *c, "a finite coordinate");
            }
        }
        let h0 = 1.0 / n0 as f64;
        let diffusive = 4.0 * self.nu * self.dt0(n0) * f64::from(1u32 << max_level) / (h0 * h0);
        if self.cfl + diffusive > 1.0 {
            return bad(
                "cfl + 4 nu dt/h^2 on the finest level",
                self.cfl + diffusive,
                "at most 1 (lower nu, cfl or max_level)",
            );
        }
        Ok(())
    }

    /// One explicit step of `Δt` on a patch of level `level` whose ghost cells are filled:
    /// writes the new interior values into `out` (the same layout as `f`; its ghost cells are
    /// left as they are).
    #[cfg(test)]
    pub(crate) fn step(&self, h: f64, dt: f64, f: &Field, out: &mut [f64]) {
        self.step_rows(h, dt, f, out, f.rect.lo[1]..f.rect.hi[1]);
    }

    /// [`Problem::step`] on the rows `rows` of the patch only (the other values of `out`
    /// are left as they are): the same values, row for row.
    pub(crate) fn step_rows(
        &self,
        h: f64,
        dt: f64,
        f: &Field,
        out: &mut [f64],
        rows: std::ops::Range<i64>,
    ) {
        let r = f.rect;
        let c = dt / h;
        let flux = |a: f64, ul: f64, ur: f64| {
            let up = if a >= 0.0 { ul } else { ur };
            a * up - self.nu * (ur - ul) / h
        };
        for j in rows {
            let ax = -self.omega * ((j as f64 + 0.5) * h - 0.5);
            for i in r.lo[0]..r.hi[0] {
                let ay = self.omega * ((i as f64 + 0.5) * h - 0.5);
                let u = f.get(i, j);
                let (w, e) = (f.get(i - 1, j), f.get(i + 1, j));
                let (s, n) = (f.get(i, j - 1), f.get(i, j + 1));
                let fx = flux(ax, u, e) - flux(ax, w, u);
                let fy = flux(ay, u, n) - flux(ay, s, u);
                out[f.index(i, j)] = u - c * (fx + fy);
            }
        }
    }

    /// The error flag: the largest undivided difference `max(|u_{i+1} − u_{i−1}|,
    /// |u_{j+1} − u_{j−1}|)` above `tol` (ghost cells filled). Calls `flag(i, j)` for each
    /// flagged cell in row-major order.
    pub(crate) fn flags(&self, f: &Field, tol: f64, mut flag: impl FnMut(i64, i64)) {
        for (i, j) in f.rect.iter() {
            let dx = (f.get(i + 1, j) - f.get(i - 1, j)).abs();
            let dy = (f.get(i, j + 1) - f.get(i, j - 1)).abs();
            if dx.max(dy) > tol {
                flag(i, j);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rect;

    #[test]
    fn bands_of_rows_give_the_whole_step() {
        // The run sweeps a band of rows at a time: every band boundary must give the values
        // of the whole patch's step, bit for bit, and touch no other row.
        let p = Problem::default();
        let mut f = Field::new(Rect::new([2, -3], [13, 8]));
        let mut x = 0.1f64;
        for v in &mut f.u {
            x = (x * 3.7 + 0.31).fract();
            *v = x;
        }
        let (h, dt) = (1.0 / 32.0, p.dt0(32));
        let mut whole = vec![-1.0; f.u.len()];
        p.step(h, dt, &f, &mut whole);
        for band in 1..=12 {
            let mut banded = vec![-1.0; f.u.len()];
            let mut j = f.rect.lo[1];
            while j < f.rect.hi[1] {
                let end = (j + band).min(f.rect.hi[1]);
                p.step_rows(h, dt, &f, &mut banded, j..end);
                j = end;
            }
            assert!(
                whole
                    .iter()
                    .zip(&banded)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "bands of {band} rows"
            );
        }
        let mut one = vec![-1.0; f.u.len()];
        p.step_rows(h, dt, &f, &mut one, 0..2);
        for (i, j) in f.rect.iter() {
            let k = f.index(i, j);
            match (0..2).contains(&j) {
                true => assert_eq!(one[k].to_bits(), whole[k].to_bits()),
                false => assert_eq!(one[k], -1.0, "row {j} is outside the band"),
            }
        }
    }

    #[test]
    fn a_constant_stays_constant_without_diffusion_of_the_rotation() {
        // A uniform field (ghosts too) is a steady state: the rotation is divergence-free and
        // every flux difference cancels exactly in the interior rows it is computed for.
        let p = Problem::default();
        let mut f = Field::new(Rect::new([3, 3], [9, 9]));
        f.u.fill(0.25);
        let mut out = f.u.clone();
        p.step(1.0 / 16.0, p.dt0(16), &f, &mut out);
        for (i, j) in f.rect.iter() {
            assert!((out[f.index(i, j)] - 0.25).abs() < 1e-15);
        }
        assert!(p.validate(16, 2).is_ok());
        let e = Problem { nu: 1.0, ..p }
            .validate(16, 2)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cfl + 4 nu dt/h^2 on the finest level is "),
            "{e}"
        );
    }
}
