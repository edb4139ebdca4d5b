//! The `hier-part` command: JSON schema and figures, the parts file, the thread-rank backend
//! equal to the serial one, and errors that name the place.

use hsfc::generate::{Distribution, WeightKind, Xoshiro256, points_with};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hier-part"))
}

fn machine(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../machines")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hier-part-cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn point_file(name: &str, n: usize, weighted: bool) -> PathBuf {
    let (x, w) = points_with(
        &mut Xoshiro256::new(7),
        n,
        2,
        Distribution::Corner { rmin: 1e-5 },
        if weighted {
            WeightKind::Random
        } else {
            WeightKind::Unit
        },
    );
    let path = tmp(name);
    hsfc::io::write_points(&path, 2, &x, w.as_deref()).unwrap();
    path
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(out: Output) -> String {
    assert!(!out.status.success(), "should have failed");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn json_report_and_parts_file() {
    let pts = point_file("g.zpt", 20_000, true);
    let out = tmp("g.u32");
    let json = ok(bin()
        .args(["partition", "--machine"])
        .arg(machine("fig3-cluster-of-clusters.xml"))
        .arg(&pts)
        .args(["--json", "--repeat", "3", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["ranks"], 22);
    assert_eq!(v["n"], 20_000);
    assert_eq!(v["times_s"].as_array().unwrap().len(), 3);
    assert!(v["time_s"].as_f64().unwrap() > 0.0);
    let parts = v["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 22);
    // Targets are the drum powers part sizes times the total weight; weights add up.
    let w: f64 = parts.iter().map(|p| p["weight"].as_f64().unwrap()).sum();
    let t: f64 = parts.iter().map(|p| p["target"].as_f64().unwrap()).sum();
    assert!((w - t).abs() < 1e-6 * w, "{w} vs {t}");
    assert_eq!(parts[5]["node"], 10, "rank 5 is on smp-b (nodenum 10)");
    let dev = v["max_rel_dev"].as_f64().unwrap();
    assert!(dev < 0.05, "{dev}");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 8);
    assert_eq!(levels[1]["method"], "RCB");
    // The parts file: one u32 per point, each a rank, counts as reported.
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len(), 4 * 20_000);
    let mut counts = [0u64; 22];
    for c in bytes.chunks(4) {
        let p = u32::from_le_bytes(c.try_into().unwrap()) as usize;
        counts[p] += 1;
    }
    for (r, p) in parts.iter().enumerate() {
        assert_eq!(p["count"], counts[r], "rank {r}");
    }
}

#[test]
fn thread_ranks_write_the_serial_parts() {
    let pts = point_file("u.zpt", 15_000, false);
    let mut files = Vec::new();
    for backend in ["serial", "threads"] {
        let out = tmp(&format!("u-{backend}.u32"));
        ok(bin()
            .args(["partition", "--machine"])
            .arg(machine("hier-lbmethods.xml"))
            .arg(&pts)
            .args(["--backend", backend, "--threads", "2", "--out"])
            .arg(&out)
            .output()
            .unwrap());
        files.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(files[0], files[1]);
}

#[test]
fn report_quality_and_picture() {
    let pts = point_file("q.zpt", 5000, true);
    let text = ok(bin()
        .args(["partition", "--machine"])
        .arg(machine("bullpen.xml"))
        .arg(&pts)
        .args(["--knn", "6", "--picture", "--w-comm", "0.2"])
        .output()
        .unwrap());
    assert!(text.contains("24 ranks"), "{text}");
    assert!(text.contains("node 0 (\"bullpen-switch\"): HSFC KEEP_CUTS tol 1.05"));
    assert!(text.contains("quality on a 6-nearest-neighbour graph"));
    assert!(text.contains("grouped by the nodes at depth 1"));
    assert!(text.contains("x in ["), "a picture");
}

#[test]
fn errors_name_the_place() {
    let pts = point_file("e.zpt", 100, false);
    // An unknown method: file, line and column of the attribute.
    let bad = tmp("bad.xml");
    std::fs::write(
        &bad,
        "<machinemodel>\n<node type=\"NETWORK\" nodenum=\"0\" name=\"sw\" parent=\"-1\">\n<lbmethod lbm=\"METIS\"/></node>\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" name=\"a\" parent=\"0\"/>\n</machinemodel>\n",
    )
    .unwrap();
    let e = fails(
        bin()
            .args(["partition", "--machine"])
            .arg(&bad)
            .arg(&pts)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains(":3:11: node 0 (\"sw\"): unknown lbmethod `METIS`"),
        "{e}"
    );
    // A missing point file.
    let e = fails(
        bin()
            .args(["partition", "--machine"])
            .arg(machine("bullpen.xml"))
            .arg(tmp("none.zpt"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("reading the points"), "{e}");
    // A replay that does not fit the machine.
    let samples = tmp("s.jsonl");
    std::fs::write(&samples, "{\"t\": 0, \"node\": 99, \"cpu_idle\": [1]}\n").unwrap();
    let e = fails(
        bin()
            .args(["partition", "--machine"])
            .arg(machine("local-2core-hetero.xml"))
            .arg(&pts)
            .arg("--replay")
            .arg(&samples)
            .output()
            .unwrap(),
    );
    assert!(e.contains("s.jsonl"), "{e}");
    // The MPI backend in a build without MPI.
    if !cfg!(feature = "mpi") {
        let e = fails(
            bin()
                .args(["partition", "--machine"])
                .arg(machine("bullpen.xml"))
                .arg(&pts)
                .args(["--backend", "mpi"])
                .output()
                .unwrap(),
        );
        assert!(e.contains("built without MPI"), "{e}");
    }
}

/// A bad `--out` fails before the run, naming the flag and the path; a user's error prints no
/// backtrace whatever `RUST_BACKTRACE` says.
#[test]
fn bad_out_fails_first_and_errors_print_no_backtrace() {
    let pts = point_file("bt.zpt", 500, false);
    let bad = tmp("no-such-dir").join("p.u32");
    for backend in ["serial", "threads"] {
        let out = bin()
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .args(["partition", "--machine"])
            .arg(machine("hier-lbmethods.xml"))
            .arg(&pts)
            .args(["--backend", backend, "--out"])
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        let want = format!(
            "Error: --out {}: cannot write {}: ",
            bad.display(),
            bad.display()
        );
        assert!(err.starts_with(&want), "{backend}: {err}");
        assert!(!err.to_lowercase().contains("backtrace"), "{err}");
    }
    let err = fails(
        bin()
            .env("RUST_BACKTRACE", "1")
            .args(["partition", "--machine", "/nonexistent.xml"])
            .arg(&pts)
            .output()
            .unwrap(),
    );
    assert!(err.contains("/nonexistent.xml"), "{err}");
    assert!(!err.to_lowercase().contains("backtrace"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The threads backend refuses a machine over `--max-ranks` before any rank starts, and a
/// rank's own error (the bad object) is printed, not the others' "rank 5 found bad input".
#[test]
fn thread_ranks_are_limited_and_a_failing_rank_says_what_failed() {
    let pts = point_file("limit.zpt", 100, false);
    let big = tmp("10000-ranks.xml");
    std::fs::write(
        &big,
        "<machinemodel><node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"/>\
         <node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"10000\"/>\
         </machinemodel>",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        bin()
            .args(["partition", "--backend", "threads", "--machine"])
            .arg(&big)
            .arg(&pts)
            .args(extra)
            .output()
            .unwrap()
    };
    let e = fails(run(&[]));
    assert!(
        e.contains(&format!(
            "--backend threads on {}: 10000 ranks is over the limit of 256 ranks (raise it with \
             --max-ranks)",
            big.display()
        )),
        "{e}"
    );
    let e = fails(run(&["--max-ranks", "1e4", "--threads", "100000"]));
    assert!(e.contains("100000 is over the limit of 256 threads"), "{e}");
    // A NaN on rank 5's slice (24 ranks, 100 points: rank 5 holds points 20..25).
    let mut x: Vec<f64> = (0..200).map(|i| f64::from(i) / 200.0).collect();
    x[2 * 22] = f64::NAN;
    let nan = tmp("nan.zpt");
    hsfc::io::write_points(&nan, 2, &x, None).unwrap();
    let e = fails(
        bin()
            .args(["partition", "--backend", "threads", "--machine"])
            .arg(machine("bullpen.xml"))
            .arg(&nan)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("rank 5: ") && e.contains("coordinate 0 is NaN"),
        "{e}"
    );
    assert!(!e.contains("the first being"), "{e}");
    for f in [pts, big, nan] {
        std::fs::remove_file(f).unwrap();
    }
}
