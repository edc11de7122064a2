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
//! the same strings, numbers of the same kind (`1` is not `1.0`). Stash
//! annotations are never removed before comparing: the engine deletes what it
//! stashed when it restores it (and drops an annotation it emptied), so the
//! laws hold with the annotations in place and no exception is needed.
//!
//! Generators produce objects in each version's valid domain: what the CRD
//! schema allows (`katalogs/*.crd.yaml`; for the kitchen sink, the schema
//! written at the top of `kitchen-sink.yaml`), narrowed only where a rule's
//! lossless condition demands it. Every narrowing is marked `Domain:` and
//! names the condition. A stash annotation belongs to the engine, not to the
//! user, so objects carry one only in a form the engine writes (the object was
//! converted from another version); those are marked `Engine-written:`.
//!
//! Engine bugs found by these laws are steered around by the default
//! generators, at the places marked `Bug B:` and so on; each `#[ignore]`d
//! property lets one trigger back into the domain and fails until the engine
//! (or, for C, the example CRD) is fixed. `cargo test -p katalog-lang --test
//! roundtrip -- --ignored` prints the shrunk counterexamples. The language
//! reference (docs/katalog.md) promises that `stash` (with a merged
//! `default`), `wrap` and `unwrap` never need `lossy`, and that a value that
//! would not make the round trip fails the conversion instead of being lost.
//!
//! * B — a `spec: {}` does not survive. "Taking removes emptied objects", so
//!   an input `spec: {}` that the hub fills with a stash's default comes back
//!   without `spec` and with that default stashed: v1beta1 `{spec: {}}` → v1
//!   `{spec: {concurrencyPolicy: Allow}}` → v1beta1 `{}` plus
//!   `katalog.dev/stash: {"v1":{"spec.concurrencyPolicy":"Allow"}}`.
//! * D — whether a stash's default applies (way up) and whether an absence is
//!   recorded (way down) is decided by the field's parent on each side's
//!   source object, but other rules create that parent on one side only (a
//!   label renamed into `spec`, a spoke-only field restored into `spec`).
//!   Kitchen-sink v1 with only an owner label (no spec) → v2 → v1 gains
//!   `katalog.dev/stash: {"v2":{"!absent":["spec.paused"]}}`; v2 with v1's
//!   notes annotation and no spec → v1 → v2 gains `spec: {paused: false}`.
//! * E — `constant` writes only where the field's parent exists, and the
//!   parent of a label is the labels map, which Kubernetes omits when empty:
//!   kitchen-sink v1 `{labels: {kitchen.example.com/schema: legacy}}` → v2
//!   (no labels) → v1 loses the label, though it held the constant (the
//!   reference says a constant is exact for objects holding it).
//! * C — not the engine but the crontab example: the reference documents
//!   that an empty `wrap` wrapper comes back absent, and crontab.crd.yaml does
//!   not require `container.image`, so v2 `{spec: {container: {}}}` → v1 → v2
//!   silently loses `container` (the reference's own rule would be to fail).

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Instant;

use katalog_lang::convert::convert;
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
/// apiserver never sends an empty one (they are `omitempty` in ObjectMeta),
/// and the engine drops one a rule emptied.
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

/// One field's entry in a stash section.
#[derive(Clone, Debug, PartialEq)]
enum Entry {
    /// Nothing recorded (the field held the default, or the object was
    /// created at this version).
    None,
    /// The field was absent where its parent existed.
    Absent,
    Value(Value),
}

/// The stash annotation text the engine writes for these entries, in rule
/// order: values as keys, absent fields in one `!absent` list placed where the
/// first of them was recorded. `None` when nothing is recorded (the engine
/// drops an empty stash).
fn stash_text(section: &str, entries: &[(String, Entry)]) -> Option<String> {
    let mut m = Obj::new();
    for (key, entry) in entries {
        match entry {
            Entry::None => {}
            Entry::Value(v) => {
                m.insert(key.clone(), v.clone());
            }
            Entry::Absent => {
                if let Value::Array(list) = m.entry("!absent").or_insert_with(|| json!([])) {
                    list.push(key.clone().into());
                }
            }
        }
    }
    (!m.is_empty()).then(|| compact(&json!({ section: m })))
}

/// Which engine bugs a generator may trigger (see "Engine bugs" at the top).
/// The laws run with `BUG_FREE`; each `#[ignore]`d property lets one bug's
/// trigger into the domain.
type Bugs = u8;
const BUG_FREE: Bugs = 0;
const BUG_B: Bugs = 1;
const BUG_C: Bugs = 2;
const BUG_D: Bugs = 4;
const BUG_E: Bugs = 8;

fn allows(bugs: Bugs, bug: Bugs) -> bool {
    bugs & bug != 0
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

fn crontab_v1beta1(bugs: Bugs) -> BoxedStrategy<Value> {
    (
        (
            metadata(&[STASH]),
            shape(),
            option::of(text()),
            option::of(text()),
        ),
        (
            any::<bool>(),
            option::of(int64()),
            prop_oneof![
                Just(Entry::None),
                Just(Entry::Absent),
                one_of(&["Allow", "Forbid", "Replace"]).prop_map(Entry::Value),
            ],
        ),
        option::of(free_object()),
    )
        .prop_map(
            move |((mut meta, shape, cron, image), (from_hub, timeout, mut policy), status)| {
                let mut spec = shape.spec([
                    ("cronSpec", cron.map(Value::from)),
                    ("image", image.map(Value::from)),
                ]);
                // Engine-written: created at v1beta1 there is no stash;
                // converted from the hub, `timeoutSeconds` is stashed, and
                // `concurrencyPolicy` too, or recorded absent.
                let mut timeout = match timeout.filter(|_| from_hub) {
                    Some(t) => Entry::Value(t.into()),
                    None => Entry::None,
                };
                if !from_hub {
                    policy = Entry::None;
                }
                if spec.as_ref().is_some_and(Obj::is_empty) {
                    if from_hub {
                        // Engine-written: only a hub `spec: {}` leaves
                        // `spec: {}` here, with the policy recorded absent.
                        timeout = Entry::None;
                        policy = Entry::Absent;
                    } else if !allows(bugs, BUG_B) {
                        // Bug B: a `spec: {}` created at v1beta1 gets the
                        // default policy on the hub, and loses `spec` (to a
                        // stash of that default) on the way back.
                        spec = None;
                    }
                }
                // Engine-written: the default `Allow` is stashed only when
                // `spec` does not survive in v1beta1.
                if spec.as_ref().is_some_and(|s| !s.is_empty())
                    && policy == Entry::Value(json!("Allow"))
                {
                    policy = Entry::None;
                }
                if spec.is_none() {
                    match (&timeout, &policy) {
                        // Engine-written: an absent record needs a hub spec,
                        // which would have left `spec: {}` here.
                        (Entry::None, Entry::Absent) => policy = Entry::None,
                        // Engine-written: a hub spec of only `timeoutSeconds`
                        // records the policy absent.
                        (Entry::Value(_), Entry::None) => policy = Entry::Absent,
                        _ => {}
                    }
                }
                let entries = [
                    ("spec.timeoutSeconds".to_string(), timeout),
                    ("spec.concurrencyPolicy".to_string(), policy),
                ];
                if let Some(stash) = stash_text("v1", &entries) {
                    add_meta(&mut meta, "annotations", STASH, stash);
                }
                resource(format!("{CRONTAB}/v1beta1"), "CronTab", meta, spec, status)
            },
        )
        .boxed()
}

fn crontab_v2(bugs: Bugs) -> BoxedStrategy<Value> {
    (
        metadata(&[STASH]),
        shape(),
        option::of(text()),
        option::of(option::of(text())),
        option::of(int64()),
        option::of(one_of(&[
            "AllowConcurrent",
            "ForbidConcurrent",
            "ReplaceConcurrent",
        ])),
        option::of(free_object()),
    )
        .prop_map(
            move |(meta, shape, schedule, container, timeout, policy, status)| {
                let container = container.map(|image| match image {
                    Some(i) => json!({ "image": i }),
                    // Bug C (Domain): `container` holds `image` — an empty
                    // wrapper comes back absent (documented for `wrap`), but
                    // crontab.crd.yaml does not require `image`.
                    None if !allows(bugs, BUG_C) => json!({ "image": "" }),
                    None => json!({}),
                });
                let spec = shape.spec([
                    ("schedule", schedule.map(Value::from)),
                    ("container", container),
                    ("timeoutSeconds", timeout.map(Value::from)),
                    ("concurrencyPolicy", policy),
                ]);
                resource(format!("{CRONTAB}/v2"), "CronTab", meta, spec, status)
            },
        )
        .boxed()
}

fn crontab_laws(ir: &Ir, object: &Value) -> Law {
    round_trips(ir, &CRONTAB_OWNED, CRONTAB, CRONTAB_VERSIONS, object)
}

#[test]
fn crontab_hub_round_trips_through_each_spoke() {
    let ir = katalog("crontab.yaml");
    check("crontab v1 (hub)", crontab_hub(), |o| crontab_laws(&ir, o));
}

#[test]
fn crontab_v1beta1_round_trips_through_hub_and_v2() {
    let ir = katalog("crontab.yaml");
    check("crontab v1beta1", crontab_v1beta1(BUG_FREE), |o| {
        crontab_laws(&ir, o)
    });
}

#[test]
fn crontab_v2_round_trips_through_hub_and_v1beta1() {
    let ir = katalog("crontab.yaml");
    check("crontab v2", crontab_v2(BUG_FREE), |o| crontab_laws(&ir, o));
}

#[test]
#[ignore = "engine bug B: v1beta1 {spec: {}} → v1 → v1beta1 loses `spec: {}` (and gains a stash)"]
fn crontab_v1beta1_round_trips_with_bug_b() {
    let ir = katalog("crontab.yaml");
    check("crontab v1beta1 (bug B)", crontab_v1beta1(BUG_B), |o| {
        crontab_laws(&ir, o)
    });
}

#[test]
#[ignore = "example bug C (crontab.crd.yaml allows an empty wrapper, which `wrap` documents as lossy): v2 {spec: {container: {}}} → v1 → v2 loses `container: {}`"]
fn crontab_v2_round_trips_with_bug_c() {
    let ir = katalog("crontab.yaml");
    check("crontab v2 (bug C)", crontab_v2(BUG_C), |o| {
        crontab_laws(&ir, o)
    });
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
    let ir = katalog("hostport.yaml");
    check("hostport v1 (hub)", hostport_v1(), |o| {
        round_trips(&ir, &HOSTPORT_OWNED, HOSTPORT, HOSTPORT_VERSIONS, o)
    });
}

#[test]
fn hostport_v2_round_trips_through_hub() {
    let ir = katalog("hostport.yaml");
    check("hostport v2", hostport_v2(), |o| {
        round_trips(&ir, &HOSTPORT_OWNED, HOSTPORT, HOSTPORT_VERSIONS, o)
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
            // Domain: the CRD's pattern ^(\*|[0-9]+)\.\.(\*|[0-9]+)$ — and
            // not "*..*": a pattern split drops every piece equal to the
            // placeholder, and no piece at all joins back to nothing.
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
                    let (min, max) = match (min, max) {
                        (None, None) => (None, Some("0".to_string())),
                        other => other,
                    };
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

/// A hub object created at v1 keeps v1's `legacyNotes` in its annotation.
fn legacy_notes(meta: &mut Obj, notes: &Option<String>) {
    if let Some(n) = notes {
        let entries = [(
            "spec.legacyNotes".to_string(),
            Entry::Value(n.clone().into()),
        )];
        if let Some(text) = stash_text("v1", &entries) {
            add_meta(meta, "annotations", V1_FIELDS, text);
        }
    }
}

/// A hub-form object (hub or v3) that was once written at v1 keeps v1's
/// `legacyNotes` in an annotation; steers that around bugs B and D.
fn v1_notes(bugs: Bugs, spec: &Option<Obj>, notes: Option<String>) -> Option<String> {
    match spec {
        // Bug D: v1 gets a spec anyway (for `legacyNotes`), so the way back
        // up applies the default `paused: false` to a spec the hub never had.
        None if !allows(bugs, BUG_D) => None,
        // Bug B: v1 gets a spec of only `legacyNotes`; taking that out on the
        // way up empties the spec, which is dropped, and `spec: {}` is lost.
        Some(s) if s.is_empty() && !allows(bugs, BUG_B) => None,
        _ => notes,
    }
}

fn widget_hub(bugs: Bugs) -> BoxedStrategy<Value> {
    (
        metadata(WIDGET_RESERVED),
        shape(),
        widget_common(),
        widget_hub_fields_v1_changes(),
        widget_hub_fields_v3_changes(),
        option::of(text()),
        option::of(free_object()),
    )
        .prop_map(move |(mut meta, shape, common, a, b, notes, status)| {
            let spec = shape.spec(common.into_iter().chain(a).chain(b));
            legacy_notes(&mut meta, &v1_notes(bugs, &spec, notes));
            resource(format!("{KITCHEN}/v2"), "Widget", meta, spec, status)
        })
        .boxed()
}

fn widget_v3(bugs: Bugs) -> BoxedStrategy<Value> {
    (
        metadata(WIDGET_RESERVED),
        shape(),
        widget_common(),
        widget_hub_fields_v1_changes(),
        widget_v3_fields(),
        option::of(text()),
        option::of(free_object()),
    )
        .prop_map(move |(mut meta, shape, common, a, b, notes, status)| {
            let spec = shape.spec(common.into_iter().chain(a).chain(b));
            legacy_notes(&mut meta, &v1_notes(bugs, &spec, notes));
            resource(format!("{KITCHEN}/v3"), "Widget", meta, spec, status)
        })
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

fn widget_v1(bugs: Bugs) -> BoxedStrategy<Value> {
    let restart = prop_oneof![
        Just(Entry::None),
        Just(Entry::Absent),
        one_of(&["OnFailure", "Never"]).prop_map(Entry::Value),
    ];
    (
        (
            metadata(WIDGET_RESERVED),
            shape(),
            widget_common(),
            widget_v1_fields(),
            widget_hub_fields_v3_changes(),
        ),
        (
            any::<bool>(),
            prop_oneof![
                Just(Entry::None),
                Just(Entry::Absent),
                any::<bool>().prop_map(|b| Entry::Value(b.into())),
            ],
            vec(restart, 3),
        ),
        option::of(free_object()),
    )
        .prop_map(
            move |(
                (mut meta, shape, common, (v1, owner, priority), b),
                (from_hub, mut paused, mut restarts),
                status,
            )| {
                let mut spec = shape.spec(common.into_iter().chain(v1).chain(b));
                if let Some(s) = &mut spec
                    && !s.contains_key("ownerNamespace")
                {
                    // Domain: `ownerName` only with `ownerNamespace` (see
                    // `widget_v1_fields`), also when `Shape::Pick` picks one.
                    s.remove("ownerName");
                }
                let moved_out = owner.is_some() || priority.is_some();
                // Domain: the `kitchen.example.com/schema: legacy` label —
                // `constant` (lossy: true) writes it on the way to v1 and
                // drops it on the way up, so a v1 object holds it.
                add_meta(&mut meta, "labels", SCHEMA_LABEL, "legacy");
                if let Some(o) = owner {
                    add_meta(&mut meta, "labels", OWNER_LABEL, o);
                }
                if let Some(p) = priority {
                    add_meta(&mut meta, "annotations", PRIORITY_ANNOTATION, p);
                }
                let other_labels = meta["labels"]
                    .as_object()
                    .is_some_and(|l| l.keys().any(|k| k != SCHEMA_LABEL && k != OWNER_LABEL));
                if !other_labels && !allows(bugs, BUG_E) {
                    // Bug E: the constant label is written only into an
                    // existing labels map, and the way up empties and drops
                    // the map when the rules' labels were all it held.
                    add_meta(&mut meta, "labels", "app.kubernetes.io/name", "widget");
                }
                // Engine-written: created at v1 there is no stash; converted
                // from the hub, `paused` is stashed (its default `false` only
                // when v1 has no `spec` to bring the default back) or
                // recorded absent, and so is each container's
                // `restartPolicy` (its default `Always` never).
                if !from_hub {
                    paused = Entry::None;
                    restarts.iter_mut().for_each(|r| *r = Entry::None);
                }
                if spec.as_ref().is_some_and(Obj::is_empty) {
                    // Engine-written: the engine writes `spec: {}` only for a
                    // hub `spec: {}` (nothing leaves it for metadata, and
                    // `paused` is recorded absent). Created at v1, `spec: {}`
                    // hits bug B: the hub gets the default `paused: false`,
                    // and taking it back out empties the spec, which is
                    // dropped.
                    if from_hub && !moved_out {
                        paused = Entry::Absent;
                    } else if !allows(bugs, BUG_B) {
                        spec = None;
                    } else {
                        paused = Entry::None;
                    }
                }
                let hub_spec_after_up = moved_out
                    || spec
                        .as_ref()
                        .is_some_and(|s| s.is_empty() || s.keys().any(|k| k != "legacyNotes"));
                match (&spec, &paused) {
                    // Engine-written: the default is stashed only when v1 has
                    // no spec.
                    (Some(s), Entry::Value(v)) if !s.is_empty() && *v == json!(false) => {
                        paused = Entry::None
                    }
                    // Engine-written: recording `paused` absent needs a hub
                    // spec; `legacyNotes` goes to an annotation, not to it.
                    (_, Entry::Absent) if !hub_spec_after_up => paused = Entry::None,
                    // Bug D: without a spec, v1 applies no default on the way
                    // up, yet the owner label or priority annotation makes a
                    // hub spec, so the way down records `paused` absent: a
                    // stash appears. Take the object as converted from a hub
                    // spec of only those fields instead (which records it).
                    (None, Entry::None) if moved_out && !allows(bugs, BUG_D) => {
                        paused = Entry::Absent
                    }
                    _ => {}
                }
                let n = spec
                    .as_ref()
                    .and_then(|s| s.get("containers"))
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let mut entries = vec![("spec.paused".to_string(), paused)];
                for (i, r) in restarts.into_iter().enumerate().take(n) {
                    entries.push((format!("spec.containers[{i}].restartPolicy"), r));
                }
                if let Some(stash) = stash_text("v2", &entries) {
                    add_meta(&mut meta, "annotations", STASH, stash);
                }
                resource(format!("{KITCHEN}/v1"), "Widget", meta, spec, status)
            },
        )
        .boxed()
}

fn widget_laws(ir: &Ir, object: &Value) -> Law {
    round_trips(ir, &WIDGET_OWNED, KITCHEN, WIDGET_VERSIONS, object)
}

#[test]
fn kitchen_sink_hub_round_trips_through_each_spoke() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v2 (hub)", widget_hub(BUG_FREE), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
fn kitchen_sink_v1_round_trips_through_hub_and_v3() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v1", widget_v1(BUG_FREE), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
fn kitchen_sink_v3_round_trips_through_hub_and_v1() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v3", widget_v3(BUG_FREE), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
#[ignore = "engine bug B: v2 {spec: {}} with v1's notes annotation → v1 → v2 loses `spec: {}`"]
fn kitchen_sink_hub_round_trips_with_bug_b() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v2 (bug B)", widget_hub(BUG_B), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
#[ignore = "engine bug D: v2 without spec, with v1's notes annotation → v1 → v2 gains `spec: {paused: false}`"]
fn kitchen_sink_hub_round_trips_with_bug_d() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v2 (bug D)", widget_hub(BUG_D), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
#[ignore = "engine bug B: v1 {spec: {}} → v2 → v1 loses `spec: {}` (and gains a stash)"]
fn kitchen_sink_v1_round_trips_with_bug_b() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v1 (bug B)", widget_v1(BUG_B), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
#[ignore = "engine bug D: v1 with an owner label and no spec → v2 → v1 gains a stash annotation"]
fn kitchen_sink_v1_round_trips_with_bug_d() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v1 (bug D)", widget_v1(BUG_D), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
#[ignore = "engine bug E: v1 whose only label is the constant one → v2 → v1 loses that label (a label's parent is an omitempty map)"]
fn kitchen_sink_v1_round_trips_with_bug_e() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget v1 (bug E)", widget_v1(BUG_E), |o| {
        widget_laws(&ir, o)
    });
}

#[test]
#[ignore = "engine bugs B, D: v3 objects with v1's notes annotation and an empty or no spec (see the v2 properties)"]
fn kitchen_sink_v3_round_trips_with_bugs_b_d() {
    let ir = katalog("kitchen-sink.yaml");
    check(
        "kitchen-sink Widget v3 (bugs B, D)",
        widget_v3(BUG_B | BUG_D),
        |o| widget_laws(&ir, o),
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
    (
        metadata(&[ACME_STASH]),
        shape(),
        // Domain: a canonical integer — coerce string → integer accepts only
        // the form integer → string gives back.
        option::of(int()),
        option::of(text()),
        option::of(one_of(&["Matte", "Gloss"])),
        option::of(free_object()),
    )
        .prop_map(|(mut meta, shape, size, color, finish, status)| {
            let spec = shape.spec([
                ("size", size.map(|s| s.to_string().into())),
                ("color", color.map(Value::from)),
            ]);
            // Engine-written: a hub `finish` is stashed; the hub spec then
            // held at least `finish`, so the engine never writes `spec: {}`
            // beside a stash.
            if let Some(f) = finish.filter(|_| !spec.as_ref().is_some_and(Obj::is_empty)) {
                let entries = [("spec.finish".to_string(), Entry::Value(f))];
                if let Some(text) = stash_text("v1", &entries) {
                    add_meta(&mut meta, "annotations", ACME_STASH, text);
                }
            }
            resource(format!("{ACME}/v1alpha1"), "Widget", meta, spec, status)
        })
        .boxed()
}

#[test]
fn kitchen_sink_acme_hub_round_trips_through_v1alpha1() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget.acme v1 (hub)", acme_hub(), |o| {
        round_trips(&ir, &ACME_OWNED, ACME, ACME_VERSIONS, o)
    });
}

#[test]
fn kitchen_sink_acme_v1alpha1_round_trips_through_hub() {
    let ir = katalog("kitchen-sink.yaml");
    check("kitchen-sink Widget.acme v1alpha1", acme_v1alpha1(), |o| {
        round_trips(&ir, &ACME_OWNED, ACME, ACME_VERSIONS, o)
    });
}
