//! Large arrays on transparent huge pages.
//!
//! A `Zoltan_LB_Partition` of 10^6 points touches some 35 MB of fresh memory per call (the
//! query arrays, the partitioners' work arrays, the messages and the lists), and on 4 KiB pages
//! every first touch is a page fault: some 9000 per call and rank, about 3.5 µs each on the
//! virtual machines we measured on, a quarter of the call's CPU time. Zoltan pays the same
//! faults for its own arrays. A 2 MiB page is faulted (and zeroed) once for 512 small ones, so
//! every allocation of at least [`MIN_BYTES`] is placed on whole 2 MiB pages the kernel is
//! asked to back with huge pages (`madvise(MADV_HUGEPAGE)`, which the default
//! `transparent_hugepage=madvise` honours; where huge pages are off the advice is refused and
//! the memory is ordinary). The cost is memory: an allocation is rounded up to a multiple of
//! 2 MiB (at most four times its size, at [`MIN_BYTES`]; the lists of 10^6 objects over two
//! processes are arrays of 1 MB).
//!
//! Two allocators use this: [`HugeAlloc`], the Rust global allocator of this library (its
//! large buffers are mapped with `mmap` and given back with `munmap`), and [`c_alloc`], for
//! the arrays handed to C, which the application frees with `free` (they come from
//! `posix_memalign`).
//!
//! Within an entry point ([`within_call`]) a large buffer freed is kept, its pages already
//! faulted, for the next large allocation of the call (the coordinates, dropped once
//! partitioned, hold the import messages): at most [`KEPT`] mappings of [`KEPT_BYTES`] in all,
//! given back when the entry point returns, so nothing is held between calls.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A huge page.
const HUGE: usize = 2 << 20;
/// The smallest allocation placed on huge pages.
pub(crate) const MIN_BYTES: usize = 512 << 10;

/// `size` rounded up to whole huge pages (`None` on overflow).
fn rounded(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(HUGE)
}

/// Asks for huge pages on `len` bytes from `p` (both multiples of [`HUGE`]); a refusal
/// leaves ordinary pages.
///
/// # Safety
/// `p..p + len` is a mapping this library owns and nothing has touched yet.
unsafe fn advise(p: *mut u8, len: usize) {
    // SAFETY: the caller's contract; madvise only changes how the range is backed.
    unsafe { libc::madvise(p.cast(), len, libc::MADV_HUGEPAGE) };
}

/// Whether an allocation of `layout` goes on huge pages.
fn is_big(layout: Layout) -> bool {
    layout.size() >= MIN_BYTES && layout.align() <= HUGE
}

/// Fresh zeroed memory of `len` bytes (a multiple of [`HUGE`]) aligned to [`HUGE`], advised
/// for huge pages; NULL when the mapping fails.
fn map(len: usize) -> *mut u8 {
    let Some(span) = len.checked_add(HUGE) else {
        return std::ptr::null_mut();
    };
    // SAFETY: an anonymous private mapping at an address of the kernel's choice.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE);
    let (head, tail) = (aligned - start, start + span - (aligned + len));
    // SAFETY: the head and the tail are the parts of the new mapping outside the aligned
    // `len` bytes kept; nothing else refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    let q = aligned as *mut u8;
    // SAFETY: the kept range of the new mapping, untouched.
    unsafe { advise(q, len) };
    q
}

/// The most freed mappings kept within a call.
const KEPT: usize = 8;
/// The most bytes kept within a call.
const KEPT_BYTES: usize = 256 << 20;

/// Large mappings freed within calls, kept for reuse.
struct Kept {
    /// Entry points running now: freed mappings are kept only while one is.
    active: AtomicUsize,
    /// `(address, length)` of each (length 0: a free slot).
    maps: Mutex<[(usize, usize); KEPT]>,
}

/// The mappings this library's allocator keeps.
static KEPT_MAPS: Kept = Kept::new();

impl Kept {
    const fn new() -> Kept {
        Kept {
            active: AtomicUsize::new(0),
            maps: Mutex::new([(0, 0); KEPT]),
        }
    }

    /// The kept mappings (nothing panics while they are locked; a poisoned lock is still
    /// sound).
    fn maps(&self) -> std::sync::MutexGuard<'_, [(usize, usize); KEPT]> {
        self.maps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` as one call: mappings freed meanwhile serve later allocations, and those
    /// still kept when the last call running returns are unmapped.
    fn within<R>(&self, f: impl FnOnce() -> R) -> R {
        /// Leaves the call, on return and on unwinding alike.
        struct Leave<'k>(&'k Kept);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                    self.0.trim();
                }
            }
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(self);
        f()
    }

    /// Unmaps every kept mapping.
    fn trim(&self) {
        let kept = std::mem::replace(&mut *self.maps(), [(0, 0); KEPT]);
        for (p, len) in kept {
            if len > 0 {
                // SAFETY: a kept mapping is owned by the cache alone, just taken out of it.
                unsafe { libc::munmap(p as *mut libc::c_void, len) };
            }
        }
    }

    /// A kept mapping of at least `len` bytes (the smallest), cut to `len` (the rest stays
    /// kept); NULL when none is.
    fn reuse(&self, len: usize) -> *mut u8 {
        let mut kept = self.maps();
        let best = (kept.iter_mut()).filter(|m| m.1 >= len).min_by_key(|m| m.1);
        match best {
            Some(m) => {
                let p = m.0;
                *m = if m.1 > len {
                    (p + len, m.1 - len)
                } else {
                    (0, 0)
                };
                p as *mut u8
            }
            None => std::ptr::null_mut(),
        }
    }

    /// Keeps the mapping of `len` bytes at `p`, being freed, when a call is running and
    /// there is room; else unmaps it.
    ///
    /// # Safety
    /// `p..p + len` is a mapping of this library that nothing refers to any more.
    unsafe fn give_back(&self, p: *mut u8, len: usize) {
        if self.active.load(Ordering::SeqCst) > 0 {
            let mut kept = self.maps();
            let bytes: usize = kept.iter().map(|m| m.1).sum();
            if bytes + len <= KEPT_BYTES
                && let Some(slot) = kept.iter_mut().find(|m| m.1 == 0)
            {
                *slot = (p as usize, len);
                return;
            }
        }
        // SAFETY: the caller's contract.
        unsafe { libc::munmap(p.cast(), len) };
    }
}

/// Runs `f`, one entry point of the library, as one call of [`HugeAlloc`]'s: large buffers
/// freed meanwhile serve its later allocations; none is kept once no entry point runs.
pub(crate) fn within_call<R>(f: impl FnOnce() -> R) -> R {
    KEPT_MAPS.within(f)
}

/// The global allocator of this library: [`System`], except that allocations of at least
/// [`MIN_BYTES`] are on whole huge pages: a mapping freed earlier in the same call (zeroed
/// again for `alloc_zeroed`), else a fresh one (zeroed by the kernel, so `alloc_zeroed`
/// writes nothing).
#[derive(Debug)]
pub(crate) struct HugeAlloc;

// SAFETY: small layouts go to `System` unchanged; a big one gets a mapping of at least its
// size, aligned to 2 MiB (≥ its alignment), given back by `dealloc` with the same rounded
// length: the decision depends on the layout alone, which `dealloc` receives unchanged. A kept
// mapping is owned by the cache alone until `reuse` hands it (or its first `len` bytes, a
// multiple of 2 MiB, so the rest stays aligned) to one allocation.
unsafe impl GlobalAlloc for HugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match rounded(layout.size()) {
            Some(len) if is_big(layout) => {
                let p = KEPT_MAPS.reuse(len);
                if p.is_null() { map(len) } else { p }
            }
            // SAFETY: forwarded with the caller's layout.
            _ => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match rounded(layout.size()) {
            Some(len) if is_big(layout) => {
                let p = KEPT_MAPS.reuse(len);
                if p.is_null() {
                    return map(len);
                }
                // SAFETY: `len >= layout.size()` bytes from `p` are this allocation's.
                unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                p
            }
            // SAFETY: forwarded with the caller's layout.
            _ => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match rounded(layout.size()) {
            // SAFETY: `ptr` is the start of a mapping of `len` bytes made by `alloc`, which
            // the caller gives up.
            Some(len) if is_big(layout) => unsafe { KEPT_MAPS.give_back(ptr, len) },
            // SAFETY: `ptr` came from `System` with this layout.
            _ => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        match (is_big(layout), is_big(new)) {
            // SAFETY: both small: `System`'s own allocation, resized by it.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // Still within the same huge pages.
            (true, true) if rounded(layout.size()) == rounded(new_size) => ptr,
            _ => {
                // SAFETY: a new block of the new layout, the old contents copied (as much of
                // them as fits), the old block freed with its layout.
                unsafe {
                    let q = self.alloc(new);
                    if !q.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    q
                }
            }
        }
    }
}

/// `bytes` bytes from C's heap (`free` releases them), aligned for any C type, zeroed when
/// `zero` (otherwise uninitialised: the caller writes every byte before anything reads it);
/// at least [`MIN_BYTES`] of them on huge pages. NULL when out of memory.
pub(crate) fn c_alloc(bytes: usize, zero: bool) -> *mut u8 {
    let Some(len) = rounded(bytes).filter(|_| bytes >= MIN_BYTES) else {
        // SAFETY: calloc or malloc of a non-zero count (callers pass `bytes > 0`).
        return unsafe {
            if zero {
                libc::calloc(bytes, 1)
            } else {
                libc::malloc(bytes)
            }
        }
        .cast();
    };
    let mut p: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: posix_memalign writes `p` on success; the alignment is a power of two and a
    // multiple of the pointer size.
    if unsafe { libc::posix_memalign(&mut p, HUGE, len) } != 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: the `len` bytes from `p` are this new allocation; the advice comes before the
    // first touch, the zeroing (if asked) after.
    unsafe {
        advise(p.cast(), len);
        if zero {
            std::ptr::write_bytes(p.cast::<u8>(), 0, bytes);
        }
    }
    p.cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_and_small_blocks_hold_their_contents_through_a_resize() {
        let a = HugeAlloc;
        for (from, to) in [
            (100, 200),
            (100, 3 << 20),
            (3 << 20, 100),
            (3 << 20, (3 << 20) + 5),
            (3 << 20, 5 << 20),
        ] {
            let layout = Layout::from_size_align(from, 8).unwrap();
            // SAFETY: a non-zero layout; the block is written within its size, resized, read
            // within the smaller size, and freed with its final layout.
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert!((0..from).all(|i| *p.add(i) == 0));
                for i in 0..from {
                    *p.add(i) = (i % 251) as u8;
                }
                let q = a.realloc(p, layout, to);
                assert!(!q.is_null());
                assert!((0..from.min(to)).all(|i| *q.add(i) == (i % 251) as u8));
                a.dealloc(q, Layout::from_size_align(to, 8).unwrap());
            }
        }
    }

    #[test]
    fn a_call_reuses_its_freed_mappings_and_keeps_none_after() {
        let kept = Kept::new();
        let p = map(6 << 20);
        assert!(!p.is_null());
        // SAFETY: the mapping is written within its length, then given up to the cache, whose
        // pieces are handed out once each.
        let (q, r, s) = kept.within(|| unsafe {
            std::ptr::write_bytes(p, 7, 6 << 20);
            kept.give_back(p, 6 << 20);
            let q = kept.reuse(HUGE);
            let r = kept.reuse(2 * HUGE);
            let s = kept.reuse(HUGE);
            // The pages as written: reused, not fresh.
            assert_eq!((*q, *r.add(2 * HUGE - 1)), (7, 7));
            kept.give_back(q, HUGE);
            kept.give_back(r, 2 * HUGE);
            (q as usize, r as usize, s)
        });
        // The first 2 MiB of the kept 6 MiB, then the next 4 MiB.
        assert_eq!((q, r), (p as usize, p as usize + HUGE));
        assert!(s.is_null(), "nothing left to reuse");
        assert!(
            kept.maps().iter().all(|m| m.1 == 0),
            "nothing kept after the call"
        );
        // Outside a call nothing is kept.
        let t = map(HUGE);
        // SAFETY: a fresh mapping, given up.
        unsafe { kept.give_back(t, HUGE) };
        assert!(kept.reuse(HUGE).is_null());
    }

    #[test]
    fn c_arrays_are_zeroed_and_freed_by_free() {
        for bytes in [8, MIN_BYTES, 3 << 20] {
            let p = c_alloc(bytes, true);
            assert!(!p.is_null());
            // SAFETY: `bytes` zeroed bytes from C's heap, freed once.
            unsafe {
                assert!((0..bytes).all(|i| *p.add(i) == 0));
                libc::free(p.cast());
            }
            let q = c_alloc(bytes, false);
            assert!(!q.is_null());
            // SAFETY: `bytes` bytes from C's heap, written before they are read, freed once.
            unsafe {
                std::ptr::write_bytes(q, 7, bytes);
                assert!((0..bytes).all(|i| *q.add(i) == 7));
                libc::free(q.cast());
            }
        }
    }
}
