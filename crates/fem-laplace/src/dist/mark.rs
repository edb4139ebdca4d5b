//! Marking across ranks, giving exactly the serial marks.
//!
//! The serial marking ([`crate::mark::mark`]) takes entries in a fixed order (indicator bin,
//! highest first; ties in curve order; for PHAML's "double" each element's first bisection,
//! then its second) and closes each one's marks at once, until the mesh would have the
//! target number of vertices (or, for Dörfler, the entries' shares reach θ). Call f(x) the
//! first entry whose closure marks edge x. The closure of a prefix of the entries is exactly
//! {x : f(x) before the end of the prefix}, and it has as many new vertices as edges, so the
//! serial marks are {x : f(x) ≤ F} where F is the need-th smallest f over all edges (need =
//! the missing vertices), and the Dörfler prefix ends at the entry where the running share
//! crosses θ. Everything is a min-label propagation along the closure rules followed by a
//! selection, both of which distribute:
//!
//! 1. Labels are compared first by bin: each rank propagates the bins of its entries through
//!    its owned elements in increasing order, so that every edge is set once, and stops at
//!    the first of a few checkpoints (spread over the global entry count) where the ranks
//!    together have labelled enough edges; the ranks exchange the labels of the edges they
//!    share and propagate improvements until no rank changes anything. A histogram selection
//!    over all ranks gives the bin B of the need-th edge.
//! 2. Within bin B the same is done with the rest of the label (the element's tree key and
//!    first/second bisection), only over the edges whose bin is B, and a radix selection
//!    gives the key K.
//!
//! An edge is marked when its label is at most (B, K). Shared edges get the same label on both
//! sides, so the ranks agree on them without further exchange.
#![expect(
    clippy::needless_range_loop,
    reason = "index loops over parallel element arrays"
)]

use super::keys::edge_key;
use super::local::Local;
use crate::mark::{Marking, NBINS, bin, dorfler_goal, dorfler_weight};
use crate::mesh::NONE;
use comm::wire::{Outbox, Reader, WireError, Writer};
use comm::{Comm, CommError, ReduceOp};

const INF1: u16 = u16::MAX;
const INF2: u128 = u128::MAX;
/// Checkpoints of the stage-1 propagation (see the module documentation).
const CHECKPOINTS: u64 = 16;

/// The edges an owned element shares with ghosts, per ghost owner, in midpoint order (the
/// same list on both sides of each pair of ranks).
struct Shared {
    per: Vec<Vec<(u32, u8)>>,
}

impl Shared {
    fn new(l: &Local) -> Shared {
        let mut per: Vec<Vec<(u128, u32, u8)>> = vec![Vec::new(); l.size];
        let c = &l.mesh.coords;
        for &(t, k) in &l.shared {
            let (tu, ku) = (t as usize, k as usize);
            let n = l.mesh.nbr[tu][ku];
            let tv = l.mesh.tri[tu];
            let e = edge_key(c[tv[(ku + 1) % 3] as usize], c[tv[(ku + 2) % 3] as usize]);
            per[l.eowner[n as usize] as usize].push((e, t, k));
        }
        Shared {
            per: per
                .into_iter()
                .map(|mut v| {
                    v.sort_unstable();
                    v.into_iter().map(|(_, t, k)| (t, k)).collect()
                })
                .collect(),
        }
    }
}

/// A label type propagated along the closure: the bin (stage 1) or the key (stage 2).
trait Label: Copy + Ord {
    const INF: Self;
    fn put(self, w: &mut Writer);
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError>;
}

impl Label for u16 {
    const INF: u16 = INF1;
    fn put(self, w: &mut Writer) {
        w.u16(self);
    }
    fn get(r: &mut Reader<'_>) -> Result<u16, WireError> {
        r.u16()
    }
}

impl Label for u128 {
    const INF: u128 = INF2;
    fn put(self, w: &mut Writer) {
        w.u128(self);
    }
    fn get(r: &mut Reader<'_>) -> Result<u128, WireError> {
        r.u128()
    }
}

/// Where the labels of an element's three edges are kept.
trait Slots<L: Label> {
    /// The labels of element t, if it takes part.
    fn at(&mut self, t: usize) -> Option<&mut [L; 3]>;
}

/// Stage 1: every element.
struct Dense<L>(Vec<[L; 3]>);
impl<L: Label> Slots<L> for Dense<L> {
    #[inline]
    fn at(&mut self, t: usize) -> Option<&mut [L; 3]> {
        Some(&mut self.0[t])
    }
}

/// Stage 2: the elements with an edge in bin B, through an index.
struct Sparse {
    index: Vec<u32>,
    lab: Vec<[u128; 3]>,
}
impl Slots<u128> for Sparse {
    #[inline]
    fn at(&mut self, t: usize) -> Option<&mut [u128; 3]> {
        match self.index[t] {
            NONE => None,
            i => Some(&mut self.lab[i as usize]),
        }
    }
}

/// Min-label propagation over the owned elements' edges, with a histogram of the labels of
/// the edges this rank counts (stage 1).
struct Propagation<'a, L: Label, S: Slots<L>> {
    l: &'a Local,
    slots: S,
    /// Stage 2: only the edges of this stage-1 label may take a label.
    only: Option<(&'a [[u16; 3]], u16)>,
    hist: Option<Vec<u64>>,
    stack: Vec<(u32, u8)>,
    _l: std::marker::PhantomData<L>,
}

impl<'a, L: Label + Into<u128>, S: Slots<L>> Propagation<'a, L, S> {
    /// Gives edge k of owned element t the label `x` if smaller, and closes: the element's
    /// refinement edge, and the same edge in the neighbour (which, if owned, closes too).
    fn set(&mut self, t: u32, k: u8, x: L) {
        self.stack.push((t, k));
        while let Some((t, k)) = self.stack.pop() {
            let (tu, ku) = (t as usize, k as usize);
            if let Some((lab1, b)) = self.only
                && lab1[tu][ku] != b
            {
                continue;
            }
            let Some(lab) = self.slots.at(tu) else {
                continue;
            };
            let old = lab[ku];
            if old <= x {
                continue;
            }
            lab[ku] = x;
            if ku != 1 && lab[1] > x {
                self.stack.push((t, 1));
            }
            let n = self.l.mesh.nbr[tu][ku];
            if n != NONE {
                let j = self.l.mesh.local_index(n, t);
                if self.l.owns_element(n as usize) {
                    self.stack.push((n, j as u8));
                }
            }
            if counts_edge(self.l, tu, ku)
                && let Some(h) = self.hist.as_mut()
            {
                if old != L::INF {
                    h[Into::<u128>::into(old) as usize] -= 1;
                }
                h[Into::<u128>::into(x) as usize] += 1;
            }
        }
    }

    /// Exchanges the labels of shared edges until no rank improves any.
    fn settle<C: Comm>(&mut self, comm: &C, shared: &Shared) -> Result<(), CommError> {
        loop {
            let mut out = Outbox::new(self.l.size);
            for (q, list) in shared.per.iter().enumerate() {
                for &(t, k) in list {
                    let x = self.slots.at(t as usize).map_or(L::INF, |a| a[k as usize]);
                    x.put(out.to(q));
                }
            }
            let (bytes, counts) = out.flatten();
            let got = comm.alltoallv_bytes(&bytes, &counts)?;
            let mut better: Vec<(L, u32, u8)> = Vec::new();
            for (q, list) in shared.per.iter().enumerate() {
                let mut r = Reader::new(got.get(q), "a marking label exchange");
                for &(t, k) in list {
                    let x = L::get(&mut r)?;
                    let mine = self.slots.at(t as usize).map_or(L::INF, |a| a[k as usize]);
                    if x < mine {
                        better.push((x, t, k));
                    }
                }
            }
            let mut changed = [u64::from(!better.is_empty())];
            better.sort_unstable();
            for (x, t, k) in better {
                self.set(t, k, x);
            }
            comm.allreduce_u64(ReduceOp::Max, &mut changed)?;
            if changed[0] == 0 {
                return Ok(());
            }
        }
    }
}

/// Whether this rank counts edge k of owned element t (each edge once over all ranks: by the
/// owner of the element first along the curve; local elements are numbered in curve order).
#[inline]
fn counts_edge(l: &Local, t: usize, k: usize) -> bool {
    let n = l.mesh.nbr[t][k];
    n == NONE || t < n as usize
}

/// The smallest bin b such that the weights of bins ≤ b, summed over all ranks, reach `k`,
/// with the weight below b; `None` if the total is less than `k`.
fn select_bin<C: Comm>(comm: &C, hist: &[u64], k: u64) -> Result<Option<(u16, u64)>, CommError> {
    let mut hist = hist.to_vec();
    comm.allreduce_u64(ReduceOp::Sum, &mut hist)?;
    let mut below = 0u64;
    for (b, &h) in hist.iter().enumerate() {
        if below + h >= k {
            return Ok(Some((b as u16, below)));
        }
        below += h;
    }
    Ok(None)
}

/// The smallest value v such that at least `k` of the values (weighted by `w`, summed over all
/// ranks) are ≤ v, with the weight below v; `None` if the total is less than `k`. A radix
/// search of 8 bits per round over the 128-bit values.
fn select<C: Comm>(
    comm: &C,
    values: &[(u128, u64)],
    k: u64,
) -> Result<Option<(u128, u64)>, CommError> {
    let mut total = [values.iter().map(|v| v.1).sum::<u64>()];
    comm.allreduce_u64(ReduceOp::Sum, &mut total)?;
    if total[0] < k {
        return Ok(None);
    }
    let mut prefix = 0u128;
    let mut below = 0u64;
    let mut cand: Vec<(u128, u64)> = values.to_vec();
    let mut shift = 128u32;
    while shift > 0 {
        shift -= 8;
        let mut hist = vec![0u64; 256];
        for &(v, w) in &cand {
            hist[((v >> shift) & 0xff) as usize] += w;
        }
        comm.allreduce_u64(ReduceOp::Sum, &mut hist)?;
        let mut digit = 0;
        while below + hist[digit] < k {
            below += hist[digit];
            digit += 1;
        }
        prefix |= (digit as u128) << shift;
        let mask = u128::MAX << shift;
        cand.retain(|&(v, _)| v & mask == prefix);
    }
    Ok(Some((prefix, below)))
}

/// The entries of the owned elements in increasing label order (a counting sort): entry
/// `2t` is element t's first bisection, `2t + 1` its second (double marking only); with the
/// count per label (entries of label b are `order[start(b)..start(b + 1)]`).
fn entries(l: &Local, eta2: &[f64], double: bool) -> (Vec<u32>, Vec<u64>) {
    let ne = l.ekey.len();
    let mut count = vec![0u64; NBINS];
    for t in 0..ne {
        if l.owns_element(t) {
            count[NBINS - 1 - bin(eta2[t])] += 1;
            if double {
                count[NBINS - 1 - bin(eta2[t]).saturating_sub(8)] += 1;
            }
        }
    }
    let mut start = vec![0u32; NBINS + 1];
    for b in 0..NBINS {
        start[b + 1] = start[b] + count[b] as u32;
    }
    let mut order = vec![0u32; start[NBINS] as usize];
    for t in 0..ne {
        if l.owns_element(t) {
            let b = NBINS - 1 - bin(eta2[t]);
            order[start[b] as usize] = 2 * t as u32;
            start[b] += 1;
            if double {
                let b = NBINS - 1 - bin(eta2[t]).saturating_sub(8);
                order[start[b] as usize] = 2 * t as u32 + 1;
                start[b] += 1;
            }
        }
    }
    (order, count)
}

/// The edges an entry marks: the refinement edge, or all three.
#[inline]
fn entry_edges(e: u32) -> &'static [u8] {
    if e & 1 == 0 { &[1] } else { &[1, 0, 2] }
}

/// The closed edge bits of every local element (a ghost's: the edges it shares with owned
/// elements) for a refinement that adds `need` > 0 vertices (capped, for Dörfler, at the
/// bulk θ), and the number of vertices it creates over all ranks.
pub(crate) fn mark<C: Comm>(
    comm: &C,
    l: &Local,
    eta2: &[f64],
    strategy: Marking,
    need: u64,
) -> Result<(Vec<u8>, u64), CommError> {
    let ne = l.ekey.len();
    let mut tt = std::time::Instant::now();
    let lap = super::local::lap;
    let shared = Shared::new(l);
    let double = matches!(strategy, Marking::Double);
    let (order, local_count) = entries(l, eta2, double);
    lap(&mut tt, "mark: entries");
    // Dörfler: the bin where the entries' shares reach θ (a stage-1 bound as well).
    let mut share: Option<(u16, u64, f64)> = None;
    if let Marking::Doerfler(theta) = strategy {
        let mut local = crate::exact::ExactSum::new();
        for t in 0..ne {
            if l.owns_element(t) {
                local.add(eta2[t]);
            }
        }
        let total = super::global_sum(comm, &local)?.value();
        let mut shares = vec![0u64; NBINS];
        for t in 0..ne {
            if l.owns_element(t) {
                shares[NBINS - 1 - bin(eta2[t])] += dorfler_weight(eta2[t], total);
            }
        }
        share = select_bin(comm, &shares, dorfler_goal(theta))?.map(|(b, below)| (b, below, total));
    }
    // Checkpoints: where the global entry count crosses i/16 of the total.
    let mut global = local_count.clone();
    comm.allreduce_u64(ReduceOp::Sum, &mut global)?;
    let all: u64 = global.iter().sum();
    let mut checkpoints: Vec<u16> = Vec::new();
    let mut acc = 0u64;
    let mut next = 1u64;
    for (b, &c) in global.iter().enumerate() {
        acc += c;
        while c > 0 && next <= CHECKPOINTS && acc * CHECKPOINTS >= next * all {
            if checkpoints.last() != Some(&(b as u16)) {
                checkpoints.push(b as u16);
            }
            next += 1;
        }
    }
    // Stage 1.
    let mut p1 = Propagation::<u16, Dense<u16>> {
        l,
        slots: Dense(vec![[INF1; 3]; ne]),
        only: None,
        hist: Some(vec![0u64; NBINS]),
        stack: Vec::new(),
        _l: std::marker::PhantomData,
    };
    let mut i = 0;
    let mut label = 0usize;
    for &cp in &checkpoints {
        while label <= cp as usize {
            let end = i + local_count[label] as usize;
            for &e in &order[i..end] {
                for &k in entry_edges(e) {
                    p1.set(e / 2, k, label as u16);
                }
            }
            i = end;
            label += 1;
        }
        let mut c = [p1.hist.as_ref().expect("stage 1").iter().sum::<u64>()];
        comm.allreduce_u64(ReduceOp::Sum, &mut c)?;
        if c[0] >= need || share.is_some_and(|s| s.0 <= cp) {
            break;
        }
    }
    lap(
        &mut tt,
        &format!("mark: stage 1 ({i} of {} entries)", order.len()),
    );
    p1.settle(comm, &shared)?;
    lap(&mut tt, "mark: settle 1");
    let hist = p1.hist.take().expect("stage 1");
    let lab1 = p1.slots.0;
    let by_count = select_bin(comm, &hist, need)?;
    let b = match (by_count.map(|x| x.0), share.map(|x| x.0)) {
        (None, None) => return finish(comm, l, &lab1, None),
        (c, s) => c.unwrap_or(INF1).min(s.unwrap_or(INF1)),
    };
    lap(&mut tt, "mark: select 1");
    // Stage 2, over the edges of bin b.
    let mut index = vec![NONE; ne];
    let mut n2 = 0u32;
    for t in 0..ne {
        if l.owns_element(t) && lab1[t].contains(&b) {
            index[t] = n2;
            n2 += 1;
        }
    }
    let mut p2 = Propagation::<u128, Sparse> {
        l,
        slots: Sparse {
            index,
            lab: vec![[INF2; 3]; n2 as usize],
        },
        only: Some((&lab1, b)),
        hist: None,
        stack: Vec::new(),
        _l: std::marker::PhantomData,
    };
    let mut sources: Vec<(u128, u32, u8)> = Vec::new();
    for t in 0..ne {
        if p2.slots.index[t] == NONE {
            continue;
        }
        let bt = bin(eta2[t]);
        if (NBINS - 1 - bt) as u16 == b {
            sources.push((l.ekey.get(t), t as u32, 0b010));
        }
        if double && (NBINS - 1 - bt.saturating_sub(8)) as u16 == b {
            sources.push((l.ekey.get(t) | 1, t as u32, 0b111));
        }
    }
    sources.sort_unstable();
    for (x, t, bits) in sources {
        for k in [1u8, 0, 2] {
            if bits & (1 << k) != 0 {
                p2.set(t, k, x);
            }
        }
    }
    lap(&mut tt, &format!("mark: stage 2 ({n2} elements)"));
    p2.settle(comm, &shared)?;
    let Sparse {
        index, lab: lab2, ..
    } = p2.slots;
    let mut key = INF2;
    if let Some((bc, below)) = by_count
        && bc == b
    {
        let mut vals: Vec<(u128, u64)> = Vec::new();
        for t in 0..ne {
            if index[t] != NONE {
                for k in 0..3 {
                    if lab1[t][k] == b && counts_edge(l, t, k) {
                        vals.push((lab2[index[t] as usize][k], 1));
                    }
                }
            }
        }
        let (kc, _) = select(comm, &vals, need - below)?.expect("the bin holds the need-th edge");
        key = key.min(kc);
    }
    if let Some((bs, below, total)) = share
        && bs == b
    {
        let goal = dorfler_goal(match strategy {
            Marking::Doerfler(theta) => theta,
            Marking::Double => unreachable!("shares are Dörfler's"),
        });
        let keyed: Vec<(u128, u64)> = (0..ne)
            .filter(|&t| l.owns_element(t) && (NBINS - 1 - bin(eta2[t])) as u16 == b)
            .map(|t| (l.ekey.get(t), dorfler_weight(eta2[t], total)))
            .collect();
        let (ks, _) =
            select(comm, &keyed, goal - below)?.expect("the bin holds the weight that reaches θ");
        key = key.min(ks);
    }
    let lab2_of = |t: usize, k: usize| match index[t] {
        NONE => INF2,
        i => lab2[i as usize][k],
    };
    lap(&mut tt, "mark: select 2");
    let r = finish(comm, l, &lab1, Some((b, key, &lab2_of)));
    lap(&mut tt, "mark: finish");
    r
}

/// A marking threshold: bin, key, and the stage-2 label of an edge (element, edge).
type Threshold<'a> = (u16, u128, &'a dyn Fn(usize, usize) -> u128);

/// Writes the bits for the threshold `(b, key)` (everything labelled if `None`).
fn finish<C: Comm>(
    comm: &C,
    l: &Local,
    lab1: &[[u16; 3]],
    threshold: Option<Threshold<'_>>,
) -> Result<(Vec<u8>, u64), CommError> {
    let ne = l.ekey.len();
    let marked = |t: usize, k: usize| match threshold {
        None => lab1[t][k] != INF1,
        Some((b, key, lab2)) => lab1[t][k] < b || (lab1[t][k] == b && lab2(t, k) <= key),
    };
    let mut bits = vec![0u8; ne];
    let mut created = [0u64];
    for t in 0..ne {
        if !l.owns_element(t) {
            continue;
        }
        for k in 0..3 {
            if marked(t, k) {
                bits[t] |= 1 << k;
                created[0] += u64::from(counts_edge(l, t, k));
            }
        }
    }
    for &(t, k) in &l.shared {
        if bits[t as usize] & (1 << k) != 0 {
            let n = l.mesh.nbr[t as usize][k as usize];
            let j = l.mesh.local_index(n, t);
            bits[n as usize] |= 1 << j;
        }
    }
    comm.allreduce_u64(ReduceOp::Sum, &mut created)?;
    Ok((bits, created[0]))
}
