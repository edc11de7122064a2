//! Every `*.test.yaml` suite under `katalogs/` and `testdata/` runs under
//! `cargo test` too (not only through `katalog test`): each case must pass.

use std::path::{Path, PathBuf};

use katalog_lang::suite::run_case;
use katalog_lang::{Source, compile_with_crds};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn suites(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            suites(&p, out);
        } else if name.ends_with(".test.yaml") || name.ends_with(".test.yml") {
            out.push(p);
        }
    }
}

/// A Katalog file, or every `.yaml`/`.yml`/`.json` file of a directory (as `katalog` reads them).
fn katalog_sources(path: &Path) -> Vec<Source> {
    let read = |p: &Path| {
        Source::new(
            p.display().to_string(),
            std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
    };
    if !path.is_dir() {
        return vec![read(path)];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            !name.starts_with('.')
                && [".yaml", ".yml", ".json"].iter().any(|x| name.ends_with(x))
                && p.is_file()
        })
        .collect();
    files.sort();
    files.iter().map(|p| read(p)).collect()
}

#[test]
fn every_example_and_data_suite_passes() {
    let mut files = Vec::new();
    for dir in ["katalogs", "testdata"] {
        suites(&repo().join(dir), &mut files);
    }
    assert!(files.len() >= 20, "expected the suites, found {files:?}");
    let (mut passed, mut failures) = (0usize, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a suite file");
        let source = Source::new(file.display().to_string(), text);
        let docs =
            katalog_lang::load::load_suites(&source).unwrap_or_else(|d| panic!("{}", d.render()));
        for suite in docs {
            let base = file.parent().expect("a parent directory");
            let sources = katalog_sources(&base.join(&suite.spec.katalog));
            // With the CRDs the Katalog names, as `katalog test` reads them.
            let ir = compile_with_crds(&sources, |r| {
                let path = r.path();
                if path.is_dir() || path.is_file() {
                    Ok(katalog_sources(&path))
                } else {
                    Err(format!("{} does not exist", path.display()))
                }
            })
            .unwrap_or_else(|d| panic!("{}", d.render()));
            for case in &suite.spec.cases {
                let result = run_case(&ir, case);
                if result.passed {
                    passed += 1;
                } else {
                    failures.push(format!(
                        "{} / {}:\n    {}",
                        file.display(),
                        case.name,
                        result.failures.join("\n    ")
                    ));
                }
            }
        }
    }
    eprintln!(
        "{} suite files: {passed} passed, {} failed",
        files.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
