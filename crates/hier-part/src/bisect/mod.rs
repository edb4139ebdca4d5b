//! Recursive coordinate (RCB) and inertial (RIB) bisection to arbitrary target part sizes.
//!
//! See `README.md` next to this crate for the design: recursive bisection of the part range
//! `p0..p1` at `mid = p0 + k/2`, each cut placed by weighted selection (no sort) so that the
//! low side's weight is nearest to `W_S · T_low / (T_low + T_high)`, in exact integer weights.

// Matrix and coordinate loops read better with indices.
#![expect(
    clippy::needless_range_loop,
    reason = "index loops over the axes of fixed-size arrays"
)]

mod cut;
pub(crate) mod dist;
mod inertia;
#[cfg(test)]
mod reference;
pub(crate) mod select;
mod serial;

pub(crate) use serial::Scratch;

pub use cut::{Bisection, Cut, Method, Plane};
pub(crate) use cut::{imbalance, project};

use crate::input::{CHUNK, Input, pow2};
use crate::{Error, Par};
use part_api::{Partitioner, Points};
use rayon::prelude::*;

/// An object as the bisection moves it around: coordinates, integer weight, id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dot<const D: usize> {
    pub(crate) x: [f64; D],
    pub(crate) w: u32,
    pub(crate) id: u32,
}

impl<const D: usize> Dot<D> {
    /// Object `i` of the points `coords` (`D` per object) with optional `weights`: its
    /// coordinates, its integer weight (`input.quantize`, 1 for unit weights) and `i` as id.
    /// The one way dots are made (serial, distributed and reference bisection alike).
    ///
    /// `-0.0` is read as `0.0`: the two compare equal, and keeping one of them makes bounding
    /// boxes and cut values independent of the order in which objects are met, so the serial
    /// and the distributed bisection agree on them by construction.
    #[inline(always)]
    pub(crate) fn of(coords: &[f64], weights: Option<&[f64]>, input: &Input, i: usize) -> Dot<D> {
        let mut x = [0.0; D];
        for (j, xj) in x.iter_mut().enumerate() {
            *xj = coords[i * D + j] + 0.0;
        }
        let w = match weights {
            Some(w) if !input.unit => input.quantize(w[i]),
            _ => 1,
        };
        Dot { x, w, id: i as u32 }
    }
}

/// The key a split orders objects by, computed from the coordinates when needed (never
/// stored: a split then costs about one pass over its objects).
pub(crate) trait Key<const D: usize>: Copy + Sync {
    fn key(&self, x: &[f64; D]) -> f64;
}

/// RCB: a coordinate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisKey(pub(crate) usize);

impl<const D: usize> Key<D> for AxisKey {
    #[inline(always)]
    fn key(&self, x: &[f64; D]) -> f64 {
        x[self.0]
    }
}

/// RIB: the projection on the inertial axis, in units of the scale ([`project`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct InertialKey<const D: usize> {
    origin: [f64; D],
    direction: [f64; D],
    inv_scale: f64,
}

impl<const D: usize> Key<D> for InertialKey<D> {
    #[inline(always)]
    fn key(&self, x: &[f64; D]) -> f64 {
        project(x, &self.origin, &self.direction, self.inv_scale)
    }
}

/// Recursive coordinate bisection (Berger & Bokhari 1987; Zoltan's RCB) to arbitrary target
/// part sizes.
///
/// Each cut is perpendicular to the longest side of the bounding box of the objects being cut
/// and is placed by weighted selection so that the low side's share is as close as the objects
/// allow to the share of its parts' targets.
///
/// ```
/// use hier_part::{Partitioner, Points, Rcb, Serial};
/// // Four points on a line, two parts of sizes 1:3.
/// let coords = [0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0];
/// let mut parts = [0u32; 4];
/// let r = Rcb::default().partition(&Serial, Points::new(&coords, 2, None), &[1.0, 3.0], &mut parts)?;
/// assert_eq!(parts, [0, 1, 1, 1]);
/// assert_eq!(r.part_weights, vec![1.0, 3.0]);
/// assert_eq!(r.point_assign(&[0.4, 7.0]), 0);
/// # Ok::<(), hier_part::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rcb {
    /// Keep objects with the same coordinate on the cut axis on one side (Zoltan's
    /// `RCB_RECTILINEAR_BLOCKS`): every cut is then strict, at the price of balance when many
    /// objects share a coordinate (a structured grid).
    pub keep_ties: bool,
    /// Parallelism.
    pub par: Par,
}

/// Recursive inertial bisection (Simon 1991; Zoltan's RIB) to arbitrary target part sizes.
///
/// Each cut is perpendicular to the principal inertial axis of the objects being cut (the
/// eigenvector of the largest eigenvalue of their weighted covariance about their weighted
/// centroid) and is placed by weighted selection along that axis.
///
/// ```
/// use hier_part::{Partitioner, Points, Rib, Serial};
/// // Points along the diagonal: the inertial axis is (1, 1)/√2.
/// let coords: Vec<f64> = (0..8).flat_map(|i| [i as f64, i as f64]).collect();
/// let mut parts = [0u32; 8];
/// let r = Rib::default().partition(&Serial, Points::new(&coords, 2, None), &[1.0, 1.0], &mut parts)?;
/// assert_eq!(parts, [0, 0, 0, 0, 1, 1, 1, 1]);
/// assert_eq!(r.point_assign(&[10.0, 9.0]), 1);
/// # Ok::<(), hier_part::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rib {
    /// Keep objects with the same projection on the inertial axis on one side.
    pub keep_ties: bool,
    /// Parallelism.
    pub par: Par,
}

/// The settings a bisection runs with: the method (RCB's coordinate or RIB's inertial cuts),
/// whether objects on a cut stay on one side, and the threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bisector {
    pub(crate) method: Method,
    pub(crate) keep_ties: bool,
    pub(crate) par: Par,
}

impl Bisector {
    /// The one entry of both methods: the serial selection on a one-rank group, else the
    /// distributed radix search (global ids in rank order), which gives the same cuts.
    pub(crate) fn run<C: comm::Comm>(
        &self,
        group: &C,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Bisection, Error> {
        if group.size() == 1 {
            let fresh = (false, &mut Scratch::default());
            return self
                .par
                .install(|| serial::bisect(self, points, targets, parts, fresh))?;
        }
        let offset = rank_offset(group, points.len())?;
        let ids = dist::GlobalIds::Offset(offset);
        dist::bisect_dist(group, self, points, ids, targets, parts)
    }
}

impl Bisector {
    /// The serial bisection of points the caller has checked already (the hierarchical walk
    /// checks every point once, at the root, and hands each level a subset): the same as
    /// [`Bisector::run`] on one rank without the second look at every coordinate; `scratch`:
    /// the buffers, kept by the walk from level to level.
    pub(crate) fn run_checked(
        &self,
        scratch: &mut Scratch,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Bisection, Error> {
        self.par
            .install(|| serial::bisect(self, points, targets, parts, (true, scratch)))?
    }
}

/// [`Partitioner`] for the bisections: Guarantees: every object gets exactly one part `< k`;
/// a part with target 0 gets no object; `|W_k − T_k| ≤ ⌈log2 k⌉ · w_max / 2` (see
/// [`Bisection::balance_bound`]); the result is the same for every [`Par`]. Points have 1, 2
/// or 3 coordinates.
///
/// Distributed (a group of several ranks): every rank passes its own points (possibly none)
/// and gets their parts; the result is the serial partition of the union of the ranks'
/// points taken in rank order, cut for cut, for any number of ranks. Every rank must pass the
/// same `targets`; bad data on any rank is an error on every rank. The reported
/// [`Bisection::part_weights`] then come from the exact integer weights (the same on every
/// rank), within `n · w_max · 2⁻³¹` of the serial run's floating-point sums.
macro_rules! bisection_partitioner {
    ($ty:ty, $method:expr) => {
        impl<C: comm::Comm> Partitioner<C> for $ty {
            type Output = Bisection;
            type Error = Error;
            /// The bisections keep no buffers between calls.
            type Workspace = ();
            fn partition_with(
                &self,
                _ws: &mut (),
                group: &C,
                points: Points<'_>,
                targets: &[f64],
                parts: &mut [u32],
            ) -> Result<Bisection, Error> {
                let b = Bisector {
                    method: $method,
                    keep_ties: self.keep_ties,
                    par: self.par,
                };
                b.run(group, points, targets, parts)
            }
        }
    };
}
bisection_partitioner!(Rcb, Method::Rcb);
bisection_partitioner!(Rib, Method::Rib);

/// The global id of this rank's first object when the ranks' `n` objects are taken in rank
/// order.
pub(crate) fn rank_offset<C: comm::Comm>(comm: &C, n: usize) -> Result<u64, Error> {
    let mut all = vec![0u64; comm.size()];
    comm.allgather(&[n as u64], &mut all)?;
    Ok(all[..comm.rank()].iter().sum())
}

impl Bisection {
    /// The result from its cuts and per-part weights and counts: targets from the input's
    /// fractions, imbalance figures, depth.
    pub(crate) fn assemble(
        method: Method,
        dim: usize,
        cuts: Vec<Cut>,
        part_weights: Vec<f64>,
        part_counts: Vec<usize>,
        input: &Input,
    ) -> Bisection {
        let total_weight: f64 = part_weights.iter().sum();
        let targets: Vec<f64> = input.fractions.iter().map(|f| f * total_weight).collect();
        let (max_ratio, max_rel_dev, max_abs_dev) = imbalance(&part_weights, &targets);
        let depth = cuts.iter().map(|c| c.depth + 1).max().unwrap_or(0);
        Bisection {
            method,
            dim,
            cuts,
            part_weights,
            part_counts,
            targets,
            total_weight,
            max_object_weight: input.w_max,
            depth,
            max_ratio,
            max_rel_dev,
            max_abs_dev,
        }
    }
}

/// Bounding box and key range of a set of dots.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stats<const D: usize> {
    pub(crate) lo: [f64; D],
    pub(crate) hi: [f64; D],
    pub(crate) kmin: f64,
    pub(crate) kmax: f64,
}

impl<const D: usize> Stats<D> {
    pub(crate) const EMPTY: Self = Stats {
        lo: [f64::INFINITY; D],
        hi: [f64::NEG_INFINITY; D],
        kmin: f64::INFINITY,
        kmax: f64::NEG_INFINITY,
    };

    #[inline(always)]
    pub(crate) fn add(&mut self, d: &Dot<D>, k: f64) {
        self.add_x(&d.x, k);
    }

    /// Adds an object at `x` with key `k`.
    #[inline(always)]
    pub(crate) fn add_x(&mut self, x: &[f64; D], k: f64) {
        for j in 0..D {
            let x = x[j];
            self.lo[j] = if x < self.lo[j] { x } else { self.lo[j] };
            self.hi[j] = if x > self.hi[j] { x } else { self.hi[j] };
        }
        self.kmin = if k < self.kmin { k } else { self.kmin };
        self.kmax = if k > self.kmax { k } else { self.kmax };
    }

    fn of(v: &[Dot<D>], key: &impl Key<D>) -> Self {
        let mut s = Self::EMPTY;
        for d in v {
            s.add(d, key.key(&d.x));
        }
        s
    }

    pub(crate) fn merge(mut self, o: Self) -> Self {
        for j in 0..D {
            self.lo[j] = self.lo[j].min(o.lo[j]);
            self.hi[j] = self.hi[j].max(o.hi[j]);
        }
        self.kmin = self.kmin.min(o.kmin);
        self.kmax = self.kmax.max(o.kmax);
        self
    }

    /// The longest side (the lowest axis on a tie; 0 for an empty set).
    pub(crate) fn longest_axis(&self) -> usize {
        let mut best = 0;
        for j in 1..D {
            if self.hi[j] - self.lo[j] > self.hi[best] - self.lo[best] {
                best = j;
            }
        }
        best
    }

    /// The smallest power of two above every coordinate magnitude (1 for an empty or zero
    /// set), at most 2^1023.
    fn scale(&self) -> f64 {
        let mut m = 0.0f64;
        for j in 0..D {
            if self.lo[j] <= self.hi[j] {
                m = m.max(self.lo[j].abs()).max(self.hi[j].abs());
            }
        }
        if m == 0.0 {
            return 1.0;
        }
        pow2((crate::input::exponent(m) + 1).min(1023))
    }
}

/// Reduces fixed chunks of `v` with `fold` and combines the chunk results in order: the same
/// result for every `par`.
pub(crate) fn reduce<const D: usize, T: Send>(
    v: &[Dot<D>],
    par: Par,
    init: T,
    fold: impl Fn(&[Dot<D>]) -> T + Sync,
    combine: impl Fn(T, T) -> T,
) -> T {
    reduce_ranges(v.len(), par, init, |r| fold(&v[r]), combine)
}

/// [`reduce`] over the indices below `n`: fixed chunks of them folded by `fold`, the results
/// combined in order (the same result for every `par`).
pub(crate) fn reduce_ranges<T: Send>(
    n: usize,
    par: Par,
    init: T,
    fold: impl Fn(std::ops::Range<usize>) -> T + Sync,
    combine: impl Fn(T, T) -> T,
) -> T {
    let chunk = |c: usize| c * CHUNK..n.min((c + 1) * CHUNK);
    let chunks = n.div_ceil(CHUNK);
    if par.is_parallel() && n >= 2 * CHUNK {
        let r: Vec<T> = (0..chunks)
            .into_par_iter()
            .map(|c| fold(chunk(c)))
            .collect();
        r.into_iter().fold(init, combine)
    } else {
        (0..chunks).map(|c| fold(chunk(c))).fold(init, combine)
    }
}

pub(crate) fn stats<const D: usize>(v: &[Dot<D>], key: &impl Key<D>, par: Par) -> Stats<D> {
    reduce(v, par, Stats::EMPTY, |c| Stats::of(c, key), Stats::merge)
}

/// A cut value strictly between the keys `a < b`: `a ≤ value < b`.
pub(crate) fn between(a: f64, b: f64) -> f64 {
    let m = a * 0.5 + b * 0.5;
    if a <= m && m < b { m } else { a }
}

/// A set's low side, once chosen: `m` of the set's `len` objects, weighing `p` of its
/// `total` (as the selection counts weight: object counts when `unit`), with the statistics
/// `low` and `high` of the two sides.
#[derive(Clone, Copy)]
pub(crate) struct LowSide<'s, const D: usize> {
    pub(crate) m: u64,
    pub(crate) len: u64,
    pub(crate) p: u64,
    pub(crate) total: u64,
    pub(crate) low: &'s Stats<D>,
    pub(crate) high: &'s Stats<D>,
}

impl<const D: usize> LowSide<'_, D> {
    /// The cut of parts `p0..p0 + k` (low: the first `k / 2`) at depth `depth` along `plane`
    /// for this low side: its value (between the sides' keys; ±∞ when a side is empty; their
    /// shared key when objects of both sides have it, and then `last_low()`, the last low
    /// object's coordinates, breaks the tie), and each side's weight and count. Also returns
    /// the sides' weights as the selection counts them (0 when every object weighs 0). The
    /// serial and the distributed bisection both place their cuts here; its `children` are
    /// left for the caller.
    pub(crate) fn cut<E>(
        &self,
        input: &Input,
        (plane, depth): (Plane, u32),
        (p0, k): (u32, usize),
        last_low: impl FnOnce() -> Result<[f64; 3], E>,
    ) -> Result<(Cut, [u64; 2]), E> {
        let LowSide {
            m,
            len,
            p,
            total,
            low,
            high,
        } = *self;
        let (value, tie) = if m == 0 {
            (f64::NEG_INFINITY, None)
        } else if m == len {
            (f64::INFINITY, None)
        } else if low.kmax < high.kmin {
            (between(low.kmax, high.kmin), None)
        } else {
            (low.kmax, Some(last_low()?))
        };
        let (w_low, w_high) = if input.unit {
            (m, len - m)
        } else if total == 0 {
            (0, 0)
        } else {
            (p, total - p)
        };
        let side_weights = if input.unit {
            [w_low as f64, w_high as f64]
        } else {
            [input.dequantize(w_low), input.dequantize(w_high)]
        };
        let mid = p0 + (k / 2) as u32;
        let cut = Cut {
            plane,
            value,
            tie,
            low: p0..mid,
            high: mid..p0 + k as u32,
            children: [None, None],
            depth,
            side_weights,
            side_counts: [m as usize, (len - m) as usize],
        };
        Ok((cut, [w_low, w_high]))
    }
}

/// What the low side of a cut must weigh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Goal {
    /// Nothing (its parts' targets are 0, the set is empty, or τ rounds to 0).
    Nothing,
    /// Everything (the high side's targets are 0).
    Everything,
    /// `τ`: the low side's weight is the prefix weight nearest τ, `0 < τ ≤` the set's weight.
    Tau(u64),
}

/// The low side's goal when the parts `p0..p0 + k` (fractions of the whole) split a set of
/// `len` objects of weight `total` into parts `p0..p0 + k/2` and the rest: the low side gets
/// `τ = round(W · T_low / (T_low + T_high))` of the set's weight `W` (its object count when
/// `unit`), so errors made above are spread in proportion. Returns the goal and `W`. The serial
/// and the distributed bisection both take their cuts from here.
pub(crate) fn low_goal(
    fractions: &[f64],
    p0: u32,
    k: usize,
    len: u64,
    total: u64,
    unit: bool,
) -> (Goal, u64) {
    let half = k / 2;
    let fr = &fractions[p0 as usize..p0 as usize + k];
    let t_low: f64 = fr[..half].iter().sum();
    let t_high: f64 = fr[half..].iter().sum();
    let sel_total = if unit { len } else { total };
    let goal = if t_low == 0.0 || len == 0 {
        Goal::Nothing
    } else if t_high == 0.0 {
        Goal::Everything
    } else {
        let f = t_low / (t_low + t_high);
        match ((sel_total as f64 * f).round() as u64).min(sel_total) {
            0 => Goal::Nothing,
            tau => Goal::Tau(tau),
        }
    };
    (goal, sel_total)
}

/// The principal inertial axis of a set with bounding box `st`, from its exact moment sums
/// (`sums(unit)`, weighted or unit): shared by the serial and the distributed bisection.
pub(crate) fn inertial_from<const D: usize, E>(
    st: &Stats<D>,
    unit: bool,
    mut sums: impl FnMut(bool) -> Result<MomentSums<D>, E>,
) -> Result<(Plane, InertialKey<D>), E> {
    let scale = st.scale();
    let inv = 1.0 / scale;
    let (centroid, cov) = match moments(&sums(unit)?, st) {
        Some(m) => m,
        // Every object weighs 0: use the unweighted moments.
        None => moments(&sums(true)?, st).unwrap_or(([0.0; D], [[0.0; D]; D])),
    };
    let origin = centroid.map(|c| c * inv);
    let direction = inertia::principal_axis(cov);
    let (mut o, mut dir) = ([0.0; 3], [0.0; 3]);
    o[..D].copy_from_slice(&origin);
    dir[..D].copy_from_slice(&direction);
    Ok((
        Plane::Inertial {
            origin: o,
            direction: dir,
            scale,
        },
        InertialKey {
            origin,
            direction,
            inv_scale: inv,
        },
    ))
}

/// Bits of the integer coordinates the inertia is computed from.
const MOMENT_BITS: i32 = 20;

/// The clamp of an integer coordinate before its conversion ([`moment_sums_of`]): above any
/// coordinate a set's bounding box gives (`< 2^MOMENT_BITS + 1`).
const COORD_CLAMP: f64 = (1u64 << (MOMENT_BITS + 1)) as f64;

/// Weighted moment sums are summed in u64 over blocks of this many objects
/// ([`moment_sums_of`]): 2^10 terms below 2^53 each stay below 2^63.
const WEIGHTED_BLOCK: usize = 1 << 10;

/// `x · 2^e`, exact unless the result is subnormal.
fn times_pow2(x: f64, e: i32) -> f64 {
    let h = e / 2;
    x * pow2(h.clamp(-1022, 1023)) * pow2((e - h).clamp(-1022, 1023))
}

/// Exact moment sums `(Σw, Σw·y, Σw·y·yᵀ)` (upper triangle) of integer coordinates.
pub(crate) type MomentSums<const D: usize> = (u64, [u128; D], [[u128; D]; D]);

/// The shift `s` and the two factors `2^s = f1·f2` that map a set with bounding box `st` to
/// integer coordinates `y = round((x − lo) · 2^s) < 2^20` (on its largest side).
fn moment_scale<const D: usize>(st: &Stats<D>) -> (i32, f64, f64) {
    let ext = (0..D).map(|j| st.hi[j] - st.lo[j]).fold(0.0f64, f64::max);
    let s = if ext > 0.0 && ext.is_finite() {
        MOMENT_BITS - 1 - crate::input::exponent(ext)
    } else {
        0
    };
    (
        s,
        pow2((s / 2).clamp(-1022, 1023)),
        pow2((s - s / 2).clamp(-1022, 1023)),
    )
}

/// The exact moment sums of the dots `v` of a set with bounding box `st` (see [`moments`]).
pub(crate) fn moment_sums<const D: usize>(
    v: &[Dot<D>],
    st: &Stats<D>,
    unit: bool,
    par: Par,
) -> MomentSums<D> {
    moment_sums_of(v.len(), |i| (v[i].x, u64::from(v[i].w)), st, unit, par)
}

/// The exact moment sums of `n` objects of a set with bounding box `st` (see [`moments`]),
/// object `i` being `at(i)`: its coordinates and integer weight.
pub(crate) fn moment_sums_of<const D: usize>(
    n: usize,
    at: impl Fn(usize) -> ([f64; D], u64) + Sync,
    st: &Stats<D>,
    unit: bool,
    par: Par,
) -> MomentSums<D> {
    let (_, f1, f2) = moment_scale(st);
    let lo = st.lo;
    // Round half up (the value is ≥ 0 and ≤ 2^20 on the set's bounding box): no libm call.
    // Clamped to [0, 2^21] (which changes nothing on a box of finite extent; on a span beyond
    // f64::MAX, where the scale is 1, it keeps the sums from overflowing; NaN gives 0, as a
    // saturating conversion would), then converted without the saturation's checks.
    let coord = move |x: &[f64; D], j: usize| {
        #[expect(
            clippy::manual_clamp,
            reason = "clamp keeps NaN; max turns it into 0, which the conversion needs"
        )]
        let v = ((x[j] - lo[j]) * f1 * f2 + 0.5).max(0.0).min(COORD_CLAMP);
        // SAFETY: v is in [0, 2^21] (`max` turns NaN into 0), which i32 holds.
        let y: i32 = unsafe { v.to_int_unchecked() };
        u64::from(y as u32)
    };
    let fold = |c: std::ops::Range<usize>| -> MomentSums<D> {
        let mut a: MomentSums<D> = (0, [0; D], [[0; D]; D]);
        if unit {
            // A chunk's sums fit u64 (at most 2^13 objects, y·y ≤ 2^40): the same integers,
            // without 128-bit arithmetic per object; each product is of two 32-bit values.
            debug_assert!(c.len() <= CHUNK);
            let (mut s1, mut s2) = ([0u64; D], [[0u64; D]; D]);
            a.0 = c.len() as u64;
            for i in c {
                let x = at(i).0;
                let y: [u64; D] = std::array::from_fn(|j| coord(&x, j));
                for i in 0..D {
                    s1[i] += y[i];
                    for j in i..D {
                        s2[i][j] += y[i] * y[j];
                    }
                }
            }
            for i in 0..D {
                a.1[i] = u128::from(s1[i]);
                for j in i..D {
                    a.2[i][j] = u128::from(s2[i][j]);
                }
            }
            return a;
        }
        // w < 2^32 and y ≤ 2^20: w·y < 2^53 and w·y·y < 2^74. Summed in u64 over blocks of
        // WEIGHTED_BLOCK objects, w·y·y as its two parts (w·y mod 2^32)·y < 2^53 and
        // (w·y div 2^32)·y < 2^42: every product is of two 32-bit values, which a vector unit
        // multiplies, and each block's sums are added exactly into the u128 totals.
        let mut i0 = c.start;
        while i0 < c.end {
            let i1 = c.end.min(i0 + WEIGHTED_BLOCK);
            let (mut s0, mut s1) = (0u64, [0u64; D]);
            let (mut lo, mut hi) = ([[0u64; D]; D], [[0u64; D]; D]);
            for i in i0..i1 {
                let (x, w) = at(i);
                debug_assert!(w <= u64::from(u32::MAX));
                let y: [u64; D] = std::array::from_fn(|j| coord(&x, j));
                s0 += w;
                for i in 0..D {
                    let wy = w * y[i];
                    s1[i] += wy;
                    let (wl, wh) = (wy & 0xffff_ffff, wy >> 32);
                    for j in i..D {
                        lo[i][j] += wl * y[j];
                        hi[i][j] += wh * y[j];
                    }
                }
            }
            a.0 += s0;
            for i in 0..D {
                a.1[i] += u128::from(s1[i]);
                for j in i..D {
                    a.2[i][j] += u128::from(lo[i][j]) + (u128::from(hi[i][j]) << 32);
                }
            }
            i0 = i1;
        }
        a
    };
    reduce_ranges(n, par, (0, [0; D], [[0; D]; D]), fold, add_moment_sums)
}

/// The sum of two [`MomentSums`].
pub(crate) fn add_moment_sums<const D: usize>(
    mut a: MomentSums<D>,
    b: MomentSums<D>,
) -> MomentSums<D> {
    a.0 += b.0;
    for i in 0..D {
        a.1[i] += b.1[i];
        for j in i..D {
            a.2[i][j] += b.2[i][j];
        }
    }
    a
}

/// Weighted centroid and covariance (up to a positive factor) of a set with bounding box `st`,
/// from its exact integer moment sums: each coordinate becomes `y = round((x − lo) · 2^s) <
/// 2^20` on the set's bounding box (`lo`, largest side), and `Σw`, `Σw·y`, `Σw·y·yᵀ` are summed
/// in integers. The result therefore depends only on the set of objects — not on their order,
/// on the thread count or on how the objects are spread over ranks. `None` when the total
/// weight is 0.
fn moments<const D: usize>(
    sums: &MomentSums<D>,
    st: &Stats<D>,
) -> Option<([f64; D], [[f64; D]; D])> {
    let (w, s1, s2) = sums;
    if *w == 0 {
        return None;
    }
    let (s, _, _) = moment_scale(st);
    let wf = *w as f64;
    let mean = s1.map(|x| x as f64 / wf);
    let mut cov = [[0.0; D]; D];
    for i in 0..D {
        for j in i..D {
            cov[i][j] = s2[i][j] as f64 / wf - mean[i] * mean[j];
            cov[j][i] = cov[i][j];
        }
    }
    let mut centroid = [0.0; D];
    for j in 0..D {
        centroid[j] = st.lo[j] + times_pow2(mean[j], -s);
    }
    Some((centroid, cov))
}
