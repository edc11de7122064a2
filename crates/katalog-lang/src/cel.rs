//! A small wrapper around the [`cel`](kube_cel::cel) interpreter (cel 0.13, as
//! re-exported by `kube-cel`) for the Katalog language.
//!
//! * Expressions are parsed once ([`CelProgram::compile`]) and evaluated many
//!   times ([`CelProgram::eval`], [`CelProgram::eval_bool`]).
//! * Every evaluation sees the standard CEL functions plus all Kubernetes CEL
//!   extension libraries compiled into `kube-cel` (strings, lists, sets, regex,
//!   urls, ip, semver, format, quantity, jsonpatch, named formats, math,
//!   encoders), registered through [`KubeCelExt::register_all`].
//! * `matches()` is overridden with a version that caches compiled regexes.
//! * Variables and results cross the boundary as `serde_json::Value`s.
//! * Evaluation never panics: known panicking constructs are rejected at
//!   compile time, expression and value nesting is bounded (stack overflows
//!   abort the process, they cannot be caught), and remaining panics inside
//!   cel / kube-cel become [`CelError::Eval`] (see `run_guarded`).
//!
//! # Deviations from plain cel 0.13, towards the CEL spec / cel-go
//!
//! * Optional syntax (`x.?f`, `x[?k]`, `[?x]`, `{?'k': v}`) is enabled, as in
//!   Kubernetes, and `x.?f` on a map without `f` yields `optional.none()`
//!   (cel 0.13 errors). Selections after `.?` are optional too.
//! * `==`, `!=` and `in` compare numbers across `int`, `uint` and `double`
//!   (`1 == 1.0`), which cel 0.13 treats as unequal.
//! * `dyn(x)` is accepted (identity). `type(x)` is not available, and
//!   [`CelProgram::compile`] refuses a call of any function the
//!   interpreter does not have (`FUNCTION_NAMES`).
//! * A function given a receiver or an argument of a type cel-go has no
//!   overload for fails ("no such overload: null_type.contains(string)"),
//!   where cel 0.13 and kube-cel answered (`null.contains('*')` was
//!   `false`, `null.max()` was `null`): `contains` is replaced, and the
//!   calls of `STRICT` are checked before they run.
//! * `x.f` on a value that is not a map (`null.f`, `'abc'.f`) fails, as in
//!   cel-go, where cel 0.13 evaluates it to `false` (see `prepare`).
//! * `size()` of a string counts code points, as cel-go does (cel 0.13
//!   counts UTF-8 bytes); `string()` takes a bool and prints a double in
//!   Go's shortest form (`1e+308`); `split('')` gives the characters;
//!   `lists.range(-1)` is `[]`. These were found by the differential test
//!   against cel-go (`tests/cel_oracle.rs`, docs/cel.md).
//! * `format()` is cel-go's at the strings extension's version 2 (locale
//!   formatting, CEL literals for list members, compile-time checks of
//!   literal calls: `format.rs`), and `url()` reads a URL as Go's
//!   `net/url` does (`url.rs`); kube-cel followed cel-spec's version 4 and
//!   the WHATWG URL standard.
//!
//! Known cel 0.13 quirks that remain: `has(x.f)` on a value that is not a
//! map (`has(null.f)`) evaluates to `false` instead of failing; in release builds, `-x` on
//! `int` minimum and kube-cel's `sum()` overflow silently wrap (debug builds
//! panic, which surfaces as an evaluation error).
//!
//! # JSON <-> CEL conversion
//!
//! | JSON                          | CEL                                     |
//! |-------------------------------|-----------------------------------------|
//! | `null`                        | `null`                                  |
//! | `true` / `false`              | `bool`                                  |
//! | integer fitting `i64`         | `int`                                   |
//! | integer above `i64::MAX`      | `uint`                                  |
//! | any other number              | `double`                                |
//! | string                        | `string`                                |
//! | array                         | `list`                                  |
//! | object                        | `map(string, dyn)`                      |
//!
//! Results convert back the same way; in addition `uint` becomes a JSON
//! integer, `bytes` a standard base64 string, `timestamp` an RFC 3339 string
//! in UTC (`2024-01-02T03:04:05Z`, fractional seconds only when non-zero),
//! `duration` a Go-style duration string (`1h2m3.5s`, `150ms`), and
//! `optional` values their inner value (or `null` when empty). Non-finite
//! doubles, maps with non-string keys and opaque extension values (quantity,
//! semver, ip, cidr, url, ...) are evaluation errors. CEL maps are unordered,
//! so object keys of a result come back sorted lexicographically rather than
//! in their input order.

/// The call a protobuf message construction becomes (`cel/wkt.rs`):
/// `@katalog_message(type, field, value, field, value, ...)`, an optional
/// field (`?value: x`) named with a leading `?`. Here, not in `wkt`, because
/// `time` names it too and `wkt` uses `time`'s range checks.
const MESSAGE_FUNCTION: &str = "@katalog_message";

mod ast;
mod convert;
pub mod cost;
mod format;
mod functions;
mod library;
mod macros;
mod named_format;
mod native;
mod position;
mod quantity;
mod strict;
mod time;
mod type_values;
pub mod types;
mod unary;
mod url;
mod wkt;

use std::any::Any;
use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;

use kube_cel::cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue, operators};
use kube_cel::cel::objects::{Key, KeyRef, Map};
use kube_cel::cel::parser::Parser;
use kube_cel::cel::{Context, ExecutionError, IdedExpr, Value};
use serde_json::Value as Json;

use crate::budget::DeadlineExceeded;
use crate::json::node::{Node, Obj};

/// Maximum nesting depth of JSON values converted into or out of CEL.
///
/// Both the conversion here and cel's internal value representation recurse
/// over nested values; bounding the depth keeps a pathological input from
/// overflowing the stack (which would abort the process). serde_json refuses
/// to parse documents nested deeper than 128 levels, so real inputs never get
/// close.
const MAX_VALUE_DEPTH: usize = 256;

/// Maximum size of a CEL expression source, in bytes (cel-go's default
/// expression size limit is 100k code points).
const MAX_SOURCE_LEN: usize = 100_000;

/// Maximum nesting of sub-expressions (parentheses, list and map literals,
/// call arguments) accepted by the parser. cel's own default is 96.
const MAX_PARSE_DEPTH: u16 = 32;

/// Maximum depth of the parsed expression tree.
///
/// cel's interpreter recurses once per tree level, and in unoptimised builds
/// each level costs roughly 35 KiB of stack, so a 2 MiB thread (the default
/// for spawned threads, test threads and async runtime workers) overflows at
/// around 55 levels. The parser limit above does not cover long operator
/// chains such as `a + a + ... + a`, which cel parses iteratively into a
/// left-nested tree, so the tree depth is checked separately. `&&` and `||`
/// chains are built balanced and stay shallow. Real rules are far below this
/// (a doubly nested `all()` over container ports with a few conditions is
/// about 10 levels).
const MAX_AST_DEPTH: usize = 32;

/// Stack size of the short-lived thread that parses expressions: the
/// generated ANTLR parser is very stack hungry in unoptimised builds (over
/// 100 KiB per nesting level).
const PARSER_STACK_SIZE: usize = 32 * 1024 * 1024;

/// Number of compiled regexes kept by the `matches()` cache.
const REGEX_CACHE_CAPACITY: usize = 256;

/// Patterns longer than this are compiled on every call instead of being
/// cached, so the cache's memory use stays bounded.
const REGEX_CACHE_MAX_PATTERN_LEN: usize = 4096;

/// Largest compiled program of a `matches()` pattern, in bytes (the regex
/// crate's default is 10 MiB): compiling stops, with an error, once the
/// program grows past it, so a long pattern taken from an object cannot
/// keep a thread compiling. Real patterns compile to a few KiB.
const REGEX_SIZE_LIMIT: usize = 1024 * 1024;

/// Largest cache of the lazy DFA of one compiled pattern, in bytes (the
/// regex crate's default is 2 MiB); past it the search goes on with a
/// slower engine, still in linear time.
const REGEX_DFA_SIZE_LIMIT: usize = 1024 * 1024;

/// Errors from compiling or evaluating a CEL expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CelError {
    /// The expression could not be parsed (or uses unsupported syntax).
    #[error("failed to compile CEL expression `{expr}`: {reason}")]
    Compile {
        /// The expression source.
        expr: String,
        /// What went wrong.
        reason: CompileFailure,
    },
    /// The expression failed while being evaluated, or its result could not
    /// be converted to JSON.
    #[error("failed to evaluate CEL expression `{expr}`: {reason}")]
    Eval {
        /// The expression source.
        expr: String,
        /// What went wrong.
        reason: EvalFailure,
    },
}

/// Why an expression did not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileFailure {
    /// The source is longer than `MAX_SOURCE_LEN` bytes.
    #[error("expression is {len} bytes long; the limit is {limit}", limit = MAX_SOURCE_LEN)]
    TooLong { len: usize },
    /// The parser thread could not be started.
    #[error("could not start the CEL parser thread: {0}")]
    ParserThread(String),
    /// The parser's own errors, as it renders them.
    #[error("{0}")]
    Syntax(String),
    /// The parsed tree is deeper than `MAX_AST_DEPTH`.
    #[error("expression is nested too deeply (more than {limit} levels)", limit = MAX_AST_DEPTH)]
    TooDeep,
    /// The parser produced a node it leaves unspecified.
    #[error("expression contains an unspecified node")]
    UnspecifiedNode,
    /// A protobuf message construction (`Foo{a: 1}`), which cel 0.13 cannot evaluate.
    #[error("message construction `{type_name}{{...}}` is not supported")]
    MessageConstruction { type_name: String },
    /// A field a well-known message does not have (cel-go: "undefined
    /// field").
    #[error("undefined field `{field}` of `{type_name}`")]
    UndefinedField { type_name: String, field: String },
    /// A `field: value` entry of a message inside a map literal.
    #[error("struct field `{field}` is not allowed in a map literal")]
    StructField { field: String },
    /// A call of a function the evaluators do not have (see `FUNCTION_NAMES`).
    #[error("ERROR: {at}: `{name}` is not a function here ({hint})\n{snippet}")]
    UnknownFunction {
        name: String,
        hint: String,
        /// Where: `<input>:LINE:COL`.
        at: String,
        /// The line, and a caret under the name.
        snippet: String,
    },
    /// Type errors cel-go's checker finds with nothing known of the
    /// variables (all `dyn`, as the kube-apiserver declares `object` and
    /// the others for a ValidatingAdmissionPolicy): list and map literals
    /// of mixed types, calls no overload takes (see `cel/types.rs`).
    #[error("{0}")]
    Type(String),
    /// A quoted identifier (`` m.`a.b` ``), which the kube-apiserver refuses.
    #[error(
        "ERROR: {at}: unsupported syntax: '`' (the kube-apiserver's CEL has no quoted \
         field names: index the map, `m['a.b']`)\n{snippet}"
    )]
    QuotedIdentifier {
        /// Where: `<input>:LINE:COL`.
        at: String,
        /// The line, and a caret under the backtick.
        snippet: String,
    },
    /// The estimate for lists of `STATIC_LIST_ITEMS` items is over the default budget.
    #[error(
        "its estimated cost is {cost} already for lists of {items} items, over the \
         budget of {limit} per evaluation",
        items = crate::budget::STATIC_LIST_ITEMS,
        limit = crate::budget::DEFAULT_CEL_COST_LIMIT
    )]
    TooCostly { cost: u64 },
    /// The parser panicked.
    #[error(transparent)]
    Panic(#[from] InterpreterPanic),
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalFailure {
    /// The review's deadline has passed.
    #[error(transparent)]
    Deadline(#[from] DeadlineExceeded),
    /// The estimated cost is over the budget: the expression was not run.
    #[error(
        "not evaluated: its estimated cost {cost} is over the budget of {limit} \
         per evaluation (--cel-cost-limit), for a largest list or map of {largest} items"
    )]
    OverBudget { cost: u64, limit: u64, largest: u64 },
    /// A trial's cost cap stopped it (`budget::scoped_stopped`): the
    /// expression was not run and the result is thrown away.
    #[error(transparent)]
    Stopped(#[from] crate::budget::Stopped),
    /// A bound value could not be converted to CEL.
    #[error("variable `{name}`: {reason}")]
    Variable { name: String, reason: ValueError },
    /// The interpreter's own error.
    #[error(transparent)]
    Interpreter(#[from] ExecutionError),
    /// The interpreter panicked.
    #[error(transparent)]
    Panic(#[from] InterpreterPanic),
    /// The result could not be converted to JSON.
    #[error(transparent)]
    Result(#[from] ValueError),
    /// [`CelProgram::eval_bool`] got something else than a `bool`.
    #[error("expected a bool result, got {got}")]
    NotBool { got: String },
}

/// Why a value could not cross between JSON and CEL.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// A JSON value nested deeper than `MAX_VALUE_DEPTH`.
    #[error("value is nested too deeply (more than {limit} levels)", limit = MAX_VALUE_DEPTH)]
    ValueTooDeep,
    /// A JSON number that is neither an `int`, a `uint` nor a `double`.
    #[error("number {0} cannot be represented in CEL")]
    Number(serde_json::Number),
    /// A value to add a field to that is not a map.
    #[error("not a map")]
    NotAMap,
    /// A CEL result nested deeper than `MAX_VALUE_DEPTH`.
    #[error("result is nested too deeply (more than {limit} levels)", limit = MAX_VALUE_DEPTH)]
    ResultTooDeep,
    /// `NaN` or an infinity, which JSON has no number for.
    #[error("result contains the non-finite double {0}")]
    NonFinite(f64),
    /// A map key other than a string.
    #[error(
        "result map has a non-string key {key} ({}); JSON object keys must be strings",
        convert::key_type_name(.key)
    )]
    NonStringKey { key: Key },
    /// An opaque extension value (quantity, semver, ip, url, ...).
    #[error("a value of type {type_name} cannot be converted to JSON")]
    Opaque { type_name: String },
    /// A function value.
    #[error("the function `{name}` cannot be converted to JSON")]
    Function { name: String },
}

/// A panic inside the CEL parser or interpreter, caught (see `run_guarded`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("internal error in the CEL interpreter: {detail}")]
pub struct InterpreterPanic {
    /// The panic's message.
    pub detail: String,
}

/// A compiled CEL expression.
///
/// Compile once (at Katalog compile time), evaluate many times. Cheap to
/// clone (the parsed program is shared behind an [`Arc`]) and safe to share
/// between threads.
#[derive(Clone)]
pub struct CelProgram {
    inner: Arc<Compiled>,
}

struct Compiled {
    source: String,
    ast: IdedExpr,
    /// Whether the cost depends on the input (a comprehension over one).
    iterates: bool,
    /// The identifiers the expression reads (see
    /// [`CelProgram::unbound_identifiers`]).
    reads: Vec<String>,
    /// Identifiers the expression reads only by field (`v.f`, `v.?f`,
    /// `v['f']`, `has(v.f)`), with the fields; `None`: read otherwise too.
    field_uses: Vec<(String, Option<Vec<String>>)>,
    /// Whether [`native`] can evaluate the expression (it is tried first).
    native: bool,
    /// What each call is, for [`native`] (by node id).
    calls: Vec<native::Func>,
    /// [`estimate`] as a [`cost_polynomial`].
    cost: Vec<u64>,
    /// What its comprehensions iterate: `n` of [`eval_cost`] at run time.
    items: Vec<Items>,
    /// Whether it reads nothing but [`REQUEST`] (asked for every
    /// evaluation of an admission rule).
    request_only: bool,
    /// The apiserver's static cost estimate ([`cost`]).
    estimate: Result<cost::Estimate, cost::Unsupported>,
}

/// What CEL sees of an admission request: an expression that reads only
/// these has the same value for every rule of the request.
pub const REQUEST: [&str; 4] = ["object", "oldObject", "request", "namespaceObject"];

/// The estimated cost of evaluating `expr` once when the largest list or
/// map it iterates has `n` items ([`Items`]): one unit per node, and the nodes of a
/// comprehension's body (`all`, `exists`, `map`, `filter`, ...) once per
/// item — per element of a literal list, else `n`. A function call is one
/// unit whatever it does (the costly ones, `matches` and the string and
/// list functions, are linear in their input). Saturates at `u64::MAX`.
#[cfg(test)]
fn estimate(expr: &IdedExpr, n: u64) -> u64 {
    let sum = |items: &mut dyn Iterator<Item = &IdedExpr>| {
        items.fold(0u64, |total, e| total.saturating_add(estimate(e, n)))
    };
    let inner = match &expr.expr {
        Expr::Call(call) if is_field_index(call) => estimate(&call.args[0], n),
        Expr::Call(call) => sum(&mut call.target.iter().map(|t| &**t).chain(call.args.iter())),
        Expr::Select(select) => estimate(&select.operand, n),
        Expr::List(list) => sum(&mut list.elements.iter()),
        Expr::Map(map) => sum(&mut map.entries.iter().flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
            EntryExpr::StructField(_) => Vec::new(),
        })),
        Expr::Comprehension(c) => {
            let items = match &c.iter_range.expr {
                Expr::List(list) => u64::try_from(list.elements.len()).unwrap_or(u64::MAX),
                _ => n.max(1),
            };
            let body = estimate(&c.loop_cond, n).saturating_add(estimate(&c.loop_step, n));
            sum(&mut [&c.iter_range, &c.accu_init, &c.result].into_iter())
                .saturating_add(items.saturating_mul(body))
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => 0,
    };
    inner.saturating_add(1)
}

/// [`estimate`] as a polynomial in `max(n, 1)` (the only way `n` enters
/// it): coefficient `k` is that of `max(n, 1)^k`. Computed once per
/// expression, so the cost of an evaluation is a few multiplications, not a
/// walk of the expression; [`eval_cost`] gives the same value as
/// `estimate`, saturation included (every term is non-negative, so a sum
/// reaches `u64::MAX` exactly when the walk's does).
fn cost_polynomial(expr: &IdedExpr) -> Vec<u64> {
    fn add(a: &mut Vec<u64>, b: &[u64]) {
        if a.len() < b.len() {
            a.resize(b.len(), 0);
        }
        for (x, y) in a.iter_mut().zip(b) {
            *x = x.saturating_add(*y);
        }
    }
    let sum = |items: &mut dyn Iterator<Item = &IdedExpr>| {
        let mut total = Vec::new();
        for e in items {
            add(&mut total, &cost_polynomial(e));
        }
        total
    };
    let mut inner = match &expr.expr {
        // `x.f`, which `prepare` makes `x['f']`: one unit, as the selection.
        Expr::Call(call) if is_field_index(call) => cost_polynomial(&call.args[0]),
        Expr::Call(call) => sum(&mut call.target.iter().map(|t| &**t).chain(call.args.iter())),
        Expr::Select(select) => cost_polynomial(&select.operand),
        Expr::List(list) => sum(&mut list.elements.iter()),
        Expr::Map(map) => sum(&mut map.entries.iter().flat_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
            EntryExpr::StructField(_) => Vec::new(),
        })),
        Expr::Comprehension(c) => {
            let mut body = cost_polynomial(&c.loop_cond);
            add(&mut body, &cost_polynomial(&c.loop_step));
            let per_items: Vec<u64> = match &c.iter_range.expr {
                // A literal list: its length, a constant.
                Expr::List(list) => {
                    let items = u64::try_from(list.elements.len()).unwrap_or(u64::MAX);
                    body.iter().map(|x| x.saturating_mul(items)).collect()
                }
                // `max(n, 1)` items: one degree up.
                _ => std::iter::once(0).chain(body).collect(),
            };
            let mut total = sum(&mut [&c.iter_range, &c.accu_init, &c.result].into_iter());
            add(&mut total, &per_items);
            total
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => Vec::new(),
    };
    add(&mut inner, &[1]);
    inner
}

/// A [`cost_polynomial`] at `n`.
fn eval_cost(polynomial: &[u64], n: u64) -> u64 {
    let m = n.max(1);
    let mut power = 1u64;
    let mut total = 0u64;
    for (k, c) in polynomial.iter().enumerate() {
        if k > 0 {
            power = power.saturating_mul(m);
        }
        total = total.saturating_add(c.saturating_mul(power));
    }
    total
}

/// The number of items of the largest list or map in `value`.
fn largest_collection(value: &Json) -> u64 {
    shape(value).0
}

/// Where the items of a comprehension over a non-literal list or map come
/// from, for the run-time cost estimate: `n` is the largest of these, not
/// the largest list anywhere in the input (a quadratic rule over
/// `spec.items` is not held to the size of `metadata.labels`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Items {
    /// The list or map at a path below a bound identifier (a `[*]` segment:
    /// every element of a list, every value of a map).
    At(String, Vec<crate::path::Segment>),
    /// The largest list or map anywhere in a bound identifier's value.
    Within(String),
    /// The largest list or map anywhere in the bound values.
    Anywhere,
    /// A literal of this many items (an `orValue([...])` default).
    Count(u64),
}

/// The [`Items`] every comprehension of `expr` iterates, each once.
fn iteration_items(expr: &IdedExpr) -> Vec<Items> {
    let mut walk = ItemsWalk {
        bound: Vec::new(),
        out: Vec::new(),
    };
    walk.walk(expr);
    walk.out
}

/// An identifier and a path below it.
type RootPath = (String, Vec<crate::path::Segment>);

/// What [`iteration_items`] walks with: the comprehension variables in
/// scope (innermost last) with the path of what they stand for, when known
/// (`None`: an accumulator, an index, a mapped value).
struct ItemsWalk {
    bound: Vec<(String, Option<RootPath>)>,
    out: Vec<Items>,
}

impl ItemsWalk {
    /// The root identifier and path `expr` selects, if it is a chain of
    /// selections and indexes on a bound identifier or on a comprehension
    /// variable that stands for one.
    fn path(&self, expr: &IdedExpr) -> Option<RootPath> {
        use crate::path::Segment;
        match &expr.expr {
            Expr::Ident(name) => match self.bound.iter().rev().find(|(n, _)| n == name) {
                Some((_, path)) => path.clone(),
                None => Some((name.clone(), Vec::new())),
            },
            Expr::Select(select) if !select.test => {
                let (root, mut path) = self.path(&select.operand)?;
                path.push(Segment::Key(select.field.clone()));
                Some((root, path))
            }
            Expr::Call(call) if is_index(call) => {
                let (root, mut path) = self.path(&call.args[0])?;
                path.push(match &call.args[1].expr {
                    Expr::Literal(LiteralValue::String(key)) => {
                        Segment::Key(key.inner().to_string())
                    }
                    Expr::Literal(LiteralValue::Int(i)) => {
                        usize::try_from(*i.inner()).map_or(Segment::Wildcard, Segment::Index)
                    }
                    Expr::Literal(LiteralValue::UInt(u)) => {
                        usize::try_from(*u.inner()).map_or(Segment::Wildcard, Segment::Index)
                    }
                    _ => Segment::Wildcard,
                });
                Some((root, path))
            }
            _ => None,
        }
    }

    /// Where the items of `range` come from.
    fn sources(&self, range: &IdedExpr, out: &mut Vec<Items>) {
        let count = |n: usize| Items::Count(u64::try_from(n).unwrap_or(u64::MAX));
        match &range.expr {
            Expr::List(list) => return out.push(count(list.elements.len())),
            Expr::Map(map) => return out.push(count(map.entries.len())),
            // `map` and `filter` give at most as many items as they read.
            Expr::Comprehension(c) => return self.sources(&c.iter_range, out),
            Expr::Call(call) => match (call.func_name.as_str(), &call.target, &call.args[..]) {
                ("orValue", Some(target), [default]) => {
                    self.sources(target, out);
                    return self.sources(default, out);
                }
                ("value", Some(target), []) => return self.sources(target, out),
                (operators::CONDITIONAL, None, [_, a, b]) => {
                    self.sources(a, out);
                    return self.sources(b, out);
                }
                _ => {}
            },
            _ => {}
        }
        if let Some((root, path)) = self.path(range) {
            return out.push(Items::At(root, path));
        }
        // Anything else (a function's result, a computed list): the
        // largest list or map in what it reads.
        let mut scope = Vec::new();
        let mut reads = Vec::new();
        walk_identifiers(range, &mut scope, &mut reads);
        if reads.is_empty() || reads.iter().any(|r| self.bound.iter().any(|(n, _)| n == r)) {
            return out.push(Items::Anywhere);
        }
        out.extend(reads.into_iter().map(Items::Within));
    }

    fn walk(&mut self, expr: &IdedExpr) {
        match &expr.expr {
            Expr::Select(select) => self.walk(&select.operand),
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target);
                }
                for arg in &call.args {
                    self.walk(arg);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(|e| self.walk(e)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(e) = &entry.expr {
                        self.walk(&e.key);
                        self.walk(&e.value);
                    }
                }
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range);
                self.walk(&c.accu_init);
                // A literal list's length is a constant of the estimate.
                if !matches!(c.iter_range.expr, Expr::List(_)) {
                    let mut found = Vec::new();
                    self.sources(&c.iter_range, &mut found);
                    for items in found {
                        if !self.out.contains(&items) {
                            self.out.push(items);
                        }
                    }
                }
                let elements = self.path(&c.iter_range).map(|(root, mut path)| {
                    path.push(crate::path::Segment::Wildcard);
                    (root, path)
                });
                let before = self.bound.len();
                match &c.iter_var2 {
                    Some(value) => {
                        self.bound.push((c.iter_var.clone(), None));
                        self.bound.push((value.clone(), elements));
                    }
                    None => self.bound.push((c.iter_var.clone(), elements)),
                }
                self.bound.push((c.accu_var.clone(), None));
                for e in [&c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(e);
                }
                self.bound.truncate(before);
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
        }
    }
}

impl fmt::Debug for CelProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CelProgram")
            .field(&self.inner.source)
            .finish()
    }
}

impl CelProgram {
    /// Parses `expr`, with CEL's optional syntax (`self.?field`, `[?x]`,
    /// `{?'k': v}`) enabled as in Kubernetes.
    ///
    /// Besides syntax errors this rejects expressions that cel 0.13 would
    /// accept but cannot evaluate (protobuf message construction such as
    /// `Foo{a: 1}`), expressions longer than 100 000 bytes, more than 32
    /// levels of nested sub-expressions and expression trees deeper than 32
    /// levels (see `MAX_AST_DEPTH` for why).
    pub fn compile(expr: &str) -> Result<CelProgram, CelError> {
        Self::compile_with(expr, true)
    }

    /// [`CelProgram::compile`] without the type checks: the evaluators'
    /// unit tests run expressions cel-go's checker refuses, to test what
    /// the evaluators do with such values when they come from `object`.
    #[cfg(test)]
    pub(crate) fn compile_unchecked(expr: &str) -> Result<CelProgram, CelError> {
        Self::compile_with(expr, false)
    }

    fn compile_with(expr: &str, typed: bool) -> Result<CelProgram, CelError> {
        let compile_error = |reason: CompileFailure| CelError::Compile {
            expr: expr.to_owned(),
            reason,
        };
        if expr.len() > MAX_SOURCE_LEN {
            return Err(compile_error(CompileFailure::TooLong { len: expr.len() }));
        }
        // Parse on a dedicated thread with a large stack: the parser's stack
        // use grows with nesting (see `PARSER_STACK_SIZE`) and compiling is
        // rare, so a thread per compile is cheap insurance against aborting
        // the process on a deeply nested expression. Joining the thread also
        // turns a parser panic into an error.
        let (ast, estimate) = std::thread::scope(|scope| {
            let parser = std::thread::Builder::new()
                .name("katalog-cel-parser".to_owned())
                .stack_size(PARSER_STACK_SIZE)
                .spawn_scoped(scope, || parse_and_check(expr, typed))
                .map_err(|err| CompileFailure::ParserThread(err.to_string()))?;
            parser
                .join()
                .map_err(|payload| panic_message(payload.as_ref()))?
        })
        .map_err(compile_error)?;
        let polynomial = cost_polynomial(&ast);
        let cost = eval_cost(&polynomial, crate::budget::STATIC_LIST_ITEMS);
        if cost > crate::budget::DEFAULT_CEL_COST_LIMIT {
            return Err(compile_error(CompileFailure::TooCostly { cost }));
        }
        let iterates = eval_cost(&polynomial, 1) != eval_cost(&polynomial, 2);
        let mut reads = Vec::new();
        walk_identifiers(&ast, &mut Vec::new(), &mut reads);
        let mut field_uses = Vec::new();
        walk_field_uses(&ast, &mut field_uses);
        let calls = native::compile(&ast);
        let native = calls.is_some();
        let items = iteration_items(&ast);
        let request_only = reads.iter().all(|r| REQUEST.contains(&r.as_str()));
        Ok(CelProgram {
            inner: Arc::new(Compiled {
                source: expr.to_owned(),
                ast,
                iterates,
                reads,
                field_uses,
                native,
                calls: calls.unwrap_or_default(),
                cost: polynomial,
                items,
                request_only,
                estimate,
            }),
        })
    }

    /// The estimated cost of one evaluation on inputs whose largest list or
    /// map has `largest` items (see [`crate::budget`]).
    pub fn cost(&self, largest: u64) -> u64 {
        eval_cost(&self.inner.cost, largest)
    }

    /// The static cost estimate the kube-apiserver (cel-go with the
    /// Kubernetes cost estimator) gives the expression, with every variable
    /// `dyn` ([`cost`]); an error names what the estimate cannot follow.
    pub fn estimated_cost(&self) -> Result<cost::Estimate, cost::Unsupported> {
        self.inner.estimate.clone()
    }

    /// The expression source this program was compiled from.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The identifiers the expression reads that neither `bound` nor one of
    /// its own comprehensions (`all`, `exists`, `map`, `filter`, ... bind
    /// their iteration variables) binds, in order, each once. Function
    /// namespaces (`optional.none()`, `math.greatest()`, `sets`, ...) are
    /// not identifiers.
    pub fn unbound_identifiers(&self, bound: &[&str]) -> Vec<String> {
        let mut scope: Vec<String> = bound.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        walk_identifiers(&self.inner.ast, &mut scope, &mut out);
        out
    }

    /// The `NAME`s of `variables.NAME` (and `variables['NAME']`,
    /// `variables.?NAME`) the expression reads, in order, each once.
    pub fn variable_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk_variables(&self.inner.ast, &mut out);
        out
    }

    /// The field paths the expression selects below the given roots, each
    /// root an identifier and the path it stands for (`("object", "")`,
    /// `("element", "spec.containers[*]")`). A chain of selections (`.f`,
    /// `.?f`, `has(x.f)`), literal indexes (`['k']` is a key, `[0]` an
    /// index) and other indexes (`[i]`, any element) extends the path; a
    /// comprehension over a selected list (`all`, `exists`, `map`, `filter`,
    /// ...) binds its variable to the list's elements (`[*]`), and its index
    /// or key variable to nothing. Only the longest chains are returned, in
    /// source order, each once; a root alone is left out.
    pub fn selections(&self, roots: &[(&str, &crate::path::Path)]) -> Vec<crate::path::Path> {
        let mut walk = SelectionWalk {
            roots,
            bound: Vec::new(),
            out: Vec::new(),
        };
        walk.walk(&self.inner.ast);
        let all = walk.out;
        all.iter()
            .filter(|p| {
                !all.iter()
                    .any(|q| q.len() > p.len() && q.segments()[..p.len()] == *p.segments())
            })
            .cloned()
            .collect()
    }

    /// Evaluates with the given variables bound (JSON values converted to CEL
    /// values) and returns the result converted back to JSON (see the module
    /// docs for the conversion rules).
    ///
    /// Referencing a variable that is not in `vars` is an evaluation error
    /// naming the variable. When a name appears more than once in `vars`, the
    /// last binding wins.
    pub fn eval(&self, vars: &[(&str, &Json)]) -> Result<Json, CelError> {
        self.precheck(vars)?;
        let answer = self
            .native(vars.iter().map(|(n, v)| (*n, bindable(v))))
            .and_then(|v| native::to_json(&v, 0));
        if let Some(json) = self.tally(answer) {
            return Ok(json);
        }
        let value = self.interpret(vars)?;
        convert::cel_to_json(&value, 0).map_err(|reason| self.eval_error(reason))
    }

    /// Evaluates like [`eval`](Self::eval) and requires a `bool` result; any
    /// other result type is an error naming the type that was produced.
    pub fn eval_bool(&self, vars: &[(&str, &Json)]) -> Result<bool, CelError> {
        self.precheck(vars)?;
        let answer = match self.native(vars.iter().map(|(n, v)| (*n, bindable(v)))) {
            Some(native::V::Bool(b)) => Some(b),
            _ => None,
        };
        if let Some(b) = self.tally(answer) {
            return Ok(b);
        }
        match self.interpret(vars)? {
            Value::Bool(b) => Ok(b),
            other => Err(self.eval_error(EvalFailure::NotBool {
                got: convert::cel_type_name(&other),
            })),
        }
    }

    /// Whether the expression reads the identifier `name` (a variable it
    /// does not bind itself).
    pub fn reads(&self, name: &str) -> bool {
        self.inner.reads.iter().any(|r| r == name)
    }

    /// Whether the estimated cost depends on the input (a comprehension
    /// over one).
    pub fn iterates(&self) -> bool {
        self.inner.iterates
    }

    /// The fields of `name` the expression reads, when it reads `name`
    /// only by field.
    fn fields_read(&self, name: &str) -> Option<&[String]> {
        self.inner
            .field_uses
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, fields)| fields.as_deref())
    }

    /// Whether the expression may read the variable `variables.NAME`: it
    /// reads `variables` by that field, or otherwise than by field.
    pub fn reads_variable(&self, name: &str) -> bool {
        self.reads("variables")
            && self
                .fields_read("variables")
                .is_none_or(|fields| fields.iter().any(|f| f == name))
    }

    /// Whether `self` and `other` are one expression: the same program, or
    /// the same source.
    pub fn same(&self, other: &CelProgram) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.inner.source == other.inner.source
    }

    /// Whether every identifier the expression reads is one of [`REQUEST`].
    /// Whether the evaluator over the bound values (`native`) can run it at
    /// all (it may still give an evaluation back to the interpreter).
    pub fn runs_natively(&self) -> bool {
        self.inner.native
    }

    pub fn reads_only_request(&self) -> bool {
        self.inner.request_only
    }

    /// Whether every identifier the expression reads is one of `names`.
    pub fn reads_only(&self, names: &[&str]) -> bool {
        self.inner.reads.iter().all(|r| names.contains(&r.as_str()))
    }

    /// Fails as an evaluation would once the request's deadline has passed.
    pub fn check_deadline(&self) -> Result<(), CelError> {
        crate::budget::check_deadline().map_err(|reason| self.eval_error(reason))
    }

    /// Evaluates like [`eval`](Self::eval) with `shared` bound first and
    /// `vars` over them: the same result as `eval` with the bindings of
    /// `shared` followed by `vars`, without converting the shared values
    /// again. A value of `vars` the expression does not read is not
    /// converted at all; it must be part of a value in `shared` (the
    /// `self` of a check on the bound object), so that neither a conversion
    /// error nor the cost estimate can depend on it.
    pub fn eval_shared<'a>(
        &'a self,
        shared: &CelBindings<'a>,
        vars: &[(&str, CelArg<'_, 'a>)],
    ) -> Result<Json, CelError> {
        self.precheck_shared(shared, vars)?;
        let answer = self
            .native_shared(shared, vars)
            .and_then(|v| native::to_json(&v, 0));
        if let Some(json) = self.tally(answer) {
            return Ok(json);
        }
        let value = self.interpret_shared(shared, vars)?;
        convert::cel_to_json(&value, 0).map_err(|reason| self.eval_error(reason))
    }

    /// [`eval_shared`](Self::eval_shared), the result ready to be bound
    /// again (as a variable); its JSON is [`CelValue::as_json`]. A result of
    /// [`native`] is kept as it is, borrowing what it read: a later
    /// expression reads it without a conversion to JSON and back.
    pub fn eval_shared_value<'a>(
        &'a self,
        shared: &CelBindings<'a>,
        vars: &[(&str, CelArg<'_, 'a>)],
    ) -> Result<CelValue<'a>, CelError> {
        self.precheck_shared(shared, vars)?;
        let answer = self
            .native_shared(shared, vars)
            .and_then(CelValue::from_native);
        if let Some(value) = self.tally(answer) {
            return Ok(value);
        }
        let value = self.interpret_shared(shared, vars)?;
        convert::cel_to_json(&value, 0)
            .map(CelValue::from_owned_json)
            .map_err(|reason| self.eval_error(reason))
    }

    /// Runs the expression on [`native`], when it can: `bound` in order (a
    /// `None` value: one the interpreter cannot bind).
    fn native<'n, 'a: 'n>(
        &'a self,
        bound: impl Iterator<Item = (&'n str, Option<native::V<'a>>)>,
    ) -> Option<native::V<'a>> {
        if !self.inner.native || NATIVE_OFF.get() {
            return None;
        }
        // A value the interpreter cannot bind fails its evaluation, read
        // or not: let it say so.
        // Room for the bound values and the comprehension variables of a
        // few nested loops, allocated once.
        let mut vars = Vec::with_capacity(bound.size_hint().0 + 8);
        for (name, value) in bound {
            vars.push((name, value?));
        }
        crate::budget::begin_evaluation();
        native::eval(
            &self.inner.ast,
            &mut native::Env::new(vars, &self.inner.calls),
        )
    }

    fn native_shared<'n, 'a: 'n>(
        &'a self,
        shared: &'n CelBindings<'a>,
        vars: &'n [(&str, CelArg<'_, 'a>)],
    ) -> Option<native::V<'a>> {
        let bound = shared
            .vars
            .iter()
            .map(|(name, bound)| (name.as_str(), Some(bound.native())))
            .chain(vars.iter().map(|(name, arg)| {
                let value = match arg {
                    CelArg::Value(v) => v.native(),
                    CelArg::Part(bound) => Some(bound.native()),
                    CelArg::Copied(json) => Some(native::V::owned(json)),
                };
                (*name, value)
            }));
        self.native(bound)
    }

    /// Counts who answered (see [`native_tally`]).
    fn tally<T>(&self, answer: Option<T>) -> Option<T> {
        if NATIVE_OFF.get() {
            return answer;
        }
        TALLY.with(|t| {
            let mut counts = t.get();
            match (&answer, self.inner.native) {
                (Some(_), _) => counts.native += 1,
                (None, true) => counts.gave_up += 1,
                (None, false) => counts.unsupported += 1,
            }
            t.set(counts);
        });
        answer
    }

    /// The checks before any evaluation: the deadline and the cost budget.
    fn precheck(&self, vars: &[(&str, &Json)]) -> Result<(), CelError> {
        let find = |name: &str| vars.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| *v);
        self.check_budget(|| {
            self.iterated_items(
                |name| find(name).map(bindable),
                |name| find(name).map_or(0, largest_collection),
                || {
                    vars.iter()
                        .map(|(_, v)| largest_collection(v))
                        .max()
                        .unwrap_or(0)
                },
            )
        })
    }

    /// `n` of the cost estimate: the largest of the lists and maps the
    /// expression's comprehensions iterate ([`Items`]), measured in the
    /// bound values. `value` gives a bound name's value (`Some(None)`: one
    /// that cannot be read in place, measured whole), `largest` the largest
    /// list or map in it, `anywhere` the largest in every bound value.
    fn iterated_items<'v>(
        &self,
        value: impl Fn(&str) -> Option<Option<native::V<'v>>>,
        largest: impl Fn(&str) -> u64,
        anywhere: impl FnOnce() -> u64,
    ) -> u64 {
        let mut anywhere = Some(anywhere);
        let mut n = 0;
        for items in &self.inner.items {
            let k = match items {
                Items::Count(k) => *k,
                Items::Anywhere => anywhere.take().map_or(0, |f| f()),
                Items::Within(name) => largest(name),
                Items::At(name, path) => match value(name) {
                    Some(Some(v)) => native::items_at(&v, path),
                    Some(None) => largest(name),
                    None => 0,
                },
            };
            n = n.max(k);
        }
        n
    }

    /// [`precheck`](Self::precheck) with shared bindings, and a shared
    /// value that cannot be converted.
    fn precheck_shared(
        &self,
        shared: &CelBindings<'_>,
        vars: &[(&str, CelArg<'_, '_>)],
    ) -> Result<(), CelError> {
        let arg = |name: &str| vars.iter().rev().find(|(n, _)| *n == name).map(|(_, a)| *a);
        let bound = |name: &str| {
            shared
                .vars
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, b)| *b)
        };
        self.check_budget(|| {
            self.iterated_items(
                |name| match arg(name) {
                    Some(CelArg::Value(v)) => Some(v.native()),
                    Some(CelArg::Part(b)) => Some(Some(b.native())),
                    Some(CelArg::Copied(json)) => Some(Some(native::V::from_json(json))),
                    None => bound(name).map(|b| Some(b.native())),
                },
                |name| match arg(name) {
                    Some(CelArg::Value(v)) => v.largest(),
                    Some(CelArg::Part(b)) => b.shape().0,
                    Some(CelArg::Copied(json)) => largest_collection(json),
                    None => bound(name).map_or(0, |b| b.shape().0),
                },
                || {
                    vars.iter()
                        .filter_map(|(name, arg)| match arg {
                            CelArg::Value(v) => Some(v.largest()),
                            CelArg::Part(bound) => self.reads(name).then(|| bound.shape().0),
                            CelArg::Copied(json) => {
                                self.reads(name).then(|| largest_collection(json))
                            }
                        })
                        .fold(shared.largest, u64::max)
                },
            )
        })?;
        if let Some((name, reason)) = &shared.failed {
            return Err(self.eval_error(EvalFailure::Variable {
                name: name.clone(),
                reason: reason.clone(),
            }));
        }
        Ok(())
    }

    /// Fails past the deadline, or when the estimated cost on the largest
    /// bound collection (`largest`, asked only of an expression that
    /// iterates) is over the budget; in a trial also over the trial's cap,
    /// which stops the trial instead of answering.
    fn check_budget(&self, largest: impl FnOnce() -> u64) -> Result<(), CelError> {
        crate::budget::check_deadline().map_err(|reason| self.eval_error(reason))?;
        if self.inner.iterates {
            let limit = crate::budget::current().cel_cost_limit;
            let largest = largest();
            let cost = self.cost(largest);
            if cost > limit {
                return Err(self.eval_error(EvalFailure::OverBudget {
                    cost,
                    limit,
                    largest,
                }));
            }
            crate::budget::check_trial_cost(cost).map_err(|reason| self.eval_error(reason))?;
        }
        Ok(())
    }

    /// The interpreter, after [`precheck_shared`](Self::precheck_shared).
    fn interpret_shared(
        &self,
        shared: &CelBindings<'_>,
        vars: &[(&str, CelArg<'_, '_>)],
    ) -> Result<Value, CelError> {
        let base = shared.ctx().map_err(|(name, reason)| {
            self.eval_error(EvalFailure::Variable {
                name: name.clone(),
                reason: reason.clone(),
            })
        })?;
        let mut ctx = base.new_inner_scope();
        for (name, arg) in vars {
            let value = match arg {
                CelArg::Value(v) => match (v.failure(), v.fields(), self.fields_read(name)) {
                    (Some(e), _, _) => Err(e),
                    // Only the fields the expression names: the others
                    // cannot change its result.
                    (None, Some(all), Some(fields)) => fields
                        .iter()
                        .filter_map(|f| {
                            let value = all.get(f)?.cel().clone();
                            Some(value.map(|v| (Key::String(Arc::new(f.clone())), v)))
                        })
                        .collect::<Result<HashMap<_, _>, _>>()
                        .map(|map| Value::Map(Map { map: Arc::new(map) })),
                    (None, _, _) => v.cel().clone(),
                },
                CelArg::Part(_) | CelArg::Copied(_) if !self.reads(name) => continue,
                CelArg::Part(bound) => convert::json_to_cel(bound.json(), 0),
                CelArg::Copied(json) => convert::json_to_cel(json, 0),
            }
            .map_err(|reason| {
                self.eval_error(EvalFailure::Variable {
                    name: (*name).to_owned(),
                    reason,
                })
            })?;
            ctx.add_variable_from_value(*name, value);
        }
        // Nothing the native evaluator charged counts here: it gave up.
        crate::budget::begin_evaluation();
        match run_guarded(|| Value::resolve(&self.inner.ast, &ctx)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.eval_error(error)),
            Err(panic) => Err(self.eval_error(panic)),
        }
    }

    /// The interpreter, after [`precheck`](Self::precheck).
    fn interpret(&self, vars: &[(&str, &Json)]) -> Result<Value, CelError> {
        let mut ctx = functions::base_context().new_inner_scope();
        for (name, value) in vars {
            let value = convert::json_to_cel(value, 0).map_err(|reason| {
                self.eval_error(EvalFailure::Variable {
                    name: (*name).to_owned(),
                    reason,
                })
            })?;
            ctx.add_variable_from_value(*name, value);
        }
        // Nothing the native evaluator charged counts here: it gave up.
        crate::budget::begin_evaluation();
        match run_guarded(|| Value::resolve(&self.inner.ast, &ctx)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.eval_error(error)),
            Err(panic) => Err(self.eval_error(panic)),
        }
    }

    /// Whether [`native`] can run this expression at all.
    #[doc(hidden)]
    pub fn is_native(&self) -> bool {
        self.inner.native
    }

    fn eval_error(&self, reason: impl Into<EvalFailure>) -> CelError {
        CelError::Eval {
            expr: self.inner.source.clone(),
            reason: reason.into(),
        }
    }
}

thread_local! {
    /// Set by [`interpreter_only`].
    static NATIVE_OFF: Cell<bool> = const { Cell::new(false) };
    static TALLY: Cell<NativeTally> = const {
        Cell::new(NativeTally { native: 0, gave_up: 0, unsupported: 0, map_orders: 0 })
    };
}

/// How many evaluations on this thread [`native`] answered, gave back to
/// the interpreter at run time, and could not run at all.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeTally {
    pub native: u64,
    pub gave_up: u64,
    pub unsupported: u64,
    /// Comprehensions the evaluator ran over a map of two or more keys,
    /// where its order (the JSON's) may differ from the interpreter's.
    pub map_orders: u64,
}

/// Counts a comprehension over a map of two or more keys.
fn tally_map_order() {
    TALLY.with(|t| {
        let mut counts = t.get();
        counts.map_orders += 1;
        t.set(counts);
    });
}

/// The evaluations counted on this thread so far.
#[doc(hidden)]
pub fn native_tally() -> NativeTally {
    TALLY.get()
}

/// Runs `f` with every CEL evaluation on this thread done by cel's
/// interpreter alone: the reference the differential tests compare
/// [`native`] with.
#[doc(hidden)]
pub fn interpreter_only<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NATIVE_OFF.set(self.0);
        }
    }
    let _restore = Restore(NATIVE_OFF.replace(true));
    f()
}

/// A JSON value for [`native`], unless the interpreter could not bind it.
fn bindable(json: &Json) -> Option<native::V<'_>> {
    (json_depth(json) <= MAX_VALUE_DEPTH).then(|| native::V::from_json(json))
}

/// The nesting depth of a JSON value (a scalar is 0).
fn json_depth(value: &Json) -> usize {
    shape(value).1
}

/// Items of the largest list or map in `value`, and its nesting depth, in
/// one walk.
fn shape(value: &Json) -> (u64, usize) {
    let mut largest = 0usize;
    let mut depth = 0usize;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        depth = depth.max(d);
        match v {
            Json::Array(items) => {
                largest = largest.max(items.len());
                stack.extend(items.iter().map(|item| (item, d + 1)));
            }
            Json::Object(fields) => {
                largest = largest.max(fields.len());
                stack.extend(fields.values().map(|item| (item, d + 1)));
            }
            _ => {}
        }
    }
    (u64::try_from(largest).unwrap_or(u64::MAX), depth)
}

/// [`shape`] of a [`Node`]: recursive, visiting no scalar (a parsed node
/// is at most serde_json's 128 levels deep; past [`MAX_VALUE_DEPTH`] it
/// measures with a stack of its own all the same).
fn node_shape(node: &Node) -> (u64, usize) {
    fn walk(node: &Node, depth: usize, largest: &mut usize) -> usize {
        match node {
            Node::Array(items) => walk_items(items.len(), items.iter(), depth, largest),
            Node::Object(members) => walk_items(members.len(), members.values(), depth, largest),
            _ => depth,
        }
    }
    fn walk_items<'n>(
        len: usize,
        items: impl Iterator<Item = &'n Node>,
        depth: usize,
        largest: &mut usize,
    ) -> usize {
        *largest = (*largest).max(len);
        let mut deepest = depth;
        for item in items {
            let d = match item {
                Node::Array(_) | Node::Object(_) if depth < MAX_VALUE_DEPTH => {
                    walk(item, depth + 1, largest)
                }
                Node::Array(_) | Node::Object(_) => deep(item, depth + 1, largest),
                _ => depth + 1,
            };
            deepest = deepest.max(d);
        }
        deepest
    }
    fn deep(node: &Node, depth: usize, largest: &mut usize) -> usize {
        let mut deepest = depth;
        let mut stack = vec![(node, depth)];
        while let Some((v, d)) = stack.pop() {
            deepest = deepest.max(d);
            match v {
                Node::Array(items) => {
                    *largest = (*largest).max(items.len());
                    stack.extend(items.iter().map(|item| (item, d + 1)));
                }
                Node::Object(members) => {
                    *largest = (*largest).max(members.len());
                    stack.extend(members.values().map(|item| (item, d + 1)));
                }
                _ => {}
            }
        }
        deepest
    }
    let mut largest = 0usize;
    let depth = walk(node, 0, &mut largest);
    (u64::try_from(largest).unwrap_or(u64::MAX), depth)
}

/// A value to be bound in many evaluations; cheap to clone. It is either
/// JSON (converted to [`native`]'s values, and to the interpreter's, only
/// when an evaluation needs them), a result of [`native`] kept as it is (a
/// variable's list of containers stays borrowed from the request; its JSON
/// is built only when asked for), or a map of variables, each converted
/// once. `'a` is how long the values such a result borrows live: the
/// bound JSON and the program.
#[derive(Clone, Debug)]
pub struct CelValue<'a>(Rc<ValueData<'a>>);

#[derive(Clone, Debug)]
struct ValueData<'a> {
    kind: ValueKind<'a>,
    /// The interpreter's value, converted on first use.
    cel: OnceCell<Result<Value, ValueError>>,
    /// The JSON of a [`ValueKind::Native`] value, built on first use.
    json: OnceCell<Json>,
    /// [`native`]'s value of a [`ValueKind::Json`] value, built on first use.
    owned: OnceCell<native::V<'static>>,
    /// Items of the largest list or map in it (for the cost estimate).
    largest: u64,
    /// Nesting depth: beyond `MAX_VALUE_DEPTH` it cannot be converted.
    depth: usize,
}

#[derive(Clone, Debug)]
enum ValueKind<'a> {
    Json(Json),
    /// A result of [`native`], whose JSON [`native::to_json`] gives (it is
    /// kept only where that conversion succeeds).
    Native(native::V<'a>),
    /// A map of variables, each converted once.
    Fields(native::Fields<'a>),
    /// A value that cannot be converted, and why.
    Failed(ValueError),
}

impl<'a> CelValue<'a> {
    pub fn from_json(json: &Json) -> CelValue<'a> {
        CelValue::from_owned_json(json.clone())
    }

    pub fn from_owned_json(json: Json) -> CelValue<'a> {
        let (largest, depth) = shape(&json);
        CelValue::new(ValueKind::Json(json), largest, depth)
    }

    /// A result of [`native`], as `CelValue::from_owned_json` of its JSON
    /// would be; `None` where that JSON cannot be made.
    fn from_native(value: native::V<'a>) -> Option<CelValue<'a>> {
        let (largest, depth) = native::result_shape(&value, 0)?;
        Some(CelValue::new(ValueKind::Native(value), largest, depth))
    }

    /// The JSON value (`null` for a map of variables, which is never a
    /// result).
    pub fn as_json(&self) -> &Json {
        static NULL: Json = Json::Null;
        self.json().unwrap_or(&NULL)
    }

    fn new(kind: ValueKind<'a>, largest: u64, depth: usize) -> CelValue<'a> {
        CelValue(Rc::new(ValueData {
            kind,
            cel: OnceCell::new(),
            json: OnceCell::new(),
            owned: OnceCell::new(),
            largest,
            depth,
        }))
    }

    /// Items of the largest list or map in the value.
    pub fn largest(&self) -> u64 {
        self.0.largest
    }

    fn depth(&self) -> usize {
        self.0.depth
    }

    /// The field `name` of a map of variables.
    pub(crate) fn field(&self, name: &str) -> Option<&CelValue<'a>> {
        self.fields()?.get(name)
    }

    fn fields(&self) -> Option<&native::Fields<'a>> {
        match &self.0.kind {
            ValueKind::Fields(fields) => Some(fields),
            _ => None,
        }
    }

    fn json(&self) -> Option<&Json> {
        match &self.0.kind {
            ValueKind::Json(json) => Some(json),
            // `from_native` kept it only where the conversion succeeds.
            ValueKind::Native(v) => Some(
                self.0
                    .json
                    .get_or_init(|| native::to_json(v, 0).unwrap_or(Json::Null)),
            ),
            _ => None,
        }
    }

    /// [`native`]'s value (`None`: one too deep for the interpreter).
    fn native(&self) -> Option<native::V<'a>> {
        if self.depth() > MAX_VALUE_DEPTH {
            // The interpreter cannot bind it: let it say why.
            return None;
        }
        Some(match &self.0.kind {
            ValueKind::Native(v) => v.clone(),
            ValueKind::Fields(_) => native::V::Fields(self.clone()),
            ValueKind::Json(json) => self.0.owned.get_or_init(|| native::V::owned(json)).clone(),
            ValueKind::Failed(_) => return None,
        })
    }

    /// Why the value cannot be converted, if it cannot.
    fn failure(&self) -> Option<ValueError> {
        match &self.0.kind {
            ValueKind::Failed(e) => Some(e.clone()),
            _ if self.0.depth > MAX_VALUE_DEPTH => Some(ValueError::ValueTooDeep),
            ValueKind::Fields(fields) => fields.values().find_map(CelValue::failure),
            ValueKind::Json(_) | ValueKind::Native(_) => None,
        }
    }

    /// The interpreter's value.
    fn cel(&self) -> &Result<Value, ValueError> {
        self.0.cel.get_or_init(|| match &self.0.kind {
            ValueKind::Json(_) | ValueKind::Native(_) => convert::json_to_cel(self.as_json(), 0),
            ValueKind::Fields(fields) => fields
                .iter()
                .map(|(k, v)| Ok((Key::String(Arc::new(k.clone())), v.cel().clone()?)))
                .collect::<Result<HashMap<_, _>, ValueError>>()
                .map(|map| Value::Map(Map { map: Arc::new(map) })),
            ValueKind::Failed(e) => Err(e.clone()),
        })
    }

    /// An empty map (the `variables` of a Katalog without variables).
    pub fn empty_map() -> CelValue<'a> {
        CelValue::new(ValueKind::Fields(native::Fields::new()), 0, 0)
    }

    /// [`with_field`](Self::with_field) in place: the other fields are not
    /// copied when this value is not shared.
    pub fn set_field(&mut self, name: &str, value: &CelValue<'a>) {
        if !matches!(self.0.kind, ValueKind::Fields(_))
            || self.failure().is_some()
            || value.failure().is_some()
        {
            *self = self.with_field(name, value);
            return;
        }
        let data = Rc::make_mut(&mut self.0);
        if let ValueKind::Fields(fields) = &mut data.kind {
            fields.insert(name.to_owned(), value.clone());
            (data.largest, data.depth) = summary(fields);
        }
        data.cel = OnceCell::new();
    }

    /// This map with `name` set to `value`: the same CEL value as the JSON
    /// object with the field added. An unconvertible field makes the whole
    /// map unconvertible, as it does in JSON.
    pub fn with_field(&self, name: &str, value: &CelValue<'a>) -> CelValue<'a> {
        let mut fields = match &self.0.kind {
            ValueKind::Fields(fields) => fields.clone(),
            ValueKind::Json(Json::Object(object)) => object
                .iter()
                .map(|(k, v)| (k.clone(), CelValue::from_json(v)))
                .collect(),
            ValueKind::Json(_) | ValueKind::Native(_) => {
                return CelValue::new(ValueKind::Failed(ValueError::NotAMap), 0, 0);
            }
            ValueKind::Failed(e) => {
                return CelValue::new(ValueKind::Failed(e.clone()), self.largest(), 0);
            }
        };
        if let Some(e) = self.failure().or_else(|| value.failure()) {
            let largest = self.largest().max(value.largest());
            return CelValue::new(ValueKind::Failed(e), largest, 0);
        }
        fields.insert(name.to_owned(), value.clone());
        let (largest, depth) = summary(&fields);
        CelValue::new(ValueKind::Fields(fields), largest, depth)
    }
}

/// [`shape`] of a map of variables: its own size counts, and each field's
/// largest collection; it converts as deep as its deepest field (the map is
/// built from the fields' converted values).
fn summary(fields: &native::Fields<'_>) -> (u64, usize) {
    let largest = fields
        .values()
        .map(CelValue::largest)
        .fold(u64::try_from(fields.len()).unwrap_or(u64::MAX), u64::max);
    let depth = fields.values().map(CelValue::depth).max().unwrap_or(0);
    (largest, depth)
}

/// A value bound for one evaluation; `'a`: what a result may borrow.
#[derive(Clone, Copy, Debug)]
pub enum CelArg<'r, 'a> {
    /// Converted already.
    Value(&'r CelValue<'a>),
    /// A part of a value bound in the shared [`CelBindings`] (`self`,
    /// `element`): converted only when the expression reads it.
    Part(Bound<'a>),
    /// A small value made for this evaluation (`elementIndex`): like
    /// `Part`, copied where an evaluation reads it.
    Copied(&'r Json),
}

/// Values bound once for many evaluations (an admission request's `object`,
/// `oldObject`, `request`, ...): read in place by [`native`], converted to
/// the interpreter's values once, when it first needs them.
pub struct CelBindings<'a> {
    vars: Vec<(String, Bound<'a>)>,
    ctx: OnceCell<Result<Context<'static>, (String, ValueError)>>,
    /// The first value that is nested too deeply to convert: every
    /// evaluation fails with it, as it would binding the JSON values.
    failed: Option<(String, ValueError)>,
    largest: u64,
}

impl fmt::Debug for CelBindings<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelBindings")
            .field("failed", &self.failed)
            .field("largest", &self.largest)
            .finish_non_exhaustive()
    }
}

/// A value bound in [`CelBindings`]: JSON, or a request's object, which
/// the evaluator reads as a [`Node`] while it has one (the interpreter, and
/// anything else, as JSON).
#[derive(Clone, Copy, Debug)]
pub enum Bound<'a> {
    Json(&'a Json),
    Obj(&'a Obj),
}

impl<'a> Bound<'a> {
    /// The value as JSON (converting an object read as a node).
    fn json(self) -> &'a Json {
        match self {
            Bound::Json(json) => json,
            Bound::Obj(obj) => obj,
        }
    }

    fn native(self) -> native::V<'a> {
        match self {
            Bound::Obj(obj) => match obj.node() {
                Some(node) => native::V::from_node(node),
                None => native::V::from_json(obj),
            },
            Bound::Json(json) => native::V::from_json(json),
        }
    }

    fn shape(self) -> (u64, usize) {
        match self {
            Bound::Obj(obj) => match obj.node() {
                Some(node) => node_shape(node),
                None => shape(obj),
            },
            Bound::Json(json) => shape(json),
        }
    }
}

impl<'a> CelBindings<'a> {
    pub fn new(vars: &[(&str, &'a Json)]) -> CelBindings<'a> {
        let bound: Vec<(&str, Bound<'a>)> = vars
            .iter()
            .map(|(name, json)| (*name, Bound::Json(json)))
            .collect();
        CelBindings::with(&bound)
    }

    /// [`CelBindings::new`] with request objects that may be read as nodes.
    pub fn with(vars: &[(&str, Bound<'a>)]) -> CelBindings<'a> {
        let mut failed = None;
        let mut largest = 0;
        for (name, bound) in vars {
            let (items, depth) = bound.shape();
            largest = largest.max(items);
            if failed.is_none() && depth > MAX_VALUE_DEPTH {
                failed = Some(((*name).to_owned(), ValueError::ValueTooDeep));
            }
        }
        CelBindings {
            vars: vars.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect(),
            ctx: OnceCell::new(),
            failed,
            largest,
        }
    }

    /// The interpreter's scope with every value bound.
    fn ctx(&self) -> Result<&Context<'static>, &(String, ValueError)> {
        self.ctx
            .get_or_init(|| {
                let mut ctx = functions::base_context().new_inner_scope();
                for (name, bound) in &self.vars {
                    let value =
                        convert::json_to_cel(bound.json(), 0).map_err(|e| (name.clone(), e))?;
                    ctx.add_variable_from_value(name.as_str(), value);
                }
                Ok(ctx)
            })
            .as_ref()
    }
}

/// Runs `f`, turning a panic into an error message.
///
/// Why `catch_unwind` is needed here: cel 0.13's interpreter still contains
/// panicking paths reachable from expression text and runtime values (for
/// instance `todo!()` in its variadic-argument extractor and `expect()` in its
/// internal value and map-key conversions), and the Kubernetes extension
/// functions from `kube-cel` are third-party code evaluated on untrusted
/// admission payloads. A panic inside a webhook request must become a failed
/// evaluation, not a crashed worker. Known panics are rejected up front
/// (`prepare`, depth limits); this is the safety net for the rest.
///
/// Unwind safety: every evaluation builds its own child `Context` and the
/// closure only borrows immutable data (the parsed expression, the shared
/// base context), so nothing observable is left half-updated by a panic. The
/// only shared mutable state, the regex cache, is a `Mutex` whose poisoning
/// is ignored on purpose (it only ever holds fully built entries).
///
/// Two limits: this cannot help if the binary is built with
/// `panic = "abort"`, and the process-wide panic hook still runs (by default
/// it prints the panic message to stderr); the hook is deliberately left
/// alone because it is global state owned by the application.
fn run_guarded<T>(f: impl FnOnce() -> T) -> Result<T, InterpreterPanic> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panic_message(payload.as_ref()))
}

fn panic_message(payload: &(dyn Any + Send)) -> InterpreterPanic {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_owned());
    InterpreterPanic { detail }
}

/// The parsed and checked expression, with its static cost estimate
/// ([`cost::estimate`], on the tree before katalog's macro expansion).
type Parsed = (IdedExpr, Result<cost::Estimate, cost::Unsupported>);

fn parse_and_check(expr: &str, typed: bool) -> Result<Parsed, CompileFailure> {
    let lexed = unary::lex(expr);
    if let Some(at) = lexed.backtick {
        let (at, snippet) = position::caret_at(expr, at);
        return Err(CompileFailure::QuotedIdentifier { at, snippet });
    }
    let mut ast = Parser::new()
        .enable_optional_syntax(true)
        .max_recursion_depth(MAX_PARSE_DEPTH)
        .parse(&lexed.text)
        .map_err(|errors| CompileFailure::Syntax(errors.to_string()))?;
    let estimate = cost::estimate(&ast);
    type_values::rewrite_qualified(&mut ast);
    macros::expand(&mut ast).map_err(|e| {
        let (at, snippet) = position::caret_at_call(expr, &e.name);
        CompileFailure::Syntax(format!("ERROR: {at}: {}: {}\n{snippet}", e.name, e.reason))
    })?;
    // On rejection the (possibly very deep) tree is dropped here, still on
    // the parser thread's large stack.
    prepare(&mut ast, 0)?;
    time::wrap_arithmetic(&mut ast);
    if let Some(name) = unknown_function(&ast) {
        let (at, snippet) = position::caret_at_call(expr, &name);
        return Err(CompileFailure::UnknownFunction {
            hint: unknown_function_hint(&name),
            at,
            snippet,
            name,
        });
    }
    if let Some(error) = format::check_literal_calls(&ast) {
        let (at, snippet) = position::caret_at_call(expr, "format");
        return Err(CompileFailure::Syntax(format!(
            "ERROR: {at}: {error}\n{snippet}"
        )));
    }
    let (_, errors) = types::check_ast(&ast, expr, &types::Env::default(), true);
    if typed && !errors.is_empty() {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(CompileFailure::Type(errors.join("\n")));
    }
    Ok((ast, estimate))
}

/// Every function the interpreter's context has ([`base_context`]: cel's
/// own, kube-cel's and this module's), by the name cel looks it up: `name`
/// for `f(x)` and `x.f()` alike, `ns.name` for a namespaced call
/// (`optional.none()`). A call of any other name passes the parser and
/// fails every evaluation ("Undeclared reference"), so
/// [`CelProgram::compile`] refuses it; a unit test calls each of these
/// through the interpreter.
#[rustfmt::skip]
const FUNCTION_NAMES: &[&str] = &[
    // cel 0.13
    "contains", "size", "max", "min", "startsWith", "endsWith", "string", "bytes", "double", "int",
    "uint", "bool", "optional.none", "optional.of", "optional.ofNonZeroValue", "value", "hasValue", "or",
    "orValue", "matches", "duration", "timestamp", "getFullYear", "getMonth", "getDayOfYear",
    "getDayOfMonth", "getDate", "getDayOfWeek", "getHours", "getMinutes", "getSeconds",
    "getMilliseconds",
    // kube-cel: strings, lists, sets, regex, urls
    "charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split",
    "substring", "trim", "join", "reverse", "strings.quote", "format", "isSorted", "sum", "slice",
    "sort", "flatten", "distinct", "first", "last", "lists.range", "sets.contains",
    "sets.equivalent", "sets.intersects", "find", "findAll", "url", "isURL", "getScheme",
    "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
    // kube-cel: ip and cidr
    "ip", "isIP", "ip.isCanonical", "family", "isLoopback", "isUnspecified",
    "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "isIPv4", "isIPv6", "cidr",
    "isCIDR", "containsIP", "containsCIDR", "prefixLength", "masked", "isCIDRv4", "isCIDRv6",
    // kube-cel: quantity, semver, comparisons
    "quantity", "isQuantity", "isInteger", "asInteger", "asApproximateFloat", "sign", "add", "sub",
    "semver", "isSemver", "major", "minor", "patch", "isGreaterThan", "isLessThan", "compareTo",
    // kube-cel: named formats, jsonpatch, encoders, math
    "format.dns1123Label", "format.dns1123Subdomain", "format.dns1035Label",
    "format.dns1035LabelPrefix", "format.dns1123LabelPrefix", "format.dns1123SubdomainPrefix",
    "format.qualifiedName", "format.labelValue", "format.uri", "format.uuid", "format.byte",
    "format.date", "format.datetime", "format.named", "validate", "jsonpatch.escapeKey",
    "base64.decode", "base64.encode", "math.ceil", "math.floor", "math.round", "math.trunc",
    "math.abs", "math.sign", "math.isInf", "math.isNaN", "math.isFinite", "math.bitAnd",
    "math.bitOr", "math.bitXor", "math.bitNot", "math.bitShiftLeft", "math.bitShiftRight",
    "math.sqrt", "math.greatest", "math.least",
    // this module
    "dyn", "type",
];

/// The first call in `expr` of a function the interpreter does not have
/// (see [`FUNCTION_NAMES`]); operators (`_+_`, `@in`, ...) are the
/// interpreter's own.
fn unknown_function(expr: &IdedExpr) -> Option<String> {
    let mut found = None;
    visit(expr, &mut |e| {
        let Expr::Call(call) = &e.expr else {
            return;
        };
        let name = call.func_name.as_str();
        if found.is_some() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return;
        }
        let namespaced = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns)) => FUNCTION_NAMES.contains(&format!("{ns}.{name}").as_str()),
            _ => false,
        };
        if !namespaced && !FUNCTION_NAMES.contains(&name) {
            found = Some(match call.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(ns)) if FUNCTION_NAMESPACES.contains(&ns.as_str()) => {
                    format!("{ns}.{name}")
                }
                _ => name.to_owned(),
            });
        }
    });
    found
}

/// Calls `f` on every node of `expr`, parents first.
fn visit(expr: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    f(expr);
    for child in ast::children(expr) {
        visit(child, f);
    }
}

/// What to write instead of a function cel-go has and this evaluator does
/// not, or the nearest name it has.
fn unknown_function_hint(name: &str) -> String {
    match name {
        "sortBy" => "`sortBy` is a macro: `list.sortBy(e, key)` takes a variable and an \
                     expression"
            .into(),
        "optMap" | "optFlatMap" => {
            format!("`{name}` is a macro: `optional.{name}(x, expression)`")
        }
        "all" | "exists" | "exists_one" | "existsOne" | "map" | "filter" => {
            format!(
                "`{name}` is a macro: `list.{name}(x, predicate)` takes a variable and an \
                 expression (`all`, `exists` and `existsOne` also two: `list.{name}(i, v, p)`)"
            )
        }
        "transformList" | "transformMap" | "transformMapEntry" => format!(
            "`{name}` is a macro: `x.{name}(i, v, expression)` or `x.{name}(i, v, filter, \
             expression)`"
        ),
        _ => match crate::error::did_you_mean(name, FUNCTION_NAMES.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => "see docs/reference/cel-functions.md#cel-functions for the functions there are"
                .into(),
        },
    }
}

/// Namespaces of the functions registered as `NAMESPACE.name`.
const FUNCTION_NAMESPACES: &[&str] = &[
    "optional",
    "math",
    "format",
    "sets",
    "lists",
    "strings",
    "ip",
    "net",
    "jsonpatch",
    "base64",
];

fn push_once(out: &mut Vec<String>, name: &str) {
    if !out.iter().any(|n| n == name) {
        out.push(name.to_owned());
    }
}

fn walk_identifiers(expr: &IdedExpr, scope: &mut Vec<String>, out: &mut Vec<String>) {
    match &expr.expr {
        Expr::Ident(name) => {
            // A type name (`int`, `google.protobuf.Timestamp`) is a value
            // of the interpreter's root context, not a variable to bind.
            if !scope.iter().any(|s| s == name) && !type_values::NAMES.contains(&name.as_str()) {
                push_once(out, name);
            }
        }
        Expr::Select(select) => walk_identifiers(&select.operand, scope, out),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                let namespace = matches!(&target.expr, Expr::Ident(n)
                    if FUNCTION_NAMESPACES.contains(&n.as_str()) && !scope.iter().any(|s| s == n));
                if !namespace {
                    walk_identifiers(target, scope, out);
                }
            }
            for arg in &call.args {
                walk_identifiers(arg, scope, out);
            }
        }
        Expr::List(list) => {
            for e in &list.elements {
                walk_identifiers(e, scope, out);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(e) = &entry.expr {
                    walk_identifiers(&e.key, scope, out);
                    walk_identifiers(&e.value, scope, out);
                }
            }
        }
        Expr::Comprehension(c) => {
            walk_identifiers(&c.iter_range, scope, out);
            walk_identifiers(&c.accu_init, scope, out);
            let before = scope.len();
            scope.push(c.iter_var.clone());
            if let Some(v) = &c.iter_var2 {
                scope.push(v.clone());
            }
            scope.push(c.accu_var.clone());
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                walk_identifiers(e, scope, out);
            }
            scope.truncate(before);
        }
        Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
    }
}

fn walk_variables(expr: &IdedExpr, out: &mut Vec<String>) {
    let is_variables = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == "variables");
    visit(expr, &mut |e| match &e.expr {
        Expr::Select(select) if is_variables(&select.operand) => push_once(out, &select.field),
        Expr::Call(call)
            if call.target.is_none() && call.args.len() == 2 && is_variables(&call.args[0]) =>
        {
            if let Expr::Literal(LiteralValue::String(name)) = &call.args[1].expr {
                push_once(out, name.as_ref());
            }
        }
        _ => {}
    });
}

/// How each identifier is used: only by field (the fields), or otherwise
/// too (`None`). A name a comprehension binds counts as used otherwise.
fn walk_field_uses(expr: &IdedExpr, out: &mut Vec<(String, Option<Vec<String>>)>) {
    fn note(out: &mut Vec<(String, Option<Vec<String>>)>, name: &str, field: Option<&str>) {
        let at = match out.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                out.push((name.to_owned(), Some(Vec::new())));
                out.len() - 1
            }
        };
        match (&mut out[at].1, field) {
            (Some(fields), Some(f)) => {
                if !fields.iter().any(|x| x == f) {
                    fields.push(f.to_owned());
                }
            }
            (uses, _) => *uses = None,
        }
    }
    match &expr.expr {
        Expr::Select(select) => match &select.operand.expr {
            Expr::Ident(name) => note(out, name, Some(&select.field)),
            _ => walk_field_uses(&select.operand, out),
        },
        Expr::Call(call) => {
            if is_index(call)
                && let Expr::Ident(name) = &call.args[0].expr
                && let Expr::Literal(LiteralValue::String(field)) = &call.args[1].expr
            {
                note(out, name, Some(field.inner()));
                return;
            }
            if let Some(target) = &call.target {
                walk_field_uses(target, out);
            }
            for arg in &call.args {
                walk_field_uses(arg, out);
            }
        }
        Expr::Ident(name) => note(out, name, None),
        Expr::List(list) => list.elements.iter().for_each(|e| walk_field_uses(e, out)),
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(e) = &entry.expr {
                    walk_field_uses(&e.key, out);
                    walk_field_uses(&e.value, out);
                }
            }
        }
        Expr::Comprehension(c) => {
            for name in [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)]
                .into_iter()
                .flatten()
            {
                note(out, name, None);
            }
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk_field_uses(e, out);
            }
        }
        Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
    }
}

/// What [`CelProgram::selections`] walks with: the roots, the
/// comprehension variables in scope (innermost last; `None` for one that
/// stands for no field), and the chains found so far.
struct SelectionWalk<'r> {
    roots: &'r [(&'r str, &'r crate::path::Path)],
    bound: Vec<(String, Option<Vec<crate::path::Segment>>)>,
    out: Vec<crate::path::Path>,
}

/// `x['f']`: an index by a string literal (what `prepare` makes of `x.f`).
fn is_field_index(call: &CallExpr) -> bool {
    call.target.is_none()
        && call.func_name == operators::INDEX
        && matches!(&call.args[..], [_, key] if matches!(key.expr, Expr::Literal(LiteralValue::String(_))))
}

/// `x[k]`, `x[?k]` or `x.?k`: the call form of an index or optional
/// selection on `args[0]` by `args[1]`.
fn is_index(call: &CallExpr) -> bool {
    call.target.is_none()
        && call.args.len() == 2
        && [
            operators::INDEX,
            operators::OPT_INDEX,
            operators::OPT_SELECT,
        ]
        .contains(&call.func_name.as_str())
}

impl SelectionWalk<'_> {
    /// The path `expr` stands for, if it is a root, a bound variable, or a
    /// chain of selections and indexes on one.
    fn resolve(&self, expr: &IdedExpr) -> Option<Vec<crate::path::Segment>> {
        use crate::path::Segment;
        match &expr.expr {
            Expr::Ident(name) => match self.bound.iter().rev().find(|(n, _)| n == name) {
                Some((_, path)) => path.clone(),
                None => self
                    .roots
                    .iter()
                    .find(|(root, _)| root == name)
                    .map(|(_, path)| path.segments().to_vec()),
            },
            Expr::Select(select) => {
                let mut path = self.resolve(&select.operand)?;
                path.push(Segment::Key(select.field.clone()));
                Some(path)
            }
            Expr::Call(call) if is_index(call) => {
                let mut path = self.resolve(&call.args[0])?;
                path.push(match &call.args[1].expr {
                    Expr::Literal(LiteralValue::String(key)) => {
                        Segment::Key(key.inner().to_string())
                    }
                    Expr::Literal(LiteralValue::Int(i)) => {
                        usize::try_from(*i.inner()).map_or(Segment::Wildcard, Segment::Index)
                    }
                    Expr::Literal(LiteralValue::UInt(u)) => {
                        usize::try_from(*u.inner()).map_or(Segment::Wildcard, Segment::Index)
                    }
                    _ => Segment::Wildcard,
                });
                Some(path)
            }
            _ => None,
        }
    }

    fn walk(&mut self, expr: &IdedExpr) {
        if let Some(path) = self.resolve(expr) {
            let path = crate::path::Path::from_segments(path);
            let is_root = self.roots.iter().any(|(_, root)| **root == path);
            if !is_root && !self.out.contains(&path) {
                self.out.push(path);
            }
        }
        match &expr.expr {
            Expr::Select(select) => self.walk(&select.operand),
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target);
                }
                for arg in &call.args {
                    self.walk(arg);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(|e| self.walk(e)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(e) = &entry.expr {
                        self.walk(&e.key);
                        self.walk(&e.value);
                    }
                }
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range);
                self.walk(&c.accu_init);
                let elements = self.resolve(&c.iter_range).map(|mut path| {
                    path.push(crate::path::Segment::Wildcard);
                    path
                });
                let before = self.bound.len();
                match &c.iter_var2 {
                    // Two variables: an index (or key) and the element.
                    Some(value) => {
                        self.bound.push((c.iter_var.clone(), None));
                        self.bound.push((value.clone(), elements));
                    }
                    None => self.bound.push((c.iter_var.clone(), elements)),
                }
                self.bound.push((c.accu_var.clone(), None));
                for e in [&c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(e);
                }
                self.bound.truncate(before);
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
        }
    }
}

/// Name under which `heterogeneous_eq` is registered; `_==_` calls are
/// rewritten to it. Starts with `@` so expressions cannot spell it.
const EQ_FUNCTION: &str = "@katalog_eq";
/// Name under which `heterogeneous_ne` is registered (replaces `_!=_`).
const NE_FUNCTION: &str = "@katalog_ne";
/// Name under which `heterogeneous_in` is registered (replaces `@in`).
const IN_FUNCTION: &str = "@katalog_in";
/// Name under which `checked_negate` is registered (replaces `-_`).
const NEG_FUNCTION: &str = "@katalog_neg";

/// Checks a parsed expression and rewrites the few constructs cel 0.13
/// evaluates incorrectly, in place.
///
/// Rejected (cel 0.13 would panic evaluating them): `Expr::Struct` (hits a
/// `todo!()`), `Expr::Unspecified` and struct-field entries in map literals
/// (hit `panic!()`); trees deeper than `MAX_AST_DEPTH`.
///
/// Rewritten:
/// * `a == b`, `a != b`, `a in b`: cel 0.13 compares values of different
///   numeric types as unequal (`1 == 1.0`, `1 == 1u` and `1.0 in [1]` are all
///   false), unlike the CEL spec and cel-go/Kubernetes. They become calls to
///   functions implementing the spec's heterogeneous numeric equality.
/// * `x.?f`: cel 0.13 fails with "No such key" when `x` is a map without `f`
///   instead of producing `optional.none()`. It becomes the equivalent
///   optional index `x[?'f']`, which cel evaluates correctly.
/// * `x.f`: cel 0.13 evaluates a selection on a value that is not a map
///   (`null.f`, `'abc'.f`) to `false`, where cel-go fails; so a rule
///   reading below a null field passed (`!object.spec.x.enabled` was
///   `true` with `x: null`). It becomes the index `x['f']`, which fails
///   there ("No such overload") and reads a map exactly as the selection
///   did ("No such key: f" when it lacks `f`). `has(x.f)` stays.
/// * `x.?f.g`, `x.?f[k]`: as in cel-go, selections and indexes that follow an
///   optional selection are optional too (none if anything along the chain
///   is absent). cel 0.13 instead evaluates a plain selection on an optional
///   value to `false`. They become `x[?'f'][?'g']` and `x[?'f'][?k]`.
/// * `-x`: cel 0.13 negates an int with wrapping arithmetic, so
///   `-(-9223372036854775807 - 1)` was itself where cel-go fails with
///   "integer overflow" (and a debug build panicked). It becomes a call to
///   [`checked_negate`], which the interpreter dispatches by name.
///
/// Returns whether `expr` is such an optional chain (produces an optional).
fn prepare(expr: &mut IdedExpr, depth: usize) -> Result<bool, CompileFailure> {
    if depth > MAX_AST_DEPTH {
        return Err(CompileFailure::TooDeep);
    }
    let depth = depth + 1;
    match &mut expr.expr {
        Expr::Unspecified => Err(CompileFailure::UnspecifiedNode),
        Expr::Struct(s) => {
            expr.expr = wkt::rewrite(s).map_err(|refused| match refused {
                wkt::Refused::Type(type_name) => CompileFailure::MessageConstruction { type_name },
                wkt::Refused::Field { type_name, field } => {
                    CompileFailure::UndefinedField { type_name, field }
                }
            })?;
            prepare(expr, depth)
        }
        Expr::Literal(_) | Expr::Ident(_) => Ok(false),
        Expr::Select(select) => {
            let optional_operand = prepare(&mut select.operand, depth)?;
            if select.test && (optional_operand || makes_optional(&select.operand)) {
                // `has(o.f)` of an optional `o` is whether `o` has a value
                // with `f` (cel 0.13: always false). The two calls share
                // the node's id, so the evaluator over JSON leaves it to
                // the interpreter.
                let operand = std::mem::take(&mut *select.operand);
                let field = IdedExpr {
                    id: expr.id,
                    expr: Expr::Literal(LiteralValue::String(
                        std::mem::take(&mut select.field).into(),
                    )),
                };
                let index = IdedExpr {
                    id: expr.id,
                    expr: Expr::Call(CallExpr {
                        func_name: operators::OPT_INDEX.to_owned(),
                        target: None,
                        args: vec![operand, field],
                    }),
                };
                expr.expr = Expr::Call(CallExpr {
                    func_name: "hasValue".to_owned(),
                    target: Some(Box::new(index)),
                    args: Vec::new(),
                });
                return Ok(false);
            }
            if select.test {
                return Ok(false);
            }
            let operand = std::mem::take(&mut *select.operand);
            let field = IdedExpr {
                id: expr.id,
                expr: Expr::Literal(LiteralValue::String(
                    std::mem::take(&mut select.field).into(),
                )),
            };
            expr.expr = Expr::Call(CallExpr {
                func_name: if optional_operand {
                    operators::OPT_INDEX
                } else {
                    operators::INDEX
                }
                .to_owned(),
                target: None,
                args: vec![operand, field],
            });
            Ok(optional_operand)
        }
        Expr::Call(call) => {
            if let Some(target) = &mut call.target {
                prepare(target, depth)?;
            }
            let mut optional_first_arg = false;
            for (i, arg) in call.args.iter_mut().enumerate() {
                let optional = prepare(arg, depth)?;
                optional_first_arg |= i == 0 && optional;
            }
            if call.target.is_none() && call.args.len() == 1 && call.func_name == operators::NEGATE
            {
                NEG_FUNCTION.clone_into(&mut call.func_name);
            }
            if call.target.is_none() && call.args.len() == 2 {
                let replacement = match call.func_name.as_str() {
                    operators::EQUALS => Some(EQ_FUNCTION),
                    operators::NOT_EQUALS => Some(NE_FUNCTION),
                    operators::IN => Some(IN_FUNCTION),
                    operators::OPT_SELECT => Some(operators::OPT_INDEX),
                    operators::INDEX if optional_first_arg => Some(operators::OPT_INDEX),
                    _ => None,
                };
                if let Some(name) = replacement {
                    name.clone_into(&mut call.func_name);
                }
            }
            Ok(call.func_name == operators::OPT_INDEX)
        }
        Expr::List(list) => {
            for element in &mut list.elements {
                prepare(element, depth)?;
            }
            Ok(false)
        }
        Expr::Map(map) => {
            for entry in &mut map.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(e) => {
                        prepare(&mut e.key, depth)?;
                        prepare(&mut e.value, depth)?;
                    }
                    EntryExpr::StructField(f) => {
                        return Err(CompileFailure::StructField {
                            field: f.field.clone(),
                        });
                    }
                }
            }
            Ok(false)
        }
        Expr::Comprehension(c) => {
            let c = &mut **c;
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                prepare(e, depth)?;
            }
            Ok(false)
        }
    }
}

/// Whether `expr` is a call that gives an optional: `optional.of(x)`,
/// `optional.ofNonZeroValue(x)`, `optional.none()`, `o.or(p)`.
fn makes_optional(expr: &IdedExpr) -> bool {
    let Expr::Call(call) = &expr.expr else {
        return false;
    };
    match call.target.as_deref().map(|t| &t.expr) {
        Some(Expr::Ident(ns)) if ns == "optional" => {
            matches!(call.func_name.as_str(), "of" | "ofNonZeroValue" | "none")
        }
        Some(_) => call.func_name == "or" && call.args.len() == 1,
        None => false,
    }
}

/// `_==_` with the CEL spec's semantics: values of different types are
/// unequal, except numbers, which compare by numeric value (`1 == 1u`,
/// `1 == 1.0`), also inside lists and maps. This is `cel::Value`'s
/// `PartialEq`, which cel 0.13's interpreter does not use for `==`.
fn heterogeneous_eq(a: Value, b: Value) -> bool {
    a == b
}

/// `_!=_`, the negation of [`heterogeneous_eq`].
fn heterogeneous_ne(a: Value, b: Value) -> bool {
    a != b
}

/// `dyn(x)`: only meaningful to a type checker, which cel 0.13 does not have;
/// registered so Kubernetes rules that use it still evaluate.
fn dyn_identity(value: Value) -> Result<Value, ExecutionError> {
    Ok(value)
}

/// `@in`: list membership by [`heterogeneous_eq`]; map key presence, where
/// a double key matches an equal int/uint key (`1.0 in {1: 'a'}`).
fn heterogeneous_in(element: Value, container: Value) -> Result<bool, ExecutionError> {
    match container {
        Value::List(items) => Ok(items.contains(&element)),
        Value::Map(map) => {
            let key = match element {
                Value::String(s) => return Ok(map.get(&KeyRef::String(s.as_str())).is_some()),
                Value::Int(i) => KeyRef::Int(i),
                Value::UInt(u) => KeyRef::Uint(u),
                Value::Bool(b) => KeyRef::Bool(b),
                Value::Float(f) => {
                    // A double matches only if it is integral and in range.
                    if f.fract() != 0.0 || !f.is_finite() {
                        return Ok(false);
                    }
                    if f >= -(2f64.powi(63)) && f < 2f64.powi(63) {
                        KeyRef::Int(f as i64)
                    } else if f >= 0.0 && f < 2f64.powi(64) {
                        KeyRef::Uint(f as u64)
                    } else {
                        return Ok(false);
                    }
                }
                other => return Err(ExecutionError::UnsupportedKeyType(other)),
            };
            Ok(map.get(&key).is_some())
        }
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

#[cfg(test)]
mod tests {
    use super::convert::{base64_encode, format_go_duration};
    use super::functions::{REGEX_CACHE, RegexCache, regex_cost};
    use super::*;
    use serde_json::json;

    #[test]
    fn set_field_builds_the_map_with_field_builds() {
        let a = CelValue::from_json(&json!([1, 2, 3]));
        let b = CelValue::from_json(&json!({"x": [1, 2, 3, 4, 5]}));
        let c = CelValue::from_json(&json!("s"));
        let chained = CelValue::empty_map()
            .with_field("a", &a)
            .with_field("b", &b)
            .with_field("a", &c);
        let shared = CelValue::empty_map();
        let mut in_place = shared.clone();
        in_place.set_field("a", &a);
        in_place.set_field("b", &b);
        // Read in between: the conversion cached so far must not stay.
        assert!(in_place.cel().is_ok());
        in_place.set_field("a", &c);
        assert_eq!(in_place.cel(), chained.cel());
        assert_eq!(in_place.largest(), chained.largest());
        assert_eq!(in_place.largest(), 5);
        // The value it was cloned from is untouched.
        assert_eq!(shared.fields().map(|f| f.len()), Some(0));
    }

    #[test]
    fn the_cost_polynomial_gives_the_estimate_of_the_walk() {
        for expr in [
            "1",
            "object.spec.containers.all(c, c.ports.all(p, p.hostPort == 0))",
            "['a', 'b'].map(x, x + 'c').filter(y, y in object.l.map(z, z))",
            "[].all(x, object.l.all(y, y == x))",
            "object.l.map(a, object.l.map(b, object.l.map(c, object.l.map(d, a + b + c + d))))",
            "{'k': object.l.exists_one(x, x > 1)}",
        ] {
            let program = CelProgram::compile_unchecked(expr).unwrap();
            for n in [
                0,
                1,
                2,
                3,
                10,
                1_000,
                1 << 20,
                1 << 40,
                u64::MAX / 3,
                u64::MAX,
            ] {
                assert_eq!(
                    program.cost(n),
                    estimate(&program.inner.ast, n),
                    "`{expr}` at n = {n}"
                );
            }
        }
    }

    fn unbound(expr: &str, bound: &[&str]) -> Vec<String> {
        CelProgram::compile_unchecked(expr)
            .unwrap_or_else(|e| panic!("{e}"))
            .unbound_identifiers(bound)
    }

    #[test]
    fn unbound_identifiers_skip_macro_variables_and_function_namespaces() {
        let b = ["object", "self"];
        assert!(
            unbound(
                "self.all(c, c.name != '') && object.x.exists(k, k == 'a')",
                &b
            )
            .is_empty()
        );
        assert!(unbound("self.map(x, x + 1).filter(y, y > 2).size() > 0", &b).is_empty());
        assert!(unbound("optional.none() == self.?a && math.greatest(1, 2) == 2", &b).is_empty());
        assert!(unbound("self.exists_one(c, c == 1)", &b).is_empty());
        assert_eq!(unbound("objetc.a == self && objetc.b", &b), ["objetc"]);
        assert_eq!(unbound("self.all(c, c == d)", &b), ["d"]);
        // A macro variable does not leak out of its macro.
        assert_eq!(unbound("self.all(c, c == 1) && c == 2", &b), ["c"]);
        assert_eq!(
            unbound("[element, {'k': elementIndex}]", &b),
            ["element", "elementIndex"]
        );
    }

    #[test]
    fn variable_names_are_found_in_every_spelling() {
        let p = CelProgram::compile_unchecked(
            "variables.a + variables['b'] + variables.?c.orValue('') + variables.a + x.variables.d",
        )
        .unwrap();
        assert_eq!(p.variable_names(), ["a", "b", "c"]);
    }

    fn eval(expr: &str, vars: &[(&str, &Json)]) -> Json {
        CelProgram::compile_unchecked(expr)
            .unwrap_or_else(|e| panic!("{e}"))
            .eval(vars)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn eval0(expr: &str) -> Json {
        eval(expr, &[])
    }

    /// `size()` of a string counts code points, as in cel-go (`size(self) <=
    /// 63` rules on non-ASCII names), on both evaluators.
    #[test]
    fn size_of_a_string_counts_code_points() {
        let name = json!("πέντε-😀");
        let vars = [("self", &name)];
        for expr in [
            "size(self)",
            "self.size()",
            "size('πέντε-😀')",
            "size(b'\\xff\\x00')",
        ] {
            let want = if expr.contains("b'") { 2 } else { 7 };
            assert_eq!(eval(expr, &vars), json!(want), "{expr}");
            assert_eq!(
                interpreter_only(|| eval(expr, &vars)),
                json!(want),
                "{expr}, interpreter"
            );
        }
    }

    /// `string()` takes a bool and prints a double as cel-go does (Go's
    /// shortest form, `%e` style from 1e21 and below 1e-4), and still
    /// prints the Kubernetes values (IP, CIDR) and the other types.
    #[test]
    fn string_takes_bools_and_prints_doubles_as_cel_go() {
        let cases = [
            ("string(true)", "true"),
            ("string(1 > 2)", "false"),
            ("string(1e308)", "1e+308"),
            ("string(1e-10)", "1e-10"),
            (
                "string(double(9223372036854775807))",
                "9.223372036854776e+18",
            ),
            ("string(1000000.0)", "1e+06"),
            ("string(100000.0)", "100000"),
            ("string(1.5)", "1.5"),
            ("string(0.0001)", "0.0001"),
            ("string(-2.25)", "-2.25"),
            ("string(-0.0)", "-0"),
            ("string(42)", "42"),
            ("string(18446744073709551615u)", "18446744073709551615"),
            ("string(b'abc')", "abc"),
            ("string(ip('10.0.0.1'))", "10.0.0.1"),
            ("string(cidr('10.0.0.0/8'))", "10.0.0.0/8"),
            ("string('x')", "x"),
        ];
        for (expr, want) in cases {
            assert_eq!(eval0(expr), json!(want), "{expr}");
            assert_eq!(
                interpreter_only(|| eval0(expr)),
                json!(want),
                "{expr}, interpreter"
            );
        }
    }

    /// `split` by an empty separator gives the code points, as Go's
    /// strings.SplitN in cel-go (`''.split('')` is `[]`), on both evaluators.
    #[test]
    fn split_by_an_empty_separator_gives_the_characters() {
        let cases = [
            ("'-7'.split('')", json!(["-", "7"])),
            ("'πέ😀'.split('')", json!(["π", "έ", "😀"])),
            ("''.split('')", json!([])),
            ("''.split('x')", json!([""])),
            ("'abc'.split('', 2)", json!(["a", "bc"])),
            ("'abc'.split('', 0)", json!([])),
            ("'abc'.split('', -1)", json!(["a", "b", "c"])),
            ("'a,b,,c'.split(',')", json!(["a", "b", "", "c"])),
            ("'a,b,,c'.split(',', 2)", json!(["a", "b,,c"])),
        ];
        for (expr, want) in cases {
            assert_eq!(eval0(expr), want, "{expr}");
            assert_eq!(
                interpreter_only(|| eval0(expr)),
                want,
                "{expr}, interpreter"
            );
        }
    }

    /// `lists.range(n)` with a negative `n` is `[]`, as in cel-go.
    #[test]
    fn lists_range_of_a_negative_number_is_empty() {
        for (expr, want) in [
            ("lists.range(-1)", json!([])),
            ("lists.range(3)", json!([0, 1, 2])),
        ] {
            assert_eq!(eval0(expr), want, "{expr}");
            assert_eq!(
                interpreter_only(|| eval0(expr)),
                want,
                "{expr}, interpreter"
            );
        }
    }

    fn eval_err(expr: &str, vars: &[(&str, &Json)]) -> String {
        match CelProgram::compile_unchecked(expr)
            .unwrap_or_else(|e| panic!("{e}"))
            .eval(vars)
        {
            Ok(v) => panic!("expected `{expr}` to fail, got {v}"),
            Err(CelError::Eval { expr: e, reason }) => {
                assert_eq!(e, expr);
                reason.to_string()
            }
            Err(other) => panic!("expected an Eval error, got {other:?}"),
        }
    }

    #[test]
    fn program_is_send_sync_clone_debug() {
        fn assert_traits<T: Send + Sync + Clone + fmt::Debug + 'static>() {}
        assert_traits::<CelProgram>();
        let p = CelProgram::compile_unchecked("1 + 2").unwrap();
        assert_eq!(p.source(), "1 + 2");
        assert_eq!(format!("{p:?}"), r#"CelProgram("1 + 2")"#);
        let q = p.clone();
        assert_eq!(q.eval(&[]).unwrap(), json!(3));
    }

    #[test]
    fn evaluates_concurrently() {
        let p = CelProgram::compile_unchecked("self.n * 2 == 84 && 'ab'.matches('^a')").unwrap();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let p = p.clone();
                std::thread::spawn(move || {
                    (0..50).all(|_| p.eval_bool(&[("self", &json!({"n": 42}))]).unwrap())
                })
            })
            .collect();
        for h in handles {
            assert!(h.join().unwrap());
        }
    }

    #[test]
    fn arithmetic() {
        assert_eq!(eval0("1 + 2 * 3"), json!(7));
        assert_eq!(eval0("7 / 2"), json!(3));
        assert_eq!(eval0("7 % 3"), json!(1));
        assert_eq!(eval0("-5 + 2"), json!(-3));
        assert_eq!(eval0("7.0 / 2.0"), json!(3.5));
        assert_eq!(eval0("2u + 3u"), json!(5));
        assert_eq!(eval0("'a' + 'b'"), json!("ab"));
        assert_eq!(eval0("[1] + [2]"), json!([1, 2]));
        let v = json!({"replicas": 3, "factor": 1.5});
        assert_eq!(eval("self.replicas * 2", &[("self", &v)]), json!(6));
        assert_eq!(eval("self.factor * 2.0", &[("self", &v)]), json!(3.0));
        assert!(eval_err("1 / 0", &[]).contains("zero"));
        assert!(eval_err("9223372036854775807 + 1", &[]).contains("verflow"));
        assert!(eval_err("1 + 'a'", &[]).contains("overload"));
    }

    #[test]
    fn comparisons_and_logic() {
        assert_eq!(eval0("1 < 2 && 'b' > 'a'"), json!(true));
        assert_eq!(eval0("true ? 'yes' : 'no'"), json!("yes"));
        assert_eq!(eval0("1 == 1.0"), json!(true));
        assert_eq!(eval0("2 in [1, 2, 3]"), json!(true));
        assert_eq!(eval0("'k' in {'k': 1}"), json!(true));
        // Errors are absorbed by short-circuiting, as CEL specifies.
        assert_eq!(eval0("false && (1 / 0 == 1)"), json!(false));
        assert_eq!(eval0("true || (1 / 0 == 1)"), json!(true));
    }

    #[test]
    fn heterogeneous_numeric_equality() {
        // cel 0.13 alone says false to all of these; the CEL spec says true.
        for expr in [
            "1 == 1.0",
            "1.0 == 1",
            "1 == 1u",
            "1u == 1.0",
            "[1, 2] == [1.0, 2u]",
            "{'a': [1]} == {'a': [1.0]}",
            "1.0 in [1, 2]",
            "2u in [1, 2]",
            "1.0 in {1: 'x'}",
            "1 != 2.0",
            "'a' != 1",
            "!(1 != 1.0)",
            "[1, 2].exists_one(x, x == 2.0)",
        ] {
            assert_eq!(eval0(expr), json!(true), "{expr}");
        }
        for expr in [
            "1 == 1.5",
            "1 == '1'",
            "null == 0",
            "[1] == [1, 1]",
            "{'a': 1} == {'b': 1}",
            "1.5 in {1: 'x'}",
            "'b' in {'a': 1}",
            "3 in []",
            "-1 == 18446744073709551615u",
            "double('nan') == double('nan')",
        ] {
            assert_eq!(eval0(expr), json!(false), "{expr}");
        }
        let v = json!({"ratio": 2.0, "count": 2, "big": u64::MAX});
        let vars = [("self", &v)];
        assert_eq!(eval("self.ratio == self.count", &vars), json!(true));
        assert_eq!(eval("self.count in [1.0, 2.0]", &vars), json!(true));
        assert_eq!(
            eval("self.big == 18446744073709551615u", &vars),
            json!(true)
        );
        assert!(eval_err("1 in 'abc'", &[]).contains("overload"));
        assert!(eval_err("null in {}", &[]).contains("key"));
    }

    #[test]
    fn optional_field_selection() {
        let v = json!({"spec": {"replicas": 3}, "status": null});
        let vars = [("self", &v)];
        assert_eq!(eval("self.?spec.?replicas.orValue(1)", &vars), json!(3));
        assert_eq!(eval("self.?spec.?missing.orValue(1)", &vars), json!(1));
        assert_eq!(eval("self.?nope.?replicas.orValue(1)", &vars), json!(1));
        assert_eq!(eval("self.?nope.hasValue()", &vars), json!(false));
        assert_eq!(eval("self.?spec.hasValue()", &vars), json!(true));
        assert_eq!(eval("self.?nope", &vars), json!(null));
        // Selections after `.?` are optional too (cel-go semantics).
        assert_eq!(eval("self.?spec.replicas", &vars), json!(3));
        assert_eq!(eval("self.?spec.replicas.orValue(0)", &vars), json!(3));
        assert_eq!(eval("self.?spec.missing.orValue(7)", &vars), json!(7));
        assert_eq!(eval("self.?nope.replicas.orValue(7)", &vars), json!(7));
        assert_eq!(eval("self.?spec['replicas'].orValue(0)", &vars), json!(3));
        assert_eq!(eval("self.?spec['nope'].orValue(0)", &vars), json!(0));
        assert_eq!(eval("self.?status.orValue('x')", &vars), json!(null));
        // Without `.?` a missing field is still an error.
        assert!(eval_err("self.nope.replicas", &vars).contains("nope"));
        assert_eq!(eval("self.spec[?'replicas'].orValue(0)", &vars), json!(3));
        assert_eq!(eval("[?self.?nope, 1]", &vars), json!([1]));
        assert_eq!(eval("{?'a': self.?nope, 'b': 2}", &vars), json!({"b": 2}));
        assert_eq!(eval("dyn(self.spec.replicas) + 1", &vars), json!(4));
    }

    #[test]
    fn kubernetes_string_functions() {
        let v = json!({"name": "Hello-World"});
        assert_eq!(
            eval("self.name.lowerAscii()", &[("self", &v)]),
            json!("hello-world")
        );
        assert_eq!(eval0("'hello'.upperAscii()"), json!("HELLO"));
        assert_eq!(eval0("'a,b'.split(',')"), json!(["a", "b"]));
        assert_eq!(eval0("'  x '.trim()"), json!("x"));
        assert_eq!(eval0("'hello'.charAt(1)"), json!("e"));
        assert_eq!(eval0("'hello world'.indexOf('o')"), json!(4));
        assert_eq!(eval0("'abcdef'.substring(1, 3)"), json!("bc"));
        assert_eq!(eval0("'a-b-c'.replace('-', '.')"), json!("a.b.c"));
        assert_eq!(eval0("['a', 'b'].join('/')"), json!("a/b"));
        assert_eq!(eval0("'%s=%d'.format(['x', 5])"), json!("x=5"));
        assert_eq!(eval0("'hello world'.find('[a-z]+')"), json!("hello"));
        assert_eq!(eval0("'a1b22'.findAll('[0-9]+')"), json!(["1", "22"]));
        assert_eq!(
            eval0("'abc'.startsWith('ab') && 'abc'.endsWith('bc')"),
            json!(true)
        );
        assert_eq!(
            eval0("size('héllo')"),
            json!(5),
            "size() counts code points, as cel-go"
        );
    }

    #[test]
    fn kubernetes_list_set_and_other_libraries() {
        assert_eq!(eval0("[1, 2].isSorted()"), json!(true));
        assert_eq!(eval0("[3, 1].isSorted()"), json!(false));
        assert_eq!(eval0("[1, 2, 3].sum()"), json!(6));
        assert_eq!(eval0("[3, 1, 2].min()"), json!(1));
        assert_eq!(eval0("sets.contains([1, 2, 3], [1, 2])"), json!(true));
        assert_eq!(eval0("sets.intersects([1, 2], [3])"), json!(false));
        assert_eq!(
            eval0("quantity('1Gi').isGreaterThan(quantity('1Mi'))"),
            json!(true)
        );
        assert_eq!(eval0("quantity('1500m').asApproximateFloat()"), json!(1.5));
        assert_eq!(eval0("isQuantity('1Gi') && !isQuantity('x')"), json!(true));
        assert_eq!(
            eval0("semver('1.2.3').isLessThan(semver('2.0.0'))"),
            json!(true)
        );
        assert_eq!(eval0("isURL('https://example.com/a')"), json!(true));
        assert_eq!(
            eval0("url('https://example.com:8443/a').getPort()"),
            json!("8443")
        );
        assert_eq!(
            eval0("isIP('10.0.0.1') && !isIP('10.0.0.300')"),
            json!(true)
        );
        assert_eq!(
            eval0("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))"),
            json!(true)
        );
        assert_eq!(eval0("math.greatest(1, 5, 3)"), json!(5));
        assert_eq!(eval0("base64.encode(b'hi')"), json!("aGk="));
        assert_eq!(eval0("jsonpatch.escapeKey('a/b~c')"), json!("a~1b~0c"));
    }

    #[test]
    fn macros() {
        let v = json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}]});
        let vars = [("self", &v)];
        assert_eq!(
            eval("self.items.map(i, i.n * 10)", &vars),
            json!([10, 20, 30])
        );
        assert_eq!(
            eval("self.items.filter(i, i.n > 1).size()", &vars),
            json!(2)
        );
        assert_eq!(eval("self.items.all(i, i.n > 0)", &vars), json!(true));
        assert_eq!(eval("self.items.exists(i, i.n == 2)", &vars), json!(true));
        assert_eq!(
            eval("self.items.exists_one(i, i.n == 2)", &vars),
            json!(true)
        );
    }

    #[test]
    fn lists_and_maps_round_trip() {
        let v = json!({
            "list": [1, "two", 3.5, null, true, [], {}, [[1]]],
            "map": {"a": {"b": {"c": [1, 2]}}},
        });
        assert_eq!(eval("self", &[("self", &v)]), v);
        assert_eq!(eval("self.map.a.b.c[1]", &[("self", &v)]), json!(2));
        assert_eq!(eval("self.list[1]", &[("self", &v)]), json!("two"));
        assert_eq!(
            eval0("{'x': [1, {'y': null}]}"),
            json!({"x": [1, {"y": null}]})
        );
        assert_eq!(eval0("[]"), json!([]));
        assert_eq!(eval0("{}"), json!({}));
    }

    #[test]
    fn nested_object_round_trips_exactly() {
        let v = json!({
            "metadata": {
                "name": "démo-☃-名前",
                "labels": {
                    "app.kubernetes.io/name": "x",
                    "example.com/with.dots": "y",
                    "": "empty key",
                    "emoji 🚀": "\u{0000}\n\t\"quoted\"",
                },
            },
            "big": 9007199254740993_i64,
            "max_u64": u64::MAX,
            "max_i64": i64::MAX,
            "min_i64": i64::MIN,
            "just_above_i64": 9223372036854775808_u64,
            "float": 0.1,
            "neg_zero": -0.0,
            "whole_float": 2.0,
            "tiny": 5e-324,
            "huge": 1.7976931348623157e308,
            "items": [{"a": [1, [2, [3, [4]]]]}, "s", false],
        });
        let out = eval("self", &[("self", &v)]);
        assert_eq!(out, v);
        // Integers stay integers, floats stay floats, at the type level too.
        assert!(out["big"].is_i64());
        assert_eq!(out["big"].as_i64(), Some(9007199254740993));
        assert!(out["max_u64"].is_u64() && !out["max_u64"].is_i64());
        assert_eq!(out["max_u64"].as_u64(), Some(u64::MAX));
        assert!(out["whole_float"].is_f64());
        assert_eq!(out["float"].as_f64(), Some(0.1));
        // Field access with escaped-looking keys goes through indexing.
        assert_eq!(
            eval(
                "self.metadata.labels['app.kubernetes.io/name']",
                &[("self", &v)]
            ),
            json!("x")
        );
        assert_eq!(
            eval("self.metadata.name", &[("self", &v)]),
            json!("démo-☃-名前")
        );
    }

    #[test]
    fn integer_and_float_fidelity() {
        let v = json!({"i": 9007199254740993_i64, "u": u64::MAX, "f": 1.5});
        let vars = [("self", &v)];
        assert_eq!(eval("self.i + 1", &vars), json!(9007199254740994_i64));
        assert_eq!(eval("self.i == 9007199254740993", &vars), json!(true));
        assert_eq!(eval("self.i == 9007199254740992", &vars), json!(false));
        // u64 beyond i64 is a CEL uint.
        assert_eq!(eval("self.u == 18446744073709551615u", &vars), json!(true));
        assert_eq!(eval("self.u - 1u", &vars), json!(u64::MAX - 1));
        assert!(eval_err("self.u + 1u", &vars).contains("verflow"));
        assert_eq!(eval("self.f + 1.0", &vars), json!(2.5));
        assert_eq!(eval("int(self.f)", &vars), json!(1));
        assert_eq!(eval("double(self.i)", &vars), json!(9007199254740992.0));
        assert!(eval("double(self.i)", &vars).is_f64());
        // Non-finite doubles cannot be represented in JSON.
        let msg = eval_err("1.0 / 0.0", &[]);
        assert!(msg.contains("non-finite"), "{msg}");
    }

    #[test]
    fn result_object_keys_are_sorted() {
        let v = json!({"zeta": 1, "alpha": 2, "mid": 3});
        let out = eval("self", &[("self", &v)]);
        let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["alpha", "mid", "zeta"]);
    }

    #[test]
    fn non_string_map_keys_are_an_error() {
        let msg = eval_err("{1: 'a'}", &[]);
        assert!(msg.contains("non-string key 1 (int)"), "{msg}");
        // ...but they are fine inside the evaluation.
        assert_eq!(eval0("{1: 'a'}[1]"), json!("a"));
    }

    #[test]
    fn missing_variable_is_an_eval_error_naming_it() {
        let msg = eval_err("object.spec.replicas > 1", &[]);
        assert!(msg.contains("object"), "{msg}");
        let err = CelProgram::compile_unchecked("oldSelf == null")
            .unwrap()
            .eval(&[("self", &json!(1))])
            .unwrap_err();
        assert!(matches!(err, CelError::Eval { .. }));
        assert!(err.to_string().contains("oldSelf"), "{err}");
        assert!(
            err.to_string()
                .starts_with("failed to evaluate CEL expression `oldSelf == null`: "),
            "{err}"
        );
    }

    #[test]
    fn missing_field_is_an_eval_error() {
        let v = json!({"spec": {}});
        let msg = eval_err("self.spec.replicas", &[("self", &v)]);
        assert!(msg.contains("replicas"), "{msg}");
    }

    #[test]
    fn compile_errors() {
        let err = CelProgram::compile_unchecked("1 +").unwrap_err();
        let CelError::Compile { expr, reason } = &err else {
            panic!("expected a compile error, got {err:?}");
        };
        assert_eq!(expr, "1 +");
        assert!(
            matches!(reason, CompileFailure::Syntax(text) if !text.is_empty()),
            "{reason:?}"
        );
        assert!(
            err.to_string()
                .starts_with("failed to compile CEL expression `1 +`: "),
            "{err}"
        );
        assert!(CelProgram::compile_unchecked("self.name.").is_err());
        assert!(CelProgram::compile_unchecked("'unterminated").is_err());
        assert!(CelProgram::compile_unchecked("").is_err());
        // Message construction parses but cel 0.13 cannot evaluate it.
        let err = CelProgram::compile_unchecked("Foo{a: 1}").unwrap_err();
        assert!(
            matches!(
                &err,
                CelError::Compile {
                    reason: CompileFailure::MessageConstruction { type_name },
                    ..
                } if type_name == "Foo"
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .ends_with(": message construction `Foo{...}` is not supported"),
            "{err}"
        );
        // Overly large expressions are rejected up front.
        let long = format!("true{}", " || true".repeat(30_000));
        let err = CelProgram::compile_unchecked(&long).unwrap_err();
        assert!(err.to_string().contains("the limit is 100000"), "{err}");
        // Optional syntax is enabled.
        assert!(CelProgram::compile_unchecked("self.?a.orValue(1)").is_ok());
    }

    #[test]
    fn nesting_limits() {
        // Long operator chains build a left-nested tree: bounded by depth.
        let ok = format!("1{}", " + 1".repeat(MAX_AST_DEPTH - 1));
        assert_eq!(eval0(&ok), json!(MAX_AST_DEPTH));
        let err = CelProgram::compile_unchecked(&format!("1{}", " + 1".repeat(MAX_AST_DEPTH + 1)))
            .unwrap_err();
        assert!(err.to_string().contains("nested too deeply"), "{err}");
        // Logical chains are balanced by the parser and may be long.
        let ors = format!("false{}", " || false".repeat(2000));
        assert_eq!(eval0(&ors), json!(false));
        // Parenthesised nesting is bounded by the parser.
        let depth = usize::from(MAX_PARSE_DEPTH) - 2;
        let nested = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
        assert_eq!(eval0(&nested), json!(1));
        let lists = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        assert!(CelProgram::compile_unchecked(&lists).is_ok());
        for deep in [
            format!("{}1{}", "(".repeat(500), ")".repeat(500)),
            format!("{}1{}", "[".repeat(500), "]".repeat(500)),
        ] {
            let err = CelProgram::compile_unchecked(&deep).unwrap_err();
            assert!(err.to_string().contains("ecursion limit"), "{err}");
        }
        // Nested macros: each level adds two tree levels.
        let mut all = "true".to_owned();
        for i in 0..12 {
            all = format!("[1].all(x{i}, {all})");
        }
        assert_eq!(eval0(&all), json!(true));
    }

    #[test]
    fn deep_values_within_limits_work() {
        let mut v = json!({"leaf": [1, 2]});
        for i in 0..(MAX_VALUE_DEPTH - 2) {
            v = if i % 2 == 0 {
                json!([v])
            } else {
                json!({"k": v})
            };
        }
        let vars = [("self", &v), ("other", &v)];
        assert_eq!(eval("self", &vars), v);
        assert_eq!(eval("self == other", &vars), json!(true));
        assert_eq!(eval("[self, 1][0] == self", &vars), json!(true));
    }

    #[test]
    fn cost_estimates_grow_with_comprehension_nesting() {
        // Not iterating: one unit per node, whatever the input.
        let flat = CelProgram::compile_unchecked("self.a + 1 > 2").unwrap();
        assert_eq!((flat.cost(0), flat.cost(1_000_000)), (6, 6));
        let linear = CelProgram::compile_unchecked("self.all(x, x > 1)").unwrap();
        // 5 nodes outside the loop (the comprehension, `self`, its accumulator
        // start and result, and the call that raises a pending error), 7 per
        // item.
        assert_eq!((linear.cost(1), linear.cost(10)), (12, 75));
        // A literal list counts its own items, not the input's.
        let literal = CelProgram::compile_unchecked("[1, 2].all(x, self.all(y, x != y))").unwrap();
        // Linear, not quadratic: 2 outer items, each over the input.
        assert_eq!((literal.cost(10), literal.cost(100)), (165, 1_425));
        let quadratic = CelProgram::compile_unchecked(
            "object.spec.containers.all(a, object.spec.containers.all(b, a.name != b.name || a == b))",
        )
        .unwrap();
        assert_eq!(quadratic.cost(100), 131_107);
        // Fits the default budget up to 276 containers.
        assert!(quadratic.cost(276) <= crate::budget::DEFAULT_CEL_COST_LIMIT);
        assert_eq!(quadratic.cost(277), 1_000_531);
        assert_eq!(quadratic.cost(5_000), 325_055_007);
        assert_eq!(quadratic.cost(u64::MAX), u64::MAX);
    }

    /// Issue 29: the estimate's `n` is the size of the lists the
    /// expression iterates, not of the largest list anywhere in the input.
    #[test]
    fn the_runtime_estimate_follows_the_lists_the_expression_iterates() {
        let p = CelProgram::compile_unchecked(
            "object.spec.items.all(a, object.spec.items.all(b, a.name != b.name || a == b))",
        )
        .unwrap();
        let budget = crate::budget::Budget {
            deadline: None,
            cel_cost_limit: crate::budget::DEFAULT_CEL_COST_LIMIT,
        };
        let tags: Vec<Json> = (0..1_000).map(|i| json!(format!("t{i}"))).collect();
        let items = |n: usize| -> Vec<Json> { (0..n).map(|i| json!({"name": i})).collect() };
        let run =
            |object: &Json| crate::budget::scoped(budget, || p.eval_bool(&[("object", object)]));
        let shared = |object: &Json| {
            let bindings = CelBindings::new(&[("object", object)]);
            crate::budget::scoped(budget, || p.eval_shared(&bindings, &[]))
        };
        // No items, 1,000 unrelated tags: nothing to iterate.
        let unrelated = json!({"metadata": {"tags": tags}, "spec": {"items": []}});
        assert_eq!(run(&unrelated), Ok(true));
        assert_eq!(shared(&unrelated), Ok(json!(true)));
        // 100 items beside the tags: the estimate is for 100.
        let some = json!({"metadata": {"tags": tags}, "spec": {"items": items(100)}});
        assert_eq!(run(&some), Ok(true));
        assert_eq!(shared(&some), Ok(json!(true)));
        // 1,000 items: over the budget, as before.
        let many = json!({"spec": {"items": items(1_000)}});
        for err in [run(&many).unwrap_err(), shared(&many).unwrap_err()] {
            assert!(
                matches!(
                    err,
                    CelError::Eval {
                        reason: EvalFailure::OverBudget { largest: 1_000, .. },
                        ..
                    }
                ),
                "{err:?}"
            );
        }
    }

    #[test]
    fn what_a_comprehension_iterates_is_found_through_variables_and_chains() {
        use crate::path::Segment::{Key, Wildcard};
        let items = |expr: &str| {
            CelProgram::compile_unchecked(expr)
                .unwrap()
                .inner
                .items
                .clone()
        };
        let at = |root: &str, path: &[crate::path::Segment]| Items::At(root.into(), path.to_vec());
        let k = |s: &str| Key(s.into());
        assert_eq!(
            items("object.spec.containers.all(c, c.ports.all(p, p.containerPort > 0))"),
            vec![
                at("object", &[k("spec"), k("containers")]),
                at(
                    "object",
                    &[k("spec"), k("containers"), Wildcard, k("ports")]
                ),
            ]
        );
        assert_eq!(
            items("object.spec.?items.orValue([1, 2]).all(i, i > 0)"),
            vec![at("object", &[k("spec"), k("items")]), Items::Count(2)]
        );
        assert_eq!(
            items("object.spec.items.map(i, i.name).all(n, n != '')"),
            vec![at("object", &[k("spec"), k("items")])]
        );
        // A function's result: the largest list in what it reads.
        assert_eq!(
            items("object.spec.name.split(',').all(n, n != '')"),
            vec![Items::Within("object".into())]
        );
        // A mapped value iterated: anything.
        assert_eq!(
            items("object.spec.items.map(i, i.tags).all(t, t.all(x, x != ''))"),
            vec![at("object", &[k("spec"), k("items")]), Items::Anywhere]
        );
        assert_eq!(items("[1, 2].all(x, x > 0)"), vec![]);
    }

    #[test]
    fn items_at_a_path_are_measured_in_json_nodes_and_variables() {
        use crate::path::Segment::{Key, Wildcard};
        let object = json!({"spec": {"containers": [
            {"ports": [1, 2, 3]}, {"ports": [1]}, {"name": "no ports"}
        ], "labels": {"a": [1, 2, 3, 4], "b": []}}});
        let path = [
            Key("spec".into()),
            Key("containers".into()),
            Wildcard,
            Key("ports".into()),
        ];
        let labels = [Key("spec".into()), Key("labels".into()), Wildcard];
        let v = native::V::from_json(&object);
        assert_eq!(native::items_at(&v, &path), 3);
        assert_eq!(native::items_at(&v, &labels), 4);
        assert_eq!(
            native::items_at(&v, &[Key("spec".into()), Key("missing".into())]),
            0
        );
        let node = Node::from(&object);
        let n = native::V::from_node(&node);
        assert_eq!(native::items_at(&n, &path), 3);
        let vars = CelValue::empty_map().with_field("spec", &CelValue::from_json(&object["spec"]));
        let f = vars.native().unwrap();
        assert_eq!(native::items_at(&f, &path), 3);
    }

    /// Issue 33: every function `check` accepts, the interpreter has.
    #[test]
    fn every_function_compile_accepts_is_one_the_interpreter_has() {
        for name in FUNCTION_NAMES {
            let expr = format!("{name}()");
            let program = CelProgram::compile_unchecked(&expr).unwrap_or_else(|e| panic!("{e}"));
            let got = interpreter_only(|| program.eval(&[]));
            if let Err(CelError::Eval {
                reason: EvalFailure::Interpreter(ExecutionError::UndeclaredReference(r)),
                ..
            }) = &got
            {
                panic!("`{name}` passes compile, and the interpreter has no `{r}`");
            }
            // Not a literal receiver: `'x'.reverse()` is refused as cel-go's
            // checker refuses it.
            let receiver = format!("dyn('x').{name}()");
            if !name.contains('.') {
                let program =
                    CelProgram::compile_unchecked(&receiver).unwrap_or_else(|e| panic!("{e}"));
                let got = interpreter_only(|| program.eval(&[]));
                assert!(
                    !matches!(
                        got,
                        Err(CelError::Eval {
                            reason: EvalFailure::Interpreter(ExecutionError::UndeclaredReference(
                                _
                            )),
                            ..
                        })
                    ),
                    "`{receiver}`: {got:?}"
                );
            }
        }
    }

    /// Issue 33: the functions of the Kubernetes CEL environment (cel-go
    /// with the libraries a ValidatingAdmissionPolicy gets) this one does
    /// not have are refused by compile, with a caret; docs/reference/cel-functions.md lists
    /// them.
    #[test]
    fn functions_of_kubernetes_cel_this_evaluator_lacks_are_refused_at_compile_time() {
        #[rustfmt::skip]
        const KUBERNETES: &[&str] = &[
            "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double",
            "string", "bytes", "bool", "duration", "timestamp", "type", "dyn", "getDate",
            "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours",
            "getMilliseconds", "getMinutes", "getMonth", "getSeconds", "charAt", "indexOf",
            "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split", "substring", "trim",
            "join", "reverse", "format", "strings.quote", "isSorted", "sum", "min", "max", "slice",
            "flatten", "sort", "sortBy", "distinct", "first", "last", "lists.range",
            "sets.contains", "sets.equivalent", "sets.intersects", "find", "findAll", "url",
            "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath",
            "getQuery", "ip", "isIP", "ip.isCanonical", "family", "isUnspecified", "isLoopback",
            "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "cidr", "isCIDR",
            "containsIP", "containsCIDR", "prefixLength", "masked", "quantity", "isQuantity",
            "sign", "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "asInteger",
            "isInteger", "asApproximateFloat", "semver", "isSemver", "major", "minor", "patch",
            "format.named", "format.dns1123Label", "validate", "math.ceil", "math.floor",
            "math.round", "math.trunc", "math.abs", "math.sign", "math.isInf", "math.isNaN",
            "math.isFinite", "math.bitAnd", "math.bitOr", "math.bitXor", "math.bitNot",
            "math.bitShiftLeft", "math.bitShiftRight", "math.sqrt", "math.greatest", "math.least",
            "base64.encode", "base64.decode", "optional.of", "optional.none",
            "optional.ofNonZeroValue", "hasValue", "value", "or", "orValue", "optMap",
            "optFlatMap", "jsonpatch.escapeKey",
        ];
        let missing: Vec<&str> = KUBERNETES
            .iter()
            .copied()
            .filter(|name| !FUNCTION_NAMES.contains(name))
            .collect();
        assert_eq!(missing, ["sortBy", "optMap", "optFlatMap"]);
        for name in missing {
            let expr = format!("object.spec.x.{name}(1) == 1");
            let err = CelProgram::compile_unchecked(&expr).unwrap_err();
            assert!(
                matches!(
                    &err,
                    CelError::Compile { reason: CompileFailure::UnknownFunction { name: n, .. }, .. }
                        if n == name
                ),
                "{err:?}"
            );
        }
        let err =
            CelProgram::compile_unchecked("object.x == 1 && typeOf(object.y) == int").unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to compile CEL expression `object.x == 1 && typeOf(object.y) == int`: \
             ERROR: <input>:1:18: `typeOf` is not a function here (did you mean `type`?)\n\
             | object.x == 1 && typeOf(object.y) == int\n\
             | .................^"
        );
        // The name inside a string literal is not the call.
        let err = CelProgram::compile_unchecked("'typeOf(' + string(typeOf('x'))").unwrap_err();
        assert!(err.to_string().contains("<input>:1:20:"), "{err}");
        // Macros called with the wrong arguments are calls of no function.
        let err = CelProgram::compile_unchecked("object.items.all(x)").unwrap_err();
        assert!(err.to_string().contains("`all` is a macro"), "{err}");
        let err = CelProgram::compile_unchecked("math.greatst(1, 2)").unwrap_err();
        assert!(
            err.to_string().contains("did you mean `math.greatest`?"),
            "{err}"
        );
    }

    #[test]
    fn an_evaluation_over_its_budget_is_not_run() {
        let p =
            CelProgram::compile_unchecked("self.all(a, self.all(b, a != b || a == b))").unwrap();
        let list = Json::Array((0..50).map(Json::from).collect());
        let over = crate::budget::Budget {
            deadline: None,
            cel_cost_limit: p.cost(49),
        };
        let err = crate::budget::scoped(over, || p.eval_bool(&[("self", &list)])).unwrap_err();
        assert!(
            matches!(
                &err,
                CelError::Eval {
                    reason: EvalFailure::OverBudget { largest: 50, .. },
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "failed to evaluate CEL expression `self.all(a, self.all(b, a != b || a == b))`: \
                 not evaluated: its estimated cost {} is over the budget of {} per evaluation \
                 (--cel-cost-limit), for a largest list or map of 50 items",
                p.cost(50),
                p.cost(49)
            )
        );
        let fits = crate::budget::Budget {
            deadline: None,
            cel_cost_limit: p.cost(50),
        };
        assert_eq!(
            crate::budget::scoped(fits, || p.eval_bool(&[("self", &list)])),
            Ok(true)
        );
        // Past the deadline nothing is evaluated any more.
        let late = crate::budget::Budget {
            deadline: Some(std::time::Instant::now()),
            cel_cost_limit: u64::MAX,
        };
        let err = crate::budget::scoped(late, || p.eval_bool(&[("self", &list)])).unwrap_err();
        assert!(
            matches!(
                &err,
                CelError::Eval {
                    reason: EvalFailure::Deadline(DeadlineExceeded),
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .ends_with("evaluation stopped: the review ran out of time (--request-timeout)"),
            "{err}"
        );
    }

    #[test]
    fn eval_bool_requires_bool() {
        let p = CelProgram::compile_unchecked("self.n > 1").unwrap();
        assert!(p.eval_bool(&[("self", &json!({"n": 2}))]).unwrap());
        assert!(!p.eval_bool(&[("self", &json!({"n": 0}))]).unwrap());

        let cases = [
            ("1 + 1", "int"),
            ("'x'", "string"),
            ("null", "null_type"),
            ("[true]", "list"),
            ("{'a': true}", "map"),
            ("1.5", "double"),
            ("1u", "uint"),
        ];
        for (expr, type_name) in cases {
            let err = CelProgram::compile_unchecked(expr)
                .unwrap()
                .eval_bool(&[])
                .unwrap_err();
            let CelError::Eval { reason, .. } = &err else {
                panic!("expected an eval error, got {err:?}");
            };
            assert_eq!(
                reason.to_string(),
                format!("expected a bool result, got {type_name}")
            );
        }
        // Evaluation errors pass through unchanged.
        let err = CelProgram::compile_unchecked("nope")
            .unwrap()
            .eval_bool(&[])
            .unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn has_macro_on_objects() {
        let v = json!({"x": 1, "nested": {"y": null}});
        let vars = [("self", &v)];
        assert_eq!(eval("has(self.x)", &vars), json!(true));
        assert_eq!(eval("has(self.z)", &vars), json!(false));
        assert_eq!(eval("has(self.nested.y)", &vars), json!(true));
        assert_eq!(eval("has(self.nested.q)", &vars), json!(false));
        assert_eq!(eval("!has(self.z) || self.z > 0", &vars), json!(true));
        assert!(CelProgram::compile_unchecked("has(self)").is_err());
    }

    #[test]
    fn matches_uses_the_cache() {
        let pattern = "^[a-z]+-cache-test-[0-9]+$";
        let p = CelProgram::compile_unchecked(&format!("self.matches('{pattern}')")).unwrap();
        assert!(
            p.eval_bool(&[("self", &json!("abc-cache-test-42"))])
                .unwrap()
        );
        assert!(REGEX_CACHE.contains(pattern));
        assert!(
            !p.eval_bool(&[("self", &json!("ABC-cache-test-42"))])
                .unwrap()
        );
        assert!(p.eval_bool(&[("self", &json!("x-cache-test-1"))]).unwrap());
        // Unanchored search semantics, global-function form, invalid patterns.
        assert_eq!(eval0("'xxabcxx'.matches('abc')"), json!(true));
        assert_eq!(eval0("matches('abc', '^a.c$')"), json!(true));
        assert_eq!(eval0("'ünï'.matches('^.{3}$')"), json!(true));
        let msg = eval_err("'a'.matches('(')", &[]);
        assert!(msg.contains("not a valid regex"), "{msg}");
        let msg = eval_err("1.matches('a')", &[]);
        assert!(!msg.is_empty());
    }

    /// `{"pattern": <n bytes>, "names": [<items> short strings]}`.
    fn long_pattern_over(n: usize, items: usize) -> Json {
        json!({
            "pattern": "a".repeat(n),
            "names": (0..items).map(|i| format!("n{i}")).collect::<Vec<_>>(),
        })
    }

    /// Issue 29 item 2: a pattern taken from the object is charged as it
    /// runs, one unit per byte of pattern and text, on both evaluators.
    #[test]
    fn matches_is_charged_its_pattern_and_text() {
        let expr = "self.names.all(n, !n.matches(self.pattern))";
        // 260 calls of 4,002 to 4,004 units: over 1,000,000 (the pattern
        // is compiled once, and cached).
        let over = long_pattern_over(4_000, 260);
        // 200 calls: 800,000 or so, within it.
        let within = long_pattern_over(4_000, 200);
        for interpreter in [false, true] {
            let run = |f: &dyn Fn() -> String| {
                if interpreter {
                    interpreter_only(f)
                } else {
                    f()
                }
            };
            let msg = run(&|| eval_err(expr, &[("self", &over)]));
            assert!(
                msg.contains(
                    "matches(): stopped: its regular expressions cost over the budget of \
                     1000000 per evaluation (--cel-cost-limit"
                ),
                "interpreter {interpreter}: {msg}"
            );
            let answer = run(&|| eval(expr, &[("self", &within)]).to_string());
            assert_eq!(answer, "true", "interpreter {interpreter}");
        }
        // A charge is per evaluation: the next one starts from nothing.
        assert_eq!(eval(expr, &[("self", &within)]), json!(true));
        // kube-cel's `find` and `findAll` are charged the same way.
        for (function, expr) in [
            ("find", "self.names.all(n, n.find(self.pattern) == '')"),
            (
                "findAll",
                "self.names.all(n, n.findAll(self.pattern).size() == 0)",
            ),
        ] {
            let msg = eval_err(expr, &[("self", &over)]);
            assert!(
                msg.contains(&format!(
                    "{function}(): stopped: its regular expressions cost over the budget"
                )),
                "{msg}"
            );
            assert_eq!(eval(expr, &[("self", &within)]), json!(true), "{function}");
        }
        // A pattern too long for the cache, compiled on every call, costs
        // ten units per byte: 21 calls of 50,000 are over, 19 within.
        const { assert!(5_000 > REGEX_CACHE_MAX_PATTERN_LEN) };
        let msg = eval_err(expr, &[("self", &long_pattern_over(5_000, 21))]);
        assert!(msg.contains("cost over the budget of 1000000"), "{msg}");
        let within = long_pattern_over(5_000, 19);
        assert_eq!(eval(expr, &[("self", &within)]), json!(true));
        assert_eq!(regex_cost("ab", "abc"), 5);
        assert_eq!(regex_cost(&"a".repeat(5_000), "abc"), 50_003);
        assert_eq!(eval0("'hello world'.find('[a-z]+')"), json!("hello"));
        assert_eq!(eval0("'a1b2c3'.findAll('[0-9]', 2)"), json!(["1", "2"]));
        assert_eq!(eval0("'a1b2c3'.findAll('[0-9]')"), json!(["1", "2", "3"]));
    }

    #[test]
    fn a_pattern_compiles_within_the_size_limit() {
        // 100,000 NFA states: more than 1 MiB, less than the regex crate's
        // default of 10 MiB.
        let msg = eval_err("'a'.matches('a{1000}{100}')", &[]);
        assert!(
            msg.contains("not a valid regex") && msg.contains("size limit"),
            "{msg}"
        );
        assert_eq!(eval0("'aaa'.matches('a{3}')"), json!(true));
        // A long pattern is not copied whole into the message.
        let long = json!("a".repeat(90_000));
        let msg = eval_err("'a'.matches(self)", &[("self", &long)]);
        assert!(msg.contains("size limit") && msg.len() < 1_000, "{msg}");
        assert!(msg.contains("... (90000 bytes)"), "{msg}");
    }

    /// Within one evaluation, every `matches()` checks the deadline: an
    /// evaluation whose review was answered 504 stops at its next call.
    #[test]
    fn matches_stops_an_evaluation_once_its_deadline_has_passed() {
        // Longer than the cache takes: compiled on every call.
        let pattern = format!("({})", "[a-z]x".repeat(1_000));
        assert!(pattern.len() > REGEX_CACHE_MAX_PATTERN_LEN);
        let data = json!({
            "pattern": pattern,
            "names": (0..2_000).map(|i| format!("n{i}")).collect::<Vec<_>>(),
        });
        let p =
            CelProgram::compile_unchecked("self.names.all(n, !n.matches(self.pattern))").unwrap();
        for interpreter in [false, true] {
            let budget = crate::budget::Budget {
                deadline: Some(std::time::Instant::now() + std::time::Duration::from_millis(300)),
                cel_cost_limit: u64::MAX,
            };
            let run = || crate::budget::scoped(budget, || p.eval_bool(&[("self", &data)]));
            let outcome = if interpreter {
                interpreter_only(run)
            } else {
                run()
            };
            let err = outcome.expect_err("ran all 2,000 compilations past the deadline");
            assert!(
                err.to_string().contains("ran out of time"),
                "interpreter {interpreter}: {err}"
            );
        }
    }

    #[test]
    fn regex_cache_is_bounded() {
        let cache = RegexCache::new(4, 16);
        for i in 0..10 {
            let re = cache.get_or_compile(&format!("^p{i}$")).unwrap();
            assert!(re.is_match(&format!("p{i}")));
            assert!(cache.len() <= 4);
        }
        assert!(cache.contains("^p9$"));
        assert!(cache.get_or_compile("(").is_err());
        assert!(!cache.contains("("));
        let long = "a".repeat(17);
        assert!(cache.get_or_compile(&long).unwrap().is_match(&long));
        assert!(!cache.contains(&long));
        let disabled = RegexCache::new(0, 16);
        assert!(disabled.get_or_compile("a").is_ok());
        assert_eq!(disabled.len(), 0);
    }

    #[test]
    fn timestamps_and_durations() {
        assert_eq!(
            eval0("timestamp('2024-01-02T03:04:05Z')"),
            json!("2024-01-02T03:04:05Z")
        );
        assert_eq!(
            eval0("timestamp('2024-01-02T03:04:05.250+02:00')"),
            json!("2024-01-02T01:04:05.250Z")
        );
        assert_eq!(
            eval0("timestamp('2024-01-02T03:04:05Z') + duration('1h')"),
            json!("2024-01-02T04:04:05Z")
        );
        assert_eq!(
            eval0("timestamp('2024-01-01T00:00:00Z') < timestamp('2024-06-01T00:00:00Z')"),
            json!(true)
        );
        assert_eq!(
            eval0("timestamp('2024-03-05T00:00:00Z').getFullYear()"),
            json!(2024)
        );
        assert_eq!(eval0("duration('1h30m')"), json!("1h30m0s"));
        assert_eq!(eval0("duration('90s')"), json!("1m30s"));
        assert_eq!(eval0("duration('1.5s')"), json!("1.5s"));
        assert_eq!(eval0("duration('150ms')"), json!("150ms"));
        assert_eq!(eval0("duration('-2m')"), json!("-2m0s"));
        assert_eq!(eval0("duration('0s')"), json!("0s"));
        assert_eq!(
            eval0("timestamp('2024-01-02T00:00:00Z') - timestamp('2024-01-01T00:00:00Z')"),
            json!("24h0m0s")
        );
        assert!(eval_err("timestamp('not a time')", &[]).contains("timestamp"));
    }

    #[test]
    fn go_duration_format() {
        let cases: [(i128, &str); 12] = [
            (0, "0s"),
            (1, "1ns"),
            (999, "999ns"),
            (1_000, "1µs"),
            (1_500, "1.5µs"),
            (1_000_000, "1ms"),
            (1_234_567, "1.234567ms"),
            (1_000_000_000, "1s"),
            (61_000_000_001, "1m1.000000001s"),
            (3_600_000_000_000, "1h0m0s"),
            (-5_400_000_000_000, "-1h30m0s"),
            (-1_500_000, "-1.5ms"),
        ];
        for (nanos, expected) in cases {
            assert_eq!(format_go_duration(nanos), expected, "{nanos}");
        }
    }

    #[test]
    fn bytes_become_base64() {
        assert_eq!(eval0("b''"), json!(""));
        assert_eq!(eval0("b'f'"), json!("Zg=="));
        assert_eq!(eval0("b'fo'"), json!("Zm8="));
        assert_eq!(eval0("b'foo'"), json!("Zm9v"));
        assert_eq!(eval0("b'foob'"), json!("Zm9vYg=="));
        assert_eq!(eval0("bytes('hello world!')"), json!("aGVsbG8gd29ybGQh"));
        assert_eq!(base64_encode(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn optionals_and_opaque_values() {
        assert_eq!(eval0("optional.of(5)"), json!(5));
        assert_eq!(eval0("optional.none()"), json!(null));
        let v = json!({"a": 1});
        assert_eq!(eval("self.?b.orValue(7)", &[("self", &v)]), json!(7));
        assert_eq!(eval("self.?a.orValue(7)", &[("self", &v)]), json!(1));
        let msg = eval_err("quantity('1Gi')", &[]);
        assert!(msg.contains("cannot be converted to JSON"), "{msg}");
    }

    #[test]
    fn null_and_variables() {
        assert_eq!(eval0("null"), json!(null));
        let n = json!(null);
        assert_eq!(eval("x == null", &[("x", &n)]), json!(true));
        let a = json!(1);
        let b = json!(2);
        assert_eq!(eval("a + b", &[("a", &a), ("b", &b)]), json!(3));
        // Last binding wins.
        assert_eq!(eval("a", &[("a", &a), ("a", &b)]), json!(2));
    }

    /// Values bound once and shared give what binding the JSON values per
    /// evaluation gives: results and errors, `variables` read by field or
    /// whole, `self` read or not.
    #[test]
    fn shared_bindings_evaluate_like_json_bindings() {
        let object =
            json!({"spec": {"containers": [{"name": "a", "ports": [1, 2]}, {"name": "b"}]}});
        let request = json!({"operation": "CREATE"});
        let variables = json!({"names": ["a", "b"], "n": 2, "big": [1, 2, 3, 4, 5]});
        let this = json!({"name": "a", "ports": [1, 2]});
        let shared = CelBindings::new(&[("object", &object), ("request", &request)]);
        let mut vars = CelValue::empty_map();
        for (k, v) in variables.as_object().unwrap() {
            vars = vars.with_field(k, &CelValue::from_json(v));
        }
        assert_eq!(vars.largest(), largest_collection(&variables));
        // Replacing the field that held the largest list shrinks it again.
        let replaced = vars.with_field("big", &CelValue::from_json(&json!(0)));
        assert_eq!(replaced.largest(), 3);
        for expr in [
            "object.spec.containers.map(c, c.name) == variables.names",
            "size(variables.names) + variables.n",
            "has(variables.n) && !has(variables.missing)",
            "variables.?missing.orValue(7)",
            "variables['n']",
            "'n' in variables",
            "size(variables)",
            "variables.missing",
            "self.ports.all(p, p > 0) && self.name == 'a'",
            "request.operation",
            "object.spec.containers.exists(c, c.name == 'b')",
            "nope + 1",
            "variables.names.map(variables, variables)",
        ] {
            let program = CelProgram::compile_unchecked(expr).unwrap();
            let want = program.eval(&[
                ("object", &object),
                ("request", &request),
                ("variables", &variables),
                ("self", &this),
            ]);
            let got = program.eval_shared(
                &shared,
                &[
                    ("variables", CelArg::Value(&vars)),
                    ("self", CelArg::Part(Bound::Json(&this))),
                ],
            );
            assert_eq!(got, want, "{expr}");
        }
        let program = CelProgram::compile_unchecked("variables.n").unwrap();
        assert!(!program.reads("self") && program.reads_only(&["variables"]));
    }

    /// A result kept as the evaluator gave it (`eval_shared_value`) is the
    /// value the interpreter's result is: the same JSON, the same largest
    /// collection and depth, and read by later expressions the same way.
    #[test]
    fn a_kept_result_is_the_interpreters_result() {
        let object = json!({
            "spec": {"containers": [{"name": "a", "ports": [1, 2, 3], "x": 1.5}, {"name": "b"}]},
            "metadata": {"labels": {"b": "2", "a": "1"}}
        });
        let shared = CelBindings::new(&[("object", &object)]);
        let definitions = [
            ("list", "object.spec.containers"),
            ("names", "object.spec.containers.map(c, c.name)"),
            ("map", "{'b': [1.5, 2u, -1], 'a': object.metadata.labels}"),
            ("labels", "object.metadata.labels"),
            ("some", "[?object.spec.?containers[?0].?ports]"),
            ("first", "variables.list[0]"),
            ("nested", "[variables.map, [variables.names]]"),
        ];
        let readers = [
            "variables.list.filter(c, has(c.ports)).map(c, c.name)",
            "variables.names.join(',') + string(size(variables.list))",
            "variables.map.a.b + variables.labels.a",
            "variables.map == {'a': {'a': '1', 'b': '2'}, 'b': [1.5, 2, -1.0]}",
            "variables.some[0].all(p, p > 0) && variables.first.x == 1.5",
            "variables.nested[1][0] == variables.names",
            "variables.labels.all(k, k in variables.map.a)",
            "variables",
        ];
        let programs: Vec<CelProgram> = definitions
            .iter()
            .map(|(_, expr)| CelProgram::compile_unchecked(expr).unwrap())
            .collect();
        let mut kept = CelValue::empty_map();
        let mut reference = CelValue::empty_map();
        for ((name, expr), program) in definitions.into_iter().zip(&programs) {
            let before = native_tally();
            let value = program
                .eval_shared_value(&shared, &[("variables", CelArg::Value(&kept))])
                .unwrap();
            assert!(native_tally().native > before.native, "{expr}: kept");
            let want = interpreter_only(|| {
                program.eval_shared_value(&shared, &[("variables", CelArg::Value(&reference))])
            })
            .unwrap();
            assert_eq!(value.as_json(), want.as_json(), "{expr}");
            assert_eq!(value.largest(), want.largest(), "{expr}");
            assert_eq!(value.depth(), want.depth(), "{expr}");
            assert_eq!(value.cel(), want.cel(), "{expr}");
            kept.set_field(name, &value);
            reference.set_field(name, &want);
        }
        assert_eq!(kept.largest(), reference.largest());
        for expr in readers {
            let program = CelProgram::compile_unchecked(expr).unwrap();
            let got = program.eval_shared(&shared, &[("variables", CelArg::Value(&kept))]);
            let want = interpreter_only(|| {
                program.eval_shared(&shared, &[("variables", CelArg::Value(&reference))])
            });
            assert_eq!(got, want, "{expr}");
        }
    }

    /// `shape` measures as a recursive walk of every node does, at every
    /// depth (past `MAX_VALUE_DEPTH` too), scalars included.
    #[test]
    fn shape_is_the_largest_collection_and_the_deepest_node() {
        fn reference(value: &Json, depth: usize) -> (u64, usize) {
            let (len, items): (usize, Vec<&Json>) = match value {
                Json::Array(items) => (items.len(), items.iter().collect()),
                Json::Object(fields) => (fields.len(), fields.values().collect()),
                _ => (0, Vec::new()),
            };
            items.into_iter().fold((len as u64, depth), |(l, d), item| {
                let (il, id) = reference(item, depth + 1);
                (l.max(il), d.max(id))
            })
        }
        let wide = |n: usize| Json::Array((0..n).map(|i| json!(i)).collect());
        let mut cases = vec![
            json!(1),
            json!([]),
            json!({}),
            json!([1, [2, [3]]]),
            json!({"a": {"b": [1, 2, 3, {"c": null}]}, "d": "x"}),
            json!([[], [[]], {"k": [[[[]]]]}]),
        ];
        // Deeper than the recursion goes, with the largest collection at
        // the bottom, in the middle and at the top.
        for at in [0, MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH + 5, 300] {
            let mut deep = json!({"leaf": 1});
            for level in (0..310).rev() {
                deep = if level == at {
                    let mut items = match wide(7) {
                        Json::Array(items) => items,
                        _ => unreachable!(),
                    };
                    items.push(deep);
                    Json::Array(items)
                } else {
                    json!([deep])
                };
            }
            cases.push(deep);
        }
        for case in &cases {
            assert_eq!(
                shape(case),
                reference(case, 0),
                "{}",
                case.to_string().len()
            );
            let node = Node::from(case);
            assert_eq!(node_shape(&node), reference(case, 0), "node");
        }
        assert_eq!(shape(cases.last().unwrap()), (8, 311));
    }

    /// A kept result is as deep as the interpreter allows, no deeper: at
    /// `MAX_VALUE_DEPTH` the evaluator keeps it, one level more it gives the
    /// expression back to the interpreter, which fails.
    #[test]
    fn a_kept_result_stops_at_the_depth_the_interpreter_stops_at() {
        // `object` at the largest depth a bound value may have.
        let mut deep = json!(1);
        for _ in 0..MAX_VALUE_DEPTH - 1 {
            deep = json!([deep]);
        }
        let object = json!({ "deep": deep });
        assert_eq!(shape(&object).1, MAX_VALUE_DEPTH);
        let shared = CelBindings::new(&[("object", &object)]);
        let empty = CelValue::empty_map();
        let run = |expr: &str| {
            let program = CelProgram::compile_unchecked(expr).unwrap();
            let before = native_tally().native;
            let got = program
                .eval_shared_value(&shared, &[("variables", CelArg::Value(&empty))])
                .map(|v| (v.as_json().clone(), v.depth()));
            let native = native_tally().native > before;
            let want = interpreter_only(|| {
                program
                    .eval_shared_value(&shared, &[("variables", CelArg::Value(&empty))])
                    .map(|v| (v.as_json().clone(), v.depth()))
            });
            assert_eq!(got, want, "{expr}");
            (native, got.is_ok())
        };
        assert_eq!(run("[object.deep]"), (true, true));
        assert_eq!(run("[[object.deep]]"), (false, false));
    }

    #[test]
    fn an_unconvertible_shared_value_fails_every_evaluation_naming_it() {
        let mut deep = json!(1);
        for _ in 0..300 {
            deep = json!([deep]);
        }
        let ok = json!(1);
        let shared = CelBindings::new(&[("a", &ok), ("object", &deep)]);
        let program = CelProgram::compile_unchecked("a").unwrap();
        let want = program.eval(&[("a", &ok), ("object", &deep)]).unwrap_err();
        assert_eq!(program.eval_shared(&shared, &[]).unwrap_err(), want);
    }

    #[test]
    fn deeply_nested_values_are_rejected_not_overflowed() {
        let mut v = json!(1);
        for _ in 0..(MAX_VALUE_DEPTH + 5) {
            v = json!([v]);
        }
        let msg = eval_err("size(self)", &[("self", &v)]);
        assert!(
            msg.contains("nested too deeply") && msg.contains("`self`"),
            "{msg}"
        );
    }

    #[test]
    fn panics_become_errors() {
        let err = run_guarded(|| -> i32 { panic!("boom") }).unwrap_err();
        assert_eq!(err.detail, "boom");
        assert_eq!(
            err.to_string(),
            "internal error in the CEL interpreter: boom"
        );
        let err = run_guarded(|| -> i32 { panic!("{}", String::from("dyn")) }).unwrap_err();
        assert_eq!(err.detail, "dyn");
        assert_eq!(run_guarded(|| 5), Ok(5));
        // A panic while the cache lock is held must not break later calls.
        let cache = RegexCache::new(2, 16);
        let _ = run_guarded(|| {
            let _guard = cache.lock();
            panic!("poison");
        });
        assert!(cache.get_or_compile("a+").is_ok());
        assert!(cache.contains("a+"));
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let v = json!({"s": "héllo", "l": [1, "a", null], "m": {"k": 1}, "n": null});
        let exprs = [
            "'abc'.startsWith()",
            "'abc'.matches()",
            "size()",
            "size(1, 2)",
            "'a'.contains()",
            "timestamp()",
            "duration('1h').getHours()",
            "optional.of()",
            "self.s.charAt(100)",
            "self.s.charAt(-1)",
            "self.s.substring(2, 1)",
            "self.s.substring(3)",
            "self.l.sort()",
            "self.l.slice(-1, 5)",
            "self.l.sum()",
            "self.m.k.x",
            "self.n.x",
            "self.s.x",
            "self[1]",
            "self.l[-1]",
            "self.l[10]",
            "self.l['a']",
            "{[]: 1}",
            "{self.l: 1}",
            "self.s.split(',', -5)",
            "self.s.findAll('l', -1)",
            "'%v %s'.format([])",
            "quantity('1.5.5Gi')",
            "semver('x')",
            "url('::')",
            "ip('1.2.3')",
            "cidr('1.2.3.4/99')",
            "math.greatest()",
            "[].max()",
            "self.l.map(x, x + 1)",
            "int('99999999999999999999')",
            "uint(-1)",
            "int(1e300)",
            // These two overflow checks panic in debug builds (in cel and in
            // kube-cel respectively); the guard turns them into errors.
            "-(-9223372036854775807 - 1)",
            "[9223372036854775807, 1].sum()",
            "timestamp('9999-12-31T23:59:59Z') + duration('1h')",
            "duration('100000000000h')",
            "b'\\xff'.size() == 1",
            "string(b'\\xff')",
            "dyn(1)",
            "type(1)",
            "self.s.isDate()",
            "format.dns1123Label().validate('x')",
            "format.named('x')",
            "jsonpatch.escapeKey(1)",
            "[1, 2].flatten(-1)",
            "sets.contains(1, 2)",
            "self.?s.?x",
            "[?self.?zz, 1]",
            "{?'a': self.?zz}",
            "self.l.exists_one(x, x)",
            "1 in 1",
            "!1",
            "-'a'",
            "1 < 'a'",
        ];
        for expr in exprs {
            // Compile or evaluation errors are fine; panics are not.
            if let Ok(p) = CelProgram::compile_unchecked(expr) {
                let _ = p.eval(&[("self", &v)]);
                let _ = p.eval_bool(&[("self", &v)]);
            }
        }
    }
}

#[cfg(test)]
mod selection_tests {
    use super::CelProgram;
    use crate::path::Path;

    /// The selections of `expr` from `object` and `element` (standing for
    /// `spec.containers[*]`), printed.
    fn selections(expr: &str) -> Vec<String> {
        let root = Path::root();
        let element = Path::parse("spec.containers[*]").unwrap();
        CelProgram::compile_unchecked(expr)
            .unwrap()
            .selections(&[("object", &root), ("element", &element)])
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn chains_are_followed_through_selections_and_indexes() {
        assert_eq!(
            selections("has(object.spec.a) && object.spec.b.c > 1"),
            ["spec.a", "spec.b.c"]
        );
        assert_eq!(
            selections("object.spec.list[0].x == object['spec'].?y.orValue(1)"),
            ["spec.list[0].x", "spec.y"]
        );
        assert_eq!(
            selections("object.spec.m[object.spec.k] == 1"),
            ["spec.m[*]", "spec.k"]
        );
        // Only the longest chain of each; a root alone is no selection.
        assert_eq!(
            selections("object.spec == object.spec.a || object == element"),
            ["spec.a"]
        );
        assert_eq!(
            selections("element.image != ''"),
            ["spec.containers[*].image"]
        );
    }

    #[test]
    fn comprehension_variables_stand_for_the_elements() {
        assert_eq!(
            selections("object.spec.containers.all(c, c.image != '')"),
            ["spec.containers[*].image"]
        );
        // Nested, and shadowing a root.
        assert_eq!(
            selections("object.spec.a.exists(object, object.b.all(x, x.c == 1))"),
            ["spec.a[*].b[*].c"]
        );
        // Over something that is not a field: not followed.
        assert_eq!(selections("[object.spec.a].all(c, c.x == 1)"), ["spec.a"]);
        assert!(
            selections("object.spec.a.map(c, c.b).all(d, d.e == 1)")
                .contains(&"spec.a[*].b".to_string())
        );
        assert!(
            !selections("object.spec.a.map(c, c.b).all(d, d.e == 1)")
                .iter()
                .any(|s| s.contains(".e"))
        );
    }
}
