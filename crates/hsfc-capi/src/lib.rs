//! C ABI of [`hsfc`]: Hilbert-curve partitioning to arbitrary part sizes, for C, C++ and
//! Fortran (`iso_c_binding`) codes. The header is `hsfc/capi/include/hsfc.h`, written by hand
//! and checked against this file by `tests/header.rs`; `examples/partition.c` is compiled
//! and run by `tests/c_example.rs`.
//!
//! # Conventions
//!
//! - Every function that can fail returns an `int` status: [`HSFC_OK`] (0) or one of the
//!   `HSFC_ERR_*` codes, one per [`hsfc::Error`] variant plus the codes of the boundary itself
//!   (null pointer, buffer too small, caught panic). [`hsfc_error_name`] and
//!   [`hsfc_error_message`] describe a code; [`hsfc_last_error_message`] gives the full
//!   message of the last failed call on the calling thread (the index and value at fault).
//! - Counts and lengths are `size_t`. Points are interleaved coordinates, `dim` (2 or 3)
//!   `double`s per point. A pointer paired with a count of 0 may be NULL.
//! - Output arrays belong to the caller. A partition is an opaque handle
//!   (`hsfc_partition_t*`) created by [`hsfc_partition`] or [`hsfc_repartition`] and owned by
//!   the caller until [`hsfc_free`]. A handle is immutable: any number of threads may query it
//!   at once.
//! - No hidden state but two thread-locals: the last error message, and the calling thread's
//!   scratch buffers (an `hsfc::Workspace`, kept between calls for speed; a C caller has no
//!   workspace to pass). [`hsfc_release_buffers`] frees the calling thread's buffers.
//!   Thread pools are kept per size, as `hsfc::Par` documents.
//! - No panic crosses the boundary: every entry point runs under `catch_unwind` and turns a
//!   panic into [`HSFC_ERR_PANIC`] (a bug in `hsfc`, to be reported).
//!
//! The same calls from Rust (this crate is also an `rlib`, for the tests):
//!
//! ```
//! use hsfc_capi::*;
//! let coords = [0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0];
//! let sizes = [1.0, 1.0];
//! let mut parts = [9u32; 4];
//! let mut p = std::ptr::null_mut();
//! let rc = unsafe {
//!     hsfc_partition(coords.as_ptr(), 4, 2, std::ptr::null(), sizes.as_ptr(), 2, 1,
//!                    parts.as_mut_ptr(), &mut p)
//! };
//! assert_eq!(rc, HSFC_OK);
//! let mut part = 9;
//! assert_eq!(unsafe { hsfc_point_assign(p, [3.0, 0.0].as_ptr(), &mut part) }, HSFC_OK);
//! assert_eq!(part, parts[3]);
//! unsafe { hsfc_free(p) };
//! ```

#![deny(missing_docs)]

use part_api::Serial;
use part_api::{Par, Partitioner, Points};
use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use hsfc::{Hsfc, Partition};

/// One status code: its name in `hsfc.h`, its value and a one-line summary.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    /// The value returned.
    pub value: c_int,
    name_z: &'static str,
    summary_z: &'static str,
}

impl Status {
    /// The macro's name in `hsfc.h` (`HSFC_ERR_…`).
    pub fn name(&self) -> &'static str {
        self.name_z.trim_end_matches('\0')
    }
    /// What the code means, in one line.
    pub fn summary(&self) -> &'static str {
        self.summary_z.trim_end_matches('\0')
    }
}

macro_rules! status_codes {
    ($( $(#[doc = $doc:expr])* $name:ident = $value:expr, $summary:expr; )*) => {
        $(
            $(#[doc = $doc])*
            pub const $name: c_int = $value;
        )*
        /// Every status code of this ABI, in increasing order (`hsfc.h` defines exactly
        /// these).
        pub const STATUS_CODES: &[Status] = &[
            $(Status {
                value: $value,
                name_z: concat!(stringify!($name), "\0"),
                summary_z: concat!($summary, "\0"),
            },)*
        ];
    };
}

status_codes! {
    /// Success.
    HSFC_OK = 0, "success";
    /// [`hsfc::Error::Dimension`]: `dim` is not 2 or 3 (including negative values).
    HSFC_ERR_DIMENSION = 1, "dimension is not 2 or 3";
    /// [`hsfc::Error::NoParts`]: k = 0.
    HSFC_ERR_NO_PARTS = 2, "no parts requested (k = 0)";
    /// [`hsfc::Error::TooManyParts`]: k > 2^32 − 1.
    HSFC_ERR_TOO_MANY_PARTS = 3, "more parts than a uint32_t part id can name";
    /// [`hsfc::Error::TooManyPoints`]: n > 2^32 − 1.
    HSFC_ERR_TOO_MANY_POINTS = 4, "more points than a uint32_t index can name";
    /// [`hsfc::Error::InvalidTarget`]: a size is negative, NaN or infinite.
    HSFC_ERR_INVALID_TARGET = 5, "a target size is negative, NaN or infinite";
    /// [`hsfc::Error::ZeroTargets`]: every size is 0.
    HSFC_ERR_ZERO_TARGETS = 6, "all target sizes are 0";
    /// [`hsfc::Error::LengthMismatch`]: an array has the wrong length.
    HSFC_ERR_LENGTH_MISMATCH = 7, "an array has the wrong length";
    /// [`hsfc::Error::InvalidCoordinate`]: a coordinate is NaN or infinite.
    HSFC_ERR_INVALID_COORDINATE = 8, "a coordinate is NaN or infinite";
    /// [`hsfc::Error::InvalidWeight`]: a weight is negative, NaN or infinite.
    HSFC_ERR_INVALID_WEIGHT = 9, "a weight is negative, NaN or infinite";
    /// [`hsfc::Error::InvalidTolerance`]: the tolerance is not in [0, 1).
    HSFC_ERR_INVALID_TOLERANCE = 10, "the tolerance is not in [0, 1)";
    /// [`hsfc::Error::InvalidBox`]: a box bound is not finite or lo > hi.
    HSFC_ERR_INVALID_BOX = 11, "a box bound is not finite, or lo > hi";
    /// [`hsfc::Error::IncompatiblePrevious`]: a repartition's dim or k differs from the
    /// previous partition's.
    HSFC_ERR_INCOMPATIBLE_PREVIOUS = 12, "dim or k differs from the previous partition";
    /// [`hsfc::Error::InvalidOnOtherRank`]: another rank of a distributed call had bad input
    /// (not returned by this serial ABI; reserved).
    HSFC_ERR_INVALID_ON_OTHER_RANK = 13, "another rank had invalid input";
    /// [`hsfc::Error::Comm`]: a collective reduction failed (not returned by this serial ABI;
    /// reserved).
    HSFC_ERR_COMM = 14, "a collective reduction failed";
    /// [`hsfc::Error::ThreadPool`]: the thread pool could not be built.
    HSFC_ERR_THREAD_POOL = 15, "the thread pool could not be built";
    /// [`hsfc::Error::WeightOverflow`]: the weights' total is beyond the largest double.
    HSFC_ERR_WEIGHT_OVERFLOW = 16, "the weights sum beyond the largest double";
    /// [`hsfc::Error::MixedWeights`]: ranks with points disagree on passing weights (not
    /// returned by this serial ABI; reserved).
    HSFC_ERR_MIXED_WEIGHTS = 17, "some ranks pass weights and others do not";
    /// An `hsfc::Error` variant newer than this ABI (the message says which).
    HSFC_ERR_UNKNOWN = 99, "an error this version of the C ABI does not know";
    /// A required pointer is NULL (the message names the argument).
    HSFC_ERR_NULL_POINTER = 100, "a required pointer is NULL";
    /// An output array is shorter than needed; nothing was written to it (the needed length
    /// is in the message, and for `hsfc_box_assign` in `*count`).
    HSFC_ERR_BUFFER_TOO_SMALL = 101, "an output array is too small";
    /// A panic was caught at the boundary: a bug in hsfc (the message holds the panic's).
    HSFC_ERR_PANIC = 102, "internal error (a Rust panic was caught)";
}

/// The status code of an [`hsfc::Error`]: one per variant.
pub fn error_code(e: &hsfc::Error) -> c_int {
    use hsfc::Error as E;
    match e {
        E::Dimension { .. } => HSFC_ERR_DIMENSION,
        E::NoParts => HSFC_ERR_NO_PARTS,
        E::TooManyParts { .. } => HSFC_ERR_TOO_MANY_PARTS,
        E::TooManyPoints { .. } => HSFC_ERR_TOO_MANY_POINTS,
        E::InvalidTarget { .. } => HSFC_ERR_INVALID_TARGET,
        E::ZeroTargets { .. } => HSFC_ERR_ZERO_TARGETS,
        E::LengthMismatch { .. } => HSFC_ERR_LENGTH_MISMATCH,
        E::InvalidCoordinate { .. } => HSFC_ERR_INVALID_COORDINATE,
        E::InvalidWeight { .. } => HSFC_ERR_INVALID_WEIGHT,
        E::InvalidTolerance { .. } => HSFC_ERR_INVALID_TOLERANCE,
        E::InvalidBox { .. } => HSFC_ERR_INVALID_BOX,
        E::IncompatiblePrevious { .. } => HSFC_ERR_INCOMPATIBLE_PREVIOUS,
        E::InvalidOnOtherRank { .. } => HSFC_ERR_INVALID_ON_OTHER_RANK,
        E::Comm(_) => HSFC_ERR_COMM,
        E::ThreadPool { .. } => HSFC_ERR_THREAD_POOL,
        E::WeightOverflow { .. } => HSFC_ERR_WEIGHT_OVERFLOW,
        E::MixedWeights => HSFC_ERR_MIXED_WEIGHTS,
        // `hsfc::Error` is #[non_exhaustive]: a variant added later gets a generic code
        // until it is given its own (tests/codes.rs notices new variants).
        _ => HSFC_ERR_UNKNOWN,
    }
}

fn status(code: c_int) -> Option<&'static Status> {
    STATUS_CODES.iter().find(|s| s.value == code)
}

/// Opaque partition handle (`hsfc_partition_t` in C): the bounding box, the cuts and the
/// per-part figures of one partition.
#[derive(Debug)]
pub struct HsfcPartition {
    inner: Partition,
}

/// Weight moved by a repartition (`hsfc_migration_t` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HsfcMigration {
    /// Total weight of the points whose part changed (unit weights: their number).
    pub weight: f64,
    /// Number of points whose part changed.
    pub count: u64,
    /// 1 if the previous box and cuts were kept, 0 if a point fell outside the previous box
    /// and the cuts started afresh.
    pub kept_cuts: c_int,
}

/// Why a call failed, before it becomes a code and a message.
enum Failure {
    Hsfc(hsfc::Error),
    Null(&'static str),
    NegativeDim(c_int),
    BufferTooSmall {
        what: &'static str,
        needed: usize,
        given: usize,
    },
    Panic(String),
}

impl From<hsfc::Error> for Failure {
    fn from(e: hsfc::Error) -> Self {
        Failure::Hsfc(e)
    }
}

impl Failure {
    fn code(&self) -> c_int {
        match self {
            Failure::Hsfc(e) => error_code(e),
            Failure::Null(_) => HSFC_ERR_NULL_POINTER,
            Failure::NegativeDim(_) => HSFC_ERR_DIMENSION,
            Failure::BufferTooSmall { .. } => HSFC_ERR_BUFFER_TOO_SMALL,
            Failure::Panic(_) => HSFC_ERR_PANIC,
        }
    }

    fn message(&self) -> String {
        match self {
            Failure::Hsfc(e) => e.to_string(),
            Failure::Null(what) => format!("{what} is NULL"),
            Failure::NegativeDim(dim) => {
                format!("dimension {dim} is not supported (2 or 3)")
            }
            Failure::BufferTooSmall {
                what,
                needed,
                given,
            } => format!("{what} holds {given} values; {needed} are needed"),
            Failure::Panic(msg) => format!("internal error (panic in hsfc): {msg}"),
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

/// Runs one entry point: a panic becomes [`HSFC_ERR_PANIC`], a failure its code, and both
/// leave their message for [`hsfc_last_error_message`].
fn guard(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return HSFC_OK,
        Ok(Err(e)) => e,
        Err(payload) => Failure::Panic(part_api::panic_message(payload)),
    };
    let code = failure.code();
    // Formatting a message cannot panic for these types; if it did, keep the code.
    let message = catch_unwind(AssertUnwindSafe(|| failure.message()))
        .unwrap_or_else(|_| "(message unavailable)".to_string());
    set_last_error(message);
    code
}

/// Runs an entry point that returns a value rather than a status; `fallback` on a panic.
fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// `len` values at `ptr`; NULL is allowed when `len` is 0.
///
/// # Safety
/// When `len > 0`, `ptr` is NULL or points to `len` initialised values valid for `'a`.
unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &'static str) -> Result<&'a [T], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: non-null, and the caller guarantees `len` valid values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// `len` writable values at `ptr`; NULL is allowed when `len` is 0.
///
/// # Safety
/// When `len > 0`, `ptr` is NULL or points to `len` values writable and unaliased for `'a`.
unsafe fn slice_mut<'a, T>(
    ptr: *mut T,
    len: usize,
    what: &'static str,
) -> Result<&'a mut [T], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: non-null, and the caller guarantees `len` writable, unaliased values.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// # Safety
/// `p` is NULL or a live handle.
unsafe fn handle<'a>(
    p: *const HsfcPartition,
    what: &'static str,
) -> Result<&'a Partition, Failure> {
    // SAFETY: the caller guarantees `p` is NULL or a live handle from this library.
    match unsafe { p.as_ref() } {
        Some(h) => Ok(&h.inner),
        None => Err(Failure::Null(what)),
    }
}

/// # Safety
/// `p` is NULL or valid for one write of `T`.
unsafe fn write<T>(p: *mut T, v: T, what: &'static str) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::Null(what));
    }
    // SAFETY: non-null, and the caller guarantees it is writable.
    unsafe { p.write(v) };
    Ok(())
}

/// `dim` as a `usize` if it is 2 or 3.
fn check_dim(dim: c_int) -> Result<usize, Failure> {
    match usize::try_from(dim) {
        Ok(d @ (2 | 3)) => Ok(d),
        Ok(d) => Err(hsfc::Error::Dimension { dim: d }.into()),
        Err(_) => Err(Failure::NegativeDim(dim)),
    }
}

/// Checks `n` and `k` against the `u32` limits before any slice is built from them, so that
/// every slice below stays far under `isize::MAX` bytes.
fn check_counts(n: usize, k: usize) -> Result<(), Failure> {
    if n > u32::MAX as usize {
        return Err(hsfc::Error::TooManyPoints { n }.into());
    }
    if k > u32::MAX as usize {
        return Err(hsfc::Error::TooManyParts { k }.into());
    }
    Ok(())
}

/// The arguments shared by [`hsfc_partition`] and [`hsfc_repartition`], checked: the points,
/// the sizes and the parts to write.
struct Input<'a> {
    points: Points<'a>,
    sizes: &'a [f64],
    parts: &'a mut [u32],
}

/// # Safety
/// As documented on [`hsfc_partition`].
unsafe fn input<'a>(
    coords: *const f64,
    n: usize,
    dim: c_int,
    weights: *const f64,
    sizes: *const f64,
    k: usize,
    parts: *mut u32,
) -> Result<Input<'a>, Failure> {
    let dim = check_dim(dim)?;
    check_counts(n, k)?;
    // SAFETY: `coords` is NULL or readable for the length given (the entry point's contract).
    let coords = unsafe { slice(coords, n * dim, "coords") }?;
    let weights = if weights.is_null() {
        None
    } else {
        // SAFETY: `weights` is NULL or readable for the length given (the entry point's contract).
        Some(unsafe { slice(weights, n, "weights") }?)
    };
    // SAFETY: `sizes` is NULL or readable for the length given (the entry point's contract).
    let sizes = unsafe { slice(sizes, k, "sizes") }?;
    // SAFETY: `parts` is NULL or writable and unaliased for the length given (the entry point's contract).
    let parts = unsafe { slice_mut(parts, n, "parts") }?;
    Ok(Input {
        points: Points::new(coords, dim, weights),
        sizes,
        parts,
    })
}

/// Runs `make` under [`guard`] and hands its partition to the caller in `*out`, which is NULL
/// whenever the call fails.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn create(
    out: *mut *mut HsfcPartition,
    make: impl FnOnce() -> Result<Partition, Failure>,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(Failure::Null("out"));
        }
        // SAFETY: not NULL, and the caller guarantees it is writable.
        unsafe { out.write(ptr::null_mut()) };
        let handle = Box::new(HsfcPartition { inner: make()? });
        // SAFETY: as above; the caller owns the handle until `hsfc_free`.
        unsafe { out.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// The partitioner on the C `threads` argument (`<= 1` is the calling thread).
fn hsfc(threads: c_int, tolerance: f64) -> Hsfc {
    let par = Par::threads(usize::try_from(threads).unwrap_or(0));
    Hsfc { par, tolerance }
}

/// Partitions `n` points into `k` parts of relative sizes `sizes` along the Hilbert curve.
///
/// - `coords`: `n·dim` interleaved coordinates (`x0 y0 [z0] x1 y1 …`), finite; `dim` 2 or 3.
/// - `weights`: NULL for unit weights, or `n` finite weights `>= 0`.
/// - `sizes`: `k` relative part sizes, finite and `>= 0`, not all 0 (normalised by the
///   callee; a size of 0 gives an empty part).
/// - `threads`: `<= 1` runs on the calling thread; `t > 1` on a pool of `t` threads owned by
///   the library (kept for later calls of the same size). The result does not depend on it.
/// - `parts`: `n` values; receives the part (`< k`) of each point.
/// - `out`: receives a new handle, owned by the caller (release with [`hsfc_free`]).
///
/// `coords` and `parts` may be NULL when `n` is 0 (the partition then has empty parts).
/// Each part's weight ends within the largest point weight of its target.
/// On error `*out` is NULL (when `out` is not NULL) and the contents of `parts` are
/// unspecified.
///
/// # Safety
/// Each pointer is NULL or valid for the number of values stated above; `parts` does not
/// overlap the inputs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_partition(
    coords: *const f64,
    n: usize,
    dim: c_int,
    weights: *const f64,
    sizes: *const f64,
    k: usize,
    threads: c_int,
    parts: *mut u32,
    out: *mut *mut HsfcPartition,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        create(out, || {
            let i = input(coords, n, dim, weights, sizes, k, parts)?;
            let cfg = hsfc(threads, Hsfc::default().tolerance);
            Ok(with_workspace(|ws| {
                cfg.partition_with(ws, &Serial, i.points, i.sizes, i.parts)
            })?)
        })
    }
}

/// Repartitions from `prev` (Zoltan's KEEP_CUTS): the previous bounding box and curve are kept
/// when every point is still inside the box, and each cut stays where it was unless a part
/// next to it would be off its target by more than `tolerance·T_k` (`tolerance` in
/// `[0, 1)`; 0 moves every cut to the balance limit). A slowly changing load then moves
/// little.
///
/// Arguments as for [`hsfc_partition`], plus:
/// - `prev`: the previous partition (not consumed: free it separately); `dim` and `k` must
///   match it.
/// - `parts`: on entry each point's current part (e.g. from [`hsfc_assign`]), on return its
///   new part.
/// - `migration`: NULL, or receives the weight and number of points whose part changed.
///
/// # Safety
/// As for [`hsfc_partition`]; `prev` is NULL or a live handle; `migration` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_repartition(
    prev: *const HsfcPartition,
    coords: *const f64,
    n: usize,
    dim: c_int,
    weights: *const f64,
    sizes: *const f64,
    k: usize,
    threads: c_int,
    tolerance: f64,
    parts: *mut u32,
    migration: *mut HsfcMigration,
    out: *mut *mut HsfcPartition,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe {
        create(out, || {
            let prev = handle(prev, "prev")?;
            let i = input(coords, n, dim, weights, sizes, k, parts)?;
            let cfg = hsfc(threads, tolerance);
            let p = with_workspace(|ws| {
                cfg.repartition(ws, &Serial, prev, i.points, i.sizes, i.parts)
            })?;
            if !migration.is_null() {
                let m = p
                    .migration()
                    .map_or(HsfcMigration::default(), |m| HsfcMigration {
                        weight: m.weight,
                        count: m.count,
                        kept_cuts: c_int::from(m.kept_cuts),
                    });
                migration.write(m);
            }
            Ok(p)
        })
    }
}

/// The part the partition gives a point at `x` (`dim` coordinates; Zoltan's
/// `Point_PP_Assign`). A point outside the bounding box is projected onto it; for every
/// partitioned point this is the part the partition wrote.
///
/// # Safety
/// `p` is NULL or a live handle; `x` is NULL or holds the partition's `dim` values; `part` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_point_assign(
    p: *const HsfcPartition,
    x: *const f64,
    part: *mut u32,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract above.
        let p = unsafe { handle(p, "p") }?;
        // SAFETY: `x` is NULL or readable for the length given (the entry point's contract).
        let x = unsafe { slice(x, p.dim(), "x") }?;
        let q = p.point_assign(x)?;
        // SAFETY: `part` is NULL or valid for one write (the entry point's contract).
        unsafe { write(part, q, "part") }
    })
}

/// [`hsfc_point_assign`] for `n` points: `coords` holds `n·dim` interleaved coordinates,
/// `parts` receives `n` parts. Both may be NULL when `n` is 0.
///
/// # Safety
/// `p` is NULL or a live handle; `coords` and `parts` are NULL or hold `n·dim` and `n`
/// values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_assign(
    p: *const HsfcPartition,
    coords: *const f64,
    n: usize,
    parts: *mut u32,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract above.
        let p = unsafe { handle(p, "p") }?;
        check_counts(n, 0)?;
        // SAFETY: `coords` is NULL or readable for the length given (the entry point's contract).
        let coords = unsafe { slice(coords, n * p.dim(), "coords") }?;
        // SAFETY: `parts` is NULL or writable and unaliased for the length given (the entry point's contract).
        let parts = unsafe { slice_mut(parts, n, "parts") }?;
        p.assign(coords, parts)?;
        Ok(())
    })
}

/// Every part owning a point of the box `[lo, hi]` (`dim` values each; Zoltan's
/// `Box_PP_Assign`, exact at the curve's resolution), in increasing order.
///
/// `*count` receives the number of parts found. If it is `<= cap` they are written to
/// `parts[0 .. *count]`; otherwise nothing is written to `parts` and the call returns
/// [`HSFC_ERR_BUFFER_TOO_SMALL`] with the needed length in `*count` (so `cap = 0`,
/// `parts = NULL` asks for the length; `hsfc_num_parts` values always suffice).
///
/// # Safety
/// `p` is NULL or a live handle; `lo` and `hi` are NULL or hold `dim` values; `parts` is NULL
/// or holds `cap` writable values; `count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_box_assign(
    p: *const HsfcPartition,
    lo: *const f64,
    hi: *const f64,
    parts: *mut u32,
    cap: usize,
    count: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract above.
        let p = unsafe { handle(p, "p") }?;
        // SAFETY: `lo` is NULL or readable for the length given (the entry point's contract).
        let lo = unsafe { slice(lo, p.dim(), "lo") }?;
        // SAFETY: `hi` is NULL or readable for the length given (the entry point's contract).
        let hi = unsafe { slice(hi, p.dim(), "hi") }?;
        if count.is_null() {
            return Err(Failure::Null("count"));
        }
        let mut found = Vec::new();
        p.box_assign(lo, hi, &mut found)?;
        // SAFETY: `count` is NULL or valid for one write (the entry point's contract).
        unsafe { write(count, found.len(), "count") }?;
        if found.len() > cap {
            return Err(Failure::BufferTooSmall {
                what: "parts",
                needed: found.len(),
                given: cap,
            });
        }
        // SAFETY: `parts` is NULL or writable and unaliased for the length given (the entry point's contract).
        let out = unsafe { slice_mut(parts, found.len(), "parts") }?;
        out.copy_from_slice(&found);
        Ok(())
    })
}

/// The accessor pattern: `get(partition)` into `*out`.
///
/// # Safety
/// `p` is NULL or a live handle; `out` is NULL or writable.
unsafe fn scalar<T>(
    p: *const HsfcPartition,
    out: *mut T,
    what: &'static str,
    get: impl FnOnce(&Partition) -> T,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract above.
        let p = unsafe { handle(p, "p") }?;
        // SAFETY: `out` is NULL or valid for one write (the entry point's contract).
        unsafe { write(out, get(p), what) }
    })
}

/// The array accessor pattern: the k values `get(partition)` into `out[0 .. k]`, if
/// `len >= k`; otherwise [`HSFC_ERR_BUFFER_TOO_SMALL`] and nothing written.
///
/// # Safety
/// `p` is NULL or a live handle; `out` is NULL or holds `len` writable values.
unsafe fn array<T: Copy>(
    p: *const HsfcPartition,
    out: *mut T,
    len: usize,
    get: impl FnOnce(&Partition) -> &[T],
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract above.
        let values = get(unsafe { handle(p, "p") }?);
        if len < values.len() {
            return Err(Failure::BufferTooSmall {
                what: "the output array",
                needed: values.len(),
                given: len,
            });
        }
        // Only the first `values.len() <= len` are written.
        // SAFETY: `out` is NULL or writable and unaliased for the length given (the entry point's contract).
        let out = unsafe { slice_mut(out, values.len(), "the output array") }?;
        out.copy_from_slice(values);
        Ok(())
    })
}

/// Number of parts k into `*k`.
///
/// # Safety
/// `p` is NULL or a live handle; `k` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_num_parts(p: *const HsfcPartition, k: *mut usize) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { scalar(p, k, "k", Partition::num_parts) }
}

/// Dimension (2 or 3) into `*dim`.
///
/// # Safety
/// `p` is NULL or a live handle; `dim` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_dim(p: *const HsfcPartition, dim: *mut c_int) -> c_int {
    // SAFETY: the caller's contract above. (dim is 2 or 3.)
    unsafe { scalar(p, dim, "dim", |p| p.dim() as c_int) }
}

/// Number of points partitioned into `*n`.
///
/// # Safety
/// `p` is NULL or a live handle; `n` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_num_points(p: *const HsfcPartition, n: *mut u64) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { scalar(p, n, "n", Partition::num_points) }
}

/// Weight of each part (unit weights: its number of points) into `weights[0 .. k]`; `len` is
/// the length of `weights` and must be at least k ([`HSFC_ERR_BUFFER_TOO_SMALL`] otherwise,
/// with nothing written).
///
/// # Safety
/// `p` is NULL or a live handle; `weights` is NULL or holds `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_part_weights(
    p: *const HsfcPartition,
    weights: *mut f64,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { array(p, weights, len, Partition::part_weights) }
}

/// Number of points in each part into `counts[0 .. k]` (`len >= k`, as for
/// [`hsfc_part_weights`]).
///
/// # Safety
/// `p` is NULL or a live handle; `counts` is NULL or holds `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_part_counts(
    p: *const HsfcPartition,
    counts: *mut u64,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { array(p, counts, len, Partition::part_counts) }
}

/// Target weight T_k of each part (its normalised size times the total weight) into
/// `targets[0 .. k]` (`len >= k`, as for [`hsfc_part_weights`]).
///
/// # Safety
/// `p` is NULL or a live handle; `targets` is NULL or holds `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_targets(
    p: *const HsfcPartition,
    targets: *mut f64,
    len: usize,
) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { array(p, targets, len, Partition::targets) }
}

/// `max_k |W_k/T_k − 1|` over the parts with `T_k > 0` into `*dev`.
///
/// # Safety
/// `p` is NULL or a live handle; `dev` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_max_rel_dev(p: *const HsfcPartition, dev: *mut f64) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { scalar(p, dev, "dev", Partition::max_rel_dev) }
}

/// `max_k W_k/T_k` over the parts with `T_k > 0` (1 is perfect; Zoltan's imbalance) into
/// `*imbalance`.
///
/// # Safety
/// `p` is NULL or a live handle; `imbalance` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_imbalance(p: *const HsfcPartition, imbalance: *mut f64) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { scalar(p, imbalance, "imbalance", Partition::imbalance) }
}

/// Largest weight of a single point into `*w`: the balance limit, every part has
/// `|W_k − T_k| <= w`.
///
/// # Safety
/// `p` is NULL or a live handle; `w` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_max_weight(p: *const HsfcPartition, w: *mut f64) -> c_int {
    // SAFETY: the caller's contract above.
    unsafe { scalar(p, w, "w", Partition::max_weight) }
}

/// Frees a handle from [`hsfc_partition`] or [`hsfc_repartition`]. NULL is ignored.
///
/// # Safety
/// `p` is NULL or a live handle, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsfc_free(p: *mut HsfcPartition) {
    guard_value((), || {
        if !p.is_null() {
            // SAFETY: a live handle made by `Box::into_raw` in `boxed`, freed once.
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

thread_local! {
    /// The calling thread's `hsfc::Workspace`: a C caller has no workspace of its own to pass,
    /// so each thread that calls keeps one here (the Rust library keeps nothing).
    static WORKSPACE: std::cell::RefCell<hsfc::Workspace> = Default::default();
}

/// Runs `f` with the calling thread's workspace (a fresh one if it is in use: `f` does not
/// call back into the ABI, so only a panic that left it borrowed could cause that).
fn with_workspace<T>(f: impl FnOnce(&mut hsfc::Workspace) -> T) -> T {
    WORKSPACE.with(|w| match w.try_borrow_mut() {
        Ok(mut ws) => f(&mut ws),
        Err(_) => f(&mut hsfc::Workspace::default()),
    })
}

/// Frees the scratch buffers the calling thread keeps between calls (about 8 bytes per point
/// of its largest partition so far); its next call allocates them again.
#[unsafe(no_mangle)]
pub extern "C" fn hsfc_release_buffers() {
    guard_value((), || {
        WORKSPACE.with(|w| {
            if let Ok(mut ws) = w.try_borrow_mut() {
                *ws = hsfc::Workspace::default();
            }
        })
    })
}

/// The name of a status code (`"HSFC_ERR_INVALID_COORDINATE"`), or
/// `"HSFC_UNKNOWN_STATUS"` for a value that is not one. A static string: do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn hsfc_error_name(code: c_int) -> *const c_char {
    status_str(code, |s| s.name_z, "HSFC_UNKNOWN_STATUS\0")
}

/// A one-line description of a status code (for the details of a failure, with the index
/// and value at fault, see [`hsfc_last_error_message`]). A static string: do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn hsfc_error_message(code: c_int) -> *const c_char {
    status_str(code, |s| s.summary_z, "not a status code of hsfc\0")
}

/// A static NUL-terminated string about `code`, or `unknown` (also NUL-terminated).
fn status_str(
    code: c_int,
    pick: fn(&Status) -> &'static str,
    unknown: &'static str,
) -> *const c_char {
    guard_value(ptr::null(), || {
        status(code).map_or(unknown, pick).as_ptr().cast()
    })
}

/// The full message of the last call that failed on the calling thread (e.g. `"point 7:
/// coordinate 1 is NaN; coordinates must be finite"`), or `""` if none has. Successful calls
/// leave it unchanged. Owned by the library: valid until the next failing call on this
/// thread; copy it to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn hsfc_last_error_message() -> *const c_char {
    guard_value(ptr::null(), || LAST_ERROR.with(|l| l.borrow().as_ptr()))
}

/// The version of this library (`"MAJOR.MINOR.PATCH"`, equal to `HSFC_VERSION` in the header
/// it was built with). A static string.
#[unsafe(no_mangle)]
pub extern "C" fn hsfc_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: a valid NUL-terminated string owned by this thread.
        unsafe { CStr::from_ptr(hsfc_last_error_message()) }
            .to_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_panic_becomes_a_code_and_keeps_its_message() {
        let rc = guard(|| panic!("boom {}", 42));
        assert_eq!(rc, HSFC_ERR_PANIC);
        assert_eq!(last(), "internal error (panic in hsfc): boom 42");
        let rc = guard(|| std::panic::panic_any(7u8));
        assert_eq!(rc, HSFC_ERR_PANIC);
        assert_eq!(
            last(),
            "internal error (panic in hsfc): a panic without a message"
        );
        assert_eq!(guard_value(5, || panic!("x")), 5);
    }

    #[test]
    fn negative_and_unsupported_dims_share_the_dimension_code() {
        for (dim, msg) in [
            (-3, "dimension -3 is not supported (2 or 3)"),
            (4, "dimension 4 is not supported (2 or 3)"),
        ] {
            let f = check_dim(dim).err().unwrap();
            assert_eq!(f.code(), HSFC_ERR_DIMENSION);
            assert_eq!(f.message(), msg);
        }
    }

    #[test]
    fn a_message_with_nul_bytes_is_kept_readable() {
        set_last_error("a\0b".into());
        assert_eq!(last(), "a\\0b");
    }
}
