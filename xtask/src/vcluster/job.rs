//! A job on the vcluster: the cluster brought up for it (and taken down after, if the job
//! made it), the flows' sink in the head namespace, and mpirun watched until it ends: a
//! signal, or a namespace of the cluster removed under it, kills everything inside the
//! namespaces and ends the job with an error; so does a process left inside after it.

use super::plan::HEAD_NS;
use super::{State, Up, system};
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The cluster a job runs on; takes it down when dropped if the job brought it up.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) state: State,
    owned: bool,
}

impl Cluster {
    /// The cluster of `machine`, brought up if it is not (then it is ours to take down).
    pub(crate) fn ensure(drum: &Path, machine: &str) -> Result<Cluster> {
        system::catch_signals();
        let owned = super::up(drum, machine)? == Up::Made;
        let state = State::load()?.context("the vcluster has no state file after up")?;
        if owned {
            eprintln!("xtask: vcluster of {machine} up for this run (taken down after it)");
        } else {
            eprintln!("xtask: running on the vcluster of {machine} that is up (left up)");
        }
        Ok(Cluster { state, owned })
    }

    /// The hosts of rank 0, 1, …
    pub(crate) fn rank_hosts(&self) -> Vec<String> {
        self.state
            .nodes
            .iter()
            .flat_map(|n| std::iter::repeat_n(n.host.clone(), n.ranks.1 - n.ranks.0))
            .collect()
    }

    /// Runs `mpirun ARGS` on the cluster (see the module documentation).
    pub(crate) fn mpirun(&self, args: &[String]) -> Result<()> {
        self.mpirun_to(args, Stdio::inherit())
    }

    /// [`Cluster::mpirun`] with the job's standard output (rank 0's) sent to `stdout`.
    pub(crate) fn mpirun_to(&self, args: &[String], stdout: Stdio) -> Result<()> {
        let mut cmd = Command::new(super::mpirun_path());
        cmd.args(args)
            .stdout(stdout)
            .current_dir(crate::project_root());
        eprintln!("xtask: [{:7.1} s] running {cmd:?}", crate::elapsed_s());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("could not start {cmd:?}"))?;
        let status = self.watch(&mut child)?;
        let left = self.leftovers();
        if !status.success() {
            bail!("mpirun on the vcluster failed with {status}{left}");
        }
        if !left.is_empty() {
            bail!("mpirun on the vcluster ended{left}");
        }
        Ok(())
    }

    /// Waits for `child`; on a signal or a namespace gone, kills every process inside the
    /// cluster and `child`, and fails saying why.
    fn watch(&self, child: &mut Child) -> Result<ExitStatus> {
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            let why = if system::interrupted() {
                Some("interrupted".to_string())
            } else {
                let gone = self.state.missing();
                (!gone.is_empty()).then(|| {
                    format!(
                        "namespace {} was removed under the running job",
                        gone.join(", ")
                    )
                })
            };
            if let Some(why) = why {
                let killed = system::kill_all_in(&self.state.inodes());
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{why}: killed the job ({} process{} inside the cluster{})",
                    killed.as_ref().map_or(0, Vec::len),
                    if killed.as_ref().map_or(0, Vec::len) == 1 {
                        ""
                    } else {
                        "es"
                    },
                    killed.err().map_or(String::new(), |e| format!("; {e:#}"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// After a job: processes still inside the cluster's namespaces 5 s after it ended are
    /// killed and named (empty string: none).
    fn leftovers(&self) -> String {
        let inodes = self.state.inodes();
        let t0 = Instant::now();
        while !system::processes_in(&inodes).is_empty() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        match system::kill_all_in(&inodes) {
            Ok(k) if k.is_empty() => String::new(),
            Ok(k) => format!("; processes it left inside the cluster were killed: {k:?}"),
            Err(e) => format!("; {e:#}"),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.owned {
            match super::down() {
                Ok(text) => eprintln!("xtask: {text}"),
                Err(e) => eprintln!("xtask: {e:#}"),
            }
        }
    }
}

/// A TCP sink in the head namespace (outside the compute nodes) for `--net-load` flows: it
/// reads and counts; it lives in a thread of xtask, so it cannot outlive the run.
#[derive(Debug)]
pub(crate) struct Sink {
    pub(crate) addr: SocketAddr,
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    conns: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Sink {
    /// Listens on the head's address, on a free port.
    pub(crate) fn start(state: &State) -> Result<Sink> {
        let ip: std::net::Ipv4Addr = state.head_ip.parse().context("the head's address")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicU64::new(0));
        let conns = Arc::new(AtomicU64::new(0));
        let (s, b, c) = (stop.clone(), bytes.clone(), conns.clone());
        let thread = std::thread::spawn(move || {
            let listener = system::enter_netns(HEAD_NS).and_then(|()| {
                let l = TcpListener::bind((ip, 0)).context("binding the sink")?;
                l.set_nonblocking(true)?;
                Ok(l)
            });
            let listener = match listener {
                Ok(l) => {
                    let _ = tx.send(l.local_addr().map_err(anyhow::Error::from));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            serve(&listener, &s, &b, &c);
        });
        let addr = rx.recv().context("the sink's thread ended")??;
        Ok(Sink {
            addr,
            stop,
            bytes,
            conns,
            thread: Some(thread),
        })
    }

    /// Stops it; (connections, bytes received).
    pub(crate) fn stop(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (
            self.conns.load(Ordering::SeqCst),
            self.bytes.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Accepts until `stop`, each connection read by a thread of its own until it closes or
/// `stop`.
fn serve(
    listener: &TcpListener,
    stop: &Arc<AtomicBool>,
    bytes: &Arc<AtomicU64>,
    conns: &AtomicU64,
) {
    let mut readers = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut conn, _)) => {
                conns.fetch_add(1, Ordering::SeqCst);
                let (stop, bytes) = (stop.clone(), bytes.clone());
                readers.push(std::thread::spawn(move || {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = vec![0u8; 64 * 1024];
                    while !stop.load(Ordering::SeqCst) {
                        match conn.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => {
                                bytes.fetch_add(n as u64, Ordering::SeqCst);
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock
                                        | std::io::ErrorKind::TimedOut
                                        | std::io::ErrorKind::Interrupted
                                ) => {}
                            Err(_) => break,
                        }
                    }
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    for r in readers {
        let _ = r.join();
    }
}
