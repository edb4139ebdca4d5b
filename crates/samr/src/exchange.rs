//! Moving pieces of patches between ranks: one `alltoallv` per call, whatever the kind.
//!
//! A [`Piece`] is a rectangle of values that the owner of a source patch sends to the owner of
//! a destination patch. Every rank holds the same list of pieces (they are computed from the
//! layout, which every rank holds), so the receiver knows what comes from whom in which
//! order: pieces travel in list order, each as the destination patch's index (a check) and
//! its values in row-major order, in `comm::wire`'s format. Pieces whose two ends are on one
//! rank skip the wire.

use crate::{Rect, SamrError};
use comm::wire::{Outbox, Reader};
use comm::{Comm, PerRank};

/// The label of the exchange's messages in a [`comm::wire::WireError`].
const MESSAGE: &str = "a message of patch pieces";

/// What a piece carries, and where it lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Cells of a patch into a neighbour's ghost layer (same level).
    Ghost,
    /// Coarse cells into the interpolation window of a finer patch.
    Window,
    /// Averages of fine cells onto the coarse cells beneath (restriction).
    Restrict,
    /// Cells of an old patch into the new patch that holds them (migration, regrid).
    Copy,
}

/// One rectangle of values from patch `src` (on rank `from`) to patch `dst` (on rank `to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) kind: Kind,
    pub(crate) src: u32,
    pub(crate) dst: u32,
    pub(crate) from: u32,
    pub(crate) to: u32,
    /// The cells carried, in the index space of the level the values belong to.
    pub(crate) region: Rect,
}

/// What one rank received: the pieces from other ranks as bytes, its own as values.
#[derive(Debug)]
pub(crate) struct Received {
    data: Option<PerRank<u8>>,
    local: Vec<f64>,
    /// Bytes this rank sent to other ranks.
    pub(crate) bytes_sent: u64,
    /// Bytes this rank sent to each rank (none to itself; empty when nothing was exchanged).
    pub(crate) sent_to: Vec<usize>,
}

/// Packs this rank's pieces with `pack` (which appends `region.cells()` values in row-major
/// order) and exchanges them. Collective, unless `pieces` is empty (the same on every rank).
pub(crate) fn send<C: Comm>(
    comm: &C,
    pieces: &[Piece],
    mut pack: impl FnMut(&Piece, &mut Vec<f64>),
) -> Result<Received, SamrError> {
    let me = comm.rank() as u32;
    let mut out = Outbox::new(comm.size());
    let (mut local, mut tmp) = (Vec::new(), Vec::new());
    for p in pieces.iter().filter(|p| p.from == me) {
        tmp.clear();
        pack(p, &mut tmp);
        debug_assert_eq!(tmp.len() as u64, p.region.cells(), "{p:?}");
        if p.to == me {
            local.extend_from_slice(&tmp);
        } else {
            let w = out.to(p.to as usize);
            w.u32(p.dst);
            tmp.iter().for_each(|&x| w.f64(x));
        }
    }
    if pieces.is_empty() {
        return Ok(Received {
            data: None,
            local,
            bytes_sent: 0,
            sent_to: Vec::new(),
        });
    }
    let bytes_sent = out.total_len() as u64;
    let (all, counts) = out.flatten();
    let data = comm.alltoallv_bytes(&all, &counts)?;
    Ok(Received {
        data: Some(data),
        local,
        bytes_sent,
        sent_to: counts,
    })
}

impl Received {
    /// Bytes received from each rank (empty when nothing was exchanged).
    pub(crate) fn received_from(&self) -> Vec<usize> {
        self.data.as_ref().map_or_else(Vec::new, |d| d.counts())
    }

    /// Hands every piece for rank `me` to `f` with its values, in list order.
    pub(crate) fn unpack(
        &self,
        me: usize,
        pieces: &[Piece],
        mut f: impl FnMut(&Piece, &[f64]) -> Result<(), SamrError>,
    ) -> Result<(), SamrError> {
        let mut readers: Vec<Reader<'_>> = match &self.data {
            Some(d) => d.iter().map(|b| Reader::new(b, MESSAGE)).collect(),
            None => Vec::new(),
        };
        let (mut at, mut vals) = (0usize, Vec::new());
        for (k, p) in pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| p.to as usize == me)
        {
            let n = p.region.cells() as usize;
            if p.from as usize == me {
                f(p, &self.local[at..at + n])?;
                at += n;
                continue;
            }
            let from = p.from as usize;
            let r = &mut readers[from];
            let wire = |source| SamrError::Wire { from, source };
            let id = r.u32().map_err(wire)?;
            if id != p.dst {
                return Err(SamrError::Garbled {
                    from,
                    what: format!("piece {k} is for patch {id}, expected patch {}", p.dst),
                });
            }
            vals.clear();
            for _ in 0..n {
                vals.push(r.f64().map_err(wire)?);
            }
            f(p, &vals)?;
        }
        match readers.iter().position(|r| !r.done()) {
            None => Ok(()),
            Some(from) => Err(SamrError::Garbled {
                from,
                what: format!(
                    "{} bytes left over after the pieces the schedule names",
                    readers[from].remaining()
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::wire::Writer;

    /// One piece of 2 cells from rank 1 to rank 0, into patch 5.
    fn piece() -> Piece {
        Piece {
            kind: Kind::Ghost,
            src: 3,
            dst: 5,
            from: 1,
            to: 0,
            region: Rect::new([0, 0], [2, 1]),
        }
    }

    fn received(from_rank_1: Vec<u8>) -> Received {
        let n = from_rank_1.len();
        Received {
            data: Some(PerRank::from_counts(from_rank_1, &[0, n])),
            local: Vec::new(),
            bytes_sent: 0,
            sent_to: Vec::new(),
        }
    }

    fn unpack(bytes: Vec<u8>) -> Result<Vec<f64>, SamrError> {
        let mut got = Vec::new();
        received(bytes).unpack(0, &[piece()], |_, v| {
            got.extend_from_slice(v);
            Ok(())
        })?;
        Ok(got)
    }

    fn message(dst: u32, values: &[f64], extra: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(dst);
        values.iter().for_each(|&x| w.f64(x));
        w.bytes(&vec![0; extra]);
        w.into_bytes()
    }

    #[test]
    fn a_whole_message_unpacks_and_a_bad_one_names_the_sender_and_what_was_wrong() {
        assert_eq!(
            unpack(message(5, &[1.5, -2.0], 0)).unwrap(),
            vec![1.5, -2.0]
        );
        let short = unpack(message(5, &[1.5], 0)).unwrap_err();
        assert_eq!(
            short.to_string(),
            "message from rank 1: a message of patch pieces of 12 bytes ends at byte 12, inside a f64 (8 bytes)"
        );
        let other = unpack(message(4, &[1.5, -2.0], 0)).unwrap_err();
        assert_eq!(
            other.to_string(),
            "message from rank 1: piece 0 is for patch 4, expected patch 5"
        );
        let long = unpack(message(5, &[1.5, -2.0], 3)).unwrap_err();
        assert_eq!(
            long.to_string(),
            "message from rank 1: 3 bytes left over after the pieces the schedule names"
        );
    }
}
