//! The two SAMR papers' experiments on the `samr-kernel`: Sinha & Parashar's
//! system-sensitive partitioning (`sinha`) and Lan, Taylor & Bryan's distributed DLB
//! (`lan`). Runs are thread ranks of this process:
//! - **measured**: ranks pinned to cores 0 and 1, real compute-bound competing processes
//!   pinned to a core (`drum_model::load`), DRUM's real monitors sensing the capacities
//!   before each regrid; the time is the sum of the level-0 steps and regrids (slowest rank);
//! - **simulated** (Sinha & Parashar's 4–32 processors of fixed relative capacities): the
//!   real partitioners on the real hierarchy, timed by a model: a step takes
//!   `max_k W_k / C_k` (the slowest processor's work over its capacity), in units of the
//!   perfectly balanced step `W / Σ C_k`; so a model time of 1 per step is perfect balance.

use crate::error::{Context, Result};
use comm::{ThreadComm, ThreadOptions};
use drum_loop::{LoopConfig, RebalanceMode, Sensing, Sizing};
use drum_model::Machine;
use drum_model::load::LoadSpec;
use samr_kernel::drum::{DrumSetup, RankDrum};
use samr_kernel::lan::{LinkModel, Policy};
use samr_kernel::{
    Balancer, BoxMethod, Clock, Cluster, Figures, LinkSource, LocalMethod, RankRun, SamrConfig,
    SamrError, StepReport, SwitchNode, TwoPhase, TwoPhaseConfig, switch_plan,
};
use serde::Serialize;
use std::time::Duration;

/// One SAMR run, as `results.json` lists it (`studies.sinha`, `studies.lan`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SamrRecord {
    pub study: &'static str,
    pub config: String,
    pub variant: String,
    pub mode: &'static str,
    pub ranks: usize,
    /// `sfc` (GrACE's default), `ace` (ACEHeterogeneous) or `two-phase`.
    pub partitioner: &'static str,
    /// Where the capacities come from: `equal`, `fixed`, `monitored`.
    pub capacities_from: &'static str,
    /// `every N` regrids or `once` (monitored), else `-`.
    pub sensing: String,
    pub loads: Vec<String>,
    /// The relative capacities `I_k` is measured against (fixed ones, or for measured runs
    /// the CPU shares the competing processes leave: 1/(1+k) of a core).
    pub reference: Vec<f64>,
    /// Mean over the regrids of the capacities the balancer was given.
    pub capacities: Vec<f64>,
    /// Each rank's share of the work, mean over the steps.
    pub work_share: Vec<f64>,
    /// Each rank's `I_k = |W_k − L_k| / L_k` (Sinha & Parashar eq. 2) against `reference`,
    /// mean over the steps, in percent.
    pub imbalance_percent: Vec<f64>,
    /// Measured: seconds of the level-0 steps and regrids.
    pub time_s: Option<f64>,
    /// The model's time: Σ over the steps of `max_k W_k / (C_k W)` with `C = reference`.
    pub model_time: f64,
    /// Steps whose global phase redistributed (two-phase), or regrids (flat: each lays the
    /// boxes out afresh over all ranks).
    pub global_redistributions: usize,
    /// Bytes sent between the groups (over the modelled slow link).
    pub link_bytes: Option<u64>,
    /// Bytes sent between ranks.
    pub bytes: u64,
    pub steps: usize,
}

/// How big the SAMR runs are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    pub n0: i64,
    pub steps: usize,
    pub sweeps: u32,
    /// Processor counts of the simulated Table I.
    pub simulated_ranks: &'static [usize],
    pub periods: &'static [usize],
}

impl Size {
    pub fn of(scale: crate::studies::Scale) -> Size {
        match scale {
            crate::studies::Scale::Tiny => Size {
                n0: 64,
                steps: 16,
                sweeps: 10,
                simulated_ranks: &[4],
                periods: &[1],
            },
            _ => Size {
                n0: 128,
                steps: 80,
                sweeps: 60,
                simulated_ranks: &[4, 8, 16, 32],
                periods: &[1, 2, 4],
            },
        }
    }

    fn config(&self) -> SamrConfig {
        SamrConfig {
            n0: self.n0,
            max_level: 2,
            // Sinha & Parashar regrid every 5 iterations (§6.2.2); 4 keeps the level-2 cuts
            // even.
            regrid_every: 4,
            cluster: Cluster {
                efficiency: 0.85,
                min_box: 4,
            },
            sweeps: self.sweeps,
            ..SamrConfig::default()
        }
    }
}

/// The relative capacities of Sinha & Parashar §6.2.2 (Figs. 8–10).
pub const PAPER_CAPACITIES: [f64; 4] = [0.16, 0.19, 0.31, 0.34];

/// The modelled link between Lan et al.'s two sites: an assumption (a WAN of their time:
/// 5 ms latency, 10 MB/s), not a figure of the paper.
pub const SITE_LINK: LinkModel = LinkModel {
    alpha: 5e-3,
    beta: 1e-7,
};

/// One run to make.
struct Spec {
    study: &'static str,
    config: String,
    variant: String,
    ranks: usize,
    balancer: Balancer,
    figures: Figures,
    drum: DrumSetup,
    reference: Vec<f64>,
    partitioner: &'static str,
    capacities_from: &'static str,
    sensing: String,
    measured: bool,
}

/// What every rank's steps gave, from rank 0.
fn execute(spec: &Spec, cfg: SamrConfig, steps: usize) -> Result<Vec<(StepReport, Vec<f64>)>> {
    let opts = ThreadOptions {
        cpus: spec.drum.cpus.clone(),
        ..ThreadOptions::default()
    };
    let results = ThreadComm::run(spec.ranks, &opts, |comm| {
        let mut drum = RankDrum::start(&comm, &spec.drum, false)?;
        let mut run = RankRun::new(comm, cfg, spec.balancer.clone(), spec.figures.clone())?;
        let mut out = Vec::with_capacity(steps);
        for k in 0..steps {
            drum.before_step(&mut run, k)?;
            let r = run.step()?;
            out.push((r, run.capacities().to_vec()));
        }
        drum.stop()?;
        Ok::<_, SamrError>(out)
    })
    .with_context(|| format!("{} {} {}: the run", spec.study, spec.config, spec.variant))?;
    let mut first = None;
    for (rank, r) in results.into_iter().enumerate() {
        let r = r.with_context(|| {
            format!(
                "{} {} {}: rank {rank}",
                spec.study, spec.config, spec.variant
            )
        })?;
        first.get_or_insert(r);
    }
    first.context("a run without ranks")
}

/// What a record takes from one level-0 step: a thread run's report, or a line of
/// `samr --json` (the namespace-cluster runs).
#[derive(Debug, Clone, PartialEq)]
struct StepFigures {
    /// Each rank's work.
    work: Vec<u64>,
    /// The capacities in force.
    capacities: Vec<f64>,
    /// The level-0 step and its regrid and balancing (the slowest rank's), seconds.
    seconds: f64,
    /// The global phase redistributed (two-phase), or the step regridded (flat).
    redistributed: bool,
    link_bytes: Option<u64>,
    bytes: u64,
}

impl StepFigures {
    fn of(s: &StepReport, capacities: &[f64]) -> StepFigures {
        StepFigures {
            work: s.ranks.iter().map(|k| k.work).collect(),
            capacities: capacities.to_vec(),
            seconds: s.step_seconds + s.balance_seconds,
            redistributed: match &s.global {
                Some(_) => s.rebalanced.is_some(),
                None => s.regrid.is_some(),
            },
            link_bytes: s.link_bytes,
            bytes: s.bytes,
        }
    }

    /// From a line of `samr --json` (`what` names it in errors).
    fn from_json(line: &str, what: &str) -> Result<StepFigures> {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{what}: not JSON"))?;
        let num = |key: &str| {
            v[key]
                .as_f64()
                .with_context(|| format!("{what}: no number `{key}`"))
        };
        let u64s = |x: &serde_json::Value, key: &str| -> Result<u64> {
            x.as_u64()
                .with_context(|| format!("{what}: `{key}` is not a count"))
        };
        let ranks = v["ranks"]
            .as_array()
            .with_context(|| format!("{what}: no `ranks` list"))?;
        let work = ranks
            .iter()
            .map(|r| u64s(&r["work"], "ranks[].work"))
            .collect::<Result<Vec<_>>>()?;
        let capacities = v["capacities"]
            .as_array()
            .with_context(|| format!("{what}: no `capacities` list"))?
            .iter()
            .map(|c| {
                c.as_f64()
                    .with_context(|| format!("{what}: a capacity is not a number"))
            })
            .collect::<Result<Vec<_>>>()?;
        if capacities.len() != work.len() {
            crate::error::bail!(
                "{what}: {} capacities for {} ranks",
                capacities.len(),
                work.len()
            );
        }
        Ok(StepFigures {
            work,
            capacities,
            seconds: num("step_seconds")? + num("balance_seconds")?,
            redistributed: match v["global"].is_null() {
                false => !v["rebalanced"].is_null(),
                true => !v["regrid"].is_null(),
            },
            link_bytes: match &v["link_bytes"] {
                serde_json::Value::Null => None,
                b => Some(u64s(b, "link_bytes")?),
            },
            bytes: u64s(&v["bytes"], "bytes")?,
        })
    }
}

/// The record of a run from its steps.
fn record(spec: &Spec, steps: &[(StepReport, Vec<f64>)]) -> SamrRecord {
    let mut rec = SamrRecord {
        study: spec.study,
        config: spec.config.clone(),
        variant: spec.variant.clone(),
        mode: if spec.measured {
            "measured"
        } else {
            "simulated"
        },
        ranks: spec.ranks,
        partitioner: spec.partitioner,
        capacities_from: spec.capacities_from,
        sensing: spec.sensing.clone(),
        loads: spec.drum.loads.iter().map(ToString::to_string).collect(),
        reference: spec.reference.clone(),
        capacities: Vec::new(),
        work_share: Vec::new(),
        imbalance_percent: Vec::new(),
        time_s: spec.measured.then_some(0.0),
        model_time: 0.0,
        global_redistributions: 0,
        link_bytes: None,
        bytes: 0,
        steps: 0,
    };
    let figures: Vec<StepFigures> = steps.iter().map(|(s, c)| StepFigures::of(s, c)).collect();
    add_steps(&mut rec, &figures);
    rec
}

/// Adds the figures of `steps` to `rec` (whose `ranks` and `reference` are set).
fn add_steps(rec: &mut SamrRecord, steps: &[StepFigures]) {
    let r = rec.ranks;
    let n = steps.len().max(1) as f64;
    rec.steps = steps.len();
    rec.capacities = vec![0.0; r];
    rec.work_share = vec![0.0; r];
    rec.imbalance_percent = vec![0.0; r];
    for s in steps {
        let total: f64 = s.work.iter().map(|&w| w as f64).sum::<f64>().max(1.0);
        let mut worst = 0.0f64;
        for (k, &w) in s.work.iter().enumerate().take(r) {
            let share = w as f64 / total;
            rec.work_share[k] += share / n;
            rec.capacities[k] += s.capacities[k] / n;
            let c = rec.reference[k];
            rec.imbalance_percent[k] += 100.0 * (share - c).abs() / c / n;
            worst = worst.max(share / c);
        }
        rec.model_time += worst;
        if let Some(t) = &mut rec.time_s {
            *t += s.seconds;
        }
        rec.global_redistributions += usize::from(s.redistributed);
        if let Some(b) = s.link_bytes {
            *rec.link_bytes.get_or_insert(0) += b;
        }
        rec.bytes += s.bytes;
    }
}

/// The configuration of Lan et al.'s runs on the namespace cluster.
pub(crate) const VCLUSTER_LAN_CONFIG: &str =
    "vcluster-sites: 2 sites x 2 MPI ranks, real 10 Mbit/s link (4 ranks on 2 cores)";

/// Lan et al.'s runs on the namespace cluster that `cargo xtask reproduce` made (its
/// `vcluster::lan`): under `dir`, `parallel/`, `distributed/` and `distributed-reprobe/`,
/// each with `run.json` and the run's `samr --json` lines in `steps.jsonl`. Read into records of mode `measured`.
pub(crate) fn read_vcluster_lan(dir: &std::path::Path) -> Result<Vec<SamrRecord>> {
    let mut out = Vec::new();
    for (name, partitioner, variant) in [
        ("parallel", "ace", "parallel DLB (flat ACE over all ranks)"),
        (
            "distributed",
            "two-phase",
            "distributed DLB (global + local phases; link measured once)",
        ),
        (
            "distributed-reprobe",
            "two-phase",
            "distributed DLB, link re-measured every 10 global phases",
        ),
    ] {
        let path = dir.join(name).join("steps.jsonl");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let steps = text
            .lines()
            .enumerate()
            .map(|(i, l)| StepFigures::from_json(l, &format!("{}:{}", path.display(), i + 1)))
            .collect::<Result<Vec<_>>>()?;
        let Some(first) = steps.first() else {
            crate::error::bail!("{}: no steps", path.display());
        };
        let ranks = first.work.len();
        if steps.iter().any(|s| s.work.len() != ranks) {
            crate::error::bail!("{}: the steps have different rank counts", path.display());
        }
        let mut rec = SamrRecord {
            study: "lan",
            config: VCLUSTER_LAN_CONFIG.into(),
            variant: variant.into(),
            mode: "measured",
            ranks,
            partitioner,
            capacities_from: "equal",
            sensing: "-".into(),
            loads: Vec::new(),
            reference: vec![1.0 / ranks as f64; ranks],
            capacities: Vec::new(),
            work_share: Vec::new(),
            imbalance_percent: Vec::new(),
            time_s: Some(0.0),
            model_time: 0.0,
            global_redistributions: 0,
            link_bytes: None,
            bytes: 0,
            steps: 0,
        };
        add_steps(&mut rec, &steps);
        out.push(rec);
    }
    Ok(out)
}

/// A host machine of `cores` single-core nodes (cores 0, 1, …), equally rated.
fn host_machine(cores: usize) -> Result<Machine> {
    let mut xml = String::from(
        r#"<machinemodel><node type="NETWORK" nodenum="0" name="localhost" parent="-1" bandwidth="48000"><lbmethod lbm="HSFC"/></node>"#,
    );
    for c in 0..cores {
        xml += &format!(
            r#"<node type="SINGLE_COMPUTING" nodenum="{}" name="core{c}" parent="0" cpus="{c}" mflops="8000"/>"#,
            c + 1
        );
    }
    xml += "</machinemodel>";
    Ok(Machine::parse_str(&xml, "the SAMR studies' host")?)
}

/// DRUM in the loop on `machine` with `loads`: `sizing` and `sensing` (`None`: no agent).
fn drum(machine: &Machine, loads: &[LoadSpec], sensing: Option<Sensing>) -> DrumSetup {
    let cpus = machine.rank_cpus().map(|c| {
        c.iter()
            .map(|r| r.iter().map(|&x| x as usize).collect())
            .collect()
    });
    DrumSetup {
        machine: Some(machine.clone()),
        config: sensing.map(|sensing| LoopConfig {
            sizing: Sizing::Monitored,
            rebalance: RebalanceMode::Never,
            sensing,
            period: Duration::from_millis(20),
            probe: None,
            ..LoopConfig::default()
        }),
        loads: loads.to_vec(),
        cpus,
    }
}

/// Normalised copies of `c`.
fn normalised(c: &[f64]) -> Vec<f64> {
    let s: f64 = c.iter().sum();
    c.iter().map(|x| x / s).collect()
}

/// Sinha & Parashar's simulated processors of fixed capacities, default and ACE.
fn simulated_specs(size: &Size) -> Vec<Spec> {
    let mut v = Vec::new();
    for &p in size.simulated_ranks {
        // Beyond 4 processors the paper gives no capacities: its 4-processor pattern,
        // repeated (an assumption).
        let caps = normalised(
            &(0..p)
                .map(|k| PAPER_CAPACITIES[k % 4])
                .collect::<Vec<f64>>(),
        );
        let config = format!("{p} processors, capacities 16/19/31/34 % repeated");
        for (variant, partitioner, method) in [
            ("GrACE default (SFC)", "sfc", BoxMethod::Sfc { ranks: p }),
            (
                "ACEHeterogeneous",
                "ace",
                BoxMethod::Ace {
                    capacities: caps.clone(),
                },
            ),
        ] {
            v.push(Spec {
                study: "sinha",
                config: config.clone(),
                variant: variant.into(),
                ranks: p,
                balancer: Balancer::Flat(method),
                figures: Figures {
                    capacities: Some(caps.clone()),
                    ..Figures::default()
                },
                drum: DrumSetup::default(),
                reference: caps.clone(),
                partitioner,
                capacities_from: if partitioner == "sfc" {
                    "equal"
                } else {
                    "fixed"
                },
                sensing: "-".into(),
                measured: false,
            });
        }
    }
    v
}

/// Sinha & Parashar: simulated processors of fixed capacities (Figs. 8–10, Table I's
/// trend), and measured runs on two cores with a competing process (Table I) and with one
/// that moves (Tables II–III).
fn sinha_specs(size: &Size, half: usize) -> Result<Vec<Spec>> {
    let mut v = simulated_specs(size);
    let host = host_machine(2)?;
    let stat = [LoadSpec {
        rank: 1,
        procs: 1,
        from_step: 0,
        until_step: None,
    }];
    let moving = [
        LoadSpec {
            rank: 1,
            procs: 1,
            from_step: 0,
            until_step: Some(half),
        },
        LoadSpec {
            rank: 0,
            procs: 1,
            from_step: half,
            until_step: None,
        },
    ];
    let measured = |config: &str, variant: String, loads: &[LoadSpec], sensing: Option<Sensing>| {
        let (partitioner, method) = match sensing {
            None => ("sfc", BoxMethod::Sfc { ranks: 2 }),
            Some(_) => (
                "ace",
                BoxMethod::Ace {
                    capacities: vec![0.5, 0.5],
                },
            ),
        };
        Spec {
            study: "sinha",
            config: config.into(),
            variant,
            ranks: 2,
            balancer: Balancer::Flat(method),
            figures: Figures::default(),
            drum: drum(&host, loads, sensing),
            reference: vec![2.0 / 3.0, 1.0 / 3.0],
            partitioner,
            capacities_from: if sensing.is_some() {
                "monitored"
            } else {
                "equal"
            },
            sensing: match sensing {
                None => "-".into(),
                Some(Sensing::Once) => "once".into(),
                Some(Sensing::Every(n)) => format!("every {n}"),
            },
            measured: true,
        }
    };
    let c1 = "2 cores, 1 competing process on core 1";
    v.push(measured(c1, "GrACE default (SFC)".into(), &stat, None));
    v.push(measured(
        c1,
        "ACEHeterogeneous, sensing once".into(),
        &stat,
        Some(Sensing::Once),
    ));
    let c2 = format!("2 cores, 1 competing process on core 1, on core 0 from step {half}");
    v.push(measured(&c2, "GrACE default (SFC)".into(), &moving, None));
    v.push(measured(
        &c2,
        "ACEHeterogeneous, sensing once".into(),
        &moving,
        Some(Sensing::Once),
    ));
    for &n in size.periods {
        v.push(measured(
            &c2,
            format!("ACEHeterogeneous, sensing every {n} regrids"),
            &moving,
            Some(Sensing::Every(n)),
        ));
    }
    // The moving load's reference capacities change at `half`: I_k there is against the
    // first half's (a documented simplification; the times need no reference).
    Ok(v)
}

/// Lan et al.: two groups of two thread ranks, each group on its own core, joined by a
/// modelled slow link; parallel DLB (one flat layout over all ranks at each regrid) against
/// distributed DLB (the two phases).
fn lan_specs(size: &Size) -> Result<Vec<Spec>> {
    let groups = vec![0u32, 0, 1, 1];
    let cpus = Some(vec![vec![0], vec![0], vec![1], vec![1]]);
    let plan = switch_plan(
        &[
            SwitchNode {
                ranks: 2,
                mflops: 1000.0,
            },
            SwitchNode {
                ranks: 2,
                mflops: 1000.0,
            },
        ],
        "HSFC",
    )?;
    debug_assert_eq!(plan.rank_groups(1), groups);
    let figures = Figures {
        capacities: None,
        groups: Some(groups.clone()),
        slow_link: Some(SITE_LINK),
    };
    let two_phase = TwoPhase::new(
        TwoPhaseConfig {
            groups: groups.clone(),
            capacities: vec![1.0; 4],
            local: LocalMethod::Ace,
            block: (size.n0 / 16).max(1),
            policy: Policy {
                gamma: 2.0,
                eff_min: 0.95,
                ..Policy::default()
            },
            link: LinkSource::Fixed(SITE_LINK),
            clock: Clock::Measured,
        },
        size.n0,
    )?;
    let config = format!(
        "2 sites x 2 ranks (a core each), modelled link {} ms + {} MB/s",
        SITE_LINK.alpha * 1e3,
        1e-6 / SITE_LINK.beta
    );
    let spec = |variant: &str, partitioner, balancer| Spec {
        study: "lan",
        config: config.clone(),
        variant: variant.into(),
        ranks: 4,
        balancer,
        figures: Figures {
            groups: balancer_groups(partitioner).then(|| groups.clone()),
            ..figures.clone()
        },
        drum: DrumSetup {
            cpus: cpus.clone(),
            ..DrumSetup::default()
        },
        reference: vec![0.25; 4],
        partitioner,
        capacities_from: "equal",
        sensing: "-".into(),
        measured: true,
    };
    Ok(vec![
        spec(
            "parallel DLB (flat ACE over all ranks)",
            "ace",
            Balancer::Flat(BoxMethod::Ace {
                capacities: vec![1.0; 4],
            }),
        ),
        spec(
            "distributed DLB (global + local phases)",
            "two-phase",
            Balancer::TwoPhase(Box::new(two_phase)),
        ),
    ])
}

/// Flat runs name their groups (to count the bytes between them); the two-phase scheme
/// knows its own.
fn balancer_groups(partitioner: &str) -> bool {
    partitioner != "two-phase"
}

/// Every SAMR run of the scale, `tick`ed one by one.
pub(crate) fn run_all(
    scale: crate::studies::Scale,
    mut tick: impl FnMut(&str),
) -> Result<Vec<SamrRecord>> {
    let size = Size::of(scale);
    let cfg = size.config();
    cfg.validate()?;
    let mut specs = sinha_specs(&size, size.steps / 2)?;
    specs.extend(lan_specs(&size)?);
    let mut out = Vec::with_capacity(specs.len());
    for s in &specs {
        // The simulated runs need no timing: a shorter, cheaper run of the same hierarchy.
        let c = if s.measured {
            cfg
        } else {
            SamrConfig { sweeps: 1, ..cfg }
        };
        let steps = execute(s, c, size.steps)?;
        let rec = record(s, &steps);
        tick(&format!(
            "{} {} | {} | {}: {}",
            rec.mode,
            rec.study,
            rec.config,
            rec.variant,
            rec.time_s
                .map_or(format!("model {:.2}", rec.model_time), |t| format!(
                    "{t:.3} s"
                ))
        ));
        out.push(rec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_four_processors_follow_the_capacities_with_ace_only() {
        let size = Size {
            n0: 32,
            steps: 4,
            sweeps: 1,
            simulated_ranks: &[4],
            periods: &[],
        };
        let specs = sinha_specs(&size, 2).unwrap();
        let recs: Vec<SamrRecord> = specs
            .iter()
            .filter(|s| !s.measured)
            .map(|s| record(s, &execute(s, size.config(), size.steps).unwrap()))
            .collect();
        let (sfc, ace) = (&recs[0], &recs[1]);
        assert_eq!((sfc.partitioner, ace.partitioner), ("sfc", "ace"));
        for (k, c) in PAPER_CAPACITIES.iter().enumerate() {
            assert!(
                (sfc.work_share[k] - 0.25).abs() < 0.08,
                "{:?}",
                sfc.work_share
            );
            assert!((ace.work_share[k] - c).abs() < 0.05, "{:?}", ace.work_share);
        }
        let worst = |r: &SamrRecord| r.imbalance_percent.iter().copied().fold(0.0, f64::max);
        assert!(worst(ace) < worst(sfc), "{ace:?} {sfc:?}");
        assert!(ace.model_time < sfc.model_time);
        assert!(ace.model_time >= size.steps as f64 * 0.999);
    }

    /// The namespace runs are read from `samr --json` lines: the same figures as the
    /// in-process record of the same steps (lines as the `samr` command writes them: the
    /// report with the capacities in force), and a broken line names its file and line.
    #[test]
    fn samr_json_lines_give_the_in_process_record() {
        let size = Size {
            n0: 32,
            steps: 4,
            sweeps: 1,
            simulated_ranks: &[],
            periods: &[],
        };
        let specs = lan_specs(&size).unwrap();
        let dir = std::env::temp_dir().join(format!("repro-lan-json-{}", std::process::id()));
        let mut want = Vec::new();
        let runs = specs.iter().zip(["parallel", "distributed"]);
        for (spec, name) in runs.chain([(&specs[1], "distributed-reprobe")]) {
            let steps = execute(
                spec,
                SamrConfig {
                    sweeps: 1,
                    ..size.config()
                },
                size.steps,
            )
            .unwrap();
            let mut text = String::new();
            for (r, caps) in &steps {
                let mut v = serde_json::to_value(r).unwrap();
                v["capacities"] = serde_json::json!(caps);
                text += &format!("{v}\n");
            }
            std::fs::create_dir_all(dir.join(name)).unwrap();
            std::fs::write(dir.join(name).join("steps.jsonl"), text).unwrap();
            want.push(record(spec, &steps));
        }
        let got = read_vcluster_lan(&dir).unwrap();
        assert_eq!(got.len(), 3);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.partitioner, w.partitioner);
            assert_eq!(g.work_share, w.work_share);
            assert_eq!(g.time_s, w.time_s);
            assert_eq!(
                (g.global_redistributions, g.link_bytes, g.bytes, g.steps),
                (w.global_redistributions, w.link_bytes, w.bytes, w.steps)
            );
        }
        assert!(got[0].link_bytes.is_some_and(|b| b > 0), "{:?}", got[0]);
        let p = dir.join("parallel").join("steps.jsonl");
        std::fs::write(&p, "{\"step\": 1}\n").unwrap();
        let e = format!("{:#}", read_vcluster_lan(&dir).unwrap_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("steps.jsonl:1: no `ranks` list"), "{e}");
    }
}
