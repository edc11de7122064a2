//! The value functions of the conversion rules, one per transformation:
//! split and join (with the placeholder forms that keep absent parts
//! absent), unwrap, list ↔ map, and type coercion.

use serde_json::{Map, Value};

use crate::common::json::type_name;
use crate::common::path::Path;
use crate::front::document::ScalarType;
use crate::ir::{Direction, Op, PartsIr, RuleIr, Side, Splitter, TemplatePiece, WrapHow};

use crate::conversion::error::{ConvertError, fail};

/// The object that holds every part of a split, when the parts have one of
/// their own (`spec.range.from`, `spec.range.to` → `spec.range`). The
/// empty-object form of the placeholders-only string is used only when this
/// is the joined path itself: there the other version holds a string, so an
/// empty object cannot have come from it.
fn parts_parent(parts: &PartsIr) -> Option<Path> {
    let paths = match parts {
        PartsIr::List(_) => return None,
        PartsIr::Fields(ps) => ps.clone(),
        PartsIr::Named(ps) => ps.iter().map(|(_, p)| p.clone()).collect(),
    };
    let first = paths.first()?;
    let n = paths
        .iter()
        .map(|p| first.common_prefix_len(p))
        .min()?
        .min(paths.iter().map(|p| p.len().saturating_sub(1)).min()?);
    (n > 0).then(|| Path::from_segments(first.segments()[..n].to_vec()))
}

/// The joined string whose every piece is the placeholder.
pub(super) fn all_placeholders(parts: &PartsIr, splitter: &Splitter, ph: &str) -> Option<String> {
    match (splitter, parts) {
        (Splitter::Separator(sep), PartsIr::Fields(paths)) => Some(vec![ph; paths.len()].join(sep)),
        (Splitter::Pattern { template, .. }, PartsIr::Named(_)) => Some(
            template
                .iter()
                .map(|piece| match piece {
                    TemplatePiece::Text(t) => t.as_str(),
                    TemplatePiece::Capture(_) => ph,
                })
                .collect(),
        ),
        _ => None,
    }
}

/// A split of the string made of placeholders only: every part is absent,
/// and their own parent object is left empty to say so (joined back by
/// [`empty_parts_join`]). It fails when that parent already holds other
/// fields, and the caller checks it is still empty once every rule wrote.
pub(super) fn placeholders_split(
    rule: &RuleIr,
    dir: Direction,
    input: &[Option<Value>],
    obj: &Value,
    emptied: &mut Vec<(Path, String)>,
) -> Option<Result<Vec<(Path, Value)>, ConvertError>> {
    let Op::Split {
        joined_side,
        joined,
        parts,
        splitter,
        placeholder: Some(ph),
        ..
    } = &rule.op
    else {
        return None;
    };
    if *joined_side != Side::source_of(dir) {
        return None;
    }
    let Some(Some(Value::String(s))) = input.first() else {
        return None;
    };
    let parent = parts_parent(parts).filter(|p| p == joined)?;
    if all_placeholders(parts, splitter, ph).as_deref() != Some(s.as_str()) {
        return None;
    }
    if parent.get(obj).is_some() {
        return Some(fail(format!(
            "`{joined}` = {s:?} is placeholders only, which converts to an empty `{parent}`, but `{parent}` holds other fields"
        )));
    }
    emptied.push((parent.clone(), rule.origin.clone()));
    Some(Ok(vec![(parent, Value::Object(Map::new()))]))
}

/// A join whose parts are all absent while their own parent object is there
/// and empty: the empty object is the string of placeholders (see the split
/// side above), taken out so it is never copied into the joined field.
/// Without a placeholder it has no string form, and converting fails rather
/// than copy `{}` where the other version holds a string. `None`: not this
/// case, the rule applies as usual.
pub(super) fn empty_parts_join(
    rule: &RuleIr,
    dir: Direction,
    input: &[Option<Value>],
    obj: &mut Value,
) -> Option<Result<Vec<(Path, Value)>, ConvertError>> {
    let Op::Split {
        joined_side,
        joined,
        parts,
        splitter,
        placeholder,
        ..
    } = &rule.op
    else {
        return None;
    };
    if *joined_side == Side::source_of(dir) || input.iter().any(Option::is_some) {
        return None;
    }
    let parent = parts_parent(parts).filter(|p| p == joined)?;
    if !matches!(parent.get(obj), Some(Value::Object(m)) if m.is_empty()) {
        return None;
    }
    let Some(ph) = placeholder.as_deref() else {
        return Some(fail(format!(
            "`{parent}` is an empty object; with no `placeholder` it has no string form for `{joined}`"
        )));
    };
    let s = all_placeholders(parts, splitter, ph)?;
    parent.take(obj);
    Some(Ok(vec![(joined.clone(), Value::String(s))]))
}

pub(super) fn same_pieces(a: &[(Path, Value)], b: &[(Path, Value)]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

pub(super) fn split(
    s: &str,
    joined: &Path,
    parts: &PartsIr,
    splitter: &Splitter,
    placeholder: Option<&str>,
) -> Result<Vec<(Path, Value)>, ConvertError> {
    let keep = |piece: &str| placeholder != Some(piece);
    match (splitter, parts) {
        (Splitter::Separator(sep), PartsIr::List(p)) => {
            let items: Vec<Value> = if s.is_empty() {
                vec![]
            } else {
                s.split(sep.as_str())
                    .map(|x| Value::String(x.to_string()))
                    .collect()
            };
            Ok(vec![(p.clone(), Value::Array(items))])
        }
        (Splitter::Separator(sep), PartsIr::Fields(paths)) => Ok(s
            .splitn(paths.len(), sep.as_str())
            .zip(paths)
            .filter(|(piece, _)| keep(piece))
            .map(|(piece, p)| (p.clone(), Value::String(piece.to_string())))
            .collect()),
        (Splitter::Pattern { regex, .. }, PartsIr::Named(named)) => {
            let Some(caps) = regex.captures(s) else {
                return fail(format!(
                    "`{joined}` = {s:?} does not match the pattern /{}/",
                    regex.as_str()
                ));
            };
            Ok(named
                .iter()
                .filter_map(|(name, p)| {
                    let m = caps.name(name)?;
                    keep(m.as_str()).then(|| (p.clone(), Value::String(m.as_str().to_string())))
                })
                .collect())
        }
        _ => fail("internal: split parts do not fit the splitter"),
    }
}

pub(super) fn join(
    pieces: &[(Path, Value)],
    parts: &PartsIr,
    splitter: &Splitter,
    placeholder: Option<&str>,
    joined: &Path,
) -> Result<Option<String>, ConvertError> {
    let get = |p: &Path| -> Result<Option<&str>, ConvertError> {
        match pieces.iter().find(|(q, _)| q == p) {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s.as_str())),
            Some((_, v)) => fail(format!(
                "`{p}` must be a string to be joined into `{joined}`, found {}",
                type_name(v)
            )),
        }
    };
    match (splitter, parts) {
        (Splitter::Separator(sep), PartsIr::List(p)) => {
            let Some((_, v)) = pieces.iter().find(|(q, _)| q == p) else {
                return Ok(None);
            };
            let Value::Array(items) = v else {
                return fail(format!(
                    "`{p}` must be a list of strings, found {}",
                    type_name(v)
                ));
            };
            let mut strs = Vec::with_capacity(items.len());
            for item in items {
                let Some(s) = item.as_str() else {
                    return fail(format!(
                        "`{p}` must hold strings only, found {}",
                        type_name(item)
                    ));
                };
                if s.contains(sep.as_str()) {
                    return fail(format!(
                        "an element of `{p}` ({s:?}) contains the separator {sep:?}, so it would not split back"
                    ));
                }
                strs.push(s);
            }
            Ok(Some(strs.join(sep)))
        }
        (Splitter::Separator(sep), PartsIr::Fields(paths)) => {
            let mut values = Vec::new();
            for p in paths {
                values.push(get(p)?);
            }
            if values.iter().all(Option::is_none) {
                return Ok(None);
            }
            // Trailing absent pieces are left out; absent pieces inside need a placeholder.
            while values.last().is_some_and(Option::is_none) && placeholder.is_none() {
                values.pop();
            }
            let mut out = Vec::new();
            for (i, v) in values.iter().enumerate() {
                match (v, placeholder) {
                    (Some(s), _) => out.push(*s),
                    (None, Some(ph)) => out.push(ph),
                    (None, None) => {
                        return fail(format!(
                            "`{}` is absent but a later piece of `{joined}` is not; set `placeholder` to join it",
                            paths[i]
                        ));
                    }
                }
            }
            Ok(Some(out.join(sep)))
        }
        (Splitter::Pattern { template, .. }, PartsIr::Named(named)) => {
            let mut any = false;
            let mut out = String::new();
            for piece in template {
                match piece {
                    TemplatePiece::Text(t) => out.push_str(t),
                    TemplatePiece::Capture(name) => {
                        let path = named.iter().find(|(n, _)| n == name).map(|(_, p)| p);
                        let v = match path {
                            Some(p) => get(p)?,
                            None => None,
                        };
                        match (v, placeholder) {
                            (Some(s), _) => {
                                any = true;
                                out.push_str(s);
                            }
                            (None, Some(ph)) => out.push_str(ph),
                            (None, None) => {}
                        }
                    }
                }
            }
            Ok(any.then_some(out))
        }
        _ => fail("internal: split parts do not fit the splitter"),
    }
}

pub(super) fn unwrap(v: Value, how: &WrapHow, at: &Path) -> Result<Option<Value>, ConvertError> {
    match (how, v) {
        (WrapHow::Key(k), Value::Object(mut m)) => {
            let inner = m.shift_remove(k);
            if !m.is_empty() {
                let extra: Vec<&String> = m.keys().collect();
                return fail(format!(
                    "`{at}` holds fields other than `{k}` ({}), which the other version cannot hold",
                    extra
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok(inner)
        }
        (WrapHow::List, Value::Array(mut a)) => match a.len() {
            0 => Ok(None),
            1 => Ok(a.pop()),
            n => fail(format!(
                "`{at}` holds {n} elements; only a one-element list converts"
            )),
        },
        (WrapHow::Key(_), other) => fail(format!(
            "`{at}` must be an object, found {}",
            type_name(&other)
        )),
        (WrapHow::List, other) => fail(format!(
            "`{at}` must be a list, found {}",
            type_name(&other)
        )),
    }
}

pub(super) fn list_to_map(v: Value, at: &Path, key: &str) -> Result<Value, ConvertError> {
    let Value::Array(items) = v else {
        return fail(format!("`{at}` must be a list, found {}", type_name(&v)));
    };
    let mut out = Map::new();
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(mut m) = item else {
            return fail(format!(
                "`{at}[{i}]` must be an object with a `{key}` field, found {}",
                type_name(&item)
            ));
        };
        let name = match m.shift_remove(key) {
            Some(Value::String(s)) => s,
            Some(other) => {
                return fail(format!(
                    "`{at}[{i}].{key}` must be a string, found {}",
                    type_name(&other)
                ));
            }
            None => return fail(format!("`{at}[{i}]` has no `{key}`")),
        };
        if out.contains_key(&name) {
            return fail(format!(
                "`{at}` has two elements with {key} `{name}`; a map cannot hold both"
            ));
        }
        out.insert(name, Value::Object(m));
    }
    Ok(Value::Object(out))
}

pub(super) fn map_to_list(v: Value, at: &Path, key: &str) -> Result<Value, ConvertError> {
    let Value::Object(m) = v else {
        return fail(format!("`{at}` must be a map, found {}", type_name(&v)));
    };
    let mut out = Vec::with_capacity(m.len());
    for (name, item) in m {
        let Value::Object(fields) = item else {
            return fail(format!(
                "`{at}.{name}` must be an object, found {}",
                type_name(&item)
            ));
        };
        if fields.contains_key(key) {
            return fail(format!(
                "`{at}.{name}` already has a `{key}` field; it would clash with the map key"
            ));
        }
        let mut element = Map::new();
        element.insert(key.to_string(), Value::String(name));
        element.extend(fields);
        out.push(Value::Object(element));
    }
    Ok(Value::Array(out))
}

pub(super) fn coerce(
    v: &Value,
    from: ScalarType,
    to: ScalarType,
    at: &Path,
) -> Result<Value, ConvertError> {
    use ScalarType::*;
    let wrong = || {
        fail(format!(
            "`{at}` should be {}, found {}",
            type_word(from),
            type_name(v)
        ))
    };
    match (from, to, v) {
        (Integer, String, Value::Number(n)) if n.is_i64() || n.is_u64() => {
            Ok(Value::String(n.to_string()))
        }
        (Number, String, Value::Number(n)) => Ok(Value::String(n.to_string())),
        (Boolean, String, Value::Bool(b)) => Ok(Value::String(b.to_string())),
        (String, Integer, Value::String(s)) => {
            let n: Option<serde_json::Number> = s
                .parse::<i64>()
                .map(serde_json::Number::from)
                .or_else(|_| s.parse::<u64>().map(serde_json::Number::from))
                .ok();
            match n {
                Some(n) if n.to_string() == *s => Ok(Value::Number(n)),
                _ => fail(format!(
                    "`{at}` = {s:?} is not an integer in canonical form, so it cannot become one and come back"
                )),
            }
        }
        (String, Number, Value::String(s)) => {
            let n = s
                .parse::<i64>()
                .map(serde_json::Number::from)
                .ok()
                .or_else(|| s.parse::<f64>().ok().and_then(serde_json::Number::from_f64));
            match n {
                Some(n) if n.to_string() == *s => Ok(Value::Number(n)),
                _ => fail(format!(
                    "`{at}` = {s:?} is not a number in canonical form, so it cannot become one and come back"
                )),
            }
        }
        (String, Boolean, Value::String(s)) => match s.as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => fail(format!("`{at}` = {s:?} is not `true` or `false`")),
        },
        (Integer, Number, Value::Number(n)) if n.is_i64() || n.is_u64() => {
            Ok(Value::Number(n.clone()))
        }
        (Number, Integer, Value::Number(n)) => {
            if n.is_i64() || n.is_u64() {
                Ok(Value::Number(n.clone()))
            } else {
                let why = if n.as_f64().is_some_and(|f| f.fract() != 0.0) {
                    "has a fraction"
                } else {
                    "is a floating-point number"
                };
                fail(format!("`{at}` = {n} {why} and cannot become an integer"))
            }
        }
        _ => wrong(),
    }
}

fn type_word(t: ScalarType) -> &'static str {
    match t {
        ScalarType::String => "a string",
        ScalarType::Integer => "an integer",
        ScalarType::Number => "a number",
        ScalarType::Boolean => "a boolean",
    }
}
