//! `ThreadComm`: ranks as threads of one process.
//!
//! Design (see also `comm/README.md`): each communicator is a [`Group`] with one mutex-guarded
//! table of "slots", one per rank, and a condition variable. A collective is a *round*: every
//! rank deposits its contribution in its slot; the last one to arrive checks that all ranks
//! called the same collective with consistent arguments, computes the shared outcome (a
//! reduction folded in rank order, or the table of contributions for the gathers and
//! exchanges, which each rank then copies from in parallel), publishes it and wakes the
//! others. A waiting rank spins on the round counter, then sleeps on the condition variable:
//! for [`LONG_SPIN`] on a core of its own, for [`DEFAULT_SPIN`] on a core it shares with
//! another busy thread or process (see [`spin_budget`]), or as long as
//! [`ThreadOptions::spin`] says. A split-phase exchange ([`Comm::exchange_start`]) is a round
//! whose joining and collecting are two calls: the rank deposits its pieces and returns, and
//! waits (if the round is still open) only when it collects; the round's outcome stays the
//! group's last result until then, since the next round cannot complete without this rank.
//!
//! Failure: the run-wide [`World`] records the first rank that panicked and which ranks have
//! returned. Both events wake every communicator of the run; a waiting rank then returns
//! [`CommError::RankFailed`] or [`CommError::RankExited`] unless its round had already
//! completed (the round's result is still delivered; the *next* collective fails).

use crate::{
    Comm, CommError, Exchange, ExchangeState, Op, PerRank, ReduceOp, affinity, check_recv_counts,
    fold_f64, fold_u64, send_offsets,
};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

/// How [`ThreadComm::run`] lays out its ranks. Every field is optional.
#[derive(Debug, Clone, Default)]
pub struct ThreadOptions {
    /// Pin rank `r`'s thread to the CPUs `cpus[r]` (indices as in `/proc/cpuinfo`; typically
    /// a machine file's `cpus` attribute, parsed by the caller). One non-empty list per rank.
    pub cpus: Option<Vec<Vec<usize>>>,
    /// A host label per rank, to emulate several nodes in one process:
    /// [`Comm::split_node`] groups ranks with equal labels and [`Comm::processor_name`]
    /// returns the label. Without labels all ranks share this host's name.
    pub hosts: Option<Vec<String>>,
    /// Stack size of each rank's thread in bytes (default: Rust's default for spawned
    /// threads).
    pub stack_size: Option<usize>,
    /// How long a waiting rank spins before it sleeps on the condition variable, the same for
    /// every rank (zero: it sleeps at once, leaving its core to whatever else runs there).
    /// Default: each rank by its core, [`LONG_SPIN`] on a core of its own, [`DEFAULT_SPIN`]
    /// on a core it shares with another busy thread or process.
    pub spin: Option<std::time::Duration>,
}

/// A communicator whose ranks are threads of this process (see [`ThreadComm::run`]).
///
/// `part_api::Reduce` is implemented by forwarding to [`Comm`].
#[derive(Debug, Clone)]
pub struct ThreadComm {
    group: Arc<Group>,
    rank: usize,
}

/// Run-wide state shared by every communicator of one [`ThreadComm::run`].
#[derive(Debug)]
struct World {
    /// The first rank that failed and its message.
    failure: OnceLock<(usize, String)>,
    /// Which world ranks have returned (or failed).
    exited: Vec<AtomicBool>,
    hosts: Option<Vec<String>>,
    /// Every communicator created in this run, to wake them all on a failure.
    groups: Mutex<Vec<Weak<Group>>>,
    /// How long a waiting rank spins before it sleeps (`None`: by its core, [`spin_budget`]).
    spin: Option<std::time::Duration>,
}

/// One communicator: its members and its round table.
#[derive(Debug)]
struct Group {
    world: Arc<World>,
    /// World rank of each rank of this group.
    members: Vec<usize>,
    state: Mutex<State>,
    cv: Condvar,
    /// Number of completed rounds (`State::round`, readable without the lock), so that a
    /// waiting rank can spin briefly before it sleeps.
    completed: AtomicU64,
}

/// How long a rank spins on the round counter before it sleeps on the condition variable
/// on a core it shares with another busy thread or process, unless [`ThreadOptions::spin`]
/// says otherwise.
/// Waking a sleeping thread costs tens of microseconds on a virtual machine, more than most
/// rounds of an iterative solver take; a short spin keeps those rounds at memory speed, and a
/// longer wait (a rank ahead of the others, an oversubscribed host) still sleeps. On a shared
/// core every microsecond spun is taken from the process beside the rank, and the scheduler
/// takes it back from the rank when its work arrives: there the spin stays this short.
pub const DEFAULT_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// How long a rank spins before it sleeps on a core of its own, unless [`ThreadOptions::spin`]
/// says otherwise. A rank that slept is woken tens of microseconds late: with a spin shorter than that, two ranks exchanging small rounds fall
/// into a pattern where each round one of them has just gone to sleep when the other
/// arrives, and every round costs a wake-up (measured on the 2-core host: the first steps of
/// the adaptive run, a few hundred elements each, took 1.8-2.0 ms with a 50 µs spin and
/// 0.3-0.5 ms with a 2 ms one, about 60 µs per collective).
pub const LONG_SPIN: std::time::Duration = std::time::Duration::from_millis(1);

/// Whether the calling thread shares its core: the share of the time since its last look that
/// it spent runnable but not running (the kernel's run delay, `/proc/thread-self/schedstat`),
/// which only another busy thread or process on its CPU causes. One per thread (a rank's
/// communicators share it); looked at when the thread is about to wait, at most every
/// [`CoreWatch::LOOK_EVERY`].
#[derive(Debug)]
struct CoreWatch {
    /// `/proc/thread-self/schedstat`, open (`None` where there is none).
    file: Option<std::fs::File>,
    /// When the last look was, and the run delay it read (ns).
    at: std::time::Instant,
    delay_ns: u64,
    /// The verdict of the last look.
    shared: bool,
}

impl CoreWatch {
    /// Looks no more often than this (a look is one `pread`).
    const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(2);
    /// Runnable-but-waiting time above this share of the interval: the core is shared.
    const SHARED_DELAY: f64 = 0.05;

    fn new() -> CoreWatch {
        let file = std::fs::File::open("/proc/thread-self/schedstat").ok();
        let delay_ns = file.as_ref().and_then(Self::run_delay).unwrap_or(0);
        CoreWatch {
            at: std::time::Instant::now(),
            delay_ns,
            // Without the file: as a shared core (the short spin, as before this watch).
            shared: file.is_none(),
            file,
        }
    }

    /// The thread's run delay so far (the second of schedstat's three numbers), ns.
    fn run_delay(file: &std::fs::File) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    /// The verdict now, looking again if the last look is old enough.
    fn shared(&mut self, now: std::time::Instant) -> bool {
        let since = now.duration_since(self.at);
        if since < Self::LOOK_EVERY {
            return self.shared;
        }
        if let Some(d) = self.file.as_ref().and_then(Self::run_delay) {
            let waited = d.saturating_sub(self.delay_ns) as f64 * 1e-9;
            self.shared = waited > Self::SHARED_DELAY * since.as_secs_f64();
            (self.delay_ns, self.at) = (d, now);
        }
        self.shared
    }
}

thread_local! {
    static CORE: std::cell::RefCell<Option<CoreWatch>> = const { std::cell::RefCell::new(None) };
}

/// How long the calling rank spins before it sleeps: `fixed` if given; else
/// [`DEFAULT_SPIN`] while it shares its core with another busy thread or process (the spin
/// would take the core from it, and the scheduler takes it back from the rank when its work
/// arrives), and [`LONG_SPIN`] on a core of its own, where spinning costs nobody anything and
/// catches a partner that a sleep would make late.
fn spin_budget(fixed: Option<std::time::Duration>, now: std::time::Instant) -> std::time::Duration {
    if let Some(d) = fixed {
        return d;
    }
    let shared = CORE.with(|c| {
        c.borrow_mut()
            .get_or_insert_with(CoreWatch::new)
            .shared(now)
    });
    if shared { DEFAULT_SPIN } else { LONG_SPIN }
}

#[derive(Debug)]
struct State {
    /// Number of the round being collected.
    round: u64,
    arrived: usize,
    slots: Vec<Option<Slot>>,
    /// Outcome of the last completed round.
    result: Option<Arc<Outcome>>,
}

/// One rank's contribution to a round.
#[derive(Debug)]
struct Slot {
    op: Op,
    data: Data,
}

#[derive(Debug)]
enum Data {
    None,
    F64(Vec<f64>),
    U64(Vec<u64>),
    Bytes(Vec<u8>),
    /// Root and bytes (gatherv, broadcast).
    Rooted(usize, Vec<u8>),
    /// Bytes and their send offsets (length `size + 1`).
    Pieces(Vec<u8>, Vec<usize>),
    /// Colour and key.
    Split(u32, i32),
    /// Bytes, their send offsets (length `size + 1`) and the counts expected from each rank
    /// ([`Comm::exchange_start`]).
    Exchange(Vec<u8>, Vec<usize>, Vec<usize>),
}

/// What joining a round gave: its outcome (this rank arrived last), or the round to wait for.
enum Joined {
    Complete(Arc<Outcome>),
    Waiting(u64),
}

/// A round of [`Comm::exchange_start`] this rank has joined and not yet collected.
#[derive(Debug)]
pub(crate) struct InFlight {
    group: Arc<Group>,
    round: u64,
    /// The outcome, when this rank completed the round itself.
    done: Option<Arc<Outcome>>,
}

/// The shared result of a completed round.
#[derive(Debug)]
enum Outcome {
    Unit,
    F64(Vec<f64>),
    U64(Vec<u64>),
    /// All contributions, for each rank to copy its share from.
    Slots(Vec<Slot>),
    /// For each old rank: its new group and rank there.
    Split(Vec<(Arc<Group>, usize)>),
    Mismatch(Mismatch),
}

/// A disagreement between ranks, reported identically to all of them.
#[derive(Debug, Clone, Copy)]
enum Mismatch {
    Op(Op, Op),
    Length(Op, usize, usize),
    Root(Op, usize, usize),
}

impl From<Mismatch> for CommError {
    fn from(m: Mismatch) -> Self {
        match m {
            Mismatch::Op(a, b) => CommError::OpMismatch {
                this: a.name(),
                other: b.name(),
            },
            Mismatch::Length(op, min, max) => CommError::LengthMismatch {
                op: op.name(),
                min,
                max,
            },
            Mismatch::Root(op, min, max) => CommError::RootMismatch {
                op: op.name(),
                min,
                max,
            },
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl World {
    fn register(&self, group: &Arc<Group>) {
        let mut groups = lock(&self.groups);
        groups.retain(|g| g.strong_count() > 0);
        groups.push(Arc::downgrade(group));
    }

    /// Wakes every waiting rank of every communicator so it re-checks for failures.
    fn wake_all(&self) {
        let groups: Vec<Arc<Group>> = lock(&self.groups)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for g in groups {
            // Taking the lock orders this wake-up after any waiter's check of the flags.
            drop(lock(&g.state));
            g.cv.notify_all();
        }
    }

    fn fail(&self, rank: usize, message: String) {
        let _ = self.failure.set((rank, message));
        self.exited[rank].store(true, Ordering::SeqCst);
        self.wake_all();
    }

    fn exit(&self, rank: usize) {
        self.exited[rank].store(true, Ordering::SeqCst);
        self.wake_all();
    }
}

impl Group {
    fn new(world: Arc<World>, members: Vec<usize>) -> Arc<Group> {
        let n = members.len();
        let g = Arc::new(Group {
            world: Arc::clone(&world),
            members,
            state: Mutex::new(State {
                round: 0,
                arrived: 0,
                slots: (0..n).map(|_| None).collect(),
                result: None,
            }),
            cv: Condvar::new(),
            completed: AtomicU64::new(0),
        });
        world.register(&g);
        g
    }

    /// Why a rank of this group cannot complete a round of `op` (a failed or departed peer).
    fn blocked(&self, st: &State, op: Op) -> Option<CommError> {
        if let Some((rank, message)) = self.world.failure.get() {
            return Some(CommError::RankFailed {
                rank: *rank,
                message: message.clone(),
            });
        }
        self.members
            .iter()
            .enumerate()
            .find(|&(gr, &wr)| {
                st.slots[gr].is_none() && self.world.exited[wr].load(Ordering::SeqCst)
            })
            .map(|(_, &wr)| CommError::RankExited {
                rank: wr,
                op: op.name(),
            })
    }

    /// Called by the last rank to arrive, with the lock held: checks the round and computes
    /// its outcome.
    fn complete(self: &Arc<Self>, slots: Vec<Slot>) -> Outcome {
        let op = slots[0].op;
        if let Some(other) = slots.iter().find(|s| s.op != op) {
            return Outcome::Mismatch(Mismatch::Op(op, other.op));
        }
        let lens = |f: &dyn Fn(&Data) -> usize| {
            let (mut min, mut max) = (usize::MAX, 0);
            for s in &slots {
                let l = f(&s.data);
                min = min.min(l);
                max = max.max(l);
            }
            (min, max)
        };
        match op {
            Op::Barrier => Outcome::Unit,
            Op::AllreduceF64Sum | Op::AllreduceF64Min | Op::AllreduceF64Max => {
                let vecs = slots.into_iter().map(|s| match s.data {
                    Data::F64(v) => v,
                    _ => unreachable!("f64 reduction carries f64 data"),
                });
                fold_ranks(op, vecs.collect(), fold_f64)
                    .map_or_else(Outcome::Mismatch, Outcome::F64)
            }
            Op::AllreduceU64Sum | Op::AllreduceU64Min | Op::AllreduceU64Max => {
                let vecs = slots.into_iter().map(|s| match s.data {
                    Data::U64(v) => v,
                    _ => unreachable!("u64 reduction carries u64 data"),
                });
                fold_ranks(op, vecs.collect(), fold_u64)
                    .map_or_else(Outcome::Mismatch, Outcome::U64)
            }
            Op::Allgather => {
                let (min, max) = lens(&|d| match d {
                    Data::Bytes(v) => v.len(),
                    _ => unreachable!("allgather carries bytes"),
                });
                if min != max {
                    return Outcome::Mismatch(Mismatch::Length(op, min, max));
                }
                Outcome::Slots(slots)
            }
            Op::Gatherv | Op::Broadcast => {
                let (min, max) = lens(&|d| match d {
                    Data::Rooted(root, _) => *root,
                    _ => unreachable!("rooted collective carries a root"),
                });
                if min != max {
                    return Outcome::Mismatch(Mismatch::Root(op, min, max));
                }
                Outcome::Slots(slots)
            }
            Op::Allgatherv | Op::Alltoallv => Outcome::Slots(slots),
            Op::Exchange => {
                let sent = |s: &Slot, d: usize| match &s.data {
                    Data::Exchange(_, off, _) => off[d + 1] - off[d],
                    _ => unreachable!("exchange carries pieces"),
                };
                let expected = |d: &Slot, s: usize| match &d.data {
                    Data::Exchange(_, _, recv) => recv[s],
                    _ => unreachable!("exchange carries pieces"),
                };
                for (si, s) in slots.iter().enumerate() {
                    for (di, d) in slots.iter().enumerate() {
                        let (a, b) = (sent(s, di), expected(d, si));
                        if a != b {
                            return Outcome::Mismatch(Mismatch::Length(op, a.min(b), a.max(b)));
                        }
                    }
                }
                Outcome::Slots(slots)
            }
            Op::Split | Op::SplitNode => {
                let mut by_colour: BTreeMap<u32, Vec<(i32, usize)>> = BTreeMap::new();
                for (old, s) in slots.iter().enumerate() {
                    let Data::Split(colour, key) = s.data else {
                        unreachable!("split carries colour and key")
                    };
                    by_colour.entry(colour).or_default().push((key, old));
                }
                let mut out: Vec<Option<(Arc<Group>, usize)>> =
                    (0..slots.len()).map(|_| None).collect();
                for (_, mut ranks) in by_colour {
                    ranks.sort_unstable();
                    let members = ranks.iter().map(|&(_, old)| self.members[old]).collect();
                    let g = Group::new(Arc::clone(&self.world), members);
                    for (new, &(_, old)) in ranks.iter().enumerate() {
                        out[old] = Some((Arc::clone(&g), new));
                    }
                }
                Outcome::Split(
                    out.into_iter()
                        .map(|o| o.expect("every rank has a colour"))
                        .collect(),
                )
            }
        }
    }
}

/// Folds the ranks' buffers in rank order, `((x₀ ∘ x₁) ∘ x₂) ∘ …`, after checking their
/// lengths agree.
fn fold_ranks<T>(
    op: Op,
    vecs: Vec<Vec<T>>,
    fold: fn(ReduceOp, &mut [T], &[T]),
) -> Result<Vec<T>, Mismatch> {
    let min = vecs.iter().map(Vec::len).min().unwrap_or(0);
    let max = vecs.iter().map(Vec::len).max().unwrap_or(0);
    if min != max {
        return Err(Mismatch::Length(op, min, max));
    }
    let rop = op.reduce_op().expect("a reduction");
    let mut it = vecs.into_iter();
    let mut acc = it.next().expect("a group has at least one rank");
    for x in it {
        fold(rop, &mut acc, &x);
    }
    Ok(acc)
}

impl ThreadComm {
    /// Runs `f` on `n` ranks, each a thread of this process with its own communicator
    /// handle, and returns the results in rank order.
    ///
    /// If a rank panics, the other ranks' pending and later collectives return
    /// [`CommError::RankFailed`] naming it, and `run` returns that error (the first rank to
    /// fail; later panics are usually consequences). A rank that returns while the others
    /// still call collectives on a communicator it belongs to makes those fail with
    /// [`CommError::RankExited`].
    ///
    /// Errors before any rank starts: `n == 0`, option lists whose length is not `n`, an
    /// empty host label or CPU list ([`CommError::Options`]), a CPU this process may not use
    /// ([`CommError::InvalidCpu`]). A thread that cannot be started or pinned fails the run
    /// ([`CommError::Spawn`], [`CommError::Affinity`]).
    pub fn run<R, F>(n: usize, opts: &ThreadOptions, f: F) -> Result<Vec<R>, CommError>
    where
        R: Send,
        F: Fn(ThreadComm) -> R + Sync,
    {
        if n == 0 {
            return Err(CommError::Options("a run needs at least one rank".into()));
        }
        if let Some(cpus) = &opts.cpus {
            if cpus.len() != n {
                return Err(CommError::Options(format!(
                    "{} CPU lists given for {n} ranks (one per rank)",
                    cpus.len()
                )));
            }
            affinity::validate(cpus)?;
        }
        if let Some(hosts) = &opts.hosts {
            if hosts.len() != n {
                return Err(CommError::Options(format!(
                    "{} host labels given for {n} ranks (one per rank)",
                    hosts.len()
                )));
            }
            if let Some(r) = hosts.iter().position(|h| h.trim().is_empty()) {
                return Err(CommError::Options(format!(
                    "rank {r} has an empty host label"
                )));
            }
        }
        let world = Arc::new(World {
            failure: OnceLock::new(),
            exited: (0..n).map(|_| AtomicBool::new(false)).collect(),
            hosts: opts.hosts.clone(),
            groups: Mutex::new(Vec::new()),
            spin: opts.spin,
        });
        let top = Group::new(Arc::clone(&world), (0..n).collect());

        enum End<R> {
            Done(R),
            Panicked,
            Failed(CommError),
        }
        let f = &f;
        let ends: Vec<End<R>> = std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(n);
            let mut spawn_error = None;
            for rank in 0..n {
                let comm = ThreadComm {
                    group: Arc::clone(&top),
                    rank,
                };
                let w = Arc::clone(&world);
                let cpus = opts.cpus.as_ref().map(|c| c[rank].clone());
                let mut builder = std::thread::Builder::new().name(format!("rank-{rank}"));
                if let Some(size) = opts.stack_size {
                    builder = builder.stack_size(size);
                }
                let spawned = builder.spawn_scoped(s, move || {
                    if let Some(cpus) = cpus
                        && let Err(e) = affinity::pin_current_thread(rank, &cpus)
                    {
                        w.fail(rank, e.to_string());
                        return End::Failed(e);
                    }
                    match catch_unwind(AssertUnwindSafe(|| f(comm))) {
                        Ok(r) => {
                            w.exit(rank);
                            End::Done(r)
                        }
                        Err(payload) => {
                            w.fail(rank, part_api::panic_message(payload));
                            End::Panicked
                        }
                    }
                });
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(source) => {
                        // The ranks already running must not wait for this one or later ones.
                        world.fail(rank, format!("its thread could not be started: {source}"));
                        (rank + 1..n).for_each(|r| world.exit(r));
                        spawn_error = Some(CommError::Spawn { rank, source });
                        break;
                    }
                }
            }
            let mut ends: Vec<End<R>> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or(End::Panicked))
                .collect();
            ends.extend(spawn_error.map(End::Failed));
            ends
        });

        let mut out = Vec::with_capacity(n);
        let mut first_error = None;
        for end in ends {
            match end {
                End::Done(r) => out.push(r),
                End::Failed(e) => {
                    first_error.get_or_insert(e);
                }
                End::Panicked => {}
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        if let Some((rank, message)) = world.failure.get() {
            return Err(CommError::RankFailed {
                rank: *rank,
                message: message.clone(),
            });
        }
        Ok(out)
    }

    /// This rank's index in the whole run (the communicator `run` handed out).
    pub fn world_rank(&self) -> usize {
        self.group.members[self.rank]
    }

    /// Deposits this rank's contribution and waits for the round's outcome.
    fn exchange(&self, op: Op, data: Data) -> Result<Arc<Outcome>, CommError> {
        match self.join(op, data)? {
            Joined::Complete(outcome) => into_result(outcome),
            Joined::Waiting(round) => self.await_round(op, round),
        }
    }

    /// Deposits this rank's contribution; the last rank to arrive completes the round.
    fn join(&self, op: Op, data: Data) -> Result<Joined, CommError> {
        let g = &self.group;
        let mut st = lock(&g.state);
        if let Some(e) = g.blocked(&st, op) {
            return Err(e);
        }
        assert!(
            st.slots[self.rank].is_none(),
            "rank {} called a collective while another call of the same rank is in progress \
             (an exchange not finished, or one ThreadComm handle used from two threads at once)",
            self.rank
        );
        let round = st.round;
        st.slots[self.rank] = Some(Slot { op, data });
        st.arrived += 1;
        if st.arrived == self.group.members.len() {
            let slots: Vec<Slot> = st
                .slots
                .iter_mut()
                .map(|s| s.take().expect("all arrived"))
                .collect();
            let outcome = Arc::new(g.complete(slots));
            st.result = Some(Arc::clone(&outcome));
            st.arrived = 0;
            st.round += 1;
            g.completed.store(st.round, Ordering::Release);
            drop(st);
            g.cv.notify_all();
            return Ok(Joined::Complete(outcome));
        }
        Ok(Joined::Waiting(round))
    }

    /// Waits for round `round` (joined by this rank) to complete: spins, then sleeps. Its
    /// outcome is still the group's last result then, as the next round cannot complete
    /// without this rank.
    fn await_round(&self, op: Op, round: u64) -> Result<Arc<Outcome>, CommError> {
        let g = &self.group;
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        let spin = spin_budget(g.world.spin, start);
        while !spin.is_zero()
            && g.completed.load(Ordering::Acquire) <= round
            && g.world.failure.get().is_none()
        {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(64) && start.elapsed() > spin {
                break;
            }
        }
        let mut st = lock(&g.state);
        if st.round > round {
            let outcome = Arc::clone(st.result.as_ref().expect("a completed round has a result"));
            drop(st);
            return into_result(outcome);
        }
        // A failure while this rank spun woke nobody: look before sleeping.
        if let Some(e) = g.blocked(&st, op) {
            return Err(e);
        }
        loop {
            st = g.cv.wait(st).unwrap_or_else(PoisonError::into_inner);
            if st.round > round {
                let outcome =
                    Arc::clone(st.result.as_ref().expect("a completed round has a result"));
                drop(st);
                return into_result(outcome);
            }
            if let Some(e) = g.blocked(&st, op) {
                return Err(e);
            }
        }
    }

    fn slots(&self, op: Op, data: Data) -> Result<SlotsView, CommError> {
        let outcome = self.exchange(op, data)?;
        match &*outcome {
            Outcome::Slots(_) => Ok(SlotsView(outcome)),
            other => unreachable!("{} produced {other:?}", op.name()),
        }
    }
}

/// A completed round's contributions.
struct SlotsView(Arc<Outcome>);

impl SlotsView {
    fn slots(&self) -> &[Slot] {
        match &*self.0 {
            Outcome::Slots(s) => s,
            _ => unreachable!("checked in ThreadComm::slots"),
        }
    }
}

fn into_result(outcome: Arc<Outcome>) -> Result<Arc<Outcome>, CommError> {
    match &*outcome {
        Outcome::Mismatch(m) => Err((*m).into()),
        _ => Ok(outcome),
    }
}

/// This machine's host name.
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.group.members.len()
    }

    fn barrier(&self) -> Result<(), CommError> {
        self.exchange(Op::Barrier, Data::None).map(|_| ())
    }

    fn allreduce_f64(&self, op: ReduceOp, buf: &mut [f64]) -> Result<(), CommError> {
        let op = Op::reduce_f64(op);
        match &*self.exchange(op, Data::F64(buf.to_vec()))? {
            Outcome::F64(r) => buf.copy_from_slice(r),
            other => unreachable!("{} produced {other:?}", op.name()),
        }
        Ok(())
    }

    fn allreduce_u64(&self, op: ReduceOp, buf: &mut [u64]) -> Result<(), CommError> {
        let op = Op::reduce_u64(op);
        match &*self.exchange(op, Data::U64(buf.to_vec()))? {
            Outcome::U64(r) => buf.copy_from_slice(r),
            other => unreachable!("{} produced {other:?}", op.name()),
        }
        Ok(())
    }

    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CommError> {
        crate::check_allgather_len(self.size(), send.len(), recv.len());
        let view = self.slots(Op::Allgather, Data::Bytes(send.to_vec()))?;
        for (chunk, s) in recv.chunks_exact_mut(send.len().max(1)).zip(view.slots()) {
            let Data::Bytes(b) = &s.data else {
                unreachable!("allgather carries bytes")
            };
            chunk.copy_from_slice(b);
        }
        Ok(())
    }

    fn allgatherv_bytes(&self, send: &[u8]) -> Result<PerRank<u8>, CommError> {
        let view = self.slots(Op::Allgatherv, Data::Bytes(send.to_vec()))?;
        Ok(concat(view.slots().iter().map(|s| match &s.data {
            Data::Bytes(b) => b.as_slice(),
            _ => unreachable!("allgatherv carries bytes"),
        })))
    }

    fn gatherv_bytes(&self, root: usize, send: &[u8]) -> Result<Option<PerRank<u8>>, CommError> {
        assert!(
            root < self.size(),
            "gatherv: root {root} out of range for {} ranks",
            self.size()
        );
        let view = self.slots(Op::Gatherv, Data::Rooted(root, send.to_vec()))?;
        if self.rank != root {
            return Ok(None);
        }
        Ok(Some(concat(view.slots().iter().map(|s| match &s.data {
            Data::Rooted(_, b) => b.as_slice(),
            _ => unreachable!("gatherv carries bytes"),
        }))))
    }

    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> Result<(), CommError> {
        assert!(
            root < self.size(),
            "broadcast: root {root} out of range for {} ranks",
            self.size()
        );
        let mine = if self.rank == root {
            buf.clone()
        } else {
            Vec::new()
        };
        let view = self.slots(Op::Broadcast, Data::Rooted(root, mine))?;
        if self.rank != root {
            let Data::Rooted(_, b) = &view.slots()[root].data else {
                unreachable!("broadcast carries bytes")
            };
            buf.clear();
            buf.extend_from_slice(b);
        }
        Ok(())
    }

    fn alltoallv_bytes(
        &self,
        send: &[u8],
        send_counts: &[usize],
    ) -> Result<PerRank<u8>, CommError> {
        let offsets = send_offsets(self.size(), send.len(), send_counts);
        let view = self.slots(Op::Alltoallv, Data::Pieces(send.to_vec(), offsets))?;
        let me = self.rank;
        Ok(concat(view.slots().iter().map(|s| match &s.data {
            Data::Pieces(b, off) => &b[off[me]..off[me + 1]],
            _ => unreachable!("alltoallv carries pieces"),
        })))
    }

    fn exchange_start(
        &self,
        send: &[u8],
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<Exchange, CommError> {
        let offsets = send_offsets(self.size(), send.len(), send_counts);
        check_recv_counts(self.size(), recv_counts);
        let data = Data::Exchange(send.to_vec(), offsets, recv_counts.to_vec());
        let (round, done) = match self.join(Op::Exchange, data)? {
            Joined::Complete(outcome) => (0, Some(outcome)),
            Joined::Waiting(round) => (round, None),
        };
        Ok(Exchange {
            state: ExchangeState::Thread(InFlight {
                group: Arc::clone(&self.group),
                round,
                done,
            }),
        })
    }

    fn exchange_finish(&self, x: Exchange) -> Result<PerRank<u8>, CommError> {
        let ExchangeState::Thread(f) = x.state else {
            panic!("exchange_finish: the exchange was started on another backend")
        };
        assert!(
            Arc::ptr_eq(&f.group, &self.group),
            "exchange_finish: the exchange was started on another communicator"
        );
        let outcome = match f.done {
            Some(outcome) => into_result(outcome)?,
            None => self.await_round(Op::Exchange, f.round)?,
        };
        let Outcome::Slots(slots) = &*outcome else {
            unreachable!("exchange produced {outcome:?}")
        };
        let me = self.rank;
        Ok(concat(slots.iter().map(|s| match &s.data {
            Data::Exchange(b, off, _) => &b[off[me]..off[me + 1]],
            _ => unreachable!("exchange carries pieces"),
        })))
    }

    fn split(&self, colour: u32, key: i32) -> Result<Self, CommError> {
        assert!(
            i32::try_from(colour).is_ok(),
            "split: colour {colour} exceeds i32::MAX (MPI's limit)"
        );
        self.split_with(Op::Split, colour, key)
    }

    fn split_node(&self) -> Result<Self, CommError> {
        let colour = match &self.group.world.hosts {
            None => 0,
            Some(hosts) => {
                let mut unique: Vec<&String> = hosts.iter().collect();
                unique.sort();
                unique.dedup();
                let mine = &hosts[self.world_rank()];
                u32::try_from(unique.binary_search(&mine).expect("own host is listed"))
                    .expect("fewer than 2^32 hosts")
            }
        };
        self.split_with(Op::SplitNode, colour, 0)
    }

    fn processor_name(&self) -> String {
        match &self.group.world.hosts {
            Some(hosts) => hosts[self.world_rank()].clone(),
            None => host_name(),
        }
    }
}

impl ThreadComm {
    fn split_with(&self, op: Op, colour: u32, key: i32) -> Result<Self, CommError> {
        match &*self.exchange(op, Data::Split(colour, key))? {
            Outcome::Split(v) => {
                let (group, rank) = &v[self.rank];
                Ok(ThreadComm {
                    group: Arc::clone(group),
                    rank: *rank,
                })
            }
            other => unreachable!("{} produced {other:?}", op.name()),
        }
    }
}

fn concat<'a>(pieces: impl Iterator<Item = &'a [u8]> + Clone) -> PerRank<u8> {
    let total = pieces.clone().map(<[u8]>::len).sum();
    let mut data = Vec::with_capacity(total);
    let mut counts = Vec::new();
    for p in pieces {
        data.extend_from_slice(p);
        counts.push(p.len());
    }
    PerRank::from_counts(data, &counts)
}

crate::impl_reduce!(ThreadComm);

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn busy(d: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    /// Two busy threads pinned to one CPU: each waits for the other about half the time, and
    /// the watch of either says its core is shared (so its rank would spin only
    /// [`DEFAULT_SPIN`]).
    #[test]
    fn a_busy_thread_on_the_same_cpu_makes_the_core_shared() {
        if !std::path::Path::new("/proc/thread-self/schedstat").exists() {
            return;
        }
        let cpu = affinity::allowed_cpus().expect("allowed cpus")[0];
        let other = std::thread::spawn(move || {
            affinity::pin_current_thread(1, &[cpu]).expect("pin");
            busy(Duration::from_millis(300));
        });
        affinity::pin_current_thread(0, &[cpu]).expect("pin");
        let mut w = CoreWatch::new();
        busy(Duration::from_millis(100));
        let shared = w.shared(Instant::now());
        other.join().expect("the other thread");
        assert!(
            shared,
            "two busy threads on CPU {cpu}, the watch says not shared: {w:?}"
        );
        assert_eq!(
            spin_budget(Some(Duration::from_micros(7)), Instant::now()),
            Duration::from_micros(7)
        );
    }

    /// The run delay is read from the file, and grows only while the thread waits for a CPU.
    #[test]
    fn run_delay_is_read() {
        let Ok(f) = std::fs::File::open("/proc/thread-self/schedstat") else {
            return;
        };
        assert!(
            CoreWatch::run_delay(&f).is_some(),
            "schedstat has three numbers"
        );
    }
}
