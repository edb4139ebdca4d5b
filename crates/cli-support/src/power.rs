//! The power-model flags of every command that reads a machine description, as one
//! `clap::Args` (flatten it into a command's arguments), and the powers they select.

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use drum_model::samples::{Smoothing, parse_work, powers_from_samples, read_jsonl};
use drum_model::{Machine, Observations, PowerConfig, PowerModel, Powers, compute_powers};
use std::path::PathBuf;

/// `--model`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelArg {
    /// DRUM 2005: processing power and available-bandwidth communication power.
    Drum,
    /// DRUM 2004: communication power from the communication activity factor.
    Drum2004,
    /// Sinha–Parashar capacity C = w_p P + w_m M + w_b B.
    Sinha,
    /// Watts et al.: capacity = work / CPU time per rank (needs --work).
    Measured,
}

/// `--smoothing`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmoothingArg {
    /// Mean over the monitoring window (DRUM 2005).
    Mean,
    /// NWS-style forecast (lowest running error among several predictors).
    Forecast,
}

/// `--util-basis`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasisArg {
    /// The whole monitoring window (DRUM 2005 §3.3.1).
    Window,
    /// The time the process was runnable.
    Runnable,
}

/// Where node powers come from: the model and its weights, and static ratings, replayed
/// monitor samples (`--replay`) or measured work (`--model measured --work`).
#[derive(Args, Debug, Clone)]
pub struct PowerArgs {
    /// Communication weight w_comm in [0, 1] (drum, drum2004).
    #[arg(long, default_value_t = 0.0)]
    pub w_comm: f64,
    /// Power model.
    #[arg(long, value_enum, default_value_t = ModelArg::Drum)]
    pub model: ModelArg,
    /// Use recorded monitor samples (JSON Lines) instead of static powers.
    #[arg(long, value_name = "SAMPLES.jsonl")]
    pub replay: Option<PathBuf>,
    /// How samples are reduced.
    #[arg(long, value_enum, default_value_t = SmoothingArg::Mean)]
    pub smoothing: SmoothingArg,
    /// Memory threshold of DRUM 2005 §5 (0 disables the rule).
    #[arg(long, default_value_t = 0.1)]
    pub memory_threshold: f64,
    /// Sinha–Parashar weight of CPU.
    #[arg(long, default_value_t = 1.0 / 3.0)]
    pub w_p: f64,
    /// Sinha–Parashar weight of memory.
    #[arg(long, default_value_t = 1.0 / 3.0)]
    pub w_m: f64,
    /// Sinha–Parashar weight of bandwidth.
    #[arg(long, default_value_t = 1.0 / 3.0)]
    pub w_b: f64,
    /// The least processing power a node keeps, as a fraction of its idle-CPU power (0 turns
    /// the floor off); a node raised to it is reported.
    #[arg(long, default_value_t = drum_model::DEFAULT_POWER_FLOOR)]
    pub power_floor: f64,
    /// What a process's CPU use is a fraction of: the whole window (DRUM 2005 as written) or
    /// the time it was runnable (from the kernel's schedstat; samples without it use the window).
    #[arg(long, value_enum, default_value_t = BasisArg::Runnable)]
    pub util_basis: BasisArg,
    /// Per-rank work records for --model measured: {"rank": R, "work": W, "cpu_seconds": S} per line.
    #[arg(long, value_name = "WORK.jsonl")]
    pub work: Option<PathBuf>,
}

impl PowerArgs {
    /// The power configuration these flags select.
    pub fn config(&self) -> PowerConfig {
        let model = match self.model {
            ModelArg::Drum => PowerModel::Drum {
                w_comm: self.w_comm,
            },
            ModelArg::Drum2004 => PowerModel::Drum2004 {
                w_comm: self.w_comm,
            },
            ModelArg::Sinha => PowerModel::SinhaParashar {
                w_p: self.w_p,
                w_m: self.w_m,
                w_b: self.w_b,
            },
            ModelArg::Measured => PowerModel::Measured,
        };
        let memory_threshold = (self.memory_threshold > 0.0).then_some(self.memory_threshold);
        PowerConfig {
            model,
            memory_threshold,
            basis: match self.util_basis {
                BasisArg::Window => drum_model::UtilBasis::Window,
                BasisArg::Runnable => drum_model::UtilBasis::Runnable,
            },
            floor: self.power_floor,
        }
    }

    /// Computes the machine's powers and says where they came from (for the report). Each
    /// correction the computation made (a node raised to the power floor) is printed on
    /// stderr as `warning: ...`.
    pub fn compute(&self, machine: &Machine) -> Result<(Powers, String)> {
        let (p, origin) = self.compute_quiet(machine)?;
        for w in &p.warnings {
            eprintln!("warning: {w}");
        }
        Ok((p, origin))
    }

    fn compute_quiet(&self, machine: &Machine) -> Result<(Powers, String)> {
        let config = self.config();
        if self.model == ModelArg::Measured {
            let Some(path) = &self.work else {
                bail!("--model measured needs --work WORK.jsonl (per-rank work and CPU seconds)");
            };
            let limit = drum_model::samples::MAX_SAMPLES_FILE_BYTES;
            let bytes = part_api::file::read_bounded(path, limit, "a work file")
                .with_context(|| format!("cannot read {}", path.display()))?;
            let text = String::from_utf8(bytes)
                .with_context(|| format!("{}: not UTF-8 text", path.display()))?;
            let obs = Observations {
                rank_work: parse_work(&text, &path.display().to_string())?,
                ..Observations::default()
            };
            let p = compute_powers(machine, &config, &obs)?;
            return Ok((p, format!("measured capacities from {}", path.display())));
        }
        match &self.replay {
            None => Ok((
                drum_model::static_powers(machine, &config)?,
                "static (every process can use a whole CPU, every interface idle)".into(),
            )),
            Some(path) => {
                let samples = read_jsonl(path)?;
                let smoothing = match self.smoothing {
                    SmoothingArg::Mean => Smoothing::WindowMean,
                    SmoothingArg::Forecast => Smoothing::Forecast,
                };
                let p = powers_from_samples(machine, &config, &samples, smoothing)?;
                Ok((
                    p,
                    format!("replayed {} samples from {}", samples.len(), path.display()),
                ))
            }
        }
    }
}

/// The model of `p` with its weights, for a report.
pub fn describe_model(p: &Powers) -> String {
    match &p.model {
        PowerModel::Drum { w_comm } => format!("drum (DRUM 2005), w_comm = {w_comm}"),
        PowerModel::Drum2004 { w_comm } => format!("drum2004 (CAF), w_comm = {w_comm}"),
        PowerModel::SinhaParashar { w_p, w_m, w_b } => {
            format!("sinha (Sinha–Parashar), w_p = {w_p:.3}, w_m = {w_m:.3}, w_b = {w_b:.3}")
        }
        PowerModel::Measured => "measured (Watts et al.)".into(),
        PowerModel::LoadAverage => "loadavg (Watts et al.: ratings over load average)".into(),
        _ => p.model.name().into(),
    }
}
