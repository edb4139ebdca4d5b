//! insta snapshots of small RCB and RIB partitions: the cut tree, the quality table on a
//! k-nearest-neighbour graph, the quality per level of a two-level grouping, and an ASCII
//! picture. The points come from integer arithmetic only (no libm), so the snapshots are the
//! same on every platform.

use hier_part::{Csr, Par, Quality, Rcb, Rib, picture};
use hier_part::{Partitioner, Points, Serial};
use hsfc::generate::{RandomSource, Xoshiro256};

/// `n` points in the unit square crowding the corner (0, 0): x = u², y = v².
fn corner_points(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256::new(seed);
    (0..n * dim)
        .map(|_| {
            let u = rng.uniform();
            u * u
        })
        .collect()
}

fn report(
    title: &str,
    coords: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    targets: &[f64],
    rib: bool,
    groups: Option<&[u32]>,
) -> String {
    let n = coords.len() / dim;
    let mut parts = vec![0; n];
    let r = if rib {
        Rib::default().partition(
            &Serial,
            Points::new(coords, dim, weights),
            targets,
            &mut parts,
        )
    } else {
        Rcb::default().partition(
            &Serial,
            Points::new(coords, dim, weights),
            targets,
            &mut parts,
        )
    }
    .unwrap();
    let g = Csr::knn(coords, dim, 6, Par::Seq).unwrap();
    let q = Quality::new(&parts, weights, targets, Some(&g)).unwrap();
    let mut s = format!("{title}\n\n{r}\n{q}");
    if let Some(groups) = groups {
        s += &format!("\ngrouped by {groups:?}:\n{}", q.grouped(groups).unwrap());
    }
    s += "\n";
    s += &picture(coords, dim, &parts, 64, 24);
    s
}

#[test]
fn rcb_2d_five_unequal_parts() {
    let coords = corner_points(800, 2, 1);
    insta::assert_snapshot!(report(
        "RCB, 800 corner-crowded points, targets 1:2:3:1:1",
        &coords,
        2,
        None,
        &[1.0, 2.0, 3.0, 1.0, 1.0],
        false,
        None
    ));
}

#[test]
fn rib_2d_five_unequal_parts() {
    let coords = corner_points(800, 2, 1);
    insta::assert_snapshot!(report(
        "RIB, 800 corner-crowded points, targets 1:2:3:1:1",
        &coords,
        2,
        None,
        &[1.0, 2.0, 3.0, 1.0, 1.0],
        true,
        None
    ));
}

#[test]
fn rcb_2d_weighted_eight_parts_two_nodes() {
    // Eight ranks on two nodes of four; node 1 twice as fast per rank.
    let coords = corner_points(1000, 2, 2);
    let mut rng = Xoshiro256::new(3);
    let w: Vec<f64> = (0..1000)
        .map(|_| 1.0 + (rng.next_u64() % 9) as f64)
        .collect();
    let targets = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0];
    insta::assert_snapshot!(report(
        "RCB, 1000 weighted points (1..9), 8 parts of sizes 1,1,1,1,2,2,2,2, per node",
        &coords,
        2,
        Some(&w),
        &targets,
        false,
        Some(&[0, 0, 0, 0, 1, 1, 1, 1])
    ));
}

#[test]
fn rib_3d_with_an_empty_part() {
    let coords = corner_points(600, 3, 4);
    insta::assert_snapshot!(report(
        "RIB, 600 corner-crowded 3-D points (seen along z), targets 1:0:1:1",
        &coords,
        3,
        None,
        &[1.0, 0.0, 1.0, 1.0],
        true,
        None
    ));
}

/// A hierarchical partition of 1200 corner-crowded points (random integer weights 1..4) over
/// every machine of `machines/` with its static powers: the levels, each rank's load against
/// its target, and a picture of the ranks' regions.
#[test]
fn hierarchical_partition_of_every_machine_file() {
    use drum_model::{Machine, PowerConfig, static_powers};
    use hier_part::{Hier, Plan};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../machines");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    let coords = corner_points(1200, 2, 5);
    let mut rng = Xoshiro256::new(6);
    let weights: Vec<f64> = (0..1200).map(|_| (1 + rng.next_u64() % 4) as f64).collect();
    for f in files {
        let machine = Machine::from_file(&f).unwrap();
        let powers = static_powers(&machine, &PowerConfig::default()).unwrap();
        let plan = Plan::new(&machine, &powers).unwrap();
        let mut parts = vec![0u32; 1200];
        let r = Hier::default()
            .partition(
                &Serial,
                &plan,
                Points::new(&coords, 2, Some(&weights)),
                &mut parts,
            )
            .unwrap();
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let report = format!(
            "{name}.xml, static powers, 1200 corner-crowded points, weights 1..4\n\n{}\n{}",
            r.table(&plan),
            picture(&coords, 2, &parts, 64, 20)
        );
        insta::assert_snapshot!(format!("hier_{name}"), report);
    }
}
