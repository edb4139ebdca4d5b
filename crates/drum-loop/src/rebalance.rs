//! When to repartition.
//!
//! Three tests, combined by [`Policy::decide`] into a [`Decision`] that carries its reason and
//! every figure it used (and prints them for logs):
//! - **Imbalance** (Watts, Rieffel & Taylor 1998, "Profitability determination"): with load
//!   `L_i` and capacity `C_i`, utilization `U_i = L_i / C_i`; balance is
//!   `eff = U_avg / U_max`, and balancing is considered when `eff < eff_min`.
//! - **Profitability** (Lan, Taylor & Bryan 2001, §4.2–4.4): redistribute only when
//!   `Gain > γ · Cost`, with `Cost = (α + β·W) + δ` (eq. 1) and
//!   `Gain = T(t) · (max W_group − min W_group) / (Number_Groups · max W_group)` (eq. 4).
//! - **Memory** (Watts et al. 1998, "Profitability determination": "load balance whenever the
//!   physical memory capacity of any machine is exceeded, since the resulting page swapping
//!   will probably severely degrade the application's performance"): a node whose resident
//!   memory would exceed its physical memory at the next step rebalances whatever the other
//!   tests say (Lan's gain does not see paging).
//! - **Power drift** (DRUM 2005 §5: let the monitors trigger balancing "even in cases where the
//!   application has not encountered an adaptive step"): the powers measured now against the
//!   powers the current partition was made for.

use crate::Error;
use std::fmt;

fn check(what: impl Fn() -> String, v: f64, ok: bool, expected: &'static str) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::BadValue {
            what: what(),
            value: v,
            expected,
        })
    }
}

fn check_all(name: &'static str, v: &[f64], positive: bool, n: Option<usize>) -> Result<(), Error> {
    if v.is_empty() {
        return Err(Error::Empty { what: name });
    }
    if let Some(n) = n
        && v.len() != n
    {
        return Err(Error::LengthMismatch {
            what: name,
            got: v.len(),
            expected: n,
            per: "group",
        });
    }
    let expected = if positive {
        "a finite number > 0"
    } else {
        "a finite number >= 0"
    };
    for (i, &x) in v.iter().enumerate() {
        let ok = x.is_finite() && if positive { x > 0.0 } else { x >= 0.0 };
        check(|| format!("{name}[{i}]"), x, ok, expected)?;
    }
    Ok(())
}

/// Utilizations `U_i = L_i / C_i` (Watts et al. 1998, "Load measurement"): load `L_i` in
/// abstract work units, capacity `C_i` (a power) in work per second. Loads must be finite and
/// ≥ 0, capacities finite and > 0.
pub fn utilizations(loads: &[f64], capacities: &[f64]) -> Result<Vec<f64>, Error> {
    check_all("loads", loads, false, None)?;
    check_all("capacities", capacities, true, Some(loads.len()))?;
    Ok(loads.iter().zip(capacities).map(|(l, c)| l / c).collect())
}

/// `eff = U_avg / U_max` (Watts et al. 1998): the one definition, in `drum_model::metrics`
/// (an error for no utilizations or a bad one; 1 when every utilization is 0).
pub use drum_model::metrics::efficiency;

/// Lan et al. 2001 §4.3, eq. (4):
/// `Gain = T(t) · (max W_group(t) − min W_group(t)) / (Number_Groups · max W_group(t))`, the
/// (conservative) time saved per step by balancing, from the last step's time `T(t)` and each
/// group's work `W_group(t)`. For groups of different capacity pass utilizations
/// `L_g / C_g` (the time each group needs), which is the paper's workload when capacities are
/// equal. 0 when every group's work is 0.
pub fn lan_gain(step_time: f64, group_work: &[f64]) -> Result<f64, Error> {
    check(
        || "step_time".into(),
        step_time,
        step_time.is_finite() && step_time >= 0.0,
        "a finite number of seconds >= 0",
    )?;
    check_all("group_work", group_work, false, None)?;
    let max = group_work.iter().fold(0.0f64, |a, &b| a.max(b));
    let min = group_work.iter().fold(f64::INFINITY, |a, &b| a.min(b));
    if max == 0.0 {
        return Ok(0.0);
    }
    Ok(step_time * (max - min) / (group_work.len() as f64 * max))
}

/// The one fitted link model `T(L) = α + β·L` (Lan et al. 2001 §4.2): `comm` measures the
/// timings and fits them ([`comm::LinkTimings::fit`], an error for impossible figures).
pub use comm::LinkModel;

/// Measures the link between the groups that node `id` of `plan` splits into, as Lan et al.
/// 2001 §4.2 do: "the scheme sends two messages between groups, and calculates the network
/// performance parameters α and β". The leader (first rank) of the first child exchanges two
/// message sizes with the leader of every other child ([`comm::measure_link`]); the result is
/// the slowest link (largest α and β over the pairs), the one a migration between the groups
/// waits for. Collective over `comm`, whose ranks are the machine's ranks; every rank gets
/// the same model. A node with one child measures its leader against itself.
pub fn measure_group_link<C: comm::Comm>(
    comm: &C,
    plan: &hier_part::Plan,
    id: drum_model::NodeId,
    probe: &comm::LinkProbe,
) -> Result<LinkModel, Error> {
    if comm.size() != plan.num_ranks() {
        return Err(hier_part::Error::RankCount {
            comm: comm.size(),
            machine: plan.num_ranks(),
        }
        .into());
    }
    let k = plan.node(id).children.len();
    let leader = |c: usize| plan.child_ranks(id, c)[0];
    let mut worst: Option<LinkModel> = None;
    for c in 1..k.max(2) {
        let (a, b) = (leader(0), if k > 1 { leader(c) } else { leader(0) });
        let fit = comm::measure_link(comm, a, b, probe)?.fit()?;
        worst = Some(match worst {
            None => fit,
            Some(w) => LinkModel {
                alpha: w.alpha.max(fit.alpha),
                beta: w.beta.max(fit.beta),
            },
        });
    }
    Ok(worst.expect("at least one pair"))
}

/// Lan et al. 2001 §4.2, eq. (1): `Cost = (α + β·W) + δ`, moving `W` bytes over `link` plus
/// `δ` seconds of repartitioning and rebuilding (from the previous time it was done).
pub fn lan_cost(link: &LinkModel, bytes: f64, delta: f64) -> Result<f64, Error> {
    check(
        || "bytes".into(),
        bytes,
        bytes.is_finite() && bytes >= 0.0,
        "a finite number >= 0",
    )?;
    check(
        || "delta".into(),
        delta,
        delta.is_finite() && delta >= 0.0,
        "a finite number of seconds >= 0",
    )?;
    Ok(link.time(bytes) + delta)
}

/// The load that must leave overloaded groups for each group to hold its share:
/// `Σ_g max(0, L_g − L · C_g / Σ C)` with `L = Σ L_g` ("the scheme calculates the amount of
/// load needed to migrate between groups", Lan et al. §4.2).
pub fn excess_load(loads: &[f64], capacities: &[f64]) -> Result<f64, Error> {
    utilizations(loads, capacities)?;
    let l: f64 = loads.iter().sum();
    let c: f64 = capacities.iter().sum();
    Ok(loads
        .iter()
        .zip(capacities)
        .map(|(lg, cg)| (lg - l * cg / c).max(0.0))
        .sum())
}

/// How far the powers measured now are from those the current partition was made for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    /// `max_i |s_i / s0_i − 1|` with shares `s_i = p_i / Σ p` now and `s0_i` then.
    pub max_rel_change: f64,
    /// The part (group) where it is largest (the first on a tie).
    pub part: usize,
    /// `eff` the current partition would have under the new powers: loads ∝ `s0_i`,
    /// capacities ∝ `s_i`.
    pub predicted_eff: f64,
}

/// Compares the powers measured now with those the current partition was made for (both
/// finite and > 0, one per part or group; only their ratios matter).
pub fn power_drift(now: &[f64], then: &[f64]) -> Result<Drift, Error> {
    check_all("powers", now, true, None)?;
    check_all("partition_powers", then, true, Some(now.len()))?;
    let (sn, st): (f64, f64) = (now.iter().sum(), then.iter().sum());
    let mut d = Drift {
        max_rel_change: 0.0,
        part: 0,
        predicted_eff: 1.0,
    };
    let mut u = Vec::with_capacity(now.len());
    for (i, (a, b)) in now.iter().zip(then).enumerate() {
        let (s, s0) = (a / sn, b / st);
        let r = (s / s0 - 1.0).abs();
        if r > d.max_rel_change {
            d.max_rel_change = r;
            d.part = i;
        }
        u.push(s0 / s);
    }
    d.predicted_eff = efficiency(&u)?;
    Ok(d)
}

/// Thresholds of a rebalance decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Balance when `eff < eff_min` (Watts et al.); in (0, 1].
    pub eff_min: f64,
    /// Redistribute only when `Gain > γ·Cost` (Lan et al. §4.4; the paper's default is 2.0).
    pub gamma: f64,
    /// Rebalance when a power share changed by more than this fraction (0.1 = 10%).
    pub drift_threshold: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            eff_min: 0.9,
            gamma: 2.0,
            drift_threshold: 0.1,
        }
    }
}

/// What moving data would cost (for Lan et al.'s test).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Migration {
    /// The link between groups (from `LinkModel::fit`).
    pub link: LinkModel,
    /// Bytes to move per unit of load.
    pub bytes_per_load: f64,
    /// δ: seconds the last repartition, rebuild and boundary update took.
    pub delta: f64,
}

/// What the application and the monitors report at a decision point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation<'a> {
    /// Load `L_g` of each group (rank) over the last step, in work units.
    pub loads: &'a [f64],
    /// Capacity (power) `C_g` of each group now.
    pub capacities: &'a [f64],
    /// The powers the current partition was made for, if known (enables the drift test).
    pub partition_powers: Option<&'a [f64]>,
    /// Wall time `T(t)` of the last step in seconds (enables, with `migration`, the
    /// profitability test).
    pub step_time: Option<f64>,
    /// Migration cost figures.
    pub migration: Option<Migration>,
    /// Each node's memory at the next step, if measured (enables the memory rule).
    pub memory: Option<&'a [NodeMemory]>,
}

/// One node's memory for the memory rule, bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeMemory {
    /// The node (its `nodenum`), for the report.
    pub node: u32,
    /// Resident memory the node would hold at the next step.
    pub resident: f64,
    /// Its physical memory.
    pub physical: f64,
}

impl NodeMemory {
    /// `resident > physical`: the node would page.
    pub fn exceeded(&self) -> bool {
        self.resident > self.physical
    }
}

/// Lan et al.'s figures for one decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profit {
    /// `Gain` (s), eq. (4) over utilizations.
    pub gain: f64,
    /// `Cost` (s), eq. (1).
    pub cost: f64,
    /// γ.
    pub gamma: f64,
    /// `W`: bytes to move ([`excess_load`] × bytes per load).
    pub bytes: f64,
    /// The link model.
    pub link: LinkModel,
    /// δ (s).
    pub delta: f64,
}

impl Profit {
    /// `Gain > γ·Cost`.
    pub fn profitable(&self) -> bool {
        self.gain > self.gamma * self.cost
    }
}

/// Why a decision came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `eff ≥ eff_min` and the powers have not drifted beyond the threshold.
    Balanced,
    /// `eff < eff_min` (and `Gain > γ·Cost` when the cost is known).
    Imbalance,
    /// The powers drifted beyond the threshold (and `Gain > γ·Cost` when known).
    PowerDrift,
    /// Both of the above.
    ImbalanceAndDrift,
    /// A trigger fired, but `Gain ≤ γ·Cost`.
    NotProfitable,
    /// A node's resident memory would exceed its physical memory (whatever the other tests
    /// say).
    Memory,
}

impl Reason {
    /// The reason as reports write it (`balanced`, `imbalance`, `power drift`, `imbalance
    /// and power drift`, `not profitable`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            Reason::Balanced => "balanced",
            Reason::Imbalance => "imbalance",
            Reason::PowerDrift => "power drift",
            Reason::ImbalanceAndDrift => "imbalance and power drift",
            Reason::NotProfitable => "not profitable",
            Reason::Memory => "memory",
        }
    }
}

/// A rebalance decision with its reason and figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Repartition now?
    pub rebalance: bool,
    /// Why.
    pub reason: Reason,
    /// `eff = U_avg / U_max` now.
    pub eff: f64,
    /// The threshold.
    pub eff_min: f64,
    /// Drift figures, when the partition's powers were given.
    pub drift: Option<Drift>,
    /// The drift threshold.
    pub drift_threshold: f64,
    /// Lan et al.'s figures, when step time and migration figures were given.
    pub profit: Option<Profit>,
    /// The first node whose resident memory would exceed its physical memory, if any.
    pub memory: Option<NodeMemory>,
}

impl Policy {
    /// Checks the parameters (the first [`Policy::decide`] would otherwise find a bad one):
    /// `eff_min` in (0, 1], `gamma` and `drift_threshold` finite and >= 0.
    pub fn validate(&self) -> Result<(), Error> {
        check(
            || "eff_min".into(),
            self.eff_min,
            self.eff_min > 0.0 && self.eff_min <= 1.0,
            "a number in (0, 1]",
        )?;
        check(
            || "gamma".into(),
            self.gamma,
            self.gamma.is_finite() && self.gamma >= 0.0,
            "a finite number >= 0",
        )?;
        check(
            || "drift_threshold".into(),
            self.drift_threshold,
            self.drift_threshold.is_finite() && self.drift_threshold >= 0.0,
            "a finite number >= 0",
        )?;
        Ok(())
    }

    /// Decides: a trigger fires when `eff < eff_min` or the powers drifted by more than the
    /// threshold; if so, and the step time and migration figures are known, it rebalances only
    /// when `Gain > γ·Cost`, with `Gain` from eq. (4) over the utilizations `L_g / C_g` and
    /// `Cost` from eq. (1) for moving [`excess_load`] × `bytes_per_load` bytes.
    pub fn decide(&self, obs: &Observation<'_>) -> Result<Decision, Error> {
        self.validate()?;
        let u = utilizations(obs.loads, obs.capacities)?;
        let eff = efficiency(&u)?;
        let drift = obs
            .partition_powers
            .map(|then| power_drift(obs.capacities, then))
            .transpose()?;
        let profit = match (obs.step_time, obs.migration) {
            (Some(t), Some(m)) => {
                check(
                    || "bytes_per_load".into(),
                    m.bytes_per_load,
                    m.bytes_per_load.is_finite() && m.bytes_per_load >= 0.0,
                    "a finite number >= 0",
                )?;
                let bytes = excess_load(obs.loads, obs.capacities)? * m.bytes_per_load;
                Some(Profit {
                    gain: lan_gain(t, &u)?,
                    cost: lan_cost(&m.link, bytes, m.delta)?,
                    gamma: self.gamma,
                    bytes,
                    link: m.link,
                    delta: m.delta,
                })
            }
            _ => None,
        };
        let imbalanced = eff < self.eff_min;
        let drifted = drift.is_some_and(|d| d.max_rel_change > self.drift_threshold);
        let memory = obs
            .memory
            .and_then(|m| m.iter().copied().find(NodeMemory::exceeded));
        let reason = match (imbalanced, drifted) {
            _ if memory.is_some() => Reason::Memory,
            (false, false) => Reason::Balanced,
            _ if profit.is_some_and(|p| !p.profitable()) => Reason::NotProfitable,
            (true, false) => Reason::Imbalance,
            (false, true) => Reason::PowerDrift,
            (true, true) => Reason::ImbalanceAndDrift,
        };
        Ok(Decision {
            rebalance: !matches!(reason, Reason::Balanced | Reason::NotProfitable),
            reason,
            eff,
            eff_min: self.eff_min,
            drift,
            drift_threshold: self.drift_threshold,
            profit,
            memory,
        })
    }
}

/// One line for logs: the verdict, the reason, and the figures behind it.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.rebalance { "rebalance" } else { "keep" };
        let why = self.reason.name();
        if let Some(m) = self.memory {
            write!(
                f,
                "{verdict} ({why}): node {} would hold {:.1} MB resident > {:.1} MB physical; ",
                m.node,
                m.resident / 1e6,
                m.physical / 1e6
            )?;
            let cmp = if self.eff < self.eff_min { "<" } else { ">=" };
            return write!(
                f,
                "eff = {:.4} {cmp} eff_min = {:.4}",
                self.eff, self.eff_min
            );
        }
        let cmp = if self.eff < self.eff_min { "<" } else { ">=" };
        write!(
            f,
            "{verdict} ({why}): eff = {:.4} {cmp} eff_min = {:.4}",
            self.eff, self.eff_min
        )?;
        if let Some(d) = self.drift {
            let cmp = if d.max_rel_change > self.drift_threshold {
                ">"
            } else {
                "<="
            };
            write!(
                f,
                "; power drift {:.2}% (part {}) {cmp} {:.2}%, eff under new powers {:.4}",
                100.0 * d.max_rel_change,
                d.part,
                100.0 * self.drift_threshold,
                d.predicted_eff
            )?;
        }
        if let Some(p) = self.profit {
            let cmp = if p.profitable() { ">" } else { "<=" };
            write!(
                f,
                "; gain {:.4e} s {cmp} gamma*cost = {} x {:.4e} s (W = {:.4e} B, {}, delta = {:.4e} s)",
                p.gain, p.gamma, p.cost, p.bytes, p.link, p.delta
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watts_efficiency() {
        // Loads 2, 4, 6 on capacities 1, 2, 2: U = 2, 2, 3; eff = (7/3)/3.
        let u = utilizations(&[2.0, 4.0, 6.0], &[1.0, 2.0, 2.0]).unwrap();
        assert_eq!(u, vec![2.0, 2.0, 3.0]);
        assert!((efficiency(&u).unwrap() - 7.0 / 9.0).abs() < 1e-15);
        assert_eq!(efficiency(&[0.0, 0.0]).unwrap(), 1.0);
    }

    #[test]
    fn lan_formulas() {
        // T = 10 s, groups 30 and 20: Gain = 10 (30 − 20) / (2 · 30) = 5/3 s.
        assert!((lan_gain(10.0, &[30.0, 20.0]).unwrap() - 5.0 / 3.0).abs() < 1e-15);
        assert_eq!(lan_gain(10.0, &[0.0, 0.0]).unwrap(), 0.0);
        // 1 kB in 110 µs and 1 MB in 10.1 ms: β = 1e-8 s/B, α = 1e-4 s.
        let l = LinkModel::fit((1e3, 110e-6), (1e6, 10.1e-3)).unwrap();
        assert!(
            (l.beta - 1e-8).abs() < 1e-20 && (l.alpha - 1e-4).abs() < 1e-15,
            "{l:?}"
        );
        assert_eq!(l, LinkModel::fit((1e6, 10.1e-3), (1e3, 110e-6)).unwrap());
        let c = lan_cost(&l, 5e6, 0.02).unwrap();
        assert!((c - (1e-4 + 5e-2 + 0.02)).abs() < 1e-12);
        // Loads 6 and 2 on equal capacities: 2 must move.
        assert_eq!(excess_load(&[6.0, 2.0], &[1.0, 1.0]).unwrap(), 2.0);
    }

    #[test]
    fn degenerate_timings() {
        let e = |a, b| LinkModel::fit(a, b).unwrap_err().to_string();
        assert_eq!(
            e((100.0, 1e-3), (100.0, 2e-3)),
            "cannot fit T = alpha + beta*L to (100 B, 0.001 s) and (100 B, 0.002 s): both messages have the same size"
        );
        assert_eq!(
            e((100.0, 2e-3), (1e4, 1e-3)),
            "cannot fit T = alpha + beta*L to (100 B, 0.002 s) and (10000 B, 0.001 s): the larger message was not slower (beta <= 0)"
        );
        assert_eq!(
            e((1e3, 1e-6), (2e3, 1e-3)),
            "cannot fit T = alpha + beta*L to (1000 B, 0.000001 s) and (2000 B, 0.001 s): the line through them has a negative latency (alpha < 0)"
        );
        assert_eq!(
            e((f64::NAN, 1.0), (1.0, 2.0)),
            "cannot fit T = alpha + beta*L to (NaN B, 1 s) and (1 B, 2 s): sizes and times must be finite and >= 0"
        );
    }

    #[test]
    fn drift() {
        let d = power_drift(&[1.0, 1.0, 2.0], &[1.0, 1.0, 1.0]).unwrap();
        // Shares 1/4, 1/4, 1/2 against 1/3 each: part 2 grew by half.
        assert!((d.max_rel_change - 0.5).abs() < 1e-15);
        assert_eq!(d.part, 2);
        // U ∝ s0/s = 4/3, 4/3, 2/3: eff = (10/9)/(4/3) = 5/6.
        assert!((d.predicted_eff - 5.0 / 6.0).abs() < 1e-15);
        assert_eq!(
            power_drift(&[1.0, 0.0], &[1.0, 1.0])
                .unwrap_err()
                .to_string(),
            "powers[1] is 0; expected a finite number > 0"
        );
        assert_eq!(
            power_drift(&[1.0, 1.0], &[1.0]).unwrap_err().to_string(),
            "partition_powers has 1 entries, expected 2 (one per group)"
        );
    }

    fn obs<'a>(loads: &'a [f64], caps: &'a [f64]) -> Observation<'a> {
        Observation {
            loads,
            capacities: caps,
            partition_powers: None,
            step_time: None,
            migration: None,
            memory: None,
        }
    }

    #[test]
    fn memory_rule() {
        let p = Policy::default();
        let node = |resident| NodeMemory {
            node: 2,
            resident,
            physical: 8e9,
        };
        // Balanced loads, every node within its memory: keep.
        let fits = [node(1e9), node(7.9e9)];
        let mut o = obs(&[10.0, 10.0], &[1.0, 1.0]);
        o.memory = Some(&fits);
        assert_eq!(p.decide(&o).unwrap().reason, Reason::Balanced);
        // A node that would page: rebalance for memory, even when Lan's test says the move
        // does not pay (the gain does not see paging).
        let pages = [node(1e9), node(9e9)];
        o.memory = Some(&pages);
        o.step_time = Some(1e-6);
        o.migration = Some(Migration {
            link: LinkModel {
                alpha: 1.0,
                beta: 1e-3,
            },
            bytes_per_load: 1e9,
            delta: 10.0,
        });
        let d = p.decide(&o).unwrap();
        assert_eq!((d.rebalance, d.reason), (true, Reason::Memory));
        assert_eq!(d.memory, Some(node(9e9)));
        assert_eq!(
            d.to_string(),
            "rebalance (memory): node 2 would hold 9000.0 MB resident > 8000.0 MB physical; \
             eff = 1.0000 >= eff_min = 0.9000"
        );
        // The same imbalance without the memory figures is not profitable.
        o.loads = &[10.0, 5.0];
        o.memory = None;
        assert_eq!(p.decide(&o).unwrap().reason, Reason::NotProfitable);
    }

    #[test]
    fn decisions_and_their_reasons() {
        let p = Policy::default();
        let d = p.decide(&obs(&[10.0, 10.0], &[1.0, 1.0])).unwrap();
        assert_eq!((d.rebalance, d.reason), (false, Reason::Balanced));
        assert_eq!(
            d.to_string(),
            "keep (balanced): eff = 1.0000 >= eff_min = 0.9000"
        );
        let d = p.decide(&obs(&[10.0, 5.0], &[1.0, 1.0])).unwrap();
        assert_eq!((d.rebalance, d.reason), (true, Reason::Imbalance));
        assert_eq!(d.eff, 0.75);
        // The same imbalance, but moving the data costs more than it saves.
        let link = LinkModel {
            alpha: 1e-4,
            beta: 1e-8,
        };
        let mut o = obs(&[10.0, 5.0], &[1.0, 1.0]);
        o.step_time = Some(1.0);
        o.migration = Some(Migration {
            link,
            bytes_per_load: 1e7,
            delta: 0.1,
        });
        let d = p.decide(&o).unwrap();
        // Gain = 1·(10 − 5)/(2·10) = 0.25 s; W = 2.5·1e7 B; Cost = 1e-4 + 0.25 + 0.1.
        let pr = d.profit.unwrap();
        assert!((pr.gain - 0.25).abs() < 1e-15 && (pr.cost - 0.3501).abs() < 1e-12);
        assert_eq!((d.rebalance, d.reason), (false, Reason::NotProfitable));
        assert_eq!(
            d.to_string(),
            "keep (not profitable): eff = 0.7500 < eff_min = 0.9000; gain 2.5000e-1 s <= \
             gamma*cost = 2 x 3.5010e-1 s (W = 2.5000e7 B, alpha = 1.000e-4 s, beta = 1.000e-8 \
             s/B (100.0 MB/s), delta = 1.0000e-1 s)"
        );
        o.step_time = Some(10.0);
        assert_eq!(p.decide(&o).unwrap().reason, Reason::Imbalance);
        // Balanced loads, but a node got twice as fast since the partition was made.
        let then = [1.0, 1.0, 1.0];
        let mut o = obs(&[10.0, 10.0, 10.0], &then);
        o.partition_powers = Some(&then);
        let d = p.decide(&o).unwrap();
        assert_eq!(d.reason, Reason::Balanced);
        o.capacities = &[2.0, 1.0, 1.0];
        let d = p.decide(&o).unwrap();
        assert_eq!((d.rebalance, d.reason), (true, Reason::ImbalanceAndDrift));
        let d = Policy { eff_min: 0.5, ..p }.decide(&o).unwrap();
        assert_eq!((d.rebalance, d.reason), (true, Reason::PowerDrift));
        assert_eq!(
            d.to_string(),
            "rebalance (power drift): eff = 0.8333 >= eff_min = 0.5000; power drift 50.00% \
             (part 0) > 10.00%, eff under new powers 0.8333"
        );
    }

    #[test]
    fn bad_observations() {
        let p = Policy::default();
        let e = |o: Observation<'_>| p.decide(&o).unwrap_err().to_string();
        assert_eq!(e(obs(&[], &[])), "loads is empty");
        assert_eq!(
            e(obs(&[1.0, f64::NAN], &[1.0, 1.0])),
            "loads[1] is NaN; expected a finite number >= 0"
        );
        assert_eq!(
            e(obs(&[1.0, 1.0], &[1.0, 0.0])),
            "capacities[1] is 0; expected a finite number > 0"
        );
        assert_eq!(
            e(obs(&[1.0, 1.0], &[1.0])),
            "capacities has 1 entries, expected 2 (one per group)"
        );
        let bad = Policy { eff_min: 1.5, ..p };
        assert_eq!(
            bad.decide(&obs(&[1.0], &[1.0])).unwrap_err().to_string(),
            "eff_min is 1.5; expected a number in (0, 1]"
        );
        let mut o = obs(&[1.0], &[1.0]);
        o.step_time = Some(-1.0);
        o.migration = Some(Migration {
            link: LinkModel {
                alpha: 0.0,
                beta: 1e-9,
            },
            bytes_per_load: 8.0,
            delta: 0.0,
        });
        assert_eq!(
            e(o),
            "step_time is -1; expected a finite number of seconds >= 0"
        );
    }
}
