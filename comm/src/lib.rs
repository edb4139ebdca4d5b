//! Communicators: ranks as threads of one process (default) or MPI processes (feature `mpi`).
//!
//! `comm` is the only crate that names MPI (see `ARCHITECTURE.md`).
#![deny(missing_docs)]
