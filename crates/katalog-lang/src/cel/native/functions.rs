//! The functions the evaluator over JSON runs itself (the rest go to
//! cel's interpreter): calls on the bound values, with CEL's equality,
//! ordering, indexing and membership over them.

use std::borrow::Cow;
use std::rc::Rc;

use crate::cel::functions::{REGEX_CACHE, regex_cost};

use super::{Func, V};

pub(super) fn call_function<'a>(
    func: Func,
    target: Option<V<'a>>,
    args: [Option<V<'a>>; 2],
) -> Option<V<'a>> {
    let mut args = args.into_iter().flatten();
    let mut arg = || args.next();
    match (func, target) {
        (Func::Not, None) => match arg()? {
            V::Bool(b) => Some(V::Bool(!b)),
            _ => None,
        },
        (Func::NotStrictlyFalse, None) => match arg()? {
            V::Bool(b) => Some(V::Bool(b)),
            _ => None,
        },
        (Func::Negate, None) => match arg()? {
            V::Int(i) => i.checked_neg().map(V::Int),
            V::Double(d) => Some(V::Double(-d)),
            _ => None,
        },
        (Func::Add, None) => add(arg()?, arg()?),
        (Func::Subtract, None) => match (arg()?, arg()?) {
            (V::Int(a), V::Int(b)) => a.checked_sub(b).map(V::Int),
            (V::Uint(a), V::Uint(b)) => a.checked_sub(b).map(V::Uint),
            (V::Double(a), V::Double(b)) => Some(V::Double(a - b)),
            _ => None,
        },
        (Func::Multiply, None) => match (arg()?, arg()?) {
            (V::Int(a), V::Int(b)) => a.checked_mul(b).map(V::Int),
            (V::Uint(a), V::Uint(b)) => a.checked_mul(b).map(V::Uint),
            (V::Double(a), V::Double(b)) => Some(V::Double(a * b)),
            _ => None,
        },
        (Func::Divide, None) => match (arg()?, arg()?) {
            (V::Int(a), V::Int(b)) => a.checked_div(b).map(V::Int),
            (V::Uint(a), V::Uint(b)) => a.checked_div(b).map(V::Uint),
            (V::Double(a), V::Double(b)) if b != 0.0 => Some(V::Double(a / b)),
            _ => None,
        },
        (Func::Modulo, None) => match (arg()?, arg()?) {
            (V::Int(a), V::Int(b)) => a.checked_rem(b).map(V::Int),
            (V::Uint(a), V::Uint(b)) => a.checked_rem(b).map(V::Uint),
            _ => None,
        },
        (Func::Less, None) => compare(arg()?, arg()?).map(|o| V::Bool(o.is_lt())),
        (Func::LessEquals, None) => compare(arg()?, arg()?).map(|o| V::Bool(o.is_le())),
        (Func::Greater, None) => compare(arg()?, arg()?).map(|o| V::Bool(o.is_gt())),
        (Func::GreaterEquals, None) => compare(arg()?, arg()?).map(|o| V::Bool(o.is_ge())),
        (Func::Index, None) => index(arg()?, arg()?, false),
        (Func::OptIndex, None) => index(arg()?, arg()?, true),
        (Func::Equals, None) => equal(&arg()?, &arg()?).map(V::Bool),
        (Func::NotEquals, None) => equal(&arg()?, &arg()?).map(|e| V::Bool(!e)),
        (Func::In, None) => contains(&arg()?, &arg()?).map(V::Bool),
        (Func::Size, None) => size(&arg()?),
        (Func::Size, Some(this)) => size(&this),
        (Func::StartsWith, Some(V::Str(this))) => Some(V::Bool(this.starts_with(arg()?.as_str()?))),
        (Func::EndsWith, Some(V::Str(this))) => Some(V::Bool(this.ends_with(arg()?.as_str()?))),
        (Func::Contains, Some(V::Str(this))) => Some(V::Bool(this.contains(arg()?.as_str()?))),
        (Func::Matches, Some(V::Str(this))) => matches(&this, arg()?.as_str()?),
        (Func::Matches, None) => {
            let (this, pattern) = (arg()?, arg()?);
            matches(this.as_str()?, pattern.as_str()?)
        }
        (Func::Join, Some(this)) => {
            let separator = match arg() {
                Some(V::Str(s)) => s,
                Some(_) => return None,
                None => Cow::Borrowed(""),
            };
            let list = this.as_list()?;
            let mut out = String::new();
            for i in 0..list.len() {
                if i > 0 {
                    out.push_str(&separator);
                }
                out.push_str(list.get(i)?.as_str()?);
            }
            Some(V::Str(Cow::Owned(out)))
        }
        (Func::Split, Some(V::Str(this))) => {
            let separator = arg()?;
            // An empty separator (characters, as in cel-go) and a limit are
            // the interpreter's (`split_like_cel_go`).
            let separator = separator.as_str().filter(|s| !s.is_empty())?;
            let parts = this
                .split(separator)
                .map(|part| V::Str(Cow::Owned(part.to_owned())))
                .collect();
            Some(V::List(Rc::new(parts)))
        }
        (Func::IndexOf, Some(V::Str(this))) => {
            // kube-cel counts code points: on ASCII text they are bytes.
            let search = arg()?;
            let search = search.as_str()?;
            if !this.is_ascii() || !search.is_ascii() {
                return None;
            }
            position(this.find(search))
        }
        (Func::LastIndexOf, Some(V::Str(this))) => {
            let search = arg()?;
            let search = search.as_str()?;
            if !this.is_ascii() || !search.is_ascii() || search.is_empty() {
                return None;
            }
            position(this.rfind(search))
        }
        (Func::IndexOf, Some(this)) => {
            let target = arg()?;
            let list = this.as_list()?;
            for i in 0..list.len() {
                if equal(&list.get(i)?, &target)? {
                    return position(Some(i));
                }
            }
            position(None)
        }
        (Func::Substring, Some(V::Str(this))) => {
            if !this.is_ascii() {
                return None;
            }
            let start = match arg()? {
                V::Int(i) => usize::try_from(i).ok()?,
                _ => return None,
            };
            let end = match arg() {
                Some(V::Int(i)) => usize::try_from(i).ok()?,
                Some(_) => return None,
                None => this.len(),
            };
            let part = this.get(start..end)?;
            Some(V::Str(Cow::Owned(part.to_owned())))
        }
        (Func::Sort, Some(this)) => {
            let mut items = this.as_list()?.items();
            if items.iter().all(|v| matches!(v, V::Str(_))) {
                items.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            } else if items.iter().all(|v| matches!(v, V::Int(_))) {
                items.sort_by_key(|v| match v {
                    V::Int(i) => *i,
                    _ => 0,
                });
            } else {
                return None;
            }
            Some(V::List(Rc::new(items)))
        }
        (Func::Distinct, Some(this)) => {
            let items = this.as_list()?.items();
            let same_kind = items.iter().all(|v| matches!(v, V::Str(_)))
                || items.iter().all(|v| matches!(v, V::Int(_)))
                || items.iter().all(|v| matches!(v, V::Bool(_)));
            if !same_kind {
                return None;
            }
            let mut out: Vec<V<'a>> = Vec::with_capacity(items.len());
            for item in items {
                let mut seen = false;
                for kept in &out {
                    seen |= equal(kept, &item)?;
                }
                if !seen {
                    out.push(item);
                }
            }
            Some(V::List(Rc::new(out)))
        }
        (Func::Flatten, Some(this)) => {
            let mut out = Vec::new();
            for item in this.as_list()?.items() {
                match item.as_list() {
                    Some(inner) => out.extend(inner.items()),
                    None => out.push(item),
                }
            }
            Some(V::List(Rc::new(out)))
        }
        (Func::OrValue, Some(V::Opt(inner))) => {
            let fallback = arg()?;
            Some(match inner {
                Some(v) => Rc::unwrap_or_clone(v),
                None => fallback,
            })
        }
        (Func::HasValue, Some(V::Opt(inner))) => Some(V::Bool(inner.is_some())),
        (Func::Value, Some(V::Opt(Some(v)))) => Some(Rc::unwrap_or_clone(v)),
        (Func::String, None) => match arg()? {
            V::Str(s) => Some(V::Str(s)),
            V::Int(i) => Some(V::Str(Cow::Owned(i.to_string()))),
            V::Uint(u) => Some(V::Str(Cow::Owned(u.to_string()))),
            _ => None,
        },
        (Func::Int, None) => match arg()? {
            V::Int(i) => Some(V::Int(i)),
            V::Uint(u) => i64::try_from(u).ok().map(V::Int),
            // The parse cel's `int()` does.
            V::Str(s) => s.parse::<i64>().ok().map(V::Int),
            _ => None,
        },
        (Func::Dyn, None) => arg(),
        (Func::Entries, None) => entries(arg()?),
        // A predicate that failed, or gave something else than a bool, is
        // given back: the interpreter keeps the error pending.
        (Func::AllStep, None) => match (arg()?, arg()?) {
            (V::Bool(a), V::Bool(b)) => Some(V::Bool(a && b)),
            _ => None,
        },
        (Func::ExistsStep, None) => match (arg()?, arg()?) {
            (V::Bool(a), V::Bool(b)) => Some(V::Bool(a || b)),
            _ => None,
        },
        (Func::LogicResult, None) => match arg()? {
            V::Bool(b) => Some(V::Bool(b)),
            _ => None,
        },
        _ => None,
    }
}

/// The `[index, element]` pairs of a list, the `[key, value]` pairs of a
/// map by sorted key, as the interpreter's `@katalog_entries`.
fn entries(x: V<'_>) -> Option<V<'_>> {
    let pair = |k, v| V::List(Rc::new(vec![k, v]));
    let pairs = if let Some(list) = x.as_list() {
        list.items()
            .into_iter()
            .enumerate()
            .map(|(i, v)| Some(pair(V::Int(i64::try_from(i).ok()?), v)))
            .collect::<Option<Vec<_>>>()?
    } else {
        let mut keys = x.map_keys()?;
        keys.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        keys.into_iter()
            .map(|k| {
                let v = index(x.clone(), k.clone(), false)?;
                Some(pair(k, v))
            })
            .collect::<Option<Vec<_>>>()?
    };
    Some(V::List(Rc::new(pairs)))
}

/// An index as `indexOf` gives it: `-1` when not found.
fn position<'a>(found: Option<usize>) -> Option<V<'a>> {
    match found {
        Some(i) => i64::try_from(i).ok().map(V::Int),
        None => Some(V::Int(-1)),
    }
}

fn add<'a>(a: V<'a>, b: V<'a>) -> Option<V<'a>> {
    match (a, b) {
        (V::Int(a), V::Int(b)) => a.checked_add(b).map(V::Int),
        (V::Uint(a), V::Uint(b)) => a.checked_add(b).map(V::Uint),
        (V::Double(a), V::Double(b)) => Some(V::Double(a + b)),
        (V::Str(a), V::Str(b)) => Some(V::Str(Cow::Owned(format!("{a}{b}")))),
        (a, b) => {
            let (left, right) = (a.as_list()?, b.as_list()?);
            let mut items = Vec::with_capacity(left.len() + right.len());
            items.extend(left.items());
            items.extend(right.items());
            Some(V::List(Rc::new(items)))
        }
    }
}

fn compare(a: V<'_>, b: V<'_>) -> Option<std::cmp::Ordering> {
    match (&a, &b) {
        (V::Int(a), V::Int(b)) => Some(a.cmp(b)),
        (V::Uint(a), V::Uint(b)) => Some(a.cmp(b)),
        (V::Double(a), V::Double(b)) => a.partial_cmp(b),
        (V::Str(a), V::Str(b)) => Some(a.cmp(b)),
        (V::Bool(a), V::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// `container[key]` (`optional`: `container[?key]`, or after `.?`).
fn index<'a>(container: V<'a>, key: V<'a>, optional: bool) -> Option<V<'a>> {
    let (container, optional) = match container {
        V::Opt(None) => return Some(V::Opt(None)),
        V::Opt(Some(inner)) => (Rc::unwrap_or_clone(inner), true),
        other => (other, optional),
    };
    let found = lookup(container, key)?;
    match (found, optional) {
        (Some(v), false) => Some(v),
        (Some(v), true) => Some(V::Opt(Some(Rc::new(v)))),
        (None, true) => Some(V::Opt(None)),
        (None, false) => None,
    }
}

/// `container[key]`: `Some(None)` where a map has no such key or a list no
/// such index.
pub(super) fn lookup<'a>(container: V<'a>, key: V<'a>) -> Option<Option<V<'a>>> {
    if container.is_map() {
        container.map_get(key.as_str()?)
    } else {
        let list = container.as_list()?;
        match key {
            V::Int(i) => Some(usize::try_from(i).ok().and_then(|i| list.get(i))),
            _ => None,
        }
    }
}

/// `==` as the parent module defines it (cel's `Value` equality): numbers
/// by value across types, lists by element, maps by key and value, other
/// values of different types unequal. `None` for values it does not compare
/// (optionals, variables).
fn equal(a: &V<'_>, b: &V<'_>) -> Option<bool> {
    Some(match (a, b) {
        (V::Opt(_) | V::Fields(_), _) | (_, V::Opt(_) | V::Fields(_)) => return None,
        (V::Null, V::Null) => true,
        (V::Bool(a), V::Bool(b)) => a == b,
        (V::Str(a), V::Str(b)) => a == b,
        (V::Int(a), V::Int(b)) => a == b,
        (V::Uint(a), V::Uint(b)) => a == b,
        (V::Double(a), V::Double(b)) => a == b,
        (V::Int(a), V::Uint(b)) | (V::Uint(b), V::Int(a)) => {
            u64::try_from(*a).is_ok_and(|a| a == *b)
        }
        (V::Int(a), V::Double(b)) | (V::Double(b), V::Int(a)) => (*a as f64) == *b,
        (V::Uint(a), V::Double(b)) | (V::Double(b), V::Uint(a)) => (*a as f64) == *b,
        // The same JSON read twice (`list.indexOf(c)` over the list `c` is
        // from): equal, as JSON holds no NaN.
        (V::JMap(a), V::JMap(b)) if std::ptr::eq(*a, *b) => true,
        (V::JList(a), V::JList(b)) if std::ptr::eq(*a, *b) => true,
        (V::NMap(a), V::NMap(b)) if std::ptr::eq(*a, *b) => true,
        (V::NList(a), V::NList(b)) if std::ptr::eq(*a, *b) => true,
        (V::JMap(a), V::JMap(b)) => {
            if a.len() != b.len() {
                return Some(false);
            }
            for (key, x) in a.iter() {
                let Some(y) = crate::json::member(b, key) else {
                    return Some(false);
                };
                if !equal(&V::from_json(x), &V::from_json(y))? {
                    return Some(false);
                }
            }
            true
        }
        (a, b) if a.is_map() && b.is_map() => {
            if a.map_len()? != b.map_len()? {
                return Some(false);
            }
            for key in a.map_keys()? {
                let key = key.as_str()?;
                let (Some(x), Some(y)) = (a.map_get(key)?, b.map_get(key)?) else {
                    return Some(false);
                };
                if !equal(&x, &y)? {
                    return Some(false);
                }
            }
            true
        }
        (a, b) => match (a.as_list(), b.as_list()) {
            (Some(x), Some(y)) => {
                if x.len() != y.len() {
                    return Some(false);
                }
                for i in 0..x.len() {
                    if !equal(&x.get(i)?, &y.get(i)?)? {
                        return Some(false);
                    }
                }
                true
            }
            _ => false,
        },
    })
}

/// `element in container`.
fn contains(element: &V<'_>, container: &V<'_>) -> Option<bool> {
    if let Some(list) = container.as_list() {
        for i in 0..list.len() {
            if equal(element, &list.get(i)?)? {
                return Some(true);
            }
        }
        return Some(false);
    }
    if !container.is_map() {
        return None;
    }
    match element {
        V::Str(key) => Some(container.map_get(key)?.is_some()),
        // Every key of these maps is a string: no number or bool is one.
        V::Int(_) | V::Uint(_) | V::Double(_) | V::Bool(_) => Some(false),
        _ => None,
    }
}

fn size<'a>(value: &V<'_>) -> Option<V<'a>> {
    let n = match value {
        // Code points, as cel-go (and `code_point_size` in the interpreter).
        V::Str(s) => s.chars().count(),
        other => match other.as_list() {
            Some(list) => list.len(),
            None => other.map_len()?,
        },
    };
    i64::try_from(n).ok().map(V::Int)
}

fn matches<'a>(text: &str, pattern: &str) -> Option<V<'a>> {
    // Refused (out of time or budget): the interpreter says why.
    crate::budget::charge(regex_cost(pattern, text)).ok()?;
    let re = REGEX_CACHE.get_or_compile(pattern).ok()?;
    Some(V::Bool(re.is_match(text)))
}
