//! The report written from fixed records: every section and table, compared with a snapshot
//! (a change to the report's text shows up here for review).

use super::{Net, Nets, Setup, write};
use crate::calib::Calib;
use crate::output::{Record, Validation};
use crate::samr::SamrRecord;
use crate::vcluster::{NetRun, NodePart};
use crate::watts::{Runs, TransferRecord, WattsRecord};
use comm::LinkModel;

fn record(study: &'static str, config: &str, variant: &str, mode: &'static str, t: f64) -> Record {
    let balance = match variant {
        "uniform" => "uniform",
        _ => "monitored",
    };
    Record {
        study,
        config: config.into(),
        variant: variant.into(),
        mode,
        ranks: 4,
        balance,
        w_comm: 0.1,
        loads: vec!["1 on core 1".into()],
        rebalance: "policy".into(),
        sensing: "every 1".into(),
        time_s: t,
        times_s: vec![t],
        rc: None,
        rc_ideal: 0.25,
        h_cpu: 0.3 + t / 100.0,
        rebalances: (t as usize) % 5,
        migrated_elements: (t * 100.0) as u64,
        migrated_bytes: t * 1e5,
        imbalance: 0.05,
        compute_s: Some(t * 0.8),
        comm_s: Some(t * 0.2),
    }
}

fn records() -> Vec<Record> {
    let mut v = Vec::new();
    let mut t = 3.0;
    for study in crate::studies::STUDIES {
        let variants: &[&str] = match study {
            "gain_cost" => &[
                "policy (gain > 2 cost)",
                "always rebalance",
                "never rebalance",
            ],
            "sensing" => &["uniform", "sensing every 1", "sensing every 4"],
            _ => &["uniform", "DRUM static", "DRUM monitored"],
        };
        for (config, mode) in [("bullpen-8", "simulated"), ("host-2", "measured")] {
            for variant in variants {
                t += 0.37;
                v.push(record(study, config, variant, mode, t));
            }
        }
    }
    for variant in ["uniform", "DRUM w_comm=0.1"] {
        v.push(record(
            crate::vcluster::STUDY,
            "vcluster-2, dedicated links",
            variant,
            "measured",
            5.5,
        ));
    }
    super::relative_changes(&mut v);
    v
}

fn samr(study: &'static str, config: &str, variant: &str, mode: &'static str) -> SamrRecord {
    let ranks = if mode == "simulated" { 4 } else { 2 };
    let share = vec![1.0 / ranks as f64; ranks];
    SamrRecord {
        study,
        config: config.into(),
        variant: variant.into(),
        mode,
        ranks,
        partitioner: "ace",
        capacities_from: "fixed",
        sensing: "-".into(),
        loads: Vec::new(),
        reference: share.clone(),
        capacities: share.clone(),
        work_share: share,
        imbalance_percent: vec![1.5; ranks],
        time_s: (mode == "measured").then_some(2.0 + variant.len() as f64 / 10.0),
        model_time: 40.0 + variant.len() as f64,
        global_redistributions: variant.len() % 3,
        link_bytes: Some(1000 * variant.len() as u64),
        bytes: 5000,
        steps: 8,
    }
}

fn samr_records() -> Vec<SamrRecord> {
    let mut v = Vec::new();
    for (config, mode) in [("sim-4", "simulated"), ("host-2", "measured")] {
        for variant in ["GrACE default", "ACEHeterogeneous"] {
            v.push(samr("sinha", config, variant, mode));
        }
    }
    for variant in ["parallel DLB", "distributed DLB"] {
        v.push(samr("lan", "two sites", variant, "measured"));
    }
    v
}

fn watts() -> Runs {
    let watts = crate::watts::CASES
        .iter()
        .enumerate()
        .map(|(i, &case)| WattsRecord {
            case,
            competitors: 1,
            mode: "measured",
            step_time_s: 0.5 / (i + 1) as f64,
            moved_per_round: vec![10 * i as u64, i as u64, 0, 0],
            time_s: 4.0 / (i + 1) as f64,
        })
        .collect();
    let transfer = [("recut", 900, 3.0), ("hbm", 300, 2.9)]
        .into_iter()
        .map(|(method, migrated_elements, time_s)| TransferRecord {
            method,
            migrated_elements,
            time_s,
            step_time_s: time_s / 8.0,
            moved_per_round: vec![migrated_elements / 2, migrated_elements / 2],
            switch_step: 4,
        })
        .collect();
    Runs { watts, transfer }
}

fn net() -> Net {
    Net::Runs(
        [("uniform", 6.0), ("monitored", 5.0)]
            .into_iter()
            .map(|(balance, time_s)| NetRun {
                name: format!("run-{balance}"),
                balance,
                w_comm: 0.1,
                flow_on: None,
                time_s,
                parts: ["fast", "slow"]
                    .into_iter()
                    .map(|node| NodePart {
                        node: node.into(),
                        host: format!("ns-{node}"),
                        target: 0.5,
                        work_share: 0.5,
                    })
                    .collect(),
                rebalances: 2,
                migrated_elements: 40,
                migrated_bytes: 4e4,
                imbalance: 0.02,
            })
            .collect(),
    )
}

#[test]
fn the_report_of_fixed_records_is_the_snapshot() {
    let setup = Setup {
        scale: "tiny".into(),
        target_vertices: 4000,
        vertices: 4100,
        steps: 6,
        repeats: 1,
        cores: 2,
        host_mflops: 1000.0,
        calibration: Calib {
            a: vec![1e-6, 2e-6],
            pre: vec![0.1, 0.2],
            c_move: 4e-7,
            c_move_samples: 5,
            l: vec![1e-3, 2e-3],
            p: 3e-7,
            host_mflops: 1000.0,
            bytes_per_cut_iteration: 24.0,
            bytes_per_element: 300.0,
            monitor_overhead: 0.01,
            kappa: 1e-4,
            link: LinkModel {
                alpha: 2e-5,
                beta: 1e-9,
            },
        },
        seconds: 12.0,
    };
    let validation = vec![
        Validation {
            config: "host-2 uniform".into(),
            measured_s: 3.0,
            simulated_s: 3.1,
            rel_err: 0.1 / 3.0,
            calibration: true,
            spread_s: (2.9, 3.2),
            shared: Vec::new(),
            sensed_at: None,
            mechanism: None,
        },
        Validation {
            config: "host-2 monitored".into(),
            measured_s: 2.0,
            simulated_s: 1.9,
            rel_err: -0.05,
            calibration: false,
            spread_s: (1.95, 2.1),
            shared: Vec::new(),
            sensed_at: None,
            mechanism: None,
        },
        Validation {
            config: "host-2 moving load".into(),
            measured_s: 4.0,
            simulated_s: 3.0,
            rel_err: -0.25,
            calibration: false,
            spread_s: (3.8, 4.4),
            shared: vec![crate::calib::SharedRank {
                rank: 1,
                nominal: 1.0 / 3.0,
                effective: 0.2,
            }],
            sensed_at: None,
            mechanism: None,
        },
    ];
    let validation: Vec<Validation> = validation
        .into_iter()
        .map(|mut v| {
            v.explain();
            v
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("repro-report-{}", std::process::id()));
    write(
        &dir,
        &setup,
        &records(),
        &validation,
        &Nets {
            exp2: &net(),
            lan: &crate::NetStudy::Skipped("not root (the test's reason)".into()),
        },
        &samr_records(),
        &watts(),
    )
    .unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    insta::assert_snapshot!(md);
}
