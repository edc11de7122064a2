//! Reading YAML the way kubectl does: the one place every caller (Katalogs,
//! test suites, the CLI's objects) turns YAML text into located nodes.
//!
//! kubectl converts YAML to JSON with `sigs.k8s.io/yaml`, which resolves
//! plain (unquoted, untagged) scalars by the rules of its goyaml.v2 fork
//! (YAML 1.1): `0644` is octal 420, `yes`/`on`/`y` are `true`, `1_000` is
//! 1000, `12:30` and `2001-12-14` stay strings, and map keys that are not
//! strings become their text (`true`, `1`). Quoted, block and tagged scalars
//! keep their text.
//!
//! Most text is read in one pass ([`one_pass`]): the tree is built from
//! the parser's events, each plain scalar resolved as it is read. Anything
//! that reader is not sure of (errors, tags, merge keys, alias storms) is
//! read the careful way: serde-saphyr builds the tree (anchors, aliases,
//! merge keys, limits, errors with positions), the style of each scalar
//! comes from a second parse, and plain scalars are then resolved here.
//! Size alone never sends text to the careful path: both readers stop at
//! the same [`Limits`], the one-pass reader with its own located error.
//!
//! Comments are skipped by the parser (never buffered), so a block of any
//! number of comment lines reads like any other.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Number;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

use crate::front::source::{Node, NodeKind};

mod one_pass;

/// Why YAML text could not be read as JSON-compatible documents.
#[derive(Debug)]
pub enum Error {
    /// The text is not YAML (or breaks a parser limit).
    Syntax(Box<serde_saphyr::Error>),
    /// The YAML has a value JSON cannot hold (`.inf`, `.nan`, a null key).
    NotJson {
        message: String,
        line: usize,
        column: usize,
    },
    /// The text is larger than its [`Limits`] allow; the message names the
    /// limit and how to raise it.
    Limit {
        message: String,
        line: usize,
        column: usize,
    },
}

/// How much YAML one read may hold. A local file (a Katalog, a CRD file,
/// the objects given to the CLI) is not hostile: its limits
/// ([`Limits::files`]) fit the largest real inputs, and the number of
/// nodes can be raised with `--yaml-max-nodes` (`KATALOG_YAML_MAX_NODES`).
/// Anchors and aliases keep serde-saphyr's budget in every case (a few
/// lines can expand into billions of nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Scalars, lists and maps (keys included), over every document.
    pub nodes: usize,
    /// Lists and maps nested in one another.
    pub depth: usize,
}

/// The nodes a local file may hold unless raised: about 17,000 Pods, or a
/// CRD of about five million lines.
pub const FILE_MAX_NODES: usize = 10_000_000;

/// The nesting a local file may have: serde-saphyr's default, about 28
/// levels of fields in a CRD's schema. The careful path's recursion (a
/// deserializer frame per level) must fit a 2 MiB thread stack at this
/// depth, so it is not raised.
pub const FILE_MAX_DEPTH: usize = 64;

static FILE_NODES: AtomicUsize = AtomicUsize::new(FILE_MAX_NODES);

impl Limits {
    /// The limits of a local file: [`FILE_MAX_NODES`] (or what
    /// [`Limits::set_file_max_nodes`] set for this process) and
    /// [`FILE_MAX_DEPTH`].
    pub fn files() -> Limits {
        Limits {
            nodes: FILE_NODES.load(Ordering::Relaxed),
            depth: FILE_MAX_DEPTH,
        }
    }

    /// Raise (or lower) the nodes every later [`Limits::files`] allows in
    /// this process: what `--yaml-max-nodes` sets.
    pub fn set_file_max_nodes(nodes: usize) {
        FILE_NODES.store(nodes.max(1), Ordering::Relaxed);
    }

    /// The serde-saphyr budget of the careful path for these limits.
    fn budget(&self) -> serde_saphyr::Budget {
        let mut budget = serde_saphyr::Budget::default();
        // An event is a node, the end of one, or a document's start or end
        // (at most two per node, or two for an empty document); the
        // nodes bound the documents and the text's length the scalars.
        budget.max_events = self.nodes.saturating_mul(4).saturating_add(1024);
        budget.max_documents = self.nodes.max(budget.max_documents);
        budget.max_nodes = self.nodes;
        budget.max_depth = self.depth;
        budget.max_total_scalar_bytes = usize::MAX;
        budget.max_reader_input_bytes = None;
        budget
    }

    /// serde-saphyr's error, its budget breach of these limits said as
    /// [`Limits::breached`] says it.
    fn named(&self, e: serde_saphyr::Error) -> Error {
        use serde_saphyr::budget::BudgetBreach;
        let mut inner = &e;
        while let serde_saphyr::Error::WithSnippet { error, .. }
        | serde_saphyr::Error::AliasError { error, .. } = inner
        {
            inner = error;
        }
        let (breach, location) = match inner {
            serde_saphyr::Error::Budget {
                breach: BudgetBreach::Nodes { .. },
                location,
            } => (Breach::Nodes, location),
            serde_saphyr::Error::Budget {
                breach: BudgetBreach::Depth { .. },
                location,
            } => (Breach::Depth, location),
            _ => return Error::Syntax(Box::new(e)),
        };
        self.breached(breach, location.line() as usize, location.column() as usize)
    }

    /// The located error for a count past one of these limits.
    fn breached(&self, what: Breach, line: usize, column: usize) -> Error {
        let message = match what {
            Breach::Nodes => format!(
                "the YAML holds more than {} nodes (the limit for a file, counting scalars, lists and maps); \
                 raise it with --yaml-max-nodes or KATALOG_YAML_MAX_NODES",
                self.nodes
            ),
            Breach::Depth => format!(
                "the YAML nests lists and maps more than {} levels deep (the limit for a file)",
                self.depth
            ),
        };
        Error::Limit {
            message,
            line,
            column,
        }
    }
}

/// Which of the [`Limits`] a text went past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Breach {
    Nodes,
    Depth,
}

impl Error {
    /// The message without a position or a snippet.
    pub fn message(&self) -> String {
        match self {
            Error::Syntax(e) => {
                let s = e.without_snippet().to_string();
                let line = s.lines().next().unwrap_or(&s).trim();
                match line.rfind(" at line ") {
                    Some(i) => line[..i].to_string(),
                    None => line.to_string(),
                }
            }
            Error::NotJson { message, .. } | Error::Limit { message, .. } => message.clone(),
        }
    }

    /// 1-based line and column, when known.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            Error::Syntax(e) => e
                .location()
                .map(|l| (l.line() as usize, l.column() as usize)),
            Error::NotJson { line, column, .. } | Error::Limit { line, column, .. } => {
                Some((*line, *column))
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax(e) => write!(f, "{e}"),
            Error::NotJson {
                message,
                line,
                column,
            }
            | Error::Limit {
                message,
                line,
                column,
            } => write!(f, "line {line} column {column}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// Every document of a YAML stream (a local file: [`Limits::files`]),
/// scalars resolved as kubectl does.
pub fn read_documents(text: &str) -> Result<Vec<Node>, Error> {
    read_documents_with(text, &Limits::files())
}

/// Every document of a YAML stream within `limits`, scalars resolved as
/// kubectl does.
pub fn read_documents_with(text: &str, limits: &Limits) -> Result<Vec<Node>, Error> {
    match one_pass::read(text, limits) {
        Some(docs) => docs,
        None => read_documents_carefully(text, limits),
    }
}

/// [`read_documents`] by serde-saphyr's tree and a second parse for the
/// scalars' styles: slower, but every error is serde-saphyr's.
fn read_documents_carefully(text: &str, limits: &Limits) -> Result<Vec<Node>, Error> {
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(limits.budget());
    // Comments are not kept: a long block of them must not fill the
    // parser's look-ahead buffer.
    options.emit_comments = false;
    // Hand plain scalars over as text where serde-saphyr would otherwise
    // decide differently from goyaml.v2 or fail; they are resolved below.
    options.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::AsString;
    options.leading_zero_numbers_as_strings = true;
    options.underscored_numbers_as_strings = true;
    let mut docs: Vec<Node> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|e| limits.named(e))?;
    let plain = plain_scalars(text);
    for doc in &mut docs {
        resolve_node(doc, &plain)?;
    }
    Ok(docs)
}

/// The byte range (offset, length) of every plain, untagged scalar → its
/// value.
fn plain_scalars(text: &str) -> HashMap<(usize, usize), String> {
    let mut out = HashMap::new();
    // The text already parsed once; a failure here only leaves scalars as
    // serde-saphyr resolved them.
    let mut options = serde_saphyr::granit_parser::Options::default();
    options.emit_comments = false;
    for item in Parser::new_from_str_with_options(text, options) {
        let Ok((event, span)) = item else { break };
        if let Event::Scalar(value, ScalarStyle::Plain, _, None) = event
            && let (Some(start), Some(end)) = (span.start.byte_offset(), span.end.byte_offset())
        {
            out.insert((start, end.saturating_sub(start)), value.into_owned());
        }
    }
    out
}

fn resolve_node(node: &mut Node, plain: &HashMap<(usize, usize), String>) -> Result<(), Error> {
    match &mut node.kind {
        NodeKind::Seq(items) => {
            for item in items {
                resolve_node(item, plain)?;
            }
        }
        NodeKind::Map(entries) => {
            for (key, value) in entries {
                let text = match key.defined_at.and_then(|r| plain.get(&r)) {
                    Some(text) => plain_key(text, key)?,
                    None => key_string(key)?,
                };
                key.kind = NodeKind::String(text);
                resolve_node(value, plain)?;
            }
        }
        _ => {
            let Some(text) = node.defined_at.and_then(|r| plain.get(&r)) else {
                return Ok(());
            };
            node.kind = match resolve_plain(text) {
                Plain::Null => NodeKind::Null,
                Plain::Bool(b) => NodeKind::Bool(b),
                Plain::Int(i) => NodeKind::Number(i.into()),
                Plain::Uint(u) => NodeKind::Number(u.into()),
                Plain::Float(f) => match json_number(f) {
                    Some(n) => NodeKind::Number(n),
                    None => {
                        return Err(Error::NotJson {
                            message: format!(
                                "`{text}` is not a number JSON can hold; quote it for a string"
                            ),
                            line: node.line,
                            column: node.column,
                        });
                    }
                },
                Plain::Str => NodeKind::String(text.clone()),
            };
        }
    }
    Ok(())
}

/// A plain map key as sigs.k8s.io/yaml writes it into JSON.
fn plain_key(text: &str, key: &Node) -> Result<String, Error> {
    Ok(match resolve_plain(text) {
        Plain::Null => {
            return Err(Error::NotJson {
                message: "a map key may not be null; quote it for a string".into(),
                line: key.line,
                column: key.column,
            });
        }
        Plain::Bool(b) => b.to_string(),
        Plain::Int(i) => i.to_string(),
        Plain::Uint(u) => u.to_string(),
        Plain::Float(f) => go_format_g32(f),
        Plain::Str => text.to_string(),
    })
}

/// A quoted or tagged map key as sigs.k8s.io/yaml writes it into JSON.
fn key_string(key: &Node) -> Result<String, Error> {
    Ok(match &key.kind {
        NodeKind::String(s) => s.clone(),
        NodeKind::Bool(b) => b.to_string(),
        NodeKind::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_format_g32(f),
            _ => n.to_string(),
        },
        NodeKind::Null => {
            return Err(Error::NotJson {
                message: "a map key may not be null; quote it for a string".into(),
                line: key.line,
                column: key.column,
            });
        }
        NodeKind::Seq(_) | NodeKind::Map(_) => {
            return Err(Error::NotJson {
                message: "a map key must be a scalar".into(),
                line: key.line,
                column: key.column,
            });
        }
    })
}

/// What a plain scalar means to goyaml.v2 (`resolve.go`).
#[derive(Clone, Debug, PartialEq)]
pub enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str,
}

/// Resolve a plain scalar by goyaml.v2's table: a first-character hint,
/// then the fixed spellings, then Go's `ParseInt(s, 0, 64)` (sign,
/// `0x`/`0o`/`0b` prefixes, a leading `0` for octal, with every `_`
/// removed), `ParseUint`, and a YAML-style float. Anything else, timestamps
/// and `12:30` included, is a string.
pub fn resolve_plain(s: &str) -> Plain {
    let hint = match s.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => return Plain::Str,
    };
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Plain::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Plain::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Plain::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match hint {
        b'.' => match decimal_float(s) {
            Some(f) => Plain::Float(f),
            None => Plain::Str,
        },
        b'D' | b'S' => {
            let plain = s.replace('_', "");
            if let Some(i) = go_parse_int(&plain) {
                return Plain::Int(i);
            }
            if let Some(u) = go_parse_uint(&plain) {
                return Plain::Uint(u);
            }
            match decimal_float(&plain) {
                Some(f) => Plain::Float(f),
                None => Plain::Str,
            }
        }
        _ => Plain::Str,
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, parsed; `None`
/// when it does not match or overflows (Go's ParseFloat fails then).
fn decimal_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return None;
        }
    } else {
        if digits(&mut i) == 0 {
            return None;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    f.is_finite().then_some(f)
}

/// The magnitude and base of Go's base-0 integer syntax (no sign).
fn go_digits(s: &str) -> Option<(u32, &str)> {
    let (radix, digits) = match s.as_bytes() {
        [b'0', b'x' | b'X', ..] => (16, &s[2..]),
        [b'0', b'o' | b'O', ..] => (8, &s[2..]),
        [b'0', b'b' | b'B', ..] => (2, &s[2..]),
        [b'0', _, ..] => (8, &s[1..]),
        _ => (10, s),
    };
    let ok = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
    ok.then_some((radix, digits))
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = go_digits(rest)?;
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Go's `strconv.ParseUint(s, 0, 64)` (no sign allowed).
fn go_parse_uint(s: &str) -> Option<u64> {
    let (radix, digits) = go_digits(s)?;
    u64::from_str_radix(digits, radix).ok()
}

/// The JSON number Go's encoder writes for a float64: integral values
/// below 1e21 are written without a fraction (`1e3` → `1000`). `None` for
/// NaN and infinities, which JSON cannot hold.
fn json_number(f: f64) -> Option<Number> {
    if !f.is_finite() {
        return None;
    }
    if f.fract() == 0.0 && f.abs() < 1e21 && !(f == 0.0 && f.is_sign_negative()) {
        if f >= i64::MIN as f64 && f < i64::MAX as f64 {
            return Some((f as i64).into());
        }
        if f >= 0.0 && f < u64::MAX as f64 {
            return Some((f as u64).into());
        }
    }
    Number::from_f64(f)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`, which sigs.k8s.io/yaml uses
/// for float map keys.
fn go_format_g32(f: f64) -> String {
    let f = f as f32;
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Shortest digits and decimal exponent, from Rust's `{:e}` (also shortest).
    let e = format!("{:e}", f.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let n = digits.len() as i32;
    let body = if exp < 0 {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else if exp + 1 >= n {
        format!("{digits}{}", "0".repeat((exp + 1 - n) as usize))
    } else {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

/// Every YAML file of the repository (not under `target` or a hidden
/// directory), sorted: the corpus the readers' differential tests run on.
#[cfg(test)]
pub(crate) fn repository_yaml_files() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        &mut files,
    );
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn value_of(scalar: &str) -> Result<Value, String> {
        let docs = read_documents(&format!("v: {scalar}\n")).map_err(|e| e.message())?;
        Ok(docs[0].to_value()["v"].clone())
    }

    /// Each plain scalar and the JSON kubectl sends for it (goyaml.v2 via
    /// sigs.k8s.io/yaml, then encoding/json).
    #[test]
    fn scalars_mean_what_kubectl_sends() {
        let cases: &[(&str, Value)] = &[
            ("0644", json!(420)),
            ("\"0644\"", json!("0644")),
            ("'0644'", json!("0644")),
            ("!!str 0644", json!("0644")),
            ("0o644", json!(420)),
            ("-0644", json!(-420)),
            ("08", json!(8)),
            ("0", json!(0)),
            ("0x1F", json!(31)),
            ("0X1f", json!(31)),
            ("0b101", json!(5)),
            ("-0b101", json!(-5)),
            ("1_000", json!(1000)),
            ("0x_1F", json!(31)),
            ("_1", json!("_1")),
            ("yes", json!(true)),
            ("\"yes\"", json!("yes")),
            ("Yes", json!(true)),
            ("YES", json!(true)),
            ("yEs", json!("yEs")),
            ("on", json!(true)),
            ("On", json!(true)),
            ("off", json!(false)),
            ("No", json!(false)),
            ("y", json!(true)),
            ("n", json!(false)),
            ("True", json!(true)),
            ("~", Value::Null),
            ("null", Value::Null),
            ("Null", Value::Null),
            ("", Value::Null),
            ("1e3", json!(1000)),
            ("1.5e3", json!(1500)),
            (".5", json!(0.5)),
            ("+.5", json!(0.5)),
            ("-.5", json!(-0.5)),
            ("+12", json!(12)),
            ("-0", json!(0)),
            ("0.1", json!(0.1)),
            ("1.", json!(1)),
            ("1e999", json!("1e999")),
            ("99999999999999999999", json!(1e20)),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("-9223372036854775808", json!(i64::MIN)),
            ("2001-12-14", json!("2001-12-14")),
            ("2001-12-14T21:59:43.10Z", json!("2001-12-14T21:59:43.10Z")),
            ("12:30", json!("12:30")),
            ("190:20:30", json!("190:20:30")),
            ("1.2.3", json!("1.2.3")),
            ("0x", json!("0x")),
            ("|\n  0644", json!("0644\n")),
            ("|-\n  yes", json!("yes")),
            ("plain\n  0644", json!("plain 0644")),
            ("[0644, '0644', yes]", json!([420, "0644", true])),
        ];
        let mut wrong = Vec::new();
        for (scalar, want) in cases {
            match value_of(scalar) {
                Ok(got) if got == *want => {}
                got => wrong.push(format!("{scalar:?}: expected {want}, got {got:?}")),
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn anchors_resolve_like_their_definition() {
        let docs = read_documents("a: &m 0644\nb: *m\nc: &q '0644'\nd: *q\n").unwrap();
        assert_eq!(
            docs[0].to_value(),
            json!({"a": 420, "b": 420, "c": "0644", "d": "0644"})
        );
        let docs =
            read_documents("base: &b {mode: 0644, on: off}\nm: {<<: *b, x: 0x10}\n").unwrap();
        assert_eq!(
            docs[0].to_value()["m"],
            json!({"mode": 420, "true": false, "x": 16})
        );
        let docs = read_documents("a: 0644\n---\nb: 'yes'\nc: yes\n").unwrap();
        let values: Vec<Value> = docs.iter().map(Node::to_value).collect();
        assert_eq!(values, [json!({"a": 420}), json!({"b": "yes", "c": true})]);
    }

    #[test]
    fn map_keys_become_strings_as_sigs_k8s_io_yaml_writes_them() {
        let docs =
            read_documents("yes: a\n1: b\n0x10: c\n1.5: d\n'on': e\nfalse: f\n1e3: g\n").unwrap();
        assert_eq!(
            docs[0].to_value(),
            json!({"true": "a", "1": "b", "16": "c", "1.5": "d", "on": "e", "false": "f", "1000": "g"})
        );
        let e = read_documents("~: a\n").unwrap_err();
        assert_eq!(
            (e.message().as_str(), e.position()),
            (
                "a map key may not be null; quote it for a string",
                Some((1, 1))
            )
        );
    }

    #[test]
    fn infinities_and_nan_are_errors_with_a_position() {
        for s in [".inf", "-.Inf", ".nan", "+.INF"] {
            let e = read_documents(&format!("a: 1\nb: {s}\n")).unwrap_err();
            assert_eq!(
                (e.message(), e.position()),
                (
                    format!("`{s}` is not a number JSON can hold; quote it for a string"),
                    Some((2, 4))
                )
            );
        }
        assert_eq!(value_of("'.inf'").unwrap(), json!(".inf"));
    }

    #[test]
    fn go_g_formatting_of_float_keys() {
        for (f, want) in [
            (1.5, "1.5"),
            (1000.0, "1000"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
        ] {
            assert_eq!(go_format_g32(f), want, "{f}");
        }
    }
}
