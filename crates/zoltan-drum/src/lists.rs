//! Zoltan's import and export lists, built in the C arrays they are returned in (allocated
//! with `calloc`, freed by `Zoltan_LB_Free_Part`).

use crate::error::Error;
use crate::laps::Laps;
use crate::params::ReturnLists;
use crate::query::ZoltanIdType;
use crate::zz::{Assignment, agreed_on};
use comm::wire::{Reader, WireError, Writer};
use comm::{Comm, MpiComm, ReduceOp, Scalar};
use std::ffi::c_int;

/// An array in C's heap (`calloc`, zeroed), as `Zoltan_LB_Free_Part` frees it: the lists are
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
        // SAFETY: calloc of a non-zero count; the result is checked for NULL.
        let ptr = unsafe { libc::calloc(len, std::mem::size_of::<T>()) }.cast::<T>();
        if ptr.is_null() {
            return Err(Error::Memory {
                bytes: len.saturating_mul(std::mem::size_of::<T>()),
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
        // SAFETY: `ptr` is NULL or from calloc, freed once, here.
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
/// order as three runs: their global ids, their local ids (`u32` words each), their parts
/// (`i32`).
pub(crate) fn invert(comm: &MpiComm, ex: &List, gid: usize, lid: usize) -> Result<List, Error> {
    let size = comm.size();
    let rec = 4 * (gid + lid + 1);
    // The records grouped by destination in export order: a counting sort of the indices.
    let mut counts = vec![0usize; size + 1];
    for (i, &p) in ex.procs.iter().enumerate() {
        let dest = usize::try_from(p)
            .ok()
            .filter(|&d| d < size)
            .ok_or_else(|| Error::BadInput(format!("export {i}: process {p} out of range")))?;
        counts[dest + 1] += 1;
    }
    let mut start = counts.clone();
    for d in 0..size {
        start[d + 1] += start[d];
    }
    let mut at = start.clone();
    let mut order = vec![0u32; ex.len()];
    for (i, &p) in ex.procs.iter().enumerate() {
        order[at[p as usize]] = i as u32;
        at[p as usize] += 1;
    }
    let mut w = Writer::with_capacity(ex.len() * rec);
    for d in 0..size {
        let mine = &order[start[d]..start[d + 1]];
        for &i in mine {
            for &x in &ex.gids[i as usize * gid..][..gid] {
                w.u32(x);
            }
        }
        for &i in mine {
            for &x in &ex.lids[i as usize * lid..][..lid] {
                w.u32(x);
            }
        }
        for &i in mine {
            w.i32(ex.parts[i as usize]);
        }
    }
    drop(order);
    let byte_counts: Vec<usize> = counts[1..].iter().map(|c| c * rec).collect();
    let got = comm.alltoallv_bytes(w.as_bytes(), &byte_counts)?;
    drop(w);
    let mut total = 0;
    for (src, piece) in got.iter().enumerate() {
        if piece.len() % rec != 0 {
            return Err(Error::BadInput(format!(
                "rank {src} sent {} id words, not a whole number of {}-word records \
                 (do all ranks set the same NUM_GID_ENTRIES and NUM_LID_ENTRIES?)",
                piece.len() / 4,
                rec / 4
            )));
        }
        total += piece.len() / rec;
    }
    let mut im = List::zeroed(total, gid, lid)?;
    let mut j = 0;
    for (src, piece) in got.iter().enumerate() {
        let k = piece.len() / rec;
        let mut r = Reader::new(piece, "an import message");
        let mut read = || -> Result<(), WireError> {
            u32::copy_from_bytes(r.bytes(4 * k * gid)?, &mut im.gids[j * gid..][..k * gid]);
            u32::copy_from_bytes(r.bytes(4 * k * lid)?, &mut im.lids[j * lid..][..k * lid]);
            i32::copy_from_bytes(r.bytes(4 * k)?, &mut im.parts[j..j + k]);
            Ok(())
        };
        read().map_err(|source| Error::Message { from: src, source })?;
        im.procs[j..j + k].fill(int(src));
        j += k;
    }
    Ok(im)
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
