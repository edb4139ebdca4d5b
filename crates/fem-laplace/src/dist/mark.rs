//! Marking across ranks, giving exactly the serial marks, in three collectives whatever the
//! mesh size.
//!
//! The serial marking ([`crate::mark::mark`]) takes entries in a fixed order — label
//! `(bin, key)`: indicator bin, highest first; ties in curve order (the element's tree key,
//! its first bisection before its second) — and closes each one's marks at once, until the
//! mesh would have the target number of vertices (or, for Dörfler, the entries' shares reach
//! θ). Call f(x) the smallest label of an entry whose closure marks edge x. The closure rules
//! are Horn clauses (an edge of an element marked ⇒ its refinement edge marked; an edge
//! marked ⇒ marked in both elements that share it), so the closure of a prefix of the entries
//! is exactly {x : f(x) ≤ the prefix's last label}; every marked edge creates one vertex, so
//! the serial marks are {x : f(x) ≤ F} with F the need-th smallest f over all edges (need =
//! the missing vertices), capped for Dörfler where the entries' shares reach θ.
//!
//! f is a min-label propagation along the closure rules. Within a rank it runs over the
//! owned elements; it crosses to another rank only at a *port*, an edge an owned element
//! shares with a ghost. So:
//! 1. each rank propagates its own entries (pass 1), giving every port p the smallest local
//!    label S(p) that reaches it, and computes, for every port p, the ports R(p) that a label
//!    arriving at p from the other side reaches through its own elements. One `allgatherv`
//!    sends every rank every rank's ports (key, S, R) — and, for Dörfler, its exact sum of
//!    η²; every rank then solves the small port graph identically (labels processed in
//!    increasing order, each reaching what it reaches first) and knows the exact f of every
//!    port, and propagates the ports' labels that beat its own into its elements (pass 2):
//!    every local edge now has its exact f;
//! 2. one `allreduce` of the histogram of f's bins over the edges each rank counts (each edge
//!    once: by the element first along the curve) — and, for Dörfler, of the entries'
//!    shares — gives the bin B of the need-th edge;
//! 3. one `allgatherv` of the keys in bin B (and Dörfler's entries in their bin) gives the
//!    key K.
//!
//! An edge is marked when f ≤ (B, K). Shared edges get the same f on both sides, so the ranks
//! agree on them without further exchange.
//!
//! Pass 1 need not take every entry. Each element whose first bisection is in a prefix of the
//! entries has its refinement edge marked, each whose second is, all three edges; an edge
//! lies in at most two elements, so at least half of those (element, edge) pairs are distinct
//! marked edges. The histogram of the pairs over the entries' bins ([`entry_histogram`],
//! summed over the ranks in the estimate's reduction of the step before, so it costs no
//! round here) gives the first bin by whose end there are 2·need pairs: F is no later than
//! that bin, and f restricted to the entries up to it is exact wherever f ≤ F. So the ranks
//! take only those entries ([`last_bin`]); the serial marking stops at F itself.

use super::keys::edge_key;
use super::local::{Local, lap};
use crate::exact::{ExactSum, WORDS};
use crate::mark::{AHEAD, Marking, NBINS, bin, dorfler_goal, dorfler_weight, prefetch};
use crate::mesh::NONE;
use comm::wire::{Reader, WireError, Writer};
use comm::{Comm, CommError, ReduceOp};
use std::collections::HashMap;

/// A label: (bin, key). Smaller is taken first.
type Label = (u16, u128);
/// No label: the edge is reached by no entry.
const INF: Label = (u16::MAX, u128::MAX);
/// No label, as an index.
const NO: u32 = u32::MAX;

/// The owned elements' entries in label order: entry `2t` is element t's first bisection,
/// `2t + 1` its second (double marking only).
struct Entries {
    order: Vec<u32>,
    bins: Vec<u16>,
}

impl Entries {
    /// A counting sort by bin of the entries in curve order (elements are numbered in curve
    /// order, so each bin stays in key order); only the entries in bins up to `last`.
    fn new(l: &Local, eta2: &[f64], double: bool, last: u16) -> Entries {
        // Each owned element's live entries with their bins, in entry order.
        let each = |f: &mut dyn FnMut(u32, u16)| {
            for (t, &x) in eta2.iter().enumerate().take(l.ekey.len()) {
                if !l.owns_element(t) {
                    continue;
                }
                let b = label_bin(x, true);
                if b <= last {
                    f(2 * t as u32, b);
                }
                let b = label_bin(x, false);
                if double && b <= last {
                    f(2 * t as u32 + 1, b);
                }
            }
        };
        let mut count = vec![0u32; NBINS + 1];
        each(&mut |_, b| count[b as usize + 1] += 1);
        for b in 0..NBINS {
            count[b + 1] += count[b];
        }
        let n = count[NBINS] as usize;
        let (mut order, mut bins) = (vec![0u32; n], vec![0u16; n]);
        each(&mut |e, b| {
            let at = &mut count[b as usize];
            order[*at as usize] = e;
            bins[*at as usize] = b;
            *at += 1;
        });
        Entries { order, bins }
    }

    /// How many entries have a label up to `th`: the order is by bin, each bin in key order.
    fn count_up_to(&self, l: &Local, th: Label) -> usize {
        let lo = self.bins.partition_point(|&b| b < th.0);
        let hi = self.bins.partition_point(|&b| b <= th.0);
        let key = |e: u32| l.ekey.get(e as usize / 2) | u128::from(e & 1);
        lo + self.order[lo..hi].partition_point(|&e| key(e) <= th.1)
    }

    /// The label of the entry at `i` of the order.
    fn label(&self, l: &Local, i: usize) -> Label {
        let e = self.order[i] as usize;
        (self.bins[i], l.ekey.get(e / 2) | (e as u128 & 1))
    }
}

/// The label bin of an element's first bisection (`first`) or its second (η²/2: 8 bins
/// lower), for its indicator η² (smaller is taken first).
#[inline]
fn label_bin(eta2: f64, first: bool) -> u16 {
    let b = bin(eta2);
    (NBINS - 1 - if first { b } else { b.saturating_sub(8) }) as u16
}

/// This rank's (element, edge) pairs marked by its owned elements' entries, by label bin:
/// one at an element's first bisection, two more at its second (double marking). Summed over
/// the ranks, [`last_bin`] bounds the threshold with it.
pub(crate) fn entry_histogram(l: &Local, eta2: &[f64], double: bool) -> Vec<u64> {
    let mut hist = vec![0u64; NBINS];
    for t in (0..l.ekey.len()).filter(|&t| l.owns_element(t)) {
        hist[label_bin(eta2[t], true) as usize] += 1;
        if double {
            hist[label_bin(eta2[t], false) as usize] += 2;
        }
    }
    hist
}

/// The last label bin pass 1 must take for a marking that adds `need` vertices, from the
/// global [`entry_histogram`]: the first bin by whose end the pairs reach 2·need (every bin if
/// they never do, or if there is no histogram).
pub(crate) fn last_bin(hist: Option<&[u64]>, need: u64) -> u16 {
    let Some(hist) = hist.filter(|h| h.len() == NBINS) else {
        return u16::MAX;
    };
    let mut pairs = 0u64;
    for (b, &h) in hist.iter().enumerate() {
        pairs = pairs.saturating_add(h);
        if pairs >= need.saturating_mul(2) {
            return b as u16;
        }
    }
    u16::MAX
}

/// The edges an entry marks: the refinement edge, or all three.
#[inline]
fn entry_edges(e: u32) -> &'static [u8] {
    if e & 1 == 0 { &[1] } else { &[1, 0, 2] }
}

/// Whether this rank counts edge k of owned element t (each edge once over all ranks: by the
/// owner of the element first along the curve; local elements are numbered in curve order).
#[inline]
fn counts_edge(l: &Local, t: usize, k: usize) -> bool {
    let n = l.mesh.nbr[t][k];
    n == NONE || t < n as usize
}

/// Every local edge's label, as an index: below `entries.order.len()` a local entry, above it
/// a label that arrived through a port (`foreign`).
struct Labels<'a> {
    l: &'a Local,
    entries: Entries,
    foreign: Vec<Label>,
    lab: Vec<[u32; 3]>,
    /// The edges with a label, each once (all of owned elements): the later passes visit
    /// these, not every edge.
    touched: Vec<(u32, u8)>,
    stack: Vec<(u32, u8)>,
}

impl<'a> Labels<'a> {
    fn label(&self, i: u32) -> Label {
        let n = self.entries.order.len();
        match i {
            NO => INF,
            i if (i as usize) < n => self.entries.label(self.l, i as usize),
            i => self.foreign[i as usize - n],
        }
    }

    /// Gives edge k of owned element t the label `x` where it is smaller, and closes: the
    /// element's refinement edge, and the same edge in an owned neighbour. `smaller(old, x)`
    /// compares labels (indices in pass 1, where they follow the label order).
    fn set(&mut self, t: u32, k: u8, x: u32, smaller: impl Fn(&Self, u32, u32) -> bool) {
        self.stack.push((t, k));
        while let Some((t, k)) = self.stack.pop() {
            let (tu, ku) = (t as usize, k as usize);
            let old = self.lab[tu][ku];
            if !smaller(self, x, old) {
                continue;
            }
            self.lab[tu][ku] = x;
            if old == NO {
                self.touched.push((t, k));
            }
            if ku != 1 {
                self.stack.push((t, 1));
            }
            let n = self.l.mesh.nbr[tu][ku];
            if n != NONE && self.l.owns_element(n as usize) {
                let j = self.l.mesh.local_index(n, t);
                self.stack.push((n, j as u8));
            }
        }
    }

    /// Pass 1: every local entry, in label order (each edge is set once).
    fn pass1(l: &'a Local, entries: Entries) -> Labels<'a> {
        let mut s = Labels {
            l,
            lab: vec![[NO; 3]; l.ekey.len()],
            touched: Vec::new(),
            foreign: Vec::new(),
            stack: Vec::new(),
            entries,
        };
        // The entries visit elements in label order, all over the arrays: the element
        // `AHEAD` entries on is fetched while this one propagates.
        for i in 0..s.entries.order.len() {
            if let Some(&f) = s.entries.order.get(i + AHEAD) {
                let t = f as usize / 2;
                prefetch(&s.lab[t]);
                prefetch(&l.mesh.nbr[t]);
                prefetch(&l.eowner[t]);
            }
            let e = s.entries.order[i];
            for &k in entry_edges(e) {
                s.set(e / 2, k, i as u32, |_, x, old| x < old);
            }
        }
        s
    }

    /// Pass 2: the ports' exact labels, where they beat the local ones.
    fn pass2(&mut self, ports: &Ports, exact: &[Label]) {
        let mut better: Vec<(Label, usize)> = (0..ports.at.len())
            .filter(|&p| exact[p] < self.label(self.lab_at(ports.at[p])))
            .map(|p| (exact[p], p))
            .collect();
        better.sort_unstable();
        for (x, p) in better {
            let i = (self.entries.order.len() + self.foreign.len()) as u32;
            self.foreign.push(x);
            let (t, k) = ports.at[p];
            self.set(t, k, i, |s, x, old| s.label(x) < s.label(old));
        }
    }

    /// The bin of label `i` (`u16::MAX` for none), without its key.
    fn bin(&self, i: u32) -> u16 {
        let n = self.entries.order.len();
        match i {
            NO => INF.0,
            i if (i as usize) < n => self.entries.bins[i as usize],
            i => self.foreign[i as usize - n].0,
        }
    }

    fn lab_at(&self, (t, k): (u32, u8)) -> u32 {
        self.lab[t as usize][k as usize]
    }
}

/// This rank's ports: the edges its owned elements share with ghosts, and for each the ports
/// a label arriving there reaches through this rank's elements.
struct Ports {
    at: Vec<(u32, u8)>,
    keys: Vec<u128>,
    reach: Vec<Vec<u32>>,
}

impl Ports {
    fn new(l: &Local) -> Ports {
        let c = &l.mesh.coords;
        let at: Vec<(u32, u8)> = l.shared.clone();
        let keys = at
            .iter()
            .map(|&(t, k)| {
                let tv = l.mesh.tri[t as usize];
                let ku = k as usize;
                edge_key(c[tv[(ku + 1) % 3] as usize], c[tv[(ku + 2) % 3] as usize])
            })
            .collect();
        let mut port_of: HashMap<(u32, u8), u32> = HashMap::with_capacity(at.len());
        for (p, &tk) in at.iter().enumerate() {
            port_of.insert(tk, p as u32);
        }
        let mut stamp: Vec<[u32; 3]> = vec![[NO; 3]; l.ekey.len()];
        let mut stack = Vec::new();
        let reach = (0..at.len())
            .map(|p| {
                let mut out = Vec::new();
                stack.push(at[p]);
                while let Some((t, k)) = stack.pop() {
                    let (tu, ku) = (t as usize, k as usize);
                    if stamp[tu][ku] == p as u32 {
                        continue;
                    }
                    stamp[tu][ku] = p as u32;
                    match port_of.get(&(t, k)) {
                        Some(&q) if q != p as u32 => out.push(q),
                        _ => {}
                    }
                    if ku != 1 {
                        stack.push((t, 1));
                    }
                    let n = l.mesh.nbr[tu][ku];
                    if n != NONE && l.owns_element(n as usize) {
                        stack.push((n, l.mesh.local_index(n, t) as u8));
                    }
                }
                out.sort_unstable();
                out
            })
            .collect();
        Ports { at, keys, reach }
    }
}

/// Round 1 (one `allgatherv`): every rank's ports with their local labels and reach sets,
/// and its exact sum of η² (Dörfler); returns the exact label of each of this rank's ports
/// and the global sum of η².
fn solve_ports<C: Comm>(
    comm: &C,
    ports: &Ports,
    local: &[Label],
    eta2_sum: &ExactSum,
) -> Result<(Vec<Label>, f64), CommError> {
    let mut w = Writer::default();
    for word in eta2_sum.words() {
        w.u64(word);
    }
    w.usize(ports.at.len());
    for (p, &key) in ports.keys.iter().enumerate() {
        w.u128(key);
        w.u16(local[p].0);
        w.u128(local[p].1);
        w.usize(ports.reach[p].len());
        for &q in &ports.reach[p] {
            w.u32(q);
        }
    }
    let all = comm.allgatherv_bytes(w.as_bytes())?;
    let mut words = [0u64; WORDS];
    let mut nodes: Vec<(u128, Label, Vec<u128>)> = Vec::new();
    for r in 0..comm.size() {
        let mut rd = Reader::new(all.get(r), "a rank's marking ports");
        for x in &mut words {
            *x = x.wrapping_add(rd.u64()?);
        }
        read_ports(&mut rd, &mut nodes)?;
    }
    let exact = port_graph(nodes);
    let labels = ports
        .keys
        .iter()
        .map(|k| exact.get(k).copied().unwrap_or(INF))
        .collect();
    Ok((labels, ExactSum::from_words(&words).value()))
}

/// One rank's ports from a round-1 message: (key, local label, keys of the ports reached).
fn read_ports(
    rd: &mut Reader<'_>,
    nodes: &mut Vec<(u128, Label, Vec<u128>)>,
) -> Result<(), WireError> {
    let n = rd.usize()?;
    let first = nodes.len();
    let mut reach_idx: Vec<Vec<u32>> = Vec::new();
    for _ in 0..n {
        let key = rd.u128()?;
        let label = (rd.u16()?, rd.u128()?);
        let m = rd.usize()?;
        // At most the message's remaining bytes can hold (4 each): no allocation from a
        // garbled count.
        let mut r = Vec::with_capacity(m.min(rd.remaining() / 4));
        for _ in 0..m {
            r.push(rd.u32()?);
        }
        nodes.push((key, label, Vec::new()));
        reach_idx.push(r);
    }
    for (i, r) in reach_idx.into_iter().enumerate() {
        let reached: Vec<u128> = r
            .into_iter()
            .filter_map(|q| nodes.get(first + q as usize).map(|x| x.0))
            .collect();
        nodes[first + i].2 = reached;
    }
    Ok(())
}

/// The exact label of every port of the run: each port's smallest local label (over the two
/// ranks that hold it), spread along the ports each one reaches, smallest labels first (a
/// port takes the first label that reaches it). The same on every rank.
fn port_graph(nodes: Vec<(u128, Label, Vec<u128>)>) -> HashMap<u128, Label> {
    let mut best: HashMap<u128, Label> = HashMap::with_capacity(nodes.len());
    let mut next: HashMap<u128, Vec<u128>> = HashMap::with_capacity(nodes.len());
    for (key, label, reached) in nodes {
        let b = best.entry(key).or_insert(INF);
        *b = (*b).min(label);
        next.entry(key).or_default().extend(reached);
    }
    let mut seeds: Vec<(Label, u128)> = best.iter().map(|(&k, &l)| (l, k)).collect();
    seeds.sort_unstable();
    let mut exact: HashMap<u128, Label> = HashMap::with_capacity(best.len());
    let mut stack = Vec::new();
    for (label, key) in seeds {
        if label == INF || exact.contains_key(&key) {
            continue;
        }
        stack.push(key);
        while let Some(k) = stack.pop() {
            if exact.contains_key(&k) {
                continue;
            }
            exact.insert(k, label);
            if let Some(n) = next.get(&k) {
                stack.extend(n.iter().filter(|x| !exact.contains_key(x)));
            }
        }
    }
    exact
}

/// The closed edge bits of every local element (a ghost's: the edges it shares with owned
/// elements) for a refinement that adds `need` > 0 vertices (capped, for Dörfler, at the
/// bulk θ). Three collectives (see the module documentation). `hist` is the global
/// [`entry_histogram`] of these indicators, if the ranks have it (the same on every rank).
pub(crate) fn mark<C: Comm>(
    comm: &C,
    l: &Local,
    eta2: &[f64],
    strategy: Marking,
    need: u64,
    hist: Option<&[u64]>,
) -> Result<Vec<u8>, CommError> {
    let double = matches!(strategy, Marking::Double);
    let last = last_bin(hist, need);
    let mut tt = std::time::Instant::now();
    let entries = Entries::new(l, eta2, double, last);
    lap(&mut tt, "mark: entries");
    let mut labels = Labels::pass1(l, entries);
    lap(&mut tt, "mark: pass 1");
    let ports = Ports::new(l);
    lap(&mut tt, "mark: ports");
    let local: Vec<Label> = ports
        .at
        .iter()
        .map(|&tk| labels.label(labels.lab_at(tk)))
        .collect();
    let mut sum = ExactSum::new();
    if !double {
        for t in (0..l.ekey.len()).filter(|&t| l.owns_element(t)) {
            sum.add(eta2[t]);
        }
    }
    let (exact, total) = solve_ports(comm, &ports, &local, &sum)?;
    lap(&mut tt, "mark: round 1");
    labels.pass2(&ports, &exact);
    lap(&mut tt, "mark: pass 2");
    let threshold = threshold(comm, &labels, eta2, strategy, need, total)?;
    lap(&mut tt, "mark: rounds 2, 3");
    let bits = finish(&labels, threshold);
    if std::env::var_os("FEM_DEBUG_TIMES").is_some() {
        let cut = threshold.map_or(labels.entries.order.len(), |th| {
            labels.entries.count_up_to(l, th)
        });
        eprintln!(
            "    mark: {} entries taken, {} marked, {} edges touched, need {need}",
            labels.entries.order.len(),
            cut,
            labels.touched.len()
        );
    }
    lap(&mut tt, "mark: finish");
    Ok(bits)
}

/// Rounds 2 and 3: the largest label marked, (B, K); `None` when every labelled edge is.
fn threshold<C: Comm>(
    comm: &C,
    labels: &Labels<'_>,
    eta2: &[f64],
    strategy: Marking,
    need: u64,
    total: f64,
) -> Result<Option<Label>, CommError> {
    let l = labels.l;
    let owned = || (0..l.ekey.len()).filter(|&t| l.owns_element(t));
    // The labels of the edges this rank counts.
    let counted: Vec<u32> = (labels.touched.iter())
        .filter(|&&(t, k)| counts_edge(l, t as usize, k as usize))
        .map(|&tk| labels.lab_at(tk))
        .collect();
    // Round 2: the histograms.
    let dorfler = match strategy {
        Marking::Doerfler(theta) => Some(dorfler_goal(theta)),
        Marking::Double => None,
    };
    let mut hist = vec![0u64; NBINS * if dorfler.is_some() { 2 } else { 1 }];
    for &i in &counted {
        hist[labels.bin(i) as usize] += 1;
    }
    if dorfler.is_some() {
        for t in owned() {
            hist[NBINS + NBINS - 1 - bin(eta2[t])] += dorfler_weight(eta2[t], total);
        }
    }
    comm.allreduce_u64(ReduceOp::Sum, &mut hist)?;
    let by_count = first_reaching(&hist[..NBINS], need);
    let by_share = dorfler.and_then(|goal| first_reaching(&hist[NBINS..], goal).map(|b| (b, goal)));
    let b = match (by_count.map(|x| x.0), by_share.map(|x| x.0.0)) {
        (None, None) => return Ok(None),
        (c, s) => c.unwrap_or(u16::MAX).min(s.unwrap_or(u16::MAX)),
    };
    // Round 3: the keys of bin b.
    let mut w = Writer::default();
    let mut keys: Vec<u128> = Vec::new();
    if by_count.is_some_and(|c| c.0 == b) {
        keys.extend(
            (counted.iter().copied())
                .filter(|&i| labels.bin(i) == b)
                .map(|i| labels.label(i).1),
        );
    }
    put_keys(&mut w, keys.iter().map(|&k| (k, 1)));
    let shares: Vec<(u128, u64)> = if by_share.is_some_and(|s| s.0.0 == b) {
        owned()
            .filter(|&t| (NBINS - 1 - bin(eta2[t])) as u16 == b)
            .map(|t| (l.ekey.get(t), dorfler_weight(eta2[t], total)))
            .collect()
    } else {
        Vec::new()
    };
    put_keys(&mut w, shares.iter().copied());
    let all = comm.allgatherv_bytes(w.as_bytes())?;
    let (mut kc, mut ks) = (Vec::new(), Vec::new());
    for r in 0..comm.size() {
        let mut rd = Reader::new(all.get(r), "a rank's marking keys");
        get_keys(&mut rd, &mut kc)?;
        get_keys(&mut rd, &mut ks)?;
    }
    let mut key = u128::MAX;
    if let Some((bc, below)) = by_count
        && bc == b
    {
        key = key.min(select(kc, need - below).expect("the bin holds the need-th edge"));
    }
    if let Some(((bs, below), goal)) = by_share
        && bs == b
    {
        key = key.min(select(ks, goal - below).expect("the bin holds the weight that reaches θ"));
    }
    Ok(Some((b, key)))
}

fn put_keys(w: &mut Writer, keys: impl ExactSizeIterator<Item = (u128, u64)>) {
    w.usize(keys.len());
    for (k, x) in keys {
        w.u128(k);
        w.u64(x);
    }
}

fn get_keys(rd: &mut Reader<'_>, into: &mut Vec<(u128, u64)>) -> Result<(), WireError> {
    let n = rd.usize()?;
    into.reserve(n.min(rd.remaining() / 24));
    for _ in 0..n {
        into.push((rd.u128()?, rd.u64()?));
    }
    Ok(())
}

/// The first bin where the running sum of `hist` reaches `k`, with the sum before it.
fn first_reaching(hist: &[u64], k: u64) -> Option<(u16, u64)> {
    let mut below = 0u64;
    for (b, &h) in hist.iter().enumerate() {
        if below + h >= k {
            return Some((b as u16, below));
        }
        below += h;
    }
    None
}

/// The smallest value v such that the weights of the values ≤ v reach `k`.
fn select(mut values: Vec<(u128, u64)>, k: u64) -> Option<u128> {
    values.sort_unstable();
    let mut acc = 0u64;
    for (v, w) in values {
        acc += w;
        if acc >= k {
            return Some(v);
        }
    }
    None
}

/// The bits of every local element for the threshold (every labelled edge if `None`).
fn finish(labels: &Labels<'_>, threshold: Option<Label>) -> Vec<u8> {
    let l = labels.l;
    // The local entries are in label order: those before `cut` are marked.
    let n = labels.entries.order.len();
    let cut = threshold.map_or(n, |th| labels.entries.count_up_to(l, th));
    let marked = |i: u32| match i {
        NO => false,
        i if (i as usize) < n => (i as usize) < cut,
        i => threshold.is_none_or(|th| labels.label(i) <= th),
    };
    let ne = l.ekey.len();
    let mut bits = vec![0u8; ne];
    for &(t, k) in &labels.touched {
        if marked(labels.lab_at((t, k))) {
            bits[t as usize] |= 1 << k;
        }
    }
    for &(t, k) in &l.shared {
        if bits[t as usize] & (1 << k) != 0 {
            let n = l.mesh.nbr[t as usize][k as usize];
            let j = l.mesh.local_index(n, t);
            bits[n as usize] |= 1 << j;
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_bin_holds_twice_the_need_in_pairs() {
        let mut hist = vec![0u64; NBINS];
        hist[3] = 4;
        hist[7] = 6;
        // 2 vertices need 4 pairs: bin 3 has them; 3 need 6: bin 7 (10 pairs by its end).
        assert_eq!(last_bin(Some(&hist), 2), 3);
        assert_eq!(last_bin(Some(&hist), 3), 7);
        assert_eq!(last_bin(Some(&hist), 5), 7);
        // More than the pairs can give, or no histogram: every bin.
        assert_eq!(last_bin(Some(&hist), 6), u16::MAX);
        assert_eq!(last_bin(None, 1), u16::MAX);
        assert_eq!(last_bin(Some(&hist[..10]), 1), u16::MAX);
    }

    #[test]
    fn a_second_bisection_comes_after_the_first() {
        for x in [0.0, 1e-300, 1e-12, 0.5, 3.0] {
            assert!(label_bin(x, true) <= label_bin(x, false));
        }
        assert!(label_bin(2.0, true) < label_bin(1.0, true));
    }
}
