//! The shared file formats: round trips, and an error naming the file and place for each
//! kind of bad file.

use hsfc::io::{
    PointHeader, read_parts, read_point_header, read_points, read_points_range, read_sizes,
    write_parts, write_points, write_sizes,
};
use part_api::block_range;
use std::path::PathBuf;

/// This test's folder (each test runs on a thread of its own), removed when the test ends.
fn tmp(name: &str) -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::Builder::new()
            .prefix("hsfc-io-test-")
            .tempdir()
            .expect("a test folder");
    }
    DIR.with(|d| d.path().join(name))
}

fn header(dim: u32, has_w: u32, reserved: u32, n: u64) -> Vec<u8> {
    let mut h = b"ZPT1".to_vec();
    for v in [dim, has_w, reserved] {
        h.extend(v.to_le_bytes());
    }
    h.extend(n.to_le_bytes());
    h
}

fn err_of(bytes: &[u8], name: &str) -> String {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    read_points(&p)
        .unwrap_err()
        .to_string()
        .replace(&p.display().to_string(), "FILE")
}

#[test]
fn points_round_trip() {
    let p = tmp("rt.zpt");
    let coords = [0.0, 1.0, 2.5, -3.0, 1e300, -0.0];
    write_points(&p, 3, &coords, Some(&[1.0, 2.0])).unwrap();
    let s = read_points(&p).unwrap();
    assert_eq!((s.dim, s.len()), (3, 2));
    assert_eq!(s.coords, coords);
    assert_eq!(s.weights.as_deref(), Some(&[1.0, 2.0][..]));
    write_points(&p, 2, &coords, None).unwrap();
    let s = read_points(&p).unwrap();
    assert_eq!((s.dim, s.len(), s.weights), (2, 3, None));
    // Byte layout as in DESIGN.md §3.
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[..24], &header(2, 0, 0, 3)[..]);
    assert_eq!(bytes.len(), 24 + 6 * 8);
}

#[test]
fn point_file_errors_name_file_and_offset() {
    assert_eq!(
        err_of(b"ZPT2xxxxxxxxxxxxxxxxxxxxxxx", "magic"),
        "FILE: byte 0: not a ZPT1 point file (magic [90, 80, 84, 50])"
    );
    assert_eq!(
        err_of(b"ZPT1\x02\x00", "short"),
        "FILE: byte 6: header truncated: 6 of 24 bytes"
    );
    assert_eq!(
        err_of(&header(4, 0, 0, 0), "dim"),
        "FILE: byte 4: dim is 4, expected 1, 2 or 3"
    );
    assert_eq!(
        err_of(&header(2, 2, 0, 0), "hasw"),
        "FILE: byte 8: has_weights is 2, expected 0 or 1"
    );
    assert_eq!(
        err_of(&header(2, 0, 7, 0), "res"),
        "FILE: byte 12: reserved field is 7, expected 0"
    );
    let mut b = header(2, 1, 0, 2);
    b.extend([0u8; 40]);
    assert_eq!(
        err_of(&b, "trunc"),
        "FILE: byte 64: truncated: 2 points of dim 2 with weights need 72 bytes, file has 64"
    );
    let mut b = header(2, 0, 0, 1);
    b.extend([0u8; 20]);
    assert_eq!(
        err_of(&b, "trail"),
        "FILE: byte 40: 4 unexpected bytes after the data"
    );
    assert_eq!(
        err_of(&header(2, 0, 0, u64::MAX / 2), "huge"),
        "FILE: byte 16: 9223372036854775807 points: over the limit of 134217728 points of a \
         point file"
    );
    let missing = tmp("does-not-exist.zpt");
    let e = read_points(&missing).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: ", missing.display())) && e.contains("No such file"),
        "{e}"
    );
}

#[test]
fn slices_are_read_by_seeking() {
    let p = tmp("slices.zpt");
    let n = 11usize;
    for (dim, weighted) in [(2usize, true), (3, false), (1, true)] {
        let coords: Vec<f64> = (0..n * dim).map(|i| i as f64 * 0.5 - 3.0).collect();
        let weights: Vec<f64> = (0..n).map(|i| 100.0 + i as f64).collect();
        write_points(&p, dim, &coords, weighted.then_some(&weights[..])).unwrap();
        assert_eq!(
            read_point_header(&p).unwrap(),
            PointHeader {
                dim,
                has_weights: weighted,
                n: n as u64
            }
        );
        let all = read_points(&p).unwrap();
        for ranks in 1..=4 {
            let mut joined = Vec::new();
            let mut joined_w = Vec::new();
            for r in 0..ranks {
                let range = block_range(n as u64, r, ranks);
                let (a, b) = (range.start as usize, range.end as usize);
                let s = read_points_range(&p, range).unwrap();
                assert_eq!(s.dim, dim);
                assert_eq!(s.coords, &coords[a * dim..b * dim], "rank {r} of {ranks}");
                match &s.weights {
                    Some(w) => assert_eq!(w, &weights[a..b]),
                    None => assert!(!weighted),
                }
                joined.extend(s.coords);
                joined_w.extend(s.weights.unwrap_or_default());
            }
            assert_eq!(joined, all.coords);
            assert_eq!(joined_w, all.weights.clone().unwrap_or_default());
        }
        let empty = read_points_range(&p, 4..4).unwrap();
        assert!(empty.is_empty() && empty.weights.is_some() == weighted);
    }
}

#[test]
fn slice_errors_name_file_and_place() {
    let p = tmp("slice-err.zpt");
    write_points(&p, 2, &[0.0; 10], Some(&[1.0; 5])).unwrap();
    let shown = p.display().to_string();
    assert_eq!(
        read_points_range(&p, 3..6).unwrap_err().to_string(),
        format!("{shown}: points 3..6 requested, but the file holds 5 points")
    );
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 4..2;
    assert_eq!(
        read_points_range(&p, backwards).unwrap_err().to_string(),
        format!("{shown}: points 4..2 requested, but the file holds 5 points")
    );
    // The header is checked against the length as by read_points.
    let mut b = header(3, 0, 0, 2);
    b.extend([0u8; 40]);
    std::fs::write(&p, &b).unwrap();
    let want = format!("{shown}: byte 64: truncated: 2 points of dim 3 need 72 bytes, file has 64");
    assert_eq!(read_points_range(&p, 0..1).unwrap_err().to_string(), want);
    assert_eq!(read_point_header(&p).unwrap_err().to_string(), want);
    let missing = tmp("missing-slice.zpt");
    let e = read_points_range(&missing, 0..1).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: ", missing.display())) && e.contains("No such file"),
        "{e}"
    );
}

#[test]
fn sizes_and_parts() {
    let p = tmp("sizes.txt");
    write_sizes(&p, &[16.0, 19.0, 0.5]).unwrap();
    assert_eq!(read_sizes(&p).unwrap(), [16.0, 19.0, 0.5]);
    std::fs::write(&p, "# fast, slow\n1.5\n\n1\n").unwrap();
    assert_eq!(read_sizes(&p).unwrap(), [1.5, 1.0]);
    let shown = p.display().to_string();
    std::fs::write(&p, "1\nfast\n").unwrap();
    assert_eq!(
        read_sizes(&p).unwrap_err().to_string(),
        format!("{shown}:2: `fast` is not a number")
    );
    std::fs::write(&p, "1\n-2\n").unwrap();
    assert_eq!(
        read_sizes(&p).unwrap_err().to_string(),
        format!("{shown}:2: size -2 must be finite and >= 0")
    );
    std::fs::write(&p, "inf\n").unwrap();
    assert_eq!(
        read_sizes(&p).unwrap_err().to_string(),
        format!("{shown}:1: size inf must be finite and >= 0")
    );
    std::fs::write(&p, "# nothing\n").unwrap();
    assert_eq!(
        read_sizes(&p).unwrap_err().to_string(),
        format!("{shown}:1: no sizes in file")
    );

    let q = tmp("parts.u32");
    write_parts(&q, &[0, 7, u32::MAX]).unwrap();
    assert_eq!(read_parts(&q).unwrap(), [0, 7, u32::MAX]);
    std::fs::write(&q, [1u8, 0, 0, 0, 9]).unwrap();
    assert_eq!(
        read_parts(&q).unwrap_err().to_string(),
        format!("{}: byte 4: length 5 is not a multiple of 4", q.display())
    );
}

#[test]
fn hostile_files_are_refused_before_they_fill_memory() {
    // An endless sizes file: refused after the limit.
    let e = read_sizes("/dev/zero").unwrap_err().to_string();
    assert_eq!(
        e,
        "/dev/zero: larger than the limit of 16777216 bytes for a sizes file"
    );
    // More sizes than parts allowed: refused at the first one over.
    let p = tmp("many-sizes.txt");
    std::fs::write(&p, "1\n".repeat(hsfc::io::MAX_PARTS + 1)).unwrap();
    assert_eq!(
        read_sizes(&p).unwrap_err().to_string(),
        format!(
            "{}:{}: more than the limit of 1048576 parts",
            p.display(),
            hsfc::io::MAX_PARTS + 1
        )
    );
    std::fs::write(&p, b"1\n\xff\n").unwrap();
    assert_eq!(
        read_sizes(&p).unwrap_err().to_string(),
        format!("{}: byte 2: not UTF-8 text", p.display())
    );
    std::fs::remove_file(&p).unwrap();
    // A point file whose header claims more points than the limit: refused from the header.
    let mut h = header(2, 0, 0, hsfc::io::MAX_POINTS + 1);
    h.extend([0u8; 16]);
    assert_eq!(
        err_of(&h, "huge.zpt"),
        "FILE: byte 16: 134217729 points: over the limit of 134217728 points of a point file"
    );
    std::fs::remove_file(tmp("huge.zpt")).unwrap();
}

/// The bodies of the fuzz targets `points` and `sizes` (fuzz/fuzz_targets) on the points'
/// seeds and a few nasty files, so that stable CI checks what the fuzzer checks: a file
/// reads or is an error; what reads writes back to the same bytes and partitions with
/// finite weights and targets, every point in a part.
#[test]
fn the_fuzz_targets_hold_on_nasty_files() {
    use hsfc::Hsfc;
    use part_api::{Partitioner, Points, Serial};
    let mut huge_n = header(2, 0, 0, u64::MAX);
    huge_n.extend([0; 16]);
    let points: [&[u8]; 9] = [
        include_bytes!("../../../fuzz/seeds/points/a2"),
        include_bytes!("../../../fuzz/seeds/points/w2"),
        include_bytes!("../../../fuzz/seeds/points/o3"),
        include_bytes!("../../../fuzz/seeds/points/s1"),
        include_bytes!("../../../fuzz/seeds/points/n2"),
        include_bytes!("../../../fuzz/seeds/points/z2"),
        &huge_n,
        &header(0, 0, 0, 1),
        b"ZPT1",
    ];
    let mut read = 0;
    for (k, bytes) in points.into_iter().enumerate() {
        let p = tmp(&format!("nasty-{k}.zpt"));
        std::fs::write(&p, bytes).unwrap();
        let Ok(set) = read_points(&p) else { continue };
        read += 1;
        let again = tmp(&format!("nasty-{k}-again.zpt"));
        write_points(&again, set.dim, &set.coords, set.weights.as_deref()).unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), bytes, "file {k}");
        let mut parts = vec![0u32; set.len()];
        let pts = Points::new(&set.coords, set.dim, set.weights.as_deref());
        if let Ok(r) = Hsfc::default().partition(&Serial, pts, &[1.0, 2.0, 3.0], &mut parts) {
            assert!(parts.iter().all(|&q| q < 3), "file {k}");
            assert!(r.part_weights().iter().all(|w| w.is_finite()), "file {k}");
        }
    }
    assert!(read >= 5, "only {read} of the seeds read");
    let sizes = [
        "1e308\n1e308\n",
        "1e-320\n1\n",
        "0\n0\n",
        "-1\n1\n",
        "nan\n",
        "inf\n1\n",
        "# only a comment\n\n",
        "1\n\u{0}\n",
        "",
    ];
    let coords: Vec<f64> = (0..64).map(|i| f64::from(i * 37 % 64) / 64.0).collect();
    for (k, text) in sizes.into_iter().enumerate() {
        let p = tmp(&format!("nasty-{k}.sizes"));
        std::fs::write(&p, text).unwrap();
        let Ok(s) = read_sizes(&p) else { continue };
        assert!(
            !s.is_empty() && s.iter().all(|x| x.is_finite() && *x >= 0.0),
            "{text:?}"
        );
        let mut parts = vec![0u32; 32];
        let pts = Points::new(&coords, 2, None);
        if let Ok(r) = Hsfc::default().partition(&Serial, pts, &s, &mut parts) {
            assert!(parts.iter().all(|&q| (q as usize) < s.len()), "{text:?}");
            assert!(r.targets().iter().all(|t| t.is_finite()), "{text:?}");
            assert_eq!(r.part_counts().iter().sum::<u64>(), 32, "{text:?}");
        }
    }
}
