//! The a-posteriori error estimator and the errors against the exact solution.

use crate::FemError;
use crate::exact::ExactSum;
use crate::mesh::{Mesh, NONE};
use crate::problem::ExactSolution;

/// Gradient of the P1 function `u` on each element (constant per element).
pub fn gradients_into(mesh: &Mesh, u: &[f64], out: &mut Vec<[f64; 2]>) {
    assert_eq!(
        u.len(),
        mesh.num_vertices(),
        "gradients: u must have one value per vertex"
    );
    out.clear();
    out.reserve_exact(mesh.num_elements());
    let c = mesh.coords();
    out.extend(mesh.elements().iter().map(|t| {
        let [p0, p1, p2] = t.map(|v| c[v as usize]);
        let [u0, u1, u2] = t.map(|v| u[v as usize]);
        let (ax, ay, bx, by) = (p1[0] - p0[0], p1[1] - p0[1], p2[0] - p0[0], p2[1] - p0[1]);
        let (du1, du2) = (u1 - u0, u2 - u0);
        let det = ax * by - bx * ay;
        [(du1 * by - du2 * ay) / det, (ax * du2 - bx * du1) / det]
    }));
}

/// The P1 residual indicator of every element, squared, written into `eta2`; returns the
/// estimate η = (Σ_T η_T²)^{1/2}, the sum taken exactly over the edge terms ([`ExactSum`]).
///
/// For −Δu = f with P1 elements (Verfürth, *A Posteriori Error Estimation Techniques for
/// Finite Element Methods*, 2013, §1.4):
///
///   η_T² = h_T² ‖f‖²_{L²(T)} + ½ Σ_{E ⊂ ∂T ∩ Ω} h_E ‖[∂u_h/∂n]_E‖²_{L²(E)}
///          + Σ_{E ⊂ ∂T ∩ ∂Ω} h_E ‖∂_s(g − I_h g)‖²_{L²(E)}.
///
/// Here f = 0 and Δu_h = 0 inside each element, so the element residual vanishes and the
/// jumps of the normal flux across interior edges remain; the jump is constant on E, so
/// h_E ‖[∂_n u_h]‖² = (|E| [∂_n u_h])² = ((∇u_T − ∇u_N) · rot E)² with rot E the edge vector
/// turned by 90°. Each interior edge is visited once and gives half of its value to each of
/// its two elements. The last term is the oscillation of the Dirichlet data g (interpolated
/// at the boundary vertices), evaluated as if g were quadratic on E: with
/// δ = g(mid E) − ½(g(a) + g(b)), h_E ‖∂_s(g − I_h g)‖² = 16 δ² / 3. Without it a problem
/// whose data vanish at the four corners would look solved on the initial mesh.
pub fn estimate_into(
    mesh: &Mesh,
    u: &[f64],
    g: &dyn ExactSolution,
    grad: &mut Vec<[f64; 2]>,
    eta2: &mut Vec<f64>,
) -> f64 {
    estimate_part(mesh, u, g, grad, eta2, |_| true)
        .value()
        .sqrt()
}

/// [`estimate_into`] on a rank's part: the indicators of the elements with `owned(t)` (whose
/// neighbours are all present) are exact, and the returned sum holds each edge term once, on
/// the rank that owns the element first along the curve of the edge's two.
pub(crate) fn estimate_part(
    mesh: &Mesh,
    u: &[f64],
    g: &dyn ExactSolution,
    grad: &mut Vec<[f64; 2]>,
    eta2: &mut Vec<f64>,
    owned: impl Fn(usize) -> bool,
) -> ExactSum {
    gradients_into(mesh, u, grad);
    let ne = mesh.num_elements();
    eta2.clear();
    eta2.resize(ne, 0.0);
    let c = mesh.coords();
    let tri = mesh.elements();
    let nbr = mesh.neighbours();
    // Each edge's term once, summed exactly: the same estimate for any distribution.
    let mut total = ExactSum::new();
    for t in 0..ne {
        let tv = tri[t];
        let gt = grad[t];
        let mine = owned(t);
        for k in 0..3 {
            let n = nbr[t][k];
            let (a, b) = (tv[NEXT[k]] as usize, tv[NEXT[NEXT[k]]] as usize);
            let (p, q) = (c[a], c[b]);
            if n == NONE {
                let d = g.value(0.5 * (p[0] + q[0]), 0.5 * (p[1] + q[1])) - 0.5 * (u[a] + u[b]);
                let e = 16.0 / 3.0 * d * d;
                if mine {
                    total.add(e);
                }
                eta2[t] += e;
                continue;
            }
            if (n as usize) < t {
                continue;
            }
            let gn = grad[n as usize];
            let j = (gt[0] - gn[0]) * (q[1] - p[1]) - (gt[1] - gn[1]) * (q[0] - p[0]);
            let e = j * j;
            if mine {
                total.add(e);
            }
            eta2[t] += 0.5 * e;
            eta2[n as usize] += 0.5 * e;
        }
    }
    total
}

/// The corner after corner `k` of an element: edge k (opposite corner k) joins corners
/// `NEXT[k]` and `NEXT[NEXT[k]]`. In [`estimate_part`]'s edge loop the table costs fewer
/// instructions than `(k + 1) % 3` (634 M -> 600 M over the run; in the assembly's loops it
/// costs more, so they keep the modulo).
const NEXT: [usize; 3] = [1, 2, 0];

/// Errors of a discrete solution against the exact one.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Errors {
    /// ‖∇(u − u_h)‖_{L²(Ω)}, if the exact gradient is known.
    pub energy: Option<f64>,
    /// max over vertices |u(x_v) − u_h(v)|.
    pub max_vertex: f64,
}

/// Computes [`Errors`]; an exact solution (or gradient) that is not finite somewhere is an
/// error naming the point, never a silently wrong maximum. The energy error uses the three-point edge-midpoint rule on each
/// element (exact for quadratic integrands): ∫_T |∇u − ∇u_h|² ≈ |T|/3 Σ_mid |∇u(mid) − ∇u_T|².
/// If `per_element` is given, the squared energy error of each element is written there
/// (for the VTK output). `grad` must hold the element gradients of `u_h`
/// ([`gradients_into`]).
pub fn errors(
    mesh: &Mesh,
    uh: &[f64],
    grad: &[[f64; 2]],
    exact: &dyn ExactSolution,
    per_element: Option<&mut Vec<f64>>,
) -> Result<Errors, FemError> {
    let p = errors_part(mesh, uh, grad, exact, per_element, |_| true, |_| true)?;
    Ok(Errors {
        energy: p.energy2.map(|s| s.value().sqrt()),
        max_vertex: p.max_vertex,
    })
}

/// A rank's part of [`Errors`]: the squared energy error of its elements as an exact sum,
/// and the maximum over its vertices.
#[derive(Debug, Clone)]
pub(crate) struct ErrorsPart {
    pub(crate) energy2: Option<ExactSum>,
    pub(crate) max_vertex: f64,
}

/// Vertices per batch of exact values in [`errors_part`] (a few kilobytes: it stays in the
/// first-level cache).
const BATCH: usize = 256;

/// Elements per chunk of [`errors_part`]'s midpoints (their points, three per element, stay
/// in the second-level cache).
const CHUNK_ELEMENTS: usize = 1024;

/// A chunk of elements for [`errors_part`]'s energy error: the elements, each one's area
/// and the midpoints of its three edges (element `i`'s edge `k` at `3i + k` of `x`, `y` and
/// the gradients `gx`, `gy`), and the owned elements' terms, in order, for one exact
/// [`ExactSum::add_slice`] (`terms`).
struct Chunk {
    els: Vec<u32>,
    terms: Vec<f64>,
    area: Vec<f64>,
    x: Vec<f64>,
    y: Vec<f64>,
    gx: Vec<f64>,
    gy: Vec<f64>,
}

impl Chunk {
    fn new() -> Chunk {
        let (e, p) = (CHUNK_ELEMENTS, 3 * CHUNK_ELEMENTS);
        Chunk {
            els: vec![0; e],
            terms: vec![0.0; e],
            area: vec![0.0; e],
            x: vec![0.0; p],
            y: vec![0.0; p],
            gx: vec![0.0; p],
            gy: vec![0.0; p],
        }
    }
}

/// A batch of points with what each serves (a vertex), with room for the results (`a`).
struct Batch {
    x: Box<[f64; BATCH]>,
    y: Box<[f64; BATCH]>,
    at: Box<[u32; BATCH]>,
    a: Box<[f64; BATCH]>,
    n: usize,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            x: Box::new([0.0; BATCH]),
            y: Box::new([0.0; BATCH]),
            at: Box::new([0; BATCH]),
            a: Box::new([0.0; BATCH]),
            n: 0,
        }
    }
    #[inline(always)]
    fn push(&mut self, x: f64, y: f64, at: u32) {
        self.x[self.n] = x;
        self.y[self.n] = y;
        self.at[self.n] = at;
        self.n += 1;
    }
    fn full(&self) -> bool {
        self.n == BATCH
    }
}

/// [`errors`] over the vertices with `own_vertex(v)` and the elements with `own_element(t)`
/// (whose neighbours are all present).
pub(crate) fn errors_part(
    mesh: &Mesh,
    uh: &[f64],
    grad: &[[f64; 2]],
    exact: &dyn ExactSolution,
    per_element: Option<&mut Vec<f64>>,
    own_vertex: impl Fn(usize) -> bool,
    own_element: impl Fn(usize) -> bool,
) -> Result<ErrorsPart, FemError> {
    let c = mesh.coords();
    // The exact values are evaluated a batch at a time ([`ExactSolution::values`]), the
    // batch's points first gathered; the gradients a chunk at a time ([`energy_part`]).
    let mut b = Batch::new();
    let mut max_vertex: f64 = 0.0;
    for (v, p) in c.iter().enumerate() {
        if own_vertex(v) {
            b.push(p[0], p[1], v as u32);
        }
        if b.full() || (v + 1 == c.len() && b.n > 0) {
            let n = std::mem::take(&mut b.n);
            exact.values(&b.x[..n], &b.y[..n], &mut b.a[..n]);
            for i in 0..n {
                let value = b.a[i];
                if !value.is_finite() {
                    return Err(non_finite_data(exact, b.x[i], b.y[i], value));
                }
                max_vertex = max_vertex.max((value - uh[b.at[i] as usize]).abs());
            }
        }
    }
    let all = per_element.is_some();
    let mut e2 = if all {
        vec![0.0; mesh.elements().len()]
    } else {
        Vec::new()
    };
    let energy2 = energy_part(mesh, grad, exact, all.then_some(&mut e2[..]), own_element)?;
    if let Some(pe) = per_element {
        *pe = e2;
    }
    Ok(ErrorsPart {
        energy2,
        max_vertex,
    })
}

/// The squared energy error of the elements with `own_element(t)` as an exact sum (`None`
/// when the exact solution has no gradient); every element's own term in `per_element`
/// when it is given (then every element is evaluated).
fn energy_part(
    mesh: &Mesh,
    grad: &[[f64; 2]],
    exact: &dyn ExactSolution,
    mut per_element: Option<&mut [f64]>,
    own_element: impl Fn(usize) -> bool,
) -> Result<Option<ExactSum>, FemError> {
    // Each element's three edge midpoints, a chunk of elements at a time, their exact
    // gradients in one batch, and the element's three terms summed in its own edge order: no
    // scatter, and a rank evaluates only its own elements (all of them when `per_element` is
    // asked for). An edge's midpoint is evaluated from each of its elements (the same bits
    // twice, as 0.5·(p + q) = 0.5·(q + p)): sharing it within a chunk halved the points but
    // its bookkeeping, a search of the neighbour's links per edge, cost more than the
    // vectorised second evaluation.
    let c = mesh.coords();
    let tri = mesh.elements();
    let all = per_element.is_some();
    let mut sum = ExactSum::new();
    let mut ch = Chunk::new();
    let mut t = 0;
    while t < tri.len() {
        let mut ne = 0;
        while t < tri.len() && ne < CHUNK_ELEMENTS {
            if all || own_element(t) {
                ch.els[ne] = t as u32;
                ne += 1;
            }
            t += 1;
        }
        // (Element i's three points as one 3-array of x and of y: no bounds check per point.)
        let points = (ch.x.chunks_exact_mut(3)).zip(ch.y.chunks_exact_mut(3));
        for ((&e, area), (xs, ys)) in ch.els[..ne].iter().zip(&mut ch.area).zip(points) {
            let [p0, p1, p2] = tri[e as usize].map(|v| c[v as usize]);
            *area =
                0.5 * ((p1[0] - p0[0]) * (p2[1] - p0[1]) - (p2[0] - p0[0]) * (p1[1] - p0[1])).abs();
            for (k, (p, q)) in [(p1, p2), (p2, p0), (p0, p1)].into_iter().enumerate() {
                xs[k] = 0.5 * (p[0] + q[0]);
                ys[k] = 0.5 * (p[1] + q[1]);
            }
        }
        let m = 3 * ne;
        let (x, y) = (&ch.x[..m], &ch.y[..m]);
        let (gx, gy) = (&mut ch.gx[..m], &mut ch.gy[..m]);
        if !exact.gradients(x, y, gx, gy) {
            return Ok(None);
        }
        let (gx, gy) = (&ch.gx[..m], &ch.gy[..m]);
        // A non-finite exact gradient makes its elements' terms non-finite: the points are
        // searched only then (a non-finite term from u_h's gradient alone is summed as before).
        let mut finite = true;
        let mut owned = 0;
        let grads = gx.chunks_exact(3).zip(gy.chunks_exact(3));
        for ((&e, &area), (gxe, gye)) in ch.els[..ne].iter().zip(&ch.area[..ne]).zip(grads) {
            let g = grad[e as usize];
            let term = |k: usize| {
                let (a, b) = (gxe[k] - g[0], gye[k] - g[1]);
                a * a + b * b
            };
            let x = (term(0) + term(1) + term(2)) * (area / 3.0);
            finite &= x.is_finite();
            if own_element(e as usize) {
                ch.terms[owned] = x;
                owned += 1;
            }
            if let Some(pe) = per_element.as_deref_mut() {
                pe[e as usize] = x;
            }
        }
        sum.add_slice(&ch.terms[..owned]);
        if !finite && let Some(i) = (0..m).find(|&i| !(gx[i].is_finite() && gy[i].is_finite())) {
            let value = if gx[i].is_finite() { gy[i] } else { gx[i] };
            return Err(non_finite_data(exact, x[i], y[i], value));
        }
    }
    Ok(Some(sum))
}

/// The error for a non-finite value of the exact solution at (x, y).
fn non_finite_data(exact: &dyn ExactSolution, x: f64, y: f64, value: f64) -> FemError {
    FemError::NonFiniteData {
        name: exact.name(),
        x,
        y,
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Marks;
    use crate::problem::FnSolution;

    /// The batch path (the corner solution's vectorised formulas, evaluated per element)
    /// against the scalar libm formulas point by point: the same errors to rounding, the
    /// per-element values where asked, and a non-finite gradient named with its point.
    #[test]
    fn batched_errors_match_the_scalar_formulas() {
        let (mesh, u, grad) = smooth_data(7);
        let exact = crate::CornerSingularity;
        let scalar = FnSolution::new("scalar", |x, y| exact.value(x, y))
            .with_gradient(|x, y| exact.gradient(x, y).unwrap());
        let (mut pa, mut pb) = (Vec::new(), Vec::new());
        let a = errors(&mesh, &u, &grad, &exact, Some(&mut pa)).unwrap();
        let b = errors(&mesh, &u, &grad, &scalar, Some(&mut pb)).unwrap();
        let (ea, eb) = (a.energy.unwrap(), b.energy.unwrap());
        assert!((ea - eb).abs() <= 1e-13 * eb, "{ea} vs {eb}");
        assert!(
            (a.max_vertex - b.max_vertex).abs() <= 1e-15,
            "{a:?} vs {b:?}"
        );
        assert_eq!(pa.len(), mesh.num_elements());
        for (x, y) in pa.iter().zip(&pb) {
            assert!((x - y).abs() <= 1e-13 * y.abs() + 1e-300, "{x} vs {y}");
        }
        // One element's own-element sum equals its per-element value.
        let one = errors_part(&mesh, &u, &grad, &exact, None, |_| true, |t| t == 5).unwrap();
        assert_eq!(one.energy2.unwrap().value(), pa[5]);
        let bad = FnSolution::new("bad", |_, _| 0.0).with_gradient(|x, _| [1.0 / (x - 0.5), 0.0]);
        let e = errors(&mesh, &u, &grad, &bad, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad") && e.contains("0.5"), "{e}");
    }

    /// An exact solution that counts the points its gradients are asked at.
    struct Counted(std::sync::atomic::AtomicUsize);

    impl ExactSolution for Counted {
        fn name(&self) -> String {
            "counted".into()
        }
        fn value(&self, x: f64, y: f64) -> f64 {
            crate::CornerSingularity.value(x, y)
        }
        fn gradient(&self, x: f64, y: f64) -> Option<[f64; 2]> {
            crate::CornerSingularity.gradient(x, y)
        }
        fn values(&self, x: &[f64], y: &[f64], out: &mut [f64]) {
            crate::CornerSingularity.values(x, y, out);
        }
        fn gradients(&self, x: &[f64], y: &[f64], gx: &mut [f64], gy: &mut [f64]) -> bool {
            self.0
                .fetch_add(x.len(), std::sync::atomic::Ordering::Relaxed);
            crate::CornerSingularity.gradients(x, y, gx, gy)
        }
    }

    /// Every element's error is the bits of its own three midpoints' terms (evaluated here
    /// element by element), and the gradients are asked at those points only.
    #[test]
    fn each_element_is_its_own_three_midpoints_bit_for_bit() {
        let (mesh, u, grad) = smooth_data(9);
        let c = mesh.coords();
        let exact = Counted(std::sync::atomic::AtomicUsize::new(0));
        let mut pe = Vec::new();
        errors(&mesh, &u, &grad, &exact, Some(&mut pe)).unwrap();
        let ne = mesh.num_elements();
        let asked = exact.0.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(asked, 3 * ne, "{asked} points for {ne} elements");
        for (t, tv) in mesh.elements().iter().enumerate() {
            let [p0, p1, p2] = tv.map(|v| c[v as usize]);
            let area =
                0.5 * ((p1[0] - p0[0]) * (p2[1] - p0[1]) - (p2[0] - p0[0]) * (p1[1] - p0[1])).abs();
            let (mut x, mut y) = ([0.0; 3], [0.0; 3]);
            for (k, (p, q)) in [(p1, p2), (p2, p0), (p0, p1)].into_iter().enumerate() {
                (x[k], y[k]) = (0.5 * (p[0] + q[0]), 0.5 * (p[1] + q[1]));
            }
            let (mut gx, mut gy) = ([0.0; 3], [0.0; 3]);
            assert!(crate::CornerSingularity.gradients(&x, &y, &mut gx, &mut gy));
            let g = grad[t];
            let term = |i: usize| (gx[i] - g[0]).powi(2) + (gy[i] - g[1]).powi(2);
            let want = (term(0) + term(1) + term(2)) * (area / 3.0);
            assert_eq!(pe[t].to_bits(), want.to_bits(), "element {t}");
        }
    }

    /// A uniformly refined mesh (`rounds` bisections of every element), a smooth discrete
    /// solution on it and its element gradients.
    fn smooth_data(rounds: usize) -> (Mesh, Vec<f64>, Vec<[f64; 2]>) {
        let mesh = refined(rounds);
        let u: Vec<f64> = (mesh.coords().iter())
            .map(|p| (3.0 * p[0]).sin() * p[1] + 0.1)
            .collect();
        let mut grad = Vec::new();
        gradients_into(&mesh, &u, &mut grad);
        (mesh, u, grad)
    }

    fn refined(rounds: usize) -> Mesh {
        let mut m = Mesh::unit_square();
        for _ in 0..rounds {
            let mut marks = Marks::new(m.num_elements());
            for t in 0..m.num_elements() {
                marks.mark_element(&m, t);
            }
            m.refine(&marks).unwrap();
        }
        m
    }

    #[test]
    fn linear_functions_have_no_jumps_and_exact_gradients() {
        let m = refined(5);
        let u: Vec<f64> = m
            .coords()
            .iter()
            .map(|p| 3.0 * p[0] - 2.0 * p[1] + 0.5)
            .collect();
        let exact = FnSolution::new("lin", |x, y| 3.0 * x - 2.0 * y + 0.5)
            .with_gradient(|_, _| [3.0, -2.0]);
        let (mut g, mut eta2) = (Vec::new(), Vec::new());
        let eta = estimate_into(&m, &u, &exact, &mut g, &mut eta2);
        assert!(eta < 1e-12, "{eta}");
        for gt in &g {
            assert!((gt[0] - 3.0).abs() < 1e-12 && (gt[1] + 2.0).abs() < 1e-12);
        }
        let e = errors(&m, &u, &g, &exact, None).unwrap();
        assert!(e.energy.unwrap() < 1e-12 && e.max_vertex < 1e-14);
    }

    /// A single kink along the diagonal x = y: the jump of the normal derivative is known, so
    /// η² = Σ_E (|E| [∂_n u])² is known in closed form.
    #[test]
    fn kink_gives_the_closed_form_estimate() {
        let m = refined(4); // the diagonal x = y is made of 8 mesh edges
        let kink = |x: f64, y: f64| (x - y).max(0.0);
        let u: Vec<f64> = m.coords().iter().map(|p| kink(p[0], p[1])).collect();
        let g = FnSolution::new("kink", kink);
        let (mut grad, mut eta2) = (Vec::new(), Vec::new());
        let eta = estimate_into(&m, &u, &g, &mut grad, &mut eta2);
        // ∇u jumps from (1,−1) to (0,0) across the diagonal of length √2; normal (1,−1)/√2:
        // [∂_n u] = √2 on every piece, Σ |E|² [∂_n u]² = Σ |E|² · 2 = 2 · Σ|E|² where the
        // pieces have length √2/8 each (8 of them): 2 · 8 · 2/64 = 0.5.
        assert!((eta * eta - 0.5).abs() < 1e-12, "{}", eta * eta);
        let s: f64 = eta2.iter().sum();
        assert!((s - 0.5).abs() < 1e-12);
    }

    /// Dirichlet data that vanish at the corners but not between them are seen by the
    /// boundary term: g = x(1−x) on the bottom edge, one edge of length 1 … after one round
    /// the bottom has two edges of length ½ with δ = g(¼) − ½(g(0) + g(½)) = 3/16 − 1/8.
    #[test]
    fn boundary_data_oscillation_is_estimated() {
        let m = refined(1);
        let g = FnSolution::new(
            "bump",
            |x: f64, y: f64| if y == 0.0 { x * (1.0 - x) } else { 0.0 },
        );
        let u: Vec<f64> = m.coords().iter().map(|p| g.value(p[0], p[1])).collect();
        let (mut grad, mut eta2) = (Vec::new(), Vec::new());
        let eta = estimate_into(&m, &u, &g, &mut grad, &mut eta2);
        let boundary = 2.0 * 16.0 / 3.0 * (3.0f64 / 16.0 - 0.125).powi(2);
        let jumps: f64 = eta * eta - boundary;
        assert!(jumps > 0.0, "{eta}");
        let u0 = vec![0.0; m.num_vertices()];
        let eta0 = estimate_into(
            &m,
            &u0,
            &FnSolution::new("zero", |_, _| 0.0),
            &mut grad,
            &mut eta2,
        );
        assert_eq!(eta0, 0.0);
    }
}
