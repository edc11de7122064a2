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
/// `.json` file of a directory (not hidden, sorted by name).
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
    names
        .into_iter()
        .map(|name| {
            let p = path.join(&name);
            let text = std::fs::read_to_string(&p).map_err(|e| io_error(&p, e))?;
            Ok(Source::new(p.display().to_string(), text))
        })
        .collect()
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
