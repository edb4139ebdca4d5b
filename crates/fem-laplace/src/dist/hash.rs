//! The mesh hash of the step reports: the same definition for the serial and the distributed
//! run, so that equal hashes mean equal meshes.
//!
//! Each leaf element is written as its three vertices' coordinates, as the bits of the `f64`
//! values (x₀, y₀, x₁, y₁, x₂, y₂) with the three points sorted (by x bits, then y bits); the
//! elements are sorted the same way (lexicographically on the six words), and the hash is
//! FNV-1a 64 over the little-endian bytes of all the words in that order.

use crate::mesh::Mesh;

/// One element as six words (see the module documentation).
pub(crate) type Record = [u64; 6];

/// The record of element t.
pub(crate) fn record(mesh: &Mesh, t: usize) -> Record {
    let mut p = mesh.tri[t].map(|v| {
        let c = mesh.coords[v as usize];
        [c[0].to_bits(), c[1].to_bits()]
    });
    p.sort_unstable();
    [p[0][0], p[0][1], p[1][0], p[1][1], p[2][0], p[2][1]]
}

/// FNV-1a 64 over records already in order.
pub(crate) fn fnv(records: impl IntoIterator<Item = Record>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for r in records {
        for w in r {
            for b in w.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    h
}

/// The hash of a whole mesh (one process).
pub fn mesh_hash(mesh: &Mesh) -> u64 {
    let mut recs: Vec<Record> = (0..mesh.num_elements()).map(|t| record(mesh, t)).collect();
    recs.sort_unstable();
    fnv(recs)
}

/// Merges sorted runs of records (one per rank) into one sorted sequence.
pub(crate) fn merge_sorted(runs: Vec<Vec<Record>>) -> Vec<Record> {
    let mut heap = std::collections::BinaryHeap::new();
    let mut pos = vec![0usize; runs.len()];
    for (r, run) in runs.iter().enumerate() {
        if let Some(&x) = run.first() {
            heap.push(std::cmp::Reverse((x, r)));
        }
    }
    let mut out = Vec::with_capacity(runs.iter().map(Vec::len).sum());
    while let Some(std::cmp::Reverse((x, r))) = heap.pop() {
        out.push(x);
        pos[r] += 1;
        if let Some(&y) = runs[r].get(pos[r]) {
            heap.push(std::cmp::Reverse((y, r)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ignores_element_and_vertex_order_but_not_geometry() {
        let m = Mesh::unit_square();
        let h = mesh_hash(&m);
        let mut r = m.clone();
        r.tri.reverse();
        for t in &mut r.tri {
            t.rotate_left(1);
        }
        assert_eq!(mesh_hash(&r), h);
        let mut s = m.clone();
        s.coords[4] = [0.5, 0.25];
        assert_ne!(mesh_hash(&s), h);
        // FNV-1a 64 of no bytes is its offset basis.
        assert_eq!(fnv(Vec::<Record>::new()), 0xcbf2_9ce4_8422_2325);
        let runs = vec![vec![[1, 0, 0, 0, 0, 0], [3; 6]], vec![[2; 6]], vec![]];
        assert_eq!(merge_sorted(runs), vec![[1, 0, 0, 0, 0, 0], [2; 6], [3; 6]]);
    }
}
