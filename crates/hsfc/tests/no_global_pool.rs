//! The parallel paths of `hsfc` (keys, histograms, refinement, parts, KEEP_CUTS) run on the
//! caller's `Par` pools only: afterwards rayon's global pool has never been built. One test
//! per process: the global pool is process-wide.

use hsfc::Hsfc;
use hsfc::generate::{Distribution, WeightKind, points};
use part_api::{Par, Partitioner, Points, Serial};

#[test]
fn hsfc_never_builds_the_global_pool() {
    for dim in [2, 3] {
        let n = 200_000;
        let (coords, weights) = points(n, dim, Distribution::Graded, WeightKind::Random, 7);
        let cfg = Hsfc {
            par: Par::threads(2),
            tolerance: 0.05,
        };
        let mut parts = vec![0u32; n];
        let targets = [1.0, 2.0, 3.0, 0.0, 5.0];
        let pts = Points::new(&coords, dim, weights.as_deref());
        let p = cfg.partition(&Serial, pts, &targets, &mut parts).unwrap();
        let again = [2.0, 2.0, 3.0, 1.0, 4.0];
        cfg.repartition(
            &mut Default::default(),
            &Serial,
            &p,
            pts,
            &again,
            &mut parts,
        )
        .unwrap();
    }
    assert!(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build_global()
            .is_ok(),
        "rayon's global pool was built: some parallel work ran outside the caller's Par"
    );
}
