//! The caller-owned buffers of [`crate::Hsfc`].

use crate::simd::Simd;

/// `hsfc`'s workspace: the key buffer (8 bytes per point of the largest call so far) and the
/// refinement's histograms and candidate lists. Reuse one across calls of the same
/// partitioner (each rank, or thread, its own); drop it to free the memory.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(crate) keys: Vec<u64>,
    pub(crate) scratch: crate::scratch::Scratch,
    /// The crate's tests run each path this processor has through it (see [`Workspace::simd`]).
    #[cfg(test)]
    pub(crate) forced: Option<Simd>,
}

impl Workspace {
    /// The vector instructions the calls with this workspace take: [`Simd::active`] (in the
    /// crate's tests, the path a test forced, if the processor has it).
    pub(crate) fn simd(&self) -> Simd {
        #[cfg(test)]
        if let Some(s) = self.forced.filter(|s| s.supported()) {
            return s;
        }
        Simd::active()
    }
}
