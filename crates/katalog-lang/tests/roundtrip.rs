//! Round-trip laws of every example Katalog under `katalogs/`, checked on
//! generated objects.
//!
//! For a resource with hub H and spokes S and T:
//!
//! * S → H → S gives back the input exactly;
//! * H → S → H gives back the input exactly;
//! * S → T → S gives back the input exactly;
//!
//! and every single conversion leaves `metadata` alone, except the labels and
//! annotations the rules name and the stash annotations.
//!
//! "Exactly" is `serde_json::Value` equality: the same keys (in any order),
//! the same strings, numbers of the same kind (`1` is not `1.0`), and an empty
//! object is not a missing one (`spec: {}` must come back as `spec: {}`).
//! Stash annotations are never removed before comparing: the engine deletes
//! what it stashed when it restores it (and drops an annotation it emptied),
//! so the laws hold with the annotations in place and no exception is needed.
//!
//! Generators produce objects in each version's valid domain: what the CRD
//! schema allows (`katalogs/*.crd.yaml`; for the kitchen sink, the schema
//! written at the top of `kitchen-sink.yaml`), narrowed only where a rule's
//! lossless condition demands it. Every narrowing is marked `Domain:` and
//! names the condition. Objects come in two kinds:
//!
//! * created at that version by a user: any valid object, including a missing
//!   or empty `spec`, and never a stash annotation (those belong to the
//!   engine);
//! * `Engine-written:` read at that version after being written at another
//!   one, which is the only way an object comes to carry a stash annotation.
//!   These are made by the engine itself: a generated object of the other
//!   version is converted (with [`converted`]), so the stash forms in the
//!   domain are exactly the ones the engine writes, and stay so whenever the
//!   engine changes how it decides what to stash.
//!
//! Engine bugs these laws found (an empty `labels: {}` left by a constant
//! label, and rule order deciding whether an emptied `spec` is removed) are
//! fixed; their properties run with the others. The language reference (docs/reference/) promises that
//! `stash` (with a merged `default`), `wrap` and `unwrap` never need `lossy`,
//! and that a value that would not make the round trip fails the conversion
//! instead of being lost.
//!
//! * F — a `constant` on a label leaves an empty `labels: {}` behind. The
//!   constant writes its label even where `metadata.labels` is missing (labels
//!   always have a parent), creating the map; on the way back it takes the
//!   label out but, being one-sided, removes no emptied object, so the map it
//!   created lingers empty. Kitchen-sink v2 `{metadata: {name: a}}` → v1
//!   `{labels: {kitchen.example.com/schema: legacy}}` → v2 `{labels: {}}`. The
//!   engine drops an annotations map it empties (the stash write-back) but not
//!   a labels map. The apiserver normalises `ObjectMeta` (an empty map is
//!   omitted), so a cluster never sees the difference; the law does.
//! * G — the rules of a list are documented to act simultaneously, "so their
//!   order never matters", but each rule takes its fields in turn, and whether
//!   taking one removes an emptied parent depends on whether a later rule has
//!   already taken its siblings. Kitchen-sink v2 `{spec: {priority: 0, paused:
//!   false}}` → v1 is `{spec: {}}` (priority moved out first, then `paused`
//!   taken by its one-sided stash, which keeps `spec`) with the rules in the
//!   order written, but no `spec` and a stash of `paused: false` (the coerce
//!   took the last field and removed `spec`) with them reversed. The written
//!   order happens to make every round trip exact; with the `owner` rename
//!   moved after the `paused` stash, v1 `{spec: {}}` with an owner label →
//!   v2 → v1 loses `spec: {}` and gains that stash.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Instant;

use katalog_lang::convert::convert;
use katalog_lang::ir::Op;
use katalog_lang::suite::describe_difference;
use katalog_lang::{Ir, Source, compile_sources};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRunner};
use serde_json::{Map, Value, json};

type Obj = Map<String, Value>;
type Law = Result<(), TestCaseError>;
type Fields = Vec<(&'static str, Option<Value>)>;

/// Generated objects per property.
const CASES: u32 = 10_000;
/// The default stash annotation.
const STASH: &str = "katalog.dev/stash";

// ---------------------------------------------------------------------------
// Harness

fn katalog(file: &str) -> Ir {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../katalogs")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    compile_sources(&[Source::new(file, text)])
        .unwrap_or_else(|d| panic!("{file} does not compile:\n{}", d.render()))
}

static CRONTAB_IR: LazyLock<Ir> = LazyLock::new(|| katalog("crontab.yaml"));
static HOSTPORT_IR: LazyLock<Ir> = LazyLock::new(|| katalog("hostport.yaml"));
static KITCHEN_IR: LazyLock<Ir> = LazyLock::new(|| katalog("kitchen-sink.yaml"));

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Runs `law` on `CASES` objects from `strategy`; on failure, panics with the
/// shrunk counterexample as JSON.
fn check(name: &str, strategy: impl Strategy<Value = Value>, law: impl Fn(&Value) -> Law) {
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        // Several times faster than the default ChaCha in a debug build.
        rng_algorithm: RngAlgorithm::XorShift,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let start = Instant::now();
    match runner.run(&strategy, |object| law(&object)) {
        Ok(()) => eprintln!(
            "{name}: {CASES} generated objects passed in {:.1?}",
            start.elapsed()
        ),
        Err(TestError::Fail(why, object)) => {
            panic!("{name}: {why}\nminimal failing input: {}", compact(&object))
        }
        Err(TestError::Abort(why)) => panic!("{name}: aborted: {why}"),
    }
}

/// The labels and annotations a conversion of a resource may change: those
/// its rules name, and its stash annotations.
struct Owned {
    labels: &'static [&'static str],
    annotations: &'static [&'static str],
}

fn api_version_of(object: &Value) -> String {
    object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn convert_to(ir: &Ir, object: &Value, api_version: &str) -> Result<Value, TestCaseError> {
    convert(ir, object, api_version).map_err(|e| {
        TestCaseError::fail(format!(
            "{} → {api_version} failed: {e}\ninput: {}",
            api_version_of(object),
            compact(object)
        ))
    })
}

/// `metadata` is unchanged except for the labels and annotations in `owned`.
/// An absent `labels` or `annotations` map counts as an empty one: the
/// apiserver never sends an empty one nor passes one on (they are `omitempty`
/// in ObjectMeta), whether or not the engine drops one a rule emptied.
fn metadata_kept(owned: &Owned, before: &Value, after: &Value) -> Law {
    let none = Obj::new();
    let b = before["metadata"].as_object().unwrap_or(&none);
    let a = after["metadata"].as_object().unwrap_or(&none);
    let added = a.keys().filter(|k| !b.contains_key(*k));
    for key in b.keys().chain(added) {
        let free = match key.as_str() {
            "labels" => owned.labels,
            "annotations" => owned.annotations,
            _ => {
                prop_assert!(b.get(key) == a.get(key), "metadata.{} changed", key);
                continue;
            }
        };
        fn kept<'v>(m: Option<&'v Value>, free: &[&str]) -> Vec<(&'v String, &'v Value)> {
            let mut kept: Vec<_> = m
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter(|(k, _)| !free.contains(&k.as_str()))
                .collect();
            kept.sort_by_key(|(k, _)| *k);
            kept
        }
        prop_assert!(
            kept(b.get(key), free) == kept(a.get(key), free),
            "metadata.{} changed beyond the keys rules own",
            key
        );
    }
    Ok(())
}

/// `input` → `via` → back to the input's version gives the input back.
fn there_and_back(ir: &Ir, owned: &Owned, input: &Value, via: &str) -> Law {
    let from = api_version_of(input);
    let mid = convert_to(ir, input, via)?;
    metadata_kept(owned, input, &mid)?;
    // No metadata check on the way back: `back` must equal `input`.
    let back = convert_to(ir, &mid, &from)?;
    if back != *input {
        return Err(TestCaseError::fail(format!(
            "{from} → {via} → {from} changed the object: {}\nvia:  {}\nback: {}",
            describe_difference(input, &back),
            compact(&mid),
            compact(&back)
        )));
    }
    Ok(())
}

/// Every round trip from the object's version through each other version.
fn round_trips(ir: &Ir, owned: &Owned, group: &str, versions: &[&str], object: &Value) -> Law {
    let from = api_version_of(object);
    for v in versions {
        let via = format!("{group}/{v}");
        if via != from {
            there_and_back(ir, owned, object, &via)?;
        }
    }
    Ok(())
}

/// `object` converted to `version` of its group, as the engine writes it and
/// the apiserver passes it on: without an empty `labels` or `annotations`
/// map (they are `omitempty` in ObjectMeta, which the apiserver decodes
/// every custom resource's metadata into). Used to build engine-written
/// inputs; the source objects are in their own version's domain, so a
/// failure here is a failure of a law as well.
fn converted(ir: &Ir, object: &Value, version: &str) -> Value {
    let from = api_version_of(object);
    let group = from.split_once('/').map_or("", |(g, _)| g);
    let mut out = convert(ir, object, &format!("{group}/{version}")).unwrap_or_else(|e| {
        panic!(
            "generating an engine-written input: {from} → {version} failed: {e}\ninput: {}",
            compact(object)
        )
    });
    drop_empty_meta_maps(&mut out);
    out
}

/// Removes an empty `metadata.labels` or `metadata.annotations` map.
fn drop_empty_meta_maps(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, v| {
            !matches!(k.as_str(), "labels" | "annotations")
                || v.as_object().is_none_or(|m| !m.is_empty())
        });
    }
}

// ---------------------------------------------------------------------------
// Building blocks

// Generation is kept cheap (the laws run 10 000 objects per property in a
// debug build): strings come from one random draw each and free-form
// values mostly from a pool of prepared ones, instead of from a strategy
// per character or per nested node. Everything still shrinks: a draw shrinks
// toward 0, which maps to the shortest string and the first pool entry.

/// What random strings are made of: ASCII, the separators and path
/// characters rules care about (`.` `/` `~` `:` `,` `*`), characters JSON
/// escapes, and multi-byte Unicode (accents, CJK, emoji, a joiner, a bidi
/// override). 40 entries; an index past the end takes any `char`.
const CHARS: &[char] = &[
    'a', 'b', 'z', 'A', 'Q', '0', '7', '9', ' ', '-', '_', '.', '/', '~', ':', ',', '*', '"', '\\',
    '\n', '\t', '\u{0}', '\u{7f}', 'é', 'ß', 'Ω', '漢', '字', '🦀', '\u{200d}', '\u{202e}',
    '\u{fffd}', '𝄞', '{', '}', '[', ']', '@', '%', '$',
];

/// Prepared strings: empty, separators alone and in the middle, values that
/// look like other types, escapes, long ones.
const STRINGS: &[&str] = &[
    "",
    "a",
    " ",
    "*",
    ":",
    "/",
    ",",
    "~",
    ".",
    "localhost:8080",
    "::1",
    "[::1]:8080",
    "a/b/c",
    "a,b,,c",
    "..",
    "latest",
    "0",
    "-1",
    "007",
    "9223372036854775808",
    "true",
    "null",
    "{}",
    "{\"v1\":{}}",
    "Grüße, 世界 🦀",
    "\u{202e}olleh",
    "tab\there",
    "line\nbreak",
    "quote\"back\\slash",
    "nul\u{0}byte",
    "\u{fffd}\u{200d}\u{1f468}\u{200d}\u{1f469}",
    "registry.example.com:5000/team/app@sha256:0123456789abcdef",
    "a-very-long-string-that-goes-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-",
];

/// Map keys that look like paths, JSON Pointers or engine markers.
const FUNKY_KEYS: &[&str] = &[
    "",
    ".",
    "a.b",
    "a/b",
    "~",
    "~0",
    "~1",
    "a~1b/c.d",
    "example.com/x",
    "spec.paused",
    "!absent",
    "$ref",
    "🦀.🦀/🦀",
];

/// Label and annotation keys: prefixed names with `.` and `/`, and some with
/// `~` and Unicode (not valid Kubernetes keys, but the engine must not care).
const META_KEYS: &[&str] = &[
    "app",
    "app.kubernetes.io/name",
    "app.kubernetes.io/part-of",
    "example.com/a.b",
    "example.com/a~b",
    "tilde~key",
    "a/b/c",
    "kitchen.example.com/other",
    "stable.example.com/note",
    "ünï.cødé/ключ",
];

/// A string from one 128-bit draw. The low two bits choose: below
/// `4 - pool_quarters`, up to 9 characters (4 bits of length, then 6 bits
/// per character indexing `CHARS`; an index past its end takes any `char`,
/// from the high 32 bits); otherwise an entry of `pool`. A draw of 0 is "".
fn string_from(bits: u128, pool: &[&str], pool_quarters: u128) -> String {
    if bits & 3 >= 4 - pool_quarters {
        return pool[((bits >> 2) % pool.len() as u128) as usize].to_string();
    }
    let other = char::from_u32(((bits >> 96) as u32) % 0x11_0000).unwrap_or('\u{fffd}');
    let len = ((bits >> 2) & 0xf) % 10;
    (0..len)
        .map(|i| {
            let idx = ((bits >> (6 + 6 * i)) & 0x3f) as usize;
            CHARS.get(idx).copied().unwrap_or(other)
        })
        .collect()
}

fn text() -> BoxedStrategy<String> {
    any::<u128>()
        .prop_map(|bits| string_from(bits, STRINGS, 1))
        .boxed()
}

fn text_without(c: char) -> BoxedStrategy<String> {
    text().prop_map(move |s| s.replace(c, "")).boxed()
}

fn free_key() -> BoxedStrategy<String> {
    any::<u128>()
        .prop_map(|bits| string_from(bits, FUNKY_KEYS, 1))
        .boxed()
}

fn meta_key() -> BoxedStrategy<String> {
    any::<u128>()
        .prop_map(|bits| string_from(bits, META_KEYS, 3))
        .boxed()
}

fn one_of(values: &'static [&'static str]) -> BoxedStrategy<Value> {
    select(values).prop_map(Value::from).boxed()
}

/// An integer of `format: int64`.
fn int64() -> BoxedStrategy<i64> {
    prop_oneof![
        4 => any::<i64>(),
        3 => -1000i64..1000,
        1 => select(&[i64::MIN, i64::MIN + 1, i64::MAX, -1, 0][..]),
    ]
    .boxed()
}

/// Any JSON integer: int64, and unsigned ones above `i64::MAX`.
fn int() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => int64().prop_map(Value::from),
        1 => ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(Value::from),
    ]
    .boxed()
}

/// Prepared free-form values: nesting, every number kind, keys with `.`,
/// `/` and `~`, empty containers, nulls.
static FREE_VALUES: LazyLock<Vec<Value>> = LazyLock::new(|| {
    vec![
        json!({}),
        json!([]),
        json!(null),
        json!(0.5),
        json!(-0.0),
        json!(1e300),
        json!(u64::MAX),
        json!(i64::MIN),
        json!({"a.b": {"c/d": {"~e": [1, "two", 3.0, null, true]}}}),
        json!([[[]], {}, [{}], {"": ""}]),
        json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "weights": [0.25, 0.75]}),
        json!({"nested": {"deeper": {"deepest": {"big": 18446744073709551615u64, "small": -9223372036854775808i64}}}}),
        json!({"unicode": "漢字 🦀", "escapes": "\"\\\n\t\u{0}", "empty": ""}),
    ]
});

/// Any JSON value, as `x-kubernetes-preserve-unknown-fields` allows.
fn free_value() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::from),
        2 => int(),
        1 => any::<f64>().prop_map(|f| Value::from(if f.is_finite() { f } else { 0.5 })),
        2 => text().prop_map(Value::from),
        3 => (0..FREE_VALUES.len()).prop_map(|i| FREE_VALUES[i].clone()),
    ]
    .boxed()
}

/// A free-form object (possibly `{}`).
fn free_object() -> BoxedStrategy<Value> {
    btree_map(free_key(), free_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
        .boxed()
}

/// A label value: `[A-Za-z0-9._-]`, alphanumeric at both ends, or empty.
fn label_value() -> BoxedStrategy<String> {
    text()
        .prop_map(|s| {
            let s: String = s
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                        c
                    } else {
                        'x'
                    }
                })
                .take(63)
                .collect();
            s.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .boxed()
}

/// Prepared `managedFields` entries: server-side-apply field sets, whose
/// keys hold `:`, `.`, `/`, `~` and JSON.
static MANAGED_FIELDS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let sets = [
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
        json!({"f:spec": {".": {}, "f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:containerPort": {}}}}}),
        json!({"f:metadata": {"f:annotations": {"f:example.com/a~b": {}, "f:kitchen.example.com/owner": {}}}}),
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:status": {}}}}, "f:spec": {"f:args": {"v:\"--x\"": {}}}}),
    ];
    let managers = [
        "kubectl-client-side-apply",
        "katalog",
        "Go-http-client/2.0 ünï",
        "",
    ];
    let mut out = Vec::new();
    for (i, set) in sets.into_iter().enumerate() {
        for (j, manager) in managers.iter().enumerate() {
            out.push(json!({
                "manager": manager,
                "operation": if (i + j) % 2 == 0 { "Update" } else { "Apply" },
                "apiVersion": "example.com/v1",
                "time": "2026-01-02T03:04:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": set.clone(),
            }));
        }
    }
    out
});

fn managed_fields() -> BoxedStrategy<Value> {
    vec(0..MANAGED_FIELDS.len(), 1..3)
        .prop_map(|idx| Value::Array(idx.into_iter().map(|i| MANAGED_FIELDS[i].clone()).collect()))
        .boxed()
}

/// A string map with at least `min` entries (labels, annotations, match
/// labels).
fn string_map(min: usize) -> BoxedStrategy<Obj> {
    vec((meta_key(), text()), min..4)
        .prop_map(|pairs| {
            pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect()
        })
        .boxed()
}

/// Object metadata. `reserved` keys (those rules own, the stash annotations)
/// are never generated here; the version generators add them.
fn metadata(reserved: &'static [&'static str]) -> BoxedStrategy<Obj> {
    let keyed = move |m: Obj| -> Value {
        Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    // Domain: a key a rule or the engine owns is part of a
                    // version's schema, not a free label or annotation.
                    let k = if reserved.contains(&k.as_str()) {
                        format!("x-{k}")
                    } else {
                        k
                    };
                    (k, v)
                })
                .collect(),
        )
    };
    (
        (
            prop_oneof![select(&["a", "front-door", "x.y-z"][..]).prop_map(str::to_string), text()],
            option::of(select(&["default", "kitchen", "kube-system"][..])),
            option::of(any::<u128>()),
            option::of(any::<u64>()),
            option::of(1i64..=i64::MAX),
        ),
        (
            option::of(string_map(1)),
            option::of(string_map(1)),
            option::weighted(0.3, managed_fields()),
            option::weighted(0.3, vec(text(), 1..3)),
            option::weighted(0.3, (text(), text())),
        ),
    )
        .prop_map(
            move |((name, namespace, uid, rv, generation), (labels, annotations, managed, finalizers, owner))| {
                let mut m = Obj::new();
                m.insert("name".into(), Value::String(name));
                if let Some(ns) = namespace {
                    m.insert("namespace".into(), ns.into());
                }
                if let Some(uid) = uid {
                    let h = format!("{uid:032x}");
                    let uid = format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]);
                    m.insert("uid".into(), uid.into());
                }
                if let Some(rv) = rv {
                    m.insert("resourceVersion".into(), rv.to_string().into());
                }
                if let Some(g) = generation {
                    m.insert("generation".into(), g.into());
                    m.insert("creationTimestamp".into(), "2026-01-02T03:04:05Z".into());
                }
                if let Some(l) = labels {
                    m.insert("labels".into(), keyed(l));
                }
                if let Some(a) = annotations {
                    m.insert("annotations".into(), keyed(a));
                }
                if let Some(mf) = managed {
                    m.insert("managedFields".into(), mf);
                }
                if let Some(f) = finalizers {
                    m.insert("finalizers".into(), json!(f));
                }
                if let Some((kind, name)) = owner {
                    m.insert(
                        "ownerReferences".into(),
                        json!([{"apiVersion": "v1", "kind": kind, "name": name, "uid": "0", "controller": true}]),
                    );
                }
                m
            },
        )
        .boxed()
}

/// Puts `key: value` into `metadata.<map>`, creating the map.
fn add_meta(meta: &mut Obj, map: &str, key: &str, value: impl Into<Value>) {
    let m = meta.entry(map).or_insert_with(|| json!({}));
    if let Value::Object(m) = m {
        m.insert(key.to_string(), value.into());
    }
}

/// Whether `spec` is absent, `{}`, one or two of the generated fields (so
/// that lone fields and pairs show up often), or every generated field (each
/// optional one present half of the time).
#[derive(Clone, Copy, Debug)]
enum Shape {
    Absent,
    Empty,
    Pick(u8, u8),
    Fields,
}

fn shape() -> BoxedStrategy<Shape> {
    prop_oneof![
        1 => Just(Shape::Absent),
        1 => Just(Shape::Empty),
        3 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Shape::Pick(a, b)),
        5 => Just(Shape::Fields),
    ]
    .boxed()
}

impl Shape {
    fn spec(self, fields: impl IntoIterator<Item = (&'static str, Option<Value>)>) -> Option<Obj> {
        let present = fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)));
        match self {
            Shape::Absent => None,
            Shape::Empty => Some(Obj::new()),
            Shape::Fields => Some(present.collect()),
            Shape::Pick(a, b) => {
                let present: Vec<_> = present.collect();
                let n = present.len();
                Some(
                    present
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| n > 0 && (*i == a as usize % n || *i == b as usize % n))
                        .map(|(_, kv)| kv)
                        .collect(),
                )
            }
        }
    }
}

fn resource(
    api_version: String,
    kind: &str,
    meta: Obj,
    spec: Option<Obj>,
    status: Option<Value>,
) -> Value {
    let mut o = Obj::new();
    o.insert("apiVersion".into(), api_version.into());
    o.insert("kind".into(), kind.into());
    o.insert("metadata".into(), Value::Object(meta));
    if let Some(spec) = spec {
        o.insert("spec".into(), Value::Object(spec));
    }
    if let Some(status) = status {
        o.insert("status".into(), status);
    }
    Value::Object(o)
}
// ---------------------------------------------------------------------------
// crontab.yaml — CronTab.stable.example.com, hub v1, spokes v1beta1 and v2
// (schema: katalogs/crontab.crd.yaml)

const CRONTAB: &str = "stable.example.com";
const CRONTAB_VERSIONS: &[&str] = &["v1beta1", "v1", "v2"];
const CRONTAB_OWNED: Owned = Owned {
    labels: &[],
    annotations: &[STASH],
};

fn crontab_hub() -> BoxedStrategy<Value> {
    (
        metadata(&[STASH]),
        shape(),
        option::of(text()),
        option::of(text()),
        option::of(int64()),
        option::of(one_of(&["Allow", "Forbid", "Replace"])),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, schedule, image, timeout, policy, status)| {
            let spec = shape.spec([
                ("schedule", schedule.map(Value::from)),
                ("image", image.map(Value::from)),
                ("timeoutSeconds", timeout.map(Value::from)),
                ("concurrencyPolicy", policy),
            ]);
            resource(format!("{CRONTAB}/v1"), "CronTab", meta, spec, status)
        })
        .boxed()
}

fn crontab_v1beta1() -> BoxedStrategy<Value> {
    let created = (
        metadata(&[STASH]),
        shape(),
        option::of(text()),
        option::of(text()),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, cron, image, status)| {
            let spec = shape.spec([
                ("cronSpec", cron.map(Value::from)),
                ("image", image.map(Value::from)),
            ]);
            resource(format!("{CRONTAB}/v1beta1"), "CronTab", meta, spec, status)
        });
    prop_oneof![
        created,
        // Engine-written: a hub object read at v1beta1, `timeoutSeconds` and
        // `concurrencyPolicy` in the stash (or the policy recorded absent).
        // The same as a v2 object read at v1beta1: v2 is the hub respelled.
        crontab_hub().prop_map(|hub| converted(&CRONTAB_IR, &hub, "v1beta1")),
    ]
    .boxed()
}

fn crontab_v2() -> BoxedStrategy<Value> {
    (
        metadata(&[STASH]),
        shape(),
        option::of(text()),
        // Domain: crontab.crd.yaml requires `image` in `container` (an empty
        // wrapper would unwrap to nothing).
        option::of(text()),
        option::of(int64()),
        option::of(one_of(&[
            "AllowConcurrent",
            "ForbidConcurrent",
            "ReplaceConcurrent",
        ])),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, schedule, image, timeout, policy, status)| {
            let spec = shape.spec([
                ("schedule", schedule.map(Value::from)),
                ("container", image.map(|i| json!({ "image": i }))),
                ("timeoutSeconds", timeout.map(Value::from)),
                ("concurrencyPolicy", policy),
            ]);
            // v2 never carries a stash: nothing of v1beta1 or the hub is
            // missing from it.
            resource(format!("{CRONTAB}/v2"), "CronTab", meta, spec, status)
        })
        .boxed()
}

fn crontab_laws(object: &Value) -> Law {
    round_trips(
        &CRONTAB_IR,
        &CRONTAB_OWNED,
        CRONTAB,
        CRONTAB_VERSIONS,
        object,
    )
}

#[test]
fn crontab_hub_round_trips_through_each_spoke() {
    check("crontab v1 (hub)", crontab_hub(), crontab_laws);
}

#[test]
fn crontab_v1beta1_round_trips_through_hub_and_v2() {
    check("crontab v1beta1", crontab_v1beta1(), crontab_laws);
}

#[test]
fn crontab_v2_round_trips_through_hub_and_v1beta1() {
    check("crontab v2", crontab_v2(), crontab_laws);
}

// ---------------------------------------------------------------------------
// hostport.yaml — HostPort.stable.example.com, hub v1 (`hostPort`), spoke v2
// (`host`, `port`); schema: katalogs/hostport.crd.yaml

const HOSTPORT: &str = "stable.example.com";
const HOSTPORT_VERSIONS: &[&str] = &["v1", "v2"];
const HOSTPORT_OWNED: Owned = Owned {
    labels: &[],
    annotations: &[],
};

fn hostport_v1() -> BoxedStrategy<Value> {
    (metadata(&[]), option::of(text()))
        .prop_map(|(meta, host_port)| {
            // Any string: split at the first ":" and joined back, it is the
            // same string.
            let mut o = resource(format!("{HOSTPORT}/v1"), "HostPort", meta, None, None);
            if let Some(hp) = host_port {
                o["hostPort"] = hp.into();
            }
            o
        })
        .boxed()
}

fn hostport_v2() -> BoxedStrategy<Value> {
    (
        metadata(&[]),
        option::of(text_without(':')),
        option::of(text()),
    )
        .prop_map(|(meta, host, port)| {
            let mut o = resource(format!("{HOSTPORT}/v2"), "HostPort", meta, None, None);
            // Domain: `host` holds no ":" — a split into fields stops at the
            // first separator, so only the last piece may contain it.
            // Domain: `port` only with `host` — without a placeholder an
            // absent piece cannot be followed by a present one.
            if let Some(h) = host {
                o["host"] = h.into();
                if let Some(p) = port {
                    o["port"] = p.into();
                }
            }
            o
        })
        .boxed()
}
#[test]
fn hostport_hub_round_trips_through_v2() {
    check("hostport v1 (hub)", hostport_v1(), |o| {
        round_trips(
            &HOSTPORT_IR,
            &HOSTPORT_OWNED,
            HOSTPORT,
            HOSTPORT_VERSIONS,
            o,
        )
    });
}

#[test]
fn hostport_v2_round_trips_through_hub() {
    check("hostport v2", hostport_v2(), |o| {
        round_trips(
            &HOSTPORT_IR,
            &HOSTPORT_OWNED,
            HOSTPORT,
            HOSTPORT_VERSIONS,
            o,
        )
    });
}

// ---------------------------------------------------------------------------
// kitchen-sink.yaml — Widget.kitchen.example.com, hub v2, spokes v1 and v3
// (schema: the comment at the top of kitchen-sink.yaml)

const KITCHEN: &str = "kitchen.example.com";
const WIDGET_VERSIONS: &[&str] = &["v1", "v2", "v3"];
const OWNER_LABEL: &str = "kitchen.example.com/owner";
const SCHEMA_LABEL: &str = "kitchen.example.com/schema";
const PRIORITY_ANNOTATION: &str = "kitchen.example.com/priority";
const V1_FIELDS: &str = "kitchen.example.com/v1-fields";
const WIDGET_RESERVED: &[&str] = &[
    OWNER_LABEL,
    SCHEMA_LABEL,
    PRIORITY_ANNOTATION,
    STASH,
    V1_FIELDS,
];
const WIDGET_OWNED: Owned = Owned {
    labels: &[OWNER_LABEL, SCHEMA_LABEL],
    annotations: &[PRIORITY_ANNOTATION, STASH, V1_FIELDS],
};
const LEVELS: &[&str] = &["Debug", "Info", "Warn", "Error"];
const PROTOCOLS: &[&str] = &["TCP", "UDP"];

fn obj_value(fields: Fields) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect(),
    )
}

/// A list of objects keyed by a unique `key` field, in any order, from a
/// map of key → the other fields.
fn keyed_list(key: &'static str, fields: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    // Domain: keys are unique strings — a list-map (`x-kubernetes-list-type:
    // map`); listToMap / mapToList need one element per key.
    btree_map(text(), fields, 0..4)
        .prop_map(move |m| {
            m.into_iter()
                .map(|(name, rest)| {
                    let mut e = Obj::new();
                    e.insert(key.to_string(), name.into());
                    if let Value::Object(rest) = rest {
                        e.extend(rest);
                    }
                    Value::Object(e)
                })
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
        .prop_map(Value::Array)
        .boxed()
}

/// A map of name → fields, in any key order.
fn keyed_map(fields: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    btree_map(text(), fields, 0..4)
        .prop_map(|m| m.into_iter().collect::<Vec<_>>())
        .prop_shuffle()
        .prop_map(|v| Value::Object(v.into_iter().collect()))
        .boxed()
}

/// The fields of a port besides its name.
fn port_fields() -> BoxedStrategy<Value> {
    // Domain: no `name` field: the map key takes its place.
    (option::of(int()), option::of(one_of(PROTOCOLS)))
        .prop_map(|(port, protocol)| {
            obj_value(vec![("containerPort", port), ("protocol", protocol)])
        })
        .boxed()
}

/// The fields of an environment variable besides its name.
fn env_fields() -> BoxedStrategy<Value> {
    // Domain: no `name` field: the map key takes its place.
    (option::of(text()), option::of(any::<bool>()))
        .prop_map(|(value, secret)| {
            obj_value(vec![
                ("value", value.map(Value::from)),
                ("secret", secret.map(Value::from)),
            ])
        })
        .boxed()
}

/// A container; `image_key` is `image` on the hub, `imageRef` on v1, and
/// `restart_policy` whether the version has it (v1 keeps it in the stash).
fn container(image_key: &'static str, restart_policy: bool) -> BoxedStrategy<Value> {
    (
        option::of(text()),
        option::of(text()),
        option::of(one_of(&["Always", "OnFailure", "Never"]))
            .prop_map(move |p| p.filter(|_| restart_policy)),
        option::of(vec(text(), 0..3)),
    )
        .prop_map(move |(name, image, policy, args)| {
            obj_value(vec![
                ("name", name.map(Value::from)),
                (image_key, image.map(Value::from)),
                ("restartPolicy", policy),
                ("args", args.map(|a| json!(a))),
            ])
        })
        .boxed()
}

/// The bound of a scaling range: digits, possibly with leading zeros, or
/// huge (it is a string).
fn digits() -> BoxedStrategy<String> {
    prop_oneof![
        any::<u16>().prop_map(|n| format!("{:0>1$}", n % 1000, (n / 1000 % 5) as usize)),
        any::<u128>().prop_map(|n| n.to_string()),
    ]
    .boxed()
}

/// Fields every version spells the same way.
fn widget_common() -> BoxedStrategy<Fields> {
    (
        option::of(int()),
        option::of(string_map(0)),
        option::of(free_object()),
    )
        .prop_map(|(replicas, match_labels, config)| {
            vec![
                ("replicas", replicas),
                (
                    "selector",
                    match_labels.map(|m| json!({ "matchLabels": m })),
                ),
                ("config", config),
            ]
        })
        .boxed()
}

/// The hub's spelling of the fields v1 changes (v3 keeps them as they are).
fn widget_hub_fields_v1_changes() -> BoxedStrategy<Fields> {
    (
        (
            option::of(text()),
            option::of(label_value()),
            option::of(int()),
            option::of(any::<bool>()),
            option::of(one_of(&["Gold", "Silver", "Bronze"])),
            // Any string: split at the first "/" and joined back, it is the
            // same string.
            option::of(text()),
        ),
        (
            // The CRD's pattern ^(\*|[0-9]+)\.\.(\*|[0-9]+)$, "*..*" (every
            // piece absent, kept in the stash) included.
            option::of((option::of(digits()), option::of(digits()))),
            // Domain: `host` is required and holds no ":" — a join's pieces
            // must split back, and only the last piece may hold the
            // separator; `port` may hold ":".
            option::of((text_without(':'), option::of(text()))),
            option::of(one_of(LEVELS)),
            option::of(keyed_list("name", port_fields())),
            option::of(vec(container("image", true), 0..3)),
        ),
    )
        .prop_map(
            |(
                (display, owner, priority, paused, tier, owner_ref),
                (scaling, endpoint, level, ports, containers),
            )| {
                let scaling = scaling.map(|(min, max)| {
                    let bound = |b: Option<String>| b.unwrap_or_else(|| "*".into());
                    format!("{}..{}", bound(min), bound(max))
                });
                let endpoint = endpoint.map(|(host, port)| {
                    obj_value(vec![
                        ("host", Some(host.into())),
                        ("port", port.map(Value::from)),
                    ])
                });
                vec![
                    ("displayName", display.map(Value::from)),
                    ("owner", owner.map(Value::from)),
                    ("priority", priority),
                    ("paused", paused.map(Value::from)),
                    ("tier", tier),
                    ("ownerRef", owner_ref.map(Value::from)),
                    ("scaling", scaling.map(Value::from)),
                    ("endpoint", endpoint),
                    ("logging", level.map(|l| json!({ "level": l }))),
                    ("ports", ports),
                    ("containers", containers.map(Value::Array)),
                ]
            },
        )
        .boxed()
}

/// The hub's spelling of the fields v3 changes (v1 keeps them as they are).
fn widget_hub_fields_v3_changes() -> BoxedStrategy<Fields> {
    (
        // Any string: split at every "," and joined back, it is the same.
        option::of(text()),
        option::of(text()),
        option::of(text()),
        option::of(keyed_map(env_fields())),
        // Domain: `format: int64` — the CEL rule's `int()` holds no more.
        option::of(int64()),
        option::of(one_of(&["RollingUpdate", "Recreate", "OnDelete"])),
    )
        .prop_map(|(domains, storage_class, zone, env, timeout, strategy)| {
            vec![
                ("searchDomains", domains.map(Value::from)),
                ("storageClass", storage_class.map(Value::from)),
                ("zone", zone.map(Value::from)),
                ("env", env),
                ("timeoutSeconds", timeout.map(Value::from)),
                ("strategy", strategy),
            ]
        })
        .boxed()
}

/// v3's spelling of the fields it changes.
fn widget_v3_fields() -> BoxedStrategy<Fields> {
    (
        // Domain: items are non-empty and hold no "," — a list joined with
        // a separator splits back only if no item holds it, and `[""]` joins
        // to "", which splits to `[]`.
        option::of(vec(
            text_without(',').prop_map(|s| if s.is_empty() { "a".into() } else { s }),
            0..4,
        )),
        // Domain: `className` is required — `{}` unwraps to nothing.
        option::of(text()),
        // Domain: exactly one zone — a one-element list is what unwraps.
        option::of(text()),
        option::of(keyed_list("name", env_fields())),
        // Domain: the CRD's pattern ^(0|-?[1-9][0-9]*)s$ — the CEL pair is
        // inverse on canonical integers only ("007s" → 7 → "7s").
        option::of(int64()),
        option::of(one_of(&["Rolling", "Replace", "OnDelete"])),
    )
        .prop_map(|(domains, class, zone, env, timeout, strategy)| {
            vec![
                ("searchDomains", domains.map(|d| json!(d))),
                ("storage", class.map(|c| json!({ "className": c }))),
                ("zones", zone.map(|z| json!([z]))),
                ("env", env),
                ("timeout", timeout.map(|t| format!("{t}s").into())),
                ("strategy", strategy),
            ]
        })
        .boxed()
}

/// A hub object created at the hub.
fn widget_hub_created() -> BoxedStrategy<Value> {
    (
        metadata(WIDGET_RESERVED),
        shape(),
        widget_common(),
        widget_hub_fields_v1_changes(),
        widget_hub_fields_v3_changes(),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, common, a, b, status)| {
            let spec = shape.spec(common.into_iter().chain(a).chain(b));
            resource(format!("{KITCHEN}/v2"), "Widget", meta, spec, status)
        })
        .boxed()
}

/// Hub objects: created at the hub, or written at v1 (where v1's
/// `legacyNotes` goes into its own annotation).
fn widget_hub() -> BoxedStrategy<Value> {
    prop_oneof![
        2 => widget_hub_created(),
        // Engine-written: created at v1 and stored at the hub — `paused`
        // and each container's `restartPolicy` get their defaults where
        // their parent exists, `legacyNotes` goes to its annotation.
        1 => widget_v1_created().prop_map(|v1| converted(&KITCHEN_IR, &v1, "v2")),
        // Engine-written: a hub object read at v1, given `legacyNotes`
        // there (an ordinary edit of the v1 object as read, creating its
        // `spec` if it had none) and written back: hub-only values the
        // stash kept, beside the notes annotation. Never the annotation
        // without a `spec`: taking `legacyNotes` out keeps its `spec`.
        1 => (widget_hub_created(), text()).prop_map(|(hub, notes)| {
            let mut v1 = converted(&KITCHEN_IR, &hub, "v1");
            if let Some(o) = v1.as_object_mut() {
                let spec = o.entry("spec").or_insert_with(|| json!({}));
                spec["legacyNotes"] = notes.into();
            }
            converted(&KITCHEN_IR, &v1, "v2")
        }),
    ]
    .boxed()
}

/// A v3 object created at v3.
fn widget_v3_created() -> BoxedStrategy<Value> {
    (
        metadata(WIDGET_RESERVED),
        shape(),
        widget_common(),
        widget_hub_fields_v1_changes(),
        widget_v3_fields(),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, common, a, b, status)| {
            let spec = shape.spec(common.into_iter().chain(a).chain(b));
            resource(format!("{KITCHEN}/v3"), "Widget", meta, spec, status)
        })
        .boxed()
}

fn widget_v3() -> BoxedStrategy<Value> {
    prop_oneof![
        2 => widget_v3_created(),
        // Engine-written: a hub object read at v3, with v1's notes
        // annotation when it was written at v1 (the only engine-owned
        // annotation a v3 object carries).
        1 => widget_hub().prop_map(|hub| converted(&KITCHEN_IR, &hub, "v3")),
    ]
    .boxed()
}

/// v1's spelling of the fields it changes, with what v1 keeps in metadata:
/// (spec fields, owner label, priority annotation).
fn widget_v1_fields() -> BoxedStrategy<(Fields, Option<String>, Option<String>)> {
    (
        (
            option::of(text()),
            option::of(one_of(&["premium", "standard", "basic"])),
            // Domain: `ownerNamespace` holds no "/" and `ownerName` comes
            // only with it — a split into fields stops at the first
            // separator, and without a placeholder an absent piece cannot
            // be followed by a present one.
            option::of((text_without('/'), option::of(text()))),
            // Domain: ^[0-9]+$ — "*" is the placeholder, which means
            // "absent".
            option::of(digits()),
            option::of(digits()),
            // Any string: split at the first ":" it joins back the same.
            option::of(text()),
        ),
        (
            option::of(one_of(LEVELS)),
            option::of(keyed_map(port_fields())),
            option::of(vec(container("imageRef", false), 0..3)),
            option::of(text()),
            option::of(label_value()),
            // Domain: a canonical integer — coerce string → integer accepts
            // only the form integer → string gives back.
            option::of(int()),
        ),
    )
        .prop_map(
            |(
                (title, tier, owner_ref, min, max, address),
                (level, ports, containers, notes, owner, priority),
            )| {
                let (ns, name) = match owner_ref {
                    Some((ns, name)) => (Some(ns), name),
                    None => (None, None),
                };
                let fields = vec![
                    ("title", title.map(Value::from)),
                    ("tier", tier),
                    ("ownerNamespace", ns.map(Value::from)),
                    ("ownerName", name.map(Value::from)),
                    ("minReplicas", min.map(Value::from)),
                    ("maxReplicas", max.map(Value::from)),
                    ("address", address.map(Value::from)),
                    ("logLevel", level),
                    ("ports", ports),
                    ("containers", containers.map(Value::Array)),
                    ("legacyNotes", notes.map(Value::from)),
                    // Domain: no `debug` — `delete` drops it (lossy: true).
                ];
                (fields, owner, priority.map(|p| p.to_string()))
            },
        )
        .boxed()
}

/// A v1 object created at v1: no stash.
fn widget_v1_created() -> BoxedStrategy<Value> {
    (
        metadata(WIDGET_RESERVED),
        shape(),
        widget_common(),
        widget_v1_fields(),
        widget_hub_fields_v3_changes(),
        option::of(free_object()),
    )
        .prop_map(
            |(mut meta, shape, common, (v1, owner, priority), b, status)| {
                let mut spec = shape.spec(common.into_iter().chain(v1).chain(b));
                if let Some(s) = &mut spec
                    && !s.contains_key("ownerNamespace")
                {
                    // Domain: `ownerName` only with `ownerNamespace` (see
                    // `widget_v1_fields`), also when `Shape::Pick` picks one.
                    s.remove("ownerName");
                }
                // Domain: the `kitchen.example.com/schema: legacy` label —
                // `constant` (lossy: true) writes it on the way to v1 and drops it
                // on the way up, so a v1 object holds it.
                add_meta(&mut meta, "labels", SCHEMA_LABEL, "legacy");
                if let Some(o) = owner {
                    add_meta(&mut meta, "labels", OWNER_LABEL, o);
                }
                if let Some(p) = priority {
                    add_meta(&mut meta, "annotations", PRIORITY_ANNOTATION, p);
                }
                resource(format!("{KITCHEN}/v1"), "Widget", meta, spec, status)
            },
        )
        .boxed()
}

fn widget_v1() -> BoxedStrategy<Value> {
    prop_oneof![
        widget_v1_created(),
        // Engine-written: a hub object read at v1 — `paused` and each
        // container's `restartPolicy` in the stash or recorded absent, the
        // notes restored from their annotation. The same as a v3 object read
        // at v1: v3 is the hub respelled.
        widget_hub().prop_map(|hub| converted(&KITCHEN_IR, &hub, "v1")),
    ]
    .boxed()
}

fn widget_laws(object: &Value) -> Law {
    round_trips(&KITCHEN_IR, &WIDGET_OWNED, KITCHEN, WIDGET_VERSIONS, object)
}

#[test]
fn kitchen_sink_hub_round_trips_through_each_spoke() {
    check("kitchen-sink Widget v2 (hub)", widget_hub(), |o| {
        widget_laws(o)
    });
}

#[test]
fn kitchen_sink_v1_round_trips_through_hub_and_v3() {
    check("kitchen-sink Widget v1", widget_v1(), widget_laws);
}

#[test]
fn kitchen_sink_v3_round_trips_through_hub_and_v1() {
    check("kitchen-sink Widget v3", widget_v3(), widget_laws);
}

/// The kitchen sink with every rule list, also those inside `forEach`, in
/// reverse order.
fn reversed_kitchen_sink() -> Ir {
    let mut ir = katalog("kitchen-sink.yaml");
    for resource in &mut ir.resources {
        for version in &mut resource.versions {
            version.rules.reverse();
        }
    }
    for rule in &mut ir.rules {
        if let Op::ForEach { rules, .. } = &mut rule.op {
            rules.reverse();
        }
    }
    ir
}

/// The object with its stash annotations parsed, `!absent` lists sorted:
/// the engine writes entries in rule order, which is no part of what they
/// mean.
fn stash_parsed(object: &Value) -> Value {
    let mut o = object.clone();
    drop_empty_meta_maps(&mut o);
    let Some(annotations) = o
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return o;
    };
    for key in [STASH, V1_FIELDS] {
        let Some(mut stash) = annotations
            .get(key)
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
        else {
            continue;
        };
        for section in stash
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            if let Some(Value::Array(absent)) = section.get_mut("!absent") {
                absent.sort_by_key(compact);
            }
        }
        annotations.insert(key.to_string(), stash);
    }
    o
}

/// The rules of a list act simultaneously, "so their order never matters"
/// (docs/reference/conversion.md, "Rules act simultaneously"): every conversion gives the
/// same object with the rules in reverse order.
fn order_never_matters(ir: &Ir, reversed: &Ir, object: &Value) -> Law {
    let from = api_version_of(object);
    for v in WIDGET_VERSIONS {
        let to = format!("{KITCHEN}/{v}");
        if to == from {
            continue;
        }
        let given = convert(ir, object, &to).map(|o| stash_parsed(&o));
        let other = convert(reversed, object, &to).map(|o| stash_parsed(&o));
        if given != other {
            let show = |r: &Result<Value, _>| match r {
                Ok(o) => compact(o),
                Err(e) => format!("error: {e}"),
            };
            return Err(TestCaseError::fail(format!(
                "{from} → {to} depends on the order of the rules\nin order:   {}\nreversed:   {}",
                show(&given),
                show(&other)
            )));
        }
    }
    Ok(())
}

#[test]
fn kitchen_sink_rule_order_never_matters() {
    let reversed = reversed_kitchen_sink();
    check(
        "kitchen-sink Widget, rules reversed",
        prop_oneof![widget_hub(), widget_v1(), widget_v3()],
        |o| order_never_matters(&KITCHEN_IR, &reversed, o),
    );
}

// ---------------------------------------------------------------------------
// kitchen-sink.yaml — Widget.acme.example.org: the same kind in another
// group, hub v1, spoke v1alpha1, its own stash annotation

const ACME: &str = "acme.example.org";
const ACME_VERSIONS: &[&str] = &["v1alpha1", "v1"];
const ACME_STASH: &str = "acme.example.org/conversion-stash";
const ACME_OWNED: Owned = Owned {
    labels: &[],
    annotations: &[ACME_STASH],
};

fn acme_hub() -> BoxedStrategy<Value> {
    (
        metadata(&[ACME_STASH]),
        shape(),
        option::of(int()),
        option::of(text()),
        option::of(one_of(&["Matte", "Gloss"])),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, size, colour, finish, status)| {
            let spec = shape.spec([
                ("size", size),
                ("colour", colour.map(Value::from)),
                ("finish", finish),
            ]);
            resource(format!("{ACME}/v1"), "Widget", meta, spec, status)
        })
        .boxed()
}

fn acme_v1alpha1() -> BoxedStrategy<Value> {
    let created = (
        metadata(&[ACME_STASH]),
        shape(),
        // Domain: a canonical integer — coerce string → integer accepts only
        // the form integer → string gives back.
        option::of(int()),
        option::of(text()),
        option::of(free_object()),
    )
        .prop_map(|(meta, shape, size, color, status)| {
            let spec = shape.spec([
                ("size", size.map(|s| s.to_string().into())),
                ("color", color.map(Value::from)),
            ]);
            resource(format!("{ACME}/v1alpha1"), "Widget", meta, spec, status)
        });
    prop_oneof![
        created,
        // Engine-written: a hub object read at v1alpha1, `finish` stashed.
        acme_hub().prop_map(|hub| converted(&KITCHEN_IR, &hub, "v1alpha1")),
    ]
    .boxed()
}

fn acme_laws(object: &Value) -> Law {
    round_trips(&KITCHEN_IR, &ACME_OWNED, ACME, ACME_VERSIONS, object)
}

#[test]
fn kitchen_sink_acme_hub_round_trips_through_v1alpha1() {
    check("kitchen-sink Widget.acme v1 (hub)", acme_hub(), acme_laws);
}

#[test]
fn kitchen_sink_acme_v1alpha1_round_trips_through_hub() {
    check(
        "kitchen-sink Widget.acme v1alpha1",
        acme_v1alpha1(),
        acme_laws,
    );
}

// ---------------------------------------------------------------------------
// The edge values of `split` with a placeholder whose parts live under the
// joined path itself (issue 9): the string of placeholders only ("*-*") is
// an empty object on the split side, both ways. Not an example Katalog: the
// rule is written here, in the shape of `testdata/rules/split.yaml`.

static RANGE_IR: LazyLock<Ir> = LazyLock::new(|| {
    let text = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: range}
spec:
  resources:
    - group: examples.katalog.dev
      kind: Range
      plural: ranges
      hub: v1
      versions: [v1, v2]
      conversion:
        v2:
          - split: { hub: spec.range, separator: "-", placeholder: "*", spoke: [spec.range.from, spec.range.to] }
"#;
    compile_sources(&[Source::new("range.yaml", text)])
        .unwrap_or_else(|d| panic!("range.yaml does not compile:\n{}", d.render()))
});
const RANGE: &str = "examples.katalog.dev";
const RANGE_VERSIONS: &[&str] = &["v1", "v2"];
const RANGE_OWNED: Owned = Owned {
    labels: &[],
    annotations: &[],
};

/// A bound: digits, never the placeholder and never holding the separator.
fn bound() -> BoxedStrategy<Option<String>> {
    option::of(any::<u16>().prop_map(|n| n.to_string())).boxed()
}

fn range_object(version: &str, range: Option<Value>) -> Value {
    let mut o = json!({
        "apiVersion": format!("{RANGE}/{version}"),
        "kind": "Range",
        "metadata": {"name": "r"},
        "spec": {},
    });
    if let Some(r) = range {
        o["spec"]["range"] = r;
    }
    o
}

#[test]
fn split_placeholders_only_round_trips_from_the_hub() {
    // Includes "*-*" (both bounds absent) and "*-5", "5-*".
    let hub = option::of((bound(), bound())).prop_map(|r| {
        let star = |b: Option<String>| b.unwrap_or_else(|| "*".into());
        range_object(
            "v1",
            r.map(|(from, to)| Value::from(format!("{}-{}", star(from), star(to)))),
        )
    });
    check("range v1 (hub)", hub, |o| {
        round_trips(&RANGE_IR, &RANGE_OWNED, RANGE, RANGE_VERSIONS, o)
    });
}

#[test]
fn split_empty_parts_object_round_trips_from_the_spoke() {
    // Includes `range: {}` (every part absent).
    let spoke = option::of((bound(), bound())).prop_map(|r| {
        range_object(
            "v2",
            r.map(|(from, to)| {
                let mut m = Obj::new();
                if let Some(f) = from {
                    m.insert("from".into(), f.into());
                }
                if let Some(t) = to {
                    m.insert("to".into(), t.into());
                }
                Value::Object(m)
            }),
        )
    });
    check("range v2", spoke, |o| {
        round_trips(&RANGE_IR, &RANGE_OWNED, RANGE, RANGE_VERSIONS, o)
    });
}

// ---------------------------------------------------------------------------
// The same edge value where the parts do not live under the joined path
// (issue 9): the string of placeholders only has every part absent, so the
// engine records it in the stash annotation; a `join` mirrors it on the hub.

static WINDOW_IR: LazyLock<Ir> = LazyLock::new(|| {
    let text = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: window}
spec:
  resources:
    - group: examples.katalog.dev
      kind: Window
      plural: windows
      hub: v1
      versions: [v1, v2]
      conversion:
        v2:
          - split: { hub: spec.window, separator: "-", placeholder: "*", spoke: [spec.start, spec.end] }
          - join: { hub: [spec.from, spec.to], separator: "-", placeholder: "*", spoke: spec.span }
"#;
    compile_sources(&[Source::new("window.yaml", text)])
        .unwrap_or_else(|d| panic!("window.yaml does not compile:\n{}", d.render()))
});
const WINDOW_VERSIONS: &[&str] = &["v1", "v2"];
const WINDOW_OWNED: Owned = Owned {
    labels: &[],
    annotations: &[STASH],
};

/// `"a-b"` with `*` for an absent bound; `"*-*"` included.
fn starred(bounds: (Option<String>, Option<String>)) -> Value {
    let star = |b: Option<String>| b.unwrap_or_else(|| "*".into());
    Value::from(format!("{}-{}", star(bounds.0), star(bounds.1)))
}

fn window_object(version: &str, fields: Vec<(&str, Option<Value>)>) -> Value {
    let mut spec = Obj::new();
    for (k, v) in fields {
        if let Some(v) = v {
            spec.insert(k.into(), v);
        }
    }
    json!({
        "apiVersion": format!("{RANGE}/{version}"),
        "kind": "Window",
        "metadata": {"name": "w"},
        "spec": spec,
    })
}

fn window_hub_created() -> BoxedStrategy<Value> {
    (option::of((bound(), bound())), bound(), bound())
        .prop_map(|(window, from, to)| {
            window_object(
                "v1",
                vec![
                    ("window", window.map(starred)),
                    ("from", from.map(Value::from)),
                    ("to", to.map(Value::from)),
                ],
            )
        })
        .boxed()
}

fn window_spoke_created() -> BoxedStrategy<Value> {
    (bound(), bound(), option::of((bound(), bound())))
        .prop_map(|(start, end, span)| {
            window_object(
                "v2",
                vec![
                    ("start", start.map(Value::from)),
                    ("end", end.map(Value::from)),
                    ("span", span.map(starred)),
                ],
            )
        })
        .boxed()
}

#[test]
fn split_placeholders_only_elsewhere_round_trips_from_the_hub() {
    // Created at the hub, or read there after being written at v2 (the only
    // way a hub object carries a stash).
    let hub = prop_oneof![
        window_hub_created(),
        window_spoke_created().prop_map(|o| converted(&WINDOW_IR, &o, "v1")),
    ];
    check("window v1 (hub)", hub, |o| {
        round_trips(&WINDOW_IR, &WINDOW_OWNED, RANGE, WINDOW_VERSIONS, o)
    });
}

#[test]
fn split_placeholders_only_elsewhere_round_trips_from_the_spoke() {
    let spoke = prop_oneof![
        window_spoke_created(),
        window_hub_created().prop_map(|o| converted(&WINDOW_IR, &o, "v2")),
    ];
    check("window v2", spoke, |o| {
        round_trips(&WINDOW_IR, &WINDOW_OWNED, RANGE, WINDOW_VERSIONS, o)
    });
}
