//! The children of a CEL expression node, for the walks over a parsed
//! expression that visit every node (the ones that track the variables a
//! comprehension binds keep their own match), and [`Ids`], which makes the
//! nodes the rewrites of a parsed expression add (`macros`, `time`, the
//! cost estimate's expansion).

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{
    CallExpr, EntryExpr, Expr, ListExpr, LiteralValue, MapExpr, StructExpr, operators,
};

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

/// The largest node id in `expr`: a rewrite numbers its new nodes above it.
pub(super) fn max_id(expr: &IdedExpr) -> u64 {
    children(expr)
        .into_iter()
        .map(max_id)
        .fold(expr.id, u64::max)
}

/// Gives every node of `expr` a fresh id (a copy of a subtree placed a
/// second time in the same tree).
pub(super) fn renumber(expr: &mut IdedExpr, next: &mut u64) {
    expr.id = *next;
    *next = next.saturating_add(1);
    for child in children_mut(expr) {
        renumber(child, next);
    }
}

/// Makes nodes with fresh ids, from `next` up (start it above [`max_id`]).
pub(super) struct Ids<'n> {
    pub(super) next: &'n mut u64,
}

impl Ids<'_> {
    pub(super) fn node(&mut self, expr: Expr) -> IdedExpr {
        let id = *self.next;
        *self.next = self.next.saturating_add(1);
        IdedExpr { id, expr }
    }

    pub(super) fn ident(&mut self, name: &str) -> IdedExpr {
        self.node(Expr::Ident(name.to_owned()))
    }

    pub(super) fn literal(&mut self, value: LiteralValue) -> IdedExpr {
        self.node(Expr::Literal(value))
    }

    pub(super) fn call(
        &mut self,
        name: &str,
        target: Option<IdedExpr>,
        args: Vec<IdedExpr>,
    ) -> IdedExpr {
        self.node(Expr::Call(CallExpr {
            func_name: name.to_owned(),
            target: target.map(Box::new),
            args,
        }))
    }

    pub(super) fn list(&mut self, elements: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::List(ListExpr {
            elements,
            optional_indices: Vec::new(),
        }))
    }

    /// `element[k]`.
    pub(super) fn index(&mut self, element: &str, k: i64) -> IdedExpr {
        let container = self.ident(element);
        let key = self.literal(LiteralValue::Int(k.into()));
        self.call(operators::INDEX, None, vec![container, key])
    }
}
