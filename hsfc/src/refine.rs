//! Locating weight targets on the curve: adaptive binning refined only where a target falls.
//!
//! The objects, sorted by key, have prefix weights `P`. For a target `q` (in fixed-point
//! weight units, `q < W`) we look for the *atom* `a` (the set of objects sharing one key) that
//! straddles it: `P(before a) <= q < P(before a) + w_a`. We never sort: a histogram of the
//! weight over the top `B0` key bits (made in the key pass) puts each target in one bin; the
//! points of those bins only are gathered, and each round histograms them over the next few
//! key bits, per active bin, keeping only the sub-bins that hold a target. A sub-bin holding
//! a single object (count 1) is resolved at once: its key is the sum of the keys in the bin.
//! All histograms are integer sums, reduced with `sum_u64`, so every rank and every thread
//! count takes the same decisions.

use crate::dist::Reduce;
use crate::exec::Exec;

/// Key bits in the histogram made by the key pass.
pub(crate) const B0: u32 = 14;

/// Fixed-point weights: `q_i = ⌊w_i·2^S + ½⌋` (or 1 per object for unit weights).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Quant<'a> {
    Unit,
    Scaled { w: &'a [f64], a: f64, b: f64 },
}

impl Quant<'_> {
    #[inline(always)]
    pub(crate) fn q(&self, i: usize) -> u64 {
        match *self {
            Quant::Unit => 1,
            Quant::Scaled { w, a, b } => (w[i] * a * b + 0.5) as u64,
        }
    }
}

/// What a target found: the straddling atom's key, the weight before it and its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub key: u64,
    pub before: u64,
    pub weight: u64,
}

#[derive(Clone, Copy)]
struct Cand {
    key: u64,
    w: u64,
    slot: u32,
}

struct Active {
    prefix: u64,
    base: u64,
}

/// Finds the atom straddling each of `queries` (sorted, distinct, each `< W`).
///
/// `hist0` is the global weight histogram over the top [`B0`] bits of the `key_bits`-bit keys.
/// Every rank calls this with the same `hist0` and `queries`.
pub(crate) fn locate<R: Reduce>(
    comm: &R,
    exec: &Exec,
    keys: &[u64],
    quant: Quant<'_>,
    hist0: &[u64],
    key_bits: u32,
    queries: &[u64],
) -> Result<Vec<Found>, R::Error> {
    let mut found: Vec<Option<Found>> = vec![None; queries.len()];
    if queries.is_empty() {
        return Ok(Vec::new());
    }
    // Level 0: the key pass's histogram.
    let mut active: Vec<Active> = Vec::new();
    let mut slot_of_query: Vec<u32> = vec![0; queries.len()];
    {
        let (mut b, mut cum) = (0usize, 0u64);
        for (qi, &q) in queries.iter().enumerate() {
            while cum + hist0[b] <= q {
                cum += hist0[b];
                b += 1;
            }
            if active.last().is_none_or(|a| a.prefix != b as u64) {
                active.push(Active {
                    prefix: b as u64,
                    base: cum,
                });
            }
            slot_of_query[qi] = (active.len() - 1) as u32;
        }
    }
    // Gather the local objects of the active bins.
    let shift0 = key_bits - B0;
    let mut slot_of_bin = vec![u32::MAX; 1 << B0];
    for (s, a) in active.iter().enumerate() {
        slot_of_bin[a.prefix as usize] = s as u32;
    }
    let parts = exec.map_ranges(keys.len(), |r| {
        let mut out = Vec::new();
        for i in r {
            let key = keys[i];
            let s = slot_of_bin[(key >> shift0) as usize];
            if s != u32::MAX {
                out.push(Cand {
                    key,
                    w: quant.q(i),
                    slot: s,
                });
            }
        }
        out
    });
    let mut cands: Vec<Cand> = if parts.len() == 1 {
        parts.into_iter().next().unwrap_or_default()
    } else {
        parts.concat()
    };

    let mut depth = B0;
    let mut pending: Vec<usize> = (0..queries.len()).collect();
    while !pending.is_empty() {
        let nact = active.len();
        let mut bits = (key_bits - depth).min(8);
        while bits > 1 && (nact << bits) > (1 << 18) {
            bits -= 1;
        }
        let sub = 1usize << bits;
        let shift = key_bits - depth - bits;
        let mask = (sub - 1) as u64;
        // Weight, count and key sum per (active bin, sub-bin).
        let accumulate = |cs: &[Cand]| {
            let mut h = vec![0u64; nact * sub * 3];
            for c in cs {
                let idx = (c.slot as usize * sub + ((c.key >> shift) & mask) as usize) * 3;
                h[idx] += c.w;
                h[idx + 1] += 1;
                h[idx + 2] = h[idx + 2].wrapping_add(c.key);
            }
            h
        };
        let mut hist = if exec.parallel_for(cands.len()) {
            let per = exec.map_ranges(cands.len(), |r| accumulate(&cands[r]));
            let mut it = per.into_iter();
            let mut h = it.next().unwrap_or_default();
            for o in it {
                for (x, y) in h.iter_mut().zip(o) {
                    *x = x.wrapping_add(y);
                }
            }
            h
        } else {
            accumulate(&cands)
        };
        comm.sum_u64(&mut hist)?;

        let mut next_active: Vec<Active> = Vec::new();
        let mut remap = vec![u32::MAX; nact * sub];
        let mut still = Vec::new();
        // Walk state: (slot, sub-bin, weight before it).
        let mut walk: Option<(u32, usize, u64)> = None;
        for &qi in &pending {
            let q = queries[qi];
            let s = slot_of_query[qi];
            let (mut sb, mut cum) = match walk {
                Some((ws, sb, cum)) if ws == s => (sb, cum),
                _ => (0, active[s as usize].base),
            };
            let row = &hist[s as usize * sub * 3..(s as usize + 1) * sub * 3];
            while cum + row[sb * 3] <= q {
                cum += row[sb * 3];
                sb += 1;
            }
            walk = Some((s, sb, cum));
            let (w, count, keysum) = (row[sb * 3], row[sb * 3 + 1], row[sb * 3 + 2]);
            let prefix = (active[s as usize].prefix << bits) | sb as u64;
            if count == 1 {
                found[qi] = Some(Found {
                    key: keysum,
                    before: cum,
                    weight: w,
                });
            } else if depth + bits == key_bits {
                found[qi] = Some(Found {
                    key: prefix,
                    before: cum,
                    weight: w,
                });
            } else {
                let cell = s as usize * sub + sb;
                if remap[cell] == u32::MAX {
                    remap[cell] = next_active.len() as u32;
                    next_active.push(Active { prefix, base: cum });
                }
                slot_of_query[qi] = remap[cell];
                still.push(qi);
            }
        }
        pending = still;
        if !pending.is_empty() {
            cands.retain_mut(|c| {
                let cell = c.slot as usize * sub + ((c.key >> shift) & mask) as usize;
                c.slot = remap[cell];
                c.slot != u32::MAX
            });
        }
        active = next_active;
        depth += bits;
    }
    Ok(found
        .into_iter()
        .map(|f| f.expect("every query resolved"))
        .collect())
}
