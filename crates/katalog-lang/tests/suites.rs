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

/// Every admission case of the suites, with all the Katalog's mutations
/// applied: the patch built from the places the mutations touched is the
/// whole-object diff, and the mutations that changed the object are the
/// same by either reckoning.
#[test]
fn every_mutation_case_patches_as_the_whole_object_diff() {
    let mut files = Vec::new();
    for dir in ["katalogs", "testdata"] {
        suites(&repo().join(dir), &mut files);
    }
    let (mut patched, mut failures) = (0usize, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a suite file");
        let source = Source::new(file.display().to_string(), text);
        let docs = katalog_lang::suite::load(&source).unwrap_or_else(|d| panic!("{}", d.render()));
        for suite in docs {
            let base = file.parent().expect("a parent directory");
            let ir = katalog_ir(&base.join(&suite.spec.katalog));
            for case in &suite.spec.cases {
                let Some(admission) = &case.admission else {
                    continue;
                };
                let Ok(input) = admission.request.to_input(&ir) else {
                    continue;
                };
                let check = katalog_lang::admission::eval::mutation_patch_check(&ir, &input);
                if !check.whole.is_empty() {
                    patched += 1;
                }
                if check.touched != check.whole || check.touched_changed != check.whole_changed {
                    failures.push(format!(
                        "{} / {}:\n    touched: {:?} {}\n    whole:   {:?} {}",
                        file.display(),
                        case.name,
                        check.touched_changed,
                        serde_json::Value::Array(check.touched),
                        check.whole_changed,
                        serde_json::Value::Array(check.whole),
                    ));
                }
            }
        }
    }
    eprintln!("{patched} cases patched, {} differ", failures.len());
    assert!(
        patched >= 40,
        "expected the mutation cases, found {patched}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
