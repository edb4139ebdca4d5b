//! The interface every partitioner and communicator of drum-rs shares.
//!
//! The bottom of the workspace: `hsfc`, `hier-part`'s RCB, RIB and hierarchical walk, and
//! `comm`'s communicators all meet here, so none of them depends on another to speak the
//! common language:
//! - [`Points`]: the objects to partition (interleaved coordinates, optional weights);
//! - [`Partitioner`]: points and relative target sizes in, one part per object out, run by a
//!   group `G` ([`Serial`], or a communicator holding the points spread over its ranks);
//! - [`Reduce`]: the few collective reductions a distributed partitioner needs, with
//!   [`Serial`] the one-rank group; [`agree`], the one protocol that makes a local failure
//!   collective before the next collective; [`block_range`], the usual block distribution;
//! - [`Csr`]: an undirected graph (a mesh's neighbours, a k-nearest-neighbour graph), the
//!   one graph type of the partitioners and of quality measures;
//! - [`Par`]: the caller's parallelism setting and the one executor behind it (local rayon
//!   pools; rayon's global pool is never used);
//! - [`file`](mod@file): output files whole or absent (`file::write_atomic`, a temporary file renamed
//!   into place) and output paths tried before a run (`file::check_writable`).
//!
//! ```
//! use part_api::{Failed, Par, Points, Serial, agree, block_range};
//! // Three 2-D points, unit weights.
//! let p = Points::new(&[0.0, 0.0, 1.0, 0.0, 2.0, 1.0], 2, None);
//! assert_eq!(p.len(), 3);
//! // A serial "group" agrees with itself, and holds the whole range.
//! assert_eq!(agree(&Serial, Ok::<_, ()>(p.len()), &mut []).unwrap(), Ok(3));
//! assert_eq!(block_range(3, 0, 1), 0..3);
//! // Work on a local pool of two threads (built on first use, kept).
//! assert_eq!(Par::threads(2).install(|| 6 * 7).unwrap(), 42);
//! # let _: Option<Failed<()>> = None;
//! ```
#![deny(missing_docs)]

mod dist;
pub mod file;
mod graph;
mod par;
mod points;

pub use dist::{Failed, Reduce, Serial, agree, agreed, block_range};
pub use graph::{Csr, GraphError};
pub use par::{Par, PoolError};
pub use points::{Partitioner, Points};

/// The median of `v` (the mean of the two middle values for an even count; NaN when empty),
/// sorting `v` in place: the workspace's one median (timing repeats, the link probe, the
/// forecaster's sliding median, the benchmarks).
///
/// ```
/// assert_eq!(part_api::median(&mut [3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(part_api::median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
/// assert!(part_api::median(&mut []).is_nan());
/// ```
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[m],
        _ => 0.5 * (v[m - 1] + v[m]),
    }
}

/// The text of a caught panic's payload (a `&str` or `String`; otherwise "a panic without a
/// message"), for a boundary that turns a panic into an error (the C ABIs' guards). The
/// payload is dropped under `catch_unwind`: dropping it runs foreign code that could itself
/// panic.
///
/// ```
/// let payload = std::panic::catch_unwind(|| panic!("boom {}", 42)).unwrap_err();
/// assert_eq!(part_api::panic_message(payload), "boom 42");
/// let payload = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
/// assert_eq!(part_api::panic_message(payload), "a panic without a message");
/// ```
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let msg = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)));
    msg
}
