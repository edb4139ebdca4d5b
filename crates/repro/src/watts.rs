//! Watts, Rieffel & Taylor 1998 measured here: the paper's four-way experiment (study
//! `watts`: no balancing, homogeneous balancing with the ranks' time as the load, static
//! capacities, measured capacities) and incremental load transfer against the global
//! KEEP_CUTS recut with the load switching cores (study `transfer`). Every run is the
//! `fem-laplace` binary over two thread ranks pinned to cores 0 and 1 with real competing
//! processes pinned to a core, DRUM's real monitors, and the rebalance policy deciding.

use crate::error::{Context, Result};
use crate::measured::{self, HostRun};
use crate::studies::{Scale, load};
use serde::Serialize;
use std::path::Path;

/// The four cases, in the paper's order.
pub const CASES: [&str; 4] = ["none", "homogeneous", "static", "measured"];

/// The incremental-vs-recut methods, the recut first.
pub const METHODS: [&str; 4] = ["recut", "hbm", "gde", "implicit"];

/// Rebalance points before the step times count ("after the first two rebalances").
pub const SETTLE: usize = 2;

/// One run of the four-way experiment, as `results.json` lists it (`studies.watts`).
#[derive(Debug, Clone, Serialize)]
pub struct WattsRecord {
    /// `none`, `homogeneous`, `static` or `measured`.
    pub case: &'static str,
    /// Competing processes on core 1.
    pub competitors: usize,
    /// Always `measured`.
    pub mode: &'static str,
    /// Mean wall time of the steps after the first [`SETTLE`] rebalance points.
    pub step_time_s: f64,
    /// Elements moved at each rebalance point (steps 1, 2, …).
    pub moved_per_round: Vec<u64>,
    /// The whole run (sum of the steps' wall times), every repeat's median.
    pub time_s: f64,
}

/// One run of the incremental-vs-recut comparison (`studies.transfer`).
#[derive(Debug, Clone, Serialize)]
pub struct TransferRecord {
    /// `recut` (KEEP_CUTS HSFC) or the transfer calculation (`hbm`, `gde`, `implicit`).
    pub method: &'static str,
    /// Elements migrated over the run (after the initial partition).
    pub migrated_elements: u64,
    /// Sum of the steps' wall times.
    pub time_s: f64,
    /// Mean wall time of the steps after the first [`SETTLE`] rebalance points.
    pub step_time_s: f64,
    /// Elements moved at each rebalance point.
    pub moved_per_round: Vec<u64>,
    /// The competing process: on core 1, then on core 0 from this step.
    pub switch_step: usize,
}

/// Both studies' runs.
#[derive(Debug, Clone, Default)]
pub struct Runs {
    /// The four-way experiment.
    pub watts: Vec<WattsRecord>,
    /// Incremental transfer against the recut.
    pub transfer: Vec<TransferRecord>,
}

/// The mesh of these studies: a quarter of the scale's (their 16 runs stay within about two
/// minutes at `--quick`), the scale's own when tiny.
pub fn target(scale: Scale, target: usize) -> usize {
    match scale {
        Scale::Tiny => target,
        Scale::Quick | Scale::Full => (target / 4).max(4_000),
    }
}

/// The competitor counts of a scale.
fn competitors(scale: Scale) -> &'static [usize] {
    match scale {
        Scale::Tiny => &[1],
        Scale::Quick | Scale::Full => &[1, 2, 3],
    }
}

/// The transfer methods of a scale.
fn methods(scale: Scale) -> &'static [&'static str] {
    match scale {
        Scale::Tiny => &METHODS[..2],
        Scale::Quick | Scale::Full => &METHODS,
    }
}

/// How case `case` runs (with `k` competitors on core 1): none is equal parts never
/// rebalanced; the others are decided by the rebalance policy.
fn watts_run(case: &str, k: usize) -> HostRun {
    let (balance, rebalance, capacity) = match case {
        "none" => ("uniform", "never", None),
        "homogeneous" => ("uniform", "policy", Some("homogeneous")),
        "static" => ("static", "policy", Some("static")),
        _ => ("monitored", "policy", Some("measured")),
    };
    HostRun {
        ranks: 2,
        balance,
        w_comm: 0.0,
        loads: vec![load(1, k, 0, None)],
        rebalance,
        sensing: "1".into(),
        extra: capacity
            .map(|c| vec!["--capacity".to_string(), c.to_string()])
            .unwrap_or_default(),
    }
}

/// The steps' wall times and the elements moved at each rebalance point of a run.
fn figures(steps: &[serde_json::Value]) -> Result<(f64, Vec<u64>)> {
    let walls: Vec<f64> = steps
        .iter()
        .map(|s| s["wall_s"].as_f64().context("a step without wall_s"))
        .collect::<Result<_>>()?;
    let moved: Vec<u64> = steps
        .iter()
        .skip(1)
        .map(|s| s["migration"]["elements"].as_u64().unwrap_or(0))
        .collect();
    let late = &walls[(SETTLE + 1).min(walls.len().saturating_sub(1))..];
    let step_time = late.iter().sum::<f64>() / late.len().max(1) as f64;
    Ok((step_time, moved))
}

/// Where the runs go and how.
pub struct Setup<'a> {
    /// The `fem-laplace` binary.
    pub fem: &'a Path,
    /// The runs' files.
    pub dir: &'a Path,
    /// One core's rating.
    pub mflops: f64,
    /// The scale.
    pub scale: Scale,
    /// The mesh size (vertices).
    pub target: usize,
    /// Repeats of each run (the median is kept).
    pub repeats: usize,
    /// The adaptive run's number of steps.
    pub steps: usize,
}

/// Runs both studies. Static capacities are the ratings a benchmark sharing core 1 with `k`
/// processes would give at a fair share: core 1 rated 1/(k+1) of core 0 (its machine file is
/// written per `k`); the run's real share differs (the rank sleeps while it waits for its
/// peer, and the monitors take their part), as the paper's estimates differed.
pub fn run_all(s: &Setup<'_>, mut progress: impl FnMut(&str)) -> Result<Runs> {
    let mut runs = Runs::default();
    let host = s.dir.join("host-2.xml");
    crate::output::write_whole(&host, measured::host_xml(2, s.mflops))?;
    for &k in competitors(s.scale) {
        let rated = s.dir.join(format!("host-2-static-{k}.xml"));
        crate::output::write_whole(
            &rated,
            measured::host_xml_rated(&[s.mflops, s.mflops / (k + 1) as f64]),
        )?;
        for case in CASES {
            let cfg = watts_run(case, k);
            let machine = if case == "static" { &rated } else { &host };
            let tag = format!("watts-{case}-{k}");
            let m = measured::run(s.fem, machine, s.dir, &tag, &cfg, s.target, s.repeats)
                .with_context(|| format!("watts {case}, {k} competitors"))?;
            let (step_time_s, moved_per_round) = figures(&m.steps)?;
            progress(&format!(
                "measured watts | {k} competitors | {case}: {step_time_s:.4} s per step, moved \
                 {moved_per_round:?}"
            ));
            runs.watts.push(WattsRecord {
                case,
                competitors: k,
                mode: "measured",
                step_time_s,
                moved_per_round,
                time_s: m.time_s,
            });
        }
    }
    let switch = (s.steps / 2).max(1);
    for &method in methods(s.scale) {
        let mut cfg = watts_run("measured", 1);
        cfg.loads = vec![load(1, 1, 0, Some(switch)), load(0, 1, switch, None)];
        if method != "recut" {
            cfg.extra
                .extend(["--transfer".to_string(), method.to_string()]);
        }
        let m = measured::run(
            s.fem,
            &host,
            s.dir,
            &format!("transfer-{method}"),
            &cfg,
            s.target,
            s.repeats,
        )
        .with_context(|| format!("transfer {method}"))?;
        let (step_time_s, moved_per_round) = figures(&m.steps)?;
        progress(&format!(
            "measured transfer | {method}: {:.3} s, {} elements migrated",
            m.time_s, m.migrated_elements
        ));
        runs.transfer.push(TransferRecord {
            method,
            migrated_elements: moved_per_round.iter().sum(),
            time_s: m.time_s,
            step_time_s,
            moved_per_round,
            switch_step: switch,
        });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_skip_the_settling_rounds() {
        let step = |wall: f64, moved: u64| serde_json::json!({"wall_s": wall, "migration": {"elements": moved}});
        let steps = [
            step(9.0, 0),
            step(9.0, 50),
            step(9.0, 20),
            step(1.0, 0),
            step(3.0, 5),
        ];
        let (t, moved) = figures(&steps).unwrap();
        assert_eq!(t, 2.0);
        assert_eq!(moved, vec![50, 20, 0, 5]);
    }
}
