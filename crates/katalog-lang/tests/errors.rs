//! Golden tests of the exact error messages: every `testdata/errors/*.yaml`
//! must fail to compile with exactly the diagnostics in its `.expected`
//! file. Run with `BLESS=1` to rewrite the expected files after a deliberate
//! change, then review the diff.

mod common;

use std::path::Path;

use katalog_lang::{Source, compile_sources};

#[test]
fn error_messages_match_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/errors");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 6,
        "expected the error cases in {}",
        dir.display()
    );
    let mut mismatches = Vec::new();
    for path in entries {
        let name = format!(
            "testdata/errors/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let rendered = match compile_sources(&[Source::new(name.clone(), text)]) {
            Ok(_) => panic!("{name} compiled, but every file in testdata/errors must fail"),
            Err(diags) => diags.render(),
        };
        let expected_path = path.with_extension("expected");
        common::golden(&name, &expected_path, &rendered, &mut mismatches);
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
