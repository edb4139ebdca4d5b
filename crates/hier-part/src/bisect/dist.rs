//! Distributed RCB and RIB: the objects are spread over the ranks of a communicator, and the
//! result is the serial bisection of their union, cut for cut.
//!
//! The serial bisection is defined by set functions (bounding boxes, exact integer weight and
//! moment sums) and by one strict total order, `(key, x_0, …, x_{D-1}, id)`, in which the low
//! side of a cut is the lightest prefix whose weight is nearest the target. Each of these is
//! computed here with reductions: boxes by min/max, sums in integers (moment sums in 32-bit
//! limbs), and the crossing object of the target weight by a radix search over order-preserving
//! `u64` images of the order's components (4096 bins a round over the candidates' current
//! range, so a component takes at most six rounds). The id is the object's global index, which
//! orders like the serial run's position in the union. Hence the cuts, the ties and every
//! object's part equal the serial run's for any number of ranks and any spread of the objects.

use super::select::before;
use super::{
    AxisKey, Bisection, Bisector, Cut, Dot, Goal, InertialKey, Key, LowSide, Method, MomentSums,
    Plane, Stats, inertial_from, low_goal, moment_sums_of,
};
use crate::input::{Bounds, Input, check_points_bounded, exponent, fractions, pow2};
use crate::{Error, Par};
use comm::{Comm, ReduceOp};
use part_api::Points;

/// Bins of one round of the radix search.
const BINS: u64 = 4096;

/// The order-preserving image of a finite `f64` (`-0.0` and `0.0` map alike, as they compare).
#[inline(always)]
fn ord(x: f64) -> u64 {
    let b = (x + 0.0).to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

/// Component `j` of the order of an object at `x` with key `k` and global id `g()`.
#[inline(always)]
fn component<const D: usize>(x: &[f64; D], k: f64, g: impl FnOnce() -> u64, j: usize) -> u64 {
    if j == 0 {
        ord(k)
    } else if j <= D {
        ord(x[j - 1])
    } else {
        g()
    }
}

/// The local objects of a distributed bisection, read where the caller holds them (nothing
/// is copied): `D` coordinates each, read as [`Dot::of`] reads them (`-0.0` as `0.0`), and
/// the integer weights.
#[derive(Clone, Copy)]
struct Objects<'a, const D: usize> {
    xs: &'a [[f64; D]],
    /// Each object's integer weight ([`Input::quantize`]); `None`: every object weighs 1.
    w: Option<&'a [u32]>,
}

impl<const D: usize> Objects<'_, D> {
    /// The coordinates of object `i`.
    #[inline(always)]
    fn x(&self, i: usize) -> [f64; D] {
        self.xs[i].map(|c| c + 0.0)
    }

    /// The key of object `i`.
    #[inline(always)]
    fn key(&self, key: &impl Key<D>, i: usize) -> f64 {
        key.key(&self.x(i))
    }

    /// The integer weight of object `i`.
    #[inline(always)]
    fn w(&self, i: usize) -> u64 {
        self.w.map_or(1, |w| u64::from(w[i]))
    }
}

/// The local objects of a segment of the recursion: all of them (the root's, which no cut
/// has rearranged), or those listed by index.
enum Sel<'s> {
    All(usize),
    Listed(&'s mut [u32]),
}

impl Sel<'_> {
    fn len(&self) -> usize {
        match self {
            Sel::All(n) => *n,
            Sel::Listed(s) => s.len(),
        }
    }

    /// Calls `f(j, i)` for each object `i` of the segment, `j` being its place in it (`f`
    /// called from one place, so that it is inlined into the loop).
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(usize, usize)) {
        let list = match self {
            Sel::All(_) => None,
            Sel::Listed(s) => Some(&**s),
        };
        for j in 0..self.len() {
            f(j, list.map_or(j, |s| s[j] as usize));
        }
    }

    /// The object in place `j`.
    #[inline(always)]
    fn at(&self, j: usize) -> usize {
        match self {
            Sel::All(_) => j,
            Sel::Listed(s) => s[j] as usize,
        }
    }

    /// The low objects (`low`, by place) and the high ones, as two lists: at the root a new
    /// index array written into `listed`, low objects first, each side in index order; else
    /// this list, rearranged in place.
    fn split<'s>(self, low: &[bool], listed: &'s mut Vec<u32>) -> (Sel<'s>, Sel<'s>)
    where
        Self: 's,
    {
        let nl = low.iter().filter(|&&l| l).count();
        let s: &'s mut [u32] = match self {
            Sel::All(n) => {
                let mut v = Vec::with_capacity(n);
                v.extend((0..n as u32).filter(|&i| low[i as usize]));
                v.extend((0..n as u32).filter(|&i| !low[i as usize]));
                *listed = v;
                listed
            }
            Sel::Listed(s) => {
                let mut at = 0;
                for j in 0..s.len() {
                    if low[j] {
                        s.swap(j, at);
                        at += 1;
                    }
                }
                s
            }
        };
        let (a, b) = s.split_at_mut(nl);
        (Sel::Listed(a), Sel::Listed(b))
    }
}

/// The crossing object of a selection, as every rank knows it.
#[derive(Clone, Copy, Debug)]
struct Pivot<const D: usize> {
    k: f64,
    x: [f64; D],
    g: u64,
    w: u64,
}

impl<const D: usize> Pivot<D> {
    /// Whether the object at `x` (key `k`, global id `g`) precedes the pivot in the order.
    #[inline(always)]
    fn after(&self, x: &[f64; D], k: f64, g: u64) -> bool {
        // `before` compares ids as u32; compare the full global ids here.
        let a = Dot { x: *x, w: 0, id: 0 };
        let b = Dot {
            x: self.x,
            w: 0,
            id: 0,
        };
        if before(k, &a, self.k, &b) {
            return true;
        }
        if before(self.k, &b, k, &a) {
            return false;
        }
        g < self.g
    }
}

/// The low side of a cut once its crossing object is known: the `m` first objects in the
/// order, weighing `p` (as the selection counts weight) — every object when `all`, else those
/// before the pivot, and the pivot itself with `take`.
#[derive(Clone, Copy, Debug)]
struct Boundary<const D: usize> {
    m: u64,
    p: u64,
    tau: u64,
    all: bool,
    pivot: Option<(Pivot<D>, bool)>,
}

impl<const D: usize> Boundary<D> {
    /// Whether the object at `x` (key `k`, global id `g()`) is on the low side. A key other
    /// than the pivot's decides alone (the order's first component), without a branch on it.
    #[inline(always)]
    fn holds(&self, x: &[f64; D], k: f64, g: impl FnOnce() -> u64) -> bool {
        match self.pivot {
            None => self.all,
            Some((pv, take)) => (k < pv.k) | (k == pv.k && on_pivot_key(pv, take, x, k, g())),
        }
    }
}

/// [`Boundary::holds`] for an object with the pivot's key (rare, so out of the loops).
#[cold]
#[inline(never)]
fn on_pivot_key<const D: usize>(pv: Pivot<D>, take: bool, x: &[f64; D], k: f64, g: u64) -> bool {
    pv.after(x, k, g) || (take && g == pv.g)
}

/// The global id of each local object, by its local index: its place in the order of the
/// union, the last component of the order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GlobalIds<'a> {
    /// The ranks' objects taken in rank order: this rank's object `i` is `offset + i`.
    Offset(u64),
    /// Given per object.
    Given(&'a [u64]),
}

impl GlobalIds<'_> {
    /// The global id of the local object `i`.
    #[inline(always)]
    fn of(self, i: usize) -> u64 {
        match self {
            GlobalIds::Offset(o) => o + i as u64,
            GlobalIds::Given(g) => g[i],
        }
    }
}

/// A set of objects being split, as every rank knows it: object count, weight (as the
/// selection counts it) and statistics.
#[derive(Clone, Copy, Debug)]
struct Set<const D: usize> {
    len: u64,
    total: u64,
    st: Stats<D>,
}

/// The collective context of a distributed bisection.
pub(crate) struct DistJob<'a, C: Comm> {
    pub(crate) comm: &'a C,
    pub(crate) method: Method,
    pub(crate) keep_ties: bool,
    pub(crate) input: &'a Input,
    pub(crate) par: Par,
    /// The objects' global ids.
    pub(crate) ids: GlobalIds<'a>,
}

/// Global `(total weight, count, bounding box)` of the objects whose local box is `bounds`
/// (the box's key range 0 when there are objects).
fn global_stats<const D: usize, C: Comm>(
    comm: &C,
    o: Objects<'_, D>,
    bounds: &Bounds,
) -> Result<(u64, u64, Stats<D>), Error> {
    let n = o.xs.len();
    let w =
        o.w.map_or(n as u64, |w| w.iter().map(|&w| u64::from(w)).sum());
    let mut total = [w, n as u64];
    let mut st = Stats::<D>::EMPTY;
    if n > 0 {
        st.lo.copy_from_slice(&bounds.0[..D]);
        st.hi.copy_from_slice(&bounds.1[..D]);
        (st.kmin, st.kmax) = (0.0, 0.0);
    }
    comm.allreduce_u64(ReduceOp::Sum, &mut total)?;
    let st = reduce_stats(comm, st)?;
    Ok((total[0], total[1], st))
}

/// Element-wise min/max of the statistics of all ranks.
fn reduce_stats<const D: usize, C: Comm>(comm: &C, s: Stats<D>) -> Result<Stats<D>, Error> {
    let mut b = Vec::with_capacity(2 * D + 2);
    b.extend_from_slice(&s.lo);
    b.extend(s.hi.iter().map(|h| -h));
    b.push(s.kmin);
    b.push(-s.kmax);
    comm.allreduce_f64(ReduceOp::Min, &mut b)?;
    let mut out = Stats::<D>::EMPTY;
    out.lo.copy_from_slice(&b[..D]);
    for j in 0..D {
        out.hi[j] = -b[D + j];
    }
    out.kmin = b[2 * D];
    out.kmax = -b[2 * D + 1];
    Ok(out)
}

/// Sums [`MomentSums`] over the ranks exactly (u128 sums as four 32-bit limbs in u64s).
fn reduce_moments<const D: usize, C: Comm>(
    comm: &C,
    m: MomentSums<D>,
) -> Result<MomentSums<D>, Error> {
    let mut vals: Vec<u128> = vec![m.0 as u128];
    vals.extend_from_slice(&m.1);
    for i in 0..D {
        vals.extend_from_slice(&m.2[i][i..]);
    }
    let mut limbs: Vec<u64> = vals
        .iter()
        .flat_map(|&v| (0..4).map(move |l| ((v >> (32 * l)) as u64) & 0xffff_ffff))
        .collect();
    comm.allreduce_u64(ReduceOp::Sum, &mut limbs)?;
    let vals: Vec<u128> = limbs
        .chunks(4)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u128, |a, (l, &x)| a.wrapping_add((x as u128) << (32 * l)))
        })
        .collect();
    let mut out: MomentSums<D> = (vals[0] as u64, [0; D], [[0; D]; D]);
    out.1.copy_from_slice(&vals[1..1 + D]);
    let mut at = 1 + D;
    for i in 0..D {
        for j in i..D {
            out.2[i][j] = vals[at];
            at += 1;
        }
    }
    Ok(out)
}

/// One segment of the distributed recursion: the local objects `sel` of the set `set` that
/// goes to the parts `p0..p0 + counts.len()`, at depth `depth`.
struct Seg<'s, const D: usize> {
    sel: Sel<'s>,
    counts: &'s mut [usize],
    p0: u32,
    set: Set<D>,
    depth: u32,
}

/// Where the recursion writes: the cuts in preorder, and each local object's part.
struct Out<'o> {
    cuts: &'o mut Vec<Cut>,
    parts: &'o mut [u32],
}

impl<C: Comm> DistJob<'_, C> {
    /// Bisects the local objects `o` (bounding box `bounds`) among all parts, collectively;
    /// writes each one's part into `parts` and returns the cuts and the global part counts.
    fn run<const D: usize>(
        &self,
        o: Objects<'_, D>,
        bounds: &Bounds,
        parts: &mut [u32],
    ) -> Result<(Vec<Cut>, Vec<usize>), Error> {
        let (total, len, st) = global_stats(self.comm, o, bounds)?;
        let k = self.input.fractions.len();
        let mut counts = vec![0usize; k];
        let mut cuts = Vec::new();
        let root = Seg {
            sel: Sel::All(o.xs.len()),
            counts: &mut counts,
            p0: 0,
            set: Set { len, total, st },
            depth: 0,
        };
        self.split(
            o,
            root,
            &mut Out {
                cuts: &mut cuts,
                parts,
            },
        )?;
        Ok((cuts, counts))
    }

    /// The serial `Job::split`, collectively: appends the cuts of this subtree in preorder.
    fn split<const D: usize>(
        &self,
        o: Objects<'_, D>,
        seg: Seg<'_, D>,
        out: &mut Out<'_>,
    ) -> Result<(), Error> {
        let st = seg.set.st;
        if seg.counts.len() == 1 {
            seg.counts[0] = seg.set.len as usize;
            seg.sel.each(|_, i| out.parts[i] = seg.p0);
            return Ok(());
        }
        match self.method {
            Method::Rcb => {
                let axis = st.longest_axis();
                self.cut(o, seg, out, Plane::Axis(axis), &AxisKey(axis))
            }
            Method::Rib => {
                let sel = &seg.sel;
                // The local sums on the setting's pool (the communicator stays on this thread).
                let par = self.par;
                let at = |j: usize| {
                    let i = sel.at(j);
                    (o.x(i), o.w(i))
                };
                let sums = |u: bool| {
                    let local = par.install(|| moment_sums_of(sel.len(), at, &st, u, par))?;
                    reduce_moments(self.comm, local)
                };
                let (plane, key): (Plane, InertialKey<D>) =
                    inertial_from(&st, self.input.unit, sums)?;
                self.cut(o, seg, out, plane, &key)
            }
        }
    }

    /// The serial `Job::cut`, collectively: the low side, the cut, and both sides split
    /// further.
    fn cut<const D: usize, K: Key<D>>(
        &self,
        o: Objects<'_, D>,
        seg: Seg<'_, D>,
        out: &mut Out<'_>,
        plane: Plane,
        key: &K,
    ) -> Result<(), Error> {
        let Seg {
            sel,
            counts,
            p0,
            set,
            depth,
        } = seg;
        let (len, total) = (set.len, set.total);
        let k = counts.len();
        let half = k / 2;
        // The keys are computed where needed, never stored (as in the serial bisection).
        // RCB's key is a coordinate: its range over the set is the set's box.
        let range = match plane {
            Plane::Axis(a) => Some((set.st.lo[a], set.st.hi[a])),
            _ => None,
        };
        let (b, near) = self.boundary(o, &sel, key, (range, out.parts), (p0, k), set)?;
        if k == 2 && !self.keep_ties {
            let (o, at) = ((o, &sel), (p0, set));
            return self.two_parts(o, counts, out, (plane, depth, key), at, (&b, near));
        }
        let (m, p, low, [sl, sh]) = self.low_side(o, &sel, key, set, b)?;
        let side = LowSide {
            m,
            len,
            p,
            total,
            low: &sl,
            high: &sh,
        };
        let last_low = || self.last_low(o, &sel, key, |j, _| low[j]);
        let (cut, [w_low, w_high]) = side.cut(self.input, (plane, depth), (p0, k), last_low)?;
        let mid = cut.high.start;
        if k == 2 {
            // Both sides are single parts (what `split` does for each, without moving the
            // objects).
            counts[0] = m as usize;
            counts[1] = (len - m) as usize;
            sel.each(|j, i| out.parts[i] = if low[j] { p0 } else { mid });
            out.cuts.push(cut);
            return Ok(());
        }

        let mut listed = Vec::new();
        let (vl, vh) = sel.split(&low, &mut listed);
        drop(low);
        let (cl, ch) = counts.split_at_mut(half);
        let at = out.cuts.len();
        out.cuts.push(cut);
        if half > 1 {
            out.cuts[at].children[0] = Some(out.cuts.len());
        }
        let low = Seg {
            sel: vl,
            counts: cl,
            p0,
            set: Set {
                len: m,
                total: w_low,
                st: sl,
            },
            depth: depth + 1,
        };
        self.split(o, low, out)?;
        if k - half > 1 {
            out.cuts[at].children[1] = Some(out.cuts.len());
        }
        let high = Seg {
            sel: vh,
            counts: ch,
            p0: mid,
            set: Set {
                len: len - m,
                total: w_high,
                st: sh,
            },
            depth: depth + 1,
        };
        self.split(o, high, out)
    }

    /// The boundary of the low side of the local objects `sel` (keys by `key`) of the set
    /// `set` of parts `p0..p0 + k`: the `m` first objects in the order, weighing `p`, nearest
    /// its goal ([`low_goal`], through [`DistJob::crossing`]), and what the crossing search
    /// leaves in `scratch` ([`Near`]).
    fn boundary<const D: usize>(
        &self,
        o: Objects<'_, D>,
        sel: &Sel<'_>,
        key: &impl Key<D>,
        (range, scratch): (Option<(f64, f64)>, &mut [u32]),
        (p0, k): (u32, usize),
        set: Set<D>,
    ) -> Result<(Boundary<D>, Option<Near>), Error> {
        let (len, total) = (set.len, set.total);
        let unit = self.input.unit || total == 0;
        let (goal, sel_total) = low_goal(&self.input.fractions, p0, k, len, total, unit);
        Ok(match goal {
            Goal::Nothing => (
                Boundary {
                    m: 0,
                    p: 0,
                    tau: 0,
                    all: false,
                    pivot: None,
                },
                None,
            ),
            Goal::Everything => (
                Boundary {
                    m: len,
                    p: sel_total,
                    tau: 0,
                    all: true,
                    pivot: None,
                },
                None,
            ),
            Goal::Tau(tau) => {
                let (crossing, near) =
                    self.crossing((o, sel), key, (range, scratch), len, tau, unit)?;
                let (below_n, below_w, pv) = crossing;
                let take = below_w + pv.w - tau < tau - below_w;
                let (m, p) = if take {
                    (below_n + 1, below_w + pv.w)
                } else {
                    (below_n, below_w)
                };
                let b = Boundary {
                    m,
                    p,
                    tau,
                    all: false,
                    pivot: Some((pv, take)),
                };
                (b, near)
            }
        })
    }

    /// A cut into two parts (`counts.len() == 2`) without `keep_ties`: each local object's
    /// part and the two keys the cut value needs (the low side's largest, the high side's
    /// smallest; the sides' boxes would only serve further cuts), then the cut as
    /// [`LowSide::cut`] places it. With the first round's bins (`near`, [`Near`]) a bin
    /// decides an object's side, and only the objects of the bins around the pivot's are
    /// read; else one pass over every local object's coordinates.
    fn two_parts<const D: usize, K: Key<D>>(
        &self,
        (o, sel): (Objects<'_, D>, &Sel<'_>),
        counts: &mut [usize],
        out: &mut Out<'_>,
        (plane, depth, key): (Plane, u32, &K),
        (p0, set): (u32, Set<D>),
        (b, near): (&Boundary<D>, Option<Near>),
    ) -> Result<(), Error> {
        let ids = self.ids;
        let mid = p0 + 1;
        // [-(largest low key), smallest high key], reduced by one minimum.
        let mut r = [f64::INFINITY, f64::INFINITY];
        let mut decide = |i: usize, parts: &mut [u32]| {
            let x = o.x(i);
            let k = key.key(&x);
            let low = b.holds(&x, k, || ids.of(i));
            // Branch-free: the sides interleave at random.
            let (kl, kh) = if low {
                (-k, f64::INFINITY)
            } else {
                (f64::INFINITY, k)
            };
            r[0] = if kl < r[0] { kl } else { r[0] };
            r[1] = if kh < r[1] { kh } else { r[1] };
            parts[i] = if low { p0 } else { mid };
        };
        match near {
            Some(near) => {
                // Below the pivot's bin every object is low, above it high; the largest low
                // key and the smallest high one are in the bins listed, with every object of
                // their keys (one key, one bin), in the order of `sel` as in the full pass.
                let c = near.chosen;
                sel.each(|_, i| out.parts[i] = if out.parts[i] < c { p0 } else { mid });
                for &i in &near.objects {
                    decide(i as usize, out.parts);
                }
            }
            None => sel.each(|_, i| decide(i, out.parts)),
        }
        self.comm.allreduce_f64(ReduceOp::Min, &mut r)?;
        let sl = Stats::<D> {
            kmax: -r[0],
            ..Stats::EMPTY
        };
        let sh = Stats::<D> {
            kmin: r[1],
            ..Stats::EMPTY
        };
        let side = LowSide {
            m: b.m,
            len: set.len,
            p: b.p,
            total: set.total,
            low: &sl,
            high: &sh,
        };
        let last_low = || {
            self.last_low(o, sel, key, |_, i| {
                b.holds(&o.x(i), o.key(key, i), || ids.of(i))
            })
        };
        let (cut, _) = side.cut(self.input, (plane, depth), (p0, 2), last_low)?;
        counts[0] = b.m as usize;
        counts[1] = (set.len - b.m) as usize;
        out.cuts.push(cut);
        Ok(())
    }

    /// The low side of the local objects `sel` (keys by `key`) of the set `set`
    /// whose boundary is `b` ([`DistJob::boundary`]); with `keep_ties`, every object with the
    /// key on the cut then moves to the side that leaves the low weight nearer to the goal.
    /// Returns `m`, `p`, which local objects are low (by place in `sel`), and both sides'
    /// global statistics.
    fn low_side<const D: usize>(
        &self,
        o: Objects<'_, D>,
        sel: &Sel<'_>,
        key: &impl Key<D>,
        set: Set<D>,
        b: Boundary<D>,
    ) -> Result<(u64, u64, Vec<bool>, [Stats<D>; 2]), Error> {
        let (comm, ids) = (self.comm, self.ids);
        let len = set.len;
        let unit = self.input.unit || set.total == 0;
        let w_of = |i: usize| if unit { 1 } else { o.w(i) };
        let (mut m, mut p, tau) = (b.m, b.p, b.tau);
        // The sides and their statistics in one pass.
        let mut low: Vec<bool> = Vec::with_capacity(sel.len());
        let (mut l, mut h) = (Stats::<D>::EMPTY, Stats::<D>::EMPTY);
        sel.each(|_, i| {
            let (x, k) = (o.x(i), o.key(key, i));
            let is_low = b.holds(&x, k, || ids.of(i));
            low.push(is_low);
            if is_low {
                l.add_x(&x, k);
            } else {
                h.add_x(&x, k);
            }
        });
        let (mut sl, mut sh) = (reduce_stats(comm, l)?, reduce_stats(comm, h)?);

        if self.keep_ties && m > 0 && m < len && sl.kmax >= sh.kmin {
            // `keep_ties`: move every object with key `kv` to the side that leaves the low
            // weight nearer to tau.
            let kv = sl.kmax;
            let mut t = [0u64; 4];
            sel.each(|j, i| {
                if o.key(key, i) == kv {
                    let s = if low[j] { 0 } else { 2 };
                    t[s] += 1;
                    t[s + 1] += w_of(i);
                }
            });
            comm.allreduce_u64(ReduceOp::Sum, &mut t)?;
            let [na, wa, nb, wb] = t;
            let (p_up, p_down) = (p + wb, p - wa);
            let up = p_up.abs_diff(tau) < p_down.abs_diff(tau);
            sel.each(|j, i| {
                if o.key(key, i) == kv {
                    low[j] = up;
                }
            });
            (m, p) = if up { (m + nb, p_up) } else { (m - na, p_down) };
            (sl, sh) = side_stats(comm, o, sel, key, &low)?;
        }
        Ok((m, p, low, [sl, sh]))
    }

    /// The crossing object of target `tau`: the first object `e` in the order with
    /// `W(objects up to e) >= tau`. Returns the number and weight of the objects before it,
    /// and the object; and when the first round binned the key, its bins (left in `scratch`,
    /// by index) and the objects near the pivot's ([`Near`]). Requires
    /// `0 < tau <= total weight`.
    #[expect(
        clippy::type_complexity,
        reason = "the crossing and what its first round left"
    )]
    fn crossing<const D: usize>(
        &self,
        (o, sel): (Objects<'_, D>, &Sel<'_>),
        key: &impl Key<D>,
        (range, scratch): (Option<(f64, f64)>, &mut [u32]),
        len: u64,
        tau: u64,
        unit: bool,
    ) -> Result<((u64, u64, Pivot<D>), Option<Near>), Error> {
        let comm = self.comm;
        // The candidates (by index): every local object until the first round narrows them.
        let mut cand: Option<Vec<u32>> = None;
        let (mut below_n, mut below_w) = (0u64, 0u64);
        let mut j = 0usize;
        let mut count = len;
        let order = Order {
            o,
            key: *key,
            ids: self.ids,
        };
        let mut hist: Vec<u64> = Vec::new();
        // The first round's local counts per bin (its bins are in `scratch`).
        let mut local: Vec<u32> = Vec::new();
        let mut near = None;
        // The range of the first component (the key) over all objects, when known.
        let mut known = range.map(|(lo, hi)| [ord(lo), !ord(hi)]);
        while count > 1 {
            let mut r = [u64::MAX, u64::MAX];
            if let Some(k) = known.take() {
                r = k;
            } else {
                each(cand.as_deref(), sel, |i| {
                    let c = order.comp(i, j);
                    r[0] = r[0].min(c);
                    r[1] = r[1].min(!c);
                });
                comm.allreduce_u64(ReduceOp::Min, &mut r)?;
            }
            let (lo, hi) = (r[0], !r[1]);
            if lo == hi {
                // Every candidate has this component: order by the next one.
                j += 1;
                assert!(j <= D + 1, "global ids are not unique");
                continue;
            }
            let span = hi - lo;
            let shift = (64 - span.leading_zeros()).saturating_sub(BINS.trailing_zeros());
            let nb = ((span >> shift) + 1) as usize;
            hist.clear();
            hist.resize(2 * nb, 0);
            let round = Round { j, lo, shift };
            fill_hist(
                (cand.as_deref(), sel),
                unit,
                (&order, round),
                &mut hist,
                (scratch, &mut local),
            );
            comm.allreduce_u64(ReduceOp::Sum, &mut hist)?;
            let mut chosen = nb - 1;
            let mut acc = below_w;
            for b in 0..nb {
                if acc + hist[b] >= tau {
                    chosen = b;
                    break;
                }
                acc += hist[b];
                below_n += hist[nb + b];
            }
            below_w = acc;
            count = hist[nb + chosen];
            cand = Some(match cand {
                None => {
                    let (c, n) = Near::pick(sel, scratch, &local, chosen);
                    // The key's bins only (the first component): they order the sides.
                    near = (j == 0).then_some(n);
                    c
                }
                Some(mut c) => {
                    c.retain(|&i| round.bin(&order, i as usize) == chosen);
                    c
                }
            });
        }
        // One candidate left on one rank: everybody learns it.
        let mut rec = vec![0u64; D + 4];
        let first = match &cand {
            None => (sel.len() > 0).then(|| sel.at(0)),
            Some(c) => c.first().map(|&i| i as usize),
        };
        if let Some(i) = first {
            rec[0] = 1;
            rec[1] = o.key(key, i).to_bits();
            let x = o.x(i);
            for a in 0..D {
                rec[2 + a] = x[a].to_bits();
            }
            rec[2 + D] = order.ids.of(i);
            rec[3 + D] = order.w(i, unit);
        }
        comm.allreduce_u64(ReduceOp::Max, &mut rec)?;
        assert_eq!(rec[0], 1, "the crossing object was lost");
        let mut x = [0.0; D];
        for a in 0..D {
            x[a] = f64::from_bits(rec[2 + a]);
        }
        let pv = Pivot {
            k: f64::from_bits(rec[1]),
            x,
            g: rec[2 + D],
            w: rec[3 + D],
        };
        Ok(((below_n, below_w, pv), near))
    }

    /// Coordinates (padded to 3) of the last low-side object in the order (object `i` in place
    /// `j` of `sel` is low when `low(j, i)`).
    fn last_low<const D: usize>(
        &self,
        o: Objects<'_, D>,
        sel: &Sel<'_>,
        key: &impl Key<D>,
        low: impl Fn(usize, usize) -> bool,
    ) -> Result<[f64; 3], Error> {
        // The local last one, as (present, order components, coordinates).
        let width = 2 * D + 3;
        let g = |i: usize| self.ids.of(i);
        let mut best: Option<usize> = None;
        sel.each(|j, i| {
            if !low(j, i) {
                return;
            }
            best = match best {
                Some(b)
                    if !Pivot {
                        k: o.key(key, b),
                        x: o.x(b),
                        g: g(b),
                        w: 0,
                    }
                    .after(&o.x(i), o.key(key, i), g(i)) =>
                {
                    Some(i)
                }
                Some(b) => Some(b),
                None => Some(i),
            };
        });
        let mut mine = vec![0u64; width];
        if let Some(b) = best {
            mine[0] = 1;
            let x = o.x(b);
            for j in 0..D + 2 {
                mine[1 + j] = component(&x, o.key(key, b), || g(b), j);
            }
            for a in 0..D {
                mine[D + 3 + a] = x[a].to_bits();
            }
        }
        let mut all = vec![0u64; width * self.comm.size()];
        self.comm.allgather(&mine, &mut all)?;
        let last = all
            .chunks(width)
            .filter(|r| r[0] == 1)
            .max_by(|a, b| a[1..D + 3].cmp(&b[1..D + 3]))
            .expect("a cut with a tie has low-side objects");
        let mut t = [0.0; 3];
        for a in 0..D {
            t[a] = f64::from_bits(last[D + 3 + a]);
        }
        Ok(t)
    }
}

/// The components of the order of the local objects, by index: the key `key`, the
/// coordinates, the global id.
struct Order<'a, const D: usize, K> {
    o: Objects<'a, D>,
    key: K,
    ids: GlobalIds<'a>,
}

impl<const D: usize, K: Key<D>> Order<'_, D, K> {
    /// Component `j` of object `i`.
    #[inline(always)]
    fn comp(&self, i: usize, j: usize) -> u64 {
        let x = self.o.x(i);
        component(&x, self.key.key(&x), || self.ids.of(i), j)
    }

    /// Object `i`'s weight as the selection counts it (1 with `unit`).
    #[inline(always)]
    fn w(&self, i: usize, unit: bool) -> u64 {
        if unit { 1 } else { self.o.w(i) }
    }
}

/// One round of the radix search: object `i` is in bin `(component j of i − lo) >> shift`.
#[derive(Clone, Copy)]
struct Round {
    j: usize,
    lo: u64,
    shift: u32,
}

impl Round {
    /// The bin of object `i`.
    #[inline(always)]
    fn bin<const D: usize, K: Key<D>>(&self, order: &Order<'_, D, K>, i: usize) -> usize {
        ((order.comp(i, self.j) - self.lo) >> self.shift) as usize
    }

    /// [`Round::bin`] in a round on the key (`j == 0`).
    #[inline(always)]
    fn key_bin<const D: usize, K: Key<D>>(&self, order: &Order<'_, D, K>, i: usize) -> usize {
        let x = order.o.x(i);
        ((ord(order.key.key(&x)) - self.lo) >> self.shift) as usize
    }
}

/// One round's histogram of the radix search: `hist` holds the weight of each of its `nb`
/// bins, then their counts (`hist.len() == 2 nb`), over the candidates `cand` (every object
/// of `sel` when `None`), each object in its bin of `round` (below `nb`) with its weight in
/// `order` (1 with `unit`). The first round, over every object, keeps each one's bin in
/// `bins` (by index: the parts array, which the cut writes afterwards) and the local counts
/// in `local`, and the candidates are picked from them without computing the component again.
fn fill_hist<const D: usize, K: Key<D>>(
    (cand, sel): (Option<&[u32]>, &Sel<'_>),
    unit: bool,
    (order, round): (&Order<'_, D, K>, Round),
    hist: &mut [u64],
    (bins, local): (&mut [u32], &mut Vec<u32>),
) {
    let nb = hist.len() / 2;
    let bin = |i: usize| round.bin(order, i);
    let w_of = |i: usize| order.w(i, unit);
    match cand {
        None => {
            // Counted in 32 bits (fewer bytes for the cache; a rank holds fewer than 2^32
            // objects), in `BINS` counters (`nb <= BINS`, a power of two: indexed without a
            // bounds check).
            local.clear();
            local.resize(BINS as usize, 0);
            let counts = &mut local[..BINS as usize];
            let mut count = |b: usize| counts[b & (BINS as usize - 1)] += 1;
            match sel {
                // The root's objects in index order, by one tight loop (the key's own loop in
                // the usual first round, on the key).
                Sel::All(n) if round.j == 0 => {
                    for (i, b) in bins[..*n].iter_mut().enumerate() {
                        let c = round.key_bin(order, i);
                        count(c);
                        *b = c as u32;
                    }
                }
                _ => sel.each(|_, i| {
                    let b = bin(i);
                    count(b);
                    bins[i] = b as u32;
                }),
            }
            local.truncate(nb);
            for (h, &c) in hist[nb..].iter_mut().zip(local.iter()) {
                *h = u64::from(c);
            }
            if unit {
                hist.copy_within(nb.., 0);
            } else {
                sel.each(|_, i| hist[bins[i] as usize] += w_of(i));
            }
        }
        Some(c) => {
            for &i in c {
                let b = bin(i as usize);
                hist[b] += w_of(i as usize);
                hist[nb + b] += 1;
            }
        }
    }
}

/// What the first round of a crossing search over the key leaves for a cut into two parts:
/// every local object's bin, in the parts array, and the local objects of the bins around
/// the one that holds the pivot (`chosen`): that bin and the nearest non-empty ones below and
/// above it on this rank, in the order of the segment. Every object in a bin below `chosen`
/// has a smaller key than the pivot (a low one), above it a larger one (a high one).
struct Near {
    chosen: u32,
    objects: Vec<u32>,
}

impl Near {
    /// The first round's candidates (the local objects of bin `chosen`, by index, in the
    /// order of `sel`) and the objects near them, from each object's bin in `bins` (by index)
    /// and the local `counts` per bin.
    fn pick(sel: &Sel<'_>, bins: &[u32], counts: &[u32], chosen: usize) -> (Vec<u32>, Near) {
        let below = counts[..chosen]
            .iter()
            .rposition(|&c| c > 0)
            .unwrap_or(chosen);
        let above = counts[chosen + 1..]
            .iter()
            .position(|&c| c > 0)
            .map_or(chosen, |b| chosen + 1 + b);
        // The bins strictly between are empty here: one range test finds the three.
        let (lo, span) = (below as u32, (above - below) as u32);
        let near = |b: u32| b.wrapping_sub(lo) <= span;
        let mut objects = Vec::new();
        match sel {
            // The root's objects in index order: blocks tested whole first (branch-free, so
            // that it vectorises; the three bins are a small share of the objects).
            Sel::All(n) => {
                const BLOCK: usize = 64;
                for (k, block) in bins[..*n].chunks(BLOCK).enumerate() {
                    if block.iter().fold(false, |a, &b| a | near(b)) {
                        let at = (k * BLOCK) as u32;
                        let hits = (block.iter().enumerate()).filter(|&(_, &b)| near(b));
                        objects.extend(hits.map(|(t, _)| at + t as u32));
                    }
                }
            }
            Sel::Listed(_) => sel.each(|_, i| {
                if near(bins[i]) {
                    objects.push(i as u32);
                }
            }),
        }
        let c = chosen as u32;
        let cand = objects
            .iter()
            .copied()
            .filter(|&i| bins[i as usize] == c)
            .collect();
        (cand, Near { chosen: c, objects })
    }
}

/// Calls `f` with each candidate: every object of `sel` when `cand` is `None`.
#[inline(always)]
fn each(cand: Option<&[u32]>, sel: &Sel<'_>, mut f: impl FnMut(usize)) {
    let n = cand.map_or(sel.len(), <[u32]>::len);
    for j in 0..n {
        f(cand.map_or_else(|| sel.at(j), |c| c[j] as usize));
    }
}

/// Global statistics of the low and the high side (by `low`, by place in `sel`).
fn side_stats<const D: usize, C: Comm>(
    comm: &C,
    o: Objects<'_, D>,
    sel: &Sel<'_>,
    key: &impl Key<D>,
    low: &[bool],
) -> Result<(Stats<D>, Stats<D>), Error> {
    let (mut sl, mut sh) = (Stats::<D>::EMPTY, Stats::<D>::EMPTY);
    sel.each(|j, i| {
        if low[j] {
            sl.add_x(&o.x(i), o.key(key, i));
        } else {
            sh.add_x(&o.x(i), o.key(key, i));
        }
    });
    Ok((reduce_stats(comm, sl)?, reduce_stats(comm, sh)?))
}

/// Makes a local step collective (`part_api::agree`): every rank returns its own error, or
/// [`Error::InvalidOnOtherRank`] when only other ranks failed, or the value when none did (so
/// no rank is left waiting in a later collective).
pub(crate) fn agreed<C: Comm, T>(comm: &C, local: Result<T, Error>) -> Result<T, Error> {
    agreed_summing(comm, local, &mut [])
}

/// [`agreed`] with `sums` summed over the ranks in the same collective (`part_api::agree`).
pub(crate) fn agreed_summing<C: Comm, T>(
    comm: &C,
    local: Result<T, Error>,
    sums: &mut [u64],
) -> Result<T, Error> {
    match part_api::agree(&comm::AsReduce(comm), local, sums)? {
        Ok(x) => Ok(x),
        Err(part_api::Failed::Here(e)) => Err(e),
        Err(part_api::Failed::Elsewhere { ranks, first }) => Err(Error::InvalidOnOtherRank {
            ranks,
            rank: first as u64,
        }),
    }
}

/// Validates the local part of a distributed bisection collectively and builds the shared
/// [`Input`]: every rank returns an error if any rank found bad data. Also returns the local
/// points' bounding box, from the check's pass over the coordinates.
pub(crate) fn validate_dist<C: Comm>(
    comm: &C,
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    gids: GlobalIds<'_>,
    targets: &[f64],
    parts_len: usize,
) -> Result<(Input, Bounds), Error> {
    let n = coords.len() / dim.max(1);
    let local = (|| {
        let (_, bounds) = check_points_bounded(coords, dim, weights, parts_len)?;
        if let GlobalIds::Given(g) = gids
            && g.len() != n
        {
            return Err(Error::LengthMismatch {
                what: "global ids",
                got: g.len(),
                expected: n,
                per: "point",
            });
        }
        Ok((fractions(targets)?, bounds))
    })();
    let (fractions, bounds) = agreed(comm, local)?;
    // [has weights, lacks weights], then [targets hash, its complement].
    let mut has = [
        u64::from(n > 0 && weights.is_some()),
        u64::from(n > 0 && weights.is_none()),
    ];
    comm.allreduce_u64(ReduceOp::Sum, &mut has)?;
    let mut hash = [targets_hash(targets), !targets_hash(targets)];
    comm.allreduce_u64(ReduceOp::Min, &mut hash)?;
    if hash[0] != !hash[1] {
        return Err(Error::Inconsistent {
            what: "the target part sizes",
        });
    }
    if has[0] > 0 && has[1] > 0 {
        return Err(Error::Inconsistent {
            what: "some ranks pass weights and others do not",
        });
    }
    let mut w_max = [weights.map_or(0.0, |w| w.iter().copied().fold(0.0, f64::max))];
    comm.allreduce_f64(ReduceOp::Max, &mut w_max)?;
    let mut input = Input {
        n,
        fractions,
        w_max: 1.0,
        unit: true,
        scale: (1.0, 1.0),
    };
    if has[0] > 0 && w_max[0] > 0.0 {
        let e = 31 - exponent(w_max[0]);
        input.w_max = w_max[0];
        input.unit = false;
        input.scale = (pow2(e / 2), pow2(e - e / 2));
    }
    Ok((input, bounds))
}

/// A hash of the bits of `targets` (FNV-1a), to check that every rank passed the same.
pub(crate) fn targets_hash(targets: &[f64]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ targets.len() as u64;
    for t in targets {
        h ^= t.to_bits();
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Distributed RCB/RIB of the local objects `points` (global ids `gids`, unique over the
/// ranks) into `targets.len()` parts: the serial bisection of the union.
pub(crate) fn bisect_dist<C: Comm>(
    comm: &C,
    b: &Bisector,
    points: Points<'_>,
    gids: GlobalIds<'_>,
    targets: &[f64],
    parts: &mut [u32],
) -> Result<Bisection, Error> {
    let (coords, dim, weights) = points.into_parts();
    let (input, bounds) = validate_dist(comm, coords, dim, weights, gids, targets, parts.len())?;
    let job = DistJob {
        comm,
        method: b.method,
        keep_ties: b.keep_ties,
        input: &input,
        par: b.par,
        ids: gids,
    };
    let (cuts, counts) = match dim {
        1 => run_dim::<1, C>(&job, (coords, &bounds), weights, parts),
        2 => run_dim::<2, C>(&job, (coords, &bounds), weights, parts),
        _ => run_dim::<3, C>(&job, (coords, &bounds), weights, parts),
    }?;
    // Part weights from exact integer sums, the same on every rank.
    let k = targets.len();
    let sums: Vec<u64> = if weights.is_none() {
        // Unit weights: the global part counts.
        counts.iter().map(|&c| c as u64).collect()
    } else {
        let mut sums = vec![0u64; k];
        for (i, &p) in parts.iter().enumerate() {
            sums[p as usize] += match weights {
                Some(w) if !input.unit => input.quantize(w[i]) as u64,
                // Weights given, all zero.
                _ => 0,
            };
        }
        comm.allreduce_u64(ReduceOp::Sum, &mut sums)?;
        sums
    };
    let part_weights: Vec<f64> = sums
        .iter()
        .map(|&s| {
            if input.unit {
                s as f64
            } else {
                input.dequantize(s)
            }
        })
        .collect();
    Ok(Bisection::assemble(
        b.method,
        dim,
        cuts,
        part_weights,
        counts,
        &input,
    ))
}

/// The bisection of the local points `coords` (`D` each, bounding box `bounds`) with
/// `weights`, in place.
fn run_dim<const D: usize, C: Comm>(
    job: &DistJob<'_, C>,
    (coords, bounds): (&[f64], &Bounds),
    weights: Option<&[f64]>,
    parts: &mut [u32],
) -> Result<(Vec<Cut>, Vec<usize>), Error> {
    let (xs, _) = coords.as_chunks::<D>();
    // The integer weights (as `Dot::of` has them); none for unit weights, each object's 1.
    let w: Option<Vec<u32>> = match weights {
        Some(w) if !job.input.unit => Some(w.iter().map(|&w| job.input.quantize(w)).collect()),
        _ => None,
    };
    job.run(
        Objects {
            xs,
            w: w.as_deref(),
        },
        bounds,
        parts,
    )
}
