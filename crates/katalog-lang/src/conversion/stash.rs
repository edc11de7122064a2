//! The stash annotations of one conversion: values a version cannot hold,
//! kept in an annotation (a JSON object of sections, one per version that
//! owns fields, and `!absent` markers) while the object is at a version
//! without them, and taken back on the way home. Parsed on first use and
//! written back, empty ones dropped, within the apiserver's 256 KiB limit
//! on annotations.

use serde_json::{Map, Value};

use super::error::{ANNOTATIONS_LIMIT, ConvertError, fail};
use crate::common::json::node::parse_value;

/// The key that lists the fields of a section that were absent.
const ABSENT: &str = "!absent";

/// The key that records the object's `resourceVersion` when a section was
/// written, so that a stale copy of it is not taken back: the guard of the
/// whole-remainder stash, per section. Only `resourceVersion` is recorded:
/// it is there for `katalog convert` of an object read from a cluster and
/// never in a conversion the apiserver asks for, so it costs a cluster
/// nothing; `metadata.generation` is not, because a write at the hub raises
/// it without any conversion seeing it, and a read must not fail for that.
const AT: &str = "!resourceVersion";

/// A stashed value, or the record that the field was absent.
pub(super) enum Stashed {
    Value(Value),
    Absent,
}

/// The stash annotations of the object being converted, parsed on first use
/// and written back at the end.
pub(super) struct StashState {
    /// Annotation key → its parsed content, for each annotation used so far.
    annotations: Vec<(String, Map<String, Value>)>,
    original: Option<Map<String, Value>>,
    /// The object's `resourceVersion`.
    now: Option<String>,
}

impl StashState {
    pub(super) fn load<'s>(
        &'s mut self,
        annotation: &str,
    ) -> Result<&'s mut Map<String, Value>, ConvertError> {
        if let Some(i) = self.annotations.iter().position(|(k, _)| k == annotation) {
            return Ok(&mut self.annotations[i].1);
        }
        let raw = self
            .original
            .as_ref()
            .and_then(|a| a.get(annotation))
            .cloned();
        let parsed = match raw {
            None => Map::new(),
            Some(Value::String(s)) => match parse_value(s.as_bytes()) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return fail(format!(
                        "annotation `{annotation}` is not a stash the engine wrote (it must be a JSON object); remove it or fix it"
                    ));
                }
            },
            Some(_) => return fail(format!("annotation `{annotation}` is not a string")),
        };
        self.annotations.push((annotation.to_string(), parsed));
        let n = self.annotations.len() - 1;
        Ok(&mut self.annotations[n].1)
    }

    pub(super) fn section<'s>(
        &'s mut self,
        annotation: &str,
        section: &str,
    ) -> Result<&'s mut Map<String, Value>, ConvertError> {
        let content = self.load(annotation)?;
        let entry = content
            .entry(section.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        match entry {
            Value::Object(m) => Ok(m),
            _ => fail(format!(
                "annotation `{annotation}` is not a stash the engine wrote (its `{section}` entry must be a JSON object); remove it or fix it"
            )),
        }
    }

    /// Whether the object carries `annotation`, or a rule already wrote it.
    pub(super) fn has(&self, annotation: &str) -> bool {
        self.annotations.iter().any(|(k, _)| k == annotation)
            || self
                .original
                .as_ref()
                .is_some_and(|a| a.contains_key(annotation))
    }

    /// Keep `v` under `key`. Fails, rather than drop the value, when the
    /// object's annotation is not a stash the engine can add to.
    pub(super) fn put(
        &mut self,
        annotation: &str,
        section: &str,
        key: &str,
        v: Value,
    ) -> Result<(), ConvertError> {
        let at = self.now.clone();
        let s = self.section(annotation, section)?;
        s.insert(key.to_string(), v);
        stamp(s, at);
        Ok(())
    }

    pub(super) fn mark_absent(
        &mut self,
        annotation: &str,
        section: &str,
        key: &str,
    ) -> Result<(), ConvertError> {
        let at = self.now.clone();
        let s = self.section(annotation, section)?;
        let list = s
            .entry(ABSENT.to_string())
            .or_insert_with(|| Value::Array(vec![]));
        if let Value::Array(a) = list {
            a.push(Value::String(key.to_string()));
        }
        stamp(s, at);
        Ok(())
    }

    pub(super) fn take(
        &mut self,
        annotation: &str,
        section: &str,
        key: &str,
        guarded: bool,
    ) -> Result<Option<Stashed>, ConvertError> {
        let now = self.now.clone();
        let s = self.section(annotation, section)?;
        if guarded && let Some(message) = stale(annotation, s, now.as_deref()) {
            return fail(message);
        }
        if let Some(v) = s.shift_remove(key) {
            return Ok(Some(Stashed::Value(v)));
        }
        if let Some(Value::Array(list)) = s.get_mut(ABSENT)
            && let Some(i) = list.iter().position(|x| x.as_str() == Some(key))
        {
            list.remove(i);
            if list.is_empty() {
                s.shift_remove(ABSENT);
            }
            return Ok(Some(Stashed::Absent));
        }
        Ok(None)
    }

    /// Drop every entry (and absence marker) whose key starts with `prefix`.
    pub(super) fn purge_prefix(
        &mut self,
        annotation: &str,
        section: &str,
        prefix: &str,
    ) -> Result<(), ConvertError> {
        let s = self.section(annotation, section)?;
        s.retain(|k, _| k == ABSENT || !k.starts_with(prefix));
        if let Some(Value::Array(list)) = s.get_mut(ABSENT) {
            list.retain(|x| !x.as_str().is_some_and(|k| k.starts_with(prefix)));
            if list.is_empty() {
                s.shift_remove(ABSENT);
            }
        }
        Ok(())
    }

    /// Put the stash annotations back on the object, dropping empty ones.
    pub(super) fn write_back(mut self, obj: &mut Value) -> Result<(), ConvertError> {
        if self.annotations.is_empty() {
            return Ok(());
        }
        let _ = self.original.take();
        let Some(meta) = obj.as_object_mut().map(|o| {
            o.entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()))
        }) else {
            return Ok(());
        };
        let Value::Object(meta) = meta else {
            return fail("metadata is not an object");
        };
        let had_annotations = meta.contains_key("annotations");
        let ann = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(ann) = ann else {
            return fail("metadata.annotations is not an object");
        };
        for (key, mut content) in self.annotations.drain(..) {
            // A section left with only its resourceVersion is empty.
            content.retain(|_, v| !matches!(v, Value::Object(m) if m.keys().all(|k| k == AT)));
            if content.is_empty() {
                ann.shift_remove(&key);
            } else {
                let text = serde_json::to_string(&Value::Object(content)).unwrap_or_default();
                ann.insert(key, Value::String(text));
            }
        }
        let size: usize = ann
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if ann.is_empty() {
            meta.shift_remove("annotations");
        }
        let _ = had_annotations;
        if size > ANNOTATIONS_LIMIT {
            return fail(format!(
                "stashing makes the object's annotations {size} bytes, over the apiserver's limit of {ANNOTATIONS_LIMIT} (256 KiB)"
            ));
        }
        Ok(())
    }
}

impl StashState {
    pub(super) fn with_original(obj: &Value) -> Self {
        StashState {
            annotations: Vec::new(),
            original: obj
                .get("metadata")
                .and_then(|m| m.get("annotations"))
                .and_then(Value::as_object)
                .cloned(),
            now: obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

/// Record in a section the `resourceVersion` it was written at.
fn stamp(section: &mut Map<String, Value>, at: Option<String>) {
    match at {
        Some(at) => section.insert(AT.to_string(), Value::String(at)),
        None => section.shift_remove(AT),
    };
}

/// Why a section is not to be taken back: it was written when the object
/// was at another `resourceVersion`.
fn stale(annotation: &str, section: &Map<String, Value>, now: Option<&str>) -> Option<String> {
    let written = section.get(AT)?.as_str()?;
    if now == Some(written) {
        return None;
    }
    let fields: Vec<&String> = section.keys().filter(|k| !k.starts_with('!')).collect();
    Some(super::remainder::stale_message(
        annotation, written, now, &fields,
    ))
}
