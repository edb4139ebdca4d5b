//! The incremental partitioner: transfer calculation and task selection, repeated until the
//! imbalance meets the tolerance.

use crate::select::{Context, Tasks};
use crate::{Adjacency, Capacities, Error, Method, Transfer};
use part_api::{Csr, Par, Partitioner, Points, Serial};

/// Incremental repartitioning by load transfer (Watts, Rieffel & Taylor 1998): from the
/// current partition, compute how much load to move between neighbouring parts so that the
/// utilisation `load / capacity` equalises ([`Transfer`]), choose the objects that carry it
/// ([`crate::select`]), and repeat with the transfers recomputed until the imbalance meets
/// [`Diffusion::tolerance`] or [`Diffusion::max_rounds`] is reached. Objects move only between
/// parts that touch, boundary first, so a small change of load or capacity moves little.
///
/// ```
/// use diffusion::{Diffusion, Method, Transfer};
/// use part_api::Points;
/// // 8 × 8 unit objects in a grid, split into left and right halves.
/// let coords: Vec<f64> = (0..64).flat_map(|i| [(i % 8) as f64, (i / 8) as f64]).collect();
/// let mut parts: Vec<u32> = (0..64).map(|i| u32::from(i % 8 >= 4)).collect();
/// let d = Diffusion {
///     transfer: Transfer { method: Method::Hbm, ..Diffusion::default().transfer },
///     ..Default::default()
/// };
/// // The right-hand processor is three times as fast: it should hold 48 of the 64 objects.
/// let r = d.rebalance(Points::new(&coords, 2, None), None, &[1.0, 3.0], &mut parts).unwrap();
/// assert!(r.met);
/// assert_eq!(parts.iter().filter(|&&p| p == 1).count(), 48);
/// // Only objects of part 0 moved, and they came from the boundary column x = 3 inwards.
/// assert_eq!(r.moved_objects, 16);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diffusion {
    /// The transfer calculation of each round. Its `eff_min` should be at least
    /// `1 / (1 + tolerance)`, or rounds stop short of the tolerance.
    pub transfer: Transfer,
    /// Stop when `max_i L_i / L_i* ≤ 1 + tolerance` (`L_i*` the balanced load of part `i`);
    /// `≥ 0`. The granularity of the objects limits what is reachable.
    pub tolerance: f64,
    /// Most rounds of transfer calculation and task selection.
    pub max_rounds: usize,
    /// Without an adjacency, objects are joined to their `neighbours` nearest ([`Csr::knn`]).
    pub neighbours: usize,
    /// Threads for the passes over the objects (the result is the same for every setting).
    pub par: Par,
}

impl Default for Diffusion {
    fn default() -> Self {
        Diffusion {
            transfer: Transfer {
                method: Method::Hbm,
                eff_min: 0.99,
                max_iterations: 1000,
            },
            tolerance: 0.05,
            max_rounds: 10,
            neighbours: 8,
            par: Par::Seq,
        }
    }
}

/// One round of a [`Diffusion::rebalance`].
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// `max_i L_i / L_i*` before the round.
    pub imbalance: f64,
    /// Edges of the processor graph (bridges included).
    pub edges: usize,
    /// Edges added to join components (parts that touch no other, e.g. empty ones).
    pub bridges: usize,
    /// Iterations of the transfer calculation.
    pub iterations: usize,
    /// `eff` the transfers would reach if met exactly.
    pub planned_eff: f64,
    /// Load the transfers asked to move (sum of `|flow|`, caller's weight units).
    pub planned: f64,
    /// Objects that moved.
    pub moved_objects: usize,
    /// The weight of the objects that moved (caller's units).
    pub moved_weight: f64,
}

/// The result of a [`Diffusion::rebalance`].
#[derive(Debug, Clone, PartialEq)]
pub struct Rebalance {
    /// The rounds run.
    pub rounds: Vec<Round>,
    /// Per part, the weight it holds now (caller's units, quantised).
    pub part_weights: Vec<f64>,
    /// Per part, its balanced weight `total · C_i / ΣC`.
    pub targets: Vec<f64>,
    /// `max_i L_i / L_i*` at the end (1 is balanced).
    pub imbalance: f64,
    /// Whether `imbalance ≤ 1 + tolerance`.
    pub met: bool,
    /// Objects whose part differs from their part on entry, and their weight.
    pub moved_objects: usize,
    /// The weight of the objects that moved (caller's units).
    pub moved_weight: f64,
    /// Objects that had no part `< k` on entry and were given one (a neighbour's part, or the
    /// part of the nearest centroid).
    pub assigned: usize,
    /// The weight of one unit of the fixed-point loads (`1` for unit weights).
    pub quantum: f64,
}

impl Diffusion {
    /// Rebalances `parts` (each object's current part on entry, its new part on return) for
    /// parts of relative capacities `capacities` (one per part, `> 0`). `points` are the
    /// objects (1-D to 3-D, finite; weights finite and `≥ 0`, `None` for unit weights);
    /// `adjacency` their neighbours (`None`: the k-nearest-neighbour graph of the points).
    /// Objects whose part is `>= capacities.len()` on entry (new objects) first join a
    /// neighbour's part; at least one object must have a part.
    pub fn rebalance(
        &self,
        points: Points<'_>,
        adjacency: Option<&dyn Adjacency>,
        capacities: &[f64],
        parts: &mut [u32],
    ) -> Result<Rebalance, Error> {
        let caps = Capacities::new(capacities)?;
        let (weights, quantum) = check_and_quantise(points, parts)?;
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return Err(Error::InvalidParameter {
                name: "tolerance",
                value: self.tolerance,
                expected: "a finite number >= 0",
            });
        }
        let knn;
        let adjacency: &dyn Adjacency = match adjacency {
            Some(a) if a.num_objects() != parts.len() => {
                return Err(Error::LengthMismatch {
                    what: "adjacency",
                    expected: parts.len(),
                    got: a.num_objects(),
                });
            }
            Some(a) => a,
            None => {
                knn = Csr::knn(points.coords, points.dim, self.neighbours, self.par)?;
                &knn
            }
        };
        let tasks = Tasks {
            coords: points.coords,
            dim: points.dim,
            weights: &weights,
            adjacency,
        };
        let entry = parts.to_vec();
        let assigned = assign_new(tasks, caps.len(), parts, self.par)?;
        let mut rounds = Vec::new();
        let mut loads = part_loads(&weights, parts, caps.len());
        while caps.imbalance(&loads) > 1.0 + self.tolerance && rounds.len() < self.max_rounds {
            let round = self.round(tasks, &caps, &loads, parts, quantum)?;
            let moved = round.moved_objects;
            rounds.push(round);
            loads = part_loads(&weights, parts, caps.len());
            if moved == 0 {
                break;
            }
        }
        let imbalance = caps.imbalance(&loads);
        let total: u64 = loads.iter().sum();
        let changed = (0..parts.len()).filter(|&o| parts[o] != entry[o]);
        let moved_weight: u64 = changed.clone().map(|o| weights[o]).sum();
        Ok(Rebalance {
            rounds,
            part_weights: loads.iter().map(|&l| l as f64 * quantum).collect(),
            targets: (caps.units().iter())
                .map(|&c| total as f64 * quantum * c as f64 / caps.total() as f64)
                .collect(),
            imbalance,
            met: imbalance <= 1.0 + self.tolerance,
            moved_objects: changed.count(),
            moved_weight: moved_weight as f64 * quantum,
            assigned,
            quantum,
        })
    }

    /// One round: the processor graph of the current parts (joined where it falls apart), the
    /// transfers, and the objects that carry them.
    fn round(
        &self,
        tasks: Tasks<'_>,
        caps: &Capacities,
        loads: &[u64],
        parts: &mut [u32],
        quantum: f64,
    ) -> Result<Round, Error> {
        let k = caps.len();
        let ctx = Context::new(tasks, parts, k, self.par)?;
        let util = |p: u32| loads[p as usize] as f64 / caps.units()[p as usize] as f64;
        // Parts that touch no other are joined by their nearest centroids; an empty part
        // (no centroid) to the most loaded part.
        let (graph, bridges) = ctx.processor_graph(k).bridged(|a, b| {
            match (&ctx.centroids[a as usize], &ctx.centroids[b as usize]) {
                (Some(x), Some(y)) => x.iter().zip(y).map(|(p, q)| (p - q).powi(2)).sum(),
                _ => -(util(a) + util(b)),
            }
        });
        let flows = self.transfer.compute(&graph, loads, caps)?;
        let choice = ctx.choose(&graph, &flows.flows, self.par)?;
        let sel = choice.apply(tasks.weights, parts);
        Ok(Round {
            imbalance: caps.imbalance(loads),
            edges: graph.num_edges(),
            bridges,
            iterations: flows.iterations(),
            planned_eff: caps.efficiency(&flows.loads),
            planned: flows.planned() as f64 * quantum,
            moved_objects: sel.moved_objects,
            moved_weight: sel.moved_weight as f64 * quantum,
        })
    }
}

impl Partitioner<Serial> for Diffusion {
    type Output = Rebalance;
    type Error = Error;
    type Workspace = ();

    /// [`Diffusion::rebalance`] with the k-nearest-neighbour graph of the points: `parts`
    /// holds the current partition on entry (this partitioner is incremental), `targets` are
    /// the capacities.
    fn partition_with(
        &self,
        _ws: &mut (),
        _group: &Serial,
        points: Points<'_>,
        targets: &[f64],
        parts: &mut [u32],
    ) -> Result<Rebalance, Error> {
        self.rebalance(points, None, targets, parts)
    }
}

/// Checks the points against `parts` and returns the fixed-point weights with their quantum:
/// `w · 2^e` rounded, `e` such that `n · max w · 2^e ≤ 2^52` (every sum exact, in `u64` and
/// in `f64`); unit weights are 1.
fn check_and_quantise(points: Points<'_>, parts: &[u32]) -> Result<(Vec<u64>, f64), Error> {
    let (coords, dim, weights) = points.into_parts();
    if !(1..=3).contains(&dim) || coords.len() % dim != 0 {
        return Err(Error::Dimension {
            dim,
            len: coords.len(),
        });
    }
    let n = coords.len() / dim;
    if n > u32::MAX as usize {
        return Err(Error::TooMany {
            what: "objects",
            count: n,
        });
    }
    if parts.len() != n {
        return Err(Error::LengthMismatch {
            what: "parts",
            expected: n,
            got: parts.len(),
        });
    }
    if let Some(i) = coords.iter().position(|c| !c.is_finite()) {
        return Err(Error::InvalidCoordinate {
            index: i / dim,
            axis: i % dim,
            value: coords[i],
        });
    }
    let Some(w) = weights else {
        return Ok((vec![1; n], 1.0));
    };
    if w.len() != n {
        return Err(Error::LengthMismatch {
            what: "weights",
            expected: n,
            got: w.len(),
        });
    }
    if let Some(index) = w.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
        return Err(Error::InvalidWeight {
            index,
            value: w[index],
        });
    }
    let wmax = w.iter().copied().fold(0.0, f64::max);
    if wmax == 0.0 {
        return Ok((vec![0; n], 1.0));
    }
    let e = (52.0 - (n as f64 * wmax).log2().ceil()).clamp(-1000.0, 1000.0);
    let scale = e.exp2();
    Ok((
        w.iter().map(|x| (x * scale).round() as u64).collect(),
        1.0 / scale,
    ))
}

/// The load of each of the `k` parts.
fn part_loads(weights: &[u64], parts: &[u32], k: usize) -> Vec<u64> {
    let mut loads = vec![0u64; k];
    for (&w, &p) in weights.iter().zip(parts) {
        if let Some(l) = loads.get_mut(p as usize) {
            *l += w;
        }
    }
    loads
}

/// Gives every object without a part `< k` the part of the first neighbour with one, breadth
/// first from the objects that have one (in index order); objects no neighbour chain reaches
/// take the part of the nearest centroid. Returns how many were given a part.
fn assign_new(tasks: Tasks<'_>, k: usize, parts: &mut [u32], par: Par) -> Result<usize, Error> {
    let n = parts.len();
    let mut queue: Vec<u32> = (0..n as u32)
        .filter(|&o| (parts[o as usize] as usize) < k)
        .collect();
    if queue.is_empty() && n > 0 {
        return Err(Error::NoCurrentPartition {
            objects: n,
            parts: k,
        });
    }
    let new = n - queue.len();
    if new == 0 {
        return Ok(0);
    }
    let mut head = 0;
    while let Some(&o) = queue.get(head) {
        head += 1;
        let po = parts[o as usize];
        for &b in tasks.adjacency.neighbours(o as usize) {
            if let Some(pb) = parts.get_mut(b as usize)
                && (*pb as usize) >= k
            {
                *pb = po;
                queue.push(b);
            }
        }
    }
    if queue.len() == n {
        return Ok(new);
    }
    let cents = Context::new(tasks, parts, k, par)?.centroids;
    let d = tasks.dim;
    for (o, part) in parts.iter_mut().enumerate() {
        if (*part as usize) < k {
            continue;
        }
        let x = &tasks.coords[o * d..(o + 1) * d];
        let dist = |c: &[f64; 3]| (0..d).map(|a| (x[a] - c[a]).powi(2)).sum::<f64>();
        *part = (0..k)
            .filter_map(|p| cents[p].as_ref().map(|c| (dist(c), p)))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map_or(0, |(_, p)| p as u32);
    }
    Ok(new)
}

#[cfg(test)]
mod tests;
