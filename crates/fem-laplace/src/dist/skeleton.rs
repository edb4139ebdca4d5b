//! The multilevel preconditioner across ranks, bit for bit the serial one.
//!
//! The serial sweeps ([`crate::solver::Multilevel`]) visit the vertices in birth order:
//! undoing the bisections, each vertex pushes half its value into its two parents, recording
//! the parents' values at that moment; redoing them, each vertex is prolongated from its
//! parents' current values and corrects them. A parent's value is thus a sum over its
//! children in birth order, and the value a child reads is a partial sum of the same sequence.
//!
//! A rank does these sweeps itself for its *bulk*: owned vertices whose children are all
//! owned by it too. The others form the *skeleton*: every vertex that is the parent of a
//! vertex owned by another rank, and all their ancestors. The skeleton is small (the vertices
//! near partition boundaries at each scale, and the coarse ones), so every rank keeps a copy
//! of its structure: the vertices in birth order, their parents, and their children in birth
//! order (skeleton vertices, or *external* children: bulk vertices of any rank). Each
//! application of the preconditioner then takes one collective:
//!
//! 1. every rank sweeps its bulk backwards, not pushing into skeleton parents;
//! 2. one `allgatherv` brings every rank the residuals of the skeleton vertices and the values
//!    of the external children (all final after step 1);
//! 3. every rank runs both skeleton sweeps itself, as sums over children in birth order (the
//!    same operations in the same order as the serial sweeps), which also gives each external
//!    child its skeleton parents' values at its bisection;
//! 4. every rank sweeps its bulk forwards, reading those values for skeleton parents.
//!
//! Every rank computes the skeleton the same way from the same numbers, so the result does not
//! depend on the number of ranks; with one rank the skeleton is empty.

use super::keys::{Birth, VKey, vertex_key};
use super::local::Local;
use crate::mesh::{Mesh, NONE};
use crate::solver::{Multilevel, Sweep};
use comm::wire::{Reader, WireError, Writer};
use comm::{Comm, CommError};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

/// The replicated skeleton of one mesh (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct Skeleton {
    /// Number of skeleton vertices (indices `0..n`, in birth order).
    n: usize,
    /// Parents of each skeleton vertex, as skeleton indices ([`NONE`] for initial vertices).
    parents: Vec<[u32; 2]>,
    /// Children of skeleton vertex o: `child[child_ptr[o]..child_ptr[o + 1]]` in birth order;
    /// a child `c < n` is a skeleton vertex, else external child `c − n`; `slot` is the
    /// parent's place (0, 1) among the child's parents.
    child_ptr: Vec<u32>,
    child: Vec<u32>,
    slot: Vec<u8>,
    /// Number of external children.
    n_ext: usize,
    /// Local vertex of each skeleton vertex ([`NONE`] if not on this rank).
    local: Vec<u32>,
    /// Per local vertex: whether it is swept here (owned, not in the skeleton).
    bulk: Vec<bool>,
    /// The owned vertices after the initial ones (`n_initial..n_owned`, the bulk sweeps'
    /// range) in stretches: `true` where every vertex and both its parents are in the bulk.
    stretches: Vec<(Range<usize>, bool)>,
    /// Per local vertex: its external-child index, or [`NONE`].
    ext_of: Vec<u32>,
    /// The skeleton vertices this rank owns, and its external children (local vertices), in
    /// index order: this rank's piece of the gather.
    own_o: Vec<u32>,
    own_ext: Vec<u32>,
    /// Per rank: the skeleton indices and external indices of its piece.
    piece_o: Vec<Vec<u32>>,
    piece_ext: Vec<Vec<u32>>,
    /// 1/D of each skeleton vertex.
    inv: Vec<f64>,
    /// Work arrays.
    z: Vec<f64>,
    lr: Vec<f64>,
    pv: Vec<[f64; 2]>,
    z_ext: Vec<f64>,
    pv_ext: Vec<[f64; 2]>,
    /// Initial vertices first, then the rest, in birth order (live local vertices).
    n_initial: usize,
}

impl Skeleton {
    /// This rank's skeleton candidates for every rank to read (the first round of
    /// [`Skeleton::build`]): the parents of owned vertices owned elsewhere and their ancestors,
    /// in birth order, with their keys and their parents' keys.
    pub(crate) fn write_candidates(l: &Local, w: &mut Writer) {
        if l.size == 1 {
            // A rank alone owns every vertex: no parent is owned elsewhere.
            return;
        }
        let nv = l.mesh.coords.len();
        let par = &l.mesh.parents;
        // 1. Parents of owned vertices (the prefix `0..n_owned`) owned elsewhere, and their
        // ancestors.
        let n_owned = l.n_owned as u32;
        let mut mark = vec![false; nv];
        let mut marked: Vec<u32> = Vec::new();
        for p in &par[..l.n_owned] {
            for &a in p {
                if a != NONE && a >= n_owned && !mark[a as usize] {
                    mark[a as usize] = true;
                    marked.push(a);
                }
            }
        }
        let mut i = 0;
        while i < marked.len() {
            for a in par[marked[i] as usize] {
                if a != NONE && !mark[a as usize] {
                    mark[a as usize] = true;
                    marked.push(a);
                }
            }
            i += 1;
        }
        let key_of = |v: u32| -> VKey {
            if v == NONE {
                VKey::MAX
            } else {
                vertex_key(l.mesh.coords[v as usize])
            }
        };
        marked.sort_unstable_by_key(|&v| l.birth(v as usize));
        for &v in &marked {
            {
                let b = l.birth(v as usize);
                w.u16(b.sg);
                w.u128(b.key);
                w.u128(key_of(v));
                for a in par[v as usize] {
                    w.u128(key_of(a));
                }
            }
        }
    }

    /// Finds the skeleton from every rank's candidates (`candidates[r]`,
    /// [`Skeleton::write_candidates`]) and sets up this rank's part, with 1/D of the skeleton
    /// vertices from `inv` (this rank's diagonal): one `allgatherv`.
    pub(crate) fn build<C: Comm>(
        comm: &C,
        l: &Local,
        candidates: &[&[u8]],
        inv: &[f64],
    ) -> Result<Skeleton, CommError> {
        let nv = l.mesh.coords.len();
        let recs = read_candidates(candidates)?;
        let n = recs.len();
        let mut sk = Skeleton {
            n,
            ..Default::default()
        };
        if n == 0 {
            sk.n_initial = l.mesh.num_initial_vertices();
            if l.size == 1 {
                // A rank alone owns every vertex, and every vertex but the initial ones has
                // two parents: its sweeps are the serial ones.
                debug_assert!((0..nv).all(|v| l.owns_vertex(v)) && nv == l.n_owned);
                sk.bulk = vec![true; nv];
                sk.stretches = vec![(sk.n_initial..nv, true)];
            } else {
                sk.bulk = (0..nv).map(|v| l.owns_vertex(v)).collect();
                let sweep = sk.n_initial..l.n_owned;
                sk.stretches = stretches(&sk.bulk, l.mesh.vertex_parents(), sweep);
            }
            return Ok(sk);
        }
        let pos: HashMap<VKey, u32> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.1, i as u32))
            .collect();
        sk.parents = recs
            .iter()
            .map(|r| r.2.map(|k| if k == VKey::MAX { NONE } else { pos[&k] }))
            .collect();
        // 2. This rank's copies (the records are sorted by birth).
        let births: Vec<Birth> = recs.iter().map(|r| r.0).collect();
        sk.local = l.find_sorted(&births);
        let mut of = vec![NONE; nv];
        for (o, &v) in sk.local.iter().enumerate() {
            if v != NONE {
                of[v as usize] = o as u32;
            }
        }
        sk.own_o = (0..n as u32)
            .filter(|&o| {
                let v = sk.local[o as usize];
                v != NONE && l.owns_vertex(v as usize)
            })
            .collect();
        // The owned vertices are the prefix `0..n_owned`.
        sk.bulk = vec![false; nv];
        sk.bulk[..l.n_owned].fill(true);
        for &v in sk.local.iter().filter(|&&v| v != NONE) {
            sk.bulk[v as usize] = false;
        }
        sk.n_initial = l.mesh.num_initial_vertices();
        sk.stretches = stretches(&sk.bulk, l.mesh.vertex_parents(), sk.n_initial..l.n_owned);
        let ext = sk.external_children(comm, l, &of, inv)?;
        sk.children(&recs, &ext);
        sk.z = vec![0.0; n];
        sk.lr = vec![0.0; sk.child.len()];
        sk.pv = vec![[0.0; 2]; n];
        sk.z_ext = vec![0.0; sk.n_ext];
        sk.pv_ext = vec![[0.0; 2]; sk.n_ext];
        Ok(sk)
    }

    /// Step 3 of [`Skeleton::build`]: the external children (bulk vertices with a skeleton
    /// parent; `of`: each local vertex's skeleton index) of every rank, with the skeleton
    /// vertices each rank owns and their 1/D from `inv`: one `allgatherv`. Returns the
    /// external children (birth, parents, rank, index on that rank) in birth order.
    fn external_children<C: Comm>(
        &mut self,
        comm: &C,
        l: &Local,
        of: &[u32],
        inv: &[f64],
    ) -> Result<Vec<External>, CommError> {
        let (n, nv) = (self.n, l.mesh.coords.len());
        let mut w = Writer::default();
        let mut mine: Vec<u32> = Vec::new();
        // The owned vertices come first, in birth order; a bulk vertex with a skeleton parent
        // is outside the plain stretches (whose parents are all in the bulk).
        // (The initial vertices, before the stretches, have no parents.)
        let candidates = (self.stretches.iter())
            .filter(|s| !s.1)
            .flat_map(|s| s.0.clone());
        for vu in candidates {
            let v = vu as u32;
            if !self.bulk[vu] {
                continue;
            }
            let p = l.mesh.parents[vu].map(|a| if a == NONE { NONE } else { of[a as usize] });
            if p[0] == NONE && p[1] == NONE {
                continue;
            }
            let b = l.birth(vu);
            w.u16(b.sg);
            w.u128(b.key);
            w.u32(p[0]);
            w.u32(p[1]);
            mine.push(v);
            // Own skeleton list travels with it.
        }
        // With it, the skeleton vertices this rank owns and their 1/D.
        let mut msg = Writer::default();
        msg.usize(w.len());
        msg.bytes(w.as_bytes());
        for &o in &self.own_o {
            msg.u32(o);
            msg.f64(inv[self.local[o as usize] as usize]);
        }
        let size = comm.size();
        let all = comm.allgatherv_bytes(msg.as_bytes())?;
        let mut ext: Vec<(Birth, [u32; 2], u32, u32)> = Vec::new(); // birth, parents, rank, i
        let mut own_pieces = Vec::with_capacity(size);
        for r in 0..size {
            let mut whole = Reader::new(all.get(r), "a skeleton extension");
            let len = whole.usize()?;
            let mut rd = Reader::new(whole.bytes(len)?, "a skeleton extension");
            own_pieces.push(whole);
            let mut i = 0u32;
            while !rd.done() {
                let b = Birth {
                    sg: rd.u16()?,
                    key: rd.u128()?,
                };
                let p = [rd.u32()?, rd.u32()?];
                ext.push((b, p, r as u32, i));
                i += 1;
            }
        }
        ext.sort_unstable_by_key(|e| e.0);
        self.n_ext = ext.len();
        self.piece_ext = vec![Vec::new(); size];
        let me = comm.rank() as u32;
        let mut ext_index_of_mine = vec![NONE; mine.len()];
        for (e, rec) in ext.iter().enumerate() {
            self.piece_ext[rec.2 as usize].push(e as u32);
            if rec.2 == me {
                ext_index_of_mine[rec.3 as usize] = e as u32;
            }
        }
        // Each rank's external pieces are in its order = birth order = global order.
        self.own_ext = mine.clone();
        self.ext_of = vec![NONE; nv];
        for (i, &v) in mine.iter().enumerate() {
            self.ext_of[v as usize] = ext_index_of_mine[i];
        }
        self.inv = vec![0.0; n];
        self.piece_o = own_pieces
            .into_iter()
            .map(|mut rd| {
                let mut v = Vec::new();
                while !rd.done() {
                    let o = rd.u32()?;
                    // (An index from the skeleton every rank built alike.)
                    self.inv[o as usize] = rd.f64()?;
                    v.push(o);
                }
                Ok(v)
            })
            .collect::<Result<_, WireError>>()?;
        Ok(ext)
    }

    /// Step 4 of [`Skeleton::build`]: the children lists in birth order (parent, child birth,
    /// child ref, slot) over the skeleton `recs` and the external children `ext`, and the
    /// work vectors.
    fn children(&mut self, recs: &[Candidate], ext: &[External]) {
        let n = self.n;
        let mut edges: Vec<(u32, Birth, u32, u8)> = Vec::new();
        for (o, p) in self.parents.iter().enumerate() {
            for (s, &a) in p.iter().enumerate() {
                if a != NONE {
                    edges.push((a, recs[o].0, o as u32, s as u8));
                }
            }
        }
        for (e, rec) in ext.iter().enumerate() {
            for (s, &a) in rec.1.iter().enumerate() {
                if a != NONE {
                    edges.push((a, rec.0, (n + e) as u32, s as u8));
                }
            }
        }
        edges.sort_unstable_by_key(|e| (e.0, e.1));
        self.child_ptr = vec![0; n + 1];
        for e in &edges {
            self.child_ptr[e.0 as usize + 1] += 1;
        }
        for o in 0..n {
            self.child_ptr[o + 1] += self.child_ptr[o];
        }
        self.child = edges.iter().map(|e| e.2).collect();
        self.slot = edges.iter().map(|e| e.3).collect();
    }

    /// Number of skeleton vertices and of external children.
    pub(crate) fn size(&self) -> (usize, usize) {
        (self.n, self.n_ext)
    }

    /// Whether local vertex v is swept by this rank (owned, not in the skeleton).
    #[cfg(test)]
    pub(crate) fn is_bulk(&self, v: usize) -> bool {
        self.bulk[v]
    }

    /// z = B r with this rank's rows (see the module documentation).
    pub(crate) fn apply<C: Comm>(
        &mut self,
        comm: &C,
        pre: &mut Multilevel,
        l: &Local,
        r: &[f64],
        z: &mut [f64],
    ) -> Result<(), CommError> {
        let mesh = &l.mesh;
        z.copy_from_slice(r);
        pre.restrict(
            mesh,
            z,
            &Bulk {
                sk: self,
                n_owned: l.n_owned,
            },
        );
        if self.n > 0 {
            self.gather(comm, r, z)?;
            self.sweep();
        }
        pre.prolongate(
            mesh,
            z,
            &Bulk {
                sk: self,
                n_owned: l.n_owned,
            },
        );
        for &o in &self.own_o {
            z[self.local[o as usize] as usize] = self.z[o as usize];
        }
        let n_owned = l.n_owned;
        pre.fine_jacobi(r, z, |i| i < n_owned);
        Ok(())
    }

    /// Brings every rank the skeleton residuals and the external children's values.
    fn gather<C: Comm>(&mut self, comm: &C, r: &[f64], z: &[f64]) -> Result<(), CommError> {
        let mut mine = Vec::with_capacity(self.own_o.len() + self.own_ext.len());
        mine.extend(
            self.own_o
                .iter()
                .map(|&o| r[self.local[o as usize] as usize]),
        );
        mine.extend(self.own_ext.iter().map(|&v| z[v as usize]));
        let all = comm.allgatherv(&mine)?;
        for q in 0..comm.size() {
            let piece = all.get(q);
            let (po, pe) = (&self.piece_o[q], &self.piece_ext[q]);
            for (&o, &x) in po.iter().zip(piece) {
                self.z[o as usize] = x;
            }
            for (&e, &x) in pe.iter().zip(&piece[po.len()..]) {
                self.z_ext[e as usize] = x;
            }
        }
        Ok(())
    }

    /// Both sweeps over the skeleton, as sums over each vertex's children in birth order.
    fn sweep(&mut self) {
        let n = self.n;
        for o in (0..n).rev() {
            let (a, b) = (self.child_ptr[o] as usize, self.child_ptr[o + 1] as usize);
            let mut acc = self.z[o];
            for e in (a..b).rev() {
                self.lr[e] = acc;
                let c = self.child[e] as usize;
                let zc = if c < n { self.z[c] } else { self.z_ext[c - n] };
                acc += 0.5 * zc;
            }
            self.z[o] = acc;
        }
        for o in 0..n {
            if self.parents[o][0] == NONE {
                self.z[o] *= self.inv[o];
            }
        }
        for o in 0..n {
            if self.parents[o][0] != NONE {
                self.z[o] = 0.5 * (self.pv[o][0] + self.pv[o][1]) + self.z[o] * self.inv[o];
            }
            let (a, b) = (self.child_ptr[o] as usize, self.child_ptr[o + 1] as usize);
            let mut acc = self.z[o];
            for e in a..b {
                let (c, s) = (self.child[e] as usize, self.slot[e] as usize);
                if c < n {
                    self.pv[c][s] = acc;
                } else {
                    self.pv_ext[c - n][s] = acc;
                }
                acc += self.lr[e] * self.inv[o];
            }
            self.z[o] = acc;
        }
    }
}

/// This rank's bulk as a [`Sweep`]: its owned vertices are `0..n_owned`, in birth order, the
/// initial ones first.
struct Bulk<'a> {
    sk: &'a Skeleton,
    n_owned: usize,
}

impl Sweep for Bulk<'_> {
    #[inline]
    fn local(&self, v: usize) -> bool {
        self.sk.bulk[v]
    }
    fn stretches(&self, later: Range<usize>) -> Cow<'_, [(Range<usize>, bool)]> {
        debug_assert_eq!(later, self.sk.n_initial..self.n_owned);
        Cow::Borrowed(&self.sk.stretches)
    }
    fn parent_value(&self, v: usize, slot: usize) -> f64 {
        self.sk.pv_ext[self.sk.ext_of[v] as usize][slot]
    }
    fn order(&self, _mesh: &Mesh) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let n0 = self.sk.n_initial;
        (0..n0, n0..self.n_owned)
    }
}

/// The vertices of `range` in stretches, in order: `(stretch, true)` where every vertex
/// and both its parents are in the bulk (`bulk`), the sweeps' common case without per-parent
/// checks; `(stretch, false)` between them.
fn stretches(
    bulk: &[bool],
    parents: &[[u32; 2]],
    range: Range<usize>,
) -> Vec<(Range<usize>, bool)> {
    let plain = |v: usize| {
        let [a, b] = parents[v];
        bulk[v] && a != NONE && b != NONE && bulk[a as usize] && bulk[b as usize]
    };
    let mut out: Vec<(Range<usize>, bool)> = Vec::new();
    let (mut start, end) = (range.start, range.end);
    while start < end {
        let p = plain(start);
        let stop = (start + 1..end).find(|&v| plain(v) != p).unwrap_or(end);
        out.push((start..stop, p));
        start = stop;
    }
    out
}

/// A skeleton candidate as a rank wrote it: birth, vertex key, parents' keys.
type Candidate = (Birth, VKey, [VKey; 2]);

/// An external child: birth, skeleton parents, rank, index in that rank's list.
type External = (Birth, [u32; 2], u32, u32);

/// Step 1 of [`Skeleton::build`]: every rank's candidates, sorted by birth and distinct.
fn read_candidates(candidates: &[&[u8]]) -> Result<Vec<Candidate>, WireError> {
    let mut recs: Vec<Candidate> = Vec::new();
    for piece in candidates {
        let mut rd = Reader::new(piece, "a skeleton vertex list");
        while !rd.done() {
            let b = Birth {
                sg: rd.u16()?,
                key: rd.u128()?,
            };
            let k = rd.u128()?;
            let p = [rd.u128()?, rd.u128()?];
            recs.push((b, k, p));
        }
    }
    recs.sort_unstable_by_key(|r| r.0);
    recs.dedup_by_key(|r| r.0);
    Ok(recs)
}
