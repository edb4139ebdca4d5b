//! The report's sections of Watts, Rieffel & Taylor 1998: the four-way experiment (`watts`)
//! and incremental transfer against the global recut (`transfer`), with verdicts computed
//! from the figures.

use super::{Col, Doc, md_table, verdict};
use crate::watts::{CASES, Runs, SETTLE, TransferRecord, WattsRecord};
use std::fmt::Write as _;

fn rounds(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
}

/// Elements moved in rounds `from..` (1-based rounds).
fn moved_from(r: &WattsRecord, from: usize) -> u64 {
    r.moved_per_round.iter().skip(from - 1).sum()
}

/// Rounds after `after` that moved anything, and how many rounds there were after it.
fn moving_rounds(r: &WattsRecord, after: usize) -> (usize, usize) {
    let late = r.moved_per_round.iter().skip(after);
    (late.clone().filter(|&&m| m > 0).count(), late.count())
}

fn find<'a>(recs: &'a [WattsRecord], case: &str, k: usize) -> Option<&'a WattsRecord> {
    recs.iter().find(|r| r.case == case && r.competitors == k)
}

/// The four-way experiment: table and verdicts.
pub(super) fn watts(doc: &mut Doc, recs: &[WattsRecord]) {
    let _ = writeln!(
        doc.md,
        "\n## Watts, Rieffel & Taylor 1998: four ways to balance a heterogeneous host\n\n\
         **measured**: the adaptive run over two thread ranks pinned to cores 0 and 1, 1, 2 or 3 \
         real compute-bound processes pinned to core 1 from the start, DRUM's real monitors; \
         the rebalance policy (eff_min 0.95, γ 2, drift 10 %) decides at every point, a KEEP_CUTS \
         HSFC recut moves the elements. The cases: **none** (equal parts, never rebalanced); \
         **homogeneous** (equal parts, each rank's measured seconds per unit of work taken as its \
         elements' load: the paper's CPU time as the load; `--capacity homogeneous`); **static** \
         (the ratings a benchmark sharing core 1 with k processes would give at a fair share, \
         core 1 at 1/(k+1) of core 0: an assumption, the run's real share differs); **measured** \
         (each rank's work ÷ the seconds it was runnable over the window, renewed at every \
         point; `--capacity measured`). Step time: the mean wall time of the steps after the \
         first {SETTLE} rebalance points; moved: elements migrated at each rebalance point \
         (round 1 = step 1).\n"
    );
    let mut ks: Vec<usize> = recs.iter().map(|r| r.competitors).collect();
    ks.dedup();
    md_table(
        &mut doc.md,
        &[
            Col::R("competitors"),
            Col::L("case"),
            Col::R("step time (s)"),
            Col::R("vs none"),
            Col::L("moved per round"),
        ],
        ks.iter().flat_map(|&k| {
            let none = find(recs, "none", k).map(|r| r.step_time_s);
            CASES.iter().filter_map(move |&case| {
                let r = find(recs, case, k)?;
                Some(vec![
                    k.to_string(),
                    case.into(),
                    format!("{:.4}", r.step_time_s),
                    none.map_or("–".into(), |n| format!("{:.2}x", n / r.step_time_s)),
                    rounds(&r.moved_per_round),
                ])
            })
        }),
    );
    let _ = writeln!(
        doc.md,
        "\nThe paper (Figs. 3 and 4: 14.1 s no balancing, 6.5 s homogeneous, 2.5 s static, 2.0 s \
         dynamic on the whole testbed), and ours:\n"
    );
    watts_verdicts(doc, recs, &ks);
}

fn watts_verdicts(doc: &mut Doc, recs: &[WattsRecord], ks: &[usize]) {
    let each = |f: &dyn Fn(usize) -> Option<(bool, String)>| {
        let v: Vec<(bool, String)> = ks.iter().filter_map(|&k| f(k)).collect();
        let ok = (!v.is_empty()).then(|| v.iter().all(|x| x.0));
        let text: Vec<String> = v.into_iter().map(|x| x.1).collect();
        (ok, text.join("; "))
    };
    let (ok, text) = each(&|k| {
        let (m, n) = (find(recs, "measured", k)?, find(recs, "none", k)?);
        Some((
            m.step_time_s < n.step_time_s,
            format!(
                "{k} competitor(s): measured {:.4} s vs none {:.4} s",
                m.step_time_s, n.step_time_s
            ),
        ))
    });
    verdict(
        &mut doc.md,
        "with measured capacities the run beats no balancing on every loaded configuration",
        ok,
        text,
    );
    let (ok, text) = each(&|k| {
        let h = find(recs, "homogeneous", k)?;
        let best = ["static", "measured"]
            .iter()
            .filter_map(|c| find(recs, c, k))
            .map(|r| r.step_time_s)
            .fold(f64::INFINITY, f64::min);
        let (moving, late) = moving_rounds(h, SETTLE);
        Some((
            2 * moving >= late && late > 0 && h.step_time_s > best,
            format!(
                "{k}: moves in {moving} of {late} rounds after round {SETTLE}, {:.4} s vs the \
                 capacities' best {best:.4} s",
                h.step_time_s
            ),
        ))
    });
    verdict(
        &mut doc.md,
        "(2) homogeneous balancing keeps moving elements without reaching the step time of \
         balancing with capacities",
        ok,
        text,
    );
    let (ok, text) = each(&|k| {
        let (s, n) = (find(recs, "static", k)?, find(recs, "none", k)?);
        let early = moved_from(s, 1) - moved_from(s, SETTLE + 1);
        let late = moved_from(s, SETTLE + 1);
        Some((
            s.step_time_s < n.step_time_s && late < early,
            format!(
                "{k}: {:.4} s vs none {:.4} s; moved {early} in rounds 1-{SETTLE}, {late} after",
                s.step_time_s, n.step_time_s
            ),
        ))
    });
    verdict(
        &mut doc.md,
        "(3) static capacities improve on no balancing and their transfers fall off after two \
         rounds",
        ok,
        text,
    );
    let (ok, text) = each(&|k| {
        let m = find(recs, "measured", k)?;
        let best = CASES
            .iter()
            .filter_map(|c| find(recs, c, k))
            .map(|r| r.step_time_s)
            .fold(f64::INFINITY, f64::min);
        let (early, late) = (moved_from(m, 1) - moved_from(m, 4), moved_from(m, 4));
        Some((
            m.step_time_s <= best * 1.05 && late <= early / 4,
            format!(
                "{k}: {:.4} s (best {best:.4} s); moved {early} in rounds 1-3, {late} after",
                m.step_time_s
            ),
        ))
    });
    verdict(
        &mut doc.md,
        "(4) measured capacities are best (within 5 %) and all but stop moving after about \
         three rounds (after round 3 at most a quarter of what rounds 1-3 moved; the refinement \
         keeps adding elements where the corner is, which the paper's particle run did not)",
        ok,
        text,
    );
}

/// Incremental transfer against the recut: table and verdicts.
pub(super) fn transfer(doc: &mut Doc, recs: &[TransferRecord]) {
    let Some(switch) = recs.first().map(|r| r.switch_step) else {
        return;
    };
    let _ = writeln!(
        doc.md,
        "\n## Watts, Rieffel & Taylor 1998: incremental transfer against the global recut\n\n\
         **measured**: the same run with measured capacities and the policy deciding, one \
         competing process on core 1 until step {switch}, then on core 0. **recut**: the \
         KEEP_CUTS HSFC repartition into the new sizes; **hbm**, **gde**, **implicit**: the \
         machine's level becomes `lbm=\"DIFFUSION\"` with that load transfer calculation \
         (`--transfer`), elements chosen on the shared boundary. Time: the sum of the steps' \
         wall times.\n"
    );
    md_table(
        &mut doc.md,
        &[
            Col::L("method"),
            Col::R("migrated elements"),
            Col::R("time (s)"),
            Col::R("step time (s)"),
            Col::L("moved per round"),
        ],
        recs.iter().map(|r| {
            vec![
                r.method.into(),
                r.migrated_elements.to_string(),
                format!("{:.3}", r.time_s),
                format!("{:.4}", r.step_time_s),
                rounds(&r.moved_per_round),
            ]
        }),
    );
    let Some(recut) = recs.iter().find(|r| r.method == "recut") else {
        return;
    };
    let inc: Vec<&TransferRecord> = recs.iter().filter(|r| r.method != "recut").collect();
    let _ = writeln!(doc.md, "\nThe paper's claim, and ours:\n");
    verdict(
        &mut doc.md,
        "incremental transfer between neighbouring ranks moves fewer elements than a global \
         recut",
        (!inc.is_empty()).then(|| {
            inc.iter()
                .all(|r| r.migrated_elements < recut.migrated_elements)
        }),
        inc.iter()
            .map(|r| {
                format!(
                    "{} {} vs recut {}",
                    r.method, r.migrated_elements, recut.migrated_elements
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    );
    verdict(
        &mut doc.md,
        "and costs no more time (within 5 %)",
        (!inc.is_empty()).then(|| inc.iter().all(|r| r.time_s <= recut.time_s * 1.05)),
        inc.iter()
            .map(|r| {
                format!(
                    "{} {:.3} s vs recut {:.3} s",
                    r.method, r.time_s, recut.time_s
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    );
}

/// Both sections, when their runs are there.
pub(super) fn sections(doc: &mut Doc, runs: &Runs) {
    if !runs.watts.is_empty() {
        watts(doc, &runs.watts);
    }
    transfer(doc, &runs.transfer);
}
