//! Reading a Katalog from disk: a file, or a directory such as a mounted
//! ConfigMap (`name -> ..data/name` symlinks beside hidden timestamped
//! directories, which are skipped).

use std::path::Path;

use katalog_lang::load::CrdReference;
use katalog_lang::{Diagnostic, Diagnostics, ErrorKind, Ir, Source};

fn io_error(path: &Path, e: std::io::Error) -> Diagnostics {
    Diagnostics(vec![
        Diagnostic::new(
            ErrorKind::Io,
            format!("failed to read {}: {e}", path.display()),
        )
        .with_help("give a Katalog file or a directory of them"),
    ])
}

/// The sources of a Katalog: the file itself, or every `.yaml`, `.yml` and
/// `.json` file of a directory (not hidden, sorted by name), except files
/// that hold CustomResourceDefinitions only (the CRDs `crd:` keys name may
/// sit beside the Katalog, as in one ConfigMap).
pub fn read_katalog(path: &Path) -> Result<Vec<Source>, Diagnostics> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if !meta.is_dir() {
        let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
        return Ok(vec![Source::new(path.display().to_string(), text)]);
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| io_error(path, e))? {
        let entry = entry.map_err(|e| io_error(path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let wanted = !name.starts_with('.')
            && [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext));
        // Follows symlinks, as a ConfigMap mount needs.
        if wanted && entry.path().is_file() {
            names.push(name);
        }
    }
    names.sort();
    if names.is_empty() {
        return Err(Diagnostics(vec![Diagnostic::new(
            ErrorKind::Io,
            format!("{} holds no .yaml, .yml or .json file", path.display()),
        )]));
    }
    let mut sources = Vec::new();
    for name in names {
        let p = path.join(&name);
        let text = std::fs::read_to_string(&p).map_err(|e| io_error(&p, e))?;
        // A ConfigMap may carry the CRDs the Katalog's `crd:` keys name
        // beside it: a file of CRDs only is not a Katalog source.
        if !crds_only(&text) {
            sources.push(Source::new(p.display().to_string(), text));
        }
    }
    if sources.is_empty() {
        return Err(Diagnostics(vec![Diagnostic::new(
            ErrorKind::Io,
            format!("{} holds CRD manifests but no Katalog", path.display()),
        )]));
    }
    Ok(sources)
}

/// Whether every document of the text is a CustomResourceDefinition (and
/// there is one).
fn crds_only(text: &str) -> bool {
    let Ok(roots) = katalog_lang::yaml::read_documents(text) else {
        return false;
    };
    let kinds: Vec<_> = roots
        .iter()
        .map(|r| r.to_value())
        .filter(|v| !v.is_null())
        .map(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .collect();
    !kinds.is_empty()
        && kinds
            .iter()
            .all(|k| k.as_deref() == Some("CustomResourceDefinition"))
}

/// The sources of the CRD a `crd:` key names: the file, or every `.yaml`,
/// `.yml` and `.json` file of the directory. The error says why, for the
/// language crate to locate at the key.
pub fn read_crd(reference: &CrdReference) -> Result<Vec<Source>, String> {
    let path = reference.path();
    read_katalog(&path).map_err(|d| {
        d.0.first()
            .map(|d| d.message.clone())
            .unwrap_or_else(|| format!("failed to read {}", path.display()))
    })
}

/// Compile the sources of a Katalog (from [`read_katalog`]) with the CRDs
/// its `crd:` keys name, read from disk.
pub fn compile_katalog(sources: &[Source]) -> Result<Ir, Diagnostics> {
    katalog_lang::compile_with_crds(sources, read_crd)
}

/// The files and directories the `crd:` keys of a Katalog name.
pub fn crd_paths_of(sources: &[Source]) -> Vec<std::path::PathBuf> {
    let (loaded, _) = katalog_lang::load::load(sources);
    katalog_lang::load::crd_references(&loaded)
        .iter()
        .map(CrdReference::path)
        .collect()
}

/// The CRD sources the `crd:` keys of a Katalog name, as far as they can be
/// read (what cannot be is reported by [`compile_katalog`]): for the server
/// to notice a CRD file that changed while the Katalog did not.
pub fn read_crds_of(sources: &[Source]) -> Vec<Source> {
    let (loaded, _) = katalog_lang::load::load(sources);
    katalog_lang::load::crd_references(&loaded)
        .iter()
        .filter_map(|r| read_crd(r).ok())
        .flatten()
        .collect()
}
