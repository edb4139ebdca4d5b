//! `Par` runs work on its own pools: after parallel work on 2 and 3 threads, rayon's global
//! pool has never been built (building it now succeeds). One test per process: the global
//! pool is process-wide.

use part_api::Par;
use rayon::prelude::*;

#[test]
fn par_never_builds_the_global_pool() {
    for threads in [2, 3] {
        let sum: u64 = Par::threads(threads)
            .install(|| (0..100_000u64).into_par_iter().sum())
            .unwrap();
        assert_eq!(sum, 4_999_950_000);
        let pool = Par::threads(threads).pool().unwrap().unwrap();
        assert_eq!(pool.current_num_threads(), threads);
        // The k-nearest-neighbour graph's queries run on the same pools.
        let coords: Vec<f64> = (0..3000).map(|i| f64::from(i * 37 % 1001)).collect();
        let g = part_api::Csr::knn(&coords, 3, 4, Par::threads(threads)).unwrap();
        assert_eq!(g.n(), 1000);
    }
    assert!(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build_global()
            .is_ok(),
        "rayon's global pool was built: some parallel work ran outside Par's pools"
    );
}
