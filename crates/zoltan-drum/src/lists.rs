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

/// An array in C's heap (zeroed, `free` releases it), as `Zoltan_LB_Free_Part` frees it: the lists are
/// built in place and handed to the caller without a copy ([`CBuf::into_raw`]).
#[derive(Debug)]
pub(crate) struct CBuf<T: Copy> {
    /// NULL when empty.
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> CBuf<T> {
    /// `len` zeroed values (all-zero bits are a valid value of the integer types used here).
    pub(crate) fn zeroed(len: usize) -> Result<CBuf<T>, Error> {
        if len == 0 {
            return Ok(CBuf {
                ptr: std::ptr::null_mut(),
                len,
            });
        }
        let bytes = len.checked_mul(std::mem::size_of::<T>());
        // Zeroed bytes in C's heap, aligned for any C type (large arrays on huge pages).
        let ptr = bytes
            .map_or(std::ptr::null_mut(), crate::huge::c_zeroed)
            .cast::<T>();
        if ptr.is_null() {
            return Err(Error::Memory {
                bytes: bytes.unwrap_or(usize::MAX),
            });
        }
        Ok(CBuf { ptr, len })
    }

    /// A copy of `v`.
    pub(crate) fn from_slice(v: &[T]) -> Result<CBuf<T>, Error> {
        let mut b = CBuf::zeroed(v.len())?;
        b.copy_from_slice(v);
        Ok(b)
    }

    /// The array for the caller, who frees it with `free` (NULL when empty).
    pub(crate) fn into_raw(self) -> *mut T {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl<T: Copy> std::ops::Deref for CBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: `ptr` holds `len` initialised (zeroed or written) values, owned by `self`.
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
        // SAFETY: `ptr` is NULL or from C's heap (`huge::c_zeroed`), freed once, here.
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

    /// A list of `n` entries, zeroed.
    pub(crate) fn zeroed(n: usize, gid: usize, lid: usize) -> Result<List, Error> {
        Ok(List {
            gids: CBuf::zeroed(n * gid)?,
            lids: CBuf::zeroed(n * lid)?,
            procs: CBuf::zeroed(n)?,
            parts: CBuf::zeroed(n)?,
        })
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
    let mut l = List::zeroed(n, gid, lid)?;
    let (gids, lids) = (&a.objects.gids, &a.objects.lids);
    if identity && !a.stay && !all && gid == 1 && lid == 1 {
        // The common case in one tight pass: an object moves when its part is not this
        // process, and its part is its process.
        let (eg, el) = (&mut *l.gids, &mut *l.lids);
        let (ep, et) = (&mut *l.procs, &mut *l.parts);
        let mut j = 0;
        for (i, &p) in parts.iter().enumerate() {
            if p as usize != me {
                let p = int(p as usize);
                (eg[j], el[j], ep[j], et[j]) = (gids[i], lids[i], p, p);
                j += 1;
            }
        }
        return Ok(l);
    }
    for (j, i) in (0..a.objects.n).filter(|&i| listed(i)).enumerate() {
        if gid == 1 && lid == 1 {
            l.gids[j] = gids[i];
            l.lids[j] = lids[i];
        } else {
            l.gids[j * gid..][..gid].copy_from_slice(&gids[i * gid..][..gid]);
            l.lids[j * lid..][..lid].copy_from_slice(&lids[i * lid..][..lid]);
        }
        l.procs[j] = int(if identity {
            parts[i] as usize
        } else {
            a.proc(i)
        });
        l.parts[j] = parts[i] as c_int;
    }
    Ok(l)
}

/// The import list from the export lists of every rank (collective: one alltoallv). The
/// message to a rank, in `comm::wire`'s format, holds the records of its objects in export
/// order: a flag byte (1: their parts follow; 0: every part is the receiving rank's number, as
/// when parts are processes), then their global ids and their local ids (`u32` words each),
/// then with the flag their parts (`i32`). No records, no message.
pub(crate) fn invert(comm: &MpiComm, ex: &List, gid: usize, lid: usize) -> Result<List, Error> {
    let size = comm.size();
    let order = by_destination(ex, size)?;
    let mut byte_counts = vec![0usize; size];
    let mut w = Writer::with_capacity(size + ex.len() * 4 * (gid + lid + 1));
    for (d, mine) in order.groups().enumerate() {
        if mine.count_left() == 0 {
            continue;
        }
        let before = w.len();
        let parts = mine.clone().any(|i| ex.parts[i] as usize != d);
        w.u8(u8::from(parts));
        for i in mine.clone() {
            for &x in &ex.gids[i * gid..][..gid] {
                w.u32(x);
            }
        }
        for i in mine.clone() {
            for &x in &ex.lids[i * lid..][..lid] {
                w.u32(x);
            }
        }
        if parts {
            for i in mine {
                w.i32(ex.parts[i]);
            }
        }
        byte_counts[d] = w.len() - before;
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
    let mut im = List::zeroed(total, gid, lid)?;
    let me = int(comm.rank());
    let mut j = 0;
    for (src, piece) in got.iter().enumerate() {
        let (parts, k) = shape[src];
        if k == 0 {
            continue;
        }
        let mut r = Reader::new(piece, "an import message");
        let mut read = || -> Result<(), WireError> {
            r.u8()?;
            u32::copy_from_bytes(r.bytes(4 * k * gid)?, &mut im.gids[j * gid..][..k * gid]);
            u32::copy_from_bytes(r.bytes(4 * k * lid)?, &mut im.lids[j * lid..][..k * lid]);
            if parts {
                i32::copy_from_bytes(r.bytes(4 * k)?, &mut im.parts[j..j + k]);
            } else {
                im.parts[j..j + k].fill(me);
            }
            Ok(())
        };
        read().map_err(|source| Error::Message { from: src, source })?;
        im.procs[j..j + k].fill(int(src));
        j += k;
    }
    Ok(im)
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

/// Groups the export list `ex` by destination (its processes checked against `size`).
fn by_destination(ex: &List, size: usize) -> Result<ByDestination, Error> {
    let mut start = vec![0usize; size + 1];
    for (i, &p) in ex.procs.iter().enumerate() {
        let dest = usize::try_from(p)
            .ok()
            .filter(|&d| d < size)
            .ok_or_else(|| Error::BadInput(format!("export {i}: process {p} out of range")))?;
        start[dest + 1] += 1;
    }
    for d in 0..size {
        start[d + 1] += start[d];
    }
    if ex.procs.windows(2).all(|w| w[0] <= w[1]) {
        return Ok(ByDestination::InPlace(start));
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
