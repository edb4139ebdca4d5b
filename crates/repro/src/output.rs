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
    /// The fastest and slowest repeat.
    pub spread_s: (f64, f64),
    /// The ranks of the median repeat that shared their core, with the CPU share the model
    /// gives them and the share they got.
    pub shared: Vec<crate::calib::SharedRank>,
    /// Monitored runs with a load that starts or moves during the run: the steps whose
    /// rebalance point renewed the powers, measured (the median repeat) and simulated.
    pub sensed_at: Option<(Vec<usize>, Vec<usize>)>,
    /// Beyond 15 %: what the model lacks there, as far as the figures show.
    pub mechanism: Option<String>,
}

impl Validation {
    /// What the model lacks where it misses by more than 15 %: the repeats' own spread, the
    /// monitors renewing the powers at other steps than the model's (a due sensing waits
    /// for a long enough window: where that falls decides what the window saw), a shared
    /// core that gave its rank another CPU share than the model's (in the direction of the
    /// error), or nothing identified.
    pub fn explain(&mut self) {
        if self.calibration || self.rel_err.abs() <= 0.15 {
            self.mechanism = None;
            return;
        }
        let (lo, hi) = self.spread_s;
        let worst = self
            .shared
            .iter()
            .filter(|s| (s.effective - s.nominal).abs() >= 0.05)
            // Measured faster than the model (error > 0): a rank got more than its share.
            .filter(|s| (s.effective > s.nominal) == (self.rel_err > 0.0))
            .max_by(|a, b| {
                (a.effective - a.nominal)
                    .abs()
                    .total_cmp(&(b.effective - b.nominal).abs())
            });
        let sensed = self.sensed_at.as_ref().filter(|(m, s)| m != s);
        self.mechanism = Some(if (lo..=hi).contains(&self.simulated_s) {
            format!("within the repeats' spread ({lo:.3}–{hi:.3} s)")
        } else if let Some((m, s)) = sensed {
            format!("the monitors sensed at steps {m:?}, the model at {s:?}")
        } else if let Some(s) = worst {
            format!(
                "the shared core gave rank {} {:.2} of a CPU, the model {:.2}",
                s.rank, s.effective, s.nominal
            )
        } else {
            "not identified".to_string()
        });
    }
}

/// Writes a file of the reproduction whole or not at all (`part_api::file::write_atomic`):
/// a stopped run leaves no half-written report behind.
pub(crate) fn write_whole(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    part_api::file::write_atomic_bytes(path, bytes)
        .map_err(|e| e.source)
        .with_context(|| format!("writing {}", path.display()))
}

/// The reproduction's output directory, whole or absent: everything is written into a
/// staging directory beside `--out` (`.NAME.partial-PID`), moved into `--out` by
/// [`Staging::commit`] once the report is complete, and removed on any other exit (an
/// error or a panic drop it). An existing `--out` keeps its other files; its `runs/` and
/// report files are replaced only on success.
pub(crate) struct Staging {
    /// Where the run writes.
    dir: std::path::PathBuf,
    /// Where the output goes on success.
    out: std::path::PathBuf,
    committed: bool,
}

impl Staging {
    /// Checks `out` (a directory or absent) and creates the staging directory beside it.
    pub(crate) fn new(out: &std::path::Path) -> Result<Staging> {
        let Some(name) = out.file_name() else {
            crate::error::bail!("--out {}: not a directory name", out.display());
        };
        if out.exists() && !out.is_dir() {
            crate::error::bail!("--out {}: exists and is not a directory", out.display());
        }
        let dir = out.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Staging {
            dir,
            out: out.to_path_buf(),
            committed: false,
        })
    }

    /// The staging directory.
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Moves the staged files into `out` (the whole directory if `out` does not exist).
    pub(crate) fn commit(mut self) -> Result<()> {
        if !self.out.exists() {
            std::fs::rename(&self.dir, &self.out).with_context(|| {
                format!("moving {} to {}", self.dir.display(), self.out.display())
            })?;
        } else {
            let entries = std::fs::read_dir(&self.dir)
                .with_context(|| format!("reading {}", self.dir.display()))?;
            for entry in entries {
                let from = entry
                    .with_context(|| format!("reading {}", self.dir.display()))?
                    .path();
                let to = self.out.join(from.file_name().unwrap_or_default());
                if to.is_dir() && !to.is_symlink() {
                    std::fs::remove_dir_all(&to)
                        .with_context(|| format!("replacing {}", to.display()))?;
                }
                std::fs::rename(&from, &to)
                    .with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
            }
            std::fs::remove_dir(&self.dir)
                .with_context(|| format!("removing {}", self.dir.display()))?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
