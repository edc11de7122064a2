//! Calls as cel-go resolves their overloads: the functions of cel 0.13 and
//! kube-cel that answer on receivers or arguments cel-go has no overload
//! for are wrapped to give cel-go's "no such overload" instead, and a
//! wrapped call runs the function cel and kube-cel registered.

use std::sync::LazyLock;

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{CallExpr, Expr};
use kube_cel::cel::extractors::This;
use kube_cel::cel::{Context, ExecutionError, FunctionContext, IdedExpr, Value};

use super::convert::cel_type_name;

/// `<string>.contains(<string>) -> bool`, and nothing else: cel 0.13's
/// answers `false` for any other receiver or argument (`null.contains('*')`,
/// `'abc'.contains(null)`) and searches lists and maps, where cel-go (and
/// so the kube-apiserver) has no such overload, so a rule that should fail
/// on an evaluation error passed.
pub(super) fn strict_contains(
    ftx: &FunctionContext,
    This(this): This<Value>,
    arg: Value,
) -> Result<bool, ExecutionError> {
    match (&this, &arg) {
        (Value::String(s), Value::String(sub)) => Ok(s.contains(sub.as_str())),
        _ => Err(no_overload(ftx, Some(&this), &[arg])),
    }
}

/// The functions of cel 0.13 and kube-cel that answer on receivers or
/// arguments cel-go has no overload for (`null.max()` is `null`,
/// `[1].join()` is `"Int(1)"`, `'abc'.substring(0, null)` is `"abc"`), with
/// the receiver (`None` in the global form) and arguments they accept:
/// anything else is the error cel-go gives, "no such overload". Accepted
/// calls run the registered function ([`strict`]).
#[allow(clippy::type_complexity)]
pub(super) const STRICT: [(&str, fn(Option<&Value>, &[Value]) -> bool); 5] = [
    ("max", min_max_accepts),
    ("min", min_max_accepts),
    // Lists only: Kubernetes' strings extension is version 2, without
    // `reverse()` on strings (kube-cel has version 3's).
    ("reverse", |this, args| {
        matches!(this, Some(Value::List(_))) && args.is_empty()
    }),
    ("join", |this, args| {
        matches!(this, Some(Value::List(items)) if items.iter().all(|i| matches!(i, Value::String(_))))
            && matches!(args, [] | [Value::String(_)])
    }),
    ("substring", |this, args| {
        matches!(this, Some(Value::String(_)))
            && matches!(args, [Value::Int(_)] | [Value::Int(_), Value::Int(_)])
    }),
];

/// `<list>.max()` (kube-cel's lists library) and cel's variadic `max(a,
/// ...)`: a list receiver without arguments, or arguments none of which is
/// `null`, a single one being a list.
pub(super) fn min_max_accepts(this: Option<&Value>, args: &[Value]) -> bool {
    match (this, args) {
        (Some(this), []) => matches!(this, Value::List(_)),
        (Some(_), _) => false,
        (None, [one]) => matches!(one, Value::List(_)),
        (None, args) => !args.is_empty() && !args.iter().any(|a| matches!(a, Value::Null)),
    }
}

/// A function of [`STRICT`]: its arguments evaluated, checked with
/// `accepts`, then the call run as cel and kube-cel registered it.
pub(super) fn strict(
    name: &'static str,
    accepts: fn(Option<&Value>, &[Value]) -> bool,
) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        if !accepts(ftx.this.as_ref(), &args) {
            return Err(no_overload(ftx, ftx.this.as_ref(), &args));
        }
        call_registered(name, ftx.this.clone(), args)
    })
}

/// The arguments of a call, evaluated (for a function that reads its own
/// [`FunctionContext`]: cel hands it the expressions).
pub(super) fn resolved_args(ftx: &FunctionContext) -> Result<Vec<Value>, ExecutionError> {
    ftx.args
        .iter()
        .map(|arg| Value::resolve(arg, ftx.ptx))
        .collect()
}

/// `f` as cel's `Context::add_function` takes a function that reads its
/// own [`FunctionContext`].
pub(super) fn strict_fn(
    f: fn(&mut FunctionContext) -> Result<Value, ExecutionError>,
) -> StrictFunction {
    Box::new(f)
}

/// What cel's `Context::add_function` takes for a function that reads its
/// own [`FunctionContext`].
pub(super) type StrictFunction =
    Box<dyn Fn(&mut FunctionContext) -> Result<Value, ExecutionError> + Send + Sync>;

/// Calls `name` (`ns.name` for a namespaced function) on values as cel and
/// kube-cel registered it, before this module's overrides: the receiver
/// and the arguments are bound to names no expression can spell.
pub(super) fn call_registered(
    name: &str,
    this: Option<Value>,
    args: Vec<Value>,
) -> Result<Value, ExecutionError> {
    static REGISTERED: LazyLock<Context<'static>> = LazyLock::new(|| {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx
    });
    let ident = |name: String| IdedExpr {
        id: 0,
        expr: Expr::Ident(name),
    };
    let mut ctx = REGISTERED.new_inner_scope();
    let (func_name, target) = match (name.split_once('.'), this) {
        (Some((namespace, name)), _) => (name, Some(Box::new(ident(namespace.to_owned())))),
        (None, Some(this)) => {
            ctx.add_variable_from_value("@this", this);
            (name, Some(Box::new(ident("@this".to_owned()))))
        }
        (None, None) => (name, None),
    };
    let mut idents = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        let name = format!("@arg{i}");
        ctx.add_variable_from_value(name.as_str(), arg);
        idents.push(ident(name));
    }
    let call = IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: func_name.to_owned(),
            target,
            args: idents,
        }),
    };
    Value::resolve(&call, &ctx)
}

/// cel-go's error for a call with no overload for its types, naming them:
/// `no such overload: null_type.contains(string)`.
pub(super) fn no_overload(
    ftx: &FunctionContext,
    this: Option<&Value>,
    args: &[Value],
) -> ExecutionError {
    let args = args
        .iter()
        .map(cel_type_name)
        .collect::<Vec<_>>()
        .join(", ");
    let call = match this {
        Some(this) => format!("{}.{}({args})", cel_type_name(this), ftx.name),
        None => format!("{}({args})", ftx.name),
    };
    ftx.error(format!("no such overload: {call}"))
}
