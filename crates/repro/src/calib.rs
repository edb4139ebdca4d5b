//! The simulator's calibration, from a run measured on this host (two dedicated ranks,
//! uniform parts: `fem-laplace --json` step lines) and a link measurement between two thread
//! ranks.

use crate::error::{Context, Result, bail};
use crate::meshes::StepMesh;
use comm::{LinkModel, LinkProbe, ThreadComm, ThreadOptions};
use serde::Serialize;

/// What the model takes from measurements.
#[derive(Debug, Clone, Serialize)]
pub struct Calib {
    /// Seconds per element at each step on one dedicated core of this host: a rank's time
    /// outside collectives (less the repartition's `p`, if the step repartitioned) over its
    /// elements; the slower rank's.
    pub a: Vec<f64>,
    /// The part of `a` at each step spent before the repartition (marking and refinement),
    /// which a rank does on the elements it inherited, not on those it gets.
    pub pre: Vec<f64>,
    /// Seconds of one core per element a rank sends or receives in a migration, beyond the
    /// rebuild of its part that every step pays (in `a`): the median over the measured steps
    /// that moved at least [`MIN_MOVED`] elements, of the ranks on a core of their own.
    pub c_move: f64,
    /// The samples `c_move` is the median of.
    pub c_move_samples: usize,
    /// Seconds per step both ranks waited in collectives at once (this host's latency).
    pub l: Vec<f64>,
    /// Repartition seconds per element and rank: `hier-part` on the last mesh, two equal
    /// parts, in this process (median of 3), per element, halved.
    pub p: f64,
    /// The host core's LINPACK rating (the machine file's).
    pub host_mflops: f64,
    /// Bytes sent per cut edge and CG iteration (all of a step's messages but the
    /// migration's, over the cut edges of the run's partition and the iterations; median).
    pub bytes_per_cut_iteration: f64,
    /// Bytes a migrated element takes (measured migrations; median).
    pub bytes_per_element: f64,
    /// The monitoring agents' CPU over wall (mean over the ranks of a monitored run).
    pub monitor_overhead: f64,
    /// Seconds of extra common waiting per CG iteration when a rank gets only part of its
    /// CPU, per unit of the share it lacks (set so that the simulated time of a measured run
    /// with a competing process equals its measured time; 0 until calibrated).
    pub kappa: f64,
    /// α, β between two thread ranks of this host.
    #[serde(serialize_with = "link_json")]
    pub link: LinkModel,
}

impl Calib {
    /// One core of this host's seconds at step `k` for a rank that inherited `before`
    /// elements (its marking and refinement, `pre[k]` of `a[k]`), holds `after` (the rest of
    /// the step, times `overhead`: the monitors' share) and sent or received `moved` in the
    /// migration. The simulator charges it; [`effective_shares`] divides it by what a
    /// measured rank took.
    pub fn cpu_seconds(&self, k: usize, before: f64, after: f64, moved: f64, overhead: f64) -> f64 {
        let elements = self.pre[k] * before + (1.0 - self.pre[k]) * after;
        self.a[k] * elements * overhead + self.c_move * moved
    }
}

fn link_json<S: serde::Serializer>(l: &LinkModel, s: S) -> Result<S::Ok, S::Error> {
    (l.alpha, l.beta).serialize(s)
}

fn median(mut v: Vec<f64>) -> f64 {
    part_api::median(&mut v)
}

fn num(v: &serde_json::Value, what: &str) -> Result<f64> {
    v.as_f64().with_context(|| format!("no number `{what}`"))
}

/// The link between two thread ranks on cores 0 and 1 (a fit of 8 B and 1 MiB exchanges).
pub fn host_link() -> Result<LinkModel> {
    let probe = LinkProbe {
        repeats: 15,
        ..LinkProbe::default()
    };
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        comm::measure_link(&c, 0, 1, &probe)
    })
    .context("measuring the link between two thread ranks")?;
    let t = out
        .into_iter()
        .next()
        .context("no rank")?
        .context("measuring the link")?;
    t.fit().context("fitting the link between two thread ranks")
}

/// The fewest elements a measured step must move to calibrate [`Calib::c_move`] on.
pub const MIN_MOVED: f64 = 20_000.0;

/// A rank's seconds in phase `name` of a step line, less its waiting there.
fn phase_busy(r: &serde_json::Value, name: &str) -> Result<f64> {
    let t = num(&r["times"][name], &format!("times.{name}"))?;
    let w = num(
        &r["phases"][name]["wait_us"],
        &format!("phases.{name}.wait_us"),
    )?;
    Ok((t - w * 1e-6).max(0.0))
}

/// One step of a calibration run: the slower rank's seconds per element (less the
/// repartition's `own` seconds), the part of them before the repartition, the common
/// waiting, and the bytes all ranks sent.
fn step_costs(s: &serde_json::Value, own: f64) -> Result<(f64, f64, f64, f64)> {
    let wall = num(&s["wall_s"], "wall_s")?;
    let ranks = s["ranks"].as_array().context("no `ranks`")?;
    let (mut per_element, mut pre, mut busy_max, mut sent) = (0.0f64, 0.0, 0.0f64, 0.0);
    for r in ranks {
        let busy = (wall - num(&r["wait_s"], "wait_s")?).max(0.0);
        let work = num(&r["work"], "work")?.max(1.0);
        let e = (busy - own).max(0.0) / work;
        if e >= per_element {
            per_element = e;
            let before = phase_busy(r, "mark")? + phase_busy(r, "refine")?;
            pre = if busy > own {
                (before / (busy - own)).min(1.0)
            } else {
                0.0
            };
        }
        busy_max = busy_max.max(busy);
        sent += num(&r["bytes"], "bytes")?;
    }
    Ok((per_element, pre, (wall - busy_max).max(0.0), sent))
}

/// The calibration from the step lines of the dedicated 2-rank runs `runs` (every one over
/// the meshes `seq`, equal to the bit; each step's costs are the median over the runs, so
/// that one slow or fast run does not set the model), with `cut_edges(k)` the cut edges of
/// the simulator's own 2-rank partition of step k and `p` the repartition's seconds per
/// element and rank. [`Calib::c_move`] is left 0 ([`migration_cost`] fits it).
pub fn calibrate(
    runs: &[&[serde_json::Value]],
    seq: &[StepMesh],
    cut_edges: impl Fn(usize) -> f64,
    p: f64,
    host_mflops: f64,
    monitor_overhead: f64,
    link: LinkModel,
) -> Result<Calib> {
    if runs.is_empty() {
        bail!("no calibration run");
    }
    for steps in runs {
        if steps.len() != seq.len() {
            bail!(
                "a calibration run has {} steps, the serial run {}",
                steps.len(),
                seq.len()
            );
        }
    }
    let (mut a, mut pre, mut l) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bpc, mut bpe) = (Vec::new(), Vec::new());
    for k in 0..seq.len() {
        let n = seq[k].elements() as f64;
        let (mut ak, mut prek, mut lk) = (Vec::new(), Vec::new(), Vec::new());
        for steps in runs {
            let s = &steps[k];
            let ranks = s["ranks"].as_array().context("no `ranks`")?.len() as f64;
            // The repartition's own cost is the model's `p`, charged where a run repartitions.
            let repartitioned = s["balance"]["decision"]["rebalance"].as_bool() == Some(true);
            let own = if repartitioned { p * n / ranks } else { 0.0 };
            let (e, before, wait, sent) = step_costs(s, own)?;
            ak.push(e);
            prek.push(before);
            lk.push(wait);
            let mig_bytes = num(&s["migration"]["bytes"], "migration.bytes")?;
            let mig_elems = num(&s["migration"]["elements"], "migration.elements")?;
            if mig_elems > 0.0 {
                bpe.push(mig_bytes / mig_elems);
            }
            let cut = cut_edges(k);
            let iters = seq[k].cg_iterations as f64;
            if k >= 3 && cut > 0.0 && iters > 0.0 {
                bpc.push((sent - mig_bytes).max(0.0) / (cut * iters));
            }
        }
        a.push(median(ak));
        pre.push(median(prek));
        l.push(median(lk));
    }
    let bytes_per_element = median(bpe);
    let bytes_per_cut_iteration = median(bpc);
    for (what, v) in [
        ("bytes per migrated element", bytes_per_element),
        ("bytes per cut edge and iteration", bytes_per_cut_iteration),
    ] {
        if !v.is_finite() {
            bail!("the calibration run gives no {what} (too few steps?)");
        }
    }
    Ok(Calib {
        a,
        pre,
        c_move: 0.0,
        c_move_samples: 0,
        l,
        p,
        host_mflops,
        bytes_per_cut_iteration,
        bytes_per_element,
        monitor_overhead,
        kappa: 0.0,
        link,
    })
}

/// [`Calib::c_move`]: seconds of one core per migrated element, from measured runs.
///
/// `calibration` are the dedicated runs [`calibrate`] used: at step k their migration phase
/// (a kept partition's rebuild) costs `r_k` seconds per owned element (median). Each of
/// `runs` gives its step lines and, per step and rank, whether the rank had its core to
/// itself. A step that moved `m` ≥ [`MIN_MOVED`] elements gives, for each such rank, one
/// sample `(t − r_k · w) / m`, with `t` the rank's migration seconds less its waiting and
/// `w` its elements after (on two ranks every moved element is sent by one and received by
/// the other). Returns the median and the number of samples (0 and 0 without samples).
pub fn migration_cost(
    calibration: &[&[serde_json::Value]],
    runs: &[(&[serde_json::Value], Vec<Vec<bool>>)],
) -> Result<(f64, usize)> {
    let mut rebuild = Vec::new();
    for k in 0..calibration.first().map_or(0, |r| r.len()) {
        let mut per = Vec::new();
        for steps in calibration {
            let mut worst = 0.0f64;
            for r in steps[k]["ranks"].as_array().context("no `ranks`")? {
                let w = num(&r["work"], "work")?.max(1.0);
                worst = worst.max(phase_busy(r, "migrate")? / w);
            }
            per.push(worst);
        }
        rebuild.push(median(per));
    }
    let mut samples = Vec::new();
    for (steps, free) in runs {
        for (k, s) in steps.iter().enumerate() {
            let moved = num(&s["migration"]["elements"], "migration.elements")?;
            if moved < MIN_MOVED || k >= rebuild.len() {
                continue;
            }
            let ranks = s["ranks"].as_array().context("no `ranks`")?;
            for (r, rank) in ranks.iter().enumerate() {
                if free.get(k).and_then(|f| f.get(r)) == Some(&true) {
                    let w = num(&rank["work"], "work")?;
                    let t = phase_busy(rank, "migrate")?;
                    samples.push(((t - rebuild[k] * w) / moved).max(0.0));
                }
            }
        }
    }
    let n = samples.len();
    Ok((if n == 0 { 0.0 } else { median(samples) }, n))
}

/// A rank that shared its core in a measured run: the share of a CPU the model gives it
/// and the share it got.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SharedRank {
    pub rank: usize,
    /// The model's share (time-weighted over the steps it shared its core).
    pub nominal: f64,
    /// The model's CPU seconds for what the rank did (its elements before and after each
    /// repartition, its migrations) over the seconds it was busy, over the same steps.
    pub effective: f64,
}

/// The effective CPU share of every rank of a measured run (its step lines `steps`) that
/// shared its core (`nominal(k)[r] < 1`): at step k the model's CPU seconds for rank r are
/// `a_k (pre_k b + (1 − pre_k) w) + c_move m`, with `w` its elements, `b` its share of the
/// elements at step k − 1 times the step's elements, `m` the elements the step moved; its
/// busy seconds are the step's wall time less its waiting. Ranks that never shared are left
/// out.
pub fn effective_shares(
    steps: &[serde_json::Value],
    c: &Calib,
    nominal: impl Fn(usize) -> Vec<f64>,
) -> Result<Vec<SharedRank>> {
    let mut acc: Vec<(f64, f64, f64)> = Vec::new();
    let mut previous: Option<Vec<f64>> = None;
    for (k, s) in steps.iter().enumerate().take(c.a.len()) {
        let n = num(&s["elements"], "elements")?;
        let wall = num(&s["wall_s"], "wall_s")?;
        let moved = if k > 0 {
            num(&s["migration"]["elements"], "migration.elements")?
        } else {
            0.0
        };
        let ranks = s["ranks"].as_array().context("no `ranks`")?;
        let nom = nominal(k);
        acc.resize(ranks.len().max(acc.len()), (0.0, 0.0, 0.0));
        let mut shares = Vec::with_capacity(ranks.len());
        for (r, rank) in ranks.iter().enumerate() {
            let w = num(&rank["work"], "work")?;
            shares.push(w / n.max(1.0));
            let share = nom.get(r).copied().unwrap_or(1.0);
            if share >= 1.0 {
                continue;
            }
            let b = previous
                .as_ref()
                .and_then(|p| p.get(r))
                .map_or(w, |p| p * n);
            let cpu = c.cpu_seconds(k, b, w, moved, 1.0);
            let busy = (wall - num(&rank["wait_s"], "wait_s")?).max(0.0);
            acc[r].0 += cpu;
            acc[r].1 += busy;
            acc[r].2 += share * busy;
        }
        previous = Some(shares);
    }
    Ok(acc
        .iter()
        .enumerate()
        .filter(|(_, a)| a.1 > 0.0)
        .map(|(rank, a)| SharedRank {
            rank,
            nominal: a.2 / a.1,
            effective: a.0 / a.1,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Validation;
    use serde_json::json;

    /// A 2-rank step line: elements, wall, moved, and per rank (work, wait, migrate busy).
    fn step(n: u64, wall: f64, moved: u64, ranks: [(f64, f64, f64); 2]) -> serde_json::Value {
        let rank = |(work, wait, mig): (f64, f64, f64)| {
            json!({"work": work, "wait_s": wait, "bytes": 0.0,
                   "times": {"migrate": mig + 0.001, "mark": 0.0, "refine": 0.0},
                   "phases": {"migrate": {"wait_us": 1000.0}, "mark": {"wait_us": 0.0},
                              "refine": {"wait_us": 0.0}}})
        };
        json!({"elements": n, "wall_s": wall, "migration": {"elements": moved, "bytes": 0},
               "balance": {"decision": {"rebalance": false}},
               "ranks": [rank(ranks[0]), rank(ranks[1])]})
    }

    fn calib(a: f64) -> Calib {
        Calib {
            a: vec![a; 2],
            pre: vec![0.0; 2],
            c_move: 0.0,
            c_move_samples: 0,
            l: vec![0.0; 2],
            p: 0.0,
            host_mflops: 1.0,
            bytes_per_cut_iteration: 1.0,
            bytes_per_element: 1.0,
            monitor_overhead: 0.0,
            kappa: 0.0,
            link: LinkModel {
                alpha: 0.0,
                beta: 0.0,
            },
        }
    }

    #[test]
    fn the_migration_cost_is_what_a_free_rank_spends_beyond_its_rebuild() {
        // Calibration: the rebuild costs 1e-7 s per element (0.01 s for 100,000).
        let one = step(200_000, 1.0, 0, [(1e5, 0.0, 0.01), (1e5, 0.0, 0.01)]);
        let cal = [one.clone(), one];
        let cal: Vec<&[serde_json::Value]> = vec![&cal, &cal];
        // A move of 40,000: the free rank 1 (100,000 elements) spends 0.01 + 40,000 × 5e-7;
        // the shared rank 0 is not a sample.
        let moving = [
            step(200_000, 1.0, 0, [(1e5, 0.0, 0.01), (1e5, 0.0, 0.01)]),
            step(200_000, 1.0, 40_000, [(1e5, 0.0, 9.0), (1e5, 0.0, 0.03)]),
        ];
        let free = vec![vec![false, true]; 2];
        let (c, n) = migration_cost(&cal, &[(&moving, free.clone())]).unwrap();
        assert_eq!(n, 1);
        assert!((c - 5e-7).abs() < 1e-12, "{c}");
        // Too few moved elements: no sample.
        let small = [
            moving[0].clone(),
            step(200_000, 1.0, 100, [(1e5, 0.0, 9.0); 2]),
        ];
        assert_eq!(migration_cost(&cal, &[(&small, free)]).unwrap(), (0.0, 0));
    }

    #[test]
    fn a_shared_rank_s_effective_share_is_model_cpu_over_busy_time() {
        // a = 1e-6: 100,000 elements are 0.1 s of CPU. Rank 1 shares its core (half a CPU)
        // and was busy 0.25 s: it got 0.4 of a CPU. Rank 0 has its own core: left out.
        let steps = [
            step(200_000, 0.25, 0, [(1e5, 0.15, 0.0), (1e5, 0.0, 0.0)]),
            step(200_000, 0.25, 0, [(1e5, 0.15, 0.0), (1e5, 0.0, 0.0)]),
        ];
        let s = effective_shares(&steps, &calib(1e-6), |_| vec![1.0, 0.5]).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].rank, 1);
        assert!((s[0].nominal - 0.5).abs() < 1e-12);
        assert!((s[0].effective - 0.4).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn a_miss_names_its_mechanism_in_the_direction_of_the_error() {
        let v = |simulated_s: f64, effective: f64| {
            let mut v = Validation {
                config: "c".into(),
                measured_s: 2.0,
                simulated_s,
                rel_err: (simulated_s - 2.0) / 2.0,
                calibration: false,
                spread_s: (1.9, 2.3),
                shared: vec![SharedRank {
                    rank: 1,
                    nominal: 0.5,
                    effective,
                }],
                sensed_at: None,
                mechanism: None,
            };
            v.explain();
            v.mechanism
        };
        assert_eq!(v(2.1, 0.2), None);
        assert_eq!(
            v(1.5, 0.3).as_deref(),
            Some("the shared core gave rank 1 0.30 of a CPU, the model 0.50")
        );
        // The model is too fast but the rank got more than its share: not that.
        assert_eq!(v(1.5, 0.7).as_deref(), Some("not identified"));
        assert_eq!(
            v(2.5, 0.7).as_deref(),
            Some("the shared core gave rank 1 0.70 of a CPU, the model 0.50")
        );
        // Beyond 15 % but inside the repeats' spread: that first.
        let mut w = Validation {
            config: "c".into(),
            measured_s: 2.0,
            simulated_s: 1.65,
            rel_err: -0.175,
            calibration: false,
            spread_s: (1.6, 2.4),
            shared: Vec::new(),
            sensed_at: None,
            mechanism: None,
        };
        w.explain();
        assert_eq!(
            w.mechanism.as_deref(),
            Some("within the repeats' spread (1.600–2.400 s)")
        );
        // Sensed at other steps than the model: that before the shares.
        w.spread_s = (1.9, 2.1);
        w.sensed_at = Some((vec![13], vec![12]));
        w.explain();
        assert_eq!(
            w.mechanism.as_deref(),
            Some("the monitors sensed at steps [13], the model at [12]")
        );
        w.sensed_at = Some((vec![12], vec![12]));
        w.explain();
        assert_eq!(w.mechanism.as_deref(), Some("not identified"));
        w.calibration = true;
        w.explain();
        assert_eq!(w.mechanism, None);
    }
}
