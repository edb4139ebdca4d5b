//! Global identities without a central counter.
//!
//! - An element is named by its place in the refinement tree: the index of its initial
//!   triangle (2 bits) and the path of first/second children down to it (one bit per level),
//!   left-aligned in a `u128` ([`child_key`]). Since the leaves are in Sierpiński-curve order
//!   and the children of an element are its first and second halves along the curve, the
//!   numeric order of the keys of the leaf elements is the curve order.
//! - A vertex is named by its coordinates: every vertex of a bisection mesh of the unit square
//!   is a dyadic point, computed exactly as the midpoint of two others, so the bits of (x, y)
//!   are the same on every rank ([`vertex_key`]). An edge is named by its midpoint.
//! - A vertex's *birth* is its place in the serial vertex numbering: refinement step, level of
//!   the bisection, then the curve order of the element that created it and the edge within
//!   that element ([`Birth`]). Sorting by birth gives the serial order, which the multilevel
//!   preconditioner's sweeps follow.

/// Element tree key.
pub(crate) type EKey = u128;
/// Vertex key: the bits of x (high half) and y (low half).
pub(crate) type VKey = u128;

/// The deepest level of an element a distributed run may bisect: the key of a level-l
/// element uses bits 127 down to 126 − l, the birth key of a vertex it creates two more.
pub(crate) const LEVEL_LIMIT: u8 = 126;

/// Key of initial triangle `r` (0..4).
pub(crate) fn root_key(r: usize) -> EKey {
    (r as u128) << 126
}

/// Key of the first (`second = false`) or second child of an element at `level`.
#[inline]
pub(crate) fn child_key(parent: EKey, level: u8, second: bool) -> EKey {
    debug_assert!(
        level < LEVEL_LIMIT,
        "level {level} has no room for a child bit"
    );
    parent | (u128::from(second) << (125 - u32::from(level)))
}

/// Vertex key of a point.
#[inline]
pub(crate) fn vertex_key(p: [f64; 2]) -> VKey {
    (u128::from(p[0].to_bits()) << 64) | u128::from(p[1].to_bits())
}

/// The point of a vertex key.
#[inline]
pub(crate) fn key_point(k: VKey) -> [f64; 2] {
    [f64::from_bits((k >> 64) as u64), f64::from_bits(k as u64)]
}

/// Key of the edge between two points (its midpoint, exact).
#[inline]
pub(crate) fn edge_key(a: [f64; 2], b: [f64; 2]) -> VKey {
    vertex_key([0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1])])
}

/// Where a vertex comes in the serial numbering. Ordered by `(sg, key)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Birth {
    /// Refinement step (high byte; 0 for the initial vertices) and bisection level.
    pub(crate) sg: u16,
    /// The creating element's key with the edge's rank in the creation order (refinement
    /// edge, then the edges opposite v0 and v2) in the two lowest bits; for an initial vertex
    /// its index.
    pub(crate) key: u128,
}

impl Birth {
    /// The birth of initial vertex `i`.
    pub(crate) fn initial(i: usize) -> Birth {
        Birth {
            sg: 0,
            key: i as u128,
        }
    }

    /// The birth of the vertex created at `step` by the element with `key` at `level`
    /// bisecting its edge `k` (opposite vertex k).
    pub(crate) fn created(step: usize, key: EKey, level: u8, k: u8) -> Birth {
        let generation = level + u8::from(k != 1);
        // The serial refinement creates an element's vertices edge 1 first, then 0, then 2.
        let slot = match k {
            1 => 0u128,
            0 => 1,
            _ => 2,
        };
        Birth {
            sg: ((step.min(255) as u16) << 8) | u16::from(generation),
            key: key | slot,
        }
    }
}

/// Element keys, stored in their high 64 bits while every element is at most 62 levels
/// deep (the low half of such a key is zero: PHAML's run reaches level 34), with a second
/// array for the low halves from the first deeper element on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Keys {
    hi: Vec<u64>,
    lo: Option<Vec<u64>>,
}

impl Keys {
    /// No keys, room for `n`.
    pub(crate) fn with_capacity(n: usize) -> Keys {
        Keys {
            hi: Vec::with_capacity(n),
            lo: None,
        }
    }
    /// `n` placeholder keys (all zero): the elements of a rank alone, which no other rank
    /// asks for by key (see `Local::refine`).
    pub(crate) fn unnamed(n: usize) -> Keys {
        Keys {
            hi: vec![0; n],
            lo: None,
        }
    }
    /// Number of keys.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.hi.len()
    }
    /// Key t.
    #[inline]
    pub(crate) fn get(&self, t: usize) -> EKey {
        (u128::from(self.hi[t]) << 64) | self.lo.as_ref().map_or(0, |lo| u128::from(lo[t]))
    }
    /// Appends a key.
    #[inline]
    pub(crate) fn push(&mut self, k: EKey) {
        if k as u64 != 0 && self.lo.is_none() {
            let mut lo = Vec::with_capacity(self.hi.capacity());
            lo.resize(self.hi.len(), 0);
            self.lo = Some(lo);
        }
        self.hi.push((k >> 64) as u64);
        if let Some(lo) = &mut self.lo {
            lo.push(k as u64);
        }
    }
    /// [`merge_in_place`] on the keys.
    pub(crate) fn merge_in_place(
        &mut self,
        kept: &[(usize, usize)],
        rest: &[u32],
        slots: &[usize],
    ) {
        merge_in_place(&mut self.hi, kept, rest, slots);
        if let Some(lo) = &mut self.lo {
            merge_in_place(lo, kept, rest, slots);
        }
    }
    /// The first index in `range` whose key is not below `k` (keys sorted there), by
    /// [`gallop`] from the start of `range`: cheap when the answer is near the start (the
    /// places of a run of arriving elements, one after the other).
    pub(crate) fn gallop(&self, range: std::ops::Range<usize>, k: EKey) -> usize {
        range.start + gallop(range.len(), |i| self.get(range.start + i) < k)
    }
    /// The keys of the leaves the bisection `bits` makes of the elements with `keep(t)`
    /// (their levels `levels`), in the order the refinement writes the children (an
    /// element's first half, then its second; a half bisected again gives its two halves),
    /// with room for `room` keys; and the census of the new keys (their number and the
    /// wrapping sum of their [`mix`]). While every key fits in the high half (no element
    /// deeper than level 60 after the bisection) the keys are written as 64-bit words.
    pub(crate) fn children(
        &self,
        levels: &[u8],
        bits: &[u8],
        keep: impl Fn(usize) -> bool,
        room: usize,
    ) -> (Keys, [u64; 2]) {
        let mut out = Keys::with_capacity(room);
        let mut sum = 0u64;
        let shallow = self.lo.is_none() && levels.iter().all(|&l| l <= 58);
        if shallow {
            // A child at level l + 1 sets bit 125 − l of the key: bit 61 − l of the high word.
            let child = |k: u64, l: u8, second: bool| k | (u64::from(second) << (61 - l));
            let hi = &mut out.hi;
            for (t, (&k, (&l, &b))) in self.hi.iter().zip(levels.iter().zip(bits)).enumerate() {
                if keep(t) {
                    leaves(k, l, b, child, |k| {
                        sum = sum.wrapping_add(mix(u128::from(k) << 64));
                        hi.push(k);
                    });
                }
            }
        } else {
            for t in (0..self.len()).filter(|&t| keep(t)) {
                leaves(self.get(t), levels[t], bits[t], child_key, |k| {
                    sum = sum.wrapping_add(mix(k));
                    out.push(k);
                });
            }
        }
        let n = out.len() as u64;
        (out, [n, sum])
    }
    /// Room for `n` more keys.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.hi.reserve(n);
        if let Some(lo) = &mut self.lo {
            lo.reserve(n);
        }
    }
}

/// The leaves that the bisection marks `b` make of an element with key `k` at level `l`, in
/// the order the refinement writes them (its first half, then its second; a half bisected
/// again gives its two halves), each handed to `push`; `child(k, l, second)` is the key of a
/// child of a level-l element.
#[inline(always)]
fn leaves<K: Copy>(k: K, l: u8, b: u8, child: impl Fn(K, u8, bool) -> K, mut push: impl FnMut(K)) {
    if b == 0 {
        push(k);
        return;
    }
    for (second, split) in [(false, b & 4 != 0), (true, b & 1 != 0)] {
        let c = child(k, l, second);
        if split {
            push(child(c, l + 1, false));
            push(child(c, l + 1, true));
        } else {
            push(c);
        }
    }
}

/// The first index below `n` where `below` is false (`below` true on a prefix of `0..n`; `n`
/// when it holds everywhere), found by doubling steps from 0 and a binary search in the last
/// step: cheap when the answer is near the start.
pub(crate) fn gallop(n: usize, below: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut step) = (0usize, 1usize);
    while lo < n && below(lo) {
        let next = lo + step;
        if next >= n || !below(next) {
            // The answer is in lo + 1 ..= min(next, n).
            let (mut a, mut b) = (lo + 1, next.min(n));
            while a < b {
                let mid = a + (b - a) / 2;
                if below(mid) {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            return a;
        }
        lo = next + 1;
        step *= 2;
    }
    lo
}

/// A list of indices stored as runs of consecutive ones (start, length): the permutations
/// of a rebuild keep long stretches of an array in place, so gathering by runs copies
/// slices instead of single entries.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    runs: Vec<(usize, usize)>,
    len: usize,
}

impl Runs {
    /// The runs of `indices`.
    pub(crate) fn of(indices: &[u32]) -> Runs {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &i in indices {
            match runs.last_mut() {
                Some((s, l)) if *s + *l == i as usize => *l += 1,
                _ => runs.push((i as usize, 1)),
            }
        }
        Runs {
            runs,
            len: indices.len(),
        }
    }
    /// The number of leading indices that are `0, 1, 2, …` (entries a gather leaves where
    /// they are).
    pub(crate) fn identity_prefix(&self) -> usize {
        match self.runs.first() {
            Some(&(0, l)) => l,
            _ => 0,
        }
    }
    /// `v` becomes `v` at the indices, in order (a gather, in place), where the
    /// indices start with [`Runs::identity_prefix`] and every later one is at least that
    /// (a permutation that keeps a prefix): only the rest is copied.
    pub(crate) fn gather_in_place<T: Copy>(&self, v: &mut Vec<T>) {
        let p = self.identity_prefix();
        let rest = if p > 0 {
            &self.runs[1..]
        } else {
            &self.runs[..]
        };
        let mut moved = Vec::with_capacity(self.len - p);
        for &(s, l) in rest {
            debug_assert!(s >= p, "an index after the prefix points into it");
            moved.extend_from_slice(&v[s..s + l]);
        }
        v.truncate(p);
        v.extend_from_slice(&moved);
    }
}

/// Rearranges `v` in place: the entries of the runs `kept` (start, length; increasing, all
/// before the entries of `rest`) in order, with entry `rest[j]` inserted after the first
/// `slots[j]` of them (`slots` non-decreasing); `v` ends with `kept`'s length plus
/// `rest.len()` entries. Two passes of `copy_within` and no array-sized allocation: the
/// departures of a migration are a few runs, the arrivals a few entries.
pub(crate) fn merge_in_place<T: Copy>(
    v: &mut Vec<T>,
    kept: &[(usize, usize)],
    rest: &[u32],
    slots: &[usize],
) {
    debug_assert_eq!(rest.len(), slots.len());
    let arriving: Vec<T> = rest.iter().map(|&t| v[t as usize]).collect();
    let (n_kept, n) = compact_kept(v, kept, slots.len());
    let mut hi = n_kept;
    for j in (0..rest.len()).rev() {
        let lo = slots[j];
        v.copy_within(lo..hi, lo + j + 1);
        v[lo + j] = arriving[j];
        hi = lo;
    }
    v.truncate(n);
}

/// The first pass of [`merge_in_place`]: the runs `kept` moved down to the start of `v`, in
/// order; returns their length and the merge's (with `arriving` more entries).
fn compact_kept<T: Copy>(v: &mut [T], kept: &[(usize, usize)], arriving: usize) -> (usize, usize) {
    let mut w = 0;
    for &(s, l) in kept {
        // A run already in its place (the first, when nothing before it left) is not copied.
        if s != w {
            v.copy_within(s..s + l, w);
        }
        w += l;
    }
    // The kept entries precede the arriving ones, so the result is no longer than `v`.
    debug_assert!(
        w + arriving <= v.len(),
        "merge_in_place: more entries out than in"
    );
    (w, w + arriving)
}

/// [`merge_in_place`] with `f` applied to every entry of the result, once each: a
/// relabelling fused with the move (the neighbour links of a merge: one pass over them, not
/// a move and then a relabelling pass).
pub(crate) fn merge_in_place_map<T: Copy>(
    v: &mut Vec<T>,
    kept: &[(usize, usize)],
    rest: &[u32],
    slots: &[usize],
    f: impl Fn(T) -> T,
) {
    debug_assert_eq!(rest.len(), slots.len());
    let arriving: Vec<T> = rest.iter().map(|&t| f(v[t as usize])).collect();
    let (n_kept, n) = compact_kept(v, kept, slots.len());
    let mut hi = n_kept;
    for j in (0..rest.len()).rev() {
        let lo = slots[j];
        // Up by j + 1, from the back (the ranges overlap), each entry mapped as it moves.
        let s = &mut v[lo..hi + j + 1];
        for i in (0..hi - lo).rev() {
            s[i + j + 1] = f(s[i]);
        }
        v[lo + j] = arriving[j];
        hi = lo;
    }
    for x in &mut v[..hi] {
        *x = f(*x);
    }
    v.truncate(n);
}

impl FromIterator<EKey> for Keys {
    fn from_iter<I: IntoIterator<Item = EKey>>(iter: I) -> Keys {
        let iter = iter.into_iter();
        let mut k = Keys::with_capacity(iter.size_hint().0);
        for x in iter {
            k.push(x);
        }
        k
    }
}

/// A 64-bit mix of a key (for hashing and for order-independent checksums).
#[inline]
pub(crate) fn mix(k: u128) -> u64 {
    let lo = k as u64;
    let hi = (k >> 64) as u64;
    let mut x = lo ^ hi.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused merge and relabelling equals the merge followed by the relabelling, with
    /// departures (runs kept in pieces) and without (one run), arrivals at the start, in the
    /// middle and at the end, and each entry mapped exactly once.
    #[test]
    fn merge_in_place_map_is_merge_then_map() {
        let f = |x: u32| x.wrapping_mul(3) + 1;
        type Case<'a> = (&'a [(usize, usize)], &'a [usize]);
        let cases: [Case<'_>; 3] = [
            (&[(0, 10)], &[0, 0, 4, 10]),
            (&[(0, 3), (5, 4)], &[0, 2, 7, 7]),
            (&[(2, 8)], &[3, 8, 8, 8]),
        ];
        for (kept, slots) in cases {
            let base: Vec<u32> = (0..14).map(|i| i * 10).collect();
            let rest = [13u32, 10, 12, 11];
            let mut a = base.clone();
            merge_in_place(&mut a, kept, &rest, slots);
            let want: Vec<u32> = a.iter().map(|&x| f(x)).collect();
            let mut b = base.clone();
            merge_in_place_map(&mut b, kept, &rest, slots, f);
            assert_eq!(b, want, "kept {kept:?}, slots {slots:?}");
        }
    }

    #[test]
    fn runs_gather_in_place_like_single_indices() {
        let v: Vec<u64> = (0..20).map(|i| i * 7 + 1).collect();
        for idx in [
            vec![],
            vec![3],
            vec![0, 1, 2, 9, 10, 4, 5, 19],
            vec![5, 4, 3, 2],
        ] {
            let runs = Runs::of(&idx);
            let want: Vec<u64> = idx.iter().map(|&i| v[i as usize]).collect();
            let mut got = v.clone();
            runs.gather_in_place(&mut got);
            assert_eq!(got, want);
        }
        assert_eq!(Runs::of(&[0, 1, 2, 9, 10, 4]).identity_prefix(), 3);
        assert_eq!(Runs::of(&[1, 0]).identity_prefix(), 0);
        assert_eq!(Runs::of(&[0, 1, 2, 9, 10]).runs, vec![(0, 3), (9, 2)]);
    }

    /// The galloping search finds the end of the prefix wherever it is.
    #[test]
    fn gallop_finds_the_end_of_the_prefix() {
        for n in 0..40 {
            for end in 0..=n {
                assert_eq!(gallop(n, |i| i < end), end, "n {n}, end {end}");
            }
        }
    }

    /// The children's keys and census on both paths (64-bit words while shallow, the
    /// general one once an element is deep) against `child_key` one by one.
    #[test]
    fn children_keys_and_census_match_child_key() {
        for deep in [false, true] {
            let levels: Vec<u8> = if deep {
                vec![3, 59, 60, 7, 61]
            } else {
                vec![3, 4, 5, 7, 58]
            };
            let mut parents = Keys::with_capacity(5);
            let mut k = root_key(1);
            for &l in &levels {
                // A key with bits only above its level's.
                k = child_key(k, l.saturating_sub(1), true)
                    & !((1u128 << (126 - u32::from(l))) - 1);
                parents.push(k);
            }
            let bits = [0u8, 2, 6, 3, 7];
            let keep = |t: usize| t != 3;
            let (got, census) = parents.children(&levels, &bits, keep, 16);
            let mut want = Vec::new();
            for t in (0..5).filter(|&t| keep(t)) {
                let (k, l, b) = (parents.get(t), levels[t], bits[t]);
                if b == 0 {
                    want.push(k);
                    continue;
                }
                for (second, split) in [(false, b & 4 != 0), (true, b & 1 != 0)] {
                    let c = child_key(k, l, second);
                    if split {
                        want.extend([child_key(c, l + 1, false), child_key(c, l + 1, true)]);
                    } else {
                        want.push(c);
                    }
                }
            }
            let got: Vec<EKey> = (0..got.len()).map(|i| got.get(i)).collect();
            assert_eq!(got, want, "deep {deep}");
            let sum = want.iter().fold(0u64, |s, &k| s.wrapping_add(mix(k)));
            assert_eq!(census, [want.len() as u64, sum]);
        }
    }

    #[test]
    fn merge_in_place_drops_and_inserts() {
        // Entries 0..8 kept but 2, 3 and 6; 8, 9 and 10 arrive: 10 first, 9 after 4, 8 last.
        let mut v: Vec<u32> = (0..11).collect();
        let kept = [(0, 2), (4, 2), (7, 1)];
        merge_in_place(&mut v, &kept, &[10, 9, 8], &[0, 3, 5]);
        assert_eq!(v, vec![10, 0, 1, 4, 9, 5, 7, 8]);
        let mut v: Vec<u32> = (0..4).collect();
        merge_in_place(&mut v, &[(0, 4)], &[], &[]);
        assert_eq!(v, vec![0, 1, 2, 3]);
        merge_in_place(&mut v, &[(1, 2)], &[], &[]);
        assert_eq!(v, vec![1, 2]);
    }

    #[test]
    fn child_keys_follow_the_curve() {
        let r = root_key(2);
        let a = child_key(r, 0, false);
        let b = child_key(r, 0, true);
        assert!(r <= a && a < b && b < root_key(3));
        let aa = child_key(a, 1, false);
        let ab = child_key(a, 1, true);
        assert!(aa < ab && ab < b);
        // The deepest allowed children still have a bit of their own.
        let mut k = root_key(3);
        for l in 0..LEVEL_LIMIT {
            k = child_key(k, l, true);
        }
        assert_eq!(k, u128::MAX);
    }

    #[test]
    fn births_order_like_the_serial_numbering() {
        let e = child_key(root_key(1), 0, true);
        let f = child_key(root_key(2), 0, false);
        // Same step: lower bisection level first (an element's edges 0 and 2 are bisected
        // one level below its refinement edge); same level: curve order, then edge 1, 0, 2.
        assert!(Birth::created(3, f, 4, 1) < Birth::created(3, e, 4, 0));
        assert!(Birth::created(3, e, 4, 1) < Birth::created(3, f, 4, 1));
        assert!(Birth::created(3, e, 4, 0) < Birth::created(3, e, 4, 2));
        assert!(Birth::created(3, e, 4, 2) < Birth::created(3, f, 4, 0));
        assert!(Birth::created(3, e, 5, 1) < Birth::created(3, f, 4, 0));
        assert!(Birth::created(3, e, 6, 1) > Birth::created(3, f, 4, 0));
        assert!(Birth::created(4, e, 1, 1) > Birth::created(3, f, 9, 0));
        assert!(Birth::initial(4) < Birth::created(1, root_key(0), 0, 1));
    }

    #[test]
    fn keys_keep_the_low_half_once_an_element_is_deep() {
        let shallow = child_key(root_key(1), 0, true);
        let mut deep = root_key(2);
        for l in 0..70 {
            deep = child_key(deep, l, l % 3 == 0);
        }
        let mut k: Keys = [shallow, root_key(3)].into_iter().collect();
        assert!(k.lo.is_none());
        k.push(deep);
        assert!(k.lo.is_some());
        assert_eq!((k.get(0), k.get(1), k.get(2)), (shallow, root_key(3), deep));
        assert_eq!(k.gallop(0..2, root_key(2)), 1);
        let sorted: Keys = (0..3).map(root_key).chain([deep, root_key(3)]).collect();
        for a in 0..5 {
            for b in a..=5 {
                for x in [0, 2, 3] {
                    let k = root_key(x) + 1;
                    let first = (a..b).find(|&i| sorted.get(i) >= k).unwrap_or(b);
                    assert_eq!(sorted.gallop(a..b, k), first);
                }
            }
        }
    }

    #[test]
    fn vertex_keys_round_trip() {
        for p in [
            [0.0, 0.0],
            [0.5, 0.25],
            [1.0, 0.75],
            [3.0f64.powi(-3), 2f64.powi(-40)],
        ] {
            assert_eq!(key_point(vertex_key(p)), p);
        }
        assert_eq!(edge_key([0.0, 0.0], [1.0, 0.5]), vertex_key([0.5, 0.25]));
        assert_ne!(mix(1), mix(2));
    }
}
