//! Golden tests of the checks against CRD schemas: every Katalog in
//! `testdata/schema-errors/` (a `*.yaml` that is not a `*.crd.yaml`) is
//! compiled with the CRDs its `crd:` keys name, read as the runtime reads
//! them (a file, or the `.yaml`/`.yml`/`.json` files of a directory), and
//! must give exactly the diagnostics in its `.expected` file: its errors, or
//! its warnings when it compiles. Run with `BLESS=1` to rewrite the expected
//! files after a deliberate change, then review the diff.

mod common;

use std::path::{Path, PathBuf};

use katalog_lang::load::CrdReference;
use katalog_lang::{Diagnostics, Source, compile_with_crds};

/// What `katalog_runtime::files::read_crd` does, without depending on it.
fn read_crd(reference: &CrdReference) -> Result<Vec<Source>, String> {
    let path = reference.path();
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .map(|text| Source::new(p.display().to_string(), text))
            .map_err(|e| format!("failed to read {}: {e}", p.display()))
    };
    if !path.is_dir() {
        return read(&path).map(|s| vec![s]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
        .map_err(|e| e.to_string())?
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    files.iter().map(|p| read(p)).collect()
}

#[test]
fn schema_error_messages_match_golden_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("testdata/schema-errors");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".yaml") && !name.ends_with(".crd.yaml")
        })
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 5,
        "expected the schema error cases in {}",
        dir.display()
    );
    // Relative names keep the expected files independent of the checkout.
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(root).unwrap();
    let mut mismatches = Vec::new();
    for path in entries {
        let name = format!(
            "testdata/schema-errors/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let rendered = match compile_with_crds(&[Source::new(name.clone(), text)], read_crd) {
            Ok(ir) => {
                assert!(
                    !ir.admission.warnings.is_empty(),
                    "{name} compiled without a warning, but every case must report something"
                );
                // A warning must not cost the resource its place in the IR.
                format!(
                    "{}compiled with {} resource(s)\n",
                    Diagnostics(ir.admission.warnings.clone()).render(),
                    ir.resources.len()
                )
            }
            Err(diags) => diags.render(),
        };
        let expected_path = path.with_extension("expected");
        common::golden(&name, &expected_path, &rendered, &mut mismatches);
    }
    std::env::set_current_dir(cwd).unwrap();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
