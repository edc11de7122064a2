//! Source text and the located YAML tree the loader builds from it.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

/// A file (or any named text) a Katalog was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub name: Arc<str>,
    pub text: Arc<str>,
}

impl Source {
    pub fn new(name: impl Into<Arc<str>>, text: impl Into<Arc<str>>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }

    /// The text of a 1-based line, without its newline.
    pub fn line(&self, line: usize) -> Option<&str> {
        self.text.lines().nth(line.checked_sub(1)?)
    }
}

/// A place in a source: file, 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    pub file: Arc<str>,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One step into a document: a map key or a list index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DocStep {
    Key(KeyText),
    Index(usize),
}

/// The text of a map key in a [`DocPath`]: the compiler builds a path for
/// every place it may report, mostly of fixed keys (`spec`, `check`), so
/// a path is copied without copying its keys.
#[derive(Clone, Debug)]
pub enum KeyText {
    Fixed(&'static str),
    Shared(Arc<str>),
}

impl std::ops::Deref for KeyText {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            KeyText::Fixed(s) => s,
            KeyText::Shared(s) => s,
        }
    }
}

impl PartialEq for KeyText {
    fn eq(&self, other: &KeyText) -> bool {
        **self == **other
    }
}

impl Eq for KeyText {}

impl PartialEq<str> for KeyText {
    fn eq(&self, other: &str) -> bool {
        &**self == other
    }
}

impl PartialEq<&str> for KeyText {
    fn eq(&self, other: &&str) -> bool {
        &**self == *other
    }
}

impl fmt::Display for KeyText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl From<&'static str> for KeyText {
    fn from(s: &'static str) -> Self {
        KeyText::Fixed(s)
    }
}

impl From<String> for KeyText {
    fn from(s: String) -> Self {
        KeyText::Shared(s.into())
    }
}

impl From<&String> for KeyText {
    fn from(s: &String) -> Self {
        KeyText::Shared(s.as_str().into())
    }
}

/// A path into the YAML document (not a field path of a Kubernetes object).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DocPath(pub Vec<DocStep>);

impl DocPath {
    pub fn key(&self, k: impl Into<KeyText>) -> DocPath {
        self.then(DocStep::Key(k.into()))
    }
    pub fn index(&self, i: usize) -> DocPath {
        self.then(DocStep::Index(i))
    }
    /// This path and one more step, in one allocation.
    fn then(&self, step: DocStep) -> DocPath {
        let mut v = Vec::with_capacity(self.0.len() + 1);
        v.extend(self.0.iter().cloned());
        v.push(step);
        DocPath(v)
    }
}

impl fmt::Display for DocPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, s) in self.0.iter().enumerate() {
            match s {
                DocStep::Key(k) if n == 0 => write!(f, "{k}")?,
                DocStep::Key(k) => write!(f, ".{k}")?,
                DocStep::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// A YAML node with the line and column it starts at.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub line: usize,
    pub column: usize,
    pub kind: NodeKind,
    /// The byte range (offset, length) of the node's definition (for an
    /// alias, of the anchored node), by which [`crate::front::yaml`] finds the
    /// scalar's style.
    pub defined_at: Option<(usize, usize)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Seq(Vec<Node>),
    /// Entries in document order; each key carries its own position.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// Whether this node is a scalar (null, boolean, number or string).
    pub fn is_scalar(&self) -> bool {
        !matches!(self.kind, NodeKind::Seq(_) | NodeKind::Map(_))
    }

    /// The JSON value of this node (map keys in document order).
    pub fn to_value(&self) -> Value {
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Number(n) => Value::Number(n.clone()),
            NodeKind::String(s) => Value::String(s.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            NodeKind::Map(entries) => {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k.key_text(), v.to_value());
                }
                Value::Object(m)
            }
        }
    }

    fn key_text(&self) -> String {
        match &self.kind {
            NodeKind::String(s) => s.clone(),
            NodeKind::Null => "null".into(),
            NodeKind::Bool(b) => b.to_string(),
            NodeKind::Number(n) => n.to_string(),
            _ => self.to_value().to_string(),
        }
    }

    /// The value of a key of a map node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key node and value node of a key of a map node.
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        match &self.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| match &k.kind {
                    // Every key the readers make is a string: compared
                    // without a copy.
                    NodeKind::String(s) => s == key,
                    _ => k.key_text() == key,
                })
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// Follow a document path as far as it goes; returns the deepest node
    /// reached and whether the whole path was found.
    pub fn walk(&self, path: &DocPath) -> (&Node, bool) {
        self.walk_steps(&path.0)
    }

    fn walk_steps(&self, steps: &[DocStep]) -> (&Node, bool) {
        let mut cur = self;
        for step in steps {
            let next = match (step, &cur.kind) {
                (DocStep::Key(k), NodeKind::Map(_)) => cur.get(k),
                (DocStep::Index(i), NodeKind::Seq(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(n) => cur = n,
                None => return (cur, false),
            }
        }
        (cur, true)
    }

    /// The key node of the last step of `path` when it is a map key (so an
    /// error about a key points at the key, not at its value).
    pub fn key_node(&self, path: &DocPath) -> Option<&Node> {
        let (last, parent) = path.0.split_last()?;
        let DocStep::Key(k) = last else { return None };
        let (parent_node, found) = self.walk_steps(parent);
        if !found {
            return None;
        }
        parent_node.entry(k).map(|(key, _)| key)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Bare>::deserialize(d)?;
        Ok(Node {
            line: spanned.referenced.line() as usize,
            column: spanned.referenced.column() as usize,
            kind: spanned.value.0,
            defined_at: {
                let span = spanned.defined.span();
                span.byte_offset()
                    .zip(span.byte_len())
                    .and_then(|(o, l)| Some((usize::try_from(o).ok()?, usize::try_from(l).ok()?)))
            },
        })
    }
}

/// A node's content before its location is attached.
struct Bare(NodeKind);

impl<'de> Deserialize<'de> for Bare {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BareVisitor)
    }
}

struct BareVisitor;

impl<'de> Visitor<'de> for BareVisitor {
    type Value = Bare;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Bare, E> {
        Ok(Bare(NodeKind::Null))
    }
    fn visit_none<E>(self) -> Result<Bare, E> {
        Ok(Bare(NodeKind::Null))
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Bare, D::Error> {
        Bare::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Bare, E> {
        Ok(Bare(NodeKind::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Bare, E> {
        Ok(Bare(NodeKind::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Bare, E> {
        Ok(Bare(NodeKind::Number(v.into())))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Bare, E> {
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(i), _) => Ok(Bare(NodeKind::Number(i.into()))),
            (_, Ok(u)) => Ok(Bare(NodeKind::Number(u.into()))),
            _ => Err(E::custom(format!("integer {v} does not fit in 64 bits"))),
        }
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Bare, E> {
        u64::try_from(v)
            .map(|u| Bare(NodeKind::Number(u.into())))
            .map_err(|_| E::custom(format!("integer {v} does not fit in 64 bits")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Bare, E> {
        Number::from_f64(v)
            .map(|n| Bare(NodeKind::Number(n)))
            .ok_or_else(|| E::custom(format!("{v} is not a finite number; JSON cannot hold it")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Bare, E> {
        Ok(Bare(NodeKind::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Bare, E> {
        Ok(Bare(NodeKind::String(v)))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Bare, E> {
        Ok(Bare(NodeKind::String(
            String::from_utf8_lossy(v).into_owned(),
        )))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bare, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            items.push(n);
        }
        Ok(Bare(NodeKind::Seq(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Bare, A::Error> {
        let mut entries: Vec<(Node, Node)> = Vec::new();
        while let Some(k) = map.next_key::<Node>()? {
            let v = map.next_value::<Node>()?;
            entries.push((k, v));
        }
        Ok(Bare(NodeKind::Map(entries)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_positions() {
        let text = "a: 1\nb:\n  - x\n  - {c: true}\n";
        let node: Node = serde_saphyr::from_str(text).unwrap();
        let b = node.get("b").unwrap();
        let NodeKind::Seq(items) = &b.kind else {
            panic!("b is a list")
        };
        assert_eq!((items[0].line, items[0].column), (3, 5));
        let c = items[1].get("c").unwrap();
        assert_eq!((c.line, c.kind.clone()), (4, NodeKind::Bool(true)));
        let key = node
            .key_node(&DocPath::default().key("b"))
            .expect("key node");
        assert_eq!((key.line, key.column), (2, 1));
        assert_eq!(
            node.to_value(),
            serde_json::json!({"a": 1, "b": ["x", {"c": true}]})
        );
    }

    #[test]
    fn multiple_documents() {
        let docs: Vec<Node> = serde_saphyr::from_multiple("a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].get("b").unwrap().line, 3);
    }
}
