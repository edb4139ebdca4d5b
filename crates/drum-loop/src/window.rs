//! One rank's measurement between rebalance points: its agent's windows merged into a
//! [`Usage`] (`drum_model::usage` does the arithmetic), sent to every rank in the one wire
//! format (`comm::wire`).

use crate::{MIN_EVIDENCE, RankMeasure};
use comm::wire::{Reader, WireError, Writer};
use drum_model::monitor::Window;
use drum_model::usage::{CpuIdle, IfaceUsage, ProcUsage, Usage};

/// One rank's windows since the powers were last renewed, or why its agent failed.
#[derive(Debug, Clone, Default)]
pub(crate) struct RankWindow {
    pub(crate) usage: Usage,
    /// The agent failed: why.
    pub(crate) error: Option<String>,
}

impl RankWindow {
    /// Adds a window cut by this rank's agent (one target: the rank's node, one process: the
    /// rank).
    pub(crate) fn add(&mut self, w: &Window) {
        let Some(u) = w.usage.first() else {
            self.error = Some("the agent's window has no sample".into());
            return;
        };
        if !(u.is_finite() && w.seconds.is_finite()) || u.procs.len() != 1 {
            self.error = Some(format!(
                "the agent's window holds a non-finite or missing value ({} process(es), {} s)",
                u.procs.len(),
                w.seconds
            ));
            return;
        }
        self.usage.merge(u);
    }

    /// Seconds measured.
    pub(crate) fn seconds(&self) -> f64 {
        self.usage.seconds
    }

    /// The wire form (one rank's contribution to the allgather).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match &self.error {
            Some(e) => {
                w.u8(1);
                w.str(e);
            }
            None => {
                w.u8(0);
                put_usage(&mut w, &self.usage);
            }
        }
        w.into_bytes()
    }

    /// Back from [`RankWindow::encode`]; a garbled message becomes the rank's error.
    pub(crate) fn decode(b: &[u8]) -> RankWindow {
        let mut r = Reader::new(b, "a rank's monitoring window");
        let read = |r: &mut Reader<'_>| -> Result<RankWindow, WireError> {
            if r.u8()? == 1 {
                return Ok(RankWindow {
                    error: Some(r.str()?),
                    ..RankWindow::default()
                });
            }
            Ok(RankWindow {
                usage: get_usage(r)?,
                error: None,
            })
        };
        read(&mut r).unwrap_or_else(|e| RankWindow {
            error: Some(format!("its measurement arrived garbled ({e})")),
            ..RankWindow::default()
        })
    }

    /// What the report shows of this rank's measurement.
    pub(crate) fn measure(&self, rank: usize) -> RankMeasure {
        let u = &self.usage;
        let t = u.seconds.max(1e-12);
        let p = u.procs.first();
        RankMeasure {
            rank,
            seconds: u.seconds,
            util: p.map_or(0.0, |p| p.cpu_s / t),
            runnable: p.and_then(|p| p.runnable_s).map(|x| x / t),
            idle: if u.cpus.is_empty() {
                0.0
            } else {
                u.cpus.iter().map(CpuIdle::fraction).sum::<f64>() / u.cpus.len() as f64
            },
            evidence: self.error.is_none() && self.evidence(),
        }
    }

    /// Did the rank run enough in the window to judge its node?
    pub(crate) fn evidence(&self) -> bool {
        let busy = self
            .usage
            .procs
            .first()
            .map_or(0.0, |p| p.runnable_s.unwrap_or(p.cpu_s));
        self.usage.seconds > 0.0 && busy >= MIN_EVIDENCE.as_secs_f64()
    }
}

fn put_usage(w: &mut Writer, u: &Usage) {
    w.f64(u.seconds);
    w.usize(u.cpus.len());
    for c in &u.cpus {
        w.f64(c.idle);
        w.f64(c.total);
    }
    w.usize(u.procs.len());
    for p in &u.procs {
        w.f64(p.seconds);
        w.f64(p.cpu_s);
        w.opt_f64(p.runnable_s);
    }
    w.f64(u.mem_total);
    w.f64(u.mem_available_s);
    w.usize(u.ifaces.len());
    for f in &u.ifaces {
        w.str(&f.name);
        w.opt_f64(f.capacity_mbps);
        for x in [
            f.seconds,
            f.rx_bytes,
            f.tx_bytes,
            f.rx_packets,
            f.tx_packets,
        ] {
            w.f64(x);
        }
    }
}

fn get_usage(r: &mut Reader<'_>) -> Result<Usage, WireError> {
    let seconds = r.f64()?;
    let n = bounded(r, 24)?;
    let cpus = (0..n)
        .map(|_| {
            Ok(CpuIdle {
                idle: r.f64()?,
                total: r.f64()?,
            })
        })
        .collect::<Result<_, WireError>>()?;
    let n = bounded(r, 17)?;
    let procs = (0..n)
        .map(|_| {
            Ok(ProcUsage {
                seconds: r.f64()?,
                cpu_s: r.f64()?,
                runnable_s: r.opt_f64()?,
            })
        })
        .collect::<Result<_, WireError>>()?;
    let (mem_total, mem_available_s) = (r.f64()?, r.f64()?);
    let n = bounded(r, 45)?;
    let ifaces = (0..n)
        .map(|_| {
            Ok(IfaceUsage {
                name: r.str()?,
                capacity_mbps: r.opt_f64()?,
                seconds: r.f64()?,
                rx_bytes: r.f64()?,
                tx_bytes: r.f64()?,
                rx_packets: r.f64()?,
                tx_packets: r.f64()?,
            })
        })
        .collect::<Result<_, WireError>>()?;
    Ok(Usage {
        seconds,
        cpus,
        procs,
        mem_total,
        mem_available_s,
        ifaces,
    })
}

/// A count of records of at least `min` bytes each: one the rest of the message cannot hold
/// is an error, before anything is allocated for it.
fn bounded(r: &mut Reader<'_>, min: usize) -> Result<usize, WireError> {
    let n = r.usize()?;
    if n.saturating_mul(min) > r.remaining() {
        // The read that would fail: the first record past the end.
        r.bytes(r.remaining() + 1)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_garbled_messages_become_errors() {
        let w = RankWindow {
            usage: Usage {
                seconds: 0.5,
                cpus: vec![CpuIdle {
                    idle: 3.0,
                    total: 50.0,
                }],
                procs: vec![ProcUsage {
                    seconds: 0.5,
                    cpu_s: 0.25,
                    runnable_s: Some(0.4),
                }],
                mem_total: 8e9,
                mem_available_s: 2e9,
                ifaces: vec![IfaceUsage {
                    name: "veth0".into(),
                    capacity_mbps: Some(100.0),
                    seconds: 0.5,
                    rx_bytes: 1e3,
                    ..IfaceUsage::default()
                }],
            },
            error: None,
        };
        let b = w.encode();
        assert_eq!(RankWindow::decode(&b).usage, w.usage);
        let e = RankWindow::decode(&b[..b.len() - 3]).error.unwrap();
        assert!(
            e.starts_with("its measurement arrived garbled (a rank's monitoring window"),
            "{e}"
        );
        // A count no message could hold is refused before anything is allocated.
        let mut huge = Writer::default();
        huge.u8(0);
        huge.f64(1.0);
        huge.u64(u64::MAX / 2);
        let e = RankWindow::decode(&huge.into_bytes()).error.unwrap();
        assert!(e.contains("garbled"), "{e}");
        let failed = RankWindow {
            error: Some("no agent".into()),
            ..RankWindow::default()
        };
        assert_eq!(
            RankWindow::decode(&failed.encode()).error.unwrap(),
            "no agent"
        );
    }
}
