//! Helpers shared by the integration tests in `tests/tests/`.
#![deny(missing_docs)]

use std::path::PathBuf;

/// The workspace root (the folder holding `machines/` and `README.md`).
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives inside the workspace")
        .to_path_buf()
}
