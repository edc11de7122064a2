//! The children of a CEL expression node, for the walks over a parsed
//! expression that visit every node (the ones that track the variables a
//! comprehension binds keep their own match).

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{EntryExpr, Expr, MapExpr, StructExpr};

/// The direct children of `expr`, in source order: a call's target then
/// its arguments, a comprehension's range, start, condition, step and
/// result, the keys and values of a map, the values of a message.
pub(super) fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(call.args.iter())
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::Select(select) => vec![&*select.operand],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// [`children`], to change them.
pub(super) fn children_mut(expr: &mut IdedExpr) -> Vec<&mut IdedExpr> {
    match &mut expr.expr {
        Expr::Call(call) => call
            .target
            .as_deref_mut()
            .into_iter()
            .chain(call.args.iter_mut())
            .collect(),
        Expr::Comprehension(c) => vec![
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ],
        Expr::Select(select) => vec![&mut *select.operand],
        Expr::List(list) => list.elements.iter_mut().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter_mut()
            .flat_map(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(e) => vec![&mut e.key, &mut e.value],
                EntryExpr::StructField(f) => vec![&mut f.value],
            })
            .collect(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}
