//! The conformance suite every [`Comm`] backend must pass, written once, generic over the
//! backend.
//!
//! Each check is a collective: every rank of a communicator calls it and gets `Ok` or a
//! [`CheckFailure`] naming the rank and what differed. `cargo test -p comm` runs all of them
//! under [`ThreadComm`](crate::ThreadComm) with 1, 2, 3 and 4 ranks; the `comm-mpi-suite`
//! binary (feature `mpi`) runs the same list under `mpirun`. A backend that fails a check may
//! leave the other ranks inside a collective; drivers must therefore stop the run on the first
//! failure (the thread backend turns the failing rank's return into an error for the others;
//! the MPI driver aborts the job).

use crate::{Comm, CommError, LinkProbe, ReduceOp, measure_link};
use part_api::Reduce;

/// Why a check failed on one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFailure(pub String);

impl std::fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckFailure {}

impl From<CommError> for CheckFailure {
    fn from(e: CommError) -> Self {
        CheckFailure(format!("unexpected error: {e}"))
    }
}

/// A check: called on every rank of `comm`.
pub type Check<C> = fn(&C) -> Result<(), CheckFailure>;

/// Fails a check with a message naming the rank (`ensure!(comm, condition, format...)`): the
/// assertion of conformance checks, here and in the suites of the crates above `comm`.
#[macro_export]
macro_rules! ensure {
    ($comm:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::conformance::CheckFailure(format!(
                "rank {} of {}: {}",
                $crate::Comm::rank($comm),
                $crate::Comm::size($comm),
                format!($($fmt)+)
            )));
        }
    };
}

/// Runs one check on `n` thread ranks; panics with every failing rank's message (for
/// `#[test]`s: this crate's suite, and the distributed suites of the crates above it).
pub fn check_on_threads(n: usize, name: &str, check: Check<crate::ThreadComm>) {
    let results = crate::ThreadComm::run(n, &crate::ThreadOptions::default(), |c| check(&c))
        .unwrap_or_else(|e| panic!("{name} on {n} ranks: the run failed: {e}"));
    let failures: Vec<String> = results
        .into_iter()
        .filter_map(Result::err)
        .map(|CheckFailure(m)| m)
        .collect();
    assert!(
        failures.is_empty(),
        "{name} on {n} ranks:\n  {}",
        failures.join("\n  ")
    );
}

/// Every check, by name, in the order drivers run them.
pub fn checks<C>() -> Vec<(&'static str, Check<C>)>
where
    C: Comm + Reduce<Error = CommError>,
{
    vec![
        ("rank_and_size", rank_and_size::<C>),
        ("barrier", barrier::<C>),
        ("allreduce_f64_exact", allreduce_f64_exact::<C>),
        ("allreduce_u64", allreduce_u64::<C>),
        ("allreduce_deterministic", allreduce_deterministic::<C>),
        ("allgather_fixed", allgather_fixed::<C>),
        ("allgatherv", allgatherv::<C>),
        ("gatherv_and_broadcast", gatherv_and_broadcast::<C>),
        ("alltoallv_bytes", alltoallv_bytes::<C>),
        ("alltoallv_large_f64", alltoallv_large_f64::<C>),
        ("exchange_split_phase", exchange_split_phase::<C>),
        ("split_by_parity", split_by_parity::<C>),
        ("split_by_key", split_by_key::<C>),
        ("split_node", split_node::<C>),
        ("reduce_trait", reduce_trait::<C>),
        ("length_mismatch", length_mismatch::<C>),
        ("op_mismatch", op_mismatch::<C>),
        ("root_mismatch", root_mismatch::<C>),
        ("link_model", link_model::<C>),
    ]
}

/// splitmix64: a deterministic stream of pseudo-random numbers per seed.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Rank `r`'s pseudo-random f64 values of mixed sign and magnitude (sums round).
fn noisy_values(r: usize, n: usize) -> Vec<f64> {
    let mut s = 0x1234_5678 ^ (r as u64).wrapping_mul(0x9e37_79b9);
    (0..n)
        .map(|i| {
            let u = (splitmix(&mut s) >> 11) as f64 / (1u64 << 53) as f64;
            let scale = [1e-3, 1.0, 1e7, 3.3e12][i % 4];
            (u - 0.37) * scale
        })
        .collect()
}

/// rank < size; the gathered ranks are 0..size; a processor name; wall time advances.
pub fn rank_and_size<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    ensure!(c, c.size() >= 1 && c.rank() < c.size(), "rank out of range");
    let mut all = vec![0u64; c.size()];
    c.allgather(&[c.rank() as u64], &mut all)?;
    ensure!(
        c,
        all.iter().enumerate().all(|(i, &r)| r == i as u64),
        "gathered ranks {all:?}"
    );
    ensure!(c, !c.processor_name().is_empty(), "empty processor name");
    let t0 = c.wtime();
    c.barrier()?;
    let t1 = c.wtime();
    ensure!(
        c,
        t1 >= t0 && t1.is_finite(),
        "wtime went backwards: {t0} then {t1}"
    );
    Ok(())
}

/// Barriers with ranks arriving at different times.
pub fn barrier<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    for i in 0..5 {
        if (c.rank() + i).is_multiple_of(c.size()) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        c.barrier()?;
    }
    Ok(())
}

/// Sums, minima and maxima of f64 whose results are exact, including an empty buffer.
pub fn allreduce_f64_exact<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let (r, n) = (c.rank() as f64, c.size() as f64);
    let base = [
        r + 0.5,
        -2.0 * r,
        1e10 + r,
        if c.rank() == 0 { f64::INFINITY } else { 1.0 },
    ];
    let mut s = base;
    c.allreduce_f64(ReduceOp::Sum, &mut s)?;
    let tri = n * (n - 1.0) / 2.0;
    let want = [tri + 0.5 * n, -2.0 * tri, 1e10 * n + tri, f64::INFINITY];
    ensure!(c, s == want, "sum {s:?}, expected {want:?}");
    let mut lo = base;
    c.allreduce_f64(ReduceOp::Min, &mut lo)?;
    let want = [
        0.5,
        -2.0 * (n - 1.0),
        1e10,
        if c.size() == 1 { f64::INFINITY } else { 1.0 },
    ];
    ensure!(c, lo == want, "min {lo:?}, expected {want:?}");
    let mut hi = base;
    c.allreduce_f64(ReduceOp::Max, &mut hi)?;
    let want = [n - 0.5, 0.0, 1e10 + n - 1.0, f64::INFINITY];
    ensure!(c, hi == want, "max {hi:?}, expected {want:?}");
    let mut empty: [f64; 0] = [];
    c.allreduce_f64(ReduceOp::Sum, &mut empty)?;
    Ok(())
}

/// u64 sums wrap; minima and maxima are exact.
pub fn allreduce_u64<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let (r, n) = (c.rank() as u64, c.size() as u64);
    let base = [u64::MAX, r, 1 << 63, r * r];
    let mut s = base;
    c.allreduce_u64(ReduceOp::Sum, &mut s)?;
    let squares: u64 = (0..n).map(|k| k * k).sum();
    let want = [
        u64::MAX.wrapping_mul(n),
        n * (n - 1) / 2,
        (1u64 << 63).wrapping_mul(n),
        squares,
    ];
    ensure!(c, s == want, "sum {s:?}, expected {want:?}");
    let mut lo = base;
    c.allreduce_u64(ReduceOp::Min, &mut lo)?;
    ensure!(c, lo == [u64::MAX, 0, 1 << 63, 0], "min {lo:?}");
    let mut hi = base;
    c.allreduce_u64(ReduceOp::Max, &mut hi)?;
    ensure!(
        c,
        hi == [u64::MAX, n - 1, 1 << 63, (n - 1) * (n - 1)],
        "max {hi:?}"
    );
    Ok(())
}

/// Rounding f64 sums: bit-identical on every rank and on every repeat; with one or two ranks
/// (where any reduction order gives the same bits) equal to the serial fold.
pub fn allreduce_deterministic<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let mine = noisy_values(c.rank(), 64);
    let mut first = mine.clone();
    c.allreduce_f64(ReduceOp::Sum, &mut first)?;
    for rep in 0..5 {
        let mut again = mine.clone();
        c.allreduce_f64(ReduceOp::Sum, &mut again)?;
        ensure!(
            c,
            bits(&again) == bits(&first),
            "repeat {rep} gave different bits"
        );
    }
    let bits_here = bits(&first);
    let mut all = vec![0u64; bits_here.len() * c.size()];
    c.allgather(&bits_here, &mut all)?;
    for (r, other) in all.chunks(bits_here.len()).enumerate() {
        ensure!(
            c,
            other == bits_here.as_slice(),
            "rank {r} holds different bits"
        );
    }
    if c.size() <= 2 {
        let want = rank_order_fold(c.size(), 64);
        ensure!(
            c,
            bits(&first) == bits(&want),
            "sum differs from the serial fold"
        );
    }
    Ok(())
}

/// The serial reference: ranks' [`noisy_values`] folded in rank order.
fn rank_order_fold(size: usize, n: usize) -> Vec<f64> {
    let mut acc = noisy_values(0, n);
    for r in 1..size {
        acc.iter_mut()
            .zip(noisy_values(r, n))
            .for_each(|(a, b)| *a += b);
    }
    acc
}

/// For backends that promise rank-order folding (the thread backend): noisy sums equal the
/// serial left-to-right fold over ranks exactly. Not in [`checks`]: MPI picks its own tree.
pub fn rank_order_sum<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let mut s = noisy_values(c.rank(), 64);
    c.allreduce_f64(ReduceOp::Sum, &mut s)?;
    let want = rank_order_fold(c.size(), 64);
    ensure!(
        c,
        bits(&s) == bits(&want),
        "sum differs from the rank-order fold"
    );
    Ok(())
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Fixed-size allgather of u32 and f64, and of nothing.
pub fn allgather_fixed<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let r = c.rank() as u32;
    let send = [10 * r, 10 * r + 1, 10 * r + 2];
    let mut recv = vec![0u32; 3 * c.size()];
    c.allgather(&send, &mut recv)?;
    let want: Vec<u32> = (0..c.size() as u32)
        .flat_map(|q| [10 * q, 10 * q + 1, 10 * q + 2])
        .collect();
    ensure!(c, recv == want, "u32 allgather {recv:?}");
    let mut f = vec![0.0f64; c.size()];
    c.allgather(&[-(c.rank() as f64) - 0.25], &mut f)?;
    ensure!(
        c,
        f.iter().enumerate().all(|(q, &x)| x == -(q as f64) - 0.25),
        "f64 allgather {f:?}"
    );
    let mut none: Vec<u8> = Vec::new();
    c.allgather_bytes(&[], &mut none)?;
    Ok(())
}

/// Variable-size allgather: rank r contributes r bytes (rank 0 nothing) and 2r+1 f64.
pub fn allgatherv<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let r = c.rank();
    let got = c.allgatherv_bytes(&vec![r as u8; r])?;
    ensure!(c, got.ranks() == c.size(), "{} pieces", got.ranks());
    for q in 0..c.size() {
        ensure!(
            c,
            got.get(q) == vec![q as u8; q].as_slice(),
            "piece {q}: {:?}",
            got.get(q)
        );
    }
    let send: Vec<f64> = (0..2 * r + 1).map(|i| r as f64 + i as f64 / 8.0).collect();
    let got = c.allgatherv(&send)?;
    for q in 0..c.size() {
        let want: Vec<f64> = (0..2 * q + 1).map(|i| q as f64 + i as f64 / 8.0).collect();
        ensure!(
            c,
            got.get(q) == want.as_slice(),
            "f64 piece {q}: {:?}",
            got.get(q)
        );
    }
    Ok(())
}

/// Gather to each root in turn; broadcast from each root, replacing longer and shorter buffers.
pub fn gatherv_and_broadcast<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let r = c.rank();
    for root in 0..c.size() {
        let send = vec![(r * 100 + root) as u64; r + 1];
        let got = c.gatherv(root, &send)?;
        if r == root {
            let got = got.ok_or_else(|| CheckFailure(format!("rank {r}: root got nothing")))?;
            for q in 0..c.size() {
                let want = vec![(q * 100 + root) as u64; q + 1];
                ensure!(
                    c,
                    got.get(q) == want.as_slice(),
                    "gatherv to {root}: piece {q} {:?}",
                    got.get(q)
                );
            }
        } else {
            ensure!(c, got.is_none(), "non-root {r} received a gather to {root}");
        }
        let want: Vec<u8> = (0..(root + 1) * 3).map(|i| (i * 7 + root) as u8).collect();
        let mut buf = if r == root {
            want.clone()
        } else {
            vec![0xee; 5 * r + 1]
        };
        c.broadcast_bytes(root, &mut buf)?;
        ensure!(c, buf == want, "broadcast from {root}: {buf:?}");
        let mut typed = if r == root {
            vec![root as i64 - 9; 2]
        } else {
            Vec::new()
        };
        c.broadcast(root, &mut typed)?;
        ensure!(
            c,
            typed == vec![root as i64 - 9; 2],
            "typed broadcast from {root}: {typed:?}"
        );
    }
    Ok(())
}

fn pattern(src: usize, dst: usize, i: usize) -> u8 {
    (src * 31 + dst * 7 + i) as u8
}

/// alltoallv of bytes: rank s sends (s + 2d) mod 4 bytes to rank d (zeros and self included).
pub fn alltoallv_bytes<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let (me, n) = (c.rank(), c.size());
    let count = |s: usize, d: usize| (s + 2 * d) % 4;
    let counts: Vec<usize> = (0..n).map(|d| count(me, d)).collect();
    let send: Vec<u8> = (0..n)
        .flat_map(|d| (0..count(me, d)).map(move |i| pattern(me, d, i)))
        .collect();
    let got = c.alltoallv_bytes(&send, &counts)?;
    ensure!(c, got.ranks() == n, "{} pieces", got.ranks());
    for s in 0..n {
        let want: Vec<u8> = (0..count(s, me)).map(|i| pattern(s, me, i)).collect();
        ensure!(
            c,
            got.get(s) == want.as_slice(),
            "from {s}: {:?}, expected {want:?}",
            got.get(s)
        );
    }
    let nothing = c.alltoallv_bytes(&[], &vec![0; n])?;
    ensure!(
        c,
        nothing.data().is_empty() && nothing.ranks() == n,
        "empty exchange"
    );
    Ok(())
}

/// Split-phase exchange with known counts, the pattern of [`alltoallv_bytes`] with other
/// work and other collectives between the exchanges: three rounds, the second with every
/// count doubled, an allreduce between rounds, and an empty exchange at the end.
pub fn exchange_split_phase<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let (me, n) = (c.rank(), c.size());
    for round in 0..3usize {
        let scale = if round == 1 { 2 } else { 1 };
        let count = |s: usize, d: usize| scale * ((s + 2 * d + round) % 4);
        let counts: Vec<usize> = (0..n).map(|d| count(me, d)).collect();
        let expect: Vec<usize> = (0..n).map(|s| count(s, me)).collect();
        let send: Vec<u8> = (0..n)
            .flat_map(|d| (0..count(me, d)).map(move |i| pattern(me, d, i + round)))
            .collect();
        let x = c.exchange_start(&send, &counts, &expect)?;
        // Work between start and finish (what the exchange overlaps).
        let busy: u64 = (0..10_000u64).map(|i| i.wrapping_mul(i ^ me as u64)).sum();
        std::hint::black_box(busy);
        let got = c.exchange_finish(x)?;
        ensure!(c, got.ranks() == n, "round {round}: {} pieces", got.ranks());
        for (s, &e) in expect.iter().enumerate() {
            let want: Vec<u8> = (0..e).map(|i| pattern(s, me, i + round)).collect();
            ensure!(
                c,
                got.get(s) == want.as_slice(),
                "round {round}, from {s}: {:?}, expected {want:?}",
                got.get(s)
            );
        }
        let mut one = [1u64];
        c.allreduce_u64(ReduceOp::Sum, &mut one)?;
        ensure!(
            c,
            one[0] == n as u64,
            "allreduce after round {round}: {one:?}"
        );
    }
    let x = c.exchange_start(&[], &vec![0; n], &vec![0; n])?;
    let nothing = c.exchange_finish(x)?;
    ensure!(
        c,
        nothing.data().is_empty() && nothing.ranks() == n,
        "empty exchange"
    );
    Ok(())
}

/// alltoallv of 64 Ki f64 to each rank (several MiB in flight).
pub fn alltoallv_large_f64<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    const M: usize = 1 << 16;
    let (me, n) = (c.rank(), c.size());
    let value = |s: usize, d: usize, i: usize| (s * n + d) as f64 * 1e6 + i as f64;
    let send: Vec<f64> = (0..n)
        .flat_map(|d| (0..M).map(move |i| value(me, d, i)))
        .collect();
    let got = c.alltoallv(&send, &vec![M; n])?;
    for s in 0..n {
        let piece = got.get(s);
        ensure!(c, piece.len() == M, "from {s}: {} values", piece.len());
        if let Some(i) = (0..M).find(|&i| piece[i] != value(s, me, i)) {
            return Err(CheckFailure(format!(
                "rank {me}: from {s}, value {i} is {}",
                piece[i]
            )));
        }
    }
    Ok(())
}

/// Split by parity with descending keys; collectives on the parts; then split again into
/// singletons.
pub fn split_by_parity<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let (me, n) = (c.rank(), c.size());
    let colour = (me % 2) as u32;
    let sub = c.split(colour, -(me as i32))?;
    let members: Vec<usize> = (0..n).filter(|q| q % 2 == me % 2).rev().collect();
    ensure!(
        c,
        sub.size() == members.len(),
        "part size {} != {}",
        sub.size(),
        members.len()
    );
    let pos = members
        .iter()
        .position(|&q| q == me)
        .expect("member of own colour");
    ensure!(c, sub.rank() == pos, "new rank {} != {pos}", sub.rank());
    let mut s = [me as u64, 1];
    sub.allreduce_u64(ReduceOp::Sum, &mut s)?;
    let want = [
        members.iter().map(|&q| q as u64).sum::<u64>(),
        members.len() as u64,
    ];
    ensure!(
        c,
        s == want,
        "sum on part {colour}: {s:?}, expected {want:?}"
    );
    let mut order = vec![0u64; sub.size()];
    sub.allgather(&[me as u64], &mut order)?;
    let want: Vec<u64> = members.iter().map(|&q| q as u64).collect();
    ensure!(c, order == want, "part order {order:?}, expected {want:?}");
    let single = sub.split(sub.rank() as u32, 0)?;
    ensure!(
        c,
        single.size() == 1 && single.rank() == 0,
        "singleton has {} ranks",
        single.size()
    );
    let mut x = [me as f64];
    single.allreduce_f64(ReduceOp::Sum, &mut x)?;
    ensure!(c, x[0] == me as f64, "singleton sum {x:?}");
    // The parent still works after the children were used.
    c.barrier()?;
    Ok(())
}

/// One colour, keys reversing the order; equal keys keep the old order.
pub fn split_by_key<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let (me, n) = (c.rank(), c.size());
    let rev = c.split(7, (n - me) as i32)?;
    ensure!(
        c,
        rev.size() == n && rev.rank() == n - 1 - me,
        "reversed rank {}",
        rev.rank()
    );
    let same = c.split(3, 0)?;
    ensure!(
        c,
        same.rank() == me,
        "equal keys moved rank {me} to {}",
        same.rank()
    );
    Ok(())
}

/// Node-local split: the node leaders' sizes add up to the world; members share a name.
pub fn split_node<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let node = c.split_node()?;
    ensure!(
        c,
        node.size() >= 1 && node.size() <= c.size(),
        "node of {} ranks",
        node.size()
    );
    let mut total = [if node.rank() == 0 {
        node.size() as u64
    } else {
        0
    }];
    c.allreduce_u64(ReduceOp::Sum, &mut total)?;
    ensure!(
        c,
        total[0] == c.size() as u64,
        "node sizes add up to {}",
        total[0]
    );
    let name = c.processor_name();
    let names = node.allgatherv_bytes(name.as_bytes())?;
    for q in 0..node.size() {
        ensure!(
            c,
            names.get(q) == name.as_bytes(),
            "node member {q} runs on another host"
        );
    }
    Ok(())
}

/// `part_api::Reduce` forwards to the communicator.
pub fn reduce_trait<C: Comm + Reduce<Error = CommError>>(c: &C) -> Result<(), CheckFailure> {
    type Seen = ([f64; 3], [u64; 1], usize, usize);
    fn through<R: Reduce>(r: &R) -> Result<Seen, R::Error> {
        let x = r.rank() as f64;
        let mut s = [x];
        let mut lo = [x];
        let mut hi = [x];
        let mut u = [r.rank() as u64 + 1];
        r.sum_f64(&mut s)?;
        r.min_f64(&mut lo)?;
        r.max_f64(&mut hi)?;
        r.sum_u64(&mut u)?;
        Ok(([s[0], lo[0], hi[0]], u, r.rank(), r.size()))
    }
    let n = Comm::size(c);
    let (f, u, rank, size) = through(c)?;
    ensure!(
        c,
        (rank, size) == (Comm::rank(c), n),
        "Reduce rank/size {rank}/{size}"
    );
    let want = [(n * (n - 1) / 2) as f64, 0.0, (n - 1) as f64];
    ensure!(c, f == want, "Reduce f64 {f:?}, expected {want:?}");
    ensure!(c, u == [(n * (n + 1) / 2) as u64], "Reduce sum_u64 {u:?}");
    Ok(())
}

/// Buffers of different lengths: every rank gets the same `LengthMismatch`; the communicator
/// stays usable.
pub fn length_mismatch<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    if c.size() < 2 {
        return Ok(());
    }
    let len = if c.rank() == 0 { 2 } else { 3 };
    let mut f = vec![1.0; len];
    match c.allreduce_f64(ReduceOp::Sum, &mut f) {
        Err(CommError::LengthMismatch { min: 2, max: 3, .. }) => {}
        other => {
            return Err(CheckFailure(format!(
                "rank {}: f64 got {other:?}",
                c.rank()
            )));
        }
    }
    let mut u = vec![1u64; len];
    match c.allreduce_u64(ReduceOp::Max, &mut u) {
        Err(e @ CommError::LengthMismatch { min: 2, max: 3, .. }) => {
            let msg = e.to_string();
            ensure!(c, msg.contains("shortest 2, longest 3"), "message: {msg}");
        }
        other => {
            return Err(CheckFailure(format!(
                "rank {}: u64 got {other:?}",
                c.rank()
            )));
        }
    }
    let send = vec![0u8; len];
    let mut recv = vec![0u8; len * c.size()];
    match c.allgather_bytes(&send, &mut recv) {
        Err(CommError::LengthMismatch { min: 2, max: 3, .. }) => {}
        other => {
            return Err(CheckFailure(format!(
                "rank {}: allgather got {other:?}",
                c.rank()
            )));
        }
    }
    c.barrier()?;
    let mut ok = [1u64];
    c.allreduce_u64(ReduceOp::Sum, &mut ok)?;
    ensure!(c, ok[0] == c.size() as u64, "sum after mismatch {ok:?}");
    Ok(())
}

/// Different collectives at the same time (a barrier against an allreduce, a split-phase
/// exchange against an allreduce): every rank gets `OpMismatch`; still usable.
pub fn op_mismatch<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    if c.size() < 2 {
        return Ok(());
    }
    let n = c.size();
    // Rank 0's call (a split-phase exchange fails at its start or its finish) and its name.
    type Call<'a> = &'a dyn Fn() -> Result<(), CommError>;
    let rank0: [(&str, Call<'_>); 2] = [
        ("barrier", &|| c.barrier()),
        ("exchange", &|| {
            c.exchange_start(&[], &vec![0; n], &vec![0; n])
                .and_then(|x| c.exchange_finish(x))
                .map(|_| ())
        }),
    ];
    for (name, call) in rank0 {
        let got = if c.rank() == 0 {
            call()
        } else {
            c.allreduce_u64(ReduceOp::Sum, &mut [1])
        };
        match got {
            Err(e @ CommError::OpMismatch { .. }) => {
                let msg = e.to_string();
                ensure!(
                    c,
                    msg.contains(name) && msg.contains("allreduce_u64(Sum)"),
                    "message: {msg}"
                );
            }
            other => return Err(CheckFailure(format!("rank {}: got {other:?}", c.rank()))),
        }
    }
    c.barrier()?;
    Ok(())
}

/// Different roots for one gather: every rank gets `RootMismatch`; still usable.
pub fn root_mismatch<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    if c.size() < 2 {
        return Ok(());
    }
    let root = usize::from(c.rank() != 0);
    match c.gatherv_bytes(root, b"x") {
        Err(CommError::RootMismatch { min: 0, max: 1, .. }) => {}
        other => return Err(CheckFailure(format!("rank {}: got {other:?}", c.rank()))),
    }
    c.barrier()?;
    Ok(())
}

/// The α–β probe between the first and last rank gives the same finite model everywhere.
pub fn link_model<C: Comm>(c: &C) -> Result<(), CheckFailure> {
    let probe = LinkProbe {
        small: 8,
        large: 1 << 16,
        repeats: 3,
        target_s: 0.05,
    };
    let m = measure_link(c, 0, c.size() - 1, &probe)?;
    ensure!(
        c,
        [m.t_small, m.t_large].iter().all(|x| x.is_finite()),
        "timings {m:?}"
    );
    ensure!(
        c,
        m.t_small > 0.0 && m.t_large > 0.0,
        "zero time measured: {m:?}"
    );
    let here = [m.t_small.to_bits(), m.t_large.to_bits()];
    let mut all = vec![0u64; 2 * c.size()];
    c.allgather(&here, &mut all)?;
    ensure!(
        c,
        all.chunks(2).all(|p| p == here),
        "ranks disagree on the timings"
    );
    Ok(())
}
