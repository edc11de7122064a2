//! Small JSON helpers both halves of the language share (conversion and
//! admission), so that neither imports the other for them.

pub mod node;

use serde_json::Value;

/// Split `group/version` (or a bare core `version`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// The kind of a JSON value, as messages name it ("a string", "an object").
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// JSON equality where `1` and `1.0` are the same number.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y
                || (x.as_f64().is_some() && x.as_f64() == y.as_f64() && !(x.is_u64() && y.is_u64()))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A value for a message: compact JSON, at most 60 characters.
pub fn show(v: &Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    truncate(&s, 60)
}

/// `s` cut to `max` characters, with `…` where it was cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// `map.get(key)`: on a small object, a scan comparing lengths first
/// (no hash of the key; Kubernetes objects have a handful of members per
/// level), else the map's own lookup. The same answer either way: keys
/// are unique.
pub fn member<'v>(map: &'v serde_json::Map<String, Value>, key: &str) -> Option<&'v Value> {
    if map.len() <= 8 {
        map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        map.get(key)
    }
}

/// [`Value::pointer`] without an allocation per step: the same answer for
/// every pointer (a pointer with `~` escapes goes to `Value::pointer`).
pub trait ValueAt {
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl ValueAt for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        if pointer.contains('~') {
            return self.pointer(pointer);
        }
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(self, |cur, key| match cur {
                Value::Object(m) => member(m, key),
                // As serde_json reads an index: no sign, no leading zero.
                Value::Array(a)
                    if !key.starts_with('+') && (key == "0" || !key.starts_with('0')) =>
                {
                    key.parse::<usize>().ok().and_then(|i| a.get(i))
                }
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn member_answers_as_get_on_small_and_large_objects() {
        for n in [0, 1, 8, 9, 40] {
            let map: serde_json::Map<String, Value> =
                (0..n).map(|i| (format!("k{i}"), json!(i))).collect();
            for i in 0..n + 2 {
                let key = format!("k{i}");
                assert_eq!(member(&map, &key), map.get(&key), "{n} {key}");
            }
            assert_eq!(member(&map, "k"), None);
        }
    }

    #[test]
    fn at_answers_as_value_pointer() {
        let v = json!({"a": {"b": [10, {"c": 1}], "": {"": 2}, "x/y": 3, "m~n": 4,
                       "01": 5, "0": 6}, "list": [[7]]});
        for pointer in [
            "",
            "/",
            "/a",
            "/a/b",
            "/a/b/0",
            "/a/b/1/c",
            "/a/b/2",
            "/a/b/01",
            "/a/b/+1",
            "/a/b/-1",
            "/a/b/x",
            "/a//",
            "/a/x~1y",
            "/a/m~0n",
            "/a/01",
            "/a/0",
            "a",
            "/list/0/0",
            "/list/00",
            "/missing/x",
            "/a/b/0/x",
            "/a/b/1/c/",
        ] {
            assert_eq!(v.at(pointer), v.pointer(pointer), "{pointer}");
        }
    }
}
