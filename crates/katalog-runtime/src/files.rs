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
    let mut sources = Vec::new();
    for source in read_yaml_dir(path)? {
        // A ConfigMap may carry the CRDs the Katalog's `crd:` keys name
        // beside it: a file of CRDs only is not a Katalog source.
        if !crds_only(&source.text) {
            sources.push(source);
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

/// Every `.yaml`, `.yml` and `.json` file of a directory (not hidden,
/// symlinks followed as a ConfigMap mount needs, sorted by name), read.
fn read_yaml_dir(path: &Path) -> Result<Vec<Source>, Diagnostics> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| io_error(path, e))? {
        let entry = entry.map_err(|e| io_error(path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let wanted = !name.starts_with('.')
            && [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext));
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
/// `.yml` and `.json` file of the directory (CRD manifests only, or beside
/// the Katalog: documents that are not CRDs are skipped when the CRD is
/// looked for). The error says why, for the language crate to locate at
/// the key.
pub fn read_crd(reference: &CrdReference) -> Result<Vec<Source>, String> {
    read_crd_path(&reference.path())
}

fn read_crd_path(path: &Path) -> Result<Vec<Source>, String> {
    let first = |d: Diagnostics| {
        d.0.first()
            .map(|d| d.message.clone())
            .unwrap_or_else(|| format!("failed to read {}", path.display()))
    };
    let meta = std::fs::metadata(path).map_err(|e| first(io_error(path, e)))?;
    if meta.is_dir() {
        return read_yaml_dir(path).map_err(first);
    }
    let text = std::fs::read_to_string(path).map_err(|e| first(io_error(path, e)))?;
    Ok(vec![Source::new(path.display().to_string(), text)])
}

/// Compile the sources of a Katalog (from [`read_katalog`]) with the CRDs
/// its `crd:` keys name, read from disk.
pub fn compile_katalog(sources: &[Source]) -> Result<Ir, Diagnostics> {
    katalog_lang::compile_with_crds(sources, read_crd)
}

/// The files and directories the `crd:` keys of a Katalog name, each once
/// (`crds.yaml` and `./crds.yaml` are one), in the order first named.
pub fn crd_paths_of(sources: &[Source]) -> Vec<std::path::PathBuf> {
    let (loaded, _) = katalog_lang::load::load(sources);
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for reference in katalog_lang::load::crd_references(&loaded) {
        let path: std::path::PathBuf = reference
            .path()
            .components()
            .filter(|c| *c != std::path::Component::CurDir)
            .collect();
        if seen.insert(path.clone()) {
            paths.push(path);
        }
    }
    paths
}

/// The CRD sources the `crd:` keys of a Katalog name, as far as they can be
/// read (what cannot be is reported by [`compile_katalog`]), each file or
/// directory read once however many resources name it: for the server to
/// notice a CRD file that changed while the Katalog did not.
pub fn read_crds_of(sources: &[Source]) -> Vec<Source> {
    crd_paths_of(sources)
        .iter()
        .filter_map(|path| read_crd_path(path).ok())
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CRD of kind CronTab in `group`, serving v1 only.
    fn crd(group: &str) -> String {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: crontabs.{group}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: crontabs, kind: CronTab}}\n  versions:\n    - {{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}\n"
        )
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("katalog-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A Katalog of `n` resources, each of its own group, all naming `crd`.
    fn katalog(n: usize, crd: &str) -> String {
        let mut text = String::from(
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\nspec:\n  resources:\n",
        );
        for i in 0..n {
            let crd = if i % 2 == 0 {
                crd.to_string()
            } else {
                format!("./{crd}")
            };
            text.push_str(&format!(
                "    - {{group: g{i}.example.com, kind: CronTab, plural: crontabs, hub: v1, versions: [v1], crd: {crd}}}\n"
            ));
        }
        text
    }

    /// Every resource names one bundle of CRDs: the reload poll reads
    /// (and hashes) it once, not once per resource.
    #[test]
    fn the_poll_reads_a_bundle_once() {
        let dir = scratch("bundle");
        let bundle: String = (0..4)
            .map(|i| format!("---\n{}", crd(&format!("g{i}.example.com"))))
            .collect();
        std::fs::write(dir.join("crds.yaml"), bundle).unwrap();
        std::fs::write(dir.join("katalog.yaml"), katalog(4, "crds.yaml")).unwrap();
        let sources = read_katalog(&dir.join("katalog.yaml")).unwrap();
        assert_eq!(crd_paths_of(&sources), [dir.join("crds.yaml")]);
        let crds = read_crds_of(&sources);
        assert_eq!(
            crds.len(),
            1,
            "{:?}",
            crds.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        let ir = compile_katalog(&sources).unwrap_or_else(|d| panic!("{}", d.render()));
        assert_eq!(ir.resources.len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `crd:` naming a directory of CRD manifests only (it was refused,
    /// "holds CRD manifests but no Katalog", by the Katalog's reader).
    #[test]
    fn a_directory_of_crds_only_is_read() {
        let dir = scratch("crd-dir");
        std::fs::create_dir_all(dir.join("crds")).unwrap();
        std::fs::write(dir.join("crds/crontab.crd.yaml"), crd("g0.example.com")).unwrap();
        std::fs::write(dir.join("katalog.yaml"), katalog(1, "crds")).unwrap();
        let sources = read_katalog(&dir.join("katalog.yaml")).unwrap();
        let crds = read_crds_of(&sources);
        assert_eq!(crds.len(), 1);
        compile_katalog(&sources).unwrap_or_else(|d| panic!("{}", d.render()));
        // An empty directory still says why.
        std::fs::remove_file(dir.join("crds/crontab.crd.yaml")).unwrap();
        let e = compile_katalog(&sources).unwrap_err().render();
        assert!(e.contains("holds no .yaml, .yml or .json file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
