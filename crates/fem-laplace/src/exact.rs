//! Exact, order-independent floating-point sums: the reproducible global sums of the
//! distributed run (CG's dot products, the estimate, the error).
//!
//! [`ExactSum`] is a long accumulator in the spirit of Kulisch's: every `f64` is a multiple of
//! 2⁻¹⁰⁷⁴ below 2¹⁰²⁴, so the exact sum of any number of them is an integer multiple of 2⁻¹⁰⁷⁵
//! held in 36 signed 128-bit limbs, limb `l` counting units of 2^(64 l − 1075). Adding a value
//! puts its 53-bit mantissa, shifted by its exponent modulo 64, into one limb (one `i128`
//! addition: the limbs overlap, a carry-save form); every 1024 additions the carries are
//! propagated, so no limb can overflow. The sum is rounded once, to nearest (ties to even), at
//! the end ([`ExactSum::value`]). Since nothing is rounded before that, the result is the same
//! bits whatever the order of the additions and however they are split between ranks:
//! partial accumulators are combined exactly with [`ExactSum::merge`], or over a
//! communicator through their integer [`ExactSum::words`] (an integer sum, exact on every
//! backend). ReproBLAS (Demmel, Ahrens, Nguyen) reaches the same goal with binned sums; an
//! exact sum is simpler to reason about and fast enough here (a few ns per term).
//!
//! ```
//! use fem_laplace::exact::ExactSum;
//! let xs = [1e16, 1.0, -1e16, 0.5, 3.0e-300];
//! let mut a = ExactSum::new();
//! xs.iter().for_each(|&x| a.add(x));
//! let mut b = ExactSum::new();
//! xs.iter().rev().for_each(|&x| b.add(x));
//! assert_eq!(a.value(), 1.5); // the naive left-to-right sum gives 0.5
//! assert_eq!(a.value().to_bits(), b.value().to_bits());
//! ```

/// Number of limbs: the top carries the sign and the carries of up to 2⁶⁴ maximal terms.
const LIMBS: usize = 36;
/// Additions between two carry propagations (each limb receives terms below 2¹¹⁶).
const NORMALIZE_EVERY: u32 = 1024;
/// `u64` words per accumulator in [`ExactSum::words`]: two per limb, then how many NaN, +∞
/// and −∞ terms were seen.
pub const WORDS: usize = 2 * LIMBS + 3;

/// An exact sum of `f64` values (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct ExactSum {
    limbs: [i128; LIMBS],
    pending: u32,
    /// Bit 0: a NaN was added; bit 1: +∞; bit 2: −∞.
    special: u8,
}

impl std::fmt::Debug for ExactSum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactSum")
            .field("value", &self.value())
            .finish()
    }
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum::new()
    }
}

impl ExactSum {
    /// The empty sum (zero).
    pub const fn new() -> ExactSum {
        ExactSum {
            limbs: [0; LIMBS],
            pending: 0,
            special: 0,
        }
    }

    /// Adds `x` exactly.
    #[inline(always)]
    pub fn add(&mut self, x: f64) {
        self.put(x);
        self.pending += 1;
        if self.pending == NORMALIZE_EVERY {
            self.normalize();
        }
    }

    /// Adds `x` into its limb without counting it (the caller counts and normalises).
    #[inline(always)]
    fn put(&mut self, x: f64) {
        let b = x.to_bits();
        let e = ((b >> 52) & 0x7ff) as u32;
        if e == 0x7ff {
            self.add_special(x);
            return;
        }
        let frac = b & ((1u64 << 52) - 1);
        // Subnormals have the exponent of the smallest normal number and no implicit bit.
        let (m, p) = if e == 0 {
            (frac, 1)
        } else {
            (frac | (1u64 << 52), e)
        };
        // The sign applied to the 53-bit mantissa before the shift (−m = !m + 1 with a mask of
        // the sign bit: no branch), the same value as negating the shifted one; the 128-bit
        // shift as its two words, with single shifts (the high word is `signed >> (64 − sh)`,
        // taken in two steps so that a shift by 0 needs no shift by 64; a double shift
        // `shld` by a variable count is several micro-operations on some processors).
        let sign = (b as i64) >> 63;
        let signed = ((m as i64) ^ sign) - sign;
        let sh = p & 63;
        let lo = signed.wrapping_shl(sh) as u64;
        let hi = (signed >> 1) >> (63 - sh);
        self.limbs[(p >> 6) as usize] += (i128::from(hi) << 64) | i128::from(lo);
    }

    #[cold]
    fn add_special(&mut self, x: f64) {
        self.special |= if x.is_nan() {
            1
        } else if x > 0.0 {
            2
        } else {
            4
        };
    }

    /// Adds every value of `xs`: counted and normalised once per block of values, alternating
    /// between two accumulators.
    pub fn add_slice(&mut self, xs: &[f64]) {
        self.add_blocked(xs.len(), |i| xs[i]);
    }

    /// Adds `value(i)` for every `i < n`: counted and normalised once per block of
    /// NORMALIZE_EVERY values rather than per value, each block's values alternating between
    /// this accumulator and a second one (consecutive values usually land in the same limb,
    /// and one array would chain every addition through memory).
    #[inline(always)]
    fn add_blocked(&mut self, n: usize, value: impl Fn(usize) -> f64) {
        let mut other = ExactSum::new();
        let mut start = 0;
        while start < n {
            let end = n.min(start + NORMALIZE_EVERY as usize);
            // Each accumulator receives at most half a block: within its bound.
            self.normalize();
            other.normalize();
            let mut i = start;
            while i + 1 < end {
                self.put(value(i));
                other.put(value(i + 1));
                i += 2;
            }
            if i < end {
                self.put(value(i));
            }
            start = end;
        }
        self.merge(&other);
    }

    /// The exact sum of `xs`.
    pub fn from_slice(xs: &[f64]) -> ExactSum {
        let mut s = ExactSum::new();
        s.add_slice(xs);
        s
    }

    /// The exact sum of the rounded products `a[i] * b[i]`: each product is rounded to `f64`
    /// (the same bits wherever it is computed), then added exactly.
    pub fn dot(a: &[f64], b: &[f64]) -> ExactSum {
        assert_eq!(a.len(), b.len(), "dot: slices of different lengths");
        let b = &b[..a.len()];
        let mut s = ExactSum::new();
        s.add_blocked(a.len(), |i| a[i] * b[i]);
        s
    }

    /// Adds another accumulator (exactly).
    pub fn merge(&mut self, other: &ExactSum) {
        self.normalize();
        let mut o = other.clone();
        o.normalize();
        for (a, b) in self.limbs.iter_mut().zip(&o.limbs) {
            *a += b;
        }
        self.special |= o.special;
        self.normalize();
    }

    /// Propagates the carries: afterwards every limb but the last lies in `[0, 2⁶⁴)` and the
    /// last carries the sign.
    fn normalize(&mut self) {
        for i in 0..LIMBS - 1 {
            let c = self.limbs[i] >> 64;
            self.limbs[i] -= c << 64;
            self.limbs[i + 1] += c;
        }
        self.pending = 0;
    }

    /// The accumulator as integers whose wrapping sum over several accumulators (for example
    /// an `allreduce` of `u64` sums over ranks) is the representation of the exact total:
    /// feed the summed words to [`ExactSum::from_words`]. Exact for up to 2³¹ summands.
    pub fn words(&self) -> [u64; WORDS] {
        let mut s = self.clone();
        s.normalize();
        let mut w = [0u64; WORDS];
        for i in 0..LIMBS - 1 {
            let d = s.limbs[i] as u64; // in [0, 2⁶⁴) after normalize
            w[2 * i] = d & 0xffff_ffff;
            w[2 * i + 1] = d >> 32;
        }
        w[2 * (LIMBS - 1)] = s.limbs[LIMBS - 1] as i64 as u64;
        w[2 * (LIMBS - 1) + 1] = 0;
        for k in 0..3 {
            w[2 * LIMBS + k] = u64::from(s.special >> k & 1);
        }
        w
    }

    /// Rebuilds an accumulator from (summed) [`ExactSum::words`].
    pub fn from_words(w: &[u64]) -> ExactSum {
        assert_eq!(w.len(), WORDS, "from_words: {WORDS} words expected");
        let mut s = ExactSum::new();
        for i in 0..LIMBS - 1 {
            s.limbs[i] = i128::from(w[2 * i]) + (i128::from(w[2 * i + 1]) << 32);
        }
        s.limbs[LIMBS - 1] = i128::from(w[2 * (LIMBS - 1)] as i64);
        for k in 0..3 {
            if w[2 * LIMBS + k] != 0 {
                s.special |= 1 << k;
            }
        }
        s.normalize();
        s
    }

    /// The sum, rounded once to the nearest `f64` (ties to even); ±∞ on overflow, NaN if a NaN
    /// or both infinities were added.
    pub fn value(&self) -> f64 {
        match self.special {
            0 => {}
            2 => return f64::INFINITY,
            4 => return f64::NEG_INFINITY,
            _ => return f64::NAN, // a NaN, or both infinities
        }
        let mut s = self.clone();
        s.normalize();
        let negative = s.limbs[LIMBS - 1] < 0;
        if negative {
            for l in s.limbs.iter_mut() {
                *l = -*l;
            }
            s.normalize();
        }
        let mag = round_magnitude(&s.limbs);
        if negative { -mag } else { mag }
    }
}

/// Rounds a non-negative normalized limb array (digits in `[0, 2⁶⁴)`, unit 2⁻¹⁰⁷⁵) to `f64`.
fn round_magnitude(limbs: &[i128; LIMBS]) -> f64 {
    let digit = |i: usize| -> u64 { limbs[i] as u64 };
    let Some(h) = (0..LIMBS).rev().find(|&i| limbs[i] != 0) else {
        return 0.0;
    };
    // Limb 33 counts units of 2^(64·33 − 1075) = 2¹⁰³⁷: beyond every finite f64.
    if h >= 33 {
        return f64::INFINITY;
    }
    // Below 2⁻¹⁰²² every multiple of 2⁻¹⁰⁷⁴ is a subnormal number: exact.
    if h == 0 && digit(0) < (1u64 << 53) {
        return (digit(0) >> 1) as f64 * f64::from_bits(1);
    }
    let hi = digit(h);
    let lo = if h > 0 { digit(h - 1) } else { 0 };
    let sticky = (0..h.saturating_sub(1)).any(|i| limbs[i] != 0);
    let lz = hi.leading_zeros();
    let w = (((hi as u128) << 64) | lo as u128) << lz;
    let mut mant = (w >> 75) as u64;
    let rem = w & ((1u128 << 75) - 1);
    let half = 1u128 << 74;
    if rem > half || (rem == half && (sticky || mant & 1 == 1)) {
        mant += 1;
    }
    // value = mant · 2^e2 with mant in [2⁵², 2⁵³] (2⁵³ after rounding up: still exact).
    let e2 = 64 * h as i64 - 1064 - i64::from(lz);
    let (mant, e2) = if mant == 1u64 << 53 {
        (mant >> 1, e2 + 1)
    } else {
        (mant, e2)
    };
    let biased = e2 + 52 + 1023;
    if biased >= 2047 {
        return f64::INFINITY;
    }
    debug_assert!(
        biased >= 1,
        "values below 2^-1022 are handled as subnormals"
    );
    f64::from_bits(((biased as u64) << 52) | (mant & ((1u64 << 52) - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shewchuk's exact partials (Python's `math.fsum`): an independent, obviously exact
    /// reference for sums without overflow.
    fn fsum(xs: &[f64]) -> f64 {
        let mut partials: Vec<f64> = Vec::new();
        for &x0 in xs {
            let mut x = x0;
            let mut i = 0;
            for j in 0..partials.len() {
                let mut y = partials[j];
                if x.abs() < y.abs() {
                    std::mem::swap(&mut x, &mut y);
                }
                let hi = x + y;
                let lo = y - (hi - x);
                if lo != 0.0 {
                    partials[i] = lo;
                    i += 1;
                }
                x = hi;
            }
            partials.truncate(i);
            partials.push(x);
        }
        // Round the partials correctly (fsum's final step with the half-way correction).
        let mut n = partials.len();
        if n == 0 {
            return 0.0;
        }
        n -= 1;
        let mut hi = partials[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = partials[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
        hi
    }

    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    fn exact(xs: &[f64]) -> f64 {
        let mut s = ExactSum::new();
        s.add_slice(xs);
        s.value()
    }

    #[test]
    fn matches_fsum_on_wide_random_values_in_any_order() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        for round in 0..300 {
            let n = 1 + (rng(&mut seed) % 3000) as usize;
            let spread = 1 + round % 600;
            let xs: Vec<f64> = (0..n)
                .map(|_| {
                    let m = (rng(&mut seed) >> 11) as f64 / (1u64 << 53) as f64;
                    let e = (rng(&mut seed) % (2 * spread as u64)) as i32 - spread;
                    let s = if rng(&mut seed) & 1 == 0 { 1.0 } else { -1.0 };
                    s * m * 2f64.powi(e)
                })
                .collect();
            let want = fsum(&xs);
            let got = exact(&xs);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "round {round}: {got} vs {want}"
            );
            let mut rev = xs.clone();
            rev.reverse();
            assert_eq!(exact(&rev).to_bits(), got.to_bits());
            // Split into pieces and merged, as ranks do.
            let cut = n / 3;
            let (mut a, mut b) = (ExactSum::new(), ExactSum::new());
            a.add_slice(&xs[..cut]);
            b.add_slice(&xs[cut..]);
            let words: Vec<u64> = a
                .words()
                .iter()
                .zip(b.words())
                .map(|(x, y)| x.wrapping_add(y))
                .collect();
            assert_eq!(
                ExactSum::from_words(&words).value().to_bits(),
                got.to_bits()
            );
            a.merge(&b);
            assert_eq!(a.value().to_bits(), got.to_bits());
        }
    }

    #[test]
    fn cancellation_ties_subnormals_and_overflow() {
        assert_eq!(exact(&[1e16, 1.0, -1e16]), 1.0);
        assert_eq!(exact(&[]), 0.0);
        assert_eq!(exact(&[-0.0]), 0.0);
        let tiny = f64::from_bits(1);
        assert_eq!(exact(&[tiny, tiny, tiny]), 3.0 * tiny);
        assert_eq!(exact(&[f64::MIN_POSITIVE, -tiny]), f64::MIN_POSITIVE - tiny);
        // 1 + 2^-53 is a tie: to even (1); with a further 2^-100 it rounds up.
        let u = 2f64.powi(-53);
        assert_eq!(exact(&[1.0, u]), 1.0);
        assert_eq!(exact(&[1.0, u, 2f64.powi(-100)]), 1.0 + 2.0 * u);
        assert_eq!(exact(&[1.0 + 2.0 * u, u]), 1.0 + 4.0 * u);
        assert_eq!(exact(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(exact(&[-f64::MAX, -f64::MAX]), f64::NEG_INFINITY);
        assert_eq!(exact(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert!(exact(&[1.0, f64::NAN]).is_nan());
        assert!(exact(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert_eq!(exact(&[f64::INFINITY, 1.0]), f64::INFINITY);
        // Many equal terms: the carries between limbs.
        let xs = vec![0.1; 100_000];
        assert_eq!(exact(&xs).to_bits(), fsum(&xs).to_bits());
        let ys: Vec<f64> = (0..5000).map(|i| f64::MAX / (1 + i % 7) as f64).collect();
        assert_eq!(exact(&ys), f64::INFINITY);
    }

    #[test]
    fn dot_rounds_each_product_then_sums_exactly() {
        let a = [1e8, 3.0, -1e8, 0.1];
        let b = [1e8, 1.0 / 3.0, 1e8, 0.1];
        let d = ExactSum::dot(&a, &b).value();
        assert_eq!(d, fsum(&[1e16, 3.0 * (1.0 / 3.0), -1e16, 0.1 * 0.1]));
        // Over several blocks of NORMALIZE_EVERY products, odd lengths, signs and wide
        // exponents mixed; then single additions on top of the blocked ones.
        let mut seed = 0x0bad_cafe_f00d_u64;
        for n in [1, 2, 1023, 1024, 1025, 2047, 5001] {
            let mut wide = || {
                let m = (rng(&mut seed) >> 11) as f64 / (1u64 << 53) as f64;
                let e = (rng(&mut seed) % 400) as i32 - 200;
                let s = if rng(&mut seed) & 1 == 0 { 1.0 } else { -1.0 };
                s * m * 2f64.powi(e)
            };
            let a: Vec<f64> = (0..n).map(|_| wide()).collect();
            let b: Vec<f64> = (0..n).map(|_| wide()).collect();
            let products: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
            let mut d = ExactSum::dot(&a, &b);
            assert_eq!(d.value().to_bits(), fsum(&products).to_bits(), "n = {n}");
            let mut all = products.clone();
            for &x in &a {
                d.add(x);
                all.push(x);
            }
            assert_eq!(
                d.value().to_bits(),
                fsum(&all).to_bits(),
                "n = {n}, then adds"
            );
        }
    }
}
