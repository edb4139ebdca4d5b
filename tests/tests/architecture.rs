//! The dependency invariants of ARCHITECTURE.md, checked against `cargo metadata` so that a
//! change to any `Cargo.toml` that breaks them fails `cargo test`.

use drum_tests::project_root;
use std::collections::BTreeMap;
use std::process::Command;

/// `cargo metadata` of the workspace's packages.
fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(project_root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata JSON")
}

/// Package name → names of its dependencies (all kinds: normal, dev, build).
fn dependency_map() -> BTreeMap<String, Vec<String>> {
    metadata()["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| d["name"].as_str().expect("dependency name").to_string())
                .collect();
            (p["name"].as_str().expect("name").to_string(), deps)
        })
        .collect()
}

fn assert_none_of(map: &BTreeMap<String, Vec<String>>, package: &str, forbidden: &[&str]) {
    let deps = map
        .get(package)
        .unwrap_or_else(|| panic!("package `{package}` missing from the workspace"));
    for f in forbidden {
        assert!(
            !deps.iter().any(|d| d == f),
            "ARCHITECTURE.md: `{package}` must not depend on `{f}` (its dependencies: {deps:?})"
        );
    }
}

const WORKSPACE_LIBS: &[&str] = &[
    "drum-model",
    "hsfc",
    "comm",
    "hier-part",
    "fem-laplace",
    "cli-support",
];

/// The library crates that binaries build on.
const LIBRARIES: &[&str] = &[
    "drum-model",
    "hsfc",
    "comm",
    "hier-part",
    "fem-laplace",
    "diffusion",
];

#[test]
fn library_targets_depend_on_no_cli_crate() {
    // Binaries parse arguments (clap) and report errors (anyhow); libraries have their own
    // error enums. A library may name them only as an optional dependency that a feature for
    // one of its binaries turns on (comm's MPI suite driver), or for tests and benches.
    let meta = metadata();
    for p in meta["packages"].as_array().expect("packages") {
        let name = p["name"].as_str().expect("name");
        if !LIBRARIES.contains(&name) {
            continue;
        }
        for d in p["dependencies"].as_array().expect("dependencies") {
            let dep = d["name"].as_str().expect("dependency name");
            let normal = d["kind"].is_null();
            let optional = d["optional"].as_bool().unwrap_or(false);
            assert!(
                !(["clap", "anyhow", "cli-support"].contains(&dep) && normal && !optional),
                "ARCHITECTURE.md: the library `{name}` must not depend on `{dep}` (binaries go in \
                 their own package, over cli-support)"
            );
        }
    }
}

#[test]
fn one_protocol_agrees_on_errors() {
    // hsfc::dist::agree is the only function that makes a local failure collective; every
    // distributed step (hsfc, hier-part, the CLIs) goes through it.
    let def = ["fn", "agree"].join(" ");
    let mut found = Vec::new();
    visit_rs(&project_root(), &mut |path, text| {
        let rel = path.strip_prefix(project_root()).unwrap();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with(&format!("pub {def}<"))
                || l.starts_with(&format!("{def}<"))
                || l.contains(&format!(" {def}<"))
            {
                found.push(format!("{}:{}", rel.display(), i + 1));
            }
        }
    });
    assert_eq!(
        found.len(),
        1,
        "one `agree`, in hsfc/src/dist.rs; found {found:?}"
    );
    assert!(found[0].starts_with("hsfc/src/dist.rs:"), "{found:?}");
}

#[test]
fn library_functions_take_few_arguments() {
    // Functions a reader can hold: no `too_many_arguments` allowed in library code (a long
    // list becomes a value: `Points`, a workspace, a segment of a recursion).
    let lint = ["too_many", "arguments"].join("_");
    let mut offenders = Vec::new();
    visit_rs(&project_root(), &mut |path, text| {
        let rel = path.strip_prefix(project_root()).unwrap();
        let in_library = LIBRARIES
            .iter()
            .any(|l| rel.starts_with(format!("{l}/src")) || rel.starts_with("cli-support/src"));
        let test_code = rel.file_name().is_some_and(|f| f == "tests.rs");
        if !in_library || test_code {
            return;
        }
        for (i, line) in text.lines().enumerate() {
            if line.contains(&lint) {
                offenders.push(format!("{}:{}", rel.display(), i + 1));
            }
        }
    });
    assert!(offenders.is_empty(), "{lint} allowed at {offenders:?}");
}

#[test]
fn hsfc_knows_no_machines_mpi_or_meshes() {
    // And neither does diffusion (it sees points, weights, an adjacency and capacities).
    let map = dependency_map();
    for package in ["hsfc", "diffusion"] {
        assert_none_of(
            &map,
            package,
            &[
                "drum-model",
                "comm",
                "hier-part",
                "fem-laplace",
                "mpi",
                "quick-xml",
            ],
        );
    }
}

#[test]
fn hsfc_capi_wraps_hsfc_alone() {
    // The C ABI is a thin layer over hsfc: no other dependency of any kind (its tests call
    // the system C compiler directly rather than through a build-dependency).
    let map = dependency_map();
    let deps = &map["hsfc-capi"];
    assert!(
        deps.iter().all(|d| d == "hsfc") && !deps.is_empty(),
        "ARCHITECTURE.md: `hsfc-capi` depends on `hsfc` alone, not {deps:?}"
    );
}

#[test]
fn drum_model_knows_no_partitioner_and_no_mesh() {
    let map = dependency_map();
    assert_none_of(
        &map,
        "drum-model",
        &["hsfc", "hier-part", "fem-laplace", "comm", "mpi"],
    );
}

#[test]
fn only_comm_names_the_mpi_crate() {
    let map = dependency_map();
    for (package, deps) in &map {
        if package != "comm" {
            assert!(
                !deps.iter().any(|d| d == "mpi"),
                "ARCHITECTURE.md: only `comm` may depend on the `mpi` crate, but `{package}` does"
            );
        }
    }
    // Nor may any source outside comm/ reach the crate by path.
    // Patterns built at run time so that this file does not match itself.
    let krate = "mpi";
    let patterns = [
        format!("use {krate}::"),
        format!("extern crate {krate}"),
        format!(" ::{krate}::"),
    ];
    let mut offenders = Vec::new();
    visit_rs(&project_root(), &mut |path, text| {
        let rel = path.strip_prefix(project_root()).unwrap();
        if rel.starts_with("comm") || rel.starts_with("target") {
            return;
        }
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with(&patterns[0])
                || l.starts_with(&patterns[1])
                || l.contains(&patterns[2])
            {
                offenders.push(format!("{}:{}", rel.display(), i + 1));
            }
        }
    });
    assert!(
        offenders.is_empty(),
        "`mpi` named outside comm/: {offenders:?}"
    );
}

#[test]
fn xtask_uses_no_workspace_crate_as_a_library() {
    let map = dependency_map();
    assert_none_of(&map, "xtask", WORKSPACE_LIBS);
}

#[test]
fn no_dependency_cycles_between_workspace_crates() {
    // hsfc is at the bottom; comm sits on hsfc (its Reduce trait); hier-part on top of both;
    // cli-support serves binaries only.
    let map = dependency_map();
    assert_none_of(
        &map,
        "comm",
        &["drum-model", "hier-part", "fem-laplace", "cli-support"],
    );
    assert_none_of(&map, "hier-part", &["fem-laplace"]);
    assert_none_of(&map, "cli-support", &["hier-part", "fem-laplace"]);
}

fn visit_rs(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path, &str)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            visit_rs(&path, f);
        } else if name.ends_with(".rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            f(&path, &text);
        }
    }
}
