//! Monitoring agents (DRUM 2005 §3.2): a thread that samples, at a fixed period, per-CPU idle
//! time (`/proc/stat`), per-process CPU use (`/proc/PID/stat`, `/proc/PID/task/TID/stat`),
//! memory (`/proc/meminfo`) and per-interface traffic (`/proc/net/dev`, loopback ignored), and
//! the exact windows between rebalance points ([`Monitor::window`]: one [`Usage`] per target,
//! the totals [`crate::usage`] turns into observations).
//!
//! The `/proc` and `/sys` roots are injectable ([`ProcFs`]) so tests feed fake files. The
//! monitor thread measures its own CPU time (`CLOCK_THREAD_CPUTIME_ID`) so its overhead is a
//! measured figure ([`MonitorStats::overhead`]).
//!
//! Split by idea: [`proc`] reads the kernel's files (the parsers, [`ProcFs`]); `sampler.rs`
//! turns successive readings into samples on the monitor thread; this module holds the
//! configuration and the [`Monitor`] handle. DRUM's own calls (`DRUM_startMonitoring` …
//! `DRUM_getLocalPartSize`) are the runtime's (`drum-loop`) and its C API's.

pub mod proc;
mod sampler;

pub use proc::{
    CpuTimes, NetDev, ProcFs, parse_meminfo, parse_net_dev, parse_pid_stat, parse_proc_stat,
};
use sampler::Sampler;
use sampler::Snapshot;
pub use sampler::{SchedTimes, parse_schedstat, thread_cpu_seconds};

use crate::error::{Error, Result};
use crate::machine::{Machine, NodeId};
use crate::samples::Sample;
use crate::usage::Usage;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
/// An application process (or thread, for ranks that are threads) whose CPU use is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessRef {
    /// This process (`/proc/self/stat`).
    SelfProcess,
    /// Another process (`/proc/PID/stat`).
    Pid(u32),
    /// One thread (`/proc/PID/task/TID/stat`), e.g. a rank of the threads backend.
    Thread {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
    },
}

impl ProcessRef {
    /// The stat file under `proc_root`.
    pub fn stat_path(&self, proc_root: &Path) -> PathBuf {
        match *self {
            ProcessRef::SelfProcess => proc_root.join("self/stat"),
            ProcessRef::Pid(pid) => proc_root.join(pid.to_string()).join("stat"),
            ProcessRef::Thread { pid, tid } => proc_root
                .join(pid.to_string())
                .join("task")
                .join(tid.to_string())
                .join("stat"),
        }
    }

    /// The scheduler's statistics file under `proc_root` (`schedstat`: nanoseconds running
    /// and waiting for a CPU). For a process it describes its main thread.
    pub fn schedstat_path(&self, proc_root: &Path) -> PathBuf {
        self.stat_path(proc_root).with_file_name("schedstat")
    }

    /// The calling thread (Linux `gettid`).
    pub fn current_thread() -> ProcessRef {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        ProcessRef::Thread {
            pid: std::process::id(),
            tid: tid as u32,
        }
    }
}

/// What to sample for one node of the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorTarget {
    /// The node's `nodenum` (written in each sample).
    pub node: u32,
    /// The CPUs whose idle time counts for this node (`None`: every CPU of the host).
    pub cpus: Option<Vec<u32>>,
    /// The node's application processes, in rank order.
    pub processes: Vec<ProcessRef>,
    /// Whether to report the host's interfaces for this node.
    pub ifaces: bool,
    /// Capacity to report for interfaces whose speed sysfs does not give (e.g. the node's
    /// `bandwidth`).
    pub default_capacity_mbps: Option<f64>,
}

impl MonitorTarget {
    /// A target for a computing node of `machine`: its `cpus` (all if absent), its link
    /// bandwidth as default capacity, and the given processes.
    pub fn for_node(machine: &Machine, id: NodeId, processes: Vec<ProcessRef>) -> MonitorTarget {
        let n = machine.node(id);
        MonitorTarget {
            node: n.nodenum,
            cpus: n.cpus.as_ref().map(|c| c.cpus().to_vec()),
            processes,
            ifaces: true,
            default_capacity_mbps: machine.link_bandwidth(id),
        }
    }
}

/// Monitor settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorConfig {
    /// Sampling period (at least 10 ms).
    pub period: Duration,
    /// Where `/proc` and `/sys` are.
    pub procfs: ProcFs,
    /// The nodes to sample (at least one).
    pub targets: Vec<MonitorTarget>,
}

impl MonitorConfig {
    /// This whole host as node `nodenum`, with this process as its one application process.
    pub fn host(nodenum: u32, period: Duration) -> MonitorConfig {
        MonitorConfig {
            period,
            procfs: ProcFs::default(),
            targets: vec![MonitorTarget {
                node: nodenum,
                cpus: None,
                processes: vec![ProcessRef::SelfProcess],
                ifaces: true,
                default_capacity_mbps: None,
            }],
        }
    }

    /// Every computing node of `machine` as emulated on this host (each bound to its `cpus`),
    /// with `processes[r]` the process or thread of rank r (may be empty: idle time only).
    pub fn for_machine(
        machine: &Machine,
        processes: &[ProcessRef],
        period: Duration,
    ) -> MonitorConfig {
        let targets = machine
            .computing_nodes()
            .map(|n| {
                let procs = n
                    .rank_range()
                    .filter_map(|r| processes.get(r).copied())
                    .collect();
                MonitorTarget::for_node(machine, n.id, procs)
            })
            .collect();
        MonitorConfig {
            period,
            procfs: ProcFs::default(),
            targets,
        }
    }
}

/// The monitor's own cost, measured.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MonitorStats {
    /// Wall time the monitor ran, seconds.
    pub wall_seconds: f64,
    /// CPU time the monitor thread used, seconds (CLOCK_THREAD_CPUTIME_ID).
    pub cpu_seconds: f64,
    /// CPU time the callers of [`Monitor::window`] spent in it, seconds.
    pub window_cpu_seconds: f64,
    /// Sampling periods completed.
    pub periods: usize,
    /// Windows cut by [`Monitor::window`].
    pub windows: usize,
}

impl MonitorStats {
    /// The monitor's CPU time (its thread and the window cuts) over wall time (0.004 = 0.4 %
    /// of one CPU).
    pub fn overhead(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            (self.cpu_seconds + self.window_cpu_seconds) / self.wall_seconds
        } else {
            0.0
        }
    }
}

/// What a monitoring run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Samples in time order (one per target per period).
    pub samples: Vec<Sample>,
    /// The monitor's measured cost.
    pub stats: MonitorStats,
}

/// What happened between two cuts of [`Monitor::window`]: one [`Usage`] per target, as
/// totals over the window (CPU and runnable seconds, idle and total ticks, bytes moved).
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Length of the window, seconds.
    pub seconds: f64,
    /// One usage per target, in target order.
    pub usage: Vec<Usage>,
}

/// State shared by the monitor thread and [`Monitor::window`].
struct Shared {
    sampler: Sampler,
    /// The last periodic reading.
    last: Snapshot,
    /// The reading at the last window cut.
    cut: Snapshot,
    samples: Vec<Sample>,
    window_cpu: f64,
    windows: usize,
}

/// A running monitor (DRUM_startMonitoring). Stop it with [`Monitor::stop`]; dropping it also
/// stops the thread.
pub struct Monitor {
    stop_tx: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<Result<(f64, f64, usize)>>>,
    shared: Arc<Mutex<Shared>>,
    targets: usize,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("targets", &self.targets)
            .field("running", &self.handle.is_some())
            .finish()
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the agent thread. The first reading happens here, so an unreadable or garbled `/proc`
/// file is reported now, naming the file.
pub fn start_monitoring(config: MonitorConfig) -> Result<Monitor> {
    let mut sampler = Sampler::new(config)?;
    let first = sampler.snapshot()?;
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let targets = sampler.config.targets.len();
    let period = sampler.config.period;
    let shared = Arc::new(Mutex::new(Shared {
        sampler,
        last: first.clone(),
        cut: first,
        samples: Vec::new(),
        window_cpu: 0.0,
        windows: 0,
    }));
    let state = Arc::clone(&shared);
    let handle = std::thread::Builder::new()
        .name("drum-monitor".into())
        .spawn(move || -> Result<(f64, f64, usize)> {
            let cpu0 = thread_cpu_seconds();
            let wall0 = Instant::now();
            let mut periods = 0usize;
            let mut next = wall0 + period;
            loop {
                let wait = next.saturating_duration_since(Instant::now());
                match stop_rx.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                }
                {
                    let mut s = lock(&state);
                    let cur = s.sampler.snapshot()?;
                    let batch = s.sampler.samples(&s.last, &cur);
                    s.samples.extend(batch);
                    s.last = cur;
                }
                periods += 1;
                next += period;
                let now = Instant::now();
                if next < now {
                    next = now + period; // fell behind (suspended?): do not burst
                }
            }
            Ok((
                wall0.elapsed().as_secs_f64(),
                thread_cpu_seconds() - cpu0,
                periods,
            ))
        })
        .map_err(|e| Error::Monitor(format!("cannot spawn the monitor thread: {e}")))?;
    Ok(Monitor {
        stop_tx: Some(stop_tx),
        handle: Some(handle),
        shared,
        targets,
    })
}

impl Monitor {
    /// Number of samples so far.
    pub fn sample_count(&self) -> usize {
        lock(&self.shared).samples.len()
    }

    /// The samples of the last completed period (one per target), if any.
    pub fn latest(&self) -> Vec<Sample> {
        let s = lock(&self.shared);
        let k = self.targets.min(s.samples.len());
        s.samples[s.samples.len() - k..].to_vec()
    }

    /// Reads the counters now and returns what happened since the previous call (or since
    /// the start): the window a rebalance decision looks at, with exact ends whatever the
    /// period. Runs on the calling thread (its CPU time counts in the monitor's overhead).
    /// An unreadable or garbled file is an error naming it; the next call then covers the
    /// time since the last good cut.
    pub fn window(&self) -> Result<Window> {
        let cpu0 = thread_cpu_seconds();
        let mut s = lock(&self.shared);
        let cur = s.sampler.snapshot();
        s.windows += 1;
        let cur = match cur {
            Ok(c) => c,
            Err(e) => {
                s.window_cpu += thread_cpu_seconds() - cpu0;
                return Err(e);
            }
        };
        let usage = s.sampler.usage(&s.cut, &cur);
        let seconds = cur.t - s.cut.t;
        s.cut = cur;
        s.window_cpu += thread_cpu_seconds() - cpu0;
        Ok(Window { seconds, usage })
    }

    /// Stops the thread (DRUM_stopMonitoring) and returns the samples and the measured cost.
    /// A sampling error in the thread (a monitored process exited, a garbled file) is returned
    /// here, naming the file.
    pub fn stop(mut self) -> Result<Recording> {
        self.finish()
    }

    fn finish(&mut self) -> Result<Recording> {
        drop(self.stop_tx.take());
        let handle = self
            .handle
            .take()
            .ok_or_else(|| Error::Monitor("already stopped".into()))?;
        let (wall_seconds, cpu_seconds, periods) = handle
            .join()
            .map_err(|_| Error::Monitor("the monitor thread panicked".into()))??;
        let mut s = lock(&self.shared);
        let samples = std::mem::take(&mut s.samples);
        Ok(Recording {
            samples,
            stats: MonitorStats {
                wall_seconds,
                cpu_seconds,
                window_cpu_seconds: s.window_cpu,
                periods,
                windows: s.windows,
            },
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::PowerConfig;
    use crate::samples::{Smoothing, powers_from_samples};
    use std::fs;

    /// A fake /proc + /sys tree in a temporary directory.
    struct FakeProc {
        dir: PathBuf,
    }

    impl FakeProc {
        fn new(tag: &str) -> FakeProc {
            let dir =
                std::env::temp_dir().join(format!("drum-fakeproc-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(dir.join("proc/net")).unwrap();
            fs::create_dir_all(dir.join("proc/self")).unwrap();
            fs::create_dir_all(dir.join("proc/42/task/43")).unwrap();
            fs::create_dir_all(dir.join("sys/class/net/eth0")).unwrap();
            fs::create_dir_all(dir.join("sys/class/net/lo")).unwrap();
            fs::create_dir_all(dir.join("sys/class/net/veth")).unwrap();
            fs::write(dir.join("sys/class/net/eth0/speed"), "100\n").unwrap();
            fs::write(dir.join("sys/class/net/eth0/flags"), "0x1003\n").unwrap();
            fs::write(dir.join("sys/class/net/veth/flags"), "0x9\n").unwrap(); // loopback flag
            fs::create_dir_all(dir.join("sys/class/net/ifb0")).unwrap();
            fs::write(dir.join("sys/class/net/ifb0/flags"), "0x82\n").unwrap(); // down
            FakeProc { dir }
        }

        fn fs(&self) -> ProcFs {
            ProcFs {
                proc_root: self.dir.join("proc"),
                sys_root: self.dir.join("sys"),
            }
        }

        fn write(&self, rel: &str, text: &str) {
            fs::write(self.dir.join("proc").join(rel), text).unwrap();
        }

        /// cpu0 and cpu1 with the given (busy, idle) jiffies; process ticks; eth0 counters.
        fn state(&self, cpu: [(u64, u64); 2], proc_ticks: u64, thread_ticks: u64, eth0: [u64; 4]) {
            self.write(
                "stat",
                &format!(
                    "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 {} 0 0 {} 0 0 0 0 0 0\ncpu1 {} 0 0 {} 0 0 0 0 0 0\nintr 1 2\n",
                    cpu[0].0, cpu[0].1, cpu[1].0, cpu[1].1
                ),
            );
            let stat = |ticks: u64| {
                format!(
                    "42 (my (odd) app) R 1 42 42 0 -1 4194304 100 0 0 0 {} {} 0 0 20 0 1 0\n",
                    ticks, 0
                )
            };
            self.write("self/stat", &stat(proc_ticks));
            self.write("42/task/43/stat", &stat(thread_ticks));
            self.write(
                "meminfo",
                "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n",
            );
            self.write(
                "net/dev",
                &format!(
                    "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 999 9 0 0 0 0 0 0 999 9 0 0 0 0 0 0\n  eth0: {} {} 0 0 0 0 0 0 {} {} 0 0 0 0 0 0\n  veth: 5 5 0 0 0 0 0 0 5 5 0 0 0 0 0 0\n  ifb0: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
                    eth0[0], eth0[1], eth0[2], eth0[3]
                ),
            );
        }
    }

    impl Drop for FakeProc {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    fn config(fake: &FakeProc) -> MonitorConfig {
        MonitorConfig {
            period: Duration::from_millis(20),
            procfs: fake.fs(),
            targets: vec![
                MonitorTarget {
                    node: 1,
                    cpus: Some(vec![0]),
                    processes: vec![ProcessRef::SelfProcess],
                    ifaces: true,
                    default_capacity_mbps: None,
                },
                MonitorTarget {
                    node: 2,
                    cpus: Some(vec![1]),
                    processes: vec![ProcessRef::Thread { pid: 42, tid: 43 }],
                    ifaces: false,
                    default_capacity_mbps: None,
                },
            ],
        }
    }

    #[test]
    fn samples_are_deltas_of_fake_proc_files() {
        let fake = FakeProc::new("deltas");
        fake.state([(0, 0), (0, 0)], 0, 0, [0, 0, 0, 0]);
        let mut s = Sampler::new(config(&fake)).unwrap();
        s.tick_rate = 100.0;
        let mut a = s.snapshot().unwrap();
        // 1 second later: cpu0 30 busy + 70 idle jiffies; cpu1 90 busy + 10 idle;
        // our process used 25 ticks, the thread 80; eth0 got 1000 B in 10 packets, sent 500 B in 5.
        fake.state([(30, 70), (90, 10)], 25, 80, [1000, 10, 500, 5]);
        let mut b = s.snapshot().unwrap();
        a.t = 0.0;
        b.t = 1.0;
        let out = s.samples(&a, &b);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].node, 1);
        assert_eq!(out[0].cpu_idle, vec![0.7]);
        assert_eq!(out[0].proc_util, vec![0.25]);
        assert_eq!(out[0].mem_total, 1000.0 * 1024.0);
        assert_eq!(out[0].mem_avail, 250.0 * 1024.0);
        // Loopback by name and by flag, and interfaces that are down, are skipped.
        assert_eq!(out[0].ifaces.len(), 1);
        let e = &out[0].ifaces[0];
        assert_eq!((e.name.as_str(), e.capacity_mbps), ("eth0", Some(100.0)));
        assert_eq!(
            (e.rx_bytes, e.rx_packets, e.tx_bytes, e.tx_packets),
            (1000, 10, 500, 5)
        );
        assert_eq!(out[1].cpu_idle, vec![0.1]);
        assert_eq!(out[1].proc_util, vec![0.8]);
        assert!(out[1].ifaces.is_empty());
    }

    #[test]
    fn monitor_thread_records_from_fake_proc() {
        let fake = FakeProc::new("thread");
        fake.state([(10, 10), (10, 10)], 0, 0, [0, 0, 0, 0]);
        let mon = start_monitoring(config(&fake)).unwrap();
        std::thread::sleep(Duration::from_millis(120));
        let rec = mon.stop().unwrap();
        assert!(rec.stats.periods >= 2, "{:?}", rec.stats);
        assert_eq!(rec.samples.len(), 2 * rec.stats.periods);
        assert!(rec.stats.cpu_seconds >= 0.0 && rec.stats.wall_seconds >= 0.1);
    }

    #[test]
    fn unreadable_or_garbled_files_are_named() {
        let fake = FakeProc::new("garbled");
        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        let root = fake.dir.join("proc");
        fs::remove_file(root.join("meminfo")).unwrap();
        let e = start_monitoring(config(&fake)).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: cannot read:", root.join("meminfo").display())),
            "{e}"
        );

        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        fake.write("stat", "cpu0 1 2 x 4\n");
        let e = start_monitoring(config(&fake)).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: line 1: non-numeric time for cpu0",
                root.join("stat").display()
            )
        );

        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        fake.write("42/task/43/stat", "43 (app R 1");
        let e = start_monitoring(config(&fake)).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: no ')' after the command name",
                root.join("42/task/43/stat").display()
            )
        );

        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        fake.write("net/dev", "h\nh\n eth0 1 2 3\n");
        let e = start_monitoring(config(&fake)).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: line 3: no ':' after the name",
                root.join("net/dev").display()
            )
        );

        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        fake.write("meminfo", "MemFree: 5 kB\n");
        let e = start_monitoring(config(&fake)).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("{}: no MemTotal line", root.join("meminfo").display())
        );

        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        let mut cfg = config(&fake);
        cfg.targets[1].cpus = Some(vec![7]);
        let e = start_monitoring(cfg).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: CPU 7 (cpus of node 2) is not listed",
                root.join("stat").display()
            )
        );

        // A monitored process that exits mid-run: the error surfaces at stop, naming the file.
        fake.state([(1, 1), (1, 1)], 0, 0, [0, 0, 0, 0]);
        let mon = start_monitoring(config(&fake)).unwrap();
        fs::remove_dir_all(root.join("42")).unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let e = mon.stop().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "{}: cannot read",
                root.join("42/task/43/stat").display()
            )),
            "{e}"
        );

        let mut cfg = config(&fake);
        cfg.period = Duration::from_millis(1);
        assert!(matches!(start_monitoring(cfg), Err(Error::Parameter(_))));
    }

    #[test]
    fn window_is_exact_between_cuts_and_schedstat_gives_runnable_time() {
        let fake = FakeProc::new("window");
        fake.state([(10, 10), (10, 10)], 0, 0, [0, 0, 0, 0]);
        // The thread's scheduler counters: 1 ns each at the start.
        fake.write("42/task/43/schedstat", "1 1 1\n");
        let mut cfg = config(&fake);
        cfg.period = Duration::from_secs(3600); // no periodic sample during the test
        let mon = start_monitoring(cfg).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        // It ran 0.3 s and waited 0.3 s for a CPU; eth0 got 1000 bytes.
        fake.state([(20, 20), (30, 10)], 0, 5, [1000, 10, 0, 0]);
        fake.write("42/task/43/schedstat", "300000001 300000001 9\n");
        let w = mon.window().unwrap();
        assert!(w.seconds >= 0.03, "{}", w.seconds);
        assert_eq!(w.usage.len(), 2);
        let s = w.usage[1].observation();
        let (u, r) = (s.proc_util[0], s.proc_runnable[0]);
        // Utilisation from the nanosecond counter (not the 5 ticks), runnable twice it.
        assert!((u - 0.3 / w.seconds).abs() < 1e-9, "{u} {}", w.seconds);
        assert!((r / u - 2.0).abs() < 1e-9, "{r} {u}");
        // Node 1 (this process, no schedstat file in the fake tree): ticks, no runnable time.
        assert!(w.usage[0].observation().proc_runnable.is_empty());
        let rx = w.usage[0].observation().ifaces[0].rates.unwrap().rx_bytes;
        assert!((rx - 1000.0 / w.seconds).abs() < 1e-6, "{rx}");
        assert!(w.usage[1].ifaces.is_empty()); // node 2 reports no interfaces
        // The next window starts at this cut: nothing changed since.
        let w2 = mon.window().unwrap();
        assert_eq!(w2.usage[1].observation().proc_util[0], 0.0);
        assert_eq!(w2.usage[0].ifaces[0].rx_bytes, 0.0);
        // An all-zero schedstat (a kernel without sched_info) falls back to the ticks.
        assert_eq!(parse_schedstat("0 0 0\n"), None);
        assert_eq!(parse_schedstat("5 x 1"), None);
        assert_eq!(
            parse_schedstat("5 6 1\n"),
            Some(SchedTimes {
                run_ns: 5,
                delay_ns: 6
            })
        );
        // A garbled file makes the window an error naming it; the monitor goes on.
        fake.write("stat", "cpu0 1 2 x 4\n");
        let e = mon.window().unwrap_err().to_string();
        assert!(e.contains("non-numeric time for cpu0"), "{e}");
        fake.state([(30, 30), (40, 20)], 0, 5, [1000, 10, 0, 0]);
        assert!(mon.window().is_ok());
        let rec = mon.stop().unwrap();
        assert_eq!(rec.stats.windows, 4);
        assert!(rec.stats.window_cpu_seconds >= 0.0);
    }

    #[test]
    fn real_window_of_this_thread() {
        // This thread as the one process of a host-wide node: busy for 0.1 s, it ran for
        // about all of the window it was runnable.
        let cfg = MonitorConfig {
            period: Duration::from_millis(20),
            procfs: ProcFs::default(),
            targets: vec![MonitorTarget {
                node: 0,
                cpus: None,
                processes: vec![ProcessRef::current_thread()],
                ifaces: false,
                default_capacity_mbps: None,
            }],
        };
        let mon = start_monitoring(cfg).unwrap();
        let _ = mon.window().unwrap();
        let busy_until = Instant::now() + Duration::from_millis(100);
        let mut x = 0u64;
        while Instant::now() < busy_until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let w = mon.window().unwrap();
        let s = w.usage[0].observation();
        assert!(s.proc_util[0] > 0.0 && s.proc_util[0] <= 1.01, "{s:?}");
        if let Some(r) = Some(&s.proc_runnable).filter(|r| !r.is_empty()) {
            // Runnable the whole time (busy), so run/runnable is the CPU share it got.
            assert!(r[0] >= s.proc_util[0] - 1e-9 && r[0] <= 1.01, "{s:?}");
        }
        let rec = mon.stop().unwrap();
        assert!(rec.stats.overhead() < 0.5, "{:?}", rec.stats);
    }

    #[test]
    fn meminfo_without_memavailable() {
        let p = Path::new("meminfo");
        let (t, a) = parse_meminfo(
            "MemTotal: 10 kB\nMemFree: 1 kB\nBuffers: 2 kB\nCached: 3 kB\n",
            p,
        )
        .unwrap();
        assert_eq!((t, a), (10240.0, 6144.0));
    }

    #[test]
    fn real_proc_short_run_and_replay() {
        // This host as one node, 0.3 s at 20 ms, then the recording replays into powers.
        let mut cfg = MonitorConfig::host(0, Duration::from_millis(20));
        cfg.targets[0].default_capacity_mbps = Some(1000.0);
        let mon = start_monitoring(cfg).unwrap();
        let busy_until = Instant::now() + Duration::from_millis(300);
        let mut x = 0u64;
        while Instant::now() < busy_until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let rec = mon.stop().unwrap();
        assert!(rec.stats.periods >= 5, "{:?}", rec.stats);
        let s = &rec.samples[rec.samples.len() - 1];
        assert!(!s.cpu_idle.is_empty() && s.cpu_idle.iter().all(|i| (0.0..=1.0).contains(i)));
        assert_eq!(s.proc_util.len(), 1);
        assert!(s.mem_total > 0.0 && s.mem_avail <= s.mem_total);
        let xml = r#"<machinemodel><node type="NETWORK" nodenum="0" parent="-1" bandwidth="1000">
            </node><node type="MULTIPLE_COMPUTING" nodenum="1" parent="0" numprocs="64" ranks="1"/></machinemodel>"#;
        let m = Machine::parse_str(xml, "host.xml").unwrap();
        let mut samples = rec.samples.clone();
        for s in &mut samples {
            s.node = 1;
        }
        let mut text = Vec::new();
        crate::samples::write_jsonl(&samples, &mut text).unwrap();
        let back =
            crate::samples::parse_jsonl(std::str::from_utf8(&text).unwrap(), "rec.jsonl").unwrap();
        assert_eq!(
            back.iter().map(|l| l.sample.clone()).collect::<Vec<_>>(),
            samples
        );
        let cfg = PowerConfig {
            model: crate::PowerModel::Drum { w_comm: 0.5 },
            ..Default::default()
        };
        let p = powers_from_samples(&m, &cfg, &back, Smoothing::WindowMean).unwrap();
        assert_eq!(p.parts, vec![1.0]);
    }
}
