//! The triangular mesh: flat arrays, `u32` indices, leaf elements in Sierpiński-curve order,
//! newest-vertex bisection with conforming closure.
//!
//! # Layout
//! Element `t` has vertices `tri[t] = [v0, v1, v2]` where `v1` is its *newest vertex* and the
//! *refinement edge* is the edge `v0–v2` opposite it. `nbr[t][k]` is the element across the
//! edge opposite `v_k` ([`NONE`] on the boundary), so `nbr[t][1]` is across the refinement
//! edge. Bisecting `t` at the midpoint `m` of `v0–v2` gives the children `[v0, m, v1]` and
//! `[v1, m, v2]`, stored in that order in place of `t`. Reading `v0` as the point where the
//! curve enters the triangle and `v2` as the point where it leaves, this is the Sierpiński
//! curve: the first child enters at `v0` and leaves at `v1`, where the second enters. Starting
//! from PHAML's four triangles around the centre, listed so that each one leaves where the next
//! enters, the leaf elements stay in space-filling-curve order through any refinement, without
//! a sort. Consecutive ranges of elements are therefore compact pieces of the square, which is
//! what a distributed layer wants for its owned range and what the cache wants for assembly.
//!
//! Vertices are numbered in creation order and never renumbered; each new vertex records the
//! two endpoints of the edge it bisects (`parents`). Within one refinement the new vertices are
//! sorted by the level of the bisection that creates them, so that the vertex order is a valid
//! sequence of single compatible bisections: the multilevel preconditioner
//! ([`crate::solver::Multilevel`]) walks this sequence.

use crate::FemError;
use std::ops::Range;

/// "No element / no vertex": the neighbour of a boundary edge, the parents of an initial vertex.
pub const NONE: u32 = u32::MAX;

/// The neighbour of an element of a rank's part across an edge shared with an element owned
/// by another rank, between a refinement and the rebuild of the ghost layer (never seen by
/// the numerical kernels).
pub(crate) const REMOTE: u32 = u32::MAX - 1;

/// The deepest level an element may reach (levels are stored as `u8`).
pub const MAX_LEVEL: u8 = 200;

/// An adaptive triangulation of the unit square. See the module documentation for the layout.
#[derive(Debug, Clone)]
pub struct Mesh {
    pub(crate) coords: Vec<[f64; 2]>,
    pub(crate) parents: Vec<[u32; 2]>,
    pub(crate) boundary: Vec<bool>,
    pub(crate) n_initial_vertices: usize,
    pub(crate) tri: Vec<[u32; 3]>,
    pub(crate) nbr: Vec<[u32; 3]>,
    pub(crate) level: Vec<u8>,
}

/// How to weigh an element for a partitioner (PHAML's `balance_what` choices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WeightKind {
    /// Every leaf element weighs 1 (PHAML `BALANCE_ELEMENTS`).
    Elements,
    /// Each vertex is associated with the first element (in curve order) that contains it;
    /// an element weighs the number of its associated vertices, so the weights add up to the
    /// number of vertices (PHAML `BALANCE_VERTICES`; for P1 the same as equations).
    Vertices,
    /// Predictive balancing: the number of leaf elements this element will be after the next
    /// refinement, from the marks of that refinement (1 to 4). Balancing on it before refining
    /// means the refinement itself is balanced (PHAML's predictive load balancing).
    PredictedElements,
}

/// Counts from [`Mesh::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshSummary {
    /// Number of vertices.
    pub vertices: usize,
    /// Number of leaf elements.
    pub elements: usize,
    /// Number of edges.
    pub edges: usize,
    /// Number of edges on the boundary of the square.
    pub boundary_edges: usize,
    /// Deepest element level.
    pub max_level: u8,
}

impl Mesh {
    /// PHAML's starting mesh: the four right triangles around the centre of the unit square,
    /// newest vertex at the centre, so every refinement edge is a side of the square.
    pub fn unit_square() -> Mesh {
        let coords = vec![[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.5]];
        let tri = vec![[0, 4, 1], [1, 4, 2], [2, 4, 3], [3, 4, 0]];
        // Element k: edge opposite v0 is shared with k+1, edge opposite v2 with k−1.
        let nbr = (0..4u32)
            .map(|k| [(k + 1) % 4, NONE, (k + 3) % 4])
            .collect();
        Mesh {
            coords,
            parents: vec![[NONE, NONE]; 5],
            boundary: vec![true, true, true, true, false],
            n_initial_vertices: 5,
            tri,
            nbr,
            level: vec![0; 4],
        }
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.coords.len()
    }
    /// Number of leaf elements.
    pub fn num_elements(&self) -> usize {
        self.tri.len()
    }
    /// Vertex coordinates.
    pub fn coords(&self) -> &[[f64; 2]] {
        &self.coords
    }
    /// Element vertices `[v0, newest, v2]`, in space-filling-curve order.
    pub fn elements(&self) -> &[[u32; 3]] {
        &self.tri
    }
    /// `neighbours()[t][k]`: the element across the edge opposite vertex k of t, or [`NONE`].
    pub fn neighbours(&self) -> &[[u32; 3]] {
        &self.nbr
    }
    /// Bisection depth of each element (the initial elements are level 0).
    pub fn levels(&self) -> &[u8] {
        &self.level
    }
    /// Deepest level present.
    pub fn max_level(&self) -> u8 {
        self.level.iter().copied().max().unwrap_or(0)
    }
    /// For each vertex, the endpoints of the edge whose bisection created it ([`NONE`] for the
    /// initial vertices). Vertices are numbered in creation order, so parents come first.
    pub fn vertex_parents(&self) -> &[[u32; 2]] {
        &self.parents
    }
    /// Number of vertices of the initial mesh (they have no parents).
    pub fn num_initial_vertices(&self) -> usize {
        self.n_initial_vertices
    }
    /// Whether each vertex lies on the boundary of the square (a Dirichlet vertex).
    pub fn boundary_vertices(&self) -> &[bool] {
        &self.boundary
    }
    /// Number of interior vertices (the unknowns of the linear system).
    pub fn num_interior_vertices(&self) -> usize {
        self.boundary.iter().filter(|&&b| !b).count()
    }

    /// Writes the centroid of every element into `out` (interleaved x, y: `dim = 2`, the
    /// layout the partitioners take). Panics if `out.len() != 2 * num_elements()`.
    pub fn centroids_into(&self, out: &mut [f64]) {
        assert_eq!(
            out.len(),
            2 * self.tri.len(),
            "centroids_into: out must hold 2 per element"
        );
        for (t, c) in self.tri.iter().zip(out.chunks_exact_mut(2)) {
            let [a, b, d] = t.map(|v| self.coords[v as usize]);
            c[0] = (a[0] + b[0] + d[0]) / 3.0;
            c[1] = (a[1] + b[1] + d[1]) / 3.0;
        }
    }

    /// Writes a work weight for every element into `out` (see [`WeightKind`]).
    /// [`WeightKind::PredictedElements`] needs the marks of the coming refinement; without
    /// them it is the same as [`WeightKind::Elements`]. Panics if `out.len() != num_elements()`
    /// or if `marks` belongs to another mesh.
    pub fn element_weights_into(&self, kind: WeightKind, marks: Option<&Marks>, out: &mut [f64]) {
        assert_eq!(
            out.len(),
            self.tri.len(),
            "element_weights_into: out must hold 1 per element"
        );
        match kind {
            WeightKind::Elements => out.fill(1.0),
            WeightKind::Vertices => {
                let mut seen = vec![false; self.coords.len()];
                for (t, w) in self.tri.iter().zip(out.iter_mut()) {
                    let mut n = 0.0;
                    for &v in t {
                        if !std::mem::replace(&mut seen[v as usize], true) {
                            n += 1.0;
                        }
                    }
                    *w = n;
                }
            }
            WeightKind::PredictedElements => match marks {
                None => out.fill(1.0),
                Some(m) => {
                    assert_eq!(m.bits.len(), self.tri.len(), "marks belong to another mesh");
                    for (&b, w) in m.bits.iter().zip(out.iter_mut()) {
                        *w = children_count(b) as f64;
                    }
                }
            },
        }
    }

    /// Local index in element `n` of the edge it shares with element `t`.
    #[inline]
    pub(crate) fn local_index(&self, n: u32, t: u32) -> usize {
        let nb = &self.nbr[n as usize];
        if nb[0] == t {
            0
        } else if nb[1] == t {
            1
        } else {
            debug_assert_eq!(nb[2], t, "elements {n} and {t} are not neighbours");
            2
        }
    }

    /// Checks the mesh structure from scratch: neighbour relations are symmetric and agree on
    /// the shared edge; every edge is shared by exactly two elements or lies on the boundary of
    /// the square (so there is no hanging node); areas are positive and add up to 1; the
    /// boundary flags and Euler's formula V − E + F = 1 hold; every vertex is used.
    /// An obviously-correct reference for the fast refinement, used by the tests.
    pub fn check(&self) -> Result<MeshSummary, FemError> {
        let fail = |msg: String| Err(FemError::MeshCheck(msg));
        let nv = self.coords.len();
        let mut used = vec![false; nv];
        let mut edges: std::collections::HashMap<(u32, u32), u32> = Default::default();
        let mut area = 0.0;
        for (t, tri) in self.tri.iter().enumerate() {
            for &v in tri {
                if v as usize >= nv {
                    return fail(format!("element {t} names vertex {v} of {nv}"));
                }
                used[v as usize] = true;
            }
            let [a, b, c] = tri.map(|v| self.coords[v as usize]);
            let det = (b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1]);
            if det == 0.0 || !det.is_finite() {
                return fail(format!("element {t} is degenerate"));
            }
            area += det.abs() / 2.0;
            for k in 0..3 {
                let (p, q) = (tri[(k + 1) % 3], tri[(k + 2) % 3]);
                let key = (p.min(q), p.max(q));
                *edges.entry(key).or_insert(0) += 1;
                let n = self.nbr[t][k];
                if n == NONE {
                    let (x, y) = (self.coords[p as usize], self.coords[q as usize]);
                    let on_side = (x[0] == 0.0 && y[0] == 0.0)
                        || (x[0] == 1.0 && y[0] == 1.0)
                        || (x[1] == 0.0 && y[1] == 0.0)
                        || (x[1] == 1.0 && y[1] == 1.0);
                    if !on_side {
                        return fail(format!(
                            "element {t} edge {k} has no neighbour but is inside"
                        ));
                    }
                } else {
                    let nn = &self.nbr[n as usize];
                    let Some(j) = nn.iter().position(|&x| x == t as u32) else {
                        return fail(format!("element {t} names {n} as neighbour, not back"));
                    };
                    let nt = self.tri[n as usize];
                    let (r, s) = (nt[(j + 1) % 3], nt[(j + 2) % 3]);
                    if (r.min(s), r.max(s)) != key {
                        return fail(format!(
                            "elements {t} and {n} disagree on their shared edge"
                        ));
                    }
                }
            }
        }
        if let Some(v) = used.iter().position(|&u| !u) {
            return fail(format!("vertex {v} belongs to no element"));
        }
        let mut boundary_edges = 0;
        for (&(p, q), &count) in &edges {
            match count {
                1 => {
                    boundary_edges += 1;
                    if !self.boundary[p as usize] || !self.boundary[q as usize] {
                        return fail(format!("boundary edge ({p}, {q}) has a vertex not flagged"));
                    }
                }
                2 => {}
                c => return fail(format!("edge ({p}, {q}) is shared by {c} elements")),
            }
        }
        for (v, &b) in self.boundary.iter().enumerate() {
            let [x, y] = self.coords[v];
            let on = x == 0.0 || y == 0.0 || x == 1.0 || y == 1.0;
            if on != b {
                return fail(format!("vertex {v} at ({x}, {y}) has boundary flag {b}"));
            }
        }
        if (area - 1.0).abs() > 1e-9 {
            return fail(format!("element areas add up to {area}, not 1"));
        }
        let (v, e, f) = (nv as i64, edges.len() as i64, self.tri.len() as i64);
        if v - e + f != 1 {
            return fail(format!("Euler: V − E + F = {v} − {e} + {f} ≠ 1"));
        }
        Ok(MeshSummary {
            vertices: nv,
            elements: self.tri.len(),
            edges: edges.len(),
            boundary_edges,
            max_level: self.max_level(),
        })
    }

    /// Refines every element by bisecting the edges flagged in `marks` (which must be closed:
    /// see [`Marks`]). New vertices are appended; their ids are returned. Elements are
    /// rewritten in curve order with their children in place.
    ///
    /// The caller extends its vertex vectors over the returned range, e.g. a solution by
    /// `u[v] = ½(u[a] + u[b])` with `[a, b] = vertex_parents()[v]` (parents are always older
    /// than the refinement) and the Dirichlet data on new boundary vertices.
    ///
    /// ```
    /// use fem_laplace::{Marks, Mesh};
    /// let mut mesh = Mesh::unit_square();
    /// let mut marks = Marks::new(mesh.num_elements());
    /// let added = marks.mark_element(&mesh, 0); // bisect the bottom edge's triangle
    /// let new = mesh.refine(&marks)?;
    /// assert_eq!(new, 5..5 + added);
    /// assert_eq!(mesh.coords()[5], [0.5, 0.0]);
    /// mesh.check()?; // conforming, no hanging node
    /// # Ok::<(), fem_laplace::FemError>(())
    /// ```
    pub fn refine(&mut self, marks: &Marks) -> Result<Range<usize>, FemError> {
        Ok(self.refine_part(marks, None, None, 0, None, None)?.1)
    }

    /// [`Mesh::refine`] on one rank's part of a distributed mesh: only the elements with
    /// `owned[t]` are refined and kept; the others (ghosts) carry the marks of the edges they
    /// share with owned elements and only create the new vertices of those edges where they
    /// come first along the curve, as the serial refinement would. A child's neighbour across
    /// an edge shared with a ghost is [`REMOTE`]. If `creators` is given, it receives for every
    /// new vertex (in the order of their ids) the element that created it and the edge it
    /// bisects. The new element arrays have room for `spare` more elements. If `remote` is
    /// given, it receives every child's edge left [`REMOTE`] (element, edge), in element order.
    ///
    /// Without `split_at` the new vertices are appended (the second range returned; the first
    /// is empty). With it, those created by an element in scope (`owned`) go to a gap opened
    /// for them there (the vertices from there on move up by their number, every reference to
    /// them with them; the first range returned), the ghosts' are appended; each group in the
    /// serial order.
    pub(crate) fn refine_part(
        &mut self,
        marks: &Marks,
        owned: Option<&[bool]>,
        creators: Option<&mut Vec<(u32, u8)>>,
        spare: usize,
        split_at: Option<usize>,
        remote: Option<&mut Vec<(u32, u8)>>,
    ) -> Result<(Range<usize>, Range<usize>), FemError> {
        let ne = self.tri.len();
        let is_owned = |t: usize| owned.is_none_or(|o| o[t]);
        assert_eq!(marks.bits.len(), ne, "marks belong to another mesh");
        let bits = &marks.bits;
        let (first, total) = self.first_children(bits, is_owned)?;
        let mut new = self.new_vertices(marks, creators.is_some() || split_at.is_some());
        let gap = match split_at {
            Some(at) => {
                let low = new.creator.iter().filter(|c| is_owned(c.0 as usize));
                let low = low.count();
                self.open_gap(at, low, &mut new.parents);
                Gap {
                    at: at as u32,
                    len: low as u32,
                    split: Some(owned),
                }
            }
            None => Gap {
                at: u32::MAX,
                len: 0,
                split: None,
            },
        };
        let nv0 = self.coords.len();
        let mut perm = self.place_new_vertices(new, creators, &gap);
        perm.remote = remote.as_ref().map(|_| Vec::new());
        let room = total as usize + spare;
        if let Some(o) = owned {
            self.ghost_links_remote(o);
        }
        if gap.len == 0 {
            self.write_children(bits, &first, room, &mut perm, |v| v, is_owned);
        } else {
            let (at, len) = (gap.at, gap.len);
            let moved = |v: u32| if v >= at { v + len } else { v };
            self.write_children(bits, &first, room, &mut perm, moved, is_owned);
        }
        if let (Some(out), Some(found)) = (remote, perm.remote.take()) {
            *out = found;
        }
        debug_assert_eq!(self.tri.len(), total as usize);
        let (at, low) = (gap.at as usize, gap.len as usize);
        let high = perm.order.len() - low;
        Ok((at.min(nv0)..at.min(nv0) + low, nv0..nv0 + high))
    }

    /// Before [`Mesh::write_children`] on a rank's part: every owned element's link to a ghost
    /// (`!owned[g]`) becomes [`REMOTE`], as its children's will be, so that the children's
    /// links need no ownership test per edge. The ghosts' own links are left; they are not
    /// refined and the new links replace all of them.
    fn ghost_links_remote(&mut self, owned: &[bool]) {
        for g in (0..self.tri.len()).filter(|&g| !owned[g]) {
            for k in 0..3 {
                let n = self.nbr[g][k];
                if n != NONE && n != REMOTE && owned[n as usize] {
                    let j = self.local_index(n, g as u32);
                    self.nbr[n as usize][j] = REMOTE;
                }
            }
        }
    }

    /// Moves the vertices from `at` on up by `len` (coordinates, parents, boundary flags, and
    /// every parent reference, also those of the new vertices `new_parents`), leaving `len`
    /// placeholders at `at` for [`Mesh::place_new_vertices`] to fill.
    fn open_gap(&mut self, at: usize, len: usize, new_parents: &mut [[u32; 2]]) {
        if len == 0 {
            return;
        }
        let (a, n) = (at as u32, len as u32);
        // A select rather than a branch, over flat slices: the loop vectorises (it runs over
        // every vertex's parents at every refinement over ranks).
        let shift = |vs: &mut [u32]| {
            for v in vs {
                *v = if *v != NONE && *v >= a { *v + n } else { *v };
            }
        };
        shift(self.parents.as_flattened_mut());
        shift(new_parents.as_flattened_mut());
        open_run(&mut self.coords, at, len, [0.0; 2]);
        open_run(&mut self.parents, at, len, [NONE; 2]);
        open_run(&mut self.boundary, at, len, false);
    }

    /// Step 1 of [`Mesh::refine_part`]: the first child of each element in the new order (and
    /// the total after the last), with the number of children.
    fn first_children(
        &self,
        bits: &[u8],
        is_owned: impl Fn(usize) -> bool,
    ) -> Result<(Vec<u32>, u32), FemError> {
        let ne = self.tri.len();
        let mut first = Vec::with_capacity(ne + 1);
        let mut total = 0u32;
        for (t, &b) in bits.iter().enumerate() {
            first.push(total);
            let c = if is_owned(t) { children_count(b) } else { 0 };
            if c > 1 && self.level[t] >= MAX_LEVEL - 1 {
                return Err(FemError::LevelLimit {
                    element: t,
                    level: self.level[t],
                    limit: MAX_LEVEL,
                });
            }
            total += c;
        }
        first.push(total);
        Ok((first, total))
    }

    /// Step 2 of [`Mesh::refine_part`]: one new vertex per marked edge, created by the
    /// element that comes first along the curve and written into both elements' slots.
    /// Provisional ids in curve order.
    fn new_vertices(&self, marks: &Marks, with_creators: bool) -> NewVertices {
        let (ne, bits) = (self.tri.len(), &marks.bits);
        let mut new = NewVertices {
            mid: vec![[NONE; 3]; ne],
            parents: Vec::with_capacity(marks.new_vertices),
            generation: Vec::with_capacity(marks.new_vertices),
            boundary: Vec::with_capacity(marks.new_vertices),
            creator: Vec::new(),
        };
        for t in 0..ne {
            let b = bits[t];
            if b == 0 {
                continue;
            }
            let tri = self.tri[t];
            // Refinement edge first, then the others (only the order of ids depends on it).
            for k in [1usize, 0, 2] {
                if b & (1 << k) == 0 || new.mid[t][k] != NONE {
                    continue;
                }
                let n = self.nbr[t][k];
                let id = new.parents.len() as u32;
                new.mid[t][k] = id;
                if n != NONE {
                    let j = self.local_index(n, t as u32);
                    debug_assert!(bits[n as usize] & (1 << j) != 0, "marks are not closed");
                    new.mid[n as usize][j] = id;
                }
                new.parents.push([tri[(k + 1) % 3], tri[(k + 2) % 3]]);
                new.generation.push(self.level[t] + u8::from(k != 1));
                new.boundary.push(n == NONE);
                if with_creators {
                    new.creator.push((t as u32, k as u8));
                }
            }
        }
        new
    }

    /// Step 3 of [`Mesh::refine_part`]: final ids by a stable counting sort of the new
    /// vertices by bisection level, so that the vertex order is a sequence of compatible
    /// bisections (coarser ones first); their coordinates, parents and boundary flags; each
    /// one's creator into `creators` (in the order of the final ids).
    fn place_new_vertices(
        &mut self,
        new: NewVertices,
        creators: Option<&mut Vec<(u32, u8)>>,
        gap: &Gap<'_>,
    ) -> Placed {
        let n_new = new.parents.len();
        let nv0 = self.coords.len();
        let max_gen = new.generation.iter().copied().max().unwrap_or(0) as usize;
        let mut start = vec![0u32; max_gen + 2];
        for &g in &new.generation {
            start[g as usize + 1] += 1;
        }
        for g in 0..=max_gen {
            start[g + 1] += start[g];
        }
        // The serial order (rank) of each provisional id, then its id: after the old vertices,
        // or (split) in the gap when its creator is low, each group in rank order.
        let mut order = vec![0u32; n_new];
        for (p, &g) in new.generation.iter().enumerate() {
            order[p] = start[g as usize];
            start[g as usize] += 1;
        }
        if let Some(owned) = gap.split {
            let low = |t: usize| owned.is_none_or(|o| o[t]);
            let mut by_rank = vec![0u32; n_new];
            for (p, &r) in order.iter().enumerate() {
                by_rank[r as usize] = p as u32;
            }
            let (mut lo, mut hi) = (gap.at, nv0 as u32);
            for &p in &by_rank {
                let slot = if low(new.creator[p as usize].0 as usize) {
                    &mut lo
                } else {
                    &mut hi
                };
                order[p as usize] = *slot;
                *slot += 1;
            }
            debug_assert_eq!(lo, gap.at + gap.len);
        } else {
            for o in &mut order {
                *o += nv0 as u32;
            }
        }
        let nv = nv0 + n_new - gap.len as usize;
        if let Some(out) = creators {
            // In the order of the ids: the gap's, then the appended ones.
            let base = |id: u32| {
                if id >= nv0 as u32 {
                    id - nv0 as u32 + gap.len
                } else {
                    id - gap.at
                }
            };
            out.clear();
            out.resize(n_new, (0, 0));
            for (p, &c) in new.creator.iter().enumerate() {
                out[base(order[p]) as usize] = c;
            }
        }
        self.coords.reserve_exact(nv - nv0);
        self.parents.reserve_exact(nv - nv0);
        self.boundary.reserve_exact(nv - nv0);
        self.coords.resize(nv, [0.0; 2]);
        self.parents.resize(nv, [NONE; 2]);
        self.boundary.resize(nv, false);
        for (p, &v) in order.iter().enumerate() {
            let v = v as usize;
            let [a, b] = new.parents[p];
            let (pa, pb) = (self.coords[a as usize], self.coords[b as usize]);
            self.coords[v] = [0.5 * (pa[0] + pb[0]), 0.5 * (pa[1] + pb[1])];
            self.parents[v] = [a, b];
            self.boundary[v] = new.boundary[p];
        }
        Placed {
            mid: new.mid,
            order,
            remote: None,
        }
    }

    /// Step 4 of [`Mesh::refine_part`]: the children, in curve order, with their neighbours,
    /// replacing the element arrays (with room for `room` elements); `moved` gives an old
    /// vertex's id after a split's gap (the old ids still name the vertices here: the
    /// neighbours' vertices are compared in the old numbering).
    fn write_children(
        &mut self,
        bits: &[u8],
        first: &[u32],
        room: usize,
        placed: &mut Placed,
        moved: impl Fn(u32) -> u32 + Copy,
        is_owned: impl Fn(usize) -> bool,
    ) {
        let mut remote = placed.remote.take();
        let ne = self.tri.len();
        let mut tri_new: Vec<[u32; 3]> = Vec::with_capacity(room);
        let mut nbr_new: Vec<[u32; 3]> = Vec::with_capacity(room);
        let mut lev_new: Vec<u8> = Vec::with_capacity(room);
        let ctx = Ctx {
            mesh: self,
            bits,
            first,
        };
        for t in 0..ne {
            if !is_owned(t) {
                continue;
            }
            let b = bits[t];
            let [v0, v1, v2] = self.tri[t];
            let [w0, w1, w2] = [v0, v1, v2].map(moved);
            let lev = self.level[t];
            let nb = self.nbr[t];
            let from = nbr_new.len();
            // Whether a child got a remote edge (its neighbour is remote or a ghost).
            let outer = std::cell::Cell::new(false);
            // The new index of the neighbour's piece across (half of) our edge k.
            let ext = |k: usize, x: u32| -> u32 {
                let n = nb[k];
                if n == NONE {
                    NONE
                } else if n == REMOTE {
                    // (Also a ghost's: see `ghost_links_remote`.)
                    outer.set(true);
                    REMOTE
                } else {
                    ctx.child_across(n, t as u32, x)
                }
            };
            if b == 0 {
                tri_new.push([w0, w1, w2]);
                lev_new.push(lev);
                // x: any vertex of the shared edge (the edge is not bisected).
                nbr_new.push([ext(0, v1), ext(1, v0), ext(2, v0)]);
            } else {
                let f = first[t];
                let pm = |k: usize| placed.order[placed.mid[t][k] as usize];
                let m = pm(1);
                let b0 = b & 1 != 0;
                let b2 = b & 4 != 0;
                let s2 = f + 1 + u32::from(b2);
                if b2 {
                    let m2 = pm(2);
                    tri_new.push([w0, m2, m]);
                    nbr_new.push([f + 1, ext(1, v0), ext(2, v0)]);
                    tri_new.push([m, m2, w1]);
                    nbr_new.push([ext(2, v1), s2, f]);
                    lev_new.extend([lev + 2, lev + 2]);
                } else {
                    tri_new.push([w0, m, w1]);
                    nbr_new.push([s2, ext(2, v0), ext(1, v0)]);
                    lev_new.push(lev + 1);
                }
                if b0 {
                    let m0 = pm(0);
                    tri_new.push([w1, m0, m]);
                    nbr_new.push([s2 + 1, s2 - 1, ext(0, v1)]);
                    tri_new.push([m, m0, w2]);
                    nbr_new.push([ext(0, v2), ext(1, v2), s2]);
                    lev_new.extend([lev + 2, lev + 2]);
                } else {
                    tri_new.push([w1, m, w2]);
                    nbr_new.push([ext(1, v2), ext(0, v1), s2 - 1]);
                    lev_new.push(lev + 1);
                }
            }
            if outer.get()
                && let Some(out) = remote.as_mut()
            {
                for (c, nb) in nbr_new.iter().enumerate().skip(from) {
                    for (k, &n) in nb.iter().enumerate() {
                        if n == REMOTE {
                            out.push((c as u32, k as u8));
                        }
                    }
                }
            }
        }
        self.tri = tri_new;
        self.nbr = nbr_new;
        self.level = lev_new;
        placed.remote = remote;
    }
}

/// The new vertices of a refinement before their final ids ([`Mesh::refine_part`] step 2):
/// each element's provisional id per edge (`NONE` where the edge is not bisected), and per
/// new vertex its parents, bisection level, boundary flag and (if asked) creator.
struct NewVertices {
    mid: Vec<[u32; 3]>,
    parents: Vec<[u32; 2]>,
    generation: Vec<u8>,
    boundary: Vec<bool>,
    creator: Vec<(u32, u8)>,
}

/// The gap of a split refinement ([`Mesh::refine_part`]) once its length is known (`at` is
/// `u32::MAX` and `len` 0 without one); `split` holds the scope whose elements' new vertices
/// go there.
struct Gap<'a> {
    at: u32,
    len: u32,
    split: Option<Option<&'a [bool]>>,
}

/// The new vertices placed ([`Mesh::refine_part`] step 3): each element's provisional id per
/// edge, and each provisional id's final vertex id; `remote` (if asked) receives the children's
/// edges left [`REMOTE`] (step 4).
struct Placed {
    mid: Vec<[u32; 3]>,
    order: Vec<u32>,
    remote: Option<Vec<(u32, u8)>>,
}

/// Read-only view used while writing the children.
struct Ctx<'a> {
    mesh: &'a Mesh,
    bits: &'a [u8],
    first: &'a [u32],
}

impl Ctx<'_> {
    /// The new index of the piece of old element `n` that touches old element `t` along their
    /// shared edge, on the half that contains vertex `x` if that edge is bisected. An
    /// unrefined `n` (most neighbours) is its own single piece: that test is inlined into the
    /// caller, the refined case is a call ([`Ctx::refined_child_across`]; inlining it too
    /// costs the refinement more, 538 M -> 565 M instructions over the run).
    #[inline(always)]
    fn child_across(&self, n: u32, t: u32, x: u32) -> u32 {
        let nu = n as usize;
        if self.bits[nu] == 0 {
            return self.first[nu];
        }
        self.refined_child_across(n, t, x)
    }

    /// [`Ctx::child_across`] for a neighbour `n` that the refinement bisects.
    #[inline(never)]
    fn refined_child_across(&self, n: u32, t: u32, x: u32) -> u32 {
        let nu = n as usize;
        let b = self.bits[nu];
        let f = self.first[nu];
        debug_assert_ne!(b, 0, "element {n} is refined");
        let j = self.mesh.local_index(n, t);
        let tn = self.mesh.tri[nu];
        let b2 = b & 4 != 0;
        match j {
            1 => {
                if x == tn[0] {
                    f
                } else {
                    self.first[nu + 1] - 1
                }
            }
            2 => {
                if b2 && x != tn[0] {
                    f + 1
                } else {
                    f
                }
            }
            _ => {
                let s2 = f + 1 + u32::from(b2);
                if b & 1 != 0 && x != tn[1] { s2 + 1 } else { s2 }
            }
        }
    }
}

/// Inserts `len` copies of `x` at `at` (the elements from `at` on move up by `len`): what
/// `v.splice(at..at, repeat_n(x, len))` does, as bulk fills and one move of the tail rather
/// than an element at a time (a refinement over ranks opens a gap of a tenth of the vertices
/// in seven arrays).
pub(crate) fn open_run<T: Copy>(v: &mut Vec<T>, at: usize, len: usize, x: T) {
    let old = v.len();
    assert!(at <= old, "open_run: {at} is beyond the {old} elements");
    v.resize(old + len, x);
    v.copy_within(at..old, at + len);
    v[at..at + len].fill(x);
}

/// Number of leaf elements an element becomes under edge marks `b` (bit k: edge opposite v_k).
#[inline]
pub(crate) fn children_count(b: u8) -> u32 {
    if b == 0 {
        1
    } else {
        2 + u32::from(b & 1) + u32::from((b >> 2) & 1)
    }
}

/// Edge marks for the next refinement, closed under the newest-vertex-bisection rules: an
/// element with any marked edge has its refinement edge marked, and both elements sharing an
/// edge agree on it. Marking element t ([`Marks::mark_element`]) marks its refinement edge and
/// closes; [`Marks::new_vertices`] counts the vertices the refinement will create.
#[derive(Debug, Clone)]
pub struct Marks {
    pub(crate) bits: Vec<u8>,
    new_vertices: usize,
    stack: Vec<(u32, u8)>,
}

impl Marks {
    /// No marks on a mesh with `num_elements` elements.
    pub fn new(num_elements: usize) -> Marks {
        Marks {
            bits: vec![0; num_elements],
            new_vertices: 0,
            stack: Vec::new(),
        }
    }

    /// Marks given as edge bits per element (bit k: the edge opposite vertex k), which the
    /// caller has closed, with the number of vertices they create on this rank.
    pub(crate) fn from_bits(bits: Vec<u8>, new_vertices: usize) -> Marks {
        Marks {
            bits,
            new_vertices,
            stack: Vec::new(),
        }
    }

    /// Number of vertices the refinement will create (one per marked edge).
    pub fn new_vertices(&self) -> usize {
        self.new_vertices
    }

    /// Number of elements with at least one marked edge.
    pub fn marked_elements(&self) -> usize {
        self.bits.iter().filter(|&&b| b != 0).count()
    }

    /// The edge bits of each element (bit k: the edge opposite vertex k).
    pub fn bits(&self) -> &[u8] {
        &self.bits
    }

    /// Whether element t will be bisected.
    pub fn is_marked(&self, t: usize) -> bool {
        self.bits[t] != 0
    }

    /// Marks element `t` for bisection and closes the marks (the closure may reach far: a
    /// neighbour across a refinement edge that is not its own must be bisected first).
    /// Returns the number of vertices this added.
    pub fn mark_element(&mut self, mesh: &Mesh, t: usize) -> usize {
        self.mark_edge(mesh, t, 1)
    }

    /// Marks both children of element `t` for a second bisection in the same refinement
    /// (t becomes four elements: its three edges are bisected) and closes the marks.
    /// Returns the number of vertices this added.
    pub fn mark_element_twice(&mut self, mesh: &Mesh, t: usize) -> usize {
        self.mark_edge(mesh, t, 1) + self.mark_edge(mesh, t, 0) + self.mark_edge(mesh, t, 2)
    }

    /// Marks edge `k` (opposite vertex k) of element `t` and closes the marks. Returns the
    /// number of vertices this added.
    pub fn mark_edge(&mut self, mesh: &Mesh, t: usize, k: usize) -> usize {
        assert_eq!(
            self.bits.len(),
            mesh.tri.len(),
            "marks belong to another mesh"
        );
        assert!(k < 3, "an element has edges 0, 1, 2");
        let before = self.new_vertices;
        self.stack.push((t as u32, k as u8));
        while let Some((t, k)) = self.stack.pop() {
            let tu = t as usize;
            if self.bits[tu] & (1 << k) != 0 {
                continue;
            }
            self.bits[tu] |= 1 << k;
            let n = mesh.nbr[tu][k as usize];
            if n == NONE {
                self.new_vertices += 1;
            } else {
                let j = mesh.local_index(n, t);
                if self.bits[n as usize] & (1 << j) == 0 {
                    self.new_vertices += 1;
                    self.stack.push((n, j as u8));
                }
            }
            if k != 1 {
                self.stack.push((t, 1));
            }
        }
        self.new_vertices - before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_run_inserts_like_splice() {
        for (n, at, len) in [
            (0, 0, 0),
            (0, 0, 3),
            (5, 0, 2),
            (5, 5, 4),
            (7, 3, 1),
            (9, 2, 20),
        ] {
            let v: Vec<u32> = (0..n).collect();
            let mut a = v.clone();
            a.splice(at..at, std::iter::repeat_n(99, len));
            let mut b = v.clone();
            open_run(&mut b, at, len, 99);
            assert_eq!(a, b, "n {n}, at {at}, len {len}");
        }
    }

    fn uniform(mesh: &mut Mesh) {
        let mut marks = Marks::new(mesh.num_elements());
        for t in 0..mesh.num_elements() {
            marks.mark_element(mesh, t);
        }
        mesh.refine(&marks).unwrap();
    }

    #[test]
    fn initial_mesh_is_phamls_four_triangles() {
        let m = Mesh::unit_square();
        let s = m.check().unwrap();
        assert_eq!(
            (s.vertices, s.elements, s.edges, s.boundary_edges),
            (5, 4, 8, 4)
        );
        assert_eq!(m.num_interior_vertices(), 1);
    }

    #[test]
    fn uniform_refinement_counts() {
        // Bisecting every element once doubles the elements; after 2j+1 rounds the vertices
        // form a (2^{j+1}+1)² grid.
        let mut m = Mesh::unit_square();
        for round in 1..=9u32 {
            let before = m.check().unwrap();
            uniform(&mut m);
            let s = m.check().unwrap();
            assert_eq!(s.elements, 2 * before.elements);
            assert_eq!(s.max_level as u32, round);
            if round % 2 == 1 {
                let side = (1usize << (round / 2 + 1)) + 1;
                assert_eq!(s.vertices, side * side, "round {round}");
            }
        }
        assert_eq!(m.num_vertices(), 33 * 33);
    }

    /// The leaf elements follow a continuous curve: each element's exit vertex is the next
    /// one's entry vertex (and the closed loop returns to the start).
    #[test]
    fn elements_stay_in_sierpinski_order() {
        let mut m = Mesh::unit_square();
        for round in 0..6 {
            let mut marks = Marks::new(m.num_elements());
            // Refine near the corner (0,0) only.
            for t in 0..m.num_elements() {
                let c = m.tri[t].map(|v| m.coords[v as usize]);
                if c.iter().any(|p| p[0] + p[1] < 0.5f64.powi(round)) {
                    marks.mark_element(&m, t);
                }
            }
            m.refine(&marks).unwrap();
            m.check().unwrap();
            let n = m.num_elements();
            for t in 0..n {
                assert_eq!(
                    m.tri[t][2],
                    m.tri[(t + 1) % n][0],
                    "curve breaks after element {t}"
                );
            }
        }
    }

    #[test]
    fn single_mark_closure_reaches_the_boundary() {
        // Marking one element of a uniform mesh creates its own vertex and a compatible pair.
        let mut m = Mesh::unit_square();
        uniform(&mut m);
        uniform(&mut m);
        let n0 = m.num_vertices();
        let mut marks = Marks::new(m.num_elements());
        let added = marks.mark_element(&m, 7);
        assert!(added >= 1);
        let r = m.refine(&marks).unwrap();
        assert_eq!(r, n0..n0 + added);
        m.check().unwrap();
    }

    #[test]
    fn new_vertex_parents_are_old_and_ordered_by_level() {
        let mut m = Mesh::unit_square();
        for _ in 0..4 {
            let mut marks = Marks::new(m.num_elements());
            for t in (0..m.num_elements()).step_by(3) {
                marks.mark_element(&m, t);
            }
            let r = m.refine(&marks).unwrap();
            for v in r.clone() {
                let [a, b] = m.parents[v];
                assert!((a as usize) < r.start && (b as usize) < r.start);
                let pa = m.coords[a as usize];
                let pb = m.coords[b as usize];
                assert_eq!(m.coords[v], [0.5 * (pa[0] + pb[0]), 0.5 * (pa[1] + pb[1])]);
            }
            m.check().unwrap();
        }
    }

    #[test]
    fn refining_past_the_level_limit_is_an_error() {
        let mut m = Mesh::unit_square();
        let err = loop {
            // Bisect whatever touches the corner (0, 0): one more level per round.
            let mut marks = Marks::new(m.num_elements());
            for t in 0..m.num_elements() {
                if m.tri[t].contains(&0) {
                    marks.mark_element(&m, t);
                }
            }
            match m.refine(&marks) {
                Ok(_) => assert!(m.max_level() < MAX_LEVEL),
                Err(e) => break e.to_string(),
            }
        };
        assert!(
            err.contains("cannot be bisected further") && err.contains("level limit 200"),
            "{err}"
        );
        m.check().unwrap();
    }

    #[test]
    fn weights_and_centroids() {
        let mut m = Mesh::unit_square();
        uniform(&mut m);
        let mut w = vec![0.0; m.num_elements()];
        m.element_weights_into(WeightKind::Vertices, None, &mut w);
        assert_eq!(w.iter().sum::<f64>() as usize, m.num_vertices());
        m.element_weights_into(WeightKind::Elements, None, &mut w);
        assert_eq!(w.iter().sum::<f64>() as usize, m.num_elements());
        let mut marks = Marks::new(m.num_elements());
        marks.mark_element(&m, 0);
        m.element_weights_into(WeightKind::PredictedElements, Some(&marks), &mut w);
        let predicted = w.iter().sum::<f64>() as usize;
        let mut c = vec![0.0; 2 * m.num_elements()];
        m.centroids_into(&mut c);
        let area_weighted: f64 = c.chunks(2).map(|p| p[0]).sum::<f64>() / m.num_elements() as f64;
        assert!((area_weighted - 0.5).abs() < 1e-12);
        m.refine(&marks).unwrap();
        assert_eq!(predicted, m.num_elements());
    }
}
