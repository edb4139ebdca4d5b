use super::*;
use crate::testbed::{paper_capacities, stream};
use crate::{ProcGraph, Sent, Solver, select};
use hsfc::Hsfc;
use hsfc::generate::{Distribution, WeightKind, points};
use part_api::Csr;
use proptest::prelude::*;

fn grid_objects(w: usize, h: usize) -> (Vec<f64>, Csr) {
    crate::testbed::object_grid(w, h)
}

fn random_weights(n: usize, seed: u64) -> Vec<f64> {
    crate::testbed::integer_weights(n, 9, &mut stream(seed))
}

/// Equal parts along the Hilbert curve: the current partition the rebalances start from.
fn hsfc_parts(coords: &[f64], dim: usize, weights: Option<&[f64]>, k: usize) -> Vec<u32> {
    let mut parts = vec![0; coords.len() / dim];
    Hsfc::default()
        .partition(
            &Serial,
            Points::new(coords, dim, weights),
            &vec![1.0; k],
            &mut parts,
        )
        .unwrap();
    parts
}

/// Every object has one part `< k`, and the reported part weights are the parts' sums.
fn check_whole(r: &Rebalance, weights: Option<&[f64]>, parts: &[u32], k: usize) {
    assert!(parts.iter().all(|&p| (p as usize) < k));
    let mut sums = vec![0.0; k];
    for (o, &p) in parts.iter().enumerate() {
        sums[p as usize] += weights.map_or(1.0, |w| w[o]);
    }
    for (p, (&got, &want)) in r.part_weights.iter().zip(&sums).enumerate() {
        assert!(
            (got - want).abs() <= 1e-9 * want.max(1.0),
            "part {p}: {got} vs {want}"
        );
    }
}

/// Whether the objects of each part form one connected piece of `adj`.
fn parts_connected(adj: &dyn Adjacency, parts: &[u32], k: usize) -> bool {
    (0..k as u32).all(|p| {
        let members: Vec<usize> = (0..parts.len()).filter(|&o| parts[o] == p).collect();
        let Some(&first) = members.first() else {
            return true;
        };
        let mut seen = vec![false; parts.len()];
        seen[first] = true;
        let mut stack = vec![first];
        let mut count = 1;
        while let Some(o) = stack.pop() {
            for &b in adj.neighbours(o) {
                let b = b as usize;
                if parts[b] == p && !seen[b] {
                    seen[b] = true;
                    count += 1;
                    stack.push(b);
                }
            }
        }
        count == members.len()
    })
}

fn methods() -> [Method; 3] {
    [
        Method::Hbm,
        Method::GDE,
        Method::Implicit {
            alpha: Some(10.0),
            solver: Solver::Cg,
        },
    ]
}

fn with(method: Method) -> Diffusion {
    let d = Diffusion::default();
    Diffusion {
        transfer: Transfer {
            method,
            ..d.transfer
        },
        ..d
    }
}

#[test]
fn every_method_meets_the_tolerance_with_the_papers_capacities() {
    let (coords, adj) = grid_objects(60, 40);
    let weights = random_weights(2400, 1);
    let caps = paper_capacities(10, &mut stream(2));
    let start = hsfc_parts(&coords, 2, Some(&weights), 10);
    for method in methods() {
        let mut parts = start.clone();
        let points = Points::new(&coords, 2, Some(&weights));
        let r = with(method)
            .rebalance(points, Some(&adj), &caps, &mut parts)
            .unwrap();
        check_whole(&r, Some(&weights), &parts, 10);
        assert!(r.met, "{method:?}: {r:#?}");
        assert!(r.imbalance <= 1.05, "{method:?}");
        assert!(r.rounds.len() <= 6, "{method:?}: {} rounds", r.rounds.len());
        // The first round plans the most; later rounds only correct.
        let planned: Vec<f64> = r.rounds.iter().map(|x| x.planned).collect();
        assert!(
            planned.iter().skip(1).all(|&p| p < planned[0]),
            "{planned:?}"
        );
    }
}

#[test]
fn unit_objects_keep_parts_connected() {
    let (coords, adj) = grid_objects(48, 32);
    let k = 8;
    let caps = paper_capacities(k, &mut stream(4));
    // Eight vertical strips.
    let start: Vec<u32> = (0..48 * 32).map(|i| ((i % 48) / 6) as u32).collect();
    for method in methods() {
        let mut parts = start.clone();
        let r = with(method)
            .rebalance(Points::new(&coords, 2, None), Some(&adj), &caps, &mut parts)
            .unwrap();
        assert!(r.met, "{method:?}");
        assert!(parts_connected(&adj, &parts, k), "{method:?}");
        check_whole(&r, None, &parts, k);
    }
}

#[test]
fn transfers_are_met_within_one_object_and_from_the_boundary() {
    let (coords, adj) = grid_objects(40, 20);
    let weights = random_weights(800, 7);
    let q: Vec<u64> = weights.iter().map(|&w| w as u64).collect();
    // Four vertical strips of 10 columns; each boundary column weighs about 100.
    let start: Vec<u32> = (0..800).map(|i| ((i % 40) / 10) as u32).collect();
    let graph = ProcGraph::from_objects(4, &start, &adj).unwrap();
    assert_eq!(graph.edges(), &[[0, 1], [1, 2], [2, 3]]);
    let tasks = Tasks {
        coords: &coords,
        dim: 2,
        weights: &q,
        adjacency: &adj,
    };
    for flows in [[37, -60, 250], [-5, 1000, 0], [90, 0, -90]] {
        let mut parts = start.clone();
        let sel = select(tasks, &graph, &flows, &mut parts, Par::Seq).unwrap();
        let heaviest = *q.iter().max().unwrap();
        for s in &sel.sent {
            let Sent {
                from,
                to,
                asked,
                sent,
                ..
            } = *s;
            assert!(
                sent.abs_diff(asked) <= heaviest,
                "{from} → {to}: {sent} for {asked}"
            );
            // Small transfers come from the boundary column only.
            let boundary_col = if to > from { 10 * to - 1 } else { 10 * from };
            let moved: Vec<usize> = (0..800)
                .filter(|&o| start[o] == from && parts[o] == to)
                .collect();
            if asked <= 60 {
                assert!(
                    moved.iter().all(|&o| (o % 40) as u32 == boundary_col),
                    "{from} → {to}"
                );
            }
            // Larger ones peel whole columns inwards: within a few columns of the boundary.
            let depth = asked / 80 + 1; // a column weighs 20 × 5.5 on average
            assert!(
                moved
                    .iter()
                    .all(|&o| ((o % 40) as u32).abs_diff(boundary_col) as u64 <= depth),
                "{from} → {to}: {asked}"
            );
        }
        let moved_weight: u64 = (0..800)
            .filter(|&o| parts[o] != start[o])
            .map(|o| q[o])
            .sum();
        assert_eq!(moved_weight, sel.moved_weight);
    }
}

#[test]
fn same_result_for_every_thread_count() {
    let (coords, w) = points(3000, 2, Distribution::Graded, WeightKind::Random, 3);
    let w = w.unwrap();
    let caps = paper_capacities(12, &mut stream(5));
    let start = hsfc_parts(&coords, 2, Some(&w), 12);
    for method in methods() {
        let run = |par| {
            let mut parts = start.clone();
            let d = Diffusion {
                par,
                ..with(method)
            };
            let r = d
                .rebalance(Points::new(&coords, 2, Some(&w)), None, &caps, &mut parts)
                .unwrap();
            (parts, r)
        };
        let seq = run(Par::Seq);
        assert!(seq.1.met, "{method:?}: {:#?}", seq.1);
        for t in [2, 3] {
            assert_eq!(run(Par::threads(t)), seq, "{method:?}, {t} threads");
        }
    }
}

#[test]
fn the_partitioner_interface_uses_the_nearest_neighbours() {
    let (coords, _) = points(2000, 3, Distribution::Uniform, WeightKind::Unit, 8);
    let caps = [1.0, 2.0, 4.0, 8.0];
    let mut parts = hsfc_parts(&coords, 3, None, 4);
    let r = Diffusion::default()
        .partition(&Serial, Points::new(&coords, 3, None), &caps, &mut parts)
        .unwrap();
    assert!(r.met);
    check_whole(&r, None, &parts, 4);
    let counts: Vec<usize> = (0..4)
        .map(|p| parts.iter().filter(|&&x| x == p).count())
        .collect();
    for (p, &c) in counts.iter().enumerate() {
        let want = 2000.0 * caps[p] / 15.0;
        assert!((c as f64) <= want * 1.05, "part {p}: {c} for {want}");
    }
}

#[test]
fn balanced_input_moves_nothing() {
    let (coords, adj) = grid_objects(20, 20);
    let mut parts: Vec<u32> = (0..400).map(|i| u32::from(i % 20 >= 10)).collect();
    let before = parts.clone();
    let r = Diffusion::default()
        .rebalance(
            Points::new(&coords, 2, None),
            Some(&adj),
            &[1.0, 1.0],
            &mut parts,
        )
        .unwrap();
    assert!(r.met && r.rounds.is_empty() && r.moved_objects == 0);
    assert_eq!(parts, before);
}

#[test]
fn new_objects_join_a_neighbour_and_empty_parts_get_load() {
    let (coords, adj) = grid_objects(30, 10);
    // Parts 0 and 1 hold the left and right thirds; the middle third is new (no part);
    // part 2 is empty.
    let mut parts: Vec<u32> = (0..300)
        .map(|i| match i % 30 {
            0..10 => 0,
            10..20 => u32::MAX,
            _ => 1,
        })
        .collect();
    let r = Diffusion::default()
        .rebalance(
            Points::new(&coords, 2, None),
            Some(&adj),
            &[1.0, 1.0, 1.0],
            &mut parts,
        )
        .unwrap();
    assert_eq!(r.assigned, 100);
    assert!(r.rounds[0].bridges >= 1, "{:#?}", r.rounds[0]);
    assert!(r.met, "{r:#?}");
    check_whole(&r, None, &parts, 3);
    assert!(parts.iter().filter(|&&p| p == 2).count() >= 95);
}

#[test]
fn bad_input_is_an_error() {
    let (coords, adj) = grid_objects(4, 4);
    let d = Diffusion::default();
    let pts = Points::new(&coords, 2, None);
    let mut none = vec![u32::MAX; 16];
    assert!(matches!(
        d.rebalance(pts, Some(&adj), &[1.0, 1.0], &mut none),
        Err(Error::NoCurrentPartition { objects: 16, .. })
    ));
    let mut parts = vec![0u32; 16];
    assert!(matches!(
        d.rebalance(pts, Some(&adj), &[1.0, -1.0], &mut parts),
        Err(Error::InvalidCapacity { index: 1, .. })
    ));
    let mut w = vec![1.0; 16];
    w[5] = f64::NAN;
    assert!(matches!(
        d.rebalance(Points::new(&coords, 2, Some(&w)), None, &[1.0], &mut parts),
        Err(Error::InvalidWeight { index: 5, .. })
    ));
    let small = Csr::from_edges(3, [(0, 1)]).unwrap();
    assert!(matches!(
        d.rebalance(pts, Some(&small), &[1.0], &mut parts),
        Err(Error::LengthMismatch {
            what: "adjacency",
            ..
        })
    ));
    assert!(matches!(
        d.rebalance(Points::new(&coords, 4, None), None, &[1.0], &mut parts),
        Err(Error::Dimension { dim: 4, .. })
    ));
    let bad_tol = Diffusion {
        tolerance: -1.0,
        ..d
    };
    assert!(bad_tol.rebalance(pts, None, &[1.0], &mut parts).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn no_object_is_lost_or_duplicated(
        n in 1usize..600,
        k in 1usize..9,
        seed in any::<u64>(),
        which in 0usize..3,
        caps in proptest::collection::vec(1.0f64..40.0, 8),
    ) {
        let (coords, w) = points(n, 2, Distribution::Uniform, WeightKind::LogNormal, seed);
        let w = w.unwrap();
        let mut parts = hsfc_parts(&coords, 2, Some(&w), k);
        let d = Diffusion { max_rounds: 4, ..with(methods()[which]) };
        let r = d.rebalance(Points::new(&coords, 2, Some(&w)), None, &caps[..k], &mut parts)
            .unwrap();
        check_whole(&r, Some(&w), &parts, k);
        let total: f64 = w.iter().sum();
        let got: f64 = r.part_weights.iter().sum();
        prop_assert!((got - total).abs() <= 1e-9 * total + n as f64 * r.quantum);
    }
}
