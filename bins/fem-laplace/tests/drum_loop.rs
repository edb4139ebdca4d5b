//! `fem-laplace --machine`: DRUM in the loop. Every step's report carries the decision, its
//! reason and figures, the sizes; the mesh stays the serial one; competing loads start at
//! their step and never outlive the run (normal end, a failing rank, Ctrl-C).

mod common;
use common::{bin, json_lines, machine};
use drum_model::load::is_running as alive;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The load processes a run announced on stderr (`load: ... (pid [N, M]) ...`).
fn load_pids(stderr: &str) -> Vec<u32> {
    stderr
        .lines()
        .filter(|l| l.starts_with("load: "))
        .flat_map(|l| {
            let inside = l.split("(pid [").nth(1).and_then(|t| t.split(']').next());
            inside
                .into_iter()
                .flat_map(|t| t.split(',').map(|p| p.trim().parse::<u32>().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn wait_gone(pids: &[u32]) {
    let t0 = Instant::now();
    while pids.iter().any(|&p| alive(p)) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in pids {
        assert!(!alive(p), "load process {p} outlived the run");
    }
}

#[test]
fn every_step_reports_the_decision_and_the_mesh_stays_the_serial_one() {
    let m = machine("local-2core-hetero.xml");
    let serial = json_lines(&["--target-vertices", "20000", "--json"]);
    for balance in ["monitored", "static", "uniform"] {
        let dist = json_lines(&[
            "--target-vertices",
            "20000",
            "--json",
            "--machine",
            &m,
            "--balance",
            balance,
        ]);
        assert_eq!(dist.len(), serial.len());
        for (k, (d, s)) in dist.iter().zip(&serial).enumerate() {
            assert_eq!(d["mesh_hash"], s["mesh_hash"], "{balance}, step {k}");
            assert_eq!(d["error_energy"], s["error_energy"], "{balance}, step {k}");
            let b = &d["balance"];
            assert_eq!(b["sizing"], balance);
            let reason = b["decision"]["reason"].as_str().unwrap();
            if k == 0 {
                assert_eq!(reason, "initial");
            } else {
                assert!(
                    [
                        "balanced",
                        "imbalance",
                        "power drift",
                        "imbalance and power drift",
                        "not profitable"
                    ]
                    .contains(&reason),
                    "{reason}"
                );
                assert!(b["decision"]["eff"].as_f64().unwrap() > 0.0);
                // The figures behind the decision are there, and its text says them.
                let text = b["decision"]["text"].as_str().unwrap();
                assert!(
                    text.contains("eff = ") && text.contains("eff_min = 0.9500"),
                    "{text}"
                );
                // Lan's figures, unless the link could not be measured (a warning says so).
                let unmeasured = dist[0]["balance"]["warnings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|w| w.as_str().unwrap().contains("could not be measured"));
                if !unmeasured {
                    assert!(b["decision"]["gain_s"].is_number(), "{b}");
                    assert!(b["decision"]["cost_s"].is_number(), "{b}");
                }
            }
            for key in ["targets", "achieved", "loads", "monitored_sizes"] {
                let v: Vec<f64> = b[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect();
                assert_eq!(v.len(), 2, "{key}");
                assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{key}: {v:?}");
                assert!(v.iter().all(|&x| x >= 0.0), "{key}: {v:?}");
            }
            if balance != "monitored" {
                // Equal ratings: static and uniform are both half and half.
                assert_eq!(b["targets"][0].as_f64(), Some(0.5));
            }
            let measured = b["measured"].as_array().unwrap();
            assert_eq!(measured.len(), 2);
            // A rebalance that kept the partition moved nothing.
            if b["decision"]["rebalance"] == false {
                assert_eq!(d["migration"]["elements"], 0, "{balance}, step {k}");
            }
        }
    }
}

#[test]
fn loads_start_at_their_step_and_stop_with_the_run() {
    let m = machine("local-2core-hetero.xml");
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "--target-vertices",
            "20000",
            "--machine",
            &m,
            "--load",
            "1:2@3",
            "--summary-json",
        ])
        .arg(dir.path().join("summary.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let pids = load_pids(&err);
    assert_eq!(pids.len(), 2, "{err}");
    assert!(
        err.contains("on CPU [1] of rank 1 (node 2 (\"core1-loaded\")) from step 3"),
        "{err}"
    );
    wait_gone(&pids);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("summary: monitored balance over 2 ranks"),
        "{text}"
    );
    assert!(
        text.contains("RC_ideal (DRUM 2005 §4.1) of this machine with its loads: 0.500"),
        "{text}"
    );

    // A rank that fails: the run ends with its error, and the load with it.
    let out = bin()
        .args([
            "--target-vertices",
            "20000",
            "--machine",
            &m,
            "--machine-load",
        ])
        .args(["--fail-at", "0:6"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rank 0 fails at step 6"), "{err}");
    let pids = load_pids(&err);
    assert_eq!(pids.len(), 1, "{err}");
    wait_gone(&pids);
}

/// A TCP sink on the loopback: the bytes of each connection, once it closes.
fn sink(conns: usize) -> (String, std::thread::JoinHandle<Vec<u64>>) {
    let (addr, h, _) = counted_sink(conns);
    (addr, h)
}

/// [`sink`], with the bytes received so far over all connections, updated as they arrive.
fn counted_sink(
    conns: usize,
) -> (
    String,
    std::thread::JoinHandle<Vec<u64>>,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use std::io::Read;
    use std::sync::atomic::{AtomicU64, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let so_far = std::sync::Arc::new(AtomicU64::new(0));
    let counter = so_far.clone();
    let h = std::thread::spawn(move || {
        (0..conns)
            .map(|_| {
                let (mut c, _) = listener.accept().unwrap();
                let mut buf = vec![0u8; 1 << 16];
                let mut total = 0u64;
                loop {
                    match c.read(&mut buf) {
                        Ok(0) => break total,
                        Ok(n) => {
                            total += n as u64;
                            counter.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => panic!("the sink's read failed: {e}"),
                    }
                }
            })
            .collect()
    });
    (addr, h, so_far)
}

#[test]
fn flows_start_at_their_step_and_stop_with_the_run() {
    let m = machine("local-2core-hetero.xml");
    let (addr, received) = sink(1);
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let out = bin()
        .args(["--target-vertices", "20000", "--machine", &m, "--json"])
        .args(["--net-load", "core1-loaded:40@2-5", "--net-sink", &addr])
        .arg("--summary-json")
        .arg(&summary)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let pids = load_pids(&err);
    assert_eq!(pids.len(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "a TCP flow (pid [{}]) from rank 1 (node 2 (\"core1-loaded\")) to {addr} at 40 Mbit/s \
             from step 2",
            pids[0]
        )),
        "{err}"
    );
    assert!(
        err.contains("load: --net-load core1-loaded:40@2-5 stopped at step 5 ("),
        "{err}"
    );
    wait_gone(&pids);
    let got = received.join().unwrap()[0];
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let sent = v["per_rank"][1]["end"]["net_load_bytes"].as_u64().unwrap();
    assert!(sent > 0 && got + 1 >= sent, "sent {sent}, received {got}");
    assert_eq!(v["per_rank"][0]["end"]["net_load_bytes"], 0);
    // Every rank entry names its host (threads: this host).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(v["per_rank"][1]["host"], host.trim());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let step: serde_json::Value = serde_json::from_str(line).unwrap();
        for r in step["ranks"].as_array().unwrap() {
            assert_eq!(r["host"], host.trim(), "{line}");
        }
    }

    // A failing rank ends the run, and the flow with it; a bad node name is named.
    let (addr, received) = sink(1);
    let out = bin()
        .args(["--target-vertices", "20000", "--machine", &m])
        .args([
            "--net-load",
            "core0",
            "--net-sink",
            &addr,
            "--fail-at",
            "1:4",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rank 1 fails at step 4"), "{err}");
    let pids = load_pids(&err);
    assert_eq!(pids.len(), 1, "{err}");
    wait_gone(&pids);
    assert!(received.join().unwrap()[0] > 0);
    let out = bin()
        .args(["--machine", &m, "--net-load", "core9", "--net-sink", &addr])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has no single computing node named \"core9\"")
            && err.contains("[\"core0\", \"core1-loaded\"]"),
        "{err}"
    );
    let out = bin()
        .args(["--machine", &m, "--net-load", "core0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--net-sink"), "{err}");
}

#[test]
fn a_load_killed_mid_run_is_reported_at_once_and_counted() {
    let mut child = bin()
        .args(["--target-vertices", "20000", "--no-hash", "--load", "1:2"])
        .args(["--machine", &machine("local-2core-hetero.xml")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    assert!(err.read_line(&mut line).unwrap() > 0, "no load line");
    let pids = load_pids(&line);
    assert_eq!(pids.len(), 2, "{line}");
    // SAFETY: kill on a load process of the run (it reaps it; the run lasts well beyond).
    unsafe { libc::kill(pids[0] as i32, libc::SIGKILL) };
    // The watch's line, with the step the run is in (its thread looks every 50 ms, needing
    // no step boundary: drum-model's `a_watch_reports_a_death_at_once_with_its_step`).
    line.clear();
    assert!(
        err.read_line(&mut line).unwrap() > 0,
        "no line on the death"
    );
    let died = format!(
        "load: process {} of --load 1:2@0 on rank 1 died during step ",
        pids[0]
    );
    assert!(line.starts_with(&died), "{line}");
    assert!(
        line.contains("(killed by signal 9); the run goes on with one competing process fewer"),
        "{line}"
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(!rest.contains("died"), "reported once: {rest}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{rest}");
    // The summary counts it; RC_ideal is the one of the process left (two would give 0.500).
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("load: 1 competing process(es) died during the run")
            && text.contains("RC_ideal (DRUM 2005 §4.1) of this machine with its loads: 0.333"),
        "{text}"
    );
    wait_gone(&pids);
}

#[test]
fn ctrl_c_leaves_no_load_behind() {
    for signal in [libc::SIGINT, libc::SIGKILL] {
        // A flow as well: its sink reads until the run is gone.
        let (addr, received, so_far) = counted_sink(1);
        let mut cmd = bin();
        // A shell that starts a job in the background (a CI runner, `cmd &`) ignores SIGINT,
        // and its children inherit that: the run would not see the Ctrl-C this test sends.
        // SAFETY: `signal` is async-signal-safe, as a pre-exec hook must be.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = cmd
            .args([
                "--machine",
                &machine("local-2core-hetero.xml"),
                "--machine-load",
                "--no-hash",
                "--net-load",
                "core0",
                "--net-sink",
                &addr,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let mut pids = Vec::new();
        while pids.len() < 2 {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "no load line");
            pids.extend(load_pids(&line));
        }
        assert!(pids.iter().all(|&p| alive(p)));
        // The flow's first bytes before the signal (on a busy machine the flow may not have
        // sent any yet when its pid is printed).
        let t0 = std::time::Instant::now();
        while so_far.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            assert!(t0.elapsed().as_secs() < 60, "the flow sent nothing in 60 s");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: kill on our child's pid.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert!(!status.success());
        wait_gone(&pids);
        assert!(received.join().unwrap()[0] > 0);
    }
}

#[test]
fn transfer_repartitions_incrementally_and_keeps_the_serial_mesh() {
    let m = machine("local-2core-hetero.xml");
    let serial = json_lines(&["--target-vertices", "20000", "--json"]);
    for t in ["hbm", "gde", "implicit"] {
        let args = [
            "--target-vertices",
            "20000",
            "--json",
            "--machine",
            &m,
            "--balance",
            "static",
            "--rebalance",
            "always",
            "--transfer",
            t,
        ];
        let dist = json_lines(&args);
        assert_eq!(dist.len(), serial.len());
        let mut moved = 0;
        for (k, (d, s)) in dist.iter().zip(&serial).enumerate() {
            assert_eq!(d["mesh_hash"], s["mesh_hash"], "{t}, step {k}");
            let b = &d["balance"];
            assert_eq!(b["decision"]["rebalance"], true);
            // Equal ratings: each rank ends within the machine file's IMBALANCE_TOL = 1.02
            // of half the weight, once elements are small against it.
            let elements = d["elements"].as_u64().unwrap() as f64;
            for a in b["achieved"].as_array().unwrap() {
                let a = a.as_f64().unwrap();
                assert!(
                    elements < 1000.0 || a <= 0.5 * 1.02 + 2.0 / elements,
                    "{t}, step {k}: {b}"
                );
            }
            if k > 0 {
                moved += d["migration"]["elements"].as_u64().unwrap();
            }
        }
        assert!(moved > 0, "{t}: refinement unbalanced nothing?");
    }
}

/// The steps of a run with `--capacity capacity --rebalance always`, checked to keep the
/// serial run's mesh.
fn capacity_run(capacity: &str) -> Vec<serde_json::Value> {
    let m = machine("local-2core-hetero.xml");
    let serial = json_lines(&["--target-vertices", "20000", "--json"]);
    let dist = json_lines(&[
        "--target-vertices",
        "20000",
        "--json",
        "--machine",
        &m,
        "--capacity",
        capacity,
        "--rebalance",
        "always",
    ]);
    assert_eq!(dist.len(), serial.len());
    for (k, (d, s)) in dist.iter().zip(&serial).enumerate() {
        assert_eq!(d["mesh_hash"], s["mesh_hash"], "{capacity}, step {k}");
    }
    dist
}

#[test]
fn measured_capacities_come_from_work_and_the_seconds_it_took() {
    let dist = capacity_run("measured");
    let mut renewed = 0;
    for d in &dist {
        let b = &d["balance"];
        assert_eq!(b["sizing"], "monitored");
        // Until every rank has had a window with work in it, the sizes stay (and say why).
        let kept = (b["warnings"].as_array().unwrap().iter())
            .any(|w| w.as_str().unwrap().contains("no measured work for rank"));
        let sizes: Vec<f64> = (b["monitored_sizes"].as_array().unwrap().iter())
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!((sizes.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{sizes:?}");
        if b["measured_s"].as_f64().unwrap() > 0.0 && !kept {
            // Work ÷ runnable seconds: measured, never the ratings' exact halves, and every
            // rank keeps a part. (How far from halves depends on what else shares the cores:
            // on a busy host much; the arithmetic is checked exactly in drum-loop's tests.)
            renewed += 1;
            assert!(
                sizes[0] != 0.5 && sizes.iter().all(|&x| x > 0.0),
                "{sizes:?}"
            );
        }
    }
    assert!(renewed > 0, "no window was measured");
}

#[test]
fn loadavg_capacities_divide_the_ratings_by_the_competition() {
    // Two competing processes pinned to core 1. Each node's load average over a window is
    // its rank's runnable time over its CPU time (the tasks competing for the core while the
    // rank wanted it); equal ratings divided by it give the sizes. How far they lean depends
    // on what else runs on the host, so the sizes are checked against the windows' own
    // figures, as the report gives them.
    let m = machine("local-2core-hetero.xml");
    let dist = json_lines(&[
        "--target-vertices",
        "20000",
        "--json",
        "--machine",
        &m,
        "--capacity",
        "loadavg",
        "--load",
        "1:2",
    ]);
    let mut checked = 0;
    for b in dist.iter().map(|d| &d["balance"]) {
        assert_eq!(b["sizing"], "monitored");
        let measured = b["measured"].as_array().unwrap();
        let evidence = measured.iter().all(|r| r["evidence"] == true);
        if b["measured_s"].as_f64().unwrap() == 0.0 || !evidence {
            continue;
        }
        let load = |r: &serde_json::Value| {
            let (u, run) = (r["util"].as_f64().unwrap(), r["runnable"].as_f64());
            run.filter(|&x| x >= 0.01 && u > 0.0)
                .map_or(1.0, |x| (x / u).max(1.0))
        };
        let inv: Vec<f64> = measured.iter().map(|r| 1.0 / load(r)).collect();
        let sizes = b["monitored_sizes"].as_array().unwrap();
        for (s, i) in sizes.iter().zip(&inv) {
            let want = i / inv.iter().sum::<f64>();
            assert!((s.as_f64().unwrap() - want).abs() < 1e-6, "{b}");
        }
        checked += 1;
    }
    assert!(checked > 0, "no window was measured");
}

#[test]
fn homogeneous_balancing_takes_the_ranks_time_as_the_load() {
    let dist = capacity_run("homogeneous");
    for (k, d) in dist.iter().enumerate() {
        let b = &d["balance"];
        assert_eq!(b["sizing"], "uniform");
        assert_eq!(b["targets"], serde_json::json!([0.5, 0.5]), "step {k}");
    }
    // Once both ranks were measured, the objects weigh their rank's seconds, no longer their
    // work: the fractions the partition achieved differ from the work the ranks then hold
    // (which they equal when the work is the load).
    let timed = dist.iter().skip(1).any(|d| {
        let loads = d["balance"]["achieved"].as_array().unwrap();
        let owned: Vec<f64> = (d["ranks"].as_array().unwrap().iter())
            .map(|r| r["work"].as_f64().unwrap())
            .collect();
        let w0 = owned[0] / owned.iter().sum::<f64>();
        (loads[0].as_f64().unwrap() - w0).abs() > 1e-6
    });
    assert!(timed, "the loads stayed the work");
}

#[test]
fn bad_drum_flags_are_named() {
    let run = |args: &[&str]| {
        let out = bin().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let m = machine("local-2core-hetero.xml");
    let e = run(&["--balance", "static", "--target-vertices", "100"]);
    assert!(e.contains("need --machine"), "{e}");
    let e = run(&["--machine", &m, "--balance", "best"]);
    assert!(e.contains("expected uniform, static or monitored"), "{e}");
    let e = run(&["--machine", &m, "--load", "2"]);
    assert!(
        e.contains("--load 2:1@0") && e.contains("has ranks 0..2"),
        "{e}"
    );
    let e = run(&["--machine", &m, "--load", "1:0"]);
    assert!(e.contains("N must be at least 1"), "{e}");
    let e = run(&["--machine", &machine("bullpen.xml"), "--load", "0"]);
    assert!(e.contains("has no `cpus`"), "{e}");
    let e = run(&["--machine", &m, "--w-comm", "2"]);
    assert!(e.contains("w_comm must be in [0, 1]"), "{e}");
    let e = run(&["--machine", &m, "--monitor-period-ms", "1"]);
    assert!(e.contains("at most every 10 ms"), "{e}");
    // Checked before any rank starts, not at the first decision.
    let e = run(&["--machine", &m, "--eff-min", "1.5"]);
    assert!(
        e.contains("eff_min is 1.5; expected a number in (0, 1]"),
        "{e}"
    );
    assert!(!e.contains("step"), "{e}");
    let e = run(&["--machine", &m, "--rebalance", "sometimes"]);
    assert!(e.contains("expected policy, always or never"), "{e}");
    let e = run(&["--machine", &m, "--sensing", "0"]);
    assert!(e.contains("a number of steps >= 1 or `once`"), "{e}");
    let e = run(&["--machine", &m, "--transfer", "metis"]);
    assert!(e.contains("expected hbm, gde or implicit"), "{e}");
    let e = run(&[
        "--machine",
        &m,
        "--capacity",
        "measured",
        "--balance",
        "uniform",
    ]);
    assert!(
        e.contains("--capacity measured and --balance uniform disagree"),
        "{e}"
    );
    let e = run(&[
        "--machine",
        &m,
        "--capacity",
        "loadavg",
        "--balance",
        "static",
    ]);
    assert!(
        e.contains("--capacity loadavg and --balance static disagree"),
        "{e}"
    );
    let e = run(&[
        "--machine",
        &m,
        "--capacity",
        "homogeneous",
        "--balance",
        "monitored",
    ]);
    assert!(e.contains("homogeneous is uniform"), "{e}");
    let e = run(&["--machine", &m, "--capacity", "cpu"]);
    assert!(
        e.contains("possible values: static, measured, loadavg, homogeneous"),
        "{e}"
    );
    let e = run(&["--transfer", "hbm", "--target-vertices", "100"]);
    assert!(e.contains("need --machine"), "{e}");
}
