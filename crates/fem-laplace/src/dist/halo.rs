//! Halo exchange: each rank receives, from their owners, the values of the vertices of its
//! elements that it does not own (the columns of its rows beyond its own vertices, and the
//! vertices of its ghost elements).

use super::keys::Birth;
use super::local::{Local, UNKNOWN};
use crate::mesh::NONE;
use comm::wire::{Reader, Writer};
use comm::{Comm, CommError, Exchange, Scalar};

/// Who sends which vertex values to whom, set up once per mesh.
#[derive(Debug, Clone, Default)]
pub(crate) struct Halo {
    /// Per rank: the local vertices whose values this rank sends there, in order.
    send: Vec<Vec<u32>>,
    /// Per rank: the local vertices filled from there, in order.
    recv: Vec<Vec<u32>>,
}

impl Halo {
    /// This rank's requests, per owner: the vertices of its ghost elements that it does not
    /// own (every other vertex of its elements is its own, or a vertex of a ghost too), in
    /// birth order. They become the halo's receive lists.
    pub(crate) fn requests(l: &Local) -> Vec<Vec<u32>> {
        let mut need: Vec<u32> = Vec::new();
        for &g in &l.ghosts {
            for &v in &l.mesh.tri[g as usize] {
                if !l.owns_vertex(v as usize) {
                    need.push(v);
                }
            }
        }
        need.sort_unstable_by_key(|&v| l.birth(v as usize));
        need.dedup();
        let mut recv: Vec<Vec<u32>> = vec![Vec::new(); l.size];
        for &v in &need {
            let o = l.vowner[v as usize];
            assert!(
                o != UNKNOWN,
                "rank {}: no owner known for vertex {:?} of a local element",
                l.rank,
                l.mesh.coords[v as usize]
            );
            recv[o as usize].push(v);
        }
        recv
    }

    /// Writes the requests for every rank to read (each owner, its count and the births).
    pub(crate) fn write_requests(l: &Local, recv: &[Vec<u32>], w: &mut Writer) {
        for (q, list) in recv.iter().enumerate().filter(|(_, list)| !list.is_empty()) {
            w.u32(q as u32);
            w.usize(list.len());
            for &v in list {
                let b = l.birth(v as usize);
                w.u16(b.sg);
                w.u128(b.key);
            }
        }
    }

    /// The halo from this rank's receive lists (`recv`, [`Halo::requests`]) and every rank's
    /// written requests (`asked[q]`, [`Halo::write_requests`]): this rank answers the ones
    /// addressed to it.
    pub(crate) fn from_requests(
        l: &Local,
        recv: Vec<Vec<u32>>,
        asked: &[&[u8]],
    ) -> Result<Halo, CommError> {
        // Requests come sorted by birth from each rank; resolve them all in one merge.
        let mut all: Vec<(Birth, u32, u32)> = Vec::new();
        for (q, piece) in asked.iter().enumerate() {
            let mut r = Reader::new(piece, "a ghost-vertex request");
            while !r.done() {
                let owner = r.u32()?;
                let n = r.usize()?;
                for i in 0..n {
                    let b = Birth {
                        sg: r.u16()?,
                        key: r.u128()?,
                    };
                    if owner == l.rank {
                        all.push((b, q as u32, i as u32));
                    }
                }
            }
        }
        all.sort_unstable();
        let mut births: Vec<Birth> = all.iter().map(|x| x.0).collect();
        births.dedup();
        let found = l.find_sorted(&births);
        let mut send: Vec<Vec<u32>> = (0..l.size).map(|_| Vec::new()).collect();
        let mut sizes = vec![0usize; l.size];
        for &(_, q, _) in &all {
            sizes[q as usize] += 1;
        }
        for (q, s) in send.iter_mut().enumerate() {
            s.resize(sizes[q], NONE);
        }
        let mut d = 0;
        for (j, &(b, q, i)) in all.iter().enumerate() {
            if j > 0 && all[j - 1].0 != b {
                d += 1;
            }
            let v = found[d];
            assert!(
                v != NONE && l.owns_vertex(v as usize),
                "rank {q} asked rank {} for a vertex it does not own",
                l.rank
            );
            send[q as usize][i as usize] = v;
        }
        Ok(Halo { send, recv })
    }

    /// Sends the owned values the other ranks need for the non-owned entries of `x` (split
    /// phase: the caller may compute on the owned entries of `x` until [`Halo::finish`] fills
    /// the others).
    pub(crate) fn start<C: Comm>(&self, comm: &C, x: &[f64]) -> Result<Exchange, CommError> {
        let counts: Vec<usize> = self.send.iter().map(|l| 8 * l.len()).collect();
        let expect: Vec<usize> = self.recv.iter().map(|l| 8 * l.len()).collect();
        let vals: Vec<f64> = self.send.iter().flatten().map(|&v| x[v as usize]).collect();
        comm.exchange_start(&f64::to_bytes(&vals), &counts, &expect)
    }

    /// Fills the non-owned entries of `x` from the exchange [`Halo::start`] began (the
    /// backend has checked every piece's length against the receive lists).
    pub(crate) fn finish<C: Comm>(
        &self,
        comm: &C,
        started: Exchange,
        x: &mut [f64],
    ) -> Result<(), CommError> {
        let got = comm.exchange_finish(started)?;
        let mut vals = vec![0.0; got.data().len() / 8];
        f64::copy_from_bytes(got.data(), &mut vals);
        for (&v, &val) in self.recv.iter().flatten().zip(&vals) {
            x[v as usize] = val;
        }
        Ok(())
    }
}
