//! A second evaluator for the part of CEL that Kubernetes rules are
//! written in, over the bound JSON values themselves.
//!
//! cel 0.13's interpreter (the reference, see the module above) converts
//! every bound value into its own value model and deep-copies the selected
//! value at every field selection (`object.spec.containers` copies `spec`,
//! then `containers`); on a Pod review that is most of the time. This
//! evaluator reads the JSON in place: a selection is a borrow, a list of
//! containers is a slice of the request's own JSON, and values are built only
//! for what an expression computes.
//!
//! It never decides a result the interpreter would not give. Two rules hold
//! that line:
//!
//! * **Statically**, an expression runs here only when every node is of a
//!   kind this evaluator knows and every call is one of [`FUNCTIONS`] with
//!   the arity given there ([`compile`]); anything else (optional list
//!   elements, `optional.of`, quantity or semver functions, ...) goes
//!   straight to the interpreter.
//! * **At run time**, anything other than the plain successful case — an
//!   error, a missing key, an overflow, a type this evaluator does not
//!   handle for that function, a map iterated for a list result — makes it
//!   give up ([`None`]), and the caller evaluates the expression again with
//!   the interpreter. Errors, their messages and CEL's error absorption
//!   (`error || true`) therefore come from the interpreter alone; this
//!   evaluator only has to be right on the results it returns, and the
//!   differential tests (`tests/cel_native.rs`) compare those with the
//!   interpreter's on every expression of the example Katalogs.
//!
//! Semantics follow the interpreter as configured in the parent module,
//! quirks included: `functions::size()` of a string counts code points; `==`, `!=` and
//! `in` compare numbers across `int`, `uint` and `double`; map results come
//! back with their keys sorted. One deliberate difference: a comprehension
//! over a map (`annotations.filter(k, ...)`) visits the keys in their JSON
//! order, where the interpreter visits them in the order of its hash map,
//! which changes from one evaluation to the next; a list built from a map's
//! keys therefore comes out in the same order every time.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::rc::Rc;

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use serde_json::{Map as JsonMap, Number, Value as Json};

use crate::json::node::{Members, Node};

use super::{CelValue, EQ_FUNCTION, IN_FUNCTION, MAX_VALUE_DEPTH, NE_FUNCTION, NEG_FUNCTION};

mod functions;

/// The fields of a map of variables (`variables`), each converted once.
pub(super) type Fields<'a> = BTreeMap<String, CelValue<'a>>;

/// The calls this evaluator implements: name, whether it has a receiver
/// (`x.f()`), the number of arguments, and what it is. Names are as the
/// parent module's `prepare` leaves them (`==` is [`EQ_FUNCTION`], `x.?f`
/// is `_[?_]`).
const FUNCTIONS: &[(&str, bool, usize, Func)] = &[
    (operators::LOGICAL_AND, false, 2, Func::And),
    (operators::LOGICAL_OR, false, 2, Func::Or),
    (operators::LOGICAL_NOT, false, 1, Func::Not),
    (operators::CONDITIONAL, false, 3, Func::Conditional),
    (
        operators::NOT_STRICTLY_FALSE,
        false,
        1,
        Func::NotStrictlyFalse,
    ),
    (NEG_FUNCTION, false, 1, Func::Negate),
    (operators::ADD, false, 2, Func::Add),
    (operators::SUBSTRACT, false, 2, Func::Subtract),
    (operators::MULTIPLY, false, 2, Func::Multiply),
    (operators::DIVIDE, false, 2, Func::Divide),
    (operators::MODULO, false, 2, Func::Modulo),
    (operators::LESS, false, 2, Func::Less),
    (operators::LESS_EQUALS, false, 2, Func::LessEquals),
    (operators::GREATER, false, 2, Func::Greater),
    (operators::GREATER_EQUALS, false, 2, Func::GreaterEquals),
    (operators::INDEX, false, 2, Func::Index),
    (operators::OPT_INDEX, false, 2, Func::OptIndex),
    (EQ_FUNCTION, false, 2, Func::Equals),
    (NE_FUNCTION, false, 2, Func::NotEquals),
    (IN_FUNCTION, false, 2, Func::In),
    ("size", false, 1, Func::Size),
    ("size", true, 0, Func::Size),
    ("startsWith", true, 1, Func::StartsWith),
    ("endsWith", true, 1, Func::EndsWith),
    ("contains", true, 1, Func::Contains),
    ("matches", true, 1, Func::Matches),
    ("matches", false, 2, Func::Matches),
    ("join", true, 0, Func::Join),
    ("join", true, 1, Func::Join),
    ("split", true, 1, Func::Split),
    ("indexOf", true, 1, Func::IndexOf),
    ("lastIndexOf", true, 1, Func::LastIndexOf),
    ("substring", true, 1, Func::Substring),
    ("substring", true, 2, Func::Substring),
    ("sort", true, 0, Func::Sort),
    ("distinct", true, 0, Func::Distinct),
    ("flatten", true, 0, Func::Flatten),
    ("orValue", true, 1, Func::OrValue),
    ("hasValue", true, 0, Func::HasValue),
    ("value", true, 0, Func::Value),
    ("string", false, 1, Func::String),
    ("int", false, 1, Func::Int),
    ("dyn", false, 1, Func::Dyn),
    (super::macros::ENTRIES, false, 1, Func::Entries),
    (super::macros::ALL_STEP, false, 2, Func::AllStep),
    (super::macros::EXISTS_STEP, false, 2, Func::ExistsStep),
    (super::macros::RESULT, false, 1, Func::LogicResult),
];

/// A call, resolved once from its name ([`compile`]); `Unknown` for a node
/// that is not a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Func {
    Unknown,
    And,
    Or,
    Not,
    Conditional,
    NotStrictlyFalse,
    Negate,
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    Less,
    LessEquals,
    Greater,
    GreaterEquals,
    Index,
    OptIndex,
    Equals,
    NotEquals,
    In,
    Size,
    StartsWith,
    EndsWith,
    Contains,
    Matches,
    Join,
    Split,
    IndexOf,
    LastIndexOf,
    Substring,
    Sort,
    Distinct,
    Flatten,
    OrValue,
    HasValue,
    Value,
    String,
    Int,
    Dyn,
    /// `@katalog_entries(x)` of the two-variable comprehensions.
    Entries,
    /// The loop step of `all` (`@katalog_all_step`, errors given back).
    AllStep,
    /// The loop step of `exists`.
    ExistsStep,
    /// `@katalog_result`: the bool an `all` or `exists` ends with.
    LogicResult,
    /// `x.?a...orValue(d)`: an optional chain, followed in one go.
    OrValueChain,
    /// `x.?a...hasValue()`.
    HasValueChain,
}

/// What each call of `expr` is, indexed by node id (see [`Func`]), when
/// this evaluator can run every node of it: literals other than bytes,
/// identifiers, selections, lists, maps without optional entries,
/// one-variable comprehensions, and calls of [`FUNCTIONS`] with the arity
/// given there. `None` when it cannot (or when two calls share an id): the
/// expression then goes straight to the interpreter.
pub(super) fn compile(expr: &IdedExpr) -> Option<Vec<Func>> {
    fn walk(expr: &IdedExpr, out: &mut Vec<Func>) -> Option<()> {
        let mut children: Vec<&IdedExpr> = Vec::new();
        match &expr.expr {
            Expr::Literal(LiteralValue::Bytes(_)) => return None,
            Expr::Literal(_) | Expr::Ident(_) => {}
            Expr::Call(call) => {
                let shape = (
                    call.func_name.as_str(),
                    call.target.is_some(),
                    call.args.len(),
                );
                let func = FUNCTIONS
                    .iter()
                    .find(|(n, t, k, _)| (*n, *t, *k) == shape)?
                    .3;
                let chain = call.target.as_deref().is_some_and(is_opt_index);
                let func = match func {
                    Func::OrValue if chain => Func::OrValueChain,
                    Func::HasValue if chain => Func::HasValueChain,
                    other => other,
                };
                let id = usize::try_from(expr.id).ok()?;
                if out.len() <= id {
                    out.resize(id + 1, Func::Unknown);
                }
                if out[id] != Func::Unknown {
                    return None;
                }
                out[id] = func;
                children.extend(call.target.as_deref());
                children.extend(&call.args);
            }
            Expr::Select(select) => children.push(&select.operand),
            Expr::List(list) => children.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) if !e.optional => {
                            children.push(&e.key);
                            children.push(&e.value);
                        }
                        _ => return None,
                    }
                }
            }
            Expr::Comprehension(c) if c.iter_var2.is_none() => children.extend([
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]),
            Expr::Comprehension(_) | Expr::Struct(_) | Expr::Unspecified => return None,
        }
        for child in children {
            walk(child, out)?;
        }
        Some(())
    }
    let mut out = Vec::new();
    walk(expr, &mut out)?;
    Some(out)
}

/// A value during evaluation. Values read from the bound JSON stay borrowed
/// (`JList`, `JMap`, `Str(Borrowed)`); computed lists and maps are shared
/// behind an [`Rc`], so binding one to a variable does not copy it.
#[derive(Clone, Debug)]
pub(super) enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(Cow<'a, str>),
    List(Rc<Vec<V<'a>>>),
    JList(&'a [Json]),
    /// A map literal's entries: string keys, each once.
    Map(Rc<Vec<(String, V<'a>)>>),
    JMap(&'a JsonMap<String, Json>),
    /// A list and a map of a request's object parsed as a [`Node`].
    NList(&'a [Node]),
    NMap(&'a Members),
    /// A map of variables ([`CelValue`] holds its [`Fields`]).
    Fields(CelValue<'a>),
    Opt(Option<Rc<V<'a>>>),
}

impl<'a> V<'a> {
    /// The CEL value of a JSON value, as the parent module's `json_to_cel`
    /// converts it (an integer in `i64` is an `int`, above it a `uint`,
    /// any other number a `double`).
    pub(super) fn from_json(json: &'a Json) -> V<'a> {
        match json {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::Number(n) => number(n),
            Json::String(s) => V::Str(Cow::Borrowed(s)),
            Json::Array(items) => V::JList(items),
            Json::Object(fields) => V::JMap(fields),
        }
    }

    /// [`V::from_json`] of a [`Node`].
    pub(super) fn from_node(node: &'a Node) -> V<'a> {
        match node {
            Node::Null => V::Null,
            Node::Bool(b) => V::Bool(*b),
            Node::Number(n) => number(n),
            Node::String(s) => V::Str(Cow::Borrowed(s)),
            Node::Array(items) => V::NList(items),
            Node::Object(members) => V::NMap(members),
        }
    }

    /// [`V::from_json`] of a copy: nothing borrowed.
    pub(super) fn owned(json: &Json) -> V<'static> {
        match json {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::Number(n) => number(n),
            Json::String(s) => V::Str(Cow::Owned(s.clone())),
            Json::Array(items) => V::List(Rc::new(items.iter().map(V::owned).collect())),
            Json::Object(fields) => V::Map(Rc::new(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), V::owned(v)))
                    .collect(),
            )),
        }
    }

    fn as_list(&self) -> Option<List<'_, 'a>> {
        match self {
            V::List(items) => Some(List::Values(items)),
            V::JList(items) => Some(List::Json(items)),
            V::NList(items) => Some(List::Node(items)),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            V::Str(s) => Some(s),
            _ => None,
        }
    }

    fn is_map(&self) -> bool {
        matches!(self, V::Map(_) | V::JMap(_) | V::NMap(_) | V::Fields(_))
    }

    /// The number of entries of a map.
    fn map_len(&self) -> Option<usize> {
        match self {
            V::Map(entries) => Some(entries.len()),
            V::JMap(fields) => Some(fields.len()),
            V::NMap(members) => Some(members.len()),
            V::Fields(value) => Some(value.fields()?.len()),
            _ => None,
        }
    }

    /// A map's value for `key`: `Some(None)` when the map has no such key,
    /// `None` when this is not a map (or a value cannot be read).
    fn map_get(&self, key: &str) -> Option<Option<V<'a>>> {
        Some(match self {
            V::Map(entries) => entries
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone()),
            V::JMap(fields) => crate::json::member(fields, key).map(V::from_json),
            V::NMap(members) => members.get(key).map(V::from_node),
            V::Fields(value) => match value.fields()?.get(key) {
                Some(field) => Some(field.native()?),
                None => None,
            },
            _ => return None,
        })
    }

    /// A map's keys, in their order (JSON order, or sorted for variables).
    fn map_keys(&self) -> Option<Vec<V<'a>>> {
        Some(match self {
            V::Map(entries) => entries
                .iter()
                .map(|(k, _)| V::Str(Cow::Owned(k.clone())))
                .collect(),
            V::JMap(fields) => fields.keys().map(|k| V::Str(Cow::Borrowed(k))).collect(),
            V::NMap(members) => members.keys().map(|k| V::Str(Cow::Borrowed(k))).collect(),
            V::Fields(value) => value
                .fields()?
                .keys()
                .map(|k| V::Str(Cow::Owned(k.clone())))
                .collect(),
            _ => return None,
        })
    }
}

fn number<'a>(n: &Number) -> V<'a> {
    if let Some(i) = n.as_i64() {
        V::Int(i)
    } else if let Some(u) = n.as_u64() {
        V::Uint(u)
    } else {
        // Without serde_json's arbitrary precision every number is one of
        // the three.
        V::Double(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A list, computed or borrowed from the JSON.
enum List<'v, 'a> {
    Values(&'v [V<'a>]),
    Json(&'a [Json]),
    Node(&'a [Node]),
}

impl<'a> List<'_, 'a> {
    fn len(&self) -> usize {
        match self {
            List::Values(items) => items.len(),
            List::Json(items) => items.len(),
            List::Node(items) => items.len(),
        }
    }

    fn get(&self, i: usize) -> Option<V<'a>> {
        match self {
            List::Values(items) => items.get(i).cloned(),
            List::Json(items) => items.get(i).map(V::from_json),
            List::Node(items) => items.get(i).map(V::from_node),
        }
    }

    fn items(&self) -> Vec<V<'a>> {
        match self {
            List::Values(items) => items.to_vec(),
            List::Json(items) => items.iter().map(V::from_json).collect(),
            List::Node(items) => items.iter().map(V::from_node).collect(),
        }
    }
}

/// The variables in scope: the comprehension variables on top of the
/// expression's bindings.
pub(super) struct Env<'n, 'a> {
    vars: Vec<(&'n str, V<'a>)>,
    /// [`compile`]d calls of the expression.
    calls: &'a [Func],
}

impl<'n, 'a> Env<'n, 'a> {
    /// An environment with `bound` in scope; a later binding of a name hides
    /// an earlier one.
    pub(super) fn new(bound: Vec<(&'n str, V<'a>)>, calls: &'a [Func]) -> Env<'n, 'a> {
        Env { vars: bound, calls }
    }

    /// What the call `expr` is.
    fn call(&self, expr: &IdedExpr) -> Func {
        usize::try_from(expr.id)
            .ok()
            .and_then(|id| self.calls.get(id))
            .copied()
            .unwrap_or(Func::Unknown)
    }

    fn get(&self, name: &str) -> Option<V<'a>> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }
}

/// Evaluates `expr`, or gives up (see the module docs).
pub(super) fn eval<'n, 'a: 'n>(expr: &'a IdedExpr, env: &mut Env<'n, 'a>) -> Option<V<'a>> {
    match &expr.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Null => V::Null,
            LiteralValue::Boolean(b) => V::Bool(*b.inner()),
            LiteralValue::Int(i) => V::Int(*i.inner()),
            LiteralValue::UInt(u) => V::Uint(*u.inner()),
            LiteralValue::Double(d) => V::Double(*d.inner()),
            LiteralValue::String(s) => V::Str(Cow::Borrowed(s.inner())),
            LiteralValue::Bytes(_) => return None,
        }),
        Expr::Ident(name) => env.get(name),
        Expr::Select(select) => {
            let operand = eval(&select.operand, env)?;
            let found = operand.map_get(&select.field)?;
            if select.test {
                Some(V::Bool(found.is_some()))
            } else {
                found
            }
        }
        Expr::List(list) => {
            let mut items = Vec::with_capacity(list.elements.len());
            for (i, element) in list.elements.iter().enumerate() {
                // `[?x.?a.?b]`: the chain followed without an optional
                // value made at each step.
                if env.call(element) == Func::OptIndex && list.optional_indices.contains(&i) {
                    items.extend(eval_opt(element, env)?);
                    continue;
                }
                match eval(element, env)? {
                    // `[?x]`: an element only when the optional has a value.
                    V::Opt(inner) if list.optional_indices.contains(&i) => {
                        items.extend(inner.map(Rc::unwrap_or_clone));
                    }
                    value => items.push(value),
                }
            }
            Some(V::List(Rc::new(items)))
        }
        Expr::Map(map) => {
            let mut entries: Vec<(String, V<'a>)> = Vec::with_capacity(map.entries.len());
            for entry in &map.entries {
                let EntryExpr::MapEntry(e) = &entry.expr else {
                    return None;
                };
                let key = eval(&e.key, env)?;
                let key = key.as_str()?;
                if entries.iter().any(|(k, _)| k == key) {
                    return None;
                }
                let value = eval(&e.value, env)?;
                entries.push((key.to_owned(), value));
            }
            Some(V::Map(Rc::new(entries)))
        }
        Expr::Comprehension(c) => {
            let range = eval(&c.iter_range, env)?;
            let accu = eval(&c.accu_init, env)?;
            // A map's keys come in their JSON order (the interpreter's in
            // the order of its hash map, which differs from map to map).
            let items = match range.as_list() {
                Some(list) => list.items(),
                None => {
                    let keys = range.map_keys()?;
                    if keys.len() > 1 {
                        super::tally_map_order();
                    }
                    keys
                }
            };
            let append = appends(&c.loop_step, &c.accu_var);
            let depth = env.vars.len();
            env.vars.push((&c.accu_var, accu));
            let out = comprehension(c, items, append, env);
            env.vars.truncate(depth);
            out
        }
        Expr::Call(call) => {
            let func = env.call(expr);
            match (func, call.target.as_deref(), call.args.as_slice()) {
                // `&&` stops at a false left side, `||` at a true one; the
                // other side decides otherwise.
                (Func::And | Func::Or, None, [a, b]) => {
                    let decisive = func == Func::Or;
                    match eval(a, env)? {
                        V::Bool(left) if left == decisive => Some(V::Bool(left)),
                        V::Bool(_) => match eval(b, env)? {
                            V::Bool(right) => Some(V::Bool(right)),
                            _ => None,
                        },
                        _ => None,
                    }
                }
                (Func::Conditional, None, [c, a, b]) => match eval(c, env)? {
                    V::Bool(true) => eval(a, env),
                    V::Bool(false) => eval(b, env),
                    _ => None,
                },
                // `x.?a.?b.orValue(d)`, `x.?a.hasValue()`: the chain is
                // followed without an optional value made at each step.
                (Func::OrValueChain, Some(target), [fallback]) => {
                    let found = eval_opt(target, env)?;
                    let fallback = eval(fallback, env)?;
                    Some(found.unwrap_or(fallback))
                }
                (Func::HasValueChain, Some(target), []) => {
                    Some(V::Bool(eval_opt(target, env)?.is_some()))
                }
                (func, target, args) => {
                    let target = match target {
                        Some(t) => Some(eval(t, env)?),
                        None => None,
                    };
                    // Every function here takes at most two arguments.
                    let mut values = [None, None];
                    if args.len() > values.len() {
                        return None;
                    }
                    for (slot, arg) in values.iter_mut().zip(args) {
                        *slot = Some(eval(arg, env)?);
                    }
                    functions::call_function(func, target, values)
                }
            }
        }
        Expr::Struct(_) | Expr::Unspecified => None,
    }
}

/// Whether `expr` is `x[?k]` (or `x.?k`, which `prepare` makes one).
fn is_opt_index(expr: &IdedExpr) -> bool {
    matches!(&expr.expr, Expr::Call(call)
        if call.target.is_none() && call.args.len() == 2 && call.func_name == operators::OPT_INDEX)
}

/// An `x[?k]` (see [`is_opt_index`]) as [`index`] gives it, the optional
/// unwrapped: `Some(None)` for an empty one.
fn eval_opt<'n, 'a: 'n>(expr: &'a IdedExpr, env: &mut Env<'n, 'a>) -> Option<Option<V<'a>>> {
    let Expr::Call(call) = &expr.expr else {
        return None;
    };
    let [operand, key] = call.args.as_slice() else {
        return None;
    };
    // `index` takes one optional layer off its container.
    let container = if env.call(operand) == Func::OptIndex {
        match eval_opt(operand, env)? {
            Some(v) => v,
            None => return Some(None),
        }
    } else {
        match eval(operand, env)? {
            V::Opt(None) => return Some(None),
            V::Opt(Some(inner)) => Rc::unwrap_or_clone(inner),
            other => other,
        }
    };
    let key = eval(key, env)?;
    functions::lookup(container, key)
}

/// The loop of a comprehension whose accumulator is bound on top of `env`.
fn comprehension<'n, 'a: 'n>(
    c: &'a kube_cel::cel::common::ast::ComprehensionExpr,
    items: Vec<V<'a>>,
    append: Option<Append<'a>>,
    env: &mut Env<'n, 'a>,
) -> Option<V<'a>> {
    let accu_at = env.vars.len() - 1;
    for item in items {
        match eval(&c.loop_cond, env)? {
            V::Bool(true) => {}
            V::Bool(false) => break,
            _ => return None,
        }
        env.vars.push((&c.iter_var, item));
        match &append {
            Some(Append { filter, element }) => {
                let keep = match filter {
                    None => true,
                    Some(f) => match eval(f, env)? {
                        V::Bool(b) => b,
                        _ => return None,
                    },
                };
                if keep {
                    let value = eval(element, env)?;
                    env.vars.pop();
                    let V::List(list) = &mut env.vars[accu_at].1 else {
                        return None;
                    };
                    Rc::make_mut(list).push(value);
                } else {
                    env.vars.pop();
                }
            }
            None => {
                let next = eval(&c.loop_step, env)?;
                env.vars.pop();
                env.vars[accu_at].1 = next;
            }
        }
    }
    eval(&c.result, env)
}

/// A loop step that appends to the accumulator, as the `map` and `filter`
/// macros expand: `@result + [e]`, or `f ? @result + [e] : @result`.
struct Append<'a> {
    filter: Option<&'a IdedExpr>,
    element: &'a IdedExpr,
}

fn appends<'a>(step: &'a IdedExpr, accu: &str) -> Option<Append<'a>> {
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == accu);
    let push = |e: &'a IdedExpr| -> Option<&'a IdedExpr> {
        let Expr::Call(call) = &e.expr else {
            return None;
        };
        match (
            call.func_name.as_str(),
            call.target.as_ref(),
            call.args.as_slice(),
        ) {
            (operators::ADD, None, [left, right]) if is_accu(left) => match &right.expr {
                Expr::List(list) if list.optional_indices.is_empty() => {
                    match list.elements.as_slice() {
                        [element] => Some(element),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        }
    };
    if let Some(element) = push(step) {
        return Some(Append {
            filter: None,
            element,
        });
    }
    let Expr::Call(call) = &step.expr else {
        return None;
    };
    match (
        call.func_name.as_str(),
        call.target.as_ref(),
        call.args.as_slice(),
    ) {
        (operators::CONDITIONAL, None, [filter, then, otherwise]) if is_accu(otherwise) => {
            Some(Append {
                filter: Some(filter),
                element: push(then)?,
            })
        }
        _ => None,
    }
}
/// The JSON of a result, as the parent module's `cel_to_json` gives it
/// (object keys sorted, an empty optional `null`); `None` where that
/// conversion fails.
pub(super) fn to_json(value: &V<'_>, depth: usize) -> Option<Json> {
    if depth > MAX_VALUE_DEPTH {
        return None;
    }
    Some(match value {
        V::Null => Json::Null,
        V::Bool(b) => Json::Bool(*b),
        V::Int(i) => Json::from(*i),
        V::Uint(u) => Json::from(*u),
        V::Double(d) => Json::Number(Number::from_f64(*d)?),
        V::Str(s) => Json::String(s.to_string()),
        V::List(items) => Json::Array(
            items
                .iter()
                .map(|item| to_json(item, depth + 1))
                .collect::<Option<_>>()?,
        ),
        V::JList(items) => Json::Array(
            items
                .iter()
                .map(|item| json_sorted(item, depth + 1))
                .collect::<Option<_>>()?,
        ),
        V::NList(items) => Json::Array(
            items
                .iter()
                .map(|item| to_json(&V::from_node(item), depth + 1))
                .collect::<Option<_>>()?,
        ),
        V::Map(entries) => {
            let mut sorted: Vec<&(String, V<'_>)> = entries.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let mut object = JsonMap::with_capacity(sorted.len());
            for (k, v) in sorted {
                object.insert(k.clone(), to_json(v, depth + 1)?);
            }
            Json::Object(object)
        }
        V::JMap(_) | V::NMap(_) | V::Fields(_) => {
            let keys = value.map_keys()?;
            let mut keys: Vec<&str> = keys.iter().filter_map(V::as_str).collect();
            keys.sort_unstable();
            let mut object = JsonMap::with_capacity(keys.len());
            for key in keys {
                let v = value.map_get(key)??;
                object.insert(key.to_owned(), to_json(&v, depth + 1)?);
            }
            Json::Object(object)
        }
        V::Opt(Some(inner)) => to_json(inner, depth + 1)?,
        V::Opt(None) => Json::Null,
    })
}

/// Items of the largest list or map at `path` below `value` (a `[*]`
/// segment: every element of a list, every value of a map); 0 where the
/// path reaches none. The cost estimate's `n` for a comprehension over
/// that path.
pub(super) fn items_at(value: &V<'_>, path: &[crate::path::Segment]) -> u64 {
    use crate::path::Segment;
    let mut largest = 0usize;
    let mut stack = vec![(value.clone(), 0usize)];
    while let Some((v, at)) = stack.pop() {
        let Some(segment) = path.get(at) else {
            let len = v.as_list().map(|l| l.len()).or_else(|| v.map_len());
            largest = largest.max(len.unwrap_or(0));
            continue;
        };
        match segment {
            Segment::Key(key) => {
                if let Some(Some(next)) = v.map_get(key) {
                    stack.push((next, at + 1));
                }
            }
            Segment::Index(i) => {
                if let Some(next) = v.as_list().and_then(|l| l.get(*i)) {
                    stack.push((next, at + 1));
                }
            }
            Segment::Wildcard => {
                let items: Vec<V<'_>> = match &v {
                    V::Map(entries) => entries.iter().map(|(_, v)| v.clone()).collect(),
                    V::JMap(fields) => fields.values().map(V::from_json).collect(),
                    V::NMap(members) => members.values().map(V::from_node).collect(),
                    V::Fields(value) => value
                        .fields()
                        .into_iter()
                        .flat_map(|fields| fields.values())
                        .filter_map(CelValue::native)
                        .collect(),
                    other => other.as_list().map(|l| l.items()).unwrap_or_default(),
                };
                stack.extend(items.into_iter().map(|item| (item, at + 1)));
            }
        }
    }
    u64::try_from(largest).unwrap_or(u64::MAX)
}

/// Items of the largest list or map and the nesting depth of
/// `to_json(value, depth)`'s JSON (as the parent module's `shape` gives
/// them), without building it; `None` exactly where [`to_json`] fails,
/// except for a map of variables, which it does not walk.
pub(super) fn result_shape(value: &V<'_>, depth: usize) -> Option<(u64, usize)> {
    if depth > MAX_VALUE_DEPTH {
        return None;
    }
    match value {
        V::Null | V::Bool(_) | V::Int(_) | V::Uint(_) | V::Str(_) | V::Opt(None) => Some((0, 0)),
        V::Double(d) => Number::from_f64(*d).map(|_| (0, 0)),
        V::List(items) => of_items(
            items.len(),
            items.iter().map(|item| result_shape(item, depth + 1)),
        ),
        V::JList(items) => of_items(
            items.len(),
            items.iter().map(|item| json_shape(item, depth + 1)),
        ),
        V::Map(entries) => of_items(
            entries.len(),
            entries.iter().map(|(_, v)| result_shape(v, depth + 1)),
        ),
        V::JMap(fields) => of_items(
            fields.len(),
            fields.values().map(|v| json_shape(v, depth + 1)),
        ),
        V::NList(items) => of_items(
            items.len(),
            items.iter().map(|item| node_shape(item, depth + 1)),
        ),
        V::NMap(members) => of_items(
            members.len(),
            members.values().map(|v| node_shape(v, depth + 1)),
        ),
        V::Fields(_) => None,
        V::Opt(Some(inner)) => result_shape(inner, depth + 1),
    }
}

/// [`result_shape`] of JSON read from a bound value: the parent module's
/// [`shape`](super::shape), `None` past [`MAX_VALUE_DEPTH`] from `depth`.
fn json_shape(json: &Json, depth: usize) -> Option<(u64, usize)> {
    let (largest, deepest) = super::shape(json);
    (depth.saturating_add(deepest) <= MAX_VALUE_DEPTH).then_some((largest, deepest))
}

/// [`json_shape`] of a [`Node`].
fn node_shape(node: &Node, depth: usize) -> Option<(u64, usize)> {
    let (largest, deepest) = super::node_shape(node);
    (depth.saturating_add(deepest) <= MAX_VALUE_DEPTH).then_some((largest, deepest))
}

/// The shape of a list or map of `len` items from its items' shapes.
fn of_items(len: usize, items: impl Iterator<Item = Option<(u64, usize)>>) -> Option<(u64, usize)> {
    let mut largest = u64::try_from(len).unwrap_or(u64::MAX);
    let mut deepest = 0;
    for item in items {
        let (l, d) = item?;
        largest = largest.max(l);
        deepest = deepest.max(d + 1);
    }
    Some((largest, deepest))
}

/// A JSON value as it comes back through CEL: the same, object keys sorted.
fn json_sorted(json: &Json, depth: usize) -> Option<Json> {
    if depth > MAX_VALUE_DEPTH {
        return None;
    }
    Some(match json {
        Json::Array(items) => Json::Array(
            items
                .iter()
                .map(|item| json_sorted(item, depth + 1))
                .collect::<Option<_>>()?,
        ),
        Json::Object(fields) => {
            let mut sorted: Vec<(&String, &Json)> = fields.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let mut object = JsonMap::with_capacity(sorted.len());
            for (k, v) in sorted {
                object.insert(k.clone(), json_sorted(v, depth + 1)?);
            }
            Json::Object(object)
        }
        Json::Number(n) => match number(n) {
            // A number that is neither int nor uint comes back as a double.
            V::Double(d) => Json::Number(Number::from_f64(d)?),
            _ => json.clone(),
        },
        other => other.clone(),
    })
}
