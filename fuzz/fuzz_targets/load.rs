//! Any bytes: the loader returns a machine or a located error, never panics; whatever loads
//! round-trips through the writer and gets part sizes that sum to 1 (or a clear error).
#![no_main]

use drum_model::{Machine, PowerConfig, static_powers};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Machine::from_bytes(data, "fuzz.xml") {
        let again = Machine::parse_str(&m.to_xml(), "again.xml").expect("written XML reloads");
        assert!(m.same_model(&again));
        if let Ok(p) = static_powers(&m, &PowerConfig::default()) {
            let sum: f64 = p.part_sizes().iter().sum();
            assert!((sum - 1.0).abs() < 1e-9);
        }
    }
});
