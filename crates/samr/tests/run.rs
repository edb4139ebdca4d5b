//! The run over ranks: the same hierarchy and solution to the bit for 1–4 thread ranks and
//! every partitioner; the two-phase scheme's global phase moves only level-0 grids across
//! groups.

use comm::{ThreadComm, ThreadOptions};
use hier_part::Plan;
use samr_kernel::lan::{LinkModel, Policy};
use samr_kernel::{
    Balancer, BoxMethod, Clock, Cluster, Figures, LinkSource, LocalMethod, RankRun, SamrConfig,
    StepReport, SwitchNode, TwoPhase, TwoPhaseConfig, switch_plan,
};

/// A small run: 32 x 32 cells at level 0, two finer levels, a regrid every 2 steps.
fn small() -> SamrConfig {
    SamrConfig {
        n0: 32,
        max_level: 2,
        regrid_every: 2,
        cluster: Cluster {
            efficiency: 0.7,
            min_box: 4,
        },
        ..SamrConfig::default()
    }
}

/// A machine of `r` single-processor nodes of speeds 100, 200, …
fn machine(r: usize) -> Plan {
    let nodes: Vec<SwitchNode> = (1..=r)
        .map(|k| SwitchNode {
            ranks: 1,
            mflops: 100.0 * k as f64,
        })
        .collect();
    switch_plan(&nodes, "HSFC").unwrap()
}

fn run(ranks: usize, steps: usize, cfg: SamrConfig, balancer: &Balancer) -> Vec<StepReport> {
    let out = ThreadComm::run(ranks, &ThreadOptions::default(), |comm| {
        let mut run = RankRun::new(comm, cfg, balancer.clone(), Figures::default())?;
        (0..steps)
            .map(|_| run.step())
            .collect::<Result<Vec<_>, _>>()
    })
    .unwrap();
    let mut reports: Vec<Vec<StepReport>> = out.into_iter().map(Result::unwrap).collect();
    let first = reports.remove(0);
    for r in &reports {
        // Every rank reports the same (timings aside).
        for (a, b) in first.iter().zip(r) {
            assert_eq!(
                (&a.hash, &a.ranks, &a.levels),
                (&b.hash, &b.ranks, &b.levels)
            );
        }
    }
    first
}

fn serial() -> Balancer {
    Balancer::Flat(BoxMethod::Sfc { ranks: 1 })
}

fn hashes(r: &[StepReport]) -> Vec<String> {
    r.iter().map(|s| s.hash.clone()).collect()
}

#[test]
fn the_same_solution_for_every_rank_count_and_partitioner() {
    let steps = 5;
    let reference = run(1, steps, small(), &serial());
    // The hierarchy has grown and moves.
    assert_eq!(reference[0].levels.len(), 3, "{:?}", reference[0].levels);
    assert_ne!(reference[1].levels, reference[3].levels);
    let expect = hashes(&reference);
    for ranks in 1..=4 {
        let caps: Vec<f64> = (1..=ranks).map(|k| k as f64).collect();
        let methods = [
            ("sfc", Balancer::Flat(BoxMethod::Sfc { ranks })),
            ("ace", Balancer::Flat(BoxMethod::Ace { capacities: caps })),
            (
                "hier",
                Balancer::Flat(BoxMethod::Hier {
                    plan: Box::new(machine(ranks)),
                    max_share: 0.25,
                }),
            ),
        ];
        for (name, balancer) in methods {
            let got = run(ranks, steps, small(), &balancer);
            assert_eq!(hashes(&got), expect, "{name} on {ranks} ranks");
            if ranks > 1 {
                assert!(
                    got.iter().all(|s| s.ranks.iter().all(|r| r.work > 0)),
                    "{name}"
                );
            }
        }
    }
}

fn two_phase(groups: Vec<u32>, gamma: f64) -> Balancer {
    let n = groups.len();
    Balancer::TwoPhase(Box::new(
        TwoPhase::new(
            TwoPhaseConfig {
                groups,
                capacities: vec![1.0; n],
                local: LocalMethod::Sfc,
                block: 4,
                policy: Policy {
                    gamma,
                    eff_min: 0.98,
                    ..Policy::default()
                },
                link: LinkSource::Fixed(LinkModel {
                    alpha: 1e-4,
                    beta: 1e-8,
                }),
                clock: Clock::Model {
                    seconds_per_work: 1e-4,
                    delta: 0.0,
                },
            },
            32,
        )
        .unwrap(),
    ))
}

#[test]
fn two_phase_moves_only_level0_grids_across_groups() {
    let steps = 6;
    let expect = hashes(&run(1, steps, small(), &serial()));
    let got = run(4, steps, small(), &two_phase(vec![0, 0, 1, 1], 2.0));
    assert_eq!(hashes(&got), expect);
    let mut moves = 0;
    for s in &got {
        let g = s
            .global
            .as_ref()
            .expect("a global phase after every level-0 step");
        assert_eq!(g.groups.len(), 2);
        assert_eq!(
            g.rebalance,
            g.gain > g.gamma * g.cost && g.eff < g.eff_min,
            "{}",
            g.decision
        );
        if let Some(m) = &s.rebalanced {
            moves += 1;
            let cross = m.cross_group.as_ref().unwrap();
            assert!(cross[0] > 0, "{m:?}");
            assert!(cross[1..].iter().all(|&c| c == 0), "step {}: {m:?}", s.step);
            assert!(g.moved_grids > 0);
        }
    }
    assert!(moves > 0, "no global redistribution happened");
    // With an enormous gamma the same imbalance never pays.
    let never = run(4, steps, small(), &two_phase(vec![0, 0, 1, 1], 1e12));
    assert!(never.iter().all(|s| s.rebalanced.is_none()));
    assert!(
        never
            .iter()
            .any(|s| s.global.as_ref().unwrap().reason == "NotProfitable")
    );
    assert_eq!(hashes(&never), expect);
}

#[test]
fn the_pulse_turns_with_the_flow_and_keeps_its_mass() {
    let cfg = small();
    let steps = 24;
    let out = ThreadComm::run(1, &ThreadOptions::default(), |comm| {
        let mut run = RankRun::new(comm, cfg, serial(), Figures::default())?;
        let measure = |run: &RankRun<ThreadComm>| {
            let (mut mass, mut best) = (0.0, (f64::MIN, 0.0, 0.0));
            run.composite_cells(|l, i, j, v| {
                let h = 1.0 / (cfg.n0 << l) as f64;
                mass += v * h * h;
                if v > best.0 {
                    best = (v, (i as f64 + 0.5) * h, (j as f64 + 0.5) * h);
                }
            });
            (mass, best)
        };
        let before = measure(&run);
        let mut t = 0.0;
        for _ in 0..steps {
            t = run.step()?.time;
        }
        Ok::<_, samr_kernel::SamrError>((before, measure(&run), t))
    })
    .unwrap();
    let ((m0, _), (m1, (peak, x, y)), t) = out.into_iter().next().unwrap().unwrap();
    let p = cfg.problem;
    // exp(-r²/σ²) integrates to π σ² (the pulse lies well inside the square).
    assert!(
        (m0 / (std::f64::consts::PI * p.sigma * p.sigma) - 1.0).abs() < 0.01,
        "{m0}"
    );
    assert!((m1 / m0 - 1.0).abs() < 0.01, "mass {m0} -> {m1}");
    let a = p.omega * t;
    let (cx, cy) = (p.centre[0] - 0.5, p.centre[1] - 0.5);
    let (ex, ey) = (
        0.5 + cx * a.cos() - cy * a.sin(),
        0.5 + cx * a.sin() + cy * a.cos(),
    );
    let off = ((x - ex).powi(2) + (y - ey).powi(2)).sqrt();
    assert!(
        off < 0.5 / cfg.n0 as f64,
        "peak at ({x}, {y}), expected ({ex}, {ey})"
    );
    assert!(peak > 0.5 && peak <= 1.0, "{peak}");
}
