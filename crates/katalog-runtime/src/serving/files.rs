//! Reading a Katalog from disk: a file, or a directory such as a mounted
//! ConfigMap (`name -> ..data/name` symlinks beside hidden timestamped
//! directories, which are skipped).
//!
//! Whoever edits a Katalog names files with it (`crd:`), so what it names
//! is confined: inside the Katalog's own directory once every symlink is
//! followed, a regular file (never a device, FIFO or socket, which could
//! block or never end), at most [`MAX_FILE_BYTES`].

use std::io::Read as _;
use std::path::{Path, PathBuf};

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

/// The largest file read as a Katalog source or a CRD manifest (a
/// ConfigMap holds 1 MiB; the largest CRDs in use are a few MiB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A regular file's text, refusing anything else and anything larger than
/// [`MAX_FILE_BYTES`] before reading more than that.
fn read_text(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a device, FIFO or socket is never read)",
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES / 1024 / 1024
        )));
    }
    Ok(text)
}

/// The sources of a Katalog: the file itself, or every `.yaml`, `.yml` and
/// `.json` file of a directory (not hidden, sorted by name), except files
/// that hold CustomResourceDefinitions only (the CRDs `crd:` keys name may
/// sit beside the Katalog, as in one ConfigMap).
pub fn read_katalog(path: &Path) -> Result<Vec<Source>, Diagnostics> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if !meta.is_dir() {
        let text = read_text(path).map_err(|e| io_error(path, e))?;
        return Ok(vec![Source::new(path.display().to_string(), text)]);
    }
    let mut sources = Vec::new();
    for source in read_yaml_dir(path, None)? {
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
/// symlinks followed as a ConfigMap mount needs, sorted by name), read;
/// with `within` (a canonical directory), each checked to be inside it
/// once its symlinks are followed.
fn read_yaml_dir(path: &Path, within: Option<&Path>) -> Result<Vec<Source>, Diagnostics> {
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
    let mut sources = Vec::new();
    for name in names {
        let p = path.join(&name);
        if let Some(base) = within {
            confine(&p, base).map_err(|e| io_error(&p, e))?;
        }
        let text = read_text(&p).map_err(|e| io_error(&p, e))?;
        sources.push(Source::new(p.display().to_string(), text));
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
/// `.yml` and `.json` file of the directory (CRD manifests only, or beside
/// the Katalog: documents that are not CRDs are skipped when the CRD is
/// looked for). The error says why, for the language crate to locate at
/// the key.
///
/// Confined to the directory of the Katalog file that holds the key: a
/// path that leads out of it (`..`, an absolute path, a symlink) is refused,
/// as is every file of a named directory that does.
pub fn read_crd(reference: &CrdReference) -> Result<Vec<Source>, String> {
    let path = reference.path();
    let base = katalog_dir(reference);
    let base = std::fs::canonicalize(&base)
        .map_err(|e| format!("failed to read {}: {e}", base.display()))?;
    confine(&path, &base).map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    let first = |d: Diagnostics| {
        d.0.first()
            .map(|d| d.message.clone())
            .unwrap_or_else(|| format!("failed to read {}", path.display()))
    };
    let meta = std::fs::metadata(&path).map_err(|e| first(io_error(&path, e)))?;
    if meta.is_dir() {
        return read_yaml_dir(&path, Some(&base)).map_err(first);
    }
    let text = read_text(&path).map_err(|e| first(io_error(&path, e)))?;
    Ok(vec![Source::new(path.display().to_string(), text)])
}

/// The directory of the Katalog file that holds a `crd:` key.
fn katalog_dir(reference: &CrdReference) -> PathBuf {
    match Path::new(&*reference.source.name).parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `path`, its symlinks followed, is inside the canonical `base`.
fn confine(path: &Path, base: &Path) -> std::io::Result<()> {
    let real = std::fs::canonicalize(path)?;
    if real.starts_with(base) {
        Ok(())
    } else {
        Err(std::io::Error::other(
            "it leads out of the Katalog's directory (by `..`, an absolute path or a symlink); a Katalog names only files beside it",
        ))
    }
}

/// Compile the sources of a Katalog (from [`read_katalog`]) with the CRDs
/// its `crd:` keys name, read from disk.
pub fn compile_katalog(sources: &[Source]) -> Result<Ir, Diagnostics> {
    katalog_lang::compile_with_crds(sources, read_crd)
}

/// The `crd:` references of a Katalog, one per file or directory named
/// (`crds.yaml` and `./crds.yaml` are one), in the order first named, with
/// the path each names.
fn distinct_crd_references(sources: &[Source]) -> Vec<(PathBuf, CrdReference)> {
    let (loaded, _) = katalog_lang::load::load(sources);
    let mut out: Vec<(PathBuf, CrdReference)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for reference in katalog_lang::load::crd_references(&loaded) {
        let path = reference.key();
        if seen.insert(path.clone()) {
            out.push((path, reference));
        }
    }
    out
}

/// The files and directories the `crd:` keys of a Katalog name, each once
/// (`crds.yaml` and `./crds.yaml` are one), in the order first named.
pub fn crd_paths_of(sources: &[Source]) -> Vec<PathBuf> {
    distinct_crd_references(sources)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// The CRD sources the `crd:` keys of a Katalog name, as far as they can be
/// read (what cannot be is reported by [`compile_katalog`]), each file or
/// directory read once however many resources name it: for the server to
/// notice a CRD file that changed while the Katalog did not.
pub fn read_crds_of(sources: &[Source]) -> Vec<Source> {
    distinct_crd_references(sources)
        .iter()
        .filter_map(|(_, r)| read_crd(r).ok())
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KATALOG: &str = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec:\n  resources:\n    - {group: stable.example.com, kind: CronTab, plural: crontabs, hub: v1, versions: [v1], crd: CRD}\n";

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: crontabs.stable.example.com}\nspec:\n  group: stable.example.com\n  names: {kind: CronTab, plural: crontabs}\n  scope: Namespaced\n  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("katalog-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("k")).unwrap();
        dir
    }

    /// Compiles `dir/k/k.yaml` naming `crd`; the rendered errors.
    fn errors_naming(dir: &Path, crd: &str) -> String {
        let file = dir.join("k/k.yaml");
        std::fs::write(&file, KATALOG.replace("CRD", crd)).unwrap();
        let sources = read_katalog(&file).unwrap();
        compile_katalog(&sources).unwrap_err().render()
    }

    #[test]
    fn a_crd_outside_the_katalog_directory_is_refused_at_its_key() {
        let dir = scratch("outside");
        let crd = CRD;
        std::fs::write(dir.join("outside.crd.yaml"), crd).unwrap();
        std::os::unix::fs::symlink(dir.join("outside.crd.yaml"), dir.join("k/link.crd.yaml"))
            .unwrap();
        std::fs::create_dir_all(dir.join("k/crds")).unwrap();
        std::os::unix::fs::symlink(dir.join("outside.crd.yaml"), dir.join("k/crds/a.yaml"))
            .unwrap();
        let absolute = dir.join("outside.crd.yaml").display().to_string();
        for named in [
            "../outside.crd.yaml",
            &absolute,
            "link.crd.yaml",
            "crds",
            "/dev/zero",
        ] {
            let e = errors_naming(&dir, named);
            assert!(
                e.contains("leads out of the Katalog's directory"),
                "{named}: {e}"
            );
            assert!(e.contains("k.yaml:6:"), "{named}: located at the key: {e}");
        }
        // Inside, a ConfigMap's `..data` symlinks included, it is read.
        std::fs::create_dir_all(dir.join("k/..data")).unwrap();
        std::fs::write(dir.join("k/..data/crontab.crd.yaml"), crd).unwrap();
        std::os::unix::fs::symlink("..data/crontab.crd.yaml", dir.join("k/crontab.crd.yaml"))
            .unwrap();
        let file = dir.join("k/k.yaml");
        std::fs::write(&file, KATALOG.replace("CRD", "crontab.crd.yaml")).unwrap();
        compile_katalog(&read_katalog(&file).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn special_and_huge_files_are_refused_without_reading_them() {
        let dir = scratch("special");
        let fifo = dir.join("k/fifo.crd.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        // Opening a FIFO with no writer would block forever.
        let e = errors_naming(&dir, "fifo.crd.yaml");
        assert!(e.contains("not a regular file"), "{e}");
        let big = std::fs::File::create(dir.join("k/big.crd.yaml")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = errors_naming(&dir, "big.crd.yaml");
        assert!(e.contains("larger than 16 MiB"), "{e}");
        let e = read_katalog(Path::new("/dev/zero")).unwrap_err().render();
        assert!(e.contains("not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    mod shared_reads {
        use super::super::*;

        /// A CRD of kind CronTab in `group`, serving v1 only.
        fn crd(group: &str) -> String {
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: crontabs.{group}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: crontabs, kind: CronTab}}\n  versions:\n    - {{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}\n"
            )
        }

        fn scratch(name: &str) -> std::path::PathBuf {
            let dir =
                std::env::temp_dir().join(format!("katalog-files-{name}-{}", std::process::id()));
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
}
