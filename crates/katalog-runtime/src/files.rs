//! Reading a Katalog from disk: a file, or a directory such as a mounted
//! ConfigMap (`name -> ..data/name` symlinks beside hidden timestamped
//! directories, which are skipped).

use std::path::Path;

use katalog_lang::{Diagnostic, Diagnostics, ErrorKind, Source};

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
