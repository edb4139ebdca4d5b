//! What a node and its processes did over a span of time, as totals: the one place where
//! monitored counters become [`NodeObservation`]s.
//!
//! A monitor's window ([`crate::monitor::Monitor::window`]) gives one [`Usage`] per target,
//! read straight from the kernel's counters (seconds of CPU, idle and total clock ticks, bytes
//! moved). Spans merge by adding totals ([`Usage::merge`]: a rebalance point whose window was
//! too short keeps it open into the next), the ranks of one node join into the node's usage
//! ([`Usage::join`]), and the node's observation is the totals divided by the time
//! ([`Usage::observation`]): the window means of DRUM 2005 §3.3 (ū, ī over the window, A_i(t,
//! T) averaged over T). The recorded-samples path ([`crate::samples`]) builds the same
//! [`Usage`] from each line of a recording and goes through the same arithmetic.

use crate::power::{IfaceObservation, IfaceRates, MemoryObservation, NodeObservation};

/// Idle and total time of one CPU over a span, in any one unit (clock ticks from
/// `/proc/stat`, or sample weights when replaying fractions).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuIdle {
    /// Idle time.
    pub idle: f64,
    /// All time counted (idle or not).
    pub total: f64,
}

impl CpuIdle {
    /// The idle fraction i_t (1 when no time was counted: a span shorter than a tick).
    pub fn fraction(&self) -> f64 {
        if self.total > 0.0 {
            (self.idle / self.total).clamp(0.0, 1.0)
        } else {
            1.0
        }
    }
}

/// One application process over a span.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcUsage {
    /// Seconds the span lasted for this process.
    pub seconds: f64,
    /// CPU seconds it used.
    pub cpu_s: f64,
    /// Seconds it was runnable (running, or waiting in a run queue), where the kernel keeps
    /// the scheduler's counters.
    pub runnable_s: Option<f64>,
}

/// One interface over a span: bytes and packets moved, and the time over which they were
/// counted (0 when the interface was seen once, so no rate is known).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IfaceUsage {
    /// Interface name.
    pub name: String,
    /// Link capacity C_i, Mbit/s, if known.
    pub capacity_mbps: Option<f64>,
    /// Seconds the counters cover.
    pub seconds: f64,
    /// Bytes received.
    pub rx_bytes: f64,
    /// Bytes sent.
    pub tx_bytes: f64,
    /// Packets received.
    pub rx_packets: f64,
    /// Packets sent.
    pub tx_packets: f64,
}

/// What a node and its application processes did over a span of time, as totals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Usage {
    /// Seconds the span lasted.
    pub seconds: f64,
    /// Per CPU of the node (its `cpus`), idle and total time.
    pub cpus: Vec<CpuIdle>,
    /// Per application process of the node, in rank order.
    pub procs: Vec<ProcUsage>,
    /// Physical memory, bytes (the latest reading).
    pub mem_total: f64,
    /// Available memory times seconds (its time mean is `mem_available_s / seconds`).
    pub mem_available_s: f64,
    /// Interfaces (loopback excluded), in order of first appearance.
    pub ifaces: Vec<IfaceUsage>,
}

impl Usage {
    /// Adds a later span of the same node: times and counts add up; memory's total and an
    /// interface's capacity are the later span's where it has them; a process or CPU the
    /// earlier span lacks starts at the later one's, and runnable time is known only if
    /// every span knew it.
    pub fn merge(&mut self, later: &Usage) {
        let first = self.seconds == 0.0 && self.procs.is_empty() && self.cpus.is_empty();
        self.seconds += later.seconds;
        if self.cpus.len() != later.cpus.len() {
            self.cpus = vec![CpuIdle::default(); later.cpus.len()];
        }
        for (a, b) in self.cpus.iter_mut().zip(&later.cpus) {
            a.idle += b.idle;
            a.total += b.total;
        }
        if first || self.procs.len() != later.procs.len() {
            self.procs = later.procs.clone();
        } else {
            for (a, b) in self.procs.iter_mut().zip(&later.procs) {
                a.seconds += b.seconds;
                a.cpu_s += b.cpu_s;
                a.runnable_s = a.runnable_s.zip(b.runnable_s).map(|(x, y)| x + y);
            }
        }
        self.mem_total = later.mem_total;
        self.mem_available_s += later.mem_available_s;
        for f in &later.ifaces {
            match self.ifaces.iter_mut().find(|e| e.name == f.name) {
                Some(e) => {
                    e.capacity_mbps = f.capacity_mbps.or(e.capacity_mbps);
                    e.seconds += f.seconds;
                    e.rx_bytes += f.rx_bytes;
                    e.tx_bytes += f.tx_bytes;
                    e.rx_packets += f.rx_packets;
                    e.tx_packets += f.tx_packets;
                }
                None => self.ifaces.push(f.clone()),
            }
        }
    }

    /// One node's usage from the usages its ranks measured (each with its own process, in
    /// rank order): the node's CPUs, memory and interfaces as the first rank saw them, the
    /// processes of all.
    ///
    /// # Panics
    /// If `ranks` is empty (a node with processes has at least one rank).
    pub fn join(ranks: &[Usage]) -> Usage {
        let first = ranks.first().expect("a node's ranks");
        Usage {
            procs: ranks.iter().flat_map(|u| u.procs.iter().copied()).collect(),
            ..first.clone()
        }
    }

    /// The node's observation over the span: each CPU's idle fraction, each process's CPU and
    /// runnable fractions of its own time, the mean available memory, and each interface's
    /// rates (none for an interface seen in one reading only).
    pub fn observation(&self) -> NodeObservation {
        let per = |x: f64, t: f64| x / t.max(1e-12);
        let runnable: Option<Vec<f64>> = self
            .procs
            .iter()
            .map(|p| p.runnable_s.map(|r| per(r, p.seconds)))
            .collect();
        NodeObservation {
            cpu_idle: self.cpus.iter().map(CpuIdle::fraction).collect(),
            proc_util: self.procs.iter().map(|p| per(p.cpu_s, p.seconds)).collect(),
            proc_runnable: runnable.unwrap_or_default(),
            memory: (self.seconds > 0.0).then(|| MemoryObservation {
                total: self.mem_total,
                available: self.mem_available_s / self.seconds,
            }),
            ifaces: self
                .ifaces
                .iter()
                .map(|f| IfaceObservation {
                    name: f.name.clone(),
                    capacity_mbps: f.capacity_mbps,
                    rates: (f.seconds > 0.0).then(|| IfaceRates {
                        rx_bytes: f.rx_bytes / f.seconds,
                        tx_bytes: f.tx_bytes / f.seconds,
                        rx_packets: f.rx_packets / f.seconds,
                        tx_packets: f.tx_packets / f.seconds,
                    }),
                })
                .collect(),
        }
    }

    /// Whether every figure is a finite number (a garbled reading is not).
    pub fn is_finite(&self) -> bool {
        let procs = self.procs.iter().all(|p| {
            p.seconds.is_finite() && p.cpu_s.is_finite() && p.runnable_s.is_none_or(f64::is_finite)
        });
        let cpus = self
            .cpus
            .iter()
            .all(|c| c.idle.is_finite() && c.total.is_finite());
        let ifaces = self.ifaces.iter().all(|f| {
            [
                f.seconds,
                f.rx_bytes,
                f.tx_bytes,
                f.rx_packets,
                f.tx_packets,
            ]
            .iter()
            .all(|x| x.is_finite())
        });
        self.seconds.is_finite()
            && self.mem_total.is_finite()
            && self.mem_available_s.is_finite()
            && procs
            && cpus
            && ifaces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(seconds: f64, cpu_s: f64, idle: f64) -> Usage {
        Usage {
            seconds,
            cpus: vec![CpuIdle {
                idle,
                total: seconds * 100.0,
            }],
            procs: vec![ProcUsage {
                seconds,
                cpu_s,
                runnable_s: Some(cpu_s * 2.0),
            }],
            mem_total: 1000.0,
            mem_available_s: 500.0 * seconds,
            ifaces: vec![IfaceUsage {
                name: "eth0".into(),
                capacity_mbps: Some(100.0),
                seconds,
                rx_bytes: 10.0 * seconds,
                ..IfaceUsage::default()
            }],
        }
    }

    #[test]
    fn merged_spans_give_time_weighted_means() {
        let mut u = Usage::default();
        u.merge(&span(1.0, 0.5, 0.0));
        u.merge(&span(3.0, 3.0, 300.0));
        let o = u.observation();
        assert_eq!(o.proc_util, vec![3.5 / 4.0]);
        assert_eq!(o.proc_runnable, vec![7.0 / 4.0]);
        assert_eq!(o.cpu_idle, vec![0.75]);
        assert_eq!(o.memory.unwrap().available, 500.0);
        assert_eq!(o.ifaces[0].rates.unwrap().rx_bytes, 10.0);
    }

    #[test]
    fn runnable_known_only_if_every_span_knew_it() {
        let mut u = span(1.0, 0.5, 0.0);
        let mut later = span(1.0, 0.5, 0.0);
        later.procs[0].runnable_s = None;
        u.merge(&later);
        assert!(u.observation().proc_runnable.is_empty());
    }

    #[test]
    fn a_node_joins_its_ranks_processes() {
        let a = span(1.0, 0.25, 50.0);
        let b = span(1.0, 1.0, 0.0);
        let node = Usage::join(&[a, b]);
        let o = node.observation();
        assert_eq!(o.proc_util, vec![0.25, 1.0]);
        assert_eq!(o.cpu_idle, vec![0.5], "the first rank's view of the CPUs");
    }

    #[test]
    fn an_interface_seen_once_has_no_rate_and_a_tickless_cpu_is_idle() {
        let u = Usage {
            cpus: vec![CpuIdle::default()],
            ifaces: vec![IfaceUsage {
                name: "eth1".into(),
                ..IfaceUsage::default()
            }],
            ..Usage::default()
        };
        let o = u.observation();
        assert_eq!(o.cpu_idle, vec![1.0]);
        assert!(o.ifaces[0].rates.is_none());
        assert!(o.memory.is_none());
        let mut bad = span(1.0, f64::NAN, 0.0);
        assert!(!bad.is_finite());
        bad.procs[0].cpu_s = 0.0;
        bad.procs[0].runnable_s = Some(0.0);
        assert!(bad.is_finite());
    }
}
