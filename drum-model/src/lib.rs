//! The DRUM machine model (Faik, Teresco et al. 2004, 2005): a tree of network and computing
//! nodes, read from DrumHead XML, whose monitored capabilities are distilled into "power".
//!
//! `drum-model` knows no partitioner and no mesh (see `ARCHITECTURE.md`).
#![deny(missing_docs)]
