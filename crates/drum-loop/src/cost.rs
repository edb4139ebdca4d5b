//! [`RebalanceCost`]: where the seconds of one rebalance point go, on the reporting rank.

use serde::Serialize;
use std::time::Instant;

/// What one rebalance point ([`crate::DrumLoop::rebalance`]) spent on this rank, phase by
/// phase, in seconds (wall clock). The phases follow each other, so they add up to
/// `total_s` but for the bookkeeping between them (building the report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RebalanceCost {
    /// The window: cutting this rank's monitoring window (reading the agent's counters), and
    /// turning every rank's window into observations, powers, part sizes and the plan (0
    /// work when sensing is not due or the window too short: then only the cut).
    pub window_s: f64,
    /// The exchange: the one `allgatherv` of every rank's time since the last point, load
    /// and pending window (it includes waiting for the slowest rank to arrive).
    pub exchange_s: f64,
    /// The policy's decision (eff, drift, Lan's gain against cost).
    pub decision_s: f64,
    /// The partitioner (`hier_part::Hier::repartition`, KEEP_CUTS), collectives included;
    /// 0 when the partition was kept. The same as [`crate::LoopReport::partition_s`].
    pub partition_s: f64,
    /// The whole rebalance point.
    pub total_s: f64,
}

/// A stopwatch that hands out the seconds since its last lap.
pub(crate) struct Lap(Instant);

impl Lap {
    pub(crate) fn start() -> Lap {
        Lap(Instant::now())
    }

    /// Seconds since the start or the previous lap.
    pub(crate) fn lap(&mut self) -> f64 {
        let now = Instant::now();
        let s = now.duration_since(self.0).as_secs_f64();
        self.0 = now;
        s
    }
}
