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

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

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
        k >= self.from_step && self.until_step.is_none_or(|u| k < u)
    }
}

impl FromStr for LoadSpec {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<LoadSpec, String> {
        let bad = |why: &str| {
            format!("load `{text}`: {why} (expected RANK[:N][@STEP[-END]], e.g. 1:1@12)")
        };
        let (head, steps) = match text.split_once('@') {
            Some((h, s)) => (h, Some(s)),
            None => (text, None),
        };
        let (rank, procs) = match head.split_once(':') {
            Some((r, n)) => (r, Some(n)),
            None => (head, None),
        };
        let num = |s: &str, what: &str| -> std::result::Result<usize, String> {
            s.trim()
                .parse::<usize>()
                .map_err(|_| bad(&format!("{what} `{s}` is not a whole number")))
        };
        let (from, until) =
            match steps.map(|s| s.split_once('-').map_or((s, None), |(a, b)| (a, Some(b)))) {
                Some((a, b)) => (Some(a), b),
                None => (None, None),
            };
        let spec = LoadSpec {
            rank: num(rank, "RANK")?,
            procs: procs.map(|n| num(n, "N")).transpose()?.unwrap_or(1),
            from_step: from.map(|s| num(s, "STEP")).transpose()?.unwrap_or(0),
            until_step: until.map(|s| num(s, "END")).transpose()?,
        };
        if spec.procs == 0 {
            return Err(bad("N must be at least 1"));
        }
        if spec.until_step.is_some_and(|u| u <= spec.from_step) {
            return Err(bad("END must come after STEP"));
        }
        Ok(spec)
    }
}

impl fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}@{}", self.rank, self.procs, self.from_step)?;
        if let Some(u) = self.until_step {
            write!(f, "-{u}")?;
        }
        Ok(())
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
}

/// Running competing processes (see the module documentation).
#[derive(Debug)]
pub struct Load {
    pids: Vec<libc::pid_t>,
    cpus: Vec<u32>,
    started: Instant,
}

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

impl Load {
    /// Starts `procs` compute-bound processes pinned to `cpus` (all of them may run on any
    /// CPU of the list). Errors: no CPU, a CPU this process may not use, `fork` failing (the
    /// processes already started are stopped).
    pub fn start(cpus: &[u32], procs: usize) -> Result<Load> {
        if cpus.is_empty() {
            return Err(Error::Load("no CPU to put the load on".into()));
        }
        let allowed = allowed_cpus()?;
        if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(Error::Load(format!(
                "CPU {c} is not one this process may use (allowed: {allowed:?})"
            )));
        }
        // Everything the child needs is prepared before fork: it only makes system calls.
        // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            // SAFETY: c is an allowed CPU, below CPU_SETSIZE.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        let mut load = Load {
            pids: Vec::with_capacity(procs),
            cpus: cpus.to_vec(),
            started: Instant::now(),
        };
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        for _ in 0..procs {
            // The child reports on this pipe once its parent-death signal is armed, so the
            // thread that forked it (whose end fires the signal) is alive when it is.
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
                // SAFETY: async-signal-safe calls only; `set` was built before fork.
                unsafe { spin(parent, &set, fds) }
            }
            let fork_err = std::io::Error::last_os_error();
            let mut byte = 0u8;
            // SAFETY: closing our copy of the write end, then a one-byte read into `byte`.
            let got = unsafe {
                libc::close(fds[1]);
                let mut n;
                loop {
                    n = libc::read(fds[0], (&mut byte as *mut u8).cast(), 1);
                    if !(n < 0
                        && std::io::Error::last_os_error().kind()
                            == std::io::ErrorKind::Interrupted)
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
            load.pids.push(pid);
            if got != 1 {
                // Dropping `load` reaps this one and stops the others.
                return Err(Error::Load(format!(
                    "load process {pid} did not start (it could not arm its parent-death \
                     signal or pin itself)"
                )));
            }
        }
        Ok(load)
    }

    /// The processes' IDs.
    pub fn pids(&self) -> &[i32] {
        &self.pids
    }

    /// The CPUs they are pinned to.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Kills and reaps the processes; reports their CPU time.
    pub fn stop(mut self) -> Result<LoadReport> {
        self.kill_all()
    }

    fn kill_all(&mut self) -> Result<LoadReport> {
        let mut cpu = 0.0;
        let mut first_err = None;
        let procs = self.pids.len();
        for pid in std::mem::take(&mut self.pids) {
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
        match first_err {
            Some(e) => Err(e),
            None => Ok(LoadReport {
                procs,
                seconds: self.started.elapsed().as_secs_f64(),
                cpu_seconds: cpu,
            }),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if !self.pids.is_empty() {
            let _ = self.kill_all();
        }
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

/// The load process: dies with the thread that forked it, runs on `set`, computes forever.
///
/// # Safety
/// Only for the child of `fork`: it makes async-signal-safe system calls and never returns.
unsafe fn spin(parent: libc::pid_t, set: &libc::cpu_set_t, pipe: [libc::c_int; 2]) -> ! {
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
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
            libc::_exit(2);
        }
        let ok = 1u8;
        libc::write(pipe[1], (&ok as *const u8).cast(), 1);
        libc::close(pipe[1]);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        loop {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            std::ptr::write_volatile(&mut x, x);
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
        // Two processes sharing one CPU for about 0.2 s used CPU time.
        assert!(r.cpu_seconds > 0.05, "{r:?}");
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
}
