//! The host side of `vcluster`: what must be installed, the commands it runs, the processes
//! living in a namespace, the signal that interrupts a run.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why namespaces cannot be made here, or `None` if they can: root, and the tools of
/// iproute2 (`ip`, `tc`) and util-linux (`unshare`, `nsenter`, `umount`).
pub(crate) fn cannot_make_namespaces() -> Option<String> {
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| find_on_path(tool).is_none())
        .map(|(tool, _)| *tool)
        .collect();
    refusal(crate::is_root(), &missing)
}

/// The tools `vcluster` runs, with their Debian package.
const TOOLS: [(&str, &str); 5] = [
    ("ip", "iproute2"),
    ("tc", "iproute2"),
    ("unshare", "util-linux"),
    ("nsenter", "util-linux"),
    ("umount", "mount"),
];

/// The refusal for a user who is `root` or not, with `missing` tools.
fn refusal(root: bool, missing: &[&str]) -> Option<String> {
    if !root {
        return Some(
            "vcluster needs root (network namespaces, veth, bridges, tc): run it as root".into(),
        );
    }
    let mut packages: Vec<&str> = TOOLS
        .iter()
        .filter(|(tool, _)| missing.contains(tool))
        .map(|(_, package)| *package)
        .collect();
    packages.dedup();
    (!packages.is_empty()).then(|| {
        format!(
            "vcluster needs {} ({} not found; apt-get install {})",
            packages.join(" and "),
            missing.join(", "),
            packages.join(" ")
        )
    })
}

pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs `args` (program first), quietly; fails with its stderr.
pub(crate) fn sh(args: &[String]) -> Result<()> {
    let out = Command::new(&args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("could not start `{}`", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// [`sh`] from string slices.
pub(crate) fn sh_str(args: &[&str]) -> Result<()> {
    sh(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// The output of `args`, or `None` if it fails.
pub(crate) fn output(args: &[&str]) -> Option<String> {
    let out = Command::new(args[0]).args(&args[1..]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where `ip netns` keeps a named namespace.
pub(crate) fn netns_path(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// The inode of a named network namespace (what `/proc/PID/ns/net` links to), if it exists.
pub(crate) fn netns_inode(name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(netns_path(name)).ok()?;
    // A plain file (the namespace is gone but its mount point stayed) is on the root fs.
    (m.dev() != std::fs::metadata("/run/netns").ok()?.dev()).then(|| m.ino())
}

/// The named network namespaces with our prefix.
pub(crate) fn our_namespaces() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("{}-", super::plan::PREFIX)))
        .collect();
    out.sort();
    out
}

/// The processes whose network namespace is one of `inodes` (not this process).
pub(crate) fn processes_in(inodes: &[u64]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(link) = std::fs::read_link(e.path().join("ns/net")) else {
            continue;
        };
        let inode = link
            .to_str()
            .and_then(|l| l.strip_prefix("net:["))
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|l| l.parse::<u64>().ok());
        if inode.is_some_and(|i| inodes.contains(&i)) {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_string()));
        }
    }
    out
}

/// Kills (SIGKILL) every process in the namespaces `inodes` until none is left, for at most
/// 5 s; returns those that were killed, and fails naming those that stayed.
pub(crate) fn kill_all_in(inodes: &[u64]) -> Result<Vec<(u32, String)>> {
    let mut killed = Vec::new();
    let t0 = Instant::now();
    loop {
        let left = processes_in(inodes);
        if left.is_empty() {
            return Ok(killed);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            bail!("processes survived SIGKILL in the vcluster's namespaces: {left:?}");
        }
        for (pid, comm) in left {
            // SAFETY: kill has no memory preconditions; pid is a process we found in /proc.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            if !killed.iter().any(|(p, _)| *p == pid) {
                killed.push((pid, comm));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP set a flag ([`interrupted`]) instead of ending
/// xtask, so that it can take down what it made. Children get the default handling back
/// (exec resets caught signals).
pub(crate) fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Whether a signal caught by [`catch_signals`] arrived.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Moves the calling thread into the named network namespace (the sink's thread).
pub(crate) fn enter_netns(name: &str) -> Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(netns_path(name))
        .with_context(|| format!("opening namespace {name}"))?;
    // SAFETY: setns on an open namespace file descriptor; it changes only this thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!(
            "entering namespace {name}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_what_is_missing() {
        assert_eq!(refusal(true, &[]), None);
        let e = refusal(false, &[]).unwrap();
        assert!(e.starts_with("vcluster needs root"), "{e}");
        assert_eq!(
            refusal(true, &["ip", "tc"]).unwrap(),
            "vcluster needs iproute2 (ip, tc not found; apt-get install iproute2)"
        );
        assert_eq!(
            refusal(true, &["tc", "nsenter"]).unwrap(),
            "vcluster needs iproute2 and util-linux (tc, nsenter not found; apt-get install \
             iproute2 util-linux)"
        );
    }
}
