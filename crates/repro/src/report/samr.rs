//! The report's sections of the SAMR studies: Sinha & Parashar (`sinha`) and Lan, Taylor
//! & Bryan (`lan`), with verdicts computed from the figures.

use super::{Col, Doc, md_table, verdict};
use crate::error::Result;
use crate::samr::{PAPER_CAPACITIES, SITE_LINK, SamrRecord, VCLUSTER_LAN_CONFIG};
use crate::svg;
use std::fmt::Write as _;

fn shares(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{:.1}", 100.0 * x))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn max_of(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn time(r: &SamrRecord) -> f64 {
    r.time_s.unwrap_or(r.model_time)
}

fn find<'a>(recs: &[&'a SamrRecord], config: &str, variant_prefix: &str) -> Option<&'a SamrRecord> {
    recs.iter()
        .copied()
        .find(|r| r.config == config && r.variant.starts_with(variant_prefix))
}

fn configs(recs: &[&SamrRecord]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in recs {
        if !v.contains(&r.config) {
            v.push(r.config.clone());
        }
    }
    v
}

/// Sinha & Parashar: load assignment, I_k, run time, sensing frequency.
pub(super) fn sinha(doc: &mut Doc, recs: &[&SamrRecord]) -> Result<()> {
    let _ = writeln!(
        doc.md,
        "\n## Sinha & Parashar on the SAMR kernel: system-sensitive box partitioning\n\n\
         The `samr-kernel` (a pulse carried round the unit square on a Berger–Oliger hierarchy of \
         three levels, regridded every 4 level-0 steps by Berger–Rigoutsos) partitioned by GrACE's \
         default (boxes along a Hilbert curve into equal parts) or by ACEHeterogeneous (boxes and \
         capacities sorted, a box too large for a processor broken along its longest axis). \
         **simulated**: thread ranks given the paper's fixed relative capacities (16/19/31/34 %; \
         beyond 4 processors that pattern repeated, an assumption), the real partitioners on the \
         real hierarchy, the time modelled as Σ over the steps of max_k W_k / (C_k W) (1 per step \
         is perfect balance). **measured**: two thread ranks pinned to cores 0 and 1, a real \
         competing process on a core, DRUM's monitors sensing the capacities before the regrids \
         (the model `drum`, processing power only); the time is the sum of the level-0 steps and \
         regrids; I_k is against 2/3 and 1/3 (a core shared with one process gives half), in the \
         moving-load configuration against the first half's.\n"
    );
    md_table(
        &mut doc.md,
        &[
            Col::L("configuration"),
            Col::L("mode"),
            Col::L("variant"),
            Col::L("capacities given %"),
            Col::L("work shares %"),
            Col::R("max I_k %"),
            Col::R("time"),
        ],
        recs.iter().map(|r| {
            vec![
                r.config.clone(),
                r.mode.into(),
                r.variant.clone(),
                shares(&r.capacities),
                shares(&r.work_share),
                format!("{:.1}", max_of(&r.imbalance_percent)),
                r.time_s.map_or(format!("model {:.2}", r.model_time), |t| {
                    format!("{t:.3} s")
                }),
            ]
        }),
    );
    assignment_plots(doc, recs)?;
    let _ = writeln!(doc.md, "\nThe paper's claims, and ours:\n");
    time_claims(doc, recs)?;
    sensing_claims(doc, recs);
    Ok(())
}

/// Figs. 8–10: the 4-processor simulated runs' work shares and I_k.
fn assignment_plots(doc: &mut Doc, recs: &[&SamrRecord]) -> Result<()> {
    let four = recs
        .iter()
        .find(|r| r.mode == "simulated" && r.ranks == 4)
        .map(|r| r.config.clone());
    if let Some(c) = &four
        && let (Some(d), Some(a)) = (find(recs, c, "GrACE"), find(recs, c, "ACE"))
    {
        let procs: Vec<String> = (0..4).map(|k| format!("processor {k}")).collect();
        let pct = |v: &[f64]| v.iter().map(|x| Some(100.0 * x)).collect::<Vec<_>>();
        doc.plot(
            "sinha-assignment.svg",
            svg::bars(
                "Work assignment against relative capacity (Figs. 8-9)",
                "% of the work",
                &procs,
                &[
                    ("relative capacity".into(), pct(&PAPER_CAPACITIES)),
                    ("GrACE default".into(), pct(&d.work_share)),
                    ("ACEHeterogeneous".into(), pct(&a.work_share)),
                ],
            ),
            "sinha: work assignment",
        )?;
        doc.plot(
            "sinha-imbalance.svg",
            svg::bars(
                "Load imbalance I_k (Fig. 10)",
                "I_k %",
                &procs,
                &[
                    (
                        "GrACE default".into(),
                        d.imbalance_percent.iter().map(|x| Some(*x)).collect(),
                    ),
                    (
                        "ACEHeterogeneous".into(),
                        a.imbalance_percent.iter().map(|x| Some(*x)).collect(),
                    ),
                ],
            ),
            "sinha: imbalance",
        )?;
    }
    Ok(())
}

/// Figs. 8–9's assignment and Table I's times, per configuration whose load does not move.
fn time_claims(doc: &mut Doc, recs: &[&SamrRecord]) -> Result<()> {
    let mut table1 = Vec::new();
    for c in configs(recs) {
        let (Some(d), Some(a)) = (find(recs, &c, "GrACE"), find(recs, &c, "ACE")) else {
            continue;
        };
        let mode = d.mode;
        // Table I's environment keeps its load where it is: a load that moves is Tables
        // II–III's (sensing once is then meant to go wrong), not a test of Table I.
        if a.loads.len() > 1 {
            continue;
        }
        let gain = 1.0 - time(a) / time(d);
        table1.push((format!("{} ({mode})", c), gain));
        if mode == "simulated" {
            let off = (0..a.ranks)
                .map(|k| (a.work_share[k] - a.reference[k]).abs())
                .fold(0.0, f64::max);
            // ACE fills the processors in increasing capacity (ties by rank); the last takes
            // what is left, so every other processor's shortfall below its L_k lands on it.
            let last = (0..a.ranks)
                .max_by(|&x, &y| a.reference[x].total_cmp(&a.reference[y]))
                .unwrap_or(0);
            let short: f64 = (0..a.ranks)
                .filter(|&k| k != last)
                .map(|k| (a.reference[k] - a.work_share[k]).max(0.0))
                .sum();
            verdict(
                &mut doc.md,
                &format!(
                    "ACEHeterogeneous assigns work in proportion to the capacities, the default does not (Figs. 8–9) — {c}"
                ),
                Some(off < 0.05 && max_of(&d.imbalance_percent) > max_of(&a.imbalance_percent)),
                format!(
                    "ACE's shares within {:.1} points of the capacities; max I_k {:.1} % (ACE) vs {:.1} % (default); \
                     the processor filled last (rank {last}) holds {:.1} % for a capacity of {:.1} %: \
                     the {} others ended {:.1} points short of their L_k in all (each stops within a strip of a \
                     box below it, and what is left goes to the last)",
                    100.0 * off,
                    max_of(&a.imbalance_percent),
                    max_of(&d.imbalance_percent),
                    100.0 * a.work_share[last],
                    100.0 * a.reference[last],
                    a.ranks - 1,
                    100.0 * short
                ),
            );
        }
        verdict(
            &mut doc.md,
            &format!(
                "system-sensitive partitioning reduces the run time (Table I: 7, 6, 18, 18 % with 4, 8, 16, 32 processors) — {c} ({mode})"
            ),
            Some(gain > 0.0),
            format!(
                "{:.3} vs {:.3}{}: {:+.1} %",
                time(a),
                time(d),
                if mode == "simulated" {
                    " (model)"
                } else {
                    " s"
                },
                100.0 * gain
            ),
        );
    }
    if !table1.is_empty() {
        let groups: Vec<String> = table1.iter().map(|t| t.0.clone()).collect();
        doc.plot(
            "sinha-improvement.svg",
            svg::bars(
                "System-sensitive vs default: improvement (Table I)",
                "% less time",
                &groups,
                &[(
                    "1 - t_ACE / t_default".into(),
                    table1.iter().map(|t| Some(100.0 * t.1)).collect(),
                )],
            ),
            "sinha: improvement",
        )?;
    }
    Ok(())
}

/// Tables II–III: sensing once, and how often.
fn sensing_claims(doc: &mut Doc, recs: &[&SamrRecord]) {
    for c in configs(recs) {
        let once = find(recs, &c, "ACEHeterogeneous, sensing once");
        let every: Vec<&SamrRecord> = recs
            .iter()
            .copied()
            .filter(|r| r.config == c && r.sensing.starts_with("every"))
            .collect();
        if let (Some(o), Some(e1)) = (once, every.first()) {
            verdict(
                &mut doc.md,
                &format!(
                    "sensing during the run beats sensing once (Table II: 35–48 % less time) — {c}"
                ),
                Some(time(e1) < time(o)),
                format!(
                    "{}: {:.3} s, once {:.3} s ({:+.1} %)",
                    e1.variant,
                    time(e1),
                    time(o),
                    100.0 * (time(e1) / time(o) - 1.0)
                ),
            );
        }
        if every.len() > 1 {
            let best = every
                .iter()
                .min_by(|a, b| time(a).total_cmp(&time(b)))
                .expect("not empty");
            verdict(
                &mut doc.md,
                &format!(
                    "an intermediate sensing period is best (Table III: every 20 iterations) — {c}"
                ),
                Some(best.sensing != every[0].sensing),
                format!(
                    "best {} ({:.3} s); a sensing here costs one allgather, not an NWS query",
                    best.sensing,
                    time(best)
                ),
            );
        }
    }
}

/// Lan, Taylor & Bryan: distributed vs parallel DLB across a slow link (modelled between
/// thread ranks; real between the namespace cluster's sites when `net` has those runs).
pub(super) fn lan(doc: &mut Doc, recs: &[&SamrRecord], net: &crate::NetStudy) -> Result<()> {
    let real = match net {
        crate::NetStudy::Runs(dir) => format!(
            "**On the namespace cluster** (`{VCLUSTER_LAN_CONFIG}`; runs in `{}`): the same \
             kernel, sizes and schemes as `samr --backend mpi` under mpirun across the four \
             nodes of `machines/vcluster-sites.xml`, each site's two nodes on a 100 Mbit/s \
             switch, the sites joined by a link shaped to 10 Mbit/s both ways (tbf): every byte \
             between the sites crosses it over TCP, and the global phase's α and β are measured \
             over it. Four ranks share two cores, so the times compare the schemes on the same \
             oversubscribed host, not a real cluster's speed; the bytes over the link and the \
             redistributions are the figures.",
            dir.display()
        ),
        crate::NetStudy::Skipped(why) => {
            format!("The namespace-cluster runs (`vcluster-sites.xml`) were skipped: {why}.")
        }
        crate::NetStudy::NotAsked => "The namespace-cluster runs (`vcluster-sites.xml`) were \
             not asked for (`cargo xtask reproduce` makes them as root with iproute2)."
            .to_string(),
    };
    let _ = writeln!(
        doc.md,
        "\n## Lan, Taylor & Bryan on the SAMR kernel: distributed vs parallel DLB\n\n\
         Two sites of two ranks each, all processors dedicated and equal (as in the paper's \
         experiments). **On thread ranks** (the ranks of a site pinned to one core, 0 or 1) the \
         link between the sites is **modelled**: a rank that receives values from the other \
         site waits α + β·bytes first (α = {} ms, β for {} MB/s: an assumption, a WAN of the \
         paper's time). {real} Parallel DLB lays all boxes out over all four ranks at each \
         regrid (ACE, equal capacities); distributed DLB moves level-0 grids between the sites \
         only when Gain > 2·Cost (Cost = α + βW + δ with the link's α, β and the last \
         redistribution's measured time) and balances inside each site at the regrids.\n",
        SITE_LINK.alpha * 1e3,
        1e-6 / SITE_LINK.beta
    );
    md_table(
        &mut doc.md,
        &[
            Col::L("configuration"),
            Col::L("variant"),
            Col::R("time s"),
            Col::R("global redistributions"),
            Col::R("MB over the link"),
            Col::R("MB in all"),
        ],
        recs.iter().map(|r| {
            vec![
                r.config.clone(),
                r.variant.clone(),
                format!("{:.3}", time(r)),
                r.global_redistributions.to_string(),
                format!("{:.2}", r.link_bytes.unwrap_or(0) as f64 / 1e6),
                format!("{:.2}", r.bytes as f64 / 1e6),
            ]
        }),
    );
    let _ = writeln!(doc.md, "\nThe paper's claims, and ours:\n");
    for (i, c) in configs(recs).into_iter().enumerate() {
        let (Some(p), Some(d)) = (find(recs, &c, "parallel"), find(recs, &c, "distributed")) else {
            continue;
        };
        let gain = 1.0 - time(d) / time(p);
        let file = match i {
            0 => "lan-time-link.svg".to_string(),
            i => format!("lan-time-link-{}.svg", i + 1),
        };
        doc.plot(
            &file,
            svg::bars(
                "Parallel vs distributed DLB",
                "seconds / MB",
                &["time s".to_string(), "MB over the link".to_string()],
                &[p, d]
                    .iter()
                    .map(|r| {
                        (
                            r.variant.clone(),
                            vec![Some(time(r)), Some(r.link_bytes.unwrap_or(0) as f64 / 1e6)],
                        )
                    })
                    .collect::<Vec<_>>(),
            ),
            "lan: time and bytes over the link",
        )?;
        verdict(
            &mut doc.md,
            &format!("distributed DLB takes 9–46 % less time than parallel DLB — {c}"),
            Some((0.09..=0.46).contains(&gain)),
            format!(
                "{:.3} s vs {:.3} s: {:.1} % less",
                time(d),
                time(p),
                100.0 * gain
            ),
        );
        verdict(
            &mut doc.md,
            &format!("and sends less over the slow link — {c}"),
            Some(d.link_bytes < p.link_bytes),
            format!(
                "{:.2} MB vs {:.2} MB; {} global redistributions vs {} flat layouts",
                d.link_bytes.unwrap_or(0) as f64 / 1e6,
                p.link_bytes.unwrap_or(0) as f64 / 1e6,
                d.global_redistributions,
                p.global_redistributions
            ),
        );
    }
    Ok(())
}
