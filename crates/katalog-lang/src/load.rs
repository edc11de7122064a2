//! Stage 1: text → located YAML tree → typed documents, collecting every error.
//!
//! Each rule is deserialized on its own, so one mistyped rule does not hide
//! the mistakes in the others.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::document::{API_VERSION, KIND, KatalogDocument, Rule};
use crate::error::{Diagnostic, Diagnostics, ErrorKind, did_you_mean};
use crate::source::{DocPath, DocStep, Loc, Node, NodeKind, Source};

/// One loaded YAML document with its located tree.
#[derive(Clone, Debug)]
pub struct LoadedDocument {
    pub source: Source,
    pub root: Node,
    pub doc: KatalogDocument,
    /// For each (resource index, version) whose rule list lost rules that did
    /// not decode: the original index of each kept rule.
    pub rule_indices: std::collections::BTreeMap<(usize, String), Vec<usize>>,
    /// The original index of each kept resource (a resource that did not
    /// decode is left out).
    pub resource_indices: Vec<usize>,
    /// Admission rules with their original index (`spec.admission.validations[i]`).
    pub validations: Vec<(usize, crate::document::Validation)>,
    pub mutations: Vec<(usize, crate::document::Mutation)>,
}

impl LoadedDocument {
    /// The location of a place in this document (the key, for a map key).
    pub fn locate(&self, path: &DocPath) -> Loc {
        locate(&self.source, &self.root, path)
    }
}

pub(crate) fn locate(source: &Source, root: &Node, path: &DocPath) -> Loc {
    let node = root.key_node(path).unwrap_or_else(|| root.walk(path).0);
    Loc {
        file: source.name.clone(),
        line: node.line,
        column: node.column,
    }
}

/// Everything loaded from a set of sources.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub documents: Vec<LoadedDocument>,
}

/// Load every YAML document of every source. Returns what could be loaded
/// (a rule that does not decode is left out, so the compiler can still check
/// the rest) and every error found.
pub fn load(sources: &[Source]) -> (Loaded, Diagnostics) {
    let mut diags = Diagnostics::default();
    let mut loaded = Loaded::default();
    for source in sources {
        load_source(source, &mut loaded, &mut diags);
    }
    diags.sort();
    (loaded, diags)
}

fn load_source(source: &Source, loaded: &mut Loaded, diags: &mut Diagnostics) {
    let roots = match read_yaml(source) {
        Ok(r) => r,
        Err(errors) => {
            for d in errors.0 {
                diags.push(d);
            }
            return;
        }
    };
    let mut any = false;
    for root in roots {
        if matches!(root.kind, NodeKind::Null) {
            continue;
        }
        any = true;
        if let Some((doc, rule_indices, resource_indices, admission)) =
            load_document(source, &root, diags)
        {
            loaded.documents.push(LoadedDocument {
                source: source.clone(),
                root,
                doc,
                rule_indices,
                resource_indices,
                validations: admission.0,
                mutations: admission.1,
            });
        }
    }
    if !any {
        diags.push(
            Diagnostic::new(ErrorKind::Shape, "the file holds no Katalog document").at(
                Loc {
                    file: source.name.clone(),
                    line: 1,
                    column: 1,
                },
                Some(source),
            ),
        );
    }
}

/// The documents of a source, read as kubectl reads YAML, or the located
/// reason they cannot be.
pub(crate) fn read_yaml(source: &Source) -> Result<Vec<Node>, Diagnostics> {
    crate::yaml::read_documents(&source.text).map_err(|e| {
        let mut d = Diagnostic::new(
            ErrorKind::Syntax,
            format!("failed to parse YAML: {}", e.message()),
        );
        if let Some((line, column)) = e.position() {
            d = d.at(
                Loc {
                    file: source.name.clone(),
                    line,
                    column,
                },
                Some(source),
            );
        }
        Diagnostics(vec![d])
    })
}

/// Where diagnostics of one YAML document go (shared with [`crate::suite`]).
pub(crate) struct Ctx<'a> {
    pub(crate) source: &'a Source,
    pub(crate) root: &'a Node,
    pub(crate) diags: &'a mut Diagnostics,
}

impl Ctx<'_> {
    pub(crate) fn error(
        &mut self,
        kind: ErrorKind,
        at: &DocPath,
        message: String,
    ) -> &mut Diagnostic {
        let loc = locate(self.source, self.root, at);
        self.diags
            .push(Diagnostic::new(kind, message).at(loc, Some(self.source)));
        let n = self.diags.0.len() - 1;
        &mut self.diags.0[n]
    }

    /// Deserialize `value` (found at `at`) as `T`, turning a serde error into a
    /// located diagnostic.
    pub(crate) fn decode<T: DeserializeOwned>(&mut self, value: Value, at: &DocPath) -> Option<T> {
        match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(t) => Some(t),
            Err(e) => {
                let mut path = at.clone();
                for seg in e.path().iter() {
                    match seg {
                        serde_path_to_error::Segment::Map { key } => path = path.key(key.clone()),
                        serde_path_to_error::Segment::Seq { index } => path = path.index(*index),
                        serde_path_to_error::Segment::Enum { variant } => {
                            path = path.key(variant.clone())
                        }
                        serde_path_to_error::Segment::Unknown => {}
                    }
                }
                self.serde_error(&path, &e.into_inner().to_string());
                None
            }
        }
    }

    fn serde_error(&mut self, path: &DocPath, message: &str) {
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let name = rest.split('`').next().unwrap_or("");
            let expected = backticked(rest.split_once("expected").map_or("", |x| x.1));
            let key_path = path.key(name);
            let at = if self.root.key_node(&key_path).is_some() {
                key_path
            } else {
                path.clone()
            };
            let help = match did_you_mean(name, expected.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None if expected.is_empty() => "remove it".to_string(),
                None => format!("expected one of {}", list(&expected)),
            };
            let d = self.error(ErrorKind::UnknownKey, &at, format!("unknown key `{name}`"));
            d.help = Some(help);
            return;
        }
        if let Some(rest) = message.strip_prefix("unknown variant `") {
            let name = rest.split('`').next().unwrap_or("");
            let expected = backticked(rest.split_once("expected").map_or("", |x| x.1));
            // The path ends with the variant name when serde got that far.
            let at = if path.0.last() == Some(&DocStep::Key(name.to_string())) {
                path.clone()
            } else {
                path.key(name)
            };
            let what = if at
                .0
                .iter()
                .any(|s| matches!(s, DocStep::Key(k) if k == "conversion" || k == "rules"))
            {
                "rule kind"
            } else {
                "value"
            };
            let help = match did_you_mean(name, expected.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("expected one of {}", list(&expected)),
            };
            let d = self.error(
                ErrorKind::UnknownKey,
                &at,
                format!("unknown {what} `{name}`"),
            );
            d.help = Some(help);
            return;
        }
        if let Some(rest) = message.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or("");
            self.error(
                ErrorKind::Shape,
                path,
                format!("missing required key `{name}`"),
            )
            .help = Some(format!("add `{name}:` here"));
            return;
        }
        if message.starts_with("data did not match any variant of untagged enum Parts") {
            self.error(
                ErrorKind::Shape,
                path,
                "expected a path (list form), a list of paths (fields) or a map of capture name to path"
                    .into(),
            );
            return;
        }
        let msg = message
            .replace("invalid type: ", "wrong type: found ")
            .replace("invalid value: ", "wrong value: found ");
        self.error(ErrorKind::Shape, path, msg);
    }
}

fn backticked(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

type RuleIndices = std::collections::BTreeMap<(usize, String), Vec<usize>>;
type AdmissionRules = (
    Vec<(usize, crate::document::Validation)>,
    Vec<(usize, crate::document::Mutation)>,
);

/// Take the list at `pointer` out of `value` and decode each element on its own.
fn decode_each<T: DeserializeOwned>(
    ctx: &mut Ctx,
    value: &mut Value,
    pointer: &str,
    at: &DocPath,
) -> Vec<(usize, T)> {
    let Some(Value::Array(items)) = value.pointer_mut(pointer).map(std::mem::take) else {
        if let Some(slot) = value.pointer_mut(pointer) {
            *slot = Value::Array(Vec::new());
        }
        return Vec::new();
    };
    if let Some(slot) = value.pointer_mut(pointer) {
        *slot = Value::Array(Vec::new());
    }
    items
        .into_iter()
        .enumerate()
        .filter_map(|(i, item)| ctx.decode::<T>(item, &at.index(i)).map(|t| (i, t)))
        .collect()
}

fn load_document(
    source: &Source,
    root: &Node,
    diags: &mut Diagnostics,
) -> Option<(KatalogDocument, RuleIndices, Vec<usize>, AdmissionRules)> {
    let mut ctx = Ctx {
        source,
        root,
        diags,
    };
    let top = DocPath::default();
    let NodeKind::Map(_) = root.kind else {
        ctx.error(
            ErrorKind::Shape,
            &top,
            "a Katalog document must be a map with apiVersion, kind, metadata and spec".into(),
        );
        return None;
    };
    match root.get("apiVersion").map(Node::to_value) {
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(v) => {
            ctx.error(
                ErrorKind::Shape,
                &top.key("apiVersion"),
                format!("unsupported apiVersion {v}"),
            )
            .help = Some(format!("use `apiVersion: {API_VERSION}`"));
        }
        None => {}
    }
    match root.get("kind").map(Node::to_value) {
        Some(Value::String(v)) if v == KIND => {}
        Some(v) => {
            ctx.error(
                ErrorKind::Shape,
                &top.key("kind"),
                format!("expected kind `{KIND}`, found {v}"),
            )
            .help = Some("only Katalog documents belong in a Katalog file or directory".into());
            return None;
        }
        None => {}
    }

    // Take the rule lists out so each rule is decoded (and reported) on its own.
    let mut value = root.to_value();
    let mut rules: Vec<(usize, String, Vec<Option<Rule>>)> = Vec::new();
    let mut not_lists = Vec::new();
    if let Some(resources) = value
        .pointer_mut("/spec/resources")
        .and_then(Value::as_array_mut)
    {
        for (ri, resource) in resources.iter_mut().enumerate() {
            let Some(conv) = resource
                .get_mut("conversion")
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            for (version, list) in conv.iter_mut() {
                let items = match std::mem::take(list) {
                    Value::Array(items) => items,
                    // Left for the typed decode to report.
                    Value::Null => continue,
                    other => {
                        let at = DocPath::default()
                            .key("spec")
                            .key("resources")
                            .index(ri)
                            .key("conversion")
                            .key(version.clone());
                        not_a_list(&mut ctx, other, root.walk(&at).0);
                        not_lists.push(ri);
                        *list = Value::Array(Vec::new());
                        continue;
                    }
                };
                *list = Value::Array(Vec::new());
                let base = top
                    .key("spec")
                    .key("resources")
                    .index(ri)
                    .key("conversion")
                    .key(version.clone());
                let decoded = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| ctx.decode::<Rule>(item, &base.index(i)))
                    .collect();
                rules.push((ri, version.clone(), decoded));
            }
        }
    }
    // Decode metadata and each resource on their own too, so a mistake in
    // one does not hide the mistakes in the others.
    let metadata = value
        .get_mut("metadata")
        .map(std::mem::take)
        .and_then(|m| ctx.decode::<crate::document::Metadata>(m, &top.key("metadata")));
    let resources: Vec<Option<crate::document::Resource>> =
        match value.pointer_mut("/spec/resources").map(std::mem::take) {
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    ctx.decode(r, &top.key("spec").key("resources").index(i))
                        .filter(|_| !not_lists.contains(&i))
                })
                .collect(),
            Some(other) => {
                // Put it back so the typed decode reports its shape.
                if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.insert("resources".into(), other);
                }
                Vec::new()
            }
            None => Vec::new(),
        };
    if let Some(m) = value.as_object_mut() {
        if m.contains_key("metadata") || metadata.is_some() {
            m.insert("metadata".into(), serde_json::json!({"name": ""}));
        }
        if let Some(Value::Object(spec)) = m.get_mut("spec")
            && spec.get("resources").is_none_or(Value::is_null)
        {
            spec.insert("resources".into(), Value::Array(Vec::new()));
        }
    }
    let admission_at = top.key("spec").key("admission");
    let validations = decode_each(
        &mut ctx,
        &mut value,
        "/spec/admission/validations",
        &admission_at.key("validations"),
    );
    let mutations = decode_each(
        &mut ctx,
        &mut value,
        "/spec/admission/mutations",
        &admission_at.key("mutations"),
    );
    let doc = ctx.decode::<KatalogDocument>(value, &top);
    let mut doc = doc?;
    doc.metadata = metadata?;
    let resource_indices: Vec<usize> = (0..resources.len())
        .filter(|i| resources[*i].is_some())
        .collect();
    doc.spec.resources = resources.into_iter().flatten().collect();
    let mut indices = RuleIndices::new();
    for (ri, version, decoded) in rules {
        let kept: Vec<usize> = (0..decoded.len())
            .filter(|i| decoded[*i].is_some())
            .collect();
        if kept.len() < decoded.len() {
            indices.insert((ri, version.clone()), kept);
        }
        let list: Vec<Rule> = decoded.into_iter().flatten().collect();
        let Some(pos) = resource_indices.iter().position(|x| *x == ri) else {
            continue;
        };
        if let Some(slot) = doc.spec.resources[pos].conversion.get_mut(&version) {
            *slot = list;
        }
    }
    Some((doc, indices, resource_indices, (validations, mutations)))
}

/// A `conversion.<version>` that is neither a list nor empty: reported at
/// the value, by what it is (the typed decode would find it emptied).
fn not_a_list(ctx: &mut Ctx, value: Value, node: &Node) {
    let message = match serde_json::from_value::<Vec<serde::de::IgnoredAny>>(value) {
        Ok(_) => return,
        Err(e) => e
            .to_string()
            .replace("invalid type: ", "wrong type: found "),
    };
    let loc = Loc {
        file: ctx.source.name.clone(),
        line: node.line,
        column: node.column,
    };
    ctx.diags.push(
        Diagnostic::new(ErrorKind::Shape, message)
            .at(loc, Some(ctx.source))
            .with_help("write the rules as a list: `- rename: {hub: a, spoke: b}`"),
    );
}

/// A resource's `crd:` key: the CRD manifest file or directory it names,
/// for the caller to read (this crate does no I/O).
#[derive(Clone, Debug)]
pub struct CrdReference {
    pub group: String,
    pub kind: String,
    /// The text of the `crd:` key, relative to the Katalog file.
    pub crd: String,
    /// The Katalog source holding the key (its name is the base path).
    pub source: Source,
    /// Where the `crd:` key is.
    pub loc: Loc,
}

impl CrdReference {
    /// The path to read: `crd` relative to the directory of the Katalog
    /// file (an absolute `crd` stays as it is).
    pub fn path(&self) -> std::path::PathBuf {
        let base = std::path::Path::new(&*self.source.name)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        base.join(&self.crd)
    }
}

/// Every `crd:` key of the loaded documents, in source order.
pub fn crd_references(loaded: &Loaded) -> Vec<CrdReference> {
    references(loaded, false)
}

/// A reference for every resource of the loaded documents, in source
/// order: what `--live` reads from a cluster. A resource without a `crd:`
/// key has an empty `crd` and is located at its `kind:` key.
pub fn resource_references(loaded: &Loaded) -> Vec<CrdReference> {
    references(loaded, true)
}

fn references(loaded: &Loaded, every: bool) -> Vec<CrdReference> {
    let mut out = Vec::new();
    for doc in &loaded.documents {
        for (pos, resource) in doc.doc.spec.resources.iter().enumerate() {
            let ri = doc.resource_indices.get(pos).copied().unwrap_or(pos);
            let at = DocPath::default().key("spec").key("resources").index(ri);
            let (crd, at) = match &resource.crd {
                Some(crd) => (crd.clone(), at.key("crd")),
                None if every => (String::new(), at.key("kind")),
                None => continue,
            };
            out.push(CrdReference {
                group: resource.group.clone(),
                kind: resource.kind.clone(),
                crd,
                source: doc.source.clone(),
                loc: doc.locate(&at),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A non-list under `conversion.<version>` says what it is, at the value.
    #[test]
    fn a_conversion_that_is_not_a_list_is_reported_at_the_value() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\nspec:\n  resources:\n    - group: g.io\n      kind: W\n      plural: ws\n      hub: v1\n      versions: [v1, v2]\n      conversion:\n        v2: {rename: {hub: a, spoke: b}}\n";
        let (_, diags) = load(&[Source::new("t.yaml", text)]);
        let d = &diags.0[0];
        assert_eq!(
            (
                d.message.as_str(),
                d.loc.as_ref().map(|l| (l.line, l.column))
            ),
            ("wrong type: found map, expected a sequence", Some((12, 13)))
        );
        assert_eq!(diags.0.len(), 1, "{diags:?}");
    }
}
