//! Reading the kernel's statistics: `/proc/stat`, `/proc/PID/stat`, `/proc/meminfo`,
//! `/proc/net/dev` (and `/sys` for link speeds), from a root a test can replace ([`ProcFs`]).

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ProcessRef;
/// Where the kernel statistics live (`/proc` and `/sys` unless a test says otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcFs {
    /// The proc filesystem root.
    pub proc_root: PathBuf,
    /// The sysfs root (interface speeds and flags).
    pub sys_root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs {
            proc_root: "/proc".into(),
            sys_root: "/sys".into(),
        }
    }
}

pub(super) fn proc_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Proc {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

pub(super) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| proc_err(path, format!("cannot read: {e}")))
}

/// Cumulative jiffies of one CPU (`/proc/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// idle + iowait.
    pub idle: u64,
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    pub total: u64,
}

/// Parses the `cpuN` lines of `/proc/stat`.
pub fn parse_proc_stat(text: &str, path: &Path) -> Result<BTreeMap<u32, CpuTimes>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut fields = line.split_ascii_whitespace();
        let Some(label) = fields.next() else { continue };
        let Some(num) = label.strip_prefix("cpu") else {
            continue;
        };
        if num.is_empty() {
            continue; // the aggregate line
        }
        let cpu: u32 = num
            .parse()
            .map_err(|_| proc_err(path, format!("line {}: bad CPU label {label:?}", i + 1)))?;
        let values: Vec<u64> = fields
            .take(8)
            .map(|f| f.parse::<u64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                proc_err(
                    path,
                    format!("line {}: non-numeric time for {label}", i + 1),
                )
            })?;
        if values.len() < 4 {
            return Err(proc_err(
                path,
                format!("line {}: {label} has fewer than 4 fields", i + 1),
            ));
        }
        let idle = values[3] + values.get(4).copied().unwrap_or(0);
        let total = values.iter().fold(0u64, |a, &b| a.saturating_add(b));
        out.insert(cpu, CpuTimes { idle, total });
    }
    if out.is_empty() {
        return Err(proc_err(path, "no cpuN lines"));
    }
    Ok(out)
}

/// Parses `/proc/PID/stat`: utime + stime in clock ticks (fields 14 and 15, counted after the
/// parenthesised command name, which may itself hold spaces and parentheses).
pub fn parse_pid_stat(text: &str, path: &Path) -> Result<u64> {
    let close = text
        .rfind(')')
        .ok_or_else(|| proc_err(path, "no ')' after the command name"))?;
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14 → rest[11], stime field 15 → rest[12].
    let field = |k: usize| -> Result<u64> {
        rest.get(k)
            .ok_or_else(|| proc_err(path, format!("only {} fields after the name", rest.len())))?
            .parse::<u64>()
            .map_err(|_| proc_err(path, format!("field {} is not a number", k + 3)))
    };
    Ok(field(11)?.saturating_add(field(12)?))
}

/// Parses `/proc/meminfo`: (MemTotal, MemAvailable) in bytes. Kernels without MemAvailable
/// (before 3.14) get MemFree + Buffers + Cached.
pub fn parse_meminfo(text: &str, path: &Path) -> Result<(f64, f64)> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let mut parts = v.split_ascii_whitespace();
            if let Some(num) = parts.next() {
                let n: u64 = num
                    .parse()
                    .map_err(|_| proc_err(path, format!("{k}: {num:?} is not a number")))?;
                let scale = match parts.next() {
                    Some("kB") => 1024.0,
                    None => 1.0,
                    Some(u) => return Err(proc_err(path, format!("{k}: unknown unit {u:?}"))),
                };
                map.insert(k.trim().to_string(), n as f64 * scale);
            }
        }
    }
    let total = *map
        .get("MemTotal")
        .ok_or_else(|| proc_err(path, "no MemTotal line"))?;
    let avail = match map.get("MemAvailable") {
        Some(&a) => a,
        None => ["MemFree", "Buffers", "Cached"]
            .iter()
            .map(|k| {
                map.get(*k)
                    .copied()
                    .ok_or_else(|| proc_err(path, format!("no {k} line")))
            })
            .sum::<Result<f64>>()?,
    };
    Ok((total, avail))
}

/// Cumulative counters of one interface from `/proc/net/dev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDev {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
}

/// Parses `/proc/net/dev` (two header lines, then `name: 16 counters`).
pub fn parse_net_dev(text: &str, path: &Path) -> Result<Vec<NetDev>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(2) {
        if line.trim().is_empty() {
            continue;
        }
        let (name, rest) = line
            .split_once(':')
            .ok_or_else(|| proc_err(path, format!("line {}: no ':' after the name", i + 1)))?;
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .map(|f| f.parse::<u64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| proc_err(path, format!("line {}: a counter is not a number", i + 1)))?;
        if v.len() < 10 {
            return Err(proc_err(
                path,
                format!("line {}: {} counters, expected 16", i + 1, v.len()),
            ));
        }
        out.push(NetDev {
            name: name.trim().to_string(),
            rx_bytes: v[0],
            rx_packets: v[1],
            tx_bytes: v[8],
            tx_packets: v[9],
        });
    }
    Ok(out)
}

impl ProcFs {
    /// `/proc/stat` per CPU.
    pub fn cpu_times(&self) -> Result<BTreeMap<u32, CpuTimes>> {
        let p = self.proc_root.join("stat");
        parse_proc_stat(&read(&p)?, &p)
    }

    /// (MemTotal, MemAvailable) in bytes.
    pub fn memory(&self) -> Result<(f64, f64)> {
        let p = self.proc_root.join("meminfo");
        parse_meminfo(&read(&p)?, &p)
    }

    /// The interfaces of `/proc/net/dev` that count: not loopback (named `lo`, or IFF_LOOPBACK
    /// in `/sys/class/net/NAME/flags`) and not administratively down (IFF_UP clear).
    pub fn interfaces(&self) -> Result<Vec<NetDev>> {
        let p = self.proc_root.join("net/dev");
        let all = parse_net_dev(&read(&p)?, &p)?;
        Ok(all
            .into_iter()
            .filter(|d| !self.ignored_interface(&d.name))
            .collect())
    }

    /// True for loopback interfaces and interfaces that are down (see [`ProcFs::interfaces`]).
    pub fn ignored_interface(&self, name: &str) -> bool {
        if name == "lo" {
            return true;
        }
        let flags = self.sys_root.join("class/net").join(name).join("flags");
        std::fs::read_to_string(flags)
            .ok()
            .and_then(|s| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
            .is_some_and(|f| f & 0x8 != 0 || f & 0x1 == 0)
    }

    /// Link speed of an interface in Mbit/s from `/sys/class/net/NAME/speed`, if the driver
    /// reports one (virtual interfaces do not).
    pub fn link_speed(&self, name: &str) -> Option<f64> {
        let p = self.sys_root.join("class/net").join(name).join("speed");
        let v: i64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
        (v > 0).then_some(v as f64)
    }

    /// CPU ticks (utime + stime) of a process or thread.
    pub fn process_ticks(&self, p: &ProcessRef) -> Result<u64> {
        let path = p.stat_path(&self.proc_root);
        parse_pid_stat(&read(&path)?, &path)
    }

    /// The host name (`/proc/sys/kernel/hostname`), if readable.
    pub fn hostname(&self) -> Option<String> {
        let s = std::fs::read_to_string(self.proc_root.join("sys/kernel/hostname")).ok()?;
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_string())
    }
}
