//! Status codes: one per `hsfc::Error` variant (and this list knows every variant in
//! `hsfc/src/error.rs`), plus the boundary's own; names and messages for each.

use hsfc::Error as E;
use hsfc_capi::*;
use std::collections::BTreeSet;
use std::ffi::{CStr, c_int};

/// One value of every variant of `hsfc::Error`, by variant name.
fn every_variant() -> Vec<(&'static str, hsfc::Error)> {
    vec![
        ("Dimension", E::Dimension { dim: 4 }),
        ("NoParts", E::NoParts),
        ("TooManyParts", E::TooManyParts { k: 1 << 33 }),
        ("TooManyPoints", E::TooManyPoints { n: 1 << 33 }),
        (
            "InvalidTarget",
            E::InvalidTarget {
                index: 0,
                value: -1.0,
            },
        ),
        ("ZeroTargets", E::ZeroTargets { k: 2 }),
        (
            "LengthMismatch",
            E::LengthMismatch {
                what: "parts",
                expected: 2,
                got: 1,
            },
        ),
        (
            "InvalidCoordinate",
            E::InvalidCoordinate {
                index: 1,
                axis: 0,
                value: f64::NAN,
            },
        ),
        (
            "InvalidWeight",
            E::InvalidWeight {
                index: 1,
                value: -2.0,
            },
        ),
        ("InvalidTolerance", E::InvalidTolerance { value: 2.0 }),
        (
            "InvalidBox",
            E::InvalidBox {
                axis: 0,
                lo: 1.0,
                hi: 0.0,
            },
        ),
        (
            "IncompatiblePrevious",
            E::IncompatiblePrevious {
                prev_dim: 2,
                prev_k: 2,
                dim: 3,
                k: 2,
            },
        ),
        ("InvalidOnOtherRank", E::InvalidOnOtherRank { ranks: 1 }),
        ("Comm", E::Comm("peer died".into())),
        (
            "ThreadPool",
            E::ThreadPool {
                threads: 2,
                message: "no".into(),
            },
        ),
        (
            "WeightOverflow",
            E::WeightOverflow {
                total: f64::INFINITY,
            },
        ),
        ("MixedWeights", E::MixedWeights),
    ]
}

/// Variant names of `pub enum Error` in hsfc's source: lines indented by exactly one level
/// inside the enum that start with a capitalised identifier.
fn variants_in_hsfc_source() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../hsfc/src/error.rs");
    let src = std::fs::read_to_string(path).expect("hsfc/src/error.rs");
    let body = src
        .split("pub enum Error {")
        .nth(1)
        .expect("`pub enum Error {` in hsfc/src/error.rs");
    let body = &body[..body.find("\n}").expect("end of enum Error")];
    body.lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .map(str::trim)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|l| {
            l.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

fn cstr(p: *const std::ffi::c_char) -> &'static str {
    assert!(!p.is_null());
    // SAFETY: the library returns static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap()
}

#[test]
fn this_test_knows_every_variant_of_hsfc_error() {
    let known: Vec<&str> = every_variant().iter().map(|(n, _)| *n).collect();
    let source = variants_in_hsfc_source();
    assert_eq!(
        source, known,
        "hsfc::Error changed: give each new variant its own HSFC_ERR_ code (src/lib.rs \
         status_codes!, error_code, include/hsfc.h) and add it to every_variant()"
    );
}

#[test]
fn every_hsfc_error_variant_has_its_own_code() {
    let mut seen = BTreeSet::new();
    for (name, e) in every_variant() {
        let code = error_code(&e);
        assert!(
            code != HSFC_OK && code != HSFC_ERR_UNKNOWN,
            "{name} has no code of its own"
        );
        assert!(
            seen.insert(code),
            "{name} shares code {code} with another variant"
        );
        // The code's name is the variant's, in SCREAMING_SNAKE_CASE.
        let mut snake = String::new();
        for (i, ch) in name.chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                snake.push('_');
            }
            snake.push(ch.to_ascii_uppercase());
        }
        assert_eq!(cstr(hsfc_error_name(code)), format!("HSFC_ERR_{snake}"));
    }
    // The boundary's own codes are distinct from those.
    for code in [
        HSFC_ERR_UNKNOWN,
        HSFC_ERR_NULL_POINTER,
        HSFC_ERR_BUFFER_TOO_SMALL,
        HSFC_ERR_PANIC,
    ] {
        assert!(seen.insert(code), "code {code} reused");
    }
    assert_eq!(
        seen.len() + 1,
        STATUS_CODES.len(),
        "every code is accounted for"
    );
}

#[test]
fn every_code_has_a_distinct_name_and_message() {
    let mut names = BTreeSet::new();
    let mut messages = BTreeSet::new();
    let mut last = c_int::MIN;
    for s in STATUS_CODES {
        assert!(s.value > last, "STATUS_CODES in increasing order");
        last = s.value;
        assert!(s.value >= 0, "codes are non-negative");
        assert_eq!(cstr(hsfc_error_name(s.value)), s.name());
        assert_eq!(cstr(hsfc_error_message(s.value)), s.summary());
        assert!(s.name().starts_with("HSFC_"), "{}", s.name());
        assert!(!s.summary().is_empty());
        assert!(names.insert(s.name()) && messages.insert(s.summary()));
    }
    assert_eq!(STATUS_CODES[0].name(), "HSFC_OK");
    for bad in [-1, 18, 98, 103, c_int::MAX] {
        assert_eq!(cstr(hsfc_error_name(bad)), "HSFC_UNKNOWN_STATUS");
        assert_eq!(cstr(hsfc_error_message(bad)), "not a status code of hsfc");
    }
}
