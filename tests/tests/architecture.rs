//! The invariants of ARCHITECTURE.md, checked against `cargo metadata` and the sources so that
//! a change that breaks them fails `cargo test`: the layers and their arrows, the folder
//! picture, what each crate must not know, one protocol, one wire format, no global thread
//! pool, and functions a reader can hold.

use drum_tests::project_root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every package of the workspace with its layer, bottom up. A package's (normal)
/// dependencies on workspace packages must all sit on lower layers: no arrow runs back up
/// and there is no circle. A new package must be placed here (the test says so).
const LAYERS: &[(&str, u32)] = &[
    // The interface every partitioner and communicator shares.
    ("part-api", 0),
    // The machine model; the partitioners (diffusion: incremental); the communicators.
    ("drum-model", 1),
    ("hsfc", 1),
    ("diffusion", 1),
    ("comm", 1),
    // The walk along the machine tree; the C ABI of hsfc; what the commands share.
    ("hier-part", 2),
    ("hsfc-capi", 2),
    ("cli-support", 2),
    // The runtime: DRUM in the loop.
    ("drum-loop", 3),
    // The applications; Zoltan's C API over the partitioners and the DRUM loop.
    ("fem-laplace", 4),
    ("zoltan-drum", 4),
    ("samr-kernel", 4),
    // The reproduction of the papers' experiments.
    ("repro", 5),
    // The commands.
    ("drum-cli", 6),
    ("hsfc-cli", 6),
    ("hier-part-cli", 6),
    ("fem-laplace-cli", 6),
    ("samr-cli", 6),
    ("diffusion-study", 6),
    // Apart: xtask runs binaries, the tests check everything.
    ("xtask", 7),
    ("drum-tests", 7),
];

/// A package of the workspace as `cargo metadata` describes it.
struct Package {
    name: String,
    /// The folder of its manifest, relative to the root.
    dir: PathBuf,
    /// (dependency, kind: "normal" | "dev" | "build", optional)
    deps: Vec<(String, String, bool)>,
    /// Target kinds (`lib`, `bin`, `cdylib`, ...).
    kinds: Vec<String>,
}

fn packages() -> Vec<Package> {
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
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let root = project_root();
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
            let dir = manifest
                .parent()
                .expect("a manifest has a folder")
                .strip_prefix(&root)
                .expect("inside the workspace")
                .to_path_buf();
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| {
                    (
                        d["name"].as_str().expect("name").to_string(),
                        d["kind"].as_str().unwrap_or("normal").to_string(),
                        d["optional"].as_bool().unwrap_or(false),
                    )
                })
                .collect();
            let kinds = p["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .flat_map(|t| t["kind"].as_array().expect("kind").iter())
                .map(|k| k.as_str().expect("kind").to_string())
                .collect();
            Package {
                name: p["name"].as_str().expect("name").to_string(),
                dir,
                deps,
                kinds,
            }
        })
        .collect()
}

fn layer(name: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|&(_, l)| l)
}

#[test]
fn arrows_point_down_the_layers() {
    let pkgs = packages();
    let names: Vec<&str> = pkgs.iter().map(|p| p.name.as_str()).collect();
    for p in &pkgs {
        let here = layer(&p.name).unwrap_or_else(|| {
            panic!(
                "package `{}` has no layer in tests/tests/architecture.rs (LAYERS): place it",
                p.name
            )
        });
        for (dep, kind, _) in &p.deps {
            if !names.contains(&dep.as_str()) {
                continue;
            }
            let there = layer(dep).expect("every workspace package has a layer");
            if kind == "normal" {
                assert!(
                    there < here,
                    "`{}` (layer {here}) depends on `{dep}` (layer {there}): arrows must point \
                     down the layers",
                    p.name
                );
            } else {
                // Tests and benches may use a sibling (hsfc's tests run on comm's thread
                // ranks), never anything above.
                assert!(
                    there <= here,
                    "`{}` (layer {here}) has a {kind}-dependency on `{dep}` (layer {there})",
                    p.name
                );
            }
        }
    }
    for (name, _) in LAYERS {
        assert!(
            names.contains(name),
            "LAYERS names `{name}`, which is not a package"
        );
    }
}

#[test]
fn the_folder_picture_is_the_crate_graph() {
    // Libraries in crates/, commands in bins/, siblings; nothing nested in another package.
    for p in packages() {
        let dir = p.dir.to_string_lossy().replace('\\', "/");
        let lib = p.kinds.iter().any(|k| k == "lib" || k == "rlib");
        match p.name.as_str() {
            "xtask" => assert_eq!(dir, "xtask"),
            "drum-tests" => assert_eq!(dir, "tests"),
            _ if dir.starts_with("crates/") => assert!(
                lib && dir.matches('/').count() == 1,
                "`{}` in {dir}: crates/ holds library packages, one folder each",
                p.name
            ),
            _ if dir.starts_with("bins/") => assert!(
                !lib && dir.matches('/').count() == 1,
                "`{}` in {dir}: bins/ holds command packages (no library), one folder each",
                p.name
            ),
            _ => panic!(
                "package `{}` in {dir}: neither in crates/ nor in bins/",
                p.name
            ),
        }
    }
}

/// The library packages (crates/), but the commands' own support crate.
fn libraries(pkgs: &[Package]) -> Vec<&Package> {
    pkgs.iter()
        .filter(|p| p.dir.starts_with("crates") && p.name != "cli-support")
        .collect()
}

#[test]
fn libraries_carry_no_argument_parser() {
    // Binaries parse arguments (clap) and report errors (anyhow); libraries have their own
    // error enums. A library may name them only as an optional dependency that a feature for
    // one of its binaries turns on (comm's MPI suite driver), or for tests and benches.
    let pkgs = packages();
    for p in libraries(&pkgs) {
        for (dep, kind, optional) in &p.deps {
            assert!(
                !(["clap", "anyhow", "cli-support"].contains(&dep.as_str())
                    && kind == "normal"
                    && !optional),
                "ARCHITECTURE.md: the library `{}` must not depend on `{dep}` (commands go in \
                 bins/, over cli-support)",
                p.name
            );
        }
    }
}

fn normal_deps<'a>(pkgs: &'a [Package], name: &str) -> Vec<&'a str> {
    let p = pkgs
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("package `{name}` missing from the workspace"));
    p.deps
        .iter()
        .filter(|(_, k, _)| k == "normal")
        .map(|(d, _, _)| d.as_str())
        .collect()
}

fn assert_none_of(pkgs: &[Package], package: &str, forbidden: &[&str]) {
    let deps = normal_deps(pkgs, package);
    for f in forbidden {
        assert!(
            !deps.contains(f),
            "ARCHITECTURE.md: `{package}` must not depend on `{f}` (its dependencies: {deps:?})"
        );
    }
}

#[test]
fn partitioners_know_no_machines_mpi_or_meshes() {
    let pkgs = packages();
    let forbidden = [
        "drum-model",
        "comm",
        "hier-part",
        "drum-loop",
        "fem-laplace",
        "mpi",
        "quick-xml",
    ];
    assert_none_of(&pkgs, "hsfc", &forbidden);
    assert_none_of(&pkgs, "part-api", &forbidden);
    // diffusion sees points, weights, an adjacency and capacities.
    assert_none_of(&pkgs, "diffusion", &forbidden);
    // hier-part walks a machine tree: it knows machines, but no mesh and no runtime.
    assert_none_of(&pkgs, "hier-part", &["fem-laplace", "drum-loop", "mpi"]);
}

#[test]
fn hsfc_capi_wraps_hsfc_alone() {
    // The C ABI is a thin layer over hsfc (and its interface crate): no other dependency of
    // any kind (its tests call the system C compiler directly).
    let pkgs = packages();
    let p = pkgs
        .iter()
        .find(|p| p.name == "hsfc-capi")
        .expect("hsfc-capi");
    assert!(
        !p.deps.is_empty()
            && p.deps
                .iter()
                .all(|(d, _, _)| d == "hsfc" || d == "part-api"),
        "ARCHITECTURE.md: `hsfc-capi` depends on `hsfc` and `part-api` alone, not {:?}",
        p.deps
    );
}

#[test]
fn drum_model_knows_no_partitioner_and_no_mesh() {
    let pkgs = packages();
    assert_none_of(
        &pkgs,
        "drum-model",
        &[
            "hsfc",
            "hier-part",
            "drum-loop",
            "fem-laplace",
            "comm",
            "mpi",
        ],
    );
}

#[test]
fn only_comm_names_the_mpi_crate() {
    let pkgs = packages();
    for p in &pkgs {
        if p.name != "comm" {
            assert!(
                !p.deps.iter().any(|(d, _, _)| d == "mpi"),
                "ARCHITECTURE.md: only `comm` may depend on the `mpi` crate, but `{}` does",
                p.name
            );
        }
    }
    // Nor may any source outside crates/comm reach the crate by path. Patterns built at run
    // time so that this file does not match itself.
    let krate = "mpi";
    let patterns = [
        format!("use {krate}::"),
        format!("extern crate {krate}"),
        format!(" ::{krate}::"),
    ];
    let mut offenders = Vec::new();
    visit_rs(&project_root(), &mut |rel, text| {
        if rel.starts_with("crates/comm") {
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
        "`mpi` named outside crates/comm: {offenders:?}"
    );
}

#[test]
fn xtask_uses_no_workspace_crate_as_a_library() {
    let pkgs = packages();
    let deps = normal_deps(&pkgs, "xtask");
    for p in &pkgs {
        assert!(
            !deps.contains(&p.name.as_str()),
            "xtask depends on `{}`: it builds and runs binaries instead",
            p.name
        );
    }
}

#[test]
fn one_protocol_agrees_on_errors() {
    // part_api::agree is the only function that makes a local failure collective (and
    // part_api::agreed its one adapter); every distributed step goes through them.
    let mut found = Vec::new();
    for def in [["fn", "agree"].join(" "), ["fn", "agreed"].join(" ")] {
        visit_rs(&project_root(), &mut |rel, text| {
            for (i, line) in text.lines().enumerate() {
                let l = line.trim_start();
                let generic = format!("{def}<");
                if (l.starts_with(&format!("pub {generic}")) || l.starts_with(&generic))
                    && !l.contains("&self")
                {
                    found.push(format!("{}:{}", rel.display(), i + 1));
                }
            }
        });
    }
    assert!(
        found.len() == 2
            && found
                .iter()
                .all(|f| f.starts_with("crates/part-api/src/dist.rs:")),
        "one `agree` and one `agreed`, in crates/part-api/src/dist.rs; found {found:?}"
    );
}

#[test]
fn one_wire_format() {
    // Every byte that crosses ranks goes through comm::wire. Byte conversions elsewhere in
    // library code are file formats, each named here with its reason.
    let allowed = [
        ("crates/comm/src/wire.rs", "the wire format itself"),
        (
            "crates/hsfc/src/io.rs",
            "the ZPT1 point file and the parts file (DESIGN §3)",
        ),
        (
            "crates/fem-laplace/src/output.rs",
            "VTK's appended binary data",
        ),
        (
            "crates/fem-laplace/src/dist/hash.rs",
            "the bytes a mesh hash digests",
        ),
        (
            "crates/zoltan-drum/src/partdist.rs",
            "the bytes a global id's hash digests (which process of a spread part)",
        ),
    ];
    let pats: Vec<String> = ["to", "from"]
        .iter()
        .flat_map(|d| ["le", "be", "ne"].map(|e| format!("{d}_{e}_bytes")))
        .collect();
    let mut offenders = Vec::new();
    visit_rs(&project_root(), &mut |rel, text| {
        let r = rel.to_string_lossy().replace('\\', "/");
        if !(r.starts_with("crates/") && r.contains("/src/"))
            || allowed.iter().any(|(a, _)| r == *a)
        {
            return;
        }
        for (i, line) in library_code(text).lines().enumerate() {
            if pats.iter().any(|p| line.contains(p.as_str())) {
                offenders.push(format!("{r}:{}", i + 1));
            }
        }
    });
    assert!(
        offenders.is_empty(),
        "byte conversions outside comm::wire (a message codec of its own?): {offenders:?}"
    );
}

#[test]
fn no_global_thread_pool() {
    // The caller controls parallelism (part_api::Par): no library may use rayon's global
    // pool. Each crate that depends on rayon has a test that runs its parallel paths and then
    // checks that the global pool was never built (tests/no_global_pool.rs).
    for p in packages() {
        let rayon = p.deps.iter().any(|(d, k, _)| d == "rayon" && k == "normal");
        if rayon {
            let test = project_root().join(&p.dir).join("tests/no_global_pool.rs");
            assert!(
                test.exists(),
                "`{}` depends on rayon but has no {}",
                p.name,
                test.display()
            );
        }
    }
}

#[test]
fn library_code_holds_functions_a_reader_can_hold() {
    // None over 120 lines (cut along the phases), no too_many_arguments (a long list becomes
    // a value), and #[expect(…, reason = …)] rather than #[allow] so a stale exception shows.
    let lint = ["too_many", "arguments"].join("_");
    let allow = ["#[", "allow("].concat();
    let inner_allow = ["#![", "allow("].concat();
    let mut offenders = Vec::new();
    visit_rs(&project_root(), &mut |rel, text| {
        let r = rel.to_string_lossy().replace('\\', "/");
        let test_code = r.ends_with("/tests.rs") || r.contains("/tests/");
        if !(r.starts_with("crates/") && r.contains("/src/")) || test_code {
            return;
        }
        let code = library_code(text);
        for (i, line) in code.lines().enumerate() {
            if line.contains(&lint) || line.contains(&allow) || line.contains(&inner_allow) {
                offenders.push(format!("{r}:{}: {}", i + 1, line.trim()));
            }
        }
        for (line, name, len) in long_functions(code, 120) {
            offenders.push(format!("{r}:{line}: fn {name} is {len} lines"));
        }
    });
    assert!(offenders.is_empty(), "{offenders:#?}");
}

#[test]
fn unsafe_blocks_say_why() {
    let manifest = std::fs::read_to_string(project_root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("undocumented_unsafe_blocks = \"warn\""),
        "the workspace's clippy lints must include undocumented_unsafe_blocks"
    );
}

/// A source file up to its `#[cfg(test)]` module (the code the library ships).
fn library_code(text: &str) -> &str {
    match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// Functions of rustfmt-formatted code longer than `max` lines: (first line, name, lines),
/// from a `fn` line to the closing brace at its indentation.
fn long_functions(code: &str, max: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let ind = &l[..l.len() - t.len()];
        let Some(at) = t.find("fn ") else { continue };
        let head = &t[..at];
        let is_fn = head.split_whitespace().all(|w| {
            [
                "pub",
                "pub(crate)",
                "pub(super)",
                "const",
                "unsafe",
                "async",
                "extern",
                "\"C\"",
            ]
            .contains(&w)
        });
        if !is_fn || t.starts_with("//") {
            continue;
        }
        let name: String = t[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // Its body opens on this line or a later signature line; a declaration has none.
        let Some(open) = (i..lines.len()).find(|&j| {
            let s = lines[j].trim_end();
            s.ends_with('{') || s.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{ind}}}");
        if let Some(end) = (open + 1..lines.len()).find(|&j| lines[j] == close) {
            let len = end - i + 1;
            if len > max {
                out.push((i + 1, name, len));
            }
        }
    }
    out
}

#[test]
fn the_long_function_finder_finds_them() {
    let body: String = (0..130).map(|i| format!("    let x{i} = {i};\n")).collect();
    let code = format!("pub fn long() {{\n{body}}}\n\nfn short() {{\n}}\n");
    assert_eq!(
        long_functions(&code, 120),
        vec![(1, "long".to_string(), 132)]
    );
}

/// Calls `f(relative path, text)` for every `.rs` file of the workspace (not `target/`, not
/// hidden folders), in path order.
fn visit_rs(root: &Path, f: &mut dyn FnMut(&Path, &str)) {
    fn walk(root: &Path, dir: &Path, f: &mut dyn FnMut(&Path, &str)) {
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
                walk(root, &path, f);
            } else if name.ends_with(".rs")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                f(path.strip_prefix(root).expect("inside the root"), &text);
            }
        }
    }
    walk(root, root, f);
}

/// The layer map itself: dependencies of the same kind as the commands' are listed by name.
#[test]
fn layers_are_listed_once() {
    let mut seen = BTreeMap::new();
    for (n, l) in LAYERS {
        assert!(seen.insert(*n, *l).is_none(), "`{n}` listed twice");
    }
}
