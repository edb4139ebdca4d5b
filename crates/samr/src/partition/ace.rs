//! ACEHeterogeneous: Sinha & Parashar's system-sensitive box partitioner.

use crate::SamrError;
use crate::boxes::{BoxList, BoxPartition, LevelBox, Patch, normalise_capacities, take};
use std::collections::BTreeSet;

/// Sinha & Parashar's *ACEHeterogeneous* (§5.3): boxes go to processors in proportion to their
/// relative capacities.
///
/// With relative capacities `C_k` (Σ C_k = 1, from the capacity metric
/// `C_k = w_p P_k + w_m M_k + w_b B_k` of §5.2, eq. (1): `drum_model`'s
/// `PowerModel::SinhaParashar`) and total work `L`, processor `k` should receive
/// `L_k = C_k · L`. "Both the list of bounding boxes as well as the relative capacities of the
/// processors are sorted in an increasing order, with the smallest box being assigned to the
/// processor with the smallest relative capacity": processors are filled in increasing order
/// of capacity, each from the smallest boxes up, until it holds about `L_k`; a box whose work
/// exceeds what the processor can still take is broken in two along its longest axis so that
/// one piece fits (the aspect-ratio constraint), both pieces keeping the minimum box size;
/// the rest goes back into the sorted list. When no allowed piece fits, the smallest allowed
/// piece (or the box, if it cannot be cut) is taken only if that brings the processor nearer
/// `L_k`. The processor of largest capacity takes what is left. The paper's imbalance `I_k` (eq. 2) comes from the minimum box size:
/// [`BoxPartition::imbalance_percent`].
///
/// ```
/// use samr_kernel::{Ace, BoxList, Domain, LevelBox, Rect};
/// let domain = Domain::new(32, 0)?;
/// let list = BoxList::new(domain, vec![LevelBox { level: 0, rect: Rect::square(32) }])?;
/// // The four capacities of Sinha & Parashar §6.1.3.
/// let p = Ace { min_box: 2 }.partition(&list, &[0.16, 0.19, 0.31, 0.34])?;
/// // L_k = 163.84, 194.56, 317.44, 348.16: each processor but the last ends within a strip
/// // (a row of the box it broke) of L_k, the last takes the rest.
/// assert_eq!(p.work, vec![160, 189, 330, 345]);
/// assert!(p.imbalance_percent().iter().all(|i| *i < 4.0));
/// # Ok::<(), samr_kernel::SamrError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ace {
    /// Minimum box size: no cut leaves a piece with fewer cells along the cut axis.
    pub min_box: i64,
}

impl Ace {
    /// Partitions `list` over `capacities.len()` processors with relative capacities
    /// `capacities` (finite and > 0; normalised here).
    pub fn partition(&self, list: &BoxList, capacities: &[f64]) -> Result<BoxPartition, SamrError> {
        let c = normalise_capacities(capacities)?;
        let total = list.total_work() as f64;
        let mut order: Vec<usize> = (0..c.len()).collect();
        order.sort_by(|&a, &b| c[a].total_cmp(&c[b]).then(a.cmp(&b)));
        let mut queue: BTreeSet<(u64, LevelBox)> =
            list.boxes().iter().map(|b| (b.work(), *b)).collect();
        let mut out = Vec::with_capacity(queue.len() + c.len());
        let last = order.len() - 1;
        for (n, &k) in order.iter().enumerate() {
            let rank = k as u32;
            if n == last {
                out.extend(queue.iter().map(|&(_, b)| Patch { b, rank }));
                break;
            }
            self.fill(&mut queue, c[k] * total, rank, &mut out);
        }
        Ok(BoxPartition::from_pieces(out, &c))
    }

    /// Gives processor `rank` boxes from the small end of `queue` until it holds about
    /// `budget` work ([`take`]).
    fn fill(
        &self,
        queue: &mut BTreeSet<(u64, LevelBox)>,
        mut budget: f64,
        rank: u32,
        out: &mut Vec<Patch>,
    ) {
        while let Some(&(_, b)) = queue.first() {
            let Some((piece, rest)) = take(&b, budget, self.min_box) else {
                break;
            };
            queue.pop_first();
            out.push(Patch { b: piece, rank });
            budget -= piece.work() as f64;
            if let Some(r) = rest {
                queue.insert((r.work(), r));
            }
        }
    }
}
