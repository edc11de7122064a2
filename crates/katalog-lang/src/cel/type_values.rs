//! Type values: `type(x)` and the type names (`int`, `map`,
//! `google.protobuf.Timestamp`, ...), as cel-go has them.
//!
//! `type(x) == int`, `type(a) == type(b)` and `type(type(1)) == type` are
//! how a rule tests a value's type in the kube-apiserver; cel 0.13 has
//! neither the function nor the names. A type value here is an opaque
//! value ([`CelType`]) holding cel-go's name of the type; two are equal
//! when their names are. The names are variables of the interpreter's
//! root context ([`NAMES`], bound by the parent module's `base_context`),
//! so a comprehension variable of the same name hides one as it would any
//! variable; `google.protobuf.Timestamp` and `google.protobuf.Duration`,
//! which the parser reads as selections, become identifiers of those
//! names ([`rewrite_qualified`]). A type value is not JSON: a result that
//! is one is an error, as in the oracle.

use std::sync::Arc;

use kube_cel::cel::common::ast::Expr;
use kube_cel::cel::objects::Opaque;
use kube_cel::cel::{ExecutionError, FunctionContext, IdedExpr, Value};

/// A CEL type, by cel-go's name of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CelType(pub(super) String);

impl Opaque for CelType {
    fn runtime_type_name(&self) -> &str {
        "type"
    }
}

/// The type names an expression can spell, each a variable holding its
/// type value.
pub(super) const NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "int",
    "uint",
    "string",
    "list",
    "map",
    "null_type",
    "type",
    "optional_type",
    QUALIFIED[0],
    QUALIFIED[1],
    QUALIFIED[2],
    QUALIFIED[3],
];

/// The names with a dot, which the parser reads as selections (the
/// Kubernetes IP and CIDR types are declared; its other types are not).
const QUALIFIED: [&str; 4] = [
    "google.protobuf.Timestamp",
    "google.protobuf.Duration",
    "net.IP",
    "net.CIDR",
];

/// The type value named `name`.
pub(super) fn named(name: &str) -> Value {
    Value::Opaque(Arc::new(CelType(name.to_owned())))
}

/// The name of a type value (`int`, `net.IP`), or `None` for any other
/// value.
pub(super) fn name_of(value: &Value) -> Option<&str> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<CelType>().map(|t| t.0.as_str()),
        _ => None,
    }
}

/// `type(x)`: the type of `x`.
pub(super) fn type_of(ftx: &FunctionContext, x: Value) -> Result<Value, ExecutionError> {
    let name = match &x {
        Value::Bool(_) => "bool",
        Value::Bytes(_) => "bytes",
        Value::Float(_) => "double",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::String(_) => "string",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Null => "null_type",
        Value::Duration(_) => QUALIFIED[1],
        Value::Timestamp(_) => QUALIFIED[0],
        Value::Opaque(o) => o.runtime_type_name(),
        Value::Function(..) => return Err(ftx.error("a function has no type")),
    };
    Ok(named(name))
}

/// Turns each selection `google.protobuf.Timestamp` (and the others of
/// `QUALIFIED`) in
/// `expr` into the identifier of that name.
pub(super) fn rewrite_qualified(expr: &mut IdedExpr) {
    if let Some(name) = qualified_name(expr)
        && QUALIFIED.contains(&name.as_str())
    {
        expr.expr = Expr::Ident(name);
        return;
    }
    for child in super::ast::children_mut(expr) {
        rewrite_qualified(child);
    }
}

/// `a.b.c` as the text `a.b.c` when `expr` is only identifiers and
/// selections (not `has()` tests).
fn qualified_name(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(s) if !s.test => Some(format!("{}.{}", qualified_name(&s.operand)?, s.field)),
        _ => None,
    }
}
