//! A JSON tree that is cheap to build: objects are lists of members in
//! their order, not hash maps. A review's objects are parsed into it when
//! only CEL reads them ([`Obj`]), and turned into [`Value`]s only when
//! something else asks.
//!
//! Building a `serde_json::Value` spends about half its time on the maps:
//! every key hashed with SipHash, each map grown and rehashed as it fills
//! (`docs/benchmarks.md`, "A review parsed into a tree of member lists").
//! A [`Node`] parses the same review in about 60% of the time; CEL reads its
//! members by a scan (a Kubernetes object has a handful per level), or by
//! binary search in a sorted index for objects of more than
//! [`INDEXED`] members.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// Objects with more members than this get a sorted index for lookups.
pub const INDEXED: usize = 16;

/// A JSON value; [`Node::to_value`] is the same value as a [`Value`] (with
/// `preserve_order`, members in the same order).
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Node>),
    Object(Members),
}

/// An object's members, in their order, each key once (a repeated key
/// keeps its first place and its last value, as `serde_json::Map` does).
#[derive(Clone, Debug, Default)]
pub struct Members {
    entries: Vec<(String, Node)>,
    /// Positions in `entries` sorted by key, for more than [`INDEXED`]
    /// members.
    index: Option<Box<[u32]>>,
}

/// As `serde_json::Map` compares: the same members, in any order.
impl PartialEq for Members {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .entries
                .iter()
                .all(|(k, v)| other.get(k).is_some_and(|w| v == w))
    }
}

impl Members {
    /// Members from `entries` (in order, keys possibly repeated).
    fn new(mut entries: Vec<(String, Node)>) -> Members {
        if entries.len() <= INDEXED {
            let repeated =
                (1..entries.len()).any(|i| entries[..i].iter().any(|(k, _)| *k == entries[i].0));
            if repeated {
                entries = dedup(entries);
            }
            return Members {
                entries,
                index: None,
            };
        }
        let mut index = sorted_index(&entries);
        if index
            .windows(2)
            .any(|w| entries[w[0] as usize].0 == entries[w[1] as usize].0)
        {
            entries = dedup(entries);
            index = sorted_index(&entries);
        }
        Members {
            entries,
            index: Some(index.into_boxed_slice()),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The members in their order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &Node)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &Node> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The value of member `key`.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.index {
            None => self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Some(index) => index
                .binary_search_by(|&i| self.entries[i as usize].0.as_str().cmp(key))
                .ok()
                .map(|at| &self.entries[index[at] as usize].1),
        }
    }
}

/// Positions of `entries` sorted by key (stable: a repeated key's first
/// place comes first).
fn sorted_index(entries: &[(String, Node)]) -> Vec<u32> {
    // More members than `u32` counts cannot come from a body under 4 GiB.
    let mut index: Vec<u32> = (0..entries.len())
        .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
        .collect();
    index.sort_by(|&a, &b| entries[a as usize].0.cmp(&entries[b as usize].0));
    index
}

/// `entries` with each key once: in its first place, with its last value.
fn dedup(entries: Vec<(String, Node)>) -> Vec<(String, Node)> {
    let mut place: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out: Vec<(String, Node)> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match place.get(&key) {
            Some(&at) => out[at].1 = value,
            None => {
                place.insert(key.clone(), out.len());
                out.push((key, value));
            }
        }
    }
    out
}

impl Node {
    /// Parse `bytes` as one JSON value, as `serde_json::from_slice` does
    /// (the same errors, the same nesting limit).
    pub fn parse(bytes: &[u8]) -> serde_json::Result<Node> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let node = NodeSeed.deserialize(&mut de)?;
        de.end()?;
        Ok(node)
    }

    /// The same value as a [`Value`].
    pub fn to_value(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::String(s) => Value::String(s.clone()),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// [`Node::to_value`], consuming the tree (no string is copied).
    pub fn into_value(self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(b),
            Node::Number(n) => Value::Number(n),
            Node::String(s) => Value::String(s),
            Node::Array(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
            Node::Object(members) => Value::Object(
                members
                    .entries
                    .into_iter()
                    .map(|(k, v)| (k, v.into_value()))
                    .collect(),
            ),
        }
    }

    /// An object of `members` (in order; a repeated key in its first
    /// place with its last value).
    pub fn object(members: Vec<(String, Node)>) -> Node {
        Node::Object(Members::new(members))
    }

    /// The value at `segments` (keys and indices; a wildcard selects
    /// nothing), as [`crate::common::path::get_in`] reads a [`Value`].
    pub fn at(&self, segments: &[crate::common::path::Segment]) -> Option<&Node> {
        use crate::common::path::Segment;
        let mut cur = self;
        for seg in segments {
            cur = match (seg, cur) {
                (Segment::Key(k), Node::Object(m)) => m.get(k)?,
                (Segment::Index(i), Node::Array(a)) => a.get(*i)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Node::Object(_))
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(members) => members.get(key),
            _ => None,
        }
    }

    /// The member `key` of an object, to change.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match self {
            Node::Object(members) => members
                .entries
                .iter_mut()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Take the member `key` out of an object (the others keep their order).
    pub fn take(&mut self, key: &str) -> Option<Node> {
        let Node::Object(members) = self else {
            return None;
        };
        let at = members.entries.iter().position(|(k, _)| k == key)?;
        let (_, value) = members.entries.remove(at);
        if members.index.is_some() {
            members.index = Some(sorted_index(&members.entries).into_boxed_slice());
        }
        Some(value)
    }
}

impl From<&Value> for Node {
    fn from(value: &Value) -> Node {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::String(s.clone()),
            Value::Array(items) => Node::Array(items.iter().map(Node::from).collect()),
            Value::Object(fields) => Node::Object(Members::new(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), Node::from(v)))
                    .collect(),
            )),
        }
    }
}

/// Parse `bytes` as one JSON value into a [`Value`], as
/// `serde_json::from_slice` does, except that no key is special: with
/// serde_json's `raw_value` feature (which the workspace enables) an
/// object whose first key is `$serde_json::private::RawValue` is read as
/// the JSON text of its value (or fails), where here it is an ordinary
/// member, as the apiserver and [`Node::parse`] read it.
pub fn parse_value(bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = ValueSeed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// [`parse_value`] as a seed, for a `Value` inside a larger read.
pub struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueSeed)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ValueSeed)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // Collected first: the map is made at its size, not grown.
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(ValueSeed)?;
            entries.push((key, value));
        }
        Ok(Value::Object(entries.into_iter().collect()))
    }
}

struct NodeSeed;

impl<'de> DeserializeSeed<'de> for NodeSeed {
    type Value = Node;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeSeed)
    }
}

impl<'de> Visitor<'de> for NodeSeed {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Number::from_f64(v).map_or(Node::Null, Node::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::String(v))
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(NodeSeed)? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(NodeSeed)?;
            entries.push((key, value));
        }
        Ok(Node::Object(Members::new(entries)))
    }
}

/// A request's object: parsed as a [`Node`] and turned into a [`Value`]
/// the first time something other than CEL reads it, or a [`Value`] from
/// the start. Reads as a `&Value` (`Deref`); CEL binds the node when there
/// is one ([`Obj::node`]), and nothing is converted.
pub struct Obj {
    node: Option<Node>,
    value: OnceLock<Value>,
}

impl Obj {
    /// An object that is read as a node until a `&Value` is asked for.
    pub fn from_node(node: Node) -> Obj {
        Obj {
            node: Some(node),
            value: OnceLock::new(),
        }
    }

    /// The node CEL reads, while the object has one (until it is changed
    /// through `DerefMut`).
    pub fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// Whether the object is `null`, without converting it.
    pub fn is_null(&self) -> bool {
        match &self.node {
            Some(node) => node.is_null(),
            None => self.value.get().is_none_or(Value::is_null),
        }
    }

    /// Whether the object is a JSON object, without converting it.
    pub fn is_object(&self) -> bool {
        match &self.node {
            Some(node) => node.is_object(),
            None => self.value.get().is_some_and(Value::is_object),
        }
    }

    /// Whether it was converted to a `Value` (for tests of the fast path).
    pub fn converted(&self) -> bool {
        self.value.get().is_some()
    }

    /// The object as a [`Value`], converting it if it was not.
    pub fn into_value(self) -> Value {
        match self.value.into_inner() {
            Some(value) => value,
            None => {
                #[cfg(test)]
                CONVERSIONS.with(|c| c.set(c.get() + 1));
                self.node.map_or(Value::Null, Node::into_value)
            }
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Objects read as nodes that were converted on this thread.
    pub(crate) static CONVERSIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl From<Value> for Obj {
    fn from(value: Value) -> Obj {
        Obj {
            node: None,
            value: OnceLock::from(value),
        }
    }
}

impl Deref for Obj {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value.get_or_init(|| {
            #[cfg(test)]
            CONVERSIONS.with(|c| c.set(c.get() + 1));
            match &self.node {
                Some(node) => node.to_value(),
                None => Value::Null,
            }
        })
    }
}

impl DerefMut for Obj {
    /// A changed object has no node any more: CEL reads the `Value`.
    fn deref_mut(&mut self) -> &mut Value {
        if self.value.get().is_none() {
            #[cfg(test)]
            CONVERSIONS.with(|c| c.set(c.get() + 1));
            let value = self.node.take().map_or(Value::Null, Node::into_value);
            self.value = OnceLock::from(value);
        }
        self.node = None;
        match self.value.get_mut() {
            Some(value) => value,
            None => unreachable!("set above"),
        }
    }
}

impl Clone for Obj {
    fn clone(&self) -> Obj {
        Obj {
            node: self.node.clone(),
            value: self.value.clone(),
        }
    }
}

impl fmt::Debug for Obj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.node, self.value.get()) {
            (_, Some(value)) => value.fmt(f),
            (Some(node), None) => node.fmt(f),
            (None, None) => f.write_str("null"),
        }
    }
}

impl PartialEq for Obj {
    fn eq(&self, other: &Obj) -> bool {
        match (&self.node, &other.node) {
            (Some(a), Some(b)) => a == b,
            _ => **self == **other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Random JSON text: objects with repeated keys and more members than
    /// [`INDEXED`], escapes, numbers of every kind.
    fn json_text() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("a".to_string()),
            Just("b".to_string()),
            Just("k\\u00e9y".to_string()),
            Just("name".to_string()),
            "[a-z]{1,3}",
        ];
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (-1e6f64..1e6).prop_map(|f| format!("{f:e}")),
            Just("1.0".to_string()),
            Just("-0".to_string()),
            Just("\"a\\n\\\"b\\ud83d\\ude00\"".to_string()),
            "[a-z ]{0,8}".prop_map(|s| format!("\"{s}\"")),
        ];
        leaf.prop_recursive(4, 64, 40, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec((key.clone(), inner), 0..40).prop_map(|members| {
                    let members: Vec<String> = members
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\": {v}"))
                        .collect();
                    format!("{{{}}}", members.join(", "))
                }),
            ]
        })
    }

    proptest! {
        /// A node is the value serde_json parses, members in the same
        /// order, a repeated key in its first place with its last value.
        #[test]
        fn a_node_is_the_value_serde_json_parses(text in json_text()) {
            let want: Value = serde_json::from_str(&text).unwrap();
            let node = Node::parse(text.as_bytes()).unwrap();
            let got = node.to_value();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(&want).unwrap()
            );
            prop_assert_eq!(node.clone().into_value(), want.clone());
            prop_assert_eq!(&Node::from(&want), &node);
            // Every member is found where the value has it.
            fn members_found(node: &Node, value: &Value) -> bool {
                match (node, value) {
                    (Node::Object(m), Value::Object(v)) => {
                        m.len() == v.len()
                            && v.iter().all(|(k, x)| m.get(k).is_some_and(|n| members_found(n, x)))
                            && m.get("absent-key").is_none()
                    }
                    (Node::Array(a), Value::Array(b)) => {
                        a.iter().zip(b).all(|(n, x)| members_found(n, x))
                    }
                    _ => true,
                }
            }
            prop_assert!(members_found(&node, &want));
        }

        /// Malformed text fails as serde_json fails, with its message.
        #[test]
        fn malformed_json_fails_as_serde_json_does(text in json_text(), cut in 0usize..200) {
            let cut = text.len().min(cut);
            let broken = format!("{}{}", &text[..cut], if cut % 2 == 0 { "," } else { "" });
            let want = serde_json::from_str::<Value>(&broken).map_err(|e| e.to_string());
            let got = Node::parse(broken.as_bytes()).map(|n| n.to_value()).map_err(|e| e.to_string());
            prop_assert_eq!(got, want);
        }
    }

    proptest! {
        /// `parse_value` is `serde_json::from_slice`, values and errors.
        #[test]
        fn parse_value_is_serde_jsons(text in json_text(), cut in 0usize..400) {
            let want = serde_json::from_str::<Value>(&text).unwrap();
            let got = parse_value(text.as_bytes()).unwrap();
            prop_assert_eq!(
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(&want).unwrap()
            );
            let broken = &text[..text.len().min(cut)];
            prop_assert_eq!(
                parse_value(broken.as_bytes()).map_err(|e| e.to_string()),
                serde_json::from_str::<Value>(broken).map_err(|e| e.to_string())
            );
        }
    }

    /// serde_json's raw-value key is an ordinary member here.
    #[test]
    fn no_key_is_special() {
        const KEY: &str = "$serde_json::private::RawValue";
        for text in [
            format!(r#"{{"{KEY}": "[1, 2]"}}"#),
            format!(r#"{{"{KEY}": "x", "b": 1}}"#),
        ] {
            let node = Node::parse(text.as_bytes()).unwrap();
            let value = parse_value(text.as_bytes()).unwrap();
            assert_eq!(node.to_value(), value);
            assert_eq!(value.as_object().map(|m| m.contains_key(KEY)), Some(true));
            // What serde_json's own Value makes of it, for the record.
            assert_ne!(serde_json::from_str::<Value>(&text).ok(), Some(value));
        }
    }

    #[test]
    fn repeated_keys_keep_their_first_place_and_last_value() {
        for n in [3, INDEXED + 4] {
            let mut members: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
            members.push("\"k1\": \"last\"".into());
            members.push("\"k0\": [0]".into());
            let text = format!("{{{}}}", members.join(","));
            let want: Value = serde_json::from_str(&text).unwrap();
            let node = Node::parse(text.as_bytes()).unwrap();
            assert_eq!(node.to_value(), want);
            assert_eq!(node.get("k1"), Some(&Node::String("last".into())));
            assert_eq!(
                node.get("k0"),
                Some(&Node::Array(vec![Node::Number(0.into())]))
            );
            let Node::Object(m) = &node else {
                panic!("an object")
            };
            assert_eq!(m.len(), n);
            assert_eq!(m.keys().next().map(String::as_str), Some("k0"));
        }
    }

    #[test]
    fn nesting_deeper_than_serde_json_allows_fails_as_it_does() {
        let text = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let want = serde_json::from_str::<Value>(&text)
            .unwrap_err()
            .to_string();
        assert_eq!(Node::parse(text.as_bytes()).unwrap_err().to_string(), want);
    }

    #[test]
    fn take_removes_a_member_and_keeps_the_order_and_the_index() {
        let mut members: Vec<String> = (0..INDEXED + 2).map(|i| format!("\"k{i}\": {i}")).collect();
        members.push("\"object\": {\"a\": 1}".into());
        let mut node = Node::parse(format!("{{{}}}", members.join(",")).as_bytes()).unwrap();
        assert_eq!(node.take("object"), Some(Node::from(&json!({"a": 1}))));
        assert_eq!(node.take("object"), None);
        assert_eq!(node.get("k5"), Some(&Node::Number(5.into())));
        assert_eq!(node.get("k17"), Some(&Node::Number(17.into())));
        let keys: Vec<String> = (0..INDEXED + 2).map(|i| format!("k{i}")).collect();
        let Node::Object(m) = &node else {
            panic!("an object")
        };
        assert_eq!(m.keys().cloned().collect::<Vec<_>>(), keys);
    }

    #[test]
    fn an_obj_reads_as_its_value_and_converts_only_when_asked() {
        let value = json!({"metadata": {"name": "x"}, "spec": {"n": [1, 2.5, "s", null]}});
        let obj = Obj::from_node(Node::from(&value));
        assert!(obj.is_object() && !obj.is_null() && !obj.converted());
        assert_eq!(obj.node(), Some(&Node::from(&value)));
        assert!(!obj.converted());
        assert_eq!(*obj, value);
        assert!(obj.converted());
        assert_eq!(obj.clone().into_value(), value);
        let mut changed = obj.clone();
        changed["spec"]["n"] = json!(0);
        assert_eq!(changed.node(), None, "a changed object is read as a value");
        assert_ne!(changed, obj);
        assert!(Obj::from_node(Node::Null).is_null());
        assert_eq!(Obj::from(value.clone()), Obj::from_node(Node::from(&value)));
        // Changed while still a node: converted, then changed.
        let mut fresh = Obj::from_node(Node::from(&value));
        fresh["metadata"]["name"] = json!("y");
        assert_eq!(fresh.node(), None);
        let mut want = value.clone();
        want["metadata"]["name"] = json!("y");
        assert_eq!(*fresh, want);
        assert_eq!(fresh.into_value(), want);
        // Nodes compare as `serde_json` maps do: in any member order.
        let a = Node::parse(br#"{"a": 1, "b": {"c": [1, 2], "d": null}}"#).unwrap();
        let b = Node::parse(br#"{"b": {"d": null, "c": [1, 2]}, "a": 1}"#).unwrap();
        let c = Node::parse(br#"{"b": {"d": null, "c": [2, 1]}, "a": 1}"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.to_value() == b.to_value(), a == b);
        assert_eq!(Obj::from_node(Node::from(&value)).into_value(), value);
    }
}
