//! `include/hsfc.h` is written by hand; this checks it against the Rust side: every
//! `#[unsafe(no_mangle)]` function of `src/lib.rs` is declared with the C types of its Rust
//! signature (and nothing else is declared), every status code is defined with its value,
//! `hsfc_migration_t` has the fields of the `#[repr(C)]` struct, `HSFC_VERSION` is the
//! library's version, and the shared library exports exactly the header's functions.

mod common;

use hsfc_capi::{STATUS_CODES, hsfc_version};
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::process::Command;

fn read(rel: &str) -> String {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The header without comments.
fn header() -> String {
    let src = read("include/hsfc.h");
    let mut out = String::new();
    let mut rest = src.as_str();
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let j = rest[i..].find("*/").expect("unterminated comment");
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whitespace collapsed, none before or after `*`.
fn norm(t: &str) -> String {
    t.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" *", "*")
        .replace("* ", "*")
}

/// C spelling of a Rust FFI type.
fn c_type(rust: &str) -> String {
    let rust = rust.trim();
    if let Some(inner) = rust.strip_prefix("*const ") {
        assert!(!inner.starts_with('*'), "pointer to const pointer: {rust}");
        return format!("const {}*", c_type(inner));
    }
    if let Some(inner) = rust.strip_prefix("*mut ") {
        return format!("{}*", c_type(inner));
    }
    match rust {
        "f64" => "double",
        "usize" => "size_t",
        "c_int" => "int",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "c_char" => "char",
        "HsfcPartition" => "hsfc_partition_t",
        "HsfcMigration" => "hsfc_migration_t",
        other => panic!("no C spelling for Rust type `{other}`: extend c_type()"),
    }
    .to_string()
}

/// Name → (return type, parameter types), in C spelling.
type Signatures = BTreeMap<String, (String, Vec<String>)>;

/// The exported functions of `src/lib.rs` (rustfmt'd source: `#[unsafe(no_mangle)]`, then
/// `pub [unsafe] extern "C" fn name(params)[ -> ret] {`).
fn rust_exports() -> Signatures {
    let src = read("src/lib.rs");
    let mut out = Signatures::new();
    for chunk in src.split("#[unsafe(no_mangle)]").skip(1) {
        let sig = &chunk[..chunk.find('{').expect("fn body")];
        let fn_at = sig
            .find("extern \"C\" fn ")
            .expect("extern \"C\" fn after no_mangle");
        let sig = &sig[fn_at + "extern \"C\" fn ".len()..];
        let open = sig.find('(').unwrap();
        let close = sig.rfind(')').unwrap();
        let name = sig[..open].trim().to_string();
        let params = sig[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| c_type(p.split_once(':').expect("name: type").1))
            .collect();
        let ret = match sig[close + 1..].trim().strip_prefix("->") {
            Some(t) => c_type(t),
            None => "void".to_string(),
        };
        assert!(
            out.insert(name.clone(), (ret, params)).is_none(),
            "{name} twice"
        );
    }
    assert!(out.len() >= 10, "parsed only {} exports", out.len());
    out
}

/// The prototypes of `hsfc.h`.
fn header_prototypes() -> Signatures {
    let text: String = header()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Signatures::new();
    for stmt in text.split(';') {
        let stmt = stmt.trim();
        if !stmt.ends_with(')') || stmt.contains("typedef") {
            continue;
        }
        let open = stmt.find('(').unwrap();
        let head = stmt[..open].trim_end();
        let name_at = head
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let name = head[name_at..].to_string();
        let ret = norm(&head[..name_at]);
        let params = stmt[open + 1..stmt.len() - 1].trim();
        let params = if params == "void" {
            Vec::new()
        } else {
            params
                .split(',')
                .map(|p| {
                    let p = p.trim();
                    let cut = p
                        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .expect("parameter with a type and a name");
                    norm(&p[..=cut])
                })
                .collect()
        };
        assert!(
            out.insert(name.clone(), (ret, params)).is_none(),
            "{name} twice"
        );
    }
    out
}

#[test]
fn header_declares_exactly_the_exported_functions_with_their_types() {
    let rust = rust_exports();
    let c = header_prototypes();
    for (name, sig) in &rust {
        assert_eq!(c.get(name), Some(sig), "hsfc.h declaration of {name}");
    }
    for name in c.keys() {
        assert!(
            rust.contains_key(name),
            "hsfc.h declares {name}, which lib.rs does not export"
        );
    }
}

#[test]
fn header_defines_every_status_code_with_its_value() {
    let defines: Vec<(String, i64)> = header()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define").then_some(())?;
            let name = w.next()?;
            let value = w.next()?.parse().ok()?;
            Some((name.to_string(), value))
        })
        .collect();
    let rust: Vec<(String, i64)> = STATUS_CODES
        .iter()
        .map(|s| (s.name().to_string(), i64::from(s.value)))
        .collect();
    assert_eq!(
        defines, rust,
        "status codes of hsfc.h (in order) vs STATUS_CODES"
    );
}

#[test]
fn migration_struct_has_the_fields_of_the_repr_c_struct() {
    let h = header();
    let body = h
        .split("typedef struct hsfc_migration {")
        .nth(1)
        .expect("hsfc_migration_t in hsfc.h");
    let (body, tail) = body.split_once('}').unwrap();
    assert!(tail.trim_start().starts_with("hsfc_migration_t;"));
    let c: Vec<String> = body
        .split(';')
        .map(norm)
        .filter(|f| !f.is_empty())
        .collect();
    let src = read("src/lib.rs");
    let at = src
        .find("pub struct HsfcMigration {")
        .expect("HsfcMigration");
    let attributes: Vec<&str> = src[..at]
        .lines()
        .rev()
        .take_while(|l| l.starts_with("#["))
        .collect();
    assert!(
        attributes.contains(&"#[repr(C)]"),
        "HsfcMigration must be #[repr(C)]: {attributes:?}"
    );
    let body = &src[at..];
    let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
    let rust: Vec<String> = body
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("pub "))
        .map(|l| {
            let (name, ty) = l.trim_end_matches(',').split_once(':').unwrap();
            format!("{} {}", c_type(ty), name.trim())
        })
        .collect();
    assert_eq!(c, rust);
}

#[test]
fn header_version_is_the_library_version() {
    let line = header()
        .lines()
        .find(|l| l.starts_with("#define HSFC_VERSION "))
        .expect("HSFC_VERSION in hsfc.h")
        .to_string();
    let quoted = line.trim_start_matches("#define HSFC_VERSION ").trim();
    // SAFETY: a static NUL-terminated string.
    let lib = unsafe { CStr::from_ptr(hsfc_version()) }.to_str().unwrap();
    assert_eq!(quoted, format!("\"{lib}\""));
    assert_eq!(lib, env!("CARGO_PKG_VERSION"));
}

#[test]
fn shared_library_exports_exactly_the_header_functions() {
    let so = common::artifact("libhsfc_capi.so");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("run nm (binutils)");
    assert!(
        out.status.success(),
        "nm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Functions are `T` symbols: `ADDRESS T name`.
    let exported: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_, kind, name) = (w.next()?, w.next()?, w.next()?);
            (kind == "T").then(|| name.to_string())
        })
        .collect();
    let declared: Vec<String> = header_prototypes().into_keys().collect();
    let mut exported_sorted = exported.clone();
    exported_sorted.sort();
    assert_eq!(
        exported_sorted,
        declared,
        "functions exported by {}",
        so.display()
    );
}
