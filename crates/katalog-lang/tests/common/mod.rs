//! What the golden-file and data-driven tests of katalog-lang share.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use katalog_lang::{Ir, Source, compile_with_crds};

/// Compare `rendered` with the golden file at `expected_path` (rewritten
/// instead with `BLESS=1`); a mismatch is pushed to `mismatches`, named `name`.
pub fn golden(name: &str, expected_path: &Path, rendered: &str, mismatches: &mut Vec<String>) {
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(expected_path, rendered).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(expected_path)
        .unwrap_or_else(|_| panic!("missing {}; run with BLESS=1", expected_path.display()));
    if expected != rendered {
        mismatches.push(format!(
            "--- {name}: expected\n{expected}\n--- got\n{rendered}"
        ));
    }
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn suites(dir: &Path, out: &mut Vec<PathBuf>) {
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
pub fn katalog_sources(path: &Path) -> Vec<Source> {
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

/// Compile the Katalog at `path` (a file or a directory) with the CRDs it
/// names, as `katalog test` reads them.
pub fn katalog_ir(path: &Path) -> Ir {
    compile_with_crds(&katalog_sources(path), |r| {
        let path = r.path();
        if path.is_dir() || path.is_file() {
            Ok(katalog_sources(&path))
        } else {
            Err(format!("{} does not exist", path.display()))
        }
    })
    .unwrap_or_else(|d| panic!("{}", d.render()))
}
