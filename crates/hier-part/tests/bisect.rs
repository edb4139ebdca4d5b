//! Properties of RCB and RIB: every object exactly once, parts < k, zero-size parts empty,
//! balance within the stated bound, the geometry of each cut, point_assign, determinism for
//! every thread count, and a clear error for each kind of bad input.

#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]

use hier_part::{Bisection, Error, Method, Par, Plane, Rcb, Rib};
use hier_part::{Partitioner, Points, Serial};
use hsfc::generate::{Distribution, RandomSource, WeightKind, Xoshiro256, points_with};
use proptest::prelude::*;

mod common;

fn partition(
    method: Method,
    keep_ties: bool,
    par: Par,
    coords: &[f64],
    dim: usize,
    w: Option<&[f64]>,
    targets: &[f64],
    parts: &mut [u32],
) -> Result<Bisection, Error> {
    let points = Points::new(coords, dim, w);
    common::bisect(&Serial, (method, keep_ties, par), points, targets, parts)
}

/// Lexicographic `a ≤ b`.
fn lex_le(a: &[f64], b: &[f64]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    true
}

/// Checks everything a partition promises.
fn check(
    method: Method,
    keep_ties: bool,
    coords: &[f64],
    dim: usize,
    w: Option<&[f64]>,
    targets: &[f64],
) -> Result<(), TestCaseError> {
    let n = coords.len() / dim;
    let k = targets.len();
    let mut parts = vec![u32::MAX; n];
    let r = partition(
        method,
        keep_ties,
        Par::Seq,
        coords,
        dim,
        w,
        targets,
        &mut parts,
    )
    .unwrap();
    // Every object exactly once, in a part < k; counts and weights agree.
    let mut counts = vec![0usize; k];
    let mut weights = vec![0.0; k];
    for (i, &p) in parts.iter().enumerate() {
        prop_assert!((p as usize) < k, "object {i} in part {p}");
        counts[p as usize] += 1;
        weights[p as usize] += w.map_or(1.0, |w| w[i]);
    }
    prop_assert_eq!(&counts, &r.part_counts);
    for (a, b) in weights.iter().zip(&r.part_weights) {
        prop_assert!((a - b).abs() <= 1e-9 * (1.0 + a.abs()));
    }
    // Zero-size parts get nothing; balance within the bound.
    let w_max = w.map_or(1.0, |w| w.iter().fold(0.0f64, |a, &b| a.max(b)));
    let slack = n as f64 * w_max * 2f64.powi(-31) + 1e-9 * r.total_weight;
    for p in 0..k {
        if targets[p] == 0.0 {
            prop_assert_eq!(counts[p], 0, "zero-size part {} got objects", p);
        }
        if !keep_ties {
            let dev = (r.part_weights[p] - r.targets[p]).abs();
            prop_assert!(
                dev <= r.balance_bound() + slack,
                "part {p}: |W - T| = {dev} > bound {} (depth {}, w_max {})",
                r.balance_bound(),
                r.depth,
                r.max_object_weight
            );
        }
    }
    prop_assert!(r.depth as usize <= (k as f64).log2().ceil() as usize);
    // Geometry of every cut.
    let pt = |i: usize| &coords[i * dim..(i + 1) * dim];
    for c in &r.cuts {
        if keep_ties {
            prop_assert!(c.tie.is_none());
        }
        let (mut lows, mut highs) = (Vec::new(), Vec::new());
        for i in 0..n {
            if c.low.contains(&parts[i]) {
                lows.push(i);
            } else if c.high.contains(&parts[i]) {
                highs.push(i);
            }
        }
        prop_assert_eq!([lows.len(), highs.len()], c.side_counts);
        let all: Vec<usize> = lows.iter().chain(&highs).copied().collect();
        match c.plane {
            Plane::Axis(axis) => {
                prop_assert_eq!(method, Method::Rcb);
                // The axis is the longest side of the bounding box of the objects cut.
                let ext = |j: usize| {
                    let v = all.iter().map(|&i| pt(i)[j]);
                    v.clone().fold(f64::NEG_INFINITY, f64::max) - v.fold(f64::INFINITY, f64::min)
                };
                for j in 0..dim {
                    prop_assert!(ext(j) <= ext(axis), "axis {axis} is not the longest");
                    if j < axis {
                        prop_assert!(ext(j) < ext(axis));
                    }
                }
            }
            Plane::Inertial { direction, .. } => {
                prop_assert_eq!(method, Method::Rib);
                let norm: f64 = direction.iter().map(|x| x * x).sum();
                prop_assert!((norm - 1.0).abs() < 1e-12);
                prop_assert!(direction[dim..].iter().all(|&x| x == 0.0));
                check_inertial(&all, &pt, dim, w, &direction)?;
            }
        }
        for &i in &lows {
            let key = c.plane.key(pt(i));
            prop_assert!(
                key <= c.value,
                "low object {i}: key {key} > cut {}",
                c.value
            );
            if key == c.value
                && let Some(t) = c.tie
            {
                prop_assert!(lex_le(pt(i), &t[..dim]));
            }
        }
        for &i in &highs {
            let key = c.plane.key(pt(i));
            match c.tie {
                None => prop_assert!(
                    key > c.value,
                    "high object {i}: key {key} <= cut {}",
                    c.value
                ),
                Some(t) => {
                    prop_assert!(key >= c.value);
                    if key == c.value {
                        // Strictly after the tie point, or an exact duplicate of it.
                        prop_assert!(!lex_le(pt(i), &t[..dim]) || pt(i) == &t[..dim]);
                    }
                }
            }
        }
    }
    // point_assign agrees for every point that has no exact duplicate.
    let mut sorted: Vec<&[f64]> = (0..n).map(pt).collect();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    for i in 0..n {
        let dup = sorted
            .binary_search_by(|q| q.partial_cmp(&pt(i)).unwrap())
            .is_ok()
            && sorted.iter().filter(|q| **q == pt(i)).count() > 1;
        if !dup {
            prop_assert_eq!(r.point_assign(pt(i)), parts[i], "point {}", i);
        }
    }
    Ok(())
}

/// The direction maximises the weighted variance of the objects (to the precision of the
/// 20-bit integer moments).
fn check_inertial<'a>(
    set: &[usize],
    pt: &impl Fn(usize) -> &'a [f64],
    dim: usize,
    w: Option<&[f64]>,
    dir: &[f64; 3],
) -> Result<(), TestCaseError> {
    let wt = |i: usize| w.map_or(1.0, |w| w[i]);
    let sw: f64 = set.iter().map(|&i| wt(i)).sum();
    if sw == 0.0 || set.len() < 2 {
        return Ok(());
    }
    let mut mean = [0.0; 3];
    for &i in set {
        for j in 0..dim {
            mean[j] += wt(i) * pt(i)[j] / sw;
        }
    }
    let var = |u: &[f64]| {
        set.iter()
            .map(|&i| {
                let y: f64 = (0..dim).map(|j| (pt(i)[j] - mean[j]) * u[j]).sum();
                wt(i) * y * y
            })
            .sum::<f64>()
            / sw
    };
    let mine = var(dir);
    let mut trace = 0.0;
    for j in 0..dim {
        let mut e = [0.0; 3];
        e[j] = 1.0;
        trace += var(&e);
    }
    let big = set
        .iter()
        .flat_map(|&i| pt(i).iter())
        .fold(0.0f64, |a, x| a.max(x.abs()));
    let tol = 1e-4 * trace + 1e-20 * big * big;
    let mut rng = Xoshiro256::new(set.len() as u64);
    for _ in 0..64 {
        let mut u = [0.0; 3];
        for x in u.iter_mut().take(dim) {
            *x = rng.normal();
        }
        let norm = u.iter().map(|x| x * x).sum::<f64>().sqrt();
        u.iter_mut().for_each(|x| *x /= norm);
        prop_assert!(
            var(&u) <= mine + tol,
            "direction {dir:?} has variance {mine}, {u:?} has {}",
            var(&u)
        );
    }
    Ok(())
}

fn input() -> impl Strategy<Value = (usize, Vec<f64>, Option<Vec<f64>>, Vec<f64>)> {
    (1usize..=3, 0usize..300, any::<bool>(), 0u8..4, 1usize..12).prop_flat_map(
        |(dim, n, lattice, wkind, k)| {
            let coord = if lattice {
                (0i32..6).prop_map(|v| v as f64 * 0.5).boxed()
            } else {
                (-1e3f64..1e3).boxed()
            };
            let weight = match wkind {
                0 => Just(1.0).boxed(),
                1 => (0.0f64..10.0).boxed(),
                2 => prop_oneof![Just(0.0), 0.0f64..1.0, Just(50.0)].boxed(),
                _ => (0.0f64..1e6).boxed(),
            };
            (
                Just(dim),
                prop::collection::vec(coord, n * dim),
                if wkind == 0 {
                    Just(None).boxed()
                } else {
                    prop::collection::vec(weight, n).prop_map(Some).boxed()
                },
                prop::collection::vec(prop_oneof![1 => Just(0.0), 4 => 0.01f64..5.0], k)
                    .prop_filter("some positive target", |t| t.iter().any(|&x| x > 0.0)),
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn rcb_properties((dim, coords, w, targets) in input(), keep_ties: bool) {
        check(Method::Rcb, keep_ties, &coords, dim, w.as_deref(), &targets)?;
    }

    #[test]
    fn rib_properties((dim, coords, w, targets) in input(), keep_ties: bool) {
        check(Method::Rib, keep_ties, &coords, dim, w.as_deref(), &targets)?;
    }
}

#[test]
fn same_result_for_every_thread_count() {
    let cases = [
        (Distribution::Uniform, 2, WeightKind::Unit, 7),
        (
            Distribution::Corner { rmin: 1e-6 },
            2,
            WeightKind::Random,
            13,
        ),
        (Distribution::Uniform, 3, WeightKind::LogNormal, 64),
        (Distribution::Corner { rmin: 1e-6 }, 3, WeightKind::Unit, 5),
    ];
    for (c, &(dist, dim, wk, k)) in cases.iter().enumerate() {
        let (coords, w) = points_with(&mut Xoshiro256::new(c as u64), 70_000, dim, dist, wk);
        let targets: Vec<f64> = (0..k).map(|i| 1.0 + (i % 3) as f64).collect();
        for method in [Method::Rcb, Method::Rib] {
            let mut base = vec![0u32; 70_000];
            let r0 = partition(
                method,
                false,
                Par::Seq,
                &coords,
                dim,
                w.as_deref(),
                &targets,
                &mut base,
            )
            .unwrap();
            for threads in [1, 2, 4] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                for budget in [1, 2, 3, 8] {
                    let mut parts = vec![0u32; 70_000];
                    let r = pool
                        .install(|| {
                            partition(
                                method,
                                false,
                                Par::threads(budget),
                                &coords,
                                dim,
                                w.as_deref(),
                                &targets,
                                &mut parts,
                            )
                        })
                        .unwrap();
                    assert_eq!(
                        parts, base,
                        "case {c} {method} threads {threads} budget {budget}"
                    );
                    assert_eq!(r, r0, "case {c} {method} threads {threads} budget {budget}");
                }
            }
        }
    }
}

#[test]
fn input_order_does_not_change_the_parts_of_rcb_and_rib() {
    // Both methods depend only on the set of points: reversing the input reverses the parts.
    let (coords, w) = points_with(
        &mut Xoshiro256::new(3),
        30_000,
        2,
        Distribution::Corner { rmin: 1e-6 },
        WeightKind::Random,
    );
    let w = w.unwrap();
    let rev_coords: Vec<f64> = coords.chunks(2).rev().flatten().copied().collect();
    let rev_w: Vec<f64> = w.iter().rev().copied().collect();
    for method in [Method::Rcb, Method::Rib] {
        let (mut a, mut b) = (vec![0; 30_000], vec![0; 30_000]);
        let targets = [3.0, 1.0, 2.0, 5.0, 1.0];
        partition(
            method,
            false,
            Par::Seq,
            &coords,
            2,
            Some(&w),
            &targets,
            &mut a,
        )
        .unwrap();
        partition(
            method,
            false,
            Par::Seq,
            &rev_coords,
            2,
            Some(&rev_w),
            &targets,
            &mut b,
        )
        .unwrap();
        b.reverse();
        assert_eq!(a, b, "{method}");
    }
}

#[test]
fn balance_is_exact_for_unit_weights_and_divisible_targets() {
    let (coords, _) = points_with(
        &mut Xoshiro256::new(9),
        64_000,
        3,
        Distribution::Corner { rmin: 1e-6 },
        WeightKind::Unit,
    );
    for method in [Method::Rcb, Method::Rib] {
        let mut parts = vec![0; 64_000];
        let r = partition(
            method,
            false,
            Par::Seq,
            &coords,
            3,
            None,
            &[1.0; 64],
            &mut parts,
        )
        .unwrap();
        assert!(r.part_counts.iter().all(|&c| c == 1000), "{method}");
        assert_eq!(r.max_rel_dev, 0.0);
        // 1:2:…:5 of 15 000 objects.
        let mut parts = vec![0; 15_000];
        let t: Vec<f64> = (1..=5).map(f64::from).collect();
        let r = partition(
            method,
            false,
            Par::Seq,
            &coords[..45_000],
            3,
            None,
            &t,
            &mut parts,
        )
        .unwrap();
        assert_eq!(
            r.part_counts,
            vec![1000, 2000, 3000, 4000, 5000],
            "{method}"
        );
    }
}

#[test]
fn keep_ties_keeps_grid_columns_together() {
    // A 10×10 grid into 3 parts: without keep_ties RCB balances to one object by splitting a
    // column on the cut; with it, every cut runs between columns or rows.
    let coords: Vec<f64> = (0..100)
        .flat_map(|i| [(i % 10) as f64, (i / 10) as f64])
        .collect();
    let mut parts = vec![0; 100];
    let loose = Rcb::default()
        .partition(
            &Serial,
            Points::new(&coords, 2, None),
            &[1.0; 3],
            &mut parts,
        )
        .unwrap();
    assert_eq!(loose.part_counts, vec![33, 34, 33]);
    assert!(loose.cuts.iter().any(|c| c.tie.is_some()));
    let strict = Rcb {
        keep_ties: true,
        ..Default::default()
    }
    .partition(
        &Serial,
        Points::new(&coords, 2, None),
        &[1.0; 3],
        &mut parts,
    )
    .unwrap();
    assert!(strict.cuts.iter().all(|c| c.tie.is_none()));
    // Three columns (30 objects), then the remaining 7×10 block is cut between rows (35).
    assert_eq!(strict.part_counts, vec![30, 35, 35]);
    assert_eq!(strict.cuts[0].plane, Plane::Axis(0));
    assert_eq!(strict.cuts[0].value, 2.5);
    assert_eq!(strict.cuts[1].plane, Plane::Axis(1));
}

#[test]
fn degenerate_sets() {
    // All points identical; one part; no points; all weights zero.
    let same = vec![0.5; 2 * 50];
    let mut parts = vec![0; 50];
    for method in [Method::Rcb, Method::Rib] {
        let r = partition(
            method,
            false,
            Par::Seq,
            &same,
            2,
            None,
            &[1.0; 4],
            &mut parts,
        )
        .unwrap();
        assert_eq!(r.part_counts, vec![13, 12, 13, 12], "{method}");
        let r = partition(method, false, Par::Seq, &same, 2, None, &[2.0], &mut parts).unwrap();
        assert!(r.cuts.is_empty() && parts.iter().all(|&p| p == 0));
        assert_eq!(r.point_assign(&[9.0, 9.0]), 0);
        let r = partition(method, false, Par::Seq, &[], 3, None, &[1.0; 3], &mut []).unwrap();
        assert_eq!(r.part_counts, vec![0; 3]);
        assert_eq!((r.max_ratio, r.max_rel_dev), (1.0, 0.0));
        let zeros = vec![0.0; 50];
        let r = partition(
            method,
            false,
            Par::Seq,
            &same,
            2,
            Some(&zeros),
            &[1.0; 5],
            &mut parts,
        )
        .unwrap();
        assert_eq!(
            r.part_counts,
            vec![10; 5],
            "{method}: zero weights split by count"
        );
        assert_eq!(r.total_weight, 0.0);
    }
}

#[test]
fn extreme_coordinates_and_weights() {
    let mut rng = Xoshiro256::new(5);
    let coords: Vec<f64> = (0..2000)
        .map(|i| match i % 4 {
            0 => 1e300 * (rng.uniform() - 0.5),
            1 => 1e-300 * rng.uniform(),
            _ => rng.uniform(),
        })
        .collect();
    let w: Vec<f64> = (0..1000)
        .map(|i| if i % 7 == 0 { 1e200 } else { 1e-200 })
        .collect();
    for method in [Method::Rcb, Method::Rib] {
        let mut parts = vec![0; 1000];
        let r = partition(
            method,
            false,
            Par::Seq,
            &coords,
            2,
            Some(&w),
            &[1.0; 6],
            &mut parts,
        )
        .unwrap();
        assert!(
            r.max_abs_dev <= r.balance_bound() * (1.0 + 1e-9),
            "{method}: {r:?}"
        );
        assert!(r.cuts.iter().all(|c| !c.value.is_nan()));
    }
}

#[test]
fn errors_name_the_place() {
    let mut parts = vec![0u32; 3];
    let c = [0.0, 0.0, 1.0, 1.0, 2.0, 2.0];
    let err = |coords: &[f64], dim, w: Option<&[f64]>, t: &[f64], parts: &mut [u32]| {
        let a = Rcb::default()
            .partition(&Serial, Points::new(coords, dim, w), t, parts)
            .unwrap_err();
        let b = Rib::default()
            .partition(&Serial, Points::new(coords, dim, w), t, parts)
            .unwrap_err();
        assert_eq!(a.to_string(), b.to_string());
        a.to_string()
    };
    assert_eq!(
        err(&c, 4, None, &[1.0], &mut parts),
        "dim = 4 is not supported: points must have 1, 2 or 3 coordinates"
    );
    assert_eq!(
        err(&c, 0, None, &[1.0], &mut parts),
        "dim = 0 is not supported: points must have 1, 2 or 3 coordinates"
    );
    assert_eq!(
        err(&c[..5], 2, None, &[1.0], &mut parts),
        "coords has 5 values, which is not a multiple of dim = 2"
    );
    let mut bad = c;
    bad[3] = f64::NAN;
    assert_eq!(
        err(&bad, 2, None, &[1.0], &mut parts),
        "point 1: coordinate 1 is NaN, not a finite number"
    );
    bad[3] = f64::NEG_INFINITY;
    assert_eq!(
        err(&bad, 2, None, &[1.0], &mut parts),
        "point 1: coordinate 1 is -inf, not a finite number"
    );
    assert_eq!(
        err(&c, 2, Some(&[1.0, 2.0]), &[1.0], &mut parts),
        "weights has 2 entries, expected 3 (one per point)"
    );
    assert_eq!(
        err(&c, 2, Some(&[1.0, -2.0, 1.0]), &[1.0], &mut parts),
        "weight of object 1 is -2; weights must be finite and non-negative"
    );
    assert_eq!(
        err(&c, 2, Some(&[1.0, 2.0, f64::NAN]), &[1.0], &mut parts),
        "weight of object 2 is NaN; weights must be finite and non-negative"
    );
    assert_eq!(
        err(&c, 2, None, &[], &mut parts),
        "targets is empty: at least one part (k >= 1) is needed"
    );
    assert_eq!(
        err(&c, 2, None, &[1.0, -1.0], &mut parts),
        "targets[1] is -1; part sizes must be finite and non-negative"
    );
    assert_eq!(
        err(&c, 2, None, &[f64::INFINITY], &mut parts),
        "targets[0] is inf; part sizes must be finite and non-negative"
    );
    assert_eq!(
        err(&c, 2, None, &[0.0, 0.0], &mut parts),
        "the 2 target part sizes are all zero: at least one part must have a positive size"
    );
    assert_eq!(
        err(&c, 2, None, &[1.0], &mut parts[..2]),
        "parts has 2 entries, expected 3 (one per point)"
    );
}

#[test]
fn point_assign_beyond_the_data() {
    // Points outside the partitioned set go to the side their keys put them on.
    let (coords, _) = points_with(
        &mut Xoshiro256::new(1),
        4000,
        2,
        Distribution::Uniform,
        WeightKind::Unit,
    );
    let mut parts = vec![0; 4000];
    let r = Rcb::default()
        .partition(
            &Serial,
            Points::new(&coords, 2, None),
            &[1.0; 4],
            &mut parts,
        )
        .unwrap();
    let corners = [[-5.0, -5.0], [5.0, -5.0], [-5.0, 5.0], [5.0, 5.0]];
    let mut seen: Vec<u32> = corners.iter().map(|x| r.point_assign(x)).collect();
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2, 3]);
}

#[test]
fn box_assign_lists_the_part_of_every_point_in_the_box() {
    // Against the brute force: every point inside a box has its part in the list, for RCB
    // and RIB in 2-D and 3-D; a small box far inside one part gets that part alone.
    let mut rng = Xoshiro256::new(7);
    for (method, dim) in [
        (Method::Rcb, 2),
        (Method::Rib, 2),
        (Method::Rcb, 3),
        (Method::Rib, 3),
    ] {
        let n = 3000;
        let (coords, _) = points_with(&mut rng, n, dim, Distribution::Uniform, WeightKind::Unit);
        let mut parts = vec![0; n];
        let targets = [1.0, 2.0, 0.0, 3.0, 1.0, 1.0, 2.0];
        let r = partition(
            method,
            false,
            Par::Seq,
            &coords,
            dim,
            None,
            &targets,
            &mut parts,
        )
        .unwrap();
        let mut found = Vec::new();
        let mut boxes = 0;
        for b in 0..200 {
            let lo: Vec<f64> = (0..dim).map(|_| rng.uniform() * 0.9).collect();
            let side = if b % 2 == 0 { 0.3 } else { 0.02 };
            let hi: Vec<f64> = lo.iter().map(|x| x + side * rng.uniform()).collect();
            r.box_assign(&lo, &hi, &mut found);
            assert!(found.windows(2).all(|w| w[0] < w[1]), "{found:?}");
            assert!(!found.contains(&2), "a part of size 0 has no region");
            for (i, x) in coords.chunks_exact(dim).enumerate() {
                if (0..dim).all(|j| lo[j] <= x[j] && x[j] <= hi[j]) {
                    assert!(found.contains(&parts[i]), "{method} point {i} in the box");
                    boxes += 1;
                }
            }
        }
        assert!(boxes > 500, "the boxes held points");
        // A point box: its own part only.
        let x = &coords[..dim];
        r.box_assign(x, x, &mut found);
        assert!(found.contains(&parts[0]) && found.len() <= 2, "{found:?}");
    }
}

/// Coordinates whose span overflows f64 (hi − lo is infinite): RIB's integer moments saw
/// saturated coordinates and overflowed their sums (a panic in a debug build, wrapped sums in
/// a release one). Now every coordinate is clamped to the moments' range first: the axis comes
/// from the clamped coordinates, and the cut is exact and balanced.
#[test]
fn rib_on_a_span_beyond_f64_max() {
    let mut rng = Xoshiro256::new(5);
    let coords: Vec<f64> = (0..2000)
        .map(|i| match i % 4 {
            0 => 1.7e308 * (rng.uniform() - 0.5) * 2.0,
            _ => rng.uniform(),
        })
        .collect();
    for w in [None, Some(vec![1.5; 1000])] {
        let mut parts = vec![0; 1000];
        let r = partition(
            Method::Rib,
            false,
            Par::Seq,
            &coords,
            2,
            w.as_deref(),
            &[1.0; 6],
            &mut parts,
        )
        .unwrap();
        assert!(
            r.max_abs_dev <= r.balance_bound() * (1.0 + 1e-9),
            "weights {}: {r:?}",
            w.is_some()
        );
        assert!(r.cuts.iter().all(|c| !c.value.is_nan()));
    }
}
