//! The real adapted meshes of every step (the serial run, which every distributed run equals
//! to the bit), reduced to what the simulator needs: element centroids, neighbours, and which
//! element of the previous step each element comes from.

use crate::error::{Context, Result, bail};
use fem_laplace::problem::Problem;
use fem_laplace::{AdaptConfig, Adaptive};

/// One step's mesh.
#[derive(Debug, Clone)]
pub struct StepMesh {
    /// Vertices.
    pub vertices: usize,
    /// Element centroids, x y interleaved.
    pub xy: Vec<f64>,
    /// Each element's neighbours across its three edges (`u32::MAX`: the boundary).
    pub nbr: Vec<[u32; 3]>,
    /// The element of the previous step each element is or descends from (empty at step 0).
    pub parent: Vec<u32>,
    /// Conjugate-gradient iterations of the step's solve.
    pub cg_iterations: usize,
}

impl StepMesh {
    /// Leaf elements.
    pub fn elements(&self) -> usize {
        self.nbr.len()
    }
}

fn areas(mesh: &fem_laplace::mesh::Mesh) -> Vec<f64> {
    let c = mesh.coords();
    mesh.elements()
        .iter()
        .map(|t| {
            let [a, b, d] = t.map(|v| c[v as usize]);
            0.5 * ((b[0] - a[0]) * (d[1] - a[1]) - (d[0] - a[0]) * (b[1] - a[1])).abs()
        })
        .collect()
}

/// Maps each new element to its ancestor among `old` elements: refinement rewrites the
/// elements in curve order with children in place, so the new elements are the old ones'
/// descendants in order, and an old element's run of descendants ends where their areas
/// (exact: vertices are dyadic) add up to its own.
fn ancestors(old: &[f64], new: &[f64]) -> Result<Vec<u32>> {
    let mut parent = Vec::with_capacity(new.len());
    let mut j = 0;
    for (t, &area) in old.iter().enumerate() {
        let mut sum = 0.0;
        while sum < area * (1.0 - 1e-12) {
            let Some(&a) = new.get(j) else {
                bail!("the refined mesh ends inside old element {t}");
            };
            sum += a;
            parent.push(t as u32);
            j += 1;
        }
        if (sum - area).abs() > 1e-9 * area {
            bail!("old element {t}'s children do not cover it (areas {sum} vs {area})");
        }
    }
    if j != new.len() {
        bail!("{} new elements left after the old ones", new.len() - j);
    }
    Ok(parent)
}

/// Runs the adaptive loop to `target` vertices (PHAML's problem and marking, as
/// `fem-laplace`'s defaults) and keeps every step's mesh.
pub fn sequence(target: usize, mut progress: impl FnMut(usize, usize)) -> Result<Vec<StepMesh>> {
    let exact = Problem::default().solution();
    let cfg = AdaptConfig {
        target_vertices: target,
        errors: false,
        ..AdaptConfig::default()
    };
    let mut run = Adaptive::new(exact.as_ref(), cfg).context("the serial adaptive run")?;
    let mut out: Vec<StepMesh> = Vec::new();
    let mut old_areas = Vec::new();
    while let Some(r) = run.step().context("the serial adaptive run")? {
        let mesh = run.mesh();
        let mut xy = vec![0.0; 2 * mesh.num_elements()];
        mesh.centroids_into(&mut xy);
        let new_areas = areas(mesh);
        let parent = if out.is_empty() {
            Vec::new()
        } else {
            ancestors(&old_areas, &new_areas)
                .with_context(|| format!("step {}: tracing elements to the last step", r.step))?
        };
        old_areas = new_areas;
        out.push(StepMesh {
            vertices: r.vertices,
            xy,
            nbr: mesh.neighbours().to_vec(),
            parent,
            cg_iterations: r.cg_iterations,
        });
        progress(r.step, r.vertices);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_descends_from_one_element_of_the_last_step() {
        let seq = sequence(2_000, |_, _| {}).unwrap();
        assert!(seq.len() >= 5);
        for w in seq.windows(2) {
            let (old, new) = (&w[0], &w[1]);
            assert_eq!(new.parent.len(), new.elements());
            assert!(new.parent.windows(2).all(|p| p[0] <= p[1]));
            // Every old element has 1 to 4 descendants (a step bisects at most twice).
            let mut count = vec![0; old.elements()];
            for &p in &new.parent {
                count[p as usize] += 1;
            }
            assert!(count.iter().all(|&c| (1..=4).contains(&c)), "{count:?}");
            // A child's centroid lies in its parent's bounding box, near its centroid.
            for (t, &p) in new.parent.iter().enumerate() {
                let d = (new.xy[2 * t] - old.xy[2 * p as usize]).abs()
                    + (new.xy[2 * t + 1] - old.xy[2 * p as usize + 1]).abs();
                assert!(d < 1.0, "element {t}");
            }
        }
    }

    #[test]
    fn a_mesh_that_does_not_cover_the_old_one_is_an_error() {
        assert!(ancestors(&[1.0, 1.0], &[0.5, 0.5, 0.5]).is_err());
        assert!(ancestors(&[1.0], &[0.5, 0.5, 0.5]).is_err());
        assert_eq!(ancestors(&[1.0, 0.5], &[0.5, 0.5, 0.5]).unwrap(), [0, 0, 1]);
    }
}
