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

/// An upper estimate of the peak memory that the `local` processes on one host of a run over
/// `ranks` MPI processes need together, aiming at `target_vertices`: [`run_bytes`]'s fit
/// applied per process (each pays the fixed part, its rank's part and its buffers to every
/// rank), with the host's share `local / ranks` of the vertices. One process of one rank is
/// [`run_bytes`]`(1, v)`.
///
/// ```
/// use fem_laplace::memory::{host_bytes, run_bytes};
/// assert_eq!(host_bytes(1, 1, 524_500), run_bytes(1, 524_500));
/// assert!(host_bytes(8, 4, 524_500) < host_bytes(8, 8, 524_500));
/// ```
pub fn host_bytes(ranks: usize, local: usize, target_vertices: usize) -> u64 {
    let (r, l, v) = (ranks.max(1) as u64, local as u64, target_vertices as u64);
    let vertices = v.saturating_mul(l).div_ceil(r);
    l.saturating_mul(BYTES_BASE.saturating_add(BYTES_PER_RANK))
        .saturating_add(vertices.saturating_mul(BYTES_PER_VERTEX))
        .saturating_add(l.saturating_mul(r).saturating_mul(BYTES_PER_RANK_PAIR))
}

/// The refusal of a run that would not fit: `None` when `need` bytes fit in `have` (or
/// `have` is unknown), else "`who` would need about N GiB, but the host has M GiB available" (MiB
/// below 1 GiB).
///
/// ```
/// use fem_laplace::memory::refusal;
/// assert_eq!(refusal(1 << 30, Some(2 << 30), "the run"), None);
/// assert_eq!(refusal(1 << 30, None, "the run"), None);
/// assert_eq!(
///     refusal(3 << 30, Some(1 << 30), "the run").unwrap(),
///     "the run would need about 3.0 GiB, but the host has 1.0 GiB available"
/// );
/// assert_eq!(
///     refusal(35 << 20, Some(10 << 20), "they").unwrap(),
///     "they would need about 35 MiB, but the host has 10 MiB available"
/// );
/// ```
pub fn refusal(need: u64, have: Option<u64>, who: &str) -> Option<String> {
    let have = have.filter(|&h| need > h)?;
    Some(format!(
        "{who} would need about {}, but the host has {} available",
        human(need),
        human(have)
    ))
}

/// Bytes in GiB with one decimal, or in MiB below 1 GiB.
fn human(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.0} MiB", bytes as f64 / f64::from(1u32 << 20))
    } else {
        format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
    }
}

/// The memory the kernel says is available for new work (`MemAvailable` of
/// `/proc/meminfo`), `None` where it cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
