//! What the `fem-laplace` CLI tests share.

use std::process::Command;

/// The binary under test (backtraces off: errors are compared as text).
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fem-laplace"));
    c.env("RUST_BACKTRACE", "0");
    c
}

/// A file of the repository's `machines/`.
#[allow(dead_code)]
pub fn machine(name: &str) -> String {
    format!("{}/../../machines/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `fem-laplace args` (which must succeed) and parses its stdout, one JSON object per
/// line.
pub fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}
