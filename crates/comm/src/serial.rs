//! The one-rank group, [`part_api::Serial`], as a [`Comm`]: every collective is the identity
//! (or a copy). It lets a serial run go through the same partitioner entry as a distributed
//! one: `Rcb { .. }.partition(&Serial, points, targets, parts)`.

use crate::{Comm, CommError, PerRank, ReduceOp};
use part_api::Serial;

impl Comm for Serial {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn barrier(&self) -> Result<(), CommError> {
        Ok(())
    }

    fn allreduce_f64(&self, _op: ReduceOp, _buf: &mut [f64]) -> Result<(), CommError> {
        Ok(())
    }

    fn allreduce_u64(&self, _op: ReduceOp, _buf: &mut [u64]) -> Result<(), CommError> {
        Ok(())
    }

    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CommError> {
        crate::check_allgather_len(1, send.len(), recv.len());
        recv.copy_from_slice(send);
        Ok(())
    }

    fn allgatherv_bytes(&self, send: &[u8]) -> Result<PerRank<u8>, CommError> {
        Ok(PerRank::from_counts(send.to_vec(), &[send.len()]))
    }

    fn gatherv_bytes(&self, root: usize, send: &[u8]) -> Result<Option<PerRank<u8>>, CommError> {
        assert_eq!(root, 0, "gatherv: root {root} of a group of 1 rank");
        Ok(Some(PerRank::from_counts(send.to_vec(), &[send.len()])))
    }

    fn broadcast_bytes(&self, root: usize, _buf: &mut Vec<u8>) -> Result<(), CommError> {
        assert_eq!(root, 0, "broadcast: root {root} of a group of 1 rank");
        Ok(())
    }

    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
    ) -> Result<PerRank<u8>, CommError> {
        crate::send_offsets(1, send.len(), send_counts);
        Ok(PerRank::from_counts(send.to_vec(), &[send.len()]))
    }

    fn split(&self, colour: u32, _key: i32) -> Result<Self, CommError> {
        assert!(
            i32::try_from(colour).is_ok(),
            "split: colour {colour} exceeds i32::MAX (MPI's limit)"
        );
        Ok(Serial)
    }

    fn split_node(&self) -> Result<Self, CommError> {
        Ok(Serial)
    }

    fn processor_name(&self) -> String {
        crate::thread::host_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rank_collectives_are_copies() {
        let mut v = vec![1.5, -2.0];
        Comm::allreduce_f64(&Serial, ReduceOp::Sum, &mut v).unwrap();
        assert_eq!(v, [1.5, -2.0]);
        let mut all = [0u64; 2];
        Serial.allgather(&[3u64, 4], &mut all).unwrap();
        assert_eq!(all, [3, 4]);
        let got = Serial.alltoallv(&[1u32, 2, 3], &[3]).unwrap();
        assert_eq!(got.data(), &[1, 2, 3]);
        assert_eq!(Serial.split(5, 0).unwrap().size(), 1);
    }
}
