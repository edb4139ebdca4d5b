//! `drum-repro --tiny`: every study end to end on one small configuration each, measured
//! runs through the real `fem-laplace` binary.

use std::process::Command;

fn repro() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_drum-repro"));
    c.env("DRUM_REPRO_FEM_LAPLACE", env!("CARGO_BIN_EXE_fem-laplace"))
        .env("RUST_BACKTRACE", "0");
    c
}

#[test]
fn the_tiny_reproduction_writes_every_study_measured_and_simulated() {
    let dir = std::env::temp_dir().join(format!("drum-repro-tiny-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = repro()
        .arg("--tiny")
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    for study in ["exp1", "exp2", "exp3", "exp4", "sensing", "gain_cost"] {
        let runs = v["studies"][study].as_array().unwrap();
        for mode in ["measured", "simulated"] {
            let of_mode: Vec<_> = runs.iter().filter(|r| r["mode"] == mode).collect();
            if study == "exp2" && mode == "measured" {
                continue; // the w_comm sweep is simulated at tiny scale
            }
            assert!(!of_mode.is_empty(), "{study}: no {mode} run");
            for r in of_mode {
                let t = r["time_s"].as_f64().unwrap();
                assert!(t.is_finite() && t > 0.0, "{study}: {r}");
                if r["balance"] != "uniform" && study != "gain_cost" {
                    assert!(r["rc"].as_f64().unwrap().is_finite(), "{study}: {r}");
                }
            }
        }
    }
    // The load of the sensing study comes and goes; gain_cost's modes differ in migrations.
    let gain = v["studies"]["gain_cost"].as_array().unwrap();
    let sim_never = gain
        .iter()
        .find(|r| r["mode"] == "simulated" && r["rebalance"] == "never")
        .unwrap();
    assert_eq!(sim_never["rebalances"], 1);
    assert_eq!(sim_never["migrated_elements"], 0);
    // The SAMR studies: Sinha & Parashar simulated and measured, Lan et al. measured; every
    // run with its work shares and a positive time.
    for (study, modes) in [
        ("sinha", &["measured", "simulated"][..]),
        ("lan", &["measured"]),
    ] {
        let runs = v["studies"][study].as_array().unwrap();
        for mode in modes {
            assert!(
                runs.iter().any(|r| r["mode"] == *mode),
                "{study}: no {mode} run"
            );
        }
        for r in runs {
            let shares: f64 = r["work_share"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .sum();
            assert!((shares - 1.0).abs() < 1e-6, "{study}: {r}");
            let t = r["time_s"]
                .as_f64()
                .unwrap_or(r["model_time"].as_f64().unwrap());
            assert!(t.is_finite() && t > 0.0, "{study}: {r}");
        }
    }
    let lan = v["studies"]["lan"].as_array().unwrap();
    assert!(
        lan.iter()
            .all(|r| r["link_bytes"].as_u64().is_some_and(|b| b > 0))
    );
    // Watts et al.: the four cases measured with one competitor; the recut and HBM.
    let watts = v["studies"]["watts"].as_array().unwrap();
    let cases: Vec<&str> = watts.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["none", "homogeneous", "static", "measured"]);
    for r in watts {
        assert_eq!(r["mode"], "measured");
        assert_eq!(r["competitors"], 1);
        let t = r["step_time_s"].as_f64().unwrap();
        assert!(t.is_finite() && t > 0.0, "{r}");
        let moved = r["moved_per_round"].as_array().unwrap();
        assert!(!moved.is_empty(), "{r}");
        if r["case"] == "none" {
            assert!(moved.iter().all(|m| m == 0), "{r}");
        }
    }
    let transfer = v["studies"]["transfer"].as_array().unwrap();
    let methods: Vec<&str> = transfer
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["recut", "hbm"]);
    for r in transfer {
        assert!(r["time_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["migrated_elements"].as_u64().is_some(), "{r}");
    }
    let val = v["validation"].as_array().unwrap();
    assert!(val.len() >= 6);
    // The calibration: every dedicated 2-rank run, and the loaded monitored run κ is fitted on.
    let calibration: Vec<&str> = val
        .iter()
        .filter(|x| x["calibration"] == true)
        .map(|x| x["config"].as_str().unwrap())
        .collect();
    assert!(!calibration.is_empty());
    for c in &calibration {
        assert!(
            c.contains("dedicated") || c.contains("0 processes") || c.contains("1 process"),
            "{c}"
        );
    }
    for x in val {
        let (m, s) = (
            x["measured_s"].as_f64().unwrap(),
            x["simulated_s"].as_f64().unwrap(),
        );
        assert!(m > 0.0 && s > 0.0);
        let err = x["rel_err"].as_f64().unwrap();
        assert!((err - (s - m) / m).abs() < 1e-9);
        // A miss names what the model lacks; a hit or a calibration run does not.
        let miss = x["calibration"] == false && err.abs() > 0.15;
        assert_eq!(x["mechanism"].is_string(), miss, "{x}");
        let (lo, hi) = (
            x["spread_s"][0].as_f64().unwrap(),
            x["spread_s"][1].as_f64().unwrap(),
        );
        assert!(lo <= m && m <= hi, "{x}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in [
        "## Validation",
        "## Experiment 1",
        "## Experiment 2",
        "## Experiment 3",
        "## Experiment 4",
        "## Sinha & Parashar",
        "## Lan, Taylor & Bryan",
        "## Sinha & Parashar on the SAMR kernel",
        "## Lan, Taylor & Bryan on the SAMR kernel",
        "## Watts, Rieffel & Taylor 1998: four ways",
        "## Watts, Rieffel & Taylor 1998: incremental transfer",
    ] {
        assert!(md.contains(section), "report.md lacks {section}");
    }
    // Every plot the report links exists and is an SVG.
    for link in md.split("](").skip(1) {
        let name = &link[..link.find(')').unwrap()];
        let svg = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_flags_and_a_missing_fem_laplace_are_clear_errors() {
    let out = repro().args(["--tiny", "--repeats", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repeats 0"));
    let dir = tempfile::tempdir().unwrap();
    let out = repro()
        .env("DRUM_REPRO_FEM_LAPLACE", "/nonexistent/fem-laplace")
        .args(["--tiny", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/fem-laplace"), "{err}");
    assert_eq!(entries(dir.path()), Vec::<String>::new(), "{err}");
}

/// The names in `dir`, sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_reproduction_leaves_nothing_new_in_out() {
    // The serial meshes are made and the host machine files written to runs/ before the
    // first measured run fails (fem-laplace is /bin/false): the earlier report survives
    // untouched, and neither runs/ nor the staging directory beside --out remains.
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("report.md"), "an earlier report\n").unwrap();
    let out = repro()
        .env("DRUM_REPRO_FEM_LAPLACE", "/bin/false")
        .args(["--tiny", "--target-vertices", "300", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("runs"),
        "the error names the failed run: {err}"
    );
    assert_eq!(entries(dir.path()), ["out"], "{err}");
    assert_eq!(entries(&out_dir), ["report.md"], "{err}");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("report.md")).unwrap(),
        "an earlier report\n"
    );
}
