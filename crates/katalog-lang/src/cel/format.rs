//! The strings extension's `<string>.format(<list>)` as the kube-apiserver
//! runs it: cel-go's `ext/formatting.go` (v0.26), the formatting of the
//! strings extension below version 4, which Kubernetes enables at version 2
//! (`k8s.io/apiserver/pkg/cel/environment/base.go`) with its default locale,
//! `en_US`.
//!
//! kube-cel followed the newer formatting (cel-spec's, version 4). The
//! differences an apiserver user sees: `%f` groups thousands (`2,000.00`,
//! golang.org/x/text's number printer), `%e` writes `×10` and a superscript
//! exponent (`1.052033×10⁰³`) and ignores the precision given (cel-go
//! passes it as a width), `%d` takes only ints and uints, `%f`/`%e` only
//! doubles (and the strings `NaN`, `Infinity`, `-Infinity`), negative
//! numbers in `%x`/`%o`/`%b` are a sign and a magnitude (Go's `fmt`), and
//! `%s` prints a double as `string()` does (`1`, `1e+06`) but inside a list
//! or a map with six decimals, strings there quoted as Go quotes them.
//!
//! A call whose format string is a literal and whose argument is a list
//! literal is checked when the expression compiles, as cel-go's
//! `stringFormatValidator` does: a clause that is wrong for the type of its
//! literal argument, a bad clause, and arguments left over are compile
//! errors ([`check_literal_calls`]).

use std::sync::Arc;

use kube_cel::cel::common::ast::{Expr, LiteralValue};
use kube_cel::cel::objects::Key;
use kube_cel::cel::{FunctionContext, IdedExpr, Value};

use super::convert::cel_type_name;
use super::functions::{go_double_string, go_time_string};
use super::strict::{StrictFunction, no_overload, resolved_args};

/// `%f` and `%e` without a precision, and `%s` of a double in a list
/// (cel-go's `defaultPrecision`).
const DEFAULT_PRECISION: usize = 6;

/// A clause's verb and precision (`%.3f`: `f`, 3).
#[derive(Clone, Copy)]
struct Clause {
    verb: u8,
    precision: Option<i64>,
}

/// `parseFormatString` and `parseFormattingClause`: the text with each
/// clause replaced by `format(clause, index)` of the argument at `index`
/// (`size` of them). The first error ends it. Returns the text and how many
/// arguments the clauses took. `checking`: as cel-go's compile-time check
/// runs it.
fn interpolate(
    text: &str,
    size: usize,
    checking: bool,
    mut format: impl FnMut(Clause, usize) -> Result<String, String>,
) -> Result<(String, usize), String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        out.push_str(&text[copied..i]);
        if bytes.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            copied = i;
            continue;
        }
        // At run time the argument is fetched first; the compile-time check
        // ends the text first.
        let out_of_range = index >= size;
        if out_of_range && !checking {
            return Err(format!("index {index} out of range"));
        }
        if i + 1 >= bytes.len() {
            return Err("unexpected end of string".into());
        }
        if out_of_range {
            return Err(format!("index {index} out of range"));
        }
        let (read, clause) = parse_clause(&bytes[i + 1..])
            .map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let formatted =
            format(clause, index).map_err(|e| format!("error during formatting: {e}"))?;
        out.push_str(&formatted);
        i += 1 + read;
        copied = i;
        index += 1;
    }
    out.push_str(&text[copied..]);
    Ok((out, index))
}

/// `parseFormattingClause` and `parsePrecision`: an optional `.digits`
/// and the verb, from the byte after the `%` (there is at least one).
fn parse_clause(bytes: &[u8]) -> Result<(usize, Clause), String> {
    let mut i = 0;
    let mut precision = None;
    if bytes[0] == b'.' {
        i = 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i >= bytes.len() {
            return Err(
                "error while parsing precision: could not find end of precision specifier".into(),
            );
        }
        let digits = std::str::from_utf8(&bytes[1..i]).unwrap_or_default();
        precision = Some(digits.parse::<i64>().map_err(|_| {
            format!(
                "error while parsing precision: error while converting precision to integer: \
                 strconv.Atoi: parsing {digits:?}: {}",
                if digits.is_empty() {
                    "invalid syntax"
                } else {
                    "value out of range"
                }
            )
        })?);
    }
    let verb = bytes[i];
    if !matches!(verb, b's' | b'd' | b'f' | b'e' | b'b' | b'x' | b'X' | b'o') {
        // Go reads one byte as the verb: a non-ASCII character shows as
        // its first byte's code point.
        return Err(format!(
            "unrecognized formatting clause \"{}\"",
            char::from(verb)
        ));
    }
    Ok((i + 1, Clause { verb, precision }))
}

/// The clause applied to a value (the `stringFormatter` methods).
fn format_value(clause: Clause, value: &Value) -> Result<String, String> {
    let type_name = || cel_type_name(value);
    match clause.verb {
        b's' => format_string(value),
        b'd' => match value {
            Value::Int(i) => Ok(i.to_string()),
            Value::UInt(u) => Ok(u.to_string()),
            _ => Err(format!(
                "decimal clause can only be used on integers, was given {}",
                type_name()
            )),
        },
        b'f' | b'e' => {
            let fixed = clause.verb == b'f';
            let Some(f) = float_argument(value) else {
                return Err(if fixed {
                    format!(
                        "fixed-point clause can only be used on doubles, was given {}",
                        type_name()
                    )
                } else {
                    format!(
                        "scientific clause can only be used on doubles, was given {}",
                        type_name()
                    )
                });
            };
            Ok(if fixed {
                locale_fixed(f, clause.precision)
            } else {
                locale_scientific(f, clause.precision)
            })
        }
        b'b' => match value {
            Value::Int(i) => Ok(signed_radix(*i, |m| format!("{m:b}"))),
            Value::UInt(u) => Ok(format!("{u:b}")),
            Value::Bool(b) => Ok(if *b { "1" } else { "0" }.into()),
            _ => Err(format!(
                "only integers and bools can be formatted as binary, was given {}",
                type_name()
            )),
        },
        b'x' | b'X' => {
            let hex = match value {
                Value::String(s) => hex(s.as_bytes()),
                Value::Bytes(b) => hex(b),
                Value::Int(i) => signed_radix(*i, |m| format!("{m:x}")),
                Value::UInt(u) => format!("{u:x}"),
                _ => {
                    return Err(format!(
                        "only integers, byte buffers, and strings can be formatted as hex, was \
                         given {}",
                        type_name()
                    ));
                }
            };
            Ok(if clause.verb == b'X' {
                hex.to_ascii_uppercase()
            } else {
                hex
            })
        }
        b'o' => match value {
            Value::Int(i) => Ok(signed_radix(*i, |m| format!("{m:o}"))),
            Value::UInt(u) => Ok(format!("{u:o}")),
            _ => Err(format!(
                "octal clause can only be used on integers, was given {}",
                type_name()
            )),
        },
        _ => Err(format!(
            "unrecognized formatting clause \"{}\"",
            char::from(clause.verb)
        )),
    }
}

/// Go's `fmt` prints a negative int in base 2, 8 or 16 as `-` and the
/// magnitude (`-1a`), not in two's complement as Rust does.
fn signed_radix(i: i64, radix: impl Fn(u64) -> String) -> String {
    if i < 0 {
        format!("-{}", radix(i.unsigned_abs()))
    } else {
        radix(i.unsigned_abs())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What `%f` and `%e` take: a double, or one of the strings a double of
/// NaN or infinity is written as.
fn float_argument(value: &Value) -> Option<f64> {
    match value {
        Value::Float(f) => Some(*f),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// `%s` (`FormatString`): a value as `string()` writes it, `null` as
/// `null`, lists and maps as [`format_list`] and [`format_map`] do.
fn format_string(value: &Value) -> Result<String, String> {
    match value {
        Value::List(items) => format_list(items),
        Value::Map(map) => format_map(map),
        Value::String(s) => Ok(s.to_string()),
        Value::Int(i) => Ok(i.to_string()),
        Value::UInt(u) => Ok(u.to_string()),
        Value::Float(f) => Ok(go_double_string(*f)),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok("null".into()),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(
                "could not convert argument \"invalid UTF-8 in bytes, cannot convert to \
                           string\" to string"
                    .into(),
            ),
        },
        Value::Timestamp(_) | Value::Duration(_) => {
            go_time_string(value).ok_or_else(|| "could not convert argument to string".into())
        }
        // A type value is its name, as cel-go's `%s` writes a type.
        _ if super::type_values::name_of(value).is_some() => Ok(super::type_values::name_of(value)
            .unwrap_or_default()
            .to_owned()),
        _ => Err(format!(
            "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, \
             types, durations, and timestamps, was given {}",
            cel_type_name(value)
        )),
    }
}

/// An element of a list or a value of a map (`clauseForType` and
/// `quoteForCEL`): written as a CEL literal, strings and bytes quoted,
/// doubles with six decimals (`"NaN"`, `"+Inf"` quoted), timestamps and
/// durations as `timestamp("...")` and `duration("...")`.
fn format_element(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(go_quote(s)),
        Value::Bytes(_) => Ok(format!("b{}", go_quote(&format_string(value)?))),
        Value::Float(f) if f.is_finite() => Ok(format!("{f:.DEFAULT_PRECISION$}")),
        Value::Float(f) => Ok(go_quote(&go_double_string(*f))),
        Value::Timestamp(_) => Ok(format!("timestamp({})", go_quote(&format_string(value)?))),
        Value::Duration(_) => Ok(format!("duration({})", go_quote(&format_string(value)?))),
        Value::Int(_) | Value::UInt(_) | Value::Bool(_) | Value::Null => format_string(value),
        _ if super::type_values::name_of(value).is_some() => format_string(value),
        Value::List(items) => format_list(items),
        Value::Map(map) => format_map(map),
        _ => Err(format!(
            "no formatting function for {}",
            cel_type_name(value)
        )),
    }
}

/// `formatList`: `[a, b]`.
fn format_list(items: &[Value]) -> Result<String, String> {
    let items: Result<Vec<String>, String> = items.iter().map(format_element).collect();
    Ok(format!("[{}]", items?.join(", ")))
}

/// `formatMap`: `{key:value, ...}`, ordered by the written keys.
fn format_map(map: &kube_cel::cel::objects::Map) -> Result<String, String> {
    let mut entries = Vec::with_capacity(map.map.len());
    for (key, value) in map.map.iter() {
        let key = match key {
            Key::String(s) => go_quote(s),
            Key::Bool(b) => b.to_string(),
            Key::Int(i) => i.to_string(),
            Key::Uint(u) => u.to_string(),
        };
        entries.push((key, format_element(value)?));
    }
    entries.sort();
    let entries: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    Ok(format!("{{{}}}", entries.join(", ")))
}

/// Go's `strconv.Quote`: `"` and `\` escaped, printable characters as
/// they are, the rest as `\n`-style, `\xNN`, `\uNNNN` or `\UNNNNNNNN`
/// escapes. Printable follows Go's `unicode.IsPrint` closely (letters,
/// marks, numbers, punctuation, symbols and the ASCII space): controls,
/// other spaces, format characters and private use are escaped.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if go_printable(c) => out.push(c),
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`, without Unicode's tables: what is not a
/// control, a space other than U+0020, a format character, a private-use
/// or a non-character code point.
fn go_printable(c: char) -> bool {
    let u = u32::from(c);
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(u, 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e)
        || matches!(u, 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x206f)
        || matches!(u, 0xfeff | 0xfff9..=0xfffb | 0xfffe | 0xffff)
        || matches!(u, 0xe000..=0xf8ff | 0xf0000..)
        || u & 0xfffe == 0xfffe)
}

/// `%f` as cel-go prints it: golang.org/x/text's printer for `en_US` with
/// `%.<precision>f`, which groups the integer digits by thousands with `,`
/// and writes infinity as `∞`. Precision is taken as x/text takes it: at
/// most `int16` fraction digits, at least `uint8` of them.
fn locale_fixed(f: f64, precision: Option<i64>) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    let negative = f < 0.0;
    let sign = if negative { "-" } else { "" };
    if f.is_infinite() {
        return format!("{sign}∞");
    }
    let precision = precision.unwrap_or(DEFAULT_PRECISION as i64);
    // Go's fmt passes the precision as an int; x/text narrows it.
    let (max, min) = (precision as i16, usize::from(precision as u8));
    let digits = if max >= 0 {
        format!("{:.*}", max as usize, f.abs())
    } else {
        format!("{}", f.abs())
    };
    let (int, frac) = digits.split_once('.').unwrap_or((&digits, ""));
    let frac = frac.trim_end_matches('0');
    let frac = format!("{frac:0<min$}");
    let mut out = String::from(sign);
    out.push_str(&group_thousands(int));
    if !frac.is_empty() {
        out.push('.');
        out.push_str(&frac);
    }
    out
}

fn group_thousands(int: &str) -> String {
    let mut out = String::with_capacity(int.len() + int.len() / 3);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `%e` as cel-go prints it: it writes `%<precision>e`, so the precision
/// is a width (spaces before), and golang.org/x/text's printer for `en_US`
/// gives six decimals, `×10` and a superscript exponent of at least two
/// digits (`1.052033×10⁰³`, `-2.500000×10⁻⁰⁷`).
fn locale_scientific(f: f64, precision: Option<i64>) -> String {
    let precision = precision.unwrap_or(DEFAULT_PRECISION as i64);
    let text = if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f < 0.0 { "-∞" } else { "∞" }.to_owned()
    } else {
        let sci = format!("{:.*e}", DEFAULT_PRECISION, f.abs());
        let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mut out = String::from(if f < 0.0 { "-" } else { "" });
        out.push_str(mantissa);
        out.push_str("×10");
        if exp < 0 {
            out.push('⁻');
        }
        for d in format!("{:02}", exp.unsigned_abs()).bytes() {
            out.push(SUPERSCRIPT[usize::from(d - b'0')]);
        }
        out
    };
    // Go's fmt reads `%0e` as a flag, not a width: no padding then.
    let width = usize::try_from(precision).unwrap_or(0);
    let count = text.chars().count();
    if width > count {
        format!("{}{text}", " ".repeat(width - count))
    } else {
        text
    }
}

const SUPERSCRIPT: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];

/// `<string>.format(<list>)`.
pub(super) fn format() -> StrictFunction {
    Box::new(|ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let (Some(Value::String(text)), [Value::List(list)]) = (&ftx.this, args.as_slice()) else {
            return Err(no_overload(ftx, ftx.this.as_ref(), &args));
        };
        let (out, _) = interpolate(text, list.len(), false, |clause, index| {
            format_value(clause, &list[index])
        })
        .map_err(|e| ftx.error(e))?;
        Ok(Value::String(Arc::new(out)))
    })
}

/// The static kind of a format argument that cel-go's checker knows from
/// a literal (`None`: `dyn`, any clause takes it).
fn literal_kind(expr: &IdedExpr) -> Option<&'static str> {
    Some(match &expr.expr {
        Expr::Literal(LiteralValue::Int(_)) => "int",
        Expr::Literal(LiteralValue::UInt(_)) => "uint",
        Expr::Literal(LiteralValue::Double(_)) => "double",
        Expr::Literal(LiteralValue::String(_)) => "string",
        Expr::Literal(LiteralValue::Bytes(_)) => "bytes",
        Expr::Literal(LiteralValue::Boolean(_)) => "bool",
        Expr::Literal(LiteralValue::Null) => "null_type",
        Expr::List(_) => "list",
        Expr::Map(_) => "map",
        _ => return None,
    })
}

/// What `stringFormatChecker` accepts for a clause, by kind.
fn clause_accepts(verb: u8, kind: &str) -> bool {
    match verb {
        b's' => true,
        b'd' | b'o' => matches!(kind, "int" | "uint"),
        b'f' | b'e' => matches!(kind, "double" | "string"),
        b'b' => matches!(kind, "int" | "uint" | "bool"),
        _ => matches!(kind, "int" | "uint" | "string" | "bytes"),
    }
}

/// cel-go's `stringFormatValidator`: the first error of a `format` call
/// on a string literal with a list literal, as its compile error text.
pub(super) fn check_literal_calls(expr: &IdedExpr) -> Option<String> {
    let mut found = None;
    super::visit(expr, &mut |e| {
        let Expr::Call(call) = &e.expr else { return };
        if found.is_some() || call.func_name != "format" || call.args.len() != 1 {
            return;
        }
        let Some(Expr::Literal(LiteralValue::String(text))) =
            call.target.as_deref().map(|t| &t.expr)
        else {
            return;
        };
        let Expr::List(list) = &call.args[0].expr else {
            return;
        };
        let kinds: Vec<Option<&str>> = list.elements.iter().map(literal_kind).collect();
        let checked = interpolate(text, kinds.len(), true, |clause, index| {
            match kinds[index] {
                Some(kind) if !clause_accepts(clause.verb, kind) => {
                    // The runtime's message for a value of that kind.
                    Err(format_value(clause, &placeholder(kind))
                        .err()
                        .unwrap_or_default())
                }
                _ => Ok(String::new()),
            }
        });
        found = match checked {
            Err(e) => Some(e),
            Ok((_, used)) if used < kinds.len() => Some(format!(
                "too many arguments supplied to string.format (expected {used}, got {})",
                kinds.len()
            )),
            Ok(_) => None,
        };
    });
    found
}

/// A value of a literal kind, for its error message.
fn placeholder(kind: &str) -> Value {
    match kind {
        "int" => Value::Int(0),
        "uint" => Value::UInt(0),
        "double" => Value::Float(0.5),
        "string" => Value::String(Arc::new(String::new())),
        "bytes" => Value::Bytes(Arc::new(Vec::new())),
        "bool" => Value::Bool(false),
        "list" => Value::List(Arc::new(Vec::new())),
        "map" => Value::Map(kube_cel::cel::objects::Map {
            map: Arc::new(Default::default()),
        }),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(text: &str, args: Vec<Value>) -> Result<String, String> {
        interpolate(text, args.len(), false, |c, i| format_value(c, &args[i])).map(|(s, _)| s)
    }

    #[test]
    fn numbers_as_cel_go() {
        assert_eq!(
            fmt("%.2f", vec![Value::Float(2000.0)]),
            Ok("2,000.00".into())
        );
        assert_eq!(
            fmt("%f", vec![Value::Float(-1234567.5)]),
            Ok("-1,234,567.500000".into())
        );
        assert_eq!(
            fmt(
                "%x %o %b",
                vec![Value::Int(-26), Value::Int(-8), Value::Int(-5)]
            ),
            Ok("-1a -10 -101".into())
        );
        assert_eq!(fmt("%s", vec![Value::Float(1.0)]), Ok("1".into()));
        assert_eq!(
            fmt("%e", vec![Value::Float(1052.032911275)]),
            Ok("1.052033×10⁰³".into())
        );
        assert!(fmt("%f", vec![Value::Int(1)]).is_err());
        assert!(fmt("%d", vec![Value::Float(1.0)]).is_err());
    }

    #[test]
    fn go_quotes() {
        assert_eq!(
            go_quote("a\"b\\\n\u{1}é\u{a0}\u{1F600}"),
            "\"a\\\"b\\\\\\n\\x01é\\u00a0\u{1F600}\""
        );
    }

    proptest::proptest! {
        /// Any format text, with any value, gives a text or an error:
        /// never a panic (clauses cut anywhere, huge precisions, unicode).
        #[test]
        fn never_panics(text in "[%.0-9sdfebxXoπ ]{0,12}", n in proptest::num::i64::ANY, f in proptest::num::f64::ANY) {
            let args = vec![Value::Int(n), Value::Float(f), Value::String(Arc::new("é".into()))];
            let _ = fmt(&text, args);
        }
    }
}
