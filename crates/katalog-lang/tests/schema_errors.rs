//! Golden tests of the checks against CRD schemas: every Katalog in
//! `testdata/schema-errors/` (a `*.yaml` that is not a `*.crd.yaml`) is
//! compiled with the CRDs its `crd:` keys name, read as the runtime reads
//! them (a file, or the `.yaml`/`.yml`/`.json` files of a directory), and
//! must give exactly the diagnostics in its `.expected` file: its errors, or
//! its warnings when it compiles. A `live-*.yaml` case is compiled as
//! `--live` does ([`compile_with_live_crds`]), the CRD of every resource
//! taken from a "cluster" made of `widget.crd.yaml` and the CRDs of `crds/`.
//! Run with `BLESS=1` to rewrite the expected files after a deliberate
//! change, then review the diff.

mod common;

use std::path::{Path, PathBuf};

use katalog_lang::load::CrdReference;
use katalog_lang::{Diagnostics, Source, compile_with_crds, compile_with_live_crds};

/// What `katalog_runtime::serving::files::read_crd` does, without depending on it.
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

/// What `katalog_runtime::cluster::live::LiveCrds::read` does, the cluster's CRDs
/// being those of `widget.crd.yaml` and `crds/` (run from the crate root).
fn read_live(reference: &CrdReference) -> Result<Vec<Source>, String> {
    let mut cluster = Vec::new();
    for file in ["widget.crd.yaml", "crds"] {
        let at = CrdReference {
            crd: file.to_string(),
            source: Source::new("testdata/schema-errors/cluster.yaml", ""),
            ..reference.clone()
        };
        cluster.extend(read_crd(&at)?);
    }
    for source in cluster {
        for doc in katalog_lang::yaml::read_documents(&source.text).map_err(|e| e.message())? {
            let value = doc.to_value();
            let spec = &value["spec"];
            if value["kind"] == "CustomResourceDefinition"
                && spec["group"] == reference.group.as_str()
                && spec["names"]["kind"] == reference.kind.as_str()
            {
                let name = value["metadata"]["name"].as_str().unwrap_or_default();
                return Ok(vec![Source::new(
                    format!("cluster:customresourcedefinitions/{name}"),
                    serde_json::to_string_pretty(&value).unwrap(),
                )]);
            }
        }
    }
    Err(format!(
        "the cluster has no CustomResourceDefinition for kind {} in group {}",
        reference.kind, reference.group
    ))
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
        let sources = [Source::new(name.clone(), text)];
        let compiled = if name.contains("/live-") {
            compile_with_live_crds(&sources, read_live)
        } else {
            compile_with_crds(&sources, read_crd)
        };
        let rendered = match compiled {
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
