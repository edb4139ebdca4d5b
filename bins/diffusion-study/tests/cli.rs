//! The study end to end: tables, plot, and the claims they carry.

use std::process::Command;

fn study(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_diffusion-study"))
        .args(args)
        .output()
        .expect("diffusion-study runs")
}

/// The rows of the section that starts at the line containing `header`, up to the next blank
/// line, split into whitespace-separated fields.
fn section<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
    let start = text
        .find(header)
        .unwrap_or_else(|| panic!("{header} in\n{text}"));
    text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('('))
        .collect()
}

/// The row of `method` in `rows`, as the fields after its name.
fn row<'a>(rows: &[&'a str], method: &str) -> Vec<&'a str> {
    let line = rows
        .iter()
        .find(|l| l.trim_start().starts_with(method))
        .unwrap_or_else(|| panic!("{method} in {rows:#?}"));
    line.trim_start()[method.len()..]
        .split_whitespace()
        .collect()
}

#[test]
fn tables_and_plot() {
    let dir = std::env::temp_dir().join(format!("diffusion-study-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("convergence.svg");
    let out = study(&["--ranks", "36", "--svg", svg.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for graph in ["ring 36:", "grid 6x6:", "random 36 (degree 4):"] {
        let rows = section(&text, graph);
        // HBM balances in one pass of ⌈log2 P⌉ or a few more levels; GDE and implicit
        // diffusion with a large time step reach eff_min; every method plans a transfer.
        for method in ["HBM", "GDE λ=1 ", "implicit α=10 CG"] {
            let f = row(&rows, method.trim_end());
            assert_eq!(f[2], "yes", "{graph} {method}: {f:?}");
        }
        let hbm = row(&rows, "HBM");
        let levels: usize = hbm[0].parse().unwrap();
        assert!((6..=12).contains(&levels), "{graph}: {levels} HBM levels");
        // The paper's small time step takes far more steps than α = 10.
        let small: usize = row(&rows, "implicit α=0.01 Jacobi")[0].parse().unwrap();
        let large: usize = row(&rows, "implicit α=10 CG")[0].parse().unwrap();
        assert!(small > 10 * large, "{graph}: {small} vs {large}");
    }

    // (b) a small change: the incremental methods move fewer objects than a recut with
    // KEEP_CUTS, and end within the tolerance.
    let rows = section(&text, "(b) from an HSFC partition");
    let moved = |f: &[&str], at: usize| f[at].parse::<usize>().unwrap();
    let keep = row(&rows, "HSFC KEEP_CUTS repartition");
    for method in ["HBM", "GDE λ=1 ", "implicit α=10 CG"] {
        let f = row(&rows, method.trim_end());
        let imbalance: f64 = f[1].parse().unwrap();
        assert!(imbalance <= 1.05, "{method}: {f:?}");
        assert!(
            moved(&f, 2) < moved(&keep, 1),
            "{method}: {f:?} vs {keep:?}"
        );
    }

    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.trim_end().ends_with("</svg>"));
    assert_eq!(
        plot.matches("<polyline").count(),
        3 * 6,
        "3 graphs × 6 methods"
    );
    assert!(text.contains(&format!("plot: {}", svg.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_are_errors() {
    let out = study(&["--ranks", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ranks"));
    let out = study(&["--eff-min", "1.5"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--eff-min"));
}

/// Counts over their documented limits are refused (not clamped) before the study, naming
/// the flag and the limit.
#[test]
fn counts_over_their_limits_are_refused() {
    for (args, limit) in [
        (["--ranks", "4097"], "4097 is over the limit of 4096 ranks"),
        (["--ranks", "1e12"], "1e12 is over the limit of 4096 ranks"),
        (["--ranks", "1"], "1 is below the minimum of 2 ranks"),
        (
            ["--max-iterations", "1000001"],
            "1000001 is over the limit of 1000000 iterations",
        ),
    ] {
        let out = study(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: the study ran");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(args[0]) && e.contains(limit), "{args:?}: {e}");
    }
}

/// A bad `--svg` fails before the study, naming the flag and the path, without a backtrace.
#[test]
fn a_bad_svg_path_fails_before_the_study() {
    let bad =
        std::env::temp_dir().join(format!("diffusion-study-none-{}/c.svg", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_diffusion-study"))
        .env("RUST_BACKTRACE", "1")
        .args(["--ranks", "36", "--svg", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "the study ran");
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains(&format!("--svg {}: ", bad.display())), "{e}");
    assert!(!e.to_lowercase().contains("backtrace"), "{e}");
}
