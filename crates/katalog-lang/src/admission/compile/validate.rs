//! A validation lowered: its match, its conditions, its check, its
//! message and its action.

use crate::admission::ValidationIr;
use crate::cel::CelProgram;
use crate::common::path::Path;
use crate::error::ErrorKind;
use crate::front::document::Validation;
use crate::front::source::DocPath;

use super::check::{check, expand_containers, quantifier, typed_literals};
use super::select::{for_each, matcher};
use super::{CEL_BINDINGS, CelScope, Ctx, Expected, variables};

pub(super) fn validation(ctx: &mut Ctx, v: &Validation, at: &DocPath) -> Option<ValidationIr> {
    let before = ctx.diags.len();
    let matcher = matcher(
        ctx,
        &v.resources,
        v.match_.as_ref(),
        v.pod_controllers.as_ref(),
        at,
    );
    let mut paths = Vec::new();
    let outer = ctx.scope.clone();
    ctx.enter_for_each(v.for_each.as_ref());
    let for_each = v
        .for_each
        .as_ref()
        .and_then(|f| for_each(ctx, f, v.all_containers, &at.key("forEach")));
    // The check and the message see the rule's own variables.
    ctx.scope
        .variables
        .extend(v.variables.iter().map(|x| x.name.clone()));
    let wide_sources = ctx.variable_sources.len();
    ctx.variable_sources.extend(
        v.variables
            .iter()
            .map(|x| (x.name.clone(), x.expression.clone())),
    );
    if let Some(p) = &v.path
        && let Some(path) = ctx.path(p, &at.key("path"))
    {
        if v.all_containers && v.for_each.is_none() {
            match expand_containers(&path) {
                Some(all) => paths = all,
                None => {
                    ctx.error(&at.key("allContainers"), ErrorKind::Invalid, format!("`allContainers` needs a path through `containers`, and `{path}` has none"));
                }
            }
        } else {
            paths.push(path);
        }
    } else if v.all_containers && v.for_each.is_none() {
        ctx.error(
            &at.key("allContainers"),
            ErrorKind::Invalid,
            "`allContainers` needs a `path` through `containers[*]`",
        );
    }
    let checked = paths.first().cloned().unwrap_or_default();
    let mut check = check(ctx, &v.check, &checked, &at.key("check"));
    if let Some(c) = &mut check {
        match quantifier(ctx, v.quantifier, &paths, at) {
            Some(q) => c.quantifier = q,
            None => check = None,
        }
    }
    // Inside `forEach` the path is below each element of the list.
    let typed_path = match (&v.for_each, &for_each) {
        (None, _) => paths.first().cloned(),
        (Some(_), Some(f)) => f
            .lists
            .first()
            .map(|list| list.join(paths.first().unwrap_or(&Path::root()))),
        (Some(_), None) => None,
    };
    if let Some(full) = typed_path
        && let Some(t) = crate::admission::types::field_type(&matcher.resources, &full)
    {
        typed_literals(ctx, t, &full, &v.check, &at.key("check"));
    }
    if v.check.unique && paths.iter().all(|p| !p.has_wildcard()) {
        ctx.error(
            &at.key("check").key("unique"),
            ErrorKind::Invalid,
            "`unique` compares the values a `[*]` path selects; this path selects at most one",
        )
        .help = Some("e.g. `path: spec.containers[*].name`".into());
    }
    let message_expression = v
        .message_expression
        .as_ref()
        .and_then(|e| ctx.cel_typed(e, &at.key("messageExpression"), Expected::Message));
    // The rule's variables see the Katalog-wide ones and their
    // predecessors; in a rule with `forEach`, they are evaluated per
    // element and see `element` and `elementIndex` too.
    ctx.scope = CelScope {
        element: v.for_each.is_some(),
        element_base: ctx.scope.element_base.clone(),
        ..outer.clone()
    };
    let vars = variables(ctx, &v.variables, &at.key("variables"));
    ctx.scope = outer;
    ctx.variable_sources.truncate(wide_sources);
    if ctx.diags.len() > before {
        return None;
    }
    let scale_replicas = ctx.scale_replicas();
    let check = check?;
    let mut before_verdict: Vec<&CelProgram> = check.cel.iter().collect();
    if let Some(when) = for_each.as_ref().and_then(|f| f.when.as_ref()) {
        when.programs(&mut before_verdict);
    }
    let variable_uses =
        crate::admission::VariableUse::of(&vars, &before_verdict, message_expression.as_ref());
    let variables_per_element = for_each.is_some()
        && vars
            .iter()
            .any(|(_, p)| !p.unbound_identifiers(&CEL_BINDINGS).is_empty());
    Some(ValidationIr {
        variables_per_element,
        name: v.name.clone(),
        matcher,
        action: v.action,
        message: v.message.clone(),
        message_expression,
        paths,
        check,
        variables: vars,
        variable_uses,
        for_each,
        scale_replicas,
        origin: format!("{} (validation {})", ctx.doc.locate(at), v.name),
        loc: ctx.doc.locate(at),
    })
}
