//! Values across the JSON boundary: the JSON of an object bound to a
//! variable as CEL values, a result back as JSON (as the apiserver's
//! unstructured values cross it), and the type names and Go text forms
//! (base64 bytes, durations) the errors and results use.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::Value;
use kube_cel::cel::objects::{Key, Map, OptionalValue};
use serde_json::Value as Json;

use super::{MAX_VALUE_DEPTH, ValueError};

// ---------------------------------------------------------------------------
// JSON -> CEL
// ---------------------------------------------------------------------------

pub(super) fn json_to_cel(value: &Json, depth: usize) -> Result<Value, ValueError> {
    if depth > MAX_VALUE_DEPTH {
        return Err(ValueError::ValueTooDeep);
    }
    Ok(match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else if let Some(f) = n.as_f64() {
                Value::Float(f)
            } else {
                return Err(ValueError::Number(n.clone()));
            }
        }
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => Value::List(Arc::new(
            items
                .iter()
                .map(|item| json_to_cel(item, depth + 1))
                .collect::<Result<Vec<_>, _>>()?,
        )),
        Json::Object(fields) => {
            let map = fields
                .iter()
                .map(|(k, v)| Ok((Key::String(Arc::new(k.clone())), json_to_cel(v, depth + 1)?)))
                .collect::<Result<HashMap<_, _>, ValueError>>()?;
            Value::Map(Map { map: Arc::new(map) })
        }
    })
}

// ---------------------------------------------------------------------------
// CEL -> JSON
// ---------------------------------------------------------------------------

pub(super) fn cel_to_json(value: &Value, depth: usize) -> Result<Json, ValueError> {
    if depth > MAX_VALUE_DEPTH {
        return Err(ValueError::ResultTooDeep);
    }
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or(ValueError::NonFinite(*f))?,
        Value::String(s) => Json::String(s.as_str().to_owned()),
        Value::Bytes(b) => Json::String(base64_encode(b)),
        Value::Timestamp(ts) => {
            Json::String(ts.naive_utc().format("%Y-%m-%dT%H:%M:%S%.fZ").to_string())
        }
        Value::Duration(d) => Json::String(format_go_duration(
            i128::from(d.num_seconds()) * 1_000_000_000 + i128::from(d.subsec_nanos()),
        )),
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|item| cel_to_json(item, depth + 1))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Value::Map(map) => {
            let mut fields = map
                .map
                .iter()
                .map(|(k, v)| match k {
                    Key::String(s) => Ok((s.as_str(), v)),
                    other => Err(ValueError::NonStringKey { key: other.clone() }),
                })
                .collect::<Result<Vec<_>, ValueError>>()?;
            // CEL maps are unordered: sort for a deterministic result.
            fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let mut object = serde_json::Map::with_capacity(fields.len());
            for (k, v) in fields {
                object.insert(k.to_owned(), cel_to_json(v, depth + 1)?);
            }
            Json::Object(object)
        }
        Value::Opaque(opaque) => match opaque.downcast_ref::<OptionalValue>() {
            Some(optional) => match optional.value() {
                Some(inner) => cel_to_json(inner, depth + 1)?,
                None => Json::Null,
            },
            None => {
                return Err(ValueError::Opaque {
                    type_name: opaque.runtime_type_name().to_owned(),
                });
            }
        },
        Value::Function(name, _) => {
            return Err(ValueError::Function {
                name: name.to_string(),
            });
        }
    })
}

/// The CEL name of a value's type, for error messages.
pub(super) fn cel_type_name(value: &Value) -> String {
    match value {
        Value::Null => "null_type".to_owned(),
        Value::Bool(_) => "bool".to_owned(),
        Value::Int(_) => "int".to_owned(),
        Value::UInt(_) => "uint".to_owned(),
        Value::Float(_) => "double".to_owned(),
        Value::String(_) => "string".to_owned(),
        Value::Bytes(_) => "bytes".to_owned(),
        Value::List(_) => "list".to_owned(),
        Value::Map(_) => "map".to_owned(),
        Value::Timestamp(_) => "google.protobuf.Timestamp".to_owned(),
        Value::Duration(_) => "google.protobuf.Duration".to_owned(),
        Value::Opaque(o) => o.runtime_type_name().to_owned(),
        Value::Function(..) => "function".to_owned(),
    }
}

pub(super) fn key_type_name(key: &Key) -> &'static str {
    match key {
        Key::Int(_) => "int",
        Key::Uint(_) => "uint",
        Key::Bool(_) => "bool",
        Key::String(_) => "string",
    }
}

/// Standard base64 with padding (RFC 4648 section 4).
pub(super) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Formats a duration given in nanoseconds like Go's `time.Duration.String()`
/// (`1h2m3.5s`, `1.5ms`, `0s`), without Go's ±292 year range limit.
pub(super) fn format_go_duration(nanos: i128) -> String {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    if nanos == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    if nanos < 0 {
        out.push('-');
    }
    let n = nanos.unsigned_abs();
    if n < NANOS_PER_SEC {
        let (unit, per_unit, digits) = if n < 1_000 {
            ("ns", 1, 0)
        } else if n < 1_000_000 {
            ("µs", 1_000, 3)
        } else {
            ("ms", 1_000_000, 6)
        };
        push_decimal(&mut out, n / per_unit, n % per_unit, digits);
        out.push_str(unit);
    } else {
        let secs = n / NANOS_PER_SEC;
        let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
        if hours > 0 {
            out.push_str(&format!("{hours}h"));
        }
        if hours > 0 || minutes > 0 {
            out.push_str(&format!("{minutes}m"));
        }
        push_decimal(&mut out, seconds, n % NANOS_PER_SEC, 9);
        out.push('s');
    }
    out
}

/// Appends `whole[.frac]`, with `frac` zero-padded to `digits` digits and
/// trailing zeros removed.
pub(super) fn push_decimal(out: &mut String, whole: u128, frac: u128, digits: usize) {
    out.push_str(&whole.to_string());
    if frac != 0 {
        let frac = format!("{frac:0digits$}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
}
