//! The `fem-laplace` binary: JSON Lines, table, files, and clear errors.

mod common;
use common::{bin, json_lines};

#[test]
fn json_lines_have_the_issue_fields() {
    let out = bin()
        .args(["--target-vertices", "3000", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    // 5 · 2^10 = 5120 ≥ 3000: steps 0..=10.
    assert_eq!(lines.len(), 11);
    for (k, v) in lines.iter().enumerate() {
        assert_eq!(v["step"], k);
        for f in [
            "vertices",
            "elements",
            "error_energy",
            "estimate",
            "cg_iterations",
        ] {
            assert!(v[f].is_number(), "step {k}: field {f} missing in {v}");
        }
        for f in ["refine", "assemble", "solve", "estimate"] {
            assert!(v["times"][f].is_number(), "step {k}: times.{f} missing");
        }
    }
    assert!(lines.last().unwrap()["vertices"].as_u64().unwrap() >= 3000);
}

#[test]
fn table_vtk_and_svg() {
    let dir = std::env::temp_dir().join(format!("fem-laplace-cli-{}", std::process::id()));
    let svg = dir.join("mesh.svg");
    let out = bin()
        .args([
            "--target-vertices",
            "400",
            "--problem",
            "smooth",
            "--marking",
            "doerfler:0.6",
        ])
        .arg("--vtk")
        .arg(dir.join("vtk"))
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("err_energy") && text.contains("doerfler:0.6"),
        "{text}"
    );
    assert!(text.contains("method time"));
    let pvd = std::fs::read_to_string(dir.join("vtk/steps.pvd")).unwrap();
    assert!(pvd.contains("step_00.vtu"));
    let vtu = std::fs::read(dir.join("vtk/step_00.vtu")).unwrap();
    let head = String::from_utf8_lossy(&vtu[..vtu.len().min(2000)]);
    assert!(
        head.contains("Name=\"level\"") && head.contains("Name=\"error\""),
        "{head}"
    );
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_flags_are_named() {
    for (args, needle) in [
        (vec!["--marking", "half"], "invalid marking `half`"),
        (vec!["--marking", "doerfler:1.5"], "θ must lie in (0, 1]"),
        (vec!["--problem", "lshape"], "unknown problem `lshape`"),
        (vec!["--target-vertices", "2"], "target_vertices = 2"),
    ] {
        let out = bin().args(&args).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = bin()
        .args(["--target-vertices", "50", "--svg", "/nonexistent-dir/m.svg"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent-dir/m.svg"));
}

/// The run over ranks prints the same per-step mesh hashes and error bits as the serial run,
/// with the per-rank and migration fields; files get the rank.
#[test]
fn ranks_json_equals_serial_and_carries_rank_fields() {
    let lines = json_lines;
    let serial = lines(&["--target-vertices", "3000", "--json"]);
    let dist = lines(&["--target-vertices", "3000", "--json", "--ranks", "3"]);
    assert_eq!(serial.len(), dist.len());
    for (s, d) in serial.iter().zip(&dist) {
        assert_eq!(s["mesh_hash"], d["mesh_hash"], "step {}", s["step"]);
        assert!(s["mesh_hash"].as_str().unwrap().len() == 16);
        assert_eq!(
            s["error_energy"].as_f64().unwrap().to_bits(),
            d["error_energy"].as_f64().unwrap().to_bits()
        );
        assert_eq!(s["cg_iterations"], d["cg_iterations"]);
        let ranks = d["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 3);
        for (r, x) in ranks.iter().enumerate() {
            assert_eq!(x["rank"], r);
            for f in [
                "owned",
                "ghosts",
                "owned_vertices",
                "work",
                "wait_s",
                "collectives",
                "messages",
                "bytes",
            ] {
                assert!(x[f].is_number(), "ranks[{r}].{f} in {x}");
            }
            // Every call is counted in a phase, and the phases add up to the totals.
            let phases = x["phases"].as_object().unwrap();
            for f in ["collectives", "messages", "bytes"] {
                let sum: u64 = phases.values().map(|p| p[f].as_u64().unwrap()).sum();
                assert_eq!(x[f].as_u64().unwrap(), sum, "ranks[{r}].{f} in {x}");
            }
            // The phases' time in the calls is the rank's (in microseconds, each phase rounded
            // down from a running total: 1 µs each at most; the report
            // phase's calls come after `wait_s` is taken).
            let wait_us: u64 = (phases.iter())
                .filter(|(name, _)| name.as_str() != "report")
                .map(|(_, p)| p["wait_us"].as_u64().unwrap())
                .sum();
            let wait_s = x["wait_s"].as_f64().unwrap();
            assert!(wait_us as f64 * 1e-6 <= wait_s + 1e-5, "ranks[{r}] in {x}");
            assert!(x["collectives"].as_u64().unwrap() > 0, "{x}");
            assert!(phases["solve"]["collectives"].as_u64().unwrap() > 0, "{x}");
            for f in [
                "refine",
                "partition",
                "migrate",
                "assemble",
                "solve",
                "estimate",
            ] {
                assert!(x["times"][f].is_number(), "ranks[{r}].times.{f}");
            }
        }
        let m = &d["migration"];
        assert_eq!(
            (m["count_ok"].as_bool(), m["checksum_ok"].as_bool()),
            (Some(true), Some(true))
        );
        assert!(m["elements"].is_number() && m["bytes"].is_number());
    }
    // Some step moved elements between ranks.
    assert!(
        dist.iter()
            .any(|d| d["migration"]["elements"].as_u64().unwrap() > 0)
    );

    let dir = std::env::temp_dir().join(format!("fem-laplace-ranks-{}", std::process::id()));
    let out = bin()
        .args(["--target-vertices", "2000", "--ranks", "2"])
        .arg("--vtk")
        .arg(dir.join("vtk"))
        .arg("--svg")
        .arg(dir.join("part.svg"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("2 ranks") && text.contains("moved"), "{text}");
    let pvtu = std::fs::read_to_string(dir.join("vtk/step_03.pvtu")).unwrap();
    assert!(pvtu.contains("step_03_r0000.vtu") && pvtu.contains("step_03_r0001.vtu"));
    assert!(pvtu.contains("Name=\"rank\""));
    let piece = std::fs::read(dir.join("vtk/step_03_r0001.vtu")).unwrap();
    let head = String::from_utf8_lossy(&piece[..piece.len().min(2000)]);
    assert!(head.contains("Name=\"rank\""), "{head}");
    assert!(
        std::fs::read_to_string(dir.join("vtk/steps.pvd"))
            .unwrap()
            .contains("step_00.pvtu")
    );
    let svg = std::fs::read_to_string(dir.join("part.svg")).unwrap();
    assert!(svg.contains(">rank<") && svg.contains("the partition"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_rank_flags_and_a_failing_rank_are_named() {
    let run = |args: &[&str]| {
        let out = bin().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--ranks", "0"]);
    assert!(e.contains("--ranks 0"), "{e}");
    let machine = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../machines/local-2core-hetero.xml"
    );
    let e = run(&[
        "--ranks",
        "3",
        "--machine",
        machine,
        "--target-vertices",
        "100",
    ]);
    assert!(
        e.contains("--ranks has 3 ranks") && e.contains("describes 2"),
        "{e}"
    );
    let e = run(&[
        "--ranks",
        "3",
        "--target-vertices",
        "3000",
        "--fail-at",
        "1:4",
    ]);
    assert!(
        e.contains("rank 1 failed") && e.contains("fails at step 4"),
        "{e}"
    );
    let e = run(&["--backend", "mpi", "--target-vertices", "100"]);
    assert!(e.contains("without MPI") || e.contains("MPI"), "{e}");
}

/// With a machine description the run is hierarchical and still equals the serial one.
#[test]
fn machine_partition_keeps_the_serial_answer() {
    let machine = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../machines/hier-lbmethods.xml"
    );
    let out = bin()
        .args(["--target-vertices", "2000", "--json", "--machine", machine])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let serial = bin()
        .args(["--target-vertices", "2000", "--json"])
        .output()
        .unwrap();
    let s_text = String::from_utf8(serial.stdout).unwrap();
    let s_last: serde_json::Value = serde_json::from_str(s_text.lines().last().unwrap()).unwrap();
    assert_eq!(last["mesh_hash"], s_last["mesh_hash"]);
    assert_eq!(last["ranks"].as_array().unwrap().len(), 11);
    // Part sizes follow the machine: the ranks do not all hold the same share.
    let owned: Vec<u64> = last["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["owned"].as_u64().unwrap())
        .collect();
    assert!(owned.iter().max() > owned.iter().min(), "{owned:?}");
}

/// Every output path is tried before the run: a bad one fails before the first step is
/// printed, naming the flag and the path; an error while writing names the file.
#[test]
fn bad_output_paths_fail_before_the_run_naming_flag_and_path() {
    for flag in ["--summary-json", "--plot", "--svg", "--jsonl"] {
        let path = format!("/nonexistent-dir-{}/out", std::process::id());
        let out = bin()
            .args(["--ranks", "2", "--target-vertices", "3000", flag, &path])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {path} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("{flag} {path}: ")), "{flag}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{flag}: the run started: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = bin()
        .args([
            "--ranks",
            "2",
            "--target-vertices",
            "300",
            "--jsonl",
            "/dev/full",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/full") && err.contains("No space"),
        "{err}"
    );
    // The report itself on a full stdout: the error says so.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = bin()
        .args(["--target-vertices", "300"])
        .stdout(full)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("writing to stdout: No space"), "{err}");
}

/// A user's bad input is an error message, not a crash: no backtrace, whatever
/// `RUST_BACKTRACE` says; a panic still prints one.
#[test]
fn user_errors_print_no_backtrace_and_panics_do() {
    for args in [
        &["--marking", "half"][..],
        &["--ranks", "0"],
        &["--target-vertices", "50", "--svg", "/nonexistent-dir/m.svg"],
    ] {
        let out = bin()
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("Error: "), "{args:?}: {err}");
        assert!(!err.to_lowercase().contains("backtrace"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // A panic (a bug, here the fault injection) still prints its backtrace when asked.
    let out = bin()
        .env("RUST_BACKTRACE", "1")
        .args([
            "--ranks",
            "2",
            "--target-vertices",
            "50",
            "--fail-at",
            "1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("panicked") && err.contains("stack backtrace"),
        "{err}"
    );
}

/// `steps.pvd` is rewritten whole after every step: a run that stops part-way leaves a
/// collection whose every file exists, no temporary file, and `--jsonl` a line per step.
#[test]
fn a_run_stopped_part_way_leaves_a_whole_collection() {
    let dir = std::env::temp_dir().join(format!("fem-laplace-pvd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = bin()
        .args([
            "--ranks",
            "2",
            "--target-vertices",
            "3000",
            "--fail-at",
            "1:3",
            "--vtk",
        ])
        .arg(&dir)
        .arg("--jsonl")
        .arg(dir.join("steps.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    // The JSON lines keep up with the steps: one whole line per finished step.
    let jsonl = std::fs::read_to_string(dir.join("steps.jsonl")).unwrap();
    let steps: Vec<u64> = jsonl
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(steps, [0, 1, 2], "{jsonl}");
    let pvd = std::fs::read_to_string(dir.join("steps.pvd")).expect("steps.pvd written");
    assert!(pvd.ends_with("</VTKFile>\n"), "{pvd}");
    let files: Vec<&str> = pvd
        .lines()
        .filter_map(|l| l.split("file=\"").nth(1))
        .map(|f| f.trim_end_matches("\"/>"))
        .collect();
    assert_eq!(
        files,
        ["step_00.pvtu", "step_01.pvtu", "step_02.pvtu"],
        "{pvd}"
    );
    for f in files {
        assert!(dir.join(f).exists(), "{f}");
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains(".tmp."), "{name} left behind");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sizes over their limits are refused before any rank starts or any load is forked, naming
/// the flag (or attribute) and the limit; a run that would not fit in memory is refused with
/// the estimate.
#[test]
fn hostile_sizes_are_refused_before_the_run() {
    let run = |args: &[&str]| {
        let out = bin().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stdout.is_empty(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--ranks", "1000", "--target-vertices", "20000"]);
    assert!(
        e.contains(
            "--ranks 1000: 1000 ranks is over the limit of 256 ranks (raise it with --max-ranks)"
        ),
        "{e}"
    );
    let e = run(&["--target-vertices", "1400000000"]);
    assert!(
        e.contains("1400000000 is over the limit of 20000000 vertices"),
        "{e}"
    );
    let machine = common::machine("local-2core-hetero.xml");
    let e = run(&["--machine", &machine, "--load", "1:99999999999"]);
    assert!(e.contains("over the limit of 64 processes per rank"), "{e}");
    let e = run(&["--machine", &machine, "--load", "1:40", "--load", "1:40@3"]);
    assert!(
        e.contains("80 competing processes on rank 1 are over the limit of 64"),
        "{e}"
    );
    // A machine of 10,000 ranks: over the rank limit, and raised, over the host's memory.
    let dir = std::env::temp_dir().join(format!("fem-laplace-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("10000-ranks.xml");
    std::fs::write(
        &big,
        "<machinemodel><node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"/>\
         <node type=\"MULTIPLE_COMPUTING\" nodenum=\"1\" parent=\"0\" numprocs=\"10000\"/>\
         </machinemodel>",
    )
    .unwrap();
    let big = big.to_str().unwrap();
    let e = run(&["--machine", big]);
    assert!(
        e.contains("10000 ranks is over the limit of 256 ranks"),
        "{e}"
    );
    let e = run(&["--machine", big, "--max-ranks", "10000"]);
    assert!(
        e.contains("(10000 rank(s)): the run would need about") && e.contains("GiB available"),
        "{e}"
    );
    let hot = dir.join("hot.xml");
    std::fs::write(
        &hot,
        "<machinemodel><node type=\"NETWORK\" nodenum=\"0\" parent=\"-1\"/>\
         <node type=\"SINGLE_COMPUTING\" nodenum=\"1\" parent=\"0\" cpus=\"0\" load=\"100000\"/>\
         </machinemodel>",
    )
    .unwrap();
    let e = run(&["--machine", hot.to_str().unwrap(), "--machine-load"]);
    assert!(
        e.contains("`load`") && e.contains("at most 64 competing processes"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
