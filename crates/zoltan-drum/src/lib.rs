//! `libzoltan_drum`: a Zoltan-compatible C library over drum-rs's partitioners, and DRUM's
//! own C API.
//!
//! DRUM 2004 and 2005: "Applications that already use Zoltan can make use of DRUM simply by
//! setting a Zoltan parameter, with no further changes needed." A C, C++ or Fortran MPI
//! program written for Zoltan links `-lzoltan_drum` instead of `-lzoltan` and gets:
//!
//! - [`zoltan`]: Zoltan's C entry points for geometric load balancing (`Zoltan_Initialize`,
//!   `Zoltan_Create` on the caller's `MPI_Comm`, the query-function setters,
//!   `Zoltan_LB_Partition`/`Balance`, point and box assign, `Zoltan_Migrate`), with Zoltan's
//!   types, parameters and return codes, over `hsfc` (HSFC), `hier_part` (RCB, RIB, and HIER
//!   along a machine tree); `USE_DRUM=1` with `DRUM_MACHINE_FILE` makes every partition use
//!   DRUM's part sizes, static or monitored (`DRUM_MONITORING=1`);
//! - [`drum`]: DRUM's own C API (`include/drum.h`): machine files, monitoring on a
//!   communicator, powers and part sizes, rebalance decisions with their reason, and the
//!   hierarchical (KEEP_CUTS) partition of caller-owned coordinates.
//!
//! The headers are `include/zoltan.h` (Zoltan's declarations for the entry points here; a CI
//! check compiles it together with the real `zoltan.h`) and `include/drum.h` (checked against
//! this crate by `tests/header.rs`). No panic crosses the boundary: every entry point runs
//! under `catch_unwind`. See `README.md` for the parameters and what differs from Zoltan.
#![deny(missing_docs)]

pub mod drum;
mod drum_state;
pub mod error;
mod huge;
mod laps;
mod lists;
mod migrate;
mod params;
mod partdist;
pub mod query;
pub mod zoltan;
mod zz;

pub use zz::ZoltanStruct;

/// Large allocations on huge pages (see `huge`): a partition's fresh arrays fault 512 times
/// less often.
#[global_allocator]
static GLOBAL: huge::HugeAlloc = huge::HugeAlloc;
