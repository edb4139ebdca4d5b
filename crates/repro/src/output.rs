//! What the reproduction writes: its records (`results.json`) and whole files.

use crate::error::{Context, Result};
use serde::Serialize;

/// One run of a study, as `results.json` lists it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Record {
    pub study: &'static str,
    pub config: String,
    pub variant: String,
    pub mode: &'static str,
    pub ranks: usize,
    pub balance: &'static str,
    pub w_comm: f64,
    pub loads: Vec<String>,
    pub rebalance: String,
    pub sensing: String,
    /// Seconds: the median of the repeats (measured), the model's (simulated).
    pub time_s: f64,
    /// Every repeat's time (measured).
    pub times_s: Vec<f64>,
    /// 1 − t / t_uniform of the same configuration and mode.
    pub rc: Option<f64>,
    /// RC_ideal of the configuration (with the loads of its last step).
    pub rc_ideal: f64,
    /// H_cpu of the processes' speeds (ratings times CPU shares).
    pub h_cpu: f64,
    pub rebalances: usize,
    pub migrated_elements: u64,
    pub migrated_bytes: f64,
    /// Mean per-step imbalance.
    pub imbalance: f64,
    /// Simulated: the slowest rank's compute and communication, summed over the steps.
    pub compute_s: Option<f64>,
    pub comm_s: Option<f64>,
}

/// The simulator against a measured configuration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Validation {
    pub config: String,
    pub measured_s: f64,
    pub simulated_s: f64,
    pub rel_err: f64,
    /// The run the model was calibrated on (its error says little).
    pub calibration: bool,
}

/// Writes a file of the reproduction whole or not at all (`part_api::file::write_atomic`):
/// a stopped run leaves no half-written report behind.
pub(crate) fn write_whole(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    part_api::file::write_atomic_bytes(path, bytes)
        .map_err(|e| e.source)
        .with_context(|| format!("writing {}", path.display()))
}
