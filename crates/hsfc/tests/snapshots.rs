//! Snapshots of small partitions: the per-part table (weight vs target) and an ASCII map of
//! the parts over the box. Review changes with `cargo insta review`.

use hsfc::{Hsfc, summary};
use part_api::Serial;
use part_api::{Par, Partitioner, Points};

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 * (-53f64).exp2()
    }
}

fn render(points: &[f64], dim: usize, weights: Option<&[f64]>, targets: &[f64]) -> String {
    let mut parts = vec![0u32; points.len() / dim];
    let p = Hsfc {
        par: Par::Seq,
        ..Default::default()
    }
    .partition(
        &Serial,
        Points::new(points, dim, weights),
        targets,
        &mut parts,
    )
    .expect("valid input");
    format!("{}\n{}", summary::table(&p), summary::ascii_map(&p, 48, 16))
}

#[test]
fn uniform_2d_quarters() {
    let mut r = Rng(7);
    let pts: Vec<f64> = (0..2000).map(|_| r.unit()).collect();
    insta::assert_snapshot!(render(&pts, 2, None, &[16.0, 19.0, 31.0, 34.0]));
}

#[test]
fn graded_2d_weighted_with_an_empty_part() {
    let mut r = Rng(11);
    let mut pts = Vec::new();
    let mut w = Vec::new();
    for _ in 0..3000 {
        // Towards the corner (0, 0): radial fraction 1e-3^(1-u).
        let (a, t) = (
            r.unit() * std::f64::consts::FRAC_PI_2,
            1e-3f64.powf(1.0 - r.unit()),
        );
        pts.extend([t * a.cos(), t * a.sin()]);
        w.push(1.0 + 9.0 * r.unit());
    }
    insta::assert_snapshot!(render(&pts, 2, Some(&w), &[1.5, 1.0, 0.0, 1.5, 1.0, 1.5]));
}

#[test]
fn duplicates_stay_together() {
    // Ten points at one place, and ten spread: a part cannot split the ten duplicates.
    let mut pts = vec![0.25; 20];
    for i in 0..10 {
        pts.extend([0.5 + 0.05 * f64::from(i), 0.9]);
    }
    insta::assert_snapshot!(render(&pts, 2, None, &[1.0, 1.0, 1.0]));
}

#[test]
fn cube_3d_slice() {
    let mut r = Rng(3);
    let pts: Vec<f64> = (0..3 * 4000).map(|_| r.unit()).collect();
    insta::assert_snapshot!(render(&pts, 3, None, &[1.0; 8]));
}
