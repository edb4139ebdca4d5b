//! u = Im z^{2/3} (PHAML's example 3, [`crate::CornerSingularity`]) and its gradient at many
//! points at once, for the error diagnostics, with no `atan2`, `pow` or `sin`: only products
//! and two divisions per point, in straight-line code the compiler
//! vectorises (with AVX2 where the processor has it; no fused multiply-add, so every machine
//! gets the same bits).
//!
//! With r² = x² + y², θ = atan2(y, x) ∈ [0, π/2] (the quarter plane x, y ≥ 0), C = cos(θ/3),
//! S = sin(θ/3) and q = r^{−1/3}:
//! - u = r^{2/3} sin(2θ/3) = 2 r² q⁴ S C, and ∇u = (2/3) q (−S, C) (with f(z) = z^{2/3},
//!   ∇u = (Im f′, Re f′), f′ = (2/3) r^{−1/3} e^{−iθ/3});
//! - q = (r²)^{−1/6} by Newton's iteration for a^{−1/6}, q ← q (7 − a q⁶) / 6 (no division),
//!   from the usual estimate on the bits of the single-precision a (within about 10 %; five
//!   steps reach the double's precision);
//! - cos θ = x q³ and sin θ = y q³ (q³ = 1/r);
//! - C is the root in [cos(π/6), 1] of the triple-angle equation 4C³ − 3C = cos θ: one Halley
//!   step from a quartic fit (within 5·10⁻⁶; the step's error is about 2·|error|³);
//! - S = sin θ / (4C² − 1), from sin θ = S (3 − 4S²) = S (4C² − 1): exact relative accuracy
//!   even where θ is tiny (where S = √(1 − C²) would lose it).
//!
//! Points outside the quarter plane or with r² outside [10⁻³⁰, 10³⁰] (single precision's
//! range for the first estimate) take the libm formulas. Against them the batch agrees to a
//! few units in the last place (tested).

/// The quartic fit of C(c) = cos(arccos(c)/3) on [0, 1] (interpolation at the Chebyshev
/// nodes; maximum error 5.1·10⁻⁶).
const FIT: [f64; 5] = [
    0.866_030_432_022_690_8,
    0.166_411_721_787_601_1,
    -0.045_921_933_130_752_99,
    0.017_512_188_575_199_872,
    -0.004_035_398_716_652_594,
];

/// 7/6 of the bits of 1.0f32: the bits of a^{−1/6} are about −1/6 of a's bits plus this.
const MAGIC: f64 = 1_242_912_085.0;

/// 1.5·2⁵²: a double in [2⁵², 2⁵³) holds integers in its low bits.
const ROUND: f64 = 6_755_399_441_055_744.0;

/// Where the batch formulas hold (see the module documentation), from the point and its
/// r² (`a`): a plain `&` of four comparisons, so that the and-reduction over a batch
/// vectorises.
#[inline(always)]
#[expect(
    clippy::manual_range_contains,
    reason = "`contains` short-circuits, and the branches keep the first stage from vectorising"
)]
fn in_range(x: f64, y: f64, a: f64) -> bool {
    (x >= 0.0) & (y >= 0.0) & (a >= 1e-30) & (a <= 1e30)
}

/// The first estimate of q = a^{−1/6} from the bits of the single-precision a (within about
/// 10 %).
#[inline(always)]
fn estimate(a: f64) -> f64 {
    // The estimate's bits, rounded to an integer by adding 1.5·2⁵² (the low 32 bits of the
    // sum are the integer): no float-to-integer conversion, which would not vectorise.
    let bits = f64::from((a as f32).to_bits() as i32);
    let rounded = (bits * (-1.0 / 6.0) + MAGIC + ROUND).to_bits() as u32;
    f64::from(f32::from_bits(rounded))
}

/// One Newton step for q = a^{−1/6}.
#[inline(always)]
fn newton(a: f64, q: f64) -> f64 {
    let q3 = q * q * q;
    q * (7.0 - a * (q3 * q3)) * (1.0 / 6.0)
}

/// Newton steps from [`estimate`] to the double's precision.
const NEWTON_STEPS: usize = 5;

/// The rest of the batch formulas for one point, from a = r² and q = a^{−1/6}: (u, ∂u/∂x,
/// ∂u/∂y). Meaningful only where [`in_range`]; finite or NaN elsewhere, never a panic.
#[inline(always)]
fn finish(x: f64, y: f64, a: f64, q: f64) -> (f64, f64, f64) {
    let q3 = q * q * q;
    let (c, s) = (x * q3, y * q3);
    let mut cc = FIT[0] + c * (FIT[1] + c * (FIT[2] + c * (FIT[3] + c * FIT[4])));
    let c2 = cc * cc;
    let f = (4.0 * c2 - 3.0) * cc - c;
    let fp = 12.0 * c2 - 3.0;
    cc -= 2.0 * f * fp / (2.0 * fp * fp - 24.0 * f * cc);
    let ss = s / (4.0 * cc * cc - 1.0);
    let m = (2.0 / 3.0) * q;
    let q2 = q * q;
    (2.0 * a * (q2 * q2) * ss * cc, -m * ss, m * cc)
}

/// The libm formulas for one point (the scalar [`crate::CornerSingularity`]).
fn libm(x: f64, y: f64) -> (f64, f64, f64) {
    use crate::problem::ExactSolution;
    let c = crate::CornerSingularity;
    let g = c.gradient(x, y).unwrap_or([f64::NAN; 2]);
    (c.value(x, y), g[0], g[1])
}

/// Points per stage of [`run`] (its two arrays, 4 KiB, stay in the first-level cache).
const STAGE: usize = 256;

/// The straight-line loops over the points; `V`: write values, `G`: gradients. Returns
/// whether every point is [`in_range`] (an and-reduction in the first loop, so that the
/// common case takes no second pass over the points).
///
/// The points go [`STAGE`] at a time through the estimate, each Newton step and the rest as
/// separate loops: one point's chain of dependent multiplications (five Newton steps, then
/// two dependent divisions) is too long for the processor to overlap many points of one
/// loop, while each stage's loop is short and independent across points: the same
/// operations per point as one loop over [`finish`]`∘`[`newton`]ˢ`∘`[`estimate`], so the same
/// bits, in half the time (1.6·10⁶ graded points, AVX2, one core: 12.3 → 6.3 ns per point).
#[inline(always)]
fn run<const V: bool, const G: bool>(
    x: &[f64],
    y: &[f64],
    v: &mut [f64],
    gx: &mut [f64],
    gy: &mut [f64],
) -> bool {
    let n = x.len();
    let y = &y[..n];
    let v = if V { &mut v[..n] } else { &mut v[..0] };
    let (gx, gy) = if G {
        (&mut gx[..n], &mut gy[..n])
    } else {
        (&mut gx[..0], &mut gy[..0])
    };
    let mut all = true;
    let (mut a, mut q) = ([0.0f64; STAGE], [0.0f64; STAGE]);
    let mut start = 0;
    while start < n {
        let end = n.min(start + STAGE);
        let (xs, ys) = (&x[start..end], &y[start..end]);
        let (a, q) = (&mut a[..end - start], &mut q[..end - start]);
        for i in 0..a.len() {
            let r2 = xs[i] * xs[i] + ys[i] * ys[i];
            all &= in_range(xs[i], ys[i], r2);
            a[i] = r2;
            q[i] = estimate(r2);
        }
        for _ in 0..NEWTON_STEPS {
            for (qi, &ai) in q.iter_mut().zip(a.iter()) {
                *qi = newton(ai, *qi);
            }
        }
        for i in 0..a.len() {
            let (u, da, db) = finish(xs[i], ys[i], a[i], q[i]);
            if V {
                v[start + i] = u;
            }
            if G {
                gx[start + i] = da;
                gy[start + i] = db;
            }
        }
        start = end;
    }
    all
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn run_avx2<const V: bool, const G: bool>(
    x: &[f64],
    y: &[f64],
    v: &mut [f64],
    gx: &mut [f64],
    gy: &mut [f64],
) -> bool {
    run::<V, G>(x, y, v, gx, gy)
}

/// Values (`V`) and/or gradients (`G`) at the points `(x[i], y[i])`; the output slices that
/// are asked for must be as long as `x`.
fn batch<const V: bool, const G: bool>(
    x: &[f64],
    y: &[f64],
    v: &mut [f64],
    gx: &mut [f64],
    gy: &mut [f64],
) {
    assert_eq!(x.len(), y.len(), "one y per x");
    #[cfg(target_arch = "x86_64")]
    let all = if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above), the only feature the
        // function enables.
        unsafe { run_avx2::<V, G>(x, y, v, gx, gy) }
    } else {
        run::<V, G>(x, y, v, gx, gy)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let all = run::<V, G>(x, y, v, gx, gy);
    if all {
        return;
    }
    for i in 0..x.len() {
        if !in_range(x[i], y[i], x[i] * x[i] + y[i] * y[i]) {
            let (u, a, b) = libm(x[i], y[i]);
            if V {
                v[i] = u;
            }
            if G {
                gx[i] = a;
                gy[i] = b;
            }
        }
    }
}

/// u at the points (see the module documentation).
pub(crate) fn values(x: &[f64], y: &[f64], out: &mut [f64]) {
    batch::<true, false>(x, y, out, &mut [], &mut []);
}

/// ∇u at the points (see the module documentation).
pub(crate) fn gradients(x: &[f64], y: &[f64], gx: &mut [f64], gy: &mut [f64]) {
    batch::<false, true>(x, y, &mut [], gx, gy);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (no dependency for a test's points).
    fn next(s: &mut u64) -> f64 {
        *s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (*s >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The staged loops give every point the bits of the formulas applied to it alone,
    /// across stage boundaries and in a last, partial stage.
    #[test]
    fn the_staged_batch_is_the_pointwise_formulas_bit_for_bit() {
        let mut s = 11u64;
        let n = 3 * STAGE + 17;
        let x: Vec<f64> = (0..n).map(|_| next(&mut s).powi(3)).collect();
        let y: Vec<f64> = (0..n).map(|_| next(&mut s).powi(3)).collect();
        let (mut v, mut gx, mut gy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        values(&x, &y, &mut v);
        gradients(&x, &y, &mut gx, &mut gy);
        for i in 0..n {
            let a = x[i] * x[i] + y[i] * y[i];
            let q = (0..NEWTON_STEPS).fold(estimate(a), |q, _| newton(a, q));
            let (u, da, db) = finish(x[i], y[i], a, q);
            assert_eq!(
                [v[i], gx[i], gy[i]].map(f64::to_bits),
                [u, da, db].map(f64::to_bits),
                "point {i}"
            );
        }
    }

    #[test]
    fn the_batch_agrees_with_libm_to_a_few_ulps() {
        let mut s = 7u64;
        let mut pts: Vec<(f64, f64)> = (0..20_000).map(|_| (next(&mut s), next(&mut s))).collect();
        // Graded towards the corner, as the meshes are, and along the axes.
        for k in 0..40 {
            let h = 0.5f64.powi(k);
            pts.extend([
                (h, 0.0),
                (0.0, h),
                (h, h),
                (h * 0.3, h * 1e-9),
                (1e-12 * h, h),
            ]);
            pts.extend((0..50).map(|_| (h * next(&mut s), h * next(&mut s))));
        }
        // Outside the quarter plane and the range: the libm path.
        pts.extend([
            (0.0, 0.0),
            (-0.5, 0.25),
            (0.25, -0.5),
            (1e-200, 1e-200),
            (-1.0, -1e-3),
        ]);
        let (x, y): (Vec<f64>, Vec<f64>) = pts.iter().copied().unzip();
        let n = x.len();
        let (mut v, mut gx, mut gy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        values(&x, &y, &mut v);
        gradients(&x, &y, &mut gx, &mut gy);
        for i in 0..n {
            let (u, a, b) = libm(x[i], y[i]);
            let scale = a.hypot(b);
            let close = |p: f64, q: f64, s: f64| (p - q).abs() <= 8e-15 * s;
            assert!(
                close(v[i], u, u.abs()) && close(gx[i], a, scale) && close(gy[i], b, scale),
                "at ({}, {}): batch ({}, {}, {}), libm ({u}, {a}, {b})",
                x[i],
                y[i],
                v[i],
                gx[i],
                gy[i]
            );
        }
    }
}
