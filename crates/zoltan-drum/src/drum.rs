//! DRUM's own C API (`include/drum.h`, written by hand and checked against this file by
//! `tests/header.rs`): machine files, the DRUM loop on the application's communicator
//! (monitoring agents, windows, powers, part sizes, the rebalance decision with its reason,
//! the hierarchical KEEP_CUTS repartition of caller-owned coordinates), and the decision
//! alone.
//!
//! Conventions (as `hsfc.h`'s): every function that can fail returns a status, `DRUM_OK` or
//! one `DRUM_ERR_*` code per kind of error; `drum_last_error_message` gives the full message
//! of the last failure on the calling thread (file:line:col for a machine file); opaque
//! handles freed explicitly; arrays owned by the caller; no panic crosses the boundary.

use comm::{Comm, MpiComm, RawComm};
use drum_loop::rebalance::{Observation, Policy, Reason};
use drum_loop::{DrumLoop, LoopConfig, RebalanceMode, Sizing};
use drum_model::{Machine, PowerConfig, PowerModel, static_powers};
use part_api::{Points, panic_message};
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

/// Success.
pub const DRUM_OK: c_int = 0;
/// The machine file does not load or validate (the message has file:line:col).
pub const DRUM_ERR_MACHINE: c_int = 1;
/// Powers or part sizes could not be computed.
pub const DRUM_ERR_POWER: c_int = 2;
/// The partitioner rejected the input (the message names the object).
pub const DRUM_ERR_PARTITION: c_int = 3;
/// A collective failed: MPI, or another rank failed.
pub const DRUM_ERR_COMM: c_int = 4;
/// The communicator's size is not the machine's rank count.
pub const DRUM_ERR_RANKS: c_int = 5;
/// The monitoring agent failed.
pub const DRUM_ERR_MONITOR: c_int = 6;
/// An argument has a bad value (the message says which).
pub const DRUM_ERR_INVALID: c_int = 7;
/// A required pointer is NULL.
pub const DRUM_ERR_NULL_POINTER: c_int = 100;
/// An output array is too small; nothing was written (the needed length is in the message).
pub const DRUM_ERR_BUFFER_TOO_SMALL: c_int = 101;
/// A panic was caught at the boundary (a bug, to be reported).
pub const DRUM_ERR_PANIC: c_int = 102;

/// `drum_options_t::sizing`: equal parts.
pub const DRUM_SIZING_UNIFORM: c_int = 0;
/// `drum_options_t::sizing`: the machine file's static ratings.
pub const DRUM_SIZING_STATIC: c_int = 1;
/// `drum_options_t::sizing`: the monitored powers (the default).
pub const DRUM_SIZING_MONITORED: c_int = 2;
/// `drum_options_t::rebalance`: as the policy decides (the default).
pub const DRUM_REBALANCE_POLICY: c_int = 0;
/// `drum_options_t::rebalance`: at every call.
pub const DRUM_REBALANCE_ALWAYS: c_int = 1;
/// `drum_options_t::rebalance`: never after the first.
pub const DRUM_REBALANCE_NEVER: c_int = 2;

/// Reason codes of a decision (`drum_report_t::reason`, [`drum_decide`]): the initial
/// partition.
pub const DRUM_REASON_INITIAL: c_int = 0;
/// Balanced: eff ≥ eff_min and no power drift.
pub const DRUM_REASON_BALANCED: c_int = 1;
/// eff < eff_min (Watts et al.).
pub const DRUM_REASON_IMBALANCE: c_int = 2;
/// The powers drifted since the partition was made.
pub const DRUM_REASON_POWER_DRIFT: c_int = 3;
/// Both.
pub const DRUM_REASON_IMBALANCE_AND_DRIFT: c_int = 4;
/// Gain ≤ γ·Cost (Lan et al.).
pub const DRUM_REASON_NOT_PROFITABLE: c_int = 5;
/// Forced by `DRUM_REBALANCE_ALWAYS`.
pub const DRUM_REASON_ALWAYS: c_int = 6;
/// Forced by `DRUM_REBALANCE_NEVER`.
pub const DRUM_REASON_NEVER: c_int = 7;
/// A node's resident memory would exceed its physical memory (Watts et al. 1998).
pub const DRUM_REASON_MEMORY: c_int = 8;

/// A validated machine (`drum_machine_t`).
#[derive(Debug)]
pub struct DrumMachine {
    machine: Machine,
}

/// One rank's DRUM loop on a communicator (`drum_loop_t`).
#[derive(Debug)]
pub struct DrumLoopHandle {
    comm: MpiComm,
    inner: DrumLoop,
}

/// Settings of [`drum_start`] (`drum_options_t`); fill with [`drum_options_default`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrumOptions {
    /// `DRUM_SIZING_*`.
    pub sizing: c_int,
    /// `DRUM_REBALANCE_*`.
    pub rebalance: c_int,
    /// Weight of communication power in [0, 1] (DRUM 2005 §3.3).
    pub w_comm: f64,
    /// Rebalance when eff = U_avg/U_max falls below this (Watts et al.), in (0, 1].
    pub eff_min: f64,
    /// Lan et al.'s γ: rebalance only when Gain > γ·Cost.
    pub gamma: f64,
    /// Rebalance when a power share drifted by more than this fraction.
    pub drift: f64,
    /// The agent's sampling period, milliseconds (≥ 1).
    pub period_ms: c_int,
}

/// What one rebalance point did (`drum_report_t`); NaN where a figure does not apply.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrumReport {
    /// 1 if the objects were repartitioned.
    pub rebalanced: c_int,
    /// `DRUM_REASON_*`.
    pub reason: c_int,
    /// Watts' eff of the loads held before against the new part sizes.
    pub eff: f64,
    /// The threshold.
    pub eff_min: f64,
    /// Largest relative change of a power share since the partition was made.
    pub drift: f64,
    /// Lan's gain (s).
    pub gain_s: f64,
    /// Lan's cost α + βW + δ (s).
    pub cost_s: f64,
    /// Seconds since the previous rebalance point.
    pub window_s: f64,
    /// Seconds of measurement the powers came from (0: the powers were not renewed).
    pub measured_s: f64,
    /// Weight that changed rank.
    pub moved_weight: f64,
}

/// Why a call failed.
enum Failure {
    Code(c_int, String),
    Panic(String),
}

fn machine_code(e: &drum_model::Error) -> c_int {
    match e {
        drum_model::Error::Invalid { .. } | drum_model::Error::Io { .. } => DRUM_ERR_MACHINE,
        drum_model::Error::Monitor(_) | drum_model::Error::Proc { .. } => DRUM_ERR_MONITOR,
        drum_model::Error::Parameter(_) => DRUM_ERR_INVALID,
        _ => DRUM_ERR_POWER,
    }
}

impl From<drum_model::Error> for Failure {
    fn from(e: drum_model::Error) -> Self {
        Failure::Code(machine_code(&e), e.to_string())
    }
}

impl From<hier_part::Error> for Failure {
    fn from(e: hier_part::Error) -> Self {
        use hier_part::Error as E;
        let code = match &e {
            E::Model(m) => machine_code(m),
            E::Comm(_) | E::InvalidOnOtherRank { .. } => DRUM_ERR_COMM,
            E::RankCount { .. } => DRUM_ERR_RANKS,
            _ => DRUM_ERR_PARTITION,
        };
        Failure::Code(code, e.to_string())
    }
}

impl From<drum_loop::Error> for Failure {
    fn from(e: drum_loop::Error) -> Self {
        use drum_loop::Error as E;
        let code = match e {
            E::Partition(e) => return e.into(),
            E::Model(m) => return m.into(),
            E::Comm(_) | E::DegenerateTimings(_) => DRUM_ERR_COMM,
            E::BadValue { .. } | E::Empty { .. } | E::LengthMismatch { .. } => DRUM_ERR_INVALID,
            _ => DRUM_ERR_PARTITION,
        };
        Failure::Code(code, e.to_string())
    }
}

impl From<comm::CommError> for Failure {
    fn from(e: comm::CommError) -> Self {
        Failure::Code(DRUM_ERR_COMM, e.to_string())
    }
}

fn null(what: &str) -> Failure {
    Failure::Code(DRUM_ERR_NULL_POINTER, format!("{what} is NULL"))
}

fn invalid(message: String) -> Failure {
    Failure::Code(DRUM_ERR_INVALID, message)
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs one entry point: a failure leaves its message for [`drum_last_error_message`] and
/// returns its code; a panic becomes [`DRUM_ERR_PANIC`].
fn guard(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let failure = match crate::huge::within_call(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(())) => return DRUM_OK,
        Ok(Err(e)) => e,
        Err(p) => Failure::Panic(panic_message(p)),
    };
    let (code, msg) = match failure {
        Failure::Code(c, m) => (c, m),
        Failure::Panic(m) => (
            DRUM_ERR_PANIC,
            format!("internal error (panic in drum-rs): {m}"),
        ),
    };
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
    code
}

/// `len` values at `p` (NULL allowed when `len` is 0).
///
/// # Safety
/// With `len > 0`, `p` is NULL or holds `len` values valid for `'a`.
unsafe fn slice<'a, T>(p: *const T, len: usize, what: &str) -> Result<&'a [T], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Copies `v` into the caller's `out[0..len]`, which must hold `v.len()` values.
///
/// # Safety
/// `out` is NULL or holds `len` writable values.
unsafe fn copy_out(v: &[f64], out: *mut f64, len: usize) -> Result<(), Failure> {
    if len < v.len() {
        return Err(Failure::Code(
            DRUM_ERR_BUFFER_TOO_SMALL,
            format!("the array holds {len} values; {} are needed", v.len()),
        ));
    }
    if out.is_null() {
        return Err(null("the output array"));
    }
    // SAFETY: the caller's contract; v.len() ≤ len.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len()) };
    Ok(())
}

/// Reads and validates a machine file (DESIGN §2's format). `DRUM_ERR_MACHINE` with
/// `file:line:col: what` in the message when it does not load.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_machine_read(
    path: *const c_char,
    out: *mut *mut DrumMachine,
) -> c_int {
    guard(|| {
        if path.is_null() || out.is_null() {
            return Err(null("path or out"));
        }
        // SAFETY: the caller's contract.
        let path = unsafe { CStr::from_ptr(path) }
            .to_string_lossy()
            .into_owned();
        let machine = Machine::from_file(&path)?;
        // SAFETY: writable (the caller's contract).
        unsafe { out.write(Box::into_raw(Box::new(DrumMachine { machine }))) };
        Ok(())
    })
}

/// The machine's rank count (one process per rank; DESIGN §2 numbering).
///
/// # Safety
/// `m` is NULL or live; `n` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_machine_num_ranks(m: *const DrumMachine, n: *mut usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let m = unsafe { m.as_ref() }.ok_or_else(|| null("the machine"))?;
        if n.is_null() {
            return Err(null("n"));
        }
        // SAFETY: non-NULL and writable.
        unsafe { n.write(m.machine.num_ranks()) };
        Ok(())
    })
}

/// Frees a machine (NULL is ignored).
///
/// # Safety
/// `m` is NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_machine_free(m: *mut DrumMachine) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !m.is_null() {
            // SAFETY: a live handle from drum_machine_read, freed once.
            drop(unsafe { Box::from_raw(m) });
        }
    }));
}

/// The part size of each rank from the machine's static ratings (DRUM 2005 §3.3 with
/// `w_comm`), into `sizes[0 .. ranks]` (`len` ≥ the rank count).
///
/// # Safety
/// `m` is NULL or live; `sizes` is NULL or holds `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_static_part_sizes(
    m: *const DrumMachine,
    w_comm: f64,
    sizes: *mut f64,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let m = unsafe { m.as_ref() }.ok_or_else(|| null("the machine"))?;
        let cfg = PowerConfig {
            model: PowerModel::Drum { w_comm },
            ..PowerConfig::default()
        };
        let p = static_powers(&m.machine, &cfg)?;
        // SAFETY: the caller's contract.
        unsafe { copy_out(&p.parts, sizes, len) }
    })
}

/// The default options: monitored sizes, the policy decides (eff_min 0.9, γ 2, drift 0.1),
/// w_comm 0, a 50 ms sampling period.
///
/// # Safety
/// `o` is NULL (ignored) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_options_default(o: *mut DrumOptions) {
    let p = Policy::default();
    let d = DrumOptions {
        sizing: DRUM_SIZING_MONITORED,
        rebalance: DRUM_REBALANCE_POLICY,
        w_comm: 0.0,
        eff_min: p.eff_min,
        gamma: p.gamma,
        drift: p.drift_threshold,
        period_ms: 50,
    };
    if !o.is_null() {
        // SAFETY: non-NULL and writable.
        unsafe { o.write(d) };
    }
}

fn loop_config(o: &DrumOptions) -> Result<LoopConfig, Failure> {
    let sizing = match o.sizing {
        DRUM_SIZING_UNIFORM => Sizing::Uniform,
        DRUM_SIZING_STATIC => Sizing::Static,
        DRUM_SIZING_MONITORED => Sizing::Monitored,
        s => return Err(invalid(format!("sizing {s} is not a DRUM_SIZING_* value"))),
    };
    let rebalance = match o.rebalance {
        DRUM_REBALANCE_POLICY => RebalanceMode::Policy,
        DRUM_REBALANCE_ALWAYS => RebalanceMode::Always,
        DRUM_REBALANCE_NEVER => RebalanceMode::Never,
        r => {
            return Err(invalid(format!(
                "rebalance {r} is not a DRUM_REBALANCE_* value"
            )));
        }
    };
    let period = u64::try_from(o.period_ms)
        .ok()
        .filter(|&p| p >= 1)
        .ok_or_else(|| invalid(format!("period_ms {} is not >= 1", o.period_ms)))?;
    let valid = o.eff_min > 0.0 && o.eff_min <= 1.0 && o.gamma >= 0.0 && o.drift >= 0.0;
    if !valid {
        return Err(invalid(format!(
            "eff_min {} must be in (0, 1], gamma {} and drift {} >= 0",
            o.eff_min, o.gamma, o.drift
        )));
    }
    Ok(LoopConfig {
        sizing,
        rebalance,
        power: PowerConfig {
            model: PowerModel::Drum { w_comm: o.w_comm },
            ..PowerConfig::default()
        },
        policy: Policy {
            eff_min: o.eff_min,
            gamma: o.gamma,
            drift_threshold: o.drift,
        },
        period: Duration::from_millis(period),
        ..LoopConfig::default()
    })
}

/// Starts the DRUM loop of this rank on (a duplicate of) `comm`, whose ranks are the
/// machine's (collective): this rank's monitoring agent (measuring the calling thread), and
/// α, β of the link between the root's groups. `options` NULL: the defaults. The machine is
/// copied: free it when you like.
///
/// # Safety
/// `comm` is a live communicator; `m` NULL or live; `options` NULL or readable; `out` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_start(
    comm: RawComm,
    m: *const DrumMachine,
    options: *const DrumOptions,
    out: *mut *mut DrumLoopHandle,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live machine (the caller's contract).
        let m = unsafe { m.as_ref() }.ok_or_else(|| null("the machine"))?;
        if out.is_null() {
            return Err(null("out"));
        }
        let mut o = std::mem::MaybeUninit::uninit();
        // SAFETY: NULL or readable (the caller's contract).
        let o = match unsafe { options.as_ref() } {
            Some(o) => *o,
            // SAFETY: drum_options_default writes every field of the uninitialised value.
            None => unsafe {
                drum_options_default(o.as_mut_ptr());
                o.assume_init()
            },
        };
        let cfg = loop_config(&o)?;
        // SAFETY: a live communicator of this process's MPI (the caller's contract).
        let comm = unsafe { MpiComm::from_raw(comm) }?;
        let inner = DrumLoop::start(&comm, m.machine.clone(), cfg)?;
        // SAFETY: checked non-NULL above, and writable (the caller's contract).
        unsafe { out.write(Box::into_raw(Box::new(DrumLoopHandle { comm, inner }))) };
        Ok(())
    })
}

/// The part sizes in use, one per rank, into `sizes[0 .. ranks]`.
///
/// # Safety
/// `l` is NULL or live; `sizes` is NULL or holds `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_part_sizes(
    l: *const DrumLoopHandle,
    sizes: *mut f64,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { l.as_ref() }.ok_or_else(|| null("the loop"))?;
        // SAFETY: sizes is NULL or holds len writable values (the caller's contract).
        unsafe { copy_out(l.inner.part_sizes(), sizes, len) }
    })
}

/// Measures without deciding or partitioning (collective): cuts the agents' windows since
/// the last call, computes the monitored powers, and writes the monitored part sizes (one
/// per rank) into `sizes`; under `DRUM_SIZING_MONITORED` they become the sizes in use.
/// `*measured_s` (NULL allowed) gets the seconds of measurement they came from (0: the window
/// was shorter than 30 ms or sensing was not due; the sizes stay as they were).
///
/// # Safety
/// `l` is NULL or live; `sizes` NULL or holds `len` writable values; `measured_s` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_measure(
    l: *mut DrumLoopHandle,
    sizes: *mut f64,
    len: usize,
    measured_s: *mut f64,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live loop, used by nothing else during the call (the caller's contract).
        let l = unsafe { l.as_mut() }.ok_or_else(|| null("the loop"))?;
        if len < l.comm.size() {
            return Err(Failure::Code(
                DRUM_ERR_BUFFER_TOO_SMALL,
                format!("the array holds {len} values; {} are needed", l.comm.size()),
            ));
        }
        let s = l.inner.measure(&l.comm)?;
        // SAFETY: sizes is NULL or holds len writable values (the caller's contract).
        unsafe { copy_out(&s.monitored_sizes, sizes, len) }?;
        if !measured_s.is_null() {
            // SAFETY: non-NULL, and writable (the caller's contract).
            unsafe { measured_s.write(s.measured_s) };
        }
        Ok(())
    })
}

fn reason_code(reason: &str) -> c_int {
    match reason {
        "initial" => DRUM_REASON_INITIAL,
        "balanced" => DRUM_REASON_BALANCED,
        "imbalance" => DRUM_REASON_IMBALANCE,
        "power drift" => DRUM_REASON_POWER_DRIFT,
        "imbalance and power drift" => DRUM_REASON_IMBALANCE_AND_DRIFT,
        "not profitable" => DRUM_REASON_NOT_PROFITABLE,
        "always" => DRUM_REASON_ALWAYS,
        "memory" => DRUM_REASON_MEMORY,
        _ => DRUM_REASON_NEVER,
    }
}

/// The rebalance point (collective; DRUM 2005 Fig. 2): the window since the last call →
/// powers → part sizes → the policy's decision (with its reason) → if it says so, the
/// hierarchical repartition of this rank's `n` objects (`dim` coordinates each, interleaved;
/// `weights` NULL for unit weights) along the machine tree, starting from the previous cuts
/// (KEEP_CUTS). `parts[i]` holds object i's current rank on entry and its new rank on
/// return. `report` (NULL allowed) gets the decision and its figures.
///
/// # Safety
/// `l` is NULL or live; `coords` holds `n·dim` values, `weights` NULL or `n`, `parts` `n`
/// writable values; `report` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_rebalance(
    l: *mut DrumLoopHandle,
    coords: *const f64,
    n: usize,
    dim: c_int,
    weights: *const f64,
    parts: *mut u32,
    report: *mut DrumReport,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or a live loop, used by nothing else during the call (the caller's contract).
        let l = unsafe { l.as_mut() }.ok_or_else(|| null("the loop"))?;
        let d = usize::try_from(dim)
            .ok()
            .filter(|d| (1..=3).contains(d))
            .ok_or_else(|| invalid(format!("dim {dim} is not 1, 2 or 3")))?;
        // SAFETY: coords holds n·dim values (the caller's contract).
        let coords = unsafe { slice(coords, n * d, "coords") }?;
        let weights = if weights.is_null() {
            None
        } else {
            // SAFETY: a non-NULL weights holds n values (the caller's contract).
            Some(unsafe { slice(weights, n, "weights") }?)
        };
        if n > 0 && parts.is_null() {
            return Err(null("parts"));
        }
        let parts: &mut [u32] = if n == 0 {
            &mut []
        } else {
            // SAFETY: n > 0, parts checked non-NULL above and holding n writable values (the caller's contract).
            unsafe { std::slice::from_raw_parts_mut(parts, n) }
        };
        let r = l
            .inner
            .rebalance(&l.comm, Points::new(coords, d, weights), parts)?;
        if !report.is_null() {
            let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
            let rep = DrumReport {
                rebalanced: c_int::from(r.decision.rebalance),
                reason: reason_code(&r.decision.reason),
                eff: r.decision.eff,
                eff_min: r.decision.eff_min,
                drift: opt(r.decision.drift),
                gain_s: opt(r.decision.gain_s),
                cost_s: opt(r.decision.cost_s),
                window_s: r.window_s,
                measured_s: r.measured_s,
                moved_weight: r.moved_weight,
            };
            // SAFETY: non-NULL, and writable (the caller's contract).
            unsafe { report.write(rep) };
        }
        Ok(())
    })
}

/// What the last migration cost, for Lan's test at the next rebalance point: `seconds` of
/// repartition and migration, `bytes` moved for `weight` moved. Every rank must pass the
/// same figures (e.g. reduced with MPI_MAX and MPI_SUM).
///
/// # Safety
/// `l` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_record_migration(
    l: *mut DrumLoopHandle,
    seconds: f64,
    bytes: f64,
    weight: f64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = unsafe { l.as_mut() }.ok_or_else(|| null("the loop"))?;
        l.inner.record_migration(seconds, bytes, weight);
        Ok(())
    })
}

/// Stops the agent and frees the loop (NULL is ignored); `DRUM_ERR_MONITOR` if the agent
/// had failed (the loop is freed all the same).
///
/// # Safety
/// `l` is NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_stop(l: *mut DrumLoopHandle) -> c_int {
    guard(|| {
        if l.is_null() {
            return Ok(());
        }
        // SAFETY: a live handle from drum_start, freed once.
        let b = unsafe { Box::from_raw(l) };
        b.inner.stop()?;
        Ok(())
    })
}

/// The decision alone (Watts et al.): with `loads[g]` the work each of `n` ranks did and
/// `capacities[g]` their powers (or part sizes), eff = U_avg / U_max with U_g = L_g / C_g;
/// rebalance when eff < `eff_min`. Writes 1 or 0 to `*rebalance`, a `DRUM_REASON_*` to
/// `*reason` and eff to `*eff` (each NULL allowed).
///
/// # Safety
/// `loads` and `capacities` hold `n` values; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drum_decide(
    loads: *const f64,
    capacities: *const f64,
    n: usize,
    eff_min: f64,
    rebalance: *mut c_int,
    reason: *mut c_int,
    eff: *mut f64,
) -> c_int {
    guard(|| {
        // SAFETY: loads holds n values (the caller's contract).
        let loads = unsafe { slice(loads, n, "loads") }?;
        // SAFETY: capacities holds n values (the caller's contract).
        let capacities = unsafe { slice(capacities, n, "capacities") }?;
        let policy = Policy {
            eff_min,
            ..Policy::default()
        };
        let d = policy.decide(&Observation {
            loads,
            capacities,
            partition_powers: None,
            step_time: None,
            migration: None,
            memory: None,
        })?;
        let code = match d.reason {
            Reason::Balanced => DRUM_REASON_BALANCED,
            Reason::Imbalance => DRUM_REASON_IMBALANCE,
            Reason::PowerDrift => DRUM_REASON_POWER_DRIFT,
            Reason::ImbalanceAndDrift => DRUM_REASON_IMBALANCE_AND_DRIFT,
            Reason::NotProfitable => DRUM_REASON_NOT_PROFITABLE,
            Reason::Memory => DRUM_REASON_MEMORY,
        };
        // SAFETY: each output is NULL (skipped) or writable (the caller's contract).
        unsafe {
            if !rebalance.is_null() {
                rebalance.write(c_int::from(d.rebalance));
            }
            if !reason.is_null() {
                reason.write(code);
            }
            if !eff.is_null() {
                eff.write(d.eff);
            }
        }
        Ok(())
    })
}

/// The name of a reason code (`"imbalance"`), or `"unknown"`. A static string.
#[unsafe(no_mangle)]
pub extern "C" fn drum_reason_name(reason: c_int) -> *const c_char {
    let s: &'static [u8] = match reason {
        DRUM_REASON_INITIAL => b"initial\0",
        DRUM_REASON_BALANCED => b"balanced\0",
        DRUM_REASON_IMBALANCE => b"imbalance\0",
        DRUM_REASON_POWER_DRIFT => b"power drift\0",
        DRUM_REASON_IMBALANCE_AND_DRIFT => b"imbalance and power drift\0",
        DRUM_REASON_NOT_PROFITABLE => b"not profitable\0",
        DRUM_REASON_ALWAYS => b"always\0",
        DRUM_REASON_NEVER => b"never\0",
        DRUM_REASON_MEMORY => b"memory\0",
        _ => b"unknown\0",
    };
    s.as_ptr().cast()
}

/// The full message of the last failed call on this thread (`""` if none). Owned by the
/// library; valid until the next failure on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn drum_last_error_message() -> *const c_char {
    catch_unwind(|| LAST_ERROR.with(|l| l.borrow().as_ptr())).unwrap_or(std::ptr::null())
}
