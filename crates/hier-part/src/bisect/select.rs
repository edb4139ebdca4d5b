//! Weighted selection: put the lightest prefix of a slice, in a strict total order, on the low
//! side so that its weight is as close as possible to a target, without sorting the slice.
//!
//! Floyd–Rivest style: a sorted sample of about `len^0.6` objects gives two pivots that bracket
//! the target's weighted quantile with high probability; one partition pass (two Hoare sweeps)
//! leaves a small middle in which the search continues. Ranges of at most [`SMALL`] objects are
//! sorted. The sweeps also gather the bounding box and key range of each final side, so a
//! split costs about one pass over its objects. On long ranges with threads the passes run in
//! blocks side by side ([`sweep`]): the order objects are left in then depends on the number
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

/// Rearranges `v` so that its first `m` elements are its `m` smallest in key order ([`before`])
/// and returns `m`, `P(m)` (`P(m)` = weight of the `m` smallest) and the statistics of both
/// sides. `m` is the largest `m` with `P(m) < tau` or the smallest with `P(m) >= tau`,
/// whichever is nearer to `tau` (the former on a tie), so `|P(m) − tau|` is minimal and at
/// most half the weight of one element.
///
/// Requires `0 < tau <= total` where `total` is the weight of `v`.
/// The passes over long ranges run in blocks side by side on `par`'s pool ([`sweep`]); the
/// result is the same for every `par`.
pub(crate) fn select<const D: usize, const UNIT: bool, K: Key<D>>(
    v: &mut [Dot<D>],
    key: &K,
    tau: u64,
    total: u64,
    par: Par,
) -> Selected<D> {
    assert!(
        tau > 0 && tau <= total,
        "select: target {tau} outside (0, {total}]"
    );
    let (mut lo, mut hi) = (0usize, v.len());
    // Invariant: acc = P(lo) < tau <= P(hi) = acc + rw; everything before lo precedes, and
    // everything from hi on follows, every element of lo..hi; `low` and `high` hold the
    // statistics of 0..lo and hi..len.
    let (mut acc, mut rw) = (0u64, total);
    let (mut low, mut high) = (Stats::EMPTY, Stats::EMPTY);
    let mut sample = Vec::new();
    loop {
        let len = hi - lo;
        if len <= SMALL {
            return finish::<D, UNIT, K>(&mut v[lo..hi], key, lo, acc, tau, low, high);
        }
        let (a, b) = pivots::<D, UNIT, K>(&v[lo..hi], key, tau - acc, rw, &mut sample);
        let r = &mut v[lo..hi];
        let (nl, wl, [sl, _]) = sweep::<D, UNIT>(
            r,
            |d| {
                let k = key.key(&d.x);
                (before(k, d, a.k, &a.d), k)
            },
            false,
            par,
        );
        let (nm, wm, [sm, sh]) = sweep::<D, UNIT>(
            &mut r[nl..],
            |d| {
                let k = key.key(&d.x);
                (!before(b.k, &b.d, k, d), k)
            },
            true,
            par,
        );
        if nm == len {
            return finish::<D, UNIT, K>(&mut v[lo..hi], key, lo, acc, tau, low, high);
        }
        if acc + wl >= tau {
            hi = lo + nl;
            rw = wl;
            high = high.merge(sm).merge(sh);
        } else if acc + wl + wm >= tau {
            acc += wl;
            lo += nl;
            hi = lo + nm;
            rw = wm;
            low = low.merge(sl);
            high = high.merge(sh);
        } else {
            acc += wl + wm;
            lo += nl + nm;
            rw -= wl + wm;
            low = low.merge(sl).merge(sm);
        }
    }
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

/// Ranges at least this long are partitioned in blocks side by side when the budget allows.
const SWEEP_PAR_MIN: usize = 1 << 13;

/// [`partition`] of `v` with the statistics of the side that holds and (with `fails`) of the
/// other, as `[holds, fails]`; on a long range with threads, in one block per thread side by side,
/// then the elements that hold but lie past the boundary swapped, run by run, with those that
/// fail before it. The sides (as sets), their weights and statistics are [`partition`]'s,
/// for every `par` (integer sums, minima and maxima).
fn sweep<const D: usize, const UNIT: bool>(
    v: &mut [Dot<D>],
    pred: impl Fn(&Dot<D>) -> (bool, f64) + Sync,
    fails: bool,
    par: Par,
) -> (usize, u64, [Stats<D>; 2]) {
    let len = v.len();
    // The statistics of both sides, or (`fails` false) of the side that holds only.
    let part = |v: &mut [Dot<D>]| {
        let (mut y, mut f) = (Stats::EMPTY, Stats::EMPTY);
        let (n, w) = partition::<D, UNIT>(
            v,
            &pred,
            |d, k| y.add(d, k),
            |d, k| {
                if fails {
                    f.add(d, k);
                }
            },
        );
        (n, w, [y, f])
    };
    if !par.is_parallel() || len < SWEEP_PAR_MIN {
        return part(v);
    }
    let size = len.div_ceil(par.degree());
    let blocks: Vec<(usize, u64, [Stats<D>; 2])> = v.par_chunks_mut(size).map(part).collect();
    let (mut n, mut w) = (0usize, 0u64);
    let (mut yes, mut no) = (Stats::EMPTY, Stats::EMPTY);
    for (nb, wb, [y, f]) in &blocks {
        n += nb;
        w += wb;
        yes = yes.merge(*y);
        no = no.merge(*f);
    }
    // Block b holds `b·size..`: its elements that hold first, then those that fail. The runs
    // that fail before `n` and the runs that hold from `n` on are equally long in all.
    let mut fails = Vec::new();
    let mut holds = Vec::new();
    for (b, (nb, _, _)) in blocks.iter().enumerate() {
        let (start, end) = (b * size, ((b + 1) * size).min(len));
        let (mid, fail_end, hold_start) = (start + nb, end.min(n), start.max(n));
        if mid < fail_end {
            fails.push(mid..fail_end);
        }
        if hold_start < mid {
            holds.push(hold_start..mid);
        }
    }
    let (front, back) = v.split_at_mut(n);
    let (mut f, mut h) = (fails.into_iter(), holds.into_iter());
    let (mut fr, mut hr) = (f.next(), h.next());
    while let (Some(a), Some(b)) = (fr.clone(), hr.clone()) {
        let m = a.len().min(b.len());
        front[a.start..a.start + m].swap_with_slice(&mut back[b.start - n..b.start - n + m]);
        fr = if m == a.len() {
            f.next()
        } else {
            Some(a.start + m..a.end)
        };
        hr = if m == b.len() {
            h.next()
        } else {
            Some(b.start + m..b.end)
        };
    }
    (n, w, [yes, no])
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

    #[test]
    fn matches_sorting_on_many_shapes() {
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..300 {
            let n = [1, 2, 5, 47, 48, 49, 100, 1000, 5000][case % 9];
            let distinct = 1 + (next() % (n as u64 + 3)) as usize;
            let keys: Vec<f64> = (0..n).map(|_| (next() % distinct as u64) as f64).collect();
            let w: Vec<u32> = (0..n)
                .map(|_| match case % 3 {
                    0 => 1,
                    1 => (next() % 1000) as u32,
                    _ => (next() % 4 == 0) as u32 * (next() % 1_000_000) as u32,
                })
                .collect();
            let total: u64 = w.iter().map(|&x| x as u64).sum();
            if total == 0 {
                continue;
            }
            let tau = 1 + (next() % total);
            let mut v = dots(&keys, &w);
            let s = select::<1, false, _>(&mut v, &AxisKey(0), tau, total, Par::Seq);
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
