//! Hilbert space-filling-curve partitioning with weighted cuts to arbitrary part sizes.
//!
//! `hsfc` knows nothing of machines, XML, MPI or meshes (see `ARCHITECTURE.md`).
#![deny(missing_docs)]

pub mod dist;
