//! The hierarchical partitioner: every object exactly once, per-rank balance against the DRUM
//! part sizes, the method of each level visible in the geometry, determinism, distributed ==
//! serial on every file of `machines/`, KEEP_CUTS repartition, point assign through the tree,
//! and errors that name the place.

#![allow(clippy::needless_range_loop)]

use comm::{Comm, ThreadComm, ThreadOptions};
use drum_model::{Machine, PowerConfig, static_powers};
use hier_part::{Child, Hier, HierPartition, LevelCuts, Par, PartitionMethod, Plan, Plane};
use hier_part::{Points, Serial, Workspace};
use hsfc::generate::{Distribution, RandomSource, WeightKind, Xoshiro256, points_with};
use proptest::prelude::*;
use std::path::PathBuf;

fn machines_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../machines")
}

fn machine_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(machines_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    assert!(v.len() >= 4, "machines/ has its example files");
    v
}

fn plan_of(machine: &Machine) -> Plan {
    let powers = static_powers(machine, &PowerConfig::default()).unwrap();
    Plan::new(machine, &powers).unwrap()
}

/// `machine` with `KEEP_CUTS="1"` on every `<lbmethod>` (so the tests can check every level's
/// cuts; the example files give every splitting node an `<lbmethod>`).
fn keep_all_cuts(machine: &Machine) -> Machine {
    let xml = machine
        .to_xml()
        .replace("KEEP_CUTS=\"1\"", "")
        .replace("<lbmethod lbm=", "<lbmethod KEEP_CUTS=\"1\" lbm=");
    let m = Machine::parse_str(&xml, "keep-all.xml").unwrap();
    let plan = plan_of(&m);
    for id in plan.split_nodes() {
        assert!(plan.node(id).method.as_ref().unwrap().keep_cuts, "{id:?}");
    }
    m
}

/// Checks what every hierarchical partition promises.
fn check_partition(
    plan: &Plan,
    coords: &[f64],
    dim: usize,
    w: Option<&[f64]>,
    parts: &[u32],
    r: &HierPartition,
) {
    let n = coords.len() / dim;
    let ranks = plan.num_ranks();
    assert_eq!(parts.len(), n);
    let mut counts = vec![0u64; ranks];
    let mut weights = vec![0.0; ranks];
    for (i, &p) in parts.iter().enumerate() {
        assert!((p as usize) < ranks, "object {i} in part {p} of {ranks}");
        counts[p as usize] += 1;
        weights[p as usize] += w.map_or(1.0, |w| w[i]);
    }
    assert_eq!(counts, r.rank_counts);
    assert_eq!(weights, r.rank_weights);
    let total: f64 = weights.iter().sum();
    let w_max = w.map_or(1.0, |w| w.iter().copied().fold(0.0, f64::max));
    // Each level is within (a few) objects of its targets; errors add up along the path.
    for (rk, &s) in plan.part_sizes().iter().enumerate() {
        let depth = plan.path(rk).len() as f64;
        let bound = 4.0 * depth * w_max + 1e-9 * total;
        assert!(
            (weights[rk] - s * total).abs() <= bound,
            "rank {rk}: W = {}, T = {}, bound {bound}",
            weights[rk],
            s * total
        );
        if s == 0.0 {
            assert_eq!(counts[rk], 0);
        }
    }
    // The geometry of each level: children of an RCB level are separated by axis-parallel
    // cuts, of an RIB level by the planes of its cuts, of an HSFC level by curve intervals.
    let rank_child = |id, rk: u32| plan.child_of_rank(id, rk as usize);
    for id in plan.split_nodes() {
        let node = plan.node(id);
        let method = node.method.as_ref().unwrap();
        let Some(cuts) = r.cuts.get(&id) else {
            continue;
        };
        let members: Vec<usize> = (0..n)
            .filter(|&i| node.ranks.binary_search(&(parts[i] as usize)).is_ok())
            .collect();
        match (method.kind, cuts) {
            (PartitionMethod::Rcb | PartitionMethod::Rib, LevelCuts::Bisection(b)) => {
                for &i in &members {
                    let x = &coords[i * dim..(i + 1) * dim];
                    assert_eq!(
                        Some(b.point_assign(x) as usize),
                        rank_child(id, parts[i]),
                        "{}: point {i} is not on its side of the cuts",
                        node.label
                    );
                }
                for c in &b.cuts {
                    match (method.kind, c.plane) {
                        (PartitionMethod::Rcb, Plane::Axis(_))
                        | (PartitionMethod::Rib, Plane::Inertial { .. }) => {}
                        (k, p) => panic!("{}: {k} level made a cut {p:?}", node.label),
                    }
                }
                if method.kind == PartitionMethod::Rcb {
                    // Pairwise: some axis separates the children's bounding boxes.
                    let k = node.children.len();
                    let mut bb = vec![([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]); k];
                    for &i in &members {
                        let c = rank_child(id, parts[i]).unwrap();
                        for a in 0..dim {
                            bb[c].0[a] = bb[c].0[a].min(coords[i * dim + a]);
                            bb[c].1[a] = bb[c].1[a].max(coords[i * dim + a]);
                        }
                    }
                    for a in 0..k {
                        for b in a + 1..k {
                            let sep = (0..dim)
                                .any(|ax| bb[a].1[ax] <= bb[b].0[ax] || bb[b].1[ax] <= bb[a].0[ax]);
                            let empty = bb[a].0[0] > bb[a].1[0] || bb[b].0[0] > bb[b].1[0];
                            assert!(sep || empty, "{}: children {a} and {b} overlap", node.label);
                        }
                    }
                }
            }
            (PartitionMethod::Hsfc, LevelCuts::Hsfc(p)) => {
                // Children own consecutive key intervals: sorting by key gives non-decreasing
                // child indices.
                let mut keyed: Vec<(u64, usize)> = members
                    .iter()
                    .map(|&i| {
                        let k = p.key(&coords[i * dim..(i + 1) * dim]).unwrap();
                        (k, rank_child(id, parts[i]).unwrap())
                    })
                    .collect();
                keyed.sort_unstable();
                assert!(
                    keyed.windows(2).all(|w| w[0].1 <= w[1].1),
                    "{}: children are not curve intervals",
                    node.label
                );
            }
            (k, _) => panic!("{}: {k} level kept the wrong kind of cuts", node.label),
        }
    }
}

fn run_serial(
    plan: &Plan,
    coords: &[f64],
    dim: usize,
    w: Option<&[f64]>,
    par: Par,
) -> (Vec<u32>, HierPartition) {
    let mut parts = vec![u32::MAX; coords.len() / dim];
    let r = Hier { par }
        .partition(&Serial, plan, Points::new(coords, dim, w), &mut parts)
        .unwrap();
    (parts, r)
}

/// A serial repartition of 2-D points with weights `w`.
fn repartition_serial(
    plan: &Plan,
    previous: &HierPartition,
    x: &[f64],
    w: &[f64],
    parts: &mut [u32],
) -> HierPartition {
    repartition_points(plan, previous, Points::new(x, 2, Some(w)), parts)
}

/// A serial repartition of `points`.
fn repartition_points(
    plan: &Plan,
    previous: &HierPartition,
    points: Points<'_>,
    parts: &mut [u32],
) -> HierPartition {
    Hier::default()
        .repartition(
            &mut Workspace::default(),
            &Serial,
            plan,
            previous,
            points,
            parts,
        )
        .unwrap()
}

#[test]
fn every_machine_file_partitions_correctly() {
    for f in machine_files() {
        let m = keep_all_cuts(&Machine::from_file(&f).unwrap());
        let plan = plan_of(&m);
        for (dist, wk, seed) in [
            (Distribution::Uniform, WeightKind::Unit, 1),
            (Distribution::Corner { rmin: 1e-6 }, WeightKind::Random, 2),
        ] {
            let (x, w) = points_with(&mut Xoshiro256::new(seed), 20_000, 2, dist, wk);
            let (parts, r) = run_serial(&plan, &x, 2, w.as_deref(), Par::Seq);
            check_partition(&plan, &x, 2, w.as_deref(), &parts, &r);
            // Point assign through the hierarchy gives every point its rank.
            for i in (0..parts.len()).step_by(7) {
                assert_eq!(
                    r.point_assign(&plan, &x[2 * i..2 * i + 2]).unwrap(),
                    parts[i],
                    "{}: point {i}",
                    f.display()
                );
            }
            // The same for every thread count.
            for t in [2, 4] {
                let (p2, r2) = run_serial(&plan, &x, 2, w.as_deref(), Par::threads(t));
                assert_eq!(p2, parts, "{}: {t} threads", f.display());
                assert_eq!(r2.rank_weights, r.rank_weights);
            }
        }
    }
}

/// Slice boundaries of `n` points over `ranks`, uneven, some ranks empty.
fn spread(n: usize, ranks: usize, seed: u64) -> Vec<usize> {
    let mut rng = Xoshiro256::new(seed);
    let mut cuts: Vec<usize> = (0..ranks - 1)
        .map(|_| {
            if rng.next_u64().is_multiple_of(4) {
                0
            } else {
                (rng.next_u64() % (n as u64 + 1)) as usize
            }
        })
        .collect();
    cuts.sort_unstable();
    let mut b = vec![0];
    b.extend(cuts);
    b.push(n);
    b
}

/// Distributed partition (and a repartition after a weight change) on one thread rank per
/// machine rank, compared with serial.
fn check_dist_equals_serial(m: &Machine, dim: usize, n: usize, seed: u64) {
    let plan = plan_of(m);
    let ranks = plan.num_ranks();
    let (x, w) = points_with(
        &mut Xoshiro256::new(seed),
        n,
        dim,
        Distribution::Corner { rmin: 1e-6 },
        WeightKind::Random,
    );
    let w = w.unwrap();
    let w2: Vec<f64> = w
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 10 == 0 { v * 1.5 } else { *v })
        .collect();
    let (want, r) = run_serial(&plan, &x, dim, Some(&w), Par::Seq);
    let mut want2 = want.clone();
    let r2 = repartition_points(&plan, &r, Points::new(&x, dim, Some(&w2)), &mut want2);
    let b = spread(n, ranks, seed);
    let out = ThreadComm::run(ranks, &ThreadOptions::default(), |c| {
        let (lo, hi) = (b[c.rank()], b[c.rank() + 1]);
        let mut parts = vec![u32::MAX; hi - lo];
        let d = Hier::default()
            .partition(
                &c,
                &plan,
                Points::new(&x[lo * dim..hi * dim], dim, Some(&w[lo..hi])),
                &mut parts,
            )
            .unwrap();
        let first = parts.clone();
        let d2 = Hier::default()
            .repartition(
                &mut Workspace::default(),
                &c,
                &plan,
                &d,
                Points::new(&x[lo * dim..hi * dim], dim, Some(&w2[lo..hi])),
                &mut parts,
            )
            .unwrap();
        (first, d, parts, d2)
    })
    .unwrap();
    let got: Vec<u32> = out.iter().flat_map(|o| o.0.iter().copied()).collect();
    assert_eq!(got, want, "partition differs from serial");
    let got2: Vec<u32> = out.iter().flat_map(|o| o.2.iter().copied()).collect();
    assert_eq!(got2, want2, "repartition differs from serial");
    for (rk, (_, d, _, d2)) in out.iter().enumerate() {
        assert_eq!(d.rank_weights, r.rank_weights, "rank {rk}: weights");
        assert_eq!(d.rank_counts, r.rank_counts);
        assert_eq!(d.max_rel_dev, r.max_rel_dev);
        assert_eq!(d.warnings, r.warnings);
        assert_eq!(d2.moved, r2.moved, "rank {rk}: moved");
        // The cuts a rank kept are those of the serial run for the levels on its path.
        for (id, cuts) in &d.cuts {
            same_cuts(cuts, &r.cuts[id], &format!("rank {rk}: cuts of {id:?}"));
            assert!(plan.path(rk).contains(id));
        }
    }
}

/// The cuts of a distributed level equal the serial ones; a distributed bisection's part
/// weights come from exact integer sums, within the weight quantum of the serial f64 sums.
fn same_cuts(a: &LevelCuts, b: &LevelCuts, what: &str) {
    match (a, b) {
        (LevelCuts::Hsfc(a), LevelCuts::Hsfc(b)) => assert_eq!(a, b, "{what}"),
        (LevelCuts::Bisection(a), LevelCuts::Bisection(b)) => {
            assert_eq!(a.cuts, b.cuts, "{what}");
            assert_eq!(a.part_counts, b.part_counts, "{what}");
            let quantum =
                b.max_object_weight * 2f64.powi(-31) * b.part_counts.iter().sum::<usize>() as f64;
            for (x, y) in a.part_weights.iter().zip(&b.part_weights) {
                assert!(
                    (x - y).abs() <= quantum + 1e-12 * y.abs(),
                    "{what}: {x} vs {y}"
                );
            }
        }
        (LevelCuts::Diffusion(a), LevelCuts::Diffusion(b)) => assert_eq!(a, b, "{what}"),
        _ => panic!("{what}: different kinds of cuts"),
    }
}

#[test]
fn distributed_equals_serial_on_every_machine_file() {
    for (i, f) in machine_files().into_iter().enumerate() {
        let m = Machine::from_file(&f).unwrap();
        check_dist_equals_serial(&m, 2, 6000, i as u64 + 3);
    }
}

/// Without weights (as fem-laplace passes unit work), including the one-level machines'
/// shortcut (every child of the root one rank): the distributed partition and a KEEP_CUTS
/// repartition after moving some points equal the serial ones, with the same figures.
#[test]
fn distributed_equals_serial_without_weights() {
    // 3,000 points take the small-input path on one-level machines (all points gathered);
    // 80,000 on the two-core machine the one-level walk on each rank's own arrays.
    let mut cases: Vec<(PathBuf, usize)> = machine_files().into_iter().map(|f| (f, 3000)).collect();
    cases.push((machines_dir().join("local-2core-hetero.xml"), 80_000));
    for (i, (f, n)) in cases.into_iter().enumerate() {
        let m = keep_all_cuts(&Machine::from_file(&f).unwrap());
        let plan = plan_of(&m);
        let ranks = plan.num_ranks();
        let (x, _) = points_with(
            &mut Xoshiro256::new(70 + i as u64),
            n,
            2,
            Distribution::Corner { rmin: 1e-6 },
            WeightKind::Unit,
        );
        // The second call sees every twentieth point moved halfway to the corner: some cuts
        // move.
        let x2: Vec<f64> = (x.iter().enumerate())
            .map(|(j, v)| if j % 20 == 0 { v * 0.5 } else { *v })
            .collect();
        let (want, r) = run_serial(&plan, &x, 2, None, Par::Seq);
        let mut want2 = want.clone();
        let r2 = repartition_points(&plan, &r, Points::new(&x2, 2, None), &mut want2);
        let b = spread(n, ranks, i as u64);
        let out = ThreadComm::run(ranks, &ThreadOptions::default(), |c| {
            let (lo, hi) = (b[c.rank()], b[c.rank() + 1]);
            let mut parts = vec![u32::MAX; hi - lo];
            let hier = Hier::default();
            let d = hier
                .partition(
                    &c,
                    &plan,
                    Points::new(&x[2 * lo..2 * hi], 2, None),
                    &mut parts,
                )
                .unwrap();
            let first = parts.clone();
            let pts = Points::new(&x2[2 * lo..2 * hi], 2, None);
            let d2 = hier
                .repartition(&mut Workspace::default(), &c, &plan, &d, pts, &mut parts)
                .unwrap();
            (first, d, parts, d2)
        })
        .unwrap();
        let name = f.display();
        let got: Vec<u32> = out.iter().flat_map(|o| o.0.iter().copied()).collect();
        assert_eq!(got, want, "{name}: partition differs from serial");
        let got2: Vec<u32> = out.iter().flat_map(|o| o.2.iter().copied()).collect();
        assert_eq!(got2, want2, "{name}: repartition differs from serial");
        for (_, d, _, d2) in &out {
            assert_eq!(d.rank_counts, r.rank_counts, "{name}");
            assert_eq!(d.rank_weights, r.rank_weights, "{name}");
            assert_eq!(d2.rank_counts, r2.rank_counts, "{name}");
            assert_eq!(d2.moved, r2.moved, "{name}: moved");
        }
    }
}

#[test]
fn distributed_equals_serial_in_3d_with_every_method() {
    let xml = r#"<machinemodel>
      <node type="NETWORK" nodenum="0" name="top" parent="-1"><lbmethod lbm="RIB" KEEP_CUTS="1"/></node>
      <node type="NETWORK" nodenum="1" name="a" parent="0"><lbmethod lbm="HSFC" KEEP_CUTS="1"/></node>
      <node type="NETWORK" nodenum="2" name="b" parent="0"><lbmethod lbm="RCB" KEEP_CUTS="1" RCB_RECTILINEAR_BLOCKS="1"/></node>
      <node type="MULTIPLE_COMPUTING" nodenum="3" name="a1" parent="1" numprocs="3" mflops="3"><lbmethod lbm="RCB"/></node>
      <node type="SINGLE_COMPUTING" nodenum="4" name="a2" parent="1" mflops="2"/>
      <node type="MULTIPLE_COMPUTING" nodenum="5" name="b1" parent="2" numprocs="2" mflops="1"><lbmethod lbm="RIB"/></node>
      <node type="SINGLE_COMPUTING" nodenum="6" name="b2" parent="2" mflops="4"/>
    </machinemodel>"#;
    let m = Machine::parse_str(xml, "mixed.xml").unwrap();
    check_dist_equals_serial(&m, 3, 5000, 11);
    check_dist_equals_serial(&m, 2, 3000, 12);
}

#[test]
fn keep_cuts_repartition_moves_little() {
    let m = Machine::from_file(machines_dir().join("hier-lbmethods.xml")).unwrap();
    let m = keep_all_cuts(&m);
    let plan = plan_of(&m);
    let (x, w) = points_with(
        &mut Xoshiro256::new(5),
        40_000,
        2,
        Distribution::Uniform,
        WeightKind::Random,
    );
    let w = w.unwrap();
    let (parts, r) = run_serial(&plan, &x, 2, Some(&w), Par::Seq);
    // The same load again: nothing moves.
    let mut again = parts.clone();
    let r1 = repartition_serial(&plan, &r, &x, &w, &mut again);
    assert_eq!(again, parts);
    assert_eq!(r1.moved.unwrap().count, 0);
    // 1% of the objects get 20% heavier: a few percent of the weight moves.
    let w2: Vec<f64> = w
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 100 == 0 { v * 1.2 } else { *v })
        .collect();
    let mut p2 = parts.clone();
    let r2 = repartition_serial(&plan, &r, &x, &w2, &mut p2);
    let moved = r2.moved.unwrap();
    assert!(moved.weight < 0.05 * r2.total_weight, "{moved:?}");
    check_partition(&plan, &x, 2, Some(&w2), &p2, &r2);
}

/// A root that diffuses over four nodes of speeds 1, 2, 4 and 8, one with an HSFC split into
/// two ranks and one with a DIFFUSION split into three.
fn diffusion_machine(method: &str) -> Machine {
    let xml = format!(
        r#"<machinemodel>
      <node type="NETWORK" nodenum="0" name="top" parent="-1"><lbmethod lbm="DIFFUSION" METHOD="{method}" IMBALANCE_TOL="1.03"/></node>
      <node type="SINGLE_COMPUTING" nodenum="1" name="a" parent="0" mflops="1"/>
      <node type="MULTIPLE_COMPUTING" nodenum="2" name="b" parent="0" numprocs="2" mflops="2"><lbmethod lbm="HSFC"/></node>
      <node type="MULTIPLE_COMPUTING" nodenum="3" name="c" parent="0" numprocs="3" mflops="4"><lbmethod lbm="DIFFUSION" METHOD="{method}" EFF_MIN="0.995"/></node>
      <node type="SINGLE_COMPUTING" nodenum="4" name="d" parent="0" mflops="8"/>
    </machinemodel>"#
    );
    Machine::parse_str(&xml, "diffusion.xml").unwrap()
}

#[test]
fn diffusion_levels_repartition_incrementally_serial_and_distributed() {
    for (i, method) in ["HBM", "gde", "Implicit"].into_iter().enumerate() {
        let m = diffusion_machine(method);
        let plan = plan_of(&m);
        let root = plan.node(plan.root()).method.clone().unwrap();
        assert_eq!(root.kind, PartitionMethod::Diffusion);
        assert_eq!(root.transfer.name(), method.to_ascii_lowercase());
        check_dist_equals_serial(&m, 2, 4000, 40 + i as u64);
        check_dist_equals_serial(&m, 3, 2500, 50 + i as u64);
    }
}

#[test]
fn diffusion_moves_less_than_a_recut_and_meets_the_tolerance() {
    let m = diffusion_machine("HBM");
    let plan = plan_of(&m);
    let (x, _) = points_with(
        &mut Xoshiro256::new(9),
        20_000,
        2,
        Distribution::Uniform,
        WeightKind::Unit,
    );
    let w = vec![1.0; 20_000];
    let (parts, r) = run_serial(&plan, &x, 2, Some(&w), Par::Seq);
    // The first partition has no previous one: HSFC at the DIFFUSION levels.
    assert!(matches!(
        r.cuts.get(&plan.root()),
        None | Some(LevelCuts::Hsfc(_))
    ));
    check_partition(&plan, &x, 2, Some(&w), &parts, &r);
    // The objects in a corner (about 4 %) get three times as heavy (a refined corner).
    let w2: Vec<f64> = (0..20_000)
        .map(|i| {
            if x[2 * i] < 0.2 && x[2 * i + 1] < 0.2 {
                3.0
            } else {
                1.0
            }
        })
        .collect();
    let mut p2 = parts.clone();
    let r2 = repartition_serial(&plan, &r, &x, &w2, &mut p2);
    check_partition(&plan, &x, 2, Some(&w2), &p2, &r2);
    let root = plan.node(plan.root()).id;
    let level = r2
        .levels(&plan)
        .into_iter()
        .find(|l| l.node == root)
        .unwrap();
    assert!(level.max_ratio <= 1.03 + 1e-9, "{level:?}");
    // A fresh HSFC partition of the new weights moves far more.
    let mut fresh = vec![u32::MAX; 20_000];
    let recut = Hier::default()
        .partition(&Serial, &plan, Points::new(&x, 2, Some(&w2)), &mut fresh)
        .unwrap();
    let moved_recut = fresh.iter().zip(&parts).filter(|(a, b)| a != b).count() as u64;
    let moved = r2.moved.unwrap().count;
    assert!(
        moved > 0 && moved < moved_recut,
        "{moved} vs {moved_recut} ({recut:?})"
    );
    // At least the excess of the overloaded ranks must leave them; diffusion moves at most
    // three times that (a transfer may pass through a rank on its way).
    let mut held = vec![0.0; plan.num_ranks()];
    for (&p, &wi) in parts.iter().zip(&w2) {
        held[p as usize] += wi;
    }
    let excess: f64 = (held.iter().zip(&r2.targets))
        .map(|(h, t)| (h - t).max(0.0))
        .sum();
    let moved_w = r2.moved.unwrap().weight;
    assert!(moved_w <= 3.0 * excess, "moved {moved_w}, excess {excess}");
    // The same weights again: nothing moves.
    let mut p3 = p2.clone();
    let r3 = repartition_serial(&plan, &r2, &x, &w2, &mut p3);
    assert_eq!(p3, p2);
    assert_eq!(r3.moved.unwrap().count, 0);
    // A DIFFUSION level has no cuts to assign a point by.
    let e = r2.point_assign(&plan, &[0.5, 0.5]).unwrap_err().to_string();
    assert!(e.contains("DIFFUSION") || e.contains("no cuts"), "{e}");
}

/// A switch with `lb` (on line 3) over two single nodes.
fn xml(lb: &str) -> String {
    format!(
        "<machinemodel>\n<node type=\"NETWORK\" nodenum=\"0\" name=\"sw\" parent=\"-1\">\n  {lb}\n</node>\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" name=\"a\" parent=\"0\"/>\n<node type=\"SINGLE_COMPUTING\" nodenum=\"2\" name=\"b\" parent=\"0\"/>\n</machinemodel>"
    )
}

/// The plan's error for [`xml`]`(lb)`.
fn bad(lb: &str) -> String {
    let m = Machine::parse_str(&xml(lb), "bad.xml").unwrap();
    let powers = static_powers(&m, &PowerConfig::default()).unwrap();
    Plan::new(&m, &powers).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn diffusion_parameters_are_checked() {
    assert_eq!(
        bad(r#"<lbmethod lbm="DIFFUSION" METHOD="METIS"/>"#),
        "bad.xml:3:29: node 0 (\"sw\"): lbmethod parameter METHOD=\"METIS\" is not HBM, GDE or IMPLICIT"
    );
    assert_eq!(
        bad(r#"<lbmethod lbm="DIFFUSION" EFF_MIN="1"/>"#),
        "bad.xml:3:29: node 0 (\"sw\"): lbmethod parameter EFF_MIN=\"1\" is not a number in (0, 1)"
    );
    // METHOD of another method is ignored with a warning, as unknown parameters are.
    let m = Machine::parse_str(&xml(r#"<lbmethod lbm="RCB" METHOD="HBM"/>"#), "w.xml").unwrap();
    assert_eq!(plan_of(&m).warnings().len(), 1);
}

#[test]
fn method_of_each_level_comes_from_the_xml() {
    let m = Machine::from_file(machines_dir().join("fig3-cluster-of-clusters.xml")).unwrap();
    let plan = plan_of(&m);
    let kinds: Vec<(u32, PartitionMethod)> = plan
        .split_nodes()
        .iter()
        .map(|&id| {
            let n = plan.node(id);
            (n.nodenum, n.method.as_ref().unwrap().kind)
        })
        .collect();
    use PartitionMethod::*;
    assert_eq!(
        kinds,
        vec![
            (0, Hsfc),
            (1, Rcb),
            (2, Hsfc),
            (10, Rib),
            (3, Rib),
            (11, Hsfc),
            (12, Hsfc),
            (4, Rcb)
        ]
    );
    // Children of the root are the routers; their targets are their subtrees' shares.
    let root = plan.node(plan.root());
    assert_eq!(root.children.len(), 4);
    let sizes = plan.part_sizes();
    for (i, c) in root.children.iter().enumerate() {
        let Child::Node(id) = *c else { panic!() };
        let sum: f64 = plan.node(id).ranks.iter().map(|&r| sizes[r]).sum();
        assert!((sum - root.targets[i]).abs() < 1e-12);
    }
}

#[test]
fn lbmethod_errors_name_the_node_and_the_line() {
    // Method names are part of the file format: the reader rejects an unknown one.
    assert_eq!(
        Machine::parse_str(&xml(r#"<lbmethod lbm="PARMETIS"/>"#), "bad.xml")
            .unwrap_err()
            .to_string(),
        "bad.xml:3:13: node 0 (\"sw\"): unknown lbmethod `PARMETIS` (known: HSFC, RCB, RIB, DIFFUSION)"
    );
    assert_eq!(
        bad(r#"<lbmethod lbm="RCB" KEEP_CUTS="yes"/>"#),
        "bad.xml:3:23: node 0 (\"sw\"): lbmethod parameter KEEP_CUTS=\"yes\" is not 0 or 1"
    );
    assert_eq!(
        bad(r#"<lbmethod lbm="hsfc" IMBALANCE_TOL="0.9"/>"#),
        "bad.xml:3:24: node 0 (\"sw\"): lbmethod parameter IMBALANCE_TOL=\"0.9\" is not a number >= 1"
    );
    // Unknown parameters are kept as warnings, with their place.
    let xml = r#"<machinemodel>
<node type="NETWORK" nodenum="0" name="sw" parent="-1"><lbmethod lbm="RCB" RCB_REUSE="1" FOO="2"/></node>
<node type="SINGLE_COMPUTING" nodenum="1" name="a" parent="0"/>
<node type="SINGLE_COMPUTING" nodenum="2" name="b" parent="0"/>
</machinemodel>"#;
    let m = Machine::parse_str(xml, "w.xml").unwrap();
    let plan = plan_of(&m);
    let w = plan.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[1].starts_with("w.xml:2:90: node 0 (\"sw\"): RCB parameter FOO ignored"),
        "{w:?}"
    );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let m = Machine::from_file(machines_dir().join("bullpen.xml")).unwrap();
    let plan = plan_of(&m);
    let mut parts = vec![0u32; 3];
    let e = Hier::default()
        .partition(
            &Serial,
            &plan,
            Points::new(&[0.0, 0.0, 1.0, f64::NAN, 0.5, 0.5], 2, None),
            &mut parts,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "point 1: coordinate 1 is NaN, not a finite number"
    );
    let e = Hier::default()
        .partition(
            &Serial,
            &plan,
            Points::new(&[0.0, 0.0, 1.0, 1.0, 0.5, 0.5], 2, Some(&[1.0, -1.0, 1.0])),
            &mut parts,
        )
        .unwrap_err();
    assert!(e.to_string().contains("weight of object 1 is -1"), "{e}");
    // HSFC levels need 2-D or 3-D points: the error names the level.
    let mut p1 = vec![0u32; 3];
    let e = Hier::default()
        .partition(
            &Serial,
            &plan,
            Points::new(&[0.0, 1.0, 2.0], 1, None),
            &mut p1,
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("node 0 (\"bullpen-switch\") (HSFC level): "),
        "{e}"
    );
    // A communicator of the wrong size.
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let mut p = vec![0u32; 1];
        Hier::default()
            .partition(&c, &plan, Points::new(&[0.5, 0.5], 2, None), &mut p)
            .unwrap_err()
            .to_string()
    })
    .unwrap();
    assert_eq!(
        out[0],
        "the communicator has 2 ranks but the machine has 24: run one process (or thread rank) per rank of the machine"
    );
}

#[test]
fn bad_data_on_one_rank_fails_every_rank() {
    let m = Machine::from_file(machines_dir().join("local-2core-hetero.xml")).unwrap();
    let plan = plan_of(&m);
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let mut x = vec![0.25; 8];
        if c.rank() == 1 {
            x[5] = f64::INFINITY;
        }
        let mut p = vec![0u32; 4];
        Hier::default()
            .partition(&c, &plan, Points::new(&x, 2, None), &mut p)
            .unwrap_err()
            .to_string()
    })
    .unwrap();
    assert_eq!(out[1], "point 2: coordinate 1 is inf, not a finite number");
    assert!(out[0].contains("the first being rank 1"), "{}", out[0]);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    /// Random trees with a random method per level: the promises hold, and the distributed
    /// run on 2-4 thread ranks... (on the tree's own rank count) equals the serial one.
    #[test]
    fn random_trees(seed in 0u64..1_000_000, n in 0usize..3000, dim in 2usize..=3) {
        let mut rng = Xoshiro256::new(seed);
        let methods = ["HSFC", "RCB", "RIB"];
        let mut xml = String::from("<machinemodel>\n");
        let top = methods[(rng.next_u64() % 3) as usize];
        xml += &format!("<node type=\"NETWORK\" nodenum=\"0\" name=\"top\" parent=\"-1\"><lbmethod lbm=\"{top}\" KEEP_CUTS=\"1\"/></node>\n");
        let routers = 1 + rng.next_u64() % 3;
        let mut num = 1;
        for r in 0..routers {
            let rm = methods[(rng.next_u64() % 3) as usize];
            let id = num;
            num += 1;
            xml += &format!("<node type=\"NETWORK\" nodenum=\"{id}\" name=\"r{r}\" parent=\"0\"><lbmethod lbm=\"{rm}\" KEEP_CUTS=\"1\"/></node>\n");
            for _ in 0..1 + rng.next_u64() % 3 {
                let mflops = 1 + rng.next_u64() % 9;
                let procs = 1 + rng.next_u64() % 3;
                if procs == 1 {
                    xml += &format!("<node type=\"SINGLE_COMPUTING\" nodenum=\"{num}\" name=\"c{num}\" parent=\"{id}\" mflops=\"{mflops}\"/>\n");
                } else {
                    let cm = methods[(rng.next_u64() % 3) as usize];
                    xml += &format!("<node type=\"MULTIPLE_COMPUTING\" nodenum=\"{num}\" name=\"c{num}\" parent=\"{id}\" numprocs=\"{procs}\" mflops=\"{mflops}\"><lbmethod lbm=\"{cm}\" KEEP_CUTS=\"1\"/></node>\n");
                }
                num += 1;
            }
        }
        xml += "</machinemodel>\n";
        let m = Machine::parse_str(&xml, "random.xml").unwrap();
        let plan = plan_of(&m);
        let (x, w) = points_with(&mut Xoshiro256::new(seed), n, dim, Distribution::Corner { rmin: 1e-4 }, WeightKind::Random);
        let (parts, r) = run_serial(&plan, &x, dim, w.as_deref(), Par::Seq);
        check_partition(&plan, &x, dim, w.as_deref(), &parts, &r);
        if plan.num_ranks() <= 12 {
            let b = spread(n, plan.num_ranks(), seed);
            let out = ThreadComm::run(plan.num_ranks(), &ThreadOptions::default(), |c| {
                let (lo, hi) = (b[c.rank()], b[c.rank() + 1]);
                let mut p = vec![u32::MAX; hi - lo];
                Hier::default()
                    .partition(&c, &plan, Points::new(&x[lo * dim..hi * dim], dim, w.as_ref().map(|w| &w[lo..hi])), &mut p)
                    .unwrap();
                p
            })
            .unwrap();
            let got: Vec<u32> = out.concat();
            prop_assert_eq!(got, parts);
        }
    }
}

/// `ThreadComm` with the calls of this rank counted.
struct Counted {
    inner: ThreadComm,
    calls: std::cell::Cell<usize>,
}

impl Counted {
    fn count<T>(&self, f: impl FnOnce(&ThreadComm) -> T) -> T {
        self.calls.set(self.calls.get() + 1);
        f(&self.inner)
    }
}

impl Comm for Counted {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn barrier(&self) -> Result<(), comm::CommError> {
        self.count(|c| c.barrier())
    }
    fn allreduce_f64(&self, op: comm::ReduceOp, buf: &mut [f64]) -> Result<(), comm::CommError> {
        self.count(|c| c.allreduce_f64(op, buf))
    }
    fn allreduce_u64(&self, op: comm::ReduceOp, buf: &mut [u64]) -> Result<(), comm::CommError> {
        self.count(|c| c.allreduce_u64(op, buf))
    }
    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), comm::CommError> {
        self.count(|c| c.allgather_bytes(send, recv))
    }
    fn allgatherv_bytes(&self, send: &[u8]) -> Result<comm::PerRank<u8>, comm::CommError> {
        self.count(|c| c.allgatherv_bytes(send))
    }
    fn gatherv_bytes(
        &self,
        root: usize,
        send: &[u8],
    ) -> Result<Option<comm::PerRank<u8>>, comm::CommError> {
        self.count(|c| c.gatherv_bytes(root, send))
    }
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> Result<(), comm::CommError> {
        self.count(|c| c.broadcast_bytes(root, buf))
    }
    fn alltoallv_bytes(
        &self,
        send: &[u8],
        counts: &[usize],
    ) -> Result<comm::PerRank<u8>, comm::CommError> {
        self.count(|c| c.alltoallv_bytes(send, counts))
    }
    fn split(&self, colour: u32, key: i32) -> Result<Self, comm::CommError> {
        let inner = self.count(|c| c.split(colour, key))?;
        Ok(Counted {
            inner,
            calls: std::cell::Cell::new(0),
        })
    }
    fn split_node(&self) -> Result<Self, comm::CommError> {
        let inner = self.count(|c| c.split_node())?;
        Ok(Counted {
            inner,
            calls: std::cell::Cell::new(0),
        })
    }
    fn processor_name(&self) -> String {
        self.inner.processor_name()
    }
    fn wtime(&self) -> f64 {
        self.inner.wtime()
    }
}

comm::impl_reduce!(Counted);

/// A one-level machine (the run's `local-2core-hetero.xml`, HSFC with KEEP_CUTS over two
/// ranks), unit weights, more points than the walk gathers: the fresh partition and a
/// repartition take the census, the HSFC's extent (its failure flag in the box's reduction),
/// level-0 histogram, refinement round(s) and part counts, and the figures with the level's
/// agreement in the same round.
#[test]
fn a_one_level_unit_repartition_takes_six_collectives() {
    let m = Machine::from_file(machines_dir().join("local-2core-hetero.xml")).unwrap();
    let plan = plan_of(&m);
    let (x, _) = points_with(
        &mut Xoshiro256::new(3),
        40_000,
        2,
        Distribution::Uniform,
        WeightKind::Unit,
    );
    let (serial, _) = run_serial(&plan, &x, 2, None, Par::Seq);
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let c = Counted {
            inner: c,
            calls: std::cell::Cell::new(0),
        };
        let me = c.rank();
        let idx: Vec<usize> = (0..x.len() / 2).filter(|i| i % 2 == me).collect();
        let xs: Vec<f64> = idx.iter().flat_map(|&i| [x[2 * i], x[2 * i + 1]]).collect();
        let mut parts = vec![0u32; idx.len()];
        let first = Hier::default()
            .partition(&c, &plan, Points::new(&xs, 2, None), &mut parts)
            .unwrap();
        let fresh = c.calls.replace(0);
        let mut again = parts.clone();
        Hier::default()
            .repartition(
                &mut Workspace::default(),
                &c,
                &plan,
                &first,
                Points::new(&xs, 2, None),
                &mut again,
            )
            .unwrap();
        (idx, parts, again, fresh, c.calls.get())
    })
    .unwrap();
    for (idx, parts, again, fresh, re) in out {
        for (k, &i) in idx.iter().enumerate() {
            assert_eq!(parts[k], serial[i], "point {i}");
        }
        assert_eq!(again, parts, "the same points again: nothing moves");
        assert_eq!(
            (fresh, re),
            (6, 6),
            "collectives of the partition and the repartition"
        );
    }
}
