//! The whole-remainder stash (`stash: {remainder: true}`): everything a
//! spoke's CRD schema cannot represent, kept in one annotation while the
//! object is at that spoke.
//!
//! Down (hub → spoke), once the rules have run, every field of the converted
//! object that the spoke's schema does not declare (the apiserver would prune
//! it) is taken out and recorded, with the object's `resourceVersion` and,
//! for a field inside a list element, that element as the spoke shows it.
//! Any remainder annotation the object already carried is dropped first: a
//! remainder is only ever computed from the current hub object.
//!
//! Up (spoke → hub), before the rules run, the annotation is consumed and
//! each field put back, but only where the spoke object does not contradict
//! it: the field is still absent and its parent object still exists (the
//! user did not remove the object the field lived in). It fails instead of
//! guessing when the record cannot be trusted: a list element that changed,
//! so that a field could land in another element, or a `resourceVersion` or
//! `generation` that shows the object changed since the record was written.
//!
//! On a cluster the staleness guard is the apiserver's own: an update carries
//! the `resourceVersion` it was read at and is refused with a conflict when
//! the object changed since. The webhook never sees that `resourceVersion`
//! (the apiserver clears it before it converts for storage, and converts
//! reads before it sets it), so an unconditional update of a stale copy is
//! last-write-wins for the hidden fields as for the visible ones.

use serde_json::{Map, Value};

use super::error::ANNOTATIONS_LIMIT;
use crate::common::json::node::parse_value;
use crate::common::path::{Path, Segment, SetError};
use crate::ir::RemainderIr;
use crate::schema::SchemaNode;

/// Why the remainder could not be kept or restored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemainderError {
    /// Down: the object has no `metadata` to hold the annotation.
    #[error("the object has no metadata to hold the remainder annotation")]
    NoMetadata,
    /// Down: `metadata.annotations` is something else than an object.
    #[error("metadata.annotations is not an object")]
    AnnotationsNotAnObject,
    /// Down: with the annotation, the annotations are over the apiserver's limit.
    #[error(
        "keeping the fields this version cannot represent ({}) in annotation `{annotation}` makes the object's annotations {size} bytes, over the apiserver's limit of {limit} (256 KiB)",
        list(.fields),
        limit = ANNOTATIONS_LIMIT
    )]
    OverLimit {
        annotation: String,
        fields: Vec<Path>,
        size: usize,
    },
    /// Up: the annotation's value is not a string.
    #[error("annotation `{annotation}` is not a string")]
    NotAString { annotation: String },
    /// Up: the annotation's text is not a record the engine wrote.
    #[error(
        "annotation `{annotation}` is not a remainder the engine wrote; remove it to drop the fields it kept"
    )]
    NotARemainder { annotation: String },
    /// Up: the object is at another `resourceVersion` than the record was written at.
    #[error("{}", stale_message(.annotation, .written, .now.as_deref(), .fields))]
    StaleResourceVersion {
        annotation: String,
        written: String,
        now: Option<String>,
        fields: Vec<Path>,
    },
    /// Up: the object's `generation` moved more than the write of the record can explain.
    #[error(
        "annotation `{annotation}` was written at generation {read}, but the object is at generation {now}: the object changed since it was read, and restoring could bring back fields removed since: read the object again, or remove the annotation to drop them ({})",
        list(.fields)
    )]
    StaleGeneration {
        annotation: String,
        read: i64,
        now: i64,
        fields: Vec<Path>,
    },
    /// Up: a list element that held kept fields changed.
    #[error(
        "`{element}` changed since it was read at this version, and it held fields this version cannot show ({}); they could land in another element, so nothing is restored: make this change at the hub version",
        list(.fields)
    )]
    ElementChanged { element: Path, fields: Vec<Path> },
    /// Up: a kept field could not be put back.
    #[error(transparent)]
    Set(#[from] SetError),
}

/// What `keep` takes out and `restore` puts back.
struct Record {
    resource_version: Option<String>,
    /// `metadata.generation` when it was written: the apiserver stores it
    /// with the object and raises it on every change of the object's spec.
    generation: Option<i64>,
    fields: Vec<(Path, Value)>,
    /// The spoke's view of each list element a field was taken from.
    elements: Vec<(Path, Value)>,
}

fn annotations(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("metadata")?
        .get_mut("annotations")?
        .as_object_mut()
}

fn generation(obj: &Value) -> Option<i64> {
    obj.pointer("/metadata/generation").and_then(Value::as_i64)
}

fn resource_version(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The innermost list element on `path`: the path up to its last index.
fn element_of(path: &Path) -> Option<Path> {
    let segs = path.segments();
    let last = segs.iter().rposition(|s| matches!(s, Segment::Index(_)))?;
    Some(Path::from_segments(segs[..=last].to_vec()))
}

/// Take out of `obj` every field `schema` does not declare.
fn unrepresentable(
    value: &mut Value,
    schema: &SchemaNode,
    at: &Path,
    out: &mut Vec<(Path, Value)>,
) {
    if schema.opaque.is_some() || schema.int_or_string {
        return;
    }
    match value {
        Value::Object(m) => {
            if schema.type_.as_deref().is_some_and(|t| t != "object") {
                return;
            }
            let keys: Vec<String> = m.keys().cloned().collect();
            for key in keys {
                let here = at.child(key.clone());
                match schema.properties.get(&key) {
                    Some(sub) => {
                        if let Some(child) = m.get_mut(&key) {
                            unrepresentable(child, sub, &here, out);
                        }
                    }
                    None if schema.additional_properties.is_some() => {}
                    None => {
                        if let Some(v) = m.shift_remove(&key) {
                            out.push((here, v));
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    unrepresentable(item, sub, &at.index(i), out);
                }
            }
        }
        _ => {}
    }
}

/// Down: move what the spoke cannot represent into the annotation.
pub fn keep(r: &RemainderIr, obj: &mut Value) -> Result<(), RemainderError> {
    if let Some(ann) = annotations(obj) {
        ann.shift_remove(&r.annotation);
    }
    let mut fields = Vec::new();
    if let Value::Object(top) = obj {
        let keys: Vec<String> = top.keys().cloned().collect();
        for key in keys {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let here = Path::root().child(key.clone());
            match r.schema.properties.get(&key) {
                Some(sub) => {
                    if let Some(child) = top.get_mut(&key) {
                        unrepresentable(child, sub, &here, &mut fields);
                    }
                }
                None => {
                    if let Some(v) = top.shift_remove(&key) {
                        fields.push((here, v));
                    }
                }
            }
        }
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        && matches!(meta.get("annotations"), Some(Value::Object(m)) if m.is_empty())
    {
        meta.shift_remove("annotations");
    }
    if fields.is_empty() {
        return Ok(());
    }
    let mut elements: Vec<(Path, Value)> = Vec::new();
    for (path, _) in &fields {
        if let Some(e) = element_of(path)
            && !elements.iter().any(|(p, _)| *p == e)
        {
            let seen = e.get(obj).cloned().unwrap_or(Value::Null);
            elements.push((e, seen));
        }
    }
    let record = Record {
        resource_version: resource_version(obj),
        generation: generation(obj),
        fields,
        elements,
    };
    let text = encode(&record);
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(RemainderError::NoMetadata);
    };
    let ann = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(ann) = ann else {
        return Err(RemainderError::AnnotationsNotAnObject);
    };
    ann.insert(r.annotation.clone(), Value::String(text));
    let size: usize = ann
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > ANNOTATIONS_LIMIT {
        return Err(RemainderError::OverLimit {
            annotation: r.annotation.clone(),
            fields: paths_of(&record.fields),
            size,
        });
    }
    Ok(())
}

/// Where the object is now, for a staleness message.
fn now_at(resource_version: Option<&str>) -> String {
    match resource_version {
        Some(rv) => format!("this object is at resourceVersion {rv}"),
        None => "this object has no resourceVersion".to_string(),
    }
}

fn paths_of(fields: &[(Path, Value)]) -> Vec<Path> {
    fields.iter().map(|(p, _)| p.clone()).collect()
}

/// Why a record written at resourceVersion `written` is not restored at
/// `now` (a remainder's or a stash's): the message names its first fields.
pub(super) fn stale_message(
    annotation: &str,
    written: &str,
    now: Option<&str>,
    fields: &[impl std::fmt::Display],
) -> String {
    format!(
        "annotation `{annotation}` was written when the object was read at resourceVersion {written}, but {}; it may hold fields removed since, so it is not restored: read the object again, or remove the annotation to drop them ({})",
        now_at(now),
        list(fields)
    )
}

fn list(fields: &[impl std::fmt::Display]) -> String {
    let mut names: Vec<String> = fields.iter().take(5).map(|p| format!("`{p}`")).collect();
    if fields.len() > 5 {
        names.push(format!("and {} more", fields.len() - 5));
    }
    names.join(", ")
}

fn encode(record: &Record) -> String {
    let mut m = Map::new();
    if let Some(rv) = &record.resource_version {
        m.insert("resourceVersion".into(), rv.clone().into());
    }
    if let Some(g) = record.generation {
        m.insert("generation".into(), g.into());
    }
    let fields: Map<String, Value> = record
        .fields
        .iter()
        .map(|(p, v)| (p.to_string(), v.clone()))
        .collect();
    m.insert("fields".into(), fields.into());
    if !record.elements.is_empty() {
        let elements: Map<String, Value> = record
            .elements
            .iter()
            .map(|(p, v)| (p.to_string(), v.clone()))
            .collect();
        m.insert("elements".into(), elements.into());
    }
    serde_json::to_string(&Value::Object(m)).unwrap_or_default()
}

fn decode(annotation: &str, text: &str) -> Result<Record, RemainderError> {
    let bad = || RemainderError::NotARemainder {
        annotation: annotation.to_string(),
    };
    let Ok(Value::Object(m)) = parse_value(text.as_bytes()) else {
        return Err(bad());
    };
    let paths = |key: &str| -> Result<Vec<(Path, Value)>, RemainderError> {
        match m.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Object(entries)) => entries
                .iter()
                .map(|(k, v)| {
                    Path::parse(k)
                        .ok()
                        .filter(|p| p.is_keys_only() || !p.has_wildcard())
                        .map(|p| (p, v.clone()))
                        .ok_or_else(bad)
                })
                .collect(),
            Some(_) => Err(bad()),
        }
    };
    let resource_version = match m.get("resourceVersion") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad()),
    };
    let generation = match m.get("generation") {
        None => None,
        Some(g) => Some(g.as_i64().ok_or_else(bad)?),
    };
    Ok(Record {
        resource_version,
        generation,
        fields: paths("fields")?,
        elements: paths("elements")?,
    })
}

/// Up: put back what the annotation kept, where the object allows it.
pub fn restore(r: &RemainderIr, obj: &mut Value) -> Result<(), RemainderError> {
    let Some(ann) = annotations(obj) else {
        return Ok(());
    };
    let Some(raw) = ann.shift_remove(&r.annotation) else {
        return Ok(());
    };
    if ann.is_empty()
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.shift_remove("annotations");
    }
    let Value::String(text) = raw else {
        return Err(RemainderError::NotAString {
            annotation: r.annotation.clone(),
        });
    };
    let record = decode(&r.annotation, &text)?;
    if let Some(written) = &record.resource_version {
        let now = resource_version(obj);
        if now.as_deref() != Some(written.as_str()) {
            return Err(RemainderError::StaleResourceVersion {
                annotation: r.annotation.clone(),
                written: written.clone(),
                now,
                fields: paths_of(&record.fields),
            });
        }
    }
    // An element that is gone was removed, with what it held; one that is
    // there but different may be another element moved into its place.
    let mut removed: Vec<&Path> = Vec::new();
    // The write that carries the remainder raises the generation by at most
    // one; more means the spec changed since the read.
    if let (Some(read), Some(now)) = (record.generation, generation(obj))
        && now != read
        && now != read + 1
    {
        return Err(RemainderError::StaleGeneration {
            annotation: r.annotation.clone(),
            read,
            now,
            fields: paths_of(&record.fields),
        });
    }
    for (element, seen) in &record.elements {
        match element.get(obj) {
            None => removed.push(element),
            Some(now) if now == seen => {}
            Some(_) => {
                return Err(RemainderError::ElementChanged {
                    element: element.clone(),
                    fields: record
                        .fields
                        .iter()
                        .filter(|(p, _)| p.starts_with(element))
                        .map(|(p, _)| p.clone())
                        .collect(),
                });
            }
        }
    }
    for (path, value) in record.fields {
        if removed.iter().any(|e| path.starts_with(e)) {
            continue;
        }
        let parent = Path::from_segments(path.segments()[..path.len().saturating_sub(1)].to_vec());
        let parent_is_object = parent.get(obj).is_some_and(Value::is_object);
        if path.get(obj).is_none() && parent_is_object {
            path.set(obj, value)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::RemainderError;
    use crate::common::path::Path;
    use crate::conversion::eval::{ANNOTATIONS_LIMIT, convert};
    use crate::{Ir, Source};

    fn ir() -> Ir {
        crate::compile_with_crds(
            &[Source::new(
                "remainder.yaml",
                include_str!("../../../../testdata/rules/remainder.yaml"),
            )],
            |_| {
                Ok(vec![Source::new(
                    "remainder.crd.yaml",
                    include_str!("../../../../testdata/rules/remainder.crd.yaml"),
                )])
            },
        )
        .unwrap()
    }

    #[test]
    fn a_refusal_names_five_fields_and_counts_the_others() {
        let fields: Vec<Path> = (0..7)
            .map(|i| Path::parse(&format!("spec.items[0].f{i}")).unwrap())
            .collect();
        let err = RemainderError::ElementChanged {
            element: Path::parse("spec.items[0]").unwrap(),
            fields,
        };
        assert_eq!(
            err.to_string(),
            "`spec.items[0]` changed since it was read at this version, and it held fields this version cannot show (`spec.items[0].f0`, `spec.items[0].f1`, `spec.items[0].f2`, `spec.items[0].f3`, `spec.items[0].f4`, and 2 more); they could land in another element, so nothing is restored: make this change at the hub version"
        );
    }

    #[test]
    fn a_remainder_over_the_annotation_budget_fails_the_conversion() {
        let ir = ir();
        // The annotations are counted as the apiserver counts them: every
        // key and value, the other annotations included.
        let other = "o".repeat(ANNOTATIONS_LIMIT / 2);
        let big = "x".repeat(ANNOTATIONS_LIMIT / 2);
        let hub = json!({"apiVersion": "examples.katalog.dev/v2", "kind": "Database",
            "metadata": {"name": "big", "annotations": {"example.com/other": other}},
            "spec": {"backup": {"schedule": big}}});
        let err = convert(&ir, &hub, "examples.katalog.dev/v1").unwrap_err();
        assert!(
            err.message.starts_with(
                "keeping the fields this version cannot represent (`spec.backup`) in annotation `katalog.dev/remainder` makes the object's annotations "
            ) && err
                .message
                .ends_with(" bytes, over the apiserver's limit of 262144 (256 KiB)"),
            "{err}"
        );
        assert_eq!(
            err.rule.as_deref(),
            Some("remainder.yaml:23:13 (stash remainder)")
        );
        // Without the other annotation it fits, and comes back.
        let hub = json!({"apiVersion": "examples.katalog.dev/v2", "kind": "Database",
            "metadata": {"name": "fits", "resourceVersion": "1"}, "spec": {"backup": {"schedule": "y".repeat(ANNOTATIONS_LIMIT - 200)}}});
        let spoke = convert(&ir, &hub, "examples.katalog.dev/v1").unwrap();
        assert_eq!(
            convert(&ir, &spoke, "examples.katalog.dev/v2").unwrap(),
            hub
        );
    }
}
