//! The CEL types the checker knows, from a schema or from the expression.

use std::fmt;

use crate::schema::SchemaNode;

/// A CEL type, as far as the checker knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Type<'s> {
    /// Unknown: matches everything.
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    List(Box<Type<'s>>),
    Map(Box<Type<'s>>, Box<Type<'s>>),
    /// An object whose fields a schema declares.
    Object {
        schema: &'s SchemaNode,
        /// Unknown fields of this object are reported elsewhere (the
        /// selection checks of the admission compiler): not again here.
        reported: bool,
    },
    Optional(Box<Type<'s>>),
    /// An extension value (`quantity`, `url`, `ip`, `cidr`, `semver`).
    Opaque(&'static str),
}

impl fmt::Display for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Null => f.write_str("null"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Timestamp => f.write_str("timestamp"),
            Type::Duration => f.write_str("duration"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Object { .. } => f.write_str("object"),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::Opaque(name) => f.write_str(name),
        }
    }
}

impl<'s> Type<'s> {
    /// The type of the values a schema node holds. Strings with a format
    /// the apiserver reads as another type (`date-time`, `duration`,
    /// `byte`) are `dyn`: katalog binds them as strings.
    pub fn of_schema(node: &'s SchemaNode, reported: bool) -> Type<'s> {
        if node.int_or_string {
            return Type::Dyn;
        }
        match node.type_.as_deref() {
            Some("object") => {
                if !node.properties.is_empty() {
                    Type::Object {
                        schema: node,
                        reported,
                    }
                } else if let Some(values) = &node.additional_properties {
                    Type::Map(
                        Box::new(Type::String),
                        Box::new(Type::of_schema(values, reported)),
                    )
                } else {
                    Type::Dyn
                }
            }
            Some("array") => Type::List(Box::new(
                node.items
                    .as_deref()
                    .map_or(Type::Dyn, |i| Type::of_schema(i, reported)),
            )),
            Some("string") => match node.format.as_deref() {
                Some("date-time" | "date" | "duration" | "byte") => Type::Dyn,
                _ => Type::String,
            },
            Some("integer") => Type::Int,
            Some("number") => Type::Double,
            Some("boolean") => Type::Bool,
            _ => Type::Dyn,
        }
    }

    /// The same type with unknown fields reported here (a value reached
    /// through a variable, which the selection checks do not follow).
    pub fn unreported(self) -> Type<'s> {
        match self {
            Type::Object { schema, .. } => Type::Object {
                schema,
                reported: false,
            },
            Type::List(t) => Type::List(Box::new(t.unreported())),
            Type::Map(k, v) => Type::Map(k, Box::new(v.unreported())),
            Type::Optional(t) => Type::Optional(Box::new(t.unreported())),
            other => other,
        }
    }

    pub(super) fn is_dyn(&self) -> bool {
        matches!(self, Type::Dyn)
    }

    pub(super) fn is_number(&self) -> bool {
        matches!(self, Type::Int | Type::Uint | Type::Double)
    }
}
