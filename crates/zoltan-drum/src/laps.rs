//! `ZD_DEBUG_TIMES=1`: the wall time, this thread's CPU time and the process's minor page
//! faults of each phase of `Zoltan_LB_Partition`, one line per rank on stderr (for finding
//! costs; not a benchmark).

use std::time::Instant;

/// The phases of one call and their wall times (nothing kept when off).
#[derive(Debug)]
pub(crate) struct Laps {
    on: bool,
    last: Instant,
    faults: i64,
    cpu: f64,
    done: Vec<(&'static str, f64, f64, i64)>,
}

/// CPU time of this thread so far (s).
fn cpu() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + 1e-9 * t.tv_nsec as f64
}

/// Minor page faults of this process so far.
fn minor_faults() -> i64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init().ru_minflt
    }
}

impl Laps {
    /// Starts the clock when `ZD_DEBUG_TIMES` is set.
    pub(crate) fn start() -> Laps {
        Laps {
            on: std::env::var_os("ZD_DEBUG_TIMES").is_some(),
            last: Instant::now(),
            faults: minor_faults(),
            cpu: cpu(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` (the time since the previous lap).
    pub(crate) fn lap(&mut self, name: &'static str) {
        if self.on {
            let now = Instant::now();
            let (f, c) = (minor_faults(), cpu());
            self.done.push((
                name,
                now.duration_since(self.last).as_secs_f64(),
                c - self.cpu,
                f - self.faults,
            ));
            self.last = now;
            self.faults = f;
            self.cpu = c;
        }
    }

    /// Prints the laps of rank `rank` on stderr.
    pub(crate) fn print(&self, rank: usize) {
        if self.on {
            let total: f64 = self.done.iter().map(|(_, t, _, _)| t).sum();
            let total_cpu: f64 = self.done.iter().map(|(_, _, c, _)| c).sum();
            let faults: i64 = self.done.iter().map(|(_, _, _, f)| f).sum();
            let each: Vec<String> = self
                .done
                .iter()
                .map(|(n, t, c, f)| format!("{n} {:.2}/{:.2}/{f}", t * 1e3, c * 1e3))
                .collect();
            eprintln!(
                "zoltan-drum times rank {rank} (phase wall ms/CPU ms/page faults): {}; total \
                 {:.2}/{:.2}/{faults}",
                each.join(", "),
                total * 1e3,
                total_cpu * 1e3
            );
        }
    }
}

impl Default for Laps {
    fn default() -> Laps {
        Laps::start()
    }
}
