//! The measured rows `cargo xtask reproduce` adds when it can make network namespaces: DRUM
//! 2005's experiment 2 (the communication weight) on `machines/vcluster-2.xml`, uniform and
//! w_comm 0, 0.1, 0.25, 0.5, with dedicated links and with a competing TCP flow on node2's
//! link for the whole run. Each run's files go to a directory of its own with a `run.json`
//! saying how it ran; `drum-repro --vcluster-runs DIR` reads them (crate `repro`, module
//! `vcluster`).

use super::job::{Cluster, Sink};
use crate::run_laplace::{Backend, OnVcluster, build, parse, run_once};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

const MACHINE: &str = "machines/vcluster-2.xml";
/// The node whose link carries the competing flow.
const LOADED: &str = "node2";
/// The communication weights of the issue's table.
pub(crate) const W_COMM: [f64; 4] = [0.0, 0.1, 0.25, 0.5];

/// One run of the sweep: `(directory name, balance, w_comm, flow)`.
pub(crate) fn sweep() -> Vec<(String, &'static str, f64, bool)> {
    let mut v = Vec::new();
    for flow in [false, true] {
        let tag = if flow { LOADED } else { "dedicated" };
        v.push((format!("{tag}-uniform"), "uniform", 0.0, flow));
        for w in W_COMM {
            v.push((format!("{tag}-w{w}"), "monitored", w, flow));
        }
    }
    v
}

/// Why the runs cannot be made here, if they cannot (not root, no iproute2, another
/// cluster up).
pub(crate) fn skip_reason() -> Result<Option<String>> {
    skip_reason_for(MACHINE)
}

/// Why runs on the cluster of `machine` cannot be made here (not root, no iproute2, a
/// cluster of another machine up).
pub(crate) fn skip_reason_for(machine: &str) -> Result<Option<String>> {
    if let Some(why) = super::system::cannot_make_namespaces() {
        return Ok(Some(why));
    }
    Ok(super::State::load()?
        .filter(|s| s.machine != machine)
        .map(|s| {
            format!(
                "a vcluster of {} is up (`cargo xtask vcluster down` lets reproduce make its own)",
                s.machine
            )
        }))
}

/// Runs the sweep to `target` vertices (`None`: fem-laplace's default) into `out`, one
/// directory per run; returns `out`. The cluster goes down after it if this brought it up.
pub(crate) fn run(out: &Path, target: Option<&str>) -> Result<PathBuf> {
    let bins = build(Backend::Mpi)?;
    let cluster = Cluster::ensure(&bins.drum, MACHINE)?;
    let sink = Sink::start(&cluster.state)?;
    let vc = OnVcluster {
        sink: Some(sink),
        cluster,
    };
    for (name, balance, w, flow) in sweep() {
        let dir = out.join(&name);
        let mut a: Vec<String> = vec![
            "--vcluster".into(),
            "--machine".into(),
            MACHINE.into(),
            "--out".into(),
            dir.display().to_string(),
            "--balance".into(),
            balance.into(),
            "--w-comm".into(),
            w.to_string(),
        ];
        if flow {
            a.extend(["--net-load".into(), LOADED.into()]);
        }
        if let Some(t) = target {
            a.extend(["--target-vertices".into(), t.into()]);
        }
        let o = parse(&a)?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        eprintln!("xtask: reproduce on the vcluster: {name}");
        run_once(&o, &bins, balance, "", false, Some(&vc))
            .with_context(|| format!("the vcluster run {name}"))?;
        // The mesh files are the run's largest and the report does not read them.
        let _ = std::fs::remove_dir_all(dir.join("vtk"));
        let run = serde_json::json!({
            "machine": MACHINE,
            "balance": balance,
            "w_comm": w,
            "flow_on": flow.then_some(LOADED),
        });
        let p = dir.join("run.json");
        std::fs::write(&p, run.to_string() + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(s) = vc.sink {
        let (conns, bytes) = s.stop();
        eprintln!(
            "xtask: the flows' sink received {:.1} MB over {conns} connection(s)",
            bytes as f64 / 1e6
        );
    }
    Ok(out.to_path_buf())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sweep_is_the_issue_table_with_and_without_the_flow() {
        let s = super::sweep();
        assert_eq!(s.len(), 10);
        assert_eq!(s.iter().filter(|r| r.3).count(), 5);
        assert!(s.contains(&("node2-w0.5".into(), "monitored", 0.5, true)));
        assert!(s.contains(&("dedicated-uniform".into(), "uniform", 0.0, false)));
        let names: std::collections::BTreeSet<_> = s.iter().map(|r| &r.0).collect();
        assert_eq!(names.len(), s.len(), "one directory per run");
    }
}
