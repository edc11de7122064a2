//! Stage 1: text → located YAML tree → typed documents, collecting every error.
//!
//! Each rule is deserialized on its own, so one mistyped rule does not hide
//! the mistakes in the others.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Diagnostic, Diagnostics, ErrorKind, did_you_mean};
use crate::front::document::{API_VERSION, KIND, KatalogDocument, Rule};
use crate::front::source::{DocPath, DocStep, Loc, Node, NodeKind, Source};

mod decode;

use decode::Mask;

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
    pub validations: Vec<(usize, crate::front::document::Validation)>,
    pub mutations: Vec<(usize, crate::front::document::Mutation)>,
}

impl LoadedDocument {
    /// The location of a place in this document (the key, for a map key).
    pub fn locate(&self, path: &DocPath) -> Loc {
        locate(&self.source, &self.root, path)
    }

    /// Where a diagnostic of `kind` about `path` points (see [`locate_for`]).
    pub fn locate_for(&self, kind: ErrorKind, path: &DocPath) -> Loc {
        locate_for(&self.source, &self.root, kind, path)
    }
}

pub(crate) fn locate(source: &Source, root: &Node, path: &DocPath) -> Loc {
    let node = root.key_node(path).unwrap_or_else(|| root.walk(path).0);
    loc_of(source, node)
}

/// Where a diagnostic of `kind` about `path` points: at the key when the
/// key itself is wrong (unknown, declared twice) or its value is a map or
/// a list (the caret then marks which entry), and at the value when the
/// value is a scalar — the bad value, not the key that holds it.
pub(crate) fn locate_for(source: &Source, root: &Node, kind: ErrorKind, path: &DocPath) -> Loc {
    let about_the_key = matches!(kind, ErrorKind::UnknownKey | ErrorKind::Duplicate);
    if !about_the_key {
        let (node, found) = root.walk(path);
        if found && node.is_scalar() {
            return loc_of(source, node);
        }
    }
    locate(source, root, path)
}

fn loc_of(source: &Source, node: &Node) -> Loc {
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
    crate::front::yaml::read_documents(&source.text).map_err(|e| {
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
        let loc = locate_for(self.source, self.root, kind, at);
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

    /// Decode `node` (found at `at`, read with `mask`) as `T`, turning a
    /// serde error into a located diagnostic.
    pub(crate) fn decode_node<'a, T: serde::Deserialize<'a>>(
        &mut self,
        node: &'a Node,
        mask: Mask<'a>,
        at: &DocPath,
    ) -> Option<T> {
        match decode::decode(node, mask) {
            Ok(t) => Some(t),
            Err((below, e)) => {
                let mut path = at.clone();
                path.0.extend(below.0);
                self.serde_error(&path, &e.to_string());
                None
            }
        }
    }

    fn serde_error(&mut self, path: &DocPath, message: &str) {
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let name = rest.split('`').next().unwrap_or("");
            let expected = backticked(rest.split_once("expected").map_or("", |x| x.1));
            let key_path = path.key(name.to_string());
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
            let at = if path
                .0
                .last()
                .is_some_and(|s| matches!(s, DocStep::Key(k) if *k == name))
            {
                path.clone()
            } else {
                path.key(name.to_string())
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
        if message.starts_with("data did not match any variant of untagged enum PodControllers") {
            let (node, found) = self.root.walk(path);
            let value = found.then(|| node.to_value());
            let shown = value
                .as_ref()
                .map_or("this".to_string(), crate::common::json::show);
            let kinds = crate::admission::autogen::CONTROLLERS
                .iter()
                .map(|(k, ..)| *k)
                .collect::<Vec<_>>()
                .join(", ");
            let help = match &value {
                Some(Value::String(k)) => {
                    format!("a list, even of one kind: `podControllers: [{k}]`")
                }
                _ => format!("e.g. `podControllers: [Deployment, CronJob]`; the kinds are {kinds}"),
            };
            self.error(
                ErrorKind::Shape,
                path,
                format!("`podControllers` is `true`, `false` or a list of pod controller kinds, not {shown}"),
            )
            .help = Some(help);
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
    Vec<(usize, crate::front::document::Validation)>,
    Vec<(usize, crate::front::document::Mutation)>,
);
/// A document's typed parts: the document, the kept rules' and resources'
/// original indices, the admission rules.
type Decoded = (KatalogDocument, RuleIndices, Vec<usize>, AdmissionRules);

fn load_document(source: &Source, root: &Node, diags: &mut Diagnostics) -> Option<Decoded> {
    let mut ctx = Ctx {
        source,
        root,
        diags,
    };
    let top = DocPath::default();
    if !header_ok(&mut ctx) {
        return None;
    }
    let spec = decode::member(root, "spec").filter(|s| matches!(s.kind, NodeKind::Map(_)));
    let resource_list = spec
        .and_then(|s| decode::member(s, "resources"))
        .and_then(|r| match &r.kind {
            NodeKind::Seq(items) => Some(items),
            _ => None,
        });
    let resources_at = top.key("spec").key("resources");
    // Each rule is decoded (and reported) on its own.
    let mut rules: Vec<(usize, String, Vec<Option<Rule>>)> = Vec::new();
    let mut not_lists = Vec::new();
    for (ri, resource) in resource_list.into_iter().flatten().enumerate() {
        let Some(NodeKind::Map(conv)) = decode::member(resource, "conversion").map(|c| &c.kind)
        else {
            continue;
        };
        for (version, list) in decode::entries(conv) {
            let base = resources_at
                .index(ri)
                .key("conversion")
                .key(version.to_string());
            let items = match &list.kind {
                NodeKind::Seq(items) => items,
                NodeKind::Null => continue,
                _ => {
                    not_a_list(&mut ctx, list);
                    not_lists.push(ri);
                    continue;
                }
            };
            let decoded = items
                .iter()
                .enumerate()
                .map(|(i, item)| ctx.decode_node::<Rule>(item, Mask::None, &base.index(i)))
                .collect();
            rules.push((ri, version.to_string(), decoded));
        }
    }
    // Decode metadata and each resource on their own too, so a mistake in
    // one does not hide the mistakes in the others.
    let metadata = decode::member(root, "metadata")
        .and_then(|m| ctx.decode_node(m, Mask::None, &top.key("metadata")));
    let resources: Vec<Option<crate::front::document::Resource>> = resource_list
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let r = ctx.decode_node(r, Mask::Resource, &resources_at.index(i));
            r.filter(|_| !not_lists.contains(&i))
        })
        .collect();
    let admission = spec
        .and_then(|s| decode::member(s, "admission"))
        .filter(|a| matches!(a.kind, NodeKind::Map(_)));
    let admission_at = top.key("spec").key("admission");
    let validations = decode_each(&mut ctx, admission, &admission_at, "validations");
    let mutations = decode_each(&mut ctx, admission, &admission_at, "mutations");
    let placeholder = Node {
        line: 0,
        column: 0,
        kind: NodeKind::Map(vec![(
            Node {
                line: 0,
                column: 0,
                kind: NodeKind::String("name".into()),
                defined_at: None,
            },
            Node {
                line: 0,
                column: 0,
                kind: NodeKind::String(String::new()),
                defined_at: None,
            },
        )]),
        defined_at: None,
    };
    let doc = ctx.decode_node::<KatalogDocument>(
        root,
        Mask::Document {
            placeholder: &placeholder,
        },
        &top,
    );
    assemble(doc, metadata, resources, rules, (validations, mutations))
}

/// Decode each element of the list at `key` of `admission` on its own.
fn decode_each<'a, T: serde::Deserialize<'a>>(
    ctx: &mut Ctx,
    admission: Option<&'a Node>,
    at: &DocPath,
    key: &'static str,
) -> Vec<(usize, T)> {
    let items = match admission
        .and_then(|a| decode::member(a, key))
        .map(|l| &l.kind)
    {
        Some(NodeKind::Seq(items)) => items.as_slice(),
        _ => &[],
    };
    let at = at.key(key);
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            ctx.decode_node(item, Mask::None, &at.index(i))
                .map(|t| (i, t))
        })
        .collect()
}

/// `apiVersion` and `kind` checked before anything else is decoded; false
/// when the document is not a Katalog at all.
fn header_ok(ctx: &mut Ctx) -> bool {
    let top = DocPath::default();
    let NodeKind::Map(_) = ctx.root.kind else {
        ctx.error(
            ErrorKind::Shape,
            &top,
            "a Katalog document must be a map with apiVersion, kind, metadata and spec".into(),
        );
        return false;
    };
    match ctx.root.get("apiVersion").map(Node::to_value) {
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
    match ctx.root.get("kind").map(Node::to_value) {
        Some(Value::String(v)) if v == KIND => {}
        Some(v) => {
            ctx.error(
                ErrorKind::Shape,
                &top.key("kind"),
                format!("expected kind `{KIND}`, found {v}"),
            )
            .help = Some("only Katalog documents belong in a Katalog file or directory".into());
            return false;
        }
        None => {}
    }
    true
}

/// A `conversion.<version>` that is neither a list nor empty: reported at
/// the value, by what it is.
fn not_a_list(ctx: &mut Ctx, list: &Node) {
    let message = match decode::decode::<Vec<serde::de::IgnoredAny>>(list, Mask::None) {
        Ok(_) => return,
        Err((_, e)) => e
            .to_string()
            .replace("invalid type: ", "wrong type: found "),
    };
    let loc = Loc {
        file: ctx.source.name.clone(),
        line: list.line,
        column: list.column,
    };
    ctx.diags.push(
        Diagnostic::new(ErrorKind::Shape, message)
            .at(loc, Some(ctx.source))
            .with_help("write the rules as a list: `- rename: {hub: a, spoke: b}`"),
    );
}

/// The typed document with the parts decoded on their own put in.
fn assemble(
    doc: Option<KatalogDocument>,
    metadata: Option<crate::front::document::Metadata>,
    resources: Vec<Option<crate::front::document::Resource>>,
    rules: Vec<(usize, String, Vec<Option<Rule>>)>,
    admission: AdmissionRules,
) -> Option<Decoded> {
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
    Some((doc, indices, resource_indices, admission))
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

    /// [`CrdReference::path`] without its `.` parts: the one key of a file
    /// or directory however it is named (`crds.yaml` and `./crds.yaml` are
    /// one), for reading each once.
    pub fn key(&self) -> std::path::PathBuf {
        self.path()
            .components()
            .filter(|c| *c != std::path::Component::CurDir)
            .collect()
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

    /// The document decoded the way it was before [`decode`]: the tree
    /// turned into a `serde_json::Value`, the parts decoded on their own
    /// taken out of it, then `serde_json`'s deserializer (kept as the
    /// reference the new decode must agree with).
    mod by_value {
        use super::super::*;

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

        pub(super) fn load_document(
            source: &Source,
            root: &Node,
            diags: &mut Diagnostics,
        ) -> Option<Decoded> {
            let mut ctx = Ctx {
                source,
                root,
                diags,
            };
            let top = DocPath::default();
            if !header_ok(&mut ctx) {
                return None;
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
                            Value::Null => continue,
                            _ => {
                                let node = ["spec", "resources", "conversion", version]
                                    .iter()
                                    .enumerate()
                                    .try_fold(root, |node, (step, key)| match (step, &node.kind) {
                                        (2, NodeKind::Seq(items)) => {
                                            decode::member(items.get(ri)?, key)
                                        }
                                        _ => decode::member(node, key),
                                    });
                                if let Some(node) = node {
                                    not_a_list(&mut ctx, node);
                                }
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
            let metadata = value.get_mut("metadata").map(std::mem::take).and_then(|m| {
                ctx.decode::<crate::front::document::Metadata>(m, &top.key("metadata"))
            });
            let resources: Vec<Option<crate::front::document::Resource>> =
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
            assemble(doc, metadata, resources, rules, (validations, mutations))
        }
    }

    /// What loading one document gives, as text: the typed parts and the
    /// diagnostics.
    fn outcome(
        load: fn(&Source, &Node, &mut Diagnostics) -> Option<Decoded>,
        source: &Source,
        root: &Node,
    ) -> String {
        let mut diags = Diagnostics::default();
        let loaded = load(source, root, &mut diags);
        format!("{loaded:#?}\n{diags:#?}")
    }

    fn assert_agreed(disagreements: &[String]) {
        assert!(
            disagreements.is_empty(),
            "{} disagreements:\n{}",
            disagreements.len(),
            disagreements.join("\n\n")
        );
    }

    /// The decode from the tree against the reference; `None` when they agree.
    fn disagreement(source: &Source, root: &Node) -> Option<String> {
        let new = outcome(load_document, source, root);
        let old = outcome(by_value::load_document, source, root);
        (new != old).then(|| format!("{}:\nfrom the tree:\n{new}\nby value:\n{old}", source.name))
    }

    /// Replace the `target`-th node (in document order, keys excluded) by
    /// `with`; for a map node, `None` renames its first key and repeats its
    /// last entry instead.
    fn mutate(node: &mut Node, target: usize, seen: &mut usize, with: Option<&NodeKind>) -> bool {
        if *seen == target {
            match (with, &mut node.kind) {
                (Some(kind), _) => node.kind = kind.clone(),
                (None, NodeKind::Map(entries)) if !entries.is_empty() => {
                    let last = entries[entries.len() - 1].clone();
                    entries[0].0.kind = NodeKind::String("bogus".into());
                    entries.push(last);
                }
                (None, NodeKind::Seq(items)) => items.push(Node {
                    line: node.line,
                    column: node.column,
                    kind: NodeKind::Null,
                    defined_at: None,
                }),
                (None, _) => {
                    node.kind = NodeKind::Number(serde_json::Number::from_f64(1.5).unwrap())
                }
            }
            return true;
        }
        *seen += 1;
        match &mut node.kind {
            NodeKind::Seq(items) => items.iter_mut().any(|n| mutate(n, target, seen, with)),
            NodeKind::Map(entries) => entries
                .iter_mut()
                .any(|(_, v)| mutate(v, target, seen, with)),
            _ => false,
        }
    }

    fn count(node: &Node) -> usize {
        1 + match &node.kind {
            NodeKind::Seq(items) => items.iter().map(count).sum(),
            NodeKind::Map(entries) => entries.iter().map(|(_, v)| count(v)).sum(),
            _ => 0,
        }
    }

    /// Every Katalog of the repository (the ones that fail to compile
    /// included), and many broken variants of each: the decode from the
    /// tree gives what decoding the `serde_json::Value` gave, the same
    /// document and the same diagnostics at the same places.
    #[test]
    fn decoding_from_the_tree_agrees_with_decoding_the_value() {
        let files = crate::front::yaml::repository_yaml_files();
        let replacements = [
            Some(NodeKind::Null),
            Some(NodeKind::String("x".into())),
            Some(NodeKind::Number((-7).into())),
            Some(NodeKind::Bool(true)),
            Some(NodeKind::Seq(Vec::new())),
            Some(NodeKind::Map(Vec::new())),
            None,
        ];
        let mut katalogs = 0;
        let mut variants = 0;
        let mut wrong = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let source = Source::new(file.display().to_string(), text);
            let Ok(roots) = read_yaml(&source) else {
                continue;
            };
            for root in roots {
                if root.get("kind").and_then(|k| match &k.kind {
                    NodeKind::String(s) => Some(s.as_str()),
                    _ => None,
                }) != Some(KIND)
                {
                    continue;
                }
                katalogs += 1;
                wrong.extend(disagreement(&source, &root));
                let n = count(&root);
                for target in (0..n).step_by(n / 40 + 1) {
                    for with in &replacements {
                        let mut variant = root.clone();
                        if mutate(&mut variant, target, &mut 0, with.as_ref()) {
                            variants += 1;
                            wrong.extend(disagreement(&source, &variant));
                        }
                    }
                }
            }
        }
        assert!(katalogs > 40, "found {katalogs} Katalogs");
        assert!(variants > 5000, "made {variants} variants");
        assert_agreed(&wrong);
    }

    /// Documents written to hit the decode's corners.
    #[test]
    fn decoding_from_the_tree_agrees_on_the_corners() {
        let head = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\n";
        let res = "spec:\n  resources:\n    - {group: g.io, kind: W, plural: ws, hub: v1, versions: [v1, v2]";
        let cases = [
            format!("{head}spec: {{}}\n"),
            format!("{head}spec: []\n"),
            format!("{head}spec: {{resources: ~}}\n"),
            format!("{head}spec: {{resources: x}}\n"),
            format!("{head}spec: {{resources: [x, {{}}]}}\n"),
            format!("{head}spec: {{admission: {{validations: x, mutations: ~}}}}\n"),
            format!("{head}spec: {{admission: x}}\n"),
            format!("{head}{res}, conversion: {{v2: x}}}}\n"),
            format!("{head}{res}, conversion: {{v2: 1.5}}}}\n"),
            format!("{head}{res}, conversion: {{v2: {{rename: x}}}}}}\n"),
            format!("{head}{res}, conversion: {{v2: ~}}}}\n"),
            format!("{head}{res}, conversion: {{v2: [rename, {{rename: {{hub: a}}}}, {{renme: 1}}, {{rename: {{}}, stash: {{}}}}, {{}}]}}}}\n"),
            format!("{head}{res}, conversion: {{v2: [{{split: {{hub: a, spoke: 1}}}}, {{split: {{hub: a, spoke: {{x: 1}}}}}}]}}}}\n"),
            format!("{head}{res}, conversion: x, scope: Galaxy}}\n"),
            format!("{head}{res}, scope: [Cluster]}}\n"),
            format!("{head}{res}, scope: {{Cluster: ~}}}}\n"),
            format!("{head}{res}, scope: {{Cluster: 1}}}}\n"),
            format!("{head}{res}, scope: {{Cluster: 1, Namespaced: 2}}}}\n"),
            // `on` and `true` are two keys to the YAML reader, one in JSON.
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t, labels: {on: a, b: c, true: d}}\nspec: {}\n".to_string(),
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t, on: a, true: d}\nspec: {}\n".to_string(),
            format!("{head}{res}, conversion: {{v2: [{{on: 1, true: 2}}, {{on: 1, true: 2, false: 3}}]}}}}\n"),
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nspec: {}\n".to_string(),
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: 1, x: 2}\nspec: {}\nextra: 1\n".to_string(),
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: []\nspec: {admission: {timeoutSeconds: 300, failurePolicy: fail, validations: [{name: a, resources: [v1/pods], check: {range: [1, 2, 3], minimum: x}}, {name: b, resources: v1/pods, check: {in: 1}, podControllers: [1]}, {name: c, resources: [v1/pods], check: {}, podControllers: maybe, quantifier: every}]}}\n".to_string(),
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: m}\nspec: {admission: {mutations: [{name: a, resources: [v1/pods], set: {path: a}}, {name: b, resources: [v1/pods], set: {path: a, value: ~}, jsonPatch: {}}, {name: c, resources: [v1/pods], match: {operations: [create], namespaces: {include: x}}}]}}\n".to_string(),
        ];
        let mut wrong = Vec::new();
        for (i, text) in cases.iter().enumerate() {
            let source = Source::new(format!("case-{i}.yaml"), text.as_str());
            let roots = read_yaml(&source).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            for root in &roots {
                wrong.extend(disagreement(&source, root));
            }
        }
        assert_agreed(&wrong);
    }

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
