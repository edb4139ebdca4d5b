//! Principal inertial axis of a weighted point set (for RIB).

// Matrix and coordinate loops read better with indices.
#![expect(
    clippy::needless_range_loop,
    reason = "index loops over the rows and columns of small matrices"
)]

/// Unit eigenvector of the largest eigenvalue of the symmetric `D×D` matrix `c`, with its
/// largest-magnitude component positive (the first such on a tie). For an isotropic `c` (all
/// eigenvalues equal, e.g. zero) this is the first coordinate axis. Uses no transcendental
/// function, so the result does not depend on the platform's libm.
pub(crate) fn principal_axis<const D: usize>(c: [[f64; D]; D]) -> [f64; D] {
    let mut v = [0.0; D];
    match D {
        1 => v[0] = 1.0,
        2 if c[0][1] == 0.0 => {
            v[usize::from(c[1][1] > c[0][0])] = 1.0;
        }
        2 => {
            // λ = (a + d)/2 + √(((a − d)/2)² + b²) for [[a, b], [b, d]]; (λ − d, b) and
            // (b, λ − a) are eigenvectors, the first is the better conditioned when a ≥ d.
            // Only + − × / √, which IEEE 754 rounds exactly: the same axis on every platform.
            let (a, b, d) = (c[0][0], c[0][1], c[1][1]);
            let h = 0.5 * (a - d);
            let r = (h * h + b * b).sqrt();
            (v[0], v[1]) = if a >= d { (h + r, b) } else { (b, r - h) };
        }
        _ => v = jacobi_max(c),
    }
    orient(v)
}

/// Makes the largest-magnitude component positive and the vector unit length.
fn orient<const D: usize>(mut v: [f64; D]) -> [f64; D] {
    let mut big = 0;
    for j in 1..D {
        if v[j].abs() > v[big].abs() {
            big = j;
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let s = if v[big] < 0.0 {
        -1.0 / norm
    } else {
        1.0 / norm
    };
    for x in &mut v {
        *x *= s;
    }
    v
}

/// Cyclic Jacobi eigenvalue iteration; returns the eigenvector of the largest eigenvalue
/// (the lowest index on a tie).
fn jacobi_max<const D: usize>(mut a: [[f64; D]; D]) -> [f64; D] {
    let mut q = [[0.0; D]; D];
    for (i, row) in q.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for _sweep in 0..64 {
        let mut off = 0.0;
        let mut diag = 0.0;
        for i in 0..D {
            diag += a[i][i] * a[i][i];
            for j in i + 1..D {
                off += a[i][j] * a[i][j];
            }
        }
        if off <= 1e-30 * diag || off == 0.0 {
            break;
        }
        for p in 0..D {
            for r in p + 1..D {
                if a[p][r] == 0.0 {
                    continue;
                }
                // Rotation that zeroes a[p][r] (Golub & Van Loan, Alg. 8.4.1).
                let tau = (a[r][r] - a[p][p]) / (2.0 * a[p][r]);
                let t = tau.signum() / (tau.abs() + (1.0 + tau * tau).sqrt());
                let t = if tau == 0.0 { 1.0 } else { t };
                let cs = 1.0 / (1.0 + t * t).sqrt();
                let sn = t * cs;
                for k in 0..D {
                    let (akp, akr) = (a[k][p], a[k][r]);
                    a[k][p] = cs * akp - sn * akr;
                    a[k][r] = sn * akp + cs * akr;
                }
                for k in 0..D {
                    let (apk, ark) = (a[p][k], a[r][k]);
                    a[p][k] = cs * apk - sn * ark;
                    a[r][k] = sn * apk + cs * ark;
                }
                for row in q.iter_mut() {
                    let (qp, qr) = (row[p], row[r]);
                    row[p] = cs * qp - sn * qr;
                    row[r] = sn * qp + cs * qr;
                }
            }
        }
    }
    let mut best = 0;
    for j in 1..D {
        if a[j][j] > a[best][best] {
            best = j;
        }
    }
    let mut v = [0.0; D];
    for (k, row) in q.iter().enumerate() {
        v[k] = row[best];
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<const D: usize>(c: [[f64; D]; D]) {
        let v = principal_axis(c);
        // c v = λ v with λ the largest Rayleigh quotient over the coordinate axes and v.
        let mut cv = [0.0; D];
        for i in 0..D {
            for j in 0..D {
                cv[i] += c[i][j] * v[j];
            }
        }
        let lambda: f64 = (0..D).map(|i| cv[i] * v[i]).sum();
        let scale = c
            .iter()
            .flatten()
            .fold(0.0f64, |m, x| m.max(x.abs()))
            .max(1e-300);
        for i in 0..D {
            assert!(
                (cv[i] - lambda * v[i]).abs() <= 1e-12 * scale,
                "{c:?}: {v:?}"
            );
            assert!(c[i][i] <= lambda + 1e-12 * scale, "{c:?}: not the largest");
        }
        let n: f64 = v.iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-14);
    }

    #[test]
    fn eigenvectors() {
        check([[2.0, 1.0], [1.0, 2.0]]);
        check([[1.0, 0.0], [0.0, 3.0]]);
        check([[0.0, 0.0], [0.0, 0.0]]);
        check([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 1.0]]);
        check([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 5.0]]);
        check([
            [1e-20, 3e-21, 0.0],
            [3e-21, 2e-20, 1e-21],
            [0.0, 1e-21, 1e-22],
        ]);
        check([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]);
        assert_eq!(principal_axis([[0.0; 3]; 3]), [1.0, 0.0, 0.0]);
        assert_eq!(principal_axis([[1.0, 0.0], [0.0, 3.0]]), [0.0, 1.0]);
        // Orientation: largest component positive.
        let v = principal_axis([[1.0, -1.0], [-1.0, 1.0]]);
        assert!(v[0] > 0.0 && v[1] < 0.0 && (v[0] - v[1].abs()).abs() < 1e-15);
    }
}
