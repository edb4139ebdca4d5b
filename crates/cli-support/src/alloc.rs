//! The benchmarks' counting allocator: live heap bytes of the process and of each thread,
//! with their peaks, resettable, so a bench measures the memory of one run whatever the
//! process did before. Allocations are charged to the thread that makes them (a message
//! buffer freed by its receiver stays charged to its sender until then).
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: cli_support::alloc::Counting = cli_support::alloc::Counting;
//! let base = cli_support::alloc::reset_peak();
//! let v = vec![0u8; 1 << 20];
//! assert!(cli_support::alloc::peak() - base >= 1 << 20);
//! # drop(v);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// The counting allocator: install it with `#[global_allocator]` in a bench binary.
#[derive(Debug, Clone, Copy)]
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
thread_local! {
    static T_LIVE: Cell<isize> = const { Cell::new(0) };
    static T_PEAK: Cell<isize> = const { Cell::new(0) };
}

fn charge(delta: isize) {
    let now = LIVE.fetch_add(delta, Relaxed) + delta;
    PEAK.fetch_max(now, Relaxed);
    let _ = T_LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = T_PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds GlobalAlloc's
// contract; the counting touches only atomics and thread-locals (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            charge(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(p, l) };
        charge(-(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            charge(new as isize - l.size() as isize);
        }
        q
    }
}

/// Live heap bytes of the process now.
pub fn live() -> isize {
    LIVE.load(Relaxed)
}

/// The process's peak since the last [`reset_peak`].
pub fn peak() -> isize {
    PEAK.load(Relaxed)
}

/// Starts a new peak at the live bytes of now, and returns them (the base to subtract).
pub fn reset_peak() -> isize {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    base
}

/// Starts counting the calling thread afresh (live and peak 0).
pub fn reset_thread() {
    T_LIVE.with(|l| l.set(0));
    T_PEAK.with(|p| p.set(0));
}

/// The calling thread's peak since [`reset_thread`].
pub fn thread_peak() -> isize {
    T_PEAK.with(Cell::get)
}
