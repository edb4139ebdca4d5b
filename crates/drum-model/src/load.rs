//! Synthetic competing load (Sinha & Parashar §6.1.1: "synthetic load" processes on some
//! nodes): compute-bound processes pinned to a node's CPUs, so that one host shows real,
//! measurable heterogeneity.
//!
//! A [`Load`] forks its processes and owns them: [`Load::stop`] (or dropping the `Load`)
//! kills and reaps them, and each process asks the kernel for `SIGKILL` when the thread that
//! started it ends (`PR_SET_PDEATHSIG`), so none outlives its run, whether the run ends
//! normally, with an error, a panic, Ctrl-C or `SIGKILL`.
//!
//! ```no_run
//! use drum_model::load::Load;
//! let load = Load::start(&[1], 1)?; // one busy process on CPU 1
//! // ... the run ...
//! let report = load.stop()?;
//! println!("the load used {:.2} CPU seconds", report.cpu_seconds);
//! # Ok::<(), drum_model::Error>(())
//! ```
//!
//! Its network twin, [`Load::flow`], is one process that sends a TCP stream to a sink as fast
//! as the link allows (or at a given rate): the competing traffic that lowers the available
//! bandwidth DRUM measures on a node's link (DRUM 2005 §3.3.2). It is owned and stopped the
//! same way.
//!
//! A load process never ends by itself: one that does (a `kill -9` from outside, the OOM
//! killer) is a fault of the run. A [`Watch`] looks at its loads' processes every
//! [`WATCH_PERIOD`] from a thread of its own and reports each such end at once, with the step
//! the run is in ([`Death`]); [`StepLoads`] keeps one.

use crate::error::{Error, Result};
use std::fmt;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most competing processes on one rank (`--load RANK:N` and `load=` together, whatever
/// their steps): 64, well under what one node survives.
pub const MAX_LOAD_PER_RANK: usize = 64;
/// Most competing processes of a run, over all its ranks: 256.
pub const MAX_LOAD_TOTAL: usize = 256;

/// `--load RANK[:N][@STEP[-END]]`: N competing processes (default 1) on the CPUs of rank
/// RANK's node, from the start of step STEP (default 0: from the start) to the start of step
/// END (default: the end of the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSpec {
    /// The rank whose node's CPUs get the load.
    pub rank: usize,
    /// Number of processes.
    pub procs: usize,
    /// The step at whose start the load begins.
    pub from_step: usize,
    /// The step at whose start it stops (`None`: it runs to the end).
    pub until_step: Option<usize>,
}

impl LoadSpec {
    /// Whether the load runs during step `k`.
    pub fn active_at(&self, k: usize) -> bool {
        active(self.from_step, self.until_step, k)
    }
}

impl FromStr for LoadSpec {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<LoadSpec, String> {
        let bad = |why: &str| {
            format!("load `{text}`: {why} (expected RANK[:N][@STEP[-END]], e.g. 1:1@12)")
        };
        let (rank, procs, steps) = split_spec(text);
        let (from_step, until_step) = parse_steps(steps, &bad)?;
        let spec = LoadSpec {
            rank: whole(rank, "RANK", &bad)?,
            procs: procs.map(|n| whole(n, "N", &bad)).transpose()?.unwrap_or(1),
            from_step,
            until_step,
        };
        if spec.procs == 0 {
            return Err(bad("N must be at least 1"));
        }
        if spec.procs > MAX_LOAD_PER_RANK {
            return Err(bad(&format!(
                "N = {} is over the limit of {MAX_LOAD_PER_RANK} processes per rank",
                spec.procs
            )));
        }
        Ok(spec)
    }
}

fn active(from: usize, until: Option<usize>, k: usize) -> bool {
    k >= from && until.is_none_or(|u| k < u)
}

/// `WHO[:AMOUNT][@STEPS]` into its three parts.
fn split_spec(text: &str) -> (&str, Option<&str>, Option<&str>) {
    let (head, steps) = match text.split_once('@') {
        Some((h, s)) => (h, Some(s)),
        None => (text, None),
    };
    match head.split_once(':') {
        Some((who, amount)) => (who, Some(amount), steps),
        None => (head, None, steps),
    }
}

fn whole(s: &str, what: &str, bad: &dyn Fn(&str) -> String) -> std::result::Result<usize, String> {
    s.trim()
        .parse::<usize>()
        .map_err(|_| bad(&format!("{what} `{s}` is not a whole number")))
}

/// `STEP[-END]` after the `@` of a load spec (absent: from step 0 to the end).
fn parse_steps(
    steps: Option<&str>,
    bad: &dyn Fn(&str) -> String,
) -> std::result::Result<(usize, Option<usize>), String> {
    let Some(steps) = steps else {
        return Ok((0, None));
    };
    let (from, until) = steps
        .split_once('-')
        .map_or((steps, None), |(a, b)| (a, Some(b)));
    let from = whole(from, "STEP", bad)?;
    let until = until.map(|u| whole(u, "END", bad)).transpose()?;
    if until.is_some_and(|u| u <= from) {
        return Err(bad("END must come after STEP"));
    }
    Ok((from, until))
}

fn write_steps(f: &mut fmt::Formatter<'_>, from: usize, until: Option<usize>) -> fmt::Result {
    write!(f, "@{from}")?;
    match until {
        Some(u) => write!(f, "-{u}"),
        None => Ok(()),
    }
}

/// `--net-load NODE[:MBIT][@STEP[-END]]`: a competing TCP flow from the machine node named
/// NODE to a sink outside the compute nodes, at MBIT Mbit/s (default: as fast as the link
/// allows), from the start of step STEP (default 0) to the start of step END (default: the
/// end of the run). The network twin of [`LoadSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct NetLoadSpec {
    /// The node's `name` in the machine file.
    pub node: String,
    /// The flow's rate in Mbit/s (`None`: unpaced).
    pub mbit: Option<f64>,
    /// The step at whose start the flow begins.
    pub from_step: usize,
    /// The step at whose start it stops (`None`: it runs to the end).
    pub until_step: Option<usize>,
}

impl NetLoadSpec {
    /// Whether the flow runs during step `k`.
    pub fn active_at(&self, k: usize) -> bool {
        active(self.from_step, self.until_step, k)
    }
}

impl FromStr for NetLoadSpec {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<NetLoadSpec, String> {
        let bad = |why: &str| {
            format!("net load `{text}`: {why} (expected NODE[:MBIT][@STEP[-END]], e.g. node2:50@3)")
        };
        let (node, mbit, steps) = split_spec(text);
        if node.trim().is_empty() {
            return Err(bad("NODE is empty"));
        }
        let mbit = match mbit {
            Some(m) => match m.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Some(x),
                _ => return Err(bad(&format!("MBIT `{m}` is not a rate > 0"))),
            },
            None => None,
        };
        let (from_step, until_step) = parse_steps(steps, &bad)?;
        Ok(NetLoadSpec {
            node: node.trim().to_string(),
            mbit,
            from_step,
            until_step,
        })
    }
}

impl fmt::Display for NetLoadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.node)?;
        if let Some(m) = self.mbit {
            write!(f, ":{m}")?;
        }
        write_steps(f, self.from_step, self.until_step)
    }
}

impl fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.rank, self.procs)?;
        write_steps(f, self.from_step, self.until_step)
    }
}

/// What a load did, measured when it stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadReport {
    /// Number of processes.
    pub procs: usize,
    /// Wall time from start to stop, seconds.
    pub seconds: f64,
    /// CPU time the processes used, seconds (from the kernel's accounting at reaping).
    pub cpu_seconds: f64,
    /// For a flow: the bytes the sink had acknowledged when it stopped (the kernel's
    /// `tcpi_bytes_acked`).
    pub bytes_sent: Option<u64>,
}

/// A load process that ended on its own (killed from outside, crashed) before it was
/// stopped: found by [`Load::exited`].
#[derive(Debug, Clone, PartialEq)]
pub struct Exited {
    /// Its process ID.
    pub pid: i32,
    /// How it ended: `killed by signal 9`, `exited with status 1`.
    pub how: String,
    /// The CPU seconds it used.
    pub cpu_seconds: f64,
    /// Whether a [`Watch`] already reported it (at once, with its step): its owner then only
    /// counts it.
    pub reported: bool,
}

/// `killed by signal N` or `exited with status N`, from a `wait` status.
fn how_it_ended(status: libc::c_int) -> String {
    if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else {
        format!("ended with wait status {status:#x}")
    }
}

/// A load's processes, shared by the [`Load`] that owns them and the [`Watch`] that looks at
/// them: whoever reaps one takes it out of `pids` under the lock, so no process is signalled
/// or waited for once reaped (its pid may then be another process's).
#[derive(Debug, Default)]
struct Procs {
    pids: Vec<libc::pid_t>,
    /// Reaped by a [`Watch`], not yet handed out by [`Load::exited`].
    found: Vec<Exited>,
}

/// The lock of `m`, whether or not a thread panicked holding it (the data stay consistent:
/// every change under these locks is a single push or take).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reaps, without waiting, the processes of `pids` that ended, and takes them out.
fn reap(pids: &mut Vec<libc::pid_t>) -> Vec<Exited> {
    let mut out = Vec::new();
    pids.retain(|&pid| {
        // SAFETY: rusage is plain data; all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let mut status = 0;
        // SAFETY: valid pointers to a status and an rusage; pid is our unreaped child;
        // WNOHANG makes this return at once.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if rc != pid {
            return true;
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
        out.push(Exited {
            pid,
            how: how_it_ended(status),
            cpu_seconds: t(ru.ru_utime) + t(ru.ru_stime),
            reported: false,
        });
        false
    });
    out
}

/// Running competing processes (see the module documentation).
#[derive(Debug)]
pub struct Load {
    procs: Arc<Mutex<Procs>>,
    cpus: Vec<u32>,
    started: Instant,
    /// A flow's connection (the parent's copy, read for the bytes sent).
    flow: Option<TcpStream>,
}

/// What a helper process does once started.
#[derive(Debug, Clone, Copy)]
enum Job {
    /// Computes forever.
    Spin,
    /// Writes zeros to `fd` forever, paced to `bytes_per_s` (0: unpaced).
    Flow { fd: libc::c_int, bytes_per_s: f64 },
}

/// What a flow writes: zeros, never touched (so the child needs no allocation).
static FLOW_BUFFER: [u8; 64 * 1024] = [0; 64 * 1024];

/// How long a flow may take to connect to its sink.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(Error::Load(format!(
            "cannot read this process's CPU affinity: {}",
            std::io::Error::last_os_error()
        )));
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    // SAFETY: every index is below CPU_SETSIZE, the size of `set`.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect())
}

/// The CPU set of `cpus`, each checked to be one this thread may use.
fn cpu_set(cpus: &[u32]) -> Result<libc::cpu_set_t> {
    let allowed = allowed_cpus()?;
    if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
        return Err(Error::Load(format!(
            "CPU {c} is not one this process may use (allowed: {allowed:?})"
        )));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c is an allowed CPU, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    Ok(set)
}

/// Forks one helper process doing `job` on `set` (`None`: the caller's CPUs) and waits until
/// it has armed its parent-death signal. Returns its pid; `load` takes it (so that dropping
/// `load` reaps it) even when the child failed to start.
fn fork_helper(load: &mut Load, set: Option<&libc::cpu_set_t>, job: Job) -> Result<()> {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // The child reports on this pipe once its parent-death signal is armed, so the thread
    // that forked it (whose end fires the signal) is alive when it is.
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::Load(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: the child branch below calls only async-signal-safe functions and never
    // returns, so the fork of a multi-threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: async-signal-safe calls only; `set` and `job` were built before fork.
        unsafe { helper(parent, set, fds, job) }
    }
    let fork_err = std::io::Error::last_os_error();
    let mut byte = 0u8;
    // SAFETY: closing our copy of the write end, then a one-byte read into `byte`.
    let got = unsafe {
        libc::close(fds[1]);
        let mut n;
        loop {
            n = libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
            if !(n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted)
            {
                break;
            }
        }
        libc::close(fds[0]);
        n
    };
    if pid < 0 {
        return Err(Error::Load(format!(
            "cannot fork a load process: {fork_err}"
        )));
    }
    lock(&load.procs).pids.push(pid);
    if got != 1 {
        return Err(Error::Load(format!(
            "load process {pid} did not start (it could not arm its parent-death signal or \
             pin itself)"
        )));
    }
    Ok(())
}

impl Load {
    fn empty(cpus: &[u32]) -> Load {
        Load {
            procs: Arc::default(),
            cpus: cpus.to_vec(),
            started: Instant::now(),
            flow: None,
        }
    }

    /// Starts `procs` compute-bound processes pinned to `cpus` (all of them may run on any
    /// CPU of the list). Errors: no CPU, a CPU this process may not use, `fork` failing (the
    /// processes already started are stopped).
    pub fn start(cpus: &[u32], procs: usize) -> Result<Load> {
        if cpus.is_empty() {
            return Err(Error::Load("no CPU to put the load on".into()));
        }
        if procs > MAX_LOAD_PER_RANK {
            return Err(Error::Load(format!(
                "{procs} processes are over the limit of {MAX_LOAD_PER_RANK} per rank"
            )));
        }
        let set = cpu_set(cpus)?;
        let mut load = Load::empty(cpus);
        for _ in 0..procs {
            // On an error, dropping `load` stops the processes already started.
            fork_helper(&mut load, Some(&set), Job::Spin)?;
        }
        Ok(load)
    }

    /// Starts one process that sends a TCP stream to `sink` at `mbit` Mbit/s (`None`: as fast
    /// as the link allows), pinned to `cpus` (empty: the caller's CPUs). The connection is
    /// made here, so an unreachable sink is this call's error. The process ends when the sink
    /// closes the connection, when [`Load::stop`] is called or the `Load` dropped, and when
    /// the thread that started it ends.
    pub fn flow(cpus: &[u32], sink: SocketAddr, mbit: Option<f64>) -> Result<Load> {
        let bytes_per_s = match mbit {
            Some(m) if m.is_finite() && m > 0.0 => m * 1e6 / 8.0,
            Some(m) => return Err(Error::Load(format!("flow rate {m} Mbit/s is not > 0"))),
            None => 0.0,
        };
        let set = if cpus.is_empty() {
            None
        } else {
            Some(cpu_set(cpus)?)
        };
        let stream = TcpStream::connect_timeout(&sink, CONNECT_TIMEOUT)
            .map_err(|e| Error::Load(format!("cannot connect to the flow's sink {sink}: {e}")))?;
        let mut load = Load::empty(cpus);
        let job = Job::Flow {
            fd: stream.as_raw_fd(),
            bytes_per_s,
        };
        load.flow = Some(stream);
        fork_helper(&mut load, set.as_ref(), job)?;
        Ok(load)
    }

    /// The processes' IDs (those still owned: not the ones that ended on their own).
    pub fn pids(&self) -> Vec<i32> {
        lock(&self.procs).pids.clone()
    }

    /// The processes that ended on their own since the last call (a `kill -9` from outside,
    /// the OOM killer, a crash): those a [`Watch`] found (and reported) and those that ended
    /// since, reaped without waiting; the others go on. A load's process never ends by
    /// itself, so each one here is a fault to report: the run then has fewer competing
    /// processes than it asked for, and its figures ([`LoadReport::procs`] at [`Load::stop`])
    /// count only the ones still running.
    pub fn exited(&mut self) -> Vec<Exited> {
        let mut procs = lock(&self.procs);
        let mut out = std::mem::take(&mut procs.found);
        out.extend(reap(&mut procs.pids));
        out
    }

    /// The CPUs they are pinned to (empty: a flow on the caller's CPUs).
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Kills and reaps the processes; reports their CPU time (and a flow's bytes).
    pub fn stop(mut self) -> Result<LoadReport> {
        self.kill_all()
    }

    fn kill_all(&mut self) -> Result<LoadReport> {
        let mut cpu = 0.0;
        let mut first_err = None;
        // Taken under the lock: a watch reaps none of them from here on.
        let pids = std::mem::take(&mut lock(&self.procs).pids);
        let procs = pids.len();
        for pid in pids {
            // SAFETY: pid is a child of this process that has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: rusage is plain data; all-zero is valid.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let mut status = 0;
            loop {
                // SAFETY: valid pointers to a status and an rusage; pid is our child.
                let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
                if rc == pid {
                    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
                    cpu += t(ru.ru_utime) + t(ru.ru_stime);
                    break;
                }
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                first_err.get_or_insert_with(|| {
                    Error::Load(format!("cannot reap load process {pid}: {e}"))
                });
                break;
            }
        }
        let bytes_sent = self.flow.take().map(|s| bytes_acked(&s));
        match first_err {
            Some(e) => Err(e),
            None => Ok(LoadReport {
                procs,
                seconds: self.started.elapsed().as_secs_f64(),
                cpu_seconds: cpu,
                bytes_sent,
            }),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let running = !lock(&self.procs).pids.is_empty();
        if running {
            let _ = self.kill_all();
        }
    }
}

/// How often a [`Watch`] looks at its loads' processes.
pub const WATCH_PERIOD: Duration = Duration::from_millis(50);

/// A load process that ended on its own, as a [`Watch`] found it.
#[derive(Debug, Clone, PartialEq)]
pub struct Death {
    /// The load, as its owner named it when it gave it to the watch (`--load 1:2@0 on rank 1`).
    pub label: String,
    /// The step the run was in ([`Watch::set_step`]).
    pub step: usize,
    /// The process and how it ended.
    pub exited: Exited,
}

impl fmt::Display for Death {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "load: process {} of {} died during step {} ({}); the run goes on with one competing \
             process fewer",
            self.exited.pid, self.label, self.step, self.exited.how
        )
    }
}

/// What a [`Watch`] does with each death it finds.
type Report = Box<dyn Fn(&Death) + Send + Sync>;

/// What a watch and its thread share.
struct Shared {
    state: Mutex<WatchState>,
    wake: Condvar,
    report: Report,
}

struct WatchState {
    step: usize,
    /// Each load's label and processes (gone once the load is stopped or dropped).
    loads: Vec<(String, Weak<Mutex<Procs>>)>,
    stop: bool,
}

impl Shared {
    /// Reaps and reports the watched processes that ended; each one is then handed to its
    /// owner by [`Load::exited`], marked reported.
    fn sweep(&self, state: &mut WatchState) {
        state.loads.retain(|(_, p)| p.strong_count() > 0);
        for (label, procs) in &state.loads {
            let Some(procs) = procs.upgrade() else {
                continue;
            };
            let mut procs = lock(&procs);
            for mut exited in reap(&mut procs.pids) {
                exited.reported = true;
                (self.report)(&Death {
                    label: label.clone(),
                    step: state.step,
                    exited: exited.clone(),
                });
                procs.found.push(exited);
            }
        }
    }
}

/// Reports at once each watched load process that ends on its own: a thread that reaps them
/// every [`WATCH_PERIOD`] (started with the first load given to it, none before), stopped
/// and joined by [`Watch::stop`] or when the watch is dropped. The loads stay their owner's:
/// stopping one takes its processes away from the watch first, so the watch never reports
/// a stop of the run's own.
pub struct Watch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// A watch that gives each death to `report` (called on the watch's thread, or the
    /// caller's for [`Watch::sweep`] and [`Watch::stop`]; it must not call the watch).
    pub fn new(report: impl Fn(&Death) + Send + Sync + 'static) -> Watch {
        Watch {
            shared: Arc::new(Shared {
                state: Mutex::new(WatchState {
                    step: 0,
                    loads: Vec::new(),
                    stop: false,
                }),
                wake: Condvar::new(),
                report: Box::new(report),
            }),
            thread: None,
        }
    }

    /// A watch that prints each death on stderr (its [`Death`] line).
    pub fn to_stderr() -> Watch {
        Watch::new(|d| eprintln!("{d}"))
    }

    /// Watches `load`'s processes, reported as `label` (say, the spec and the rank); starts
    /// the thread if it does not run. Errors: the thread cannot be started.
    pub fn add(&mut self, load: &Load, label: impl Into<String>) -> Result<()> {
        {
            let mut state = lock(&self.shared.state);
            state
                .loads
                .push((label.into(), Arc::downgrade(&load.procs)));
            state.stop = false;
        }
        if self.thread.is_none() {
            let shared = Arc::clone(&self.shared);
            let thread = std::thread::Builder::new()
                .name("load-watch".into())
                .spawn(move || watch_loop(&shared))
                .map_err(|e| {
                    Error::Load(format!(
                        "cannot start the thread that watches the load processes: {e}"
                    ))
                })?;
            self.thread = Some(thread);
        }
        Ok(())
    }

    /// The step the run is now in: what the deaths found from here on report.
    pub fn set_step(&self, step: usize) {
        lock(&self.shared.state).step = step;
    }

    /// Looks at once (on the caller's thread), as the watch's thread does every period.
    pub fn sweep(&self) {
        let mut state = lock(&self.shared.state);
        self.shared.sweep(&mut state);
    }

    /// Looks a last time, then stops and joins the thread.
    pub fn stop(&mut self) {
        self.sweep();
        if let Some(thread) = self.thread.take() {
            lock(&self.shared.state).stop = true;
            self.shared.wake.notify_all();
            // The thread only sweeps and waits; a panic in `report` ended it already.
            let _ = thread.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The watch's thread: a sweep every period until told to stop.
fn watch_loop(shared: &Shared) {
    let mut state = lock(&shared.state);
    while !state.stop {
        shared.sweep(&mut state);
        state = shared
            .wake
            .wait_timeout(state, WATCH_PERIOD)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// The bytes of `stream` its peer acknowledged (`TCP_INFO`; 0 if the kernel does not say).
fn bytes_acked(stream: &TcpStream) -> u64 {
    // SAFETY: tcp_info is plain data; all-zero is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` has `len` bytes; the descriptor is the stream's, open.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc == 0 { info.tcpi_bytes_acked } else { 0 }
}

/// The loads a machine file describes: on each computing node with a `load` attribute, that
/// many processes on the node's first rank, for the whole run.
pub fn machine_loads(machine: &crate::Machine) -> Vec<LoadSpec> {
    machine
        .computing_nodes()
        .filter_map(|n| {
            Some(LoadSpec {
                rank: n.rank_range().start,
                procs: n.load? as usize,
                from_step: 0,
                until_step: None,
            })
        })
        .collect()
}

/// Refuses loads over the limits, before anything is forked: at most [`MAX_LOAD_PER_RANK`]
/// processes on one rank (its specs summed whatever their steps) and [`MAX_LOAD_TOTAL`] in
/// all.
pub fn check_load_limits(specs: &[LoadSpec]) -> Result<()> {
    let mut per_rank = std::collections::BTreeMap::<usize, usize>::new();
    let mut total = 0usize;
    for s in specs {
        let on_rank = per_rank.entry(s.rank).or_default();
        *on_rank = on_rank.saturating_add(s.procs);
        total = total.saturating_add(s.procs);
        if *on_rank > MAX_LOAD_PER_RANK {
            return Err(Error::Load(format!(
                "{on_rank} competing processes on rank {} are over the limit of \
                 {MAX_LOAD_PER_RANK} per rank",
                s.rank
            )));
        }
        if total > MAX_LOAD_TOTAL {
            return Err(Error::Load(format!(
                "{total} competing processes are over the limit of {MAX_LOAD_TOTAL} per run"
            )));
        }
    }
    Ok(())
}

/// Checks that each load names a rank of `machine` whose node lists its `cpus` (where the
/// processes are pinned), and the limits ([`check_load_limits`]).
pub fn check_loads(machine: &crate::Machine, specs: &[LoadSpec]) -> Result<()> {
    check_load_limits(specs)?;
    for s in specs {
        if s.rank >= machine.num_ranks() {
            return Err(Error::Load(format!(
                "load {s}: {} has ranks 0..{}",
                machine.source(),
                machine.num_ranks()
            )));
        }
        let node = machine.node(machine.rank_node(s.rank));
        if node.cpus.is_none() {
            return Err(Error::Load(format!(
                "load {s}: {} has no `cpus`, so the load cannot be pinned to it",
                node.label()
            )));
        }
    }
    Ok(())
}

/// What [`StepLoads::at_step`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadEvent {
    /// A spec's processes started.
    Started {
        /// The spec.
        spec: LoadSpec,
        /// Their process IDs.
        pids: Vec<i32>,
        /// The CPUs they are pinned to.
        cpus: Vec<u32>,
    },
    /// A spec's processes stopped at their end step.
    Stopped {
        /// The spec.
        spec: LoadSpec,
        /// What they did.
        report: LoadReport,
    },
    /// One of a spec's processes ended on its own before its end step ([`Load::exited`]).
    Died {
        /// The spec.
        spec: LoadSpec,
        /// The process and how it ended.
        exited: Exited,
    },
}

/// One rank's competing loads over a run of steps: each spec's processes start at the start
/// of its step and stop at the start of its end step, at [`StepLoads::stop`], or when this is
/// dropped. Create it on the thread that lives as long as the run (the processes die with
/// the thread that started them). A [`Watch`] reports on stderr, at once, each process that
/// ends on its own (`load: process 4242 of --load 1:2@0 on rank 1 died during step 3 (killed
/// by signal 9); ...`).
#[derive(Debug)]
pub struct StepLoads {
    cpus: Vec<u32>,
    specs: Vec<LoadSpec>,
    running: Vec<(usize, Load)>,
    stopped: (usize, f64),
    watch: Watch,
}

impl StepLoads {
    /// The loads of `rank` among `specs`, pinned to `cpus` (its node's).
    pub fn new(rank: usize, cpus: &[u32], specs: &[LoadSpec]) -> StepLoads {
        StepLoads {
            cpus: cpus.to_vec(),
            specs: specs.iter().filter(|s| s.rank == rank).copied().collect(),
            running: Vec::new(),
            stopped: (0, 0.0),
            watch: Watch::to_stderr(),
        }
    }

    /// Stops the loads whose end is `step` and starts those due at its start; what it did
    /// (the processes that died since the last step included, already reported).
    pub fn at_step(&mut self, step: usize) -> Result<Vec<LoadEvent>> {
        let mut events = self.died();
        self.watch.set_step(step);
        let mut i = 0;
        while i < self.running.len() {
            if self.specs[self.running[i].0].until_step == Some(step) {
                let (k, load) = self.running.swap_remove(i);
                let report = load.stop()?;
                self.stopped.0 += report.procs;
                self.stopped.1 += report.cpu_seconds;
                events.push(LoadEvent::Stopped {
                    spec: self.specs[k],
                    report,
                });
            } else {
                i += 1;
            }
        }
        for (k, s) in self.specs.iter().enumerate() {
            if s.from_step == step {
                let load = Load::start(&self.cpus, s.procs)?;
                self.watch
                    .add(&load, format!("--load {s} on rank {}", s.rank))?;
                events.push(LoadEvent::Started {
                    spec: *s,
                    pids: load.pids(),
                    cpus: load.cpus().to_vec(),
                });
                self.running.push((k, load));
            }
        }
        Ok(events)
    }

    /// The processes that ended on their own since the last call (see [`Load::exited`]),
    /// reported by the watch (now, if its thread had not yet seen them), their CPU seconds
    /// counted with the stopped ones'.
    pub fn died(&mut self) -> Vec<LoadEvent> {
        self.watch.sweep();
        let mut events = Vec::new();
        for (k, load) in &mut self.running {
            for exited in load.exited() {
                self.stopped.1 += exited.cpu_seconds;
                events.push(LoadEvent::Died {
                    spec: self.specs[*k],
                    exited,
                });
            }
        }
        events
    }

    /// Stops the watch (joined) and every load; the processes and CPU seconds of all of them
    /// over the run.
    pub fn stop(&mut self) -> Result<(usize, f64)> {
        self.watch.stop();
        self.died();
        let mut out = self.stopped;
        for (_, l) in self.running.drain(..) {
            let r = l.stop()?;
            out.0 += r.procs;
            out.1 += r.cpu_seconds;
        }
        self.stopped = out;
        Ok(out)
    }
}

/// True while process `pid` exists and is not a zombie (from `/proc/PID/stat`): how a caller
/// checks that no load outlived its run.
pub fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

/// A helper process: dies with the thread that forked it, runs on `set` (if any), then does
/// its job forever.
///
/// # Safety
/// Only for the child of `fork`: it makes async-signal-safe system calls and never returns.
unsafe fn helper(
    parent: libc::pid_t,
    set: Option<&libc::cpu_set_t>,
    pipe: [libc::c_int; 2],
    job: Job,
) -> ! {
    // SAFETY: plain system calls with valid arguments; see the function's contract.
    unsafe {
        libc::close(pipe[0]);
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
            || libc::getppid() != parent
        {
            libc::_exit(1); // no way to die with the parent, or it already died
        }
        // Inherited handlers would run the parent's code: back to the defaults, unblocked.
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if let Some(set) = set
            && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0
        {
            libc::_exit(2);
        }
        let ok = 1u8;
        libc::write(pipe[1], (&ok as *const u8).cast(), 1);
        libc::close(pipe[1]);
        match job {
            Job::Spin => spin(),
            Job::Flow { fd, bytes_per_s } => flow(fd, bytes_per_s),
        }
    }
}

/// Computes forever.
fn spin() -> ! {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // SAFETY: a volatile write to a local.
        unsafe { std::ptr::write_volatile(&mut x, x) };
    }
}

/// Seconds on the monotonic clock (async-signal-safe).
fn monotonic() -> f64 {
    // SAFETY: timespec is plain data; clock_gettime writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Writes [`FLOW_BUFFER`] to `fd` until a write fails (the sink closed: SIGPIPE or EPIPE end
/// the process), sleeping so that the bytes sent never run ahead of `bytes_per_s` (0: never
/// sleeps). Only async-signal-safe calls: it runs in the child of a fork.
fn flow(fd: libc::c_int, bytes_per_s: f64) -> ! {
    // Paced: chunks of 5 ms of traffic, so the rate is even at the scale of a window.
    let chunk = if bytes_per_s > 0.0 {
        ((bytes_per_s * 0.005) as usize).clamp(1024, FLOW_BUFFER.len())
    } else {
        FLOW_BUFFER.len()
    };
    let t0 = monotonic();
    let mut sent = 0.0;
    loop {
        // SAFETY: FLOW_BUFFER holds at least `chunk` bytes.
        let n = unsafe { libc::write(fd, FLOW_BUFFER.as_ptr().cast(), chunk) };
        if n < 0 {
            // SAFETY: errno of this thread.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(3) };
        }
        sent += n as f64;
        if bytes_per_s > 0.0 {
            let ahead = sent / bytes_per_s - (monotonic() - t0);
            if ahead > 0.0 {
                let ts = libc::timespec {
                    tv_sec: ahead as libc::time_t,
                    tv_nsec: (ahead.fract() * 1e9) as libc::c_long,
                };
                // SAFETY: a valid timespec; the remainder is not wanted.
                unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn alive(pid: i32) -> bool {
        is_running(pid as u32)
    }

    #[test]
    fn spec_parses() {
        let s: LoadSpec = "1".parse().unwrap();
        assert_eq!(
            (s.rank, s.procs, s.from_step, s.until_step),
            (1, 1, 0, None)
        );
        let s: LoadSpec = "3:2@12".parse().unwrap();
        assert_eq!((s.rank, s.procs, s.from_step), (3, 2, 12));
        let s: LoadSpec = "0@5".parse().unwrap();
        assert_eq!((s.rank, s.procs, s.from_step), (0, 1, 5));
        assert_eq!(s.to_string(), "0:1@5");
        let s: LoadSpec = "1:1@4-9".parse().unwrap();
        assert_eq!((s.from_step, s.until_step), (4, Some(9)));
        assert_eq!(s.to_string(), "1:1@4-9");
        assert!(!s.active_at(3) && s.active_at(4) && s.active_at(8) && !s.active_at(9));
        for bad in [
            "", "x", "1:0", "1:2@", "1@x", "-1", "1:2:3", "1@5-5", "1@5-x", "1@-3",
        ] {
            let e = bad.parse::<LoadSpec>().unwrap_err();
            assert!(e.contains("expected RANK[:N][@STEP[-END]]"), "{bad}: {e}");
        }
    }

    #[test]
    fn loads_over_their_limits_are_refused_before_any_fork() {
        let e = "1:99999999999".parse::<LoadSpec>().unwrap_err();
        assert!(e.contains("over the limit of 64 processes per rank"), "{e}");
        assert!("1:64".parse::<LoadSpec>().is_ok());
        let spec = |rank, procs| LoadSpec {
            rank,
            procs,
            from_step: 0,
            until_step: None,
        };
        let e = check_load_limits(&[spec(1, 40), spec(1, 30)]).unwrap_err();
        assert!(
            e.to_string()
                .contains("70 competing processes on rank 1 are over the limit of 64 per rank"),
            "{e}"
        );
        let many: Vec<LoadSpec> = (0..5).map(|r| spec(r, 60)).collect();
        let e = check_load_limits(&many).unwrap_err();
        assert!(
            e.to_string()
                .contains("300 competing processes are over the limit of 256"),
            "{e}"
        );
        check_load_limits(&many[..4]).unwrap();
        let e = Load::start(&[0], 1_000_000).unwrap_err();
        assert!(
            e.to_string().contains("over the limit of 64 per rank"),
            "{e}"
        );
    }

    #[test]
    fn a_load_process_killed_from_outside_is_found_with_how_it_ended() {
        let cpu = allowed_cpus().unwrap()[0];
        let spec = LoadSpec {
            rank: 0,
            procs: 2,
            from_step: 0,
            until_step: None,
        };
        let mut loads = StepLoads::new(0, &[cpu], &[spec]);
        let started = loads.at_step(0).unwrap();
        let [LoadEvent::Started { pids, .. }] = &started[..] else {
            panic!("{started:?}")
        };
        assert!(loads.died().is_empty());
        // SAFETY: pids[0] is a child of this process, not yet reaped.
        unsafe { libc::kill(pids[0], libc::SIGKILL) };
        let t0 = Instant::now();
        let died = loop {
            let d = loads.died();
            if !d.is_empty() || t0.elapsed() > Duration::from_secs(10) {
                break d;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let [LoadEvent::Died { spec: s, exited }] = &died[..] else {
            panic!("{died:?}")
        };
        assert_eq!((*s, exited.pid), (spec, pids[0]));
        assert_eq!(exited.how, "killed by signal 9");
        // The other one goes on and is stopped as usual; the dead one is counted once.
        assert!(alive(pids[1]));
        let (procs, _) = loads.stop().unwrap();
        assert_eq!(procs, 1);
        assert!(!alive(pids[1]));
    }

    #[test]
    fn a_watch_reports_a_death_at_once_with_its_step() {
        let cpu = allowed_cpus().unwrap()[0];
        let mut load = Load::start(&[cpu], 2).unwrap();
        let pids = load.pids();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut watch = Watch::new(move |d: &Death| {
            let _ = tx.send(d.clone());
        });
        watch.add(&load, "--load 0:2@0 on rank 0").unwrap();
        watch.set_step(3);
        // SAFETY: pids[0] is a child of this process, not yet reaped.
        unsafe { libc::kill(pids[0], libc::SIGKILL) };
        // Found by the watch's own thread: nothing here looks at the load.
        let d = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            (
                d.step,
                d.exited.pid,
                d.exited.how.as_str(),
                d.exited.reported
            ),
            (3, pids[0], "killed by signal 9", true)
        );
        assert_eq!(
            d.to_string(),
            format!(
                "load: process {} of --load 0:2@0 on rank 0 died during step 3 (killed by \
                 signal 9); the run goes on with one competing process fewer",
                pids[0]
            )
        );
        // Handed to the owner once, marked reported; the other one runs on and is stopped
        // as usual, not reported (its processes leave the watch before they are killed).
        assert_eq!(load.exited(), vec![d.exited.clone()]);
        assert!(load.exited().is_empty());
        assert_eq!(load.pids(), vec![pids[1]]);
        assert_eq!(load.stop().unwrap().procs, 1);
        assert!(!alive(pids[1]));
        watch.stop();
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn processes_run_pinned_and_stop() {
        let cpu = allowed_cpus().unwrap()[0];
        let load = Load::start(&[cpu], 2).unwrap();
        let pids = load.pids().to_vec();
        assert_eq!(pids.len(), 2);
        std::thread::sleep(Duration::from_millis(200));
        for &p in &pids {
            assert!(alive(p), "load process {p} should run");
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap();
            let line = status
                .lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .unwrap();
            assert_eq!(
                line.split_whitespace().nth(1),
                Some(cpu.to_string().as_str())
            );
        }
        let r = load.stop().unwrap();
        assert_eq!(r.procs, 2);
        // Two processes sharing one CPU for about 0.2 s used CPU time (how much depends on
        // what else the host runs: no threshold beyond "some").
        assert!(r.cpu_seconds > 0.0, "{r:?}");
        for &p in &pids {
            assert!(!alive(p), "load process {p} outlived stop()");
        }
    }

    #[test]
    fn drop_and_panic_stop_the_processes() {
        let cpu = allowed_cpus().unwrap()[0];
        let load = Load::start(&[cpu], 1).unwrap();
        let pid = load.pids()[0];
        drop(load);
        assert!(!alive(pid));

        // A panicking thread that holds a load: unwinding drops it.
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let load = Load::start(&[cpu], 1).unwrap();
            tx.send(load.pids()[0]).unwrap();
            panic!("the run fails");
        });
        let pid = rx.recv().unwrap();
        assert!(h.join().is_err());
        assert!(!alive(pid));
    }

    #[test]
    fn the_thread_that_started_them_ending_kills_them() {
        // Leaked (no Drop): the kernel's parent-death signal still ends the process when the
        // thread that forked it exits.
        let cpu = allowed_cpus().unwrap()[0];
        let pid = std::thread::spawn(move || {
            let load = Load::start(&[cpu], 1).unwrap();
            let pid = load.pids()[0];
            std::mem::forget(load);
            pid
        })
        .join()
        .unwrap();
        let t0 = Instant::now();
        while alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(pid), "load process {pid} outlived its thread");
        // Reap it (it is still our child).
        let mut status = 0;
        // SAFETY: pid is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }

    #[test]
    fn net_spec_parses() {
        let s: NetLoadSpec = "node2".parse().unwrap();
        assert_eq!(
            (s.node.as_str(), s.mbit, s.from_step, s.until_step),
            ("node2", None, 0, None)
        );
        assert_eq!(s.to_string(), "node2@0");
        let s: NetLoadSpec = "site-b.n1:12.5@3-7".parse().unwrap();
        assert_eq!(
            (s.node.as_str(), s.mbit, s.from_step, s.until_step),
            ("site-b.n1", Some(12.5), 3, Some(7))
        );
        assert_eq!(s.to_string(), "site-b.n1:12.5@3-7");
        assert!(!s.active_at(2) && s.active_at(3) && !s.active_at(7));
        for bad in [
            "", ":5", "n:0", "n:-1", "n:x", "n:inf", "n@", "n@4-4", "n@x",
        ] {
            let e = bad.parse::<NetLoadSpec>().unwrap_err();
            assert!(
                e.contains("expected NODE[:MBIT][@STEP[-END]]"),
                "{bad}: {e}"
            );
        }
    }

    /// A sink on the loopback: counts what it reads until the sender closes.
    fn sink() -> (SocketAddr, std::thread::JoinHandle<u64>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            std::io::copy(&mut conn, &mut std::io::sink()).unwrap_or(0)
        });
        (addr, h)
    }

    #[test]
    fn a_flow_sends_at_most_its_rate_and_stops() {
        let (addr, received) = sink();
        let cpu = allowed_cpus().unwrap()[0];
        let load = Load::flow(&[cpu], addr, Some(8.0)).unwrap(); // 1 MB/s
        let pid = load.pids()[0];
        assert_eq!(load.cpus(), &[cpu]);
        std::thread::sleep(Duration::from_millis(300));
        assert!(alive(pid));
        let r = load.stop().unwrap();
        assert!(!alive(pid), "flow process {pid} outlived stop()");
        let acked = r.bytes_sent.unwrap();
        // The sink sees the end of the stream once the sender is gone, with every byte
        // acknowledged at the stop (the kernel's count may include the SYN's one) and at most
        // what was written: never ahead of 1 MB/s (a slow machine only sends less).
        let received = received.join().unwrap();
        assert!(acked > 0 && received + 1 >= acked, "{r:?}, {received}");
        assert!(
            received as f64 <= 1e6 * r.seconds + 5e3,
            "{r:?}, {received}"
        );
    }

    #[test]
    fn flows_stop_on_drop_panic_and_thread_end() {
        let (addr, received) = sink();
        let load = Load::flow(&[], addr, None).unwrap();
        let pid = load.pids()[0];
        // Time to connect and send (dropped at once, a flow on a busy machine could be ended
        // before its first byte: CI saw `received == 0`).
        std::thread::sleep(Duration::from_millis(300));
        drop(load);
        assert!(!alive(pid));
        assert!(received.join().unwrap() > 0);

        let (addr, received) = sink();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let load = Load::flow(&[], addr, None).unwrap();
            tx.send(load.pids()[0]).unwrap();
            panic!("the run fails");
        });
        let pid = rx.recv().unwrap();
        assert!(h.join().is_err());
        assert!(!alive(pid));
        received.join().unwrap();

        // Leaked: the parent-death signal ends it with the thread that started it.
        let (addr, received) = sink();
        let pid = std::thread::spawn(move || {
            let load = Load::flow(&[], addr, Some(1.0)).unwrap();
            let pid = load.pids()[0];
            std::mem::forget(load);
            pid
        })
        .join()
        .unwrap();
        let t0 = Instant::now();
        while alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(pid), "flow process {pid} outlived its thread");
        let mut status = 0;
        // SAFETY: pid is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        // The leaked parent copy of the socket keeps the stream open; the sink thread is
        // left to end with the test process.
        drop(received);
    }

    #[test]
    fn an_unreachable_sink_is_an_error() {
        // A port nobody listens on: bind, note it, close.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = Load::flow(&[], addr, None).unwrap_err().to_string();
        assert!(
            e.contains(&format!("cannot connect to the flow's sink {addr}")),
            "{e}"
        );
        let e = Load::flow(&[], addr, Some(0.0)).unwrap_err().to_string();
        assert!(e.contains("not > 0"), "{e}");
    }

    #[test]
    fn bad_cpus_are_errors() {
        assert!(
            Load::start(&[], 1)
                .unwrap_err()
                .to_string()
                .contains("no CPU")
        );
        let e = Load::start(&[100_000], 1).unwrap_err().to_string();
        assert!(
            e.contains("CPU 100000 is not one this process may use"),
            "{e}"
        );
    }

    /// A machine of two single-CPU nodes; the second lists no `cpus` and carries a load.
    fn two_nodes(cpu: u32) -> crate::Machine {
        crate::Machine::parse_str(
            &format!(
                r#"<machinemodel><node type="NETWORK" nodenum="0" name="sw" parent="-1"/>
                <node type="SINGLE_COMPUTING" nodenum="1" name="a" parent="0" cpus="{cpu}" mflops="1" load="2"/>
                <node type="SINGLE_COMPUTING" nodenum="2" name="b" parent="0" mflops="1"/></machinemodel>"#
            ),
            "two nodes",
        )
        .unwrap()
    }

    #[test]
    fn machine_loads_and_their_checks() {
        let m = two_nodes(allowed_cpus().unwrap()[0]);
        let specs = machine_loads(&m);
        assert_eq!(specs, vec!["0:2".parse::<LoadSpec>().unwrap()]);
        check_loads(&m, &specs).unwrap();
        let e = check_loads(&m, &["5".parse().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has ranks 0..2"), "{e}");
        let e = check_loads(&m, &["1".parse().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no `cpus`"), "{e}");
        assert_eq!(m.rank_cpus(), None);
    }

    #[test]
    fn step_loads_start_and_stop_at_their_steps() {
        // The last CPU: the other tests time their loads on the first.
        let cpu = *allowed_cpus().unwrap().last().unwrap();
        let specs: Vec<LoadSpec> = ["0:1@1-3", "0:2@2", "1:1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let mut loads = StepLoads::new(0, &[cpu], &specs);
        assert!(loads.at_step(0).unwrap().is_empty());
        let started = loads.at_step(1).unwrap();
        let [LoadEvent::Started { pids, cpus, .. }] = &started[..] else {
            panic!("{started:?}");
        };
        assert_eq!((pids.len(), cpus.as_slice()), (1, &[cpu][..]));
        let first = pids[0];
        assert!(alive(first));
        let at2 = loads.at_step(2).unwrap();
        assert!(matches!(&at2[..], [LoadEvent::Started { pids, .. }] if pids.len() == 2));
        let at3 = loads.at_step(3).unwrap();
        assert!(matches!(&at3[..], [LoadEvent::Stopped { report, .. }] if report.procs == 1));
        assert!(
            !alive(first),
            "the load of steps 1-2 outlived step 3's start"
        );
        let (procs, _) = loads.stop().unwrap();
        assert_eq!(procs, 3);
        let later: Vec<i32> = at2
            .iter()
            .flat_map(|e| match e {
                LoadEvent::Started { pids, .. } => pids.clone(),
                LoadEvent::Stopped { .. } | LoadEvent::Died { .. } => Vec::new(),
            })
            .collect();
        assert!(later.iter().all(|&p| !alive(p)));
    }
}
