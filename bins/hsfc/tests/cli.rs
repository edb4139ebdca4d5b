//! The `hsfc` command end to end: gen, partition (JSON and table), and its error messages.

use std::path::PathBuf;
use std::process::Command;

fn hsfc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hsfc"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsfc-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
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
