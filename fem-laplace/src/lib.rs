//! Adaptive P1 finite elements for −Δu = 0 on the unit square (the PHAML experiments of DRUM).
//!
//! `fem-laplace` is the only crate that knows meshes (see `ARCHITECTURE.md`).
#![deny(missing_docs)]
