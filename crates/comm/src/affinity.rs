//! Pinning the calling thread to a set of CPUs (Linux `sched_setaffinity`).

use crate::CommError;

/// The CPUs the calling thread may run on, ascending.
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = usize::try_from(libc::CPU_SETSIZE).expect("CPU_SETSIZE is positive");
    // SAFETY: every index is below CPU_SETSIZE, the size of `set`.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The CPUs the calling thread may run on (not known on this platform: empty).
#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    Ok(Vec::new())
}

/// Checks every rank's CPU list against the CPUs this process may use.
pub(crate) fn validate(cpus: &[Vec<usize>]) -> Result<(), CommError> {
    let allowed = allowed_cpus()
        .map_err(|e| CommError::Options(format!("cannot read this process's CPU affinity: {e}")))?;
    if !cfg!(target_os = "linux") {
        return Err(CommError::Options(
            "pinning ranks to CPUs is only supported on Linux".into(),
        ));
    }
    for (rank, list) in cpus.iter().enumerate() {
        if list.is_empty() {
            return Err(CommError::Options(format!(
                "rank {rank} has an empty CPU list"
            )));
        }
        if let Some(&cpu) = list.iter().find(|c| allowed.binary_search(c).is_err()) {
            return Err(CommError::InvalidCpu {
                rank,
                cpu,
                allowed: format_cpu_list(&allowed),
            });
        }
    }
    Ok(())
}

/// Pins the calling thread to `cpus` (already validated).
#[cfg(target_os = "linux")]
pub(crate) fn pin_current_thread(rank: usize, cpus: &[usize]) -> Result<(), CommError> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = usize::try_from(libc::CPU_SETSIZE).expect("CPU_SETSIZE is positive");
    for &c in cpus {
        if c >= max {
            return Err(CommError::InvalidCpu {
                rank,
                cpu: c,
                allowed: format!("0-{}", max - 1),
            });
        }
        // SAFETY: c < CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(CommError::Affinity {
            rank,
            cpus: cpus.to_vec(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Pinning is Linux only; `validate` already refused.
#[cfg(not(target_os = "linux"))]
pub(crate) fn pin_current_thread(rank: usize, cpus: &[usize]) -> Result<(), CommError> {
    Err(CommError::Affinity {
        rank,
        cpus: cpus.to_vec(),
        source: std::io::Error::new(std::io::ErrorKind::Unsupported, "not Linux"),
    })
}

/// Formats ascending CPU indices the way Linux does (`0-3,6,8-9`).
pub(crate) fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_format_like_linux() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "none");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_thread_has_cpus() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }
}
