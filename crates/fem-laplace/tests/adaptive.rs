//! End-to-end checks of the adaptive loop on shortened runs.

use fem_laplace::{
    AdaptConfig, Adaptive, CgConfig, CornerSingularity, ExactSolution, FnSolution, Marking,
    SmoothHarmonic, StepReport, System,
};

fn run(exact: &dyn ExactSolution, cfg: AdaptConfig) -> Vec<StepReport> {
    let mut a = Adaptive::new(exact, cfg).unwrap();
    let mut out = Vec::new();
    while let Some(r) = a.step().unwrap() {
        // Conformity and counts from scratch, every step.
        let s = a
            .mesh()
            .check()
            .unwrap_or_else(|e| panic!("step {}: {e}", r.step));
        assert_eq!(
            (s.vertices, s.elements),
            (r.vertices, r.elements),
            "step {}",
            r.step
        );
        if r.step > 0 && matches!(cfg.marking, Marking::Double) {
            assert!(
                r.vertices >= a.step_target(r.step),
                "step {} below its target",
                r.step
            );
        }
        out.push(r);
    }
    out
}

/// Least-squares slope of log(error) against log(N) over the given reports.
fn slope(rs: &[StepReport]) -> f64 {
    let pts: Vec<(f64, f64)> = rs
        .iter()
        .map(|r| ((r.vertices as f64).ln(), r.error_energy.unwrap().ln()))
        .collect();
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

#[test]
fn corner_problem_converges_like_n_to_minus_half_with_flat_iterations() {
    let cfg = AdaptConfig {
        target_vertices: 40_000,
        ..AdaptConfig::default()
    };
    let rs = run(&CornerSingularity, cfg);
    // 5 · 2^13 = 40960 ≥ 40000: 13 refinement steps, the last one capped at the target.
    assert_eq!(rs.len(), 14);
    assert!(rs.last().unwrap().vertices >= 40_000 && rs.last().unwrap().vertices < 40_100);
    let s = slope(&rs[6..]);
    assert!(
        (-0.58..=-0.44).contains(&s),
        "energy error ~ N^{s}, expected N^-0.5"
    );
    // Uniform refinement would give N^{-1/3}: the mesh really is graded (deep corner levels).
    assert!(rs.last().unwrap().max_level >= 20);
    // Multigrid-like solver: iteration counts flat as N grows 100-fold.
    let early = rs[4..8].iter().map(|r| r.cg_iterations).max().unwrap();
    let late = rs[8..].iter().map(|r| r.cg_iterations).max().unwrap();
    assert!(
        late <= early + 1 && late <= 7,
        "iterations grow: {:?}",
        rs.iter().map(|r| r.cg_iterations).collect::<Vec<_>>()
    );
    for r in &rs[3..] {
        assert!(
            r.condition_estimate < 25.0,
            "step {}: κ ≈ {}",
            r.step,
            r.condition_estimate
        );
        // The estimator is reliable and efficient here: η / error stays within [1, 5].
        let eff = r.estimate / r.error_energy.unwrap();
        assert!((1.0..5.0).contains(&eff), "step {}: η/err = {eff}", r.step);
    }
}

/// Stopping CG against the estimate costs (almost) nothing in accuracy: the error of the
/// iterate is within 1% of the error of the exact discrete solution on the same mesh.
#[test]
fn early_stopping_keeps_the_discretisation_error() {
    let exact = CornerSingularity;
    let cfg = AdaptConfig {
        target_vertices: 20_000,
        ..AdaptConfig::default()
    };
    let mut a = Adaptive::new(&exact, cfg).unwrap();
    let mut last = None;
    while let Some(r) = a.step().unwrap() {
        last = Some(r);
    }
    let r = last.unwrap();
    let mesh = a.mesh().clone();
    let mut u = a.solution().to_vec();
    let sys = System::assemble(&mesh, &u);
    let mut pre = fem_laplace::Multilevel::new(&mesh, &sys);
    let tight = CgConfig {
        tol_factor: 0.0,
        rel_residual: 1e-12,
        max_iter: 1000,
    };
    fem_laplace::solver::pcg(
        &mesh,
        &sys,
        &mut pre,
        &mut u,
        0.0,
        &tight,
        &mut Default::default(),
    );
    let mut g = Vec::new();
    fem_laplace::estimate::gradients_into(&mesh, &u, &mut g);
    let exact_discrete = fem_laplace::estimate::errors(&mesh, &u, &g, &exact, None)
        .unwrap()
        .energy
        .unwrap();
    let iterate = r.error_energy.unwrap();
    assert!(iterate >= exact_discrete * (1.0 - 1e-9));
    assert!(
        iterate <= 1.01 * exact_discrete,
        "{iterate} vs {exact_discrete}"
    );
}

#[test]
fn smooth_problem_and_doerfler_marking() {
    let cfg = AdaptConfig {
        target_vertices: 8_000,
        marking: Marking::Doerfler(0.5),
        ..AdaptConfig::default()
    };
    let rs = run(&SmoothHarmonic, cfg);
    let n = rs.len();
    let s = slope(&rs[n / 2..]);
    assert!((-0.6..=-0.42).contains(&s), "smooth/Dörfler: N^{s}");
    assert!(rs.iter().all(|r| r.cg_iterations <= 8));
}

#[test]
fn user_supplied_solution() {
    // u = Re z³ = x³ − 3xy², harmonic.
    let u = FnSolution::new("x^3-3xy^2", |x: f64, y: f64| x * x * x - 3.0 * x * y * y)
        .with_gradient(|x: f64, y: f64| [3.0 * x * x - 3.0 * y * y, -6.0 * x * y]);
    let rs = run(
        &u,
        AdaptConfig {
            target_vertices: 5_000,
            ..AdaptConfig::default()
        },
    );
    let (first, last) = (
        rs[3].error_energy.unwrap(),
        rs.last().unwrap().error_energy.unwrap(),
    );
    assert!(last < first / 5.0, "{first} → {last}");
    // Without a gradient only the max error is reported.
    let v = FnSolution::new("x+y", |x: f64, y: f64| x + y);
    let rs = run(
        &v,
        AdaptConfig {
            target_vertices: 50,
            ..AdaptConfig::default()
        },
    );
    assert!(
        rs.iter()
            .all(|r| r.error_energy.is_none() && r.error_max.unwrap() < 1e-12)
    );
}

#[test]
fn same_input_same_output() {
    let cfg = AdaptConfig {
        target_vertices: 10_000,
        ..AdaptConfig::default()
    };
    let strip = |rs: Vec<StepReport>| -> Vec<String> {
        rs.into_iter()
            .map(|r| {
                format!(
                    "{} {} {} {:?} {:e} {}",
                    r.step, r.vertices, r.elements, r.error_energy, r.estimate, r.cg_iterations
                )
            })
            .collect()
    };
    assert_eq!(
        strip(run(&CornerSingularity, cfg)),
        strip(run(&CornerSingularity, cfg))
    );
}

#[test]
fn bad_configuration_and_bad_data_are_reported() {
    let e = Adaptive::new(
        &CornerSingularity,
        AdaptConfig {
            target_vertices: 3,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("target_vertices = 3"), "{e}");
    let cg = CgConfig {
        tol_factor: f64::NAN,
        ..CgConfig::default()
    };
    let e = Adaptive::new(
        &CornerSingularity,
        AdaptConfig {
            cg,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cg.tol_factor = NaN"), "{e}");
    let e = Adaptive::new(
        &CornerSingularity,
        AdaptConfig {
            marking: Marking::Doerfler(2.0),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("θ"), "{e}");
    // Dirichlet data that blow up on the boundary, found when refinement reaches x = 0.5.
    let bad = FnSolution::new(
        "pole",
        |x: f64, y: f64| if y == 0.0 { 1.0 / (x - 0.5) } else { 0.0 },
    );
    let mut a = Adaptive::new(
        &bad,
        AdaptConfig {
            target_vertices: 100,
            ..Default::default()
        },
    )
    .unwrap();
    let err = loop {
        match a.step() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the pole was never reached"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(err.contains("`pole`") && err.contains("(0.5, 0)"), "{err}");
    // A reference solution that is not finite inside the square (only the errors read it).
    let hole = FnSolution::new("hole", |x: f64, y: f64| {
        if x > 0.0 && x < 1.0 && y > 0.0 && y < 1.0 {
            f64::NAN
        } else {
            0.0
        }
    });
    let mut a = Adaptive::new(
        &hole,
        AdaptConfig {
            target_vertices: 100,
            ..Default::default()
        },
    )
    .unwrap();
    let err = a.step().unwrap_err().to_string();
    assert!(
        err.contains("`hole`") && err.contains("(0.5, 0.5)") && err.contains("NaN"),
        "{err}"
    );
}

/// What a partitioner gets before a refinement: centroids in curve order, and predicted
/// weights that add up to the element count the refinement will produce.
#[test]
fn partitioner_inputs_predict_the_next_mesh() {
    let exact = CornerSingularity;
    let cfg = AdaptConfig {
        target_vertices: 6_000,
        ..AdaptConfig::default()
    };
    let mut a = Adaptive::new(&exact, cfg).unwrap();
    a.step().unwrap();
    loop {
        let mesh = a.mesh();
        let ne = mesh.num_elements();
        let marks = a.next_marks();
        let mut w = vec![0.0; ne];
        mesh.element_weights_into(
            fem_laplace::WeightKind::PredictedElements,
            Some(&marks),
            &mut w,
        );
        let predicted = w.iter().sum::<f64>() as usize;
        mesh.element_weights_into(fem_laplace::WeightKind::Vertices, None, &mut w);
        assert_eq!(w.iter().sum::<f64>() as usize, mesh.num_vertices());
        let mut xy = vec![0.0; 2 * ne];
        mesh.centroids_into(&mut xy);
        assert!(xy.iter().all(|c| (0.0..=1.0).contains(c)));
        match a.step().unwrap() {
            Some(r) => assert_eq!(r.elements, predicted, "step {}", r.step),
            None => break,
        }
    }
}
