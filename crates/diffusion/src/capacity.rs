//! Heterogeneous capacities and the balance measures of Watts, Rieffel & Taylor 1998.

use crate::Error;

/// Largest total load (weight units) the transfer calculations accept: sums, products with
/// capacities and signed transfers then fit `i128` and `i64` with room to spare.
pub const MAX_TOTAL_LOAD: u64 = 1 << 62;

/// Most processors: with [`CAPACITY_BITS`]-bit capacities and loads below
/// [`MAX_TOTAL_LOAD`], every product of a sum of capacities and a load fits `i128` twice over.
pub const MAX_PROCESSORS: usize = 1 << 24;

/// Bits of resolution of a quantised capacity: the largest capacity is `2^CAPACITY_BITS`
/// units, the others in proportion (rounded, at least 1).
pub const CAPACITY_BITS: u32 = 32;

/// The capacities `C_i` of the processors (Watts et al. 1998, "Load measurement": processor
/// `i` with load `L_i` has utilisation `U_i = L_i / C_i`), as integers.
///
/// Only ratios matter, so the capacities are scaled to integers of [`CAPACITY_BITS`] bits
/// (relative resolution 2^-32): the transfer formulas then run in exact integer arithmetic
/// where they can, and give the same result on every machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacities {
    units: Vec<u64>,
    total: u128,
}

impl Capacities {
    /// Capacities in proportion to `c` (finite, `> 0`; a 0 is an error: a processor without
    /// capacity has no utilisation to equalise); at most [`MAX_PROCESSORS`] of them.
    pub fn new(c: &[f64]) -> Result<Capacities, Error> {
        if c.is_empty() {
            return Err(Error::NoProcessors);
        }
        if c.len() > MAX_PROCESSORS {
            return Err(Error::TooMany {
                what: "processors",
                count: c.len(),
            });
        }
        if let Some((index, &value)) = c
            .iter()
            .enumerate()
            .find(|&(_, &x)| !(x.is_finite() && x > 0.0))
        {
            return Err(Error::InvalidCapacity { index, value });
        }
        let max = c.iter().copied().fold(0.0, f64::max);
        let scale = f64::from(CAPACITY_BITS).exp2() / max;
        let units: Vec<u64> = c
            .iter()
            .map(|&x| ((x * scale).round() as u64).max(1))
            .collect();
        Ok(Capacities::from_units(units))
    }

    /// `n` equal capacities (the homogeneous case).
    pub fn uniform(n: usize) -> Capacities {
        Capacities::from_units(vec![1; n])
    }

    fn from_units(units: Vec<u64>) -> Capacities {
        let total = units.iter().map(|&u| u128::from(u)).sum();
        Capacities { units, total }
    }

    /// Number of processors.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether there are no processors (never, for a constructed value).
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// The integer capacities.
    pub fn units(&self) -> &[u64] {
        &self.units
    }

    /// The sum of the integer capacities.
    pub fn total(&self) -> u128 {
        self.total
    }

    /// The balanced loads: `total` split in proportion to the capacities, `L_i* = total · C_i /
    /// ΣC`, rounded so that they sum to `total` exactly (largest remainders; ties to the lower
    /// index).
    pub fn ideal_loads(&self, total: u64) -> Vec<u64> {
        apportion(total, &self.units)
    }

    /// The balanced utilisation `U* = ΣL / ΣC` every processor has at balance.
    pub fn balanced_utilisation(&self, loads: &[u64]) -> f64 {
        let total: u128 = loads.iter().map(|&l| u128::from(l)).sum();
        total as f64 / self.total as f64
    }

    /// Watts et al.'s efficiency `eff = U_avg / U_max` ("Profitability determination"), with
    /// `U_avg` the capacity-weighted mean utilisation `ΣL / ΣC` (the paper's mean for equal
    /// capacities; the level every `U_i` reaches at balance). 1 is balanced; `1 / eff` is the
    /// imbalance `max_i L_i / L_i*` of `hsfc` and `hier-part`. No load: 1.
    pub fn efficiency(&self, loads: &[u64]) -> f64 {
        let loads: Vec<f64> = loads.iter().map(|&l| l as f64).collect();
        self.efficiency_real(&loads)
    }

    /// [`Capacities::efficiency`] of real-valued loads (the state of a numerical method).
    pub fn efficiency_real(&self, loads: &[f64]) -> f64 {
        efficiency_of(loads.iter().copied().zip(self.units.iter().copied()))
    }

    /// The imbalance `U_max / U*` = `1 / eff` (1 is balanced).
    pub fn imbalance(&self, loads: &[u64]) -> f64 {
        1.0 / self.efficiency(loads)
    }
}

/// `eff = (ΣL / ΣC) / max(L_i / C_i)` over `(L_i, C_i)` pairs; 1 without load.
pub(crate) fn efficiency_of(pairs: impl Iterator<Item = (f64, u64)>) -> f64 {
    let (mut l, mut c, mut umax) = (0.0, 0.0, f64::NEG_INFINITY);
    for (li, ci) in pairs {
        l += li;
        c += ci as f64;
        umax = umax.max(li / ci as f64);
    }
    if l <= 0.0 || umax <= 0.0 {
        return 1.0;
    }
    (l / c) / umax
}

/// `total` split in proportion to `shares` (not all 0), exactly: floors, then one more unit to
/// the largest remainders (ties to the lower index).
pub(crate) fn apportion(total: u64, shares: &[u64]) -> Vec<u64> {
    let sum: u128 = shares.iter().map(|&s| u128::from(s)).sum();
    if sum == 0 {
        return vec![0; shares.len()];
    }
    let mut out = Vec::with_capacity(shares.len());
    let mut rems = Vec::with_capacity(shares.len());
    let mut given: u128 = 0;
    for (i, &s) in shares.iter().enumerate() {
        let x = u128::from(total) * u128::from(s);
        out.push((x / sum) as u64);
        given += x / sum;
        rems.push((x % sum, i));
    }
    rems.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rems.iter().take((u128::from(total) - given) as usize) {
        out[i] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_are_checked_and_scaled() {
        let c = Capacities::new(&[1.0, 4.4, 39.0]).unwrap();
        assert_eq!(c.units()[2], 1 << 32);
        let ratio = c.units()[1] as f64 / c.units()[0] as f64;
        assert!((ratio - 4.4).abs() < 1e-7, "{ratio}");
        assert!(matches!(
            Capacities::new(&[1.0, 0.0]),
            Err(Error::InvalidCapacity { index: 1, .. })
        ));
        assert!(matches!(
            Capacities::new(&[f64::NAN]),
            Err(Error::InvalidCapacity { index: 0, .. })
        ));
        assert!(matches!(Capacities::new(&[]), Err(Error::NoProcessors)));
    }

    #[test]
    fn ideal_loads_sum_exactly_and_follow_capacities() {
        let c = Capacities::new(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(c.ideal_loads(6), vec![1, 2, 3]);
        assert_eq!(c.ideal_loads(7).iter().sum::<u64>(), 7);
        assert_eq!(c.ideal_loads(0), vec![0, 0, 0]);
        let l = c.ideal_loads(1_000_001);
        assert_eq!(l.iter().sum::<u64>(), 1_000_001);
        assert!((c.efficiency(&l) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn efficiency_is_watts_eff_with_the_capacity_weighted_mean() {
        let c = Capacities::uniform(3);
        // Equal capacities: U_avg / U_max = 2 / 3.
        assert!((c.efficiency(&[1, 2, 3]) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.efficiency(&[0, 0, 0]), 1.0);
        let h = Capacities::new(&[1.0, 3.0]).unwrap();
        assert!((h.efficiency(&[1, 3]) - 1.0).abs() < 1e-9);
        assert!((h.imbalance(&[2, 2]) - 2.0).abs() < 1e-9);
    }
}
