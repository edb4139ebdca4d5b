//! The boundary-value problems: −Δu = 0 on the unit square with Dirichlet data u = g taken
//! from a known harmonic function, so that the error of every step can be measured.

use crate::FemError;

/// A harmonic function on the unit square, used both as Dirichlet data and as the reference
/// for error measurement. Implement it for your own function, or wrap closures with
/// [`FnSolution`].
pub trait ExactSolution {
    /// A short name for reports.
    fn name(&self) -> String;
    /// u(x, y).
    fn value(&self, x: f64, y: f64) -> f64;
    /// ∇u(x, y), if known. Without it the energy error is not reported.
    fn gradient(&self, x: f64, y: f64) -> Option<[f64; 2]>;
    /// u at the points `(x[i], y[i])` into `out[i]`, for the error diagnostics (never the
    /// Dirichlet data): [`ExactSolution::value`] to within a few units in the last place. The
    /// default calls it point by point; a solution may evaluate the batch its own way.
    fn values(&self, x: &[f64], y: &[f64], out: &mut [f64]) {
        for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
            *o = self.value(a, b);
        }
    }
    /// ∇u at the points `(x[i], y[i])` into `(gx[i], gy[i])`, for the error diagnostics:
    /// [`ExactSolution::gradient`] to within a few units in the last place; `false` if the
    /// gradient is not known (the outputs are then unspecified).
    fn gradients(&self, x: &[f64], y: &[f64], gx: &mut [f64], gy: &mut [f64]) -> bool {
        for i in 0..x.len().min(y.len()) {
            let Some([a, b]) = self.gradient(x[i], y[i]) else {
                return false;
            };
            gx[i] = a;
            gy[i] = b;
        }
        true
    }
}

/// PHAML's elliptic example 3: u = r^{2/3} sin(2θ/3) with the singular point at the corner
/// (0, 0). Harmonic in the square (it is Im z^{2/3}); ∇u ~ r^{−1/3} is unbounded at the corner,
/// so uniform refinement converges like N^{−1/3} and only a graded mesh reaches N^{−1/2}.
#[derive(Debug, Clone, Copy, Default)]
pub struct CornerSingularity;

impl ExactSolution for CornerSingularity {
    fn name(&self) -> String {
        "corner".into()
    }
    fn value(&self, x: f64, y: f64) -> f64 {
        let r2 = x * x + y * y;
        if r2 == 0.0 {
            return 0.0;
        }
        let theta = y.atan2(x);
        r2.powf(1.0 / 3.0) * (2.0 * theta / 3.0).sin()
    }
    /// With f(z) = z^{2/3}, u = Im f and ∇u = (Im f′, Re f′), f′ = (2/3) r^{−1/3} e^{−iθ/3}.
    fn gradient(&self, x: f64, y: f64) -> Option<[f64; 2]> {
        let r2 = x * x + y * y;
        if r2 == 0.0 {
            return Some([0.0, 0.0]);
        }
        let theta = y.atan2(x);
        let m = (2.0 / 3.0) * r2.powf(-1.0 / 6.0);
        let (s, c) = (theta / 3.0).sin_cos();
        Some([-m * s, m * c])
    }
    /// Without `atan2`, `pow` or `sin`: see `corner.rs`.
    fn values(&self, x: &[f64], y: &[f64], out: &mut [f64]) {
        crate::corner::values(x, y, out);
    }
    /// Without `atan2`, `pow` or `sin`: see `corner.rs`.
    fn gradients(&self, x: &[f64], y: &[f64], gx: &mut [f64], gy: &mut [f64]) -> bool {
        crate::corner::gradients(x, y, gx, gy);
        true
    }
}

/// A smooth harmonic check problem: u = sin(πx) sinh(πy) / sinh(π).
#[derive(Debug, Clone, Copy, Default)]
pub struct SmoothHarmonic;

impl ExactSolution for SmoothHarmonic {
    fn name(&self) -> String {
        "smooth".into()
    }
    fn value(&self, x: f64, y: f64) -> f64 {
        use std::f64::consts::PI;
        (PI * x).sin() * (PI * y).sinh() / PI.sinh()
    }
    fn gradient(&self, x: f64, y: f64) -> Option<[f64; 2]> {
        use std::f64::consts::PI;
        let s = PI / PI.sinh();
        Some([
            s * (PI * x).cos() * (PI * y).sinh(),
            s * (PI * x).sin() * (PI * y).cosh(),
        ])
    }
}

/// A user-supplied exact solution from closures. The function must be harmonic for the
/// reported errors to mean anything (the right-hand side is zero).
///
/// ```
/// use fem_laplace::{ExactSolution, FnSolution};
/// let u = FnSolution::new("x+y", |x, y| x + y).with_gradient(|_, _| [1.0, 1.0]);
/// assert_eq!(u.value(0.25, 0.5), 0.75);
/// ```
pub struct FnSolution<F, G = fn(f64, f64) -> [f64; 2]> {
    name: String,
    value: F,
    gradient: Option<G>,
}

impl<F> FnSolution<F> {
    /// A solution with a value closure and no gradient.
    pub fn new(name: impl Into<String>, value: F) -> Self {
        FnSolution {
            name: name.into(),
            value,
            gradient: None,
        }
    }
}

impl<F, G> FnSolution<F, G> {
    /// Adds the gradient, which enables the energy-norm error.
    pub fn with_gradient<H>(self, gradient: H) -> FnSolution<F, H> {
        FnSolution {
            name: self.name,
            value: self.value,
            gradient: Some(gradient),
        }
    }
}

impl<F, G> std::fmt::Debug for FnSolution<F, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnSolution")
            .field("name", &self.name)
            .field("has_gradient", &self.gradient.is_some())
            .finish()
    }
}

impl<F, G> ExactSolution for FnSolution<F, G>
where
    F: Fn(f64, f64) -> f64,
    G: Fn(f64, f64) -> [f64; 2],
{
    fn name(&self) -> String {
        self.name.clone()
    }
    fn value(&self, x: f64, y: f64) -> f64 {
        (self.value)(x, y)
    }
    fn gradient(&self, x: f64, y: f64) -> Option<[f64; 2]> {
        self.gradient.as_ref().map(|g| g(x, y))
    }
}

/// The built-in problems, parsed once at the edge (`corner`, `smooth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Problem {
    /// [`CornerSingularity`] (the default, PHAML example 3).
    #[default]
    Corner,
    /// [`SmoothHarmonic`].
    Smooth,
}

impl Problem {
    /// The exact solution of this problem.
    pub fn solution(self) -> Box<dyn ExactSolution + Send + Sync> {
        match self {
            Problem::Corner => Box::new(CornerSingularity),
            Problem::Smooth => Box::new(SmoothHarmonic),
        }
    }
}

impl std::str::FromStr for Problem {
    type Err = FemError;
    fn from_str(s: &str) -> Result<Self, FemError> {
        match s {
            "corner" => Ok(Problem::Corner),
            "smooth" => Ok(Problem::Smooth),
            other => Err(FemError::BadProblem(other.to_string())),
        }
    }
}

/// Evaluates `u` at (x, y) and fails with the place if the value is not finite.
pub(crate) fn dirichlet_value(u: &dyn ExactSolution, x: f64, y: f64) -> Result<f64, FemError> {
    let value = u.value(x, y);
    if value.is_finite() {
        Ok(value)
    } else {
        Err(FemError::NonFiniteData {
            name: u.name(),
            x,
            y,
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Centred second differences: Δu ≈ 0 for every built-in solution, and the gradients
    /// agree with difference quotients.
    #[test]
    fn builtin_solutions_are_harmonic_with_correct_gradients() {
        let sols: [&dyn ExactSolution; 2] = [&CornerSingularity, &SmoothHarmonic];
        for u in sols {
            for &(x, y) in &[
                (0.3, 0.7),
                (0.9, 0.1),
                (0.05, 0.02),
                (0.5, 0.5),
                (0.01, 0.9),
            ] {
                let h = 1e-4;
                let lap =
                    (u.value(x + h, y) + u.value(x - h, y) + u.value(x, y + h) + u.value(x, y - h)
                        - 4.0 * u.value(x, y))
                        / (h * h);
                assert!(
                    lap.abs() < 1e-3,
                    "{} not harmonic at ({x},{y}): {lap}",
                    u.name()
                );
                let g = u.gradient(x, y).unwrap();
                let h = 1e-6;
                let gx = (u.value(x + h, y) - u.value(x - h, y)) / (2.0 * h);
                let gy = (u.value(x, y + h) - u.value(x, y - h)) / (2.0 * h);
                assert!(
                    (g[0] - gx).abs() < 1e-6 && (g[1] - gy).abs() < 1e-6,
                    "{}",
                    u.name()
                );
            }
        }
        // The corner solution vanishes on the bottom edge and is r^{2/3} sin(π/3) on the left.
        assert_eq!(CornerSingularity.value(0.4, 0.0), 0.0);
        let v = CornerSingularity.value(0.0, 0.5);
        assert!((v - 0.5f64.powf(2.0 / 3.0) * (std::f64::consts::PI / 3.0).sin()).abs() < 1e-14);
    }

    #[test]
    fn problem_names_parse_and_bad_ones_are_named() {
        assert_eq!("corner".parse::<Problem>().unwrap(), Problem::Corner);
        assert_eq!("smooth".parse::<Problem>().unwrap(), Problem::Smooth);
        let e = "lshape".parse::<Problem>().unwrap_err().to_string();
        assert!(e.contains("`lshape`") && e.contains("corner"), "{e}");
    }

    #[test]
    fn non_finite_dirichlet_data_is_reported_with_the_point() {
        let u = FnSolution::new("bad", |x: f64, _y: f64| 1.0 / (x - 0.5));
        let e = dirichlet_value(&u, 0.5, 0.25).unwrap_err().to_string();
        assert!(
            e.contains("`bad`") && e.contains("(0.5, 0.25)") && e.contains("inf"),
            "{e}"
        );
    }
}
