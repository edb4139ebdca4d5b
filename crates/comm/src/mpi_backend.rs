//! `MpiComm`: ranks as MPI processes (feature `mpi`), through the `mpi` crate.
//!
//! MPI itself cannot detect ranks that disagree (an allreduce with different lengths is
//! undefined behaviour, mismatched collectives usually hang). With checks on (the default)
//! every collective starts with one small allreduce (5 × u64, MAX) of the collective's code and
//! its length or root (and, for the split-phase exchange, its size), so such disagreements
//! return the same [`CommError`] on every rank, as in the thread backend. Messages whose counts
//! exceed MPI's `int` limit return [`CommError::TooLarge`] on every rank.
//!
//! Failure: MPI errors are fatal (Open MPI's default handler). [`MpiComm::init`] installs a
//! panic hook that prints the panic and calls `MPI_Abort`, so a panicking rank ends the whole
//! job (`mpirun` reports the rank and exits non-zero) instead of leaving the others waiting.
//!
//! A library called from an MPI application joins the application's job with
//! [`MpiComm::from_raw`] instead: it works on a duplicate of the caller's communicator, and
//! neither initialises nor finalises MPI nor installs a hook.

use crate::{
    Comm, CommError, Exchange, ExchangeState, Op, PerRank, ReduceOp, check_received,
    check_recv_counts, send_offsets,
};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::{Threading, Universe};
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Once;

/// A raw MPI communicator handle of the MPI library this crate is built with: `MPI_Comm` in
/// C (for Open MPI a pointer). What a C entry point receives from its caller; see
/// [`MpiComm::from_raw`].
pub type RawComm = mpi::ffi::MPI_Comm;

/// Largest count MPI accepts in one call (`int`).
const MPI_LIMIT: u64 = i32::MAX as u64;
/// Elements per MPI call when reducing long buffers.
const REDUCE_CHUNK: usize = 1 << 28;

/// Who owns MPI: this crate (its `Universe` finalises MPI when the last communicator handle
/// is dropped), or the application that called [`MpiComm::from_raw`].
enum Env {
    Owned(#[expect(dead_code, reason = "held for its Drop, which finalises MPI")] Universe),
    Borrowed,
}

/// A communicator whose ranks are MPI processes.
///
/// Obtain the world communicator with [`MpiComm::init`]; derive others with
/// [`Comm::split`] and [`Comm::split_node`]. MPI is finalised when the last handle is
/// dropped. Handles are not `Send`: MPI is initialised with `MPI_THREAD_FUNNELED`, so only the
/// thread that called `init` may call collectives (ranks may use threads for computation).
///
/// `part_api::Reduce` is implemented by forwarding to [`Comm`].
pub struct MpiComm {
    /// Freed in `Drop` unless MPI is already finalised (an application that finalised before
    /// dropping a borrowed handle: freeing then would be an MPI error).
    comm: ManuallyDrop<SimpleCommunicator>,
    checks: bool,
    env: Rc<Env>,
}

impl Drop for MpiComm {
    fn drop(&mut self) {
        if !mpi::is_finalized() {
            // SAFETY: dropped once, here; the field is not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.comm) };
        }
    }
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("checks", &self.checks)
            .finish()
    }
}

impl MpiComm {
    /// Initialises MPI (`MPI_THREAD_FUNNELED`) and returns the world communicator.
    ///
    /// Also installs a panic hook (once per process) that, after the usual panic message,
    /// aborts the whole MPI job, so no rank waits forever for one that panicked.
    ///
    /// # Errors
    /// [`CommError::Mpi`] if MPI was already initialised in this process.
    pub fn init() -> Result<MpiComm, CommError> {
        let (universe, _level) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| CommError::Mpi("MPI is already initialised in this process".into()))?;
        install_abort_on_panic();
        Ok(MpiComm {
            comm: ManuallyDrop::new(universe.world()),
            checks: true,
            env: Rc::new(Env::Owned(universe)),
        })
    }

    /// Joins an MPI job the caller has initialised: a communicator over the ranks of `raw`
    /// (an intracommunicator such as `MPI_COMM_WORLD` or one the application split), as a
    /// duplicate (`MPI_Comm_dup`), so that this crate's messages never match the
    /// application's. MPI is neither initialised nor finalised here and no panic hook is
    /// installed; the duplicate is freed when the last handle derived from it is dropped
    /// (unless the application has finalised MPI by then). Collective over `raw`.
    ///
    /// # Errors
    /// [`CommError::Mpi`] if MPI is not initialised or already finalised, `raw` is
    /// `MPI_COMM_NULL`, or `raw` is an intercommunicator.
    ///
    /// # Safety
    /// `raw` is `MPI_COMM_NULL` or a live communicator handle of this process's MPI library.
    pub unsafe fn from_raw(raw: RawComm) -> Result<MpiComm, CommError> {
        if !mpi::is_initialized() || mpi::is_finalized() {
            return Err(CommError::Mpi(
                "MPI is not initialised (or already finalised): call MPI_Init first".into(),
            ));
        }
        // SAFETY: reading the library's predefined handle after MPI_Init.
        if raw == unsafe { mpi::ffi::RSMPI_COMM_NULL } {
            return Err(CommError::Mpi("the communicator is MPI_COMM_NULL".into()));
        }
        let mut inter = 0;
        // SAFETY: `raw` is a live communicator (the caller's contract); `inter` is writable.
        unsafe { mpi::ffi::MPI_Comm_test_inter(raw, &mut inter) };
        if inter != 0 {
            return Err(CommError::Mpi(
                "the communicator is an intercommunicator; an intracommunicator is needed".into(),
            ));
        }
        let mut dup = std::mem::MaybeUninit::<RawComm>::uninit();
        // SAFETY: `raw` is live; MPI_Comm_dup writes the new handle (errors are fatal under
        // MPI's default handler, so it returns only on success).
        let dup = unsafe {
            mpi::ffi::MPI_Comm_dup(raw, dup.as_mut_ptr());
            dup.assume_init()
        };
        // SAFETY: a fresh intracommunicator owned by nobody else, neither world nor self.
        let comm = unsafe { SimpleCommunicator::from_raw(dup) };
        Ok(MpiComm {
            comm: ManuallyDrop::new(comm),
            checks: true,
            env: Rc::new(Env::Borrowed),
        })
    }

    /// The raw handle of this communicator, for calling MPI directly (valid while `self`
    /// lives).
    pub fn as_raw(&self) -> RawComm {
        self.comm.as_raw()
    }

    /// Turns the collective consistency checks on or off (default on). Off saves one small
    /// allreduce per collective but makes ranks that disagree (different lengths or
    /// collectives) undefined behaviour, as in plain MPI. Every rank must choose the same;
    /// communicators split from this one inherit the setting.
    pub fn set_checks(&mut self, on: bool) {
        self.checks = on;
    }

    /// Whether the consistency checks are on.
    pub fn checks(&self) -> bool {
        self.checks
    }

    /// Ends the whole MPI job at once (`MPI_Abort` on the world) with exit code `code`: the
    /// way out when this rank cannot go on and the others may be waiting for it.
    pub fn abort(&self, code: i32) -> ! {
        SimpleCommunicator::world().abort(code)
    }

    /// The MPI library's version string (`MPI_Get_library_version`).
    pub fn library_version(&self) -> String {
        mpi::environment::library_version()
            .map(|v| v.trim_end_matches('\0').trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    }

    /// Every rank passes `op` and `value` (a length or root that must agree, or 0); returns
    /// the disagreement, identically on every rank.
    fn check(&self, op: Op, value: u64) -> Result<(), CommError> {
        if !self.checks {
            return Ok(());
        }
        self.check_max(op, value, 0).map(|_| ())
    }

    /// [`MpiComm::check`] (with the checks on) carrying `mine` too: returns the largest of
    /// every rank's `mine` from the same allreduce.
    fn check_max(&self, op: Op, value: u64, mine: u64) -> Result<u64, CommError> {
        let code = op as u64;
        let send = [code, !code, value, !value, mine];
        let mut recv = [0u64; 5];
        self.comm
            .all_reduce_into(&send[..], &mut recv[..], SystemOperation::max());
        let (max_op, min_op) = (recv[0], !recv[1]);
        if max_op != min_op {
            let name = |c| Op::from_code(c).map_or("an unknown collective", Op::name);
            return Err(CommError::OpMismatch {
                this: name(min_op),
                other: name(max_op),
            });
        }
        let (max, min) = (to_usize(recv[2]), to_usize(!recv[3]));
        if max != min {
            return Err(match op {
                Op::Gatherv | Op::Broadcast => CommError::RootMismatch {
                    op: op.name(),
                    min,
                    max,
                },
                _ => CommError::LengthMismatch {
                    op: op.name(),
                    min,
                    max,
                },
            });
        }
        Ok(recv[4])
    }

    /// In-place allreduce in chunks MPI's `int` count can express.
    fn allreduce<T: Equivalence + Copy>(
        &self,
        code: Op,
        op: ReduceOp,
        buf: &mut [T],
    ) -> Result<(), CommError> {
        self.check(code, buf.len() as u64)?;
        let mpi_op = system_op(op);
        for chunk in buf.chunks_mut(REDUCE_CHUNK) {
            let send = chunk.to_vec();
            self.comm.all_reduce_into(&send[..], chunk, mpi_op);
        }
        Ok(())
    }

    fn derived(&self, comm: SimpleCommunicator) -> MpiComm {
        MpiComm {
            comm: ManuallyDrop::new(comm),
            checks: self.checks,
            env: Rc::clone(&self.env),
        }
    }

    /// Everyone's count (u64), via allgather.
    fn all_counts(&self, mine: usize) -> Vec<u64> {
        let mut counts = vec![0u64; self.size()];
        self.comm.all_gather_into(&(mine as u64), &mut counts[..]);
        counts
    }
}

/// Whether MPI is initialised and not yet finalised in this process (`MPI_Initialized`,
/// `MPI_Finalized`): whether [`MpiComm::from_raw`] can join a job.
pub fn mpi_is_initialized() -> bool {
    mpi::is_initialized() && !mpi::is_finalized()
}

fn to_usize(x: u64) -> usize {
    usize::try_from(x).expect("64-bit usize")
}

/// Counts and displacements as MPI ints; the caller has checked the total fits.
fn partition_arrays(counts: &[u64]) -> (Vec<i32>, Vec<i32>) {
    let c: Vec<i32> = counts
        .iter()
        .map(|&x| i32::try_from(x).expect("checked against MPI_LIMIT"))
        .collect();
    let mut d = Vec::with_capacity(c.len());
    let mut at = 0i32;
    for &x in &c {
        d.push(at);
        at += x;
    }
    (c, d)
}

/// An empty Rust slice points at address `align_of::<T>()`; for bytes that is 1, which is
/// Open MPI's `MPI_IN_PLACE` marker. Empty buffers handed to MPI therefore get a real address.
fn real<'a>(s: &'a [u8], spare: &'a [u8; 1]) -> &'a [u8] {
    if s.is_empty() { &spare[..0] } else { s }
}

/// [`real`] for receive buffers.
fn real_mut<'a>(s: &'a mut [u8], spare: &'a mut [u8; 1]) -> &'a mut [u8] {
    if s.is_empty() { &mut spare[..0] } else { s }
}

fn too_large(op: Op, bytes: u64) -> CommError {
    CommError::TooLarge {
        op: op.name(),
        bytes,
        limit: MPI_LIMIT,
    }
}

fn install_abort_on_panic() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if mpi::is_initialized() && !mpi::is_finalized() {
                let world = SimpleCommunicator::world();
                eprintln!(
                    "comm: MPI rank {} of {} panicked; aborting the job (MPI_Abort) so no rank waits for it",
                    world.rank(),
                    world.size()
                );
                world.abort(101);
            }
        }));
    });
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        usize::try_from(self.comm.rank()).expect("MPI ranks are non-negative")
    }

    fn size(&self) -> usize {
        usize::try_from(self.comm.size()).expect("MPI sizes are positive")
    }

    fn barrier(&self) -> Result<(), CommError> {
        if self.checks {
            // The check is an allreduce: it completes only once every rank has entered.
            self.check(Op::Barrier, 0)
        } else {
            self.comm.barrier();
            Ok(())
        }
    }

    fn allreduce_f64(&self, op: ReduceOp, buf: &mut [f64]) -> Result<(), CommError> {
        self.allreduce(Op::reduce_f64(op), op, buf)
    }

    fn allreduce_u64(&self, op: ReduceOp, buf: &mut [u64]) -> Result<(), CommError> {
        self.allreduce(Op::reduce_u64(op), op, buf)
    }

    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CommError> {
        crate::check_allgather_len(self.size(), send.len(), recv.len());
        self.check(Op::Allgather, send.len() as u64)?;
        // With checks off the lengths are trusted to agree, so every rank sees the same total.
        if recv.len() as u64 > MPI_LIMIT {
            return Err(too_large(Op::Allgather, recv.len() as u64));
        }
        if !send.is_empty() {
            self.comm.all_gather_into(send, recv);
        }
        Ok(())
    }

    fn allgatherv_bytes(&self, send: &[u8]) -> Result<PerRank<u8>, CommError> {
        self.check(Op::Allgatherv, 0)?;
        let counts = self.all_counts(send.len());
        let total: u64 = counts.iter().sum();
        if total > MPI_LIMIT {
            return Err(too_large(Op::Allgatherv, total));
        }
        let (c, d) = partition_arrays(&counts);
        let mut data = vec![0u8; to_usize(total)];
        if total > 0 {
            let spare = [0u8; 1];
            let mut part = PartitionMut::new(&mut data[..], &c[..], &d[..]);
            self.comm
                .all_gather_varcount_into(real(send, &spare), &mut part);
        }
        let counts: Vec<usize> = counts.into_iter().map(to_usize).collect();
        Ok(PerRank::from_counts(data, &counts))
    }

    fn gatherv_bytes(&self, root: usize, send: &[u8]) -> Result<Option<PerRank<u8>>, CommError> {
        assert!(
            root < self.size(),
            "gatherv: root {root} out of range for {} ranks",
            self.size()
        );
        self.check(Op::Gatherv, root as u64)?;
        // Everyone learns the counts, so a too-large gather fails on every rank alike.
        let counts = self.all_counts(send.len());
        let total: u64 = counts.iter().sum();
        if total > MPI_LIMIT {
            return Err(too_large(Op::Gatherv, total));
        }
        let root_proc = self
            .comm
            .process_at_rank(i32::try_from(root).expect("rank fits i32"));
        let spare = [0u8; 1];
        if self.rank() != root {
            if total > 0 {
                root_proc.gather_varcount_into(real(send, &spare));
            }
            return Ok(None);
        }
        let (c, d) = partition_arrays(&counts);
        let mut data = vec![0u8; to_usize(total)];
        if total > 0 {
            let mut part = PartitionMut::new(&mut data[..], &c[..], &d[..]);
            root_proc.gather_varcount_into_root(real(send, &spare), &mut part);
        }
        let counts: Vec<usize> = counts.into_iter().map(to_usize).collect();
        Ok(Some(PerRank::from_counts(data, &counts)))
    }

    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> Result<(), CommError> {
        assert!(
            root < self.size(),
            "broadcast: root {root} out of range for {} ranks",
            self.size()
        );
        self.check(Op::Broadcast, root as u64)?;
        let root_proc = self
            .comm
            .process_at_rank(i32::try_from(root).expect("rank fits i32"));
        let mut len = buf.len() as u64;
        root_proc.broadcast_into(&mut len);
        if len > MPI_LIMIT {
            return Err(too_large(Op::Broadcast, len));
        }
        if self.rank() != root {
            buf.clear();
            buf.resize(to_usize(len), 0);
        }
        if len > 0 {
            root_proc.broadcast_into(&mut buf[..]);
        }
        Ok(())
    }

    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
    ) -> Result<PerRank<u8>, CommError> {
        let n = self.size();
        send_offsets(n, send.len(), send_counts);
        self.check(Op::Alltoallv, 0)?;
        let sc: Vec<u64> = send_counts.iter().map(|&c| c as u64).collect();
        let mut rc = vec![0u64; n];
        self.comm.all_to_all_into(&sc[..], &mut rc[..]);
        // Any rank over the limit makes every rank return the error (one more small allreduce).
        let mut biggest = [(send.len() as u64).max(rc.iter().sum())];
        self.comm
            .all_reduce_into(&[biggest[0]][..], &mut biggest[..], SystemOperation::max());
        if biggest[0] > MPI_LIMIT {
            return Err(too_large(Op::Alltoallv, biggest[0]));
        }
        let (s_counts, s_displs) = partition_arrays(&sc);
        let (r_counts, r_displs) = partition_arrays(&rc);
        let mut data = vec![0u8; to_usize(rc.iter().sum())];
        {
            let spare = [0u8; 1];
            let mut spare_mut = [0u8; 1];
            let send_part = Partition::new(real(send, &spare), &s_counts[..], &s_displs[..]);
            let mut recv_part = PartitionMut::new(
                real_mut(&mut data[..], &mut spare_mut),
                &r_counts[..],
                &r_displs[..],
            );
            self.comm
                .all_to_all_varcount_into(&send_part, &mut recv_part);
        }
        let counts: Vec<usize> = rc.into_iter().map(to_usize).collect();
        Ok(PerRank::from_counts(data, &counts))
    }

    /// One `MPI_Ialltoallv`, preceded (checks on) by the consistency allreduce, which also
    /// carries the largest piece so that every rank returns [`CommError::TooLarge`] together.
    /// With checks off a total over MPI's `int` limit panics (this rank's own contract).
    fn exchange_start(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<Exchange, CommError> {
        let n = self.size();
        send_offsets(n, send.len(), send_counts);
        check_recv_counts(n, recv_counts);
        let biggest = (send.len() as u64).max(recv_counts.iter().map(|&c| c as u64).sum());
        if self.checks {
            let largest = self.check_max(Op::Exchange, 0, biggest)?;
            if largest > MPI_LIMIT {
                return Err(too_large(Op::Exchange, largest));
            }
        } else {
            assert!(
                biggest <= MPI_LIMIT,
                "exchange: {biggest} bytes exceed MPI's int count (turn the checks on for an error)"
            );
        }
        let sc: Vec<u64> = send_counts.iter().map(|&c| c as u64).collect();
        let rc: Vec<u64> = recv_counts.iter().map(|&c| c as u64).collect();
        Ok(Exchange {
            state: ExchangeState::Mpi(Box::new(InFlight::start(
                self.comm.as_raw(),
                send.to_vec(),
                partition_arrays(&sc),
                partition_arrays(&rc),
                recv_counts.to_vec(),
            ))),
        })
    }

    fn exchange_finish(&self, x: Exchange) -> Result<PerRank<u8>, CommError> {
        let ExchangeState::Mpi(mut f) = x.state else {
            panic!("exchange_finish: the exchange was started on another backend")
        };
        assert!(
            f.comm == self.comm.as_raw(),
            "exchange_finish: the exchange was started on another communicator"
        );
        f.wait();
        let recv = std::mem::take(&mut f.recv);
        let counts = std::mem::take(&mut f.recv_counts);
        let got = PerRank::from_counts(recv, &counts);
        check_received(&got.counts(), &counts);
        Ok(got)
    }

    fn split(&self, colour: u32, key: i32) -> Result<Self, CommError> {
        let colour = i32::try_from(colour)
            .unwrap_or_else(|_| panic!("split: colour {colour} exceeds i32::MAX (MPI's limit)"));
        self.check(Op::Split, 0)?;
        let comm = self
            .comm
            .split_by_color_with_key(Color::with_value(colour), key)
            .expect("a defined colour always yields a communicator");
        Ok(self.derived(comm))
    }

    fn split_node(&self) -> Result<Self, CommError> {
        self.check(Op::SplitNode, 0)?;
        Ok(self.derived(self.comm.split_shared(0)))
    }

    fn processor_name(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| crate::thread::host_name())
    }

    fn wtime(&self) -> f64 {
        mpi::time()
    }
}

fn system_op(op: ReduceOp) -> SystemOperation {
    match op {
        ReduceOp::Sum => SystemOperation::sum(),
        ReduceOp::Min => SystemOperation::min(),
        ReduceOp::Max => SystemOperation::max(),
    }
}

crate::impl_reduce!(MpiComm);

/// An `MPI_Ialltoallv` in flight with the buffers and count arrays MPI reads and writes until
/// it completes (they live on the heap: moving this struct does not move them). Dropping it
/// waits for the exchange, so MPI never touches freed memory.
pub(crate) struct InFlight {
    request: mpi::ffi::MPI_Request,
    comm: RawComm,
    /// Read by MPI until completion.
    send: Vec<u8>,
    recv: Vec<u8>,
    /// Send counts and displacements, receive counts and displacements (MPI ints), which a
    /// non-blocking collective may read until it completes.
    arrays: [Vec<i32>; 4],
    recv_counts: Vec<usize>,
    /// A real address for empty buffers (see [`real`]).
    spare: Box<[u8; 2]>,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("recv_counts", &self.recv_counts)
            .finish_non_exhaustive()
    }
}

impl InFlight {
    fn start(
        comm: RawComm,
        send: Vec<u8>,
        (sc, sd): (Vec<i32>, Vec<i32>),
        (rc, rd): (Vec<i32>, Vec<i32>),
        recv_counts: Vec<usize>,
    ) -> InFlight {
        let recv = vec![0u8; recv_counts.iter().sum()];
        let mut f = InFlight {
            // SAFETY: reading the library's predefined handle after MPI_Init.
            request: unsafe { mpi::ffi::RSMPI_REQUEST_NULL },
            comm,
            send,
            recv,
            arrays: [sc, sd, rc, rd],
            recv_counts,
            spare: Box::new([0; 2]),
        };
        let spare = f.spare.as_mut_ptr();
        let sp = if f.send.is_empty() {
            spare.cast_const()
        } else {
            f.send.as_ptr()
        };
        // The second spare byte: distinct from the send side's.
        let rp = if f.recv.is_empty() {
            spare.wrapping_add(1)
        } else {
            f.recv.as_mut_ptr()
        };
        let [sc, sd, rc, rd] = &f.arrays;
        // SAFETY: the buffers and arrays are heap allocations owned by `f`, which keeps them
        // unchanged until the request completes (`wait`, also on drop); their lengths match
        // the counts (checked by the caller: the counts add up to each buffer); `comm` is a
        // live communicator of this process; MPI errors are fatal (default handler).
        unsafe {
            mpi::ffi::MPI_Ialltoallv(
                sp.cast(),
                sc.as_ptr(),
                sd.as_ptr(),
                mpi::ffi::RSMPI_UINT8_T,
                rp.cast(),
                rc.as_ptr(),
                rd.as_ptr(),
                mpi::ffi::RSMPI_UINT8_T,
                comm,
                &mut f.request,
            );
        }
        f
    }

    /// Waits for the request (a no-op once it has completed).
    fn wait(&mut self) {
        // SAFETY: `request` is this exchange's request or MPI_REQUEST_NULL (after a wait,
        // MPI sets it so), for which MPI_Wait returns at once.
        unsafe {
            mpi::ffi::MPI_Wait(&mut self.request, mpi::ffi::RSMPI_STATUS_IGNORE);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !mpi::is_finalized() {
            self.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joining_before_mpi_init_is_an_error() {
        // This test process never initialises MPI.
        // SAFETY: the predefined null handle; from_raw must refuse before using it.
        let e = unsafe { MpiComm::from_raw(mpi::ffi::RSMPI_COMM_NULL) }.unwrap_err();
        assert!(e.to_string().contains("MPI is not initialised"), "{e}");
    }
}
