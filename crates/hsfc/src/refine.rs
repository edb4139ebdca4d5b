//! Locating weight targets on the curve: adaptive binning refined only where a target falls.
//!
//! The objects, sorted by fine key (see [`crate::curve::fine_key_of_cell`]), have prefix
//! weights `P`. For a target `q` (in fixed-point weight units, `q < W`) we look for the *atom*
//! `a` (the set of objects sharing one fine key) that straddles it:
//! `P(before a) <= q < P(before a) + w_a`. We never sort: a histogram of the weight over the
//! top `B0` key bits (made in the key pass) puts each target in one bin; the points of those
//! bins only are gathered, and each round histograms them over the next few key bits, per
//! active bin, keeping only the sub-bins that hold a target. A sub-bin holding a single object
//! (count 1) is resolved at once: its key is the sum of the keys in the bin. A target that
//! reaches a single cell of the 64-bit keys holding several points goes on *inside* the cell:
//! its candidates swap their cell key for their sub-key (the curve continued inside the cell,
//! computed only for them) and the rounds go on over the sub-key bits. All histograms are
//! integer sums, reduced with `sum_u64`, so every rank and every thread count takes the same
//! decisions.

use crate::exec::Exec;
use crate::scratch::Cand;
use part_api::Reduce;
use std::hint::select_unpredictable;

/// Key bits in the histogram made by the key pass.
pub(crate) const B0: u32 = 14;

/// Fixed-point weights: `q_i = round(w_i·2^S)` (to nearest, ties to even), or 1 per object
/// for unit weights. `2^S = a·b` (two factors, so that extreme weights do not overflow the
/// scale), and `S` keeps every `q_i < 2^51`, so the rounding is done exactly and cheaply by
/// adding 2^52 and reading the low mantissa bits.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Quant<'a> {
    Unit,
    Scaled(ScaledWeights<'a>),
}

const TWO52: f64 = 4_503_599_627_370_496.0;

impl Quant<'_> {
    /// Whether a point's weight is 1, so that a histogram's weights are also its counts: the
    /// passes then count no point themselves (see `Rounds::global`).
    fn counted_by_weight(&self) -> bool {
        matches!(self, Quant::Unit)
    }

    #[inline(always)]
    pub(crate) fn q(&self, i: usize) -> u64 {
        match *self {
            Quant::Unit => 1,
            Quant::Scaled(s) => s.q(i),
        }
    }
}

/// A point's fixed-point weight ([`Quant`]) with its kind fixed at compile time, so that the
/// per-point passes over every local point are compiled once per kind, with nothing to test
/// or reload for it in their loops.
trait Weigh: Copy {
    /// Unit weights: a histogram's weights are its counts (see [`Quant::counted_by_weight`]).
    const UNIT: bool;
    fn q(self, i: usize) -> u64;
}

#[derive(Clone, Copy)]
struct UnitWeights;

impl Weigh for UnitWeights {
    const UNIT: bool = true;
    #[inline(always)]
    fn q(self, _: usize) -> u64 {
        1
    }
}

/// [`Quant::Scaled`]: the weights `w` and the scale's two factors (`2^S = a·b`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScaledWeights<'a> {
    pub w: &'a [f64],
    pub a: f64,
    pub b: f64,
}

impl Weigh for ScaledWeights<'_> {
    const UNIT: bool = false;
    #[inline(always)]
    fn q(self, i: usize) -> u64 {
        (self.w[i] * self.a * self.b + TWO52).to_bits() - TWO52.to_bits()
    }
}

/// What a target found: the weight before the straddling atom, its weight, and the cuts
/// just before and just after it.
///
/// The cuts are canonical (they depend on the points only, not on how the atom was found):
/// a cut between two atoms of different cells is at a cell boundary (the start of the later
/// atom's cell, `key << 64`, or the end of the earlier one's, `(key + 1) << 64`); only a cut
/// between two atoms of one cell has a sub-key (the later atom's fine key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub before: u64,
    pub weight: u64,
    pub cut_before: u128,
    pub cut_after: u128,
}

impl Found {
    /// The atom at sub-key `sub` of cell `cell`; `first`/`last`: no point of the cell comes
    /// before/after it.
    fn new(before: u64, weight: u64, cell: u64, sub: u64, first: bool, last: bool) -> Found {
        let start = u128::from(cell) << 64;
        let fine = start | u128::from(sub);
        Found {
            before,
            weight,
            cut_before: if first { start } else { fine },
            cut_after: if last {
                start.saturating_add(1 << 64)
            } else {
                fine + 1
            },
        }
    }

    /// Whether the cut for target `q` (which this atom straddles) goes before the atom: when
    /// that is at least as near `q` as after it.
    pub(crate) fn goes_before(&self, q: u64) -> bool {
        q - self.before <= self.before + self.weight - q
    }

    /// The cut for target `q`: [`Found::cut_before`] or [`Found::cut_after`], the nearer.
    pub(crate) fn nearest_cut(&self, q: u64) -> u128 {
        if self.goes_before(q) {
            self.cut_before
        } else {
            self.cut_after
        }
    }
}

/// Number of points this rank assigned to each part.
#[derive(Debug, Clone)]
pub(crate) struct Counts {
    pub counts: Vec<u64>,
}

impl Counts {
    pub(crate) fn new(k: usize) -> Counts {
        Counts { counts: vec![0; k] }
    }
    pub(crate) fn merge(&mut self, o: &Counts) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
    }
}

/// For a fresh partition every query is a cut target, so the part of every point is known as
/// soon as its bin holds no target: [`locate`] then writes the parts as it goes (no later pass
/// and no search over the cuts).
#[derive(Debug)]
pub(crate) struct Assign<'a> {
    /// How many cuts (on the parts of positive size) have each query as target.
    pub mult: &'a [u32],
    /// Part id of the c-th part of positive size.
    pub positive: &'a [u32],
    /// Output, one per local point; on entry it holds each point's top [`PARK_BITS`] key
    /// bits, written there by the key pass.
    pub parts: &'a mut [u32],
    /// Number of parts K.
    pub k: usize,
}

/// Marks a parts entry that holds a first-round cell instead of a part (pass A to pass B).
const CELL_FLAG: u32 = 1 << 31;

/// The key bits the key pass leaves in a fresh partition's parts entries (below
/// [`CELL_FLAG`]): enough for the first round's sub-bins, so that pass A reads no key.
pub(crate) const PARK_BITS: u32 = 31;
const _: () = assert!(B0 + 16 <= PARK_BITS && PARK_BITS < 32);

/// The level-0 bin of a parts entry that the key pass wrote.
#[inline(always)]
fn bin_of_entry(e: u32) -> usize {
    (e >> (PARK_BITS - B0)) as usize & ((1 << B0) - 1)
}

/// Spare counters after the K parts' in a pass's counts: the points that get no part yet
/// count into one of them (in turn), which no part reads; several, so that the adds do not
/// form one chain of dependent adds through memory.
const SPARE: usize = 8;

/// A fresh partition writes the parts while locating ([`Assign`]) when it has fewer parts
/// than this, so that a part fits beside the flags above in a `u32`.
pub(crate) const ASSIGN_MAX: usize = 1 << 30;

/// Marks a sub-bin's fate (one word: a slot of the next round, or this flag and a part) as
/// done. Parts are below 2^31 where fates are used (see `CELL_FLAG`).
const DONE: u32 = 1 << 31;

/// Where an active cell's sub-bins start in a round's histogram, and how to find a key's;
/// where its key bit counts start (`usize::MAX` when it does not count them) and how many.
#[derive(Clone, Copy)]
struct SlotGeom {
    off: usize,
    shift: u32,
    mask: u64,
    ones: usize,
    width: u32,
}

#[inline(always)]
fn geom_cell(g: &[SlotGeom], slot: u32, key: u64) -> usize {
    let s = g[slot as usize];
    s.off + ((key >> s.shift) & s.mask) as usize
}

struct Active {
    /// The cell's key bits (its first `depth` bits); inside a cell (`inner`), of the sub-key.
    prefix: u64,
    /// Global weight before the cell.
    base: u64,
    /// Key bits fixed so far (of the sub-key when `inner`).
    depth: u32,
    /// Global number of objects in the cell (estimated from the weight at level 0).
    count: u64,
    /// The last round did not split the cell (all its objects fell in one sub-bin, e.g.
    /// duplicate points): the next round counts its key bits (see [`BIT_COUNT_MAX`]).
    stalled: bool,
    /// Set when refining inside one cell of the 64-bit keys: the candidates' `key` is then
    /// their sub-key.
    inner: Option<Inner>,
}

/// A cell of the 64-bit keys being refined by sub-key.
#[derive(Clone, Copy)]
struct Inner {
    /// The cell's key.
    key: u64,
    /// Global number of points in the cell.
    count: u64,
    /// Global number of points of the cell before the active sub-cell.
    before: u64,
}

// The first round may histogram straight from the keys, without counts; it must not reach a
// single cell, where counts decide whether to go on inside it (sub-bins have at most 2^16).
const _: () = assert!(B0 + 16 < crate::curve::key_bits(3));

/// Sub-bin bits for a cell of `count` objects: about 8 objects per sub-bin, between 2^8 and
/// 2^16 sub-bins, so that dense cells are split finely and need fewer rounds.
fn sub_bits(count: u64) -> u32 {
    let len = 64 - count.leading_zeros();
    len.saturating_sub(3).clamp(8, 16)
}

/// Active cells of at most this many objects (and those inside a cell, or that the last round
/// did not split) also count, for each key bit, how many of their objects have it set: when a
/// round leaves all of a cell's objects in one sub-bin, the counts give the key prefix they all
/// share, and the cell jumps to it (duplicate points: straight to their cell, then, inside it,
/// to their atom) instead of descending 8 bits a round. One word per key bit and cell.
const BIT_COUNT_MAX: u64 = 16;

/// Where a gather pass sends a local point.
enum Route {
    /// Nowhere: it already has its part.
    Keep,
    /// Its part is now known.
    Done(u32),
    /// It stays a candidate, of this active cell.
    Cand(u32),
}

/// One gather pass over the local points (the first gather and pass B share it): each point's
/// route comes, with `assign`, from its parts entry (`by_entry`; a finished point's part is
/// written there and counted), else from its key (`by_key`: its slot, if it stays a
/// candidate). The candidates come in chunks of increasing point order, each with room for
/// `reserve(chunk length)`, and with `assign` each chunk's counts per part.
fn gather(
    exec: &Exec,
    (keys, quant): (&[u64], Quant<'_>),
    assign: Option<&mut Assign<'_>>,
    reserve: impl Fn(usize) -> usize + Sync,
    by_entry: impl Fn(u32) -> Route + Sync,
    by_key: impl Fn(u64) -> Option<u32> + Sync,
) -> Vec<(Vec<Cand>, Option<Counts>)> {
    let cand = |i: usize, slot: u32| Cand {
        key: keys[i],
        w: quant.q(i),
        idx: i as u32,
        slot,
    };
    match assign {
        Some(a) => {
            let k = a.k;
            exec.map_chunks_mut(a.parts, |r, out| {
                let mut cs = exec.scratch.cands(reserve(r.len()));
                let mut t = Counts::new(k);
                for (j, p) in out.iter_mut().enumerate() {
                    match by_entry(*p) {
                        Route::Keep => {}
                        Route::Done(part) => {
                            *p = part;
                            if !quant.counted_by_weight() {
                                t.counts[part as usize] += 1;
                            }
                        }
                        Route::Cand(slot) => cs.push(cand(r.start + j, slot)),
                    }
                }
                (cs, Some(t))
            })
        }
        None => exec.map_ranges(keys.len(), |r| {
            let mut cs = exec.scratch.cands(reserve(r.len()));
            for i in r {
                if let Some(slot) = by_key(keys[i]) {
                    cs.push(cand(i, slot));
                }
            }
            (cs, None)
        }),
    }
}

/// Pass B of a fresh partition: the points that pass A parked in their parts entries (their
/// first-round sub-bin, flagged) get their part, or become candidates of the next round,
/// from their sub-bin's `fate`.
fn pass_b(
    exec: &Exec,
    (keys, quant): (&[u64], Quant<'_>),
    a: &mut Assign<'_>,
    fate: &[u32],
) -> Vec<(Vec<Cand>, Option<Counts>)> {
    let k = a.k;
    exec.map_chunks_mut(a.parts, |r, out| {
        let mut cs = exec.scratch.cands(r.len());
        let mut counts = vec![0u64; k + SPARE];
        let chunk = (r.start, out, &mut cs, &mut counts[..]);
        match quant {
            Quant::Unit => pass_b_chunk(UnitWeights, keys, fate, chunk),
            Quant::Scaled(s) => pass_b_chunk(s, keys, fate, chunk),
        }
        counts.truncate(k);
        (cs, Some(Counts { counts }))
    })
}

/// Pass B over the parts entries `out` of the points from `start`: the candidates go to `cs`
/// (empty, with room for all), the finished points are counted in `counts` (the K parts'
/// counters, then the [`SPARE`] ones). Branch-free, as a point's fate is unpredictable: every
/// point writes its entry (unchanged when pass A assigned it; a candidate's is scratch until
/// its part is known) and a count (the others into a spare counter), and is written as a
/// candidate, which only the candidates keep.
#[inline(always)]
fn pass_b_chunk<W: Weigh>(
    weights: W,
    keys: &[u64],
    fate: &[u32],
    (start, out, cs, counts): (usize, &mut [u32], &mut Vec<Cand>, &mut [u64]),
) {
    let k = counts.len() - SPARE;
    let mut n = 0;
    let spare = &mut cs.spare_capacity_mut()[..out.len()];
    let last = fate.len().saturating_sub(1);
    let keys = &keys[start..start + out.len()];
    for (j, p) in out.iter_mut().enumerate() {
        let e = *p;
        let parked = e & CELL_FLAG != 0;
        // Read for every entry (an assigned one reads some fate, unused), then chosen.
        let f = fate[((e & !CELL_FLAG) as usize).min(last)];
        let v = select_unpredictable(parked, f, DONE | e);
        let cand = v & DONE == 0;
        *p = v & !DONE;
        let finished = parked & !cand;
        if !W::UNIT {
            let spare = k + (j & (SPARE - 1));
            counts[select_unpredictable(finished, (v & !DONE) as usize, spare)] += 1;
        }
        let i = start + j;
        spare[n].write(Cand {
            key: keys[j],
            w: weights.q(i),
            idx: i as u32,
            slot: v,
        });
        n += usize::from(cand);
    }
    // SAFETY: every element below `n` was written in the loop (at each `n` before it was
    // advanced), and `n <= out.len() <= capacity`.
    unsafe { cs.set_len(n) };
}

/// What pass A of a fresh partition reads per point besides its entry: each level-0 bin's
/// slot and part, the round's slot geometry with the inactive points' last slot (`sentinel`)
/// after it, and how far the parked key bits are shifted down from the key (`park`).
#[derive(Clone, Copy)]
struct ParkLevel0<'a> {
    slot_of_bin: &'a [u32; 1 << B0],
    part_of_bin: &'a [u32; 1 << B0],
    geom: &'a [SlotGeom],
    sentinel: u32,
    park: u32,
}

/// Pass A over the parts entries `out` of the points from `start` (see `Rounds::pass_a`):
/// the weight histogram `h` of the active points (the round's cells, then the [`SPARE`]
/// ones the inactive points add into), and `counts` of the points that get their part (the K
/// parts' counters, then the spare ones). Branch-free, as whether a point is active is
/// unpredictable.
#[inline(always)]
fn pass_a_chunk<W: Weigh>(
    weights: W,
    level0: &ParkLevel0<'_>,
    (start, out, h, counts): (usize, &mut [u32], &mut [u64], &mut [u64]),
) {
    let ParkLevel0 {
        slot_of_bin,
        part_of_bin,
        geom,
        sentinel,
        park,
    } = *level0;
    let k = counts.len() - SPARE;
    for (j, p) in out.iter_mut().enumerate() {
        let e = *p;
        let b = bin_of_entry(e);
        let s = slot_of_bin[b].min(sentinel);
        let cell = geom_cell(geom, s, u64::from(e) << park);
        h[cell] += weights.q(start + j);
        let active = s != sentinel;
        // Inactive: its weight is counted from hist0 (see `global`).
        let part = part_of_bin[b];
        // Parked: the cell, flagged, until pass B knows its part.
        *p = select_unpredictable(active, CELL_FLAG | cell as u32, part);
        if !W::UNIT {
            let spare = k + (j & (SPARE - 1));
            counts[select_unpredictable(active, spare, part as usize)] += 1;
        }
    }
}

/// The active cells of level 0 (the top [`B0`] key bits, the key pass's histogram): the bins
/// where queries fall, each query's slot, each bin's slot (`u32::MAX`: inactive) and, for a
/// fresh partition, the part of every inactive bin.
struct Level0 {
    active: Vec<Active>,
    slot_of_query: Vec<u32>,
    /// Fixed-size, so that masked indexing needs no bounds check in the passes.
    slot_of_bin: Box<[u32; 1 << B0]>,
    part_of_bin: Box<[u32; 1 << B0]>,
}

/// Level 0 from the global histogram `hist0`; `assign`: the part after each number of cuts,
/// and how many cuts lie below each query.
fn level0(
    hist0: &[u64],
    n_total: u64,
    queries: &[u64],
    assign: Option<(&[u32], &[u32])>,
) -> Level0 {
    let mut active: Vec<Active> = Vec::new();
    let mut slot_of_query: Vec<u32> = vec![0; queries.len()];
    let nb = 1usize << B0;
    let mut slot_of_bin: Box<[u32; 1 << B0]> = vec![u32::MAX; nb]
        .into_boxed_slice()
        .try_into()
        .expect("size 2^B0");
    let mut part_of_bin: Box<[u32; 1 << B0]> = vec![0u32; nb]
        .into_boxed_slice()
        .try_into()
        .expect("size 2^B0");
    let total = hist0.iter().sum::<u64>().max(1);
    let (mut b, mut cum) = (0usize, 0u64);
    for (qi, &q) in queries.iter().enumerate() {
        while cum + hist0[b] <= q {
            cum += hist0[b];
            b += 1;
        }
        if active.last().is_none_or(|a| a.prefix != b as u64) {
            let count = (n_total as f64 * (hist0[b] as f64 / total as f64)).ceil() as u64;
            active.push(Active {
                prefix: b as u64,
                base: cum,
                depth: B0,
                count,
                stalled: false,
                inner: None,
            });
        }
        slot_of_query[qi] = (active.len() - 1) as u32;
    }
    for (s, a) in active.iter().enumerate() {
        slot_of_bin[a.prefix as usize] = s as u32;
    }
    if let Some((positive, cuts_below)) = assign {
        // An inactive bin lies after exactly the cuts whose targets fall in earlier bins.
        let mut qi = 0;
        for (b, p) in part_of_bin.iter_mut().enumerate() {
            while qi < queries.len() && (active[slot_of_query[qi] as usize].prefix as usize) < b {
                qi += 1;
            }
            *p = positive[cuts_below[qi] as usize];
        }
    }
    Level0 {
        active,
        slot_of_query,
        slot_of_bin,
        part_of_bin,
    }
}

/// Where a round's queries went ([`Geometry::place`]).
struct Placement {
    /// The next round's active cells.
    next_active: Vec<Active>,
    /// Per next slot: its candidates enter their cell (they swap their key for the sub-key).
    enters: Vec<bool>,
    /// Each sub-bin's slot in the next round (`u32::MAX`: none).
    remap: Vec<u32>,
    /// The queries still pending.
    still: Vec<usize>,
    /// Where each pending query went: (sub-bin, whether it was resolved).
    placed: Vec<(usize, bool)>,
}

/// A query's sub-bin in a round's reduced histogram ([`Geometry::walk`]): its index in its
/// cell's row, the weight and (after the first round) the count before it in the cell, and
/// its weight, count (estimated in the first round) and key sum.
#[derive(Clone, Copy)]
struct SubBin {
    sb: usize,
    cum: u64,
    cnt: u64,
    w: u64,
    count: u64,
    keysum: u64,
}

impl SubBin {
    /// Where a walk through active cell `a` starts.
    fn start(a: &Active) -> SubBin {
        SubBin {
            sb: 0,
            cum: a.base,
            cnt: 0,
            w: 0,
            count: 0,
            keysum: 0,
        }
    }
}

/// Where a sub-bin lies ([`Geometry::sub_bin`]): its cell in the round's histogram, the key
/// prefix all its objects share and its length, and whether that is a whole key (`full`).
struct Reach {
    cell: usize,
    depth: u32,
    prefix: u64,
    full: bool,
}

impl Reach {
    /// What the query that reached sub-bin `bin` of active cell `a` found, if the sub-bin
    /// holds a single atom: a single point (its key is the key sum), or inside a cell a single
    /// fine key (at full depth).
    fn atom(&self, a: &Active, bin: &SubBin) -> Option<Found> {
        let key = match a.inner {
            None => (bin.count == 1).then_some(bin.keysum),
            Some(_) if bin.count == 1 => Some(bin.keysum),
            Some(_) if self.full => Some(self.prefix),
            Some(_) => None,
        }?;
        Some(match a.inner {
            // Alone in a sub-bin of cell keys, so alone in its cell.
            None => Found::new(bin.cum, bin.w, key, 0, true, true),
            Some(c) => {
                let first = c.before + bin.cnt == 0;
                let last = c.before + bin.cnt + bin.count == c.count;
                Found::new(bin.cum, bin.w, c.key, key, first, last)
            }
        })
    }
}

/// The layout of one refinement round's histogram: sub-bin bits per active cell (within a
/// global budget), where each cell's sub-bins start (`off`, `cells` in all), and after them,
/// for the cells that count their key bits (see [`BIT_COUNT_MAX`]), where their bit counts
/// start (`bit_off`, `usize::MAX` for the others); `hist_len` words in all (3 per sub-bin:
/// weight, count, key sum). `geom` is the same per slot, for the passes.
struct Geometry {
    bits: Vec<u32>,
    off: Vec<usize>,
    cells: usize,
    bit_off: Vec<usize>,
    hist_len: usize,
    geom: Vec<SlotGeom>,
}

impl Geometry {
    /// The round's layout for the `active` cells; `from_keys`: the first round, which
    /// histograms weights only; `widths`: the bits of cell keys and of sub-keys.
    fn new(active: &[Active], from_keys: bool, widths: (u32, u32)) -> Geometry {
        let width = |a: &Active| {
            if a.inner.is_some() {
                widths.1
            } else {
                widths.0
            }
        };
        let nact = active.len();
        // Sub-bins per active cell, within a global budget.
        let mut bits: Vec<u32> = active
            .iter()
            .map(|a| sub_bits(a.count).min(width(a) - a.depth))
            .collect();
        while bits.iter().map(|&b| 1usize << b).sum::<usize>() > (1 << 17) {
            let i = (0..nact)
                .max_by_key(|&i| (bits[i], std::cmp::Reverse(i)))
                .expect("nact > 0");
            if bits[i] == 1 {
                break;
            }
            bits[i] -= 1;
        }
        let mut off = Vec::with_capacity(nact + 1);
        off.push(0usize);
        for &b in &bits {
            off.push(off.last().expect("pushed") + (1usize << b));
        }
        let cells = off[nact];
        // After the sub-bins, per active cell that counts its key bits (see BIT_COUNT_MAX):
        // how many of its objects have each bit set.
        let mut bit_off = vec![usize::MAX; nact];
        let mut hist_len = cells * 3;
        if !from_keys {
            for (s, a) in active.iter().enumerate() {
                if a.inner.is_some() || a.stalled || a.count <= BIT_COUNT_MAX {
                    bit_off[s] = hist_len;
                    hist_len += width(a) as usize;
                }
            }
        }
        let geom: Vec<SlotGeom> = (0..nact)
            .map(|s| SlotGeom {
                off: off[s],
                shift: width(&active[s]) - active[s].depth - bits[s],
                mask: (1u64 << bits[s]) - 1,
                ones: bit_off[s],
                width: width(&active[s]),
            })
            .collect();
        Geometry {
            bits,
            off,
            cells,
            bit_off,
            hist_len,
            geom,
        }
    }

    /// The exact number of objects of each cell that counted its key bits (else 0), from the
    /// reduced histogram.
    fn cell_totals(&self, hist: &[u64]) -> Vec<u64> {
        (0..self.bits.len())
            .map(|s| {
                if self.bit_off[s] == usize::MAX {
                    return 0;
                }
                (self.off[s]..self.off[s + 1])
                    .map(|c| hist[c * 3 + 1])
                    .sum()
            })
            .collect()
    }

    /// Walks each pending query through its cell's sub-bins in the reduced histogram `hist`
    /// (`stride` words per sub-bin: weight only in the first round, else weight, count and key
    /// sum): a query whose sub-bin holds a single atom is resolved (`found`); the others move
    /// to the next round's active cells (`slot_of_query`). `estimate`: the global point count
    /// and weight, to estimate counts the first round does not sum.
    fn place(
        &self,
        (hist, stride): (&[u64], usize),
        active: &[Active],
        (queries, pending): (&[u64], &[usize]),
        (slot_of_query, found): (&mut [u32], &mut [Option<Found>]),
        estimate: (u64, u64),
    ) -> Placement {
        let cell_total = self.cell_totals(hist);
        let mut next_active: Vec<Active> = Vec::new();
        // Next slots whose candidates enter their cell: they swap their key for the sub-key.
        let mut enters: Vec<bool> = Vec::new();
        let mut remap = vec![u32::MAX; self.cells];
        let mut still = Vec::new();
        // Where each pending query went: (cell, whether it was resolved).
        let mut placed: Vec<(usize, bool)> = Vec::with_capacity(pending.len());
        // Walk state: the slot, and where the last query's walk stopped in it.
        let mut walk: Option<(u32, SubBin)> = None;
        for &qi in pending {
            let s = slot_of_query[qi];
            let a = &active[s as usize];
            let from = match walk {
                Some((ws, bin)) if ws == s => bin,
                _ => SubBin::start(a),
            };
            let bin = self.walk((hist, stride), s as usize, from, queries[qi], estimate);
            walk = Some((s, bin));
            let sub = self.sub_bin(hist, s as usize, a, &bin, cell_total[s as usize]);
            if let Some(f) = sub.atom(a, &bin) {
                found[qi] = Some(f);
                placed.push((sub.cell, true));
            } else {
                if remap[sub.cell] == u32::MAX {
                    remap[sub.cell] = next_active.len() as u32;
                    debug_assert!(!sub.full || stride == 3);
                    next_active.push(self.descend(s as usize, a, &bin, &sub));
                    enters.push(sub.full);
                }
                slot_of_query[qi] = remap[sub.cell];
                still.push(qi);
                placed.push((sub.cell, false));
            }
        }
        Placement {
            next_active,
            enters,
            remap,
            still,
            placed,
        }
    }

    /// From `from` in slot `s`'s sub-bins, the sub-bin that holds target `q`, with its figures
    /// (see [`Geometry::place`] for `stride` and `estimate`).
    fn walk(
        &self,
        (hist, stride): (&[u64], usize),
        s: usize,
        from: SubBin,
        q: u64,
        (n_total, total_w): (u64, u64),
    ) -> SubBin {
        let SubBin {
            mut sb,
            mut cum,
            mut cnt,
            ..
        } = from;
        let row = &hist[self.off[s] * stride..self.off[s + 1] * stride];
        while cum + row[sb * stride] <= q {
            cum += row[sb * stride];
            if stride == 3 {
                cnt += row[sb * 3 + 1];
            }
            sb += 1;
        }
        let w = row[sb * stride];
        let (count, keysum) = if stride == 3 {
            (row[sb * 3 + 1], row[sb * 3 + 2])
        } else {
            // Unknown: estimated from the weight, never taken as a single object.
            let est = (n_total as f64 * (w as f64 / total_w as f64)).ceil() as u64;
            (est.max(2), 0)
        };
        SubBin {
            sb,
            cum,
            cnt,
            w,
            count,
            keysum,
        }
    }

    /// Where sub-bin `bin` of slot `s` (active cell `a`) lies: its cell in the histogram and
    /// its key prefix, lengthened to the prefix that all its objects share when they are all
    /// of the cell's (`cell_total`) and it counted its key bits.
    fn sub_bin(&self, hist: &[u64], s: usize, a: &Active, bin: &SubBin, cell_total: u64) -> Reach {
        let b = self.bits[s];
        let width = self.geom[s].width;
        let (mut depth, mut prefix) = (a.depth + b, (a.prefix << b) | bin.sb as u64);
        if bin.count > 1
            && bin.count == cell_total
            && let Some((len, key)) = self.shared_prefix(hist, s, bin.count)
            && len > depth
        {
            (depth, prefix) = (len, key >> (width - len));
        }
        Reach {
            cell: self.off[s] + bin.sb,
            depth,
            prefix,
            full: depth == width,
        }
    }

    /// The next round's active cell for sub-bin `bin` of slot `s` (active cell `a`), which
    /// holds more than one atom.
    fn descend(&self, s: usize, a: &Active, bin: &SubBin, reach: &Reach) -> Active {
        if reach.full {
            // A single cell holding several points (counts are exact here, see the assertion
            // on B0): go on inside it, over the sub-keys.
            Active {
                prefix: 0,
                base: bin.cum,
                depth: 0,
                count: bin.count,
                stalled: false,
                inner: Some(Inner {
                    key: reach.prefix,
                    count: bin.count,
                    before: 0,
                }),
            }
        } else {
            Active {
                prefix: reach.prefix,
                base: bin.cum,
                depth: reach.depth,
                count: bin.count,
                // Not split, and no bit counts to jump with: count them next time.
                stalled: bin.count == a.count && self.bit_off[s] == usize::MAX,
                inner: a.inner.map(|c| Inner {
                    before: c.before + bin.cnt,
                    ..c
                }),
            }
        }
    }

    /// For a fresh partition, the fate of every sub-bin in one word: its slot in the next
    /// round (`remap`), or [`DONE`] with its part: one with no target follows the cuts before
    /// it (`cuts`: how many cuts lie below each query, and the part after each number of
    /// cuts); a resolved atom also follows the cuts placed just before it. `placed`: where
    /// each pending query went (its sub-bin, and whether it was resolved).
    fn fates(
        &self,
        active: &[Active],
        queries: &[u64],
        (pending, placed): (&[usize], &[(usize, bool)]),
        found: &[Option<Found>],
        (cuts_below, positive): (&[u32], &[u32]),
        remap: &[u32],
    ) -> Vec<u32> {
        let mut fate = vec![0u32; self.cells];
        let mut pi = 0;
        for (s, act) in active.iter().enumerate() {
            let mut below = cuts_below[queries.partition_point(|&q| q < act.base)];
            let (mut cell, end) = (self.off[s], self.off[s + 1]);
            while cell < end {
                // The sub-bins up to the next one a query reached hold no target and have no
                // next slot (`place` gives slots only to reached sub-bins): they all follow
                // the same cuts.
                let next = match placed.get(pi) {
                    Some(&(c, _)) if c < end => c,
                    _ => end,
                };
                debug_assert!(next >= cell, "placed in sub-bin order");
                fate[cell..next].fill(DONE | positive[below as usize]);
                if next == end {
                    break;
                }
                cell = next;
                let mut here = 0u32;
                let mut at_key = 0u32;
                let mut resolved = false;
                while pi < pending.len() && placed[pi].0 == cell {
                    let qi = pending[pi];
                    let m = cuts_below[qi + 1] - cuts_below[qi];
                    here += m;
                    if placed[pi].1 {
                        resolved = true;
                        let f = found[qi].expect("resolved");
                        if f.goes_before(queries[qi]) {
                            at_key += m;
                        }
                    }
                    pi += 1;
                }
                fate[cell] = if remap[cell] != u32::MAX {
                    remap[cell]
                } else if resolved {
                    DONE | positive[(below + at_key) as usize]
                } else {
                    DONE | positive[below as usize]
                };
                below += here;
                cell += 1;
            }
        }
        fate
    }

    /// For cell `s` that counted its key bits and has all its `all` objects in one sub-bin: the
    /// length of the key prefix they share and the key bits (those below it are junk).
    fn shared_prefix(&self, hist: &[u64], s: usize, all: u64) -> Option<(u32, u64)> {
        let bo = self.bit_off[s];
        if bo == usize::MAX {
            return None;
        }
        let w = self.geom[s].width;
        let (mut len, mut key) = (0u32, 0u64);
        for bit in (0..w).rev() {
            match hist[bo + bit as usize] {
                0 => {}
                ones if ones == all => key |= 1 << bit,
                _ => break,
            }
            len += 1;
        }
        Some((len, key))
    }
}

/// What [`locate`] returns: one [`Found`] per query, and with `assign` the local counts per
/// part and the global figures per part (see [`Rounds::global`]: counts, then weights).
pub(crate) type Located = (Vec<Found>, Option<(Counts, Vec<u64>)>);

/// Sub-keys of the local points (the low words of their fine keys), asked for only for the
/// points of cells that a target reaches while they hold several points.
pub(crate) trait SubKeys: Sync {
    /// The curve's state inside the cell whose key is `cell` (the same for all its points).
    fn cell_state(&self, cell: u64) -> usize;
    /// The position of local point `i` inside its cell (the coordinates the sub-key is the
    /// key of). Reads the point: a cache miss, as candidates are few and far apart, so callers
    /// take the positions of many points first and their sub-keys after, and the misses
    /// overlap.
    fn position(&self, i: usize) -> [u32; 3];
    /// Asks the processor to fetch what [`SubKeys::position`] of point `i` will read.
    fn prefetch(&self, i: usize);
    /// The sub-key of position `pos` inside a cell whose state is `state`.
    fn sub_key(&self, pos: [u32; 3], state: usize) -> u64;
}

/// What [`locate`] works on: the local points (their keys, the sub-key of point `i`, their
/// fixed-point weights; `bits`: the widths of keys and sub-keys), the global level-0
/// histogram, the global number of points, and the queries.
pub(crate) struct Search<'a, S> {
    pub keys: &'a [u64],
    pub sub_key: &'a S,
    pub quant: Quant<'a>,
    pub hist0: &'a [u64],
    pub bits: (u32, u32),
    pub n_total: u64,
    pub queries: &'a [u64],
}

/// Finds the atom straddling each of `queries` (sorted, distinct, each `< W`).
///
/// `hist0` is the global weight histogram over the top [`B0`] bits of the `key_bits`-bit keys.
/// `sub_key` gives the `sub_key_bits`-bit sub-keys of local points (needed only for the
/// points of cells that a target reaches while they still hold several points).
/// Every rank calls this with the same `hist0` and `queries`. With `assign`, also writes every
/// local point's part and returns the local counts per part and the global weights per
/// part (summed from the reduced histograms, so not to be reduced again).
///
/// One reduction (`sum_u64` of a histogram) per round: the first round from the keys
/// ([`Rounds::round_from_keys`]) when the targets' bins hold much of the weight, then rounds
/// over the candidates ([`Rounds::round`]) until every query is resolved.
pub(crate) fn locate<R: Reduce, S: SubKeys>(
    comm: &R,
    exec: &Exec,
    input: Search<'_, S>,
    assign: Option<Assign<'_>>,
) -> Result<Located, R::Error> {
    let mut rounds = Rounds::level0(exec, input, assign);
    // When the targets' bins hold much of the weight (points concentrated where cuts fall),
    // the first round histograms straight from the keys and only its survivors are gathered.
    let frac = rounds.active_fraction();
    let mut from_keys = frac > 0.25
        && rounds
            .assign
            .as_ref()
            .is_none_or(|a| a.k < CELL_FLAG as usize);
    if !from_keys {
        rounds.gather_level0(frac);
    }
    while !rounds.pending.is_empty() {
        if from_keys {
            rounds.round_from_keys(comm)?;
            from_keys = false;
        } else {
            rounds.round(comm)?;
        }
    }
    Ok(rounds.finish())
}

/// The state of [`locate`] between its rounds: the input, the level-0 bins, the active cells
/// and where each query is, the candidates, and with `assign` the counts and weights per part.
struct Rounds<'a, S> {
    exec: &'a Exec<'a>,
    input: Search<'a, S>,
    assign: Option<Assign<'a>>,
    /// `cuts_below[i]`: the cuts whose target is `queries[j]` for `j < i` (prefix sums of
    /// `mult`).
    cuts_below: Vec<u32>,
    /// Fixed-size, so that masked indexing needs no bounds check in the passes.
    slot_of_bin: Box<[u32; 1 << B0]>,
    part_of_bin: Box<[u32; 1 << B0]>,
    /// The top key bits a level-0 bin is: `key >> shift0`.
    shift0: u32,
    active: Vec<Active>,
    slot_of_query: Vec<u32>,
    found: Vec<Option<Found>>,
    /// The queries not resolved yet.
    pending: Vec<usize>,
    /// Candidates in chunks, each in increasing point order and covering its own range of
    /// points, so that chunks can be processed in parallel (each writing its own parts).
    cands: Vec<Vec<Cand>>,
    /// With `assign`: the points this rank assigned to each part so far and counted itself.
    counts: Option<Counts>,
    /// With `assign`, global figures per part: the count (`global[p]`) and the weight
    /// (`global[k + p]`) of the points of every (reduced) histogram bin whose part is known,
    /// taken from the bin, so that no point is weighed twice; the points that a bin counted
    /// (after the first round, or every bin with unit weights, whose weights are counts) are
    /// not counted locally, the others are (see `counts`).
    global: Option<Vec<u64>>,
}

/// The number of candidates in `cs`.
fn count_of(cs: &[Vec<Cand>]) -> usize {
    cs.iter().map(Vec::len).sum()
}

/// The sum (wrapping) of the histograms `per`, which go back to the scratch but the first
/// (`len` zeros when there is none); long ones are added in ranges side by side.
fn sum_hists(exec: &Exec, per: Vec<Vec<u64>>, len: usize) -> Vec<u64> {
    let mut it = per.into_iter();
    let mut h = it.next().unwrap_or_else(|| exec.scratch.zeroed(len));
    let rest: Vec<Vec<u64>> = it.collect();
    if !rest.is_empty() {
        exec.map_chunks_mut(&mut h, |r, out| {
            for o in &rest {
                for (x, y) in out.iter_mut().zip(&o[r.clone()]) {
                    *x = x.wrapping_add(*y);
                }
            }
        });
    }
    for o in rest {
        exec.scratch.give_u64(o);
    }
    h
}

/// Adds weight, count and key sum per sub-bin (and the bit counts) of the candidates `cs`
/// into `h`, laid out as `geom` says.
#[inline]
fn accumulate(geom: &[SlotGeom], h: &mut [u64], cs: &[Cand]) {
    for c in cs {
        let g = geom[c.slot as usize];
        let idx = (g.off + ((c.key >> g.shift) & g.mask) as usize) * 3;
        h[idx] += c.w;
        h[idx + 1] += 1;
        h[idx + 2] = h[idx + 2].wrapping_add(c.key);
        if g.ones != usize::MAX {
            let ones = &mut h[g.ones..g.ones + g.width as usize];
            for (bit, o) in ones.iter_mut().enumerate() {
                *o += (c.key >> bit) & 1;
            }
        }
    }
}

/// Each non-empty chunk of candidates with the slice of `parts` its points fall in (from its
/// first point to the next chunk's) and where that slice starts.
fn with_parts<'c>(
    cands: &'c mut [Vec<Cand>],
    parts: &'c mut [u32],
) -> Vec<(&'c mut Vec<Cand>, usize, &'c mut [u32])> {
    let mut work = Vec::new();
    let mut rest: &mut [u32] = parts;
    let mut base = 0usize;
    let starts: Vec<Option<usize>> = cands
        .iter()
        .map(|c| c.first().map(|x| x.idx as usize))
        .collect();
    let nonempty: Vec<usize> = (0..cands.len()).filter(|&c| starts[c].is_some()).collect();
    let mut chunks: Vec<Option<&mut Vec<Cand>>> = cands.iter_mut().map(Some).collect();
    for (n, &c) in nonempty.iter().enumerate() {
        let start = starts[c].expect("non-empty");
        let end = nonempty
            .get(n + 1)
            .map_or(base + rest.len(), |&d| starts[d].expect("non-empty"));
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(start - base);
        let (mine, tail) = tail.split_at_mut(end - start);
        rest = tail;
        base = end;
        work.push((chunks[c].take().expect("each chunk once"), start, mine));
    }
    work
}

impl<'a, S: SubKeys> Rounds<'a, S> {
    /// Level 0: the key pass's histogram ([`level0`]).
    fn level0(exec: &'a Exec<'a>, input: Search<'a, S>, assign: Option<Assign<'a>>) -> Self {
        let (hist0, n_total, queries) = (input.hist0, input.n_total, input.queries);
        let cuts_below: Vec<u32> = match &assign {
            Some(a) => std::iter::once(0)
                .chain(a.mult.iter().scan(0u32, |acc, &m| {
                    *acc += m;
                    Some(*acc)
                }))
                .collect(),
            None => vec![0; queries.len() + 1],
        };
        let Level0 {
            active,
            slot_of_query,
            slot_of_bin,
            part_of_bin,
        } = level0(
            hist0,
            n_total,
            queries,
            assign.as_ref().map(|a| (a.positive, &cuts_below[..])),
        );
        let global = assign.as_ref().map(|a| {
            let mut g = vec![0u64; 2 * a.k];
            for (b, &hw) in hist0.iter().enumerate() {
                if slot_of_bin[b] == u32::MAX {
                    let part = part_of_bin[b] as usize;
                    g[a.k + part] += hw;
                    if input.quant.counted_by_weight() {
                        g[part] += hw;
                    }
                }
            }
            g
        });
        Rounds {
            exec,
            shift0: input.bits.0 - B0,
            input,
            counts: assign.as_ref().map(|a| Counts::new(a.k)),
            assign,
            cuts_below,
            slot_of_bin,
            part_of_bin,
            active,
            slot_of_query,
            found: vec![None; queries.len()],
            pending: (0..queries.len()).collect(),
            cands: Vec::new(),
            global,
        }
    }

    /// The fraction of the weight in the active bins of level 0.
    fn active_fraction(&self) -> f64 {
        let active_weight: u64 = self
            .active
            .iter()
            .map(|a| self.input.hist0[a.prefix as usize])
            .sum();
        active_weight as f64 / self.input.hist0.iter().sum::<u64>().max(1) as f64
    }

    /// Adds a chunk's counts per part.
    fn count(&mut self, t: Option<Counts>) {
        if let (Some(all), Some(t)) = (self.counts.as_mut(), t) {
            all.merge(&t);
        }
    }

    /// Takes the chunks of a gather as the candidates, and their counts.
    fn take(&mut self, per: Vec<(Vec<Cand>, Option<Counts>)>) {
        for (c, t) in per {
            self.cands.push(c);
            self.count(t);
        }
    }

    /// Gathers the local objects of the active bins of level 0 (and assigns the others);
    /// `frac`: the fraction of the weight they hold.
    fn gather_level0(&mut self, frac: f64) {
        let reserve = |len: usize| ((len as f64 * frac * 1.05) as usize + 64).min(len);
        let nb = 1usize << B0;
        let shift0 = self.shift0;
        let (slot_of_bin, part_of_bin) = (&*self.slot_of_bin, &*self.part_of_bin);
        let gathered = gather(
            self.exec,
            (self.input.keys, self.input.quant),
            self.assign.as_mut(),
            reserve,
            // The key pass left the point's top key bits in its parts entry.
            |entry| {
                let b = bin_of_entry(entry);
                match slot_of_bin[b] {
                    // Its weight is counted from hist0 (see `global`).
                    u32::MAX => Route::Done(part_of_bin[b]),
                    s => Route::Cand(s),
                }
            },
            |key| Some(slot_of_bin[(key >> shift0) as usize & (nb - 1)]).filter(|&s| s != u32::MAX),
        );
        self.take(gathered);
    }

    /// The first round, straight from the keys: pass A histograms the weight of the points of
    /// the active bins (and assigns the others), the queries are placed, and pass B assigns
    /// the points of the finished sub-bins and gathers the others as the candidates.
    fn round_from_keys<R: Reduce>(&mut self, comm: &R) -> Result<(), R::Error> {
        let round = Geometry::new(&self.active, true, self.input.bits);
        let mut hist = self.pass_a(&round);
        comm.sum_u64(&mut hist)?;
        // The first round from the keys sums weights only (no count, no key sum).
        let (placement, fate) = self.settle(&round, &hist, 1);
        debug_assert!(
            placement.enters.iter().all(|&e| !e),
            "the first round stays above cells"
        );
        self.gather_survivors(&round, &placement, &fate);
        self.active = placement.next_active;
        self.exec.scratch.give_u64(hist);
        Ok(())
    }

    /// A round over the candidates: histogram them, place the queries, keep the candidates
    /// of the cells still active (with `assign`, write the others' parts), and let those of
    /// the cells entered this round swap their key for the sub-key.
    fn round<R: Reduce>(&mut self, comm: &R) -> Result<(), R::Error> {
        let round = Geometry::new(&self.active, false, self.input.bits);
        let mut hist = self.histogram(&round);
        comm.sum_u64(&mut hist)?;
        let (placement, fate) = self.settle(&round, &hist, 3);
        if self.assign.is_some() {
            self.retain_assigned(&round, &fate);
        } else if !self.pending.is_empty() {
            self.retain(&round, &placement.remap);
        }
        for c in self.cands.extract_if(.., |c| c.is_empty()) {
            self.exec.scratch.give_cands(c);
        }
        // The candidates of cells entered this round swap their key for the sub-key (in a
        // pass of its own, rare, so that the loops above stay lean).
        if placement.enters.contains(&true) {
            self.enter_cells(&placement);
        }
        self.active = placement.next_active;
        self.exec.scratch.give_u64(hist);
        Ok(())
    }

    /// Places the pending queries in the round's reduced histogram `hist` (`stride` words per
    /// sub-bin, see [`Geometry::place`]); with `assign`, each sub-bin's fate in one word (its
    /// next slot, or done with its part), and the weight of the finished sub-bins added to
    /// their parts.
    fn settle(&mut self, round: &Geometry, hist: &[u64], stride: usize) -> (Placement, Vec<u32>) {
        let total_w: u64 = self.input.hist0.iter().sum::<u64>().max(1);
        let mut placement = round.place(
            (hist, stride),
            &self.active,
            (self.input.queries, &self.pending),
            (&mut self.slot_of_query, &mut self.found),
            (self.input.n_total, total_w),
        );
        let fate: Vec<u32> = match &self.assign {
            Some(asg) => round.fates(
                &self.active,
                self.input.queries,
                (&self.pending, &placement.placed),
                &self.found,
                (&self.cuts_below, asg.positive),
                &placement.remap,
            ),
            None => Vec::new(),
        };
        if let (Some(g), Some(asg)) = (self.global.as_mut(), self.assign.as_ref()) {
            let k = asg.k;
            let unit = self.input.quant.counted_by_weight();
            // By runs of sub-bins of one fate (most finished sub-bins lie in long runs that
            // follow the same cuts, see `Geometry::fates`): summed, then added to the part.
            let mut cell = 0;
            while cell < fate.len() {
                let f = fate[cell];
                let end = cell + fate[cell..].iter().take_while(|&&x| x == f).count();
                if f & DONE != 0 {
                    let part = (f & !DONE) as usize;
                    let run = &hist[cell * stride..end * stride];
                    // After the first round the bins count their points too; with unit
                    // weights, their weight is their count.
                    let (w, n) = if stride == 3 {
                        let sums = run.chunks_exact(3).fold([0u64; 2], |[w, n], b| {
                            [w.wrapping_add(b[0]), n.wrapping_add(b[1])]
                        });
                        (sums[0], Some(sums[1]))
                    } else {
                        let w = run.iter().fold(0u64, |w, &b| w.wrapping_add(b));
                        (w, unit.then_some(w))
                    };
                    g[k + part] += w;
                    if let Some(n) = n {
                        g[part] += n;
                    }
                }
                cell = end;
            }
        }
        self.pending = std::mem::take(&mut placement.still);
        (placement, fate)
    }

    /// Pass A: the weight histogram of the points of the active bins of level 0 over the
    /// round's sub-bins; with `assign`, the other points get their part and the active ones
    /// are parked (their sub-bin, flagged) until pass B knows their fate.
    fn pass_a(&mut self, round: &Geometry) -> Vec<u64> {
        let cells = round.cells;
        let (exec, keys, quant, shift0) =
            (self.exec, self.input.keys, self.input.quant, self.shift0);
        let (slot_of_bin, part_of_bin) = (&*self.slot_of_bin, &*self.part_of_bin);
        let nb = 1usize << B0;
        let per: Vec<(Vec<u64>, Option<Counts>)> = match self.assign.as_mut() {
            Some(a) => {
                let k = a.k;
                // The parked key bits: enough for this round's sub-bins (see PARK_BITS).
                let park = self.input.bits.0 - PARK_BITS;
                // Branch-free (whether a point is active is unpredictable): the inactive ones
                // go through a last slot, whose cells follow the round's, in turn, and count
                // into a spare counter.
                let mut geom = round.geom.clone();
                let sentinel = geom.len();
                geom.push(SlotGeom {
                    off: cells,
                    shift: park,
                    mask: SPARE as u64 - 1,
                    ones: usize::MAX,
                    width: 0,
                });
                let geom = &geom[..];
                let level0 = ParkLevel0 {
                    slot_of_bin,
                    part_of_bin,
                    geom,
                    sentinel: sentinel as u32,
                    park,
                };
                exec.map_chunks_mut_few(a.parts, |r, out| {
                    let mut h = exec.scratch.zeroed(cells + SPARE);
                    let mut counts = vec![0u64; k + SPARE];
                    let chunk = (r.start, out, &mut h[..], &mut counts[..]);
                    match quant {
                        Quant::Unit => pass_a_chunk(UnitWeights, &level0, chunk),
                        Quant::Scaled(s) => pass_a_chunk(s, &level0, chunk),
                    }
                    h.truncate(cells);
                    counts.truncate(k);
                    (h, Some(Counts { counts }))
                })
            }
            None => exec.map_ranges(keys.len(), |r| {
                let geom = &round.geom[..];
                let mut h = exec.scratch.zeroed(cells);
                for i in r {
                    let key = keys[i];
                    let s = slot_of_bin[(key >> shift0) as usize & (nb - 1)];
                    if s != u32::MAX {
                        h[geom_cell(geom, s, key)] += quant.q(i);
                    }
                }
                (h, None)
            }),
        };
        let mut hists = Vec::with_capacity(per.len());
        for (h, t) in per {
            hists.push(h);
            self.count(t);
        }
        sum_hists(exec, hists, cells)
    }

    /// Pass B, after the first round: the points of the finished sub-bins get their part
    /// (with `assign`), the others become the candidates of the next round.
    fn gather_survivors(&mut self, round: &Geometry, placement: &Placement, fate: &[u32]) {
        let survivors: u64 = placement.next_active.iter().map(|a| a.count).sum();
        let sfrac = survivors as f64 / self.input.n_total.max(1) as f64;
        let reserve = |len: usize| ((len as f64 * sfrac * 1.1) as usize + 64).min(len);
        let (exec, keys, quant, shift0) =
            (self.exec, self.input.keys, self.input.quant, self.shift0);
        let slot_of_bin = &*self.slot_of_bin;
        let (geom, remap) = (&round.geom, &placement.remap[..]);
        let nb = 1usize << B0;
        let per = match self.assign.as_mut() {
            Some(a) => pass_b(exec, (keys, quant), a, fate),
            None => gather(
                exec,
                (keys, quant),
                None,
                reserve,
                |_| Route::Keep,
                |key| {
                    let s = slot_of_bin[(key >> shift0) as usize & (nb - 1)];
                    if s == u32::MAX {
                        return None;
                    }
                    Some(remap[geom_cell(geom, s, key)]).filter(|&next| next != u32::MAX)
                },
            ),
        };
        for c in self.cands.drain(..) {
            exec.scratch.give_cands(c);
        }
        self.take(per);
    }

    /// The round's histogram of the candidates (weight, count and key sum per sub-bin, and the
    /// bit counts), in parallel over groups of chunks when they are many.
    fn histogram(&self, round: &Geometry) -> Vec<u64> {
        let (exec, geom, hist_len) = (self.exec, &round.geom[..], round.hist_len);
        let acc_group = |g: &[Vec<Cand>]| {
            let mut h = exec.scratch.zeroed(hist_len);
            for cs in g {
                accumulate(geom, &mut h, cs);
            }
            h
        };
        let per = if exec.parallel_for(count_of(&self.cands)) {
            let per_group = self.cands.len().div_ceil(exec.threads()).max(1);
            exec.map_items(self.cands.chunks(per_group).collect(), acc_group)
        } else {
            vec![acc_group(&self.cands)]
        };
        sum_hists(exec, per, hist_len)
    }

    /// With `assign`: every candidate of a finished sub-bin gets its part (its `fate`) and is
    /// counted; the others stay, with their next slot.
    fn retain_assigned(&mut self, round: &Geometry, fate: &[u32]) {
        let exec = self.exec;
        let par = exec.parallel_for(count_of(&self.cands));
        let Some(asg) = self.assign.as_mut() else {
            return;
        };
        let geom = &round.geom[..];
        // Each chunk with the slice of parts its points fall in.
        let work = with_parts(&mut self.cands, asg.parts);
        // Branch-free (a candidate's fate is unpredictable): every candidate writes its entry
        // (a kept one's is scratch until its part is known) and is copied down. The finished
        // ones are not counted here: their bins counted them (see `global`).
        let retain = |(cs, off, parts): (&mut Vec<Cand>, usize, &mut [u32])| {
            let all: &mut [Cand] = cs;
            let mut kept = 0;
            for j in 0..all.len() {
                let c = all[j];
                let v = fate[geom_cell(geom, c.slot, c.key)];
                parts[c.idx as usize - off] = v & !DONE;
                all[kept] = Cand { slot: v, ..c };
                kept += usize::from(v & DONE == 0);
            }
            cs.truncate(kept);
        };
        if par {
            exec.map_items(work, retain);
        } else {
            work.into_iter().for_each(retain);
        }
    }

    /// Without `assign`: keeps the candidates of the sub-bins still active, with their next
    /// slot (`remap`).
    fn retain(&mut self, round: &Geometry, remap: &[u32]) {
        let exec = self.exec;
        let geom = &round.geom[..];
        let retain = |cs: &mut Vec<Cand>| {
            cs.retain_mut(|c| {
                let cell = geom_cell(geom, c.slot, c.key);
                c.slot = remap[cell];
                c.slot != u32::MAX
            })
        };
        if exec.parallel_for(count_of(&self.cands)) {
            exec.map_items(self.cands.iter_mut().collect(), retain);
        } else {
            self.cands.iter_mut().for_each(retain);
        }
    }

    /// The candidates of the cells entered this round swap their key for their sub-key.
    fn enter_cells(&mut self, placement: &Placement) {
        let (exec, sub_key) = (self.exec, self.input.sub_key);
        let enters = &placement.enters[..];
        // The curve's state inside each entered cell, once per cell.
        let states: Vec<usize> = placement
            .next_active
            .iter()
            .zip(enters)
            .map(|(a, &e)| match a.inner {
                Some(c) if e => sub_key.cell_state(c.key),
                _ => 0,
            })
            .collect();
        let swap = |cs: &mut Vec<Cand>| {
            let entering = |c: &&mut Cand| enters[c.slot as usize];
            let idx: Vec<u32> = cs.iter_mut().filter(entering).map(|c| c.idx).collect();
            // The points are far apart: ask for each one well before it is read.
            const AHEAD: usize = 16;
            for &i in idx.iter().take(AHEAD) {
                sub_key.prefetch(i as usize);
            }
            let pos: Vec<[u32; 3]> = (0..idx.len())
                .map(|j| {
                    if let Some(&i) = idx.get(j + AHEAD) {
                        sub_key.prefetch(i as usize);
                    }
                    sub_key.position(idx[j] as usize)
                })
                .collect();
            for (c, p) in cs.iter_mut().filter(entering).zip(pos) {
                c.key = sub_key.sub_key(p, states[c.slot as usize]);
            }
        };
        if exec.parallel_for(count_of(&self.cands)) {
            exec.map_items(self.cands.iter_mut().collect(), swap);
        } else {
            self.cands.iter_mut().for_each(swap);
        }
    }

    /// What [`locate`] returns, once every query is resolved.
    fn finish(mut self) -> Located {
        debug_assert!(
            self.assign.is_none() || count_of(&self.cands) == 0,
            "every candidate assigned"
        );
        for c in self.cands.drain(..) {
            self.exec.scratch.give_cands(c);
        }
        let counts = match (self.counts, self.global) {
            (Some(t), Some(w)) => Some((t, w)),
            _ => None,
        };
        let found = self
            .found
            .into_iter()
            .map(|f| f.expect("every query resolved"))
            .collect();
        (found, counts)
    }
}
