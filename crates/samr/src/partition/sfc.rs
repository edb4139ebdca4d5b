//! The space-filling-curve box partitioner, GrACE's default and the baseline of Sinha &
//! Parashar §6.

use crate::SamrError;
use crate::boxes::{BoxList, BoxPartition, LevelBox, Patch, normalise_capacities, take};
use hsfc::Hsfc;
use part_api::{Partitioner, Points, Serial};

/// Boxes along a space-filling curve into parts of given sizes: GrACE's default partitioner,
/// which "assumes homogeneous processors and performs an equal distribution of the workload"
/// (Sinha & Parashar §6; pass equal targets for that).
///
/// The boxes are ordered by the Hilbert key of their centres on `hsfc`'s curve over the
/// level-0 domain, and the ordered list is cut into consecutive runs of `L · t_k` work; a box
/// that straddles a cut is broken across its longest axis so that its first piece fills the
/// part, with the minimum box size, alignment and fallbacks of [`crate::Ace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sfc {
    /// Minimum box size along a cut axis.
    pub min_box: i64,
}

impl Sfc {
    /// Partitions `list` into `targets.len()` parts of relative sizes `targets` (finite and
    /// > 0; normalised here).
    pub fn partition(&self, list: &BoxList, targets: &[f64]) -> Result<BoxPartition, SamrError> {
        let c = normalise_capacities(targets)?;
        let ordered = curve_order(list)?;
        let total = list.total_work() as f64;
        let mut ends = Vec::with_capacity(c.len());
        let mut acc = 0.0;
        for ck in &c {
            acc += ck;
            ends.push(acc * total);
        }
        let (mut k, mut done) = (0usize, 0.0f64);
        let mut out = Vec::with_capacity(ordered.len() + c.len());
        for b in ordered {
            let mut cur = Some(b);
            while let Some(b) = cur {
                if k == c.len() - 1 {
                    out.push(Patch { b, rank: k as u32 });
                    done += b.work() as f64;
                    break;
                }
                // The part takes what fits (or nothing: the box waits for the next part).
                let Some((piece, rest)) = take(&b, ends[k] - done, self.min_box) else {
                    k += 1;
                    continue;
                };
                out.push(Patch {
                    b: piece,
                    rank: k as u32,
                });
                done += piece.work() as f64;
                if rest.is_some() || done >= ends[k] {
                    k += 1;
                }
                cur = rest;
            }
        }
        Ok(BoxPartition::from_pieces(out, &c))
    }
}

/// The boxes in the order of the Hilbert keys of their centres (in level-0 units), on the
/// curve of `hsfc` over the level-0 domain; ties by level and position.
pub(crate) fn curve_order(list: &BoxList) -> Result<Vec<LevelBox>, SamrError> {
    let n0 = list.domain().n0 as f64;
    // The domain's corners fix the curve's box: the order does not depend on which boxes
    // exist.
    let mut coords = vec![0.0, 0.0, n0, n0];
    for b in list.boxes() {
        coords.extend(b.rect.centre_level0(b.level));
    }
    let mut parts = vec![0u32; coords.len() / 2];
    let curve =
        Hsfc::default().partition(&Serial, Points::new(&coords, 2, None), &[1.0], &mut parts)?;
    let mut keyed = Vec::with_capacity(list.boxes().len());
    for (b, x) in list.boxes().iter().zip(coords[4..].chunks_exact(2)) {
        keyed.push((curve.fine_key(x)?, *b));
    }
    keyed.sort_unstable();
    Ok(keyed.into_iter().map(|(_, b)| b).collect())
}
