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
use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::eval::convert_owned;
use super::review::{CONVERSION_REVIEW_VERSIONS, Invariants};
use super::touch::{self, Touch};
use crate::ir::Ir;
use crate::json::split_api_version;

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

/// Parses one value in a single pass into a partial tree: the members the
/// touch set names are parsed (whole, or again partially), every other
/// member of an object is kept as its raw bytes, pushed onto `holes`, and
/// stands in the tree as a hole. A value that is not an object where the
/// touch set expects one is parsed whole.
struct Partial<'t, 'h, 'de> {
    touch: &'t Touch,
    holes: &'h mut Vec<&'de [u8]>,
}

impl<'de> DeserializeSeed<'de> for Partial<'_, '_, 'de> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.touch.is_whole() {
            return Value::deserialize(d);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Partial<'_, '_, 'de> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match self.touch.child(&key) {
                Some(touch) => map.next_value_seed(Partial {
                    touch,
                    holes: &mut *self.holes,
                })?,
                None => {
                    let raw: &'de RawValue = map.next_value()?;
                    self.holes.push(raw.get().as_bytes());
                    hole(self.holes.len() - 1)
                }
            };
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
    // Anything else is a whole value, built as serde_json builds a `Value`.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            out.push(item);
        }
        Ok(Value::Array(out))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// The partial tree of one object (see [`Partial`]).
fn partial<'de>(
    raw: &'de RawValue,
    touch: &Touch,
    holes: &mut Vec<&'de [u8]>,
) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let value = Partial { touch, holes }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
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

/// What decides an object's touch set: group, kind, from and to version.
type PlanKey = (String, String, String, String);

/// The key of the object `tree` (parsed at least at `apiVersion` and
/// `kind`) converted to `desired`, or `None` when it has none.
fn plan_key(tree: &Value, desired: &str) -> Option<PlanKey> {
    let (group, from) = split_api_version(tree.get("apiVersion")?.as_str()?);
    let kind = tree.get("kind")?.as_str()?;
    let (_, to) = split_api_version(desired);
    Some((group.into(), kind.into(), from.into(), to.into()))
}

/// Counted by [`review`]: how each object was converted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paths {
    /// Objects converted on partial trees.
    pub spliced: usize,
    /// Objects whose conversion touches the whole object (CEL, remainder),
    /// converted on a whole tree.
    pub whole: usize,
    /// Whether the review was read in one pass (see [`review`]).
    pub one_pass: bool,
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
/// the tree path ([`super::review::review_conversion_bytes`]): not exactly
/// the shape this path reads, or an object that fails to convert.
///
/// Objects are parsed in one pass, straight into partial trees, with the
/// touch set of every conversion of their kind to the desired version
/// (learnt from the first object: a review carries objects of one CRD).
/// Where that does not hold (the request's keys in another order, another
/// kind later, a conversion that touches the whole object) the review is
/// read again in two passes, each object first as raw text.
pub fn review(ir: &Ir, body: &[u8]) -> Option<Spliced> {
    let text = std::str::from_utf8(body).ok()?;
    let mut one = OnePass {
        ir,
        answers: Answers::new(body.len()),
        kind: None,
        holes: Vec::new(),
    };
    let mut de = serde_json::Deserializer::from_str(text);
    if let Ok(head) = EnvelopeSeed(&mut one).deserialize(&mut de)
        && de.end().is_ok()
    {
        one.answers.paths.one_pass = true;
        return one.answers.finish(head);
    }
    two_passes(ir, text)
}

/// What an answer echoes of the review.
struct Head {
    api_version: String,
    kind: String,
    uid: String,
    desired: String,
}

/// The converted objects of a review so far, written one after another.
struct Answers {
    buffer: Vec<u8>,
    ranges: Vec<Range<usize>>,
    first: Option<(String, String)>,
    mixed: bool,
    paths: Paths,
}

impl Answers {
    fn new(size: usize) -> Self {
        Answers {
            buffer: Vec::with_capacity(size + size / 16),
            ranges: Vec::new(),
            first: None,
            mixed: false,
            paths: Paths::default(),
        }
    }

    /// Convert one object (`holes`: the bytes its partial tree stands for;
    /// none for a whole tree) and write it; `None` when it fails.
    fn add(&mut self, ir: &Ir, tree: Value, holes: &[&[u8]], desired: &str) -> Option<()> {
        crate::budget::check_deadline().ok()?;
        let api_version = tree.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        match &self.first {
            None => {
                let kind = tree.get("kind").and_then(Value::as_str).unwrap_or("");
                self.first = Some((api_version.to_string(), kind.to_string()));
            }
            Some((first, _)) => self.mixed |= first != api_version,
        }
        let whole = holes.is_empty();
        let out = converted(ir, tree, desired)?;
        let start = self.buffer.len();
        write(&mut self.buffer, &out, holes);
        self.ranges.push(start..self.buffer.len());
        if whole {
            self.paths.whole += 1;
        } else {
            self.paths.spliced += 1;
        }
        Some(())
    }

    /// The answer: the envelope as the tree path builds it, each converted
    /// object spliced in.
    fn finish(self, head: Head) -> Option<Spliced> {
        if !CONVERSION_REVIEW_VERSIONS.contains(&head.api_version.as_str()) {
            return None;
        }
        let review: ConversionReview = serde_json::from_value(serde_json::json!({
            "apiVersion": head.api_version,
            "kind": head.kind,
            "request": {"uid": head.uid, "desiredAPIVersion": head.desired, "objects": []},
        }))
        .ok()?;
        let request = ConversionRequest::try_from(review).ok()?;
        let holes: Vec<&[u8]> = self
            .ranges
            .iter()
            .map(|r| &self.buffer[r.clone()])
            .collect();
        let objects = (0..holes.len()).map(hole).collect();
        let answer = serde_json::to_value(
            ConversionResponse::for_request(request)
                .success(objects)
                .into_review(),
        )
        .ok()?;
        let mut bytes = Vec::with_capacity(self.buffer.len() + 256);
        write(&mut bytes, &answer, &holes);
        Some(Spliced {
            bytes,
            uid: head.uid,
            desired_api_version: head.desired,
            first: self.first,
            mixed: self.mixed,
            count: self.ranges.len(),
            paths: self.paths,
        })
    }
}

/// The state of a one-pass read: the objects answered so far, and the kind
/// the review is of with the touch set of its conversions, once known.
struct OnePass<'ir, 'de> {
    ir: &'ir Ir,
    answers: Answers,
    /// Group, kind, and the union of the touch sets of every conversion of
    /// that kind to the desired version.
    kind: Option<(String, String, Touch)>,
    holes: Vec<&'de [u8]>,
}

/// Why a one-pass read gives up (the review is read again in two passes).
fn give_up<E: serde::de::Error>() -> E {
    E::custom("not for the one-pass read")
}

struct EnvelopeSeed<'s, 'ir, 'de>(&'s mut OnePass<'ir, 'de>);

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_, '_, 'de> {
    type Value = Head;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_, '_, 'de> {
    type Value = Head;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ConversionReview")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let (mut api_version, mut kind, mut request) = (None, None, None);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "apiVersion" if api_version.is_none() => api_version = Some(map.next_value()?),
                "kind" if kind.is_none() => kind = Some(map.next_value()?),
                "request" if request.is_none() => {
                    request = Some(map.next_value_seed(RequestSeed(&mut *self.0))?)
                }
                "response" => {
                    // The apiserver sends an empty one; the tree path reads
                    // it as kube-core's type and drops it.
                    map.next_value::<Option<ConversionResponse>>()?;
                }
                _ => return Err(give_up()),
            }
        }
        let (Some(api_version), Some(kind), Some((uid, desired))) = (api_version, kind, request)
        else {
            return Err(give_up());
        };
        Ok(Head {
            api_version,
            kind,
            uid,
            desired,
        })
    }
}

struct RequestSeed<'s, 'ir, 'de>(&'s mut OnePass<'ir, 'de>);

impl<'de> DeserializeSeed<'de> for RequestSeed<'_, '_, 'de> {
    type Value = (String, String);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(String, String), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_, '_, 'de> {
    type Value = (String, String);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ConversionRequest")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(String, String), A::Error> {
        let (mut uid, mut desired, mut objects) = (None, None, false);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "uid" if uid.is_none() => uid = Some(map.next_value::<String>()?),
                "desiredAPIVersion" if desired.is_none() => {
                    desired = Some(map.next_value::<String>()?)
                }
                // The objects are converted as they are read, so the
                // desired version must come first (it does, from the apiserver).
                "objects" if !objects => {
                    let desired = desired.as_deref().ok_or_else(give_up)?;
                    map.next_value_seed(ObjectsSeed {
                        state: &mut *self.0,
                        desired,
                    })?;
                    objects = true;
                }
                _ => return Err(give_up()),
            }
        }
        match (uid, desired, objects) {
            (Some(uid), Some(desired), true) => Ok((uid, desired)),
            _ => Err(give_up()),
        }
    }
}

struct ObjectsSeed<'s, 'ir, 'de, 'd> {
    state: &'s mut OnePass<'ir, 'de>,
    desired: &'d str,
}

impl<'de> DeserializeSeed<'de> for ObjectsSeed<'_, '_, 'de, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ObjectsSeed<'_, '_, 'de, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let state = self.state;
        let ir = state.ir;
        let (_, to) = split_api_version(self.desired);
        loop {
            state.holes.clear();
            let tree = match &state.kind {
                Some((_, _, touch)) => {
                    let seed = Partial {
                        touch,
                        holes: &mut state.holes,
                    };
                    match seq.next_element_seed(seed)? {
                        Some(tree) => tree,
                        None => return Ok(()),
                    }
                }
                None => {
                    // The first object: its kind gives the touch set.
                    let Some(raw) = seq.next_element::<&'de RawValue>()? else {
                        return Ok(());
                    };
                    let head = partial(raw, &Touch::identity(), &mut state.holes)
                        .map_err(|_| give_up())?;
                    let key = plan_key(&head, self.desired).ok_or_else(give_up)?;
                    let resource = ir.resource(&key.0, &key.1).ok_or_else(give_up)?;
                    resource.version(to).ok_or_else(give_up)?;
                    let touch = touch::to_version(ir, resource, to).ok_or_else(give_up)?;
                    state.holes.clear();
                    let tree = partial(raw, &touch, &mut state.holes).map_err(|_| give_up())?;
                    state.kind = Some((key.0, key.1, touch));
                    tree
                }
            };
            // A later object of another kind: read the review again.
            let (group, kind, _) = state.kind.as_ref().ok_or_else(give_up)?;
            let key = plan_key(&tree, self.desired).ok_or_else(give_up)?;
            if key.0 != *group || key.1 != *kind {
                return Err(give_up());
            }
            state
                .answers
                .add(ir, tree, &state.holes, self.desired)
                .ok_or_else(give_up)?;
        }
    }
}

/// The two-pass read: the review with each object as raw text, then each
/// object into the partial tree of its own conversion (or a whole tree).
fn two_passes(ir: &Ir, text: &str) -> Option<Spliced> {
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    if let Some(raw) = envelope.response
        && serde_json::from_str::<Option<ConversionResponse>>(raw.get()).is_err()
    {
        return None;
    }
    let desired = envelope.request.desired_api_version.as_str();
    let mut answers = Answers::new(text.len());
    let mut plans: HashMap<PlanKey, Option<Touch>> = HashMap::new();
    let identity = Touch::identity();
    for raw in &envelope.request.objects {
        let mut holes = Vec::new();
        let head = partial(raw, &identity, &mut holes).ok()?;
        let key = plan_key(&head, desired)?;
        let plan = plans.entry(key.clone()).or_insert_with(|| {
            let (group, kind, from, to) = &key;
            let resource = ir.resource(group, kind)?;
            resource.version(from)?;
            resource.version(to)?;
            touch::conversion(ir, resource, from, to)
        });
        holes.clear();
        let tree = match plan {
            Some(touch) => partial(raw, touch, &mut holes).ok()?,
            None => serde_json::from_str(raw.get()).ok()?,
        };
        answers.add(ir, tree, &holes, desired)?;
    }
    answers.finish(Head {
        api_version: envelope.api_version,
        kind: envelope.kind,
        uid: envelope.request.uid,
        desired: desired.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;
    use serde_json::json;

    /// CronTab and HostPort (one group, two kinds) in one Katalog.
    fn ir() -> Ir {
        crate::compile_sources(&[
            Source::new(
                "crontab.yaml",
                include_str!("../../../../katalogs/crontab.yaml"),
            ),
            Source::new(
                "hostport.yaml",
                include_str!("../../../../katalogs/hostport.yaml"),
            ),
        ])
        .expect("the examples compile together")
    }

    fn crontab(version: &str, name: &str) -> Value {
        let spec = match version {
            "v1beta1" => json!({"cronSpec": "* * * * *", "image": "busybox"}),
            "v2" => json!({"schedule": "* * * * *", "container": {"image": "busybox"}}),
            _ => json!({"schedule": "* * * * *", "image": "busybox", "timeoutSeconds": 30}),
        };
        let mut object = json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
               "metadata": {"name": name, "uid": "u", "managedFields": [{"manager": "m"}]},
               "spec": spec, "status": {"active": [1, 2, 3]}});
        if version == "v1beta1" {
            // What v1beta1 cannot hold, kept from the hub.
            object["metadata"]["annotations"] = json!({"katalog.dev/stash":
                r#"{"v1":{"spec.timeoutSeconds":45,"spec.concurrencyPolicy":"Forbid"}}"#});
        }
        object
    }

    /// Both paths' answers as JSON, and how the fast path read the review.
    fn both(ir: &Ir, body: &str) -> (Value, Value, Paths) {
        let fast = review(ir, body.as_bytes()).expect("answered by splicing");
        let tree = super::super::review::review_conversion_bytes(ir, body.as_bytes())
            .expect("answered by the tree path");
        let fast_json = serde_json::from_slice(&fast.bytes).expect("JSON");
        (fast_json, tree, fast.paths)
    }

    #[test]
    fn a_review_of_mixed_versions_is_answered_in_one_pass_like_the_tree_path() {
        let ir = ir();
        let objects: Vec<Value> = ["v1", "v1beta1", "v2", "v1beta1", "v1"]
            .iter()
            .enumerate()
            .map(|(i, v)| crontab(v, &format!("c{i}")))
            .collect();
        for to in ["v1", "v1beta1", "v2"] {
            let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": "1", "desiredAPIVersion": format!("stable.example.com/{to}"),
                            "objects": objects}})
            .to_string();
            let (fast, tree, paths) = both(&ir, &body);
            assert_eq!(fast, tree, "to {to}");
            assert_eq!(paths.spliced, 5, "to {to}");
            assert!(paths.one_pass, "to {to}");
        }
    }

    #[test]
    fn a_review_of_two_kinds_or_with_the_objects_first_is_read_in_two_passes() {
        let ir = ir();
        let hostport = json!({"apiVersion": "stable.example.com/v1", "kind": "HostPort",
            "metadata": {"name": "h"}, "spec": {"host": "a", "port": 80}});
        let two_kinds = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "2", "desiredAPIVersion": "stable.example.com/v1",
                        "objects": [crontab("v2", "a"), hostport]}})
        .to_string();
        let (fast, tree, paths) = both(&ir, &two_kinds);
        assert_eq!(fast, tree);
        assert_eq!((paths.spliced, paths.one_pass), (2, false));
        // Keys in another order than the apiserver's: objects before the
        // desired version.
        let objects_first = r#"{"kind": "ConversionReview", "request": {"objects": [OBJ],
            "uid": "3", "desiredAPIVersion": "stable.example.com/v2"},
            "apiVersion": "apiextensions.k8s.io/v1beta1"}"#
            .replace("OBJ", &crontab("v1beta1", "b").to_string());
        let (fast, tree, paths) = both(&ir, &objects_first);
        assert_eq!(fast, tree);
        assert_eq!((paths.spliced, paths.one_pass), (1, false));
        assert_eq!(fast["apiVersion"], "apiextensions.k8s.io/v1beta1");
    }

    #[test]
    fn what_the_fast_path_does_not_read_exactly_goes_to_the_tree_path() {
        let ir = ir();
        let ok = |objects: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                   "request": {"uid": "4", "desiredAPIVersion": "stable.example.com/v9", "objects": objects}})
            .to_string()
        };
        // A version the resource does not serve: a Failure, from the tree path.
        assert!(review(&ir, ok(json!([crontab("v1", "a")])).as_bytes()).is_none());
        // Another review apiVersion, an unknown key, no request, not UTF-8.
        for body in [
            r#"{"apiVersion": "apiextensions.k8s.io/v2", "kind": "ConversionReview", "request": {"uid": "u", "desiredAPIVersion": "stable.example.com/v1", "objects": []}}"#,
            r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "extra": 1, "request": {"uid": "u", "desiredAPIVersion": "stable.example.com/v1", "objects": []}}"#,
            r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}"#,
        ] {
            assert!(review(&ir, body.as_bytes()).is_none(), "{body}");
        }
        assert!(review(&ir, b"{\"apiVersion\": \"\xff\"}").is_none());
    }

    #[test]
    fn a_hole_is_written_as_the_bytes_it_stands_for_and_a_lookalike_is_not() {
        let raw: Vec<&[u8]> = vec![b"{\"a\": [1, 2.50, \"\\u00e9\"]}"];
        let tree = json!({"x": hole(0), "y": format!("{}7", hole_prefix()), "z": "plain"});
        let mut out = Vec::new();
        write(&mut out, &tree, &raw);
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.starts_with(r#"{"x":{"a": [1, 2.50, "\u00e9"]},"y":""#),
            "{text}"
        );
        assert!(text.ends_with(r#","z":"plain"}"#), "{text}");
    }
}
