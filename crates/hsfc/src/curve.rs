//! The Hilbert curve in 2-D and 3-D as a finite-state machine, and its table-driven encoder.
//!
//! The curve is the one of Skilling's transpose algorithm (J. Skilling, "Programming the
//! Hilbert curve", AIP Conf. Proc. 707, 2004): at each level, from the most significant bit
//! down, the bits of the point are transformed by a signed permutation of the axes (the
//! "state"), Gray-decoded into one base-2^n digit of the key, and the state for the next level
//! is updated. [`reference_key`] is a direct transcription of Skilling's loops (slow, obvious);
//! the tables below are generated from the same rules by exploring the reachable states, then
//! minimised, and composed so that one lookup handles 4 levels (2-D) or 3 levels (3-D).
//! Tests check the table encoder against the reference on full small grids, and check that
//! the curve is a Hilbert curve (a bijection whose consecutive cells are neighbours).

use crate::simd::Simd;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Bits per axis: 32 in 2-D (64-bit keys), 21 in 3-D (63-bit keys).
pub(crate) const fn bits_per_axis(dim: usize) -> u32 {
    if dim == 2 { 32 } else { 21 }
}

/// Number of key bits: 64 in 2-D, 63 in 3-D.
pub(crate) const fn key_bits(dim: usize) -> u32 {
    bits_per_axis(dim) * dim as u32
}

/// Bits per axis of a point's position inside its cell (both dimensions): the fine grid has
/// `bits_per_axis + SUB_BITS` bits per axis (53 in 2-D, 42 in 3-D).
pub(crate) const SUB_BITS: u32 = 21;

/// Number of sub-key bits (the curve continued inside a cell): 42 in 2-D, 63 in 3-D.
pub(crate) const fn sub_key_bits(dim: usize) -> u32 {
    SUB_BITS * dim as u32
}

/// Skilling's state before the Gray step: a signed permutation of the axes (`perm[i]` is the
/// raw axis read as transformed axis `i`, `flip` bit `i` inverts it) and the running parity `t`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct RawState {
    perm: [u8; 3],
    flip: u8,
    t: u8,
}

impl RawState {
    fn start(n: usize) -> Self {
        let mut perm = [0u8; 3];
        for (i, p) in perm.iter_mut().enumerate().take(n) {
            *p = i as u8;
        }
        RawState {
            perm,
            flip: 0,
            t: 0,
        }
    }

    /// One level: raw digit (bit `n-1-i` is axis `i`) -> (key digit, next state).
    fn step(self, n: usize, raw: u32) -> (u32, RawState) {
        let raw_bit = |axis: usize| (raw >> (n - 1 - axis)) & 1;
        let mut d = [0u32; 3];
        for (i, di) in d.iter_mut().enumerate().take(n) {
            *di = raw_bit(self.perm[i] as usize) ^ u32::from((self.flip >> i) & 1);
        }
        // Skilling's "inverse undo" at this level acts on the lower bits only: it composes
        // the transform used for the levels below.
        let mut next = self;
        for (i, &di) in d.iter().enumerate().take(n) {
            if di == 1 {
                next.flip ^= 1;
            } else if i != 0 {
                next.perm.swap(0, i);
                let (f0, fi) = ((next.flip) & 1, (next.flip >> i) & 1);
                next.flip = (next.flip & !(1 | (1 << i))) | fi | (f0 << i);
            }
        }
        // Gray encode, then xor with the parity of the higher levels' last Gray bit.
        let mut digit = 0u32;
        let mut g = 0u32;
        for (i, &di) in d.iter().enumerate().take(n) {
            g ^= di;
            digit |= (g ^ u32::from(self.t)) << (n - 1 - i);
        }
        next.t = self.t ^ g as u8;
        (digit, next)
    }
}

/// The generated tables for one dimension.
#[derive(Debug)]
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "states, levels: read by tests and Debug")
)]
pub(crate) struct Tables {
    /// Number of (minimised) states; state 0 is the start.
    pub states: usize,
    /// Levels per lookup in `multi`.
    pub levels: u32,
    /// `multi[(s << (n*levels)) | raw]` = `(digits << 6) | next_state`, where `raw` holds
    /// `levels` bits of each axis, axis 0 most significant (u16: 24 KiB in 3-D, fits L1).
    pub multi: Vec<u16>,
    /// `inv[s << n | digit]` = `(raw << 8) | next_state`: which child cell a key digit selects.
    pub inv: Vec<u32>,
}

fn build(n: usize, levels: u32) -> Tables {
    let fan = 1usize << n;
    // Explore the reachable states.
    let mut index: HashMap<RawState, usize> = HashMap::new();
    let mut order = vec![RawState::start(n)];
    index.insert(order[0], 0);
    let mut step: Vec<(u32, usize)> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let s = order[i];
        for raw in 0..fan as u32 {
            let (digit, next) = s.step(n, raw);
            let id = *index.entry(next).or_insert_with(|| {
                order.push(next);
                order.len() - 1
            });
            step.push((digit, id));
        }
        i += 1;
    }
    // Moore minimisation: states are equivalent when they emit the same digits and go to
    // equivalent states.
    let count = order.len();
    let mut class: Vec<usize> = vec![0; count];
    loop {
        let mut sig: HashMap<Vec<(u32, usize)>, usize> = HashMap::new();
        let mut next_class = vec![0; count];
        // Keep the start state's class number 0 by visiting it first.
        for s in 0..count {
            let key: Vec<(u32, usize)> = (0..fan)
                .map(|r| {
                    let (d, t) = step[s * fan + r];
                    (d, class[t])
                })
                .chain(std::iter::once((u32::MAX, class[s])))
                .collect();
            let len = sig.len();
            next_class[s] = *sig.entry(key).or_insert(len);
        }
        let stable = sig.len() == class.iter().collect::<std::collections::HashSet<_>>().len();
        class = next_class;
        if stable {
            break;
        }
    }
    let states = class.iter().max().map_or(1, |m| m + 1);
    assert!(states <= 64, "hilbert tables: too many states");
    // One representative per class.
    let mut rep = vec![usize::MAX; states];
    for s in 0..count {
        if rep[class[s]] == usize::MAX {
            rep[class[s]] = s;
        }
    }
    let single = |c: usize, raw: usize| -> (u32, usize) {
        let (d, t) = step[rep[c] * fan + raw];
        (d, class[t])
    };
    let mut inv = vec![0u32; states * fan];
    for c in 0..states {
        for raw in 0..fan {
            let (d, t) = single(c, raw);
            inv[(c << n) | d as usize] = ((raw as u32) << 8) | t as u32;
        }
    }
    let width = n * levels as usize;
    // Padded to 32 states, so that a masked index needs no bounds check in the encoders.
    let mut multi = vec![0u16; 32 << width];
    for c in 0..states {
        for raw in 0..(1usize << width) {
            let mut s = c;
            let mut digits = 0u32;
            for l in 0..levels as usize {
                // Level l (0 = most significant) takes bit (levels-1-l) of every axis.
                let mut r = 0usize;
                for axis in 0..n {
                    let axis_bits = raw >> ((n - 1 - axis) * levels as usize);
                    let bit = (axis_bits >> (levels as usize - 1 - l)) & 1;
                    r |= bit << (n - 1 - axis);
                }
                let (d, t) = single(s, r);
                digits = (digits << n) | d;
                s = t;
            }
            multi[(c << width) | raw] = ((digits << 6) | s as u32) as u16;
        }
    }
    Tables {
        states,
        levels,
        multi,
        inv,
    }
}

/// The tables for dimension 2 or 3, built once.
pub(crate) fn tables(dim: usize) -> &'static Tables {
    static T2: OnceLock<Tables> = OnceLock::new();
    static T3: OnceLock<Tables> = OnceLock::new();
    match dim {
        2 => T2.get_or_init(|| build(2, 4)),
        3 => T3.get_or_init(|| build(3, 3)),
        _ => unreachable!("dimension checked by the caller"),
    }
}

/// 2-D key of cell `(x, y)` (32 bits each), table driven, 8 lookups.
#[inline(always)]
pub(crate) fn key2(t: &Tables, x: u32, y: u32) -> u64 {
    let multi: &[u16; 32 << 8] = t.multi[..].try_into().expect("2-D table size");
    let mut s = 0usize;
    let mut key = 0u64;
    let mut shift = 28i32;
    while shift >= 0 {
        let idx = ((((x >> shift) & 15) << 4) | ((y >> shift) & 15)) as usize;
        let e = multi[((s << 8) | idx) & ((32 << 8) - 1)];
        key = (key << 8) | u64::from(e >> 6);
        s = (e & 63) as usize;
        shift -= 4;
    }
    key
}

/// 3-D key of cell `(x, y, z)` (21 bits each), table driven, 7 lookups.
#[inline(always)]
pub(crate) fn key3(t: &Tables, x: u32, y: u32, z: u32) -> u64 {
    key3_from(t, 0, x, y, z)
}

/// [`key3`] of `(x, y, z)` in the orientation of `state` (inside a cell, the sub-key).
#[inline(always)]
fn key3_from(t: &Tables, state: usize, x: u32, y: u32, z: u32) -> u64 {
    let multi: &[u16; 32 << 9] = t.multi[..].try_into().expect("3-D table size");
    let mut s = state;
    let mut key = 0u64;
    let mut shift = 18i32;
    while shift >= 0 {
        let idx =
            ((((x >> shift) & 7) << 6) | (((y >> shift) & 7) << 3) | ((z >> shift) & 7)) as usize;
        let e = multi[((s << 9) | idx) & ((32 << 9) - 1)];
        key = (key << 9) | u64::from(e >> 6);
        s = (e & 63) as usize;
        shift -= 3;
    }
    key
}

/// The 3-D table of the bulk key pass: entry `(s << 9) | raw` (`raw` as in [`Tables::multi`]:
/// 3 levels of each axis, axis 0 most significant) is `digits | (next << 9)`, so that the next
/// lookup's base is the entry masked by [`STATE3`], and a vector gather reads one `u32` per
/// lane (64 KiB, padded to 32 states like `multi`).
fn step3() -> &'static [u32; 32 << 9] {
    static T: OnceLock<Box<[u32; 32 << 9]>> = OnceLock::new();
    T.get_or_init(|| {
        let t = tables(3);
        let v: Vec<u32> = t
            .multi
            .iter()
            .map(|&e| u32::from(e >> 6) | (u32::from(e & 63) << 9))
            .collect();
        v.into_boxed_slice().try_into().expect("3-D table size")
    })
}

/// The state bits of a [`step3`] entry, in place (the next lookup's base).
const STATE3: u32 = 31 << 9;

/// Keys of the 3-D cells `(x[j], y[j], z[j])` (21 bits each) into `out[j]`; all four slices
/// have the same length. Table driven like [`key3`], with the vector gathers of `simd` (AVX-512
/// or AVX2; the same lookups, so the same keys), else eight walks interleaved. A path the
/// processor lacks is never taken (the next one down runs).
#[inline]
pub(crate) fn keys3(simd: Simd, x: &[u32], y: &[u32], z: &[u32], out: &mut [u64]) {
    assert!(
        x.len() == out.len() && y.len() == out.len() && z.len() == out.len(),
        "keys3: lengths differ"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if simd >= Simd::Avx512 && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the processor supports AVX-512F (checked just above).
            unsafe { keys3_avx512(x, y, z, out) };
            return;
        }
        if simd >= Simd::Avx2 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor supports AVX2 (checked just above).
            unsafe { keys3_avx2(x, y, z, out) };
            return;
        }
    }
    let _ = simd;
    keys3_portable(x, y, z, out);
}

/// [`keys3`] with AVX2: 32 cells at a time (four vectors of 8 lanes, so that four chains of
/// gathers overlap), the same table lookups as [`keys3_avx512`]; the rest through
/// [`keys3_portable`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[expect(
    clippy::needless_range_loop,
    reason = "the four vectors of each group side by side"
)]
fn keys3_avx2(x: &[u32], y: &[u32], z: &[u32], out: &mut [u64]) {
    use std::arch::x86_64::*;
    const V: usize = 4;
    const W: usize = 8 * V;
    let t = step3();
    let n = out.len() / W * W;
    let seven = _mm256_set1_epi32(7);
    let low9 = _mm256_set1_epi32(511);
    let state = _mm256_set1_epi32(STATE3 as i32);
    for i in (0..n).step_by(W) {
        // SAFETY: i + 32 <= n <= the length of every slice (asserted by `keys3`), and every
        // gather index is below 32 << 9, the table's length (a state below 32 shifted by 9,
        // or'ed with 9 bits).
        unsafe {
            let load = |v: &[u32], h: usize| {
                _mm256_loadu_si256(v.as_ptr().add(i + 8 * h).cast::<__m256i>())
            };
            let vx: [__m256i; V] = std::array::from_fn(|h| load(x, h));
            let vy: [__m256i; V] = std::array::from_fn(|h| load(y, h));
            let vz: [__m256i; V] = std::array::from_fn(|h| load(z, h));
            let mut e = [_mm256_setzero_si256(); V];
            // Digits of levels 0-2 (27 bits), 3-5 (27 bits) and 6 (9 bits).
            let mut acc = [[_mm256_setzero_si256(); V]; 3];
            for (g, shift) in [18i32, 15, 12, 9, 6, 3, 0].into_iter().enumerate() {
                let a = g / 3;
                let sh = _mm_cvtsi32_si128(shift);
                for h in 0..V {
                    let ix = _mm256_slli_epi32::<6>(_mm256_and_si256(
                        _mm256_srl_epi32(vx[h], sh),
                        seven,
                    ));
                    let iy = _mm256_slli_epi32::<3>(_mm256_and_si256(
                        _mm256_srl_epi32(vy[h], sh),
                        seven,
                    ));
                    let iz = _mm256_and_si256(_mm256_srl_epi32(vz[h], sh), seven);
                    let base = _mm256_and_si256(e[h], state);
                    let idx = _mm256_or_si256(_mm256_or_si256(ix, iy), _mm256_or_si256(iz, base));
                    e[h] = _mm256_i32gather_epi32::<4>(t.as_ptr().cast::<i32>(), idx);
                    acc[a][h] = _mm256_or_si256(
                        _mm256_slli_epi32::<9>(acc[a][h]),
                        _mm256_and_si256(e[h], low9),
                    );
                }
            }
            for h in 0..V {
                let wide = |v: __m256i, upper: bool| {
                    _mm256_cvtepu32_epi64(if upper {
                        _mm256_extracti128_si256::<1>(v)
                    } else {
                        _mm256_castsi256_si128(v)
                    })
                };
                for (q, upper) in [false, true].into_iter().enumerate() {
                    let key = _mm256_or_si256(
                        _mm256_or_si256(
                            _mm256_slli_epi64::<36>(wide(acc[0][h], upper)),
                            _mm256_slli_epi64::<9>(wide(acc[1][h], upper)),
                        ),
                        wide(acc[2][h], upper),
                    );
                    _mm256_storeu_si256(out.as_mut_ptr().add(i + 8 * h + 4 * q).cast(), key);
                }
            }
        }
    }
    keys3_portable(&x[n..], &y[n..], &z[n..], &mut out[n..]);
}

/// [`keys3`] without vector gathers: eight table walks interleaved, so that their load
/// latencies overlap. Kept out of line so that it is not auto-vectorised into something slower.
#[inline(never)]
pub(crate) fn keys3_portable(x: &[u32], y: &[u32], z: &[u32], out: &mut [u64]) {
    const L: usize = 8;
    let t = step3();
    // Up to L walks side by side (L exactly, except for the last few).
    #[inline(always)]
    fn walk(t: &[u32; 32 << 9], x: &[u32], y: &[u32], z: &[u32], out: &mut [u64]) {
        let mut e = [0u32; L];
        let mut key = [0u64; L];
        let mut shift = 18i32;
        while shift >= 0 {
            for l in 0..out.len() {
                let raw = (((x[l] >> shift) & 7) << 6)
                    | (((y[l] >> shift) & 7) << 3)
                    | ((z[l] >> shift) & 7);
                e[l] = t[((e[l] & STATE3) | raw) as usize & ((32 << 9) - 1)];
                key[l] = (key[l] << 9) | u64::from(e[l] & 511);
            }
            shift -= 3;
        }
        out.copy_from_slice(&key[..out.len()]);
    }
    let full = out.len() / L * L;
    for start in (0..full).step_by(L) {
        let end = start + L;
        walk(
            t,
            &x[start..end],
            &y[start..end],
            &z[start..end],
            &mut out[start..end],
        );
    }
    walk(t, &x[full..], &y[full..], &z[full..], &mut out[full..]);
}

/// [`keys3`] with AVX-512: 32 cells at a time (two vectors of 16 lanes, so that two chains of
/// gathers overlap); the rest through [`keys3_portable`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[expect(
    clippy::needless_range_loop,
    reason = "the two halves of each register pair side by side"
)]
fn keys3_avx512(x: &[u32], y: &[u32], z: &[u32], out: &mut [u64]) {
    use std::arch::x86_64::*;
    const W: usize = 32;
    let t = step3();
    let n = out.len() / W * W;
    let seven = _mm512_set1_epi32(7);
    let low9 = _mm512_set1_epi32(511);
    let state = _mm512_set1_epi32(STATE3 as i32);
    for i in (0..n).step_by(W) {
        // SAFETY: i + 32 <= n <= the length of every slice (asserted by `keys3`), and every
        // gather index is below 32 << 9, the table's length (a state below 32 shifted by 9,
        // or'ed with 9 bits).
        unsafe {
            let load = |v: &[u32], h: usize| _mm512_loadu_si512(v.as_ptr().add(i + 16 * h).cast());
            let vx = [load(x, 0), load(x, 1)];
            let vy = [load(y, 0), load(y, 1)];
            let vz = [load(z, 0), load(z, 1)];
            let mut e = [_mm512_setzero_si512(); 2];
            // Digits of levels 0-2 (27 bits), 3-5 (27 bits) and 6 (9 bits).
            let mut acc = [[_mm512_setzero_si512(); 2]; 3];
            for (g, shift) in [18u32, 15, 12, 9, 6, 3, 0].into_iter().enumerate() {
                let a = if g < 3 {
                    0
                } else if g < 6 {
                    1
                } else {
                    2
                };
                for h in 0..2 {
                    let sh = _mm_cvtsi32_si128(shift as i32);
                    let ix = _mm512_slli_epi32::<6>(_mm512_and_si512(
                        _mm512_srl_epi32(vx[h], sh),
                        seven,
                    ));
                    let iy = _mm512_slli_epi32::<3>(_mm512_and_si512(
                        _mm512_srl_epi32(vy[h], sh),
                        seven,
                    ));
                    let iz = _mm512_and_si512(_mm512_srl_epi32(vz[h], sh), seven);
                    let base = _mm512_and_si512(e[h], state);
                    let idx = _mm512_or_si512(_mm512_or_si512(ix, iy), _mm512_or_si512(iz, base));
                    e[h] = _mm512_i32gather_epi32::<4>(idx, t.as_ptr().cast());
                    acc[a][h] = _mm512_or_si512(
                        _mm512_slli_epi32::<9>(acc[a][h]),
                        _mm512_and_si512(e[h], low9),
                    );
                }
            }
            for h in 0..2 {
                let wide = |v: __m512i, upper: bool| {
                    _mm512_cvtepu32_epi64(if upper {
                        _mm512_extracti64x4_epi64::<1>(v)
                    } else {
                        _mm512_castsi512_si256(v)
                    })
                };
                for (q, upper) in [false, true].into_iter().enumerate() {
                    let key = _mm512_or_si512(
                        _mm512_or_si512(
                            _mm512_slli_epi64::<36>(wide(acc[0][h], upper)),
                            _mm512_slli_epi64::<9>(wide(acc[1][h], upper)),
                        ),
                        wide(acc[2][h], upper),
                    );
                    _mm512_storeu_si512(out.as_mut_ptr().add(i + 16 * h + 8 * q).cast(), key);
                }
            }
        }
    }
    keys3_portable(&x[n..], &y[n..], &z[n..], &mut out[n..]);
}

/// Spreads the low 16 bits of `v` to the even bit positions of a u32.
#[inline(always)]
fn spread16(v: u32) -> u32 {
    let mut v = v & 0xFFFF;
    v = (v | (v << 8)) & 0x00FF_00FF;
    v = (v | (v << 4)) & 0x0F0F_0F0F;
    v = (v | (v << 2)) & 0x3333_3333;
    (v | (v << 1)) & 0x5555_5555
}

/// 2-D key without tables: the state machine's walk over the 32 levels computed as a parallel
/// prefix scan over the bits (5 rounds of word-wide bit operations on u32, no loads, no
/// branches), so a loop over many points vectorises (4 or more points per instruction). The
/// method is the one described by F. Giesen ("2D Hilbert curves in O(1)", 2016) for 16-bit
/// coordinates, widened here to 32; it yields exactly Skilling's curve (checked against
/// [`key2`] and the reference in the tests).
#[cfg(test)]
pub(crate) fn key2_scan(x: u32, y: u32) -> u64 {
    let (hi, lo) = key2_scan_halves(x, y);
    (u64::from(hi) << 32) | u64::from(lo)
}

/// [`key2_scan`] as its high and low 32-bit halves (u32 only, which vectorises best).
#[inline(always)]
pub(crate) fn key2_scan_halves(x: u32, y: u32) -> (u32, u32) {
    const M: u32 = u32::MAX;
    // Each of the four words holds one bit per level: the state transform so far.
    let (mut sa, mut sb, mut sc, mut sd);
    {
        let a = x ^ y;
        let b = M ^ a;
        let c = M ^ (x | y);
        let d = x & (y ^ M);
        sa = a | (b >> 1);
        sb = (a >> 1) ^ a;
        sc = ((c >> 1) ^ (b & (d >> 1))) ^ c;
        sd = ((a & (c >> 1)) ^ (d >> 1)) ^ d;
    }
    // Rounds with shifts 2, 4, 8, 16, unrolled so that the compiler sees straight-line code.
    macro_rules! round {
        ($shift:expr) => {{
            let (a, b, c, d) = (sa, sb, sc, sd);
            sa = (a & (a >> $shift)) ^ (b & (b >> $shift));
            sb = (a & (b >> $shift)) ^ (b & ((a ^ b) >> $shift));
            sc ^= (a & (c >> $shift)) ^ (b & (d >> $shift));
            sd ^= (b & (c >> $shift)) ^ ((a ^ b) & (d >> $shift));
        }};
    }
    round!(2);
    round!(4);
    round!(8);
    round!(16);
    let _ = (sa, sb);
    let a = sc ^ (sc >> 1);
    let b = sd ^ (sd >> 1);
    let i0 = x ^ y;
    let i1 = b | (M ^ (i0 | a));
    let lo = (spread16(i1) << 1) | spread16(i0);
    let hi = (spread16(i1 >> 16) << 1) | spread16(i0 >> 16);
    (hi, lo)
}

/// Key of a cell given as one coordinate per axis (`cell.len()` = 2 or 3).
pub(crate) fn key_of_cell(cell: &[u32]) -> u64 {
    let t = tables(cell.len());
    if cell.len() == 2 {
        key2(t, cell[0], cell[1])
    } else {
        key3(t, cell[0], cell[1], cell[2])
    }
}

/// Walks `bits` levels of the curve from `state` over the coordinates `c` (`c.len()` = n axes,
/// `bits` bits each, a multiple of `t.levels`): the key digits and the state reached.
#[inline]
fn walk(t: &Tables, mut state: usize, c: &[u32], bits: u32) -> (u64, usize) {
    let n = c.len();
    let lv = t.levels;
    let width = n as u32 * lv;
    let mask = (1u32 << lv) - 1;
    let mut key = 0u64;
    let mut shift = bits as i32 - lv as i32;
    while shift >= 0 {
        let mut idx = 0usize;
        for (a, &v) in c.iter().enumerate() {
            idx |= (((v >> shift) & mask) as usize) << ((n - 1 - a) as u32 * lv);
        }
        let e = t.multi[(state << width) | idx];
        key = (key << width) | u64::from(e >> 6);
        state = (e & 63) as usize;
        shift -= lv as i32;
    }
    (key, state)
}

/// Fine key of a point given by its cell and its position inside the cell (`sub`,
/// [`SUB_BITS`] bits per axis): the cell's key in the high 64 bits and, in the low 64, the
/// sub-key: the curve continued inside the cell, i.e. the key of `sub` in the orientation the
/// curve has in that cell. The curve is self-similar, so this is the Hilbert key of the fine
/// coordinate `cell·2^SUB_BITS + sub` (split into two words), and fine keys order points along
/// the same curve as cell keys, only more finely: `fine >> 64` is [`key_of_cell`].
pub(crate) fn fine_key_of_cell(cell: &[u32], sub: &[u32]) -> u128 {
    let (key, state) = walk(tables(cell.len()), 0, cell, bits_per_axis(cell.len()));
    (u128::from(key) << 64) | u128::from(sub_key(state, sub))
}

/// The curve's state inside the cell whose key is `key` (`dim` 2 or 3): the state the walk of
/// the cell's coordinates ends in, found from the key's digits (the inverse table), so that
/// the points of one cell need it once ([`sub_key`]).
pub(crate) fn state_of_key(key: u64, dim: usize) -> usize {
    let t = tables(dim);
    let mask = (1u64 << dim) - 1;
    let mut state = 0usize;
    for level in (0..bits_per_axis(dim)).rev() {
        let digit = ((key >> (level * dim as u32)) & mask) as usize;
        state = (t.inv[(state << dim) | digit] & 255) as usize;
    }
    state
}

/// The sub-key (the low word of the fine key, see [`fine_key_of_cell`]) of the position `sub`
/// ([`SUB_BITS`] bits per axis) inside a cell where the curve is in `state`
/// ([`state_of_key`]).
pub(crate) fn sub_key(state: usize, sub: &[u32]) -> u64 {
    let n = sub.len();
    let t = tables(n);
    // In 3-D the sub-key is 7 whole lookups, as a cell's key: the same walk from `state`.
    const _: () = assert!(SUB_BITS == 21);
    if let &[x, y, z] = sub {
        return key3_from(t, state, x, y, z);
    }
    // Pad the sub-coordinates to whole lookups (in 2-D, 21 levels to 24) and drop the padding
    // levels' digits: the digits of a level depend only on the levels above it.
    let lv = t.levels;
    let pad = (lv - SUB_BITS % lv) % lv;
    let mut padded = [0u32; 3];
    for (p, &s) in padded.iter_mut().zip(sub) {
        *p = s << pad;
    }
    let (sk, _) = walk(t, state, &padded[..n], SUB_BITS + pad);
    sk >> (n as u32 * pad)
}

/// Converts a contiguous Hilbert index over the fine grid (`key_bits + sub_key_bits` bits)
/// into the fine key layout (cell key in the high word, sub-key in the low word).
#[inline]
pub(crate) fn fine_from_index(index: u128, dim: usize) -> u128 {
    let sb = sub_key_bits(dim);
    ((index >> sb) << 64) | (index & ((1u128 << sb) - 1))
}

/// Skilling's AxestoTranspose followed by bit interleaving, transcribed loop for loop: the slow
/// reference for the table encoder. `b` bits per axis, `x.len()` axes; axis 0 gives the most
/// significant bit of each key digit.
#[cfg(test)]
pub(crate) fn reference_key(x: &[u32], b: u32) -> u64 {
    let x: Vec<u64> = x.iter().map(|&v| u64::from(v)).collect();
    reference_key_wide(&x, b) as u64
}

/// [`reference_key`] for up to 64 bits per axis and 128-bit keys (fine grids).
#[cfg(test)]
pub(crate) fn reference_key_wide(x: &[u64], b: u32) -> u128 {
    let n = x.len();
    let mut x: Vec<u64> = x.to_vec();
    let m = 1u64 << (b - 1);
    // Inverse undo.
    let mut q = m;
    while q > 1 {
        let p = q - 1;
        for i in 0..n {
            if x[i] & q != 0 {
                x[0] ^= p;
            } else {
                let t = (x[0] ^ x[i]) & p;
                x[0] ^= t;
                x[i] ^= t;
            }
        }
        q >>= 1;
    }
    // Gray encode.
    for i in 1..n {
        x[i] ^= x[i - 1];
    }
    let mut t = 0u64;
    let mut q = m;
    while q > 1 {
        if x[n - 1] & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    for v in x.iter_mut() {
        *v ^= t;
    }
    // Interleave the transposed bits into one key.
    let mut key = 0u128;
    for bit in (0..b).rev() {
        for v in &x {
            key = (key << 1) | u128::from((v >> bit) & 1);
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random words (xorshift64).
    fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    fn fast(cell: &[u32], b: u32) -> u64 {
        // Place a b-bit grid in the top bits of the full resolution, so the table key's top
        // n*b bits are the b-level key.
        let full = bits_per_axis(cell.len());
        let shifted: Vec<u32> = cell.iter().map(|&c| c << (full - b)).collect();
        key_of_cell(&shifted) >> (key_bits(cell.len()) - cell.len() as u32 * b)
    }

    #[test]
    fn state_counts_are_small() {
        // The minimised machines: 4 states in 2-D (the classical count); 24 in 3-D, where
        // Skilling's parity bit doubles the 12 orientations.
        assert_eq!(tables(2).states, 4);
        assert_eq!(tables(3).states, 24);
    }

    #[test]
    fn table_encoder_matches_reference_on_full_grids() {
        // Every cell of a 64x64 grid and of a 16x16x16 grid.
        for x in 0..64u32 {
            for y in 0..64u32 {
                assert_eq!(
                    fast(&[x, y], 6),
                    reference_key(&[x, y], 6),
                    "cell ({x},{y})"
                );
            }
        }
        for x in 0..16u32 {
            for y in 0..16u32 {
                for z in 0..16u32 {
                    assert_eq!(fast(&[x, y, z], 4), reference_key(&[x, y, z], 4));
                }
            }
        }
    }

    #[test]
    fn table_encoder_matches_reference_at_full_resolution() {
        // Pseudo-random cells over the whole 32-bit (2-D) and 21-bit (3-D) range.
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let (x, y) = (next() as u32, next() as u32);
            assert_eq!(key_of_cell(&[x, y]), reference_key(&[x, y], 32));
            let m = (1u32 << 21) - 1;
            let c = [next() as u32 & m, next() as u32 & m, next() as u32 & m];
            assert_eq!(key_of_cell(&c), reference_key(&c, 21));
        }
    }

    /// The defining properties of a Hilbert curve on a full grid: the keys are a bijection
    /// onto 0..cells and consecutive keys are face neighbours; it starts at the origin.
    fn check_hilbert(n: usize, b: u32) {
        let side = 1u32 << b;
        let cells = 1usize << (n as u32 * b);
        let mut at = vec![None; cells];
        let mut cell = vec![0u32; n];
        for idx in 0..cells {
            for (a, c) in cell.iter_mut().enumerate() {
                *c = ((idx >> (a as u32 * b)) as u32) & (side - 1);
            }
            let k = fast(&cell, b) as usize;
            assert!(at[k].is_none(), "key {k} used twice");
            at[k] = Some(cell.clone());
        }
        let at: Vec<Vec<u32>> = at.into_iter().map(|c| c.expect("every key used")).collect();
        assert!(at[0].iter().all(|&c| c == 0), "curve starts at the origin");
        for w in at.windows(2) {
            let dist: u32 = w[0].iter().zip(&w[1]).map(|(a, b)| a.abs_diff(*b)).sum();
            assert_eq!(dist, 1, "{:?} -> {:?} not neighbours", w[0], w[1]);
        }
        // It ends at a corner of the grid.
        assert!(at[cells - 1].iter().all(|&c| c == 0 || c == side - 1));
    }

    #[test]
    fn fine_keys_continue_the_curve_inside_cells() {
        // The fine key is the Hilbert key of the fine coordinate cell·2^SUB_BITS + sub
        // (reference at 53 bits per axis in 2-D, 42 in 3-D), and its high word is the cell key.
        let mut next = xorshift(0x0DDB_1A5E_5BAD_5EED);
        let sm = (1u32 << SUB_BITS) - 1;
        for i in 0..20_000 {
            for dim in [2usize, 3] {
                let cm = if dim == 2 { u32::MAX } else { (1 << 21) - 1 };
                let mut cell = [0u32; 3];
                let mut sub = [0u32; 3];
                let mut wide = [0u64; 3];
                for a in 0..dim {
                    // Small values too, so that the curve's first cells are covered.
                    cell[a] = if i % 4 == 0 {
                        next() as u32 & 3
                    } else {
                        next() as u32 & cm
                    };
                    sub[a] = if i % 8 == 0 {
                        next() as u32 & 3
                    } else {
                        next() as u32 & sm
                    };
                    wide[a] = (u64::from(cell[a]) << SUB_BITS) | u64::from(sub[a]);
                }
                let fine = fine_key_of_cell(&cell[..dim], &sub[..dim]);
                assert_eq!((fine >> 64) as u64, key_of_cell(&cell[..dim]));
                assert!((fine as u64) < 1u64 << sub_key_bits(dim));
                let b = bits_per_axis(dim) + SUB_BITS;
                let index = reference_key_wide(&wide[..dim], b);
                assert_eq!(fine, fine_from_index(index, dim), "{cell:?} {sub:?}");
            }
        }
    }

    #[test]
    fn prefix_scan_encoder_matches_tables() {
        for x in 0..64u32 {
            for y in 0..64u32 {
                let (x, y) = (x << 26 | x, y << 26 | (y * 7));
                assert_eq!(key2_scan(x, y), key_of_cell(&[x, y]));
            }
        }
        let mut s = 0x1234_5678_9ABC_DEF1u64;
        for _ in 0..50_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let (x, y) = (s as u32, (s >> 32) as u32);
            assert_eq!(key2_scan(x, y), key_of_cell(&[x, y]));
        }
        assert_eq!(key2_scan(u32::MAX, 0), u64::MAX);
    }

    #[test]
    fn sub_keys_start_from_the_state_of_the_cell_key() {
        let mut next = xorshift(0x0ddb_a11c_afe5_eed5);
        for dim in [2usize, 3] {
            let cm = ((1u64 << bits_per_axis(dim)) - 1) as u32;
            let sm = (1u32 << SUB_BITS) - 1;
            for _ in 0..2000 {
                let cell: Vec<u32> = (0..dim).map(|_| next() as u32 & cm).collect();
                let sub: Vec<u32> = (0..dim).map(|_| next() as u32 & sm).collect();
                let key = key_of_cell(&cell);
                let fine =
                    (u128::from(key) << 64) | u128::from(sub_key(state_of_key(key, dim), &sub));
                assert_eq!(fine, fine_key_of_cell(&cell, &sub), "{cell:?} {sub:?}");
            }
        }
    }

    #[test]
    fn bulk_3d_keys_match_one_at_a_time() {
        // Lengths around the vector width (32) and the interleaving (8), extreme cells.
        let m = (1u32 << 21) - 1;
        let mut next = xorshift(0x1234_5678_9abc_def1);
        for n in [0usize, 1, 7, 8, 9, 31, 32, 33, 64, 100, 517] {
            let mut cell = || match next() % 5 {
                0 => 0,
                1 => m,
                _ => next() as u32 & m,
            };
            let (mut x, mut y, mut z) = (vec![0u32; n], vec![0u32; n], vec![0u32; n]);
            for j in 0..n {
                (x[j], y[j], z[j]) = (cell(), cell(), cell());
            }
            let want: Vec<u64> = (0..n).map(|j| key_of_cell(&[x[j], y[j], z[j]])).collect();
            let mut got = vec![0u64; n];
            // Every path this processor has (a path it lacks would run the next one down).
            for simd in Simd::ALL.into_iter().filter(|s| s.supported()) {
                got.fill(0);
                keys3(simd, &x, &y, &z, &mut got);
                assert_eq!(got, want, "n = {n}, {}", simd.name());
            }
        }
    }

    #[test]
    fn curve_is_continuous_bijection() {
        check_hilbert(2, 7);
        check_hilbert(3, 5);
    }

    #[test]
    fn inverse_table_walks_back_to_the_cell() {
        for dim in [2usize, 3] {
            let t = tables(dim);
            let b = bits_per_axis(dim);
            let cells: [[u32; 3]; 3] = [[5, 77, 9], [u32::MAX >> 11, 3, 1 << 20], [0, 1, 2]];
            for c in cells {
                let cell: Vec<u32> = c[..dim]
                    .iter()
                    .map(|&v| if dim == 3 { v & ((1 << 21) - 1) } else { v })
                    .collect();
                let key = key_of_cell(&cell);
                let mut s = 0usize;
                let mut back = vec![0u32; dim];
                for level in (0..b).rev() {
                    let digit = (key >> (level * dim as u32)) as usize & ((1 << dim) - 1);
                    let e = t.inv[(s << dim) | digit];
                    let raw = e >> 8;
                    for (a, v) in back.iter_mut().enumerate() {
                        *v |= ((raw >> (dim - 1 - a)) & 1) << level;
                    }
                    s = (e & 255) as usize;
                }
                assert_eq!(back, cell);
            }
        }
    }
}
