//! The link between the root's groups (Lan et al. §4.2), measured on thread ranks over a
//! machine file, feeding the policy's profitability test.

use comm::{ThreadComm, ThreadOptions};
use drum_loop::rebalance::{Migration, Observation, Policy, Reason, measure_group_link};
use drum_model::{Machine, PowerConfig, static_powers};
use hier_part::Plan;
use std::path::Path;

#[test]
fn link_between_groups_is_measured_and_feeds_a_decision() {
    let m = Machine::from_file(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines/hier-lbmethods.xml"),
    )
    .unwrap();
    let powers = static_powers(&m, &PowerConfig::default()).unwrap();
    let plan = Plan::new(&m, &powers).unwrap();
    let probe = comm::LinkProbe {
        small: 8,
        large: 1 << 20,
        repeats: 3,
        target_s: 0.05,
    };
    let out = ThreadComm::run(plan.num_ranks(), &ThreadOptions::default(), |c| {
        measure_group_link(&c, &plan, plan.root(), &probe).unwrap()
    })
    .unwrap();
    let link = out[0];
    assert!(
        out.iter().all(|l| *l == link),
        "every rank gets the same model"
    );
    assert!(link.alpha >= 0.0 && link.beta > 0.0, "{link:?}");
    // A rank running at half its power's share: eff < eff_min, and with a cheap move the
    // decision is to rebalance, with its figures.
    let caps = plan.part_sizes().to_vec();
    let mut loads = caps.clone();
    loads[0] *= 2.0;
    let d = Policy::default()
        .decide(&Observation {
            loads: &loads,
            capacities: &caps,
            partition_powers: None,
            step_time: Some(1.0),
            migration: Some(Migration {
                link,
                bytes_per_load: 1e3,
                delta: 1e-3,
            }),
            memory: None,
        })
        .unwrap();
    assert!(d.rebalance, "{d}");
    assert_eq!(d.reason, Reason::Imbalance);
    let p = d.profit.unwrap();
    assert!(p.cost > 0.0 && p.gain > p.gamma * p.cost, "{d}");
    // Wrong communicator size: an error, not a hang; the partitioner's one `RankCount`.
    let e = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        measure_group_link(&c, &plan, plan.root(), &probe).unwrap_err()
    })
    .unwrap();
    assert!(
        matches!(
            e[0],
            drum_loop::Error::Partition(hier_part::Error::RankCount {
                comm: 2,
                machine: 11
            })
        ),
        "{:?}",
        e[0]
    );
    // The loop checks the same before starting its agents.
    let started = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        drum_loop::DrumLoop::start(&c, m.clone(), drum_loop::LoopConfig::default())
            .err()
            .map(|e| e.to_string())
    })
    .unwrap();
    assert_eq!(started[0], Some(e[0].to_string()));
    assert_eq!(
        e[0].to_string(),
        "the communicator has 2 ranks but the machine has 11: run one process (or thread rank) per rank of the machine"
    );
}
