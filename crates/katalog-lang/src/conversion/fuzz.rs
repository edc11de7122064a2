//! Schema-driven fuzzing of a compiled Katalog's conversions.
//!
//! For every resource whose `crd:` was read, objects valid for each version's
//! schema are generated (types, enums, formats, patterns, bounds, required
//! fields, list-map keys and sets, int-or-string, nullable, free-form maps
//! and preserved subtrees with small arbitrary content) and converted
//! spoke → hub → spoke and hub → spoke → hub. The first object per trip that
//! does not come back exactly is shrunk (fields and elements removed while it
//! still fails, within the schema) and reported with the rules that name the
//! paths where it differs.
//!
//! A conversion that refuses the object on the way out is not a loss (the
//! apiserver gets an error and keeps nothing): those are counted and the
//! first is shown. Refusing on the way back is a finding, since the object
//! was already handed out at the other version.
//!
//! The generator uses its own small seeded PRNG (SplitMix64): a run is a pure
//! function of the Katalog, the schemas, the count and the seed.

use std::collections::BTreeSet;
use std::fmt;

use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{Map, Number, Value};

use crate::common::path::{Path, Segment};
use crate::conversion::{ConvertError, convert};
use crate::ir::{Ir, ResourceIr, RuleId};
use crate::schema::{ListType, Opacity, SchemaNode};

/// A double as Go's encoding/json writes it (what the apiserver sends):
/// shortest digits, positional from 1e-6 to 1e21, else `1.5e+300`, `5e-324`.
/// For generated inputs (the number tests write objects the way the
/// apiserver would).
pub fn go_json_float(f: f64) -> String {
    let a = f.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let e = format!("{f:e}");
        let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// SplitMix64: small, fast, and good enough to drive a generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    /// True with probability `1 / n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len() as u64) as usize)
    }
    fn in_range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next_u64() as u128 % span) as i128) as i64
    }
}

/// Objects nested deeper than this get only their required fields.
const MAX_DEPTH: usize = 8;
/// Elements of a list, entries of a free-form map (before bounds).
const MAX_ELEMENTS: u64 = 3;

/// Text that stresses the string rules: separators, placeholders, the empty
/// string, non-ASCII.
const STRING_POOL: &[&str] = &[
    "", "a", "db", "x:y", "1", "0", "-", "*", "*-*", "a-b", ",", "a,b", "/", "a/b", " ", "a b",
    ".", "..", "@", "a@b", ":", "80", "é", "true", "null", "{}",
];
const CHARS: &[char] = &[
    'a', 'b', 'z', 'A', '0', '7', ':', '-', ',', '/', '*', '.', '@', ' ', '_', 'é',
];

/// Generates values valid for a schema.
pub struct Generator<'r> {
    rng: &'r mut Rng,
}

impl<'r> Generator<'r> {
    pub fn new(rng: &'r mut Rng) -> Self {
        Generator { rng }
    }

    /// A whole object of `group/version` and `kind` valid for `schema` (the
    /// resource's schema, as [`SchemaNode::resource`] builds it).
    pub fn object(
        &mut self,
        schema: &SchemaNode,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Value {
        let mut out = Map::new();
        out.insert("apiVersion".into(), api_version.into());
        out.insert("kind".into(), kind.into());
        let mut meta = Map::new();
        meta.insert("name".into(), name.into());
        // Every stored object has one, and an update carries it.
        meta.insert(
            "resourceVersion".into(),
            (1 + self.rng.below(1_000_000)).to_string().into(),
        );
        if self.rng.one_in(4) {
            let mut labels = Map::new();
            labels.insert("app".into(), self.pool_string().into());
            meta.insert("labels".into(), labels.into());
        }
        if self.rng.one_in(4) {
            let mut annotations = Map::new();
            annotations.insert("example.com/note".into(), self.pool_string().into());
            meta.insert("annotations".into(), annotations.into());
        }
        out.insert("metadata".into(), meta.into());
        for (key, prop) in &schema.properties {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if schema.required.contains(key) || self.rng.below(4) != 0 {
                out.insert(key.clone(), self.value(prop, 1));
            }
        }
        Value::Object(out)
    }

    /// A value valid for `node`.
    pub fn value(&mut self, node: &SchemaNode, depth: usize) -> Value {
        if node.nullable && self.rng.one_in(10) {
            return Value::Null;
        }
        if !node.enum_values.is_empty() {
            return self
                .rng
                .pick(&node.enum_values)
                .cloned()
                .unwrap_or(Value::Null);
        }
        if node.int_or_string {
            return if self.rng.one_in(2) {
                self.integer(node)
            } else {
                self.string(node)
            };
        }
        if node.embedded_resource {
            let mut m = Map::new();
            m.insert("apiVersion".into(), "v1".into());
            m.insert("kind".into(), "ConfigMap".into());
            m.insert("metadata".into(), serde_json::json!({"name": "embedded"}));
            return Value::Object(m);
        }
        match node.type_.as_deref() {
            Some("object") => self.object_value(node, depth),
            Some("array") => self.array(node, depth),
            Some("string") => self.string(node),
            Some("integer") => self.integer(node),
            Some("number") => self.number(node),
            Some("boolean") => Value::Bool(self.rng.one_in(2)),
            _ => self.arbitrary(depth),
        }
    }

    fn object_value(&mut self, node: &SchemaNode, depth: usize) -> Value {
        let mut out = Map::new();
        for (key, prop) in &node.properties {
            let required = node.required.contains(key);
            if required || (depth < MAX_DEPTH && self.rng.below(3) != 0) {
                out.insert(key.clone(), self.value(prop, depth + 1));
            }
        }
        if let Some(values) = &node.additional_properties
            && depth < MAX_DEPTH
        {
            for _ in 0..self.rng.below(MAX_ELEMENTS + 1) {
                let key = format!("k{}", self.rng.below(5));
                if !out.contains_key(&key) {
                    let v = self.value(values, depth + 1);
                    out.insert(key, v);
                }
            }
        }
        if node.opaque == Some(Opacity::PreserveUnknownFields) && depth < MAX_DEPTH {
            for _ in 0..self.rng.below(3) {
                let key = format!("extra{}", self.rng.below(3));
                if !out.contains_key(&key) && !node.properties.contains_key(&key) {
                    let v = self.arbitrary(depth + 2);
                    out.insert(key, v);
                }
            }
        }
        Value::Object(out)
    }

    fn array(&mut self, node: &SchemaNode, depth: usize) -> Value {
        let min = node.min_items.unwrap_or(0);
        let max = node.max_items.unwrap_or(min + MAX_ELEMENTS).max(min);
        let max = if depth >= MAX_DEPTH { min } else { max };
        let n = min + self.rng.below(max - min + 1);
        let Some(items) = node.items.as_deref() else {
            return Value::Array((0..n).map(|_| self.arbitrary(depth + 1)).collect());
        };
        let mut out: Vec<Value> = Vec::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        // A few tries per element: sets and maps need distinct elements.
        for _ in 0..n * 4 {
            if out.len() as u64 >= n {
                break;
            }
            let mut v = self.value(items, depth + 1);
            let identity = match &node.list_type {
                Some(ListType::Set) => Some(v.to_string()),
                Some(ListType::Map(keys)) => {
                    // Every key of a list-map is present (the apiserver
                    // requires it unless it has a default).
                    if let Value::Object(m) = &mut v {
                        for k in keys {
                            if !m.contains_key(k)
                                && let Some(p) = items.properties.get(k)
                            {
                                let kv = self.value(p, depth + 2);
                                m.insert(k.clone(), kv);
                            }
                        }
                    }
                    Some(
                        keys.iter()
                            .map(|k| v.get(k).map(Value::to_string).unwrap_or_default())
                            .collect::<Vec<_>>()
                            .join("\u{0}"),
                    )
                }
                _ => None,
            };
            if let Some(id) = identity
                && !seen.insert(id)
            {
                continue;
            }
            out.push(v);
        }
        Value::Array(out)
    }

    fn pool_string(&mut self) -> String {
        self.rng
            .pick(STRING_POOL)
            .map(|s| s.to_string())
            .unwrap_or_default()
    }

    fn string(&mut self, node: &SchemaNode) -> Value {
        let fits = |s: &str, node: &SchemaNode| {
            let n = s.chars().count() as u64;
            node.min_length.is_none_or(|m| n >= m) && node.max_length.is_none_or(|m| n <= m)
        };
        if let Some(pattern) = &node.pattern {
            // Generated from the pattern itself, checked against it.
            if let (Ok(hir), Ok(re)) = (
                regex_syntax::Parser::new().parse(pattern),
                regex::Regex::new(pattern),
            ) {
                for _ in 0..10 {
                    let mut s = String::new();
                    self.matching_hir(&hir, &mut s);
                    if re.is_match(&s) && fits(&s, node) {
                        return Value::String(s);
                    }
                }
            }
        }
        let formatted = match node.format.as_deref() {
            Some("date-time") => Some(format!(
                "20{:02}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                self.rng.below(100),
                1 + self.rng.below(12),
                1 + self.rng.below(28),
                self.rng.below(24),
                self.rng.below(60),
                self.rng.below(60)
            )),
            Some("date") => Some(format!(
                "20{:02}-{:02}-{:02}",
                self.rng.below(100),
                1 + self.rng.below(12),
                1 + self.rng.below(28)
            )),
            Some("byte") => Some(["", "YQ==", "aGVsbG8="][self.rng.below(3) as usize].into()),
            Some("uuid") => Some(format!(
                "{:08x}-0000-4000-8000-{:012x}",
                self.rng.next_u64() as u32,
                self.rng.next_u64() & 0xFFFF_FFFF_FFFF
            )),
            _ => None,
        };
        if let Some(s) = formatted {
            return Value::String(s);
        }
        for _ in 0..10 {
            let s = if self.rng.one_in(2) {
                self.pool_string()
            } else {
                let n = self.rng.below(9);
                (0..n)
                    .map(|_| *self.rng.pick(CHARS).unwrap_or(&'a'))
                    .collect()
            };
            if fits(&s, node) {
                return Value::String(s);
            }
        }
        let n = node.min_length.unwrap_or(0) as usize;
        Value::String("a".repeat(n))
    }

    fn matching_hir(&mut self, hir: &Hir, out: &mut String) {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(lit) => out.push_str(&String::from_utf8_lossy(&lit.0)),
            HirKind::Class(Class::Unicode(class)) => {
                let ranges = class.ranges();
                // Mostly printable ASCII, where the class allows it.
                let ascii: Vec<(char, char)> = ranges
                    .iter()
                    .filter(|r| r.start() <= '~' && r.end() >= ' ')
                    .map(|r| (r.start().max(' '), r.end().min('~')))
                    .collect();
                let all: Vec<(char, char)> = ranges.iter().map(|r| (r.start(), r.end())).collect();
                let pool = if !ascii.is_empty() && !self.rng.one_in(10) {
                    ascii
                } else {
                    all
                };
                if let Some(&(lo, hi)) = self.rng.pick(&pool) {
                    let c = self.rng.in_range(lo as i64, hi as i64) as u32;
                    out.push(char::from_u32(c).unwrap_or(lo));
                }
            }
            HirKind::Class(Class::Bytes(class)) => {
                let ranges: Vec<(u8, u8)> = class
                    .ranges()
                    .iter()
                    .filter(|r| r.start() < 0x80)
                    .map(|r| (r.start(), r.end().min(0x7f)))
                    .collect();
                if let Some(&(lo, hi)) = self.rng.pick(&ranges) {
                    out.push(self.rng.in_range(lo as i64, hi as i64) as u8 as char);
                }
            }
            HirKind::Repetition(rep) => {
                let min = rep.min as u64;
                let max = rep.max.map_or(min + 3, |m| (m as u64).min(min + 3));
                for _ in 0..min + self.rng.below(max.saturating_sub(min) + 1) {
                    self.matching_hir(&rep.sub, out);
                }
            }
            HirKind::Capture(cap) => self.matching_hir(&cap.sub, out),
            HirKind::Concat(parts) => {
                for p in parts {
                    self.matching_hir(p, out);
                }
            }
            HirKind::Alternation(alts) => {
                if let Some(a) = self.rng.pick(alts) {
                    self.matching_hir(a, out);
                }
            }
        }
    }

    fn integer(&mut self, node: &SchemaNode) -> Value {
        let (type_lo, type_hi) = match node.format.as_deref() {
            Some("int32") => (i32::MIN as i64, i32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        };
        let lo = node.minimum.map_or(type_lo, |m| {
            let lo = m.ceil() as i64;
            let lo = if node.exclusive_minimum && m.fract() == 0.0 {
                lo.saturating_add(1)
            } else {
                lo
            };
            lo.max(type_lo)
        });
        let hi = node.maximum.map_or(type_hi, |m| {
            let hi = m.floor() as i64;
            let hi = if node.exclusive_maximum && m.fract() == 0.0 {
                hi.saturating_sub(1)
            } else {
                hi
            };
            hi.min(type_hi)
        });
        let edges = [lo, hi, 0, 1, -1, 1000];
        let n = match self.rng.below(3) {
            0 => *self.rng.pick(&edges).unwrap_or(&0),
            1 => self.rng.in_range(-100, 100),
            _ => self.rng.in_range(lo, hi),
        };
        Value::Number(Number::from(n.clamp(lo, hi)))
    }

    fn number(&mut self, node: &SchemaNode) -> Value {
        // An exclusive bound moves in by a quarter, the finest step drawn here.
        let lo = node
            .minimum
            .map_or(-1e6, |m| if node.exclusive_minimum { m + 0.25 } else { m });
        let hi = node
            .maximum
            .map_or(1e6, |m| if node.exclusive_maximum { m - 0.25 } else { m });
        // Whole numbers are integers on the wire (the apiserver writes 1,
        // not 1.0); the others have a fraction.
        // (Only when a whole number lies inside the bounds.)
        let v = if lo.ceil() <= hi.floor() && self.rng.one_in(2) {
            return Value::Number(Number::from(
                self.rng.in_range(lo.ceil() as i64, hi.floor() as i64),
            ));
        } else {
            let quarters = self
                .rng
                .in_range((lo * 4.0).ceil() as i64, (hi * 4.0).floor() as i64);
            quarters as f64 / 4.0
        };
        Number::from_f64(v)
            .map(Value::Number)
            .unwrap_or(Value::Number(0.into()))
    }

    /// Small arbitrary JSON, for subtrees the schema leaves open.
    fn arbitrary(&mut self, depth: usize) -> Value {
        let leaf = depth >= MAX_DEPTH;
        match self.rng.below(if leaf { 4 } else { 6 }) {
            0 => self.pool_string().into(),
            1 => Value::Number(self.rng.in_range(-5, 5).into()),
            2 => Value::Bool(self.rng.one_in(2)),
            3 => Number::from_f64(0.5).map_or(Value::Null, Value::Number),
            4 => Value::Array(
                (0..self.rng.below(3))
                    .map(|_| self.arbitrary(depth + 2))
                    .collect(),
            ),
            _ => {
                let mut m = Map::new();
                for i in 0..self.rng.below(3) {
                    m.insert(format!("f{i}"), self.arbitrary(depth + 2));
                }
                Value::Object(m)
            }
        }
    }
}

/// How many objects per version, and the seed.
#[derive(Clone, Copy, Debug)]
pub struct FuzzOptions {
    pub count: u64,
    pub seed: u64,
}

/// One direction of one resource: `from` → `via` → `from`.
#[derive(Debug)]
pub struct Trip {
    pub resource: String,
    pub from: String,
    pub via: String,
    pub objects: u64,
    /// Objects the conversion refused on the way out, and the first reason.
    pub refused: u64,
    pub first_refusal: Option<(Value, String)>,
    pub finding: Option<Finding>,
}

/// An object that did not come back.
#[derive(Debug)]
pub struct Finding {
    /// The object, shrunk.
    pub input: Value,
    /// What came back, or why the way back failed.
    pub outcome: Result<Value, ConvertError>,
    /// Where it differs (empty when the way back failed).
    pub paths: Vec<Path>,
    /// The rules that name those paths, as `origin: op`.
    pub rules: Vec<String>,
    /// The index of the generated object (with the seed, reproduces it).
    pub index: u64,
}

/// The result of fuzzing one Katalog.
#[derive(Debug, Default)]
pub struct FuzzReport {
    pub trips: Vec<Trip>,
    /// Resources without a readable CRD, which cannot be fuzzed.
    pub skipped: Vec<String>,
}

impl FuzzReport {
    pub fn findings(&self) -> usize {
        self.trips.iter().filter(|t| t.finding.is_some()).count()
    }
}

enum Outcome {
    Back,
    RefusedOut(String),
    Lost(Result<Value, ConvertError>),
}

fn trip(ir: &Ir, object: &Value, from: &str, via: &str) -> Outcome {
    let mid = match convert(ir, object, via) {
        Ok(m) => m,
        Err(e) => return Outcome::RefusedOut(e.to_string()),
    };
    match convert(ir, &mid, from) {
        Ok(back) if back == *object => Outcome::Back,
        other => Outcome::Lost(other),
    }
}

/// Fuzz every resource of `ir` that has schemas.
pub fn fuzz(ir: &Ir, options: FuzzOptions) -> FuzzReport {
    let mut report = FuzzReport::default();
    for resource in &ir.resources {
        let name = format!("{}/{}", resource.group, resource.kind);
        let Some(crd) = &resource.schemas else {
            report.skipped.push(name);
            continue;
        };
        let schema_of = |v: &str| crd.version(v).and_then(|cv| cv.schema.as_ref());
        for spoke in resource.served().filter(|v| *v != resource.hub) {
            for (from, via) in [
                (spoke, resource.hub.as_str()),
                (resource.hub.as_str(), spoke),
            ] {
                let Some(schema) = schema_of(from) else {
                    continue;
                };
                report
                    .trips
                    .push(fuzz_trip(ir, resource, schema, from, via, spoke, options));
            }
        }
    }
    report
}

fn fuzz_trip(
    ir: &Ir,
    resource: &ResourceIr,
    schema: &SchemaNode,
    from: &str,
    via: &str,
    spoke: &str,
    options: FuzzOptions,
) -> Trip {
    let api = |v: &str| format!("{}/{v}", resource.group);
    let (from_api, via_api) = (api(from), api(via));
    // One stream per trip, so adding a version does not change the others.
    let mut seed = options.seed;
    for b in format!("{}/{}:{from}>{via}", resource.group, resource.kind).bytes() {
        seed = (seed ^ b as u64).wrapping_mul(0x100_0000_01B3);
    }
    let mut rng = Rng::new(seed);
    let mut t = Trip {
        resource: format!("{}/{}", resource.group, resource.kind),
        from: from.into(),
        via: via.into(),
        objects: 0,
        refused: 0,
        first_refusal: None,
        finding: None,
    };
    for index in 0..options.count {
        let object = Generator::new(&mut rng).object(
            schema,
            &from_api,
            &resource.kind,
            &format!("fuzz-{index}"),
        );
        t.objects += 1;
        match trip(ir, &object, &from_api, &via_api) {
            Outcome::Back => {}
            Outcome::RefusedOut(why) => {
                t.refused += 1;
                if t.first_refusal.is_none() {
                    t.first_refusal = Some((object, why));
                }
            }
            Outcome::Lost(_) => {
                let input = shrink(ir, object, schema, &from_api, &via_api);
                let Outcome::Lost(outcome) = trip(ir, &input, &from_api, &via_api) else {
                    break;
                };
                let paths = match &outcome {
                    Ok(back) => differences(&input, back),
                    Err(_) => Vec::new(),
                };
                let rules = responsible(ir, resource, spoke, &paths, outcome.as_ref().err());
                t.finding = Some(Finding {
                    input,
                    outcome,
                    paths,
                    rules,
                    index,
                });
                break;
            }
        }
    }
    t
}

/// Remove fields and elements (never required ones, nor `metadata.name`)
/// while the object still does not come back.
fn shrink(ir: &Ir, mut object: Value, schema: &SchemaNode, from: &str, via: &str) -> Value {
    let lost = |o: &Value| matches!(trip(ir, o, from, via), Outcome::Lost(_));
    let mut budget = 500;
    'again: while budget > 0 {
        for candidate in smaller(&object, Some(schema), ROOT_KEEP) {
            budget -= 1;
            if lost(&candidate) {
                object = candidate;
                continue 'again;
            }
            if budget == 0 {
                break 'again;
            }
        }
        break;
    }
    object
}

const ROOT_KEEP: &[&str] = &["apiVersion", "kind", "metadata"];

/// Variants of `v` with one field or element removed, one string emptied or
/// one number made 0;
/// the `keep` keys stay.
fn smaller(v: &Value, schema: Option<&SchemaNode>, keep: &[&str]) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let sub =
                    schema.and_then(|s| s.properties.get(k).or(s.additional_properties.as_deref()));
                let required = schema.is_some_and(|s| s.required.contains(k));
                let fixed = keep.contains(&k.as_str());
                if !required && !fixed {
                    let mut w = m.clone();
                    w.shift_remove(k);
                    out.push(Value::Object(w));
                }
                if fixed && k != "metadata" {
                    continue;
                }
                // The object keeps its name.
                let inner: &[&str] = if keep == ROOT_KEEP && k == "metadata" {
                    &["name", "resourceVersion"]
                } else {
                    &[]
                };
                for c in smaller(child, sub, inner) {
                    let mut w = m.clone();
                    w.insert(k.clone(), c);
                    out.push(Value::Object(w));
                }
            }
        }
        Value::Array(items) => {
            let min = schema.and_then(|s| s.min_items).unwrap_or(0) as usize;
            let sub = schema.and_then(|s| s.items.as_deref());
            for i in 0..items.len() {
                if items.len() > min {
                    let mut w = items.clone();
                    w.remove(i);
                    out.push(Value::Array(w));
                }
                for c in smaller(&items[i], sub, &[]) {
                    let mut w = items.clone();
                    w[i] = c;
                    out.push(Value::Array(w));
                }
            }
        }
        Value::Number(n) if n.as_i64() != Some(0) => {
            let zero_fits = schema.is_none_or(|s| {
                s.enum_values.is_empty()
                    && s.minimum
                        .is_none_or(|m| m < 0.0 || (m == 0.0 && !s.exclusive_minimum))
                    && s.maximum
                        .is_none_or(|m| m > 0.0 || (m == 0.0 && !s.exclusive_maximum))
            });
            if zero_fits {
                out.push(Value::from(0));
            }
        }
        Value::String(s) if !s.is_empty() => {
            let free = schema.is_none_or(|s| {
                s.pattern.is_none()
                    && s.enum_values.is_empty()
                    && s.format.is_none()
                    && s.min_length.is_none_or(|m| m == 0)
            });
            if free {
                out.push(Value::String(String::new()));
            }
        }
        _ => {}
    }
    out
}

/// The paths where `a` and `b` differ (at most 10).
pub fn differences(a: &Value, b: &Value) -> Vec<Path> {
    fn walk(a: Option<&Value>, b: Option<&Value>, at: Path, out: &mut Vec<Path>) {
        if out.len() >= 10 {
            return;
        }
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    walk(x.get(k), y.get(k), at.child(k.clone()), out);
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(Some(p), Some(q), at.index(i), out);
                }
            }
            (x, y) if x != y => out.push(at),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(Some(a), Some(b), Path::root(), &mut out);
    out
}

/// The rules of `spoke` (forEach bodies included) that name one of `paths`,
/// or the rule a failure names.
fn responsible(
    ir: &Ir,
    resource: &ResourceIr,
    spoke: &str,
    paths: &[Path],
    error: Option<&ConvertError>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rule) = error.and_then(|e| e.rule.clone()) {
        out.push(rule);
    }
    let rules = resource
        .version(spoke)
        .map(|v| v.rules.as_slice())
        .unwrap_or(&[]);
    let stash = Path::root()
        .child("metadata")
        .child("annotations")
        .child(resource.stash_annotation.clone());
    fn visit(
        ir: &Ir,
        rules: &[RuleId],
        hub_base: &Path,
        spoke_base: &Path,
        paths: &[Path],
        stash: &Path,
        out: &mut Vec<String>,
    ) {
        for id in rules {
            let rule = ir.rule(*id);
            let named = rule
                .paths(crate::ir::Side::Hub)
                .iter()
                .map(|p| hub_base.join(p))
                .chain(
                    rule.paths(crate::ir::Side::Spoke)
                        .iter()
                        .map(|p| spoke_base.join(p)),
                );
            let stashes = matches!(
                rule.op,
                crate::ir::Op::Stash { .. } | crate::ir::Op::Split { .. }
            );
            let hit = named
                .chain(stashes.then(|| stash.clone()))
                .any(|rp| paths.iter().any(|p| rp.meets(p)));
            let line = format!("{}: {}", rule.origin, rule.op);
            if hit && !out.contains(&line) {
                out.push(line);
            }
            if let crate::ir::Op::ForEach { hub, spoke, rules } = &rule.op {
                let h = Path::from_segments(
                    hub_base
                        .join(hub)
                        .segments()
                        .iter()
                        .cloned()
                        .chain([Segment::Wildcard])
                        .collect(),
                );
                let s = Path::from_segments(
                    spoke_base
                        .join(spoke)
                        .segments()
                        .iter()
                        .cloned()
                        .chain([Segment::Wildcard])
                        .collect(),
                );
                visit(ir, rules, &h, &s, paths, stash, out);
            }
        }
    }
    visit(
        ir,
        rules,
        &Path::root(),
        &Path::root(),
        paths,
        &stash,
        &mut out,
    );
    out
}

impl fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = |v: &Value| serde_json::to_string(v).unwrap_or_default();
        for t in &self.trips {
            let mark = if t.finding.is_some() { "FAIL" } else { "ok  " };
            writeln!(
                f,
                "{mark}  {} {} → {} → {}: {} objects, {} refused",
                t.resource, t.from, t.via, t.from, t.objects, t.refused
            )?;
            if let Some((object, why)) = &t.first_refusal {
                writeln!(f, "      first refused: {why}\n        {}", json(object))?;
            }
            if let Some(found) = &t.finding {
                writeln!(
                    f,
                    "      object #{} does not come back (shrunk):",
                    found.index
                )?;
                writeln!(f, "        {}", json(&found.input))?;
                match &found.outcome {
                    Ok(back) => {
                        writeln!(f, "      came back as:\n        {}", json(back))?;
                        let paths: Vec<String> =
                            found.paths.iter().map(|p| p.to_string()).collect();
                        writeln!(f, "      differs at: {}", paths.join(", "))?;
                    }
                    Err(e) => writeln!(f, "      the way back failed: {e}")?,
                }
                if found.rules.is_empty() {
                    writeln!(
                        f,
                        "      no rule names these paths (they pass through unchanged)"
                    )?;
                }
                for r in &found.rules {
                    writeln!(f, "      rule {r}")?;
                }
            }
        }
        for s in &self.skipped {
            writeln!(
                f,
                "skip  {s}: no CRD schema (`crd:`), nothing to generate from"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(v: serde_json::Value) -> SchemaNode {
        SchemaNode::from_openapi(&v)
    }

    #[test]
    fn the_same_seed_generates_the_same_objects() {
        let schema = SchemaNode::resource(&serde_json::json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "a": {"type": "string"}, "n": {"type": "integer"}}}}
        }));
        let gen_all = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|i| Generator::new(&mut rng).object(&schema, "g/v1", "K", &i.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(gen_all(7), gen_all(7));
        assert_ne!(gen_all(7), gen_all(8));
    }

    #[test]
    fn generated_values_respect_the_schema() {
        let n = node(serde_json::json!({
            "type": "object",
            "required": ["name", "ports"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$", "maxLength": 12},
                "level": {"type": "string", "enum": ["Debug", "Info"]},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
                "when": {"type": "string", "format": "date-time"},
                "port": {"x-kubernetes-int-or-string": true},
                "ports": {
                    "type": "array", "minItems": 1, "maxItems": 3,
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}}
                },
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
            }
        }));
        let name_re = regex::Regex::new("^[a-z]([-a-z0-9]*[a-z0-9])?$").unwrap();
        let mut rng = Rng::new(1);
        for _ in 0..2000 {
            let v = Generator::new(&mut rng).value(&n, 1);
            let name = v["name"].as_str().unwrap();
            assert!(name_re.is_match(name) && name.len() <= 12, "{v}");
            if let Some(l) = v.get("level") {
                assert!(l == "Debug" || l == "Info", "{v}");
            }
            if let Some(r) = v.get("replicas") {
                assert!((1..=5).contains(&r.as_i64().unwrap()), "{v}");
            }
            if let Some(p) = v.get("port") {
                assert!(p.is_string() || p.is_i64(), "{v}");
            }
            let ports = v["ports"].as_array().unwrap();
            assert!((1..=3).contains(&ports.len()), "{v}");
            let names: BTreeSet<String> = ports.iter().map(|p| p["name"].to_string()).collect();
            assert_eq!(names.len(), ports.len(), "list-map keys are unique: {v}");
            if let Some(tags) = v.get("tags").and_then(Value::as_array) {
                let set: BTreeSet<String> = tags.iter().map(Value::to_string).collect();
                assert_eq!(set.len(), tags.len(), "set elements are unique: {v}");
            }
        }
    }

    #[test]
    fn generated_numbers_stay_inside_exclusive_bounds() {
        let int = node(serde_json::json!({
            "type": "integer", "minimum": 0, "exclusiveMinimum": true,
            "maximum": 3, "exclusiveMaximum": true
        }));
        let num = node(serde_json::json!({
            "type": "number", "minimum": 0, "exclusiveMinimum": true,
            "maximum": 1, "exclusiveMaximum": true
        }));
        let mut rng = Rng::new(3);
        let mut seen = BTreeSet::new();
        for _ in 0..2000 {
            let i = Generator::new(&mut rng).value(&int, 1);
            assert!((1..=2).contains(&i.as_i64().unwrap()), "{i}");
            seen.insert(i.to_string());
            let x = Generator::new(&mut rng).value(&num, 1).as_f64().unwrap();
            assert!(x > 0.0 && x < 1.0, "{x}");
            assert_eq!(
                crate::conversion::analysis::value_problem(&num, &x.into()),
                None
            );
        }
        assert_eq!(
            seen.len(),
            2,
            "both integers inside the bounds come up: {seen:?}"
        );
    }

    #[test]
    fn a_lossy_rule_is_found_shrunk_and_named() {
        let text = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: lossy}
spec:
  resources:
    - group: g.example.com
      kind: K
      plural: ks
      hub: v1
      versions: [v1, v2]
      conversion:
        v2:
          - delete: { hub: spec.b, lossy: true }
"#;
        let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ks.g.example.com}
spec:
  group: g.example.com
  scope: Namespaced
  names: {plural: ks, kind: K}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {a: {type: string}, b: {type: integer}}}
    - name: v2
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {a: {type: string}}}
"#;
        let text = text.replace("      hub: v1\n", "      hub: v1\n      crd: k.crd.yaml\n");
        let ir = crate::compile_with_crds(&[crate::Source::new("lossy.yaml", text)], |_| {
            Ok(vec![crate::Source::new("k.crd.yaml", crd)])
        })
        .unwrap();
        let report = fuzz(
            &ir,
            FuzzOptions {
                count: 200,
                seed: 1,
            },
        );
        assert_eq!(report.findings(), 1, "{report}");
        let t = report.trips.iter().find(|t| t.finding.is_some()).unwrap();
        assert_eq!((t.from.as_str(), t.via.as_str()), ("v1", "v2"));
        let found = t.finding.as_ref().unwrap();
        assert_eq!(
            found.input["spec"],
            serde_json::json!({"b": found.input["spec"]["b"]})
        );
        // Shrunk to the name and resourceVersion, which it always keeps.
        assert_eq!(
            found.input["metadata"],
            serde_json::json!({"name": format!("fuzz-{}", found.index),
                "resourceVersion": found.input["metadata"]["resourceVersion"]})
        );
        assert_eq!(
            found
                .paths
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
            ["spec.b"]
        );
        assert_eq!(
            found.rules,
            ["lossy.yaml:15:13 (delete): delete hub:spec.b"]
        );
    }
}
