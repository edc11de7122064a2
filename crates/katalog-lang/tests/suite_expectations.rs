//! `katalog test` checks every expectation a case states: every case of
//! `testdata/suite-expectations/*.test.yaml` contradicts the engine on one
//! key and must fail with exactly the failures in its `.expected` file. A
//! case that passes is an expectation the runner skipped. Run with
//! `BLESS=1` to rewrite the expected files, then review the diff.

mod common;

use std::path::Path;

use katalog_lang::suite::run_case;
use katalog_lang::{Source, compile_sources};

#[test]
fn every_stated_expectation_is_checked() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/suite-expectations");
    let mut suites: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".test.yaml"))
        .collect();
    suites.sort();
    assert!(!suites.is_empty(), "expected suites in {}", dir.display());
    let mut problems = Vec::new();
    for path in suites {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let docs = katalog_lang::suite::load(&Source::new(name.clone(), text))
            .unwrap_or_else(|d| panic!("{name} does not load:\n{}", d.render()));
        let mut rendered = String::new();
        for doc in docs {
            let katalog = dir.join(&doc.spec.katalog);
            let text = std::fs::read_to_string(&katalog).unwrap();
            let ir = compile_sources(&[Source::new(doc.spec.katalog.clone(), text)])
                .unwrap_or_else(|d| {
                    panic!("{} does not compile:\n{}", doc.spec.katalog, d.render())
                });
            for case in &doc.spec.cases {
                let result = run_case(&ir, case);
                if result.passed {
                    problems.push(format!("{name}: `{}` passed, but must fail", case.name));
                }
                rendered.push_str(&format!("{}\n", case.name));
                for f in &result.failures {
                    rendered.push_str(&format!("  - {f}\n"));
                }
            }
        }
        let expected_path = path.with_file_name(name.replace(".test.yaml", ".expected"));
        common::golden(&name, &expected_path, &rendered, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
