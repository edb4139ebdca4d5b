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
//!
//! # What a rank pays
//! A rank's marking costs about what the serial marking costs on its share of the mesh
//! (`Marks::mark_edge` per entry taken, after one pass over the elements); the rest is in
//! proportion to the ports and to the threshold's bin:
//! - pass 1 reads and writes one state byte per element (which edges have a label; ghosts
//!   have all three, so nothing spreads into them): what the serial marking's edge bits
//!   are. The labels themselves are only written, and pass 1 logs each edge as it gets its
//!   label, in label order, with whether this rank counts it; the counted edges' histogram
//!   (round 2) is summed as it goes. No later pass visits every labelled edge:
//! - round 2 sends only the bins from the first entry's to [`last_bin`];
//! - round 3's keys of bin B are a range of the log, one key per entry with its count of
//!   edges, already in key order; each rank sends only the prefix whose counts reach what
//!   the bin must supply ([`prefix`]), and the lists are merged, not sorted;
//! - the marks are the state bytes, less the log's suffix after the threshold;
//! - pass 2 and the edges it lowers (a few per port) are the only random lookups of labels.

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

/// Flag of a ghost in the state byte of a local element (see [`Labels::state`]).
const GHOST: u8 = 0x80;
/// A ghost's state: its edge bits set too, so that no label spreads into it.
const GHOST_STATE: u8 = GHOST | 0b111;
/// Shift of the port traversal's visited bits in the state byte ([`Ports::new`]).
const SEEN: u8 = 3;

/// A record of pass 1's log: the edge, `t << 2 | k`, and its label, the entry `i << 2` with
/// the flags [`COUNTED`] and [`LOWERED`].
type Record = (u32, u32);
/// Flag of a log record: this rank counts the edge ([`counts_edge`]).
const COUNTED: u32 = 1;
/// Flag of a log record: pass 2 gave the edge a smaller label (it is in `lowered`).
const LOWERED: u32 = 2;

/// Elements per block of [`Entries::new`]'s pass.
const BLOCK: usize = 8;

/// The owned elements' entries in label order: entry `2t` is element t's first bisection,
/// `2t + 1` its second (double marking only).
struct Entries {
    order: Vec<u32>,
    /// Where each bin's entries start in `order` (and, last, its length).
    starts: Vec<u32>,
}

impl Entries {
    /// One pass over the local elements: the owned elements' entries in bins up to `last`,
    /// sorted by bin with a counting sort of the entries taken in curve order (elements are
    /// numbered in curve order, so each bin stays in key order); and every element's state
    /// byte (0 for an owned element, [`GHOST_STATE`] for a ghost).
    fn new(l: &Local, eta2: &[f64], double: bool, last: u16) -> (Entries, Vec<u8>) {
        let ne = l.ekey.len();
        let eta2 = &eta2[..ne];
        let state: Vec<u8> = (l.eowner.iter())
            .map(|&o| if o == l.rank { 0 } else { GHOST_STATE })
            .collect();
        let (first, second) = taken_from(last);
        // (entry, bin), the entries taken in entry order. Blocks of elements along the curve
        // have like indicators: a block none of whose first bisections is taken is skipped
        // after one comparison per element, with no branch.
        let mut taken: Vec<(u32, u16)> = Vec::new();
        for (c, (xc, sc)) in eta2.chunks(BLOCK).zip(state.chunks(BLOCK)).enumerate() {
            let bits = indicator_bits;
            if !xc.iter().fold(false, |any, &x| any | (bits(x) >= first)) {
                continue;
            }
            for (i, (&x, &s)) in xc.iter().zip(sc).enumerate() {
                let t = (c * BLOCK + i) as u32;
                if s == 0 && bits(x) >= first {
                    taken.push((2 * t, label_bin(x, true)));
                    if double && bits(x) >= second {
                        taken.push((2 * t + 1, label_bin(x, false)));
                    }
                }
            }
        }
        let mut starts = vec![0u32; NBINS + 1];
        for &(_, b) in &taken {
            starts[b as usize + 1] += 1;
        }
        for b in 0..NBINS {
            starts[b + 1] += starts[b];
        }
        let mut at = starts.clone();
        let mut order = vec![0u32; taken.len()];
        for &(e, b) in &taken {
            let a = &mut at[b as usize];
            order[*a as usize] = e;
            *a += 1;
        }
        (Entries { order, starts }, state)
    }

    /// The entries of bin `b`: a range of the order.
    fn of_bin(&self, b: u16) -> std::ops::Range<usize> {
        let b = (b as usize).min(NBINS);
        self.starts[b] as usize..self.starts[(b + 1).min(NBINS)] as usize
    }

    /// The bin of the entry at `i` of the order.
    fn bin(&self, i: usize) -> u16 {
        (self.starts.partition_point(|&s| s as usize <= i) - 1) as u16
    }

    /// How many entries have a label up to `th`: the order is by bin, each bin in key order.
    fn count_up_to(&self, l: &Local, th: Label) -> usize {
        let r = self.of_bin(th.0);
        let key = |e: u32| l.ekey.get(e as usize / 2) | u128::from(e & 1);
        r.start + self.order[r].partition_point(|&e| key(e) <= th.1)
    }

    /// The label of the entry at `i` of the order.
    fn label(&self, l: &Local, i: usize) -> Label {
        (self.bin(i), self.key(l, i))
    }

    /// The key of the entry at `i` of the order (its label without the bin).
    fn key(&self, l: &Local, i: usize) -> u128 {
        let e = self.order[i] as usize;
        l.ekey.get(e / 2) | (e as u128 & 1)
    }
}

/// The bits of an indicator that [`bin`] reads.
#[inline]
fn indicator_bits(eta2: f64) -> u64 {
    eta2.max(0.0).to_bits()
}

/// An element's first bisection has a label bin up to `last` when its [`indicator_bits`]
/// reach the first value returned, its second when they reach the second.
fn taken_from(last: u16) -> (u64, u64) {
    let lo = (NBINS - 1).saturating_sub(last as usize) as u64;
    (lo << 49, if lo == 0 { 0 } else { (lo + 8) << 49 })
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
    // The owned elements by indicator bin, in two tables, for even and odd elements:
    // neighbours along the curve often share a bin, and one table would chain their
    // increments through memory. Both label bins of an element follow from its indicator bin.
    let ne = l.ekey.len();
    let mut two: Box<[[u64; 2]; NBINS]> = vec![[0u64; 2]; NBINS]
        .into_boxed_slice()
        .try_into()
        .expect("NBINS bins");
    // (The mask keeps the index in the table without a bounds check; `bin` is below NBINS.)
    let me = l.rank;
    for (t, (&x, &o)) in eta2[..ne].iter().zip(&l.eowner[..ne]).enumerate() {
        two[bin(x) & (NBINS - 1)][t & 1] += u64::from(o == me);
    }
    let by_bin: Vec<u64> = two.into_iter().map(|[even, odd]| even + odd).collect();
    pairs_by_label_bin(&by_bin, double)
}

/// [`entry_histogram`] from the number of elements in each indicator bin: an element's
/// first bisection has label bin [`label_bin`]`(η², true)`, its second `(η², false)`.
fn pairs_by_label_bin(by_bin: &[u64], double: bool) -> Vec<u64> {
    let mut hist = vec![0u64; NBINS];
    for (b, &n) in by_bin.iter().enumerate() {
        hist[NBINS - 1 - b] += n;
        if double {
            hist[NBINS - 1 - b.saturating_sub(8)] += 2 * n;
        }
    }
    hist
}

/// The label bins that can hold the threshold of a marking that adds `need` vertices, from
/// the global [`entry_histogram`]: from its first bin with an entry to [`last_bin`] (every
/// bin without a bound). The entries of every rank, and so every label, lie in them.
fn bin_span(hist: Option<&[u64]>, need: u64) -> std::ops::RangeInclusive<usize> {
    match (last_bin(hist, need), hist) {
        (last, Some(h)) if last != u16::MAX => {
            let first = h.iter().position(|&x| x > 0).unwrap_or(0);
            first..=last as usize
        }
        _ => 0..=NBINS - 1,
    }
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

/// Whether this rank counts edge k of owned element t, whose neighbour across it is `n`
/// (each edge once over all ranks: by the owner of the element first along the curve; local
/// elements are numbered in curve order).
#[inline]
fn counts_edge(t: u32, n: u32) -> bool {
    n == NONE || t < n
}

/// Every local edge's label, as an index: below `entries.order.len()` a local entry, above it
/// a label that arrived through a port (`foreign`).
struct Labels<'a> {
    l: &'a Local,
    entries: Entries,
    foreign: Vec<Label>,
    /// One byte per local element: bit k (0..3) set when edge k has a label, [`GHOST`] for a
    /// ghost (whose edge bits are all set: no label spreads into it), bits [`SEEN`].. scratch
    /// of the port traversal. Pass 1 reads this, not `lab`: it stays in cache where `lab`
    /// would not.
    state: Vec<u8>,
    /// The label of each edge whose bit is set in `state` (anything elsewhere).
    lab: Vec<[u32; 3]>,
    /// Pass 1's edges in the order they got their labels, so in label order.
    log: Vec<Record>,
    /// The edges pass 2 gave a smaller label (each once).
    lowered: Vec<(u32, u8)>,
    /// The edges this rank counts, by the bin of their label: round 2's histogram.
    hist: Vec<u64>,
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

    /// The bin of label `i` (`u16::MAX` for none), without its key.
    fn bin(&self, i: u32) -> u16 {
        let n = self.entries.order.len();
        match i {
            NO => INF.0,
            i if (i as usize) < n => self.entries.bin(i as usize),
            i => self.foreign[i as usize - n].0,
        }
    }

    /// The label index of edge k of element t ([`NO`] for none).
    fn lab_at(&self, (t, k): (u32, u8)) -> u32 {
        if self.state[t as usize] & (1 << k) != 0 {
            self.lab[t as usize][k as usize]
        } else {
            NO
        }
    }

    /// Pass 1: every local entry, in label order; each edge gets the first label that
    /// reaches it, which is its smallest local one.
    fn pass1(l: &'a Local, entries: Entries, state: Vec<u8>) -> Labels<'a> {
        let ne = state.len();
        assert!(
            ne < 1 << 29,
            "marking: {ne} local elements, more than a log record can name"
        );
        let mut s = Labels {
            l,
            lab: vec![[0; 3]; ne],
            log: Vec::with_capacity(entries.order.len() * 3 / 2),
            lowered: Vec::new(),
            hist: vec![0; NBINS],
            foreign: Vec::new(),
            stack: Vec::new(),
            entries,
            state,
        };
        // The entries visit elements in label order, all over the arrays: the element
        // `AHEAD` entries on is fetched while this one spreads.
        let Labels {
            state,
            lab,
            log,
            stack,
            entries,
            hist,
            ..
        } = &mut s;
        let nbr = &l.mesh.nbr;
        let mut spread = Spread {
            state,
            lab,
            log,
            stack,
            nbr,
        };
        for (b, h) in hist.iter_mut().enumerate() {
            let mut counted = 0;
            for i in entries.of_bin(b as u16) {
                if let Some(&f) = entries.order.get(i + AHEAD) {
                    let t = f as usize / 2;
                    prefetch(&spread.state[t]);
                    prefetch(&spread.lab[t]);
                    prefetch(&nbr[t]);
                }
                let e = entries.order[i];
                for &k in entry_edges(e) {
                    counted += spread.run(e / 2, k, i as u32);
                }
            }
            *h += counted;
        }
        s
    }

    /// Pass 2: the ports' exact labels, where they beat the local ones, smallest first.
    fn pass2(&mut self, ports: &Ports, exact: &[Label]) {
        let mut better: Vec<(Label, usize)> = (0..ports.at.len())
            .filter(|&p| exact[p] < self.label(self.lab_at(ports.at[p])))
            .map(|p| (exact[p], p))
            .collect();
        better.sort_unstable();
        for (x, p) in better {
            let i = (self.entries.order.len() + self.foreign.len()) as u32;
            self.foreign.push(x);
            self.lower(ports.at[p], i);
        }
    }

    /// Pass 2's closure of the foreign label `i` from edge k of t: every edge it reaches
    /// whose label is larger gets `i`, moving in the histogram.
    fn lower(&mut self, (t, k): (u32, u8), i: u32) {
        let mesh = &self.l.mesh;
        let x = self.label(i);
        self.stack.push((t, k));
        while let Some((t, k)) = self.stack.pop() {
            let tu = t as usize;
            let old = self.lab_at((t, k));
            if self.state[tu] & GHOST != 0 || x >= self.label(old) {
                continue;
            }
            self.state[tu] |= 1 << k;
            self.lab[tu][k as usize] = i;
            self.lowered.push((t, k));
            if old != NO && (old as usize) < self.entries.order.len() {
                self.flag_lowered(t << 2 | u32::from(k), old);
            }
            let n = mesh.nbr[tu][k as usize];
            if counts_edge(t, n) {
                if old != NO {
                    let b = self.bin(old) as usize;
                    self.hist[b] -= 1;
                }
                self.hist[x.0 as usize] += 1;
            }
            if k != 1 {
                self.stack.push((t, 1));
            }
            if n != NONE && self.state[n as usize] & GHOST == 0 {
                self.stack.push((n, mesh.local_index(n, t) as u8));
            }
        }
    }

    /// Flags pass 1's record of `edge`, labelled by entry `i`, as lowered.
    fn flag_lowered(&mut self, edge: u32, i: u32) {
        let at = self.log.partition_point(|r| r.1 >> 2 < i);
        if let Some(r) = (self.log[at..].iter_mut())
            .take_while(|r| r.1 >> 2 == i)
            .find(|r| r.0 == edge)
        {
            r.1 |= LOWERED;
        }
    }

    /// The keys of the labels in bin `b` of the edges this rank counts, each with its number
    /// of edges, in key order.
    fn keys_of_bin(&self, b: u16) -> Vec<(u128, u64)> {
        let nbr = &self.l.mesh.nbr;
        let r = self.entries.of_bin(b);
        let lo = self
            .log
            .partition_point(|x| ((x.1 >> 2) as usize) < r.start);
        let hi = self.log.partition_point(|x| ((x.1 >> 2) as usize) < r.end);
        // Pass 1's edges of bin b that kept their label, in label order: one key per entry.
        let mut out: Vec<(u128, u64)> = Vec::new();
        let mut last = NO;
        for &(_, info) in &self.log[lo..hi] {
            if info & (COUNTED | LOWERED) == COUNTED {
                let i = info >> 2;
                match out.last_mut() {
                    Some(x) if i == last => x.1 += 1,
                    _ => out.push((self.entries.key(self.l, i as usize), 1)),
                }
                last = i;
            }
        }
        // Those pass 2 moved into it.
        let mut moved: Vec<(u128, u64)> = (self.lowered.iter())
            .filter(|&&(t, k)| counts_edge(t, nbr[t as usize][k as usize]))
            .map(|&(t, k)| self.label(self.lab[t as usize][k as usize]))
            .filter(|x| x.0 == b)
            .map(|x| (x.1, 1))
            .collect();
        if !moved.is_empty() {
            moved.sort_unstable();
            out.extend(moved);
            // Two sorted runs: the stable sort merges them.
            out.sort_by_key(|x| x.0);
            out.dedup_by(|a, b| {
                let same = a.0 == b.0;
                if same {
                    b.1 += a.1;
                }
                same
            });
        }
        out
    }
}

/// Pass 1's working set: [`Labels`]' arrays, borrowed apart so that the closure keeps them in
/// registers.
struct Spread<'s> {
    state: &'s mut [u8],
    lab: &'s mut [[u32; 3]],
    log: &'s mut Vec<Record>,
    stack: &'s mut Vec<(u32, u8)>,
    nbr: &'s [[u32; 3]],
}

impl Spread<'_> {
    /// Pass 1's closure of entry `i` from edge k of t: every edge it reaches that has no
    /// label yet gets `i` (the element's refinement edge, the same edge in an owned
    /// neighbour). Returns how many of those edges this rank counts. It follows one edge on
    /// and stacks only the other where an edge leads to two.
    #[inline]
    fn run(&mut self, t: u32, k: u8, i: u32) -> u64 {
        let mut counted = 0;
        let (mut t, mut k) = (t, k);
        loop {
            let tu = t as usize;
            let st = self.state[tu];
            if st & (1 << k) == 0 {
                self.state[tu] = st | (1 << k);
                self.lab[tu][k as usize] = i;
                let n = self.nbr[tu][k as usize];
                let c = counts_edge(t, n);
                counted += u64::from(c);
                self.log
                    .push((t << 2 | u32::from(k), i << 2 | u32::from(c)));
                // The same edge in an owned neighbour, and the element's refinement edge.
                let mut across = None;
                if n != NONE {
                    let sn = self.state[n as usize];
                    let j = if sn & GHOST == 0 {
                        local_index(self.nbr, n, t)
                    } else {
                        0
                    };
                    if sn & (1 << j) == 0 {
                        across = Some((n, j));
                    }
                }
                let up = k != 1 && st & 0b010 == 0;
                match (across, up) {
                    (Some(x), true) => {
                        self.stack.push(x);
                        k = 1;
                        continue;
                    }
                    (Some(x), false) => {
                        (t, k) = x;
                        continue;
                    }
                    (None, true) => {
                        k = 1;
                        continue;
                    }
                    (None, false) => {}
                }
            }
            match self.stack.pop() {
                Some(x) => (t, k) = x,
                None => return counted,
            }
        }
    }
}

/// The local index in element `n` of the edge it shares with element `t`
/// ([`crate::mesh::Mesh::local_index`], on the neighbour array).
#[inline]
fn local_index(nbr: &[[u32; 3]], n: u32, t: u32) -> u8 {
    let nb = &nbr[n as usize];
    if nb[0] == t {
        0
    } else if nb[1] == t {
        1
    } else {
        2
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
    /// The ports and their reach sets; `state` tells ghosts (its [`SEEN`] bits are scratch,
    /// clear again on return).
    fn new(l: &Local, state: &mut [u8]) -> Ports {
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
        let (mut stack, mut seen) = (Vec::new(), Vec::new());
        let reach = (0..at.len())
            .map(|p| {
                let mut out = Vec::new();
                stack.push(at[p]);
                while let Some((t, k)) = stack.pop() {
                    let tu = t as usize;
                    if state[tu] & (1 << (SEEN + k)) != 0 {
                        continue;
                    }
                    state[tu] |= 1 << (SEEN + k);
                    seen.push((t, k));
                    let n = l.mesh.nbr[tu][k as usize];
                    if n != NONE && state[n as usize] & GHOST == 0 {
                        stack.push((n, l.mesh.local_index(n, t) as u8));
                    } else if let Some(&q) = port_of.get(&(t, k))
                        && q != p as u32
                    {
                        out.push(q);
                    }
                    if k != 1 {
                        stack.push((t, 1));
                    }
                }
                for (t, k) in seen.drain(..) {
                    state[t as usize] &= !(1 << (SEEN + k));
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
    let span = bin_span(hist, need);
    let mut tt = std::time::Instant::now();
    let (entries, state) = Entries::new(l, eta2, double, last);
    lap(&mut tt, "mark: entries");
    let mut labels = Labels::pass1(l, entries, state);
    lap(&mut tt, "mark: pass 1");
    let ports = Ports::new(l, &mut labels.state);
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
    let threshold = threshold(comm, &labels, eta2, (strategy, need, span), total)?;
    lap(&mut tt, "mark: rounds 2, 3");
    if std::env::var_os("FEM_DEBUG_TIMES").is_some() {
        let cut = threshold.map_or(labels.entries.order.len(), |th| {
            labels.entries.count_up_to(l, th)
        });
        eprintln!(
            "    mark: {} entries taken, {} marked, {} edges labelled, {} lowered, need {need}",
            labels.entries.order.len(),
            cut,
            labels.log.len(),
            labels.lowered.len()
        );
    }
    let bits = finish(labels, threshold);
    lap(&mut tt, "mark: finish");
    Ok(bits)
}

/// Rounds 2 and 3: the largest label marked, (B, K); `None` when every labelled edge is.
/// `aim` is the strategy, the vertices to add, and the bins that can hold the threshold
/// ([`bin_span`]): the histograms go over those bins only.
fn threshold<C: Comm>(
    comm: &C,
    labels: &Labels<'_>,
    eta2: &[f64],
    aim: (Marking, u64, std::ops::RangeInclusive<usize>),
    total: f64,
) -> Result<Option<Label>, CommError> {
    let (strategy, need, span) = aim;
    let l = labels.l;
    let owned = || (0..l.ekey.len()).filter(|&t| labels.state[t] & GHOST == 0);
    // Round 2: the histograms (the counted edges' one kept by the passes).
    let dorfler = match strategy {
        Marking::Doerfler(theta) => Some(dorfler_goal(theta)),
        Marking::Double => None,
    };
    let (first, nb) = (*span.start(), span.end() + 1 - span.start());
    let mut hist = labels.hist[span.clone()].to_vec();
    if dorfler.is_some() {
        hist.resize(2 * nb, 0);
        for t in owned() {
            let b = NBINS - 1 - bin(eta2[t]);
            if span.contains(&b) {
                hist[nb + b - first] += dorfler_weight(eta2[t], total);
            }
        }
    }
    comm.allreduce_u64(ReduceOp::Sum, &mut hist)?;
    let by_count = first_reaching(&hist[..nb], first, need);
    let by_share =
        dorfler.and_then(|goal| first_reaching(&hist[nb..], first, goal).map(|b| (b, goal)));
    let b = match (by_count.map(|x| x.0), by_share.map(|x| x.0.0)) {
        (None, None) => return Ok(None),
        (c, s) => c.unwrap_or(u16::MAX).min(s.unwrap_or(u16::MAX)),
    };
    // Round 3: the keys of bin b, each rank's only up to where its own reach the rank sought.
    let mut w = Writer::default();
    let keys = match by_count {
        Some((bc, _)) if bc == b => labels.keys_of_bin(b),
        _ => Vec::new(),
    };
    let want = by_count.map_or(0, |(_, below)| need - below);
    put_keys(&mut w, prefix(&keys, want));
    let shares: Vec<(u128, u64)> = if by_share.is_some_and(|s| s.0.0 == b) {
        owned()
            .filter(|&t| (NBINS - 1 - bin(eta2[t])) as u16 == b)
            .map(|t| (l.ekey.get(t), dorfler_weight(eta2[t], total)))
            .collect()
    } else {
        Vec::new()
    };
    let want = by_share.map_or(0, |((_, below), goal)| goal - below);
    put_keys(&mut w, prefix(&shares, want));
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

fn put_keys(w: &mut Writer, keys: &[(u128, u64)]) {
    w.usize(keys.len());
    for &(k, x) in keys {
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

/// The first bin where the running sum of `hist` (bins from `first` on) reaches `k`, with
/// the sum before it.
fn first_reaching(hist: &[u64], first: usize, k: u64) -> Option<(u16, u64)> {
    let mut below = 0u64;
    for (b, &h) in hist.iter().enumerate() {
        if below + h >= k {
            return Some(((first + b) as u16, below));
        }
        below += h;
    }
    None
}

/// The shortest prefix of `values` (sorted by value, each value once) whose weights reach `k`
/// (all of them if they never do). Whatever the other ranks' values, the smallest value v
/// such that the weights of the values ≤ v over all ranks reach `k` is in the union of the
/// ranks' prefixes, with all the values below it: a rank's values after its prefix are larger
/// than a value whose weights already reach `k`.
fn prefix(values: &[(u128, u64)], k: u64) -> &[(u128, u64)] {
    let mut acc = 0u64;
    for (i, &(_, w)) in values.iter().enumerate() {
        acc += w;
        if acc >= k {
            return &values[..=i];
        }
    }
    values
}

/// The smallest value v such that the weights of the values ≤ v reach `k`; `values` is the
/// ranks' sorted lists one after the other (which the stable sort merges).
fn select(mut values: Vec<(u128, u64)>, k: u64) -> Option<u128> {
    values.sort_by_key(|x| x.0);
    let mut acc = 0u64;
    for (v, w) in values {
        acc += w;
        if acc >= k {
            return Some(v);
        }
    }
    None
}

/// The bits of every local element for the threshold (every labelled edge if `None`): the
/// state after the passes, less pass 1's edges whose entries come after the threshold (a
/// suffix of its log) unless pass 2 lowered them below it, the ghosts' flags cleared and
/// their shared edges copied in.
fn finish(mut labels: Labels<'_>, threshold: Option<Label>) -> Vec<u8> {
    let l = labels.l;
    // The local entries are in label order: those before `cut` are marked.
    let n = labels.entries.order.len();
    let cut = threshold.map_or(n, |th| labels.entries.count_up_to(l, th));
    let from = labels.log.partition_point(|x| ((x.1 >> 2) as usize) < cut);
    let mut bits = std::mem::take(&mut labels.state);
    for &(e, _) in &labels.log[from..] {
        bits[(e >> 2) as usize] &= !(1 << (e & 3));
    }
    for &(t, k) in &labels.lowered {
        let x = labels.label(labels.lab[t as usize][k as usize]);
        if threshold.is_none_or(|th| x <= th) {
            bits[t as usize] |= 1 << k;
        } else {
            bits[t as usize] &= !(1 << k);
        }
    }
    for b in &mut bits {
        if *b & GHOST != 0 {
            *b = 0;
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
    fn the_pairs_follow_from_the_indicator_bins() {
        let eta2 = [0.0, 1e-310, 1e-300, 1e-12, 0.5, 0.5, 3.0, 7.5];
        for double in [false, true] {
            let mut by_bin = vec![0u64; NBINS];
            let mut want = vec![0u64; NBINS];
            for &x in &eta2 {
                by_bin[bin(x)] += 1;
                want[label_bin(x, true) as usize] += 1;
                if double {
                    want[label_bin(x, false) as usize] += 2;
                }
            }
            assert_eq!(pairs_by_label_bin(&by_bin, double), want);
        }
    }

    #[test]
    fn the_ranks_prefixes_select_what_their_whole_lists_select() {
        // Pseudo-random sorted lists of (value, weight), values from a small range so that
        // ranks share some; every k up to the total.
        let mut seed = 12345u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..50 {
            let lists: Vec<Vec<(u128, u64)>> = (0..1 + next(4))
                .map(|_| {
                    let mut v: Vec<(u128, u64)> = (0..next(12))
                        .map(|_| (u128::from(next(30)), 1 + next(3)))
                        .collect();
                    v.sort_by_key(|x| x.0);
                    v.dedup_by_key(|x| x.0);
                    v
                })
                .collect();
            let total: u64 = lists.iter().flatten().map(|x| x.1).sum();
            for k in 1..=total + 1 {
                let whole: Vec<_> = lists.iter().flatten().copied().collect();
                let cut: Vec<_> = lists.iter().flat_map(|v| prefix(v, k)).copied().collect();
                assert_eq!(select(cut, k), select(whole, k), "{lists:?}, k = {k}");
            }
        }
    }

    #[test]
    fn an_entry_is_taken_when_its_bits_reach_the_bound() {
        let xs = [
            -1.0,
            0.0,
            1e-310,
            1e-300,
            1e-12,
            0.3,
            0.5,
            0.51,
            3.0,
            1e300,
            f64::NAN,
        ];
        for last in [0, 1, 7, 8, 9, 16_000, 16_370, 16_383, 16_384, u16::MAX] {
            let (first, second) = taken_from(last);
            for x in xs.iter().chain(&xs.map(|x| 2.0 * x)) {
                let b = indicator_bits(*x);
                assert_eq!(b >= first, label_bin(*x, true) <= last, "{x} {last}");
                assert_eq!(b >= second, label_bin(*x, false) <= last, "{x} {last}");
            }
        }
        // Bounds near every indicator bin.
        for last in (0..NBINS as u16).step_by(97) {
            let (first, second) = taken_from(last);
            for b in 0..NBINS as u64 {
                let x = f64::from_bits(b << 49);
                assert_eq!(indicator_bits(x) >= first, label_bin(x, true) <= last);
                assert_eq!(indicator_bits(x) >= second, label_bin(x, false) <= last);
            }
        }
    }

    #[test]
    fn a_second_bisection_comes_after_the_first() {
        for x in [0.0, 1e-300, 1e-12, 0.5, 3.0] {
            assert!(label_bin(x, true) <= label_bin(x, false));
        }
        assert!(label_bin(2.0, true) < label_bin(1.0, true));
    }
}
