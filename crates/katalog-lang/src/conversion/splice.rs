//! The fast path of a ConversionReview: parse each object only down to what
//! its conversion touches, keep every other member as the bytes it came as,
//! and write the answer by splicing those bytes back in.
//!
//! The rules themselves run on the same evaluator as the tree path
//! ([`convert_owned`]): the object they see is a *partial* tree in which
//! each touched member, and each parent of one, is parsed, and each run of
//! consecutive untouched members of a parsed object stands as one member,
//! a marker key with a null value. The touch set ([`super::touch`])
//! guarantees no rule reads or writes a marker, so markers come out where
//! they went in (or are dropped with their parent), keep a parent with
//! untouched members from counting as empty, and the writer puts their
//! runs back, byte for byte. `metadata` members other than labels and
//! annotations are runs as well, so the invariant check compares the
//! markers: equal exactly when the conversion left them alone.
//!
//! The answer is written once: the envelope's head first (the review's
//! apiVersion, kind and uid come before its objects), then each object as
//! it is converted, then the envelope's tail.
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
//! refuses the review with 400; an integer beyond 64 bits passes as its
//! text where the tree path writes the nearest double (the same value:
//! serde_json's `float_roundtrip` reads both correctly rounded).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::OnceLock;

use kube_core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::eval::convert_owned;
use super::review::{CONVERSION_REVIEW_VERSIONS, Invariants};
use super::touch::{self, Touch};
use crate::common::json::node::{ValueSeed, parse_value};
use crate::common::json::split_api_version;
use crate::ir::Ir;

/// The prefix of a marker: NUL, a per-process random nonce, then the index
/// of the run of untouched members it stands for. A key a rule could
/// produce from the object's own data cannot carry the nonce, which never
/// leaves the process.
fn marker_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        format!("\u{0}katalog-run-{:016x}:", h.finish())
    })
}

fn marker(index: usize) -> String {
    let prefix = marker_prefix();
    let mut digits = [0u8; 20];
    let (mut at, mut n) = (digits.len(), index);
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut key = String::with_capacity(prefix.len() + digits.len() - at);
    key.push_str(prefix);
    key.extend(digits[at..].iter().map(|&d| char::from(d)));
    key
}

/// The index of the run a member key stands for, when `key` is a marker.
fn marker_index(key: &str) -> Option<usize> {
    if !key.starts_with('\u{0}') {
        return None;
    }
    key.strip_prefix(marker_prefix())?.parse().ok()
}

/// Where `part` (a slice of `base`) starts in `base`.
fn offset(base: &str, part: &str) -> usize {
    part.as_ptr() as usize - base.as_ptr() as usize
}

/// Parses one value in a single pass into a partial tree: the members the
/// touch set names are parsed (whole, or again partially); every run of
/// consecutive members it does not name is kept as the bytes it came as
/// (`"a": 1, "b": [2]`, from the first key's quote to the last value's
/// end), pushed onto `runs` as a range of `base`, and stands in the tree as
/// one member: a marker key (see [`marker`]) with a null value. A value
/// that is not an object where the touch set expects one is parsed whole.
///
/// A key written with escapes cannot be located in `base` (serde_json
/// gives its unescaped copy): the read fails, and the review goes to the
/// tree path.
struct Partial<'t, 'r, 'de> {
    touch: &'t Touch,
    base: &'de str,
    runs: &'r mut Vec<Range<usize>>,
    /// At an object's root: the touch set of each version it may come at
    /// (`touch` is their union). Once `apiVersion` is read, the members
    /// after it are read with its version's own set; members before it
    /// were read with the union, which is always safe (more parsed).
    versions: Option<&'t Versions>,
}

/// The touch set of each version a kind's objects may come at, converted
/// to one desired version.
struct Versions {
    group: String,
    touches: Vec<(String, Touch)>,
}

impl Versions {
    fn of(&self, api_version: &Value) -> Option<&Touch> {
        let (group, version) = split_api_version(api_version.as_str()?);
        if group != self.group {
            return None;
        }
        self.touches
            .iter()
            .find(|(v, _)| v == version)
            .map(|(_, t)| t)
    }
}

impl<'de> DeserializeSeed<'de> for Partial<'_, '_, 'de> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.touch.is_whole() {
            return ValueSeed.deserialize(d);
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
        let mut out = Map::with_capacity(8);
        let mut touch = self.touch;
        // The run the previous member extended, if it was untouched.
        let mut open: Option<usize> = None;
        while let Some(key) = map.next_key::<&'de str>()? {
            match touch.child(key) {
                Some(child) => {
                    open = None;
                    let value = map.next_value_seed(Partial {
                        touch: child,
                        base: self.base,
                        runs: &mut *self.runs,
                        versions: None,
                    })?;
                    if key == "apiVersion"
                        && let Some(own) = self.versions.and_then(|v| v.of(&value))
                    {
                        touch = own;
                    }
                    out.insert(key.to_string(), value);
                }
                None => {
                    let raw: &'de RawValue = map.next_value()?;
                    let end = offset(self.base, raw.get()) + raw.get().len();
                    match open {
                        Some(i) => self.runs[i].end = end,
                        None => {
                            let start = offset(self.base, key).wrapping_sub(1);
                            if self.base.as_bytes().get(start) != Some(&b'"') {
                                return Err(give_up());
                            }
                            self.runs.push(start..end);
                            let i = self.runs.len() - 1;
                            open = Some(i);
                            out.insert(marker(i), Value::Null);
                        }
                    }
                }
            }
        }
        Ok(Value::Object(out))
    }
    // Anything else is a whole value, built as [`ValueSeed`] builds it.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        ValueSeed.visit_seq(seq)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        ValueSeed.visit_bool(v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        ValueSeed.visit_i64(v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        ValueSeed.visit_u64(v)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        ValueSeed.visit_f64(v)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        ValueSeed.visit_str(v)
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        ValueSeed.visit_string(v)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        ValueSeed.visit_unit()
    }
}

/// The partial tree of one object (see [`Partial`]); `runs` are ranges of
/// `raw`'s text.
fn partial(
    raw: &RawValue,
    touch: &Touch,
    runs: &mut Vec<Range<usize>>,
) -> Result<Value, serde_json::Error> {
    let base = raw.get();
    let mut de = serde_json::Deserializer::from_str(base);
    let value = Partial {
        touch,
        base,
        runs,
        versions: None,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Write `value` as JSON, each marker as the run of `base` it stands for.
fn write(out: &mut Vec<u8>, value: &Value, base: &str, runs: &[Range<usize>]) {
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item, base, runs);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match marker_index(k).and_then(|i| runs.get(i)) {
                    Some(run) => out.extend_from_slice(&base.as_bytes()[run.clone()]),
                    None => {
                        write_json(out, k);
                        out.push(b':');
                        write(out, v, base, runs);
                    }
                }
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
        base: text,
        answers: Answers::new(body.len()),
        kind: None,
        runs: Vec::new(),
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

/// The answer's envelope around its objects: what comes before the first
/// converted object and after the last, as the tree path writes it
/// (kube-core's `ConversionResponse`); `None` for a review apiVersion the
/// tree path refuses.
fn envelope(api_version: &str, kind: &str, uid: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    if !CONVERSION_REVIEW_VERSIONS.contains(&api_version) {
        return None;
    }
    let review: ConversionReview = serde_json::from_value(serde_json::json!({
        "apiVersion": api_version,
        "kind": kind,
        "request": {"uid": uid, "desiredAPIVersion": "", "objects": []},
    }))
    .ok()?;
    let request = ConversionRequest::try_from(review).ok()?;
    let mut answer = serde_json::to_value(
        ConversionResponse::for_request(request)
            .success(Vec::new())
            .into_review(),
    )
    .ok()?;
    // `null` in place of the list, found again in the bytes: the one key
    // of that name (a string's own quotes are escaped), so the bytes split
    // there, with the brackets put back on either side.
    *answer.pointer_mut("/response/convertedObjects")? = Value::Null;
    let bytes = serde_json::to_vec(&answer).ok()?;
    const AT: &[u8] = b"\"convertedObjects\":null";
    let at = bytes.windows(AT.len()).position(|w| w == AT)?;
    let split = at + AT.len() - b"null".len();
    let mut head = bytes[..split].to_vec();
    head.push(b'[');
    let mut tail = vec![b']'];
    tail.extend_from_slice(&bytes[at + AT.len()..]);
    Some((head, tail))
}

/// The answer being written: the envelope's head (once known), then the
/// converted objects one after another.
struct Answers {
    buffer: Vec<u8>,
    /// The envelope's tail and what its head was written from (review
    /// apiVersion, kind, uid), once the head is in `buffer`.
    tail: Option<(Vec<u8>, [String; 3])>,
    /// Where the objects start in `buffer`.
    objects_at: usize,
    count: usize,
    first: Option<(String, String)>,
    mixed: bool,
    paths: Paths,
}

impl Answers {
    fn new(size: usize) -> Self {
        Answers {
            buffer: Vec::with_capacity(size + size / 16 + 512),
            tail: None,
            objects_at: 0,
            count: 0,
            first: None,
            mixed: false,
            paths: Paths::default(),
        }
    }

    /// Write the envelope's head before the first object, when the
    /// review's apiVersion, kind and uid are known by then (they are, in
    /// the order the apiserver writes a review), so the objects are
    /// written where they end up.
    fn begin(&mut self, api_version: &str, kind: &str, uid: &str) {
        if self.count > 0 || self.tail.is_some() {
            return;
        }
        if let Some((head, tail)) = envelope(api_version, kind, uid) {
            self.buffer.extend_from_slice(&head);
            self.objects_at = self.buffer.len();
            self.tail = Some((tail, [api_version.into(), kind.into(), uid.into()]));
        }
    }

    /// Convert one object (`runs`: the ranges of `base` its partial tree's
    /// markers stand for; `whole`: a whole tree) and write it; `None` when
    /// it fails.
    fn add(
        &mut self,
        ir: &Ir,
        tree: Value,
        base: &str,
        runs: &[Range<usize>],
        desired: &str,
        whole: bool,
    ) -> Option<()> {
        crate::common::budget::check_deadline().ok()?;
        let api_version = tree.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        match &self.first {
            None => {
                let kind = tree.get("kind").and_then(Value::as_str).unwrap_or("");
                self.first = Some((api_version.to_string(), kind.to_string()));
            }
            Some((first, _)) => self.mixed |= first != api_version,
        }
        let out = converted(ir, tree, desired)?;
        if self.count > 0 {
            self.buffer.push(b',');
        }
        write(&mut self.buffer, &out, base, runs);
        self.count += 1;
        if whole {
            self.paths.whole += 1;
        } else {
            self.paths.spliced += 1;
        }
        Some(())
    }

    /// The answer: the envelope as the tree path builds it, the converted
    /// objects in it.
    fn finish(mut self, head: Head) -> Option<Spliced> {
        let bytes = match self.tail.take() {
            Some((tail, [api_version, kind, uid]))
                if api_version == head.api_version && kind == head.kind && uid == head.uid =>
            {
                self.buffer.extend_from_slice(&tail);
                self.buffer
            }
            _ => {
                // The head was not known before the objects: put the
                // objects inside it now.
                let (envelope_head, tail) = envelope(&head.api_version, &head.kind, &head.uid)?;
                let objects = &self.buffer[self.objects_at..];
                let mut bytes =
                    Vec::with_capacity(envelope_head.len() + objects.len() + tail.len());
                bytes.extend_from_slice(&envelope_head);
                bytes.extend_from_slice(objects);
                bytes.extend_from_slice(&tail);
                bytes
            }
        };
        Some(Spliced {
            bytes,
            uid: head.uid,
            desired_api_version: head.desired,
            first: self.first,
            mixed: self.mixed,
            count: self.count,
            paths: self.paths,
        })
    }
}

/// The state of a one-pass read: the objects answered so far, and the kind
/// the review is of with the touch set of its conversions, once known.
struct OnePass<'ir, 'de> {
    ir: &'ir Ir,
    /// The whole review's text, which the runs are ranges of.
    base: &'de str,
    answers: Answers,
    /// Group, kind, the union of the touch sets of every conversion of
    /// that kind to the desired version, and each of them.
    kind: Option<(String, String, Touch, Versions)>,
    runs: Vec<Range<usize>>,
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
        let (mut api_version, mut kind, mut request) = (None::<String>, None::<String>, None);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "apiVersion" if api_version.is_none() => api_version = Some(map.next_value()?),
                "kind" if kind.is_none() => kind = Some(map.next_value()?),
                "request" if request.is_none() => {
                    request = Some(map.next_value_seed(RequestSeed {
                        state: &mut *self.0,
                        review: api_version.as_deref().zip(kind.as_deref()),
                    })?)
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

struct RequestSeed<'s, 'ir, 'de, 'r> {
    state: &'s mut OnePass<'ir, 'de>,
    /// The review's apiVersion and kind, when they came before the request.
    review: Option<(&'r str, &'r str)>,
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_, '_, 'de, '_> {
    type Value = (String, String);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(String, String), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_, '_, 'de, '_> {
    type Value = (String, String);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ConversionRequest")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(String, String), A::Error> {
        let (mut uid, mut desired, mut objects) = (None::<String>, None, false);
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
                    if let (Some((api_version, kind)), Some(uid)) = (self.review, &uid) {
                        self.state.answers.begin(api_version, kind, uid);
                    }
                    map.next_value_seed(ObjectsSeed {
                        state: &mut *self.state,
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
        let base = state.base;
        let (_, to) = split_api_version(self.desired);
        loop {
            state.runs.clear();
            let tree = match &state.kind {
                Some((_, _, touch, versions)) => {
                    let seed = Partial {
                        touch,
                        base,
                        runs: &mut state.runs,
                        versions: Some(versions),
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
                    let head =
                        partial(raw, &Touch::identity(), &mut state.runs).map_err(|_| give_up())?;
                    let key = plan_key(&head, self.desired).ok_or_else(give_up)?;
                    let resource = ir.resource(&key.0, &key.1).ok_or_else(give_up)?;
                    resource.version(to).ok_or_else(give_up)?;
                    let mut touch = Touch::default();
                    let mut touches = Vec::new();
                    for from in resource.served() {
                        let own = touch::conversion(ir, resource, from, to).ok_or_else(give_up)?;
                        touch.merge(&own);
                        touches.push((from.to_string(), own));
                    }
                    let versions = Versions {
                        group: key.0.clone(),
                        touches,
                    };
                    state.runs.clear();
                    // Parsed again with the review's text as the base of
                    // its runs, as every later object is.
                    let mut de = serde_json::Deserializer::from_str(raw.get());
                    let tree = Partial {
                        touch: &touch,
                        base,
                        runs: &mut state.runs,
                        versions: Some(&versions),
                    }
                    .deserialize(&mut de)
                    .and_then(|tree| de.end().map(|()| tree))
                    .map_err(|_| give_up())?;
                    state.kind = Some((key.0, key.1, touch, versions));
                    tree
                }
            };
            // A later object of another kind: read the review again.
            let (group, kind, _, _) = state.kind.as_ref().ok_or_else(give_up)?;
            let key = plan_key(&tree, self.desired).ok_or_else(give_up)?;
            if key.0 != *group || key.1 != *kind {
                return Err(give_up());
            }
            state
                .answers
                .add(ir, tree, base, &state.runs, self.desired, false)
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
    answers.begin(&envelope.api_version, &envelope.kind, &envelope.request.uid);
    let mut plans: HashMap<PlanKey, Option<Touch>> = HashMap::new();
    let identity = Touch::identity();
    let mut runs = Vec::new();
    for raw in &envelope.request.objects {
        runs.clear();
        let head = partial(raw, &identity, &mut runs).ok()?;
        let key = plan_key(&head, desired)?;
        let plan = plans.entry(key.clone()).or_insert_with(|| {
            let (group, kind, from, to) = &key;
            let resource = ir.resource(group, kind)?;
            resource.version(from)?;
            resource.version(to)?;
            touch::conversion(ir, resource, from, to)
        });
        runs.clear();
        let (tree, whole) = match plan {
            Some(touch) => (partial(raw, touch, &mut runs).ok()?, false),
            None => (parse_value(raw.get().as_bytes()).ok()?, true),
        };
        answers.add(ir, tree, raw.get(), &runs, desired, whole)?;
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
    fn a_run_is_written_as_the_bytes_it_stands_for_and_a_lookalike_is_not() {
        let base = r#"{"a": [1, 2.50, "\u00e9"], "b" :{}, "c": 3}"#;
        let mut runs = Vec::new();
        let mut touch = Touch::default();
        touch.add(&crate::common::path::Path::root().child("c"));
        let mut de = serde_json::Deserializer::from_str(base);
        let mut tree = Partial {
            touch: &touch,
            base,
            runs: &mut runs,
            versions: None,
        }
        .deserialize(&mut de)
        .expect("a partial tree");
        // One run for `a` and `b`, one marker in the tree.
        assert_eq!(runs.len(), 1);
        assert_eq!(
            &base[runs[0].clone()],
            r#""a": [1, 2.50, "\u00e9"], "b" :{}"#
        );
        let map = tree.as_object_mut().expect("an object");
        assert_eq!(map.len(), 2);
        // A key that looks like a marker but for another index, a plain key.
        map.insert(format!("{}7", marker_prefix()), json!("kept"));
        map.insert("z".into(), json!("plain"));
        let mut out = Vec::new();
        write(&mut out, &tree, base, &runs);
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.starts_with(r#"{"a": [1, 2.50, "\u00e9"], "b" :{},"c":3,""#),
            "{text}"
        );
        assert!(text.ends_with(r#":"kept","z":"plain"}"#), "{text}");
    }

    #[test]
    fn a_key_written_with_escapes_sends_the_review_to_the_tree_path() {
        let base = r#"{"\u0061": 1, "c": 2}"#;
        let mut touch = Touch::default();
        touch.add(&crate::common::path::Path::root().child("c"));
        let mut de = serde_json::Deserializer::from_str(base);
        let read = Partial {
            touch: &touch,
            base,
            runs: &mut Vec::new(),
            versions: None,
        }
        .deserialize(&mut de);
        assert!(read.is_err());
        let ir = ir();
        let mut object = crontab("v1", "e");
        object["spec"]["x\\y"] = json!(1);
        let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "1", "desiredAPIVersion": "stable.example.com/v2",
                        "objects": [object]}})
        .to_string();
        assert!(review(&ir, body.as_bytes()).is_none());
    }

    #[test]
    fn members_after_the_api_version_are_read_with_that_versions_touch_set() {
        let ir = ir();
        let resource = ir
            .resource("stable.example.com", "CronTab")
            .expect("CronTab");
        let mut union = Touch::default();
        let mut touches = Vec::new();
        for from in resource.served() {
            let own = touch::conversion(&ir, resource, from, "v2").expect("no CEL");
            union.merge(&own);
            touches.push((from.to_string(), own));
        }
        let versions = Versions {
            group: "stable.example.com".into(),
            touches,
        };
        let read = |object: &Value| {
            let base = object.to_string();
            let mut runs = Vec::new();
            let mut de = serde_json::Deserializer::from_str(&base);
            let tree = Partial {
                touch: &union,
                base: &base,
                runs: &mut runs,
                versions: Some(&versions),
            }
            .deserialize(&mut de)
            .expect("a partial tree");
            let mut out = Vec::new();
            write(&mut out, &tree, &base, &runs);
            let back: Value = serde_json::from_slice(&out).expect("JSON");
            assert_eq!(&back, object);
            tree
        };
        // A v1 object: v1 to v2 reads no metadata (only v1beta1 stashes),
        // so metadata is one run; before `apiVersion`, the union parses it.
        let v1 = crontab("v1", "a");
        let tree = read(&v1);
        assert!(tree.get("metadata").is_none(), "{tree}");
        assert_eq!(tree["spec"]["image"], "busybox");
        let mut late = serde_json::Map::new();
        for (k, v) in v1.as_object().expect("an object") {
            if k != "apiVersion" {
                late.insert(k.clone(), v.clone());
            }
        }
        late.insert("apiVersion".into(), v1["apiVersion"].clone());
        let tree = read(&Value::Object(late));
        assert!(tree["metadata"].is_object(), "{tree}");
        // A v1beta1 object carries its stash: metadata is read down to it.
        let tree = read(&crontab("v1beta1", "b"));
        assert!(
            tree["metadata"]["annotations"]["katalog.dev/stash"].is_string(),
            "{tree}"
        );
        // Another group: the union.
        let mut other = crontab("v1", "c");
        other["apiVersion"] = json!("other.example.com/v1");
        assert!(read(&other)["metadata"].is_object());
    }
}
