//! `report.md`, its SVG plots and `results.json`: one section per study (setup, our table,
//! our plot, the paper's trend and what agrees or differs, decided from the figures).

use crate::calib::Calib;
use crate::error::{Context, Result};
use crate::output::{Record, Validation};
use crate::studies::STUDIES;
use crate::svg;
use crate::vcluster::{self, NetRun};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

mod samr;
#[cfg(test)]
mod tests;
mod watts;

/// How the reproduction ran.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    pub scale: String,
    pub target_vertices: usize,
    pub vertices: usize,
    pub steps: usize,
    pub repeats: usize,
    pub cores: usize,
    pub host_mflops: f64,
    pub calibration: Calib,
    pub seconds: f64,
}

/// Experiment 2 on the namespace cluster, as the report gets it.
pub enum Net {
    /// No runs were given.
    NotAsked,
    /// Not run here, and why.
    Skipped(String),
    /// The runs read.
    Runs(Vec<NetRun>),
}

/// What ran on the namespace cluster: experiment 2's runs and Lan et al.'s.
pub struct Nets<'a> {
    /// Experiment 2 (`vcluster-2.xml`).
    pub exp2: &'a Net,
    /// Lan et al. (`vcluster-sites.xml`): the runs are among the SAMR records.
    pub lan: &'a crate::NetStudy,
}

/// Sets each record's RC against the uniform run of its configuration and mode.
pub fn relative_changes(records: &mut [Record]) {
    let uniform: BTreeMap<(&str, String, &str), f64> = records
        .iter()
        .filter(|r| r.balance == "uniform")
        .map(|r| ((r.study, r.config.clone(), r.mode), r.time_s))
        .collect();
    for r in records.iter_mut() {
        if r.balance != "uniform"
            && let Some(&t) = uniform.get(&(r.study, r.config.clone(), r.mode))
        {
            r.rc = Some(1.0 - r.time_s / t);
        }
    }
}

fn tag(r: &Record) -> String {
    let m = if r.mode == "measured" {
        "measured"
    } else {
        "sim"
    };
    format!("{} ({m})", r.config)
}

/// The configurations of a study in first-seen order, each with its records.
fn by_config<'a>(records: &[&'a Record]) -> Vec<(String, Vec<&'a Record>)> {
    let mut out: Vec<(String, Vec<&Record>)> = Vec::new();
    for r in records {
        let t = tag(r);
        match out.iter_mut().find(|(k, _)| *k == t) {
            Some((_, v)) => v.push(r),
            None => out.push((t, vec![r])),
        }
    }
    out
}

fn variants(records: &[&Record]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in records {
        if !v.contains(&r.variant) {
            v.push(r.variant.clone());
        }
    }
    v
}

fn pct(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{:.1} %", 100.0 * v))
}

/// A column of a Markdown table: its heading, left- or right-aligned.
#[derive(Debug, Clone, Copy)]
enum Col<'a> {
    /// Aligned left (text).
    L(&'a str),
    /// Aligned right (figures).
    R(&'a str),
}

/// Writes a Markdown table into `md`: the headings of `cols`, their alignment, then one line
/// per row of `rows` (as many cells as `cols`; an empty cell is written `| |`).
fn md_table(md: &mut String, cols: &[Col<'_>], rows: impl IntoIterator<Item = Vec<String>>) {
    let line = |md: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        md.push('|');
        for c in cells {
            if c.is_empty() {
                md.push_str(" |");
            } else {
                let _ = write!(md, " {c} |");
            }
        }
        md.push('\n');
    };
    line(
        md,
        &mut cols.iter().map(|c| match c {
            Col::L(h) | Col::R(h) => *h,
        }),
    );
    md.push('|');
    for c in cols {
        md.push_str(match c {
            Col::L(_) => "---|",
            Col::R(_) => "---:|",
        });
    }
    md.push('\n');
    for row in rows {
        assert_eq!(
            row.len(),
            cols.len(),
            "a table row of another width: {row:?}"
        );
        line(md, &mut row.iter().map(String::as_str));
    }
}

/// A table of time (and RC) per configuration × variant.
fn table(records: &[&Record], with_rc: bool) -> String {
    let vars = variants(records);
    let mut cols = vec![Col::L("configuration"), Col::L("mode")];
    cols.extend(vars.iter().map(|v| Col::R(v)));
    cols.push(Col::R("RC_ideal"));
    let rows = by_config(records).into_iter().map(|(_, rs)| {
        let r0 = rs[0];
        let mut row = vec![r0.config.clone(), r0.mode.to_string()];
        row.extend(
            vars.iter()
                .map(|v| match rs.iter().find(|r| &r.variant == v) {
                    Some(r) if with_rc && r.rc.is_some() => {
                        format!("{:.3} s ({})", r.time_s, pct(r.rc))
                    }
                    Some(r) => format!("{:.3} s", r.time_s),
                    None => String::new(),
                }),
        );
        row.push(pct(Some(r0.rc_ideal)));
        row
    });
    let mut s = String::new();
    md_table(&mut s, &cols, rows);
    s
}

/// One verdict line: the paper's claim, and whether our figures agree.
fn verdict(out: &mut String, claim: &str, ok: Option<bool>, figures: String) {
    let v = match ok {
        Some(true) => "**agrees**",
        Some(false) => "**differs**",
        None => "not tested here",
    };
    let _ = writeln!(out, "- {claim} — {v}: {figures}");
}

struct Doc<'a> {
    dir: &'a Path,
    md: String,
}

impl Doc<'_> {
    fn plot(&mut self, name: &str, svg: String, caption: &str) -> Result<()> {
        let p = self.dir.join(name);
        crate::output::write_whole(&p, svg)?;
        let _ = writeln!(self.md, "\n![{caption}]({name})\n");
        Ok(())
    }
}

/// The run of `variant` among one configuration's runs.
fn variant_of<'a>(rs: &[&'a Record], variant: &str) -> Option<&'a Record> {
    rs.iter().copied().find(|r| r.variant == variant)
}

/// The best RC over the DRUM variants of one configuration.
fn best_rc(rs: &[&Record]) -> Option<(f64, String)> {
    rs.iter()
        .filter_map(|r| r.rc.map(|c| (c, r.variant.clone())))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn section_rc(doc: &mut Doc, recs: &[&Record], key: &str, fig: &str) -> Result<()> {
    let cfgs = by_config(recs);
    let vars = variants(recs);
    let groups: Vec<String> = cfgs.iter().map(|(k, _)| k.clone()).collect();
    let mut series: Vec<(String, Vec<Option<f64>>)> = vars
        .iter()
        .map(|v| {
            (
                v.clone(),
                cfgs.iter()
                    .map(|(_, rs)| variant_of(rs, v).map(|r| r.time_s / rs[0].time_s))
                    .collect(),
            )
        })
        .collect();
    doc.plot(
        &format!("{key}-times.svg"),
        svg::bars(
            &format!("{fig}: time relative to uniform parts"),
            "time / t_uniform",
            &groups,
            &series,
        ),
        &format!("{key}: times relative to uniform"),
    )?;
    series = vars
        .iter()
        .filter(|v| v.as_str() != "uniform")
        .map(|v| {
            (
                format!("RC, {v}"),
                cfgs.iter()
                    .map(|(_, rs)| variant_of(rs, v).and_then(|r| r.rc))
                    .collect(),
            )
        })
        .collect();
    series.push((
        "RC_ideal".into(),
        cfgs.iter().map(|(_, rs)| Some(rs[0].rc_ideal)).collect(),
    ));
    doc.plot(
        &format!("{key}-rc.svg"),
        svg::bars(
            &format!("{fig}: relative change RC against RC_ideal"),
            "RC",
            &groups,
            &series,
        ),
        &format!("{key}: RC and RC_ideal"),
    )
}

/// Writes `report.md`, the plots and `results.json` into `dir`.
pub fn write(
    dir: &Path,
    setup: &Setup,
    records: &[Record],
    validation: &[Validation],
    net: &Nets<'_>,
    samr_records: &[crate::samr::SamrRecord],
    watts_runs: &crate::watts::Runs,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut doc = Doc {
        dir,
        md: String::new(),
    };
    introduction(&mut doc, setup);
    validation_section(&mut doc, validation)?;
    sections(&mut doc, records, net, samr_records)?;
    watts::sections(&mut doc, watts_runs);
    let md = dir.join("report.md");
    crate::output::write_whole(&md, &doc.md)?;
    results_json(dir, setup, records, validation, samr_records, watts_runs)
}

/// The report's opening: how it was made, the labels, the simulator and its calibration.
fn introduction(doc: &mut Doc, setup: &Setup) {
    let c = &setup.calibration;
    let _ = write!(
        doc.md,
        "# DRUM reproduced: measured on this host, simulated at cluster size\n\n\
         Written by `cargo xtask reproduce{}` in {:.0} s on a host of {} cores. The adaptive run is \
         `fem-laplace`'s: PHAML's corner-singularity Laplace problem, {} steps to {} vertices \
         (target {}), distributed over ranks and rebalanced by DRUM in the loop (`hier-part`'s \
         KEEP_CUTS HSFC repartition after every refinement, as PHAML does in the papers' runs; \
         the gain/cost study compares that with the rebalance policy, eff_min 0.95, γ 2, drift \
         10 %).\n\n\
         Every run is labelled:\n\n\
         - **measured**: real thread ranks pinned to cores 0, 1, … of this host, real competing \
         compute-bound processes pinned to a rank's core (`--load`), DRUM's real monitors; the \
         time is the sum of the steps' wall times, the median of {} run(s). A core shared with k \
         competing processes plays a node k+1 times slower.\n\
         - **simulated**: the same meshes (the serial run's, equal to every distributed run's to \
         the bit), partitioned by the real `hier-part` for the simulated machine's ranks and part \
         sizes step after step (KEEP_CUTS repartitions, the real rebalance policy), timed by a \
         model calibrated on the measured dedicated runs (below). Nodes are Bullpen's \
         (`machines/bullpen.xml`): fast 67.5 MFLOPS per CPU (2- and 4-way SMP), slow 45–50 \
         MFLOPS uniprocessors, a 100 Mbit/s switch.\n\n\
         ## The simulator and its calibration\n\n\
         - compute per step k: a_k seconds per element on one core of this host (measured: the \
         ranks' time outside collectives and the partitioner over their elements, the median over \
         the dedicated 2-rank runs, uniform and DRUM; {:.3e} s at the last step), of which the \
         marking and refinement ({:.0} % at the last step) fall on the elements a rank inherited \
         and the rest on those it holds after the repartition, times this host's rating ({} MFLOPS, `machines/local-2core-hetero.xml`) over \
         the node's, over the CPU share the node's processes get beside competing processes \
         (cpus / (processes + competitors), at most 1); monitored runs add the agents' measured \
         cost ({:.2} % of a core);\n\
         - repartitioning: {:.3e} s per element and rank (measured); migrating: {:.3e} s of one \
         core per element a rank sends or receives, beyond the rebuild every step pays (the median \
         of {} ranks on a core of their own in the measured steps that moved at least {:.0} \
         elements);\n\
         - on this host, each step's common waiting in collectives (measured, {:.3} s over the \
         run); on the cluster, per CG iteration {} messages per neighbour rank and the halo \
         volume of the partition's cut edges ({:.1} bytes per cut edge and iteration, measured), \
         {} reductions per iteration and {} collectives per step of ⌈log2 R⌉ latencies each, at \
         α = {} µs (an assumption) and 100 Mbit/s shared by a node's processes; migration: the \
         elements the repartition moves at {:.0} bytes each (measured);\n\
         - a rank that gets only part of its CPU is off it during its competitors' time slices, \
         and every exchange that needs it waits: κ = {:.3e} s of common waiting per CG iteration \
         and unit of CPU share lacking, unless that rank is clearly the slowest anyway (fitted so \
         that the simulated time of the measured monitored run with one competing process on \
         core 1, marked below, equals its measured time: it also absorbs what the model lacks \
         there, such as the monitors' noise);\n\
         - a step ends at its slowest rank. Host link (measured): α = {:.2e} s, β = {:.2e} s/B.\n\n\
         Not modelled: the overlap of communication and computation (PHAML overlaps them), memory \
         effects, operating-system noise, the monitors' errors (the simulated monitors see each \
         node's CPU share exactly; their window, like the real one, ends after the marking and \
         refinement of the step that repartitions), and how the kernel's scheduler really \
         shares a core (the model gives a rank beside k competing processes 1/(k+1) of it; the \
         validation shows what the ranks got).\n",
        if setup.scale == "full" {
            String::new()
        } else {
            format!(" --{}", setup.scale)
        },
        setup.seconds,
        setup.cores,
        setup.steps,
        setup.vertices,
        setup.target_vertices,
        setup.repeats,
        c.a.last().copied().unwrap_or(0.0),
        100.0 * c.pre.last().copied().unwrap_or(0.0),
        setup.host_mflops,
        100.0 * c.monitor_overhead,
        c.p,
        c.c_move,
        c.c_move_samples,
        crate::calib::MIN_MOVED,
        c.l.iter().sum::<f64>(),
        crate::sim::MESSAGES_PER_ITERATION,
        c.bytes_per_cut_iteration,
        crate::sim::REDUCTIONS_PER_ITERATION,
        crate::sim::COLLECTIVES_PER_STEP,
        crate::studies::BULLPEN_ALPHA * 1e6,
        c.bytes_per_element,
        c.kappa,
        c.link.alpha,
        c.link.beta,
    );
}

/// Each study's section, in the report's order.
fn sections(
    doc: &mut Doc,
    records: &[Record],
    net: &Nets<'_>,
    samr_records: &[crate::samr::SamrRecord],
) -> Result<()> {
    for key in STUDIES {
        let recs: Vec<&Record> = records.iter().filter(|r| r.study == key).collect();
        if recs.is_empty() {
            continue;
        }
        match key {
            "exp1" => exp1(doc, &recs)?,
            "exp2" => {
                exp2(doc, &recs)?;
                exp2_net(doc, records, net.exp2);
            }
            "exp3" => exp3(doc, &recs)?,
            "exp4" => exp4(doc, &recs)?,
            "sensing" => sensing(doc, &recs)?,
            _ => gain_cost(doc, &recs)?,
        }
    }
    let of = |key: &str| -> Vec<&crate::samr::SamrRecord> {
        samr_records.iter().filter(|r| r.study == key).collect()
    };
    let sinha = of("sinha");
    if !sinha.is_empty() {
        samr::sinha(doc, &sinha)?;
    }
    let lan = of("lan");
    if !lan.is_empty() {
        samr::lan(doc, &lan, net.lan)?;
    }
    Ok(())
}

/// `results.json`: the setup, every study's records and the validation.
fn results_json(
    dir: &Path,
    setup: &Setup,
    records: &[Record],
    validation: &[Validation],
    samr_records: &[crate::samr::SamrRecord],
    watts_runs: &crate::watts::Runs,
) -> Result<()> {
    let mut studies = serde_json::Map::new();
    for key in STUDIES.iter().chain([&vcluster::STUDY]) {
        let v: Vec<&Record> = records.iter().filter(|r| r.study == *key).collect();
        studies.insert((*key).into(), serde_json::to_value(v)?);
    }
    for key in ["sinha", "lan"] {
        let v: Vec<&crate::samr::SamrRecord> =
            samr_records.iter().filter(|r| r.study == key).collect();
        studies.insert(key.into(), serde_json::to_value(v)?);
    }
    studies.insert("watts".into(), serde_json::to_value(&watts_runs.watts)?);
    studies.insert(
        "transfer".into(),
        serde_json::to_value(&watts_runs.transfer)?,
    );
    let json = serde_json::json!({
        "setup": setup,
        "studies": studies,
        "validation": validation,
    });
    let p = dir.join("results.json");
    crate::output::write_whole(&p, serde_json::to_string_pretty(&json)? + "\n")?;
    Ok(())
}

fn validation_section(doc: &mut Doc, validation: &[Validation]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Validation: the simulator against every measured configuration\n"
    );
    // (calibration runs are marked; their error says how well the model reproduces them)
    md_table(
        &mut doc.md,
        &[
            Col::L("configuration"),
            Col::R("measured s"),
            Col::R("simulated s"),
            Col::R("error"),
            Col::L("beyond 15 %: what the model lacks"),
        ],
        validation.iter().map(|v| {
            vec![
                format!(
                    "{}{}",
                    v.config,
                    if v.calibration {
                        " (calibration run)"
                    } else {
                        ""
                    }
                ),
                format!("{:.3}", v.measured_s),
                format!("{:.3}", v.simulated_s),
                format!("{:+.1} %", 100.0 * v.rel_err),
                v.mechanism.clone().unwrap_or_default(),
            ]
        }),
    );
    let errs: Vec<f64> = validation
        .iter()
        .filter(|v| !v.calibration)
        .map(|v| v.rel_err.abs())
        .collect();
    let within = errs.iter().filter(|e| **e <= 0.15).count();
    let mut sorted = errs.clone();
    sorted.sort_by(f64::total_cmp);
    let _ = writeln!(
        doc.md,
        "\n{within} of {} configurations within 15 % (median |error| {:.1} %, largest {:.1} %).",
        errs.len(),
        100.0 * sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        100.0 * sorted.last().copied().unwrap_or(0.0)
    );
    let misses: Vec<&str> = validation
        .iter()
        .filter_map(|v| v.mechanism.as_deref())
        .collect();
    if !misses.is_empty() {
        let count = |p: &str| misses.iter().filter(|m| m.starts_with(p)).count();
        let _ = writeln!(
            doc.md,
            "Of the {} misses, {} are within the run-to-run spread of their repeats; in {} the \
             monitors renewed the powers at other steps than the model (a due sensing waits for a \
             window of at least 30 ms, and the step where the window crosses it decides what it \
             saw: a load that starts or moves then is in it or not); in {} a core \
             shared with competing processes gave its rank another share of a CPU than the \
             model's 1/(k+1), in the direction of the error (Linux's scheduler credits a rank \
             that sleeps in collectives, and a rank whose competitors have just started gets \
             less: the model would need the scheduler's history, which a step-level model does \
             not have); {} are not identified. The shares are the model's CPU seconds for what \
             the rank did over the seconds it was busy.",
            misses.len(),
            count("within"),
            count("the monitors sensed"),
            count("the shared core"),
            count("not identified"),
        );
    }
    let pts: Vec<(f64, f64)> = validation
        .iter()
        .map(|v| (v.measured_s, v.simulated_s))
        .collect();
    let hi = pts.iter().map(|p| p.0.max(p.1)).fold(0.0, f64::max);
    doc.plot(
        "validation.svg",
        svg::lines(
            "Simulated against measured time (line: equal)",
            "measured s",
            "simulated s",
            &[
                ("y = x".into(), vec![(0.0, 0.0), (hi, hi)]),
                ("configurations".into(), pts),
            ],
            &[false, true],
        ),
        "validation",
    )
}

fn heterogeneous(r: &Record) -> bool {
    r.rc_ideal > 0.01
}

/// The claim that DRUM costs little where there is nothing to balance: every DRUM run of a
/// homogeneous configuration within 5 % of uniform.
fn homogeneous_overhead(out: &mut String, cfgs: &[(String, Vec<&Record>)], claim: &str) {
    let rcs: Vec<(String, f64)> = cfgs
        .iter()
        .filter(|(_, rs)| !heterogeneous(rs[0]))
        .flat_map(|(k, rs)| rs.iter().filter_map(|r| r.rc.map(|c| (k.clone(), c))))
        .collect();
    verdict(
        out,
        claim,
        (!rcs.is_empty()).then(|| rcs.iter().all(|r| r.1 > -0.05)),
        format!(
            "RC of the DRUM runs on homogeneous configurations: {}",
            rcs.iter()
                .map(|r| format!("{} {}", r.0, pct(Some(r.1))))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
}

fn exp1(doc: &mut Doc, recs: &[&Record]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Experiment 1 (DRUM 2005 §4.1, Figs. 8, 9): one process per node\n\n\
         Fast and slow nodes, one process each; uniform parts against DRUM's with w_comm 0, 0.1, \
         0.25. Simulated: `kF+mS` = k fast Bullpen nodes and m slow ones. Measured: two cores, \
         one of them shared with a competing process (half speed). RC = 1 − t_DRUM / t_uniform.\n"
    );
    doc.md += &table(recs, true);
    section_rc(doc, recs, "exp1", "Exp. 1")?;
    let _ = writeln!(doc.md, "\nThe paper's trends, and ours:\n");
    let cfgs = by_config(recs);
    homogeneous_overhead(
        &mut doc.md,
        &cfgs,
        "on homogeneous nodes DRUM costs little (RC near 0)",
    );
    let het: Vec<(String, f64, f64)> = cfgs
        .iter()
        .filter(|(_, rs)| heterogeneous(rs[0]))
        .filter_map(|(k, rs)| best_rc(rs).map(|b| (k.clone(), b.0, rs[0].rc_ideal)))
        .collect();
    verdict(
        &mut doc.md,
        "on heterogeneous configurations DRUM's partitions clearly improve the time (RC > 0)",
        (!het.is_empty()).then(|| het.iter().all(|h| h.1 > 0.02)),
        het.iter()
            .map(|h| format!("{} {}", h.0, pct(Some(h.1))))
            .collect::<Vec<_>>()
            .join("; "),
    );
    verdict(
        &mut doc.md,
        "RC stays below RC_ideal (communication and overheads are not free)",
        (!het.is_empty()).then(|| het.iter().all(|h| h.1 < h.2)),
        het.iter()
            .map(|h| format!("{} {:.2} of ideal", h.0, h.1 / h.2))
            .collect::<Vec<_>>()
            .join("; "),
    );
    Ok(())
}

fn exp2(doc: &mut Doc, recs: &[&Record]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Experiment 2 (DRUM 2005 §4.2, Figs. 10, 11): the communication weight\n\n\
         w_comm from 0 to 1 with several processes on the SMP nodes, one per CPU. Configurations \
         in the paper's notation `#total [#fast nodes(#processes) + #slow nodes(1)]`.\n"
    );
    doc.md += &table(recs, true);
    let cfgs = by_config(recs);
    let series: Vec<(String, Vec<(f64, f64)>)> = cfgs
        .iter()
        .map(|(k, rs)| {
            (
                k.clone(),
                rs.iter()
                    .filter(|r| r.balance != "uniform")
                    .filter_map(|r| r.rc.map(|c| (r.w_comm, c)))
                    .collect(),
            )
        })
        .collect();
    doc.plot(
        "exp2-wcomm.svg",
        svg::lines(
            "Exp. 2 (Fig. 10): RC against w_comm",
            "w_comm",
            "RC",
            &series,
            &vec![false; series.len()],
        ),
        "exp2: RC against w_comm",
    )?;
    let groups: Vec<String> = cfgs.iter().map(|(k, _)| k.clone()).collect();
    doc.plot(
        "exp2-best.svg",
        svg::bars(
            "Exp. 2 (Fig. 11): best RC over w_comm against RC_ideal",
            "RC",
            &groups,
            &[
                (
                    "best RC".into(),
                    cfgs.iter()
                        .map(|(_, rs)| best_rc(rs).map(|b| b.0))
                        .collect(),
                ),
                (
                    "RC_ideal".into(),
                    cfgs.iter().map(|(_, rs)| Some(rs[0].rc_ideal)).collect(),
                ),
            ],
        ),
        "exp2: best RC and RC_ideal",
    )?;
    let _ = writeln!(doc.md, "\nThe paper's trends, and ours:\n");
    let best: Vec<(String, f64, String)> = cfgs
        .iter()
        .filter_map(|(k, rs)| best_rc(rs).map(|b| (k.clone(), b.0, b.1)))
        .collect();
    let worse_above: Vec<(String, bool)> = cfgs
        .iter()
        .filter(|(_, rs)| heterogeneous(rs[0]))
        .filter_map(|(k, rs)| {
            let at = |w: f64| {
                rs.iter()
                    .find(|r| r.balance != "uniform" && (r.w_comm - w).abs() < 1e-9)
                    .and_then(|r| r.rc)
            };
            Some((k.clone(), at(1.0)? < at(0.0)? && at(0.75)? <= at(0.25)?))
        })
        .collect();
    verdict(
        &mut doc.md,
        "a communication weight above 0.5 is not appropriate for this application",
        (!worse_above.is_empty()).then(|| worse_above.iter().all(|w| w.1)),
        format!(
            "best w_comm per configuration: {}",
            best.iter()
                .map(|b| format!("{} {}", b.0, b.2.trim_start_matches("DRUM ")))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
    homogeneous_overhead(
        &mut doc.md,
        &cfgs,
        "the monitors' overhead is low on fast-only runs (8 and 16 processes)",
    );
    Ok(())
}

/// Experiment 2 measured on the namespace cluster: the part DRUM gives the node whose link
/// carries a competing flow, against w_comm, and what the weight does to the time.
fn exp2_net(doc: &mut Doc, records: &[Record], net: &Net) {
    let _ = writeln!(
        doc.md,
        "\n### Experiment 2 measured on a network (`cargo xtask vcluster`)\n"
    );
    let runs = match net {
        Net::NotAsked => {
            let _ = writeln!(
                doc.md,
                "Not run: no vcluster runs were given (`cargo xtask reproduce` makes them where \
                 it can make network namespaces)."
            );
            return;
        }
        Net::Skipped(why) => {
            let _ = writeln!(doc.md, "Not run here: {why}.");
            return;
        }
        Net::Runs(r) => r,
    };
    let _ = writeln!(
        doc.md,
        "Measured, not simulated: `machines/vcluster-2.xml` as two network namespaces of one \
         CPU each, their links shaped to 100 Mbit/s in both directions (tbf), `fem-laplace`'s \
         MPI ranks talking TCP across them, each node's DRUM agent reading its own namespace's \
         interface counters (the communication power is the available bandwidth, DRUM 2005 \
         §3.3). The competing flow is an unpaced TCP stream from the node to a sink outside the \
         compute nodes for the whole run. One run per configuration; the two namespaces share \
         this host's cores, so the times show the network's effect, not a cluster's speed.\n"
    );
    let recs: Vec<&Record> = records
        .iter()
        .filter(|r| r.study == vcluster::STUDY)
        .collect();
    doc.md += &table(&recs, true);
    let nodes: Vec<String> = runs
        .first()
        .map(|r| r.parts.iter().map(|p| p.node.clone()).collect())
        .unwrap_or_default();
    let heads: Vec<String> = nodes
        .iter()
        .map(|n| format!("{n}'s part (work held)"))
        .collect();
    let mut cols = vec![Col::L("configuration"), Col::L("variant"), Col::R("time")];
    cols.extend(heads.iter().map(|h| Col::R(h)));
    doc.md += "\n";
    md_table(
        &mut doc.md,
        &cols,
        runs.iter().map(|r| {
            let mut row = vec![r.config(), r.variant(), format!("{:.3} s", r.time_s)];
            row.extend(nodes.iter().map(|n| match r.part_of(n) {
                Some(p) => format!("{:.1} % ({:.1} %)", 100.0 * p.target, 100.0 * p.work_share),
                None => "–".into(),
            }));
            row
        }),
    );
    let _ = writeln!(doc.md, "\nWhat the weight does, from these runs:\n");
    let parts = vcluster::loaded_parts(runs, 0.5);
    verdict(
        &mut doc.md,
        "with a competing flow on one node's link, w_comm = 0.5 gives that node a part at \
         least 5 points smaller than w_comm = 0",
        parts.as_ref().map(|p| p.1 - p.2 >= 0.05),
        parts.as_ref().map_or("no pair of runs".into(), |p| {
            format!(
                "{}'s part {:.1} % at w_comm 0, {:.1} % at 0.5",
                p.0,
                100.0 * p.1,
                100.0 * p.2
            )
        }),
    );
    for (config, rs) in by_config(&recs) {
        let Some(base) = rs
            .iter()
            .find(|r| r.balance != "uniform" && r.w_comm == 0.0)
        else {
            continue;
        };
        let effects: Vec<String> = rs
            .iter()
            .filter(|r| r.balance != "uniform" && r.w_comm > 0.0)
            .map(|r| {
                let d = r.time_s / base.time_s - 1.0;
                let word = match d {
                    d if d < -0.02 => "helps",
                    d if d > 0.02 => "hurts",
                    _ => "no clear change",
                };
                format!("w_comm {}: {word} ({:+.1} %)", r.w_comm, 100.0 * d)
            })
            .collect();
        let _ = writeln!(
            doc.md,
            "- {config}: against w_comm 0, {}",
            effects.join("; ")
        );
    }
    let _ = writeln!(
        doc.md,
        "\nThe simulator is not checked against these runs: it has no model of a competing \
         flow sharing a shaped link (TCP's share of the bottleneck, the queue the flow builds \
         in tbf, the retransmissions), nor of two nodes sharing this host's cores, so its \
         time would not say whether the model holds."
    );
}

/// Spearman's rank correlation.
fn spearman(p: &[(f64, f64)]) -> f64 {
    let rank = |v: Vec<f64>| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
        let mut r = vec![0.0; v.len()];
        for (k, &i) in idx.iter().enumerate() {
            r[i] = k as f64;
        }
        r
    };
    let a = rank(p.iter().map(|x| x.0).collect());
    let b = rank(p.iter().map(|x| x.1).collect());
    let n = p.len() as f64;
    let d2: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).powi(2)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0)).max(1.0)
}

fn exp3(doc: &mut Doc, recs: &[&Record]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Experiment 3 (DRUM 2005 §4.3, Fig. 12): RC against the degree of heterogeneity\n\n\
         H_cpu (Xiao et al.) of the processes' speeds relative to the fastest: simulated, four \
         fast Bullpen nodes and four nodes h times slower (h = 1 to 4; Bullpen's slow nodes are \
         h = 1.35 and 1.5); measured, core 1 shared with 0 to 3 competing \
         processes (speeds 1 and 1/(k+1)).\n"
    );
    let drum: Vec<&&Record> = recs.iter().filter(|r| r.balance != "uniform").collect();
    md_table(
        &mut doc.md,
        &[
            Col::L("configuration"),
            Col::L("mode"),
            Col::R("H_cpu"),
            Col::R("RC"),
            Col::R("RC_ideal"),
        ],
        drum.iter().map(|r| {
            vec![
                r.config.clone(),
                r.mode.into(),
                format!("{:.3}", r.h_cpu),
                pct(r.rc),
                pct(Some(r.rc_ideal)),
            ]
        }),
    );
    let mut series = Vec::new();
    for mode in ["simulated", "measured"] {
        let p: Vec<(f64, f64)> = drum
            .iter()
            .filter(|r| r.mode == mode)
            .filter_map(|r| r.rc.map(|c| (r.h_cpu, c)))
            .collect();
        if !p.is_empty() {
            let ideal: Vec<(f64, f64)> = drum
                .iter()
                .filter(|r| r.mode == mode)
                .map(|r| (r.h_cpu, r.rc_ideal))
                .collect();
            series.push((format!("RC, {mode}"), p));
            series.push((format!("RC_ideal, {mode}"), ideal));
        }
    }
    doc.plot(
        "exp3-hcpu.svg",
        svg::lines(
            "Exp. 3 (Fig. 12): RC against H_cpu",
            "H_cpu",
            "RC",
            &series,
            &[],
        ),
        "exp3: RC against H_cpu",
    )?;
    let _ = writeln!(doc.md, "\nThe paper's trend, and ours:\n");
    for (name, p) in series.iter().filter(|s| s.0.starts_with("RC,")) {
        let rho = spearman(p);
        verdict(
            &mut doc.md,
            &format!("RC grows with H_cpu ({name})"),
            (p.len() >= 3).then_some(rho > 0.5),
            format!("Spearman ρ = {rho:.2} over {} configurations", p.len()),
        );
    }
    Ok(())
}

fn exp4(doc: &mut Doc, recs: &[&Record]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Experiment 4 (DRUM 2005 §4.4): non-dedicated use\n\n\
         Two compute-bound processes, not part of the computation and not known to the machine \
         file, on the highest-rank node. Uniform parts, DRUM's static ratings only, and DRUM's \
         monitored powers.\n"
    );
    doc.md += &table(recs, true);
    section_rc(doc, recs, "exp4", "Exp. 4")?;
    let _ = writeln!(doc.md, "\nThe paper's trend, and ours:\n");
    let cfgs = by_config(recs);
    let gains: Vec<(String, f64, bool)> = cfgs
        .iter()
        .filter_map(|(k, rs)| {
            let m = variant_of(rs, "DRUM monitored")?.rc?;
            Some((k.clone(), m, k.contains("homogeneous")))
        })
        .collect();
    verdict(
        &mut doc.md,
        "monitored DRUM improves the time significantly, even where the processors are all the \
         same and the load is the only heterogeneity",
        (!gains.is_empty()).then(|| gains.iter().all(|g| g.1 > 0.05)),
        gains
            .iter()
            .map(|g| format!("{} RC {}", g.0, pct(Some(g.1))))
            .collect::<Vec<_>>()
            .join("; "),
    );
    let stat: Vec<String> = cfgs
        .iter()
        .filter_map(|(k, rs)| {
            let s = variant_of(rs, "static (ratings)")?.rc?;
            let m = variant_of(rs, "DRUM monitored")?.rc?;
            Some(format!(
                "{k}: static {} vs monitored {}",
                pct(Some(s)),
                pct(Some(m))
            ))
        })
        .collect();
    verdict(
        &mut doc.md,
        "the ratings alone cannot see the load (static < monitored)",
        Some(cfgs.iter().all(|(_, rs)| {
            match (
                variant_of(rs, "static (ratings)").and_then(|r| r.rc),
                variant_of(rs, "DRUM monitored").and_then(|r| r.rc),
            ) {
                (Some(s), Some(m)) => s < m,
                _ => true,
            }
        })),
        stat.join("; "),
    );
    Ok(())
}

fn sensing(doc: &mut Doc, recs: &[&Record]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Sinha & Parashar: the sensing period\n\n\
         Competing processes come to one node five steps before the end (the last steps take most of the run's time) and move to another node for the last three. Monitored DRUM \
         renews its powers at every rebalance point, every 2, 4 or 8 points, or once (the first \
         window). Times relative to uniform parts.\n"
    );
    doc.md += &table(recs, true);
    section_rc(doc, recs, "sensing", "Sensing period")?;
    let _ = writeln!(doc.md, "\nThe paper's trends, and ours:\n");
    for (k, rs) in by_config(recs) {
        let t = |v: &str| variant_of(&rs, v).map(|r| r.time_s);
        if let (Some(dynamic), Some(once)) = (t("sensing every 1"), t("sensing once")) {
            verdict(
                &mut doc.md,
                &format!("dynamic sensing beats sensing once (up to 45 % in the paper) — {k}"),
                Some(dynamic < once),
                format!(
                    "every point {dynamic:.3} s, once {once:.3} s ({:+.1} %)",
                    100.0 * (dynamic / once - 1.0)
                ),
            );
        }
        let every: Vec<(String, f64)> = rs
            .iter()
            .filter(|r| r.variant.starts_with("sensing every"))
            .map(|r| (r.variant.clone(), r.time_s))
            .collect();
        if let Some(best) = every.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
            verdict(
                &mut doc.md,
                &format!(
                    "an intermediate period is best (every 20 iterations there; sensing very often \
                     hurt because one sensing cost 0.5 s) — {k}"
                ),
                Some(best.0 != "sensing every 1"),
                format!(
                    "best: {} ({:.3} s); our sensing costs a window cut, not 0.5 s",
                    best.0, best.1
                ),
            );
        }
    }
    Ok(())
}

fn gain_cost(doc: &mut Doc, recs: &[&Record]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Lan, Taylor & Bryan: redistribute only when Gain > γ·Cost\n\n\
         Monitored DRUM with a load that appears five steps before the end (the steps that take most of the time); the policy (eff_min, \
         drift, Gain > 2·Cost) against rebalancing at every step and never after the first \
         partition.\n"
    );
    md_table(
        &mut doc.md,
        &[
            Col::L("configuration"),
            Col::L("mode"),
            Col::L("variant"),
            Col::R("time s"),
            Col::R("rebalances"),
            Col::R("migrated elements"),
            Col::R("migrated MB"),
        ],
        recs.iter().map(|r| {
            vec![
                r.config.clone(),
                r.mode.into(),
                r.variant.clone(),
                format!("{:.3}", r.time_s),
                r.rebalances.to_string(),
                r.migrated_elements.to_string(),
                format!("{:.2}", r.migrated_bytes / 1e6),
            ]
        }),
    );
    let cfgs = by_config(recs);
    let groups: Vec<String> = cfgs.iter().map(|(k, _)| k.clone()).collect();
    let vars = variants(recs);
    let rel = |f: &dyn Fn(&Record) -> f64| -> Vec<(String, Vec<Option<f64>>)> {
        vars.iter()
            .map(|v| {
                (
                    v.clone(),
                    cfgs.iter()
                        .map(|(_, rs)| {
                            let p = variant_of(rs, "policy (gain > 2 cost)")?;
                            Some(f(variant_of(rs, v)?) / f(p).max(1e-12))
                        })
                        .collect(),
                )
            })
            .collect()
    };
    doc.plot(
        "gain_cost-times.svg",
        svg::bars(
            "Gain/cost: time relative to the policy's",
            "time / t_policy",
            &groups,
            &rel(&|r| r.time_s),
        ),
        "gain_cost: times",
    )?;
    doc.plot(
        "gain_cost-migration.svg",
        svg::bars(
            "Gain/cost: elements migrated",
            "elements",
            &groups,
            &vars
                .iter()
                .map(|v| {
                    (
                        v.clone(),
                        cfgs.iter()
                            .map(|(_, rs)| variant_of(rs, v).map(|r| r.migrated_elements as f64))
                            .collect(),
                    )
                })
                .collect::<Vec<_>>(),
        ),
        "gain_cost: migration",
    )?;
    let _ = writeln!(doc.md, "\nThe paper's claims, and ours:\n");
    for (k, rs) in &cfgs {
        let p = variant_of(rs, "policy (gain > 2 cost)");
        let a = variant_of(rs, "always rebalance");
        let n = variant_of(rs, "never rebalance");
        if let (Some(p), Some(a), Some(n)) = (p, a, n) {
            verdict(
                &mut doc.md,
                &format!("deciding by gain and cost beats never redistributing — {k}"),
                Some(p.time_s < n.time_s),
                format!("policy {:.3} s, never {:.3} s", p.time_s, n.time_s),
            );
            verdict(
                &mut doc.md,
                &format!(
                    "and costs less migration than always redistributing, at about its time — {k}"
                ),
                Some(p.migrated_elements <= a.migrated_elements && p.time_s <= a.time_s * 1.05),
                format!(
                    "policy {} elements in {:.3} s, always {} elements in {:.3} s",
                    p.migrated_elements, p.time_s, a.migrated_elements, a.time_s
                ),
            );
        }
    }
    Ok(())
}
