//! The caller-owned buffers of [`crate::Hsfc`].

/// `hsfc`'s workspace: the key buffer (8 bytes per point of the largest call so far) and the
/// refinement's histograms and candidate lists. Reuse one across calls of the same
/// partitioner (each rank, or thread, its own); drop it to free the memory.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(crate) keys: Vec<u64>,
    pub(crate) scratch: crate::scratch::Scratch,
}
