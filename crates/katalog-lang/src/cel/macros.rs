//! The macros of the kube-apiserver's CEL that cel 0.13's parser lacks,
//! expanded into what it has: one-variable comprehensions, as cel-go
//! expands them.
//!
//! * Two-variable comprehensions (cel-go's `TwoVarComprehensions`, in
//!   Kubernetes' environment): `all(i, v, p)`, `exists(i, v, p)`,
//!   `existsOne(i, v, p)`, `transformList(i, v, [filter,] e)`,
//!   `transformMap(k, v, [filter,] e)` and `transformMapEntry(k, v,
//!   [filter,] e)`. Over a list `i` is the index and `v` the element; over
//!   a map `k` is the key and `v` its value. Each becomes a comprehension
//!   over [`ENTRIES`]`(range)` (`[[i, v], ...]`, a map's keys in sorted
//!   order so both evaluators and every run see the same order), with `i`
//!   and `v` read from the pair.
//! * `optMap(x, e)` and `optFlatMap(x, e)` on an optional: `o.hasValue() ?
//!   optional.of(e) : optional.none()` (`e` itself for `optFlatMap`), with
//!   `x` bound to `o.value()` by a comprehension over no items, as cel-go
//!   binds it.
//!
//! * `all` and `exists` (of one variable or two) absorb errors as cel-go's
//!   do: a predicate that fails on one element does not decide the result
//!   when another element does (`[1, 2, 3].all(e, 6 / (2 - e) == 6)` is
//!   `false`: the error at `e == 2` is absorbed by the `false` at `e ==
//!   1`), and the first error is the result only when nothing decided it.
//!   cel 0.13 stopped at the first error. Their loop step becomes
//!   [`ALL_STEP`] / [`EXISTS_STEP`], which keep a pending error in the
//!   accumulator, and their result [`RESULT`], which raises it.
//!
//! * `sortBy(e, key)` on a list (cel-go's lists extension, version 3):
//!   `l.sortBy(e, key)` binds the list to `@__sortBy_input__` (a
//!   comprehension over no items) and becomes
//!   [`super::library::SORT_BY`]`(@__sortBy_input__,
//!   @__sortBy_input__.map(e, key))`, as cel-go's macro expands it; the
//!   target must be a list literal, a name, a selection, a call or a
//!   comprehension, as there.
//!
//! Nodes made here get fresh ids above every id of the parsed tree (the
//! evaluator over JSON indexes calls by id), and an error in an expanded
//! node is reported at the macro's call.

use kube_cel::cel::IdedExpr;

use super::ast::children_mut as children;
use super::ast::{Ids, max_id, renumber};
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, ListExpr, LiteralValue, MapExpr, operators,
};

/// `@katalog_entries(range)`: `[[index, element], ...]` of a list,
/// `[[key, value], ...]` of a map by sorted key (registered by the parent
/// module, implemented by both evaluators).
pub(super) const ENTRIES: &str = "@katalog_entries";
/// `@katalog_map_insert(map, key, value)`: `map` with `key: value` added.
pub(super) const MAP_INSERT: &str = "@katalog_map_insert";
/// `@katalog_map_merge(map, entries)`: `map` with the entries of the map
/// `entries` added; a key already there is an error, as in cel-go.
pub(super) const MAP_MERGE: &str = "@katalog_map_merge";

/// `@katalog_all_step(accu, p)`: the step of `all`, `accu && p` with the
/// error of `p` kept pending in the accumulator (registered by the parent
/// module).
pub(super) const ALL_STEP: &str = "@katalog_all_step";
/// `@katalog_exists_step(accu, p)`: the step of `exists`, `accu || p`.
pub(super) const EXISTS_STEP: &str = "@katalog_exists_step";
/// `@katalog_result(accu)`: the accumulator's bool, or its pending error.
pub(super) const RESULT: &str = "@katalog_result";

/// Why a macro could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MacroError {
    /// The macro (`all`, `transformList`, ...).
    pub name: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// Expands every macro of the module documentation in `expr`, innermost
/// first.
pub(super) fn expand(expr: &mut IdedExpr) -> Result<(), MacroError> {
    let mut next = max_id(expr).saturating_add(1);
    walk(expr, &mut next)
}

fn walk(expr: &mut IdedExpr, next: &mut u64) -> Result<(), MacroError> {
    for child in children(expr) {
        walk(child, next)?;
    }
    expand_call(expr, next)?;
    if let Expr::Comprehension(c) = &mut expr.expr {
        absorb_errors(c, next);
    }
    Ok(())
}

/// Makes an `all` or `exists` comprehension (the parser's or one made
/// here) absorb errors as cel-go's does (see the module documentation).
/// `@result` is a name only macros make.
fn absorb_errors(c: &mut ComprehensionExpr, next: &mut u64) {
    let is_result = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == "@result");
    if c.accu_var != "@result" || !is_result(&c.result) {
        return;
    }
    let Expr::Literal(LiteralValue::Boolean(init)) = &c.accu_init.expr else {
        return;
    };
    let init = *init.inner();
    let Expr::Call(step) = &mut c.loop_step.expr else {
        return;
    };
    let step_name = match (step.func_name.as_str(), init) {
        (operators::LOGICAL_AND, true) => ALL_STEP,
        (operators::LOGICAL_OR, false) => EXISTS_STEP,
        _ => return,
    };
    if step.target.is_some() || step.args.len() != 2 || !is_result(&step.args[0]) {
        return;
    }
    step_name.clone_into(&mut step.func_name);
    let accu = std::mem::take(&mut c.result);
    let mut ids = Ids { next };
    c.result = ids.call(RESULT, None, vec![accu]);
}

fn expand_call(expr: &mut IdedExpr, next: &mut u64) -> Result<(), MacroError> {
    let Expr::Call(call) = &mut expr.expr else {
        return Ok(());
    };
    if call.target.is_none() {
        return Ok(());
    }
    let name = call.func_name.as_str();
    let two_var = matches!(
        (name, call.args.len()),
        ("all" | "exists" | "existsOne", 3)
            | (
                "transformList" | "transformMap" | "transformMapEntry",
                3 | 4
            )
    );
    let optional = matches!((name, call.args.len()), ("optMap" | "optFlatMap", 2));
    let sort_by = name == "sortBy" && call.args.len() == 2;
    if !two_var && !optional && !sort_by {
        return Ok(());
    }
    let name = name.to_owned();
    let err = |reason| MacroError {
        name: name.clone(),
        reason,
    };
    let call_id = expr.id;
    let Expr::Call(call) = std::mem::take(&mut expr.expr) else {
        unreachable!("matched a call above");
    };
    let target = *call.target.expect("a target, checked above");
    let mut args = call.args.into_iter();
    if optional {
        let var = ident_name(args.next()).ok_or(err("the first argument must be a name"))?;
        let body = args.next().expect("two arguments, checked above");
        expr.expr = optional_map(&name, target, var, body, next);
        return Ok(());
    }
    if sort_by {
        if !matches!(
            target.expr,
            Expr::List(_)
                | Expr::Select(_)
                | Expr::Ident(_)
                | Expr::Comprehension(_)
                | Expr::Call(_)
        ) {
            return Err(err(
                "sortBy can only be applied to a list, identifier, comprehension, call or select \
                 expression",
            ));
        }
        let var = ident_name(args.next()).ok_or(err("argument is not an identifier"))?;
        let key = args.next().expect("two arguments, checked above");
        expr.expr = sort_by_keys(target, var, key, next);
        return Ok(());
    }
    let first = ident_name(args.next()).ok_or(err("the first argument must be a name"))?;
    let second = ident_name(args.next()).ok_or(err("the second argument must be a name"))?;
    if first == second {
        return Err(err("the two variables must have different names"));
    }
    let rest: Vec<IdedExpr> = args.collect();
    let element = format!("@e{call_id}");
    let mut ids = Ids { next };
    let bind = |mut e: IdedExpr, ids: &mut Ids| {
        substitute(
            &mut e,
            &[(first.as_str(), 0), (second.as_str(), 1)],
            &element,
            ids,
        );
        e
    };
    let mut rest = rest
        .into_iter()
        .map(|e| bind(e, &mut ids))
        .collect::<Vec<_>>();
    let result = |ids: &mut Ids| ids.ident("@result");
    let (init, cond, step, out) = match name.as_str() {
        "all" | "exists" => {
            let predicate = rest.pop().expect("three arguments");
            let all = name == "all";
            let accu = result(&mut ids);
            let cond_arg = if all {
                result(&mut ids)
            } else {
                ids.call(operators::LOGICAL_NOT, None, vec![accu])
            };
            let cond = ids.call(operators::NOT_STRICTLY_FALSE, None, vec![cond_arg]);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step_accu = result(&mut ids);
            let step = ids.call(op, None, vec![step_accu, predicate]);
            (
                ids.literal(LiteralValue::Boolean(all.into())),
                cond,
                step,
                result(&mut ids),
            )
        }
        "existsOne" => {
            let predicate = rest.pop().expect("three arguments");
            let accu = result(&mut ids);
            let one = ids.literal(LiteralValue::Int(1.into()));
            let plus_one = ids.call(operators::ADD, None, vec![accu, one]);
            let same = result(&mut ids);
            let step = ids.call(
                operators::CONDITIONAL,
                None,
                vec![predicate, plus_one, same],
            );
            let accu = result(&mut ids);
            let one = ids.literal(LiteralValue::Int(1.into()));
            (
                ids.literal(LiteralValue::Int(0.into())),
                ids.literal(LiteralValue::Boolean(true.into())),
                step,
                ids.call(operators::EQUALS, None, vec![accu, one]),
            )
        }
        _ => {
            let value = rest.pop().expect("three or four arguments");
            let filter = rest.pop();
            let accu = result(&mut ids);
            let (init, grown) = match name.as_str() {
                "transformList" => {
                    let item = ids.node(Expr::List(ListExpr::new(vec![value])));
                    (
                        ids.node(Expr::List(ListExpr::new(Vec::new()))),
                        ids.call(operators::ADD, None, vec![accu, item]),
                    )
                }
                "transformMap" => {
                    let key = ids.index(&element, 0);
                    (
                        ids.node(Expr::Map(MapExpr {
                            entries: Vec::new(),
                        })),
                        ids.call(MAP_INSERT, None, vec![accu, key, value]),
                    )
                }
                _ => (
                    ids.node(Expr::Map(MapExpr {
                        entries: Vec::new(),
                    })),
                    ids.call(MAP_MERGE, None, vec![accu, value]),
                ),
            };
            let step = match filter {
                Some(filter) => {
                    let same = result(&mut ids);
                    ids.call(operators::CONDITIONAL, None, vec![filter, grown, same])
                }
                None => grown,
            };
            (
                init,
                ids.literal(LiteralValue::Boolean(true.into())),
                step,
                result(&mut ids),
            )
        }
    };
    let range = ids.call(ENTRIES, None, vec![target]);
    expr.expr = Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: element,
        iter_var2: None,
        accu_var: "@result".to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: out,
    }));
    Ok(())
}

/// `optMap` / `optFlatMap` of `target` with `var` bound in `body`.
fn optional_map(name: &str, target: IdedExpr, var: String, body: IdedExpr, next: &mut u64) -> Expr {
    let mut ids = Ids { next };
    let mut copy = target.clone();
    renumber(&mut copy, ids.next);
    let has_value = ids.call("hasValue", Some(target), Vec::new());
    let value = ids.call("value", Some(copy), Vec::new());
    let no_items = ids.node(Expr::List(ListExpr::new(Vec::new())));
    let never = ids.literal(LiteralValue::Boolean(false.into()));
    let step = ids.ident(&var);
    let bound = ids.node(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: no_items,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var,
        accu_init: value,
        loop_cond: never,
        loop_step: step,
        result: body,
    })));
    let present = if name == "optMap" {
        let optional = ids.ident("optional");
        ids.call("of", Some(optional), vec![bound])
    } else {
        bound
    };
    let optional = ids.ident("optional");
    let none = ids.call("none", Some(optional), Vec::new());
    Expr::Call(CallExpr {
        func_name: operators::CONDITIONAL.to_owned(),
        target: None,
        args: vec![has_value, present, none],
    })
}

/// `target.sortBy(var, key)`, as cel-go's `sortByMacro` expands it.
fn sort_by_keys(target: IdedExpr, var: String, key: IdedExpr, next: &mut u64) -> Expr {
    const INPUT: &str = "@__sortBy_input__";
    let mut ids = Ids { next };
    let accu = ids.ident("@result");
    let item = ids.node(Expr::List(ListExpr::new(vec![key])));
    let step = ids.call(operators::ADD, None, vec![accu, item]);
    let range = ids.ident(INPUT);
    let init = ids.node(Expr::List(ListExpr::new(Vec::new())));
    let always = ids.literal(LiteralValue::Boolean(true.into()));
    let out = ids.ident("@result");
    let keys = ids.node(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: var,
        iter_var2: None,
        accu_var: "@result".to_owned(),
        accu_init: init,
        loop_cond: always,
        loop_step: step,
        result: out,
    })));
    let input = ids.ident(INPUT);
    let sorted = ids.call(super::library::SORT_BY, None, vec![input, keys]);
    let no_items = ids.node(Expr::List(ListExpr::new(Vec::new())));
    let never = ids.literal(LiteralValue::Boolean(false.into()));
    let same = ids.ident(INPUT);
    Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: no_items,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: INPUT.to_owned(),
        accu_init: target,
        loop_cond: never,
        loop_step: same,
        result: sorted,
    }))
}

/// The name of an identifier argument.
fn ident_name(arg: Option<IdedExpr>) -> Option<String> {
    match arg?.expr {
        Expr::Ident(name) => Some(name),
        _ => None,
    }
}

/// Replaces each free `name` of `names` in `expr` with `element[k]`.
fn substitute(expr: &mut IdedExpr, names: &[(&str, i64)], element: &str, ids: &mut Ids) {
    if names.is_empty() {
        return;
    }
    if let Expr::Ident(name) = &expr.expr
        && let Some(&(_, k)) = names.iter().find(|(n, _)| n == name)
    {
        *expr = ids.index(element, k);
        return;
    }
    if let Expr::Comprehension(c) = &mut expr.expr {
        substitute(&mut c.iter_range, names, element, ids);
        substitute(&mut c.accu_init, names, element, ids);
        // The comprehension's own variables hide the names in its body.
        let inner: Vec<(&str, i64)> = names
            .iter()
            .copied()
            .filter(|(n, _)| {
                *n != c.iter_var && *n != c.accu_var && c.iter_var2.as_deref() != Some(*n)
            })
            .collect();
        for e in [&mut c.loop_cond, &mut c.loop_step, &mut c.result] {
            substitute(e, &inner, element, ids);
        }
        return;
    }
    for child in children(expr) {
        substitute(child, names, element, ids);
    }
}
