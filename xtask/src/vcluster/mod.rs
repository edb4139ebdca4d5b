//! `cargo xtask vcluster up --machine FILE | status | down`: a real cluster on one host, the
//! way network research makes one (Mininet's approach, with iproute2 directly): a network
//! namespace per computing node of the machine file, with the node's name as its hostname,
//! links of veth pairs into bridges shaped with tbf from the file's `bandwidth` (both
//! directions), a head namespace for mpirun and the flows' sink, a hostfile and an rsh agent
//! that enters a node's namespaces. See `plan.rs` for the picture.
//!
//! Everything is named `drumvc…`, lives inside namespaces of its own (nothing in the host's
//! namespace) and is written down in a state file (`/run/drumvc/state.json`) before it is
//! made, so `down` removes it all, also after a crash: it kills the processes still inside
//! the namespaces (by namespace inode, so also in a namespace whose name was removed), unmounts
//! the UTS namespaces and deletes the network namespaces (their links, bridges and qdiscs go
//! with them), then sweeps any leftover `drumvc-*` namespace.
//!
//! No delay emulation: `tc … netem` is not in this kernel (`Specified qdisc kind is unknown`;
//! nor fq, fq_codel, sfq, cake, pie, nor tc's police action); tbf, htb, pfifo and ingress are.
//! Links have a rate, not a latency.

pub(crate) mod ci;
pub(crate) mod exp2;
pub(crate) mod job;
pub(crate) mod lan;
pub(crate) mod plan;
pub(crate) mod system;

use anyhow::{Context, Result, bail};
use plan::{HEAD_NS, MachineNode, NODE_IF, Plan, SWITCH_NS};
use std::path::{Path, PathBuf};
use std::process::Command;
use system::{netns_inode, sh, sh_str};

/// Where `vcluster` keeps its state, scripts and UTS namespaces.
pub(crate) const STATE_DIR: &str = "/run/drumvc";

fn state_file() -> PathBuf {
    Path::new(STATE_DIR).join("state.json")
}

fn uts_path(netns: &str) -> PathBuf {
    Path::new(STATE_DIR).join("uts").join(netns)
}

/// The rsh agent mpirun uses to start its daemons in a node.
pub(crate) fn agent_path() -> PathBuf {
    Path::new(STATE_DIR).join("rsh-agent")
}

/// `mpirun` on the cluster (from the head, with the hostfile and the agent).
pub(crate) fn mpirun_path() -> PathBuf {
    Path::new(STATE_DIR).join("mpirun")
}

fn hostfile_path() -> PathBuf {
    Path::new(STATE_DIR).join("hostfile")
}

/// A cluster that is up (or was being made), as its state file says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    /// The machine file, as given.
    pub(crate) machine: String,
    /// Its contents' fingerprint: a changed file is another cluster.
    pub(crate) fingerprint: String,
    /// Every step done.
    pub(crate) complete: bool,
    /// Network namespaces made (or about to be), with their inode once made.
    pub(crate) namespaces: Vec<(String, Option<u64>)>,
    /// UTS namespaces mounted (or about to be).
    pub(crate) uts: Vec<String>,
    /// Per computing node in rank order: (host, netns, address, rate, cpus, ranks).
    pub(crate) nodes: Vec<NodeState>,
    /// The head's address.
    pub(crate) head_ip: String,
}

/// A computing node in the state file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeState {
    pub(crate) host: String,
    pub(crate) netns: String,
    pub(crate) ip: String,
    pub(crate) rate_mbit: Option<f64>,
    pub(crate) cpus: Option<Vec<u32>>,
    pub(crate) ranks: (usize, usize),
}

impl State {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "machine": self.machine,
            "fingerprint": self.fingerprint,
            "complete": self.complete,
            "namespaces": self.namespaces.iter().map(|(n, i)| serde_json::json!({"name": n, "inode": i})).collect::<Vec<_>>(),
            "uts": self.uts,
            "nodes": self.nodes.iter().map(|n| serde_json::json!({
                "host": n.host, "netns": n.netns, "ip": n.ip, "rate_mbit": n.rate_mbit,
                "cpus": n.cpus, "ranks": [n.ranks.0, n.ranks.1],
            })).collect::<Vec<_>>(),
            "head_ip": self.head_ip,
        })
    }

    fn from_json(v: &serde_json::Value) -> Option<State> {
        let s = |x: &serde_json::Value| x.as_str().map(String::from);
        Some(State {
            machine: s(&v["machine"])?,
            fingerprint: s(&v["fingerprint"])?,
            complete: v["complete"].as_bool()?,
            namespaces: v["namespaces"]
                .as_array()?
                .iter()
                .map(|n| Some((s(&n["name"])?, n["inode"].as_u64())))
                .collect::<Option<_>>()?,
            uts: v["uts"].as_array()?.iter().map(s).collect::<Option<_>>()?,
            nodes: v["nodes"]
                .as_array()?
                .iter()
                .map(|n| {
                    let r = n["ranks"].as_array()?;
                    Some(NodeState {
                        host: s(&n["host"])?,
                        netns: s(&n["netns"])?,
                        ip: s(&n["ip"])?,
                        rate_mbit: n["rate_mbit"].as_f64(),
                        cpus: n["cpus"].as_array().map(|c| {
                            c.iter()
                                .filter_map(|x| x.as_u64().map(|x| x as u32))
                                .collect()
                        }),
                        ranks: (r.first()?.as_u64()? as usize, r.get(1)?.as_u64()? as usize),
                    })
                })
                .collect::<Option<_>>()?,
            head_ip: s(&v["head_ip"])?,
        })
    }

    /// Writes the state file (whole or absent: a temporary file renamed).
    fn save(&self) -> Result<()> {
        let tmp = state_file().with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(&self.to_json())? + "\n")
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, state_file())
            .with_context(|| format!("writing {}", state_file().display()))
    }

    /// The state file, if there is one (an unreadable one is an error naming it).
    pub(crate) fn load() -> Result<Option<State>> {
        let text = match std::fs::read_to_string(state_file()) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", state_file().display())),
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", state_file().display()))?;
        State::from_json(&v)
            .with_context(|| format!("{} is not a vcluster state", state_file().display()))
            .map(Some)
    }

    /// The inodes of its network namespaces (recorded, or read now).
    pub(crate) fn inodes(&self) -> Vec<u64> {
        self.namespaces
            .iter()
            .filter_map(|(n, i)| i.or_else(|| netns_inode(n)))
            .collect()
    }

    /// The namespaces of the state whose name is gone.
    pub(crate) fn missing(&self) -> Vec<String> {
        self.namespaces
            .iter()
            .filter(|(n, _)| netns_inode(n).is_none())
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// FNV-1a of the machine file's bytes, as hex.
fn fingerprint(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{h:016x}")
}

/// The machine's nodes, read by `drum check --json`.
pub(crate) fn read_machine(drum: &Path, machine: &str) -> Result<Vec<MachineNode>> {
    let out = Command::new(drum)
        .current_dir(crate::project_root())
        .args(["check", "--json", machine])
        .output()
        .context("running drum check --json")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    plan::parse_machine(&String::from_utf8_lossy(&out.stdout))
}

/// `cargo xtask vcluster ARGS`.
pub(crate) fn vcluster(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask vcluster up [--machine FILE] | status | down | check";
    match args.first().map(String::as_str) {
        Some("up") => {
            let machine = match &args[1..] {
                [] => "machines/vcluster-2.xml".to_string(),
                [flag, file] if flag == "--machine" => file.clone(),
                _ => bail!("{USAGE}"),
            };
            if let Some(why) = system::cannot_make_namespaces() {
                bail!("cannot make a vcluster here: {why}");
            }
            let drum =
                crate::release(&["--quiet", "-p", "drum-cli", "--bin", "drum"])?.join("drum");
            system::catch_signals();
            match up(&drum, &machine)? {
                Up::Made => {}
                Up::Already => println!("vcluster: already up for {machine}"),
            }
            status()
        }
        Some("status") if args.len() == 1 => status(),
        Some("check") if args.len() == 1 => ci::check_alone(),
        Some("down") if args.len() == 1 => {
            let gone = down()?;
            println!("{gone}");
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}

/// What [`up`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Up {
    Made,
    Already,
}

/// Brings the cluster of `machine` up, or finds it up already. A cluster of another machine
/// (or of this file before it changed) is an error; a half-made one (a crash) is taken down
/// first. A failure takes down what was made.
pub(crate) fn up(drum: &Path, machine: &str) -> Result<Up> {
    if let Some(why) = system::cannot_make_namespaces() {
        bail!("cannot make a vcluster here: {why}");
    }
    let path = crate::project_root().join(machine);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let print = fingerprint(&bytes);
    if let Some(s) = State::load()? {
        if s.complete && s.missing().is_empty() {
            if s.fingerprint == print {
                return Ok(Up::Already);
            }
            let what = if s.machine == machine {
                format!("an earlier version of {machine}")
            } else {
                s.machine.clone()
            };
            bail!("a vcluster of {what} is up; `cargo xtask vcluster down` first");
        }
        eprintln!(
            "vcluster: a half-made or damaged cluster of {} is there: taking it down",
            s.machine
        );
        down()?;
    }
    let plan = Plan::new(machine, &read_machine(drum, machine)?)?;
    let mut state = State {
        machine: machine.to_string(),
        fingerprint: print,
        complete: false,
        namespaces: Vec::new(),
        uts: Vec::new(),
        nodes: plan
            .nodes
            .iter()
            .map(|n| NodeState {
                host: n.host.clone(),
                netns: n.netns.clone(),
                ip: n.ip.to_string(),
                rate_mbit: n.rate_mbit,
                cpus: n.cpus.clone(),
                ranks: n.ranks,
            })
            .collect(),
        head_ip: plan.head_ip.to_string(),
    };
    std::fs::create_dir_all(Path::new(STATE_DIR).join("uts"))
        .with_context(|| format!("creating {STATE_DIR}"))?;
    match make(&plan, &mut state) {
        Ok(()) => Ok(Up::Made),
        Err(e) => {
            let cleanup = down();
            Err(match cleanup {
                Ok(_) => e.context(format!(
                    "vcluster up {machine} failed; removed what it made"
                )),
                Err(c) => e.context(format!(
                    "vcluster up {machine} failed, and so did the cleanup: {c:#}"
                )),
            })
        }
    }
}

/// Makes everything of `plan`, recording each object in `state` before making it.
fn make(plan: &Plan, state: &mut State) -> Result<()> {
    let check = || -> Result<()> {
        if system::interrupted() {
            bail!("interrupted");
        }
        Ok(())
    };
    for ns in plan.namespaces() {
        check()?;
        state.namespaces.push((ns.clone(), None));
        state.save()?;
        sh_str(&["ip", "netns", "add", &ns])?;
        state.namespaces.last_mut().expect("just pushed").1 = netns_inode(&ns);
    }
    state.save()?;
    for cmd in plan.commands() {
        check()?;
        sh(&cmd)?;
    }
    for (ns, host) in plan.hosts() {
        check()?;
        let file = uts_path(&ns);
        let name = file.display().to_string();
        state.uts.push(name.clone());
        state.save()?;
        std::fs::write(&file, "").with_context(|| format!("creating {name}"))?;
        sh_str(&["unshare", &format!("--uts={name}"), "hostname", &host])?;
    }
    write_scripts(plan)?;
    state.complete = true;
    state.save()
}

/// The hostfile, the rsh agent and the mpirun wrapper.
fn write_scripts(plan: &Plan) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let write = |p: PathBuf, text: String, exec: bool| -> Result<()> {
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        if exec {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(())
    };
    write(hostfile_path(), plan.hostfile(), false)?;
    let cases: String = plan
        .nodes
        .iter()
        .map(|n| format!("  {}|{}) ns={} ;;\n", n.host, n.ip, n.netns))
        .collect();
    let uts = uts_path("");
    let uts = uts.display();
    write(
        agent_path(),
        format!(
            "#!/bin/sh\n\
             # Made by `cargo xtask vcluster up` (drum-rs): mpirun's rsh agent. `rsh-agent HOST\n\
             # COMMAND...` runs COMMAND in the network and UTS namespaces of node HOST.\n\
             host=\"$1\"; shift\n\
             case \"$host\" in\n{cases}  *) echo \"drumvc rsh-agent: no node $host in this vcluster\" >&2; exit 255 ;;\n\
             esac\n\
             exec ip netns exec \"$ns\" nsenter --uts=\"{uts}$ns\" -- /bin/sh -c \"$*\"\n"
        ),
        true,
    )?;
    write(
        mpirun_path(),
        format!(
            "#!/bin/sh\n\
             # Made by `cargo xtask vcluster up` (drum-rs): mpirun on the vcluster, started in the\n\
             # head namespace, with its hostfile and rsh agent (TCP over the nodes' {NODE_IF}).\n\
             # The nodes share this host's cores: no binding by mpirun (each node's orted would\n\
             # start at core 0), the ranks pin themselves to their node's cpus; and a waiting rank\n\
             # yields its core (busy polling starves the ranks and loads sharing it: 7 times\n\
             # slower on vcluster-sites.xml, 4 ranks on 2 cores).\n\
             exec ip netns exec {HEAD_NS} nsenter --uts=\"{uts}{HEAD_NS}\" -- mpirun --allow-run-as-root \\\n  \
             --bind-to none --mca mpi_yield_when_idle 1 --hostfile {} --mca plm_rsh_agent {} \\\n  \
             --mca btl_tcp_if_include {NODE_IF} --mca oob_tcp_if_include {NODE_IF} \"$@\"\n",
            hostfile_path().display(),
            agent_path().display()
        ),
        true,
    )
}

/// Takes everything down (see the module documentation); says what it removed.
pub(crate) fn down() -> Result<String> {
    let state = State::load().unwrap_or_else(|e| {
        eprintln!("vcluster down: {e:#}; sweeping drumvc-* namespaces");
        None
    });
    let mut names: Vec<String> = state
        .iter()
        .flat_map(|s| s.namespaces.iter().map(|(n, _)| n.clone()))
        .collect();
    for n in system::our_namespaces() {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut inodes: Vec<u64> = state.iter().flat_map(State::inodes).collect();
    inodes.extend(names.iter().filter_map(|n| netns_inode(n)));
    inodes.sort_unstable();
    inodes.dedup();
    let killed = system::kill_all_in(&inodes)?;
    let mut uts: Vec<String> = state.iter().flat_map(|s| s.uts.clone()).collect();
    for e in std::fs::read_dir(uts_path(""))
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path().display().to_string();
        if !uts.contains(&p) {
            uts.push(p);
        }
    }
    let mut problems = Vec::new();
    for u in &uts {
        // Not mounted (never made, or already gone): nothing to unmount.
        let _ = sh_str(&["umount", u]);
        if let Err(e) = std::fs::remove_file(u)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            problems.push(format!("removing {u}: {e}"));
        }
    }
    let mut removed = Vec::new();
    for n in &names {
        if system::netns_path(n).exists() {
            match sh_str(&["ip", "netns", "del", n]) {
                Ok(()) => removed.push(n.clone()),
                Err(e) => problems.push(format!("{e:#}")),
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(STATE_DIR)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        problems.push(format!("removing {STATE_DIR}: {e}"));
    }
    let left = system::our_namespaces();
    if !left.is_empty() {
        problems.push(format!("namespaces still there: {left:?}"));
    }
    if !problems.is_empty() {
        bail!("vcluster down: {}", problems.join("; "));
    }
    if removed.is_empty() && killed.is_empty() {
        return Ok("vcluster down: nothing was up".into());
    }
    Ok(format!(
        "vcluster down: removed {} namespace{} ({}){}",
        removed.len(),
        if removed.len() == 1 { "" } else { "s" },
        removed.join(", "),
        if killed.is_empty() {
            String::new()
        } else {
            format!(
                "; killed {} process{} still inside ({})",
                killed.len(),
                if killed.len() == 1 { "" } else { "es" },
                killed
                    .iter()
                    .map(|(p, c)| format!("{c} {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    ))
}

/// `vcluster status`: the cluster's nodes, links and the processes inside.
fn status() -> Result<()> {
    let Some(s) = State::load()? else {
        println!("vcluster: down (no {})", state_file().display());
        let stray = system::our_namespaces();
        if !stray.is_empty() {
            println!("stray namespaces (`cargo xtask vcluster down` removes them): {stray:?}");
        }
        return Ok(());
    };
    println!(
        "vcluster of {}{}: head {} ({HEAD_NS}), switch {SWITCH_NS}",
        s.machine,
        if s.complete {
            ""
        } else {
            " (HALF-MADE: `cargo xtask vcluster down`)"
        },
        s.head_ip
    );
    println!(
        "{:<16} {:<20} {:<12} {:>10} {:>6} {:>6}  qdisc on {NODE_IF}",
        "host", "namespace", "address", "link", "cpus", "ranks"
    );
    for n in &s.nodes {
        let qdisc = system::output(&["tc", "-n", &n.netns, "qdisc", "show", "dev", NODE_IF])
            .map_or("(namespace missing)".into(), |q| {
                q.lines().next().unwrap_or("").trim().to_string()
            });
        println!(
            "{:<16} {:<20} {:<12} {:>10} {:>6} {:>6}  {qdisc}",
            n.host,
            n.netns,
            n.ip,
            n.rate_mbit
                .map_or("unshaped".into(), |r| format!("{r} Mbit/s")),
            n.cpus.as_ref().map_or("-".into(), |c| c
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")),
            format!("{}..{}", n.ranks.0, n.ranks.1)
        );
    }
    let missing = s.missing();
    if !missing.is_empty() {
        println!("MISSING namespaces: {missing:?}");
    }
    let procs = system::processes_in(&s.inodes());
    println!(
        "processes inside: {}",
        if procs.is_empty() {
            "none".to_string()
        } else {
            format!("{procs:?}")
        }
    );
    println!(
        "mpirun on it: {} -np N PROGRAM (hostfile {}, rsh agent {})",
        mpirun_path().display(),
        hostfile_path().display(),
        agent_path().display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_through_json() {
        let s = State {
            machine: "machines/vcluster-2.xml".into(),
            fingerprint: fingerprint(b"<machinemodel/>"),
            complete: true,
            namespaces: vec![
                ("drumvc--sw".into(), Some(4_026_532_318)),
                ("drumvc-node1".into(), None),
            ],
            uts: vec!["/run/drumvc/uts/drumvc-node1".into()],
            nodes: vec![NodeState {
                host: "node1".into(),
                netns: "drumvc-node1".into(),
                ip: "10.213.0.2".into(),
                rate_mbit: Some(100.0),
                cpus: Some(vec![0]),
                ranks: (0, 1),
            }],
            head_ip: "10.213.0.1".into(),
        };
        assert_eq!(State::from_json(&s.to_json()), Some(s.clone()));
        let mut v = s.to_json();
        v["nodes"][0]["ranks"] = serde_json::json!([0]);
        assert_eq!(State::from_json(&v), None);
        assert_ne!(fingerprint(b"a"), fingerprint(b"b"));
    }
}
