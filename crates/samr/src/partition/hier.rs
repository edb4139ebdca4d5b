//! The project's own box partitioner: box centres along the machine tree with `hier-part`.

use crate::SamrError;
use crate::boxes::{BoxList, BoxPartition, LevelBox, Patch, halve_box, normalise_capacities};
use hier_part::{Hier, Plan};
use part_api::{Points, Serial};

/// Boxes as weighted points along the machine tree: every box larger than `max_share` of the
/// smallest rank's share `s_min · L` is first halved across its longest axis (minimum box size
/// and alignment as for [`crate::Ace`]) until it is not; then the boxes' centres (level-0
/// units), weighted by their work, are partitioned by [`hier_part::Hier`] along the plan's
/// tree, each network node splitting its boxes among its children in proportion to their
/// powers with the node's own method (HSFC, RCB or RIB). A part then misses its target by at
/// most about one piece, `max_share · s_min · L`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HierBoxes {
    /// Minimum box size along a cut axis.
    pub min_box: i64,
    /// The largest piece as a fraction of the smallest rank's share, in (0, 1].
    pub max_share: f64,
}

impl Default for HierBoxes {
    fn default() -> Self {
        HierBoxes {
            min_box: 4,
            max_share: 0.25,
        }
    }
}

impl HierBoxes {
    /// Partitions `list` over the ranks of `plan`.
    pub fn partition(&self, list: &BoxList, plan: &Plan) -> Result<BoxPartition, SamrError> {
        if !(self.max_share > 0.0 && self.max_share <= 1.0) {
            return Err(SamrError::BadValue {
                what: "max_share".into(),
                value: self.max_share,
                expected: "a fraction in (0, 1]",
            });
        }
        let sizes = plan.part_sizes();
        let positive: Vec<f64> = sizes.iter().copied().filter(|s| *s > 0.0).collect();
        let c = normalise_capacities(&positive)?;
        let s_min = c.iter().copied().fold(f64::INFINITY, f64::min);
        let limit = s_min * list.total_work() as f64 * self.max_share;
        let mut pieces = Vec::with_capacity(list.boxes().len());
        let mut stack: Vec<LevelBox> = list.boxes().iter().rev().copied().collect();
        while let Some(b) = stack.pop() {
            match (b.work() as f64 > limit)
                .then(|| halve_box(&b, self.min_box))
                .flatten()
            {
                Some((lo, hi)) => {
                    stack.push(hi);
                    stack.push(lo);
                }
                None => pieces.push(b),
            }
        }
        let coords: Vec<f64> = pieces
            .iter()
            .flat_map(|b| b.rect.centre_level0(b.level))
            .collect();
        let weights: Vec<f64> = pieces.iter().map(|b| b.work() as f64).collect();
        let mut parts = vec![0u32; pieces.len()];
        Hier::default().partition(
            &Serial,
            plan,
            Points::new(&coords, 2, Some(&weights)),
            &mut parts,
        )?;
        let total: f64 = sizes.iter().sum();
        let targets: Vec<f64> = sizes.iter().map(|s| s / total).collect();
        let patches = pieces
            .into_iter()
            .zip(parts)
            .map(|(b, rank)| Patch { b, rank })
            .collect();
        Ok(BoxPartition::from_pieces(patches, &targets))
    }
}
