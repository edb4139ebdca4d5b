//! `examples/partition.c` compiled with the system C compiler (`$CC`, else `cc`) against the
//! static and the shared library built with this test, run, and its output checked line by
//! line against the Rust API on the same points.

mod common;

use hsfc::Workspace;
use part_api::Serial;
use part_api::{Partitioner, Points};
use std::path::{Path, PathBuf};
use std::process::Command;

const N: usize = 500;
const SIZES: [f64; 4] = [16.0, 19.0, 31.0, 34.0];
const LO: [f64; 2] = [0.2, 0.3];
const HI: [f64; 2] = [0.45, 0.6];

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Compiles the example with `link` (library and flags) into `exe`.
fn compile(exe: &Path, link: &[&str]) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let include = manifest("include");
    let mut cmd = Command::new(&cc);
    cmd.args([
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Wpedantic",
        "-Werror",
        "-O1",
    ])
    .arg("-I")
    .arg(&include)
    .arg(manifest("examples/partition.c"))
    .args(link)
    .arg("-o")
    .arg(exe);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the example: exit 0, nothing on stderr; its stdout.
fn run(exe: &Path) -> String {
    // Without cargo's LD_LIBRARY_PATH, so that the shared build finds its library by rpath.
    let out = Command::new(exe)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run the example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} exited with {}:\n{stderr}",
        exe.display(),
        out.status
    );
    assert!(stderr.is_empty(), "stderr: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The example's points and weights: the same 64-bit LCG, x, y, weight per point.
fn example_input() -> (Vec<f64>, Vec<f64>) {
    let mut s: u64 = 12345;
    let mut uniform = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 * (1.0 / 9007199254740992.0)
    };
    let mut coords = Vec::with_capacity(2 * N);
    let mut weights = Vec::with_capacity(N);
    for _ in 0..N {
        coords.push(uniform());
        coords.push(uniform());
        weights.push(0.5 + uniform());
    }
    (coords, weights)
}

fn checksum(parts: &[u32]) -> String {
    let h = parts.iter().fold(14695981039346656037u64, |h, &p| {
        (h ^ u64::from(p)).wrapping_mul(1099511628211)
    });
    format!("{h:016x}")
}

/// Whitespace-separated words of `line`, which must start with `prefix`.
fn words<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
    assert!(
        line.starts_with(prefix),
        "expected `{prefix}…`, got `{line}`"
    );
    line.split_whitespace().collect()
}

fn num(word: &str) -> f64 {
    word.trim_matches(|c| c == '(' || c == ',')
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {word}"))
}

/// Checks the example's whole output against the Rust API.
fn check_output(out: &str) {
    let (coords, mut weights) = example_input();
    let mut parts = vec![0u32; N];
    let cfg = hsfc::Hsfc {
        tolerance: 0.05,
        ..Default::default()
    };
    let p = cfg
        .partition(
            &Serial,
            Points::new(&coords, 2, Some(&weights)),
            &SIZES,
            &mut parts,
        )
        .unwrap();
    let mut lines = out.lines();
    let mut next = || lines.next().expect("output ended early");

    let v = env!("CARGO_PKG_VERSION");
    assert_eq!(next(), format!("hsfc {v} (header {v})"));
    assert_eq!(next(), "partition: 500 points, dim 2, 4 parts");
    for q in 0..4 {
        let w = words(next(), &format!("part {q}: weight "));
        // %.17g round-trips: the C ABI's figures are the Rust API's, bit for bit.
        assert_eq!(num(w[3]), p.part_weights()[q], "weight of part {q}");
        assert_eq!(num(w[5]), p.targets()[q], "target of part {q}");
        assert_eq!(num(w[7]) as u64, p.part_counts()[q], "count of part {q}");
    }
    let w = words(next(), "max_rel_dev ");
    assert!((num(w[1]) - p.max_rel_dev()).abs() <= 1e-3 * p.max_rel_dev());
    assert_eq!(next(), format!("parts checksum {}", checksum(&parts)));
    assert_eq!(
        next(),
        "point_assign agrees with the partition for all 500 points"
    );

    let mut boxed = Vec::new();
    p.box_assign(&LO, &HI, &mut boxed).unwrap();
    let m = boxed.len();
    assert_eq!(
        next(),
        format!("box_assign with cap 0: HSFC_ERR_BUFFER_TOO_SMALL, {m} needed")
    );
    let list: String = boxed.iter().map(|q| format!(" {q}")).collect();
    assert_eq!(
        next(),
        format!("box [0.2, 0.45] x [0.3, 0.6]: {m} parts:{list}")
    );
    let inside = coords
        .chunks_exact(2)
        .filter(|x| (0..2).all(|a| LO[a] <= x[a] && x[a] <= HI[a]))
        .count();
    assert!(inside > 10, "the box should hold points");
    assert_eq!(
        next(),
        format!("box holds {inside} points, each in a reported part")
    );

    for (x, w) in coords.chunks_exact(2).zip(&mut weights) {
        if x[0] < 0.3 {
            *w *= 1.5;
        }
    }
    let r = cfg
        .repartition(
            &mut Workspace::default(),
            &Serial,
            &p,
            Points::new(&coords, 2, Some(&weights)),
            &SIZES,
            &mut parts,
        )
        .unwrap();
    let mig = r.migration().unwrap();
    let w = words(next(), "repartition: migrated weight ");
    assert_eq!(num(w[3]), mig.weight);
    assert_eq!(num(w[4]) as u64, mig.count);
    assert!(mig.count > 0 && mig.count < N as u64 / 2, "{mig:?}");
    assert_eq!((w[8], mig.kept_cuts), ("1,", true));
    assert_eq!(next(), format!("repartition checksum {}", checksum(&parts)));

    assert_eq!(
        next(),
        "error HSFC_ERR_INVALID_COORDINATE (8): a coordinate is NaN or infinite: \
         point 7: coordinate 1 is NaN; coordinates must be finite"
    );
    assert_eq!(next(), "done");
    assert_eq!(lines.next(), None, "output after `done`");
}

#[test]
fn c_example_against_the_static_library() {
    let lib = common::artifact("libhsfc_capi.a");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hsfc-capi");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(format!("partition-static-{}", std::process::id()));
    // The system libraries a Rust staticlib needs (`rustc --print native-static-libs`).
    compile(&exe, &[lib.to_str().unwrap(), "-lpthread", "-ldl", "-lm"]);
    let out = run(&exe);
    check_output(&out);
    std::fs::remove_file(&exe).ok();
}

#[test]
fn c_example_against_the_shared_library() {
    let lib = common::artifact("libhsfc_capi.so");
    let libdir = lib.parent().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hsfc-capi");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(format!("partition-shared-{}", std::process::id()));
    let search = format!("-L{}", libdir.display());
    let rpath = format!("-Wl,-rpath,{}", libdir.display());
    // `-l` prefers the .so to the .a beside it.
    compile(&exe, &[&search, "-lhsfc_capi", &rpath, "-lm"]);
    let ldd = Command::new("ldd")
        .arg(&exe)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    assert!(
        ldd.contains(lib.to_str().unwrap()),
        "not linked to {}: {ldd}",
        lib.display()
    );
    let out = run(&exe);
    check_output(&out);
    std::fs::remove_file(&exe).ok();
}
