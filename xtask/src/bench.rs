//! What the benches share: a measured run, medians, the machine's load, the output of a
//! command, its `--json` line, and the Zoltan peer driver (built here, read here).

use crate::run;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A measured run: median time (s) and max |W_k/T_k − 1|.
#[derive(Clone, Copy)]
pub(crate) struct Run {
    pub(crate) time: f64,
    pub(crate) dev: f64,
}

/// The median of `v` (the mean of the middle two of an even count); NaN when `v` is empty.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// The smallest and the largest of `v`.
pub(crate) fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// The CPU time the hypervisor gave other guests while this machine wanted it ("steal",
/// the eighth figure of `/proc/stat`'s `cpu` line), from a start: on a shared virtual
/// machine a bench whose runs lost several percent to it is slower for reasons outside the
/// code, and says so.
pub(crate) struct Steal {
    start: Option<[u64; 2]>,
}

impl Steal {
    /// All CPUs' jiffies: (steal, total); `None` where `/proc/stat` is unreadable.
    fn now() -> Option<[u64; 2]> {
        Steal::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// (steal, total) from the text of `/proc/stat`.
    fn parse(stat: &str) -> Option<[u64; 2]> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let total = f.iter().take(8).sum();
        Some([*f.get(7)?, total])
    }

    pub(crate) fn start() -> Steal {
        Steal {
            start: Steal::now(),
        }
    }

    /// The stolen share of all CPUs' time since the start, as a sentence.
    pub(crate) fn report(&self) -> String {
        match (self.start, Steal::now()) {
            (Some([s0, t0]), Some([s1, t1])) if t1 > t0 => {
                let share = (s1 - s0) as f64 / (t1 - t0) as f64;
                let verdict = if share > 0.02 {
                    "the timings above lost CPU time to other guests of the host"
                } else {
                    "negligible"
                };
                format!(
                    "hypervisor steal during the bench: {:.1} % of the CPU time ({verdict})",
                    100.0 * share
                )
            }
            _ => "hypervisor steal: not measured (no /proc/stat)".into(),
        }
    }
}

/// Runs a bench binary ([`crate::run`]), then prints the steal over its run.
pub(crate) fn run_reporting_steal(cmd: Command) -> Result<()> {
    let steal = Steal::start();
    run(cmd)?;
    println!("{}", steal.report());
    Ok(())
}

/// The load averages over 1, 5 and 15 minutes (`/proc/loadavg`).
pub(crate) fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The host's two-CPU bandwidth scaling, measured by `hsfc bandwidth --json` (the release
/// binary, before the runs and never beside one): its description line, and the ratio of two
/// CPUs' triad to one's (`None` on a one-CPU host), the most a pass that streams memory can
/// gain from a second thread.
pub(crate) struct Bandwidth {
    pub(crate) description: String,
    pub(crate) ratio: Option<f64>,
}

pub(crate) fn bandwidth(hsfc: &Path) -> Result<Bandwidth> {
    let mut cmd = Command::new(hsfc);
    cmd.args(["bandwidth", "--json"]);
    let v = json(&output(cmd)?)?;
    Ok(Bandwidth {
        description: v["description"]
            .as_str()
            .context("hsfc bandwidth --json lacks `description`")?
            .to_string(),
        ratio: v["ratio"].as_f64(),
    })
}

impl Bandwidth {
    /// What a 1t/2t line appends: the ceiling it should be read against.
    pub(crate) fn against(&self) -> String {
        match self.ratio {
            Some(r) => format!("; this host's two-CPU bandwidth ceiling {r:.2}"),
            None => String::new(),
        }
    }
}

/// Runs `cmd` and returns its stdout; fails with its stderr.
pub(crate) fn output(mut cmd: Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A `--json` line.
pub(crate) fn json(line: &str) -> Result<serde_json::Value> {
    serde_json::from_str(line.trim()).with_context(|| format!("parsing `{line}`"))
}

/// The number `v[k]`.
pub(crate) fn num(v: &serde_json::Value, k: &str) -> Result<f64> {
    v[k].as_f64()
        .with_context(|| format!("no number `{k}` in {v}"))
}

/// The time and deviation of a `--json` line (`time_s`, `max_rel_dev`).
pub(crate) fn json_run(v: &serde_json::Value) -> Result<Run> {
    Ok(Run {
        time: num(v, "time_s")?,
        dev: num(v, "max_rel_dev")?,
    })
}

/// Copies the peer driver into target/ and builds it; a clear error when Zoltan is missing.
pub(crate) fn build_zoltan(root: &Path, work: &Path) -> Result<PathBuf> {
    let peer = root.join("../shared/peers/zoltan");
    if !peer.join("zdriver.c").exists() {
        bail!(
            "the Zoltan peer driver is missing: expected {}",
            peer.join("zdriver.c").display()
        );
    }
    let have_zoltan = Path::new("/usr/include/trilinos/zoltan.h").exists();
    let have_mpicc = Command::new("mpicc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_zoltan || !have_mpicc {
        bail!(
            "Zoltan or MPI is not installed (need /usr/include/trilinos/zoltan.h and mpicc).\n\
             Install them with: apt-get install libtrilinos-zoltan-dev openmpi-bin libopenmpi-dev make"
        );
    }
    let dir = work.join("zoltan");
    std::fs::create_dir_all(&dir)?;
    for f in ["zdriver.c", "Makefile"] {
        std::fs::copy(peer.join(f), dir.join(f)).with_context(|| format!("copying {f}"))?;
    }
    let mut make = Command::new("make");
    make.current_dir(&dir).arg("zdriver");
    run(make)?;
    Ok(dir.join("zdriver"))
}

/// Runs a `zdriver` command and reads `t_med` and `max_rel_dev` from its RESULT line.
pub(crate) fn zoltan_result(cmd: Command) -> Result<Run> {
    let out = output(cmd)?;
    let line = out
        .lines()
        .find(|l| l.starts_with("RESULT"))
        .with_context(|| format!("no RESULT line from zdriver:\n{out}"))?;
    let field = |k: &str| -> Result<f64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .with_context(|| format!("zdriver RESULT lacks {k}: {line}"))?
            .parse()
            .with_context(|| format!("zdriver {k} is not a number: {line}"))
    };
    Ok(Run {
        time: field("t_med")?,
        dev: field("max_rel_dev")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_extremes() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(min_max(&[2.0, -1.0, 5.0]), (-1.0, 5.0));
    }

    #[test]
    fn steal_is_the_eighth_figure_of_the_cpu_line() {
        let stat = "cpu  100 2 30 400 5 0 6 70 9 0\ncpu0 50 1 15 200 2 0 3 35 0 0\n";
        assert_eq!(Steal::parse(stat), Some([70, 613]));
        assert_eq!(Steal::parse("cpu0 1 2 3\n"), None);
        assert_eq!(Steal::parse("cpu  1 2 3\n"), None);
    }
}
