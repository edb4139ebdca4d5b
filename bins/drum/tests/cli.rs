//! The `drum` binary: exit codes, the `FILE:LINE:COL: message` error format, the JSON schema of
//! `drum powers --json`, SVG output, replay and discovery.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn drum(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drum"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run drum")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// This test's folder (each test runs on a thread of its own), removed when the test ends.
fn tmp(name: &str) -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::Builder::new()
            .prefix("drum-cli-")
            .tempdir()
            .expect("a test folder");
    }
    DIR.with(|d| d.path().join(name))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn check_prints_a_tree() {
    let o = drum(&["check", "machines/bullpen.xml"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.starts_with(
            "machines/bullpen.xml: 12 nodes (1 network, 6 single-processor, 5 SMP), 24 ranks\n"
        ),
        "{out}"
    );
    // 18 processors at 67.5, 2 at 50, 4 at 45 MFLOPS (values checked by hand in Python).
    assert!(
        out.contains("heterogeneity over 24 processors: H_cpu = 0.1348, RC_ideal = 0.2776\n"),
        "{out}"
    );
    assert!(
        out.contains("├── [3] MULTIPLE_COMPUTING x4 \"rivera.cs.williams.edu\""),
        "{out}"
    );

    // RC_ideal counts the processors running the application (DRUM 2005 §4.1): one rank on a
    // 4-way SMP at 100 uses one CPU, three ranks on a uniprocessor at 50 share one. H_cpu
    // counts all 5 CPUs: W = (1, 1, 1, 1, 0.5), H = 0.2; RC_ideal = 1 − 2/(2 + 1) = 1/3.
    let file = tmp("ranks.xml");
    std::fs::write(
        &file,
        r#"<machinemodel><node type="NETWORK" nodenum="0" parent="-1"/>
        <node type="MULTIPLE_COMPUTING" nodenum="1" parent="0" numprocs="4" ranks="1" mflops="100"/>
        <node type="SINGLE_COMPUTING" nodenum="2" parent="0" ranks="3" mflops="50"/></machinemodel>"#,
    )
    .unwrap();
    let o = drum(&["check", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "heterogeneity over 5 processors: H_cpu = 0.2000, RC_ideal = 0.3333 over the 2 \
             processors the ranks use\n"
        ),
        "{out}"
    );
}

#[test]
fn check_json_gives_the_tree() {
    let o = drum(&["check", "--json", "machines/fig3-cluster-of-clusters.xml"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ranks"], 22);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 16);
    // Document order (nested form): switch, router-a and its three nodes, ...
    assert_eq!(nodes[0]["name"], "switch");
    assert_eq!(nodes[0]["parent"], serde_json::Value::Null);
    assert_eq!(nodes[1]["name"], "router-a");
    assert_eq!(
        (&nodes[1]["parent"], &nodes[1]["bandwidth"]),
        (&0.into(), &100.0.into())
    );
    let a1 = &nodes[2];
    assert_eq!(
        (&a1["name"], &a1["type"], &a1["parent"]),
        (&"sp-a1".into(), &"SINGLE_COMPUTING".into(), &1.into())
    );
    assert_eq!(a1["ranks"], serde_json::json!([0, 1]));
    assert_eq!(a1["bandwidth"], serde_json::Value::Null);
    let smp = nodes.iter().find(|n| n["name"] == "smp-b").unwrap();
    assert_eq!(smp["ranks"], serde_json::json!([5, 9]));
    let o = drum(&["check", "--json", "machines/local-2core-hetero.xml"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["nodes"][2]["cpus"], serde_json::json!([1]));
    assert_eq!(v["nodes"][2]["load"], 1);
    // Bad files fail as without --json.
    let o = drum(&["check", "--json", "machines/no-such-file.xml"]);
    assert!(!o.status.success() && o.stdout.is_empty());
}

#[test]
fn bad_input_is_file_line_col_on_stderr_and_exit_1() {
    let cases = [
        (
            "bad1.xml",
            "<machinemodel>\n  <node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"/>\n  <node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"5\"/>\n</machinemodel>\n",
            "3:45: node 1 names parent 5, which does not exist",
        ),
        (
            "bad2.xml",
            "",
            "1:1: empty machine description (no <machinemodel> element)",
        ),
        (
            "bad3.xml",
            "<machinemodel>\n<node type=\"GPU\" nodenum=\"0\" parent=\"-1\"/></machinemodel>",
            "2:7: unknown node type \"GPU\" (expected NETWORK, SINGLE_COMPUTING or MULTIPLE_COMPUTING)",
        ),
        (
            "bad4.xml",
            "<machinemodel>\n<node type=\"NETWORK\" nodenum=\"0\" name=\"sw\" parent=\"-1\">\n  <lbmethod lbm=\"FOO\"/></node>\n<node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\"/></machinemodel>",
            "3:13: node 0 (\"sw\"): unknown lbmethod `FOO` (known: HSFC, RCB, RIB, DIFFUSION)",
        ),
    ];
    for (name, content, msg) in cases {
        let path = tmp(name);
        std::fs::write(&path, content).unwrap();
        for cmd in ["check", "powers", "show"] {
            let o = drum(&[cmd, path.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(1), "{cmd} {name}");
            assert_eq!(
                text(&o.stderr),
                format!("{}:{msg}\n", path.display()),
                "{cmd} {name}"
            );
            assert!(o.stdout.is_empty());
        }
    }
    let o = drum(&["check", "machines/no-such-file.xml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with("machines/no-such-file.xml: No such file"),
        "{}",
        text(&o.stderr)
    );
    // The OS error once: in the message, not again as its cause.
    assert_eq!(
        text(&o.stderr).matches("No such file").count(),
        1,
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn powers_json_schema_and_sums() {
    let o = drum(&[
        "powers",
        "machines/bullpen.xml",
        "--w-comm",
        "0.25",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("{\n  \"w_comm\": 0.25,\n  \"nodes\": [\n    {\"nodenum\": 0, \"name\": \"bullpen-switch\", \"power\": 1.0}"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let obj = v.as_object().unwrap();
    assert_eq!(
        obj.keys().collect::<Vec<_>>(),
        vec!["nodes", "parts", "w_comm"]
    );
    let parts = v["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 24);
    let sum: f64 = parts.iter().map(|p| p["size"].as_f64().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-12);
    for (r, p) in parts.iter().enumerate() {
        assert_eq!(p.as_object().unwrap().len(), 3);
        assert_eq!(p["rank"].as_u64(), Some(r as u64));
    }
    let nodes = v["nodes"].as_array().unwrap();
    let children: f64 = nodes[1..]
        .iter()
        .map(|n| n["power"].as_f64().unwrap())
        .sum();
    assert!(
        (children - 1.0).abs() < 1e-12,
        "children of the root share 1"
    );
    // Without communication weight, fast SMP processes get 1.5 times what 300 MHz nodes get.
    let o = drum(&["powers", "machines/bullpen.xml", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let size = |r: usize| v["parts"][r]["size"].as_f64().unwrap();
    assert!((size(3) / size(23) - 1.5).abs() < 1e-12);
}

#[test]
fn model_flags_and_their_errors() {
    for model in ["drum", "drum2004", "sinha"] {
        let o = drum(&[
            "powers",
            "machines/bullpen.xml",
            "--model",
            model,
            "--w-comm",
            "0.1",
        ]);
        assert!(o.status.success(), "{model}: {}", text(&o.stderr));
    }
    let o = drum(&["powers", "machines/bullpen.xml", "--model", "measured"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "--model measured needs --work WORK.jsonl (per-rank work and CPU seconds)\n"
    );
    let o = drum(&["powers", "machines/bullpen.xml", "--w-comm", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "invalid parameter: w_comm must be in [0, 1], got 2\n"
    );
    let work = tmp("work.jsonl");
    let lines: Vec<String> = (0..2)
        .map(|r| {
            format!(
                "{{\"rank\": {r}, \"work\": {}, \"cpu_seconds\": 1}}",
                100 * (r + 1)
            )
        })
        .collect();
    std::fs::write(&work, lines.join("\n")).unwrap();
    let o = drum(&[
        "powers",
        "machines/local-2core-hetero.xml",
        "--model",
        "measured",
        "--work",
        work.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!((v["parts"][1]["size"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn replay_through_the_cli() {
    let samples = tmp("samples.jsonl");
    let mut lines = Vec::new();
    for (i, t) in [0.0, 1.0, 2.0].iter().enumerate() {
        for (node, idle) in [(1, 0.2), (2, 1.0)] {
            lines.push(format!(
                "{{\"t\": {t}, \"node\": {node}, \"cpu_idle\": [{idle}], \"proc_util\": [0.0], \"mem_total\": 8e9, \"mem_avail\": 4e9, \"ifaces\": [{{\"name\": \"eth0\", \"capacity_mbps\": null, \"rx_bytes\": {}, \"tx_bytes\": 0, \"rx_packets\": 0, \"tx_packets\": 0}}]}}",
                i * 1000
            ));
        }
    }
    std::fs::write(&samples, lines.join("\n")).unwrap();
    let o = drum(&[
        "powers",
        "machines/local-2core-hetero.xml",
        "--replay",
        samples.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // p = 8000 · 0.2 = 1600 against 8000 · 1.0 = 8000.
    let s0 = v["parts"][0]["size"].as_f64().unwrap();
    assert!((s0 - 1600.0 / 9600.0).abs() < 1e-12, "{s0}");
    // Communication power needs a capacity: the error names the node (the file without its
    // `bandwidth`).
    let unrated = tmp("unrated.xml");
    let xml = std::fs::read_to_string(root().join("machines/local-2core-hetero.xml")).unwrap();
    let xml = xml.replacen("parent=\"-1\" bandwidth=\"48000\"", "parent=\"-1\"", 1);
    assert!(!xml.contains("parent=\"-1\" bandwidth"));
    std::fs::write(&unrated, &xml).unwrap();
    let o = drum(&[
        "powers",
        unrated.to_str().unwrap(),
        "--replay",
        samples.to_str().unwrap(),
        "--w-comm",
        "0.5",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with("node 1 (\"core0\"): interface eth0 has no known capacity"),
        "{}",
        text(&o.stderr)
    );
    // ... which the machine file can give: samples without a capacity use its `bandwidth`.
    let rated = tmp("rated.xml");
    let xml = xml.replacen(
        "name=\"localhost\"",
        "name=\"localhost\" bandwidth=\"1\"",
        1,
    );
    assert!(xml.contains("bandwidth=\"1\""));
    std::fs::write(&rated, xml).unwrap();
    let o = drum(&[
        "powers",
        rated.to_str().unwrap(),
        "--replay",
        samples.to_str().unwrap(),
        "--w-comm",
        "0.5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Both nodes receive 1000 B/s = 0.008 Mbit/s of C = 1: A = 0.992 each, ĉ = 1/2.
    let s0 = v["parts"][0]["size"].as_f64().unwrap();
    assert!((s0 - (0.25 + 0.5 * 1600.0 / 9600.0)).abs() < 1e-12, "{s0}");
    std::fs::write(&samples, "{\"t\": 1}\n").unwrap();
    let o = drum(&[
        "powers",
        "machines/local-2core-hetero.xml",
        "--replay",
        samples.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "{}:1:8: not a sample: missing field `node`\n",
            samples.display()
        )
    );
}

#[test]
fn show_writes_an_svg() {
    let out = tmp("fig3.svg");
    let o = drum(&[
        "show",
        "machines/fig3-cluster-of-clusters.xml",
        "--svg",
        out.to_str().unwrap(),
        "--w-comm",
        "0.2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains("router-a") && svg.contains("smp-c2") && svg.contains("% of all"));
    assert!(svg.matches("<rect x=").count() >= 16);
    let o = drum(&["show", "machines/fig3-cluster-of-clusters.xml"]);
    assert!(text(&o.stdout).contains("└── [4] NETWORK \"router-d\""));
}

#[test]
fn monitor_records_replayable_samples() {
    let rec = tmp("mon.jsonl");
    let o = drum(&[
        "monitor",
        "--seconds",
        "0.5",
        "--period-ms",
        "50",
        "--record",
        rec.to_str().unwrap(),
        "--pid",
        &std::process::id().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("monitor overhead: "), "{out}");
    assert!(text(&o.stderr).contains(" samples"), "progress line");
    let content = std::fs::read_to_string(&rec).unwrap();
    let first: serde_json::Value = serde_json::from_str(content.lines().next().unwrap()).unwrap();
    for key in [
        "t",
        "node",
        "cpu_idle",
        "proc_util",
        "mem_total",
        "mem_avail",
        "ifaces",
    ] {
        assert!(first.get(key).is_some(), "{key}");
    }
    assert_eq!(first["proc_util"].as_array().unwrap().len(), 1);
}

#[test]
fn discover_writes_a_machine_that_check_accepts() {
    let out = tmp("host.xml");
    let o = drum(&[
        "discover",
        "--n",
        "120",
        "--repeats",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = drum(&["check", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let tree = text(&o.stdout);
    assert!(tree.contains("MFLOPS") && tree.contains("cpus 0"), "{tree}");
    let o = drum(&["powers", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = drum(&["bench", "--n", "80", "--repeats", "3"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("median: "));
}

/// Output paths are tried before the work (a 5 s monitor, a LINPACK run): a bad one fails at
/// once naming the flag and the path, with no backtrace and nothing left behind.
#[test]
fn bad_output_paths_fail_before_the_work() {
    let bad = tmp("no-such-dir").join("out");
    let bad_s = bad.to_str().unwrap();
    for args in [
        vec!["monitor", "--seconds", "5", "--record", bad_s],
        vec!["discover", "--n", "50", "--repeats", "1", "--out", bad_s],
        vec!["show", "machines/bullpen.xml", "--svg", bad_s],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_drum"))
            .env("RUST_BACKTRACE", "1")
            .args(&args)
            .current_dir(root())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o.stderr);
        assert!(err.contains(bad_s), "{args:?}: {err}");
        assert!(!err.contains("samples"), "{args:?}: the monitor ran: {err}");
        assert!(
            !err.contains("benchmarking"),
            "{args:?}: LINPACK ran: {err}"
        );
        assert!(!err.to_lowercase().contains("backtrace"), "{err}");
    }
    assert!(!bad.parent().unwrap().exists());
    // A good --record is written whole.
    let rec = tmp("rec.jsonl");
    let o = drum(&[
        "monitor",
        "--seconds",
        "0.3",
        "--period-ms",
        "100",
        "--record",
        rec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let body = std::fs::read_to_string(&rec).unwrap();
    assert!(body.ends_with('\n') && body.lines().count() >= 1, "{body}");
    let left: Vec<_> = std::fs::read_dir(rec.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Counts, durations and files over their limits are refused at once, naming the flag (or
/// the file) and the limit: no panic, no 80 GB allocation, no endless read.
#[test]
fn hostile_sizes_and_durations_are_refused_naming_the_limit() {
    for (args, msg) in [
        (
            &["check", "/dev/zero"][..],
            "/dev/zero: larger than the limit of 16777216 bytes for a machine file",
        ),
        (
            &["monitor", "--seconds", "1e20"],
            "'--seconds <SECONDS>': 1e20 s is over the limit of 604800 s",
        ),
        (
            &["monitor", "--seconds", "inf"],
            "inf s is not a positive, finite duration",
        ),
        (&["monitor", "--period-ms", "0"], "--period-ms <PERIOD_MS>"),
        (
            &["bench", "--n", "4294967295"],
            "'--n <N>': 4294967295 is over the limit of 4096 (matrix order)",
        ),
        (
            &["bench", "--n", "100000"],
            "100000 is over the limit of 4096 (matrix order)",
        ),
        (
            &["bench", "--repeats", "1e7"],
            "1e7 is over the limit of 1000 repeats",
        ),
        (
            &["discover", "--n", "100000"],
            "100000 is over the limit of 4096 (matrix order)",
        ),
    ] {
        let o = drum(args);
        assert_eq!(
            o.status.code(),
            Some(if args[0] == "check" { 1 } else { 2 }),
            "{args:?}"
        );
        let e = text(&o.stderr);
        assert!(e.contains(msg), "{args:?}: {e}");
        assert!(!e.contains("panicked") && !e.contains("backtrace"), "{e}");
    }
    // Two ratings whose sum overflows share equally, with no error about zero power.
    let m = tmp("huge-mflops.xml");
    std::fs::write(
        &m,
        "<machinemodel><node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"/>\
         <node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" mflops=\"1e308\"/>\
         <node type=\"SINGLE_COMPUTING\" nodenum=\"2\" parent=\"0\" mflops=\"1e308\"/></machinemodel>",
    )
    .unwrap();
    let o = drum(&["powers", m.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        !out.contains("null") && !out.contains("inf") && !out.contains("NaN"),
        "{out}"
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["parts"][0]["size"], 0.5, "{out}");
    assert_eq!(j["parts"][1]["size"], 0.5, "{out}");
    std::fs::remove_file(&m).unwrap();
}
