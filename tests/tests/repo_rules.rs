//! Repository rules that `cargo test` enforces: the README's first two commands exist.

use drum_tests::project_root;

/// The commands of the first fenced block of README.md, without comments.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(project_root().join("README.md")).expect("README.md");
    let block = readme
        .split("```")
        .nth(1)
        .expect("README.md opens with a fenced block of commands");
    block
        .lines()
        .skip(1) // the fence's language tag
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn readme_opens_with_the_main_job_and_the_tests() {
    let cmds = readme_commands();
    assert!(
        cmds.len() >= 2,
        "README's first block needs two commands: {cmds:?}"
    );
    assert_eq!(
        cmds[0], "cargo xtask run-laplace",
        "first line: the main job"
    );
    assert_eq!(cmds[1], "cargo xtask ci", "second line: the tests");
}

#[test]
fn readme_xtask_commands_exist() {
    let xtask = std::fs::read_to_string(project_root().join("xtask/src/main.rs")).unwrap();
    for cmd in readme_commands() {
        let Some(task) = cmd.strip_prefix("cargo xtask ") else {
            continue;
        };
        let name = task.split_whitespace().next().unwrap();
        assert!(
            xtask.contains(&format!("Some(\"{name}\")")),
            "README names `cargo xtask {name}`, which xtask/src/main.rs does not parse"
        );
    }
}

#[test]
fn ci_script_calls_the_readme_test_command() {
    let ci = std::fs::read_to_string(project_root().join(".ci/run")).unwrap();
    let test_cmd = &readme_commands()[1];
    assert!(
        ci.lines().any(|l| l.trim() == test_cmd),
        ".ci/run must run the README's test command `{test_cmd}`"
    );
}
