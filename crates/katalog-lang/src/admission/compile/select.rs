//! What a rule selects: its resources (patterns and the declared or
//! built-in kinds they name), its label and namespace selectors, its match
//! and its conditions, lowered and checked.

use crate::admission::{
    ConditionIr, DeclaredTarget, ForEachIr, MatchIr, ResourcePattern, SelectorIr,
};
use crate::error::ErrorKind;
use crate::front::document::{
    Condition, ForEach, LabelSelector, Match, Operation, PodControllers, SelectorOperator,
};
use crate::front::source::DocPath;
use crate::ir::ResourceIr;

use super::check::{check, elements_of, expand_containers, quantifier, typed_literals};
use super::{Ctx, Expected};

fn resource_patterns(ctx: &mut Ctx, resources: &[String], at: &DocPath) -> Vec<ResourcePattern> {
    if resources.is_empty() {
        ctx.error(
            at,
            ErrorKind::Invalid,
            "name at least one resource, e.g. `apps/v1/deployments` or `v1/pods`",
        );
    }
    let mut out = Vec::new();
    for (i, text) in resources.iter().enumerate() {
        let parts: Vec<&str> = text.split('/').collect();
        let (g, v, r) = match parts.as_slice() {
            [v, r] => ("", *v, *r),
            [g, v, r] => (*g, *v, *r),
            _ => {
                ctx.error(&at.index(i), ErrorKind::Invalid, format!("`{text}` is not `group/version/resource` (or `version/resource` for the core group)"))
                    .help = Some("e.g. `apps/v1/deployments`, `v1/pods`, `stable.example.com/*/crontabs`".into());
                continue;
            }
        };
        if v.is_empty() || r.is_empty() {
            ctx.error(
                &at.index(i),
                ErrorKind::Invalid,
                format!("`{text}` has an empty part; use `*` to match any"),
            );
            continue;
        }
        let part = |s: &str| (s != "*").then(|| s.to_string());
        out.push(ResourcePattern {
            group: part(g),
            version: part(v),
            resource: part(r),
        });
    }
    out
}

/// For every declared resource the patterns select: the one version the
/// rule is written against. A pinned version must be served; two versions
/// for one resource are an error (the rule could not mean the same thing at
/// both).
fn declared_targets(
    ctx: &mut Ctx,
    patterns: &[ResourcePattern],
    texts: &[String],
    at: &DocPath,
) -> Vec<DeclaredTarget> {
    let mut out: Vec<(DeclaredTarget, usize)> = Vec::new();
    for r in ctx.resources {
        for (i, p) in patterns.iter().enumerate() {
            let group_ok = p.group.as_deref().is_none_or(|g| g == r.group);
            let resource_ok = p.resource.as_deref().is_none_or(|x| x == r.plural);
            if !group_ok || !resource_ok {
                continue;
            }
            let version = match &p.version {
                None => r.hub.clone(),
                Some(v) => {
                    if r.version(v).is_none() {
                        // A wildcard group or resource that happens to
                        // select this resource is not written for it.
                        if p.group.is_some() && p.resource.is_some() {
                            let served: Vec<&str> = r.served().collect();
                            ctx.error(
                                &at.index(i),
                                ErrorKind::Invalid,
                                format!(
                                    "`{}` names version {v}, but the Katalog's resource {}/{} serves {}",
                                    texts.get(i).map(String::as_str).unwrap_or(""),
                                    r.group,
                                    r.kind,
                                    served.join(", ")
                                ),
                            )
                            .help = Some(format!(
                                "write the rule against one served version, e.g. `{}/{}/{}` (the hub), or `*` for the hub; it then holds at every served version",
                                r.group, r.hub, r.plural
                            ));
                        }
                        continue;
                    }
                    v.clone()
                }
            };
            if let Some((first, first_i)) = out
                .iter()
                .find(|(t, _)| t.group == r.group && t.plural == r.plural)
            {
                if first.version != version {
                    let (fv, fi) = (first.version.clone(), *first_i);
                    let first_loc = ctx.doc.locate(&at.index(fi));
                    ctx.error(
                        &at.index(i),
                        ErrorKind::Conflict,
                        format!(
                            "the rule is written against two versions of {}/{}: {fv} and {version}",
                            r.group, r.kind
                        ),
                    )
                    .related = Some((
                        first_loc,
                        format!("{fv} here (`*` means the hub, {})", r.hub),
                    ));
                    let n = ctx.diags.0.len() - 1;
                    ctx.diags.0[n].help = Some(format!(
                        "a rule on a declared resource is written against one version and holds at every served version (requests at others are converted first); keep one pattern for {}",
                        r.plural
                    ));
                }
                continue;
            }
            out.push((
                DeclaredTarget {
                    group: r.group.clone(),
                    plural: r.plural.clone(),
                    version,
                },
                i,
            ));
        }
    }
    out.into_iter().map(|(t, _)| t).collect()
}

/// The built-in kinds the patterns name (a pattern with a group and a
/// resource; `*` for the version is every version the table has), leaving
/// out the Katalog's own resources. Their schemas are built only when an
/// expression is checked.
fn builtin_kinds(
    patterns: &[ResourcePattern],
    declared: &[ResourceIr],
) -> Vec<crate::admission::openapi::Kind> {
    let mut out = Vec::new();
    for p in patterns {
        let (Some(group), Some(plural)) = (&p.group, &p.resource) else {
            continue;
        };
        if declared
            .iter()
            .any(|r| r.group == *group && r.plural == *plural)
        {
            continue;
        }
        for kind in crate::admission::openapi::select(group, p.version.as_deref(), plural) {
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
    }
    out
}

fn selector(ctx: &mut Ctx, s: &LabelSelector, at: &DocPath) -> SelectorIr {
    let mut out = SelectorIr {
        match_labels: s
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        expressions: Vec::new(),
    };
    for (i, e) in s.match_expressions.iter().enumerate() {
        let needs_values = matches!(e.operator, SelectorOperator::In | SelectorOperator::NotIn);
        if needs_values == e.values.is_empty() {
            let msg = if needs_values {
                format!("operator {:?} needs `values`", e.operator)
            } else {
                format!("operator {:?} takes no `values`", e.operator)
            };
            ctx.error(
                &at.key("matchExpressions").index(i),
                ErrorKind::Invalid,
                msg,
            );
            continue;
        }
        out.expressions
            .push((e.key.clone(), e.operator, e.values.clone()));
    }
    out
}

pub(super) fn matcher(
    ctx: &mut Ctx,
    resources: &[String],
    m: Option<&Match>,
    pod_controllers: Option<&PodControllers>,
    at: &DocPath,
) -> MatchIr {
    let mut ir = MatchIr {
        resources: resource_patterns(ctx, resources, &at.key("resources")),
        ..Default::default()
    };
    ir.declared = declared_targets(ctx, &ir.resources, resources, &at.key("resources"));
    ctx.targets = ir.declared.clone();
    ctx.rule_resources = ir.resources.clone();
    ctx.builtin = builtin_kinds(&ir.resources, ctx.resources);
    let subresources = m.map(|m| m.subresources.as_slice()).unwrap_or_default();
    ctx.typed = subresources
        .iter()
        .all(|s| matches!(s.as_str(), "status" | "scale"));
    match crate::admission::autogen::controllers_for(
        &ir.resources,
        subresources,
        pod_controllers,
        ctx.controllers,
    ) {
        Ok(c) => ir.pod_controllers = c,
        Err(e) => {
            ctx.error(&at.key("podControllers"), ErrorKind::Invalid, e);
        }
    }
    ctx.rule_on_controllers = !ir.pod_controllers.is_empty();
    if pod_controllers.is_some() && !crate::admission::autogen::names_pods(&ir.resources) {
        ctx.warning(
            &at.key("podControllers"),
            ErrorKind::Invalid,
            "`podControllers` says which pod controllers a rule on Pods also applies to, and this rule names no Pods (`v1/pods`): it does nothing here",
            "remove it, or name the controllers in `resources` (e.g. `apps/v1/deployments`)".into(),
        );
    }
    let default = Match::default();
    let m = m.unwrap_or(&default);
    let mat = at.key("match");
    ir.operations = if m.operations.is_empty() {
        [Operation::Create, Operation::Update].into_iter().collect()
    } else {
        m.operations.iter().copied().collect()
    };
    if let Some(ns) = &m.namespaces {
        for (key, list) in [("include", &ns.include), ("exclude", &ns.exclude)] {
            for (i, name) in list.iter().enumerate() {
                if let Some(problem) = crate::admission::namespace_pattern_problem(name) {
                    ctx.error(
                        &mat.key("namespaces").key(key).index(i),
                        ErrorKind::Invalid,
                        format!("`{name}` can match no namespace: {problem}"),
                    )
                    .help = Some(
                        "give namespace names, or prefix or suffix globs such as `kube-*` or `*-system`"
                            .into(),
                    );
                }
            }
        }
        for (i, name) in ns.include.iter().enumerate() {
            if ctx.excluded.contains(name) {
                ctx.error(
                    &mat.key("namespaces").key("include").index(i),
                    ErrorKind::Conflict,
                    format!("namespace {name} is excluded from every rule (spec.admission.excludeNamespaces), so this rule can never apply there"),
                )
                .help = Some(format!(
                    "to guard {name}, set `spec.admission.excludeNamespaces` without it (and keep the engine able to start without its own webhooks)"
                ));
            }
        }
        ir.namespaces_include = ns.include.clone();
        ir.namespaces_exclude = ns.exclude.clone();
        ir.namespace_selector = ns
            .selector
            .as_ref()
            .map(|s| selector(ctx, s, &mat.key("namespaces").key("selector")));
    }
    ir.object_selector = m
        .object_selector
        .as_ref()
        .map(|s| selector(ctx, s, &mat.key("objectSelector")));
    ir.subresources = m.subresources.clone();
    if let Some(u) = &m.users {
        ir.users_include = u.include.clone();
        ir.users_exclude = u.exclude.clone();
    }
    if let Some(g) = &m.groups {
        ir.groups_include = g.include.clone();
        ir.groups_exclude = g.exclude.clone();
    }
    ir.condition = m
        .conditions
        .as_ref()
        .and_then(|c| condition(ctx, c, &mat.key("conditions")));
    ir
}

fn condition(ctx: &mut Ctx, c: &Condition, at: &DocPath) -> Option<ConditionIr> {
    let given = [
        !c.all.is_empty(),
        !c.any.is_empty(),
        c.not.is_some(),
        c.cel.is_some(),
        c.path.is_some() || c.check.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given != 1 {
        ctx.error(
            at,
            ErrorKind::Shape,
            "a condition is exactly one of `all`, `any`, `not`, `cel`, or `path` with `check`",
        );
        return None;
    }
    if !c.all.is_empty() {
        let items: Vec<_> = c
            .all
            .iter()
            .enumerate()
            .filter_map(|(i, x)| condition(ctx, x, &at.key("all").index(i)))
            .collect();
        return (items.len() == c.all.len()).then_some(ConditionIr::All(items));
    }
    if !c.any.is_empty() {
        let items: Vec<_> = c
            .any
            .iter()
            .enumerate()
            .filter_map(|(i, x)| condition(ctx, x, &at.key("any").index(i)))
            .collect();
        return (items.len() == c.any.len()).then_some(ConditionIr::Any(items));
    }
    if let Some(n) = &c.not {
        return condition(ctx, n, &at.key("not")).map(|x| ConditionIr::Not(Box::new(x)));
    }
    if let Some(expr) = &c.cel {
        return ctx
            .cel_typed(expr, &at.key("cel"), Expected::Condition)
            .map(ConditionIr::Cel);
    }
    let paths = match &c.path {
        Some(p) => vec![ctx.path(p, &at.key("path"))?],
        None => vec![],
    };
    let Some(check_doc) = &c.check else {
        ctx.error(at, ErrorKind::Shape, "a `path` condition needs a `check`");
        return None;
    };
    let checked = paths.first().cloned().unwrap_or_default();
    // The condition's path from the object's root (below the element in
    // `forEach.when`), for the types of well-known fields.
    let full = match (ctx.scope.element, &ctx.scope.element_base) {
        (false, _) => paths.first().cloned(),
        (true, Some(base)) => paths.first().map(|p| base.join(p)),
        (true, None) => None,
    };
    if let Some(full) = full
        && let Some(t) = crate::admission::types::field_type(&ctx.rule_resources, &full)
    {
        typed_literals(ctx, t, &full, check_doc, &at.key("check"));
    }
    let mut check = check(ctx, check_doc, &checked, &at.key("check"))?;
    check.quantifier = quantifier(ctx, c.quantifier, &paths, at)?;
    if check.immutable {
        ctx.error(
            &at.key("check").key("immutable"),
            ErrorKind::Invalid,
            "`immutable` is a validation, not a condition",
        );
        return None;
    }
    Some(ConditionIr::Check {
        paths,
        check: Box::new(check),
    })
}

pub(super) fn for_each(
    ctx: &mut Ctx,
    f: &ForEach,
    all_containers: bool,
    at: &DocPath,
) -> Option<ForEachIr> {
    // The list's own path is from the object's root.
    let inside = std::mem::replace(&mut ctx.scope.element, false);
    let list = ctx.path(&f.path, &at.key("path"));
    ctx.scope.element = inside;
    let mut list = list?;
    if list.is_root() {
        ctx.error(
            &at.key("path"),
            ErrorKind::Path,
            "`forEach.path` names a list, e.g. `spec.containers[*]`",
        );
        return None;
    }
    list = elements_of(list);
    let lists = if all_containers {
        match expand_containers(&list) {
            Some(all) => all,
            None => {
                ctx.error(&at.key("path"), ErrorKind::Invalid, format!("`allContainers` needs a `forEach.path` through `containers`, and `{list}` has none"));
                return None;
            }
        }
    } else {
        vec![list]
    };
    let when = match &f.when {
        Some(w) => Some(condition(ctx, w, &at.key("when"))?),
        None => None,
    };
    Some(ForEachIr { lists, when })
}
