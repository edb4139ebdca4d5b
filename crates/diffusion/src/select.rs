//! Task selection (Watts, Rieffel & Taylor 1998, "Task selection"): which objects to send
//! across each edge of the processor graph to meet the transfer amounts.

use crate::{Adjacency, Error, ProcGraph};
use part_api::Par;
use rayon::prelude::*;

/// The objects as task selection sees them: positions, integer weights (the load units of the
/// transfers) and neighbours.
#[derive(Clone, Copy)]
pub struct Tasks<'a> {
    /// Interleaved coordinates, `dim` per object.
    pub coords: &'a [f64],
    /// Coordinates per object (1, 2 or 3).
    pub dim: usize,
    /// One weight per object, in the units of the transfers.
    pub weights: &'a [u64],
    /// The objects' neighbours (what "on the boundary" and "connected" mean).
    pub adjacency: &'a dyn Adjacency,
}

impl std::fmt::Debug for Tasks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("objects", &self.weights.len())
            .field("dim", &self.dim)
            .finish()
    }
}

/// What one transfer (one edge, one direction) asked and got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// The sending part.
    pub from: u32,
    /// The receiving part.
    pub to: u32,
    /// The transfer amount.
    pub asked: u64,
    /// The weight of the objects chosen.
    pub sent: u64,
    /// How many objects were chosen.
    pub objects: usize,
}

/// The result of one round of task selection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// Per transfer with a positive amount, senders in order, each sender's transfers by edge.
    pub sent: Vec<Sent>,
    /// Objects given a new part.
    pub moved_objects: usize,
    /// Their weight.
    pub moved_weight: u64,
}

/// Chooses, for every edge of `graph` with a non-zero transfer in `flows` (as
/// [`crate::Flows::flows`]), objects of the sending part to give to the receiving part, and
/// writes their new parts into `parts` (each object's current part on entry; objects whose
/// part is `>= graph.num_vertices()` are never chosen).
///
/// Choosing objects of total weight closest to the amount is the subset-sum problem; adding a
/// transfer cost makes it the 0-1 knapsack (Watts & Taylor 1998a). Here the cost is locality,
/// and the approximation is greedy in locality order:
/// 1. the candidates of a transfer from part `i` to part `j` are `i`'s objects in
///    breadth-first layers from those with a neighbour in `j` (the shared boundary), each
///    layer ordered by how far it lies towards `j` (projection on `c_j − c_i`, the parts'
///    centroids); `j` with no object: from the far end of `i`'s longest axis;
/// 2. candidates are taken in that order until their weight reaches the amount plus the
///    heaviest of them (a part that cannot give that much gives all it has; objects of `i`
///    the layers do not reach, in pieces cut off from the boundary, come last);
/// 3. each candidate is chosen if it still fits the amount; then, if that leaves a shortfall,
///    the lightest candidate not chosen is added when it brings the sum closer.
///
/// So the sent weight is within half of one candidate's weight of the amount whenever the
/// sender has enough, sent objects lie on the shared boundary first (adjacent to the
/// receiver while the boundary layer suffices), and the part keeps its interior. An object
/// moves at most once per call; a part sends only what it held on entry, so a transfer that
/// passes load on through a part is met over repeated calls ([`crate::Diffusion`]'s rounds).
///
/// Each sender's choice depends only on its own objects, the parts on entry and the
/// centroids, so senders are processed concurrently on `par` with the same result for every
/// thread count (and a distributed version would choose the same objects on each rank).
pub fn select(
    tasks: Tasks<'_>,
    graph: &ProcGraph,
    flows: &[i64],
    parts: &mut [u32],
    par: Par,
) -> Result<Selection, Error> {
    let n = tasks.weights.len();
    let lengths = [
        ("coords", n * tasks.dim, tasks.coords.len()),
        ("adjacency", n, tasks.adjacency.num_objects()),
        ("parts", n, parts.len()),
        ("flows", graph.num_edges(), flows.len()),
    ];
    for (what, expected, got) in lengths {
        if expected != got {
            return Err(Error::LengthMismatch {
                what,
                expected,
                got,
            });
        }
    }
    let choice =
        Context::new(tasks, parts, graph.num_vertices(), par)?.choose(graph, flows, par)?;
    Ok(choice.apply(tasks.weights, parts))
}

/// The objects chosen in one round, before they are moved.
pub(crate) struct Choice {
    moves: Vec<(u32, u32)>,
    sent: Vec<Sent>,
}

impl Choice {
    /// Writes the new parts and sums what moved.
    pub(crate) fn apply(self, weights: &[u64], parts: &mut [u32]) -> Selection {
        let mut out = Selection {
            sent: self.sent,
            ..Selection::default()
        };
        for (o, to) in self.moves {
            parts[o as usize] = to;
            out.moved_objects += 1;
            out.moved_weight += weights[o as usize];
        }
        out
    }
}

/// What every sender reads: the objects by part, the boundary pairs, the centroids (of the
/// parts as they are when it is built).
pub(crate) struct Context<'a> {
    tasks: Tasks<'a>,
    parts: &'a [u32],
    /// Objects of part `p`: `members[start[p]..start[p + 1]]`, ascending.
    start: Vec<usize>,
    members: Vec<u32>,
    /// `(p, q, o)`: object `o` of part `p` has a neighbour in part `q`; sorted.
    boundary: Vec<(u32, u32, u32)>,
    /// Per part, the weighted centroid of its objects (`None`: no object).
    pub(crate) centroids: Vec<Option<[f64; 3]>>,
}

/// Objects per chunk of the parallel passes (fixed, so results do not depend on threads).
const CHUNK: usize = 1 << 14;

impl<'a> Context<'a> {
    /// The context of the `k` parts `parts` (objects with a part `>= k` belong to none).
    pub(crate) fn new(
        tasks: Tasks<'a>,
        parts: &'a [u32],
        k: usize,
        par: Par,
    ) -> Result<Context<'a>, Error> {
        let mut start = vec![0usize; k + 1];
        for &p in parts.iter().filter(|&&p| (p as usize) < k) {
            start[p as usize + 1] += 1;
        }
        for p in 0..k {
            start[p + 1] += start[p];
        }
        let mut fill = start.clone();
        let mut members = vec![0u32; start[k]];
        for (o, &p) in parts.iter().enumerate().filter(|&(_, &p)| (p as usize) < k) {
            members[fill[p as usize]] = o as u32;
            fill[p as usize] += 1;
        }
        let adj = tasks.adjacency;
        let (boundary, centroids) = par
            .install(|| {
                let mut boundary: Vec<(u32, u32, u32)> = (0..parts.len())
                    .into_par_iter()
                    .with_min_len(CHUNK)
                    .flat_map_iter(|o| {
                        let p = parts[o];
                        adj.neighbours(o).iter().filter_map(move |&b| {
                            let q = *parts.get(b as usize)?;
                            ((p as usize) < k && (q as usize) < k && q != p)
                                .then_some((p, q, o as u32))
                        })
                    })
                    .collect();
                boundary.par_sort_unstable();
                boundary.dedup();
                let centroids = (0..k)
                    .into_par_iter()
                    .map(|p| centroid(tasks, &members[start[p]..start[p + 1]]))
                    .collect();
                (boundary, centroids)
            })
            .map_err(Error::ThreadPool)?;
        Ok(Context {
            tasks,
            parts,
            start,
            members,
            boundary,
            centroids,
        })
    }

    /// The processor graph of the parts: `p` and `q` joined when an object of one has a
    /// neighbour in the other (as [`ProcGraph::from_objects`]).
    pub(crate) fn processor_graph(&self, k: usize) -> ProcGraph {
        let mut edges: Vec<[u32; 2]> = (self.boundary.iter())
            .map(|&(p, q, _)| [p.min(q), p.max(q)])
            .collect();
        edges.dedup();
        ProcGraph::from_edge_list(k, edges)
    }

    /// Each sender's choice for the transfers `flows` along the edges of `graph`.
    pub(crate) fn choose(
        &self,
        graph: &ProcGraph,
        flows: &[i64],
        par: Par,
    ) -> Result<Choice, Error> {
        let k = graph.num_vertices();
        let mut outgoing: Vec<Vec<(u32, u64)>> = vec![Vec::new(); k];
        for (&[a, b], &f) in graph.edges().iter().zip(flows) {
            if f > 0 {
                outgoing[a as usize].push((b, f.unsigned_abs()));
            } else if f < 0 {
                outgoing[b as usize].push((a, f.unsigned_abs()));
            }
        }
        let picks: Vec<Choice> = par
            .install(|| {
                (0..k as u32)
                    .into_par_iter()
                    .map(|i| self.pick(i, &outgoing[i as usize]))
                    .collect()
            })
            .map_err(Error::ThreadPool)?;
        let mut choice = Choice {
            moves: Vec::new(),
            sent: Vec::new(),
        };
        for c in picks {
            choice.moves.extend(c.moves);
            choice.sent.extend(c.sent);
        }
        Ok(choice)
    }

    fn point(&self, o: u32) -> [f64; 3] {
        let d = self.tasks.dim;
        let mut x = [0.0; 3];
        x[..d].copy_from_slice(&self.tasks.coords[o as usize * d..(o as usize + 1) * d]);
        x
    }

    /// The objects of part `i` with a neighbour in part `j`.
    fn boundary(&self, i: u32, j: u32) -> impl Iterator<Item = u32> + '_ {
        let lo = self.boundary.partition_point(|&(p, q, _)| (p, q) < (i, j));
        let hi = self.boundary.partition_point(|&(p, q, _)| (p, q) <= (i, j));
        self.boundary[lo..hi].iter().map(|&(_, _, o)| o)
    }

    /// Sender `i`'s choices for its transfers `(to, amount)`: the moves and what each got.
    fn pick(&self, i: u32, transfers: &[(u32, u64)]) -> Choice {
        let objs = &self.members[self.start[i as usize]..self.start[i as usize + 1]];
        let mut sender = Sender {
            ctx: self,
            i,
            objs,
            taken: vec![false; objs.len()],
            seen: vec![0; objs.len()],
            stamp: 0,
        };
        let mut moves = Vec::new();
        let mut sent = Vec::with_capacity(transfers.len());
        for &(j, amount) in transfers {
            let chosen = sender.transfer(j, amount);
            let weight = chosen.iter().map(|&o| self.tasks.weights[o as usize]).sum();
            sent.push(Sent {
                from: i,
                to: j,
                asked: amount,
                sent: weight,
                objects: chosen.len(),
            });
            moves.extend(chosen.into_iter().map(|o| (o, j)));
        }
        Choice { moves, sent }
    }
}

/// The weighted centroid of `objs` (the plain mean when they weigh nothing; `None` if empty).
fn centroid(tasks: Tasks<'_>, objs: &[u32]) -> Option<[f64; 3]> {
    if objs.is_empty() {
        return None;
    }
    let d = tasks.dim;
    let total: f64 = objs.iter().map(|&o| tasks.weights[o as usize] as f64).sum();
    let mut c = [0.0; 3];
    for &o in objs {
        let w = match total > 0.0 {
            true => tasks.weights[o as usize] as f64 / total,
            false => 1.0 / objs.len() as f64,
        };
        for (a, ca) in c.iter_mut().enumerate().take(d) {
            *ca += w * tasks.coords[o as usize * d + a];
        }
    }
    Some(c)
}

/// One sender's state over its transfers: which of its objects are taken, and the marks of
/// the current search (indices are positions in `objs`).
struct Sender<'c, 'a> {
    ctx: &'c Context<'a>,
    i: u32,
    objs: &'c [u32],
    taken: Vec<bool>,
    seen: Vec<u32>,
    stamp: u32,
}

impl<'c, 'a> Sender<'c, 'a> {
    fn local(&self, o: u32) -> usize {
        self.objs.binary_search(&o).expect("an object of this part")
    }

    /// How far towards part `j` each object lies (larger: closer to `j`).
    fn key_towards(&self, j: u32) -> impl Fn(u32) -> f64 + use<'c, 'a> {
        let ctx = self.ctx;
        let ci = ctx.centroids[self.i as usize].unwrap_or([0.0; 3]);
        let dir = match self.ctx.centroids[j as usize] {
            Some(cj) => [cj[0] - ci[0], cj[1] - ci[1], cj[2] - ci[2]],
            None => self.longest_axis(),
        };
        move |o| {
            let x = ctx.point(o);
            (0..3).map(|a| (x[a] - ci[a]) * dir[a]).sum()
        }
    }

    /// The unit vector of the axis along which this part's objects spread most.
    fn longest_axis(&self) -> [f64; 3] {
        let (mut lo, mut hi) = ([f64::MAX; 3], [f64::MIN; 3]);
        for &o in self.objs {
            let x = self.ctx.point(o);
            for a in 0..self.ctx.tasks.dim {
                lo[a] = lo[a].min(x[a]);
                hi[a] = hi[a].max(x[a]);
            }
        }
        let axis = (0..self.ctx.tasks.dim)
            .max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b])).then(b.cmp(&a)))
            .unwrap_or(0);
        let mut dir = [0.0; 3];
        dir[axis] = 1.0;
        dir
    }

    /// The objects chosen for the transfer of `amount` to part `j` (marked taken).
    fn transfer(&mut self, j: u32, amount: u64) -> Vec<u32> {
        let ctx = self.ctx;
        let key = self.key_towards(j);
        let by_key = |v: &mut Vec<(f64, u32)>| {
            v.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        };
        self.stamp += 1;
        let stamp = self.stamp;
        let mut layer: Vec<(f64, u32)> = Vec::new();
        for o in ctx.boundary(self.i, j) {
            let l = self.local(o);
            if !self.taken[l] && self.seen[l] != stamp {
                self.seen[l] = stamp;
                layer.push((key(o), o));
            }
        }
        if layer.is_empty() {
            // No shared boundary (the receiver has no object yet): start from the far end.
            let far = (0..self.objs.len())
                .filter(|&l| !self.taken[l])
                .map(|l| (key(self.objs[l]), self.objs[l]))
                .min_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            layer.extend(far);
            if let Some(&(_, o)) = layer.first() {
                let l = self.local(o);
                self.seen[l] = stamp;
            }
        }
        // Candidates layer by layer until their weight reaches amount + the heaviest.
        let w = |o: u32| ctx.tasks.weights[o as usize];
        let (mut window, mut cum, mut heaviest) = (Vec::new(), 0u128, 0u64);
        let enough = |cum: u128, heaviest: u64| cum >= u128::from(amount) + u128::from(heaviest);
        while !layer.is_empty() && !enough(cum, heaviest) {
            by_key(&mut layer);
            for &(_, o) in &layer {
                window.push(o);
                cum += u128::from(w(o));
                heaviest = heaviest.max(w(o));
                if enough(cum, heaviest) {
                    break;
                }
            }
            let mut next = Vec::new();
            for &(_, o) in &layer {
                for &b in ctx.tasks.adjacency.neighbours(o as usize) {
                    if ctx.parts.get(b as usize) != Some(&self.i) {
                        continue;
                    }
                    let l = self.local(b);
                    if !self.taken[l] && self.seen[l] != stamp {
                        self.seen[l] = stamp;
                        next.push((key(b), b));
                    }
                }
            }
            layer = next;
        }
        if !enough(cum, heaviest) {
            // Pieces of the part the layers did not reach, nearest to j first.
            let mut rest: Vec<(f64, u32)> = (0..self.objs.len())
                .filter(|&l| !self.taken[l] && self.seen[l] != stamp)
                .map(|l| (key(self.objs[l]), self.objs[l]))
                .collect();
            by_key(&mut rest);
            for (_, o) in rest {
                if enough(cum, heaviest) {
                    break;
                }
                window.push(o);
                cum += u128::from(w(o));
                heaviest = heaviest.max(w(o));
            }
        }
        let chosen = fit(&window, amount, w);
        for &o in &chosen {
            let l = self.local(o);
            self.taken[l] = true;
        }
        chosen
    }
}

/// The greedy subset-sum step: each candidate in order if it fits what is left of `amount`;
/// then the lightest one left out, if adding it makes the sum closer to `amount`.
fn fit(window: &[u32], amount: u64, w: impl Fn(u32) -> u64) -> Vec<u32> {
    let mut rem = amount;
    let mut chosen = Vec::new();
    let mut left = Vec::new();
    for &o in window {
        if w(o) <= rem {
            rem -= w(o);
            chosen.push(o);
        } else {
            left.push(o);
        }
    }
    if rem > 0
        && let Some(&o) = left.iter().min_by_key(|&&o| w(o))
        && w(o) - rem < rem
    {
        chosen.push(o);
    }
    chosen
}
