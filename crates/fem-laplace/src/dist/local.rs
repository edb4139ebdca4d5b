//! One rank's part of the distributed mesh, and how it changes in a step: refinement of the
//! owned elements, migration to a new partition, and the rebuild of the ghost layer and the
//! vertex ownership.
//!
//! # What a rank stores
//! - **Elements**: its owned leaf elements and one ghost layer (every element that shares a
//!   vertex with an owned element), all in one array sorted by tree key, hence in curve
//!   order (`ekey`, `eowner`, and the element arrays of [`Mesh`]). Neighbour links are local
//!   indices; an owned element's neighbours are always present, a ghost's may be [`NONE`].
//! - **Vertices**: a table holding the vertices of its elements and all their ancestors in
//!   the bisection hierarchy (the vertices whose bisections created them), so that every
//!   vertex's parents are in the table. After a rebuild the owned vertices come first, in
//!   birth order (the serial numbering), and the others after them; the table is a few
//!   ranges each sorted by birth (`runs`), which is also how a vertex is looked up: a sorted
//!   list of births is matched against each run by galloping. A refinement puts the
//!   vertices that owned elements create right after the owned ones, so that on a kept
//!   partition the layout holds without renumbering. Each vertex has an owner (`vowner`):
//!   the rank owning the element that comes first along the curve among the elements around
//!   it. Vertices no element needs any more stay as dead entries until a compaction.
//!
//! # A step's changes (see [`Local::refine`] and [`Local::rebuild`])
//! 1. The owned elements are bisected by the agreed marks; ghosts create the new vertices of
//!    the edges they share with owned elements where they come first along the curve, as the
//!    serial refinement would. Ghosts are then dropped.
//! 2. Elements whose new part is another rank move there with their vertices and those
//!    vertices' ancestors (keys, births, parents, solution values); a receiver merges what it
//!    already has by birth.
//! 3. Edges left unlinked are matched by their midpoint; the ends of edges shared with other
//!    ranks are the interface vertices. Each interface vertex has a coordinator rank (a hash
//!    of its key): every rank holding it reports the smallest key of its elements around it,
//!    the coordinator names the owner and the ranks involved, and each of those sends the
//!    others its elements around the vertex: the ghost layer. On a kept partition the
//!    coordinator is not asked: a refinement keeps every vertex's ranks and owner, and a
//!    vertex it creates on an edge shared with a ghost involves the two ranks of that edge
//!    and belongs to its creator's ([`Local::kept_involvement`]).

use super::keys::{
    Birth, EKey, Keys, LEVEL_LIMIT, Runs, VKey, edge_key, gallop, key_point, merge_in_place,
    merge_in_place_map, mix, vertex_key,
};
use crate::FemError;
use crate::mesh::{Marks, Mesh, NONE, REMOTE, open_run};
use crate::problem::{ExactSolution, dirichlet_value};
use comm::wire::{Outbox, Reader, WireError, Writer};
use comm::{Comm, CommError};
use drum_model::monitor::thread_cpu_seconds;
use std::collections::HashMap;

/// Debug timing of the phases of a step (`FEM_DEBUG_TIMES=1`): the wall time since `t`,
/// and the CPU time this thread ran and the page faults it took since its previous lap (a
/// fresh page costs a fault and its clearing, and threads of one process fault on shared
/// locks).
pub(crate) fn lap(t: &mut std::time::Instant, what: &str) {
    if std::env::var_os("FEM_DEBUG_TIMES").is_some() {
        thread_local! {
            static LAST: std::cell::Cell<(f64, i64)> = const { std::cell::Cell::new((0.0, 0)) };
        }
        let now = (thread_cpu_seconds(), thread_page_faults());
        let (cpu, faults) = LAST.with(|c| c.replace(now));
        eprintln!(
            "    {what}: {:.2} ms ({:.2} ms CPU, {} page faults since the last lap)",
            t.elapsed().as_secs_f64() * 1e3,
            (now.0 - cpu) * 1e3,
            now.1 - faults
        );
    }
    *t = std::time::Instant::now();
}

/// The page faults (minor and major) the calling thread has taken (0 where unknown).
fn thread_page_faults() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed rusage is a valid value for getrusage to overwrite.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage; RUSAGE_THREAD is a Linux constant.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            return ru.ru_minflt + ru.ru_majflt;
        }
    }
    0
}

/// Owner of a vertex not (yet) known on this rank.
pub(crate) const UNKNOWN: u32 = u32::MAX;

/// One rank's part of the mesh (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Local {
    pub(crate) rank: u32,
    pub(crate) size: usize,
    pub(crate) mesh: Mesh,
    /// Each local element's tree key (its place in the curve); with one rank, which never
    /// names an element to another, placeholders after the first refinement.
    pub(crate) ekey: Keys,
    pub(crate) eowner: Vec<u32>,
    /// Each vertex's birth ([`Birth`]: `sg`, `key`), the identity ranks give a vertex when
    /// they speak of it; with one rank (which never does) only the initial vertices have one.
    pub(crate) bsg: Vec<u16>,
    pub(crate) bkey: Vec<u128>,
    pub(crate) vowner: Vec<u32>,
    /// After a rebuild the owned vertices are `0..n_owned`, in birth order, and the others
    /// follow (in runs sorted by birth: one after a renumbering, more after refinements that
    /// kept the layout, see [`Local::refine`]): kernels run over a prefix, sweeps over a
    /// range.
    pub(crate) n_owned: usize,
    /// Ranges of the table, each sorted by birth (where a birth is looked up).
    pub(crate) runs: Vec<std::ops::Range<u32>>,
    /// The solution (valid on the vertices of local elements).
    pub(crate) u: Vec<f64>,
    /// The ghost elements.
    pub(crate) ghosts: Vec<u32>,
    /// Owned elements' edges (element, edge) whose neighbour is a ghost.
    pub(crate) shared: Vec<(u32, u8)>,
    /// Rebuilds since dead vertices were last dropped.
    since_drop: u32,
    /// The number of vertices this rank is expected to hold at most in the run (0: no
    /// expectation): the per-vertex arrays get this room at once ([`Local::reserve_vertices`]).
    pub(crate) vertex_hint: usize,
    /// Whether `vowner` gives this rank every vertex of an owned element and no element
    /// moved since ([`Local::rebuild`] then skips that pass).
    owners_kept: bool,
    /// The owned elements' edges a refinement left [`REMOTE`] (for the next rebuild).
    remote: Option<Vec<(u32, u8)>>,
    /// The ranks with owned elements around each interface vertex (by its key) at the last
    /// rebuild, and the other rank at each vertex a refinement created on an edge shared with
    /// a ghost: on a kept partition they give every interface vertex's ranks without the
    /// coordinator round ([`Local::kept_involvement`]).
    ranks_of: HashMap<VKey, Vec<u32>>,
    new_ranks: HashMap<VKey, u32>,
}

/// Counts of one migration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Elements sent by this rank.
    pub(crate) elements: usize,
    /// Bytes sent by this rank.
    pub(crate) bytes: usize,
}

/// An interface vertex after the coordinator round: the vertex, the ranks holding elements
/// around it, and this rank's elements around it.
type Around = (u32, Vec<u32>, Vec<u32>);

/// A vertex as it travels between ranks.
#[derive(Debug, Clone, Copy)]
struct VertexRecord {
    birth: Birth,
    key: VKey,
    /// Parents as indices in the same batch.
    parents: [u32; 2],
    boundary: bool,
    /// The solution value is current (a vertex of a sent element; an ancestor's may not be).
    current: bool,
    u: f64,
    owner: u32,
}

/// Scratch of the batches of one round of [`Local::write_elements`]: for each vertex of the
/// table, the destination it was last written for and its index in that batch; for each
/// element, its index in the batch being written ([`NONE`] outside it). Arrays the size of
/// the table for a large round (a large migration looks up every vertex and neighbour of
/// every element it sends), hash maps for a small one (a ghost layer of a few thousand
/// elements: arrays would be table-sized memory to clear, and to fault in, for it).
enum Batches {
    /// `stamp[v]` (the destination), `vpos[v]`, `epos[t]`.
    Dense {
        stamp: Vec<u32>,
        vpos: Vec<u32>,
        epos: Vec<u32>,
    },
    /// Vertex → (destination, index); element → index.
    Sparse {
        vert: HashMap<u32, (u32, u32), BuildU32>,
        elem: HashMap<u32, u32, BuildU32>,
    },
}

impl Batches {
    /// Scratch for a round that writes `n` elements from a table of `nv` vertices and `ne`
    /// elements.
    fn new(nv: usize, ne: usize, n: usize) -> Batches {
        if n.saturating_mul(32) < ne {
            Batches::Sparse {
                vert: HashMap::with_capacity_and_hasher(2 * n, BuildU32::default()),
                elem: HashMap::with_capacity_and_hasher(n, BuildU32::default()),
            }
        } else {
            Batches::Dense {
                stamp: vec![u32::MAX; nv],
                vpos: vec![NONE; nv],
                epos: vec![NONE; ne],
            }
        }
    }

    /// Marks vertex v as written for `dest`; whether it was not yet.
    #[inline]
    fn first_for(&mut self, v: u32, dest: u32) -> bool {
        match self {
            Batches::Dense { stamp, .. } => {
                let s = &mut stamp[v as usize];
                let new = *s != dest;
                *s = dest;
                new
            }
            Batches::Sparse { vert, .. } => {
                let e = vert.entry(v).or_insert((u32::MAX, NONE));
                let new = e.0 != dest;
                e.0 = dest;
                new
            }
        }
    }

    /// Vertex v's index in the batch being written.
    #[inline]
    fn set_vpos(&mut self, v: u32, i: u32) {
        match self {
            Batches::Dense { vpos, .. } => vpos[v as usize] = i,
            Batches::Sparse { vert, .. } => {
                vert.entry(v).or_insert((u32::MAX, NONE)).1 = i;
            }
        }
    }

    /// Vertex v's index in the batch being written (a vertex of it or an ancestor of one).
    #[inline]
    fn vpos(&self, v: u32) -> u32 {
        match self {
            Batches::Dense { vpos, .. } => vpos[v as usize],
            Batches::Sparse { vert, .. } => vert.get(&v).map_or(NONE, |e| e.1),
        }
    }

    /// Element t's index in the batch being written (`i`), or none ([`NONE`]).
    #[inline]
    fn set_epos(&mut self, t: u32, i: u32) {
        match self {
            Batches::Dense { epos, .. } => epos[t as usize] = i,
            Batches::Sparse { elem, .. } => {
                if i == NONE {
                    elem.remove(&t);
                } else {
                    elem.insert(t, i);
                }
            }
        }
    }

    /// Element t's index in the batch being written, or [`NONE`].
    #[inline]
    fn epos(&self, t: u32) -> u32 {
        match self {
            Batches::Dense { epos, .. } => epos[t as usize],
            Batches::Sparse { elem, .. } => elem.get(&t).copied().unwrap_or(NONE),
        }
    }
}

/// A hasher for `u32` keys (vertex and element indices): one multiplication.
#[derive(Default, Clone, Copy)]
struct U32Hasher(u64);

impl std::hash::Hasher for U32Hasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = (u64::from(x) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// [`U32Hasher`]s for the hash maps of [`Batches`].
type BuildU32 = std::hash::BuildHasherDefault<U32Hasher>;

/// Bytes a batch of `n` elements takes about (41 per element, 55 per vertex record, about
/// half a vertex per element): its writer is sized once.
fn batch_bytes(n: usize) -> usize {
    72 * n + 64
}

impl Local {
    /// The initial mesh on every rank; rank 0 holds the four initial elements, the others
    /// none. The ghost layer is not built yet (call [`Local::rebuild`]).
    pub(crate) fn initial(rank: usize, size: usize) -> Local {
        let mut mesh = Mesh::unit_square();
        let me = rank as u32;
        let ne = if rank == 0 { 4 } else { 0 };
        mesh.tri.truncate(ne);
        mesh.nbr.truncate(ne);
        mesh.level.truncate(ne);
        let nv = mesh.num_vertices();
        Local {
            rank: me,
            size,
            ekey: (0..ne).map(super::keys::root_key).collect(),
            eowner: vec![me; ne],
            bsg: vec![0; nv],
            bkey: (0..nv).map(|i| Birth::initial(i).key).collect(),
            vowner: vec![UNKNOWN; nv],
            n_owned: 0,
            runs: std::iter::once(0..nv as u32).collect(),
            u: vec![0.0; nv],
            ghosts: Vec::new(),
            shared: Vec::new(),
            since_drop: 0,
            vertex_hint: 0,
            owners_kept: false,
            remote: None,
            ranks_of: HashMap::new(),
            new_ranks: HashMap::new(),
            mesh,
        }
    }

    /// Makes room for `n` vertices in every per-vertex array (coordinates, parents, boundary
    /// flags, births, owners, solution), so that they grow at most once per step: to the
    /// run's expected share [`Local::vertex_hint`] at once while `n` is below it (a copy of
    /// the arrays and their fresh pages per step otherwise), else to half as much again as
    /// `n` (a migration or ghost layer then fits). Room no vertex takes is address space
    /// only.
    fn reserve_vertices(&mut self, n: usize) {
        let len = self.mesh.coords.len();
        if n <= self.u.capacity().min(self.mesh.coords.capacity()) || n <= len {
            return;
        }
        let cap = if n <= self.vertex_hint {
            self.vertex_hint
        } else if self.size > 1 {
            n + n / 2 + 1024
        } else {
            n
        };
        let more = cap - len;
        if std::env::var_os("FEM_DEBUG_TIMES").is_some() {
            eprintln!("    room for {cap} vertices ({n} needed, {len} held)");
        }
        self.mesh.coords.reserve(more);
        self.mesh.parents.reserve(more);
        self.mesh.boundary.reserve(more);
        self.bsg.reserve(more);
        self.bkey.reserve(more);
        self.vowner.reserve(more);
        self.u.reserve(more);
    }

    /// Vertex v's birth.
    #[inline]
    pub(crate) fn birth(&self, v: usize) -> Birth {
        Birth {
            sg: self.bsg[v],
            key: self.bkey[v],
        }
    }

    /// This rank's census: the owned elements' count and the order-independent checksum of
    /// their keys (the wrapping sum of their [`mix`]; summed over the ranks, the same before
    /// and after a migration).
    pub(crate) fn census(&self) -> [u64; 2] {
        let mut c = [0u64, 0u64];
        for t in (0..self.ekey.len()).filter(|&t| self.owns_element(t)) {
            c[0] += 1;
            c[1] = c[1].wrapping_add(mix(self.ekey.get(t)));
        }
        c
    }

    /// Whether local element t is owned here.
    #[inline]
    pub(crate) fn owns_element(&self, t: usize) -> bool {
        self.eowner[t] == self.rank
    }

    /// Whether vertex v is owned here.
    #[inline]
    pub(crate) fn owns_vertex(&self, v: usize) -> bool {
        self.vowner[v] == self.rank
    }

    /// For births sorted in increasing order (distinct), the local vertex of each, or
    /// [`NONE`]: a galloping search in each sorted run of the table.
    pub(crate) fn find_sorted(&self, births: &[Birth]) -> Vec<u32> {
        let mut out = vec![NONE; births.len()];
        for run in &self.runs {
            let (start, end) = (run.start as usize, run.end as usize);
            let mut lo = start;
            for (b, slot) in births.iter().zip(out.iter_mut()) {
                if *slot != NONE {
                    continue;
                }
                lo += gallop(end - lo, |i| self.birth(lo + i) < *b);
                if lo < end && self.birth(lo) == *b {
                    *slot = lo as u32;
                }
            }
        }
        out
    }

    // ----------------------------------------------------------------------------------
    // 1. Refinement
    // ----------------------------------------------------------------------------------

    /// Bisects the owned elements by `bits` (closed edge marks of every local element; a
    /// ghost's bits are those of the edges it shares with owned elements), creates the new
    /// vertices with their births and prolongated solution values, and drops the ghosts.
    /// Afterwards every element is owned; edges shared with other ranks are [`REMOTE`].
    /// Returns the census of the owned elements (see [`Local::census`]).
    pub(crate) fn refine(
        &mut self,
        bits: Vec<u8>,
        step: usize,
        exact: &dyn ExactSolution,
    ) -> Result<[u64; 2], FemError> {
        let ne = self.ekey.len();
        let mut tt = std::time::Instant::now();
        let all_owned = self.ghosts.is_empty();
        // (The ghosts are the elements not owned: the rebuild listed them.)
        let owned: Vec<bool> = if all_owned {
            Vec::new()
        } else {
            let mut o = vec![true; ne];
            for &g in &self.ghosts {
                o[g as usize] = false;
            }
            o
        };
        debug_assert!((0..ne).all(|t| all_owned || owned[t] == self.owns_element(t)));
        let (total, new_vertices) = self.refinement_size(&bits, (!all_owned).then_some(&owned))?;
        // Room for the elements and vertices a migration and the ghost layer will bring, so
        // that the arrays grow once per step: a large migration (a rank's part growing by
        // half) fits without copying them. Room no element takes is address space only.
        let spare = if self.size > 1 { total / 2 + 1024 } else { 0 };
        self.reserve_vertices(self.mesh.coords.len() + new_vertices);
        let marks = Marks::from_bits(bits, new_vertices);
        lap(&mut tt, "refine: checks, room");
        self.note_new_interface(&marks.bits);
        let levels = self.mesh.level.clone();
        let mut creators: Vec<(u32, u8)> = Vec::new();
        let scope = if all_owned {
            None
        } else {
            Some(owned.as_slice())
        };
        // Births identify vertices between ranks: a rank alone needs none beyond the initial
        // vertices' (see `bsg`).
        let several = self.size > 1;
        // Over ranks the vertices this rank's elements create go right after its owned ones
        // (a prefix of the table since the last rebuild: they stay one, and the rebuild need
        // not renumber), the ghosts' after the others.
        let me = self.rank;
        let split_at = several.then_some(self.n_owned);
        let mut remote = Vec::new();
        let (gap, appended) = (self.mesh).refine_part(
            &marks,
            scope,
            several.then_some(&mut creators),
            spare,
            split_at,
            several.then_some(&mut remote),
        )?;
        self.remote = Some(remote);
        lap(&mut tt, "refine: refine_part");
        self.open_gap(gap.clone());
        let nv = self.mesh.coords.len();
        self.vowner.resize(nv, me);
        self.record_births(&creators, (gap.clone(), appended.clone()), step, &levels);
        drop(creators);
        lap(&mut tt, "refine: bisect");
        // Children's keys, in the order the refinement wrote the children (computed after it,
        // so that the old and new element arrays and keys are not all alive at once), with
        // the census of the refined part.
        let keep = |t: usize| all_owned || owned[t];
        // Keys name elements between ranks (migrations, the ghost layer, the marking's
        // order): a rank alone keeps none, only the count.
        let (keys, census) = if several {
            (self.ekey).children(&levels, &marks.bits, keep, total + spare)
        } else {
            (Keys::unnamed(total), [total as u64, 0])
        };
        self.u.resize(nv, 0.0);
        for new in [gap.clone(), appended.clone()] {
            crate::solver::prolongate_into(&self.mesh, &mut self.u, new, |p| {
                dirichlet_value(exact, p[0], p[1])
            })?;
        }
        // New vertices are the latest births, created in birth order: one more sorted run
        // for each place.
        self.runs
            .extend([gap, appended].map(|r| r.start as u32..r.end as u32));
        self.runs.retain(|r| !r.is_empty());
        debug_assert_eq!(keys.len(), self.mesh.tri.len());
        let mut eowner = Vec::with_capacity(keys.len() + spare);
        eowner.resize(keys.len(), self.rank);
        self.eowner = eowner;
        self.ekey = keys;
        self.ghosts.clear();
        self.shared.clear();
        lap(&mut tt, "refine: births, prolongation");
        Ok(census)
    }

    /// The children and new vertices a refinement by `bits` makes of the owned elements (all
    /// when `owned` is `None`): keys have one bit per level, so the deepest elements cannot be
    /// bisected here. One new vertex per marked edge: an edge between two local elements is
    /// marked on both sides (the marks are closed), a boundary edge on one.
    fn refinement_size(
        &self,
        bits: &[u8],
        owned: Option<&Vec<bool>>,
    ) -> Result<(usize, usize), FemError> {
        let mut total = 0usize;
        for (t, &b) in bits.iter().enumerate() {
            if owned.is_none_or(|o| o[t]) {
                if b != 0 && self.mesh.level[t] >= LEVEL_LIMIT - 1 {
                    return Err(FemError::LevelLimit {
                        element: t,
                        level: self.mesh.level[t],
                        limit: LEVEL_LIMIT,
                    });
                }
                total += crate::mesh::children_count(b) as usize;
            }
        }
        let mut halves = 0usize;
        for (&b, nb) in bits.iter().zip(&self.mesh.nbr) {
            if b != 0 {
                for (k, &n) in nb.iter().enumerate() {
                    if b & (1 << k) != 0 {
                        halves += if n == NONE { 2 } else { 1 };
                    }
                }
            }
        }
        Ok((total, halves.div_ceil(2)))
    }

    /// Before a refinement by `bits`: the vertices it will create on edges shared with
    /// ghosts, by key, with the ghosts' ranks (`new_ranks`, for [`Local::kept_involvement`]).
    fn note_new_interface(&mut self, bits: &[u8]) {
        self.new_ranks.clear();
        for &(t, k) in &self.shared {
            let (tu, ku) = (t as usize, k as usize);
            if bits[tu] & (1 << k) != 0 {
                let tv = self.mesh.tri[tu];
                let c = &self.mesh.coords;
                let key = edge_key(c[tv[(ku + 1) % 3] as usize], c[tv[(ku + 2) % 3] as usize]);
                let g = self.mesh.nbr[tu][ku];
                self.new_ranks.insert(key, self.eowner[g as usize]);
            }
        }
    }

    /// Each new vertex's birth from its creating element (`creators`, in the order of the
    /// ids: the gap's, then the appended ones; the elements still numbered as before, at
    /// `levels`), and its owner: the creator's (the interface ones are confirmed in the
    /// rebuild).
    fn record_births(
        &mut self,
        creators: &[(u32, u8)],
        (gap, appended): (std::ops::Range<usize>, std::ops::Range<usize>),
        step: usize,
        levels: &[u8],
    ) {
        for (&(t, k), v) in creators.iter().zip(gap.clone().chain(appended)) {
            let b = Birth::created(step, self.ekey.get(t as usize), levels[t as usize], k);
            if v < gap.end {
                (self.bsg[v], self.bkey[v]) = (b.sg, b.key);
            } else {
                self.bsg.push(b.sg);
                self.bkey.push(b.key);
            }
            self.vowner[v] = self.eowner[t as usize];
        }
    }

    /// After [`Mesh::refine_part`] opened the vertex gap `gap` (the vertices from its start on
    /// moved up by its length): the same for this rank's own per-vertex arrays (births,
    /// owners, solution; placeholders in the gap) and its runs.
    fn open_gap(&mut self, gap: std::ops::Range<usize>) {
        let (at, len) = (gap.start, gap.len());
        if len == 0 {
            return;
        }
        open_run(&mut self.bsg, at, len, 0);
        open_run(&mut self.bkey, at, len, 0);
        open_run(&mut self.vowner, at, len, self.rank);
        open_run(&mut self.u, at, len, 0.0);
        for r in &mut self.runs {
            if r.start as usize >= at {
                *r = r.start + len as u32..r.end + len as u32;
            }
        }
    }

    /// The owned elements' edges left [`REMOTE`] by a refinement.
    fn remote_slots(&self) -> Vec<(u32, u8)> {
        let mut out = Vec::new();
        for (t, nb) in self.mesh.nbr.iter().enumerate() {
            for (k, &n) in nb.iter().enumerate() {
                if n == REMOTE {
                    out.push((t as u32, k as u8));
                }
            }
        }
        out
    }

    // ----------------------------------------------------------------------------------
    // 2. Rebuild: migration, links, ownership, ghosts
    // ----------------------------------------------------------------------------------

    /// After a refinement (or at the start), with every element owned: moves the elements to
    /// `parts` (one per element), then rebuilds the links, the vertex owners and the ghost
    /// layer. Returns what this rank sent. `parts` is `None` when every rank keeps its
    /// elements (the same on every rank): no migration round then.
    pub(crate) fn rebuild<C: Comm>(
        &mut self,
        comm: &C,
        parts: Option<&[u32]>,
    ) -> Result<Moved, CommError> {
        let mut tt = std::time::Instant::now();
        // (A refinement found them as it wrote the children.)
        let mut remote = match self.remote.take() {
            Some(r) => r,
            None if self.size > 1 => self.remote_slots(),
            None => Vec::new(),
        };
        lap(&mut tt, "rebuild: remote slots");
        let mut runs = vec![0usize];
        let moved = match parts {
            Some(parts) if self.size > 1 => self.migrate(comm, parts, &mut remote, &mut runs)?,
            _ => Moved::default(),
        };
        lap(&mut tt, "rebuild: migrate");
        self.link(&mut remote);
        let me = self.rank;
        if self.size == 1 {
            // One rank owns everything: no ghosts, no interface.
            self.vowner.fill(me);
            self.ghosts.clear();
            self.shared.clear();
            self.renumber();
            lap(&mut tt, "rebuild: link, owners (one rank)");
            return Ok(moved);
        }
        // Every vertex of an owned element is this rank's until the coordinators name the
        // owners of the interface vertices. Where no element moved since the last such pass,
        // it still holds: a refinement keeps the ranks around every vertex (the children
        // cover their parent), so the owners of the vertices that were there are unchanged,
        // and it gave its new vertices this rank (the interface ones are coordinated below).
        // On a kept partition whose owners held, the interface vertices' owners and ranks are
        // known here: no coordinator round.
        // (`owners_kept` is the same on every rank: set by the same rebuilds.)
        let kept = parts.is_none() && self.owners_kept;
        if parts.is_some() || !self.owners_kept {
            self.vowner.fill(UNKNOWN);
            for (tv, &o) in self.mesh.tri.iter().zip(&self.eowner) {
                if o == me {
                    for &v in tv {
                        self.vowner[v as usize] = me;
                    }
                }
            }
            self.owners_kept = true;
        }
        lap(&mut tt, "rebuild: link, owners");
        if self.size > 1 {
            let interface = self.interface(&remote);
            lap(&mut tt, "rebuild: interface");
            let involved = if kept {
                self.kept_involvement(interface)
            } else {
                self.coordinate(comm, interface)?
            };
            self.ranks_of = (involved.iter())
                .map(|(v, ranks, _)| (vertex_key(self.mesh.coords[*v as usize]), ranks.clone()))
                .collect();
            self.new_ranks.clear();
            lap(&mut tt, "rebuild: coordinate");
            self.exchange_ghosts(comm, &involved, &mut remote, &mut runs)?;
            lap(&mut tt, "rebuild: ghosts");
            self.link(&mut remote);
            for (t, k) in remote {
                debug_assert!(
                    !self.owns_element(t as usize),
                    "rank {}: an owned element has no neighbour across edge {k}",
                    self.rank
                );
                self.mesh.nbr[t as usize][k as usize] = NONE;
            }
            lap(&mut tt, "rebuild: link");
            self.ghosts = self.merge_runs(&runs);
            lap(&mut tt, "rebuild: merge runs");
        }
        debug_assert!(
            self.ghosts
                .iter()
                .copied()
                .eq((0..self.ekey.len() as u32).filter(|&t| !self.owns_element(t as usize)))
        );
        self.shared.clear();
        for &g in &self.ghosts {
            for n in self.mesh.nbr[g as usize] {
                if n != NONE && self.owns_element(n as usize) {
                    let j = self.mesh.local_index(n, g);
                    self.shared.push((n, j as u8));
                }
            }
        }
        lap(&mut tt, "rebuild: ghost lists");
        self.renumber();
        lap(&mut tt, "rebuild: renumber");
        Ok(moved)
    }

    /// Sends every element with `parts[t] != rank` (all elements are owned on entry) to its
    /// new rank, with its vertices and their ancestors, and adds what the other ranks send
    /// (each sender's elements one sorted run, starting at the offsets pushed on `runs`).
    /// Unlinked edges are added to `remote`.
    fn migrate<C: Comm>(
        &mut self,
        comm: &C,
        parts: &[u32],
        remote: &mut Vec<(u32, u8)>,
        runs: &mut Vec<usize>,
    ) -> Result<Moved, CommError> {
        let ne = self.ekey.len();
        let mut tt = std::time::Instant::now();
        assert_eq!(parts.len(), ne, "one part per element");
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); self.size];
        for t in 0..ne {
            if parts[t] != self.rank {
                groups[parts[t] as usize].push(t as u32);
            }
        }
        let mut out = Outbox::new(self.size);
        let mut moved = Moved::default();
        let sent = groups.iter().map(Vec::len).sum();
        let mut scratch = Batches::new(self.mesh.coords.len(), ne, sent);
        for (d, elems) in groups.iter().enumerate() {
            if !elems.is_empty() {
                moved.elements += elems.len();
                let w = out.to(d);
                *w = Writer::with_capacity(batch_bytes(elems.len()));
                self.write_elements(w, elems, d as u32, &mut scratch, false);
            }
        }
        moved.bytes = out.total_len();
        lap(&mut tt, "  migrate: write");
        // The departed elements stay in place, owned by their new rank, until the final
        // merge drops them; their owned neighbours' links become unlinked.
        for (d, elems) in groups.iter().enumerate() {
            for &t in elems {
                self.eowner[t as usize] = d as u32;
            }
        }
        remote.retain(|&(t, _)| self.eowner[t as usize] == self.rank);
        for elems in &groups {
            for &t in elems {
                for n in self.mesh.nbr[t as usize] {
                    if n != NONE && n != REMOTE && self.eowner[n as usize] == self.rank {
                        let j = self.mesh.local_index(n, t);
                        self.mesh.nbr[n as usize][j] = REMOTE;
                        remote.push((n, j as u8));
                    }
                }
            }
        }
        let (bytes, counts) = out.flatten();
        lap(&mut tt, "  migrate: departed");
        let incoming = comm.alltoallv_bytes(&bytes, &counts)?;
        lap(&mut tt, "  migrate: alltoallv");
        let pieces: Vec<&[u8]> = incoming.iter().filter(|p| !p.is_empty()).collect();
        self.absorb(&pieces, false, remote, runs)?;
        lap(&mut tt, "  migrate: absorb");
        Ok(moved)
    }

    /// Writes elements `elems` (in key order) for rank `dest`: their vertices and ancestors,
    /// then the elements with links inside the batch. `scratch` marks the vertices written
    /// for `dest` already. Ghost batches (`ghost`) carry vertex owners.
    fn write_elements(
        &self,
        w: &mut Writer,
        elems: &[u32],
        dest: u32,
        scratch: &mut Batches,
        ghost: bool,
    ) {
        // Vertices of the elements (their solution values are current; an ancestor's may be
        // stale), then their ancestors, each once.
        let mut verts: Vec<(u32, bool)> = Vec::new();
        for &t in elems {
            for &v in &self.mesh.tri[t as usize] {
                if scratch.first_for(v, dest) {
                    verts.push((v, true));
                }
            }
        }
        let mut i = 0;
        while i < verts.len() {
            for a in self.mesh.parents[verts[i].0 as usize] {
                if a != NONE && scratch.first_for(a, dest) {
                    verts.push((a, false));
                }
            }
            i += 1;
        }
        // Birth order puts parents before children.
        let verts = self.in_birth_order(verts);
        for (i, &(v, _)) in verts.iter().enumerate() {
            scratch.set_vpos(v, i as u32);
        }
        w.u32(verts.len() as u32);
        for &(v, current) in &verts {
            let vu = v as usize;
            w.u16(self.bsg[vu]);
            w.u128(self.bkey[vu]);
            w.u128(vertex_key(self.mesh.coords[vu]));
            for a in self.mesh.parents[vu] {
                w.u32(if a == NONE { NONE } else { scratch.vpos(a) });
            }
            w.u8(u8::from(self.mesh.boundary[vu]) | (u8::from(current) << 1));
            w.f64(self.u[vu]);
            w.u32(if ghost && current {
                self.vowner[vu]
            } else {
                UNKNOWN
            });
        }
        for (i, &t) in elems.iter().enumerate() {
            scratch.set_epos(t, i as u32);
        }
        w.u32(elems.len() as u32);
        for &t in elems {
            let tu = t as usize;
            w.u128(self.ekey.get(tu));
            w.u8(self.mesh.level[tu]);
            for v in self.mesh.tri[tu] {
                w.u32(scratch.vpos(v));
            }
            for n in self.mesh.nbr[tu] {
                // Inside the batch: its batch index; the boundary: NONE; else unlinked.
                w.u32(match n {
                    NONE => NONE,
                    REMOTE => REMOTE,
                    n => match scratch.epos(n) {
                        NONE => REMOTE,
                        i => i,
                    },
                });
            }
        }
        for &t in elems {
            scratch.set_epos(t, NONE);
        }
    }

    /// `verts` (distinct vertices with a flag) in birth order: sorted by index, cut along
    /// the table's runs (each sorted by birth), and the pieces merged.
    fn in_birth_order(&self, mut verts: Vec<(u32, bool)>) -> Vec<(u32, bool)> {
        verts.sort_unstable_by_key(|&(v, _)| v);
        let mut pieces: Vec<Vec<(u32, bool)>> = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            let a = verts.partition_point(|x| x.0 < run.start);
            let b = a + verts[a..].partition_point(|x| x.0 < run.end);
            pieces.push(verts[a..b].to_vec());
        }
        if pieces.iter().map(Vec::len).sum::<usize>() != verts.len() {
            // Runs that do not cover the table (not expected): sort by birth directly.
            verts.sort_unstable_by_key(|&(v, _)| self.birth(v as usize));
            return verts;
        }
        merge_sorted(pieces, |&(v, _)| self.birth(v as usize))
    }

    /// Adds batches written by [`Local::write_elements`] (one per sender): the vertices are
    /// merged with the table by birth, the elements appended (one sorted run per batch, owned
    /// here unless `ghost`, then owned by the sender `owners[i]`).
    fn absorb_with_owners(
        &mut self,
        pieces: &[(&[u8], u32)],
        ghost: bool,
        remote: &mut Vec<(u32, u8)>,
        runs: &mut Vec<usize>,
    ) -> Result<(), WireError> {
        // Vertex records of every batch, then elements (kept encoded).
        let mut recs: Vec<Vec<VertexRecord>> = Vec::with_capacity(pieces.len());
        let mut readers: Vec<Reader<'_>> = Vec::with_capacity(pieces.len());
        for &(piece, _) in pieces {
            let mut r = Reader::new(piece, "a migrated batch of elements");
            recs.push(read_vertex_records(&mut r)?);
            readers.push(r);
        }
        let local = self.merge_vertices(&recs, ghost);
        for (b, mut r) in readers.into_iter().enumerate() {
            let owner = if ghost { pieces[b].1 } else { self.rank };
            self.append_elements(&mut r, &local[b], owner, remote, runs)?;
            assert!(r.done(), "a batch has trailing bytes");
        }
        Ok(())
    }

    /// Merges the vertex records of every batch with the table by birth: a vertex already
    /// here keeps its index (its value updated when the record's is current), a new one is
    /// added (new vertices in birth order: one more sorted run). Returns each batch's local
    /// index of each of its records.
    fn merge_vertices(&mut self, recs: &[Vec<VertexRecord>], ghost: bool) -> Vec<Vec<u32>> {
        let mut tt = std::time::Instant::now();
        // All births, sorted and distinct, matched against the table.
        let mut all: Vec<(Birth, u32, u32)> = Vec::new();
        for (b, v) in recs.iter().enumerate() {
            all.extend(
                v.iter()
                    .enumerate()
                    .map(|(i, r)| (r.birth, b as u32, i as u32)),
            );
        }
        all.sort_unstable();
        let mut distinct: Vec<Birth> = all.iter().map(|x| x.0).collect();
        distinct.dedup();
        lap(&mut tt, "    absorb: parse+sort");
        let found = self.find_sorted(&distinct);
        lap(
            &mut tt,
            &format!(
                "    absorb: find {} in {} runs",
                distinct.len(),
                self.runs.len()
            ),
        );
        let mut local: Vec<Vec<u32>> = recs.iter().map(|v| vec![NONE; v.len()]).collect();
        let nv0 = self.mesh.coords.len();
        let fresh = found.iter().filter(|&&f| f == NONE).count();
        self.reserve_vertices(nv0 + fresh);
        let mut j = 0;
        for (d, &birth) in distinct.iter().enumerate() {
            let first = all[j];
            let v = if found[d] != NONE {
                found[d]
            } else {
                let r = recs[first.1 as usize][first.2 as usize];
                let parents = r.parents.map(|a| {
                    if a == NONE {
                        NONE
                    } else {
                        local[first.1 as usize][a as usize]
                    }
                });
                let v = self.mesh.coords.len() as u32;
                self.mesh.coords.push(key_point(r.key));
                self.mesh.parents.push(parents);
                self.mesh.boundary.push(r.boundary);
                self.bsg.push(birth.sg);
                self.bkey.push(birth.key);
                self.vowner.push(UNKNOWN);
                self.u.push(r.u);
                v
            };
            while j < all.len() && all[j].0 == birth {
                let (_, b, i) = all[j];
                local[b as usize][i as usize] = v;
                let r = &recs[b as usize][i as usize];
                // A copy kept from earlier steps may hold an old value.
                if r.current {
                    self.u[v as usize] = r.u;
                }
                if ghost && r.owner != UNKNOWN {
                    self.vowner[v as usize] = r.owner;
                }
                j += 1;
            }
        }
        lap(&mut tt, "    absorb: vertices");
        if self.mesh.coords.len() > nv0 {
            // Created in birth order: one more sorted run.
            self.runs.push(nv0 as u32..self.mesh.coords.len() as u32);
        }
        local
    }

    /// Appends one batch's elements (after its vertex records in `r`; `local`: the batch's
    /// vertex indices here) owned by `owner`, as one sorted run starting at the offset pushed
    /// on `runs`; their edges to other ranks go on `remote`.
    fn append_elements(
        &mut self,
        r: &mut Reader<'_>,
        local: &[u32],
        owner: u32,
        remote: &mut Vec<(u32, u8)>,
        runs: &mut Vec<usize>,
    ) -> Result<(), WireError> {
        let ne = r.u32()? as usize;
        let base = self.ekey.len() as u32;
        runs.push(base as usize);
        // Room for the batch at once (an element takes 41 bytes on the wire): a large
        // migration grows the arrays once, not by doubling.
        let room = ne.min(r.remaining() / 41);
        self.ekey.reserve(room);
        self.eowner.reserve(room);
        self.mesh.tri.reserve(room);
        self.mesh.nbr.reserve(room);
        self.mesh.level.reserve(room);
        for i in 0..ne {
            self.ekey.push(r.u128()?);
            self.mesh.level.push(r.u8()?);
            self.eowner.push(owner);
            let tri = [r.u32()?, r.u32()?, r.u32()?].map(|v| local[v as usize]);
            self.mesh.tri.push(tri);
            let mut nb = [r.u32()?, r.u32()?, r.u32()?];
            for (k, n) in nb.iter_mut().enumerate() {
                match *n {
                    NONE => {}
                    REMOTE => remote.push((base + i as u32, k as u8)),
                    m => *n = base + m,
                }
            }
            self.mesh.nbr.push(nb);
        }
        Ok(())
    }

    /// [`Local::absorb_with_owners`] for migrated elements.
    fn absorb(
        &mut self,
        pieces: &[&[u8]],
        ghost: bool,
        remote: &mut Vec<(u32, u8)>,
        runs: &mut Vec<usize>,
    ) -> Result<(), WireError> {
        let with: Vec<(&[u8], u32)> = pieces.iter().map(|&p| (p, self.rank)).collect();
        self.absorb_with_owners(&with, ghost, remote, runs)
    }

    /// Links the [`REMOTE`] edges in `remote` that match another one by midpoint; `remote`
    /// keeps the others.
    fn link(&mut self, remote: &mut Vec<(u32, u8)>) {
        let mut open: HashMap<VKey, (u32, u8)> = HashMap::with_capacity(remote.len());
        let c = &self.mesh.coords;
        for &(t, k) in remote.iter() {
            let tv = self.mesh.tri[t as usize];
            let ku = k as usize;
            let e = edge_key(c[tv[(ku + 1) % 3] as usize], c[tv[(ku + 2) % 3] as usize]);
            match open.remove(&e) {
                Some((n, j)) => {
                    self.mesh.nbr[t as usize][ku] = n;
                    self.mesh.nbr[n as usize][j as usize] = t;
                }
                None => {
                    open.insert(e, (t, k));
                }
            }
        }
        remote.retain(|&(t, k)| self.mesh.nbr[t as usize][k as usize] == REMOTE);
    }

    /// The ends of the unlinked edges of owned elements, each with the owned elements around
    /// it (its patch may hold several arcs of them, each ending at an unlinked edge).
    fn interface(&self, remote: &[(u32, u8)]) -> Vec<(u32, Vec<u32>)> {
        let mut ends: Vec<(u32, u32)> = Vec::with_capacity(2 * remote.len());
        for &(t, k) in remote {
            let tv = self.mesh.tri[t as usize];
            let ku = k as usize;
            ends.push((tv[(ku + 1) % 3], t));
            ends.push((tv[(ku + 2) % 3], t));
        }
        ends.sort_unstable();
        ends.dedup();
        let mut out = Vec::new();
        for group in ends.chunk_by(|a, b| a.0 == b.0) {
            let v = group[0].0;
            let mut around: Vec<u32> = Vec::new();
            for &(_, t) in group {
                if !around.contains(&t) {
                    around.extend(self.star(t, v, |n| self.owns_element(n as usize)));
                }
            }
            around.sort_unstable();
            around.dedup();
            out.push((v, around));
        }
        out
    }

    /// The elements around vertex v that `include` accepts and that are reached from element
    /// t0 (which holds v) across edges through v without leaving them.
    fn star(&self, t0: u32, v: u32, include: impl Fn(u32) -> bool) -> Vec<u32> {
        let mut out = vec![t0];
        let iv = |t: u32| {
            self.mesh.tri[t as usize]
                .iter()
                .position(|&x| x == v)
                .expect("v is a vertex")
        };
        let i0 = iv(t0);
        for first in [(i0 + 1) % 3, (i0 + 2) % 3] {
            let (mut t, mut k) = (t0, first);
            loop {
                let n = self.mesh.nbr[t as usize][k];
                if n == NONE || n == REMOTE || !include(n) {
                    break;
                }
                if n == t0 {
                    return out; // the whole cycle
                }
                out.push(n);
                let j = self.mesh.local_index(n, t);
                k = 3 - iv(n) - j;
                t = n;
            }
        }
        out
    }

    /// [`Local::coordinate`]'s answer without its round, after a refinement on a kept
    /// partition: a refinement keeps the ranks around every vertex (the children cover their
    /// parent) and their owners, so each interface vertex there before has the ranks of the
    /// last rebuild; one it created on an edge shared with a ghost has this rank and the
    /// ghost's, and the owner of the element first along the curve of the two, its creator
    /// (set by [`Local::refine`]). The ranks agree without a word: each computes its side
    /// the same way, and every rank keeps or repartitions alike.
    fn kept_involvement(&self, interface: Vec<(u32, Vec<u32>)>) -> Vec<Around> {
        let me = self.rank;
        (interface.into_iter())
            .map(|(v, star)| {
                let key = vertex_key(self.mesh.coords[v as usize]);
                let ranks = match (self.ranks_of.get(&key), self.new_ranks.get(&key)) {
                    (Some(r), _) => r.clone(),
                    (None, Some(&o)) => vec![me.min(o), me.max(o)],
                    (None, None) => panic!(
                        "rank {me}: interface vertex {:?} was neither on the interface nor \
                         created on an edge shared with a ghost",
                        self.mesh.coords[v as usize]
                    ),
                };
                (v, ranks, star)
            })
            .collect()
    }

    /// The coordinator round: every rank reports, for each of its interface vertices, the
    /// smallest key of its elements around it to the vertex's coordinator, which answers with
    /// the owner (the rank of the smallest key) and every rank involved. Sets the owners of
    /// the interface vertices; returns, per interface vertex, the ranks involved and the
    /// owned elements around it.
    fn coordinate<C: Comm>(
        &mut self,
        comm: &C,
        interface: Vec<(u32, Vec<u32>)>,
    ) -> Result<Vec<Around>, CommError> {
        let mut out = Outbox::new(self.size);
        let mut stars: HashMap<VKey, (u32, Vec<u32>)> = HashMap::with_capacity(interface.len());
        for (v, star) in interface {
            let smallest = star
                .iter()
                .map(|&e| self.ekey.get(e as usize))
                .min()
                .expect("t is in it");
            let key = vertex_key(self.mesh.coords[v as usize]);
            let w = &mut out.to((mix(key) % self.size as u64) as usize);
            w.u128(key);
            w.u128(smallest);
            stars.insert(key, (v, star));
        }
        let (bytes, counts) = out.flatten();
        let asked = comm.alltoallv_bytes(&bytes, &counts)?;
        // As coordinator: group the reports by vertex.
        let mut reports: Vec<(VKey, EKey, u32)> = Vec::new();
        for r in 0..self.size {
            let mut rd = Reader::new(asked.get(r), "an interface-vertex report");
            while !rd.done() {
                let (key, k) = (rd.u128()?, rd.u128()?);
                reports.push((key, k, r as u32));
            }
        }
        reports.sort_unstable();
        let mut out = Outbox::new(self.size);
        for group in reports.chunk_by(|a, b| a.0 == b.0) {
            let owner = group[0].2; // the smallest element key comes first
            let mut ranks: Vec<u32> = group.iter().map(|g| g.2).collect();
            ranks.sort_unstable();
            for &r in &ranks {
                let w = &mut out.to(r as usize);
                w.u128(group[0].0);
                w.u32(owner);
                w.u32(ranks.len() as u32);
                for &q in &ranks {
                    w.u32(q);
                }
            }
        }
        let (bytes, counts) = out.flatten();
        let answers = comm.alltoallv_bytes(&bytes, &counts)?;
        let mut involved = Vec::with_capacity(stars.len());
        for r in 0..self.size {
            let mut rd = Reader::new(answers.get(r), "an interface-vertex owner answer");
            while !rd.done() {
                let key = rd.u128()?;
                let owner = rd.u32()?;
                let n = rd.u32()? as usize;
                let ranks = (0..n).map(|_| rd.u32()).collect::<Result<Vec<u32>, _>>()?;
                let (v, star) = stars
                    .remove(&key)
                    .expect("a coordinator answers only about vertices this rank reported");
                self.vowner[v as usize] = owner;
                involved.push((v, ranks, star));
            }
        }
        Ok(involved)
    }

    /// Sends each rank involved with an interface vertex this rank's elements around it, and
    /// adds the elements the others send (ghosts, one sorted run per sender).
    fn exchange_ghosts<C: Comm>(
        &mut self,
        comm: &C,
        involved: &[Around],
        remote: &mut Vec<(u32, u8)>,
        runs: &mut Vec<usize>,
    ) -> Result<(), CommError> {
        let mut to: Vec<Vec<u32>> = vec![Vec::new(); self.size];
        for (_, ranks, star) in involved {
            for &r in ranks {
                if r != self.rank {
                    to[r as usize].extend_from_slice(star);
                }
            }
        }
        let mut out = Outbox::new(self.size);
        let sent = to.iter().map(Vec::len).sum();
        let mut scratch = Batches::new(self.mesh.coords.len(), self.ekey.len(), sent);
        for (r, elems) in to.iter_mut().enumerate() {
            if elems.is_empty() {
                continue;
            }
            elems.sort_unstable_by_key(|&t| self.ekey.get(t as usize));
            elems.dedup();
            self.write_elements(out.to(r), elems, r as u32, &mut scratch, true);
        }
        let (bytes, counts) = out.flatten();
        let incoming = comm.alltoallv_bytes(&bytes, &counts)?;
        let pieces: Vec<(&[u8], u32)> = (0..self.size)
            .filter(|&r| !incoming.get(r).is_empty())
            .map(|r| (incoming.get(r), r as u32))
            .collect();
        self.absorb_with_owners(&pieces, true, remote, runs)?;
        Ok(())
    }

    /// Merges the sorted runs of elements into one array in key order, dropping the elements
    /// of the first run (the ones this rank had, all owned on entry to the rebuild) that went
    /// to other ranks. The first run is usually most of them: the others are sorted together
    /// and merged into it in one pass. Returns the ghosts (the elements not owned, which all
    /// arrived in the other runs), in index order.
    fn merge_runs(&mut self, runs: &[usize]) -> Vec<u32> {
        let ne = self.ekey.len();
        let first_end = runs.get(1).copied().unwrap_or(ne);
        let me = self.rank;
        let gone = |t: usize| t < first_end && self.eowner[t] != me;
        // Without departures (a kept partition) each stretch shifts as a whole.
        let none_gone = !self.eowner[..first_end].iter().any(|&o| o != me);
        if first_end == ne && none_gone {
            // Nothing arrived and nothing left: every element is this rank's.
            return Vec::new();
        }
        let mut t0 = std::time::Instant::now();
        // The arriving runs are each in key order: merged, not sorted.
        let ends = runs[1..].iter().skip(1).copied().chain(std::iter::once(ne));
        let pieces: Vec<Vec<u32>> = runs[1..]
            .iter()
            .zip(ends)
            .map(|(&a, b)| (a as u32..b as u32).collect())
            .collect();
        let rest = merge_sorted(pieces, |&t| self.ekey.get(t as usize));
        debug_assert_eq!(rest.len(), ne - first_end);
        lap(&mut t0, "      merge: sort arriving");
        // The runs of the first run that stay, how many of those come before each arriving
        // element, and the new index of every element (NONE for the departed): a kept one
        // after the kept and arrived before it, arriving element j at slots[j] + j.
        let mut inv = vec![NONE; ne];
        let mut kept: Vec<(usize, usize)> = Vec::new();
        let mut slots: Vec<usize> = Vec::with_capacity(rest.len());
        let mut n_kept = 0usize;
        let mut keep_run = |a: usize, b: usize, arrived: usize, n_kept: &mut usize| {
            if none_gone {
                if a < b {
                    let shift = (arrived + *n_kept) as u32 - a as u32;
                    for (t, x) in inv[a..b].iter_mut().enumerate() {
                        *x = (a + t) as u32 + shift;
                    }
                    *n_kept += b - a;
                    match kept.last_mut() {
                        Some((s, l)) if *s + *l == a => *l += b - a,
                        _ => kept.push((a, b - a)),
                    }
                }
                return;
            }
            for t in (a..b).filter(|&t| !gone(t)) {
                inv[t] = (*n_kept + arrived) as u32;
                *n_kept += 1;
                match kept.last_mut() {
                    Some((s, l)) if *s + *l == t => *l += 1,
                    _ => kept.push((t, 1)),
                }
            }
        };
        let mut i = 0usize;
        for &t in &rest {
            let at = self.ekey.gallop(i..first_end, self.ekey.get(t as usize));
            keep_run(i, at, slots.len(), &mut n_kept);
            slots.push(n_kept);
            i = at;
        }
        keep_run(i, first_end, slots.len(), &mut n_kept);
        lap(&mut t0, "      merge: places");
        let mut ghosts = Vec::new();
        for (j, (&t, &slot)) in rest.iter().zip(&slots).enumerate() {
            inv[t as usize] = (slot + j) as u32;
            if self.eowner[t as usize] != me {
                ghosts.push((slot + j) as u32);
            }
        }
        let mut tt = std::time::Instant::now();
        let m = &mut self.mesh;
        merge_in_place(&mut m.tri, &kept, &rest, &slots);
        merge_in_place(&mut m.level, &kept, &rest, &slots);
        lap(&mut tt, "      merge: tri, level");
        // The links follow their elements to their new indices as they move.
        let relabel = |nb: [u32; 3]| {
            nb.map(|n| {
                if n == NONE || n == REMOTE {
                    n
                } else {
                    inv[n as usize]
                }
            })
        };
        merge_in_place_map(&mut m.nbr, &kept, &rest, &slots, relabel);
        lap(&mut tt, "      merge: nbr, relabelled");
        self.ekey.merge_in_place(&kept, &rest, &slots);
        merge_in_place(&mut self.eowner, &kept, &rest, &slots);
        lap(&mut tt, "      merge: keys, owners");
        ghosts
    }

    /// The layout [`Local::renumber`] makes, where it holds already: the owned vertices a
    /// prefix of the table in birth order (sorted runs from the start, each after the last),
    /// nothing owned after it, and the rest not so large that its dead vertices matter. So
    /// after a refinement on a kept partition, which puts the new owned vertices right after
    /// the owned ones ([`Local::refine`]) and the ghosts' after the others. Sets `n_owned`,
    /// the runs (the prefix as one) and the initial owned count; whether it held.
    fn owned_prefix_kept(&mut self) -> bool {
        let me = self.rank;
        let nv = self.vowner.len();
        let p = self.vowner.iter().take_while(|&&o| o == me).count();
        if nv - p > 4096 + p / 8 || self.vowner[p..].contains(&me) {
            return false;
        }
        let mut runs = self.runs.clone();
        runs.retain(|r| !r.is_empty());
        runs.sort_unstable_by_key(|r| r.start);
        let mut end = 0u32;
        let mut last: Option<Birth> = None;
        for r in runs.iter().take_while(|r| (r.start as usize) < p) {
            if r.start != end || r.end as usize > p {
                return false;
            }
            if last.is_some_and(|b| b >= self.birth(r.start as usize)) {
                return false;
            }
            last = Some(self.birth(r.end as usize - 1));
            end = r.end;
        }
        if end as usize != p {
            return false;
        }
        let n_initial = (0..p).take_while(|&v| self.bsg[v] == 0).count();
        self.mesh.n_initial_vertices = n_initial;
        self.n_owned = p;
        self.runs = std::iter::once(0..p as u32)
            .chain(runs.into_iter().filter(|r| r.start as usize >= p))
            .collect();
        true
    }

    /// Renumbers the table: the owned vertices first, then the other vertices of the elements
    /// and their ancestors, each group in birth order; vertices nothing needs any more are
    /// dropped. Skipped when the table already has that layout.
    fn renumber(&mut self) {
        let nv = self.mesh.coords.len();
        if self.size == 1 {
            // Everything is this rank's and live, already in birth order.
            self.n_owned = nv;
            self.runs = std::iter::once(0..nv as u32).collect();
            return;
        }
        let mut tt = std::time::Instant::now();
        self.since_drop += 1;
        if self.owned_prefix_kept() {
            lap(&mut tt, "    renumber: owned prefix kept");
            return;
        }
        // Vertices nothing needs any more (left behind by migrations and old ghosts) are
        // dropped every fourth renumbering: in between they only take room.
        let live = if self.since_drop >= 4 {
            self.since_drop = 0;
            let mut live = vec![false; nv];
            let mut stack: Vec<u32> = Vec::new();
            for tv in &self.mesh.tri {
                for &v in tv {
                    if !live[v as usize] {
                        live[v as usize] = true;
                        stack.push(v);
                    }
                }
            }
            while let Some(v) = stack.pop() {
                for a in self.mesh.parents[v as usize] {
                    if a != NONE && !live[a as usize] {
                        live[a as usize] = true;
                        stack.push(a);
                    }
                }
            }
            live
        } else {
            vec![true; nv]
        };
        lap(&mut tt, "    renumber: live");
        // Each run is sorted by birth: split each by group, and merge the pieces.
        let me = self.rank;
        let mut owned_runs: Vec<Vec<u32>> = Vec::new();
        let mut other_runs: Vec<Vec<u32>> = Vec::new();
        for run in &self.runs {
            let (mut o, mut x) = (Vec::new(), Vec::new());
            for v in run.clone() {
                if live[v as usize] {
                    if self.vowner[v as usize] == me {
                        o.push(v);
                    } else {
                        x.push(v);
                    }
                }
            }
            owned_runs.push(o);
            other_runs.push(x);
        }
        let owned = merge_sorted(owned_runs, |&v| self.birth(v as usize));
        let other = merge_sorted(other_runs, |&v| self.birth(v as usize));
        lap(&mut tt, "    renumber: lists");
        let n_owned = owned.len();
        let n_initial = owned
            .iter()
            .take_while(|&&v| self.bsg[v as usize] == 0)
            .count();
        self.mesh.n_initial_vertices = n_initial;
        let mut keep = owned;
        keep.extend_from_slice(&other);
        drop(other);
        self.n_owned = n_owned;
        self.runs = vec![0..n_owned as u32, n_owned as u32..keep.len() as u32];
        if keep.len() == nv && keep.iter().enumerate().all(|(i, &v)| i as u32 == v) {
            return;
        }
        let mut new = vec![NONE; nv];
        for (i, &v) in keep.iter().enumerate() {
            new[v as usize] = i as u32;
        }
        let runs = Runs::of(&keep);
        drop(keep);
        // The vertices before `p` keep their numbers (the owned vertices of the previous
        // layout that are still owned come first, in birth order): only the rest moves.
        let p = runs.identity_prefix();
        if std::env::var_os("FEM_DEBUG_TIMES").is_some() {
            eprintln!("    renumber: {p} of {nv} vertices keep their numbers");
        }
        let m = &mut self.mesh;
        runs.gather_in_place(&mut m.coords);
        runs.gather_in_place(&mut m.boundary);
        runs.gather_in_place(&mut m.parents);
        let renum = |a: u32| {
            if a == NONE || (a as usize) < p {
                a
            } else {
                new[a as usize]
            }
        };
        for pa in &mut m.parents {
            *pa = pa.map(renum);
        }
        runs.gather_in_place(&mut self.bsg);
        runs.gather_in_place(&mut self.bkey);
        runs.gather_in_place(&mut self.vowner);
        runs.gather_in_place(&mut self.u);
        for tv in &mut m.tri {
            *tv = tv.map(renum);
        }
        lap(&mut tt, "    renumber: permute");
    }
}

/// Merges lists, each sorted by `key` (distinct keys), into one sorted list: the smaller
/// lists first, each merged into the larger by galloping to its entries' places and
/// copying the stretches between them (a list of a few entries costs a few searches, two
/// lists of similar length one pass).
fn merge_sorted<T: Copy, K: Ord>(mut lists: Vec<Vec<T>>, key: impl Fn(&T) -> K) -> Vec<T> {
    lists.retain(|l| !l.is_empty());
    lists.sort_by_key(Vec::len);
    let mut acc: Vec<T> = Vec::new();
    for l in lists {
        let (small, big) = if acc.len() <= l.len() {
            (acc, l)
        } else {
            (l, acc)
        };
        if small.is_empty() {
            acc = big;
            continue;
        }
        if key(big.last().expect("non-empty")) < key(&small[0]) {
            acc = big;
            acc.extend_from_slice(&small);
            continue;
        }
        let mut out = Vec::with_capacity(big.len() + small.len());
        let mut from = 0usize;
        for x in &small {
            let kx = key(x);
            let at = from + gallop(big.len() - from, |i| key(&big[from + i]) < kx);
            out.extend_from_slice(&big[from..at]);
            out.push(*x);
            from = at;
        }
        out.extend_from_slice(&big[from..]);
        acc = out;
    }
    acc
}

/// One batch's vertex records (their count first), as [`Local::write_elements`] wrote them.
fn read_vertex_records(r: &mut Reader<'_>) -> Result<Vec<VertexRecord>, WireError> {
    let n = r.u32()? as usize;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let birth = Birth {
            sg: r.u16()?,
            key: r.u128()?,
        };
        let key = r.u128()?;
        let parents = [r.u32()?, r.u32()?];
        let flags = r.u8()?;
        let u = r.f64()?;
        let owner = r.u32()?;
        v.push(VertexRecord {
            birth,
            key,
            parents,
            boundary: flags & 1 != 0,
            current: flags & 2 != 0,
            u,
            owner,
        });
    }
    Ok(v)
}
