//! Marking: which elements to bisect, from the indicators.

use crate::FemError;
use crate::exact::ExactSum;
use crate::mesh::{Marks, Mesh};

/// The marking strategy, parsed once at the edge (`double`, `doerfler:0.5`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Marking {
    /// PHAML's `DOUBLE_NEQ` termination: after step k the mesh has N_0 · 2^k equations
    /// (vertices; PHAML counts Dirichlet vertices as equations), capped at the final target.
    /// Bisections are taken greedily in decreasing order of predicted indicator until the
    /// closure reaches that count: an element's first bisection has priority η_T², the second
    /// (both children, in the same step) η_T²/2 (PHAML's model: one bisection halves η²).
    /// Without second bisections a step could at most bisect every element once, which is
    /// uniform refinement.
    Double,
    /// Dörfler's bulk criterion (W. Dörfler, SIAM J. Numer. Anal. 33, 1996): the smallest set
    /// M with Σ_M η_T² ≥ θ Σ η_T² (up to the indicator binning: 8 bins per factor 2), each
    /// marked element bisected once, also capped at the final target. The shares η_T²/Σ η²
    /// are summed as integers in units of 2⁻⁵², so the set is the same for any distribution
    /// of the elements.
    Doerfler(f64),
}

impl std::str::FromStr for Marking {
    type Err = FemError;
    fn from_str(s: &str) -> Result<Self, FemError> {
        let bad = |reason: &str| FemError::BadMarking {
            input: s.into(),
            reason: reason.into(),
        };
        if s == "double" {
            return Ok(Marking::Double);
        }
        let Some(t) = s
            .strip_prefix("doerfler:")
            .or_else(|| s.strip_prefix("dörfler:"))
        else {
            return Err(bad("unknown strategy"));
        };
        let theta: f64 = t.parse().map_err(|_| bad("θ is not a number"))?;
        if !(theta > 0.0 && theta <= 1.0) {
            return Err(bad("θ must lie in (0, 1]"));
        }
        Ok(Marking::Doerfler(theta))
    }
}

impl std::fmt::Display for Marking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Marking::Double => write!(f, "double"),
            Marking::Doerfler(t) => write!(f, "doerfler:{t}"),
        }
    }
}

/// Fixed-point scale of the Dörfler sums: an element's share of the total is counted in
/// units of 2⁻⁵² ([`dorfler_weight`]), so the running sum is an exact integer whatever the
/// order or the distribution of the elements.
const DORFLER_UNIT: f64 = (1u64 << 52) as f64;

/// An element's share η_T² / Σ η² in units of 2⁻⁵² (rounded down; 0 if the total is 0).
#[inline]
pub(crate) fn dorfler_weight(eta2: f64, total: f64) -> u64 {
    if total > 0.0 {
        (eta2.max(0.0) / total * DORFLER_UNIT) as u64
    } else {
        0
    }
}

/// θ in the units of [`dorfler_weight`] (rounded up).
pub(crate) fn dorfler_goal(theta: f64) -> u64 {
    (theta * DORFLER_UNIT).ceil() as u64
}

/// Bin of a non-negative indicator: exponent and the top 3 mantissa bits of the f64, so 8
/// bins per factor of 2 and order-preserving (PHAML bins its error indicators the same way,
/// to avoid a sort).
#[inline]
pub(crate) fn bin(e: f64) -> usize {
    (e.max(0.0).to_bits() >> 49) as usize
}

/// Asks the processor to bring `x`'s cache line in (a hint: nothing is read, nothing can fault).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of every x86_64 processor, and a prefetch reads no memory (a
    // reference is a valid address anyway).
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(x).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// How many entries ahead the marking loops fetch their element's data.
pub(crate) const AHEAD: usize = 12;

/// Number of indicator bins.
pub(crate) const NBINS: usize = 1 << 14;

/// Entries in decreasing order of their bin, ties in entry order: a stable counting sort.
fn order_by_bin(n: usize, key: impl Fn(usize) -> usize) -> Vec<u32> {
    let mut count = vec![0u32; NBINS + 1];
    for i in 0..n {
        count[NBINS - key(i)] += 1;
    }
    for b in 0..NBINS {
        count[b + 1] += count[b];
    }
    let mut order = vec![0u32; n];
    for i in 0..n {
        let b = NBINS - 1 - key(i);
        order[count[b] as usize] = i as u32;
        count[b] += 1;
    }
    order
}

/// Elements in decreasing order of `eta2`, ties (same bin) in curve order.
fn order_by_indicator(eta2: &[f64]) -> Vec<u32> {
    order_by_bin(eta2.len(), |t| bin(eta2[t]))
}

/// Computes the closed marks for the next refinement of `mesh` from the squared indicators
/// `eta2`. `target` is the number of vertices this step should reach (for [`Marking::Double`]
/// N_0·2^k capped at the final target; the cap for Dörfler).
pub fn mark(mesh: &Mesh, eta2: &[f64], strategy: Marking, target: usize) -> Marks {
    assert_eq!(
        eta2.len(),
        mesh.num_elements(),
        "mark: one indicator per element"
    );
    let mut marks = Marks::new(mesh.num_elements());
    let nv = mesh.num_vertices();
    if target <= nv {
        return marks;
    }
    match strategy {
        Marking::Double => {
            // Entry 2t: first bisection of t; entry 2t+1: second bisection (bin − 8 = η²/2).
            let order = order_by_bin(2 * eta2.len(), |i| {
                let b = bin(eta2[i / 2]);
                if i % 2 == 0 { b } else { b.saturating_sub(8) }
            });
            for (at, &i) in order.iter().enumerate() {
                if nv + marks.new_vertices() >= target {
                    break;
                }
                // The entries visit elements all over the arrays: the element `AHEAD`
                // entries on is fetched while this one closes its marks.
                if let Some(&f) = order.get(at + AHEAD) {
                    let f = f as usize / 2;
                    prefetch(&mesh.nbr[f]);
                    prefetch(&marks.bits[f]);
                }
                let t = (i / 2) as usize;
                if i % 2 == 0 {
                    marks.mark_element(mesh, t);
                } else {
                    marks.mark_element_twice(mesh, t);
                }
            }
        }
        Marking::Doerfler(theta) => {
            let order = order_by_indicator(eta2);
            let total = ExactSum::from_slice(eta2).value();
            let goal = dorfler_goal(theta);
            let mut acc = 0u64;
            for (i, &t) in order.iter().enumerate() {
                // At least one element, even if every indicator is zero.
                if i > 0 && (acc >= goal || nv + marks.new_vertices() >= target) {
                    break;
                }
                if !marks.is_marked(t as usize) {
                    marks.mark_element(mesh, t as usize);
                }
                acc += dorfler_weight(eta2[t as usize], total);
            }
        }
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_marking() {
        assert_eq!("double".parse::<Marking>().unwrap(), Marking::Double);
        assert_eq!(
            "doerfler:0.5".parse::<Marking>().unwrap(),
            Marking::Doerfler(0.5)
        );
        for bad in [
            "doerfler:1.5",
            "doerfler:0",
            "doerfler:x",
            "half",
            "doerfler:NaN",
        ] {
            let e = bad.parse::<Marking>().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("doerfler:θ"), "{e}");
        }
    }

    #[test]
    fn order_is_decreasing_and_stable() {
        let eta2 = [1.0, 4.0, 0.0, 4.0, 2.5, 1.01];
        let o = order_by_indicator(&eta2);
        assert_eq!(o, vec![1, 3, 4, 0, 5, 2]);
        for w in o.windows(2) {
            assert!(bin(eta2[w[0] as usize]) >= bin(eta2[w[1] as usize]));
        }
    }

    #[test]
    fn double_reaches_the_target_and_doerfler_the_fraction() {
        let mut mesh = Mesh::unit_square();
        let mut marks = Marks::new(4);
        for t in 0..4 {
            marks.mark_element(&mesh, t);
        }
        mesh.refine(&marks).unwrap();
        for _ in 0..6 {
            let ne = mesh.num_elements();
            let eta2: Vec<f64> = (0..ne).map(|t| 1.0 + (t * 7919 % 13) as f64).collect();
            let target = 2 * mesh.num_vertices();
            let m = mark(&mesh, &eta2, Marking::Double, target);
            assert!(mesh.num_vertices() + m.new_vertices() >= target);
            // Marking stops as soon as the target is met: one element fewer would not do.
            // (the last element's closure chain is at most about twice the depth).
            let slack = 2 * (mesh.max_level() as usize + 2);
            assert!(mesh.num_vertices() + m.new_vertices() < target + slack);
            let d = mark(&mesh, &eta2, Marking::Doerfler(0.3), usize::MAX);
            let total: f64 = eta2.iter().sum();
            let marked: f64 = (0..ne).filter(|&t| d.is_marked(t)).map(|t| eta2[t]).sum();
            assert!(marked >= 0.3 * total);
            mesh.refine(&m).unwrap();
            mesh.check().unwrap();
        }
    }
}
