//! Moving pieces of patches between ranks: one `alltoallv` per call, whatever the kind.
//!
//! A [`Piece`] is a rectangle of values that the owner of a source patch sends to the owner of
//! a destination patch. Every rank holds the same list of pieces (they are computed from the
//! layout, which every rank holds), so the receiver knows what comes from whom in which
//! order: pieces travel in list order, each as the destination patch's index (a check) and
//! its values in row-major order. Pieces whose two ends are on one rank skip the wire.

use crate::wire::{Reader, Writer};
use crate::{Rect, SamrError};
use comm::{Comm, PerRank};

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
}

/// Packs this rank's pieces with `pack` (which appends `region.cells()` values in row-major
/// order) and exchanges them. Collective, unless `pieces` is empty (the same on every rank).
pub(crate) fn send<C: Comm>(
    comm: &C,
    pieces: &[Piece],
    mut pack: impl FnMut(&Piece, &mut Vec<f64>),
) -> Result<Received, SamrError> {
    let me = comm.rank() as u32;
    let mut out = vec![Writer::default(); comm.size()];
    let (mut local, mut tmp) = (Vec::new(), Vec::new());
    for p in pieces.iter().filter(|p| p.from == me) {
        tmp.clear();
        pack(p, &mut tmp);
        debug_assert_eq!(tmp.len() as u64, p.region.cells(), "{p:?}");
        if p.to == me {
            local.extend_from_slice(&tmp);
        } else {
            let w = &mut out[p.to as usize];
            w.u32(p.dst);
            w.f64s(&tmp);
        }
    }
    if pieces.is_empty() {
        return Ok(Received {
            data: None,
            local,
            bytes_sent: 0,
        });
    }
    let counts: Vec<usize> = out.iter().map(|w| w.buf.len()).collect();
    let bytes_sent = counts.iter().sum::<usize>() as u64;
    let all: Vec<u8> = out.into_iter().flat_map(|w| w.buf).collect();
    let data = comm.alltoallv_bytes(&all, &counts)?;
    Ok(Received {
        data: Some(data),
        local,
        bytes_sent,
    })
}

impl Received {
    /// Hands every piece for rank `me` to `f` with its values, in list order.
    pub(crate) fn unpack(
        &self,
        me: usize,
        pieces: &[Piece],
        mut f: impl FnMut(&Piece, &[f64]) -> Result<(), SamrError>,
    ) -> Result<(), SamrError> {
        let mut readers: Vec<Reader<'_>> = match &self.data {
            Some(d) => d
                .iter()
                .enumerate()
                .map(|(r, b)| Reader::new(b, r))
                .collect(),
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
            let r = &mut readers[p.from as usize];
            let id = r.u32("patch index")?;
            if id != p.dst {
                return Err(r.error(format!(
                    "piece {k} is for patch {id}, expected patch {}",
                    p.dst
                )));
            }
            r.f64s(n, &mut vals, "values")?;
            f(p, &vals)?;
        }
        readers.iter().try_for_each(Reader::finish)
    }
}
