//! The fast path of a ConversionReview: parse each object only down to what
//! its conversion touches, keep every other member as the bytes it came as,
//! and write the answer by splicing those bytes back in.
//!
//! The rules themselves run on the same evaluator as the tree path
//! ([`convert_owned`]): the object they see is a *partial* tree in which
//! each untouched member stands as a placeholder string (a "hole"), and
//! each touched member, and each parent of one, is parsed. The touch set
//! ([`super::touch`]) guarantees no rule reads or writes a hole, so the
//! holes come out where they went in (or are dropped with their parent) and
//! the writer puts their bytes back. `metadata` members other than labels
//! and annotations are holes as well, so the invariant check compares the
//! holes: equal exactly when the conversion left them alone.
//!
//! Anything unusual goes to the tree path, which stays the reference: a
//! review this path does not recognise exactly (extra keys, another
//! apiVersion), any conversion that fails (so the failure message is the
//! tree path's own), and per object, a conversion that touches the whole
//! object (CEL, a whole-remainder stash).
//!
//! Untouched bytes pass verbatim: a number serde_json cannot represent as
//! i64/u64/f64 (`1e400`, which the apiserver never sends: its own decoder
//! refuses it) passes unchanged where no rule names it, where the tree path
//! refuses the review with 400.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::OnceLock;

use kube_core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::touch::{self, Touch};
use crate::convert::{convert_owned, split_api_version};
use crate::ir::Ir;
use crate::review::{CONVERSION_REVIEW_VERSIONS, Invariants};

/// The prefix of a hole: NUL, a per-process random nonce, then the index of
/// the bytes it stands for. A string a rule could produce from the object's
/// own data cannot carry the nonce, which never leaves the process.
fn hole_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        format!("\u{0}katalog-hole-{:016x}:", h.finish())
    })
}

fn hole(index: usize) -> Value {
    Value::String(format!("{}{index}", hole_prefix()))
}

/// The index a hole stands for, when `s` is one.
fn hole_index(s: &str) -> Option<usize> {
    s.strip_prefix(hole_prefix())?.parse().ok()
}

/// The members of a JSON object, in order, each as raw text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// A partial tree of these members: touched ones parsed, others holes whose
/// bytes are pushed onto `holes`.
fn partial<'a>(
    members: Vec<(String, &'a RawValue)>,
    touch: &Touch,
    holes: &mut Vec<&'a [u8]>,
) -> Result<Value, serde_json::Error> {
    let mut map = Map::with_capacity(members.len());
    for (key, raw) in members {
        let value = match touch.child(&key) {
            Some(t) if t.is_whole() || !is_object(raw) => serde_json::from_str(raw.get())?,
            Some(t) => {
                let inner: Members = serde_json::from_str(raw.get())?;
                partial(inner.0, t, holes)?
            }
            None => {
                holes.push(raw.get().as_bytes());
                hole(holes.len() - 1)
            }
        };
        map.insert(key, value);
    }
    Ok(Value::Object(map))
}

/// Write `value` as JSON, each hole as the bytes it stands for.
fn write(out: &mut Vec<u8>, value: &Value, holes: &[&[u8]]) {
    match value {
        Value::String(s) => match hole_index(s).and_then(|i| holes.get(i)) {
            Some(bytes) => out.extend_from_slice(bytes),
            None => write_json(out, s),
        },
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item, holes);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, k);
                out.push(b':');
                write(out, v, holes);
            }
            out.push(b'}');
        }
        scalar => write_json(out, scalar),
    }
}

fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing a string, a number, a bool or null into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// A ConversionReview exactly as this path expects it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    #[serde(borrow)]
    request: Request<'a>,
    /// The apiserver sends an empty response with the request; the tree
    /// path reads it as kube-core's type and drops it.
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Request<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow)]
    objects: Vec<&'a RawValue>,
}

/// What one object's conversion needs to know about it up front.
struct Object<'a> {
    members: Vec<(String, &'a RawValue)>,
    api_version: String,
    kind: String,
}

fn read_object(raw: &RawValue) -> Option<Object<'_>> {
    let members = serde_json::from_str::<Members>(raw.get()).ok()?.0;
    let text = |key: &str| -> Option<String> {
        let (_, v) = members.iter().rev().find(|(k, _)| k == key)?;
        serde_json::from_str::<String>(v.get()).ok()
    };
    let api_version = text("apiVersion")?;
    let kind = text("kind")?;
    Some(Object {
        members,
        api_version,
        kind,
    })
}

/// Counted by [`review`]: how each object was converted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paths {
    /// Objects converted on partial trees.
    pub spliced: usize,
    /// Objects whose conversion touches the whole object (CEL, remainder),
    /// converted on a whole tree.
    pub whole: usize,
}

/// A review answered by splicing.
pub struct Spliced {
    /// The ConversionReview answer.
    pub bytes: Vec<u8>,
    pub uid: String,
    pub desired_api_version: String,
    /// `apiVersion` and `kind` of the first object.
    pub first: Option<(String, String)>,
    /// Whether the objects came at more than one apiVersion.
    pub mixed: bool,
    pub count: usize,
    pub paths: Paths,
}

/// Answer a ConversionReview by splicing, or `None` when the review is for
/// the tree path ([`crate::review::review_conversion_bytes`]): not exactly
/// the shape this path reads, or an object that fails to convert.
pub fn review(ir: &Ir, body: &[u8]) -> Option<Spliced> {
    let text = std::str::from_utf8(body).ok()?;
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    if !CONVERSION_REVIEW_VERSIONS.contains(&envelope.api_version.as_str()) {
        return None;
    }
    if let Some(raw) = envelope.response
        && serde_json::from_str::<Option<ConversionResponse>>(raw.get()).is_err()
    {
        return None;
    }
    let desired = envelope.request.desired_api_version.as_str();
    let mut paths = Paths::default();
    let mut buffer: Vec<u8> = Vec::with_capacity(body.len() + body.len() / 16);
    let mut ranges: Vec<Range<usize>> = Vec::with_capacity(envelope.request.objects.len());
    type PlanKey = (String, String, String, String);
    let mut plans: HashMap<PlanKey, Option<Touch>> = HashMap::new();
    let mut first: Option<(String, String)> = None;
    let mut mixed = false;
    for raw in &envelope.request.objects {
        crate::budget::check_deadline().ok()?;
        let start = buffer.len();
        let object = read_object(raw)?;
        match &first {
            None => first = Some((object.api_version.clone(), object.kind.clone())),
            Some((api_version, _)) => mixed |= *api_version != object.api_version,
        }
        let (group, from) = split_api_version(&object.api_version);
        let resource = ir.resource(group, &object.kind)?;
        let (_, to) = split_api_version(desired);
        let plan = plans
            .entry((
                group.to_string(),
                object.kind.clone(),
                from.to_string(),
                to.to_string(),
            ))
            .or_insert_with(|| {
                resource
                    .version(from)
                    .and(resource.version(to))
                    .and_then(|_| touch::conversion(ir, resource, from, to))
            });
        match plan {
            Some(touch) => {
                let mut holes = Vec::new();
                let tree = partial(object.members, touch, &mut holes).ok()?;
                let out = converted(ir, tree, desired)?;
                write(&mut buffer, &out, &holes);
                paths.spliced += 1;
            }
            None => {
                let tree: Value = serde_json::from_str(raw.get()).ok()?;
                let out = converted(ir, tree, desired)?;
                write_json(&mut buffer, &out);
                paths.whole += 1;
            }
        }
        ranges.push(start..buffer.len());
    }
    // The envelope as the tree path builds it, each converted object a hole.
    let review: ConversionReview = serde_json::from_value(serde_json::json!({
        "apiVersion": envelope.api_version,
        "kind": envelope.kind,
        "request": {"uid": envelope.request.uid, "desiredAPIVersion": desired, "objects": []},
    }))
    .ok()?;
    let uid = envelope.request.uid.clone();
    let desired_api_version = desired.to_string();
    let request = ConversionRequest::try_from(review).ok()?;
    let holes: Vec<&[u8]> = ranges.iter().map(|r| &buffer[r.clone()]).collect();
    let objects = (0..holes.len()).map(hole).collect();
    let answer = serde_json::to_value(
        ConversionResponse::for_request(request)
            .success(objects)
            .into_review(),
    )
    .ok()?;
    let mut out = Vec::with_capacity(buffer.len() + 256);
    write(&mut out, &answer, &holes);
    Some(Spliced {
        bytes: out,
        uid,
        desired_api_version,
        first,
        mixed,
        count: ranges.len(),
        paths,
    })
}

/// Convert one (partial or whole) object and run the webhook's invariant
/// check, as the tree path does; `None` on any failure.
fn converted(ir: &Ir, tree: Value, desired: &str) -> Option<Value> {
    let before = Invariants::of(&tree);
    let out = convert_owned(ir, tree, desired).ok()?;
    before.check(&out).ok()?;
    Some(out)
}
