//! Zoltan's import and export lists, and the C arrays they are returned in (allocated with
//! `malloc`, freed by `Zoltan_LB_Free_Part`).

use crate::error::Error;
use crate::params::ReturnLists;
use crate::query::ZoltanIdType;
use crate::zz::Assignment;
use comm::{Comm, MpiComm, ReduceOp};
use std::ffi::c_int;

/// One list: ids, processes, parts (`ZOLTAN_ID_PTR`s and `int*`s of the C API).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct List {
    pub gids: Vec<ZoltanIdType>,
    pub lids: Vec<ZoltanIdType>,
    pub procs: Vec<c_int>,
    pub parts: Vec<c_int>,
}

impl List {
    pub(crate) fn len(&self) -> usize {
        self.procs.len()
    }
}

/// The lists `RETURN_LISTS` asks for (`None`: not returned, count −1 in C).
#[derive(Debug, Clone, Default)]
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
fn exports(a: &Assignment, gid: usize, lid: usize, all: bool) -> List {
    let listed = |i: usize| all || a.parts[i] as usize != a.input_part || a.procs[i] != a.me;
    let n = (0..a.objects.n).filter(|&i| listed(i)).count();
    let mut l = List {
        gids: Vec::with_capacity(n * gid),
        lids: Vec::with_capacity(n * lid),
        procs: Vec::with_capacity(n),
        parts: Vec::with_capacity(n),
    };
    for i in (0..a.objects.n).filter(|&i| listed(i)) {
        l.gids.extend_from_slice(&a.objects.gids[i * gid..][..gid]);
        l.lids.extend_from_slice(&a.objects.lids[i * lid..][..lid]);
        l.procs.push(int(a.procs[i]));
        l.parts.push(a.parts[i] as c_int);
    }
    l
}

/// The import list from the export lists of every rank (collective: one alltoallv of
/// (gid, lid, part) records to the new owners).
pub(crate) fn invert(comm: &MpiComm, ex: &List, gid: usize, lid: usize) -> Result<List, Error> {
    let size = comm.size();
    let rec = gid + lid + 1;
    // The records grouped by destination in export order: a counting sort.
    let mut counts = vec![0usize; size];
    for (i, &p) in ex.procs.iter().enumerate() {
        let dest = usize::try_from(p)
            .ok()
            .filter(|&d| d < size)
            .ok_or_else(|| Error::BadInput(format!("export {i}: process {p} out of range")))?;
        counts[dest] += rec;
    }
    let mut at: Vec<usize> = counts
        .iter()
        .scan(0usize, |sum, &c| {
            let start = *sum;
            *sum += c;
            Some(start)
        })
        .collect();
    let mut send = vec![0u32; ex.len() * rec];
    for (i, &p) in ex.procs.iter().enumerate() {
        let o = &mut at[p as usize];
        let r = &mut send[*o..*o + rec];
        r[..gid].copy_from_slice(&ex.gids[i * gid..][..gid]);
        r[gid..gid + lid].copy_from_slice(&ex.lids[i * lid..][..lid]);
        r[gid + lid] = ex.parts[i] as u32;
        *o += rec;
    }
    let got = comm.alltoallv::<u32>(&send, &counts)?;
    drop(send);
    let total: usize = got.iter().map(|p| p.len() / rec).sum();
    let mut im = List {
        gids: Vec::with_capacity(total * gid),
        lids: Vec::with_capacity(total * lid),
        procs: Vec::with_capacity(total),
        parts: Vec::with_capacity(total),
    };
    for (src, piece) in got.iter().enumerate() {
        if piece.len() % rec != 0 {
            return Err(Error::BadInput(format!(
                "rank {src} sent {} id words, not a whole number of {rec}-word records \
                 (do all ranks set the same NUM_GID_ENTRIES and NUM_LID_ENTRIES?)",
                piece.len()
            )));
        }
        for r in piece.chunks_exact(rec) {
            im.gids.extend_from_slice(&r[..gid]);
            im.lids.extend_from_slice(&r[gid..gid + lid]);
            im.procs.push(int(src));
            im.parts.push(r[gid + lid] as c_int);
        }
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
) -> Result<Lists, Error> {
    let ex = exports(a, gid, lid, false);
    let mut moved = [u64::from(ex.len() > 0)];
    comm.allreduce_u64(ReduceOp::Max, &mut moved)?;
    let changes = moved[0] > 0;
    let need_import = matches!(mode, ReturnLists::All | ReturnLists::Import);
    let import = if need_import {
        Some(invert(comm, &ex, gid, lid)?)
    } else {
        None
    };
    let export = match mode {
        ReturnLists::All | ReturnLists::Export => Some(ex),
        ReturnLists::Parts => Some(exports(a, gid, lid, true)),
        ReturnLists::Import | ReturnLists::None => None,
    };
    Ok(Lists {
        import,
        export,
        changes,
    })
}

/// `v` in a `malloc`ed array the caller frees with `free` (NULL when empty).
pub(crate) fn c_array<T: Copy>(v: &[T]) -> Result<*mut T, Error> {
    if v.is_empty() {
        return Ok(std::ptr::null_mut());
    }
    let bytes = std::mem::size_of_val(v);
    // SAFETY: malloc of a non-zero size; the result is checked for NULL.
    let p = unsafe { libc::malloc(bytes) }.cast::<T>();
    if p.is_null() {
        return Err(Error::Memory { bytes });
    }
    // SAFETY: `p` holds `v.len()` values of T (malloc's alignment suffices for these
    // primitive types) and does not overlap `v`.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(p)
}

/// Frees an array from [`c_array`] (or NULL) and sets the pointer to NULL; a NULL `p` is
/// passed over.
///
/// # Safety
/// `p` is NULL, or `*p` is NULL or an array from [`c_array`] not freed yet.
pub(crate) unsafe fn c_free<T>(p: *mut *mut T) {
    // SAFETY: the caller's contract: `p` is NULL or valid.
    let Some(p) = (unsafe { p.as_mut() }) else {
        return;
    };
    // SAFETY: the caller's contract; free(NULL) does nothing.
    unsafe { libc::free((*p).cast()) };
    *p = std::ptr::null_mut();
}
