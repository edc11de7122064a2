//! Compile-time type checks of a CEL expression against the schema of what
//! it reads, as cel-go's checker does for a ValidatingAdmissionPolicy or a
//! CRD's `x-kubernetes-validations`.
//!
//! The caller gives the type of each identifier ([`Env`]): `object` and
//! `oldObject` from the schema of the resource the rule selects (a CRD's
//! `openAPIV3Schema`, or a built-in kind's OpenAPI schema), `self` from the
//! schema at the rule's path, `variables.NAME` by the type of the
//! variable's expression. The checker walks the expression and reports
//!
//! * a call or an operator with no overload for the known argument types
//!   (`self.spec.storageGB <= '500'` on an integer field: "found no matching
//!   overload for '_<=_' applied to '(int, string)'"),
//! * a field the schema does not declare (`object.spec.replicsa`), with the
//!   nearest declared name,
//! * a selection or an iteration on a value that has no fields or items.
//!
//! `dyn` is permissive, as in cel-go: a value of unknown type (no schema,
//! `x-kubernetes-preserve-unknown-fields`, int-or-string, an unknown
//! function's result, `request`) matches every overload. The checker only
//! reports what fails at every evaluation; it never changes what compiles
//! when no schema is known.

mod overloads;
mod ty;

use std::collections::HashMap;
use std::fmt;

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, operators,
};

use super::position::{Element, Positions, caret_at};
use super::{EQ_FUNCTION, IN_FUNCTION, NE_FUNCTION, NEG_FUNCTION};
use crate::schema::Opacity;
use overloads::{Overload, R, overloads, signature_result};
pub use ty::Type;

/// What the identifiers of an expression stand for.
#[derive(Default)]
pub struct Env<'s> {
    /// `object`, `self`, `element`, ...: every other identifier is `dyn`.
    pub idents: Vec<(String, Type<'s>)>,
    /// `variables.NAME`; a variable not listed is `dyn`.
    pub variables: HashMap<String, Type<'s>>,
}

/// A type error in an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError {
    /// cel-go's words where it has them.
    pub message: String,
    /// A did-you-mean, when there is one.
    pub help: Option<String>,
    /// Where: `<input>:LINE:COL`.
    pub at: String,
    /// The line, and a caret under the place.
    pub snippet: String,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERROR: {}: {}\n{}", self.at, self.message, self.snippet)
    }
}

/// The type of `program` in `env`, and its type errors (the first of each
/// place, in source order).
pub fn check<'s>(program: &super::CelProgram, env: &Env<'s>) -> (Type<'s>, Vec<TypeError>) {
    check_ast(&program.inner.ast, program.source(), env, false)
}

/// [`check`] of a parsed (and prepared) expression and its source; with
/// `homogeneous`, list and map literals whose elements have different
/// types are errors too, as the kube-apiserver's validator of them makes
/// them (`HomogeneousAggregateLiterals`).
pub(super) fn check_ast<'s>(
    ast: &IdedExpr,
    source: &str,
    env: &Env<'s>,
    homogeneous: bool,
) -> (Type<'s>, Vec<TypeError>) {
    let mut checker = Checker {
        env,
        scopes: Vec::new(),
        exact: HashMap::new(),
        types: HashMap::new(),
        literals: Vec::new(),
        in_format: 0,
        untyped: homogeneous,
        errors: Vec::new(),
        accu: Vec::new(),
    };
    let t = checker.expr(ast);
    // cel-go validates literals once the expression type-checks.
    if homogeneous && checker.errors.is_empty() {
        checker.homogeneous();
    }
    let positions = Positions::new(ast, source);
    let mut out: Vec<TypeError> = Vec::new();
    for e in checker.errors {
        let offset = positions.offset(e.node, e.element);
        let (at, snippet) = caret_at(source, offset);
        let err = TypeError {
            message: e.message,
            help: e.help,
            at,
            snippet,
        };
        if !out.contains(&err) {
            out.push(err);
        }
    }
    (t, out)
}

/// A list or map literal: its node, and for each element (its index, and
/// whether it is an entry's value) its type and whether that is exact.
struct Literal<'s> {
    node: u64,
    map: bool,
    elements: Vec<(Element, Type<'s>, bool)>,
}

/// Whether `t` has no `dyn` in it (nor a schema's object, which the
/// apiserver names differently).
fn concrete(t: &Type) -> bool {
    match t {
        Type::Dyn | Type::Object { .. } => false,
        Type::List(t) | Type::Optional(t) => concrete(t),
        Type::Map(k, v) => concrete(k) && concrete(v),
        _ => true,
    }
}

struct Found {
    node: u64,
    /// An element of the list or map literal `node`, to show the error at.
    element: Option<Element>,
    message: String,
    help: Option<String>,
}

struct Checker<'c, 's> {
    env: &'c Env<'s>,
    /// Comprehension variables, innermost last, with whether their type
    /// is cel-go's (see [`Checker::exact`]).
    scopes: Vec<(String, Type<'s>, bool)>,
    /// Whether the type of each node checked is the one cel-go's checker
    /// gives it, by node: where it has `dyn` in it, the checker may only
    /// not know better (an unknown function's result, `[]`'s elements).
    exact: HashMap<u64, bool>,
    /// The type of each node checked.
    types: HashMap<u64, Type<'s>>,
    /// The list and map literals, for [`Checker::homogeneous`].
    literals: Vec<Literal<'s>>,
    /// How many `format` calls the node being checked is inside: their
    /// literals are exempt from the homogeneous check (cel-go's strings
    /// extension exempts them, `'%s %d'.format(['a', 1])`).
    in_format: usize,
    /// Whether no type comes from a schema: `null` is then compared only
    /// with what cel-go compares it (see [`equatable`]).
    untyped: bool,
    errors: Vec<Found>,
    /// The accumulators of the comprehensions being checked, with the
    /// comprehension's node: a call on one is the macro's own.
    accu: Vec<(String, u64)>,
}

fn join<'s>(a: Type<'s>, b: Type<'s>) -> Type<'s> {
    if a == b {
        return a;
    }
    match (a, b) {
        (Type::Null, t) | (t, Type::Null) => t,
        (Type::List(x), Type::List(y)) if x.is_dyn() => Type::List(y),
        (Type::List(x), Type::List(y)) if y.is_dyn() => Type::List(x),
        (Type::Object { schema, reported }, Type::Object { schema: other, .. })
            if std::ptr::eq(schema, other) =>
        {
            Type::Object { schema, reported }
        }
        _ => Type::Dyn,
    }
}

/// Whether values of types `a` and `b` may stand in one place: cel-go's
/// `isAssignable` (the checker's unification) without type parameters.
/// `dyn` fits everything, `null` fits what cel-go's checker lets be null
/// (messages, optionals and other opaque types, timestamps, durations);
/// objects of a schema fit each other and maps (their names in the
/// apiserver's environment are not modelled: never a false refusal).
fn assignable(a: &Type, b: &Type) -> bool {
    use Type::*;
    let nullable = |t: &Type| {
        matches!(
            t,
            Null | Object { .. } | Optional(_) | Opaque(_) | Timestamp | Duration
        )
    };
    match (a, b) {
        (Dyn, _) | (_, Dyn) => true,
        (Null, t) | (t, Null) => nullable(t),
        (List(x), List(y)) | (Optional(x), Optional(y)) => assignable(x, y),
        (Map(k1, v1), Map(k2, v2)) => assignable(k1, k2) && assignable(v1, v2),
        (Object { .. }, Object { .. } | Map(..)) | (Map(..), Object { .. }) => true,
        (Opaque(x), Opaque(y)) => x == y,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

/// The more general of two assignable types (cel-go's `mostGeneral`);
/// `dyn` where they differ otherwise.
fn most_general<'s>(a: Type<'s>, b: Type<'s>) -> Type<'s> {
    use Type::*;
    match (a, b) {
        (Dyn, _) | (_, Dyn) => Dyn,
        (List(x), List(y)) => List(Box::new(most_general(*x, *y))),
        (Optional(x), Optional(y)) => Optional(Box::new(most_general(*x, *y))),
        (Map(k1, v1), Map(k2, v2)) => Map(
            Box::new(most_general(*k1, *k2)),
            Box::new(most_general(*v1, *v2)),
        ),
        (a, b) if a == b => a,
        _ => Dyn,
    }
}

/// Whether `<`, `<=`, `>`, `>=` have an overload for `a` and `b`.
fn ordered(a: &Type, b: &Type) -> bool {
    let orderable = |t: &Type| {
        t.is_dyn()
            || t.is_number()
            || matches!(
                t,
                Type::String | Type::Bool | Type::Bytes | Type::Timestamp | Type::Duration
            )
    };
    // `null` fits the timestamp and duration overloads (cel-go's legacy
    // nullness): `null < null` compiles.
    let nullable =
        |t: &Type| matches!(t, Type::Null | Type::Timestamp | Type::Duration | Type::Dyn);
    if matches!(a, Type::Null) || matches!(b, Type::Null) {
        return nullable(a) && nullable(b);
    }
    if !orderable(a) || !orderable(b) {
        return false;
    }
    a.is_dyn()
        || b.is_dyn()
        || (a.is_number() && b.is_number())
        || std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// The result of an arithmetic operator, `None` when it has no overload.
fn arithmetic<'s>(op: &str, a: &Type<'s>, b: &Type<'s>) -> Option<Type<'s>> {
    use Type::*;
    if a.is_dyn() || b.is_dyn() {
        let known = if a.is_dyn() { b } else { a };
        let fits = match op {
            operators::ADD => matches!(
                known,
                Dyn | Int | Uint | Double | String | Bytes | List(_) | Timestamp | Duration
            ),
            operators::SUBSTRACT => {
                known.is_dyn() || known.is_number() || matches!(known, Timestamp | Duration)
            }
            operators::MODULO => matches!(known, Dyn | Int | Uint),
            _ => known.is_dyn() || known.is_number(),
        };
        // The overloads one known operand leaves (`x % 1u` is a uint).
        return fits.then(|| signature_result(op, None, &[a.clone(), b.clone()]));
    }
    match (op, a, b) {
        (_, Int, Int) => Some(Int),
        (_, Uint, Uint) => Some(Uint),
        (o, Double, Double) if o != operators::MODULO => Some(Double),
        (operators::ADD, String, String) => Some(String),
        (operators::ADD, Bytes, Bytes) => Some(Bytes),
        // `(list(A), list(A)) -> list(A)`.
        (operators::ADD, List(x), List(y)) if assignable(x, y) => {
            Some(List(Box::new(most_general((**x).clone(), (**y).clone()))))
        }
        (operators::ADD, Timestamp, Duration) | (operators::ADD, Duration, Timestamp) => {
            Some(Timestamp)
        }
        (operators::ADD | operators::SUBSTRACT, Duration, Duration) => Some(Duration),
        (operators::SUBSTRACT, Timestamp, Timestamp) => Some(Duration),
        (operators::SUBSTRACT, Timestamp, Duration) => Some(Timestamp),
        _ => None,
    }
}

impl<'s> Checker<'_, 's> {
    fn error(&mut self, node: u64, message: String, help: Option<String>) {
        self.errors.push(Found {
            node,
            element: None,
            message,
            help,
        });
    }

    /// The type of a list's elements or a map's keys or values after one
    /// more of type `t`: the more general where they fit (cel-go's
    /// `joinTypes`), else `dyn` (the checker's own; the homogeneous check
    /// is [`Checker::homogeneous`]).
    fn join_element(&self, previous: Option<Type<'s>>, t: Type<'s>) -> Type<'s> {
        let Some(previous) = previous else {
            return t;
        };
        if assignable(&previous, &t) {
            return most_general(previous, t);
        }
        Type::Dyn
    }

    /// cel-go's validator of homogeneous aggregate literals, on the types
    /// the checker gave: every element of a list has its first element's
    /// type (the first that differs is reported), every key of a map its
    /// first key's, every value its first value's. Where a type is not
    /// exact, nothing is reported.
    fn homogeneous(&mut self) {
        for literal in std::mem::take(&mut self.literals) {
            for value in [false, true] {
                let mut parts = literal
                    .elements
                    .iter()
                    .filter(|(at, _, _)| at.value == value);
                let Some((_, first, true)) = parts.next() else {
                    continue;
                };
                for (at, t, exact) in parts {
                    if *exact && t != first {
                        self.errors.push(Found {
                            node: literal.node,
                            element: Some(*at),
                            message: format!("expected type '{first}' but found '{t}'"),
                            help: None,
                        });
                        // A list reports its first difference only.
                        if !literal.map {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// The type inside an optional element (`[?x]`, `{?k: v}`); an element
    /// of another known type is an error.
    fn optional_element(&mut self, node: u64, element: Element, t: Type<'s>) -> Type<'s> {
        match t {
            Type::Optional(inner) => *inner,
            Type::Dyn => Type::Dyn,
            other => {
                self.errors.push(Found {
                    node,
                    element: Some(element),
                    message: format!(
                        "expected type '{}' but found '{other}'",
                        Type::Optional(Box::new(other.clone()))
                    ),
                    help: None,
                });
                Type::Dyn
            }
        }
    }

    /// Whether `==` and `in` have an overload for `a` and `b`: `(A, A)` in
    /// cel-go, so `1 == 1.0` and `1 in ['a']` are refused. Where a schema
    /// gave types, `null` compares with everything: its fields are not
    /// nullable in the apiserver's types, but katalog reads JSON, where
    /// `x == null` tests a value that is there.
    fn equatable(&self, a: &Type, b: &Type) -> bool {
        match (a, b) {
            (Type::Null, _) | (_, Type::Null) if !self.untyped => true,
            (Type::List(x), Type::List(y)) | (Type::Optional(x), Type::Optional(y)) => {
                self.equatable(x, y)
            }
            (Type::Map(k1, v1), Type::Map(k2, v2)) => {
                self.equatable(k1, k2) && self.equatable(v1, v2)
            }
            _ => assignable(a, b),
        }
    }

    fn no_overload(&mut self, node: u64, name: &str, receiver: Option<&Type>, args: &[Type]) {
        let args = args
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let applied = match receiver {
            Some(r) => format!("{r}.({args})"),
            None => format!("({args})"),
        };
        self.error(
            node,
            format!("found no matching overload for '{name}' applied to '{applied}'"),
            None,
        );
    }

    fn lookup(&self, name: &str) -> Type<'s> {
        if let Some((_, t, _)) = self.scopes.iter().rev().find(|(n, _, _)| n == name) {
            return t.clone();
        }
        self.env
            .idents
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or(Type::Dyn, |(_, t)| t.clone())
    }

    fn shadowed(&self, name: &str) -> bool {
        self.scopes.iter().any(|(n, _, _)| n == name)
    }

    /// The node a call's errors are reported at: a call the macro made on
    /// its accumulator (`__result__ && p`) is reported at the macro.
    fn owner(&self, e: &IdedExpr, call: &CallExpr) -> u64 {
        for (accu, comprehension) in self.accu.iter().rev() {
            if call
                .args
                .iter()
                .any(|a| matches!(&a.expr, Expr::Ident(n) if n == accu))
            {
                return *comprehension;
            }
        }
        e.id
    }

    fn expr(&mut self, e: &IdedExpr) -> Type<'s> {
        let t = self.expr_type(e);
        let exact = concrete(&t) || self.exact_dyn(e);
        self.exact.insert(e.id, exact);
        self.types.insert(e.id, t.clone());
        t
    }

    /// Whether the type [`Checker::expr`] gave `e` is cel-go's.
    fn is_exact(&self, e: &IdedExpr) -> bool {
        self.exact.get(&e.id).copied().unwrap_or(false)
    }

    /// Whether the type of `e`, which has `dyn` in it, is cel-go's: a
    /// variable (declared `dyn`), what is selected or indexed from a value
    /// of a known type, `dyn(x)`, a non-empty literal of such elements.
    fn exact_dyn(&self, e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Ident(name) => self
                .scopes
                .iter()
                .rev()
                .find(|(n, _, _)| n == name)
                .is_none_or(|(_, _, exact)| *exact),
            Expr::Call(call) => match (call.func_name.as_str(), call.args.as_slice()) {
                (operators::INDEX | operators::OPT_INDEX, [base, _]) => {
                    self.is_exact(base)
                        || matches!(&base.expr, Expr::Ident(v) if v == "variables" && !self.shadowed(v))
                }
                ("dyn", [_]) => call.target.is_none(),
                _ => false,
            },
            // `null` joins other types where cel-go keeps one of them.
            Expr::List(l) => {
                !l.elements.is_empty()
                    && l.elements.iter().all(|x| {
                        self.is_exact(x) && !matches!(x.expr, Expr::Literal(LiteralValue::Null))
                    })
            }
            Expr::Map(m) => {
                !m.entries.is_empty()
                    && m.entries.iter().all(|entry| match &entry.expr {
                        EntryExpr::MapEntry(m) => [&m.key, &m.value].iter().all(|x| {
                            self.is_exact(x) && !matches!(x.expr, Expr::Literal(LiteralValue::Null))
                        }),
                        EntryExpr::StructField(_) => false,
                    })
            }
            _ => false,
        }
    }

    fn expr_type(&mut self, e: &IdedExpr) -> Type<'s> {
        match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Type::Bool,
                LiteralValue::Bytes(_) => Type::Bytes,
                LiteralValue::Double(_) => Type::Double,
                LiteralValue::Int(_) => Type::Int,
                LiteralValue::Null => Type::Null,
                LiteralValue::String(_) => Type::String,
                LiteralValue::UInt(_) => Type::Uint,
            },
            Expr::Ident(name) => self.lookup(name),
            Expr::Select(select) => {
                // Only `has(x.f)` is left after `prepare`.
                let operand = match self.expr(&select.operand) {
                    Type::Optional(inner) => *inner,
                    other => other,
                };
                let t = self.field(e.id, &operand, &select.field, false);
                if select.test { Type::Bool } else { t }
            }
            Expr::List(list) => {
                let mut elem: Option<Type> = None;
                let mut elements = Vec::new();
                for (i, x) in list.elements.iter().enumerate() {
                    let mut t = self.expr(x);
                    let at = Element {
                        index: i,
                        value: false,
                        node: x.id,
                    };
                    if list.optional_indices.contains(&i) {
                        t = self.optional_element(e.id, at, t);
                    }
                    elements.push((at, t.clone(), self.is_exact(x)));
                    elem = Some(self.join_element(elem, t));
                }
                if self.in_format == 0 {
                    self.literals.push(Literal {
                        node: e.id,
                        map: false,
                        elements,
                    });
                }
                Type::List(Box::new(elem.unwrap_or(Type::Dyn)))
            }
            Expr::Map(map) => {
                let mut keys: Option<Type> = None;
                let mut values: Option<Type> = None;
                let mut elements = Vec::new();
                for (i, entry) in map.entries.iter().enumerate() {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let k = self.expr(&m.key);
                        let key_at = Element {
                            index: i,
                            value: false,
                            node: m.key.id,
                        };
                        let value_at = Element {
                            index: i,
                            value: true,
                            node: m.value.id,
                        };
                        elements.push((key_at, k.clone(), self.is_exact(&m.key)));
                        keys = Some(self.join_element(keys, k));
                        let mut v = self.expr(&m.value);
                        if m.optional {
                            v = self.optional_element(e.id, value_at, v);
                        }
                        elements.push((value_at, v.clone(), self.is_exact(&m.value)));
                        values = Some(self.join_element(values, v));
                    }
                }
                if self.in_format == 0 {
                    self.literals.push(Literal {
                        node: e.id,
                        map: true,
                        elements,
                    });
                }
                Type::Map(
                    Box::new(keys.unwrap_or(Type::Dyn)),
                    Box::new(values.unwrap_or(Type::Dyn)),
                )
            }
            Expr::Comprehension(c) => self.comprehension(e.id, c),
            Expr::Call(call) => self.call(e, call),
            Expr::Struct(_) | Expr::Unspecified => Type::Dyn,
        }
    }

    /// `t.f` (and `t['f']`, `t.?f` without the optional).
    fn field(&mut self, node: u64, t: &Type<'s>, f: &str, optional: bool) -> Type<'s> {
        match t {
            Type::Dyn => Type::Dyn,
            Type::Object { schema, reported } => {
                if let Some(p) = schema.property(f) {
                    return Type::of_schema(p, *reported);
                }
                let opaque = matches!(
                    schema.opaque,
                    Some(
                        Opacity::PreserveUnknownFields
                            | Opacity::AdditionalProperties
                            | Opacity::OneOf
                            | Opacity::AnyOf
                            | Opacity::AllOf
                    )
                );
                if !opaque && !*reported && !optional {
                    let help =
                        crate::error::did_you_mean(f, schema.properties.keys().map(String::as_str))
                            .map(|s| format!("did you mean `{s}`?"))
                            .or_else(|| {
                                (schema.properties.len() <= 8).then(|| {
                                    format!(
                                        "the object declares {}",
                                        schema
                                            .properties
                                            .keys()
                                            .map(|k| format!("`{k}`"))
                                            .collect::<Vec<_>>()
                                            .join(", ")
                                    )
                                })
                            });
                    self.error(node, format!("undefined field '{f}'"), help);
                }
                Type::Dyn
            }
            // cel-go selects a field of any map (its key type unchecked).
            Type::Map(_, v) => (**v).clone(),
            other => {
                self.error(
                    node,
                    format!("type '{other}' does not support field selection"),
                    None,
                );
                Type::Dyn
            }
        }
    }

    fn comprehension(&mut self, id: u64, c: &ComprehensionExpr) -> Type<'s> {
        let range = self.expr(&c.iter_range);
        let (first, second) = match &range {
            Type::List(t) => match c.iter_var2 {
                Some(_) => (Type::Int, (**t).clone()),
                None => ((**t).clone(), Type::Dyn),
            },
            Type::Map(k, v) => ((**k).clone(), (**v).clone()),
            Type::Object { .. } => (Type::String, Type::Dyn),
            Type::Dyn => (Type::Dyn, Type::Dyn),
            other => {
                self.error(
                    id,
                    format!(
                        "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                    ),
                    None,
                );
                (Type::Dyn, Type::Dyn)
            }
        };
        let init = self.expr(&c.accu_init);
        let depth = self.scopes.len();
        // Over a range of a known type, the variables' types are known.
        let exact = self.is_exact(&c.iter_range);
        self.scopes.push((c.iter_var.clone(), first, exact));
        if let Some(v2) = &c.iter_var2 {
            self.scopes.push((v2.clone(), second, exact));
        }
        self.scopes.push((c.accu_var.clone(), init.clone(), false));
        self.accu.push((c.accu_var.clone(), id));
        let step = self.expr(&c.loop_step);
        self.accu.pop();
        self.scopes.truncate(depth);
        // What `map` and `filter` build from `[]`: a list of their
        // elements' type (cel-go binds `[]`'s element type to it).
        let built = match (&c.accu_init.expr, &c.loop_step.expr) {
            (Expr::List(init), Expr::Call(step)) if init.elements.is_empty() => {
                let add = match (step.func_name.as_str(), step.args.as_slice()) {
                    (operators::CONDITIONAL, [_, add, _]) => add,
                    _ => &c.loop_step,
                };
                match &add.expr {
                    Expr::Call(add) if add.func_name == operators::ADD => match add.args.as_slice()
                    {
                        [accu, element] if matches!(&accu.expr, Expr::Ident(n) if *n == c.accu_var) => {
                            match &element.expr {
                                Expr::List(l) if l.elements.len() == 1 => l.elements.first(),
                                _ => None,
                            }
                        }
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        };
        let (accu, exact) = match built.and_then(|x| self.types.get(&x.id).map(|t| (x, t))) {
            Some((x, t)) if step != Type::Dyn => {
                (Type::List(Box::new(t.clone())), self.is_exact(x))
            }
            _ => (join(init, step), false),
        };
        self.scopes.push((c.accu_var.clone(), accu, exact));
        // The result is the macro's own (`__result__`, `__result__ == 1`).
        let errors = self.errors.len();
        let result = self.expr(&c.result);
        self.errors.truncate(errors);
        self.scopes.truncate(depth);
        result
    }

    fn call(&mut self, e: &IdedExpr, call: &CallExpr) -> Type<'s> {
        let name = call.func_name.as_str();
        // `variables.NAME`, `variables.?NAME`.
        if matches!(name, operators::INDEX | operators::OPT_INDEX)
            && let [base, key] = call.args.as_slice()
            && matches!(&base.expr, Expr::Ident(v) if v == "variables")
            && !self.shadowed("variables")
            && let Expr::Literal(LiteralValue::String(var)) = &key.expr
        {
            let t = self
                .env
                .variables
                .get(&var.to_string())
                .cloned()
                .unwrap_or(Type::Dyn);
            return if name == operators::OPT_INDEX {
                Type::Optional(Box::new(t))
            } else {
                t
            };
        }
        let node = self.owner(e, call);
        let format = name == "format";
        self.in_format += usize::from(format);
        let receiver = call.target.as_deref().map(|t| self.expr(t));
        let args: Vec<Type<'s>> = call.args.iter().map(|a| self.expr(a)).collect();
        self.in_format -= usize::from(format);
        let bool_like = |t: &Type| matches!(t, Type::Bool | Type::Dyn);
        match (name, args.as_slice()) {
            (operators::LOGICAL_AND | operators::LOGICAL_OR, [a, b]) => {
                if !bool_like(a) || !bool_like(b) {
                    self.no_overload(node, name, None, &args);
                }
                Type::Bool
            }
            // The steps `macros.rs` gives `all` and `exists`: `&&` and `||`
            // that keep an error pending.
            (super::macros::ALL_STEP | super::macros::EXISTS_STEP, [a, b]) => {
                if !bool_like(a) || !bool_like(b) {
                    let op = if name == super::macros::ALL_STEP {
                        operators::LOGICAL_AND
                    } else {
                        operators::LOGICAL_OR
                    };
                    self.no_overload(node, op, None, &args);
                }
                Type::Bool
            }
            (operators::LOGICAL_NOT, [a]) => {
                if !bool_like(a) {
                    self.no_overload(node, name, None, &args);
                }
                Type::Bool
            }
            (operators::NOT_STRICTLY_FALSE, _) => Type::Bool,
            // `_?_:_` is `(bool, A, A) -> A`.
            (operators::CONDITIONAL, [c, a, b]) => {
                if !bool_like(c) || !assignable(a, b) {
                    self.no_overload(node, name, None, &args);
                    return Type::Dyn;
                }
                most_general(a.clone(), b.clone())
            }
            (EQ_FUNCTION | NE_FUNCTION | operators::EQUALS | operators::NOT_EQUALS, [a, b]) => {
                if !self.equatable(a, b) {
                    let op = if matches!(name, NE_FUNCTION | operators::NOT_EQUALS) {
                        operators::NOT_EQUALS
                    } else {
                        operators::EQUALS
                    };
                    self.no_overload(node, op, None, &args);
                }
                Type::Bool
            }
            (
                operators::LESS
                | operators::LESS_EQUALS
                | operators::GREATER
                | operators::GREATER_EQUALS,
                [a, b],
            ) => {
                if !ordered(a, b) {
                    self.no_overload(node, name, None, &args);
                }
                Type::Bool
            }
            (
                operators::ADD
                | operators::SUBSTRACT
                | operators::MULTIPLY
                | operators::DIVIDE
                | operators::MODULO,
                [a, b],
            ) => match arithmetic(name, a, b) {
                Some(t) => t,
                None => {
                    self.no_overload(node, name, None, &args);
                    Type::Dyn
                }
            },
            (NEG_FUNCTION | operators::NEGATE, [a]) => {
                if !matches!(a, Type::Int | Type::Double | Type::Dyn) {
                    self.no_overload(node, operators::NEGATE, None, &args);
                }
                a.clone()
            }
            (IN_FUNCTION | operators::IN, [x, container]) => {
                let ok = match container {
                    Type::Dyn => true,
                    Type::List(t) => self.equatable(x, t),
                    Type::Map(k, _) => self.equatable(x, k),
                    Type::Object { .. } => self.equatable(x, &Type::String),
                    _ => false,
                };
                if !ok {
                    self.no_overload(node, operators::IN, None, &args);
                }
                Type::Bool
            }
            (operators::INDEX | operators::OPT_INDEX, [base, key]) => {
                // Selecting or indexing inside an optional gives an
                // optional, with or without `?` (cel-go's optional library).
                let (base, optional) = match base {
                    Type::Optional(inner) => ((**inner).clone(), true),
                    _ => (base.clone(), name == operators::OPT_INDEX),
                };
                // A selection (`x.f`, which `prepare` made `x['f']` with the
                // node's id for the key) or a string key where fields are.
                let field = match &call.args[1].expr {
                    Expr::Literal(LiteralValue::String(f))
                        if call.args[1].id == e.id
                            || name == operators::OPT_INDEX
                            || matches!(base, Type::Map(..) | Type::Object { .. } | Type::Dyn) =>
                    {
                        Some(f)
                    }
                    _ => None,
                };
                let t = if let Some(f) = field {
                    self.field(node, &base, f, optional)
                } else {
                    // The key each container takes, and what it gives.
                    // `(list(A), int) -> A`, `(map(K, V), K) -> V`.
                    let (ok, t) = match &base {
                        Type::List(elem) => {
                            (matches!(key, Type::Int | Type::Dyn), (**elem).clone())
                        }
                        Type::Map(k, v) => (assignable(key, k), (**v).clone()),
                        Type::Object { .. } => (assignable(key, &Type::String), Type::Dyn),
                        Type::Dyn => (true, Type::Dyn),
                        _ => (false, Type::Dyn),
                    };
                    if !ok {
                        self.no_overload(node, name, None, &[base.clone(), key.clone()]);
                    }
                    t
                };
                if optional {
                    Type::Optional(Box::new(t))
                } else {
                    t
                }
            }
            _ => self.function(node, name, call, receiver, args),
        }
    }

    fn function(
        &mut self,
        node: u64,
        name: &str,
        call: &CallExpr,
        receiver: Option<Type<'s>>,
        args: Vec<Type<'s>>,
    ) -> Type<'s> {
        // A namespaced function (`optional.of`, `math.greatest`) is a
        // call with an identifier for a target.
        let namespace = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns))
                if super::FUNCTION_NAMESPACES.contains(&ns.as_str()) && !self.shadowed(ns) =>
            {
                Some(ns.as_str())
            }
            _ => None,
        };
        if let Some(ns) = namespace {
            return match (ns, name, args.as_slice()) {
                ("optional", "of" | "ofNonZeroValue", [t]) => Type::Optional(Box::new(t.clone())),
                ("optional", "none", []) => Type::Optional(Box::new(Type::Dyn)),
                _ => signature_result(&format!("{ns}.{name}"), None, &args),
            };
        }
        match (name, &receiver, args.as_slice()) {
            ("dyn", None, _) => return Type::Dyn,
            // `a + b` or `a - b` under its range check (`time.rs`).
            (super::time::IN_RANGE, None, [t]) => return t.clone(),
            ("value", Some(Type::Optional(t)), []) => return (**t).clone(),
            ("hasValue", Some(Type::Optional(_)), []) => return Type::Bool,
            ("orValue", Some(Type::Optional(t)), [d]) => return join((**t).clone(), d.clone()),
            ("or", Some(Type::Optional(t)), [Type::Optional(d)]) => {
                return Type::Optional(Box::new(join((**t).clone(), (**d).clone())));
            }
            _ => {}
        }
        let candidates = overloads(name);
        if candidates.is_empty() {
            return signature_result(name, receiver.as_ref(), &args);
        }
        let fits = |o: &&Overload| {
            let receiver_ok = match (o.0, &receiver) {
                (None, None) => true,
                (Some(p), Some(r)) => p.admits(r),
                _ => false,
            };
            receiver_ok
                && o.1.len() == args.len()
                && o.1.iter().zip(&args).all(|(p, a)| p.admits(a))
        };
        let fitting: Vec<&Overload> = candidates.iter().filter(fits).collect();
        let Some(first) = fitting.first() else {
            // An arity or a receiver the table does not know: not checked.
            let known_shape = candidates
                .iter()
                .any(|o| o.0.is_some() == receiver.is_some() && o.1.len() == args.len());
            if known_shape
                && !receiver
                    .as_ref()
                    .is_some_and(|r| matches!(r, Type::Optional(_)))
            {
                self.no_overload(node, name, receiver.as_ref(), &args);
            }
            return Type::Dyn;
        };
        let result = |r: R| match r {
            R::Bool => Type::Bool,
            R::Int => Type::Int,
            R::Double => Type::Double,
            R::S => Type::String,
            R::Bytes => Type::Bytes,
            R::ListOfS => Type::List(Box::new(Type::String)),
            R::Ts => Type::Timestamp,
            R::Dur => Type::Duration,
            R::Opaque(n) => Type::Opaque(n),
            R::Same => receiver.clone().unwrap_or(Type::Dyn),
            R::Elem => match &receiver {
                Some(Type::List(t)) => (**t).clone(),
                _ => Type::Dyn,
            },
            R::OptElem => match &receiver {
                Some(Type::List(t)) => Type::Optional(t.clone()),
                _ => Type::Optional(Box::new(Type::Dyn)),
            },
        };
        // Several overloads that fit (on `dyn`) give their common result,
        // else `dyn`, as in cel-go.
        let t = result(first.2);
        if fitting[1..].iter().all(|o| result(o.2) == t) {
            t
        } else {
            Type::Dyn
        }
    }
}

/// An error about the whole expression (its result's type), at its start.
pub fn whole_expression_error(source: &str, message: &str) -> String {
    let (at, snippet) = caret_at(source, 0);
    format!("ERROR: {at}: {message}\n{snippet}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::CelProgram;
    use crate::schema::SchemaNode;
    use serde_json::json;

    fn schema() -> SchemaNode {
        SchemaNode::resource(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "storageGB": {"type": "integer"},
                        "replicas": {"type": "integer"},
                        "name": {"type": "string"},
                        "enabled": {"type": "boolean"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "containers": {"type": "array", "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "image": {"type": "string"},
                                "ports": {"type": "array", "items": {
                                    "type": "object",
                                    "properties": {"containerPort": {"type": "integer"}}
                                }}
                            }
                        }}
                    }
                }
            }
        }))
    }

    fn errors(expr: &str) -> Vec<String> {
        let schema = schema();
        let env = Env {
            idents: vec![
                ("object".into(), Type::of_schema(&schema, false)),
                ("self".into(), Type::of_schema(&schema, false)),
                ("request".into(), Type::Dyn),
            ],
            variables: HashMap::from([("n".to_string(), Type::Int)]),
        };
        let program = CelProgram::compile(expr).unwrap();
        check(&program, &env)
            .1
            .into_iter()
            .map(|e| {
                format!(
                    "{}: {}{}",
                    e.at,
                    e.message,
                    e.help.map(|h| format!(" ({h})")).unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn well_typed_expressions_pass() {
        for expr in [
            "self.spec.storageGB <= 500",
            "self.spec.storageGB <= 500.5",
            "object.spec.name.startsWith('a') && object.spec.enabled",
            "object.spec.containers.all(c, c.image.contains(':') && c.ports.all(p, p.containerPort > 0))",
            "object.spec.containers.map(c, c.name).join(',') != ''",
            "object.spec.containers.filter(c, c.name == 'x').size() == 1",
            "object.spec.containers.exists_one(c, c.name == 'x')",
            "object.spec.port == 80 || object.spec.port == 'http'",
            "object.spec.extra.anything.goes == 1",
            "object.spec.labels['app'] == 'x' && 'app' in object.spec.labels",
            "has(object.spec.name) && object.?spec.?name.orValue('') == ''",
            "request.userInfo.username == 'admin'",
            "variables.n + 1 > 2",
            "object.spec.replicas == null || size(object.spec.containers) > 0",
            "[1, 2].all(x, x > 0) && {'a': 1}.all(k, k == 'a')",
            "object.spec.containers[0].name == 'a'",
            "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
            "int(object.spec.name) > 0 && string(object.spec.replicas) == '1'",
            "object.spec.containers.map(c, c.ports.map(p, p.containerPort)).all(l, l.all(p, p > 0))",
        ] {
            assert_eq!(errors(expr), Vec::<String>::new(), "{expr}");
        }
    }

    #[test]
    fn a_call_without_an_overload_is_located() {
        assert_eq!(
            errors("self.spec.storageGB <= '500'"),
            ["<input>:1:21: found no matching overload for '_<=_' applied to '(int, string)'"]
        );
        assert_eq!(
            errors("object.spec.name == 'a' && object.spec.replicas.startsWith('1')"),
            ["<input>:1:59: found no matching overload for 'startsWith' applied to 'int.(string)'"]
        );
        assert_eq!(
            errors("object.spec.replicas + 1 > 1 && object.spec.name + 1 > 0"),
            ["<input>:1:50: found no matching overload for '_+_' applied to '(string, int)'"]
        );
        assert_eq!(
            errors("variables.n == 'x'"),
            ["<input>:1:13: found no matching overload for '_==_' applied to '(int, string)'"]
        );
    }

    #[test]
    fn comprehension_variables_have_their_elements_types() {
        assert_eq!(
            errors("object.spec.containers.all(c, c.ports.exists(p, p.containerPort == 'http'))"),
            ["<input>:1:65: found no matching overload for '_==_' applied to '(int, string)'"]
        );
        assert_eq!(
            errors("object.spec.containers.all(c, c.name)"),
            ["<input>:1:24: found no matching overload for '_&&_' applied to '(bool, string)'"]
        );
    }

    #[test]
    fn unknown_fields_have_a_did_you_mean() {
        assert_eq!(
            errors("object.spec.replicsa > 1"),
            ["<input>:1:13: undefined field 'replicsa' (did you mean `replicas`?)"]
        );
        assert_eq!(
            errors("object.spec.containers.exists(c, c.imag == 'x')"),
            ["<input>:1:36: undefined field 'imag' (did you mean `image`?)"]
        );
        assert_eq!(
            errors("object.spec.name.foo == 'x'"),
            ["<input>:1:18: type 'string' does not support field selection"]
        );
    }

    #[test]
    fn the_caret_finds_the_nth_occurrence() {
        assert_eq!(
            errors("object.spec.replicas <= 1 && object.spec.storageGB <= 'x'"),
            ["<input>:1:52: found no matching overload for '_<=_' applied to '(int, string)'"]
        );
        assert_eq!(
            errors("'.replicsa' == object.spec.name && object.spec.replicsa == 1"),
            ["<input>:1:48: undefined field 'replicsa' (did you mean `replicas`?)"]
        );
        assert_eq!(
            errors(
                "object.?spec.?name.orValue('') == '' && object.?spec.?name.?first.orValue('') == 'a'"
            ),
            ["<input>:1:61: type 'string' does not support field selection"]
        );
    }
}

/// The checker's verdict against the evaluator's: an operator the checker
/// accepts on values of the schema's types evaluates, one it refuses fails.
#[cfg(test)]
mod agreement {
    use super::*;
    use crate::cel::CelProgram;
    use crate::schema::SchemaNode;
    use serde_json::json;

    #[test]
    fn the_checker_refuses_exactly_the_operators_evaluation_refuses() {
        // Every field of each type, every operator, a literal of each type:
        // `<`, `+`, ... are refused by both or by neither.
        let schema = SchemaNode::resource(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "count": {"type": "integer"},
                "tier": {"type": "string"},
                "ratio": {"type": "number"},
                "on": {"type": "boolean"},
                "names": {"type": "array", "items": {"type": "string"}},
            }}}
        }));
        let object =
            json!({"spec": {"count": 3, "tier": "gold", "ratio": 0.5, "on": true, "names": ["a"]}});
        let env = Env {
            idents: vec![("object".into(), Type::of_schema(&schema, false))],
            ..Env::default()
        };
        let mut disagreements = Vec::new();
        for field in ["count", "tier", "ratio", "on", "names"] {
            for op in ["<", "<=", ">", ">=", "+", "-", "*", "/", "%", "in", "=="] {
                for literal in ["2", "'x'", "2.5", "true", "2u", "['a']"] {
                    let expr = format!("object.spec.{field} {op} {literal}");
                    let program = CelProgram::compile_unchecked(&expr).unwrap();
                    let accepted = check(&program, &env).1.is_empty();
                    let evaluated = program.eval(&[("object", &object)]);
                    let evaluates = match &evaluated {
                        Ok(_) => true,
                        // Division by zero and overflow are not type errors.
                        Err(e) => {
                            !e.to_string().to_lowercase().contains("overload")
                                && !e.to_string().contains("Unsupported")
                                && !e.to_string().contains("unsupported")
                        }
                    };
                    // `==` and `in` across types are false at run time
                    // (heterogeneous equality) where cel-go's checker
                    // refuses them: a test that never holds.
                    if matches!(op, "in" | "==") {
                        let holds = matches!(evaluated, Ok(serde_json::Value::Bool(true)));
                        if (accepted && !evaluates) || (!accepted && holds) {
                            disagreements.push(format!(
                                "{expr}: checker {accepted}, evaluation {evaluated:?}"
                            ));
                        }
                        continue;
                    }
                    if accepted != evaluates {
                        disagreements.push(format!(
                            "{expr}: checker {accepted}, evaluation {evaluated:?}"
                        ));
                    }
                }
            }
        }
        assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    }
}
