//! CRD schemas: the structural schema of each version of a
//! CustomResourceDefinition, and the lookup of a Katalog [`Path`] in it.
//!
//! Pure: the caller reads the files the Katalog's `crd:` keys name (see
//! [`crate::front::load::crd_references`]) and hands their text over as
//! [`Source`]s; [`Schemas::load`] parses them.
//!
//! Some subtrees are *opaque units*: a free-form map (`additionalProperties`),
//! an `x-kubernetes-preserve-unknown-fields` subtree, a `oneOf`/`anyOf`/`allOf`
//! and the parts of `metadata` the apiserver manages. A path into an opaque
//! unit is accepted and reported as [`Lookup::Opaque`], naming the unit and
//! why it is opaque; the analyses claim such a unit whole or not at all.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::common::path::{Path, Segment};
use crate::error::{Diagnostic, Diagnostics, ErrorKind, did_you_mean};
use crate::front::document::Scope;
use crate::front::load::CrdReference;
use crate::front::source::{Loc, Source};

/// Why a subtree is an opaque unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opacity {
    PreserveUnknownFields,
    AdditionalProperties,
    OneOf,
    AnyOf,
    AllOf,
    /// `metadata` fields the apiserver manages (ownerReferences, managedFields, ...).
    ObjectMeta,
}

impl Opacity {
    /// The schema keyword, as diagnostics name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Opacity::PreserveUnknownFields => "x-kubernetes-preserve-unknown-fields",
            Opacity::AdditionalProperties => "additionalProperties",
            Opacity::OneOf => "oneOf",
            Opacity::AnyOf => "anyOf",
            Opacity::AllOf => "allOf",
            Opacity::ObjectMeta => "ObjectMeta",
        }
    }
}

impl fmt::Display for Opacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    /// A list of objects keyed by `x-kubernetes-list-map-keys`.
    Map(Vec<String>),
}

/// One node of a structural schema.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchemaNode {
    /// `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`);
    /// `None` when the schema does not say (int-or-string, preserved fields).
    pub type_: Option<String>,
    pub format: Option<String>,
    pub nullable: bool,
    pub default: Option<Value>,
    pub enum_values: Vec<Value>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    /// `exclusiveMinimum: true`: the value must be greater than `minimum`.
    pub exclusive_minimum: bool,
    /// `exclusiveMaximum: true`: the value must be less than `maximum`.
    pub exclusive_maximum: bool,
    pub pattern: Option<String>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub multiple_of: Option<f64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub int_or_string: bool,
    pub embedded_resource: bool,
    pub list_type: Option<ListType>,
    pub required: Vec<String>,
    pub properties: BTreeMap<String, SchemaNode>,
    /// The element schema of an array.
    pub items: Option<Box<SchemaNode>>,
    /// The value schema of a free-form map (`additionalProperties: true` is an
    /// empty node).
    pub additional_properties: Option<Box<SchemaNode>>,
    /// Set when this node is an opaque unit.
    pub opaque: Option<Opacity>,
}

impl SchemaNode {
    /// The schema of a CRD version's `openAPIV3Schema`. The apiserver has
    /// validated it, so what this reader does not understand is left out
    /// rather than reported.
    pub fn from_openapi(v: &Value) -> SchemaNode {
        let mut n = SchemaNode::default();
        let Some(m) = v.as_object() else {
            return n;
        };
        let str_of = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        let bool_of = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
        n.type_ = str_of("type");
        n.format = str_of("format");
        n.nullable = bool_of("nullable");
        n.default = m.get("default").cloned();
        n.enum_values = m
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        n.minimum = m.get("minimum").and_then(Value::as_f64);
        n.maximum = m.get("maximum").and_then(Value::as_f64);
        n.exclusive_minimum = bool_of("exclusiveMinimum");
        n.exclusive_maximum = bool_of("exclusiveMaximum");
        n.pattern = str_of("pattern");
        n.min_length = m.get("minLength").and_then(Value::as_u64);
        n.max_length = m.get("maxLength").and_then(Value::as_u64);
        n.multiple_of = m.get("multipleOf").and_then(Value::as_f64);
        n.min_items = m.get("minItems").and_then(Value::as_u64);
        n.max_items = m.get("maxItems").and_then(Value::as_u64);
        n.int_or_string = bool_of("x-kubernetes-int-or-string");
        n.embedded_resource = bool_of("x-kubernetes-embedded-resource");
        n.list_type = match m.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("atomic") => Some(ListType::Atomic),
            Some("set") => Some(ListType::Set),
            Some("map") => Some(ListType::Map(
                m.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            )),
            _ => None,
        };
        n.required = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(Value::Object(props)) = m.get("properties") {
            n.properties = props
                .iter()
                .map(|(k, v)| (k.clone(), SchemaNode::from_openapi(v)))
                .collect();
        }
        n.items = m
            .get("items")
            .filter(|i| i.is_object())
            .map(|i| Box::new(SchemaNode::from_openapi(i)));
        n.additional_properties = match m.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Box::default()),
            Some(a @ Value::Object(_)) => Some(Box::new(SchemaNode::from_openapi(a))),
            _ => None,
        };
        n.opaque = if bool_of("x-kubernetes-preserve-unknown-fields") {
            Some(Opacity::PreserveUnknownFields)
        } else if m.contains_key("oneOf") {
            Some(Opacity::OneOf)
        } else if m.contains_key("anyOf") {
            Some(Opacity::AnyOf)
        } else if m.contains_key("allOf") {
            Some(Opacity::AllOf)
        } else if n.additional_properties.is_some() {
            Some(Opacity::AdditionalProperties)
        } else {
            None
        };
        if n.embedded_resource {
            add_object_header(&mut n);
        }
        n
    }

    /// The schema of a whole custom resource: `openAPIV3Schema` plus the
    /// implicit `apiVersion`, `kind` and `metadata` (ObjectMeta).
    pub fn resource(open_api_v3_schema: &Value) -> SchemaNode {
        let mut n = SchemaNode::from_openapi(open_api_v3_schema);
        add_object_header(&mut n);
        n
    }

    fn typed(type_: &str) -> SchemaNode {
        SchemaNode {
            type_: Some(type_.into()),
            ..SchemaNode::default()
        }
    }

    fn string_map() -> SchemaNode {
        SchemaNode {
            type_: Some("object".into()),
            additional_properties: Some(Box::new(SchemaNode::typed("string"))),
            opaque: Some(Opacity::AdditionalProperties),
            ..SchemaNode::default()
        }
    }

    /// The schema of a property, for a key step.
    pub fn property(&self, key: &str) -> Option<&SchemaNode> {
        self.properties.get(key)
    }
}

/// `apiVersion`, `kind` and `metadata`, which every object has and a CRD
/// schema may leave out.
fn add_object_header(n: &mut SchemaNode) {
    n.type_.get_or_insert_with(|| "object".into());
    n.properties
        .entry("apiVersion".into())
        .or_insert_with(|| SchemaNode::typed("string"));
    n.properties
        .entry("kind".into())
        .or_insert_with(|| SchemaNode::typed("string"));
    let meta = n
        .properties
        .entry("metadata".into())
        .or_insert_with(|| SchemaNode::typed("object"));
    // A CRD may only restrict metadata.name and metadata.generateName; the
    // rest is ObjectMeta whatever the schema says.
    meta.opaque = None;
    for key in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
    ] {
        meta.properties
            .entry(key.into())
            .or_insert_with(|| SchemaNode::typed("string"));
    }
    for key in ["creationTimestamp", "deletionTimestamp"] {
        meta.properties
            .entry(key.into())
            .or_insert_with(|| SchemaNode {
                format: Some("date-time".into()),
                ..SchemaNode::typed("string")
            });
    }
    for key in ["generation", "deletionGracePeriodSeconds"] {
        meta.properties
            .entry(key.into())
            .or_insert_with(|| SchemaNode {
                format: Some("int64".into()),
                ..SchemaNode::typed("integer")
            });
    }
    for key in ["labels", "annotations"] {
        meta.properties.insert(key.into(), SchemaNode::string_map());
    }
    meta.properties.insert(
        "finalizers".into(),
        SchemaNode {
            items: Some(Box::new(SchemaNode::typed("string"))),
            list_type: Some(ListType::Set),
            ..SchemaNode::typed("array")
        },
    );
    for key in ["ownerReferences", "managedFields"] {
        meta.properties.insert(
            key.into(),
            SchemaNode {
                opaque: Some(Opacity::ObjectMeta),
                ..SchemaNode::typed("array")
            },
        );
    }
}

/// What a path names in a schema.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup<'s> {
    /// The path names this node.
    Found(&'s SchemaNode),
    /// The path goes into the opaque unit at `at`: accepted, not checked further.
    Opaque { at: Path, why: Opacity },
    /// The key at the end of `at` is not a property of the object at `parent`.
    Missing {
        at: Path,
        parent: Path,
        /// The closest sibling property, as the same path with that key.
        suggestion: Option<Path>,
    },
    /// A step that does not fit the node's type: a key into a list or a
    /// scalar, an index into an object or a scalar.
    WrongShape {
        at: Path,
        expected: &'static str,
        found: String,
    },
}

/// Resolve `path` in `root`.
pub fn lookup<'s>(root: &'s SchemaNode, path: &Path) -> Lookup<'s> {
    let mut node = root;
    let segs = path.segments();
    for (i, seg) in segs.iter().enumerate() {
        let here = Path::from_segments(segs[..i].to_vec());
        let at = || Path::from_segments(segs[..=i].to_vec());
        let found_type = || {
            if node.int_or_string {
                "int-or-string".to_string()
            } else {
                node.type_.clone().unwrap_or_else(|| "untyped".into())
            }
        };
        match seg {
            Segment::Key(k) => {
                if let Some(next) = node.property(k) {
                    node = next;
                    continue;
                }
                if let Some(why) = node.opaque {
                    return Lookup::Opaque { at: here, why };
                }
                if node.type_.as_deref().is_some_and(|t| t != "object") || node.int_or_string {
                    return Lookup::WrongShape {
                        at: at(),
                        expected: "an object",
                        found: found_type(),
                    };
                }
                let suggestion =
                    did_you_mean(k, node.properties.keys().map(String::as_str)).map(|s| {
                        let mut out = segs.to_vec();
                        out[i] = Segment::Key(s.to_string());
                        Path::from_segments(out)
                    });
                return Lookup::Missing {
                    at: at(),
                    parent: here,
                    suggestion,
                };
            }
            Segment::Index(_) | Segment::Wildcard => {
                if let Some(items) = &node.items {
                    node = items;
                    continue;
                }
                if let Some(why) = node.opaque {
                    return Lookup::Opaque { at: here, why };
                }
                if matches!(seg, Segment::Wildcard) && node.type_.as_deref() == Some("object") {
                    // `[*]` over a map's values is checked no further.
                    return Lookup::Opaque {
                        at: here,
                        why: Opacity::AdditionalProperties,
                    };
                }
                return Lookup::WrongShape {
                    at: at(),
                    expected: "a list",
                    found: found_type(),
                };
            }
        }
    }
    Lookup::Found(node)
}

/// Why `path` cannot name a place in `schema` (of the version called
/// `version` in the message), as a message and a help; `None` when it
/// can (found, or inside an opaque unit).
pub fn path_problem(schema: &SchemaNode, path: &Path, version: &str) -> Option<(String, String)> {
    match lookup(schema, path) {
        Lookup::Found(_) | Lookup::Opaque { .. } => None,
        Lookup::Missing {
            at,
            parent,
            suggestion,
        } => {
            let help = match suggestion {
                Some(s) => format!("did you mean `{s}`?"),
                None if parent.is_root() => {
                    "the CRD's schema declares no such top-level field".to_string()
                }
                None => format!("`{parent}` declares no field of that name"),
            };
            let what = if at == *path {
                String::new()
            } else {
                format!(" (`{at}` is not declared)")
            };
            Some((format!("no such field `{path}` in {version}{what}"), help))
        }
        Lookup::WrongShape {
            at,
            expected,
            found,
        } => {
            let parent = Path::from_segments(at.segments()[..at.len() - 1].to_vec());
            Some((
                format!(
                    "`{path}` does not fit the schema of {version}: `{parent}` is {found}, not {expected}"
                ),
                format!("`{parent}` holds {found} values; name a place inside it that exists"),
            ))
        }
    }
}

/// One version of a CRD.
#[derive(Clone, Debug)]
pub struct CrdVersion {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    /// The whole object's schema; `None` when the CRD gives none.
    pub schema: Option<SchemaNode>,
    /// Where the `scale` subresource reads and writes the replicas
    /// (`subresources.scale.specReplicasPath`, `.spec.size` as
    /// `spec.size`); `None` without a scale subresource.
    pub scale_replicas: Option<Path>,
}

/// The parts of a CustomResourceDefinition the checks read.
#[derive(Clone, Debug)]
pub struct Crd {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub scope: Option<Scope>,
    pub versions: Vec<CrdVersion>,
    /// Where the CRD document starts.
    pub loc: Loc,
}

impl Crd {
    pub fn version(&self, name: &str) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.name == name)
    }
    pub fn storage_version(&self) -> Option<&str> {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }

    /// Read a CRD from its manifest; `None` if the value is not one.
    pub fn from_manifest(v: &Value, loc: Loc) -> Option<Crd> {
        if v.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return None;
        }
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let scope = match v.pointer("/spec/scope").and_then(Value::as_str) {
            Some("Namespaced") => Some(Scope::Namespaced),
            Some("Cluster") => Some(Scope::Cluster),
            _ => None,
        };
        let versions = v
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .map(|ver| CrdVersion {
                        name: ver
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        served: ver.get("served").and_then(Value::as_bool).unwrap_or(false),
                        storage: ver.get("storage").and_then(Value::as_bool).unwrap_or(false),
                        schema: ver
                            .pointer("/schema/openAPIV3Schema")
                            .map(SchemaNode::resource),
                        scale_replicas: ver
                            .pointer("/subresources/scale/specReplicasPath")
                            .and_then(Value::as_str)
                            .and_then(|p| Path::parse(p.strip_prefix('.').unwrap_or(p)).ok()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Crd {
            name: s("/metadata/name"),
            group: s("/spec/group"),
            kind: s("/spec/names/kind"),
            plural: s("/spec/names/plural"),
            scope,
            versions,
            loc,
        })
    }
}

/// The CRD of each Katalog resource that names one, by (group, kind).
#[derive(Clone, Debug, Default)]
pub struct Schemas {
    pub crds: BTreeMap<(String, String), Crd>,
}

impl Schemas {
    /// The CRD for this resource, if its `crd:` was read.
    pub fn crd(&self, group: &str, kind: &str) -> Option<&Crd> {
        self.crds.get(&(group.to_string(), kind.to_string()))
    }

    /// Parse the CRD files read for each reference and pick the CRD of its
    /// resource. Every problem is reported at the reference's `crd:` key.
    /// A file read once for several references (one bundle of CRDs named
    /// by every resource: the same [`Source`], its text shared) is parsed
    /// once.
    pub fn load(read: &[(CrdReference, Vec<Source>)]) -> (Schemas, Diagnostics) {
        let mut schemas = Schemas::default();
        let mut diags = Diagnostics::default();
        // Each distinct text (by identity: the same read) → its CRDs, or why
        // it does not parse.
        let mut parsed: std::collections::HashMap<*const u8, Result<Vec<Crd>, String>> =
            std::collections::HashMap::new();
        for (reference, sources) in read {
            let error = |message: String| {
                Diagnostic::new(ErrorKind::Schema, message)
                    .at(reference.loc.clone(), Some(&reference.source))
            };
            let mut found: Vec<&Crd> = Vec::new();
            let mut unparsable = false;
            for source in sources {
                let parse = || match crate::front::yaml::read_documents(&source.text) {
                    Ok(roots) => Ok(roots
                        .iter()
                        .filter_map(|root| {
                            let loc = Loc {
                                file: source.name.clone(),
                                line: root.line,
                                column: root.column,
                            };
                            Crd::from_manifest(&root.to_value(), loc)
                        })
                        .collect()),
                    Err(e) => {
                        let at = e
                            .position()
                            .map(|(line, column)| format!(":{line}:{column}"))
                            .unwrap_or_default();
                        Err(format!(
                            "failed to parse CRD file {}{at}: {}",
                            source.name,
                            e.message()
                        ))
                    }
                };
                parsed
                    .entry(std::sync::Arc::as_ptr(&source.text).cast::<u8>())
                    .or_insert_with(parse);
            }
            for source in sources {
                match &parsed[&std::sync::Arc::as_ptr(&source.text).cast::<u8>()] {
                    Ok(crds) => found.extend(crds),
                    Err(message) => {
                        unparsable = true;
                        diags.push(error(message.clone()));
                    }
                }
            }
            let names = || {
                found
                    .iter()
                    .map(|c| format!("`{}/{}`", c.group, c.kind))
                    .collect::<Vec<_>>()
            };
            match found
                .iter()
                .position(|c| c.group == reference.group && c.kind == reference.kind)
            {
                Some(i) => {
                    schemas.crds.insert(
                        (reference.group.clone(), reference.kind.clone()),
                        found[i].clone(),
                    );
                }
                // The parse error says why.
                None if found.is_empty() && unparsable => {}
                None if found.is_empty() => diags.push(
                    error(format!(
                        "`{}` holds no CustomResourceDefinition",
                        reference.crd
                    ))
                    .with_help("name a file or directory of CRD manifests"),
                ),
                None => diags.push(
                    error(format!(
                        "`{}` holds no CustomResourceDefinition for {}/{}",
                        reference.crd, reference.group, reference.kind
                    ))
                    .with_help(format!("it defines {}", names().join(", "))),
                ),
            }
        }
        (schemas, diags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Path {
        Path::parse(s).unwrap()
    }

    fn schema() -> SchemaNode {
        SchemaNode::resource(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["storage"],
                    "properties": {
                        "storage": {"type": "object", "properties": {
                            "size": {"type": "string"},
                            "class": {"type": "string", "enum": ["fast", "slow"], "default": "fast"}}},
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "nullable": true},
                        "port": {"x-kubernetes-int-or-string": true},
                        "selector": {"type": "object", "additionalProperties": {"type": "string"}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "choice": {"type": "object", "oneOf": [{"required": ["a"]}],
                                   "properties": {"a": {"type": "string"}}},
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                  "x-kubernetes-list-map-keys": ["name"],
                                  "items": {"type": "object", "properties": {
                                      "name": {"type": "string"}, "port": {"type": "integer"}}}},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true}
                    }
                }
            }
        }))
    }

    #[test]
    fn found_nodes_carry_their_keywords() {
        let s = schema();
        let Lookup::Found(n) = lookup(&s, &p("spec.storage.class")) else {
            panic!()
        };
        assert_eq!(n.enum_values, vec![json!("fast"), json!("slow")]);
        assert_eq!(n.default, Some(json!("fast")));
        let Lookup::Found(n) = lookup(&s, &p("spec.replicas")) else {
            panic!()
        };
        assert_eq!(
            (n.minimum, n.maximum, n.nullable),
            (Some(0.0), Some(10.0), true)
        );
        let Lookup::Found(n) = lookup(&s, &p("spec.port")) else {
            panic!()
        };
        assert!(n.int_or_string);
        let Lookup::Found(n) = lookup(&s, &p("spec.ports")) else {
            panic!()
        };
        assert_eq!(n.list_type, Some(ListType::Map(vec!["name".into()])));
        assert!(matches!(
            lookup(&s, &p("spec.ports[*].port")),
            Lookup::Found(_)
        ));
        assert!(matches!(
            lookup(&s, &p("spec.ports[0].name")),
            Lookup::Found(_)
        ));
        let Lookup::Found(n) = lookup(&s, &p("spec")) else {
            panic!()
        };
        assert_eq!(n.required, vec!["storage".to_string()]);
    }

    #[test]
    fn a_typo_is_missing_with_a_suggestion() {
        let s = schema();
        assert_eq!(
            lookup(&s, &p("spec.storag.size")),
            Lookup::Missing {
                at: p("spec.storag"),
                parent: p("spec"),
                suggestion: Some(p("spec.storage.size")),
            }
        );
        assert_eq!(
            lookup(&s, &p("spec.nothingLikeIt")),
            Lookup::Missing {
                at: p("spec.nothingLikeIt"),
                parent: p("spec"),
                suggestion: None,
            }
        );
    }

    #[test]
    fn opaque_units_are_named() {
        let s = schema();
        let opaque = |path: &str| match lookup(&s, &p(path)) {
            Lookup::Opaque { at, why } => (at.to_string(), why),
            other => panic!("{path}: {other:?}"),
        };
        assert_eq!(
            opaque("spec.selector.app"),
            ("spec.selector".into(), Opacity::AdditionalProperties)
        );
        assert_eq!(
            opaque("spec.extra.a.b"),
            ("spec.extra".into(), Opacity::PreserveUnknownFields)
        );
        assert_eq!(
            opaque("spec.choice.b"),
            ("spec.choice".into(), Opacity::OneOf)
        );
        assert_eq!(
            opaque("metadata.labels.app"),
            ("metadata.labels".into(), Opacity::AdditionalProperties)
        );
        assert_eq!(
            opaque("metadata.ownerReferences[0].uid"),
            ("metadata.ownerReferences".into(), Opacity::ObjectMeta)
        );
        // An embedded resource has its own apiVersion, kind and metadata.
        assert!(matches!(
            lookup(&s, &p("spec.template.metadata.name")),
            Lookup::Found(_)
        ));
    }

    #[test]
    fn the_object_header_is_implicit() {
        let s = schema();
        for path in ["apiVersion", "kind", "metadata.name", "metadata.namespace"] {
            assert!(matches!(lookup(&s, &p(path)), Lookup::Found(_)), "{path}");
        }
        assert!(matches!(
            lookup(&s, &p("metadata.nmae")),
            Lookup::Missing {
                suggestion: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn steps_that_do_not_fit_the_type() {
        let s = schema();
        assert_eq!(
            lookup(&s, &p("spec.replicas.value")),
            Lookup::WrongShape {
                at: p("spec.replicas.value"),
                expected: "an object",
                found: "integer".into(),
            }
        );
        assert_eq!(
            lookup(&s, &p("spec.port.value")),
            Lookup::WrongShape {
                at: p("spec.port.value"),
                expected: "an object",
                found: "int-or-string".into(),
            }
        );
        assert!(matches!(
            lookup(&s, &p("spec.storage[0]")),
            Lookup::WrongShape {
                expected: "a list",
                ..
            }
        ));
    }

    #[test]
    fn a_crd_manifest_reads_versions_and_names() {
        let loc = Loc {
            file: "x.yaml".into(),
            line: 1,
            column: 1,
        };
        let crd = Crd::from_manifest(
            &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "crontabs.stable.example.com"},
                "spec": {"group": "stable.example.com", "scope": "Cluster",
                    "names": {"kind": "CronTab", "plural": "crontabs"},
                    "versions": [
                        {"name": "v1", "served": true, "storage": true,
                         "schema": {"openAPIV3Schema": {"type": "object"}}},
                        {"name": "v2", "served": false, "storage": false}]}}),
            loc.clone(),
        )
        .unwrap();
        assert_eq!(crd.plural, "crontabs");
        assert_eq!(crd.scope, Some(Scope::Cluster));
        assert_eq!(crd.storage_version(), Some("v1"));
        assert!(crd.version("v1").unwrap().schema.is_some());
        assert!(!crd.version("v2").unwrap().served);
        assert!(Crd::from_manifest(&json!({"kind": "ConfigMap"}), loc).is_none());
    }
}
