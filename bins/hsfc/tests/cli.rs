//! The `hsfc` command end to end: gen, partition (JSON and table), and its error messages.

use std::path::PathBuf;
use std::process::Command;

fn hsfc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hsfc"))
}

/// This test's folder (each test runs on a thread of its own), removed when the test ends.
fn tmp(name: &str) -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::Builder::new()
            .prefix("hsfc-cli-test-")
            .tempdir()
            .expect("a test folder");
    }
    DIR.with(|d| d.path().join(name))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_err(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "{cmd:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn gen_is_seeded_and_partition_reports_json() {
    let a = tmp("g1.zpt");
    let b = tmp("g2.zpt");
    for (f, seed) in [(&a, "5"), (&b, "5")] {
        run_ok(
            hsfc()
                .args([
                    "gen",
                    "--n",
                    "2e4",
                    "--dist",
                    "graded",
                    "--weights",
                    "random",
                    "--seed",
                    seed,
                    "-o",
                ])
                .arg(f),
        );
    }
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "same seed, same file"
    );
    let set = hsfc::io::read_points(&a).unwrap();
    assert_eq!((set.len(), set.dim), (20_000, 2));
    assert!(set.coords.iter().all(|&c| (0.0..=1.0).contains(&c)));
    assert!(
        set.weights
            .unwrap()
            .iter()
            .all(|&w| (1.0..10.0).contains(&w))
    );

    let sizes = tmp("q4.txt");
    std::fs::write(&sizes, "16\n19\n31\n34\n").unwrap();
    let parts = tmp("parts.u32");
    let out = run_ok(
        hsfc()
            .arg("partition")
            .arg(&a)
            .arg("--sizes")
            .arg(&sizes)
            .args(["--threads", "2", "--repeat", "3", "--json", "--out"])
            .arg(&parts),
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["n"], 20_000);
    assert_eq!(v["k"], 4);
    assert!(v["time_s"].as_f64().unwrap() > 0.0);
    assert_eq!(v["times_s"].as_array().unwrap().len(), 3);
    let w: Vec<f64> = v["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let t: Vec<f64> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let total: f64 = t.iter().sum();
    for (k, frac) in [0.16, 0.19, 0.31, 0.34].iter().enumerate() {
        assert!((t[k] / total - frac).abs() < 1e-12);
        assert!((w[k] - t[k]).abs() <= v["max_weight"].as_f64().unwrap() + 1e-9 * total);
    }
    let dev = w
        .iter()
        .zip(&t)
        .map(|(a, b)| (a / b - 1.0).abs())
        .fold(0.0, f64::max);
    assert!((dev - v["max_rel_dev"].as_f64().unwrap()).abs() < 1e-12);
    let p = hsfc::io::read_parts(&parts).unwrap();
    assert_eq!(p.len(), 20_000);
    for k in 0..4u32 {
        assert_eq!(
            p.iter().filter(|&&x| x == k).count() as u64,
            v["counts"][k as usize].as_u64().unwrap()
        );
    }
}

#[test]
fn partition_prints_a_table() {
    let f = tmp("u.zpt");
    run_ok(
        hsfc()
            .args(["gen", "--n", "1000", "--dim", "3", "-o"])
            .arg(&f),
    );
    let out = run_ok(hsfc().arg("partition").arg(&f).args(["--parts", "3"]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("1000 points, dim 3, 3 parts, 1 thread(s)"),
        "{out}"
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["part", "points", "weight", "target", "W/T-1"]
    );
    assert!(lines[2].trim_start().starts_with("0 "));
    assert!(lines[5].starts_with("total 1000 points"), "{out}");
}

#[test]
fn errors_name_the_problem() {
    let missing = tmp("missing.zpt");
    let e = run_err(hsfc().arg("partition").arg(&missing).args(["--parts", "4"]));
    assert!(
        e.contains("reading the points") && e.contains(&missing.display().to_string()),
        "{e}"
    );
    // The OS error once: in the message, not again as its cause.
    assert_eq!(e.matches("No such file").count(), 1, "{e}");

    let f = tmp("e.zpt");
    run_ok(hsfc().args(["gen", "--n", "100", "-o"]).arg(&f));
    let e = run_err(hsfc().arg("partition").arg(&f).args(["--parts", "0"]));
    assert!(e.contains("no parts requested (k = 0)"), "{e}");
    let e = run_err(hsfc().arg("partition").arg(&f));
    assert!(e.contains("--parts"), "{e}");
    let sizes = tmp("bad-sizes.txt");
    std::fs::write(&sizes, "1\n0.5x\n").unwrap();
    let e = run_err(hsfc().arg("partition").arg(&f).arg("--sizes").arg(&sizes));
    assert!(
        e.contains(&format!("{}:2: `0.5x` is not a number", sizes.display())),
        "{e}"
    );
    let e = run_err(
        hsfc()
            .arg("partition")
            .arg(&f)
            .args(["--parts", "2", "--repeat", "0"]),
    );
    assert!(e.contains("--repeat must be at least 1"), "{e}");

    // A NaN coordinate in the file.
    let nan = tmp("nan.zpt");
    hsfc::io::write_points(&nan, 2, &[0.0, 1.0, f64::NAN, 2.0], None).unwrap();
    let e = run_err(hsfc().arg("partition").arg(&nan).args(["--parts", "2"]));
    assert!(
        e.contains("point 1: coordinate 0 is NaN; coordinates must be finite"),
        "{e}"
    );
    let e = run_err(hsfc().args(["gen", "--n", "12x", "-o"]).arg(tmp("x.zpt")));
    assert!(e.contains("`12x` is not a number"), "{e}");
    let e = run_err(
        hsfc()
            .args(["gen", "--n", "10", "--dim", "4", "-o"])
            .arg(tmp("x.zpt")),
    );
    assert!(e.contains("4 is not in 2..=3"), "{e}");
}

/// A bad output path fails before the run, naming the flag and the path; a user's error is
/// one line, with no backtrace whatever `RUST_BACKTRACE` says.
#[test]
fn bad_output_paths_fail_first_without_a_backtrace() {
    let points = tmp("o.zpt");
    run_ok(hsfc().args(["gen", "--n", "200", "-o"]).arg(&points));
    let bad = tmp("no-such-dir").join("parts.u32");
    for args in [
        vec![
            "partition",
            points.to_str().unwrap(),
            "--parts",
            "2",
            "--out",
        ],
        vec!["gen", "--n", "200", "-o"],
    ] {
        let out = hsfc()
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .args(&args)
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        let want = format!(
            "Error: --out {}: cannot write {}: ",
            bad.display(),
            bad.display()
        );
        assert!(err.starts_with(&want), "{args:?}: {err}");
        assert!(!err.to_lowercase().contains("backtrace"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!bad.parent().unwrap().exists());
    let out = hsfc()
        .env("RUST_BACKTRACE", "1")
        .args(["partition", "/nonexistent.zpt", "--parts", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("/nonexistent.zpt") && !err.to_lowercase().contains("backtrace"),
        "{err}"
    );
}

/// A write error on the parts file (the file-size limit, `ulimit -f`, with SIGXFSZ ignored
/// so that the write fails instead of killing): an error naming the file, and the earlier
/// parts file untouched, not truncated; no temporary file is left.
#[test]
fn a_failed_write_leaves_the_earlier_parts_file_whole() {
    let points = tmp("fsize.zpt");
    run_ok(
        hsfc()
            .args(["gen", "--n", "4000", "--dim", "2", "-o"])
            .arg(&points),
    );
    let parts = tmp("fsize.parts");
    std::fs::write(&parts, b"earlier").unwrap();
    let out = Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 8; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_hsfc"))
        .args([
            "partition",
            points.to_str().unwrap(),
            "--parts",
            "3",
            "--out",
        ])
        .arg(&parts)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(parts.to_str().unwrap()), "{err}");
    assert_eq!(std::fs::read(&parts).unwrap(), b"earlier");
    let dir = parts.parent().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["fsize.parts", "fsize.zpt"], "{err}");
}

#[test]
fn hostile_counts_and_sums_are_refused_or_exact() {
    let f = tmp("hostile.zpt");
    run_ok(hsfc().args(["gen", "--n", "100", "-o"]).arg(&f));
    let part = |extra: &[&str]| {
        let mut c = hsfc();
        c.arg("partition").arg(&f).args(extra);
        c
    };
    // Counts over their limits: refused before anything is allocated, naming flag and limit.
    for (args, msg) in [
        (
            &["--parts", "4294967296"][..],
            "invalid value '4294967296' for '--parts <PARTS>': 4294967296 is over the limit of \
             1048576 parts",
        ),
        (
            &["--parts", "1e8"],
            "1e8 is over the limit of 1048576 parts",
        ),
        (
            &["--parts", "2", "--threads", "100000"],
            "'--threads <THREADS>': 100000 is over the limit of 256 threads",
        ),
        (
            &["--parts", "2", "--repeat", "1e9"],
            "1e9 is over the limit of 10000 repeats",
        ),
    ] {
        let e = run_err(&mut part(args));
        assert!(e.contains(msg), "{args:?}: {e}");
    }
    let e = run_err(
        hsfc()
            .args(["gen", "--n", "1e15", "-o"])
            .arg(tmp("big.zpt")),
    );
    assert!(
        e.contains("1e15 is over the limit of 134217728 points"),
        "{e}"
    );
    assert!(!tmp("big.zpt").exists());
    // An endless sizes file.
    let e = run_err(&mut part(&["--sizes", "/dev/zero"]));
    assert!(
        e.contains("/dev/zero: larger than the limit of 16777216 bytes for a sizes file"),
        "{e}"
    );
    // Sizes whose sum overflows: their ratio, 50/50.
    let sizes = tmp("huge-sizes.txt");
    std::fs::write(&sizes, "1e308\n1e308\n").unwrap();
    let out = run_ok(&mut part(&["--json", "--sizes", sizes.to_str().unwrap()]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["counts"], serde_json::json!([50, 50]), "{out}");
    assert_eq!(j["targets"], serde_json::json!([50.0, 50.0]), "{out}");
    // Weights whose sum overflows: an error, no inf or null in any output.
    let w = tmp("huge-weights.zpt");
    let coords: Vec<f64> = (0..200).map(|i| f64::from(i) / 200.0).collect();
    hsfc::io::write_points(&w, 2, &coords, Some(&[1e308; 100])).unwrap();
    let out_file = tmp("huge-weights.parts");
    let e = run_err(
        hsfc()
            .arg("partition")
            .arg(&w)
            .args(["--parts", "2", "--out"])
            .arg(&out_file),
    );
    assert!(
        e.contains(&format!(
            "partitioning {}: the weights sum to about inf",
            w.display()
        )),
        "{e}"
    );
    assert!(!out_file.exists());
    // One point far out among a hundred: a warning, and balanced parts all the same.
    let o = tmp("outlier.zpt");
    let mut coords: Vec<f64> = (0..198).map(|i| f64::from(i * 7 % 198) / 198.0).collect();
    coords.extend([1e308, 1e308]);
    hsfc::io::write_points(&o, 2, &coords, None).unwrap();
    let out = hsfc()
        .arg("partition")
        .arg(&o)
        .args(["--parts", "4", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let warn = String::from_utf8(out.stderr).unwrap();
    assert!(
        warn.contains("warning:") && warn.contains("cannot separate them"),
        "{warn}"
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["counts"], serde_json::json!([25, 25, 25, 25]));
    for p in [f, sizes, w, o] {
        std::fs::remove_file(p).unwrap();
    }
}

/// `HSFC_SIMD` chooses the vector instructions: `--json` names the path that ran, every path
/// writes the same parts, and a name that is no path, or a path this processor lacks, is
/// refused before the run.
#[test]
fn hsfc_simd_chooses_the_path_and_refuses_bad_values() {
    let f = tmp("simd.zpt");
    run_ok(
        hsfc()
            .args(["gen", "--n", "3e4", "--dim", "3", "--dist", "graded"])
            .args(["--weights", "random", "-o"])
            .arg(&f),
    );
    let part = |simd: &str, out: &PathBuf| {
        let mut cmd = hsfc();
        cmd.env("HSFC_SIMD", simd)
            .arg("partition")
            .arg(&f)
            .args(["--parts", "37", "--json", "--out"])
            .arg(out);
        cmd
    };
    let scalar = tmp("scalar.u32");
    for s in hsfc::Simd::ALL {
        let out = tmp(&format!("{}.u32", s.name()));
        if s.supported() {
            let j: serde_json::Value =
                serde_json::from_str(&run_ok(&mut part(s.name(), &out))).unwrap();
            assert_eq!(j["simd"], s.name());
            assert_eq!(
                std::fs::read(&out).unwrap(),
                std::fs::read(&scalar).unwrap()
            );
        } else {
            let e = run_err(&mut part(s.name(), &out));
            assert!(
                e.contains(&format!("HSFC_SIMD={}: this processor lacks it", s.name())),
                "{e}"
            );
        }
    }
    let best = tmp("best.u32");
    let j: serde_json::Value = serde_json::from_str(&run_ok(&mut part("", &best))).unwrap();
    assert_eq!(
        j["simd"],
        hsfc::Simd::detected().name(),
        "empty: the best here"
    );
    let e = run_err(&mut part("avx1024", &tmp("bad.u32")));
    assert!(
        e.contains("HSFC_SIMD=avx1024: unknown (scalar, avx2 or avx512)"),
        "{e}"
    );
}

/// `hsfc bandwidth --json` (what `cargo xtask bench hsfc` and `bench hier` read): a positive
/// bandwidth on CPU 0, and on a host with two CPUs the two-CPU figure and its ratio.
#[test]
fn bandwidth_reports_the_triad_and_the_two_cpu_ratio() {
    let out = run_ok(hsfc().args(["bandwidth", "--json"]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let one = v["one_gbs"].as_f64().unwrap();
    assert!(one > 0.1 && one.is_finite(), "{v}");
    assert!(
        v["description"].as_str().unwrap().contains("GB/s on CPU 0"),
        "{v}"
    );
    if std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2) {
        let (two, ratio) = (v["two_gbs"].as_f64().unwrap(), v["ratio"].as_f64().unwrap());
        assert!((ratio - two / one).abs() <= 1e-9 * ratio, "{v}");
    }
}
