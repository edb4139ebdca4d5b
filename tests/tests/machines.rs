//! Repository rule: every `machines/*.xml` loads, and its static powers are what they were
//! (insta snapshots of the tree with shares, fractions and per-rank part sizes).

use drum_model::{Machine, PowerConfig, PowerModel, render, static_powers};
use drum_tests::project_root;

fn machine_files() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(project_root().join("machines"))
        .expect("machines/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_machine_file_loads_and_its_static_powers_are_snapshotted() {
    let files = machine_files();
    assert!(files.len() >= 3, "machines/ holds {} files", files.len());
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let rel = format!("machines/{}", path.file_name().unwrap().to_string_lossy());
        let bytes = std::fs::read(&path).unwrap();
        let machine = Machine::from_bytes(&bytes, &rel).unwrap_or_else(|e| panic!("{e}"));
        let mut report = render::summary(&machine);
        report.push('\n');
        // Communication power needs a link capacity on every computing node's path.
        let rated_links = machine
            .computing_nodes()
            .all(|n| machine.link_bandwidth(n.id).is_some());
        let mut models = vec![PowerModel::Drum { w_comm: 0.0 }];
        if rated_links {
            models.push(PowerModel::Drum { w_comm: 0.25 });
        }
        for model in models {
            let config = PowerConfig {
                model: model.clone(),
                ..PowerConfig::default()
            };
            let powers = static_powers(&machine, &config).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let sum: f64 = powers.part_sizes().iter().sum();
            assert!((sum - 1.0).abs() < 1e-12, "{rel}: part sizes sum to {sum}");
            report.push_str(&format!(
                "\nstatic powers, model {}, w_comm = {}\n",
                model.name(),
                model.w_comm()
            ));
            report.push_str(&render::tree_text(&machine, Some(&powers)));
        }
        insta::assert_snapshot!(name, report);
    }
}
