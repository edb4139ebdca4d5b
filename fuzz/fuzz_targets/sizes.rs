//! Any bytes as a sizes file: the reader returns at most `hsfc::io::MAX_PARTS` finite,
//! non-negative sizes or an error naming the file and the line, never panics; whatever loads
//! partitions a few points with every target finite (or gives a typed error: all sizes 0).
#![no_main]

use hsfc::Hsfc;
use libfuzzer_sys::fuzz_target;
use part_api::{Partitioner, Points, Serial};

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("hsfc-fuzz-sizes-{}.txt", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let read = hsfc::io::read_sizes(&path);
    let _ = std::fs::remove_file(&path);
    let Ok(sizes) = read else { return };
    assert!(!sizes.is_empty() && sizes.len() <= hsfc::io::MAX_PARTS);
    assert!(sizes.iter().all(|s| s.is_finite() && *s >= 0.0));
    let coords: Vec<f64> = (0..64).map(|i| f64::from(i * 37 % 64) / 64.0).collect();
    let mut parts = vec![0u32; 32];
    let points = Points::new(&coords, 2, None);
    if let Ok(p) = Hsfc::default().partition(&Serial, points, &sizes, &mut parts) {
        assert!(parts.iter().all(|&k| (k as usize) < sizes.len()));
        assert!(p.targets().iter().all(|t| t.is_finite()));
        assert_eq!(p.part_counts().iter().sum::<u64>(), 32);
    }
});
