//! Validation of partitioner input and exact integer weights.

use crate::{Error, Par};
use rayon::prelude::*;

/// Chunk length for data-parallel loops. Fixed, so that every reduction combines the same
/// chunks in the same order whatever the thread count.
pub(crate) const CHUNK: usize = 8192;

/// Validated input of a geometric partitioner.
#[derive(Debug)]
pub(crate) struct Input {
    /// Number of points.
    pub n: usize,
    /// Target fractions, normalised to sum to 1 (summed in index order).
    pub fractions: Vec<f64>,
    /// Largest object weight (1 for unit weights).
    pub w_max: f64,
    /// Weights are all 1 (or all zero: then objects are balanced by count).
    pub unit: bool,
    /// Quantisation: `q = round(w · 2^e)` computed as `(w · s.0) · s.1`, with `e` such that
    /// `w_max · 2^e ∈ [2^31, 2^32)`: integer weights fit a `u32` and every sum of at most
    /// `u32::MAX` of them a `u64`, exactly and in any order.
    pub scale: (f64, f64),
}

impl Input {
    /// The integer weight of `w`.
    #[inline]
    pub fn quantize(&self, w: f64) -> u32 {
        // Round half up without a libm call (w ≥ 0, and w · 2^e < 2^32).
        ((w * self.scale.0) * self.scale.1 + 0.5) as u32
    }

    /// The real weight of an integer weight sum.
    pub fn dequantize(&self, q: u64) -> f64 {
        (q as f64 / self.scale.0) / self.scale.1
    }
}

/// Whether every value of `v` is finite (and, with `non_negative`, at least 0): branch-free and
/// lane-wise, so that it vectorises (`x·0` is 0 for finite `x` and NaN otherwise, and NaN
/// survives the sum). Only a set that fails is then searched for its first bad index.
fn all_good(v: &[f64], non_negative: bool) -> bool {
    const L: usize = 8;
    let mut bad = [0.0f64; L];
    let mut min = [0.0f64; L];
    let mut lanes = v.chunks_exact(L);
    for q in &mut lanes {
        for ((b, m), &x) in bad.iter_mut().zip(min.iter_mut()).zip(q) {
            *b += x * 0.0;
            *m = if x < *m { x } else { *m };
        }
    }
    for &x in lanes.remainder() {
        bad[0] += x * 0.0;
        min[0] = if x < min[0] { x } else { min[0] };
    }
    bad.iter().all(|&b| b == 0.0) && (!non_negative || min.iter().all(|&m| m >= 0.0))
}

/// [`all_good`] over `v`, in fixed chunks on `par`'s pool when it has threads (a boolean, so
/// the same answer for every `par`).
fn all_good_par(v: &[f64], non_negative: bool, par: Par) -> Result<bool, Error> {
    if par.is_parallel() && v.len() >= 4 * CHUNK {
        Ok(par.install(|| v.par_chunks(CHUNK).all(|c| all_good(c, non_negative)))?)
    } else {
        Ok(all_good(v, non_negative))
    }
}

/// Returns the first index in `0..n` for which `bad(i)` holds, the same index whatever `par`.
///
/// In parallel, fixed chunks of [`CHUNK`] indices are scanned with a plain sequential loop
/// each (rayon's per-item `position_first` costs about 20 times the sequential scan), on
/// `par`'s own pool (the caller may not be inside [`Par::install`]).
fn first_bad(
    n: usize,
    par: Par,
    bad: impl Fn(usize) -> bool + Sync + Send,
) -> Result<Option<usize>, Error> {
    if par.is_parallel() && n >= 4 * CHUNK {
        Ok(par.install(|| {
            (0..n.div_ceil(CHUNK))
                .into_par_iter()
                .find_map_first(|c| (c * CHUNK..n.min((c + 1) * CHUNK)).find(|&i| bad(i)))
        })?)
    } else {
        Ok((0..n).position(bad))
    }
}

/// Checks `targets` and returns them normalised to fractions summing to 1.
pub(crate) fn fractions(targets: &[f64]) -> Result<Vec<f64>, Error> {
    if targets.is_empty() {
        return Err(Error::NoParts);
    }
    if targets.len() > u32::MAX as usize {
        return Err(Error::TooMany {
            what: "parts",
            count: targets.len(),
        });
    }
    let mut sum = 0.0;
    for (index, &value) in targets.iter().enumerate() {
        if !(value.is_finite() && value >= 0.0) {
            return Err(Error::BadTarget { index, value });
        }
        sum += value;
    }
    if sum <= 0.0 {
        return Err(Error::ZeroTargets { k: targets.len() });
    }
    if !sum.is_finite() {
        // Every size is finite but their sum overflows: rescale first.
        let m = targets.iter().fold(0.0f64, |a, &b| a.max(b));
        let sum: f64 = targets.iter().map(|t| t / m).sum();
        return Ok(targets.iter().map(|t| (t / m) / sum).collect());
    }
    Ok(targets.iter().map(|t| t / sum).collect())
}

/// Checks points, weights, targets and the output slice; computes the integer weight scale.
pub(crate) fn validate(
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    targets: &[f64],
    parts_len: usize,
    par: Par,
) -> Result<Input, Error> {
    let n = check_points(coords, dim, weights, parts_len, par)?;
    input_of(n, weights, targets, par)
}

/// The input of `n` points whose coordinates and weights are known to be good (the
/// hierarchical walk checks every point once, at the root): the target fractions and the
/// integer weight scale.
pub(crate) fn input_of(
    n: usize,
    weights: Option<&[f64]>,
    targets: &[f64],
    par: Par,
) -> Result<Input, Error> {
    let fractions = fractions(targets)?;
    let mut input = Input {
        n,
        fractions,
        w_max: 1.0,
        unit: true,
        scale: (1.0, 1.0),
    };
    if let Some(w) = weights {
        let w_max = if par.is_parallel() && n >= 4 * CHUNK {
            par.install(|| {
                w.par_iter()
                    .with_min_len(CHUNK)
                    .copied()
                    .reduce(|| 0.0, f64::max)
            })?
        } else {
            w.iter().copied().fold(0.0, f64::max)
        };
        if w_max > 0.0 {
            let e = 31 - exponent(w_max);
            input.w_max = w_max;
            input.unit = false;
            input.scale = (pow2(e / 2), pow2(e - e / 2));
        }
    }
    Ok(input)
}

/// Checks points (dimension 1 to 3, whole points, finite coordinates, at most `u32::MAX`),
/// weights (finite, non-negative, one per point) and the length of the output; returns the
/// number of points. Errors name the first bad point (the same one for every `par`).
pub(crate) fn check_points(
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    parts_len: usize,
    par: Par,
) -> Result<usize, Error> {
    let n = check_shape(coords, dim, parts_len)?;
    if all_good_par(coords, false, par)? {
        // Every coordinate is finite: no need to look for the first that is not.
    } else {
        return Err(first_non_finite(coords, dim, par)?);
    }
    if let Some(w) = weights {
        check_weights(w, n, "point", par)?;
    }
    Ok(n)
}

/// The bounding box of some points, per axis (padded to 3 axes).
pub(crate) type Bounds = ([f64; 3], [f64; 3]);

/// [`check_points`] on this thread, with the points' bounding box from the same pass over
/// the coordinates (each read as `c + 0.0`, so `-0.0` as `0.0`; `±∞` bounds for no points).
pub(crate) fn check_points_bounded(
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    parts_len: usize,
) -> Result<(usize, Bounds), Error> {
    let n = check_shape(coords, dim, parts_len)?;
    let bounds = match dim {
        1 => finite_bounds::<8>(coords, dim),
        2 => finite_bounds::<8>(coords, dim),
        _ => finite_bounds::<12>(coords, dim),
    };
    let Some(bounds) = bounds else {
        return Err(first_non_finite(coords, dim, Par::Seq)?);
    };
    if let Some(w) = weights {
        check_weights(w, n, "point", Par::Seq)?;
    }
    Ok((n, bounds))
}

/// The bounding box of the points `v` (`dim` coordinates each, `L` a multiple of `dim`), or
/// `None` when a coordinate is not finite: lane-wise and branch-free as [`all_good`], lane
/// `l` holding axis `l % dim`. Minimum and maximum of finite values (no `-0.0`) are the same
/// in any order, so the box is the one a loop over the points finds.
fn finite_bounds<const L: usize>(v: &[f64], dim: usize) -> Option<Bounds> {
    let mut bad = [0.0f64; L];
    let (mut lo, mut hi) = ([f64::INFINITY; L], [f64::NEG_INFINITY; L]);
    let mut lane = |l: usize, x: f64| {
        let x = x + 0.0;
        bad[l] += x * 0.0;
        lo[l] = if x < lo[l] { x } else { lo[l] };
        hi[l] = if x > hi[l] { x } else { hi[l] };
    };
    let mut chunks = v.chunks_exact(L);
    for q in &mut chunks {
        for (l, &x) in q.iter().enumerate() {
            lane(l, x);
        }
    }
    for (l, &x) in chunks.remainder().iter().enumerate() {
        lane(l, x);
    }
    if bad.iter().any(|&b| b != 0.0) {
        return None;
    }
    let mut b = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for l in 0..L {
        let a = l % dim;
        b.0[a] = b.0[a].min(lo[l]);
        b.1[a] = b.1[a].max(hi[l]);
    }
    Some(b)
}

/// The error of the first coordinate of `coords` that is not finite (there is one).
fn first_non_finite(coords: &[f64], dim: usize, par: Par) -> Result<Error, Error> {
    let i = first_bad(coords.len(), par, |i| !coords[i].is_finite())?
        .expect("a coordinate is not finite");
    Ok(Error::NonFiniteCoord {
        point: i / dim,
        axis: i % dim,
        value: coords[i],
    })
}

/// Checks the dimension (1 to 3), whole points, at most `u32::MAX` of them, and the length of
/// the output; returns the number of points.
fn check_shape(coords: &[f64], dim: usize, parts_len: usize) -> Result<usize, Error> {
    if !(1..=3).contains(&dim) {
        return Err(Error::UnsupportedDim { dim });
    }
    if !coords.len().is_multiple_of(dim) {
        return Err(Error::CoordsLength {
            len: coords.len(),
            dim,
        });
    }
    let n = coords.len() / dim;
    if n > u32::MAX as usize {
        return Err(Error::TooMany {
            what: "objects",
            count: n,
        });
    }
    if parts_len != n {
        return Err(Error::LengthMismatch {
            what: "parts",
            got: parts_len,
            expected: n,
            per: "point",
        });
    }
    Ok(n)
}

/// Checks that `w` has one finite, non-negative weight per `per` (`n` of them).
pub(crate) fn check_weights(w: &[f64], n: usize, per: &'static str, par: Par) -> Result<(), Error> {
    if w.len() != n {
        return Err(Error::LengthMismatch {
            what: "weights",
            got: w.len(),
            expected: n,
            per,
        });
    }
    if all_good_par(w, true, par)? {
        return Ok(());
    }
    if let Some(index) = first_bad(n, par, |i| !(w[i].is_finite() && w[i] >= 0.0))? {
        return Err(Error::BadWeight {
            index,
            value: w[index],
        });
    }
    Ok(())
}

/// `floor(log2(x))` for finite `x > 0`, exactly (also for subnormals).
pub(crate) fn exponent(x: f64) -> i32 {
    debug_assert!(x > 0.0 && x.is_finite());
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        exponent(x * pow2(64)) - 64
    } else {
        e - 1023
    }
}

/// `2^e` for `-1022 <= e <= 1023`.
pub(crate) fn pow2(e: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&e));
    f64::from_bits(((e + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_is_exact() {
        for (x, e) in [
            (1.0, 0),
            (1.5, 0),
            (2.0, 1),
            (0.75, -1),
            (f64::MAX, 1023),
            (f64::MIN_POSITIVE, -1022),
            (f64::MIN_POSITIVE / 8.0, -1025),
            (5e-324, -1074),
        ] {
            assert_eq!(exponent(x), e, "{x}");
        }
    }

    #[test]
    fn quantized_max_weight_has_32_bits() {
        for w_max in [1.0, 3.7, 1e-300, 5e-324, 1e300, f64::MAX] {
            let input = validate(&[0.0], 1, Some(&[w_max]), &[1.0], 1, Par::Seq).unwrap();
            let q = input.quantize(w_max);
            assert!(q >= 1u32 << 31, "{w_max}: {q}");
            let back = input.dequantize(q as u64);
            assert!((back - w_max).abs() <= w_max * 2.4e-10, "{w_max}: {back}");
        }
    }

    #[test]
    fn fractions_survive_overflowing_sums() {
        let f = fractions(&[f64::MAX, f64::MAX, 0.0]).unwrap();
        assert_eq!(f, vec![0.5, 0.5, 0.0]);
    }
}
