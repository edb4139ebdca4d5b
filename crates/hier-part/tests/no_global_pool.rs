//! The parallel paths of `hier-part` (RCB and RIB serial and distributed, the hierarchical
//! walk with sibling subtrees side by side, the kNN graph, the input checks) run on the
//! caller's `Par` pools only: afterwards rayon's global pool has never been built. One test
//! per process: the global pool is process-wide.

use comm::{ThreadComm, ThreadOptions};
use drum_model::{Machine, PowerConfig, static_powers};
use hier_part::{Csr, Hier, Par, Partitioner, Plan, Points, Rcb, Rib, Serial, Workspace};
use hsfc::generate::{Distribution, WeightKind, points};

#[test]
fn hier_part_never_builds_the_global_pool() {
    let par = Par::threads(2);
    let n = 100_000;
    for dim in [2, 3] {
        let (coords, weights) = points(n, dim, Distribution::Graded, WeightKind::Random, 3);
        let pts = Points::new(&coords, dim, weights.as_deref());
        let mut parts = vec![0u32; n];
        let targets = [1.0, 3.0, 2.0];
        Rcb {
            par,
            ..Default::default()
        }
        .partition(&Serial, pts, &targets, &mut parts)
        .unwrap();
        Rib {
            par,
            ..Default::default()
        }
        .partition(&Serial, pts, &targets, &mut parts)
        .unwrap();
        Csr::knn(&coords, dim, 4, par).unwrap();
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines");
    let machine = Machine::from_file(dir.join("fig3-cluster-of-clusters.xml")).unwrap();
    let powers = static_powers(&machine, &PowerConfig::default()).unwrap();
    let plan = Plan::new(&machine, &powers).unwrap();
    let (coords, weights) = points(n, 2, Distribution::Uniform, WeightKind::Random, 5);
    let pts = Points::new(&coords, 2, weights.as_deref());
    let hier = Hier { par };
    let mut parts = vec![0u32; n];
    let p = hier
        .partition_with(&mut Workspace::default(), &Serial, &plan, pts, &mut parts)
        .unwrap();
    hier.repartition(
        &mut Workspace::default(),
        &Serial,
        &plan,
        &p,
        pts,
        &mut parts,
    )
    .unwrap();
    // Distributed on thread ranks, two threads per rank.
    let ranks = plan.num_ranks();
    ThreadComm::run(ranks, &ThreadOptions::default(), |c| {
        let r = part_api::block_range(n as u64, comm::Comm::rank(&c), ranks);
        let (a, b) = (r.start as usize, r.end as usize);
        let mine = Points::new(&coords[2 * a..2 * b], 2, weights.as_ref().map(|w| &w[a..b]));
        let mut parts = vec![0u32; b - a];
        hier.partition_with(&mut Workspace::default(), &c, &plan, mine, &mut parts)
            .unwrap();
        Rcb {
            par,
            ..Default::default()
        }
        .partition(&c, mine, &[1.0, 1.0], &mut parts[..])
        .unwrap();
    })
    .unwrap();
    assert!(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build_global()
            .is_ok(),
        "rayon's global pool was built: some parallel work ran outside the caller's Par"
    );
}
