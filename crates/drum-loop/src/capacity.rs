//! What the ranks' work and time say between rebalance points (Watts, Rieffel & Taylor 1998):
//! the work each rank did over a window (the measured capacity's numerator), the ranks' time
//! taken as their load (the paper's homogeneous balancing), and each node's memory at the
//! next step (the memory rule).

use crate::Error;
use crate::rebalance::NodeMemory;
use comm::{Comm, ReduceOp};
use drum_model::{Machine, NodeObservation, RankWork};
use part_api::Points;
use std::collections::BTreeMap;

/// What the balancer takes as each rank's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMeasure {
    /// The objects' work weights (abstract work, the paper's "load").
    #[default]
    Work,
    /// The seconds each rank needed for its work in the last measured window: every object
    /// weighs its work times its rank's seconds per unit of work. With equal part sizes
    /// ([`crate::Sizing::Uniform`]) this is Watts et al.'s homogeneous balancing "with CPU
    /// time as the task loads", which knows no capacities: an object that moves keeps the
    /// time of the rank it left. Until every rank has been measured the work is the load.
    Time,
}

/// The work each rank did over the pending window: one step's work on what it held after
/// each rebalance point the window spans (the loads at a point are after the refinement,
/// which the window did not compute on).
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkLedger {
    /// The work each rank held after the last point (empty before the first).
    held: Vec<f64>,
    /// The work done over the pending window, per rank.
    pending: Vec<f64>,
}

impl WorkLedger {
    /// A rebalance point of `ranks` ranks closes one interval of the window: each rank
    /// computed one step on what it held since the last point (nothing before the first
    /// point: the time until then set the run up).
    pub fn close_interval(&mut self, ranks: usize) {
        if self.pending.len() != ranks {
            self.pending = vec![0.0; ranks];
        }
        for (p, h) in self.pending.iter_mut().zip(&self.held) {
            *p += h;
        }
    }

    /// The work done over the window that was just measured (or dropped); the next window
    /// starts from nothing.
    pub fn take(&mut self) -> Vec<f64> {
        std::mem::take(&mut self.pending)
    }

    /// What each rank holds after this point (its work), for the next interval.
    pub fn hold(&mut self, work: Vec<f64>) {
        self.held = work;
    }
}

/// Each rank's seconds per unit of work from its last measurement, or `None` while a rank
/// has none (then the work stays the load).
pub(crate) fn seconds_per_work(work: &BTreeMap<usize, RankWork>, ranks: usize) -> Option<Vec<f64>> {
    (0..ranks)
        .map(|r| work.get(&r).map(|w| w.cpu_seconds / w.work))
        .collect()
}

/// The ranks' loads in seconds (`loads` work times each rank's seconds per work), or the
/// work when `per_work` is unknown.
pub(crate) fn time_loads(loads: &[f64], per_work: Option<&[f64]>) -> Vec<f64> {
    match per_work {
        Some(f) => loads.iter().zip(f).map(|(l, f)| l * f).collect(),
        None => loads.to_vec(),
    }
}

/// This rank's `n` objects weighed in seconds: their work (1 each without weights) times the
/// rank's seconds per unit of work.
pub(crate) fn time_weights(points: Points<'_>, n: usize, per_work: f64) -> Vec<f64> {
    match points.weights {
        Some(w) => w.iter().map(|x| x * per_work).collect(),
        None => vec![per_work; n],
    }
}

/// The work each rank holds after a repartition that weighed the objects otherwise (one
/// all-reduce): each rank's objects' work summed by their new rank.
pub(crate) fn held_work<C: Comm>(
    comm: &C,
    points: Points<'_>,
    parts: &[u32],
) -> Result<Vec<f64>, Error> {
    let mut held = vec![0.0; comm.size()];
    for (i, &p) in parts.iter().enumerate() {
        held[p as usize] += points.weights.map_or(1.0, |w| w[i]);
    }
    comm.allreduce_f64(ReduceOp::Sum, &mut held)?;
    Ok(held)
}

/// Each measured node's memory at the next step: what is resident now (physical minus
/// available, the window's mean) plus what its ranks' objects will add if the load grows by
/// `growth` again, at `bytes_per_load` bytes per unit of load (the last migration's measured
/// bytes per weight). `loads`: the work each rank holds now. Nodes without a memory reading
/// are left out.
pub(crate) fn node_memory(
    machine: &Machine,
    nodes: &BTreeMap<u32, NodeObservation>,
    loads: &[f64],
    bytes_per_load: f64,
    growth: f64,
) -> Vec<NodeMemory> {
    machine
        .computing_nodes()
        .filter_map(|n| {
            let m = nodes.get(&n.nodenum)?.memory?;
            let load: f64 = n.rank_range().filter_map(|r| loads.get(r)).sum();
            let added = bytes_per_load * load * (growth - 1.0).max(0.0);
            Some(NodeMemory {
                node: n.nodenum,
                resident: (m.total - m.available).max(0.0) + added,
                physical: m.total,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drum_model::power::MemoryObservation;

    #[test]
    fn the_ledger_counts_what_was_held_over_each_interval() {
        let mut l = WorkLedger::default();
        // The first point: nothing was computed before it.
        l.close_interval(2);
        l.hold(vec![12.0, 8.0]);
        // Whatever the refinement then added, the window computed on 12 and 8; a window too
        // short to measure adds the next interval.
        l.close_interval(2);
        l.hold(vec![10.0, 10.0]);
        l.close_interval(2);
        assert_eq!(l.take(), vec![22.0, 18.0]);
        l.close_interval(2);
        assert_eq!(l.take(), vec![10.0, 10.0]);
    }

    #[test]
    fn memory_at_the_next_step() {
        let m = Machine::parse_str(
            r#"<machinemodel>
              <node type="NETWORK" nodenum="0" name="sw" parent="-1"/>
              <node type="MULTIPLE_COMPUTING" nodenum="1" name="a" parent="0" numprocs="2"/>
              <node type="SINGLE_COMPUTING" nodenum="2" name="b" parent="0"/>
            </machinemodel>"#,
            "test.xml",
        )
        .unwrap();
        let mut nodes = BTreeMap::new();
        nodes.insert(
            1,
            NodeObservation {
                memory: Some(MemoryObservation {
                    total: 1000.0,
                    available: 400.0,
                }),
                ..NodeObservation::default()
            },
        );
        nodes.insert(2, NodeObservation::default());
        // Node a: 600 resident, its ranks hold 3 + 1 units that double at 50 bytes each.
        let v = node_memory(&m, &nodes, &[3.0, 1.0, 5.0], 50.0, 2.0);
        assert_eq!(
            v,
            vec![NodeMemory {
                node: 1,
                resident: 800.0,
                physical: 1000.0
            }]
        );
        assert!(!v[0].exceeded());
        // Growing fourfold instead: 600 + 200 · 3 > 1000.
        assert!(node_memory(&m, &nodes, &[3.0, 1.0, 5.0], 50.0, 4.0)[0].exceeded());
        // A shrinking mesh adds nothing.
        assert_eq!(
            node_memory(&m, &nodes, &[3.0, 1.0, 5.0], 50.0, 0.5)[0].resident,
            600.0
        );
    }

    #[test]
    fn seconds_per_work_needs_every_rank() {
        let mut w = BTreeMap::new();
        w.insert(
            0,
            RankWork {
                work: 100.0,
                cpu_seconds: 2.0,
            },
        );
        assert_eq!(seconds_per_work(&w, 2), None);
        w.insert(
            1,
            RankWork {
                work: 50.0,
                cpu_seconds: 2.0,
            },
        );
        assert_eq!(seconds_per_work(&w, 2), Some(vec![0.02, 0.04]));
    }
}
