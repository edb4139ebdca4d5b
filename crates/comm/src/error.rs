//! The crate's error type.

/// Why a collective, a communicator construction or a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// A rank panicked; `rank` is its index in the whole run (the `ThreadComm::run` world).
    #[error("rank {rank} failed: {message}")]
    RankFailed {
        /// World rank that failed.
        rank: usize,
        /// Its panic message.
        message: String,
    },
    /// A rank returned from its closure while others still called collectives that need it.
    #[error(
        "rank {rank} returned from its closure while other ranks still called `{op}` on a \
         communicator it belongs to"
    )]
    RankExited {
        /// World rank that had already returned.
        rank: usize,
        /// The collective the others were waiting in.
        op: &'static str,
    },
    /// Ranks called different collectives at the same time.
    #[error(
        "collective mismatch: one rank called `{this}` while another called `{other}`; every \
         rank of a communicator must call the same collectives in the same order"
    )]
    OpMismatch {
        /// One of the collectives.
        this: &'static str,
        /// Another one, called at the same time by another rank.
        other: &'static str,
    },
    /// Ranks passed buffers of different lengths to a collective that needs equal lengths.
    #[error(
        "`{op}`: ranks passed buffers of different lengths (shortest {min}, longest {max}); \
         every rank must pass the same length"
    )]
    LengthMismatch {
        /// The collective.
        op: &'static str,
        /// Shortest length passed.
        min: usize,
        /// Longest length passed.
        max: usize,
    },
    /// Ranks named different roots for a rooted collective.
    #[error("`{op}`: ranks named different roots ({min} and {max}); every rank must name the same")]
    RootMismatch {
        /// The collective.
        op: &'static str,
        /// Smallest root named.
        min: usize,
        /// Largest root named.
        max: usize,
    },
    /// A message ended before a value its reader needed (a peer that wrote something else
    /// than the reader expects).
    #[error("garbled message: {0}")]
    Garbled(#[from] crate::wire::WireError),
    /// A message exceeds what the backend can move in one call (MPI counts are `i32`).
    #[error("`{op}`: {bytes} bytes exceed the backend's limit of {limit} bytes per call")]
    TooLarge {
        /// The collective.
        op: &'static str,
        /// Size of the largest buffer involved.
        bytes: u64,
        /// The backend's limit.
        limit: u64,
    },
    /// A CPU requested for a rank does not exist or is not available to this process.
    #[error("rank {rank}: CPU {cpu} is not available to this process (allowed: {allowed})")]
    InvalidCpu {
        /// Rank whose CPU list names it.
        rank: usize,
        /// The CPU index.
        cpu: usize,
        /// The CPUs this process may use, as a list such as `0-3,6`.
        allowed: String,
    },
    /// Setting a rank's CPU affinity failed.
    #[error("rank {rank}: pinning to CPUs {cpus:?} failed: {source}")]
    Affinity {
        /// The rank.
        rank: usize,
        /// Its CPU list.
        cpus: Vec<usize>,
        /// The system error.
        source: std::io::Error,
    },
    /// The options given to a backend are inconsistent (e.g. 3 CPU lists for 4 ranks).
    #[error("invalid communicator options: {0}")]
    Options(String),
    /// Starting a rank's thread failed.
    #[error("could not start the thread of rank {rank}: {source}")]
    Spawn {
        /// The rank.
        rank: usize,
        /// The system error.
        source: std::io::Error,
    },
    /// MPI could not be initialised (already initialised, or the library refused).
    #[error("MPI: {0}")]
    Mpi(String),
}
