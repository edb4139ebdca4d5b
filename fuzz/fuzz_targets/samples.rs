//! Any bytes as a samples file (JSON Lines of monitor samples): the parser returns samples
//! or an error at FILE:LINE, never panics; whatever parses writes back and parses again to
//! the same samples.
#![no_main]

use drum_model::samples::{parse_jsonl, write_jsonl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(located) = parse_jsonl(text, "fuzz.jsonl") else { return };
    let samples: Vec<_> = located.into_iter().map(|l| l.sample).collect();
    let mut out = Vec::new();
    write_jsonl(&samples, &mut out).unwrap();
    let again = parse_jsonl(std::str::from_utf8(&out).unwrap(), "again.jsonl")
        .expect("written samples parse again");
    assert_eq!(again.len(), samples.len());
});
