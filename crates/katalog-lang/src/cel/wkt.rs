//! The protobuf well-known types a CEL expression can construct.
//!
//! cel-go's environment (and so the kube-apiserver's) knows the wrapper
//! messages (`google.protobuf.Int32Value{value: 1}`, ...), the JSON ones
//! (`google.protobuf.Value{string_value: 'a'}`, `Struct`, `ListValue`),
//! `Timestamp` and `Duration`; a constructed message is the CEL value it
//! stands for (`google.protobuf.Int32Value{}` is the int `0`,
//! `google.protobuf.Value{}` is `null`, a `FloatValue` narrows its double
//! to 32 bits). cel 0.13's interpreter has no message construction (it hits
//! a `todo!()`), so [`rewrite`] turns each of these into a call of
//! [`MESSAGE_FUNCTION`] ([`construct`]) with the type's name and its
//! fields as arguments; any other message type stays a compile error.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue, StructExpr};
use kube_cel::cel::objects::{Key, Map, OptionalValue};
use kube_cel::cel::{ExecutionError, FunctionContext, IdedExpr, Value};

pub(super) use super::MESSAGE_FUNCTION;

/// The messages, each with its fields.
const MESSAGES: &[(&str, &[&str])] = &[
    ("google.protobuf.BoolValue", &["value"]),
    ("google.protobuf.BytesValue", &["value"]),
    ("google.protobuf.DoubleValue", &["value"]),
    ("google.protobuf.FloatValue", &["value"]),
    ("google.protobuf.Int32Value", &["value"]),
    ("google.protobuf.Int64Value", &["value"]),
    ("google.protobuf.StringValue", &["value"]),
    ("google.protobuf.UInt32Value", &["value"]),
    ("google.protobuf.UInt64Value", &["value"]),
    (
        "google.protobuf.Value",
        &[
            "null_value",
            "number_value",
            "string_value",
            "bool_value",
            "struct_value",
            "list_value",
        ],
    ),
    ("google.protobuf.Struct", &["fields"]),
    ("google.protobuf.ListValue", &["values"]),
    ("google.protobuf.Timestamp", &["seconds", "nanos"]),
    ("google.protobuf.Duration", &["seconds", "nanos"]),
];

/// Why a message construction cannot be rewritten.
pub(super) enum Refused {
    /// Not one of [`MESSAGES`].
    Type(String),
    /// A field the message does not have: cel-go's "undefined field".
    Field { type_name: String, field: String },
}

/// The call `s` becomes (see the module documentation), its nodes with
/// the ids of `s`'s entries.
pub(super) fn rewrite(s: &mut StructExpr) -> Result<Expr, Refused> {
    let name = s.type_name.strip_prefix('.').unwrap_or(&s.type_name);
    let Some((name, fields)) = MESSAGES.iter().find(|(n, _)| *n == name) else {
        return Err(Refused::Type(s.type_name.clone()));
    };
    let mut args = vec![literal(0, name)];
    for entry in &mut s.entries {
        let EntryExpr::StructField(f) = &mut entry.expr else {
            return Err(Refused::Type(s.type_name.clone()));
        };
        if !fields.contains(&f.field.as_str()) {
            return Err(Refused::Field {
                type_name: (*name).to_owned(),
                field: f.field.clone(),
            });
        }
        let field = if f.optional {
            format!("?{}", f.field)
        } else {
            f.field.clone()
        };
        args.push(literal(entry.id, &field));
        args.push(std::mem::take(&mut f.value));
    }
    Ok(Expr::Call(CallExpr {
        func_name: MESSAGE_FUNCTION.to_owned(),
        target: None,
        args,
    }))
}

fn literal(id: u64, text: &str) -> IdedExpr {
    IdedExpr {
        id,
        expr: Expr::Literal(LiteralValue::String(text.to_owned().into())),
    }
}

/// [`MESSAGE_FUNCTION`]: the value of the message its arguments describe.
pub(super) fn construct(ftx: &mut FunctionContext) -> Result<Value, ExecutionError> {
    let args = super::strict::resolved_args(ftx)?;
    let Some((Value::String(type_name), fields)) = args.split_first() else {
        return Err(ftx.error("a message without a type"));
    };
    let mut set: Vec<(&str, &Value)> = Vec::new();
    for pair in fields.chunks(2) {
        let [Value::String(name), value] = pair else {
            return Err(ftx.error("a message field without a name"));
        };
        match name.strip_prefix('?') {
            Some(name) => {
                let optional: &OptionalValue = value.try_into()?;
                if let Some(value) = optional.value() {
                    set.push((name, value));
                }
            }
            None => set.push((name.as_str(), value)),
        }
    }
    let field = |name: &str| set.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let wrong = |value: &Value| {
        ftx.error(format!(
            "field type conversion error for {type_name}: {}",
            super::convert::cel_type_name(value)
        ))
    };
    let short = type_name
        .strip_prefix("google.protobuf.")
        .unwrap_or(type_name);
    match short {
        "Value" => match set.last() {
            None => Ok(Value::Null),
            Some((name, value)) => match (*name, value) {
                ("null_value", Value::Int(_)) => Ok(Value::Null),
                ("number_value", Value::Float(_))
                | ("string_value", Value::String(_))
                | ("bool_value", Value::Bool(_)) => Ok((*value).clone()),
                ("struct_value", Value::Map(_)) | ("list_value", Value::List(_)) => {
                    json_value(ftx, value)
                }
                (_, other) => Err(wrong(other)),
            },
        },
        "Struct" => match field("fields") {
            None => Ok(Value::Map(Map {
                map: Arc::new(HashMap::new()),
            })),
            Some(value @ Value::Map(_)) => json_value(ftx, value),
            Some(other) => Err(wrong(other)),
        },
        "ListValue" => match field("values") {
            None => Ok(Value::List(Arc::new(Vec::new()))),
            Some(value @ Value::List(_)) => json_value(ftx, value),
            Some(other) => Err(wrong(other)),
        },
        "Timestamp" | "Duration" => {
            let int = |name: &str| match field(name) {
                None => Ok(0),
                Some(Value::Int(i)) => Ok(*i),
                Some(other) => Err(wrong(other)),
            };
            let (seconds, nanos) = (int("seconds")?, int("nanos")?);
            let duration = chrono::Duration::try_seconds(seconds)
                .and_then(|s| s.checked_add(&chrono::Duration::nanoseconds(nanos)));
            let value = if short == "Duration" {
                duration
                    .filter(super::time::duration_in_range)
                    .map(Value::Duration)
            } else {
                let utc = chrono::FixedOffset::east_opt(0).expect("a zero offset");
                duration
                    .and_then(|d| chrono::DateTime::UNIX_EPOCH.checked_add_signed(d))
                    .map(|t| t.with_timezone(&utc))
                    .filter(super::time::timestamp_in_range)
                    .map(Value::Timestamp)
            };
            value.ok_or_else(|| ftx.error(format!("{type_name} out of range")))
        }
        _ => {
            let value = field("value");
            match (short, value) {
                ("BoolValue", None) => Ok(Value::Bool(false)),
                ("BytesValue", None) => Ok(Value::Bytes(Arc::new(Vec::new()))),
                ("DoubleValue" | "FloatValue", None) => Ok(Value::Float(0.0)),
                ("Int32Value" | "Int64Value", None) => Ok(Value::Int(0)),
                ("UInt32Value" | "UInt64Value", None) => Ok(Value::UInt(0)),
                ("StringValue", None) => Ok(Value::String(Arc::new(String::new()))),
                ("BoolValue", Some(v @ Value::Bool(_)))
                | ("BytesValue", Some(v @ Value::Bytes(_)))
                | ("DoubleValue", Some(v @ Value::Float(_)))
                | ("Int64Value", Some(v @ Value::Int(_)))
                | ("UInt64Value", Some(v @ Value::UInt(_)))
                | ("StringValue", Some(v @ Value::String(_))) => Ok(v.clone()),
                // Narrowed to a 32-bit float, as the message holds it.
                #[allow(clippy::cast_possible_truncation)]
                ("FloatValue", Some(Value::Float(f))) => Ok(Value::Float(f64::from(*f as f32))),
                ("Int32Value", Some(Value::Int(i))) => i32::try_from(*i)
                    .map(|_| Value::Int(*i))
                    .map_err(|_| ftx.error("integer overflow")),
                ("UInt32Value", Some(Value::UInt(u))) => u32::try_from(*u)
                    .map(|_| Value::UInt(*u))
                    .map_err(|_| ftx.error("unsigned integer overflow")),
                (_, Some(other)) => Err(wrong(other)),
                (_, None) => Err(ftx.error(format!("unknown message {type_name}"))),
            }
        }
    }
}

/// `value` as a `google.protobuf.Value` holds it: numbers as doubles,
/// bytes as base64, durations and timestamps as their JSON strings, lists
/// and maps with string keys recursively; anything else fails.
fn json_value(ftx: &FunctionContext, value: &Value) -> Result<Value, ExecutionError> {
    #[allow(clippy::cast_precision_loss)]
    Ok(match value {
        Value::Null | Value::Bool(_) | Value::Float(_) | Value::String(_) => value.clone(),
        Value::Int(i) => Value::Float(*i as f64),
        Value::UInt(u) => Value::Float(*u as f64),
        Value::Bytes(b) => Value::String(Arc::new(super::convert::base64_encode(b))),
        Value::Duration(_) | Value::Timestamp(_) => Value::String(Arc::new(
            super::functions::go_time_string(value).unwrap_or_default(),
        )),
        Value::List(items) => Value::List(Arc::new(
            items
                .iter()
                .map(|v| json_value(ftx, v))
                .collect::<Result<_, _>>()?,
        )),
        Value::Map(map) => {
            let mut out = HashMap::with_capacity(map.map.len());
            for (k, v) in map.map.iter() {
                let Key::String(_) = k else {
                    return Err(ftx.error("a google.protobuf.Struct key must be a string"));
                };
                out.insert(k.clone(), json_value(ftx, v)?);
            }
            Value::Map(Map { map: Arc::new(out) })
        }
        other => {
            return Err(ftx.error(format!(
                "{} has no google.protobuf.Value form",
                super::convert::cel_type_name(other)
            )));
        }
    })
}
