//! Every `*.test.yaml` suite under `katalogs/` and `testdata/` runs under
//! `cargo test` too (not only through `katalog test`): each case must pass.

mod common;

use common::{katalog_ir, repo, suites};
use katalog_lang::Source;
use katalog_lang::suite::run_case;

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
        let docs = katalog_lang::suite::load(&source).unwrap_or_else(|d| panic!("{}", d.render()));
        for suite in docs {
            let base = file.parent().expect("a parent directory");
            let ir = katalog_ir(&base.join(&suite.spec.katalog));
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
