//! The run over ranks equals the serial run to the bit: per step the mesh hash, the error,
//! the estimate and the CG iterations, for several rank counts and both markings.

use comm::{ThreadComm, ThreadOptions};
use fem_laplace::dist::{Balancer, DistConfig, DistStepReport, RankRun, mesh_hash};
use fem_laplace::{
    AdaptConfig, Adaptive, CornerSingularity, ExactSolution, Marking, SmoothHarmonic,
};

/// (mesh hash, error bits, estimate bits, CG iterations) per step.
type Trace = Vec<(String, u64, u64, usize)>;

fn serial(exact: &dyn ExactSolution, cfg: AdaptConfig) -> Trace {
    let mut a = Adaptive::new(exact, cfg).unwrap();
    let mut out = Vec::new();
    while let Some(r) = a.step().unwrap() {
        out.push((
            format!("{:016x}", mesh_hash(a.mesh())),
            r.error_energy.unwrap().to_bits(),
            r.estimate.to_bits(),
            r.cg_iterations,
        ));
    }
    out
}

fn dist(
    exact: &(dyn ExactSolution + Sync),
    cfg: &DistConfig,
    ranks: usize,
) -> (Trace, Vec<DistStepReport>) {
    let results = ThreadComm::run(ranks, &ThreadOptions::default(), |comm| {
        let mut run = RankRun::new(comm, exact, cfg.clone(), Balancer::flat())?;
        let mut reports = Vec::new();
        while let Some(r) = run.step()? {
            reports.push(r);
        }
        Ok::<_, fem_laplace::FemError>(reports)
    })
    .unwrap();
    let reports = results.into_iter().next().unwrap().unwrap();
    let trace = reports
        .iter()
        .map(|r| {
            (
                r.mesh_hash.clone().unwrap(),
                r.base.error_energy.unwrap().to_bits(),
                r.base.estimate.to_bits(),
                r.base.cg_iterations,
            )
        })
        .collect();
    (trace, reports)
}

fn check(exact: &(dyn ExactSolution + Sync), cfg: AdaptConfig, ranks: &[usize]) {
    let want = serial(exact, cfg);
    for &r in ranks {
        same_as_serial(&want, exact, &DistConfig::new(cfg), r);
    }
}

/// Runs over `r` ranks and checks every step against the serial trace `want`, and the
/// migration and counts of every step; returns the reports.
fn same_as_serial(
    want: &Trace,
    exact: &(dyn ExactSolution + Sync),
    cfg: &DistConfig,
    r: usize,
) -> Vec<DistStepReport> {
    let (got, reports) = dist(exact, cfg, r);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g, w,
            "{} ranks, step {k}: (hash, error, estimate, cg) differ",
            r
        );
    }
    assert_eq!(got.len(), want.len(), "{r} ranks: number of steps");
    for rep in &reports {
        assert!(rep.migration.count_ok && rep.migration.checksum_ok);
        assert_eq!(rep.ranks.len(), r);
        let owned: usize = rep.ranks.iter().map(|x| x.owned).sum();
        assert_eq!(owned, rep.base.elements);
        let verts: usize = rep.ranks.iter().map(|x| x.owned_vertices).sum();
        assert_eq!(verts, rep.base.vertices);
        rounds_within_bounds(rep);
    }
    reports
}

/// Every rank's calls into the communicator stay within the rounds the algorithms need,
/// whatever the mesh size: marking 3, CG one preconditioner, one product and one reduction per
/// iteration plus one product at the start (and one more round of the three when the
/// residual test, not the tolerance, ends the solve), the set-up 2, and at most 30 in a step after the
/// first (the mesh hash, asked for by these tests, adds one gather).
fn rounds_within_bounds(rep: &DistStepReport) {
    use fem_laplace::dist::Phase;
    if rep.nranks == 1 {
        return;
    }
    let cg = rep.base.cg_iterations as u64;
    let cg_calls = 3 * cg + 4;
    for r in &rep.ranks {
        let calls = |p: Phase| r.phases.get(p).collectives;
        let step = rep.base.step;
        assert!(
            calls(Phase::Mark) <= 3,
            "step {step} rank {}: marking took {} calls",
            r.rank,
            calls(Phase::Mark)
        );
        assert!(
            calls(Phase::Solve) <= cg_calls,
            "step {step} rank {}: CG took {} calls for {cg} iterations",
            r.rank,
            calls(Phase::Solve)
        );
        assert!(
            calls(Phase::Setup) <= 2,
            "step {step} rank {}: set-up took {} calls",
            r.rank,
            calls(Phase::Setup)
        );
        // A step whose partition was kept (no partitioner call): no migration round, no
        // coordinator round (the interface carries over), only the ghost exchange; the census
        // after it rides on the set-up's gather.
        let rebuild = calls(Phase::Partition) + calls(Phase::Migrate) + calls(Phase::Setup);
        assert!(
            step == 0 || calls(Phase::Partition) > 0 || rebuild <= 3,
            "step {step} rank {}: a kept partition took {rebuild} calls to rebuild",
            r.rank
        );
        if step > 0 {
            assert!(
                r.collectives <= 30,
                "step {step} rank {}: {} calls",
                r.rank,
                r.collectives
            );
        }
    }
}

#[test]
fn corner_double_is_bit_identical_for_1_to_4_and_8_ranks() {
    let cfg = AdaptConfig {
        target_vertices: 6_000,
        ..AdaptConfig::default()
    };
    check(&CornerSingularity, cfg, &[1, 2, 3, 4, 8]);
}

#[test]
fn a_large_forced_move_and_its_return_keep_the_serial_bits() {
    let cfg = AdaptConfig {
        target_vertices: 3_000,
        ..AdaptConfig::default()
    };
    let want = serial(&CornerSingularity, cfg);
    let mut dc = DistConfig::new(cfg);
    dc.shift_at = Some((7, 0.6));
    for ranks in [2, 3] {
        let reports = same_as_serial(&want, &CornerSingularity, &dc, ranks);
        // Step 7 moves 60 % of every rank's elements but the last's; step 8's balancer moves
        // most of them back.
        for k in [7, 8] {
            let (moved, elements) = (reports[k].migration.elements, reports[k].base.elements);
            assert!(
                moved as f64 >= 0.2 * elements as f64,
                "{ranks} ranks, step {k}: {moved} of {elements} elements moved"
            );
        }
    }
}

#[test]
fn smooth_doerfler_is_bit_identical() {
    let cfg = AdaptConfig {
        target_vertices: 4_000,
        marking: Marking::Doerfler(0.5),
        ..AdaptConfig::default()
    };
    check(&SmoothHarmonic, cfg, &[1, 3]);
}

#[test]
fn a_panicking_rank_ends_the_run_with_its_name() {
    let cfg = AdaptConfig {
        target_vertices: 3_000,
        ..AdaptConfig::default()
    };
    let exact = CornerSingularity;
    let r = ThreadComm::run(4, &ThreadOptions::default(), |comm| {
        let mut dc = DistConfig::new(cfg);
        dc.fail_at = Some((2, 5));
        let mut run = RankRun::new(comm, &exact, dc, Balancer::flat())?;
        while run.step()?.is_some() {}
        Ok::<_, fem_laplace::FemError>(())
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("rank 2 failed") && e.contains("step 5"), "{e}");
}
