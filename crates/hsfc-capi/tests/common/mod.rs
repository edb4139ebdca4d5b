//! Helpers shared by the integration tests that use the built C libraries.

use std::path::PathBuf;

/// A library built with this test (`libhsfc_capi.a` or `libhsfc_capi.so`): cargo builds every
/// crate type of the package's lib in the same rustc run as the rlib the test links, into the
/// test binary's own `deps/` folder (and copies them to the profile folder above it).
pub fn artifact(file: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps folder");
    for dir in [deps, deps.parent().expect("profile folder")] {
        let path = dir.join(file);
        if path.is_file() {
            return path;
        }
    }
    panic!(
        "{file} not found next to {} (cargo builds it with the rlib: crate-type in \
         hsfc/capi/Cargo.toml)",
        exe.display()
    );
}
