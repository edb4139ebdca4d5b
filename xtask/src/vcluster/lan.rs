//! The measured rows of Lan, Taylor & Bryan's study that `cargo xtask reproduce` adds when it
//! can make network namespaces: the SAMR kernel (`samr --backend mpi`) under `mpirun` across
//! the four nodes of `machines/vcluster-sites.xml` (two sites of two nodes, the sites joined
//! by a link shaped to 10 Mbit/s both ways), parallel DLB (one flat ACE layout over the four
//! ranks at each regrid) against distributed DLB (`--scheme two-phase`: a global phase between
//! the sites when Gain > 2·Cost with the link's α and β measured over that link, local phases
//! inside each site). Each run's steps go to `NAME/steps.jsonl` with a `run.json`;
//! `drum-repro --lan-vcluster-runs DIR` reads them (crate `repro`, module `samr`). Four ranks
//! share two cores: the bytes over the slow link and the redistributions are the figures, the
//! times only compare the two schemes on the same oversubscribed host.

use super::job::Cluster;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;

pub(crate) const MACHINE: &str = "machines/vcluster-sites.xml";

/// The runs: `(directory name, --scheme, --link-every)`. Distributed DLB measures the link
/// (α, β) at its first global phase; with `None` never again in the run (a probe of the
/// 10 Mbit/s link takes about 0.6 s, some 25 of these level-0 steps), the third run probes it
/// every 10 global phases, to show what that costs.
pub(crate) const RUNS: [(&str, &str, Option<u64>); 3] = [
    ("parallel", "flat", None),
    ("distributed", "two-phase", None),
    ("distributed-reprobe", "two-phase", Some(10)),
];

/// The kernel's size `(n0, steps, sweeps)`: the thread-rank study's (`repro::samr::Size`),
/// smaller when `tiny`.
fn size(tiny: bool) -> (i64, usize, u32) {
    if tiny { (64, 16, 10) } else { (128, 80, 60) }
}

fn size_args(tiny: bool) -> [String; 6] {
    let (n0, steps, sweeps) = size(tiny);
    [
        "--n0".into(),
        n0.to_string(),
        "--steps".into(),
        steps.to_string(),
        "--sweeps".into(),
        sweeps.to_string(),
    ]
}

/// `samr`'s arguments for one run with `scheme` (after `mpirun -np 4 SAMR`): with the
/// two-phase scheme, the link is measured every `link_every` global phases (`None`: once).
pub(crate) fn samr_args(scheme: &str, link_every: Option<u64>, tiny: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "--backend",
        "mpi",
        "--machine",
        MACHINE,
        "--partitioner",
        "ace",
        "--scheme",
        scheme,
        "--json",
    ]
    .map(String::from)
    .to_vec();
    a.extend(size_args(tiny));
    if scheme == "two-phase" {
        let every = link_every.unwrap_or(size(tiny).1 as u64);
        a.extend(["--link-every".into(), every.to_string()]);
    }
    a
}

/// Why the runs cannot be made here, if they cannot.
pub(crate) fn skip_reason() -> Result<Option<String>> {
    super::exp2::skip_reason_for(MACHINE)
}

/// Builds `samr` with MPI (release), brings the cluster up (down after, if this brought it
/// up) and makes the runs into `out`, one directory each; returns `out`.
pub(crate) fn run(out: &Path, tiny: bool) -> Result<PathBuf> {
    let drum = crate::release(&["--quiet", "-p", "drum-cli", "--bin", "drum"])?.join("drum");
    let built = crate::release(&[
        "--quiet",
        "-p",
        "samr-cli",
        "--bin",
        "samr",
        "--features",
        "mpi",
    ])?
    .join("samr");
    let samr = built.with_file_name("samr-mpi");
    std::fs::copy(&built, &samr)
        .with_context(|| format!("copying {} to {}", built.display(), samr.display()))?;
    let cluster = Cluster::ensure(&drum, MACHINE)?;
    for (name, scheme, link_every) in RUNS {
        let dir = out.join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        eprintln!("xtask: reproduce on the vcluster: Lan et al., {name}");
        let mut a: Vec<String> = vec!["-np".into(), "4".into(), samr.display().to_string()];
        a.extend(samr_args(scheme, link_every, tiny));
        // Written aside and renamed when whole: a failed run leaves no steps file.
        let part = dir.join("steps.jsonl.part");
        let file =
            std::fs::File::create(&part).with_context(|| format!("creating {}", part.display()))?;
        cluster
            .mpirun_to(&a, Stdio::from(file))
            .with_context(|| format!("the vcluster run {name} (Lan et al.)"))?;
        let steps = dir.join("steps.jsonl");
        std::fs::rename(&part, &steps)
            .with_context(|| format!("renaming {} to {}", part.display(), steps.display()))?;
        let run = serde_json::json!({
            "machine": MACHINE,
            "scheme": scheme,
            "ranks": 4,
            "args": samr_args(scheme, link_every, tiny),
        });
        let p = dir.join("run.json");
        std::fs::write(&p, run.to_string() + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(out.to_path_buf())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schemes_run_the_same_kernel_on_the_sites_machine() {
        let [(_, flat, _), (_, two, once), (_, _, every)] = super::RUNS;
        let a = super::samr_args(flat, None, false);
        let b = super::samr_args(two, once, false);
        assert_eq!(
            &b[..a.len()].iter().filter(|x| *x == "two-phase").count(),
            &1
        );
        let differ: Vec<_> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
        assert_eq!(differ, [(&"flat".to_string(), &"two-phase".to_string())]);
        assert_eq!(b[a.len()..], ["--link-every", "80"]);
        let c = super::samr_args(two, every, false);
        assert_eq!(c[a.len()..], ["--link-every", "10"]);
        assert!(
            a.windows(2)
                .any(|w| w[0] == "--machine" && w[1] == super::MACHINE)
        );
        assert!(super::samr_args(two, None, true).ends_with(&["--link-every".into(), "16".into()]));
    }
}
