//! The monitor thread's work: successive readings of the kernel's counters into samples,
//! and the thread's own CPU time (its overhead).

use super::proc::{proc_err, read};
use super::*;
use crate::error::{Error, Result};
use crate::samples::{IfaceCounters, Sample};
use crate::usage::{CpuIdle, IfaceUsage, ProcUsage, Usage};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CPU time of the calling thread, seconds.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The scheduler's counters of one task (`/proc/PID/task/TID/schedstat`): nanoseconds on a
/// CPU and nanoseconds waiting in a run queue for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedTimes {
    /// Time spent running.
    pub run_ns: u64,
    /// Time spent runnable but waiting for a CPU (other tasks had it).
    pub delay_ns: u64,
}

impl SchedTimes {
    /// Time the task wanted a CPU: running or waiting for one.
    pub fn runnable_ns(&self) -> u64 {
        self.run_ns.saturating_add(self.delay_ns)
    }
}

/// Parses a schedstat line (`run_ns delay_ns timeslices`). `None` for a malformed line and for
/// the all-zero line of kernels built without sched_info.
pub fn parse_schedstat(text: &str) -> Option<SchedTimes> {
    let mut f = text.split_ascii_whitespace().map(|x| x.parse::<u64>());
    let (run_ns, delay_ns, slices) = (f.next()?.ok()?, f.next()?.ok()?, f.next()?.ok()?);
    (run_ns | delay_ns | slices != 0).then_some(SchedTimes { run_ns, delay_ns })
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// One reading of everything the targets need.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub(super) t: f64,
    cpus: BTreeMap<u32, CpuTimes>,
    /// Per target, per process: clock ticks (utime + stime) and, where the kernel keeps
    /// them, the scheduler's nanosecond counters.
    procs: Vec<Vec<(u64, Option<SchedTimes>)>>,
    mem: (f64, f64),
    net: Vec<NetDev>,
}

pub(super) struct Sampler {
    pub(super) config: MonitorConfig,
    start: Instant,
    pub(super) tick_rate: f64,
    speeds: BTreeMap<String, Option<f64>>,
    loopback: BTreeMap<String, bool>,
    /// System-wide files kept open between periods: re-reading from offset 0 regenerates a
    /// /proc file without the path lookup and open/close of each period (about half the
    /// monitor's cost). Per-process files are reopened so an exited process is noticed.
    open: BTreeMap<PathBuf, std::fs::File>,
    buf: String,
}

impl Sampler {
    pub(super) fn new(config: MonitorConfig) -> Result<Sampler> {
        if config.period < Duration::from_millis(10) {
            return Err(Error::Parameter(format!(
                "monitor period {:?} is below 10 ms",
                config.period
            )));
        }
        if config.targets.is_empty() {
            return Err(Error::Parameter("the monitor has no target node".into()));
        }
        Ok(Sampler {
            config,
            start: Instant::now(),
            tick_rate: clock_ticks_per_second(),
            speeds: BTreeMap::new(),
            loopback: BTreeMap::new(),
            open: BTreeMap::new(),
            buf: String::new(),
        })
    }

    /// Reads `path` into `self.buf` through a cached open file.
    fn read(&mut self, path: &Path) -> Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        self.buf.clear();
        if !self.open.contains_key(path) {
            let f = std::fs::File::open(path)
                .map_err(|e| proc_err(path, format!("cannot read: {e}")))?;
            self.open.insert(path.to_path_buf(), f);
        }
        let f = self.open.get_mut(path).expect("just inserted");
        let r = f
            .seek(SeekFrom::Start(0))
            .and_then(|_| f.read_to_string(&mut self.buf));
        if let Err(e) = r {
            self.open.remove(path);
            return Err(proc_err(path, format!("cannot read: {e}")));
        }
        Ok(())
    }

    pub(super) fn snapshot(&mut self) -> Result<Snapshot> {
        let t = self.start.elapsed().as_secs_f64();
        let root = self.config.procfs.proc_root.clone();
        let stat = root.join("stat");
        self.read(&stat)?;
        let cpus = parse_proc_stat(&self.buf, &stat)?;
        for target in &self.config.targets {
            if let Some(list) = &target.cpus
                && let Some(c) = list.iter().find(|c| !cpus.contains_key(c))
            {
                return Err(proc_err(
                    &stat,
                    format!("CPU {c} (cpus of node {}) is not listed", target.node),
                ));
            }
        }
        let mut procs = Vec::with_capacity(self.config.targets.len());
        for k in 0..self.config.targets.len() {
            let mut v = Vec::with_capacity(self.config.targets[k].processes.len());
            for j in 0..self.config.targets[k].processes.len() {
                // Opened afresh each period: a process that exited must fail here.
                let p = self.config.targets[k].processes[j];
                let path = p.stat_path(&root);
                let ticks = parse_pid_stat(&read(&path)?, &path)?;
                // Optional: kernels without sched_info have no (or an all-zero) schedstat;
                // the clock ticks then stand alone (documented fallback).
                let sched = std::fs::read_to_string(p.schedstat_path(&root))
                    .ok()
                    .and_then(|t| parse_schedstat(&t));
                v.push((ticks, sched));
            }
            procs.push(v);
        }
        let meminfo = root.join("meminfo");
        self.read(&meminfo)?;
        let mem = parse_meminfo(&self.buf, &meminfo)?;
        let mut net = Vec::new();
        if self.config.targets.iter().any(|t| t.ifaces) {
            let dev = root.join("net/dev");
            self.read(&dev)?;
            for d in parse_net_dev(&self.buf, &dev)? {
                let fs = &self.config.procfs;
                let lo = *self
                    .loopback
                    .entry(d.name.clone())
                    .or_insert_with(|| fs.ignored_interface(&d.name));
                if !lo {
                    net.push(d);
                }
            }
        }
        for d in &net {
            if !self.speeds.contains_key(&d.name) {
                let speed = self.config.procfs.link_speed(&d.name);
                self.speeds.insert(d.name.clone(), speed);
            }
        }
        Ok(Snapshot {
            t,
            cpus,
            procs,
            mem,
            net,
        })
    }

    /// Per target, what happened between the two readings, as totals: seconds, each CPU's
    /// idle and total clock ticks, each process's CPU and runnable seconds (the scheduler's
    /// nanosecond counters where the kernel keeps them, else clock ticks), memory, and each
    /// interface's bytes and packets (an interface missing from `prev`, or a counter that
    /// went backwards, counts 0).
    pub(super) fn usage(&self, prev: &Snapshot, cur: &Snapshot) -> Vec<Usage> {
        let dt = (cur.t - prev.t).max(1e-9);
        let ifaces: Vec<IfaceUsage> = cur
            .net
            .iter()
            .map(|b| {
                let a = prev.net.iter().find(|a| a.name == b.name);
                let d = |f: fn(&NetDev) -> u64| a.map_or(0.0, |a| f(b).saturating_sub(f(a)) as f64);
                IfaceUsage {
                    name: b.name.clone(),
                    capacity_mbps: self.speeds.get(&b.name).copied().flatten(),
                    seconds: dt,
                    rx_bytes: d(|x| x.rx_bytes),
                    tx_bytes: d(|x| x.tx_bytes),
                    rx_packets: d(|x| x.rx_packets),
                    tx_packets: d(|x| x.tx_packets),
                }
            })
            .collect();
        self.config
            .targets
            .iter()
            .enumerate()
            .map(|(k, target)| {
                let ids: Vec<u32> = match &target.cpus {
                    Some(l) => l.clone(),
                    None => cur.cpus.keys().copied().collect(),
                };
                let cpus = ids
                    .iter()
                    .map(|c| match (prev.cpus.get(c), cur.cpus.get(c)) {
                        (Some(a), Some(b)) if b.total > a.total => CpuIdle {
                            idle: b.idle.saturating_sub(a.idle) as f64,
                            total: (b.total - a.total) as f64,
                        },
                        _ => CpuIdle::default(),
                    })
                    .collect();
                let procs = prev.procs[k]
                    .iter()
                    .zip(&cur.procs[k])
                    .map(|((ta, sa), (tb, sb))| match (sa, sb) {
                        (Some(a), Some(b)) => ProcUsage {
                            seconds: dt,
                            cpu_s: b.run_ns.saturating_sub(a.run_ns) as f64 * 1e-9,
                            runnable_s: Some(
                                b.runnable_ns().saturating_sub(a.runnable_ns()) as f64 * 1e-9,
                            ),
                        },
                        _ => ProcUsage {
                            seconds: dt,
                            cpu_s: tb.saturating_sub(*ta) as f64 / self.tick_rate,
                            runnable_s: None,
                        },
                    })
                    .collect();
                let ifaces = if target.ifaces {
                    ifaces
                        .iter()
                        .map(|f| IfaceUsage {
                            capacity_mbps: f.capacity_mbps.or(target.default_capacity_mbps),
                            ..f.clone()
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                Usage {
                    seconds: dt,
                    cpus,
                    procs,
                    mem_total: cur.mem.0,
                    mem_available_s: cur.mem.1 * dt,
                    ifaces,
                }
            })
            .collect()
    }

    /// Per target, the sample of the recording between the two readings: the fractions of
    /// [`Sampler::usage`], with the interfaces' cumulative counters.
    pub(super) fn samples(&self, prev: &Snapshot, cur: &Snapshot) -> Vec<Sample> {
        self.usage(prev, cur)
            .into_iter()
            .zip(&self.config.targets)
            .map(|(u, target)| {
                let o = u.observation();
                let ifaces = u
                    .ifaces
                    .iter()
                    .zip(&cur.net)
                    .map(|(f, d)| IfaceCounters {
                        name: d.name.clone(),
                        capacity_mbps: f.capacity_mbps,
                        rx_bytes: d.rx_bytes,
                        tx_bytes: d.tx_bytes,
                        rx_packets: d.rx_packets,
                        tx_packets: d.tx_packets,
                    })
                    .collect();
                Sample {
                    t: cur.t,
                    node: target.node,
                    cpu_idle: o.cpu_idle,
                    proc_util: o.proc_util,
                    proc_runnable: (!o.proc_runnable.is_empty()).then_some(o.proc_runnable),
                    mem_total: cur.mem.0,
                    mem_avail: cur.mem.1,
                    ifaces,
                }
            })
            .collect()
    }
}
