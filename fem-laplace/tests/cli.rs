//! The `fem-laplace` binary: JSON Lines, table, files, and clear errors.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fem-laplace"))
}

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
