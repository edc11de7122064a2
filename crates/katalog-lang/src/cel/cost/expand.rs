//! The macros that cel 0.13's parser leaves as calls (the two-variable
//! comprehensions, `optMap`, `optFlatMap`, `sortBy`, `cel.bind`), expanded
//! for the cost estimate into the comprehensions cel-go's parser makes of
//! them, so that they are costed as cel-go costs them.

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, LiteralValue, MapExpr, operators,
};

use crate::cel::ast::{self, Ids};

pub(super) const ACCU: &str = "@result";

/// A copy of `e` with the macros that cel 0.13's parser leaves as calls
/// (two-variable comprehensions, `optMap`, `optFlatMap`, `cel.bind`)
/// expanded as cel-go expands them.
pub(super) fn expand(e: &IdedExpr, next: &mut u64) -> IdedExpr {
    let mut out = e.clone();
    expand_in_place(&mut out, next);
    out
}

fn expand_in_place(e: &mut IdedExpr, next: &mut u64) {
    for child in ast::children_mut(e) {
        expand_in_place(child, next);
    }
    let Expr::Call(call) = &e.expr else {
        return;
    };
    let name = call.func_name.as_str();
    let ident = |a: &IdedExpr| match &a.expr {
        Expr::Ident(n) => Some(n.clone()),
        _ => None,
    };
    let mut ids = Ids { next };
    let made = match (&call.target, name, call.args.len()) {
        (Some(t), "all" | "exists" | "existsOne" | "transformList", 3)
        | (Some(t), "transformList" | "transformMap" | "transformMapEntry", 3 | 4) => {
            let (Some(i), Some(v)) = (ident(&call.args[0]), ident(&call.args[1])) else {
                return;
            };
            let rest = &call.args[2..];
            let (init, cond, step, result) = quantifier(name, rest, &i, &mut ids);
            Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range: (**t).clone(),
                iter_var: i,
                iter_var2: Some(v),
                accu_var: ACCU.to_owned(),
                accu_init: init,
                loop_cond: cond,
                loop_step: step,
                result,
            }))
        }
        (Some(t), "optMap" | "optFlatMap", 2) => {
            let Some(v) = ident(&call.args[0]) else {
                return;
            };
            let has = ids.call("hasValue", Some((**t).clone()), vec![]);
            let value = ids.call("value", Some((**t).clone()), vec![]);
            let bind = bind(&v, value, call.args[1].clone(), &mut ids);
            let some = if name == "optMap" {
                ids.call("optional.of", None, vec![bind])
            } else {
                bind
            };
            let none = ids.call("optional.none", None, vec![]);
            Expr::Call(CallExpr {
                func_name: operators::CONDITIONAL.to_owned(),
                target: None,
                args: vec![has, some, none],
            })
        }
        // cel-go's `sortByMacro`: the list bound once, its keys mapped
        // (`parser.MakeMap`), the list sorted by them.
        (Some(t), "sortBy", 2) => {
            let Some(e) = ident(&call.args[0]) else {
                return;
            };
            const INPUT: &str = "@__sortBy_input__";
            let range = ids.ident(INPUT);
            let init = ids.list(vec![]);
            let cond = ids.literal(LiteralValue::Boolean(true.into()));
            let accu = ids.ident(ACCU);
            let item = ids.list(vec![call.args[1].clone()]);
            let step = ids.call(operators::ADD, None, vec![accu, item]);
            let result = ids.ident(ACCU);
            let keys = ids.node(Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range: range,
                iter_var: e,
                iter_var2: None,
                accu_var: ACCU.to_owned(),
                accu_init: init,
                loop_cond: cond,
                loop_step: step,
                result,
            })));
            let input = ids.ident(INPUT);
            let sorted = ids.call("@sortByAssociatedKeys", Some(input), vec![keys]);
            bind(INPUT, (**t).clone(), sorted, &mut ids).expr
        }
        (Some(t), "bind", 3) if matches!(&t.expr, Expr::Ident(n) if n == "cel") => {
            let Some(v) = ident(&call.args[0]) else {
                return;
            };
            bind(&v, call.args[1].clone(), call.args[2].clone(), &mut ids).expr
        }
        _ => return,
    };
    e.expr = made;
}

/// `cel.bind(v, init, body)` as cel-go makes it: a comprehension over no
/// items whose accumulator is `v`.
fn bind(v: &str, init: IdedExpr, body: IdedExpr, ids: &mut Ids) -> IdedExpr {
    let range = ids.list(vec![]);
    let cond = ids.literal(LiteralValue::Boolean(false.into()));
    let step = ids.ident(v);
    ids.node(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: v.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: body,
    })))
}

/// The accumulator's start, the loop condition, the step and the result
/// of a two-variable macro (cel-go's `ext/comprehensions.go`).
fn quantifier(
    name: &str,
    rest: &[IdedExpr],
    key: &str,
    ids: &mut Ids,
) -> (IdedExpr, IdedExpr, IdedExpr, IdedExpr) {
    let last = rest.last().cloned().expect("an argument");
    let filter = (rest.len() == 2).then(|| rest[0].clone());
    let t = |ids: &mut Ids| ids.literal(LiteralValue::Boolean(true.into()));
    let filtered = |step: IdedExpr, ids: &mut Ids| match &filter {
        Some(p) => {
            let accu = ids.ident(ACCU);
            ids.call(operators::CONDITIONAL, None, vec![p.clone(), step, accu])
        }
        None => step,
    };
    match name {
        "all" | "exists" => {
            let all = name == "all";
            let accu = ids.ident(ACCU);
            let cond_arg = if all {
                accu
            } else {
                ids.call(operators::LOGICAL_NOT, None, vec![accu])
            };
            let cond = ids.call(operators::NOT_STRICTLY_FALSE, None, vec![cond_arg]);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let accu = ids.ident(ACCU);
            let step = ids.call(op, None, vec![accu, last]);
            let init = ids.literal(LiteralValue::Boolean(all.into()));
            (init, cond, step, ids.ident(ACCU))
        }
        "existsOne" => {
            let init = ids.literal(LiteralValue::Int(0.into()));
            let cond = t(ids);
            let accu = ids.ident(ACCU);
            let one = ids.literal(LiteralValue::Int(1.into()));
            let plus = ids.call(operators::ADD, None, vec![accu, one]);
            let accu = ids.ident(ACCU);
            let step = ids.call(operators::CONDITIONAL, None, vec![last, plus, accu]);
            let accu = ids.ident(ACCU);
            let one = ids.literal(LiteralValue::Int(1.into()));
            let result = ids.call(operators::EQUALS, None, vec![accu, one]);
            (init, cond, step, result)
        }
        "transformList" => {
            let init = ids.list(vec![]);
            let cond = t(ids);
            let accu = ids.ident(ACCU);
            let item = ids.list(vec![last]);
            let step = ids.call(operators::ADD, None, vec![accu, item]);
            let step = filtered(step, ids);
            (init, cond, step, ids.ident(ACCU))
        }
        _ => {
            let init = ids.node(Expr::Map(MapExpr { entries: vec![] }));
            let cond = t(ids);
            let accu = ids.ident(ACCU);
            let args = if name == "transformMap" {
                vec![accu, ids.ident(key), last]
            } else {
                vec![accu, last]
            };
            let step = ids.call("cel.@mapInsert", None, args);
            let step = filtered(step, ids);
            (init, cond, step, ids.ident(ACCU))
        }
    }
}
