//! The functions of the apiserver's CEL environment as katalog registers
//! them for cel's interpreter: the root context every evaluation shares,
//! the strict receivers and arguments cel-go's overloads have, and the
//! functions cel 0.13 lacks or answers otherwise than cel-go (conversions,
//! timestamps in a time zone, `split`/`replace`/`indexOf` as Go's strings,
//! `&&`/`||` that keep an error pending, regexes charged to the budget and
//! cached).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use kube_cel::KubeCelExt;
use kube_cel::cel::extractors::{Arguments, This};
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Value};
use regex::Regex;

use super::convert::cel_type_name;
use super::strict::{
    STRICT, StrictFunction, call_registered, no_overload, resolved_args, strict, strict_contains,
    strict_fn,
};
use super::{
    EQ_FUNCTION, IN_FUNCTION, NE_FUNCTION, NEG_FUNCTION, REGEX_CACHE_CAPACITY,
    REGEX_CACHE_MAX_PATTERN_LEN, REGEX_DFA_SIZE_LIMIT, REGEX_SIZE_LIMIT, dyn_identity,
    heterogeneous_eq, heterogeneous_in, heterogeneous_ne,
};
use super::{format, library, macros, named_format, quantity, time, type_values, url, wkt};

// ---------------------------------------------------------------------------
// Function registry
// ---------------------------------------------------------------------------

/// The root context holding every function, shared by all evaluations.
/// Each evaluation binds its variables in a cheap child scope of it, so the
/// few hundred function registrations happen once per process.
pub(super) fn base_context() -> &'static Context<'static> {
    static BASE: LazyLock<Context<'static>> = LazyLock::new(|| {
        let mut ctx = Context::default();
        ctx.register_all();
        // Registered last so it replaces cel's built-in `matches`, which
        // compiles the pattern on every call. cel resolves functions by name
        // only, so a later registration overrides an earlier one.
        ctx.add_function("matches", cached_matches);
        // kube-cel's `find` and `findAll` compile their pattern on every
        // call, with no size limit and no charge: the same, charged, with
        // the cache.
        ctx.add_function("find", charged_find);
        ctx.add_function("findAll", charged_find_all);
        ctx.add_function(EQ_FUNCTION, heterogeneous_eq);
        ctx.add_function(NE_FUNCTION, heterogeneous_ne);
        ctx.add_function(IN_FUNCTION, heterogeneous_in);
        ctx.add_function("dyn", dyn_identity);
        ctx.add_function("contains", strict_contains);
        for (name, accepts) in STRICT {
            ctx.add_function(name, strict(name, accepts));
        }
        ctx.add_function("size", code_point_size);
        ctx.add_function("string", string_like_cel_go);
        ctx.add_function("split", split_like_cel_go);
        ctx.add_function("lists.range", lists_range);
        for accessor in TIMESTAMP_ACCESSORS {
            ctx.add_function(accessor, timestamp_accessor(accessor));
        }
        ctx.add_function("indexOf", string_index_of(false));
        ctx.add_function("lastIndexOf", string_index_of(true));
        ctx.add_function("replace", replace_like_cel_go);
        ctx.add_function(macros::ALL_STEP, logic_step(false));
        ctx.add_function(macros::EXISTS_STEP, logic_step(true));
        ctx.add_function(macros::RESULT, logic_result);
        ctx.add_function(macros::ENTRIES, entries);
        ctx.add_function(macros::MAP_INSERT, map_insert);
        ctx.add_function(macros::MAP_MERGE, map_merge);
        ctx.add_function("sum", checked_sum);
        ctx.add_function("int", int_like_cel_go);
        ctx.add_function("uint", uint_like_cel_go);
        ctx.add_function("bool", bool_like_cel_go);
        ctx.add_function("timestamp", timestamp_like_cel_go);
        ctx.add_function("duration", duration_like_cel_go);
        ctx.add_function(NEG_FUNCTION, checked_negate);
        ctx.add_function("bytes", bytes_like_cel_go);
        ctx.add_function("type", type_values::type_of);
        for name in type_values::NAMES {
            ctx.add_variable_from_value(*name, type_values::named(name));
        }
        ctx.add_function(
            wkt::MESSAGE_FUNCTION,
            Box::new(wkt::construct) as StrictFunction,
        );
        ctx.add_function(time::IN_RANGE, Box::new(time::in_range) as StrictFunction);
        ctx.add_function(library::SORT_BY, library::sort_by);
        ctx.add_function("orValue", library::or_value);
        ctx.add_function("or", library::or);
        for op in ["math.bitAnd", "math.bitOr", "math.bitXor"] {
            ctx.add_function(op, library::bit_op(op));
        }
        ctx.add_function("math.bitNot", library::bit_not);
        ctx.add_function("math.bitShiftLeft", library::bit_shift(true));
        ctx.add_function("math.bitShiftRight", library::bit_shift(false));
        ctx.add_function("math.greatest", library::extremum(true));
        ctx.add_function("math.least", library::extremum(false));
        ctx.add_function("quantity", strict_fn(quantity::quantity));
        for name in quantity::METHODS {
            ctx.add_function(name, quantity::method(name));
        }
        for name in named_format::NAMES {
            ctx.add_function(&format!("format.{name}"), named_format::constant(name));
        }
        ctx.add_function("format.named", strict_fn(named_format::named));
        ctx.add_function("validate", strict_fn(named_format::validate));
        // cel-go's formatting (strings extension version 2) and Go's
        // net/url, where kube-cel follows cel-spec's newer formatting and
        // the WHATWG URL standard (cel/format.rs, cel/url.rs).
        ctx.add_function("format", format::format());
        ctx.add_function("url", url::url());
        ctx.add_function("isURL", url::is_url());
        for (name, get) in url::ACCESSORS {
            ctx.add_function(name, url::accessor(get));
        }
        ctx
    });
    &BASE
}

/// `size(x)` and `x.size()` as cel's built-in, but a string's size is its
/// number of code points, as in cel-go (cel 0.13 counts UTF-8 bytes).
pub(super) fn code_point_size(
    ftx: &FunctionContext,
    This(this): This<Value>,
) -> Result<i64, ExecutionError> {
    let size = match this {
        Value::String(s) => s.chars().count(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        Value::Bytes(b) => b.len(),
        value => return Err(ftx.error(format!("cannot determine the size of {value:?}"))),
    };
    i64::try_from(size).map_err(|_| ftx.error("size out of range"))
}

/// `lists.range(n)`: `[0, 1, ..., n - 1]`, and `[]` for a negative `n` as
/// in cel-go (kube-cel fails there).
pub(super) fn lists_range(n: i64) -> Result<Value, ExecutionError> {
    Ok(Value::List(Arc::new(
        (0..n.max(0)).map(Value::Int).collect(),
    )))
}

/// A timestamp or a duration as cel-go's `string()` prints it: a
/// timestamp in Go's RFC 3339 with nanoseconds (trailing zeros cut) at the
/// offset it was written with (`Z` for UTC), a duration as Go's `strconv.FormatFloat(d.Seconds(), 'f', -1, 64)`
/// and `s`. `None` for any other value.
pub(super) fn go_time_string(value: &Value) -> Option<String> {
    match value {
        Value::Timestamp(t) => {
            let mut out = t.format("%Y-%m-%dT%H:%M:%S").to_string();
            let nanos = t.timestamp_subsec_nanos();
            if nanos > 0 {
                out.push('.');
                out.push_str(format!("{nanos:09}").trim_end_matches('0'));
            }
            if t.offset().local_minus_utc() == 0 {
                out.push('Z');
            } else {
                out.push_str(&t.format("%:z").to_string());
            }
            Some(out)
        }
        Value::Duration(d) => {
            // Go's Duration.Seconds(): whole seconds plus nanoseconds / 1e9;
            // Rust prints the shortest digits that read back, never with
            // an exponent, as 'f' with precision -1 does.
            #[allow(clippy::cast_precision_loss)]
            let seconds = d.num_seconds() as f64 + f64::from(d.subsec_nanos()) / 1e9;
            Some(format!("{seconds}s"))
        }
        _ => None,
    }
}

/// `timestamp(x)` as cel-go: of a string (RFC 3339, as cel and kube-cel
/// read it), of a timestamp (itself), and of an int, the Unix seconds, in
/// UTC (cel 0.13 had neither of the last two). Out of the years 1 to
/// 9999 is an error, as there.
pub(super) fn timestamp_like_cel_go(
    ftx: &FunctionContext,
    x: Value,
) -> Result<Value, ExecutionError> {
    match x {
        Value::Timestamp(_) => Ok(x),
        Value::Int(seconds) => {
            // 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
            const RANGE: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;
            let utc = chrono::FixedOffset::east_opt(0).expect("a zero offset");
            RANGE
                .contains(&seconds)
                .then(|| chrono::DateTime::from_timestamp(seconds, 0))
                .flatten()
                .map(|t| Value::Timestamp(t.with_timezone(&utc)))
                .ok_or_else(|| ftx.error("invalid timestamp argument"))
        }
        other => time::made(ftx, call_registered("timestamp", None, vec![other])?),
    }
}

/// `duration(x)` as cel-go: of a string as cel reads it, and of a
/// duration, itself (cel 0.13 failed there). Out of the int64 nanoseconds
/// is an error, as there.
pub(super) fn duration_like_cel_go(
    ftx: &FunctionContext,
    x: Value,
) -> Result<Value, ExecutionError> {
    match x {
        Value::Duration(_) => Ok(x),
        // Read as Go reads it: cel 0.13 reads one out of range as the
        // nearest in range, and the least one as one more.
        Value::String(s) if time::go_duration_nanos(&s).is_some() => {
            match time::go_duration_nanos(&s).map(i64::try_from) {
                Some(Ok(nanos)) => Ok(Value::Duration(chrono::Duration::nanoseconds(nanos))),
                _ => Err(ftx.error("invalid duration argument: out of range")),
            }
        }
        other => time::made(ftx, call_registered("duration", None, vec![other])?),
    }
}

/// `bytes(x)` as cel-go: of a string, its UTF-8 bytes, and of bytes,
/// themselves (cel 0.13 failed there).
pub(super) fn bytes_like_cel_go(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    match x {
        Value::Bytes(_) => Ok(x),
        Value::String(s) => Ok(Value::Bytes(Arc::new(s.as_bytes().to_vec()))),
        other => Err(no_overload(ftx, None, &[other])),
    }
}

/// `int(x)` as cel-go: a uint above the int maximum, a double out of the
/// int range (or NaN) are "integer overflow" (cel 0.13 saturated the
/// double), a string is read by Go's `strconv.ParseInt` (base 10, an
/// optional sign), a timestamp gives its Unix seconds, a duration its
/// nanoseconds.
pub(super) fn int_like_cel_go(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    let overflow = || ftx.error("integer overflow");
    match x {
        Value::Int(_) => Ok(x),
        Value::UInt(u) => i64::try_from(u).map(Value::Int).map_err(|_| overflow()),
        // cel-go: `v <= MinInt64 || v >= MaxInt64` (both as doubles: -2^63
        // and 2^63) overflow, else truncation toward zero.
        #[allow(clippy::cast_possible_truncation)]
        Value::Float(f) if f > -9_223_372_036_854_775_808.0 && f < 9_223_372_036_854_775_808.0 => {
            Ok(Value::Int(f.trunc() as i64))
        }
        Value::Float(_) => Err(overflow()),
        Value::String(s) => s
            .parse::<i64>()
            .map(Value::Int)
            .map_err(|_| ftx.error("type conversion error from 'string' to 'int'")),
        Value::Timestamp(t) => Ok(Value::Int(t.timestamp())),
        Value::Duration(d) => d.num_nanoseconds().map(Value::Int).ok_or_else(overflow),
        other => Err(no_overload(ftx, None, &[other])),
    }
}

/// `uint(x)` as cel-go: a negative int, a double below 0 or from 2^64 on
/// (or NaN) are "unsigned integer overflow", a string is read by Go's
/// `strconv.ParseUint` (base 10, no sign).
pub(super) fn uint_like_cel_go(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    let overflow = || ftx.error("unsigned integer overflow");
    match x {
        Value::UInt(_) => Ok(x),
        Value::Int(i) => u64::try_from(i).map(Value::UInt).map_err(|_| overflow()),
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Value::Float(f) if (0.0..18_446_744_073_709_551_616.0).contains(&f) => {
            Ok(Value::UInt(f.trunc() as u64))
        }
        Value::Float(_) => Err(overflow()),
        Value::String(s) if !s.starts_with('+') => s
            .parse::<u64>()
            .map(Value::UInt)
            .map_err(|_| ftx.error("type conversion error from 'string' to 'uint'")),
        Value::String(_) => Err(ftx.error("type conversion error from 'string' to 'uint'")),
        other => Err(no_overload(ftx, None, &[other])),
    }
}

/// `bool(x)` as cel-go: a bool, or a string Go's `strconv.ParseBool` reads
/// (`1`, `t`, `T`, `true`, `TRUE`, `True` and their false forms).
pub(super) fn bool_like_cel_go(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    match &x {
        Value::Bool(_) => Ok(x),
        Value::String(s) => match s.as_str() {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(Value::Bool(false)),
            _ => Err(ftx.error("type conversion error from 'string' to 'bool'")),
        },
        _ => Err(no_overload(ftx, None, &[x])),
    }
}

/// The accessors of a timestamp, each with an optional time zone.
pub(super) const TIMESTAMP_ACCESSORS: [&str; 10] = [
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

/// `<timestamp>.getHours([zone])` and the other [`TIMESTAMP_ACCESSORS`] as
/// cel-go computes them: in UTC, or in `zone`, a time zone name
/// (`'Australia/Sydney'`, from the bundled database as kube-apiserver
/// embeds Go's) or an offset (`'+11:00'`, `'-02:30'`, `'02:00'`); cel 0.13
/// ignored the zone. Months, days of the year and days of the month count
/// from 0 (`getDate` from 1), days of the week from Sunday. A duration's
/// accessors are cel's.
pub(super) fn timestamp_accessor(name: &'static str) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let Some(Value::Timestamp(t)) = &ftx.this else {
            return call_registered(name, ftx.this.clone(), args);
        };
        let zone = match args.as_slice() {
            [] => None,
            [Value::String(zone)] => Some(zone.as_str()),
            _ => return Err(no_overload(ftx, ftx.this.as_ref(), &args)),
        };
        let local = go_in_zone(t.timestamp(), t.timestamp_subsec_nanos(), zone)
            .map_err(|message| ftx.error(message))?;
        let value = match name {
            "getFullYear" => i64::from(local.year()),
            "getMonth" => i64::from(local.month()) - 1,
            "getDayOfYear" => i64::from(local.day_of_year()) - 1,
            "getDayOfMonth" => i64::from(local.day()) - 1,
            "getDate" => i64::from(local.day()),
            "getDayOfWeek" => i64::from(local.weekday().to_sunday_zero_offset()),
            "getHours" => i64::from(local.hour()),
            "getMinutes" => i64::from(local.minute()),
            "getSeconds" => i64::from(local.second()),
            _ => i64::from(local.subsec_nanosecond()) / 1_000_000,
        };
        Ok(Value::Int(value))
    })
}

/// The civil time of the instant `seconds` + `nanos` in `zone` as cel-go's
/// `timeZone` reads it: no zone is UTC; a name without `:` is a location
/// (`''` is UTC); else `HOURS:MINUTES`, negative when it starts with `-`.
pub(super) fn go_in_zone(
    seconds: i64,
    nanos: u32,
    zone: Option<&str>,
) -> Result<jiff::civil::DateTime, String> {
    use jiff::tz::{Offset, TimeZone};
    let instant = jiff::Timestamp::new(seconds, i32::try_from(nanos).unwrap_or(0))
        .map_err(|e| e.to_string())?;
    let tz = match zone {
        None | Some("" | "UTC") => TimeZone::UTC,
        Some(name) => match name.split_once(':') {
            None => TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))?,
            Some((hours, minutes)) => {
                let parse = |s: &str| {
                    s.parse::<i32>()
                        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: invalid syntax"))
                };
                let (hours, minutes) = (parse(hours)?, parse(minutes)?);
                let total = if name.starts_with('-') {
                    hours * 60 - minutes
                } else {
                    hours * 60 + minutes
                };
                let offset = Offset::from_seconds(total.saturating_mul(60))
                    .map_err(|_| format!("time zone offset out of range: {name}"))?;
                TimeZone::fixed(offset)
            }
        },
    };
    Ok(instant.to_zoned(tz).datetime())
}

/// `<string>.indexOf(s[, offset])` and `<string>.lastIndexOf(s[, offset])`
/// as cel-go's strings extension computes them, in code points: a
/// negative offset is "index out of range", an offset at or past the end
/// is `-1`, an empty search string is found at the offset (at the end for
/// `lastIndexOf` without one); kube-cel searched from the start or the end
/// whatever the offset. A list receiver is the lists library's `indexOf`.
pub(super) fn string_index_of(last: bool) -> StrictFunction {
    let name = if last { "lastIndexOf" } else { "indexOf" };
    Box::new(move |ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let Some(Value::String(text)) = &ftx.this else {
            return call_registered(name, ftx.this.clone(), args);
        };
        let (search, offset) = match args.as_slice() {
            [Value::String(search)] => (search, None),
            [Value::String(search), Value::Int(offset)] => (search, Some(*offset)),
            _ => return Err(no_overload(ftx, ftx.this.as_ref(), &args)),
        };
        go_index_of(text, search, offset, last)
            .map(Value::Int)
            .map_err(|message| ftx.error(message))
    })
}

/// cel-go's `indexOfOffset` / `lastIndexOf` / `lastIndexOfOffset`.
pub(super) fn go_index_of(
    text: &str,
    search: &str,
    offset: Option<i64>,
    last: bool,
) -> Result<i64, String> {
    let runes: Vec<char> = text.chars().collect();
    let sub: Vec<char> = search.chars().collect();
    let len = i64::try_from(runes.len()).unwrap_or(i64::MAX);
    let sub_len = i64::try_from(sub.len()).unwrap_or(i64::MAX);
    let offset = match (offset, last) {
        (Some(offset), _) => offset,
        (None, false) => 0,
        (None, true) if sub.is_empty() => return Ok(len),
        (None, true) if text.len() < search.len() => return Ok(-1),
        (None, true) => len - 1,
    };
    if sub.is_empty() {
        return Ok(offset);
    }
    if offset < 0 {
        return Err(format!("index out of range: {offset}"));
    }
    if offset >= len {
        return Ok(-1);
    }
    let matches_at =
        |i: i64| usize::try_from(i).is_ok_and(|i| runes.get(i..i + sub.len()) == Some(&sub[..]));
    if last {
        let start = offset.min(len - sub_len);
        Ok((0..=start).rev().find(|&i| matches_at(i)).unwrap_or(-1))
    } else {
        Ok((offset..len).find(|&i| matches_at(i)).unwrap_or(-1))
    }
}

/// `<string>.replace(old, new[, n])` as Go's `strings.Replace`: at most
/// `n` replacements, all of them when `n` is negative (kube-cel replaced
/// none), none when it is 0.
pub(super) fn replace_like_cel_go(
    ftx: &FunctionContext,
    This(this): This<Value>,
    Arguments(args): Arguments,
) -> Result<Value, ExecutionError> {
    let Value::String(text) = &this else {
        return Err(no_overload(ftx, Some(&this), &args));
    };
    match args.as_slice() {
        [Value::String(old), Value::String(new)] => {
            Ok(Value::String(Arc::new(text.replace(old.as_str(), new))))
        }
        [Value::String(old), Value::String(new), Value::Int(n)] => {
            let replaced = match usize::try_from(*n) {
                Ok(n) => text.replacen(old.as_str(), new, n),
                Err(_) => text.replace(old.as_str(), new),
            };
            Ok(Value::String(Arc::new(replaced)))
        }
        _ => Err(no_overload(ftx, Some(&this), &args)),
    }
}

/// The accumulator of an `all` or `exists` after its predicate failed on an
/// element: the first error, pending until a later element decides the
/// result (`false` for `all`, `true` for `exists`) or the loop ends and
/// [`logic_result`] raises it.
#[derive(Debug)]
pub(super) struct PendingError(ExecutionError);

impl kube_cel::cel::objects::OpaqueEq for PendingError {
    fn opaque_eq(&self, _: &dyn kube_cel::cel::objects::Opaque) -> bool {
        false
    }
}

impl kube_cel::cel::objects::Opaque for PendingError {
    fn runtime_type_name(&self) -> &str {
        "katalog.PendingError"
    }
}

pub(super) fn pending_error(value: &Value) -> Option<&ExecutionError> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<PendingError>().map(|p| &p.0),
        _ => None,
    }
}

/// The loop step of `all` ([`macros::ALL_STEP`], `decisive` false) and
/// `exists` ([`macros::EXISTS_STEP`], `decisive` true): `accu && p` /
/// `accu || p` as cel-go's logic absorbs errors. The predicate's value
/// `decisive` decides; an error (or a value that is not a bool) is kept
/// pending in the accumulator, the first one only. An error while the
/// review's budget or deadline is spent is not absorbed: the evaluation
/// ends with it.
pub(super) fn logic_step(decisive: bool) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let [accu, predicate] = ftx.args else {
            return Err(ExecutionError::InvalidArgumentCount {
                expected: 2,
                actual: ftx.args.len(),
            });
        };
        let accu = Value::resolve(accu, ftx.ptx)?;
        if accu == Value::Bool(decisive) {
            return Ok(accu);
        }
        let error = match Value::resolve(predicate, ftx.ptx) {
            Ok(Value::Bool(b)) if b == decisive => return Ok(Value::Bool(b)),
            Ok(Value::Bool(_)) => return Ok(accu),
            Ok(_) => ExecutionError::NoSuchOverload,
            Err(e) => e,
        };
        if crate::budget::charge(0).is_err() {
            return Err(error);
        }
        if pending_error(&accu).is_some() {
            return Ok(accu);
        }
        Ok(Value::Opaque(Arc::new(PendingError(error))))
    })
}

/// The result of an `all` or `exists` ([`macros::RESULT`]): its bool, or
/// the error pending in it.
pub(super) fn logic_result(ftx: &FunctionContext, accu: Value) -> Result<Value, ExecutionError> {
    match (&accu, pending_error(&accu)) {
        (Value::Bool(_), _) => Ok(accu),
        (_, Some(error)) => Err(error.clone()),
        _ => Err(no_overload(ftx, None, &[accu])),
    }
}

/// `@katalog_entries(x)` ([`macros::ENTRIES`]): the `[index, element]`
/// pairs of a list, the `[key, value]` pairs of a map by sorted key, for
/// the two-variable comprehensions.
pub(super) fn entries(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    let pair = |k: Value, v: Value| Value::List(Arc::new(vec![k, v]));
    match x {
        Value::List(items) => Ok(Value::List(Arc::new(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| pair(Value::Int(i64::try_from(i).unwrap_or(i64::MAX)), v.clone()))
                .collect(),
        ))),
        Value::Map(map) => {
            let mut keys: Vec<&Key> = map.map.keys().collect();
            keys.sort();
            Ok(Value::List(Arc::new(
                keys.into_iter()
                    .map(|k| pair(Value::from(k), map.map[k].clone()))
                    .collect(),
            )))
        }
        other => Err(no_overload(ftx, Some(&other), &[])),
    }
}

/// `@katalog_map_insert(map, key, value)` ([`macros::MAP_INSERT`]).
pub(super) fn map_insert(
    ftx: &FunctionContext,
    map: Value,
    key: Value,
    value: Value,
) -> Result<Value, ExecutionError> {
    let Value::Map(map) = map else {
        return Err(ftx.error("transformMap: not a map"));
    };
    let key: Key = key.try_into().map_err(|k: Value| {
        ftx.error(format!("unsupported map key type: {}", cel_type_name(&k)))
    })?;
    let mut entries = (*map.map).clone();
    entries.insert(key, value);
    Ok(Value::Map(Map {
        map: Arc::new(entries),
    }))
}

/// `@katalog_map_merge(map, entries)` ([`macros::MAP_MERGE`]): a key
/// already in `map` is cel-go's "insert failed: key ... already exists".
pub(super) fn map_merge(
    ftx: &FunctionContext,
    map: Value,
    add: Value,
) -> Result<Value, ExecutionError> {
    let (Value::Map(map), Value::Map(add)) = (map, &add) else {
        return Err(ftx.error(format!(
            "transformMapEntry: expected a map entry, got {}",
            cel_type_name(&add)
        )));
    };
    let mut entries = (*map.map).clone();
    for (k, v) in add.map.iter() {
        if entries.insert(k.clone(), v.clone()).is_some() {
            let key = match k {
                Key::String(s) => format!("{s:?}"),
                Key::Int(i) => i.to_string(),
                Key::Uint(u) => u.to_string(),
                Key::Bool(b) => b.to_string(),
            };
            return Err(ftx.error(format!("insert failed: key {key} already exists")));
        }
    }
    Ok(Value::Map(Map {
        map: Arc::new(entries),
    }))
}

/// `-x` of an int or a double, as cel-go: the negation of the least int
/// is "integer overflow" (cel 0.13 wraps it to itself).
pub(super) fn checked_negate(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    match x {
        Value::Int(i) => i
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| ftx.error("integer overflow")),
        Value::Float(f) => Ok(Value::Float(-f)),
        other => Err(no_overload(ftx, None, &[other])),
    }
}

/// `<list>.sum()` of the Kubernetes lists library as cel-go computes it: the
/// elements added in order with the `+` of their type, so ints and uints
/// that overflow are "integer overflow" / "unsigned integer overflow"
/// (kube-cel's wraps silently in a release build), durations add, and
/// mixed or other types have no overload. An empty list is `0`.
pub(super) fn checked_sum(
    ftx: &FunctionContext,
    This(this): This<Arc<Vec<Value>>>,
) -> Result<Value, ExecutionError> {
    let Some(first) = this.first() else {
        return Ok(Value::Int(0));
    };
    let mut total = first.clone();
    if !matches!(
        total,
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Duration(_)
    ) {
        return Err(no_overload(ftx, Some(&Value::List(this.clone())), &[]));
    }
    for item in &this[1..] {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => a
                .checked_add(*b)
                .map(Value::Int)
                .ok_or_else(|| ftx.error("integer overflow"))?,
            (Value::UInt(a), Value::UInt(b)) => a
                .checked_add(*b)
                .map(Value::UInt)
                .ok_or_else(|| ftx.error("unsigned integer overflow"))?,
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => a
                .checked_add(b)
                .filter(time::duration_in_range)
                .map(Value::Duration)
                .ok_or_else(|| ftx.error("integer overflow"))?,
            _ => return Err(no_overload(ftx, Some(&Value::List(this.clone())), &[])),
        };
    }
    Ok(total)
}

/// `<string>.split(<string>[, <int>])` as Go's `strings.SplitN` in cel-go:
/// at most `n` parts (all when `n` is negative or absent, none when 0), and
/// an empty separator splits into code points (`''.split('')` is `[]`),
/// where kube-cel's (Rust's `str::split`) adds an empty part at each end.
pub(super) fn split_like_cel_go(
    This(this): This<Arc<String>>,
    Arguments(args): Arguments,
) -> Result<Value, ExecutionError> {
    let fail = |msg: &str| Err(ExecutionError::function_error("split", msg));
    if args.len() > 2 {
        return fail("no such overload: split takes a separator and a limit at most");
    }
    let Some(Value::String(separator)) = args.first() else {
        return fail("expected a string separator");
    };
    let limit = match args.get(1) {
        None => usize::MAX,
        Some(Value::Int(n)) => usize::try_from(*n).unwrap_or(usize::MAX),
        Some(_) => return fail("expected an int limit"),
    };
    let parts = split_n(&this, separator, limit);
    Ok(Value::List(Arc::new(
        parts
            .into_iter()
            .map(|p| Value::String(Arc::new(p.to_owned())))
            .collect(),
    )))
}

/// Go's `strings.SplitN(text, separator, limit)`, `usize::MAX` for all.
pub(super) fn split_n<'t>(text: &'t str, separator: &str, limit: usize) -> Vec<&'t str> {
    if limit == 0 {
        return Vec::new();
    }
    if !separator.is_empty() {
        return text.splitn(limit, separator).collect();
    }
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if parts.len() + 1 == limit {
            parts.push(rest);
            break;
        }
        let first = rest.chars().next().map_or(rest.len(), char::len_utf8);
        parts.push(&rest[..first]);
        rest = &rest[first..];
    }
    parts
}

/// `string(x)` as kube-cel's, and also of a bool (`'true'`), with a
/// double printed as cel-go prints it (see [`go_double_string`]), a
/// timestamp in RFC 3339 with the fraction's trailing zeros cut
/// (`2009-02-13T23:31:30.12Z`; kube-cel gave `+00:00`), a duration in
/// seconds (`1000000s`, `1.5s`; kube-cel gave `277h46m40s`), and bytes
/// that are not UTF-8 an error (kube-cel replaced them with U+FFFD).
pub(super) fn string_like_cel_go(
    ftx: &FunctionContext,
    This(this): This<Value>,
) -> Result<Value, ExecutionError> {
    match this {
        Value::String(_) => Ok(this),
        Value::Timestamp(_) | Value::Duration(_) => Ok(Value::String(Arc::new(
            go_time_string(&this).unwrap_or_default(),
        ))),
        Value::Bytes(b) => match std::str::from_utf8(&b) {
            Ok(s) => Ok(Value::String(Arc::new(s.to_owned()))),
            Err(_) => Err(ftx.error("invalid UTF-8 in bytes, cannot convert to string")),
        },
        Value::Int(i) => Ok(Value::String(Arc::new(i.to_string()))),
        Value::UInt(u) => Ok(Value::String(Arc::new(u.to_string()))),
        Value::Bool(b) => Ok(Value::String(Arc::new(b.to_string()))),
        Value::Float(f) => Ok(Value::String(Arc::new(go_double_string(f)))),
        other => kube_string(other),
    }
}

/// kube-cel's own `string(x)` (strings, numbers, bytes, timestamps,
/// durations, and its IP and CIDR values), which the registration above
/// replaces: cel registers functions by name only, so it is reached through
/// a context of its own.
pub(super) fn kube_string(value: Value) -> Result<Value, ExecutionError> {
    static KUBE: LazyLock<(Context<'static>, kube_cel::cel::Program)> = LazyLock::new(|| {
        let mut ctx = Context::default();
        ctx.register_all();
        let program = kube_cel::cel::Program::compile("string(x)").expect("parses");
        (ctx, program)
    });
    let mut ctx = KUBE.0.new_inner_scope();
    ctx.add_variable_from_value("x", value);
    KUBE.1.execute(&ctx)
}

/// A double as Go's `strconv.FormatFloat(f, 'g', -1, 64)` prints it, which
/// cel-go's `string()` uses: the shortest digits that read back as `f`, in
/// exponent form when the decimal exponent is below -4 or 6 and above
/// (`1e-10`, `1e+06`, `9.223372036854776e+18`), else in plain decimal
/// (`100000`, `0.0001`, `1.5`).
pub(super) fn go_double_string(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    // Rust's `{:e}` gives the same shortest digits: `d.ddde[-]x`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

/// `<string>.matches(<string>) -> bool` and `matches(<string>, <string>)`:
/// RE2-style unanchored search, as cel's built-in, with a regex cache.
pub(super) fn cached_matches(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    pattern: Arc<String>,
) -> Result<bool, ExecutionError> {
    crate::budget::charge(regex_cost(&pattern, &this))
        .map_err(|refused| ftx.error(format!("matches(): {refused}")))?;
    match REGEX_CACHE.get_or_compile(&pattern) {
        Ok(re) => Ok(re.is_match(&this)),
        Err(err) => Err(ftx.error(format!(
            "'{}' not a valid regex:\n{}",
            clipped(&pattern),
            clipped(&err.to_string())
        ))),
    }
}

/// `text` as an error message shows it: its first 200 bytes, and how long
/// it is when longer (a pattern from the object may be megabytes, and the
/// message goes to the client, the logs and `/katalog`).
pub(super) fn clipped(text: &str) -> Cow<'_, str> {
    const SHOWN: usize = 200;
    if text.len() <= SHOWN {
        return Cow::Borrowed(text);
    }
    let mut end = SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}... ({} bytes)", &text[..end], text.len()))
}

/// The cost of one regex search (`matches`, `find`, `findAll`), charged
/// before it runs ([`crate::budget::charge`]): one unit per byte of its
/// text (a search is linear in it) and of its pattern (compiling is linear
/// in its length), ten per byte of a pattern too long for the cache, which
/// is compiled again on every call. The same whether the pattern was
/// compiled before or not, so that an answer does not depend on the cache.
pub(super) fn regex_cost(pattern: &str, text: &str) -> u64 {
    let per_byte = if pattern.len() > REGEX_CACHE_MAX_PATTERN_LEN {
        10
    } else {
        1
    };
    let units = pattern
        .len()
        .saturating_mul(per_byte)
        .saturating_add(text.len());
    u64::try_from(units).unwrap_or(u64::MAX)
}

/// The compiled `pattern` for a search of `text` by `function`, charged
/// first ([`regex_cost`]).
pub(super) fn charged_regex(
    function: &str,
    text: &str,
    pattern: &str,
) -> Result<Regex, ExecutionError> {
    crate::budget::charge(regex_cost(pattern, text)).map_err(|refused| {
        ExecutionError::function_error(function, format!("{function}(): {refused}"))
    })?;
    REGEX_CACHE.get_or_compile(pattern).map_err(|e| {
        let e = e.to_string();
        ExecutionError::function_error(function, format!("invalid regex: {}", clipped(&e)))
    })
}

/// `<string>.find(<string>) -> <string>`: the first match, or `''`
/// (kube-cel's, charged and cached).
pub(super) fn charged_find(
    This(this): This<Arc<String>>,
    pattern: Arc<String>,
) -> Result<Value, ExecutionError> {
    let re = charged_regex("find", &this, &pattern)?;
    let found = re
        .find(&this)
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    Ok(Value::String(Arc::new(found)))
}

/// `<string>.findAll(<string>[, <int>]) -> list<string>`: every match, or
/// the first n (kube-cel's, charged and cached).
pub(super) fn charged_find_all(
    This(this): This<Arc<String>>,
    kube_cel::cel::extractors::Arguments(args): kube_cel::cel::extractors::Arguments,
) -> Result<Value, ExecutionError> {
    let Some(Value::String(pattern)) = args.first() else {
        return Err(ExecutionError::function_error(
            "findAll",
            "expected string pattern",
        ));
    };
    let re = charged_regex("findAll", &this, pattern)?;
    let limit = match args.get(1) {
        Some(Value::Int(n)) => usize::try_from(*n).ok(),
        _ => None,
    };
    let found: Vec<Value> = re
        .find_iter(&this)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Value::String(Arc::new(m.as_str().to_owned())))
        .collect();
    Ok(Value::List(Arc::new(found)))
}

pub(super) static REGEX_CACHE: LazyLock<RegexCache> =
    LazyLock::new(|| RegexCache::new(REGEX_CACHE_CAPACITY, REGEX_CACHE_MAX_PATTERN_LEN));

/// A small, bounded, thread-safe cache of compiled regexes keyed by pattern.
pub(super) struct RegexCache {
    capacity: usize,
    max_pattern_len: usize,
    entries: Mutex<HashMap<String, Regex>>,
}

impl RegexCache {
    pub(super) fn new(capacity: usize, max_pattern_len: usize) -> Self {
        RegexCache {
            capacity,
            max_pattern_len,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, Regex>> {
        // The map only ever holds complete entries, so a panic elsewhere
        // while the lock was held cannot leave it inconsistent.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn get_or_compile(&self, pattern: &str) -> Result<Regex, regex::Error> {
        if let Some(re) = self.lock().get(pattern) {
            // `Regex` clones share the compiled program.
            return Ok(re.clone());
        }
        // Compile outside the lock so a slow pattern does not block others.
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
            .build()?;
        if pattern.len() <= self.max_pattern_len && self.capacity > 0 {
            let mut entries = self.lock();
            if entries.len() >= self.capacity && !entries.contains_key(pattern) {
                // Evict an arbitrary entry: cheap, and good enough for the
                // expected workload (a handful of literal patterns).
                if let Some(victim) = entries.keys().next().cloned() {
                    entries.remove(&victim);
                }
            }
            entries.insert(pattern.to_owned(), re.clone());
        }
        Ok(re)
    }

    #[cfg(test)]
    pub(super) fn contains(&self, pattern: &str) -> bool {
        self.lock().contains_key(pattern)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}
