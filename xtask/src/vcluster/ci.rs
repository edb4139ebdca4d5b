//! The vcluster part of `cargo xtask ci` (after the MPI checks, with their debug builds): on
//! `machines/vcluster-2.xml`, a shortened `run-laplace --vcluster` with a competing flow gives
//! the thread run's mesh hashes, its ranks run on two hosts and each node's agent saw traffic
//! on its link in every measured window; a rank killed mid-run and a namespace removed under a
//! running job each end the job with an error within 10 s; `down`, also after a crash (a
//! process left inside, a namespace whose name is gone), leaves nothing behind. Skipped,
//! saying why, where namespaces cannot be made.

use super::job::Cluster;
use super::{State, system};
use crate::launch::CheckBins;
use crate::run_laplace::{Bins, OnVcluster, Options, mesh_hashes, parse, run_once, steps_of};
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const MACHINE: &str = "machines/vcluster-2.xml";
/// How soon a fault must end the job (the figure).
const FAULT_DEADLINE: Duration = Duration::from_secs(10);

/// Why the checks cannot run here, if they cannot.
fn skip_reason() -> Result<Option<String>> {
    if let Some(why) = system::cannot_make_namespaces() {
        return Ok(Some(why));
    }
    if let Some(s) = State::load()? {
        return Ok(Some(format!(
            "a vcluster of {} is up (`cargo xtask vcluster down` lets ci make its own)",
            s.machine
        )));
    }
    let probe = format!("{}-probe", super::plan::PREFIX);
    let made = system::sh_str(&["ip", "netns", "add", &probe]);
    let _ = system::sh_str(&["ip", "netns", "del", &probe]);
    Ok(made
        .err()
        .map(|e| format!("network namespaces cannot be made here: {e:#}")))
}

/// Runs the checks (see the module documentation).
pub(crate) fn check(fem_mpi: &Path, fem_threads: &Path, drum: &Path, vertices: &str) -> Result<()> {
    if let Some(why) = skip_reason()? {
        println!("xtask: skipping the vcluster checks: {why}");
        return Ok(());
    }
    let out = crate::target_dir().join("mpi-cli/vcluster");
    std::fs::create_dir_all(&out)?;
    let opts = |extra: &[&str]| -> Result<Options> {
        let mut a: Vec<String> = ["--machine", MACHINE, "--out"].map(String::from).to_vec();
        a.push(out.display().to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        parse(&a)
    };
    let bins = |fem: &Path| Bins {
        fem: fem.to_path_buf(),
        drum: drum.to_path_buf(),
    };
    let threads = opts(&["--target-vertices", vertices])?;
    run_once(
        &threads,
        &bins(fem_threads),
        "monitored",
        "threads-",
        false,
        None,
    )?;
    let want = mesh_hashes(&out.join("threads-steps.jsonl"))?;

    let o = opts(&[
        "--vcluster",
        "--w-comm",
        "0.25",
        "--net-load",
        "node2@2-6",
        "--target-vertices",
        vertices,
    ])?;
    let inodes = {
        let mut vc = OnVcluster::start(&o, drum)?;
        let summary = run_once(&o, &bins(fem_mpi), "monitored", "vc-", false, Some(&vc))?;
        check_run(&out.join("vc-steps.jsonl"), &summary, &want, &vc.cluster)?;
        let (conns, bytes) = vc.sink.take().map_or((0, 0), |s| s.stop());
        if conns != 1 || bytes == 0 {
            bail!("the sink got {conns} connection(s) and {bytes} bytes; expected one flow");
        }
        let long = opts(&["--vcluster", "--target-vertices", "200000"])?;
        fault(&long, &bins(fem_mpi), &vc, &out, Fault::KillRank)?;
        fault(&long, &bins(fem_mpi), &vc, &out, Fault::RemoveNamespace)?;
        vc.cluster.state.inodes()
        // Dropped here: the cluster this check brought up goes down.
    };
    nothing_left(&inodes)?;
    down_after_a_crash(drum)?;
    println!(
        "xtask: vcluster checks passed ({MACHINE}: run-laplace --vcluster with a flow on node2 \
         gives the thread run's {} mesh hashes, ranks on node1 and node2, link traffic in every \
         window; a killed rank and a removed namespace end the job within {} s; down leaves \
         nothing, also after a crash)",
        want.len(),
        FAULT_DEADLINE.as_secs()
    );
    Ok(())
}

/// `cargo xtask vcluster check`: the checks alone, with the debug builds `xtask ci` makes.
pub(crate) fn check_alone() -> Result<()> {
    CheckBins::build_serial()?;
    CheckBins::build_mpi()?;
    let (serial, mpi) = (
        CheckBins::serial("fem-laplace"),
        CheckBins::mpi("fem-laplace"),
    );
    let drum = CheckBins::serial("drum");
    system::catch_signals();
    check(&mpi, &serial, &drum, crate::launch::FEM_VERTICES)
}

/// The run's steps against the thread run's hashes, its hosts and its traffic.
fn check_run(
    steps: &Path,
    summary: &serde_json::Value,
    want: &[String],
    cluster: &Cluster,
) -> Result<()> {
    let got = mesh_hashes(steps)?;
    if got != want || got.is_empty() {
        bail!("run-laplace --vcluster gave the mesh hashes {got:?}, the thread run {want:?}");
    }
    let hosts = cluster.rank_hosts();
    let mut distinct = hosts.clone();
    distinct.dedup();
    if distinct.len() != 2 {
        bail!("the vcluster's ranks are on {hosts:?}, not on 2 hosts");
    }
    for (k, step) in steps_of(steps)?.iter().enumerate() {
        let ranks = step["ranks"].as_array().context("a step without ranks")?;
        let seen: Vec<&str> = ranks.iter().filter_map(|r| r["host"].as_str()).collect();
        if seen != hosts {
            bail!("step {k}: the ranks ran on {seen:?}, the hostfile says {hosts:?}");
        }
        let b = &step["balance"];
        if b["measured_s"].as_f64().unwrap_or(0.0) > 0.0 {
            for m in b["measured"]
                .as_array()
                .context("a step without measured")?
            {
                if m["net_bytes"].as_f64().is_none_or(|x| x <= 0.0) {
                    bail!(
                        "step {k}: rank {}'s node saw no traffic on its link: {m}",
                        m["rank"]
                    );
                }
                // Its veth (10 Gbit/s to the driver), capped at the shaped link's 100 Mbit/s;
                // the loopback is not counted.
                if m["capacity_mbps"].as_f64() != Some(100.0) {
                    bail!(
                        "step {k}: rank {}'s link capacity is not 100 Mbit/s: {m}",
                        m["rank"]
                    );
                }
            }
        }
    }
    let per_rank = summary["per_rank"].as_array().context("no per_rank")?;
    let flow = &per_rank[1]["end"]["net_load_bytes"];
    if per_rank.iter().map(|r| &r["host"]).ne(hosts.iter()) || flow.as_u64().is_none_or(|b| b == 0)
    {
        bail!(
            "the summary's per_rank names the hosts {per_rank:?}; expected {hosts:?} and node2's flow"
        );
    }
    println!(
        "xtask: run-laplace --vcluster on {MACHINE}: {} steps, mesh hashes = the thread run's, \
         ranks on {hosts:?}, link traffic in every window, the flow sent {:.2} MB",
        got.len(),
        flow.as_u64().unwrap_or(0) as f64 / 1e6
    );
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL to rank 1's process.
    KillRank,
    /// `ip netns del` of node2's namespace (its processes live on).
    RemoveNamespace,
}

/// Starts `o`'s run, injects `fault` once the run is at step 3, and checks that the job ends
/// with an error within [`FAULT_DEADLINE`].
fn fault(o: &Options, bins: &Bins, vc: &OnVcluster, out: &Path, fault: Fault) -> Result<()> {
    let cluster = &vc.cluster;
    let tag = format!("{fault:?}-");
    let steps = out.join(format!("{tag}steps.jsonl"));
    let _ = std::fs::remove_file(&steps);
    let node2 = cluster
        .state
        .nodes
        .get(1)
        .context("vcluster-2 has 2 nodes")?
        .netns
        .clone();
    let inode = system::netns_inode(&node2).context("node2's namespace")?;
    let ended = Arc::new(AtomicBool::new(false));
    let run_ended = ended.clone();
    let injector = std::thread::spawn(move || -> Result<Instant> {
        while steps_of(&steps).map_or(0, |s| s.len()) < 3 {
            if run_ended.load(Ordering::SeqCst) {
                bail!("the run ended before step 3");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        match fault {
            Fault::KillRank => {
                let rank = system::processes_in(&[inode])
                    .into_iter()
                    .find(|(_, c)| c.starts_with("fem-laplace"))
                    .context("no rank process in node2")?;
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(rank.0 as libc::pid_t, libc::SIGKILL) };
            }
            Fault::RemoveNamespace => system::sh_str(&["ip", "netns", "del", &node2])?,
        }
        Ok(Instant::now())
    });
    let ran = run_once(o, bins, "monitored", &tag, false, Some(vc));
    ended.store(true, Ordering::SeqCst);
    let injected = injector
        .join()
        .map_err(|_| anyhow::anyhow!("the injector panicked"))??;
    let took = injected.elapsed();
    let Err(e) = ran else {
        bail!("{fault:?}: the job ended successfully; it must fail");
    };
    if took > FAULT_DEADLINE {
        bail!("{fault:?}: the job took {took:?} to end (more than {FAULT_DEADLINE:?}): {e:#}");
    }
    let left = system::processes_in(&cluster.state.inodes());
    if !left.is_empty() {
        bail!("{fault:?}: processes left in the cluster: {left:?}");
    }
    println!("xtask: {fault:?} mid-run ended the job with an error in {took:.1?}: {e:#}");
    Ok(())
}

/// Nothing of the cluster is left: no namespace, no process inside, no state, no mount, no
/// interface of ours in the host's namespace.
fn nothing_left(inodes: &[u64]) -> Result<()> {
    let mut left = Vec::new();
    let ns = system::our_namespaces();
    if !ns.is_empty() {
        left.push(format!("namespaces {ns:?}"));
    }
    let procs = system::processes_in(inodes);
    if !procs.is_empty() {
        left.push(format!("processes {procs:?}"));
    }
    if Path::new(super::STATE_DIR).exists() {
        left.push(super::STATE_DIR.to_string());
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if mounts.contains(super::STATE_DIR) {
        left.push("UTS namespace mounts".into());
    }
    let links = system::output(&["ip", "-o", "link", "show"]).unwrap_or_default();
    if links
        .lines()
        .any(|l| l.contains("dvc") || l.contains("drumvc"))
    {
        left.push(format!("interfaces in the host's namespace: {links}"));
    }
    if !left.is_empty() {
        bail!("vcluster down left {}", left.join("; "));
    }
    Ok(())
}

/// A cluster left behind by a crash (a process inside, a namespace whose name was removed
/// while that process keeps it alive): `down` removes it all.
fn down_after_a_crash(drum: &Path) -> Result<()> {
    super::up(drum, MACHINE)?;
    let state = State::load()?.context("no state after up")?;
    let node1 = &state.nodes[0].netns;
    let mut stray = Command::new("ip")
        .args(["netns", "exec", node1, "sleep", "600"])
        .stdin(Stdio::null())
        .spawn()
        .context("starting a process in node1")?;
    let t0 = Instant::now();
    while system::processes_in(&state.inodes()).is_empty() && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    system::sh_str(&["ip", "netns", "del", node1])?;
    let said = super::down()?;
    let status = stray.wait()?;
    nothing_left(&state.inodes())?;
    if status.success() || !said.contains("killed 1 process") {
        bail!(
            "down after a crash: the process inside was not killed ({said}; it ended with {status})"
        );
    }
    println!("xtask: {said}");
    Ok(())
}
