//! The `samr` command: JSON steps with the same hashes for 1–4 thread ranks and every
//! partitioner, and clear errors for bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn samr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_samr"))
        .args(args)
        .output()
        .expect("run samr")
}

fn ok(args: &[&str]) -> String {
    let o = samr(args);
    assert!(
        o.status.success(),
        "samr {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn err(args: &[&str]) -> String {
    let o = samr(args);
    assert!(!o.status.success(), "samr {args:?} succeeded");
    String::from_utf8(o.stderr).unwrap()
}

fn tmp(name: &str, text: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A machine of `r` single-processor nodes of speeds 1, 2, …
fn machine(r: usize) -> PathBuf {
    let mut xml = String::from(
        r#"<machinemodel><node type="NETWORK" nodenum="0" name="sw" parent="-1"><lbmethod lbm="HSFC"/></node>"#,
    );
    for k in 0..r {
        xml.push_str(&format!(
            r#"<node type="SINGLE_COMPUTING" nodenum="{}" name="n{k}" parent="0" mflops="{}"/>"#,
            k + 1,
            100 * (k + 1)
        ));
    }
    xml.push_str("</machinemodel>");
    tmp(&format!("samr-cli-{r}.xml"), &xml)
}

const SMALL: [&str; 8] = [
    "--n0",
    "32",
    "--steps",
    "4",
    "--regrid-every",
    "2",
    "--json",
    "--max-level=2",
];

/// The steps' hashes, checking that stdout holds one JSON object per step and nothing else.
fn hashes(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = SMALL.to_vec();
    args.extend_from_slice(extra);
    let out = ok(&args);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON object per line");
            for r in v["ranks"].as_array().unwrap() {
                assert!(
                    r["work"].as_u64().is_some() && r["boxes"].as_u64().is_some(),
                    "{r}"
                );
            }
            v["hash"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn same_hashes_for_every_rank_count_and_partitioner() {
    let reference = hashes(&["--ranks", "1", "--partitioner", "sfc"]);
    let two_phase = "--scheme=two-phase";
    let mut runs: Vec<Vec<String>> = vec![
        // Lan et al.'s scheme with a modelled clock and link: it redistributes.
        [
            "--ranks=4",
            "--partitioner=sfc",
            two_phase,
            "--link=1e-4,1e-8",
            "--model-clock=1e-5",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for r in 1..=4 {
        let (ranks, m) = (
            format!("--ranks={r}"),
            format!("--machine={}", machine(r).display()),
        );
        for extra in [
            vec![ranks.as_str(), "--partitioner=sfc"],
            vec![&ranks, "--partitioner=ace"],
            vec![&m, "--partitioner=hier"],
            vec![&m, "--partitioner=ace", two_phase, "--link=1e-4,1e-8"],
            vec![&ranks, two_phase, "--groups=1", "--link=0,0"],
        ] {
            runs.push(extra.into_iter().map(String::from).collect());
        }
    }
    // Two runs at a time.
    for pair in runs.chunks(2) {
        std::thread::scope(|s| {
            let got: Vec<_> = pair
                .iter()
                .map(|extra| {
                    s.spawn(move || {
                        let args: Vec<&str> = extra.iter().map(String::as_str).collect();
                        (hashes(&args), extra)
                    })
                })
                .collect();
            for g in got {
                let (h, extra) = g.join().unwrap();
                assert_eq!(h, reference, "{extra:?}");
            }
        });
    }
}

#[test]
fn text_output_has_a_header_and_a_line_per_step() {
    let out = ok(&[
        "--n0",
        "32",
        "--steps",
        "3",
        "--ranks",
        "2",
        "--capacities",
        "1,3",
    ]);
    assert!(out.starts_with("samr: 32 x 32 cells at level 0"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("step")).count(),
        3,
        "{out}"
    );
}

/// `--steps` and `--n0` over their documented limits are refused (not clamped) before the
/// run, naming the flag and the limit.
#[test]
fn counts_over_their_limits_are_refused() {
    for (args, limit) in [
        (
            ["--steps", "100001"],
            "100001 is over the limit of 100000 steps",
        ),
        (
            ["--steps", "1e300"],
            "1e300 is over the limit of 100000 steps",
        ),
        (
            ["--n0", "4097"],
            "4097 is over the limit of 4096 level-0 cells per side",
        ),
        (
            ["--n0", "9223372036854775807"],
            "9223372036854775807 is over the limit of 4096 level-0 cells per side",
        ),
        (
            ["--n0", "0"],
            "0 is below the minimum of 1 level-0 cells per side",
        ),
    ] {
        let o = samr(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}: the run started");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(args[0]) && e.contains(limit), "{args:?}: {e}");
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let e = err(&["--n0", "16", "--min-box", "17"]);
    assert!(
        e.contains("minimum box size 17 is larger than the domain (16 x 16 cells at level 0)"),
        "{e}"
    );
    let e = err(&["--n0", "2048", "--max-level", "2"]);
    assert!(
        e.contains("cells per side on the finest level (n0 * 2^max_level) is 8192"),
        "{e}"
    );
    let e = err(&["--ranks", "2", "--capacities", "1,0"]);
    assert!(
        e.contains("capacity of rank 1 is 0; expected a finite number > 0"),
        "{e}"
    );
    let e = err(&["--ranks", "3", "--capacities", "1,2"]);
    assert!(e.contains("--capacities has 2 values for 3 ranks"), "{e}");
    let e = err(&["--partitioner", "hier"]);
    assert!(e.contains("--partitioner hier needs --machine"), "{e}");
    let m = machine(2);
    let e = err(&["--ranks", "3", "--machine", m.to_str().unwrap()]);
    assert!(e.contains("--ranks 3 but the machine has 2 ranks"), "{e}");
    let partition_err = |file: &str, text: &str| {
        let boxes = tmp(file, text);
        err(&[
            "partition",
            "--boxes",
            boxes.to_str().unwrap(),
            "--n0",
            "16",
        ])
    };
    let e = partition_err(
        "samr-out.txt",
        "# level x0 y0 x1 y1\n0 0 0 16 16\n1 20 0 40 8\n",
    );
    let want = "samr-out.txt:3: box 1 (level 1, [20, 40) x [0, 8)) lies outside the level-1 \
                domain [0, 32) x [0, 32)";
    assert!(e.contains(want), "{e}");
    let e = partition_err("samr-overlap.txt", "0 0 0 8 16\n\n0 4 0 16 16\n");
    let want = "samr-overlap.txt:1 and 3: boxes 0 and 1 of level 0 overlap in [4, 8) x [0, 16)";
    assert!(e.contains(want), "{e}");
    let e = partition_err("samr-garbage.txt", "0 0 0 8\n");
    assert!(
        e.contains("samr-garbage.txt:1: expected `LEVEL X0 Y0 X1 Y1`"),
        "{e}"
    );
    #[cfg(not(feature = "mpi"))]
    assert!(err(&["--backend", "mpi"]).contains("built without MPI"));
}

#[test]
fn partition_follows_the_capacities() {
    let boxes = tmp("samr-one.txt", "0 0 0 64 64\n");
    let out = ok(&[
        "partition",
        "--boxes",
        boxes.to_str().unwrap(),
        "--capacities",
        "0.16,0.19,0.31,0.34",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let work: Vec<f64> = v["work"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect();
    for (w, c) in work.iter().zip([0.16, 0.19, 0.31, 0.34]) {
        assert!((w / 4096.0 - c).abs() < 0.03, "{work:?}");
    }
}

fn hetero_machine() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../machines/local-2core-hetero.xml"
    )
    .to_string()
}

#[test]
fn drum_in_the_loop_senses_before_each_regrid_and_keeps_the_solution() {
    let m = hetero_machine();
    let svg = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("samr-drum.svg");
    let _ = std::fs::remove_file(&svg);
    let out = ok(&[
        "--n0=32",
        "--steps=6",
        "--regrid-every=2",
        "--max-level=2",
        "--json",
        "--machine",
        &m,
        "--balance=monitored",
        "--machine-load",
        "--monitor-period-ms=5",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let steps: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert_eq!(steps.len(), 6, "{out}");
    let plain = ok(&["--n0=32", "--steps=6", "--regrid-every=2", "--max-level=2"]);
    let plain_hashes: Vec<&str> = plain
        .lines()
        .filter(|l| l.starts_with("step"))
        .map(|l| l.split_whitespace().nth(5).unwrap())
        .collect();
    for (k, s) in steps.iter().enumerate() {
        // The same solution whatever the capacities and ranks.
        assert_eq!(s["hash"].as_str().unwrap(), plain_hashes[k], "step {k}");
        let c: Vec<f64> = s["capacities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(c.len(), 2);
        assert!((c.iter().sum::<f64>() - 1.0).abs() < 1e-9 && c.iter().all(|x| *x > 0.0));
        // Sensed before the steps that end with a regrid (the 2nd, 4th, 6th).
        assert_eq!(s.get("sensed").is_some(), k % 2 == 1, "step {k}: {s}");
    }
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.contains("rank 1"));
}

#[test]
fn bad_drum_and_link_flags_are_clear_errors() {
    let e = err(&["--balance", "monitored"]);
    assert!(e.contains("need --machine"), "{e}");
    let m = hetero_machine();
    let e = err(&["--machine", &m, "--load", "5"]);
    assert!(e.contains("has ranks 0..2"), "{e}");
    let e = err(&["--machine", &m, "--load", "1:0"]);
    assert!(e.contains("N must be at least 1"), "{e}");
    let e = err(&["--ranks", "2", "--slow-link", "1e-3,1e-8"]);
    assert!(e.contains("the run has none"), "{e}");
    let e = err(&["--machine", &m, "--balance", "monitored", "--sensing", "0"]);
    assert!(e.contains("--sensing"), "{e}");
}

/// A bad `--svg` fails before the first step, naming the flag and the path, without a
/// backtrace.
#[test]
fn a_bad_svg_path_fails_before_the_run() {
    let bad = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-dir/samr.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_samr"))
        .env("RUST_BACKTRACE", "1")
        .args(["--json", "--svg", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "the run started");
    let e = String::from_utf8(o.stderr).unwrap();
    assert!(e.contains(&format!("--svg {}: ", bad.display())), "{e}");
    assert!(!e.to_lowercase().contains("backtrace"), "{e}");
}
