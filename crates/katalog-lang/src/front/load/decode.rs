//! Typed documents decoded straight from the located tree: a serde
//! `Deserializer` over `&Node`, so no `serde_json::Value` is built first.
//!
//! It answers exactly as `serde_json`'s `Value` deserializer does for the
//! JSON value of the node ([`Node::to_value`]): the same visitor calls, map
//! entries in the same order (a repeated key keeps its first place and its
//! last value), the same error type and messages. Where an error arose is
//! tracked the way `serde_path_to_error` tracks it, without copying a key,
//! so a diagnostic lands where it did before.
//!
//! A [`Mask`] stands in for the edits the loader used to make to the
//! `Value` before the whole-document decode: lists decoded on their own
//! are read as empty there, and the metadata as a placeholder.

use std::cell::Cell;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeSeed, EnumAccess, Error as _, MapAccess, SeqAccess, Unexpected, VariantAccess,
    Visitor,
};
use serde_json::Error;

use crate::front::source::{DocPath, DocStep, Node, NodeKind};

/// Decode `node` as `T`; on error, the path (below the node) where it arose.
pub(crate) fn decode<'a, T: de::Deserialize<'a>>(
    node: &'a Node,
    mask: Mask<'a>,
) -> Result<T, (DocPath, Error)> {
    let track = Track::default();
    let de = De {
        node,
        mask,
        chain: Chain::Root,
        track: &track,
    };
    T::deserialize(de).map_err(|e| (track.path.take().unwrap_or_default(), e))
}

/// What the whole-document decode reads in place of the parts the loader
/// decodes on their own.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mask<'a> {
    /// Nothing replaced.
    None,
    /// The document: `metadata` reads as `placeholder`, `spec` as [`Mask::Spec`].
    Document {
        placeholder: &'a Node,
    },
    /// `resources` (a list, or null) and `admission`'s rule lists read as
    /// empty lists.
    Spec,
    Admission,
    /// A resource: each value under `conversion` but null reads as an
    /// empty list.
    Resource,
    Conversion,
}

static EMPTY_LIST: Node = Node {
    line: 0,
    column: 0,
    kind: NodeKind::Seq(Vec::new()),
    defined_at: None,
};

impl<'a> Mask<'a> {
    /// What is read at `key` of a map read with this mask, and with which mask.
    fn child(self, key: &str, value: &'a Node) -> (&'a Node, Mask<'a>) {
        let is_list = matches!(value.kind, NodeKind::Seq(_));
        match (self, key) {
            (Mask::Document { placeholder }, "metadata") => (placeholder, Mask::None),
            (Mask::Document { .. }, "spec") => (value, Mask::Spec),
            (Mask::Spec, "resources") if is_list || matches!(value.kind, NodeKind::Null) => {
                (&EMPTY_LIST, Mask::None)
            }
            (Mask::Spec, "admission") => (value, Mask::Admission),
            (Mask::Admission, "validations" | "mutations") => (&EMPTY_LIST, Mask::None),
            (Mask::Resource, "conversion") => (value, Mask::Conversion),
            // A list is decoded rule by rule, anything else but null is
            // reported by the loader.
            (Mask::Conversion, _) if !matches!(value.kind, NodeKind::Null) => {
                (&EMPTY_LIST, Mask::None)
            }
            _ => (value, Mask::None),
        }
    }
}

/// The entries of a map node as its JSON object holds them: in document
/// order, a repeated key at its first place with its last value.
pub(crate) fn entries(entries: &[(Node, Node)]) -> Entries<'_> {
    Entries {
        all: entries,
        pos: 0,
        repeated: has_repeated_key(entries),
    }
}

/// The value of `key` in a map node, as its JSON object holds it (the last
/// one written).
pub(crate) fn member<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.kind {
        NodeKind::Map(all) => all
            .iter()
            .rev()
            .find(|(k, _)| key_text(k) == key)
            .map(|(_, v)| v),
        _ => None,
    }
}

fn key_text(key: &Node) -> &str {
    match &key.kind {
        NodeKind::String(s) => s,
        // The readers turn every key into a string; anything else is
        // compared by a text no key has.
        _ => "\u{0}",
    }
}

fn has_repeated_key(entries: &[(Node, Node)]) -> bool {
    if entries.len() < 2 {
        return false;
    }
    if entries.len() <= 32 {
        return entries
            .iter()
            .enumerate()
            .any(|(i, (k, _))| entries[..i].iter().any(|(e, _)| key_text(e) == key_text(k)));
    }
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    !entries.iter().all(|(k, _)| seen.insert(key_text(k)))
}

#[derive(Clone, Debug)]
pub(crate) struct Entries<'a> {
    all: &'a [(Node, Node)],
    pos: usize,
    repeated: bool,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a str, &'a Node);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (k, v) = self.all.get(self.pos)?;
            let i = self.pos;
            self.pos += 1;
            let key = key_text(k);
            if !self.repeated {
                return Some((key, v));
            }
            if self.all[..i].iter().any(|(e, _)| key_text(e) == key) {
                continue;
            }
            let last = self.all[i..]
                .iter()
                .rev()
                .find(|(e, _)| key_text(e) == key)
                .map_or(v, |(_, v)| v);
            return Some((key, last));
        }
    }
}

impl Entries<'_> {
    fn remaining(&self) -> usize {
        self.clone().count()
    }
}

/// Where the value being decoded is, below the decoded node.
#[derive(Clone, Copy)]
enum Chain<'c> {
    Root,
    Index(&'c Chain<'c>, usize),
    Key(&'c Chain<'c>, &'c str),
}

impl Chain<'_> {
    fn path(&self) -> DocPath {
        let mut steps = Vec::new();
        let mut at = self;
        loop {
            match at {
                Chain::Root => break,
                Chain::Index(parent, i) => {
                    steps.push(DocStep::Index(*i));
                    at = parent;
                }
                Chain::Key(parent, k) => {
                    steps.push(DocStep::Key((*k).to_string().into()));
                    at = parent;
                }
            }
        }
        steps.reverse();
        DocPath(steps)
    }
}

/// The path of the innermost value an error passed through.
#[derive(Default)]
struct Track {
    path: Cell<Option<DocPath>>,
}

impl Track {
    #[cold]
    fn trigger(&self, chain: &Chain, e: Error) -> Error {
        let path = match self.path.take() {
            Some(p) => p,
            None => chain.path(),
        };
        self.path.set(Some(path));
        e
    }
}

struct De<'a, 'c> {
    node: &'a Node,
    mask: Mask<'a>,
    chain: Chain<'c>,
    track: &'c Track,
}

impl<'a> De<'a, '_> {
    /// `seed` over this value, an error it raises itself (a
    /// `deserialize_with` function) recorded at this value's path too.
    fn run<T: DeserializeSeed<'a>>(self, seed: T) -> Result<T::Value, Error> {
        let (chain, track) = (self.chain, self.track);
        seed.deserialize(self).map_err(|e| track.trigger(&chain, e))
    }

    #[cold]
    fn unexpected(&self) -> Unexpected<'a> {
        match &self.node.kind {
            NodeKind::Null => Unexpected::Unit,
            NodeKind::Bool(b) => Unexpected::Bool(*b),
            NodeKind::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Unexpected::Unsigned(u),
                (_, Some(i)) => Unexpected::Signed(i),
                _ => Unexpected::Float(n.as_f64().unwrap_or_default()),
            },
            NodeKind::String(s) => Unexpected::Str(s),
            NodeKind::Seq(_) => Unexpected::Seq,
            NodeKind::Map(_) => Unexpected::Map,
        }
    }

    #[cold]
    fn invalid_type(&self, exp: &dyn de::Expected) -> Error {
        Error::invalid_type(self.unexpected(), exp)
    }

    fn seq<V: Visitor<'a>>(&self, items: &'a [Node], visitor: V) -> Result<V::Value, Error> {
        let mut access = Seq {
            items: items.iter(),
            index: 0,
            parent: &self.chain,
            track: self.track,
        };
        let value = visitor.visit_seq(&mut access)?;
        if access.items.len() == 0 {
            Ok(value)
        } else {
            Err(Error::invalid_length(
                items.len(),
                &"fewer elements in array",
            ))
        }
    }

    fn map<V: Visitor<'a>>(&self, all: &'a [(Node, Node)], visitor: V) -> Result<V::Value, Error> {
        let mut access = Map {
            entries: entries(all),
            value: None,
            mask: self.mask,
            parent: &self.chain,
            track: self.track,
        };
        let len = access.entries.clone().count();
        let value = visitor.visit_map(&mut access)?;
        if access.entries.remaining() == 0 {
            Ok(value)
        } else {
            Err(Error::invalid_length(len, &"fewer elements in map"))
        }
    }

    fn any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            NodeKind::Bool(b) => visitor.visit_bool(*b),
            NodeKind::Number(n) => de::Deserializer::deserialize_any(n, visitor),
            NodeKind::String(s) => visitor.visit_borrowed_str(s),
            NodeKind::Seq(items) => self.seq(items, visitor),
            NodeKind::Map(all) => self.map(all, visitor),
        }
    }

    fn number<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Number(n) => de::Deserializer::deserialize_any(n, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::String(s) => visitor.visit_borrowed_str(s),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn enumeration<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match &self.node.kind {
            NodeKind::Map(all) => {
                let mut it = entries(all);
                let (Some((variant, value)), None) = (it.next(), it.next()) else {
                    return Err(Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    ));
                };
                visitor.visit_enum(Enum {
                    variant,
                    value: Some(value),
                    chain: &self.chain,
                    track: self.track,
                })
            }
            NodeKind::String(variant) => visitor.visit_enum(Enum {
                variant,
                value: None,
                chain: &self.chain,
                track: self.track,
            }),
            _ => Err(Error::invalid_type(self.unexpected(), &"string or map")),
        }
    }
}

/// Each `deserialize_*` method, its error recorded at this value's path.
macro_rules! tracked {
    ($($method:ident($($arg:ident: $ty:ty),*) => $body:expr;)*) => {
        $(
            fn $method<V: Visitor<'a>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Error> {
                $(let _ = $arg;)*
                let chain = self.chain;
                let track = self.track;
                #[allow(clippy::redundant_closure_call)]
                ($body)(self, visitor).map_err(|e| track.trigger(&chain, e))
            }
        )*
    };
}

impl<'a> de::Deserializer<'a> for De<'a, '_> {
    type Error = Error;

    tracked! {
        deserialize_any() => |d: Self, v: V| d.any(v);
        deserialize_bool() => |d: Self, v: V| match d.node.kind {
            NodeKind::Bool(b) => v.visit_bool(b),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_i8() => Self::number;
        deserialize_i16() => Self::number;
        deserialize_i32() => Self::number;
        deserialize_i64() => Self::number;
        deserialize_i128() => Self::number;
        deserialize_u8() => Self::number;
        deserialize_u16() => Self::number;
        deserialize_u32() => Self::number;
        deserialize_u64() => Self::number;
        deserialize_u128() => Self::number;
        deserialize_f32() => Self::number;
        deserialize_f64() => Self::number;
        deserialize_char() => Self::string;
        deserialize_str() => Self::string;
        deserialize_string() => Self::string;
        deserialize_identifier() => Self::string;
        deserialize_bytes() => |d: Self, v: V| match &d.node.kind {
            NodeKind::String(s) => v.visit_borrowed_str(s),
            NodeKind::Seq(items) => d.seq(items, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_byte_buf() => |d: Self, v: V| match &d.node.kind {
            NodeKind::String(s) => v.visit_borrowed_str(s),
            NodeKind::Seq(items) => d.seq(items, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_option() => |d: Self, v: V| match d.node.kind {
            NodeKind::Null => v.visit_none(),
            _ => v.visit_some(d),
        };
        deserialize_unit() => |d: Self, v: V| match d.node.kind {
            NodeKind::Null => v.visit_unit(),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_unit_struct(_name: &'static str) => |d: Self, v: V| match d.node.kind {
            NodeKind::Null => v.visit_unit(),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_newtype_struct(_name: &'static str) => |d: Self, v: V| v.visit_newtype_struct(d);
        deserialize_seq() => |d: Self, v: V| match &d.node.kind {
            NodeKind::Seq(items) => d.seq(items, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_tuple(_len: usize) => |d: Self, v: V| match &d.node.kind {
            NodeKind::Seq(items) => d.seq(items, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_tuple_struct(_name: &'static str, _len: usize) => |d: Self, v: V| match &d.node.kind {
            NodeKind::Seq(items) => d.seq(items, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_map() => |d: Self, v: V| match &d.node.kind {
            NodeKind::Map(all) => d.map(all, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_struct(_name: &'static str, _fields: &'static [&'static str]) => |d: Self, v: V| match &d.node.kind {
            NodeKind::Seq(items) => d.seq(items, v),
            NodeKind::Map(all) => d.map(all, v),
            _ => Err(d.invalid_type(&v)),
        };
        deserialize_enum(_name: &'static str, _variants: &'static [&'static str]) => Self::enumeration;
        deserialize_ignored_any() => |_: Self, v: V| v.visit_unit();
    }
}

struct Seq<'a, 'c> {
    items: std::slice::Iter<'a, Node>,
    index: usize,
    parent: &'c Chain<'c>,
    track: &'c Track,
}

impl<'a> SeqAccess<'a> for Seq<'a, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(node) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        De {
            node,
            mask: Mask::None,
            chain: Chain::Index(self.parent, index),
            track: self.track,
        }
        .run(seed)
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'a, 'c> {
    entries: Entries<'a>,
    /// The entry whose key was read last.
    value: Option<(&'a str, &'a Node)>,
    mask: Mask<'a>,
    parent: &'c Chain<'c>,
    track: &'c Track,
}

impl<'a> MapAccess<'a> for Map<'a, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((key, value));
        seed.deserialize(BorrowedStrDeserializer::<Error>::new(key))
            .map(Some)
            .map_err(|e| self.track.trigger(&Chain::Key(self.parent, key), e))
    }

    fn next_value_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<T::Value, Error> {
        let Some((key, value)) = self.value.take() else {
            return Err(Error::custom("value is missing"));
        };
        let (node, mask) = self.mask.child(key, value);
        De {
            node,
            mask,
            chain: Chain::Key(self.parent, key),
            track: self.track,
        }
        .run(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        (!self.entries.repeated).then(|| self.entries.all.len() - self.entries.pos)
    }
}

struct Enum<'a, 'c> {
    variant: &'a str,
    value: Option<&'a Node>,
    chain: &'c Chain<'c>,
    track: &'c Track,
}

impl<'a: 'c, 'c> EnumAccess<'a> for Enum<'a, 'c> {
    type Error = Error;
    type Variant = Variant<'a, 'c>;

    fn variant_seed<V: DeserializeSeed<'a>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Variant<'a, 'c>), Error> {
        let v = seed
            .deserialize(BorrowedStrDeserializer::<Error>::new(self.variant))
            .map_err(|e| self.track.trigger(self.chain, e))?;
        Ok((
            v,
            Variant {
                value: self.value,
                chain: Chain::Key(self.chain, self.variant),
                track: self.track,
            },
        ))
    }
}

struct Variant<'a, 'c> {
    value: Option<&'a Node>,
    chain: Chain<'c>,
    track: &'c Track,
}

impl<'a> Variant<'a, '_> {
    fn de(&self, node: &'a Node) -> De<'a, '_> {
        De {
            node,
            mask: Mask::None,
            chain: self.chain,
            track: self.track,
        }
    }
}

impl<'a> VariantAccess<'a> for Variant<'a, '_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            Some(node) => <() as de::Deserialize>::deserialize(self.de(node)),
            None => Ok(()),
        }
        .map_err(|e| self.track.trigger(&self.chain, e))
    }

    fn newtype_variant_seed<T: DeserializeSeed<'a>>(self, seed: T) -> Result<T::Value, Error> {
        match self.value {
            Some(node) => seed.deserialize(self.de(node)),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
        .map_err(|e| self.track.trigger(&self.chain, e))
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value.map(|n| (n, &n.kind)) {
            Some((_, NodeKind::Seq(items))) if items.is_empty() => visitor.visit_unit(),
            Some((node, NodeKind::Seq(items))) => self.de(node).seq(items, visitor),
            Some((node, _)) => Err(self.de(node).invalid_type(&"tuple variant")),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
        .map_err(|e| self.track.trigger(&self.chain, e))
    }

    fn struct_variant<V: Visitor<'a>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value.map(|n| (n, &n.kind)) {
            Some((node, NodeKind::Map(all))) => self.de(node).map(all, visitor),
            Some((node, _)) => Err(self.de(node).invalid_type(&"struct variant")),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
        .map_err(|e| self.track.trigger(&self.chain, e))
    }
}
