//! Hierarchical partitioning driven level by level along a DRUM machine tree.
#![deny(missing_docs)]
