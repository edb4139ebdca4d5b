//! Any bytes as a ZPT1 point file: the reader returns the points or an error naming the
//! file and the byte, never panics or allocates beyond the file; whatever loads writes back
//! to the same bytes and partitions (or gives a typed error, e.g. a NaN coordinate).
#![no_main]

use hsfc::Hsfc;
use libfuzzer_sys::fuzz_target;
use part_api::{Partitioner, Points, Serial};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("hsfc-fuzz-points-{}.zpt", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let read = hsfc::io::read_points(&path);
    let _ = std::fs::remove_file(&path);
    let Ok(set) = read else { return };
    assert_eq!(set.coords.len(), set.len() * set.dim);
    let again = dir.join(format!("hsfc-fuzz-points-{}-again.zpt", std::process::id()));
    hsfc::io::write_points(&again, set.dim, &set.coords, set.weights.as_deref()).unwrap();
    assert_eq!(std::fs::read(&again).unwrap(), data);
    let _ = std::fs::remove_file(&again);
    let mut parts = vec![0u32; set.len()];
    let points = Points::new(&set.coords, set.dim, set.weights.as_deref());
    if let Ok(p) = Hsfc::default().partition(&Serial, points, &[1.0, 2.0, 3.0], &mut parts) {
        assert!(parts.iter().all(|&k| k < 3));
        assert!(p.part_weights().iter().all(|w| w.is_finite()));
    }
});
