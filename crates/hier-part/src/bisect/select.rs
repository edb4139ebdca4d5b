//! Weighted selection: put the lightest prefix of a slice, in a strict total order, on the low
//! side so that its weight is as close as possible to a target, without sorting the slice.
//!
//! Floyd–Rivest style: a sorted sample of about `len^0.6` objects gives two pivots that bracket
//! the target's weighted quantile with high probability; one pass ([`classify`]) writes the
//! objects before the first pivot to the front of a scratch buffer and those after the second
//! to its back, branch-free (a Hoare sweep mispredicts its branch on about every other object
//! of a random order), and leaves a small middle in which the search continues. Ranges of at
//! most [`SMALL`] objects are sorted. A read of each outer group then gathers its bounding box
//! and key range, so a split costs about two simple passes over its objects, and the objects
//! end in whichever buffer the first pass wrote. On long ranges with threads the passes run in
//! blocks side by side ([`round`]): the order objects are left in then depends on the number
//! of blocks, but the result never does. It depends only on the set of objects in the slice
//! and their strict total order ([`before`]): `m` and `P(m)` are defined by them, the
//! statistics are minima and maxima, and weights are integers.

use super::{Dot, Key, Stats};
use crate::Par;
use rayon::prelude::*;

/// Ranges this short are sorted.
pub(crate) const SMALL: usize = 48;

/// Weight of a dot as the selection sees it.
#[inline(always)]
pub(crate) fn wt<const D: usize, const UNIT: bool>(d: &Dot<D>) -> u64 {
    if UNIT { 1 } else { d.w as u64 }
}

/// The strict total order of the bisection: key, then coordinates, then id.
#[inline(always)]
pub(crate) fn before<const D: usize>(ka: f64, a: &Dot<D>, kb: f64, b: &Dot<D>) -> bool {
    if ka != kb {
        return ka < kb;
    }
    for j in 0..D {
        if a.x[j] != b.x[j] {
            return a.x[j] < b.x[j];
        }
    }
    a.id < b.id
}

/// A dot with its key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keyed<const D: usize> {
    pub(crate) k: f64,
    pub(crate) d: Dot<D>,
}

impl<const D: usize> Keyed<D> {
    #[inline(always)]
    pub(crate) fn less(&self, o: &Self) -> bool {
        before(self.k, &self.d, o.k, &o.d)
    }

    pub(crate) fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        if self.less(o) {
            std::cmp::Ordering::Less
        } else if o.less(self) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }
}

/// Outcome of [`select`]: the boundary `m`, the low weight `P(m)`, and both sides' statistics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Selected<const D: usize> {
    pub(crate) m: usize,
    pub(crate) p: u64,
    pub(crate) low: Stats<D>,
    pub(crate) high: Stats<D>,
}

/// Rearranges the objects of `v` so that the first `m` are their `m` smallest in key order
/// ([`before`]) and returns `m`, `P(m)` (`P(m)` = weight of the `m` smallest) and the
/// statistics of both sides. `m` is the largest `m` with `P(m) < tau` or the smallest with
/// `P(m) >= tau`, whichever is nearer to `tau` (the former on a tie), so `|P(m) − tau|` is
/// minimal and at most half the weight of one element.
///
/// `t` (as long as `v`) is scratch: the objects end in `v`, or, when the second value returned
/// is `true`, in `t` (and `v` is then scratch). `boxes`: whether the low and the high side's
/// statistics are wanted whole (the side is split further); a side whose are not gets only
/// its key extreme next to the cut right (`low.kmax`, `high.kmin`), which the cut needs, and
/// no pass over its objects for the rest.
///
/// Requires `0 < tau <= total` where `total` is the weight of `v`.
/// The passes over long ranges run in blocks side by side on `par`'s pool ([`round`]); the
/// result is the same for every `par`.
pub(crate) fn select<const D: usize, const UNIT: bool, K: Key<D>>(
    v: &mut [Dot<D>],
    t: &mut [Dot<D>],
    key: &K,
    tau: u64,
    total: u64,
    boxes: [bool; 2],
    par: Par,
) -> (Selected<D>, bool) {
    assert!(
        tau > 0 && tau <= total,
        "select: target {tau} outside (0, {total}]"
    );
    assert_eq!(v.len(), t.len(), "select: scratch of the wrong length");
    let (mut lo, mut hi) = (0usize, v.len());
    // Invariant: acc = P(lo) < tau <= P(hi) = acc + rw; everything before lo precedes, and
    // everything from hi on follows, every element of lo..hi; `low` and `high` hold the
    // statistics of 0..lo and hi..len. All objects are in `t` when `in_t`, else in `v`.
    let (mut acc, mut rw) = (0u64, total);
    let (mut low, mut high) = (Stats::EMPTY, Stats::EMPTY);
    let mut sample = Vec::new();
    let mut in_t = false;
    // The last group each side got (positions in the buffer of the objects): later groups lie
    // nearer to the cut, so a side's key extreme next to it is the nearest group's.
    let (mut near_low, mut near_high) = (0..0, 0..0);
    loop {
        let len = hi - lo;
        let whole = len == v.len();
        let (cur, other) = if in_t {
            (&mut *t, &mut *v)
        } else {
            (&mut *v, &mut *t)
        };
        let near = (&near_low, &near_high);
        if len <= SMALL {
            let s = finish::<D, UNIT, K>(&mut cur[lo..hi], key, lo, acc, tau, low, high);
            return (extremes(s, cur, key, (lo, hi), boxes, near), in_t);
        }
        let (a, b) = pivots::<D, UNIT, K>(&cur[lo..hi], key, tau - acc, rw, &mut sample);
        let (src, dst) = (&mut cur[lo..hi], &mut other[lo..hi]);
        let r = round::<D, UNIT, K>((src, dst), key, (&a, &b), boxes, par);
        // The range's objects are now in `other` when `r.moved`: take that buffer if they
        // are all the objects, else copy them back.
        let data = match (r.moved, whole) {
            (false, _) => cur,
            (true, true) => {
                in_t = !in_t;
                other
            }
            (true, false) => {
                cur[lo..hi].copy_from_slice(&other[lo..hi]);
                cur
            }
        };
        let (nl, nm) = (r.nl, r.nm);
        if nm == len {
            let s = finish::<D, UNIT, K>(&mut data[lo..hi], key, lo, acc, tau, low, high);
            return (extremes(s, data, key, (lo, hi), boxes, near), in_t);
        }
        let mids = |data: &[Dot<D>]| Stats::of(&data[lo + nl..lo + nl + nm], key);
        if acc + r.wl >= tau {
            if boxes[1] {
                high = high.merge(mids(data)).merge(r.high);
            }
            near_high = lo + nl..hi;
            hi = lo + nl;
            rw = r.wl;
        } else if acc + r.wl + r.wm >= tau {
            if nl > 0 {
                near_low = lo..lo + nl;
            }
            if lo + nl + nm < hi {
                near_high = lo + nl + nm..hi;
            }
            acc += r.wl;
            lo += nl;
            hi = lo + nm;
            rw = r.wm;
            low = low.merge(r.low);
            high = high.merge(r.high);
        } else {
            if boxes[0] {
                low = low.merge(r.low).merge(mids(data));
            }
            near_low = lo..lo + nl + nm;
            acc += r.wl + r.wm;
            lo += nl + nm;
            rw -= r.wl + r.wm;
        }
    }
}

/// The key extremes next to the cut of a selection `s` whose last range `lo..hi` of `data`
/// was sorted: [`finish`] has them when the range holds objects of that side (they follow,
/// or precede, all others of the side), else they are the nearest group's (`near`), for a
/// side whose statistics were not kept whole.
fn extremes<const D: usize, K: Key<D>>(
    mut s: Selected<D>,
    data: &[Dot<D>],
    key: &K,
    (lo, hi): (usize, usize),
    boxes: [bool; 2],
    (near_low, near_high): (&std::ops::Range<usize>, &std::ops::Range<usize>),
) -> Selected<D> {
    if !boxes[0] && s.m == lo {
        s.low.kmax = Stats::of(&data[near_low.clone()], key).kmax;
    }
    if !boxes[1] && s.m == hi {
        s.high.kmin = Stats::of(&data[near_high.clone()], key).kmin;
    }
    s
}

/// What a [`round`] did to its range: `nl` objects before the pivot `a` now first, `nm` from
/// `a` to `b` next, the rest after; their weights `wl`, `wm`; the statistics of the first and
/// the last group; whether the range is now in the other buffer.
struct Round<const D: usize> {
    nl: usize,
    nm: usize,
    wl: u64,
    wm: u64,
    low: Stats<D>,
    high: Stats<D>,
    moved: bool,
}

/// One pass of the selection over `src` with pivots `a ≤ b`: the objects before `a` first,
/// then those from `a` to `b`, then those after `b`, with the statistics of the first and last
/// group (each only if `boxes` asks for it, else empty). `dst` (as long) is scratch; the range ends in `dst` (`moved`) or in `src`. On a
/// long range with threads, in blocks side by side ([`classify`] each, then every block's
/// groups copied to their places); the groups (as sets), their weights and statistics are the
/// same for every `par` (integer sums, minima and maxima).
fn round<const D: usize, const UNIT: bool, K: Key<D>>(
    (src, dst): (&mut [Dot<D>], &mut [Dot<D>]),
    key: &K,
    (a, b): (&Keyed<D>, &Keyed<D>),
    boxes: [bool; 2],
    par: Par,
) -> Round<D> {
    let len = src.len();
    let of = |v: &[Dot<D>], side: usize| {
        if boxes[side] {
            Stats::of(v, key)
        } else {
            Stats::EMPTY
        }
    };
    if !par.is_parallel() || len < SWEEP_PAR_MIN {
        let c = classify::<D, UNIT, K>(src, dst, key, (a, b));
        let (nl, nm) = (c.nl, c.nm);
        dst[nl..nl + nm].copy_from_slice(&src[..nm]);
        return Round {
            nl,
            nm,
            wl: c.wl,
            wm: c.wm,
            low: of(&dst[..nl], 0),
            high: of(&dst[nl + nm..], 1),
            moved: true,
        };
    }
    let size = len.div_ceil(par.degree());
    let blocks: Vec<Classified> = (src.par_chunks_mut(size).zip(dst.par_chunks_mut(size)))
        .map(|(s, d)| classify::<D, UNIT, K>(s, d, key, (a, b)))
        .collect();
    let mids: Vec<Dot<D>> = (blocks.iter().enumerate())
        .flat_map(|(i, c)| src[i * size..i * size + c.nm].iter().copied())
        .collect();
    let (nl, nm) = (blocks.iter().map(|c| c.nl).sum::<usize>(), mids.len());
    // Every block's first group goes to the front in block order, the middle groups after
    // them, every block's last group to the back.
    let (mut front, rest) = src.split_at_mut(nl);
    let (middle, mut back) = rest.split_at_mut(nm);
    middle.copy_from_slice(&mids);
    let mut jobs = Vec::with_capacity(blocks.len());
    for (c, d) in blocks.iter().zip(dst.chunks(size)) {
        let (l, f) = std::mem::take(&mut front).split_at_mut(c.nl);
        let (h, bk) = std::mem::take(&mut back).split_at_mut(c.nh);
        (front, back) = (f, bk);
        jobs.push((l, h, d, c));
    }
    let stats: Vec<[Stats<D>; 2]> = jobs
        .into_par_iter()
        .map(|(l, h, d, c)| {
            l.copy_from_slice(&d[..c.nl]);
            h.copy_from_slice(&d[d.len() - c.nh..]);
            [of(l, 0), of(h, 1)]
        })
        .collect();
    let (mut low, mut high) = (Stats::EMPTY, Stats::EMPTY);
    for [l, h] in stats {
        low = low.merge(l);
        high = high.merge(h);
    }
    Round {
        nl,
        nm,
        wl: blocks.iter().map(|c| c.wl).sum(),
        wm: blocks.iter().map(|c| c.wm).sum(),
        low,
        high,
        moved: false,
    }
}

/// What [`classify`] found in a block: how many objects (and their weight) came before `a`,
/// between `a` and `b`, after `b`.
struct Classified {
    nl: usize,
    nm: usize,
    nh: usize,
    wl: u64,
    wm: u64,
}

/// Reads `src` in order and writes the objects before `a` to the front of `dst`, those after
/// `b` to its back (in reverse), and the others (usually few: the pivots bracket the target
/// closely) to the front of `src`, over objects already read. Branch-free but for the middle
/// group, whose rare members take the branch: one read and two writes per object.
#[inline(always)]
fn classify<const D: usize, const UNIT: bool, K: Key<D>>(
    src: &mut [Dot<D>],
    dst: &mut [Dot<D>],
    key: &K,
    (a, b): (&Keyed<D>, &Keyed<D>),
) -> Classified {
    let len = src.len();
    assert_eq!(dst.len(), len, "classify: scratch of the wrong length");
    let (mut nl, mut nh, mut nm) = (0usize, 0usize, 0usize);
    let (mut wl, mut wm) = (0u64, 0u64);
    for i in 0..len {
        // Before object i: nl + nm + nh = i, so the writes below land on slots of `dst` that
        // hold no kept object yet (the front group ends at nl, the back one starts at
        // len − nh) and on a slot of `src` already read (nm ≤ i).
        let d = src[i];
        let k = key.key(&d.x);
        let w = wt::<D, UNIT>(&d);
        let is_lo = before(k, &d, a.k, &a.d);
        let is_hi = before(b.k, &b.d, k, &d);
        if !(is_lo | is_hi) {
            src[nm] = d;
            nm += 1;
            wm += w;
            continue;
        }
        dst[nl] = d;
        dst[len - 1 - nh] = d;
        nl += usize::from(is_lo);
        nh += usize::from(!is_lo);
        wl += if is_lo { w } else { 0 };
    }
    Classified { nl, nm, nh, wl, wm }
}

/// Sorts a short range and picks the boundary. `acc = P(offset) < tau <= P(offset + r.len())`.
fn finish<const D: usize, const UNIT: bool, K: Key<D>>(
    r: &mut [Dot<D>],
    key: &K,
    offset: usize,
    acc: u64,
    tau: u64,
    mut low: Stats<D>,
    mut high: Stats<D>,
) -> Selected<D> {
    let mut s: Vec<Keyed<D>> = r
        .iter()
        .map(|d| Keyed {
            k: key.key(&d.x),
            d: *d,
        })
        .collect();
    s.sort_unstable_by(Keyed::cmp);
    let mut p = acc;
    let mut cut = None;
    for (i, e) in s.iter().enumerate() {
        let w = wt::<D, UNIT>(&e.d);
        if p + w >= tau {
            // The crossing element: P(i) = p < tau <= p + w = P(i + 1).
            cut = Some(if p + w - tau < tau - p {
                (i + 1, p + w)
            } else {
                (i, p)
            });
            break;
        }
        p += w;
    }
    let (m, p) = cut.expect("select: the target weight lies beyond the range");
    for (i, (slot, e)) in r.iter_mut().zip(&s).enumerate() {
        *slot = e.d;
        if i < m {
            low.add(&e.d, e.k);
        } else {
            high.add(&e.d, e.k);
        }
    }
    Selected {
        m: offset + m,
        p,
        low,
        high,
    }
}

/// Number of sample objects for a range of `len > SMALL`.
fn sample_size(len: usize) -> usize {
    ((len as f64).powf(0.6) as usize).clamp(15, 4095) | 1
}

/// Two pivots `a ≤ b` (elements of `r`) that bracket the weighted quantile `need / rw` of `r`.
fn pivots<const D: usize, const UNIT: bool, K: Key<D>>(
    r: &[Dot<D>],
    key: &K,
    need: u64,
    rw: u64,
    sample: &mut Vec<Keyed<D>>,
) -> (Keyed<D>, Keyed<D>) {
    let len = r.len();
    let g = sample_size(len).min(len);
    sample.clear();
    sample.extend((0..g).map(|j| {
        let d = r[(2 * j + 1) * len / (2 * g)];
        Keyed {
            k: key.key(&d.x),
            d,
        }
    }));
    sample.sort_unstable_by(Keyed::cmp);
    let phi = need as f64 / rw as f64;
    let sw: u64 = sample.iter().map(|e| wt::<D, UNIT>(&e.d)).sum();
    let i = if sw == 0 {
        ((phi * g as f64) as usize).min(g - 1)
    } else {
        let goal = phi * sw as f64;
        let mut c = 0u64;
        sample
            .iter()
            .position(|e| {
                c += wt::<D, UNIT>(&e.d);
                c as f64 >= goal
            })
            .unwrap_or(g - 1)
    };
    // About three standard deviations of the sample rank of the quantile, at most g/4.
    let delta = ((1.5 * (g as f64).sqrt()).ceil() as usize).min(g / 4);
    (
        sample[i.saturating_sub(delta)],
        sample[(i + delta).min(g - 1)],
    )
}

/// Ranges at least this long are partitioned in blocks side by side when the budget allows.
const SWEEP_PAR_MIN: usize = 1 << 13;

/// Moves the elements for which `pred` holds to the front (Hoare sweeps from both ends) and
/// returns their number and weight. `pred` returns its verdict and the element's key; every
/// element is reported once, in its final place, to `on_true` or `on_false`.
#[inline(always)]
pub(crate) fn partition<const D: usize, const UNIT: bool>(
    v: &mut [Dot<D>],
    pred: impl Fn(&Dot<D>) -> (bool, f64),
    mut on_true: impl FnMut(&Dot<D>, f64),
    mut on_false: impl FnMut(&Dot<D>, f64),
) -> (usize, u64) {
    let (mut i, mut j) = (0usize, v.len());
    let mut w = 0u64;
    loop {
        let mut ki = 0.0;
        while i < j {
            let (t, k) = pred(&v[i]);
            if !t {
                ki = k;
                break;
            }
            on_true(&v[i], k);
            w += wt::<D, UNIT>(&v[i]);
            i += 1;
        }
        let mut kj = 0.0;
        while i < j {
            let (t, k) = pred(&v[j - 1]);
            if t {
                kj = k;
                break;
            }
            on_false(&v[j - 1], k);
            j -= 1;
        }
        if i >= j {
            break;
        }
        // v[i] fails, v[j-1] holds.
        v.swap(i, j - 1);
        on_true(&v[i], kj);
        on_false(&v[j - 1], ki);
        w += wt::<D, UNIT>(&v[i]);
        i += 1;
        j -= 1;
    }
    (i, w)
}

#[cfg(test)]
mod tests {
    use super::super::AxisKey;
    use super::*;

    fn dots(keys: &[f64], w: &[u32]) -> Vec<Dot<1>> {
        keys.iter()
            .zip(w)
            .enumerate()
            .map(|(i, (&k, &w))| Dot {
                x: [k],
                w,
                id: i as u32,
            })
            .collect()
    }

    /// A xorshift generator from `state`.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// The obviously correct version: sort everything, take all prefix sums.
    fn reference(v: &[Dot<1>], tau: u64) -> (usize, u64) {
        let mut s = v.to_vec();
        s.sort_by(|a, b| (a.x[0], a.id).partial_cmp(&(b.x[0], b.id)).unwrap());
        let mut prefix = vec![0u64];
        for d in &s {
            prefix.push(prefix.last().unwrap() + d.w as u64);
        }
        let below = (0..prefix.len()).rev().find(|&m| prefix[m] < tau).unwrap();
        let above = (0..prefix.len()).find(|&m| prefix[m] >= tau).unwrap();
        if prefix[above] - tau < tau - prefix[below] {
            (above, prefix[above])
        } else {
            (below, prefix[below])
        }
    }

    /// Long ranges in blocks side by side (2 and 3 threads): the same boundary, weight and
    /// statistics as the sequential selection and the sort.
    #[test]
    fn blocks_side_by_side_match_the_sequential_selection() {
        let mut next = xorshift(0x2545f4914f6cdd1d);
        for case in 0..12 {
            let n = [9000, 20_000, 50_001][case % 3];
            let distinct = [7, 1000, 1 << 40][case % 3];
            let keys: Vec<f64> = (0..n).map(|_| (next() % distinct) as f64).collect();
            let w: Vec<u32> = (0..n).map(|_| (next() % 1000) as u32).collect();
            let total: u64 = w.iter().map(|&x| x as u64).sum();
            let tau = 1 + next() % total;
            let run_with = |par: Par, boxes: [bool; 2]| {
                let mut v = dots(&keys, &w);
                let mut t = v.clone();
                let (s, moved) = par
                    .install(|| {
                        select::<1, false, _>(&mut v, &mut t, &AxisKey(0), tau, total, boxes, par)
                    })
                    .unwrap();
                let v = if moved { t } else { v };
                let mut low: Vec<u32> = v[..s.m].iter().map(|d| d.id).collect();
                low.sort();
                (s, low, v)
            };
            let run = |par: Par| run_with(par, [true; 2]);
            let (s0, low0, v0) = run(Par::Seq);
            assert_eq!((s0.m, s0.p), reference(&v0, tau), "case {case}");
            for threads in [2, 3] {
                // Without the boxes: the same boundary, weight and key extremes.
                let (s, low, _) = run_with(Par::threads(threads), [false; 2]);
                let near = (s.m, s.p, s.low.kmax, s.high.kmin);
                assert_eq!(near, (s0.m, s0.p, s0.low.kmax, s0.high.kmin), "case {case}");
                assert_eq!(low, low0, "case {case}, {threads} threads");
                let (s, low, _) = run(Par::threads(threads));
                assert_eq!((s.m, s.p), (s0.m, s0.p), "case {case}, {threads} threads");
                assert_eq!(low, low0, "case {case}, {threads} threads");
                assert_eq!(
                    (
                        s.low.lo,
                        s.low.hi,
                        s.low.kmax,
                        s.high.lo,
                        s.high.hi,
                        s.high.kmin
                    ),
                    (
                        s0.low.lo,
                        s0.low.hi,
                        s0.low.kmax,
                        s0.high.lo,
                        s0.high.hi,
                        s0.high.kmin
                    ),
                    "case {case}, {threads} threads"
                );
            }
        }
    }

    #[test]
    fn matches_sorting_on_many_shapes() {
        let mut next = xorshift(0x9e3779b97f4a7c15);
        for case in 0..300 {
            let n = [1, 2, 5, 47, 48, 49, 100, 1000, 5000][case % 9];
            let distinct = 1 + (next() % (n as u64 + 3)) as usize;
            let keys: Vec<f64> = (0..n).map(|_| (next() % distinct as u64) as f64).collect();
            let w: Vec<u32> = (0..n)
                .map(|_| match case % 3 {
                    0 => 1,
                    1 => (next() % 1000) as u32,
                    _ => next().is_multiple_of(4) as u32 * (next() % 1_000_000) as u32,
                })
                .collect();
            let total: u64 = w.iter().map(|&x| x as u64).sum();
            if total == 0 {
                continue;
            }
            let tau = 1 + (next() % total);
            let mut v = dots(&keys, &w);
            let mut t = v.clone();
            let (mut u, mut ut) = (v.clone(), v.clone());
            let (s, moved) =
                select::<1, false, _>(&mut v, &mut t, &AxisKey(0), tau, total, [true; 2], Par::Seq);
            let v = if moved { t } else { v };
            // Without the boxes: the same boundary, weight and key extremes next to the cut.
            let (s2, _) = select::<1, false, _>(
                &mut u,
                &mut ut,
                &AxisKey(0),
                tau,
                total,
                [false; 2],
                Par::Seq,
            );
            assert_eq!(
                (s2.m, s2.p, s2.low.kmax, s2.high.kmin),
                (s.m, s.p, s.low.kmax, s.high.kmin),
                "case {case}"
            );
            assert_eq!((s.m, s.p), reference(&v, tau), "case {case}");
            let key = |d: &Dot<1>| d.x[0];
            let max_low = v[..s.m]
                .iter()
                .max_by(|a, b| (key(a), a.id).partial_cmp(&(key(b), b.id)).unwrap());
            let min_high = v[s.m..]
                .iter()
                .min_by(|a, b| (key(a), a.id).partial_cmp(&(key(b), b.id)).unwrap());
            if let (Some(l), Some(h)) = (max_low, min_high) {
                assert!(before(key(l), l, key(h), h), "case {case}: not a prefix");
            }
            assert_eq!(s.low.kmax, max_low.map_or(f64::NEG_INFINITY, key));
            assert_eq!(s.high.kmin, min_high.map_or(f64::INFINITY, key));
            assert_eq!(
                s.low.lo[0],
                v[..s.m].iter().map(key).fold(f64::INFINITY, f64::min)
            );
            let mut ids: Vec<u32> = v.iter().map(|d| d.id).collect();
            ids.sort();
            assert!(ids.iter().enumerate().all(|(i, &id)| id == i as u32));
        }
    }
}
