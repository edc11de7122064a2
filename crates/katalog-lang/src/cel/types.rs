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

use std::collections::HashMap;
use std::fmt;

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, operators,
};

use super::{EQ_FUNCTION, IN_FUNCTION, NE_FUNCTION, NEG_FUNCTION};
use crate::schema::{Opacity, SchemaNode};

/// A CEL type, as far as the checker knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Type<'s> {
    /// Unknown: matches everything.
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    List(Box<Type<'s>>),
    Map(Box<Type<'s>>, Box<Type<'s>>),
    /// An object whose fields a schema declares.
    Object {
        schema: &'s SchemaNode,
        /// Unknown fields of this object are reported elsewhere (the
        /// selection checks of the admission compiler): not again here.
        reported: bool,
    },
    Optional(Box<Type<'s>>),
    /// An extension value (`quantity`, `url`, `ip`, `cidr`, `semver`).
    Opaque(&'static str),
}

impl fmt::Display for Type<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Null => f.write_str("null_type"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Object { .. } => f.write_str("object"),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::Opaque(name) => f.write_str(name),
        }
    }
}

impl<'s> Type<'s> {
    /// The type of the values a schema node holds. Strings with a format
    /// the apiserver reads as another type (`date-time`, `duration`,
    /// `byte`) are `dyn`: katalog binds them as strings.
    pub fn of_schema(node: &'s SchemaNode, reported: bool) -> Type<'s> {
        if node.int_or_string {
            return Type::Dyn;
        }
        match node.type_.as_deref() {
            Some("object") => {
                if !node.properties.is_empty() {
                    Type::Object {
                        schema: node,
                        reported,
                    }
                } else if let Some(values) = &node.additional_properties {
                    Type::Map(
                        Box::new(Type::String),
                        Box::new(Type::of_schema(values, reported)),
                    )
                } else {
                    Type::Dyn
                }
            }
            Some("array") => Type::List(Box::new(
                node.items
                    .as_deref()
                    .map_or(Type::Dyn, |i| Type::of_schema(i, reported)),
            )),
            Some("string") => match node.format.as_deref() {
                Some("date-time" | "date" | "duration" | "byte") => Type::Dyn,
                _ => Type::String,
            },
            Some("integer") => Type::Int,
            Some("number") => Type::Double,
            Some("boolean") => Type::Bool,
            _ => Type::Dyn,
        }
    }

    /// The same type with unknown fields reported here (a value reached
    /// through a variable, which the selection checks do not follow).
    pub fn unreported(self) -> Type<'s> {
        match self {
            Type::Object { schema, .. } => Type::Object {
                schema,
                reported: false,
            },
            Type::List(t) => Type::List(Box::new(t.unreported())),
            Type::Map(k, v) => Type::Map(k, Box::new(v.unreported())),
            Type::Optional(t) => Type::Optional(Box::new(t.unreported())),
            other => other,
        }
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Type::Dyn)
    }

    fn is_number(&self) -> bool {
        matches!(self, Type::Int | Type::Uint | Type::Double)
    }
}

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
    let mut checker = Checker {
        env,
        scopes: Vec::new(),
        errors: Vec::new(),
        accu: Vec::new(),
    };
    let ast = &program.inner.ast;
    let t = checker.expr(ast);
    let source = program.source();
    let needles = source_order(ast);
    let tokens = tokenize(source);
    let mut out: Vec<TypeError> = Vec::new();
    for e in checker.errors {
        let offset = locate(&needles, &tokens, e.node).unwrap_or(0);
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

struct Found {
    node: u64,
    message: String,
    help: Option<String>,
}

struct Checker<'c, 's> {
    env: &'c Env<'s>,
    /// Comprehension variables, innermost last.
    scopes: Vec<(String, Type<'s>)>,
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

/// Whether a value of type `a` may be compared with `==` to one of `b`.
fn comparable(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Dyn | Type::Null, _) | (_, Type::Dyn | Type::Null) => true,
        _ if a.is_number() && b.is_number() => true,
        (Type::List(x), Type::List(y)) => comparable(x, y),
        (Type::Map(k1, v1), Type::Map(k2, v2)) => comparable(k1, k2) && comparable(v1, v2),
        (Type::Object { .. }, Type::Object { .. }) => true,
        (Type::Object { .. }, Type::Map(k, _)) | (Type::Map(k, _), Type::Object { .. }) => {
            comparable(k, &Type::String)
        }
        (Type::Optional(x), Type::Optional(y)) => comparable(x, y),
        (Type::Opaque(x), Type::Opaque(y)) => x == y,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
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
        return fits.then_some(Dyn);
    }
    match (op, a, b) {
        (_, Int, Int) => Some(Int),
        (_, Uint, Uint) => Some(Uint),
        (o, Double, Double) if o != operators::MODULO => Some(Double),
        (operators::ADD, String, String) => Some(String),
        (operators::ADD, Bytes, Bytes) => Some(Bytes),
        (operators::ADD, List(x), List(y)) => Some(List(Box::new(match (&**x, &**y) {
            (Dyn, t) | (t, Dyn) => t.clone(),
            _ => join((**x).clone(), (**y).clone()),
        }))),
        (operators::ADD, Timestamp, Duration) | (operators::ADD, Duration, Timestamp) => {
            Some(Timestamp)
        }
        (operators::ADD | operators::SUBSTRACT, Duration, Duration) => Some(Duration),
        (operators::SUBSTRACT, Timestamp, Timestamp) => Some(Duration),
        (operators::SUBSTRACT, Timestamp, Duration) => Some(Timestamp),
        _ => None,
    }
}

/// What a function call's receiver or argument may be.
#[derive(Clone, Copy)]
enum P {
    Any,
    S,
    I,
    B,
    List,
    ListOfS,
    /// A list, a map or an object: something with a size.
    Sized,
    Ts,
    Dur,
    Opaque(&'static str),
}

impl P {
    fn admits(self, t: &Type) -> bool {
        if t.is_dyn() {
            return true;
        }
        match self {
            P::Any => true,
            P::S => matches!(t, Type::String),
            P::I => matches!(t, Type::Int),
            P::B => matches!(t, Type::Bool),
            P::List => matches!(t, Type::List(_)),
            P::ListOfS => match t {
                Type::List(e) => matches!(**e, Type::Dyn | Type::String),
                _ => false,
            },
            P::Sized => matches!(
                t,
                Type::String | Type::Bytes | Type::List(_) | Type::Map(..) | Type::Object { .. }
            ),
            P::Ts => matches!(t, Type::Timestamp),
            P::Dur => matches!(t, Type::Duration),
            P::Opaque(name) => matches!(t, Type::Opaque(n) if *n == name),
        }
    }
}

/// What a call returns.
#[derive(Clone, Copy)]
enum R {
    Bool,
    Int,
    Double,
    S,
    Bytes,
    ListOfS,
    Ts,
    Dur,
    Opaque(&'static str),
    /// The receiver's type.
    Same,
    /// The receiver list's element type.
    Elem,
    /// An optional of the receiver list's element type.
    OptElem,
}

/// One overload: receiver (`None`: a global call), arguments, result.
type Overload = (Option<P>, &'static [P], R);

/// The overloads of the functions the checker knows; a function not
/// listed is not checked (its result is `dyn`).
fn overloads(name: &str) -> &'static [Overload] {
    use P::*;
    const Q: P = P::Opaque("kubernetes.Quantity");
    const URL: P = P::Opaque("kubernetes.URL");
    const IP: P = P::Opaque("net.IP");
    const CIDR: P = P::Opaque("net.CIDR");
    const SEMVER: P = P::Opaque("kubernetes.Semver");
    match name {
        "size" => &[(None, &[Sized], R::Int), (Some(Sized), &[], R::Int)],
        "contains" | "startsWith" | "endsWith" => &[(Some(S), &[S], R::Bool)],
        "matches" => &[(Some(S), &[S], R::Bool), (None, &[S, S], R::Bool)],
        "lowerAscii" | "upperAscii" | "trim" => &[(Some(S), &[], R::S)],
        "replace" => &[(Some(S), &[S, S], R::S), (Some(S), &[S, S, I], R::S)],
        "split" => &[(Some(S), &[S], R::ListOfS), (Some(S), &[S, I], R::ListOfS)],
        "substring" => &[(Some(S), &[I], R::S), (Some(S), &[I, I], R::S)],
        "charAt" => &[(Some(S), &[I], R::S)],
        "indexOf" | "lastIndexOf" => &[
            (Some(S), &[S], R::Int),
            (Some(S), &[S, I], R::Int),
            (Some(List), &[Any], R::Int),
        ],
        "join" => &[(Some(ListOfS), &[], R::S), (Some(ListOfS), &[S], R::S)],
        "format" => &[(Some(S), &[List], R::S)],
        "find" => &[(Some(S), &[S], R::S)],
        "findAll" => &[(Some(S), &[S], R::ListOfS), (Some(S), &[S, I], R::ListOfS)],
        "reverse" => &[(Some(S), &[], R::S), (Some(List), &[], R::Same)],
        "isSorted" => &[(Some(List), &[], R::Bool)],
        "sum" => &[(Some(List), &[], R::Elem)],
        "sort" | "distinct" => &[(Some(List), &[], R::Same)],
        "slice" => &[(Some(List), &[I, I], R::Same)],
        "first" | "last" => &[(Some(List), &[], R::OptElem)],
        "int" => &[(None, &[Any], R::Int)],
        // The result of `all` and `exists` (see `macros.rs`).
        "@katalog_result" => &[(None, &[Any], R::Bool)],
        "bool" => &[(None, &[Any], R::Bool)],
        "double" => &[(None, &[Any], R::Double)],
        "string" => &[(None, &[Any], R::S)],
        "bytes" => &[(None, &[Any], R::Bytes)],
        "duration" => &[(None, &[S], R::Dur), (None, &[Dur], R::Dur)],
        "timestamp" => &[
            (None, &[S], R::Ts),
            (None, &[Ts], R::Ts),
            (None, &[I], R::Ts),
        ],
        "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" => &[(Some(Ts), &[], R::Int), (Some(Ts), &[S], R::Int)],
        "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => &[
            (Some(Ts), &[], R::Int),
            (Some(Ts), &[S], R::Int),
            (Some(Dur), &[], R::Int),
        ],
        "quantity" => &[(None, &[S], R::Opaque("kubernetes.Quantity"))],
        "isQuantity" | "isURL" | "isIP" | "isCIDR" | "isSemver" => {
            &[(None, &[S], R::Bool), (None, &[S, B], R::Bool)]
        }
        "isInteger" => &[(Some(Q), &[], R::Bool)],
        "asInteger" => &[(Some(Q), &[], R::Int)],
        "asApproximateFloat" => &[(Some(Q), &[], R::Double)],
        "add" | "sub" => &[(Some(Q), &[Q], R::Same), (Some(Q), &[I], R::Same)],
        "isGreaterThan" | "isLessThan" => {
            &[(Some(Q), &[Q], R::Bool), (Some(SEMVER), &[SEMVER], R::Bool)]
        }
        "compareTo" => &[(Some(Q), &[Q], R::Int), (Some(SEMVER), &[SEMVER], R::Int)],
        "url" => &[(None, &[S], R::Opaque("kubernetes.URL"))],
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
            &[(Some(URL), &[], R::S)]
        }
        "ip" => &[
            (None, &[S], R::Opaque("net.IP")),
            (Some(CIDR), &[], R::Opaque("net.IP")),
        ],
        "cidr" => &[(None, &[S], R::Opaque("net.CIDR"))],
        "family" => &[(Some(IP), &[], R::Int)],
        "containsIP" => &[(Some(CIDR), &[S], R::Bool), (Some(CIDR), &[IP], R::Bool)],
        "containsCIDR" => &[(Some(CIDR), &[S], R::Bool), (Some(CIDR), &[CIDR], R::Bool)],
        "prefixLength" => &[(Some(CIDR), &[], R::Int)],
        "masked" => &[(Some(CIDR), &[], R::Same)],
        "semver" => &[
            (None, &[S], R::Opaque("kubernetes.Semver")),
            (None, &[S, B], R::Opaque("kubernetes.Semver")),
        ],
        "major" | "minor" | "patch" => &[(Some(SEMVER), &[], R::Int)],
        _ => &[],
    }
}

impl<'s> Checker<'_, 's> {
    fn error(&mut self, node: u64, message: String, help: Option<String>) {
        self.errors.push(Found {
            node,
            message,
            help,
        });
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
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
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
        self.scopes.iter().any(|(n, _)| n == name)
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
                let operand = self.expr(&select.operand);
                let t = self.field(e.id, &operand, &select.field, false);
                if select.test { Type::Bool } else { t }
            }
            Expr::List(list) => {
                let mut elem: Option<Type> = None;
                for (i, x) in list.elements.iter().enumerate() {
                    let mut t = self.expr(x);
                    if list.optional_indices.contains(&i)
                        && let Type::Optional(inner) = t
                    {
                        t = *inner;
                    }
                    elem = Some(match elem {
                        None => t,
                        Some(prev) => join(prev, t),
                    });
                }
                Type::List(Box::new(elem.unwrap_or(Type::Dyn)))
            }
            Expr::Map(map) => {
                let mut kv: Option<(Type, Type)> = None;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let k = self.expr(&m.key);
                        let mut v = self.expr(&m.value);
                        if m.optional
                            && let Type::Optional(inner) = v
                        {
                            v = *inner;
                        }
                        kv = Some(match kv {
                            None => (k, v),
                            Some((pk, pv)) => (join(pk, k), join(pv, v)),
                        });
                    }
                }
                let (k, v) = kv.unwrap_or((Type::Dyn, Type::Dyn));
                Type::Map(Box::new(k), Box::new(v))
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
            Type::Map(k, v) => {
                if !comparable(k, &Type::String) {
                    self.no_overload(node, "_[_]", None, &[t.clone(), Type::String]);
                    return Type::Dyn;
                }
                (**v).clone()
            }
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
        self.scopes.push((c.iter_var.clone(), first));
        if let Some(v2) = &c.iter_var2 {
            self.scopes.push((v2.clone(), second));
        }
        self.scopes.push((c.accu_var.clone(), init.clone()));
        self.accu.push((c.accu_var.clone(), id));
        let step = self.expr(&c.loop_step);
        self.accu.pop();
        self.scopes.truncate(depth);
        let accu = join(init, step);
        self.scopes.push((c.accu_var.clone(), accu));
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
        let receiver = call.target.as_deref().map(|t| self.expr(t));
        let args: Vec<Type<'s>> = call.args.iter().map(|a| self.expr(a)).collect();
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
            (operators::CONDITIONAL, [c, a, b]) => {
                if !bool_like(c) {
                    self.no_overload(node, name, None, &args);
                }
                join(a.clone(), b.clone())
            }
            (EQ_FUNCTION | NE_FUNCTION | operators::EQUALS | operators::NOT_EQUALS, [a, b]) => {
                if !comparable(a, b) {
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
                    self.no_overload(node, name, None, &args);
                }
                a.clone()
            }
            (IN_FUNCTION | operators::IN, [x, container]) => {
                let ok = match container {
                    Type::Dyn => true,
                    Type::List(t) => comparable(x, t),
                    Type::Map(k, _) => comparable(x, k),
                    Type::Object { .. } => comparable(x, &Type::String),
                    _ => false,
                };
                if !ok {
                    self.no_overload(node, operators::IN, None, &args);
                }
                Type::Bool
            }
            (operators::INDEX | operators::OPT_INDEX, [base, key]) => {
                let optional = name == operators::OPT_INDEX;
                let base = match (optional, base) {
                    (true, Type::Optional(inner)) => (**inner).clone(),
                    _ => base.clone(),
                };
                let t = if let Expr::Literal(LiteralValue::String(f)) = &call.args[1].expr {
                    self.field(node, &base, f, optional)
                } else {
                    // The key each container takes, and what it gives.
                    let (ok, t) = match &base {
                        Type::List(elem) => (
                            matches!(key, Type::Int | Type::Uint | Type::Dyn),
                            (**elem).clone(),
                        ),
                        Type::Map(k, v) => (comparable(key, k), (**v).clone()),
                        Type::Object { .. } => (comparable(key, &Type::String), Type::Dyn),
                        Type::Dyn => (true, Type::Dyn),
                        _ => (false, Type::Dyn),
                    };
                    if !ok {
                        self.no_overload(
                            node,
                            operators::INDEX,
                            None,
                            &[base.clone(), key.clone()],
                        );
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
                _ => Type::Dyn,
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
            return Type::Dyn;
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
        if fitting.len() > 1 && receiver.as_ref().is_some_and(Type::is_dyn) {
            return Type::Dyn;
        }
        match first.2 {
            R::Bool => Type::Bool,
            R::Int => Type::Int,
            R::Double => Type::Double,
            R::S => Type::String,
            R::Bytes => Type::Bytes,
            R::ListOfS => Type::List(Box::new(Type::String)),
            R::Ts => Type::Timestamp,
            R::Dur => Type::Duration,
            R::Opaque(n) => Type::Opaque(n),
            R::Same => receiver.unwrap_or(Type::Dyn),
            R::Elem => match receiver {
                Some(Type::List(t)) => *t,
                _ => Type::Dyn,
            },
            R::OptElem => match receiver {
                Some(Type::List(t)) => Type::Optional(t),
                _ => Type::Optional(Box::new(Type::Dyn)),
            },
        }
    }
}

/// An error about the whole expression (its result's type), at its start.
pub fn whole_expression_error(source: &str, message: &str) -> String {
    let (at, snippet) = caret_at(source, 0);
    format!("ERROR: {at}: {message}\n{snippet}")
}

/// `<input>:LINE:COL` of the byte `at` of `source`, and its line with a
/// caret under it, as the parser shows a position.
pub(super) fn caret_at(source: &str, at: usize) -> (String, String) {
    let at = at.min(source.len());
    let line_start = source[..at].rfind('\n').map_or(0, |n| n + 1);
    let line_end = source[at..].find('\n').map_or(source.len(), |n| at + n);
    let line = source[..at].matches('\n').count() + 1;
    let col = source[line_start..at].chars().count() + 1;
    (
        format!("<input>:{line}:{col}"),
        format!("| {}\n| {:.>col$}", &source[line_start..line_end], "^"),
    )
}

/// What to look for in the source to put a caret under a node.
#[derive(Clone, Debug, PartialEq)]
enum Needle {
    /// `.f`, `?.f`, `['f']`.
    Field(String),
    /// An operator's token (`<=`, `in`, `[`).
    Op(&'static str),
    /// `name(`.
    Call(String),
}

/// The needle of every node an error can be reported at, in source order.
fn source_order(ast: &IdedExpr) -> Vec<(u64, Needle)> {
    fn op_token(name: &str) -> Option<&'static str> {
        Some(match name {
            operators::LOGICAL_AND => "&&",
            operators::LOGICAL_OR => "||",
            operators::LOGICAL_NOT => "!",
            NEG_FUNCTION | operators::NEGATE => "-",
            operators::CONDITIONAL => "?",
            EQ_FUNCTION | operators::EQUALS => "==",
            NE_FUNCTION | operators::NOT_EQUALS => "!=",
            operators::LESS => "<",
            operators::LESS_EQUALS => "<=",
            operators::GREATER => ">",
            operators::GREATER_EQUALS => ">=",
            operators::ADD => "+",
            operators::SUBSTRACT => "-",
            operators::MULTIPLY => "*",
            operators::DIVIDE => "/",
            operators::MODULO => "%",
            IN_FUNCTION | operators::IN => "in",
            operators::INDEX | operators::OPT_INDEX => "[",
            _ => return None,
        })
    }
    fn walk(e: &IdedExpr, accu: &mut Vec<String>, out: &mut Vec<(u64, Needle)>) {
        match &e.expr {
            Expr::Select(s) => {
                walk(&s.operand, accu, out);
                out.push((e.id, Needle::Field(s.field.clone())));
            }
            Expr::Call(call) if call.func_name == super::time::IN_RANGE => {
                call.args.iter().for_each(|a| walk(a, accu, out));
            }
            Expr::Call(call) => {
                let generated = call
                    .args
                    .iter()
                    .any(|a| matches!(&a.expr, Expr::Ident(n) if accu.contains(n)));
                let name = call.func_name.as_str();
                if let Some(op) = op_token(name) {
                    let field = match call.args.get(1).map(|a| &a.expr) {
                        Some(Expr::Literal(LiteralValue::String(f)))
                            if matches!(name, operators::INDEX | operators::OPT_INDEX) =>
                        {
                            Some(f.to_string())
                        }
                        _ => None,
                    };
                    let needle = match field {
                        Some(f) => Needle::Field(f),
                        None => Needle::Op(op),
                    };
                    let prefix = matches!(
                        name,
                        operators::LOGICAL_NOT | operators::NEGATE | NEG_FUNCTION
                    );
                    if prefix && !generated {
                        out.push((e.id, needle.clone()));
                    }
                    for (i, a) in call.args.iter().enumerate() {
                        if matches!(&a.expr, Expr::Ident(n) if accu.contains(n)) {
                            continue;
                        }
                        if i == 1 && matches!(needle, Needle::Field(_)) {
                            break;
                        }
                        walk(a, accu, out);
                        if i == 0 && !prefix && !generated {
                            out.push((e.id, needle.clone()));
                        }
                    }
                    return;
                }
                if let Some(t) = &call.target {
                    walk(t, accu, out);
                }
                out.push((e.id, Needle::Call(name.to_owned())));
                for a in &call.args {
                    walk(a, accu, out);
                }
            }
            Expr::List(l) => l.elements.iter().for_each(|x| walk(x, accu, out)),
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        walk(&m.key, accu, out);
                        walk(&m.value, accu, out);
                    }
                }
            }
            Expr::Comprehension(c) => {
                walk(&c.iter_range, accu, out);
                out.push((e.id, Needle::Call(macro_name(c).to_owned())));
                accu.push(c.accu_var.clone());
                walk(&c.loop_step, accu, out);
                accu.pop();
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
        }
    }
    let mut out = Vec::new();
    walk(ast, &mut Vec::new(), &mut out);
    out
}

/// The macro a comprehension was written as, by the shape of its step.
fn macro_name(c: &ComprehensionExpr) -> &'static str {
    let Expr::Call(step) = &c.loop_step.expr else {
        return "all";
    };
    match step.func_name.as_str() {
        operators::LOGICAL_AND | super::macros::ALL_STEP => "all",
        operators::LOGICAL_OR | super::macros::EXISTS_STEP => "exists",
        operators::ADD => "map",
        operators::CONDITIONAL => match step.args.get(1).map(|a| &a.expr) {
            Some(Expr::Call(add))
                if add
                    .args
                    .get(1)
                    .is_some_and(|x| matches!(x.expr, Expr::Literal(LiteralValue::Int(_)))) =>
            {
                "exists_one"
            }
            Some(Expr::Call(add)) => match add.args.get(1).map(|x| &x.expr) {
                Some(Expr::List(l)) if matches!(l.elements.first().map(|x| &x.expr), Some(Expr::Ident(n)) if *n == c.iter_var) => {
                    "filter"
                }
                _ => "map",
            },
            _ => "all",
        },
        _ => "all",
    }
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Op(&'static str),
    Other,
}

/// The tokens of `source` that needles match, with their byte offsets.
fn tokenize(source: &str) -> Vec<(usize, Token)> {
    const OPS: [&str; 24] = [
        ".?", "&&", "||", "==", "!=", "<=", ">=", "[?", "!", "-", "?", "<", ">", "+", "*", "/",
        "%", "[", ".", "(", ")", "]", ",", ":",
    ];
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        // String and bytes literals, with their prefixes (r, b, rb, ...).
        let mut j = i;
        while j < bytes.len() && j - i < 2 && matches!(bytes[j], b'r' | b'R' | b'b' | b'B') {
            j += 1;
        }
        if j < bytes.len() && matches!(bytes[j], b'"' | b'\'') {
            let quote = bytes[j];
            let raw = source[i..j].contains(['r', 'R']);
            let triple = source[j..].starts_with(&String::from_utf8_lossy(&[quote; 3]).to_string());
            let open = if triple { 3 } else { 1 };
            let mut k = j + open;
            let content_start = k;
            let mut content_end = bytes.len();
            while k < bytes.len() {
                if bytes[k] == b'\\' && !raw {
                    k += 2;
                    continue;
                }
                let closes = if triple {
                    bytes[k..].starts_with(&[quote; 3])
                } else {
                    bytes[k] == quote
                };
                if closes {
                    content_end = k;
                    k += open;
                    break;
                }
                k += 1;
            }
            let end = content_end.min(bytes.len());
            out.push((start, Token::Str(source[content_start..end].to_owned())));
            i = k.max(start + 1);
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' || b == b'`' {
            let quoted = b == b'`';
            let mut k = i + 1;
            while k < bytes.len()
                && (if quoted {
                    bytes[k] != b'`'
                } else {
                    bytes[k].is_ascii_alphanumeric() || bytes[k] == b'_'
                })
            {
                k += 1;
            }
            let text = if quoted {
                let t = source[i + 1..k.min(bytes.len())].to_owned();
                k += 1;
                t
            } else {
                source[i..k].to_owned()
            };
            out.push((start, Token::Ident(text)));
            i = k.min(bytes.len()).max(start + 1);
            continue;
        }
        if let Some(op) = OPS.iter().find(|op| source[i..].starts_with(**op)) {
            out.push((start, Token::Op(op)));
            i += op.len();
            continue;
        }
        out.push((start, Token::Other));
        i += source[i..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// Whether the token at `i` is the one `needle` stands for.
fn matches_needle(tokens: &[(usize, Token)], i: usize, needle: &Needle) -> bool {
    let before = i.checked_sub(1).map(|p| &tokens[p].1);
    let after = tokens.get(i + 1).map(|t| &t.1);
    match (needle, &tokens[i].1) {
        (Needle::Field(f), Token::Ident(name)) => {
            name == f && matches!(before, Some(Token::Op("." | ".?")))
        }
        (Needle::Field(f), Token::Str(s)) => {
            s == f && matches!(before, Some(Token::Op("[" | "[?")))
        }
        (Needle::Op("in"), Token::Ident(name)) => name == "in",
        (Needle::Op("["), Token::Op("[" | "[?")) => true,
        (Needle::Op("-"), Token::Op("-")) => true,
        (Needle::Op(op), Token::Op(t)) => op == t,
        (Needle::Call(name), Token::Ident(t)) => name == t && after == Some(&Token::Op("(")),
        _ => false,
    }
}

/// The byte offset of `node`'s needle: the k-th token that matches it,
/// k being the node's rank among the nodes with the same needle.
fn locate(needles: &[(u64, Needle)], tokens: &[(usize, Token)], node: u64) -> Option<usize> {
    let pos = needles.iter().position(|(id, _)| *id == node)?;
    let needle = &needles[pos].1;
    let rank = needles[..pos].iter().filter(|(_, n)| n == needle).count();
    let mut found = (0..tokens.len()).filter(|&i| matches_needle(tokens, i, needle));
    let first = found.clone().next();
    found.nth(rank).or(first).map(|i| tokens[i].0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::CelProgram;
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
            ["<input>:1:49: found no matching overload for 'startsWith' applied to 'int.(string)'"]
        );
        assert_eq!(
            errors("object.spec.replicas + 1 > 1 && object.spec.name + 1 == ''"),
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
                    let program = CelProgram::compile(&expr).unwrap();
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
