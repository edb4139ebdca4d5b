//! Replay of JSON Lines samples in the issue's format into powers, with hand-computed numbers,
//! and the errors of malformed or inconsistent sample files.

use drum_model::samples::{
    Smoothing, observations_from_samples, parse_jsonl, parse_work, powers_from_samples,
};
use drum_model::{Machine, NodeId, PowerConfig, PowerModel};

const MACHINE: &str = r#"<machinemodel>
  <node type="NETWORK" nodenum="0" name="sw" parent="-1" bandwidth="100"/>
  <node type="MULTIPLE_COMPUTING" nodenum="3" name="smp" parent="0" numprocs="2" ranks="1" mflops="60"/>
  <node type="SINGLE_COMPUTING" nodenum="4" name="sp" parent="0" mflops="40"/>
</machinemodel>"#;

// Node 3: one process on a 2-way SMP; node 4: a uniprocessor. Three samples each, 2 s apart.
const SAMPLES: &str = r#"{"t": 10.0, "node": 3, "cpu_idle": [0.9, 0.1], "proc_util": [0.95], "mem_total": 8.0e9, "mem_avail": 6.1e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 1000000, "tx_bytes": 0, "rx_packets": 100, "tx_packets": 0}]}
{"t": 10.0, "node": 4, "cpu_idle": [0.5], "proc_util": [0.5], "mem_total": 1.0e9, "mem_avail": 0.5e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 0, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}]}

{"t": 12.0, "node": 3, "cpu_idle": [0.9, 0.1], "proc_util": [0.95], "mem_total": 8.0e9, "mem_avail": 6.1e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 6000000, "tx_bytes": 0, "rx_packets": 300, "tx_packets": 0}]}
{"t": 12.0, "node": 4, "cpu_idle": [0.5], "proc_util": [0.5], "mem_total": 1.0e9, "mem_avail": 0.5e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 0, "tx_bytes": 2500000, "rx_packets": 0, "tx_packets": 50}]}
{"t": 14.0, "node": 3, "cpu_idle": [0.7, 0.3], "proc_util": [0.85], "mem_total": 8.0e9, "mem_avail": 6.1e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 11000000, "tx_bytes": 0, "rx_packets": 500, "tx_packets": 0}]}
{"t": 14.0, "node": 4, "cpu_idle": [0.5], "proc_util": [0.5], "mem_total": 1.0e9, "mem_avail": 0.5e9, "ifaces": [{"name": "eth0", "capacity_mbps": 100, "rx_bytes": 0, "tx_bytes": 5000000, "rx_packets": 0, "tx_packets": 100}]}
"#;

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-12, "{a} vs {b}");
}

#[test]
fn replay_by_hand() {
    let m = Machine::parse_str(MACHINE, "m.xml").unwrap();
    let s = parse_jsonl(SAMPLES, "s.jsonl").unwrap();
    assert_eq!(s.len(), 6);
    let obs = observations_from_samples(&s, Smoothing::WindowMean).unwrap();
    let o3 = &obs.nodes[&3];
    // Window means: idle (0.9, 0.9, 0.7) → 5/6 and (0.1, 0.1, 0.3) → 1/6; u (0.95, 0.95, 0.85).
    close(o3.cpu_idle[0], 2.5 / 3.0);
    close(o3.proc_util[0], 2.75 / 3.0);
    // eth0 of node 3: 10 MB in 4 s = 2.5 MB/s = 20 Mbit/s; 400 packets / 4 s.
    let r = o3.ifaces[0].rates.unwrap();
    close(r.rx_bytes, 2.5e6);
    close(r.rx_packets, 100.0);

    // DRUM 2005, w_comm = 0.5:
    // p_3 = 60 (ū + min(1 − ū, Σi)) with k = 1: Σi = 1 ≥ 1 − ū, so p_3 = 60.
    // p_4 = 40 (0.5 + min(0.5, 0.5)) = 40.
    // c_3 = 100 − 20 = 80; c_4 = 100 − 8·5e6/4/1e6 = 90.
    let cfg = PowerConfig {
        model: PowerModel::Drum { w_comm: 0.5 },
        ..Default::default()
    };
    let p = powers_from_samples(&m, &cfg, &s, Smoothing::WindowMean).unwrap();
    close(p.nodes[1].processing, 60.0);
    close(p.nodes[2].processing, 40.0);
    close(p.nodes[1].communication.unwrap(), 80.0);
    close(p.nodes[2].communication.unwrap(), 90.0);
    close(p.share(NodeId(1)), 0.5 * 0.6 + 0.5 * 80.0 / 170.0);
    close(p.parts.iter().sum(), 1.0);

    // DRUM 2004: CAF_3 = 100 packets/s, CAF_4 = 25: c = 0.01, 0.04 → ĉ = 0.2, 0.8.
    let cfg = PowerConfig {
        model: PowerModel::Drum2004 { w_comm: 0.5 },
        ..Default::default()
    };
    let p = powers_from_samples(&m, &cfg, &s, Smoothing::WindowMean).unwrap();
    close(p.share(NodeId(1)), 0.5 * 0.6 + 0.5 * 0.2);

    // Forecast smoothing runs too and stays a valid distribution.
    let p = powers_from_samples(&m, &cfg, &s, Smoothing::Forecast).unwrap();
    close(p.parts.iter().sum(), 1.0);
}

fn err(text: &str) -> String {
    let m = Machine::parse_str(MACHINE, "m.xml").unwrap();
    match parse_jsonl(text, "s.jsonl") {
        Err(e) => e.to_string(),
        Ok(s) => powers_from_samples(&m, &PowerConfig::default(), &s, Smoothing::WindowMean)
            .map(|_| String::from("accepted"))
            .unwrap_or_else(|e| e.to_string()),
    }
}

#[test]
fn replay_errors_name_the_line() {
    let good = SAMPLES.lines().next().unwrap();
    assert_eq!(
        err(&format!("{good}\n{{\"t\": 1, \"node\": 3,}}\n")),
        "s.jsonl:2:20: not a sample: trailing comma"
    );
    assert_eq!(
        err("{\"t\": 1, \"node\": 3}"),
        "s.jsonl:1:19: not a sample: missing field `cpu_idle`"
    );
    assert_eq!(
        err(&good.replace("\"t\": 10.0", "\"t\": 10.0, \"extra\": 1")),
        "s.jsonl:1:19: not a sample: unknown field `extra`, expected one of `t`, `node`, `cpu_idle`, `proc_util`, `proc_runnable`, `mem_total`, `mem_avail`, `ifaces`"
    );
    assert_eq!(
        err(&good.replace("[0.9, 0.1]", "[1.5, 0.1]")),
        "s.jsonl:1:1: cpu_idle[0] = 1.5 is not a fraction in [0, 1]"
    );
    assert_eq!(
        err(&good.replace("[0.9, 0.1]", "[]")),
        "s.jsonl:1:1: cpu_idle is empty"
    );
    assert_eq!(
        err(&format!("{good}\n{good}")),
        "s.jsonl:2:1: node 3: t = 10 does not increase (previous sample of this node has t = 10)"
    );
    let later = good.replace("\"t\": 10.0", "\"t\": 11.0");
    assert_eq!(
        err(&format!(
            "{good}\n{}",
            later.replace("\"rx_bytes\": 1000000", "\"rx_bytes\": 5")
        )),
        "s.jsonl:2:1: node 3: interface eth0: rx_bytes went backwards (1000000 -> 5)"
    );
    assert_eq!(
        err(&format!("{good}\n{}", later.replace("[0.9, 0.1]", "[0.9]"))),
        "s.jsonl:2:1: node 3: 1 cpu_idle values, the previous sample of this node had 2"
    );
    assert_eq!(
        err(&good.replace("\"node\": 3", "\"node\": 99")),
        "s.jsonl:1:1: sample for node 99, which m.xml does not have"
    );
    // Samples for node 3 only: node 4 has none.
    assert_eq!(
        err(good),
        "node 4 (\"sp\"): no observation (sample) for this computing node"
    );
}

#[test]
fn work_records() {
    let w = parse_work("{\"rank\": 0, \"work\": 10, \"cpu_seconds\": 1}\n\n{\"rank\": 0, \"work\": 5, \"cpu_seconds\": 1}\n", "w").unwrap();
    close(w[&0].work, 15.0);
    close(w[&0].cpu_seconds, 2.0);
    let e = parse_work("{\"rank\": 0, \"work\": -1, \"cpu_seconds\": 1}", "w.jsonl").unwrap_err();
    assert_eq!(
        e.to_string(),
        "w.jsonl:1:1: rank 0: work -1 and cpu_seconds 1 must be finite and >= 0"
    );
}

/// The body of the fuzz target `samples` (fuzz/fuzz_targets/samples.rs) on a few nasty files,
/// so that stable CI checks what the fuzzer checks: text parses or is an error at a line;
/// what parses writes back and parses again to as many samples.
#[test]
fn the_samples_fuzz_target_holds_on_nasty_files() {
    use drum_model::samples::write_jsonl;
    let good = SAMPLES.lines().next().unwrap();
    let nasty = [
        SAMPLES.to_string(),
        good.replace("10.0", "1e308"),
        good.replace("10.0", "-1e308"),
        good.replace("8.0e9", "1e400"),
        good.replace("1000000", "18446744073709551616"),
        good.replace("\"node\": 3", "\"node\": 18446744073709551615"),
        good.replace("100,", "1e308,"),
        format!("{good}\n{}", "[".repeat(10_000)),
        "\u{feff}".to_string() + good,
        String::new(),
        "\n\n\n".to_string(),
    ];
    let mut parsed = 0;
    for text in &nasty {
        let Ok(located) = parse_jsonl(text, "fuzz.jsonl") else {
            continue;
        };
        parsed += 1;
        let samples: Vec<_> = located.into_iter().map(|l| l.sample).collect();
        let mut out = Vec::new();
        write_jsonl(&samples, &mut out).unwrap();
        let again = parse_jsonl(std::str::from_utf8(&out).unwrap(), "again.jsonl")
            .unwrap_or_else(|e| panic!("{text:.80}: written samples do not parse: {e}"));
        assert_eq!(again.len(), samples.len(), "{text:.80}");
    }
    assert!(parsed >= 3, "only {parsed} parsed");
}
