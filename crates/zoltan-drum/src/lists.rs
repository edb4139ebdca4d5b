//! Zoltan's import and export lists, built in the C arrays they are returned in (from C's
//! heap, freed by `Zoltan_LB_Free_Part`).

use crate::error::Error;
use crate::laps::Laps;
use crate::params::ReturnLists;
use crate::query::ZoltanIdType;
use crate::zz::{Assignment, agreed_on};
use comm::wire::{Reader, WireError, Writer};
use comm::{Comm, MpiComm, ReduceOp, Scalar};
use std::ffi::c_int;
use std::mem::MaybeUninit;

/// An array in C's heap (`free` releases it), as `Zoltan_LB_Free_Part` frees it: the lists are
/// built in place and handed to the caller without a copy ([`CBuf::into_raw`]). A
/// `CBuf<MaybeUninit<T>>` ([`CBuf::uninit`]) is one being filled; [`CBuf::assume_init`] makes it
/// a `CBuf<T>` once every value is written.
#[derive(Debug)]
pub(crate) struct CBuf<T: Copy> {
    /// NULL when empty.
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> CBuf<T> {
    /// `len` values in C's heap, zeroed when `zero`, NULL when `len` is 0.
    fn alloc(len: usize, zero: bool) -> Result<*mut T, Error> {
        if len == 0 {
            return Ok(std::ptr::null_mut());
        }
        let bytes = len.checked_mul(std::mem::size_of::<T>());
        // Bytes in C's heap, aligned for any C type (large arrays on huge pages).
        let ptr = bytes
            .map_or(std::ptr::null_mut(), |b| crate::huge::c_alloc(b, zero))
            .cast::<T>();
        if ptr.is_null() {
            return Err(Error::Memory {
                bytes: bytes.unwrap_or(usize::MAX),
            });
        }
        Ok(ptr)
    }

    /// `len` zeroed values (all-zero bits are a valid value of the integer types used here).
    pub(crate) fn zeroed(len: usize) -> Result<CBuf<T>, Error> {
        Ok(CBuf {
            ptr: CBuf::<T>::alloc(len, true)?,
            len,
        })
    }

    /// `len` values not written yet (nothing spent on zeroing them).
    pub(crate) fn uninit(len: usize) -> Result<CBuf<MaybeUninit<T>>, Error> {
        Ok(CBuf {
            ptr: CBuf::<T>::alloc(len, false)?.cast(),
            len,
        })
    }

    /// A copy of `v`.
    pub(crate) fn from_slice(v: &[T]) -> Result<CBuf<T>, Error> {
        let mut b = CBuf::uninit(v.len())?;
        b.write_copy_of_slice(v);
        // SAFETY: the copy wrote all `v.len()` values.
        Ok(unsafe { b.assume_init() })
    }

    /// The array for the caller, who frees it with `free` (NULL when empty).
    pub(crate) fn into_raw(self) -> *mut T {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl<T: Copy> CBuf<MaybeUninit<T>> {
    /// The array as initialised values.
    ///
    /// # Safety
    /// Every one of the `len` values has been written.
    pub(crate) unsafe fn assume_init(self) -> CBuf<T> {
        let (ptr, len) = (self.ptr.cast::<T>(), self.len);
        std::mem::forget(self);
        CBuf { ptr, len }
    }
}

impl<T: Copy> std::ops::Deref for CBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: `ptr` holds `len` values of `T` owned by `self`, initialised (zeroed or
        // written; a `MaybeUninit` needs no initialisation).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for CBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: as in `deref`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Copy> Drop for CBuf<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is NULL or from C's heap (`huge::c_alloc`), freed once, here.
        unsafe { libc::free(self.ptr.cast()) };
    }
}

impl<T: Copy> Clone for CBuf<T> {
    fn clone(&self) -> CBuf<T> {
        CBuf::from_slice(self).expect("memory for a copy of a list")
    }
}

/// One list: ids, processes, parts (`ZOLTAN_ID_PTR`s and `int*`s of the C API), in C's heap.
#[derive(Debug, Clone)]
pub(crate) struct List {
    pub gids: CBuf<ZoltanIdType>,
    pub lids: CBuf<ZoltanIdType>,
    pub procs: CBuf<c_int>,
    pub parts: CBuf<c_int>,
}

impl List {
    pub(crate) fn len(&self) -> usize {
        self.procs.len()
    }
}

/// A [`List`] being filled: its arrays allocated, not written yet.
struct Filling {
    gids: CBuf<MaybeUninit<ZoltanIdType>>,
    lids: CBuf<MaybeUninit<ZoltanIdType>>,
    procs: CBuf<MaybeUninit<c_int>>,
    parts: CBuf<MaybeUninit<c_int>>,
}

impl Filling {
    /// A list of `n` entries, `gid` and `lid` words per id.
    fn new(n: usize, gid: usize, lid: usize) -> Result<Filling, Error> {
        Ok(Filling {
            gids: CBuf::uninit(n * gid)?,
            lids: CBuf::uninit(n * lid)?,
            procs: CBuf::uninit(n)?,
            parts: CBuf::uninit(n)?,
        })
    }

    /// The list, filled.
    ///
    /// # Safety
    /// Every value of the four arrays has been written.
    unsafe fn assume_init(self) -> List {
        // SAFETY: the caller's contract.
        unsafe {
            List {
                gids: self.gids.assume_init(),
                lids: self.lids.assume_init(),
                procs: self.procs.assume_init(),
                parts: self.parts.assume_init(),
            }
        }
    }
}

/// The lists `RETURN_LISTS` asks for (`None`: not returned, count −1 in C).
#[derive(Debug, Default)]
pub(crate) struct Lists {
    pub import: Option<List>,
    pub export: Option<List>,
    /// Whether any object changed part or process on any rank.
    pub changes: bool,
}

fn int(x: usize) -> c_int {
    c_int::try_from(x).expect("processes and parts are counted in C ints")
}

/// The objects that change part or process (Zoltan's export list), and with
/// `RETURN_LISTS=PARTS` every object.
fn exports(a: &Assignment, gid: usize, lid: usize, all: bool) -> Result<List, Error> {
    let (me, parts) = (a.me, &a.parts);
    // Parts are processes: an object moves when its part is not this process.
    let identity = a.dist.identity && a.input_part == me;
    let listed = |i: usize| {
        all || (!a.stay
            && if identity {
                parts[i] as usize != me
            } else {
                parts[i] as usize != a.input_part || a.proc(i) != me
            })
    };
    let n = if all {
        a.objects.n
    } else if identity && !a.stay {
        parts.iter().filter(|&&p| p as usize != me).count()
    } else {
        (0..a.objects.n).filter(|&i| listed(i)).count()
    };
    let mut l = Filling::new(n, gid, lid)?;
    let (gids, lids) = (&a.objects.gids, &a.objects.lids);
    // Entry j of the list is the j-th listed object, written whole (its gid and lid words,
    // process and part) in one of the two passes below, which visit the `n` listed objects.
    let mut j = 0;
    if identity && !a.stay && !all && gid == 1 && lid == 1 {
        // The common case in one tight pass: an object moves when its part is not this
        // process, and its part is its process. Branch-free (movers and stayers interleave
        // at random): each object is written at the next free entry, which only a mover
        // keeps; once the `n` movers are written, the rest stay.
        let (eg, el) = (&mut *l.gids, &mut *l.lids);
        let (ep, et) = (&mut *l.procs, &mut *l.parts);
        for (i, &p) in parts.iter().enumerate() {
            if j == n {
                break;
            }
            let q = p as c_int;
            eg[j].write(gids[i]);
            el[j].write(lids[i]);
            ep[j].write(q);
            et[j].write(q);
            j += usize::from(p as usize != me);
        }
    } else {
        for i in (0..a.objects.n).filter(|&i| listed(i)) {
            if gid == 1 && lid == 1 {
                l.gids[j].write(gids[i]);
                l.lids[j].write(lids[i]);
            } else {
                l.gids[j * gid..][..gid].write_copy_of_slice(&gids[i * gid..][..gid]);
                l.lids[j * lid..][..lid].write_copy_of_slice(&lids[i * lid..][..lid]);
            }
            l.procs[j].write(int(if identity {
                parts[i] as usize
            } else {
                a.proc(i)
            }));
            l.parts[j].write(parts[i] as c_int);
            j += 1;
        }
    }
    // The passes count the objects `n` counted (an index past `n` would have panicked above).
    assert_eq!(j, n, "export list: entries written");
    // SAFETY: entries 0..n were each written whole (the comment above the passes), and j == n.
    Ok(unsafe { l.assume_init() })
}

/// The import list from the export lists of every rank (collective: one alltoallv). The
/// message to a rank, in `comm::wire`'s format, holds the records of its objects in export
/// order: a flag byte (1: their parts follow; 0: every part is the receiving rank's number, as
/// when parts are processes), then their global ids and their local ids (`u32` words each),
/// then with the flag their parts (`i32`). No records, no message.
pub(crate) fn invert(comm: &MpiComm, ex: &List, gid: usize, lid: usize) -> Result<List, Error> {
    let size = comm.size();
    let order = by_destination(ex, size)?;
    // Whether each message carries its parts, and the bytes of each.
    let with_parts: Vec<bool> = (order.groups().enumerate())
        .map(|(d, mine)| match mine {
            // One comparison per entry (no early exit, so that it vectorises).
            Group::Range(r) => (ex.parts[r].iter()).fold(false, |a, &p| a | (p as usize != d)),
            Group::Picked(_) => mine.clone().any(|i| ex.parts[i] as usize != d),
        })
        .collect();
    let byte_counts: Vec<usize> = (order.groups().zip(&with_parts))
        .map(|(mine, &p)| match mine.count_left() {
            0 => 0,
            k => 1 + 4 * k * (gid + lid + usize::from(p)),
        })
        .collect();
    let mut w = Writer::with_capacity(byte_counts.iter().sum());
    for (d, mine) in order.groups().enumerate() {
        if mine.count_left() == 0 {
            continue;
        }
        let before = w.len();
        let parts = with_parts[d];
        w.u8(u8::from(parts));
        match &mine {
            // Consecutive entries: their words in three copies.
            Group::Range(r) => {
                w.scalars(&ex.gids[r.start * gid..r.end * gid]);
                w.scalars(&ex.lids[r.start * lid..r.end * lid]);
                if parts {
                    w.scalars(&ex.parts[r.clone()]);
                }
            }
            Group::Picked(_) => {
                for i in mine.clone() {
                    w.scalars(&ex.gids[i * gid..][..gid]);
                }
                for i in mine.clone() {
                    w.scalars(&ex.lids[i * lid..][..lid]);
                }
                if parts {
                    for i in mine {
                        w.i32(ex.parts[i]);
                    }
                }
            }
        }
        debug_assert_eq!(byte_counts[d], w.len() - before, "message {d}: its bytes");
    }
    drop(order);
    let got = comm.alltoallv_bytes(w.as_bytes(), &byte_counts)?;
    drop(w);
    // (flag, records) of each message.
    let mut shape = Vec::with_capacity(size);
    for (src, piece) in got.iter().enumerate() {
        let flag = piece.first().copied().unwrap_or(0);
        let per = 4 * (gid + lid + usize::from(flag == 1));
        if flag > 1 || (!piece.is_empty() && (piece.len() - 1) % per != 0) {
            return Err(Error::BadInput(format!(
                "rank {src} sent an import message of {} bytes that is not a whole number of \
                 records (do all ranks set the same NUM_GID_ENTRIES and NUM_LID_ENTRIES?)",
                piece.len()
            )));
        }
        shape.push((flag == 1, piece.len().saturating_sub(1) / per));
    }
    let total = shape.iter().map(|s| s.1).sum();
    let mut im = Filling::new(total, gid, lid)?;
    let me = int(comm.rank());
    // The messages fill consecutive entries j..j + k, all four arrays of each (decoded
    // straight into the values not written yet).
    let mut j = 0;
    for (src, piece) in got.iter().enumerate() {
        let (parts, k) = shape[src];
        if k == 0 {
            continue;
        }
        let mut r = Reader::new(piece, "an import message");
        let mut read = || -> Result<(), WireError> {
            r.u8()?;
            let (g, l) = (
                &mut im.gids[j * gid..][..k * gid],
                &mut im.lids[j * lid..][..k * lid],
            );
            u32::decode_uninit(r.bytes(4 * k * gid)?, g);
            u32::decode_uninit(r.bytes(4 * k * lid)?, l);
            if parts {
                i32::decode_uninit(r.bytes(4 * k)?, &mut im.parts[j..j + k]);
            } else {
                im.parts[j..j + k].fill(MaybeUninit::new(me));
            }
            Ok(())
        };
        read().map_err(|source| Error::Message { from: src, source })?;
        im.procs[j..j + k].fill(MaybeUninit::new(int(src)));
        j += k;
    }
    // The segments cover the list (`total` is the sum of the k).
    assert_eq!(j, total, "import list: entries written");
    // SAFETY: entries 0..total were each written whole, segment by segment, and j == total.
    Ok(unsafe { im.assume_init() })
}

/// The entries of an export list grouped by destination, each group in list order.
enum ByDestination {
    /// The processes are non-decreasing (one destination, say): group `d` is
    /// `start[d]..start[d + 1]`.
    InPlace(Vec<usize>),
    /// A counting sort: group `d` is `order[start[d]..start[d + 1]]`.
    Counted(Vec<usize>, Vec<u32>),
}

/// One group of [`ByDestination`]: the list's indices.
#[derive(Clone)]
enum Group<'a> {
    Range(std::ops::Range<usize>),
    Picked(std::iter::Copied<std::slice::Iter<'a, u32>>),
}

impl Iterator for Group<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        match self {
            Group::Range(r) => r.next(),
            Group::Picked(p) => p.next().map(|i| i as usize),
        }
    }
}

impl Group<'_> {
    /// The number of entries left.
    fn count_left(&self) -> usize {
        match self {
            Group::Range(r) => r.len(),
            Group::Picked(p) => p.len(),
        }
    }
}

impl ByDestination {
    /// The groups in destination order.
    fn groups(&self) -> impl Iterator<Item = Group<'_>> {
        let (start, order) = match self {
            ByDestination::InPlace(s) => (s, None),
            ByDestination::Counted(s, o) => (s, Some(o)),
        };
        start.windows(2).map(move |w| match order {
            None => Group::Range(w[0]..w[1]),
            Some(o) => Group::Picked(o[w[0]..w[1]].iter().copied()),
        })
    }
}

/// Groups the export list `ex` by destination (its processes checked against `size`). Non-
/// decreasing processes in range (one destination, say) are grouped in place, each group's
/// start found by a binary search; else by a counting sort.
fn by_destination(ex: &List, size: usize) -> Result<ByDestination, Error> {
    let procs = &*ex.procs;
    // One comparison per entry (no early exit, so that it vectorises).
    let sorted = procs.windows(2).fold(true, |s, w| s & (w[0] <= w[1]));
    let in_range =
        |p: Option<&c_int>| p.is_none_or(|&p| usize::try_from(p).is_ok_and(|p| p < size));
    if sorted && in_range(procs.first()) && in_range(procs.last()) {
        let start = (0..=size)
            .map(|d| procs.partition_point(|&p| (p as usize) < d))
            .collect();
        return Ok(ByDestination::InPlace(start));
    }
    let mut start = vec![0usize; size + 1];
    for (i, &p) in procs.iter().enumerate() {
        let dest = usize::try_from(p)
            .ok()
            .filter(|&d| d < size)
            .ok_or_else(|| Error::BadInput(format!("export {i}: process {p} out of range")))?;
        start[dest + 1] += 1;
    }
    for d in 0..size {
        start[d + 1] += start[d];
    }
    let mut at = start.clone();
    let mut order = vec![0u32; ex.len()];
    for (i, &p) in ex.procs.iter().enumerate() {
        order[at[p as usize]] = i as u32;
        at[p as usize] += 1;
    }
    Ok(ByDestination::Counted(start, order))
}

/// The lists of an assignment as `RETURN_LISTS` asks (collective).
pub(crate) fn lists(
    comm: &MpiComm,
    a: &Assignment,
    mode: ReturnLists,
    gid: usize,
    lid: usize,
    laps: &mut Laps,
) -> Result<Lists, Error> {
    let ex = agreed_on(comm, exports(a, gid, lid, false))?;
    laps.lap("exports");
    let mut moved = [u64::from(ex.len() > 0)];
    comm.allreduce_u64(ReduceOp::Max, &mut moved)?;
    laps.lap("changes");
    let changes = moved[0] > 0;
    let need_import = matches!(mode, ReturnLists::All | ReturnLists::Import);
    let import = if need_import {
        Some(invert(comm, &ex, gid, lid)?)
    } else {
        None
    };
    laps.lap("imports");
    let export = match mode {
        ReturnLists::All | ReturnLists::Export => Some(ex),
        ReturnLists::Parts => {
            drop(ex);
            Some(agreed_on(comm, exports(a, gid, lid, true))?)
        }
        ReturnLists::Import | ReturnLists::None => None,
    };
    Ok(Lists {
        import,
        export,
        changes,
    })
}

/// Frees an array from [`CBuf::into_raw`] (or NULL) and sets the pointer to NULL; a NULL `p` is
/// passed over.
///
/// # Safety
/// `p` is NULL, or `*p` is NULL or an array from [`CBuf::into_raw`] not freed yet.
pub(crate) unsafe fn c_free<T>(p: *mut *mut T) {
    // SAFETY: the caller's contract: `p` is NULL or valid.
    let Some(p) = (unsafe { p.as_mut() }) else {
        return;
    };
    // SAFETY: the caller's contract; free(NULL) does nothing.
    unsafe { libc::free((*p).cast()) };
    *p = std::ptr::null_mut();
}
