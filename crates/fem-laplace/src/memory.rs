//! Memory settings for the binaries of this crate.

/// Keeps freed large blocks in the process (glibc): the adaptive loop allocates and frees
/// arrays of similar sizes at every step, and each time glibc would hand them back to the
/// kernel and fault fresh zero pages in again. Raising the mmap and trim thresholds to 1 GiB
/// makes later steps reuse that memory; on this machine the serial PHAML run is then about
/// 20 % faster, and a run over thread ranks (whose threads allocate from their own arenas)
/// loses a quarter of its page-fault time. Returns whether the settings were taken (always
/// `false` off glibc).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const GIB: libc::c_int = 1 << 30;
        // SAFETY: mallopt only changes allocator parameters; it is called before the run
        // allocates its arrays, and glibc applies the new thresholds to later calls.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, GIB) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, GIB) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Most vertices a run may aim at (`AdaptConfig::target_vertices`, the command's
/// `--target-vertices`): 20,000,000, about 6 GiB at the measured cost per vertex of
/// [`run_bytes`], inside a 24 GiB host.
pub const MAX_TARGET_VERTICES: usize = 20_000_000;

/// Peak memory per vertex of the target (measured: 53 MB for the serial run to 200,000).
const BYTES_PER_VERTEX: u64 = 300;
/// Peak memory per rank whatever the mesh (measured with the pair term on 32 and 128 thread
/// ranks at 5,000 vertices: 46 MB and 328 MB).
const BYTES_PER_RANK: u64 = 1 << 20;
/// Peak memory per pair of ranks (per-destination buffers and counts every rank keeps; the
/// same fit: 11.7 KB; with it 1,000 ranks at 20,000 vertices come to 12.8 GB, measured 9.5).
const BYTES_PER_RANK_PAIR: u64 = 12 << 10;
/// What a run needs whatever its size.
const BYTES_BASE: u64 = 16 << 20;

/// An upper estimate of the peak memory of a run over `ranks` thread ranks (1: the serial
/// run) aiming at `target_vertices`: a fixed part, a part per vertex of the target, per
/// rank and per pair of ranks, fitted to the peak resident size of measured runs
/// (`fem-laplace --ranks R --target-vertices V` under `/usr/bin/time`; R = 32, 128 and the
/// issue's 1,000) and rounded up. Used to refuse, before any rank starts, a run that would
/// not fit (10,000 thread ranks: about 1.2 TB).
///
/// ```
/// use fem_laplace::memory::run_bytes;
/// assert!(run_bytes(10_000, 524_500) > 24 << 30);
/// assert!(run_bytes(2, 524_500) < 2 << 30);
/// ```
pub fn run_bytes(ranks: usize, target_vertices: usize) -> u64 {
    let (r, v) = (ranks as u64, target_vertices as u64);
    BYTES_BASE
        .saturating_add(v.saturating_mul(BYTES_PER_VERTEX))
        .saturating_add(r.saturating_mul(BYTES_PER_RANK))
        .saturating_add(r.saturating_mul(r).saturating_mul(BYTES_PER_RANK_PAIR))
}

/// The memory the kernel says is available for new work (`MemAvailable` of
/// `/proc/meminfo`), `None` where it cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
