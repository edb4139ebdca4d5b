//! Every parallel pass of `diffusion` (the k-nearest-neighbour graph, the task-selection
//! context, the senders' choices) runs on the caller's `Par`: after rebalances on 2 and 3
//! threads, rayon's global pool has never been built (building it now succeeds). One test per
//! process: the global pool is process-wide.

use diffusion::{Diffusion, Method, Transfer};
use part_api::{Par, Points};

#[test]
fn rebalance_never_builds_the_global_pool() {
    // 40 × 40 unit objects in four column blocks; the last processor is four times as fast.
    let coords: Vec<f64> = (0..1600)
        .flat_map(|i| [(i % 40) as f64, (i / 40) as f64])
        .collect();
    let start: Vec<u32> = (0..1600).map(|i| (i % 40 / 10) as u32).collect();
    let mut results = Vec::new();
    for threads in [2, 3] {
        for method in [Method::Hbm, Method::GDE, Method::IMPLICIT] {
            let d = Diffusion {
                transfer: Transfer {
                    method,
                    ..Diffusion::default().transfer
                },
                par: Par::threads(threads),
                ..Diffusion::default()
            };
            let mut parts = start.clone();
            let r = d
                .rebalance(
                    Points::new(&coords, 2, None),
                    None,
                    &[1.0, 1.0, 1.0, 4.0],
                    &mut parts,
                )
                .unwrap();
            assert!(r.moved_objects > 0);
            results.push((threads, method.name(), parts));
        }
    }
    // The same partitions on 2 and 3 threads.
    let (two, three) = results.split_at(3);
    for (a, b) in two.iter().zip(three) {
        assert_eq!(a.2, b.2, "{}", a.1);
    }
    assert!(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build_global()
            .is_ok(),
        "rayon's global pool was built: some parallel work ran outside Par's pools"
    );
}
