//! [`Drum`]: the object that mirrors `DRUM_startMonitoring` / `DRUM_stopMonitoring` /
//! `DRUM_computePowers` / `DRUM_getLocalPartSize`.

use super::*;
use crate::error::{Error, Result};
use crate::machine::Machine;
use crate::power::{PowerConfig, Powers, static_powers};
use crate::samples::{Smoothing, locate, powers_from_samples};

/// The DRUM object: a machine, a power model, and optional monitoring, with the calls of the
/// DRUM C API (`DRUM_startMonitoring`, `DRUM_stopMonitoring`, `DRUM_computePowers`,
/// `DRUM_getLocalPartSize`).
///
/// ```no_run
/// use drum_model::{Machine, PowerConfig};
/// use drum_model::monitor::{Drum, MonitorConfig, ProcessRef};
/// use std::time::Duration;
/// let machine = Machine::from_file("machines/local-2core-hetero.xml")?;
/// let mut drum = Drum::new(machine, PowerConfig::default())?; // static powers
/// let cfg = MonitorConfig::for_machine(drum.machine(), &[], Duration::from_millis(100));
/// drum.start_monitoring(cfg)?;
/// // ... compute phase ...
/// drum.stop_monitoring()?;
/// drum.compute_powers()?;
/// let size = drum.local_part_size(0);
/// # Ok::<(), drum_model::Error>(())
/// ```
#[derive(Debug)]
pub struct Drum {
    machine: Machine,
    config: PowerConfig,
    smoothing: Smoothing,
    monitor: Option<Monitor>,
    recording: Option<Recording>,
    powers: Powers,
}

impl Drum {
    /// A DRUM object with static powers already computed.
    pub fn new(machine: Machine, config: PowerConfig) -> Result<Drum> {
        let powers = static_powers(&machine, &config)?;
        Ok(Drum {
            machine,
            config,
            smoothing: Smoothing::default(),
            monitor: None,
            recording: None,
            powers,
        })
    }

    /// Chooses how samples are reduced (window mean by default, or NWS forecast).
    pub fn set_smoothing(&mut self, smoothing: Smoothing) {
        self.smoothing = smoothing;
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Starts the agent thread (DRUM_startMonitoring). Errors if already monitoring.
    pub fn start_monitoring(&mut self, config: MonitorConfig) -> Result<()> {
        if self.monitor.is_some() {
            return Err(Error::Monitor("monitoring already started".into()));
        }
        self.monitor = Some(start_monitoring(config)?);
        Ok(())
    }

    /// Stops the agent thread (DRUM_stopMonitoring) and keeps its samples.
    pub fn stop_monitoring(&mut self) -> Result<MonitorStats> {
        let m = self
            .monitor
            .take()
            .ok_or_else(|| Error::Monitor("not monitoring".into()))?;
        let rec = m.stop()?;
        let stats = rec.stats;
        self.recording = Some(rec);
        Ok(stats)
    }

    /// The last recording, if any.
    pub fn recording(&self) -> Option<&Recording> {
        self.recording.as_ref()
    }

    /// Updates the powers (DRUM_computePowers) from the last recording, or static powers if
    /// nothing was recorded.
    pub fn compute_powers(&mut self) -> Result<&Powers> {
        self.powers = match &self.recording {
            Some(rec) if !rec.samples.is_empty() => {
                let located = locate(rec.samples.clone(), "<monitor>");
                powers_from_samples(&self.machine, &self.config, &located, self.smoothing)?
            }
            _ => static_powers(&self.machine, &self.config)?,
        };
        Ok(&self.powers)
    }

    /// The current powers.
    pub fn powers(&self) -> &Powers {
        &self.powers
    }

    /// The part size of `rank` (DRUM_getLocalPartSize). Panics if `rank` is out of range.
    pub fn local_part_size(&self, rank: usize) -> f64 {
        self.powers.part_size(rank)
    }
}
