//! The Katalog language: load → compile → IR → evaluate.
//!
//! Pure: this crate takes text and JSON values and returns values and errors.
//! It has no async runtime, no HTTP server, no Kubernetes client and does no
//! file watching; the CLI and the runtime build on it.
//!
//! ```
//! use katalog_lang::{Source, compile_sources, convert::convert};
//! use serde_json::json;
//!
//! let text = r#"
//! apiVersion: katalog.dev/v1alpha1
//! kind: Katalog
//! metadata: {name: demo}
//! spec:
//!   resources:
//!     - group: stable.example.com
//!       kind: CronTab
//!       plural: crontabs
//!       hub: v1
//!       versions: [v1, v1beta1]
//!       conversion:
//!         v1beta1:
//!           - rename: {hub: spec.schedule, spoke: spec.cronSpec}
//! "#;
//! let ir = compile_sources(&[Source::new("demo.yaml", text)]).unwrap();
//! let hub = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
//!                  "metadata": {"name": "a"}, "spec": {"schedule": "* * * * *"}});
//! let spoke = convert(&ir, &hub, "stable.example.com/v1beta1").unwrap();
//! assert_eq!(spoke["spec"], json!({"cronSpec": "* * * * *"}));
//! assert_eq!(convert(&ir, &spoke, "stable.example.com/v1").unwrap(), hub);
//! ```

// The crate's modules, by stage (docs/architecture.md has the code map and
// what each may import; tests/structure.rs enforces it):
pub mod admission; // the admission half: compile, select, validate, mutate, protect, review
pub mod ceiling; // the authority ceiling: what a Katalog may make the engine do
pub mod cel; // CEL: prepare, type-check, cost, the two evaluators
pub mod common; // paths, JSON, names, budgets: shared by every stage
pub mod conversion; // the conversion half: compile, analysis, eval, review, splice, fuzz
pub mod error; // located diagnostics
pub mod front; // text -> located Katalog document (source, yaml, document, load)
pub mod ir; // the compiled rules both halves evaluate
pub mod schema; // CRD and built-in schemas
pub mod suite; // test suites (`katalog test`)

// The API, by the names the CLI, the runtime and the tests use.
pub use common::{budget, json, path};
pub use conversion::{analysis, fuzz};
pub use error::{Diagnostic, Diagnostics, ErrorKind};
pub use front::{document, load, source, yaml};

// The conversion half under the names it had before it got its own module
// (`katalog_lang::convert::convert`, `katalog_lang::review::review_conversion`).
pub use conversion::{eval as convert, remainder, review};
pub use ir::Ir;
pub use source::Source;

/// Load and compile a Katalog made of these sources.
/// Every error of every stage is reported together.
pub fn compile_sources(sources: &[Source]) -> Result<Ir, Diagnostics> {
    let (loaded, diags) = load::load(sources);
    with_load_errors(diags, conversion::compile::compile(&loaded))
}

/// A stage's result after loading: an `Err` when loading reported any
/// error, with the stage's own errors added, in source order.
fn with_load_errors<T>(
    mut diags: Diagnostics,
    result: Result<T, Diagnostics>,
) -> Result<T, Diagnostics> {
    match result {
        Ok(value) if diags.is_empty() => Ok(value),
        Ok(_) => {
            diags.sort();
            Err(diags)
        }
        Err(more) => {
            diags.0.extend(more.0);
            diags.sort();
            Err(diags)
        }
    }
}

/// Load and compile a Katalog, reading the CRD each resource's `crd:` names
/// with `read_crd` (which returns the sources of that file or directory, or
/// why it cannot be read) and checking the resources against them (see
/// [`conversion::compile::compile_with_schemas`]). Every error of every stage, a `crd:`
/// that cannot be read included, is reported together, located at its key.
pub fn compile_with_crds(
    sources: &[Source],
    read_crd: impl FnMut(&load::CrdReference) -> Result<Vec<Source>, String>,
) -> Result<Ir, Diagnostics> {
    compile_loaded(load_with_crds(sources, read_crd, false))
}

/// Compile as [`compile_with_crds`] does, but ask `fetch` for the CRD of
/// every resource, `crd:` key or not (see [`load::resource_references`]):
/// what `katalog check --live` uses, `fetch` reading from a cluster. An
/// `Err` of `fetch` is located at the resource.
pub fn compile_with_live_crds(
    sources: &[Source],
    fetch: impl FnMut(&load::CrdReference) -> Result<Vec<Source>, String>,
) -> Result<Ir, Diagnostics> {
    compile_loaded(load_with_crds(sources, fetch, true))
}

fn compile_loaded(
    (loaded, schemas, diags): (load::Loaded, schema::Schemas, Diagnostics),
) -> Result<Ir, Diagnostics> {
    with_load_errors(
        diags,
        conversion::compile::compile_with_schemas(&loaded, &schemas),
    )
}

/// Load and compile a Katalog as [`compile_with_crds`] does, and return the
/// analysis of its conversion rules against the CRD schemas (see
/// [`analysis`]) with the IR: what `katalog analyze` prints. `Err` when the
/// Katalog fails to compile for another reason; the analysis's own errors
/// are in [`analysis::Analysis::diagnostics`].
pub fn analyze_with_crds(
    sources: &[Source],
    read_crd: impl FnMut(&load::CrdReference) -> Result<Vec<Source>, String>,
) -> Result<(Ir, analysis::Analysis), Diagnostics> {
    analyze_loaded(load_with_crds(sources, read_crd, false))
}

/// Analyse as [`analyze_with_crds`] does, with the CRD of every resource
/// from `fetch`, as [`compile_with_live_crds`].
pub fn analyze_with_live_crds(
    sources: &[Source],
    fetch: impl FnMut(&load::CrdReference) -> Result<Vec<Source>, String>,
) -> Result<(Ir, analysis::Analysis), Diagnostics> {
    analyze_loaded(load_with_crds(sources, fetch, true))
}

fn analyze_loaded(
    (loaded, schemas, diags): (load::Loaded, schema::Schemas, Diagnostics),
) -> Result<(Ir, analysis::Analysis), Diagnostics> {
    let ir = with_load_errors(
        diags,
        conversion::compile::compile_unanalyzed(&loaded, &schemas),
    )?;
    let analysis = analysis::analyze(&loaded, &ir, &schemas);
    Ok((ir, analysis))
}

/// Load the sources and read the CRDs their `crd:` keys name (`live`: the
/// CRD of every resource, from the reader). Each distinct file or
/// directory is read once, however many resources name it (one bundle of
/// CRDs for every resource), and so parsed once by [`schema::Schemas::load`].
fn load_with_crds(
    sources: &[Source],
    mut read_crd: impl FnMut(&load::CrdReference) -> Result<Vec<Source>, String>,
    live: bool,
) -> (load::Loaded, schema::Schemas, Diagnostics) {
    let (loaded, mut diags) = load::load(sources);
    let mut read = Vec::new();
    let references = if live {
        load::resource_references(&loaded)
    } else {
        load::crd_references(&loaded)
    };
    let mut already: std::collections::HashMap<std::path::PathBuf, Result<Vec<Source>, String>> =
        std::collections::HashMap::new();
    for reference in references {
        let result = if live {
            read_crd(&reference)
        } else {
            already
                .entry(reference.key())
                .or_insert_with(|| read_crd(&reference))
                .clone()
        };
        match result {
            Ok(crd_sources) => read.push((reference, crd_sources)),
            Err(why) if live => diags.push(
                Diagnostic::new(
                    ErrorKind::Schema,
                    format!(
                        "failed to read the CRD of {}/{} from the cluster: {why}",
                        reference.group, reference.kind
                    ),
                )
                .at(reference.loc.clone(), Some(&reference.source))
                .with_help("apply the CustomResourceDefinition first, or check without `--live`"),
            ),
            Err(why) => diags.push(
                Diagnostic::new(
                    ErrorKind::Schema,
                    format!("failed to read CRD `{}`: {why}", reference.crd),
                )
                .at(reference.loc.clone(), Some(&reference.source))
                .with_help("`crd:` names a CRD manifest file or directory, relative to this file"),
            ),
        }
    }
    let (schemas, more) = schema::Schemas::load(&read);
    diags.0.extend(more.0);
    (loaded, schemas, diags)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Katalog of `n` resources that all name `crd` (a bundle of their
    /// CRDs, [`bundle`]), every other one as `./crd`: each renames `spec.a`
    /// to `spec.b` in v2.
    fn bundled_katalog(n: usize, crd: &str) -> String {
        let mut text = String::from(
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: bundle}\nspec:\n  resources:\n",
        );
        for i in 0..n {
            let crd = if i % 2 == 0 {
                crd.to_string()
            } else {
                format!("./{crd}")
            };
            text.push_str(&format!(
                "    - {{group: g{i}.example.com, kind: W{i}, plural: w{i}s, hub: v1, versions: [v1, v2], crd: {crd}, conversion: {{v2: [{{rename: {{hub: spec.a, spoke: spec.b}}}}]}}}}\n"
            ));
        }
        text
    }

    fn bundle(n: usize) -> String {
        (0..n)
            .map(|i| {
                let version = |name: &str, field: &str, storage: bool| {
                    format!(
                        "    - {{name: {name}, served: true, storage: {storage}, schema: {{openAPIV3Schema: {{type: object, properties: {{spec: {{type: object, properties: {{{field}: {{type: string}}}}}}}}}}}}}}\n"
                    )
                };
                format!(
                    "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: w{i}s.g{i}.example.com}}\nspec:\n  group: g{i}.example.com\n  scope: Namespaced\n  names: {{plural: w{i}s, kind: W{i}}}\n  versions:\n{}{}",
                    version("v1", "a", true),
                    version("v2", "b", false)
                )
            })
            .collect()
    }

    /// Every resource names the same bundle: it is read once per compile
    /// (it was read, and parsed, once per resource: quadratic).
    #[test]
    fn one_bundle_is_read_once_for_every_resource() {
        let n = 5;
        let text = bundle(n);
        let mut reads = Vec::new();
        let ir = compile_with_crds(
            &[Source::new(
                "k/katalog.yaml",
                bundled_katalog(n, "crds.yaml"),
            )],
            |reference| {
                reads.push(reference.path());
                Ok(vec![Source::new("k/crds.yaml", text.as_str())])
            },
        )
        .unwrap_or_else(|d| panic!("{}", d.render()));
        assert_eq!(ir.rules.len(), n);
        assert_eq!(reads, [std::path::Path::new("k/crds.yaml")]);
    }

    /// A bundle that does not parse is reported at every `crd:` key that
    /// names it, though read and parsed once.
    #[test]
    fn a_broken_bundle_is_reported_at_every_key() {
        let mut reads = 0;
        let d = compile_with_crds(
            &[Source::new("katalog.yaml", bundled_katalog(3, "crds.yaml"))],
            |_| {
                reads += 1;
                Ok(vec![Source::new("crds.yaml", "a: [\n")])
            },
        )
        .unwrap_err();
        assert_eq!(reads, 1);
        let at: Vec<_> =
            d.0.iter()
                .map(|d| (d.loc.as_ref().map(|l| l.line), d.message.as_str()))
                .collect();
        assert_eq!(at.len(), 3, "{at:?}");
        assert!(
            at.iter()
                .all(|(_, m)| m.starts_with("failed to parse CRD file crds.yaml:1:4: ")),
            "{at:?}"
        );
    }
}
