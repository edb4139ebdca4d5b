//! The serial bisection: weighted selection on one process's objects, the two halves of each
//! cut recursed into concurrently when the thread budget allows ([`Par::fork`]).

use super::select::{self, before, select, wt};
use super::{
    AxisKey, Bisection, Bisector, Cut, Dot, Goal, InertialKey, Key, LowSide, Method, Plane, Stats,
    inertial_from, low_goal, moment_sums, reduce, stats,
};
use crate::input::{CHUNK, Input, input_of, validate};
use crate::{Error, Par};
use part_api::Points;
use rayon::prelude::*;
use std::convert::Infallible;

/// The serial bisection's buffers: the objects as dots, one vector per dimension. The
/// hierarchical walk keeps them from level to level and from call to call (fresh pages cost a
/// fault each, about as much as a pass over them).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    d1: [Vec<Dot<1>>; 2],
    d2: [Vec<Dot<2>>; 2],
    d3: [Vec<Dot<3>>; 2],
}

/// The serial bisection of `points` (on the calling thread's pool, see [`Par::install`]) in
/// the buffers `scratch`; `checked`: the points are known to be good (only the targets are
/// checked).
pub(super) fn bisect(
    b: &Bisector,
    points: Points<'_>,
    targets: &[f64],
    parts: &mut [u32],
    (checked, scratch): (bool, &mut Scratch),
) -> Result<Bisection, Error> {
    let Bisector {
        method,
        keep_ties,
        par,
    } = *b;
    let (coords, dim, weights) = points.into_parts();
    let input = if checked {
        assert!(
            coords.len() == parts.len() * dim && weights.is_none_or(|w| w.len() == parts.len()),
            "bisect: checked points of the wrong length"
        );
        input_of(parts.len(), weights, targets, par)?
    } else {
        validate(coords, dim, weights, targets, parts.len(), par)?
    };
    let job = Job {
        method,
        keep_ties,
        input: &input,
    };
    let (cuts, counts) = match dim {
        1 => job.run::<1>(&mut scratch.d1, (coords, weights), parts, par),
        2 => job.run::<2>(&mut scratch.d2, (coords, weights), parts, par),
        _ => job.run::<3>(&mut scratch.d3, (coords, weights), parts, par),
    };
    let k = targets.len();
    let mut part_weights = vec![0.0; k];
    match weights {
        // Summed in index order: the same for every `par`.
        Some(w) => {
            for (p, &wi) in parts.iter().zip(w) {
                part_weights[*p as usize] += wi;
            }
        }
        None => {
            for (pw, &c) in part_weights.iter_mut().zip(&counts) {
                *pw = c as f64;
            }
        }
    }
    Ok(Bisection::assemble(
        method,
        dim,
        cuts,
        part_weights,
        counts,
        &input,
    ))
}

/// Segments at least this long are split into two rayon tasks when the budget allows.
const JOIN_MIN: usize = 4096;

/// One segment of the recursion: the dots `v` (integer weight `total`, bounding box `st`) that
/// go to the parts `p0..p0 + counts.len()`, at depth `depth` of the cut tree; `t`, as long,
/// is the selection's scratch. `swapped`: `v` lies in the second buffer of the bisection
/// (and `t` in the first); each part's is written to `swapped` at the leaves.
struct Seg<'s, const D: usize> {
    v: &'s mut [Dot<D>],
    t: &'s mut [Dot<D>],
    swapped: bool,
    counts: &'s mut [usize],
    flags: &'s mut [bool],
    p0: u32,
    total: u64,
    st: Stats<D>,
    depth: u32,
}

struct Job<'a> {
    method: Method,
    keep_ties: bool,
    input: &'a Input,
}

impl Job<'_> {
    /// The bisection of the points `(coords, weights)` with `bufs` as the dots' buffer and
    /// the selection's scratch: the cuts in preorder and each part's count.
    fn run<const D: usize>(
        &self,
        bufs: &mut [Vec<Dot<D>>; 2],
        (coords, weights): (&[f64], Option<&[f64]>),
        parts: &mut [u32],
        par: Par,
    ) -> (Vec<Cut>, Vec<usize>) {
        let n = self.input.n;
        let make = |i: usize| Dot::of(coords, weights, self.input, i);
        let [dots, scratch] = bufs.each_mut().map(|b| {
            if b.len() < n {
                let zero = Dot {
                    x: [0.0; D],
                    w: 0,
                    id: 0,
                };
                b.resize(n, zero);
            }
            &mut b[..n]
        });
        // Each chunk's dots made and counted in one pass, the chunks' figures combined in
        // order: the same for every `par` (an integer sum, and minima and maxima of
        // coordinates that are never -0.0). The loop's sums stay in registers.
        let fill = |(c, out): (usize, &mut [Dot<D>])| {
            let (mut w, mut s) = (0u64, Stats::EMPTY);
            for (j, slot) in out.iter_mut().enumerate() {
                let d = make(c * CHUNK + j);
                w += d.w as u64;
                s.add(&d, 0.0);
                *slot = d;
            }
            (w, s)
        };
        let combine = |a: (u64, Stats<D>), b: (u64, Stats<D>)| (a.0 + b.0, a.1.merge(b.1));
        let init = (0u64, Stats::EMPTY);
        let (total, st) = if par.is_parallel() && n >= 2 * CHUNK {
            let figures: Vec<_> = dots.par_chunks_mut(CHUNK).enumerate().map(fill).collect();
            figures.into_iter().fold(init, combine)
        } else {
            dots.chunks_mut(CHUNK)
                .enumerate()
                .map(fill)
                .fold(init, combine)
        };
        let mut counts = vec![0usize; self.input.fractions.len()];
        let mut flags = vec![false; counts.len()];
        let root = Seg {
            v: &mut *dots,
            t: &mut *scratch,
            swapped: false,
            counts: &mut counts,
            flags: &mut flags,
            p0: 0,
            total,
            st,
            depth: 0,
        };
        let cuts = self.split(root, par);
        let mut off = 0;
        for (p, (&c, &swapped)) in counts.iter().zip(&flags).enumerate() {
            let v: &[Dot<D>] = if swapped { scratch } else { dots };
            for d in &v[off..off + c] {
                parts[d.id as usize] = p as u32;
            }
            off += c;
        }
        (cuts, counts)
    }

    /// Splits the segment's dots among its parts, writing each part's object count into
    /// `seg.counts`; returns the cuts of this subtree in preorder.
    fn split<const D: usize>(&self, seg: Seg<'_, D>, par: Par) -> Vec<Cut> {
        if seg.counts.len() == 1 {
            seg.counts[0] = seg.v.len();
            seg.flags[0] = seg.swapped;
            return Vec::new();
        }
        match self.method {
            Method::Rcb => {
                let axis = seg.st.longest_axis();
                self.cut(seg, par, Plane::Axis(axis), AxisKey(axis))
            }
            Method::Rib => {
                let (plane, key) = inertial(seg.v, &seg.st, self.input.unit, par);
                self.cut(seg, par, plane, key)
            }
        }
    }

    /// [`Job::split`] once the key is chosen: the low side, the cut, and both sides split
    /// further (concurrently when the budget allows).
    fn cut<const D: usize, K: Key<D>>(
        &self,
        seg: Seg<'_, D>,
        par: Par,
        plane: Plane,
        key: K,
    ) -> Vec<Cut> {
        let Seg {
            mut v,
            mut t,
            mut swapped,
            counts,
            flags,
            p0,
            total,
            st,
            depth,
        } = seg;
        let k = counts.len();
        let half = k / 2;
        let len = v.len();
        let (s, moved) = self.low_side((v, t), &key, (p0, k), (total, st), par);
        if moved {
            // The selection left the dots in the scratch, which `v` becomes.
            (v, t) = (t, v);
            swapped = !swapped;
        }
        let m = s.m;
        let (vl, vh) = v.split_at_mut(m);
        let (tl, th) = t.split_at_mut(m);
        let side = LowSide {
            m: m as u64,
            len: len as u64,
            p: s.p,
            total,
            low: &s.low,
            high: &s.high,
        };
        let last_low = || Ok(last_on_cut(vl, &key, s.low.kmax, par));
        let (mut cut, [w_low, w_high]) =
            match side.cut::<Infallible>(self.input, (plane, depth), (p0, k), last_low) {
                Ok(c) => c,
                Err(never) => match never {},
            };
        let (cl, ch) = counts.split_at_mut(half);
        let (fl, fh) = flags.split_at_mut(half);
        let lo = Seg {
            v: vl,
            t: tl,
            swapped,
            counts: cl,
            flags: fl,
            p0,
            total: w_low,
            st: s.low,
            depth: depth + 1,
        };
        let hi = Seg {
            v: vh,
            t: th,
            swapped,
            counts: ch,
            flags: fh,
            p0: cut.high.start,
            total: w_high,
            st: s.high,
            depth: depth + 1,
        };
        let (low, high) = match par.fork() {
            Some((pa, pb)) if len >= JOIN_MIN => {
                rayon::join(|| self.split(lo, pa), || self.split(hi, pb))
            }
            _ => (self.split(lo, par), self.split(hi, par)),
        };
        let nl = low.len();
        cut.children = [
            (!low.is_empty()).then_some(1),
            (!high.is_empty()).then_some(1 + nl),
        ];
        let mut cuts = Vec::with_capacity(1 + nl + high.len());
        cuts.push(cut);
        for (off, sub) in [(1, low), (1 + nl, high)] {
            cuts.extend(sub.into_iter().map(|mut c| {
                for ch in c.children.iter_mut().flatten() {
                    *ch += off;
                }
                c
            }));
        }
        cuts
    }

    /// The low side of the segment `v` (weight `total`, statistics `st`) of parts
    /// `p0..p0 + k`: selected for its goal ([`low_goal`]), then with `keep_ties` the objects
    /// on the cut moved to one side ([`untie`]). `t` is the selection's scratch, as long as
    /// `v`; the second value returned says whether the dots now lie in `t`.
    fn low_side<const D: usize, K: Key<D>>(
        &self,
        (v, t): (&mut [Dot<D>], &mut [Dot<D>]),
        key: &K,
        (p0, k): (u32, usize),
        (total, st): (u64, Stats<D>),
        par: Par,
    ) -> (select::Selected<D>, bool) {
        let len = v.len();
        // A set whose objects all weigh 0 is split by count.
        let unit = self.input.unit || total == 0;
        let (goal, sel_total) = low_goal(&self.input.fractions, p0, k, len as u64, total, unit);
        let tau = match goal {
            Goal::Tau(t) => t,
            _ => 0,
        };
        // A side that is one part is not split further: its box is not needed (with
        // `keep_ties` both sides' statistics are taken again below).
        let boxes = [k / 2 > 1, k - k / 2 > 1];
        let (mut s, moved) = match (goal, unit) {
            (Goal::Nothing, _) => (
                select::Selected {
                    m: 0,
                    p: 0,
                    low: Stats::EMPTY,
                    high: st,
                },
                false,
            ),
            (Goal::Everything, _) => (
                select::Selected {
                    m: len,
                    p: sel_total,
                    low: st,
                    high: Stats::EMPTY,
                },
                false,
            ),
            (Goal::Tau(tau), true) => select::<D, true, K>(v, t, key, tau, sel_total, boxes, par),
            (Goal::Tau(tau), false) => select::<D, false, K>(v, t, key, tau, sel_total, boxes, par),
        };
        let v = if moved { t } else { v };
        if self.keep_ties && s.m > 0 && s.m < len && s.low.kmax >= s.high.kmin {
            let (m, p) = if unit {
                untie::<D, true, K>(v, key, (s.m, s.p), s.low.kmax, tau, par)
            } else {
                untie::<D, false, K>(v, key, (s.m, s.p), s.low.kmax, tau, par)
            };
            s.m = m;
            s.p = p;
            s.low = stats(&v[..m], key, par);
            s.high = stats(&v[m..], key, par);
        }
        (s, moved)
    }
}

/// Coordinates of the last dot (in key order) of `v` whose key is `kmax`, padded to 3.
fn last_on_cut<const D: usize>(v: &[Dot<D>], key: &impl Key<D>, kmax: f64, par: Par) -> [f64; 3] {
    let later = |a: Option<Dot<D>>, b: Option<Dot<D>>| match (a, b) {
        (Some(a), Some(b)) => Some(if before(kmax, &a, kmax, &b) { b } else { a }),
        (a, b) => a.or(b),
    };
    let last = reduce(
        v,
        par,
        None,
        |c| {
            c.iter()
                .filter(|d| key.key(&d.x) == kmax)
                .fold(None, |a, d| later(a, Some(*d)))
        },
        later,
    );
    let mut t = [0.0; 3];
    if let Some(d) = last {
        t[..D].copy_from_slice(&d.x);
    }
    t
}

/// `keep_ties`: the dots with key `kv` lie on both sides of `m`; moves them all to the side
/// that leaves the low weight nearer to `tau`. Takes and returns `(m, P(m))`.
fn untie<const D: usize, const UNIT: bool, K: Key<D>>(
    v: &mut [Dot<D>],
    key: &K,
    (m, p): (usize, u64),
    kv: f64,
    tau: u64,
    par: Par,
) -> (usize, u64) {
    let ties = |v: &[Dot<D>]| {
        reduce(
            v,
            par,
            (0usize, 0u64),
            |c| {
                c.iter()
                    .filter(|d| key.key(&d.x) == kv)
                    .fold((0, 0), |(n, w), d| (n + 1, w + wt::<D, UNIT>(d)))
            },
            |a, b| (a.0 + b.0, a.1 + b.1),
        )
    };
    let (na, wa) = ties(&v[..m]);
    let (nb, wb) = ties(&v[m..]);
    let (p_up, p_down) = (p + wb, p - wa);
    let on = |d: &Dot<D>| {
        let k = key.key(&d.x);
        (k == kv, k)
    };
    if p_up.abs_diff(tau) < p_down.abs_diff(tau) {
        select::partition::<D, true>(&mut v[m..], on, |_, _| {}, |_, _| {});
        (m + nb, p_up)
    } else {
        let off = |d: &Dot<D>| {
            let (t, k) = on(d);
            (!t, k)
        };
        select::partition::<D, true>(&mut v[..m], off, |_, _| {}, |_, _| {});
        (m - na, p_down)
    }
}

/// The principal inertial axis of `v` and the key that projects on it.
pub(super) fn inertial<const D: usize>(
    v: &[Dot<D>],
    st: &Stats<D>,
    unit: bool,
    par: Par,
) -> (Plane, InertialKey<D>) {
    let sums = |u: bool| Ok::<_, std::convert::Infallible>(moment_sums(v, st, u, par));
    match inertial_from(st, unit, sums) {
        Ok(r) => r,
        Err(never) => match never {},
    }
}
