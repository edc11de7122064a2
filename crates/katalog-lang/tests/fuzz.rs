//! Schema-driven fuzzing of every example Katalog that names a CRD (a smaller
//! count than CI's `katalog test --fuzz 10000` in ./scripts/test): every
//! generated object valid for its version's schema must come back exactly
//! from each round trip through the hub (or through each spoke).

use std::path::{Path, PathBuf};

use katalog_lang::fuzz::{FuzzOptions, fuzz};
use katalog_lang::{Source, compile_with_crds};

/// Objects per version and trip.
const COUNT: u64 = 1_000;

fn read(p: &Path) -> Source {
    Source::new(
        p.display().to_string(),
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
}

#[test]
fn every_example_katalog_with_a_crd_survives_fuzzing() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("katalogs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.ends_with(".yaml") && !n.ends_with(".test.yaml") && !n.ends_with(".crd.yaml")
        })
        .collect();
    files.sort();
    let mut fuzzed = Vec::new();
    for file in &files {
        let ir = compile_with_crds(&[read(file)], |r| Ok(vec![read(&r.path())]))
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let report = fuzz(
            &ir,
            FuzzOptions {
                count: COUNT,
                seed: 0,
            },
        );
        if report.trips.is_empty() {
            continue;
        }
        eprintln!("{}:\n{report}", file.display());
        assert_eq!(report.findings(), 0, "{}:\n{report}", file.display());
        fuzzed.push(
            file.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string(),
        );
    }
    // The examples with a CRD today; a new one is fuzzed without a change here.
    for expected in ["crontab.yaml", "hostport.yaml"] {
        assert!(
            fuzzed.iter().any(|f| f == expected),
            "{expected} not fuzzed: {fuzzed:?}"
        );
    }
}
