//! Distributed RCB and RIB equal the serial bisection of the union, cut for cut and object for
//! object, for 1 to 4 thread ranks and uneven spreads of the objects (a rank may hold none).

#![allow(clippy::too_many_arguments)]

use comm::{Comm, ThreadComm, ThreadOptions};
use hier_part::{Bisection, Error, Method, Par, Rcb, Rib};
use hier_part::{Partitioner, Points, Serial};
use hsfc::generate::{Distribution, RandomSource, WeightKind, Xoshiro256, points_with};

mod common;
use common::bisect;

fn serial(
    method: Method,
    keep_ties: bool,
    coords: &[f64],
    dim: usize,
    w: Option<&[f64]>,
    targets: &[f64],
    parts: &mut [u32],
) -> Result<Bisection, Error> {
    let points = Points::new(coords, dim, w);
    bisect(
        &Serial,
        (method, keep_ties, Par::Seq),
        points,
        targets,
        parts,
    )
}

/// Slice boundaries of `n` objects over `ranks` ranks, uneven (seeded), some possibly empty.
fn spread(n: usize, ranks: usize, seed: u64) -> Vec<usize> {
    let mut rng = Xoshiro256::new(seed);
    let mut cuts: Vec<usize> = (0..ranks - 1)
        .map(|_| (rng.next_u64() % (n as u64 + 1)) as usize)
        .collect();
    cuts.sort_unstable();
    let mut b = vec![0];
    b.extend(cuts);
    b.push(n);
    b
}

/// Runs the distributed bisection on `ranks` thread ranks and checks it against serial.
fn check(
    method: Method,
    keep_ties: bool,
    coords: &[f64],
    dim: usize,
    w: Option<&[f64]>,
    targets: &[f64],
    ranks: usize,
    seed: u64,
    what: &str,
) {
    let n = coords.len() / dim;
    let mut want = vec![0u32; n];
    let s = serial(method, keep_ties, coords, dim, w, targets, &mut want).unwrap();
    let b = spread(n, ranks, seed);
    let out = ThreadComm::run(ranks, &ThreadOptions::default(), |c| {
        let (lo, hi) = (b[c.rank()], b[c.rank() + 1]);
        let mut parts = vec![u32::MAX; hi - lo];
        let lw = w.map(|w| &w[lo..hi]);
        let points = Points::new(&coords[lo * dim..hi * dim], dim, lw);
        let bis = bisect(
            &c,
            (method, keep_ties, Par::Seq),
            points,
            targets,
            &mut parts,
        )
        .unwrap();
        (parts, bis)
    })
    .unwrap();
    let got: Vec<u32> = out.iter().flat_map(|(p, _)| p.iter().copied()).collect();
    assert_eq!(got, want, "{what}: parts differ on {ranks} ranks");
    for (r, (_, bis)) in out.iter().enumerate() {
        assert_eq!(
            bis.cuts, s.cuts,
            "{what}: cuts differ on rank {r} of {ranks}"
        );
        // To the bit (`-0.0 == 0.0` as numbers, not as cut values or tie points).
        assert_eq!(
            format!("{:?}", bis.cuts),
            format!("{:?}", s.cuts),
            "{what}: cuts differ in their bits on rank {r} of {ranks}"
        );
        assert_eq!(bis.part_counts, s.part_counts, "{what}: counts");
        for (a, b) in bis.part_weights.iter().zip(&s.part_weights) {
            assert!(
                (a - b).abs() <= 1e-9 * s.total_weight.max(1.0),
                "{what}: weights {a} vs {b}"
            );
        }
    }
}

#[test]
fn random_and_graded_sets_match_serial() {
    let mut case = 0u64;
    for dim in 1..=3 {
        for dist in [Distribution::Uniform, Distribution::Corner { rmin: 1e-6 }] {
            for wk in [WeightKind::Unit, WeightKind::Random, WeightKind::LogNormal] {
                case += 1;
                let (x, w) = points_with(&mut Xoshiro256::new(case), 3000, dim, dist, wk);
                for (targets, method) in [
                    (vec![1.0; 7], Method::Rcb),
                    (vec![16.0, 19.0, 31.0, 34.0], Method::Rib),
                    (vec![1.5, 1.0, 0.0, 1.5, 1.0], Method::Rcb),
                    (vec![3.0, 0.0, 0.0, 2.0, 1.0, 1.0], Method::Rib),
                ] {
                    for ranks in 1..=4 {
                        check(
                            method,
                            false,
                            &x,
                            dim,
                            w.as_deref(),
                            &targets,
                            ranks,
                            case * 10 + ranks as u64,
                            &format!("{method} dim {dim} {dist:?} {wk:?} {targets:?}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn ties_duplicates_and_zero_weights_match_serial() {
    // A coarse grid with duplicates: many objects share keys and coordinates.
    let mut rng = Xoshiro256::new(99);
    for dim in 1..=3 {
        let n = 2000;
        let x: Vec<f64> = (0..n * dim)
            .map(|_| (rng.next_u64() % 5) as f64 * 0.25 - 0.5)
            .collect();
        let w: Vec<f64> = (0..n)
            .map(|i| if i % 3 == 0 { 0.0 } else { (i % 7) as f64 })
            .collect();
        let zero = vec![0.0; n];
        for method in [Method::Rcb, Method::Rib] {
            for keep_ties in [false, true] {
                for (wname, ww) in [
                    ("unit", None),
                    ("mixed", Some(&w[..])),
                    ("zero", Some(&zero[..])),
                ] {
                    for ranks in [1, 2, 3, 4] {
                        check(
                            method,
                            keep_ties,
                            &x,
                            dim,
                            ww,
                            &[1.0, 2.0, 1.0, 0.5, 3.0],
                            ranks,
                            ranks as u64 + 17,
                            &format!("grid {method} dim {dim} ties {keep_ties} {wname}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn tiny_and_empty_sets_match_serial() {
    for n in [0usize, 1, 2, 3, 9] {
        let x: Vec<f64> = (0..2 * n).map(|i| (i * 7 % 5) as f64).collect();
        for method in [Method::Rcb, Method::Rib] {
            for ranks in 1..=4 {
                check(
                    method,
                    false,
                    &x,
                    2,
                    None,
                    &[1.0, 1.0, 1.0, 1.0],
                    ranks,
                    n as u64,
                    &format!("n = {n}"),
                );
            }
        }
    }
}

#[test]
fn bad_data_on_one_rank_is_an_error_on_every_rank() {
    let out = ThreadComm::run(3, &ThreadOptions::default(), |c| {
        let mut x = vec![0.5; 20];
        if c.rank() == 1 {
            x[7] = f64::NAN;
        }
        let mut parts = vec![0u32; 10];
        Rcb::default()
            .partition(&c, Points::new(&x, 2, None), &[1.0, 1.0], &mut parts)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .unwrap();
    assert_eq!(
        out[1].as_ref().unwrap_err(),
        "point 3: coordinate 1 is NaN, not a finite number"
    );
    for r in [0, 2] {
        let e = out[r].as_ref().unwrap_err();
        assert!(e.contains("the first being rank 1"), "{e}");
    }
    // Ranks that disagree on the targets.
    let out = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        let x = vec![0.5; 20];
        let mut parts = vec![0u32; 10];
        let t = if c.rank() == 0 {
            vec![1.0, 1.0]
        } else {
            vec![1.0, 2.0]
        };
        Rib::default()
            .partition(&c, Points::new(&x, 2, None), &t, &mut parts)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .unwrap();
    for o in out {
        assert_eq!(
            o.unwrap_err(),
            "ranks disagree: the target part sizes",
            "every rank sees it"
        );
    }
}

#[test]
fn signed_zeros_give_the_same_cuts_serial_and_distributed() {
    // A lattice on {-0.0, 0.0, 1.0, 2.0}² with both zeros, so cuts and ties land on zero.
    let vals = [-0.0, 0.0, 1.0, 2.0, 0.0, -0.0];
    let coords: Vec<f64> = (0..36)
        .flat_map(|i| [vals[i % 6], vals[(i / 6) % 6]])
        .collect();
    for method in [Method::Rcb, Method::Rib] {
        for keep_ties in [false, true] {
            for ranks in [2, 3] {
                let what = format!("signed zeros {method} keep_ties={keep_ties}");
                check(
                    method,
                    keep_ties,
                    &coords,
                    2,
                    None,
                    &[1.0, 2.0, 1.0],
                    ranks,
                    5,
                    &what,
                );
            }
        }
    }
}
