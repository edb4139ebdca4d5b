//! The partition pipeline and its result.

use crate::curve::{self, key_bits, sub_key_bits, tables};
use crate::exec::Exec;
use crate::mapping::{BoundingBox, Mapping};
use crate::refine::{self, B0, Found, Quant, ScaledWeights};
use crate::simd::Simd;
use crate::{Error, Hsfc, Workspace};
use part_api::{Failed, Points, Reduce};

/// Weight moved by a repartition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Migration {
    /// Total weight of the points whose part changed (unit weights: their number).
    pub weight: f64,
    /// Number of points whose part changed.
    pub count: u64,
    /// Whether the previous bounding box and cuts were used. They are not when a point lies
    /// outside the previous box: the curve is then laid over a new box and the cuts start
    /// afresh (the migration is still measured against the parts given on entry).
    pub kept_cuts: bool,
}

/// The result of a partition: the curve (bounding box), the cuts, and per-part figures.
///
/// Part `k` owns the fine keys in `[fine_cuts[k-1], fine_cuts[k])` (with `fine_cuts[-1] = 0`
/// and `fine_cuts[K-1] = ∞`); [`Partition::point_assign`] and [`Partition::box_assign`] answer
/// from these alone. A fine key ([`Partition::fine_key`]) is the 64-bit curve key of the
/// point's cell ([`Partition::key`]) in the high word and the curve continued inside the cell
/// in the low word, so a cut can split a cell whose points must go to different parts for the
/// balance to reach its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    pub(crate) map: Mapping,
    /// The cells of the fine cuts (their high words).
    cuts: Vec<u64>,
    fine_cuts: Vec<u128>,
    part_weights: Vec<f64>,
    part_counts: Vec<u64>,
    targets: Vec<f64>,
    total_weight: f64,
    n: u64,
    max_weight: f64,
    quantum: f64,
    migration: Option<Migration>,
    /// The points were put on the curve by their coordinates' order ([`ordered_coord`],
    /// relative to these per-axis origins): the fallback for a box that cannot separate them.
    /// (Boxed: a `Partition` is held by value in other crates' enums.)
    ordered: Option<Box<[u64; 3]>>,
}

impl Partition {
    /// Number of parts K.
    pub fn num_parts(&self) -> usize {
        self.cuts.len() + 1
    }
    /// Dimension (2 or 3).
    pub fn dim(&self) -> usize {
        self.map.dim
    }
    /// The bounding box of the points (the curve is laid over it, padded). For a partition
    /// that fell back to ordered coordinates ([`Partition::ordered_fallback`]), the box of
    /// the ordered coordinates mapped back (exact while the box spans fewer than 2^53
    /// doubles along the axis).
    pub fn bbox(&self) -> BoundingBox {
        let mut b = self.map.bbox;
        if let Some(origin) = self.ordered.as_deref() {
            for (a, &o) in origin.iter().enumerate().take(self.dim()) {
                b.lo[a] = unordered_coord(b.lo[a], o);
                b.hi[a] = unordered_coord(b.hi[a], o);
            }
        }
        b
    }
    /// Whether the points' bounding box could not separate them, so that the curve was laid
    /// over their ordered coordinates instead (each coordinate mapped to its place in the
    /// order of all doubles; see `hsfc/README.md`, "When the box cannot separate the points"): a huge outlier (one point at 1e308 among
    /// points in [0, 1]) or a box of subnormal width. The caller should warn: the keys are
    /// then not proportional to distances.
    pub fn ordered_fallback(&self) -> bool {
        self.ordered.is_some()
    }
    /// `x` as the curve sees it: itself, or its ordered coordinates for a fallback partition.
    fn curve_coords(&self, x: &[f64]) -> [f64; 3] {
        let mut c = [0.0; 3];
        for (a, (c, &v)) in c.iter_mut().zip(x).enumerate() {
            *c = match self.ordered.as_deref() {
                Some(origin) => ordered_coord(v, origin[a]),
                None => v,
            };
        }
        c
    }
    /// The cells of the K−1 cuts (the high words of [`Partition::fine_cuts`]), non-decreasing:
    /// part `k` starts in cell `cuts()[k-1]`, at its beginning unless the fine cut splits it.
    pub fn cuts(&self) -> &[u64] {
        &self.cuts
    }
    /// The K−1 cuts as fine keys, non-decreasing: part `k` owns the fine keys in
    /// `[fine_cuts[k-1], fine_cuts[k])`. A cut has a non-zero low word (a sub-key) only where
    /// it separates points of one cell; elsewhere it lies on a cell boundary.
    pub fn fine_cuts(&self) -> &[u128] {
        &self.fine_cuts
    }
    /// Weight of each part (unit weights: the number of points).
    pub fn part_weights(&self) -> &[f64] {
        &self.part_weights
    }
    /// Number of points in each part.
    pub fn part_counts(&self) -> &[u64] {
        &self.part_counts
    }
    /// Target weight T_k of each part (the normalised size times the total weight).
    pub fn targets(&self) -> &[f64] {
        &self.targets
    }
    /// Total weight of all points (all ranks).
    pub fn total_weight(&self) -> f64 {
        self.total_weight
    }
    /// Number of points (all ranks).
    pub fn num_points(&self) -> u64 {
        self.n
    }
    /// Largest weight of a single point (1 for unit weights).
    pub fn max_weight(&self) -> f64 {
        self.max_weight
    }
    /// The fixed-point unit in which weights were summed: every weight was rounded to the
    /// nearest multiple of it, so sums are exact and independent of order. It is `2^-S` with
    /// `S` chosen so that the total stays below `2^62` and each weight below `2^51` units:
    /// the rounding of one weight is at most half a unit, `≤ max(max_weight·n·2^-63,
    /// max_weight·2^-52)`. It is 1 for unit weights (exact), and 0 when all weights are 0 (the
    /// points are then split by count).
    pub fn weight_quantum(&self) -> f64 {
        self.quantum
    }
    /// For a repartition, the weight that moved.
    pub fn migration(&self) -> Option<Migration> {
        self.migration
    }
    /// `max_k |W_k/T_k − 1|` over the parts with `T_k > 0`.
    pub fn max_rel_dev(&self) -> f64 {
        self.part_weights
            .iter()
            .zip(&self.targets)
            .filter(|&(_, &t)| t > 0.0)
            .map(|(&w, &t)| (w / t - 1.0).abs())
            .fold(0.0, f64::max)
    }
    /// `max_k W_k/T_k` over the parts with `T_k > 0` (1 is perfect; Zoltan's imbalance).
    pub fn imbalance(&self) -> f64 {
        self.part_weights
            .iter()
            .zip(&self.targets)
            .filter(|&(_, &t)| t > 0.0)
            .map(|(&w, &t)| w / t)
            .fold(0.0, f64::max)
    }
    /// `max_k |W_k − T_k|`, in weight units (the balance limit is [`Partition::max_weight`]).
    pub fn max_abs_dev(&self) -> f64 {
        self.part_weights
            .iter()
            .zip(&self.targets)
            .map(|(&w, &t)| (w - t).abs())
            .fold(0.0, f64::max)
    }

    fn check_point(&self, x: &[f64]) -> Result<(), Error> {
        if x.len() != self.dim() {
            return Err(Error::LengthMismatch {
                what: "point",
                expected: self.dim(),
                got: x.len(),
            });
        }
        if let Some((axis, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::InvalidCoordinate {
                index: 0,
                axis,
                value,
            });
        }
        Ok(())
    }

    /// The Hilbert key of a point's cell (projected onto the box if outside): 2^32 cells per
    /// axis in 2-D, 2^21 in 3-D. It is the high word of [`Partition::fine_key`].
    pub fn key(&self, x: &[f64]) -> Result<u64, Error> {
        self.check_point(x)?;
        let x = self.curve_coords(x);
        Ok(curve::key_of_cell(&self.map.clamped_cell(&x)[..self.dim()]))
    }

    /// The fine Hilbert key of a point (projected onto the box if outside): the key of its cell
    /// ([`Partition::key`]) in the high 64 bits, and in the low bits the key of its position
    /// inside the cell on a grid of 2^21 per axis, along the curve continued inside the cell
    /// (42 bits in 2-D, 63 in 3-D). Fine keys follow the same curve on a grid of 2^53 cells per
    /// axis in 2-D, 2^42 in 3-D; points with equal fine keys always go to the same part.
    pub fn fine_key(&self, x: &[f64]) -> Result<u128, Error> {
        self.check_point(x)?;
        Ok(self.map.fine_key(&self.curve_coords(x)))
    }

    /// Part owning the start of cell `key`: the number of fine cuts `<= key << 64`. It owns the
    /// whole cell unless a cut splits the cell (see [`Partition::part_of_fine_key`]).
    pub fn part_of_key(&self, key: u64) -> u32 {
        self.part_of_fine_key(u128::from(key) << 64)
    }

    /// Part owning the fine key `key`: the number of fine cuts `<= key`.
    pub fn part_of_fine_key(&self, key: u128) -> u32 {
        self.fine_cuts.partition_point(|&c| c <= key) as u32
    }

    /// The part the partition gives a point at `x` (Zoltan's `Point_PP_Assign`); a point
    /// outside the bounding box is projected onto it. For every input point this is the part
    /// the partition wrote.
    pub fn point_assign(&self, x: &[f64]) -> Result<u32, Error> {
        Ok(self.part_of_fine_key(self.fine_key(x)?))
    }

    /// [`Partition::point_assign`] for many points (interleaved, this partition's `dim`),
    /// written into `parts`, sequentially.
    pub fn assign(&self, points: &[f64], parts: &mut [u32]) -> Result<(), Error> {
        let dim = self.dim();
        if !points.len().is_multiple_of(dim) {
            return Err(Error::LengthMismatch {
                what: "points",
                expected: points.len().div_ceil(dim) * dim,
                got: points.len(),
            });
        }
        if parts.len() != points.len() / dim {
            return Err(Error::LengthMismatch {
                what: "parts",
                expected: points.len() / dim,
                got: parts.len(),
            });
        }
        for (i, (x, p)) in points.chunks_exact(dim).zip(parts.iter_mut()).enumerate() {
            *p = self.point_assign(x).map_err(|e| match e {
                Error::InvalidCoordinate { axis, value, .. } => Error::InvalidCoordinate {
                    index: i,
                    axis,
                    value,
                },
                e => e,
            })?;
        }
        Ok(())
    }

    /// Every part owning a point of the box `[lo, hi]` (Zoltan's `Box_PP_Assign`), sorted, into
    /// `out` (cleared first). The box is first projected onto the bounding box, as points are.
    /// Exact at the resolution of the fine keys (2^53 cells per axis in 2-D, 2^42 in 3-D): a
    /// part is reported if and only if it owns a fine cell meeting the box; parts with no cell
    /// (empty parts) are never reported. The walk goes below the cells of the 64-bit keys only
    /// in cells that a cut splits.
    pub fn box_assign(&self, lo: &[f64], hi: &[f64], out: &mut Vec<u32>) -> Result<(), Error> {
        let dim = self.dim();
        for (what, v) in [("box lo", lo), ("box hi", hi)] {
            if v.len() != dim {
                return Err(Error::LengthMismatch {
                    what,
                    expected: dim,
                    got: v.len(),
                });
            }
        }
        for a in 0..dim {
            if !(lo[a].is_finite() && hi[a].is_finite() && lo[a] <= hi[a]) {
                return Err(Error::InvalidBox {
                    axis: a,
                    lo: lo[a],
                    hi: hi[a],
                });
            }
        }
        let (clo, chi) = (
            self.map.clamped_fine_coord(&self.curve_coords(lo)),
            self.map.clamped_fine_coord(&self.curve_coords(hi)),
        );
        out.clear();
        let mut seen = vec![false; self.num_parts()];
        let bits = curve::bits_per_axis(dim) + curve::SUB_BITS;
        let walker = BoxWalk {
            t: tables(dim),
            dim,
            clo,
            chi,
            part: self,
            seen: &mut seen,
        };
        walker.run(bits);
        out.extend(
            seen.iter()
                .enumerate()
                .filter(|(_, s)| **s)
                .map(|(p, _)| p as u32),
        );
        Ok(())
    }
}

/// Depth-first walk of the curve's tree of fine cells, pruned by the box and by the cuts.
struct BoxWalk<'a> {
    t: &'static curve::Tables,
    dim: usize,
    /// The box's fine coordinates ([`Mapping::clamped_fine_coord`]).
    clo: [u64; 3],
    chi: [u64; 3],
    part: &'a Partition,
    seen: &'a mut [bool],
}

impl BoxWalk<'_> {
    fn run(mut self, bits: u32) {
        self.visit(0, bits, [0; 3], 0);
    }

    /// Node: `state`, `level` bits left per axis, fine cell `origin`, `prefix` of its digits
    /// (the node's contiguous Hilbert index over the fine grid, without its `level` low digits).
    fn visit(&mut self, state: usize, level: u32, origin: [u64; 3], prefix: u128) {
        let n = self.dim;
        let span = (1u64 << level) - 1; // fine cells per axis in the node, minus one
        let mut inside = true;
        for (a, &o) in origin.iter().enumerate().take(n) {
            let e = o + span;
            if e < self.clo[a] || o > self.chi[a] {
                return;
            }
            inside &= o >= self.clo[a] && e <= self.chi[a];
        }
        let low_bits = n as u32 * level; // < 128
        let first = prefix << low_bits;
        let last = first | ((1u128 << low_bits) - 1);
        let (first, last) = (
            curve::fine_from_index(first, n),
            curve::fine_from_index(last, n),
        );
        let part = self.part;
        let (p_first, p_last) = (part.part_of_fine_key(first), part.part_of_fine_key(last));
        if p_first == p_last {
            self.seen[p_first as usize] = true;
            return;
        }
        if inside {
            // Every non-empty part between them owns a key of this node: cuts are fine keys
            // of points or cell boundaries, so a non-empty range starts at a fine cell.
            let cuts = &part.fine_cuts;
            for p in p_first..=p_last {
                let p = p as usize;
                let start = if p == 0 { 0 } else { cuts[p - 1] };
                let end = if p == cuts.len() { None } else { Some(cuts[p]) };
                if end.is_none_or(|e| e > start) {
                    self.seen[p] = true;
                }
            }
            return;
        }
        let half = 1u64 << (level - 1);
        for digit in 0..(1usize << n) {
            let e = self.t.inv[(state << n) | digit];
            let raw = e >> 8;
            let mut child = origin;
            for (a, c) in child.iter_mut().enumerate().take(n) {
                if (raw >> (n - 1 - a)) & 1 == 1 {
                    *c += half;
                }
            }
            self.visit(
                (e & 255) as usize,
                level - 1,
                child,
                (prefix << n) | digit as u128,
            );
        }
    }
}

#[cfg(test)]
pub(crate) fn cumulative_targets_for_tests(targets: &[f64], total: u64) -> Vec<u64> {
    cumulative_targets(targets, total)
}

/// Normalised cumulative targets: `tau[k]` = weight units before the end of part `k`.
fn cumulative_targets(targets: &[f64], total: u64) -> Vec<u64> {
    let scaled: Vec<f64>;
    let mut targets = targets;
    if targets.iter().sum::<f64>() == f64::INFINITY {
        // Finite sizes whose sum overflows (`1e308` twice): divided by the largest first,
        // which leaves their ratios (and every normal input's cuts) as they are.
        let max = targets.iter().copied().fold(0.0, f64::max);
        scaled = targets.iter().map(|t| t / max).collect();
        targets = &scaled;
    }
    let sum: f64 = targets.iter().sum();
    let mut acc = 0.0;
    let mut tau = Vec::with_capacity(targets.len());
    for (k, &t) in targets.iter().enumerate() {
        acc += t;
        let v = if k + 1 == targets.len() {
            total
        } else {
            ((acc / sum) * total as f64).round().min(total as f64) as u64
        };
        tau.push(v.min(total));
    }
    // Monotone by construction; make sure against rounding.
    for k in 1..tau.len() {
        tau[k] = tau[k].max(tau[k - 1]);
    }
    tau
}

fn check_global(
    cfg: &Hsfc,
    dim: usize,
    targets: &[f64],
    prev: Option<&Partition>,
) -> Result<(), Error> {
    if dim != 2 && dim != 3 {
        return Err(Error::Dimension { dim });
    }
    if targets.is_empty() {
        return Err(Error::NoParts);
    }
    if targets.len() > u32::MAX as usize {
        return Err(Error::TooManyParts { k: targets.len() });
    }
    if let Some((index, &value)) = targets
        .iter()
        .enumerate()
        .find(|(_, t)| !(t.is_finite() && **t >= 0.0))
    {
        return Err(Error::InvalidTarget { index, value });
    }
    if targets.iter().sum::<f64>().partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err(Error::ZeroTargets { k: targets.len() });
    }
    if !(cfg.tolerance >= 0.0 && cfg.tolerance < 1.0) {
        return Err(Error::InvalidTolerance {
            value: cfg.tolerance,
        });
    }
    if let Some(p) = prev
        && (p.dim() != dim || p.num_parts() != targets.len())
    {
        return Err(Error::IncompatiblePrevious {
            prev_dim: p.dim(),
            prev_k: p.num_parts(),
            dim,
            k: targets.len(),
        });
    }
    Ok(())
}

fn check_lengths(
    points: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    parts: &[u32],
) -> Result<usize, Error> {
    if !points.len().is_multiple_of(dim) {
        return Err(Error::LengthMismatch {
            what: "points (coordinates, a multiple of dim)",
            expected: points.len().div_ceil(dim) * dim,
            got: points.len(),
        });
    }
    let n = points.len() / dim;
    if n > u32::MAX as usize {
        return Err(Error::TooManyPoints { n });
    }
    if let Some(w) = weights
        && w.len() != n
    {
        return Err(Error::LengthMismatch {
            what: "weights",
            expected: n,
            got: w.len(),
        });
    }
    if parts.len() != n {
        return Err(Error::LengthMismatch {
            what: "parts",
            expected: n,
            got: parts.len(),
        });
    }
    Ok(n)
}

/// Local scan: bounding box, largest weight, and whether all values are valid.
struct Scan {
    lo: [f64; 3],
    hi: [f64; 3],
    wmax: f64,
    ok: bool,
}

fn scan_range<const D: usize>(
    points: &[f64],
    weights: Option<&[f64]>,
    r: std::ops::Range<usize>,
) -> Scan {
    // Branch-free and lane-wise, so that it vectorises: `v·0` is 0 for finite v and NaN
    // otherwise, and NaN survives the sum.
    const L: usize = 4;
    let mut lo = [[f64::INFINITY; L]; 3];
    let mut hi = [[f64::NEG_INFINITY; L]; 3];
    let mut bad = [0.0f64; L];
    let pts = &points[r.start * D..r.end * D];
    let mut quads = pts.chunks_exact(L * D);
    for q in &mut quads {
        for l in 0..L {
            for a in 0..D {
                let v = q[l * D + a];
                bad[l] += v * 0.0;
                lo[a][l] = if v < lo[a][l] { v } else { lo[a][l] };
                hi[a][l] = if v > hi[a][l] { v } else { hi[a][l] };
            }
        }
    }
    for p in quads.remainder().chunks_exact(D) {
        for a in 0..D {
            let v = p[a];
            bad[0] += v * 0.0;
            lo[a][0] = if v < lo[a][0] { v } else { lo[a][0] };
            hi[a][0] = if v > hi[a][0] { v } else { hi[a][0] };
        }
    }
    let mut ok = bad.iter().all(|&b| b == 0.0);
    let mut out_lo = [f64::INFINITY; 3];
    let mut out_hi = [f64::NEG_INFINITY; 3];
    for a in 0..D {
        for l in 0..L {
            out_lo[a] = out_lo[a].min(lo[a][l]);
            out_hi[a] = out_hi[a].max(hi[a][l]);
        }
    }
    let mut wmax = 0.0f64;
    if let Some(w) = weights {
        let mut wbad = [0.0f64; L];
        let mut wmin = [0.0f64; L];
        let mut wm = [0.0f64; L];
        let ws = &w[r];
        let mut quads = ws.chunks_exact(L);
        for q in &mut quads {
            for l in 0..L {
                let v = q[l];
                wbad[l] += v * 0.0;
                wmin[l] = if v < wmin[l] { v } else { wmin[l] };
                wm[l] = if v > wm[l] { v } else { wm[l] };
            }
        }
        for &v in quads.remainder() {
            wbad[0] += v * 0.0;
            wmin[0] = if v < wmin[0] { v } else { wmin[0] };
            wm[0] = if v > wm[0] { v } else { wm[0] };
        }
        ok &= wbad.iter().all(|&b| b == 0.0) && wmin.iter().all(|&m| m >= 0.0);
        wmax = wm.iter().copied().fold(0.0, f64::max);
    }
    Scan {
        lo: out_lo,
        hi: out_hi,
        wmax,
        ok,
    }
}

fn first_bad(points: &[f64], dim: usize, weights: Option<&[f64]>) -> Error {
    for (index, p) in points.chunks_exact(dim).enumerate() {
        if let Some((axis, &value)) = p.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Error::InvalidCoordinate { index, axis, value };
        }
    }
    if let Some(w) = weights
        && let Some((index, &value)) = w
            .iter()
            .enumerate()
            .find(|(_, v)| !(**v >= 0.0 && v.is_finite()))
    {
        return Error::InvalidWeight { index, value };
    }
    unreachable!("first_bad called on valid input")
}

fn comm_err<E: std::error::Error + Send + Sync + 'static>(e: E) -> Error {
    Error::Comm(Box::new(e))
}

/// Exponent `e` with `2^(e-1) <= x < 2^e` for finite `x > 0`.
fn exponent_above(x: f64) -> i32 {
    let mut e = x.log2().floor() as i32 + 1;
    while (e as f64).exp2() <= x {
        e += 1;
    }
    while ((e - 1) as f64).exp2() > x {
        e -= 1;
    }
    e
}

/// Keys of a block of at most [`BLOCK`] points: cells first, then the keys. In 2-D both
/// loops are straight-line integer code that the compiler vectorises (the prefix-scan
/// encoder, with AVX2 when `simd` allows it); in 3-D the cells are, and the table walks use
/// the vector gathers of `simd` ([`curve::keys3`]). Each instruction set runs the same
/// operations, so gives the same keys; a path the processor lacks is never taken.
fn keys_block<const D: usize>(
    simd: Simd,
    axes: &[crate::mapping::Axis; 3],
    pb: &[f64],
    kb: &mut [u64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if D == 3 && simd >= Simd::Avx512 && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the processor supports AVX-512F (checked just above).
            unsafe { keys_block_avx512::<D>(simd, axes, pb, kb) };
            return;
        }
        if simd >= Simd::Avx2 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor supports AVX2 (checked just above).
            unsafe { keys_block_avx2::<D>(simd, axes, pb, kb) };
            return;
        }
    }
    keys_block_portable::<D>(simd, axes, pb, kb);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn keys_block_avx512<const D: usize>(
    simd: Simd,
    axes: &[crate::mapping::Axis; 3],
    pb: &[f64],
    kb: &mut [u64],
) {
    keys_block_portable::<D>(simd, axes, pb, kb);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn keys_block_avx2<const D: usize>(
    simd: Simd,
    axes: &[crate::mapping::Axis; 3],
    pb: &[f64],
    kb: &mut [u64],
) {
    keys_block_portable::<D>(simd, axes, pb, kb);
}

#[inline(always)]
fn keys_block_portable<const D: usize>(
    simd: Simd,
    axes: &[crate::mapping::Axis; 3],
    pb: &[f64],
    kb: &mut [u64],
) {
    let mut c = [[0u32; BLOCK]; D];
    for (j, p) in pb.chunks_exact(D).enumerate().take(BLOCK) {
        for a in 0..D {
            c[a][j] = axes[a].cell(p[a]);
        }
    }
    if D == 3 {
        let n = kb.len();
        curve::keys3(simd, &c[0][..n], &c[1][..n], &c[2][..n], kb);
        return;
    }
    let mut hi = [0u32; BLOCK];
    let mut lo = [0u32; BLOCK];
    for j in 0..BLOCK {
        (hi[j], lo[j]) = curve::key2_scan_halves(c[0][j], c[1][j]);
    }
    for (j, k) in kb.iter_mut().enumerate().take(BLOCK) {
        *k = (u64::from(hi[j]) << 32) | u64::from(lo[j]);
    }
}

/// Points per block in the key pass.
const BLOCK: usize = 512;

fn keys_pass<const D: usize>(
    exec: &Exec,
    map: &Mapping,
    points: &[f64],
    quant: Quant<'_>,
    keys: &mut [std::mem::MaybeUninit<u64>],
    bins: Option<&mut [u32]>,
) -> Vec<u64> {
    let kb = key_bits(D);
    let shift0 = kb - B0;
    let axes = map.axes;
    // With `bins`, each point's top key bits are also written there (the caller's parts
    // buffer, used as scratch, see `refine::PARK_BITS`), so that later passes read 4 bytes per
    // point instead of the key.
    let mut no_bins: [u32; 0] = [];
    let (bins, with_bins) = match bins {
        Some(b) => (b, true),
        None => (&mut no_bins[..], false),
    };
    const NB: usize = 1 << B0;
    let hists = exec.map_chunks_mut2(keys, bins, with_bins, |r, out, bins_out| {
        // Two histograms, for the even and the odd points of a block: on graded data most
        // points fall in one bin, and one counter would make a chain of dependent adds.
        let mut h = vec![0u64; 2 * NB].into_boxed_slice();
        let h: &mut [u64; 2 * NB] = (&mut *h).try_into().expect("histogram size");
        let pts = &points[r.start * D..r.end * D];
        // Keys first (independent per point, so the table walks of several points overlap),
        // then the histogram over the keys just written, block by block.
        let mut kbuf = [0u64; BLOCK];
        for (bi, (pb, dst)) in pts.chunks(BLOCK * D).zip(out.chunks_mut(BLOCK)).enumerate() {
            let kb = &mut kbuf[..dst.len()];
            keys_block::<D>(exec.simd, &axes, pb, kb);
            // Every element of the output is written here (the caller relies on it).
            for (d, &k) in dst.iter_mut().zip(kb.iter()) {
                d.write(k);
            }
            if with_bins {
                let start = bi * BLOCK;
                let park = key_bits(D) - refine::PARK_BITS;
                for (o, &k) in bins_out[start..start + kb.len()].iter_mut().zip(kb.iter()) {
                    *o = (k >> park) as u32;
                }
            }
            let base = r.start + bi * BLOCK;
            let bin = |j: usize, k: u64| ((j & 1) * NB) | ((k >> shift0) as usize & (NB - 1));
            match quant {
                Quant::Unit => {
                    for (j, &k) in kb.iter().enumerate() {
                        h[bin(j, k)] += 1;
                    }
                }
                Quant::Scaled(_) => {
                    for (j, &k) in kb.iter().enumerate() {
                        h[bin(j, k)] += quant.q(base + j);
                    }
                }
            }
        }
        let (even, odd) = h.split_at(NB);
        even.iter()
            .zip(odd)
            .map(|(a, b)| a + b)
            .collect::<Vec<u64>>()
    });
    let mut it = hists.into_iter();
    let mut h = it.next().unwrap_or_else(|| vec![0u64; NB]);
    for o in it {
        for (x, y) in h.iter_mut().zip(o) {
            *x += y;
        }
    }
    h
}

/// Per-chunk accumulators of the assign pass.
struct Tally {
    counts: Vec<u64>,
    weights: Vec<u64>,
    moved_w: u64,
    moved_n: u64,
}

/// The partition pipeline (see the crate documentation): pass 1 ([`extent`]), the curve
/// ([`curve`]) and fixed-point weights ([`quantize`]), pass 2 ([`key_pass`]), the targets
/// ([`Targets`]) located on the curve ([`refine::locate`]), the cuts ([`Targets::cuts`]), pass 3
/// for a repartition ([`assign_parts`]), and the result ([`finish`]).
///
/// When the box cannot separate the points (the result is off its targets by more than
/// twice the largest weight, which distinct points never are: an outlier at 1e308, a box of
/// subnormal width), a fresh partition is run again over the points' ordered coordinates
/// ([`ordered_coord`]) and kept if it is closer to the targets
/// ([`Partition::ordered_fallback`]); a repartition of such a partition uses them too.
pub(crate) fn run<R: Reduce>(
    cfg: &Hsfc,
    ws: &mut Workspace,
    comm: &R,
    input: Points<'_>,
    targets: &[f64],
    parts: &mut [u32],
    prev: Option<&Partition>,
) -> Result<Partition, Error> {
    let (points, dim, weights) = input.into_parts();
    let ordered = |ws: &mut Workspace, parts: &mut [u32], origin: [u64; 3]| {
        let coords: Vec<f64> = (points.iter().enumerate())
            .map(|(i, &x)| ordered_coord(x, origin[i % dim]))
            .collect();
        let input = Points::new(&coords, dim, weights);
        let p = run_mapped(cfg, ws, comm, input, targets, parts, prev);
        p.map(|p| Partition {
            ordered: Some(Box::new(origin)),
            ..p
        })
    };
    if let Some(&origin) = prev.and_then(|p| p.ordered.as_deref()) {
        return ordered(ws, parts, origin);
    }
    let p = run_mapped(cfg, ws, comm, input, targets, parts, prev)?;
    // The same figures on every rank: every rank takes the same branch.
    if prev.is_some() || p.max_abs_dev() <= 2.0 * p.max_weight() {
        return Ok(p);
    }
    let first = parts.to_vec();
    let origin = p.map.bbox.lo.map(ordered_bits);
    let q = ordered(ws, parts, origin)?;
    if q.max_abs_dev() < p.max_abs_dev() {
        Ok(q)
    } else {
        parts.copy_from_slice(&first);
        Ok(p)
    }
}

/// The rank of `x` among all doubles: its IEEE-754 bits as an integer with the sign flipped,
/// so that every finite double has its own and their order is the doubles' order.
fn ordered_bits(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

/// A coordinate as an order-preserving number whose spacing does not depend on the others:
/// the number of doubles between `origin` (an [`ordered_bits`], the box's low corner) and
/// `x`. Exact while the points span fewer than 2^53 doubles along the axis, rounded (still
/// monotone) beyond, when they are far apart anyway: distinct coordinates stay distinct
/// whatever the box, subnormal widths and 1e308 outliers included.
pub(crate) fn ordered_coord(x: f64, origin: u64) -> f64 {
    (i128::from(ordered_bits(x)) - i128::from(origin)) as f64
}

/// The inverse of [`ordered_coord`] (exact where it is).
fn unordered_coord(v: f64, origin: u64) -> f64 {
    let u = (i128::from(origin) + v as i128).clamp(0, i128::from(u64::MAX)) as u64;
    f64::from_bits(if u >> 63 == 1 { u & !(1 << 63) } else { !u })
}

/// [`run`] over the coordinates as given.
fn run_mapped<R: Reduce>(
    cfg: &Hsfc,
    ws: &mut Workspace,
    comm: &R,
    input: Points<'_>,
    targets: &[f64],
    parts: &mut [u32],
    prev: Option<&Partition>,
) -> Result<Partition, Error> {
    let (points, dim, weights) = input.into_parts();
    check_global(cfg, dim, targets, prev)?;
    let exec = Exec::new(cfg.par, ws.simd(), &ws.scratch)?;
    let ext = extent(&exec, comm, input, parts)?;
    let (map, kept) = curve(dim, ext.bbox, ext.empty, prev);
    // Weighted when the ranks with points pass weights (the extent counted them then); a
    // rank without points takes the others' scale whatever it passed.
    let weighted = ext.n_total.is_some();
    let (quant, quantum) = quantize(weights, weighted, ext.wmax, ext.n_total.unwrap_or(0));
    // A fresh partition writes the parts while it locates the cuts (unless it has so many
    // that a part and a flag would not fit a `u32`: then pass 3 does).
    let fresh = prev.is_none() && targets.len() < refine::ASSIGN_MAX;
    let keys = &mut ws.keys;
    let mut hist0 = key_pass(
        &exec,
        keys,
        &map,
        points,
        quant,
        fresh.then_some(&mut *parts),
    );
    comm.sum_u64(&mut hist0).map_err(comm_err)?;
    let total: u64 = hist0.iter().sum();
    // Unit weights: every point weighs one in the histogram.
    let n_total = ext.n_total.unwrap_or(total);
    if weighted && !(total as f64 * quantum).is_finite() {
        // Every rank holds the same `total` and `quantum`: they all return this error.
        return Err(Error::WeightOverflow {
            total: total as f64 * quantum,
        });
    }
    let plan = Targets::new(targets, total, cfg.tolerance, kept);

    // The sub-key of a local point, for the few whose cell a target reaches with several
    // points in it (the low word of its fine key).
    let sub_key = PointSubKeys { map: &map, points };
    let positive_u32: Vec<u32> = plan.positive.iter().map(|&p| p as u32).collect();
    let located = refine::Search {
        keys,
        sub_key: &sub_key,
        quant,
        hist0: &hist0,
        bits: (key_bits(dim), sub_key_bits(dim)),
        n_total,
        queries: &plan.queries,
    };
    let (found, fresh_tally) = refine::locate(
        comm,
        &exec,
        located,
        fresh.then(|| refine::Assign {
            mult: &plan.mult,
            positive: &positive_u32,
            parts: &mut *parts,
            k: targets.len(),
        }),
    )
    .map_err(comm_err)?;
    let fine_cuts = plan.cuts(&found, prev.filter(|_| kept));
    let cells: Vec<u64> = fine_cuts.iter().map(|&c| (c >> 64) as u64).collect();

    // Pass 3 (a repartition; a fresh partition assigned the points while locating).
    let k = targets.len();
    let mut sums = vec![0u64; 2 * k + 2];
    // Counts and weights per part that the refinement took from reduced histograms.
    let mut global: Option<Vec<u64>> = None;
    if let Some((t, g)) = fresh_tally {
        sums[..k].copy_from_slice(&t.counts);
        global = Some(g);
    } else {
        let cut_keys = Cuts {
            cells: &cells,
            fine: &fine_cuts,
            key_bits: key_bits(dim),
        };
        assign_parts(&exec, &cut_keys, (keys, &sub_key, quant), parts, &mut sums);
    }
    comm.sum_u64(&mut sums).map_err(comm_err)?;
    if let Some(g) = global {
        for (s, x) in sums[..2 * k].iter_mut().zip(g) {
            *s += x;
        }
    }
    Ok(finish(
        Figures {
            targets,
            total,
            quantum,
            n_total,
            max_weight: if weighted { ext.wmax } else { 1.0 },
        },
        (map, cells, fine_cuts),
        &sums,
        prev.map(|_| kept),
    ))
}

/// The sub-keys of the local points (see [`refine::SubKeys`]).
struct PointSubKeys<'a> {
    map: &'a Mapping,
    points: &'a [f64],
}

impl refine::SubKeys for PointSubKeys<'_> {
    fn cell_state(&self, cell: u64) -> usize {
        curve::state_of_key(cell, self.map.dim)
    }

    fn position(&self, i: usize) -> [u32; 3] {
        let d = self.map.dim;
        self.map.clamped_sub(&self.points[i * d..(i + 1) * d])
    }

    fn sub_key(&self, pos: [u32; 3], state: usize) -> u64 {
        curve::sub_key(state, &pos[..self.map.dim])
    }

    #[inline]
    fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(x) = self.points.get(i * self.map.dim) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: a prefetch only hints the cache; the address is that of a point.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(x).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }
}

/// What pass 1 found over all ranks: the number of points (`None` for unit weights: the key
/// pass's histogram counts them), whether there are none, their bounding box and the largest
/// weight.
struct Extent {
    n_total: Option<u64>,
    empty: bool,
    bbox: BoundingBox,
    wmax: f64,
}

/// Pass 1: validates the local input, and the global box and largest weight. Errors are agreed
/// on collectively so that no rank is left waiting in a reduction. Unit weights take one
/// collective: the box's reduction carries a failure flag (on a failure, the agreement then
/// says how many ranks failed), and the points are counted by the key pass's histogram;
/// weights take a second, the count (their scale needs it). Ranks with points that disagree
/// on weights get [`Error::MixedWeights`], all of them.
fn extent<R: Reduce>(
    exec: &Exec,
    comm: &R,
    input: Points<'_>,
    parts: &[u32],
) -> Result<Extent, Error> {
    let (points, dim, weights) = input.into_parts();
    let mut local_err = check_lengths(points, dim, weights, parts).err();
    let n_local = points.len() / dim;
    let mut scan = Scan {
        lo: [f64::INFINITY; 3],
        hi: [f64::NEG_INFINITY; 3],
        wmax: 0.0,
        ok: true,
    };
    if local_err.is_none() {
        let scans = exec.map_ranges(n_local, |r| {
            if dim == 2 {
                scan_range::<2>(points, weights, r)
            } else {
                scan_range::<3>(points, weights, r)
            }
        });
        for s in scans {
            for a in 0..3 {
                scan.lo[a] = scan.lo[a].min(s.lo[a]);
                scan.hi[a] = scan.hi[a].max(s.hi[a]);
            }
            scan.wmax = scan.wmax.max(s.wmax);
            scan.ok &= s.ok;
        }
        if !scan.ok {
            local_err = Some(first_bad(points, dim, weights));
        }
    }
    // One reduction: the box, the largest weight, a failure flag, and whether ranks with
    // points pass weights and whether some do not (so that every rank takes the same
    // collectives after it).
    let mut ext = [0.0f64; 10];
    for a in 0..dim {
        ext[a] = scan.lo[a];
        ext[3 + a] = -scan.hi[a];
    }
    ext[6] = -scan.wmax;
    ext[7] = -f64::from(u8::from(local_err.is_some()));
    ext[8] = -f64::from(u8::from(n_local > 0 && weights.is_some()));
    ext[9] = -f64::from(u8::from(n_local > 0 && weights.is_none()));
    comm.min_f64(&mut ext).map_err(comm_err)?;
    let mut n_total = [n_local as u64];
    if ext[7] < 0.0 {
        // Some rank failed (every rank sees it): the agreement says how many.
        let local = local_err.map_or(Ok(()), Err);
        match part_api::agree(comm, local, &mut n_total).map_err(comm_err)? {
            Ok(()) => {}
            Err(Failed::Here(e)) => return Err(e),
            Err(Failed::Elsewhere { ranks, .. }) => {
                return Err(Error::InvalidOnOtherRank { ranks });
            }
        }
    }
    let weighted = ext[8] < 0.0;
    if weighted && ext[9] < 0.0 {
        return Err(Error::MixedWeights);
    }
    // Unit weights: the key pass's histogram counts the points (each weighs one there);
    // weights need the count for their scale first.
    if weighted {
        comm.sum_u64(&mut n_total).map_err(comm_err)?;
    }
    // A rank with points has a finite box (infinite and NaN coordinates are errors), so the
    // box of none is empty.
    let empty = ext[0] == f64::INFINITY;
    let mut bbox = BoundingBox {
        lo: [0.0; 3],
        hi: [0.0; 3],
    };
    if !empty {
        for a in 0..dim {
            bbox.lo[a] = ext[a];
            bbox.hi[a] = -ext[3 + a];
        }
    }
    Ok(Extent {
        n_total: weighted.then_some(n_total[0]),
        empty,
        bbox,
        wmax: -ext[6],
    })
}

/// The curve over `bbox`: the previous one if every point still lies in its box (then
/// `true`: the previous cuts may be kept), else one over both boxes.
fn curve(
    dim: usize,
    mut bbox: BoundingBox,
    empty: bool,
    prev: Option<&Partition>,
) -> (Mapping, bool) {
    let mut kept = false;
    if let Some(p) = prev {
        let pb = p.map.bbox; // the curve's own box (ordered coordinates for a fallback)
        kept = (0..dim).all(|a| pb.lo[a] <= bbox.lo[a] && bbox.hi[a] <= pb.hi[a]) || empty;
        if kept {
            bbox = pb;
        } else {
            for a in 0..dim {
                bbox.lo[a] = bbox.lo[a].min(pb.lo[a]);
                bbox.hi[a] = bbox.hi[a].max(pb.hi[a]);
            }
        }
    }
    (Mapping::new(dim, bbox), kept)
}

/// Fixed-point weights (see [`Quant`]) and their quantum ([`Partition::weight_quantum`]), the
/// same on every rank: `weighted` (the ranks with points pass weights), the largest weight
/// and the number of points are global; a rank without points passes any `weights`.
fn quantize(weights: Option<&[f64]>, weighted: bool, wmax: f64, n_total: u64) -> (Quant<'_>, f64) {
    match weights.filter(|_| weighted) {
        _ if !weighted => (Quant::Unit, 1.0),
        w if wmax > 0.0 => {
            let w = w.unwrap_or(&[]);
            let e_n = 64 - n_total.saturating_sub(1).leading_zeros() as i32;
            // Total below 2^62, and each weight below 2^51 (see `Quant`).
            let e_w = exponent_above(wmax);
            let s = (62 - e_w - e_n).min(51 - e_w);
            let (a, b) = (f64::from(s / 2).exp2(), f64::from(s - s / 2).exp2());
            (
                Quant::Scaled(ScaledWeights { w, a, b }),
                (-f64::from(s)).exp2(),
            )
        }
        _ => (Quant::Unit, 0.0),
    }
}

/// Pass 2: every local point's key into `keys` (the caller's buffer, kept between calls), and
/// the local weight histogram over the top key bits; with `bins` (a fresh partition's parts
/// buffer, used as scratch) each point's top key bits too (see `refine::PARK_BITS`).
fn key_pass(
    exec: &Exec,
    keys: &mut Vec<u64>,
    map: &Mapping,
    points: &[f64],
    quant: Quant<'_>,
    bins: Option<&mut [u32]>,
) -> Vec<u64> {
    let n_local = points.len() / map.dim;
    // Not zeroed: the key pass writes every element.
    keys.clear();
    keys.reserve(n_local);
    let spare = &mut keys.spare_capacity_mut()[..n_local];
    let hist0 = if map.dim == 2 {
        keys_pass::<2>(exec, map, points, quant, spare, bins)
    } else {
        keys_pass::<3>(exec, map, points, quant, spare, bins)
    };
    // SAFETY: `keys_pass` initialised all `n_local` elements (each chunk writes its range).
    unsafe { keys.set_len(n_local) };
    hist0
}

/// The weight targets of the cuts: cumulative targets `tau` (in weight units), the parts of
/// positive size (parts of size 0 get empty key ranges), and the distinct weights to locate
/// on the curve (`queries`, sorted) with how many cuts aim at each (`mult`).
struct Targets {
    tau: Vec<u64>,
    positive: Vec<usize>,
    queries: Vec<u64>,
    mult: Vec<u32>,
    total: u64,
    tolerance: f64,
}

impl Targets {
    fn new(targets: &[f64], total: u64, tolerance: f64, kept: bool) -> Targets {
        let tau = cumulative_targets(targets, total);
        let positive: Vec<usize> = (0..targets.len()).filter(|&p| targets[p] > 0.0).collect();
        let mut t = Targets {
            tau,
            positive,
            queries: Vec::new(),
            mult: Vec::new(),
            total,
            tolerance,
        };
        let mut queries: Vec<u64> = Vec::new();
        for i in 0..t.positive.len().saturating_sub(1) {
            let q = t.tau[t.positive[i]];
            if q < total {
                queries.push(q);
            }
            if kept {
                let e = t.tol_e(i);
                if q > e && q - e - 1 < total {
                    queries.push(q - e - 1);
                }
                if q + e < total {
                    queries.push(q + e);
                }
            }
        }
        // Distinct targets, and how many cuts have each (used by the fresh path).
        queries.sort_unstable();
        for q in queries {
            if t.queries.last() == Some(&q) {
                *t.mult.last_mut().expect("pushed with q") += 1;
            } else {
                t.queries.push(q);
                t.mult.push(1);
            }
        }
        t
    }

    /// The weight of positive part `j`.
    fn size(&self, j: usize) -> u64 {
        let p = self.positive[j];
        self.tau[p] - if p == 0 { 0 } else { self.tau[p - 1] }
    }

    /// Allowed error of compressed cut `i` (between positive parts `i` and `i+1`).
    fn tol_e(&self, i: usize) -> u64 {
        ((self.tolerance / 2.0) * self.size(i).min(self.size(i + 1)) as f64).floor() as u64
    }

    /// The K−1 cuts as fine keys from what the queries `found`; with `prev` (a repartition
    /// that keeps its curve) each cut stays as near its previous place as the tolerance allows.
    fn cuts(&self, found: &[Found], prev: Option<&Partition>) -> Vec<u128> {
        let (tau, positive, total) = (&self.tau, &self.positive, self.total);
        let m = positive.len();
        let lookup = |q: u64| -> Found { found[self.queries.binary_search(&q).expect("queried")] };
        // Compressed cuts C_i (fine keys).
        let mut ccuts: Vec<u128> = Vec::with_capacity(m.saturating_sub(1));
        for i in 0..m.saturating_sub(1) {
            let t = tau[positive[i]];
            let nearest = if t >= total {
                u128::MAX
            } else {
                lookup(t).nearest_cut(t)
            };
            let cut = match prev {
                Some(p) => {
                    let e = self.tol_e(i);
                    let cl = if t <= e {
                        0
                    } else {
                        lookup(t - e - 1).cut_after
                    };
                    let ch = if t + e >= total {
                        u128::MAX
                    } else {
                        lookup(t + e).cut_before
                    };
                    let (cl, ch) = if cl > ch {
                        (nearest, nearest)
                    } else {
                        (cl, ch)
                    };
                    // The previous cut of the same boundary (the first of a run of cuts when
                    // the previous partition had parts of size 0 in between).
                    let reference = p.fine_cuts[positive[i]];
                    reference.clamp(cl, ch)
                }
                None => nearest,
            };
            let cut = ccuts.last().map_or(cut, |&last| cut.max(last));
            ccuts.push(cut);
        }
        // Expand to the K−1 cuts.
        let mut fine_cuts = vec![0u128; tau.len() - 1];
        for (j, c) in fine_cuts.iter_mut().enumerate() {
            // Cut j separates part j from part j+1: it is the compressed cut after the last
            // positive part <= j, or 0 before the first one, or ∞ after the last one.
            let done = positive.partition_point(|&p| p <= j);
            *c = if done == 0 {
                0
            } else if done == m {
                u128::MAX
            } else {
                ccuts[done - 1]
            };
        }
        fine_cuts
    }
}

/// The cuts as the assign pass reads them: the cells (high words) and the fine keys.
struct Cuts<'a> {
    cells: &'a [u64],
    fine: &'a [u128],
    /// Bits of the cell keys.
    key_bits: u32,
}

/// Pass 3 (a repartition): every local point's part from the cuts (`points`: the keys, the
/// sub-key of a point, the fixed-point weights), counting into `sums` the points and weight
/// per part and the moved weight and count (`[counts.. k, weights.. k, moved_w, moved_n]`).
fn assign_parts<S: refine::SubKeys>(
    exec: &Exec,
    c: &Cuts<'_>,
    points: (&[u64], &S, Quant<'_>),
    parts: &mut [u32],
    sums: &mut [u64],
) {
    let (keys, sub_key, quant) = points;
    let (cuts, fine_cuts) = (c.cells, c.fine);
    let k = cuts.len() + 1;
    let shift0 = c.key_bits - B0;
    let nb = 1usize << B0;
    let mut first = vec![0u32; nb + 1];
    {
        let mut c = 0usize;
        for (b, f) in first.iter_mut().enumerate().take(nb) {
            let start = (b as u64) << shift0;
            while c < cuts.len() && cuts[c] < start {
                c += 1;
            }
            *f = c as u32;
        }
        first[nb] = cuts.len() as u32;
    }
    let tallies = exec.map_chunks_mut(parts, |r, out| {
        // The state of the last split cell met (its points are usually together).
        let mut last: Option<(u64, usize)> = None;
        let mut t = Tally {
            counts: vec![0; k],
            weights: vec![0; k],
            moved_w: 0,
            moved_n: 0,
        };
        for (j, (p, &key)) in out.iter_mut().zip(&keys[r.clone()]).enumerate() {
            let b = (key >> shift0) as usize;
            let (lo, hi) = (first[b] as usize, first[b + 1] as usize);
            let mut part = lo + cuts[lo..hi].partition_point(|&c| c <= key);
            // The cuts in this cell (the last ones counted) are sorted by sub-key: when the
            // last has none, the cell is not split. Else the point's sub-key decides.
            if part > 0 && cuts[part - 1] == key && fine_cuts[part - 1] as u64 != 0 {
                let state = match last {
                    Some((k, s)) if k == key => s,
                    _ => sub_key.cell_state(key),
                };
                last = Some((key, state));
                let pos = sub_key.position(r.start + j);
                let fine = (u128::from(key) << 64) | u128::from(sub_key.sub_key(pos, state));
                part = fine_cuts.partition_point(|&c| c <= fine);
            }
            let q = quant.q(r.start + j);
            t.counts[part] += 1;
            t.weights[part] += q;
            if *p as usize != part {
                t.moved_w += q;
                t.moved_n += 1;
            }
            *p = part as u32;
        }
        t
    });
    for t in tallies {
        for p in 0..k {
            sums[p] += t.counts[p];
            sums[k + p] += t.weights[p];
        }
        sums[2 * k] += t.moved_w;
        sums[2 * k + 1] += t.moved_n;
    }
}

/// Per-part figures for [`finish`].
struct Figures<'a> {
    targets: &'a [f64],
    total: u64,
    quantum: f64,
    n_total: u64,
    max_weight: f64,
}

/// The result from the reduced `sums` (`[counts.. k, weights.. k, moved_w, moved_n]`), the curve
/// and the cuts; `kept`: for a repartition, whether its curve was kept.
fn finish(
    f: Figures<'_>,
    (map, cuts, fine_cuts): (Mapping, Vec<u64>, Vec<u128>),
    sums: &[u64],
    kept: Option<bool>,
) -> Partition {
    let Figures {
        targets,
        total,
        quantum,
        n_total,
        max_weight,
    } = f;
    let k = targets.len();
    let scale = if quantum == 0.0 { 0.0 } else { quantum };
    let part_weights: Vec<f64> = sums[k..2 * k].iter().map(|&w| w as f64 * scale).collect();
    // T_k = s_k / Σ s · W exactly, not the rounded integer targets the cuts aim at (those
    // differ by up to one weight quantum, a whole point for unit weights, which would hide
    // that much deviation from `max_rel_dev`). Sizes too large to sum are scaled by their
    // largest first.
    let total_w = total as f64 * scale;
    let t_sum: f64 = targets.iter().sum();
    let t_max = targets.iter().copied().fold(0.0, f64::max);
    let t_sum_scaled: f64 = targets.iter().map(|&t| t / t_max).sum();
    let target_w: Vec<f64> = targets
        .iter()
        .map(|&t| match t * total_w / t_sum {
            v if v.is_finite() => v,
            _ => t / t_max / t_sum_scaled * total_w,
        })
        .collect();
    Partition {
        map,
        cuts,
        fine_cuts,
        part_weights,
        part_counts: sums[..k].to_vec(),
        targets: target_w,
        total_weight: total as f64 * scale,
        n: n_total,
        max_weight,
        quantum,
        migration: kept.map(|kept| Migration {
            weight: sums[2 * k] as f64 * scale,
            count: sums[2 * k + 1],
            kept_cuts: kept,
        }),
        ordered: None,
    }
}
