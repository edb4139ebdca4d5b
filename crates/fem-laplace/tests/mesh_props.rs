//! Property tests of newest-vertex bisection: any marking, any number of rounds, gives a
//! conforming mesh whose elements stay on one continuous curve, with the counts the marks
//! predicted.

use fem_laplace::{Marks, Mesh, WeightKind};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_refinement_stays_conforming(
        rounds in prop::collection::vec((any::<u64>(), 1u32..100, any::<bool>()), 1..9)
    ) {
        let mut mesh = Mesh::unit_square();
        for (seed, percent, twice) in rounds {
            let ne = mesh.num_elements();
            let mut marks = Marks::new(ne);
            let mut s = seed | 1;
            for t in 0..ne {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                if (s % 100) < percent as u64 {
                    if twice && s % 3 == 0 {
                        marks.mark_element_twice(&mesh, t);
                    } else {
                        marks.mark_element(&mesh, t);
                    }
                }
            }
            let mut predicted = vec![0.0; ne];
            mesh.element_weights_into(WeightKind::PredictedElements, Some(&marks), &mut predicted);
            let (nv, new) = (mesh.num_vertices(), marks.new_vertices());
            let range = mesh.refine(&marks).unwrap();
            prop_assert_eq!(range, nv..nv + new);
            prop_assert_eq!(mesh.num_elements(), predicted.iter().sum::<f64>() as usize);
            let summary = mesh.check().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(summary.vertices, nv + new);
            let n = mesh.num_elements();
            for t in 0..n {
                prop_assert_eq!(mesh.elements()[t][2], mesh.elements()[(t + 1) % n][0]);
            }
            for v in nv..nv + new {
                let [a, b] = mesh.vertex_parents()[v];
                prop_assert!((a as usize) < nv && (b as usize) < nv);
            }
        }
    }
}
