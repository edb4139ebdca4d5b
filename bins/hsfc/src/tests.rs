//! The distributed code path of `hsfc partition` on thread ranks (no MPI needed): the parts
//! file rank 0 writes equals the serial one, and errors on one rank end every rank.

use crate::{Cli, Cmd, PartitionArgs, partition};
use clap::Parser;
use cli_support::collective;
use comm::{ThreadComm, ThreadOptions};
use hsfc::generate::{Distribution, WeightKind};
use part_api::Serial;
use std::path::PathBuf;

/// This test's folder (each test runs on a thread of its own), removed when the test ends.
fn tmp(name: &str) -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::Builder::new()
            .prefix("hsfc-cli-unit-")
            .tempdir()
            .expect("a test folder");
    }
    DIR.with(|d| d.path().join(name))
}

fn args(words: &[&str]) -> PartitionArgs {
    let argv = ["hsfc", "partition"].iter().chain(words);
    match Cli::try_parse_from(argv).unwrap().cmd {
        Cmd::Partition(a) => a,
        Cmd::Gen(_) | Cmd::Bandwidth { .. } => unreachable!("a partition command"),
    }
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `hsfc partition words…` on `n` thread ranks.
fn on_ranks(n: usize, words: &[&str]) -> Vec<anyhow::Result<Option<String>>> {
    let a = args(words);
    ThreadComm::run(n, &ThreadOptions::default(), |c| partition(&c, &a)).unwrap()
}

#[test]
fn ranks_write_the_serial_parts_file() {
    let sizes = tmp("sizes.txt");
    std::fs::write(&sizes, "16\n19\n0\n31\n34\n").unwrap();
    let cases = [
        (
            "graded2w",
            5000,
            2,
            Distribution::Graded,
            WeightKind::Random,
        ),
        ("uniform3", 3000, 3, Distribution::Uniform, WeightKind::Unit),
        // Fewer points than ranks: some ranks read nothing.
        ("tiny", 3, 2, Distribution::Uniform, WeightKind::Random),
    ];
    for (name, n, dim, dist, weights) in cases {
        let points = tmp(&format!("{name}.zpt"));
        let (coords, w) = hsfc::generate::points(n, dim, dist, weights, 11);
        hsfc::io::write_points(&points, dim, &coords, w.as_deref()).unwrap();
        let serial_out = tmp(&format!("{name}-serial.u32"));
        let serial = partition(
            &Serial,
            &args(&[
                path(&points),
                "--sizes",
                path(&sizes),
                "--json",
                "--out",
                path(&serial_out),
            ]),
        )
        .unwrap()
        .expect("the serial run reports");
        let serial: serde_json::Value = serde_json::from_str(&serial).unwrap();
        assert!(serial.get("ranks").is_none(), "{serial}");
        let want = std::fs::read(&serial_out).unwrap();
        assert_eq!(want.len(), 4 * n);
        for ranks in 1..=4 {
            let out = tmp(&format!("{name}-{ranks}.u32"));
            let results = on_ranks(
                ranks,
                &[
                    path(&points),
                    "--sizes",
                    path(&sizes),
                    "--json",
                    "--repeat",
                    "2",
                    "--out",
                    path(&out),
                ],
            );
            let mut results = results.into_iter();
            let report = results.next().unwrap().unwrap().expect("rank 0 reports");
            for (r, other) in results.enumerate() {
                assert!(other.as_ref().unwrap().is_none(), "rank {} printed", r + 1);
            }
            assert_eq!(
                std::fs::read(&out).unwrap(),
                want,
                "{name} on {ranks} ranks"
            );
            let j: serde_json::Value = serde_json::from_str(&report).unwrap();
            assert_eq!(j["ranks"], ranks, "{j}");
            assert_eq!(j["n"], n);
            assert_eq!(j["times_s"].as_array().unwrap().len(), 2);
            for field in ["weights", "targets", "counts", "max_rel_dev"] {
                assert_eq!(j[field], serial[field], "{name} on {ranks} ranks: {field}");
            }
        }
    }
}

#[test]
fn the_table_names_the_rank_count() {
    let points = tmp("table.zpt");
    let (coords, _) = hsfc::generate::points(500, 2, Distribution::Uniform, WeightKind::Unit, 3);
    hsfc::io::write_points(&points, 2, &coords, None).unwrap();
    let results = on_ranks(3, &[path(&points), "--parts", "4"]);
    let text = results[0].as_ref().unwrap().as_ref().unwrap();
    assert!(
        text.contains("500 points, dim 2, 4 parts, 3 rank(s) × 1 thread(s)")
            && text.contains("(max over ranks of the median of 1)"),
        "{text}"
    );
}

#[test]
fn bad_data_on_one_rank_fails_every_rank_naming_the_slice() {
    let points = tmp("nan.zpt");
    let (mut coords, _) =
        hsfc::generate::points(100, 2, Distribution::Uniform, WeightKind::Unit, 5);
    coords[2 * 99 + 1] = f64::NAN; // point 99: on rank 2 of 3 (points 66..100), local index 33
    hsfc::io::write_points(&points, 2, &coords, None).unwrap();
    let results = on_ranks(3, &[path(&points), "--parts", "2"]);
    let errors: Vec<String> = results
        .into_iter()
        .map(|r| format!("{:#}", r.unwrap_err()))
        .collect();
    assert!(
        errors[2].contains("rank 2 of 3 holds points 66..100")
            && errors[2].contains("point 33: coordinate 1 is NaN"),
        "{}",
        errors[2]
    );
    for e in &errors[..2] {
        assert!(e.contains("1 other rank(s) had invalid input"), "{e}");
    }

    let missing = tmp("missing.zpt");
    let results = on_ranks(2, &[path(&missing), "--parts", "2"]);
    for r in results {
        let e = format!("{:#}", r.unwrap_err());
        // The OS error once, not again as the cause it also is.
        assert!(
            e.starts_with(&format!("reading the points: {}: ", path(&missing)))
                && e.matches("No such file").count() == 1,
            "{e}"
        );
    }
}

#[test]
fn a_failure_to_write_on_rank_0_fails_every_rank() {
    let points = tmp("w.zpt");
    let (coords, _) = hsfc::generate::points(50, 2, Distribution::Uniform, WeightKind::Unit, 1);
    hsfc::io::write_points(&points, 2, &coords, None).unwrap();
    // `/dev/full` opens (the check before the run passes) but refuses the bytes at the end.
    let results = on_ranks(3, &[path(&points), "--parts", "2", "--out", "/dev/full"]);
    let errors: Vec<String> = results
        .into_iter()
        .map(|r| format!("{:#}", r.unwrap_err()))
        .collect();
    assert!(
        errors[0].starts_with("writing the parts: /dev/full: No space left"),
        "{}",
        errors[0]
    );
    for e in &errors[1..] {
        assert_eq!(e, "1 other rank(s) failed; see their messages");
    }
}

#[test]
fn a_bad_out_path_fails_every_rank_before_the_run() {
    let points = tmp("w2.zpt");
    let (coords, _) = hsfc::generate::points(50, 2, Distribution::Uniform, WeightKind::Unit, 1);
    hsfc::io::write_points(&points, 2, &coords, None).unwrap();
    let out = tmp("no-such-dir").join("parts.u32");
    let results = on_ranks(3, &[path(&points), "--parts", "2", "--out", path(&out)]);
    let errors: Vec<String> = results
        .into_iter()
        .map(|r| format!("{:#}", r.unwrap_err()))
        .collect();
    assert!(
        errors[0].starts_with(&format!(
            "--out {}: cannot write {}: ",
            path(&out),
            path(&out)
        )),
        "{}",
        errors[0]
    );
    for e in &errors[1..] {
        assert!(e.contains("1 other rank(s)"), "{e}");
    }
    assert!(!out.parent().unwrap().exists());
}

#[test]
fn a_local_failure_is_agreed_on() {
    let got = ThreadComm::run(3, &ThreadOptions::default(), |c| {
        let local = if comm::Comm::rank(&c) == 1 {
            Err(anyhow::anyhow!("rank 1 cannot read"))
        } else {
            Ok(7)
        };
        collective(&c, local).map_err(|e| e.to_string())
    })
    .unwrap();
    assert_eq!(
        got,
        [
            Err("1 other rank(s) failed; see their messages".to_string()),
            Err("rank 1 cannot read".to_string()),
            Err("1 other rank(s) failed; see their messages".to_string()),
        ]
    );
    let got = ThreadComm::run(2, &ThreadOptions::default(), |c| {
        collective(&c, Ok::<_, anyhow::Error>(comm::Comm::rank(&c))).unwrap()
    })
    .unwrap();
    assert_eq!(got, [0, 1]);
}
