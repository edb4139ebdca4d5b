//! `Zoltan_Migrate`: the application's objects move to their new processes through its
//! pack and unpack query functions (Zoltan's user's guide, migration interface): pre-migrate,
//! sizes, pack, one exchange, mid-migrate, unpack, post-migrate.
//!
//! One message per destination rank in `comm::wire`'s format, objects in the order of the
//! export list: per object its global id words (`u32` each), its size in bytes (`u32`) and
//! that many bytes, read back by a `comm::wire::Reader` whose every read says what was short.

use crate::error::Error;
use crate::lists::{List, invert};
use crate::query::{Registered, ZoltanMigratePpFn, count, forms};
use crate::zz::ZoltanStruct;
use comm::wire::{Outbox, Reader, WireError};
use comm::{Comm, ReduceOp};
use std::ffi::{c_char, c_int};

/// Object data is padded to this many bytes in the buffers handed to the pack and unpack
/// functions (Zoltan: "sizes may be slightly larger due to padding for data alignment").
const ALIGN: usize = 8;

fn padded(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// The objects of one rank's migration message: `gid` words of global id and the data of
/// each, in the order they were packed.
fn read_objects<'a>(
    message: &'a [u8],
    gid: usize,
    gids: &mut Vec<u32>,
    pieces: &mut Vec<&'a [u8]>,
) -> Result<(), WireError> {
    let mut r = Reader::new(message, "a migration message");
    while !r.done() {
        for _ in 0..gid {
            gids.push(r.u32()?);
        }
        let size = r.u32()? as usize;
        pieces.push(r.bytes(size)?);
    }
    Ok(())
}

/// The objects that arrived: their ids, padded sizes, offsets in `buf` (8-byte aligned).
struct Arrived {
    gids: Vec<u32>,
    sizes: Vec<c_int>,
    idx: Vec<c_int>,
    buf: Vec<u64>,
}

impl ZoltanStruct {
    /// `Zoltan_Migrate` with the lists the application passed (`None`: −1 counts, not given
    /// on this rank). Collective.
    pub(crate) fn migrate(
        &mut self,
        import: Option<List>,
        export: Option<List>,
    ) -> Result<(), Error> {
        let (gid, lid) = (self.params.num_gid, self.params.num_lid);
        let mut given = [
            u64::from(export.is_none()),
            u64::from(import.is_none() && export.is_none()),
        ];
        self.comm.allreduce_u64(ReduceOp::Max, &mut given)?;
        if given[1] > 0 {
            return Err(Error::BadInput(
                "Zoltan_Migrate needs export lists or import lists on every rank (a rank gave \
                 neither)"
                    .into(),
            ));
        }
        let export = match (given[0], export, &import) {
            (0, Some(ex), _) => ex,
            (_, _, Some(im)) => invert(&self.comm, im, gid, lid)?,
            _ => {
                return Err(Error::BadInput(
                    "Zoltan_Migrate: export lists are missing on some ranks and import lists \
                     on this one"
                        .into(),
                ));
            }
        };
        let import = match import {
            Some(im) => im,
            None => invert(&self.comm, &export, gid, lid)?,
        };
        let mut lists = (import, export);
        let pre = self.cb.pre_migrate;
        self.call_pp(pre, "ZOLTAN_PRE_MIGRATE_PP_FN", &mut lists)?;
        let me = self.rank() as c_int;
        let only_proc = self.params.migrate_only_proc_changes;
        let send: Vec<usize> = (0..lists.1.len())
            .filter(|&i| !only_proc || lists.1.procs[i] != me)
            .collect();
        let packed = self.pack(&lists.1, &send);
        let (message, counts) = self.agreed(packed)?;
        let got = self.comm.alltoallv_bytes(&message, &counts)?;
        let mid = self.cb.mid_migrate;
        self.call_pp(mid, "ZOLTAN_MID_MIGRATE_PP_FN", &mut lists)?;
        let expected = (0..lists.0.len())
            .filter(|&i| !only_proc || lists.0.procs[i] != me)
            .count();
        let unpacked = self.unpack(&got, expected);
        self.agreed(unpacked)?;
        let post = self.cb.post_migrate;
        self.call_pp(post, "ZOLTAN_POST_MIGRATE_PP_FN", &mut lists)
    }

    /// Calls a pre-, mid- or post-migrate function with both lists; agreed over the ranks.
    fn call_pp(
        &self,
        f: Option<Registered<ZoltanMigratePpFn>>,
        what: &'static str,
        lists: &mut (List, List),
    ) -> Result<(), Error> {
        let Some(f) = f else { return Ok(()) };
        let (g, l) = (self.params.num_gid as c_int, self.params.num_lid as c_int);
        let (im, ex) = lists;
        // SAFETY: the lists hold their counts of ids, procs and parts; the application's
        // function for its data pointer.
        let called = f.call(what, |f, data, ierr| unsafe {
            f(
                data,
                g,
                l,
                im.len() as c_int,
                im.gids.as_mut_ptr(),
                im.lids.as_mut_ptr(),
                im.procs.as_mut_ptr(),
                im.parts.as_mut_ptr(),
                ex.len() as c_int,
                ex.gids.as_mut_ptr(),
                ex.lids.as_mut_ptr(),
                ex.procs.as_mut_ptr(),
                ex.parts.as_mut_ptr(),
                ierr,
            )
        });
        self.agreed(called)
    }

    /// The global and local ids of the objects `send` of the list `ex`, in that order (the
    /// copies the query functions are given).
    fn ids_of(&self, ex: &List, send: &[usize]) -> (Vec<u32>, Vec<u32>) {
        let (gid, lid) = (self.params.num_gid, self.params.num_lid);
        let gids = send.iter().flat_map(|&i| &ex.gids[i * gid..][..gid]);
        let lids = send.iter().flat_map(|&i| &ex.lids[i * lid..][..lid]);
        (gids.copied().collect(), lids.copied().collect())
    }

    /// The sizes of the objects `send` of the export list `ex` (multi or single function).
    fn sizes(&self, ex: &List, send: &[usize]) -> Result<Vec<usize>, Error> {
        let (gid, lid) = (self.params.num_gid, self.params.num_lid);
        let (g, l) = (gid as c_int, lid as c_int);
        let (mut gids, mut lids) = self.ids_of(ex, send);
        let mut sizes = vec![0 as c_int; send.len()];
        let (n, gids, lids) = (send.len() as c_int, gids.as_mut_ptr(), lids.as_mut_ptr());
        let out = sizes.as_mut_ptr();
        forms!(self.cb, obj_size_multi, obj_size, "OBJ_SIZE", "Obj_Size").call(
            send.len(),
            true,
            // SAFETY: ids of send.len() objects and as many ints.
            |f, data, ierr| unsafe { f(data, g, l, n, gids, lids, out, ierr) },
            // SAFETY: object j's ids, and its size's place.
            |j, f, data, ierr| unsafe {
                *out.add(j) = f(data, g, l, gids.add(j * gid), lids.add(j * lid), ierr);
            },
        )?;
        sizes
            .iter()
            .map(|&s| count("an object size (ZOLTAN_OBJ_SIZE_FN)", s))
            .collect()
    }

    /// Packs the objects `send` of `ex` and frames them per destination rank: the message
    /// and the byte count for each rank.
    fn pack(&self, ex: &List, send: &[usize]) -> Result<(Vec<u8>, Vec<usize>), Error> {
        let sizes = self.sizes(ex, send)?;
        let (gid, lid) = (self.params.num_gid, self.params.num_lid);
        let mut idx = Vec::with_capacity(send.len());
        let mut at = 0usize;
        for &s in &sizes {
            idx.push(c_int::try_from(at).map_err(|_| Error::BadInput("over 2 GB to pack".into()))?);
            at += padded(s);
        }
        let mut buf = vec![0u64; at / ALIGN];
        let bytes: *mut c_char = buf.as_mut_ptr().cast();
        let mut padded_sizes: Vec<c_int> = sizes.iter().map(|&s| padded(s) as c_int).collect();
        let (mut gids, mut lids) = self.ids_of(ex, send);
        let mut dest: Vec<c_int> = send.iter().map(|&i| ex.parts[i]).collect();
        let (g, l, n) = (gid as c_int, lid as c_int, send.len() as c_int);
        let (gp, lp, dp) = (gids.as_mut_ptr(), lids.as_mut_ptr(), dest.as_mut_ptr());
        let (sp, ip) = (padded_sizes.as_mut_ptr(), idx.as_mut_ptr());
        forms!(self.cb, pack_multi, pack, "PACK_OBJ", "Pack_Obj").call(
            send.len(),
            !send.is_empty(),
            // SAFETY: send.len() ids, parts, sizes and offsets; a buffer of `at` bytes.
            |f, data, ierr| unsafe { f(data, g, l, n, gp, lp, dp, sp, ip, bytes, ierr) },
            // SAFETY: object j's ids and its padded slot of the buffer.
            |j, f, data, ierr| unsafe {
                let (id, slot) = (
                    (gp.add(j * gid), lp.add(j * lid)),
                    bytes.add(idx[j] as usize),
                );
                f(data, g, l, id.0, id.1, dest[j], padded_sizes[j], slot, ierr)
            },
        )?;
        // SAFETY: the u64 buffer viewed as its bytes.
        let data: &[u8] = unsafe { std::slice::from_raw_parts(bytes.cast(), at) };
        let size = self.comm.size();
        let mut out = Outbox::new(size);
        for j in 0..send.len() {
            let d = usize::try_from(ex.procs[send[j]])
                .ok()
                .filter(|&d| d < size)
                .ok_or_else(|| {
                    Error::BadInput(format!(
                        "export {}: process {} out of range",
                        send[j], ex.procs[send[j]]
                    ))
                })?;
            let size = u32::try_from(sizes[j]).map_err(|_| {
                Error::BadInput(format!("export {}: an object of 4 GB or more", send[j]))
            })?;
            let w = out.to(d);
            for &word in &gids[j * gid..][..gid] {
                w.u32(word);
            }
            w.u32(size);
            w.bytes(&data[idx[j] as usize..][..sizes[j]]);
        }
        Ok(out.flatten())
    }

    /// Reads every object that arrived and hands them to the unpack function(s); `expected`
    /// is the count the import lists announce.
    fn unpack(&self, got: &comm::PerRank<u8>, expected: usize) -> Result<(), Error> {
        let a = self.arrived(got)?;
        if a.sizes.len() != expected {
            return Err(Error::BadInput(format!(
                "{} objects arrived, the import lists announce {expected}: the import and \
                 export lists of the ranks do not match",
                a.sizes.len()
            )));
        }
        let gid = self.params.num_gid;
        let (mut gids, mut sizes, mut idx, mut buf) = (a.gids, a.sizes, a.idx, a.buf);
        let bytes: *mut c_char = buf.as_mut_ptr().cast();
        let n = sizes.len();
        let (g, count) = (gid as c_int, n as c_int);
        let (gids, sizes, idx) = (gids.as_mut_ptr(), sizes.as_mut_ptr(), idx.as_mut_ptr());
        forms!(self.cb, unpack_multi, unpack, "UNPACK_OBJ", "Unpack_Obj").call(
            n,
            n > 0,
            // SAFETY: n ids, sizes and offsets into the buffer.
            |f, data, ierr| unsafe { f(data, g, count, gids, sizes, idx, bytes, ierr) },
            // SAFETY: object j's id and its slot of the buffer.
            |j, f, data, ierr| unsafe {
                let slot = bytes.add(*idx.add(j) as usize);
                f(data, g, gids.add(j * gid), *sizes.add(j), slot, ierr)
            },
        )
    }

    /// Decodes the messages, in rank order, into an aligned buffer.
    fn arrived(&self, got: &comm::PerRank<u8>) -> Result<Arrived, Error> {
        let gid = self.params.num_gid;
        let mut a = Arrived {
            gids: Vec::new(),
            sizes: Vec::new(),
            idx: Vec::new(),
            buf: Vec::new(),
        };
        let mut pieces = Vec::new();
        for (from, message) in got.iter().enumerate() {
            read_objects(message, gid, &mut a.gids, &mut pieces)
                .map_err(|source| Error::Message { from, source })?;
        }
        let total: usize = pieces.iter().map(|p| padded(p.len())).sum();
        a.buf = vec![0u64; total / ALIGN];
        // SAFETY: the u64 buffer viewed as its bytes, written once per piece below.
        let bytes: &mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(a.buf.as_mut_ptr().cast(), total) };
        let mut at = 0;
        for p in pieces {
            bytes[at..at + p.len()].copy_from_slice(p);
            a.idx.push(
                c_int::try_from(at).map_err(|_| Error::BadInput("over 2 GB arrived".into()))?,
            );
            a.sizes.push(padded(p.len()) as c_int);
            at += padded(p.len());
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_message_says_what_was_missing_and_from_whom() {
        let mut out = Outbox::new(1);
        out.to(0).u32(1);
        out.to(0).u32(9);
        out.to(0).bytes(&[7, 7]);
        let (bytes, counts) = out.flatten();
        assert_eq!(counts, [10]);
        let (mut gids, mut pieces) = (Vec::new(), Vec::new());
        let source = read_objects(&bytes, 1, &mut gids, &mut pieces).unwrap_err();
        assert_eq!(gids, [1]);
        let e = Error::Message { from: 3, source }.to_string();
        assert_eq!(
            e,
            "a message from rank 3: a migration message of 10 bytes ends at byte 8, inside a \
             run of 9 bytes (9 bytes)"
        );
        assert_eq!(padded(0), 0);
        assert_eq!(padded(1), 8);
        assert_eq!(padded(16), 16);
    }

    #[test]
    fn objects_read_back_as_written() {
        let mut out = Outbox::new(2);
        for (d, id, data) in [
            (1, [4, 5], &b"abc"[..]),
            (0, [6, 7], b""),
            (1, [8, 9], b"z"),
        ] {
            let w = out.to(d);
            w.u32(id[0]);
            w.u32(id[1]);
            w.u32(data.len() as u32);
            w.bytes(data);
        }
        let (bytes, counts) = out.flatten();
        let (mut gids, mut pieces) = (Vec::new(), Vec::new());
        read_objects(&bytes[..counts[0]], 2, &mut gids, &mut pieces).unwrap();
        read_objects(&bytes[counts[0]..], 2, &mut gids, &mut pieces).unwrap();
        assert_eq!(gids, [6, 7, 4, 5, 8, 9]);
        assert_eq!(pieces, [&b""[..], b"abc", b"z"]);
    }
}
