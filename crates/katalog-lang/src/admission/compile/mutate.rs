//! A mutation lowered: its path values and operation, with the element
//! paths rewritten under `forEach` and `valueExpression`.

use crate::admission::{MutationIr, MutationOp};
use crate::cel::CelProgram;
use crate::common::path::{Path, Segment};
use crate::error::ErrorKind;
use crate::front::document::{Mutation, PathValue};
use crate::front::source::DocPath;
use serde_json::Value;

use super::Ctx;
use super::check::expand_containers;
use super::select::{for_each, matcher};

/// The literal value of `default`/`set`/`append`, or a placeholder and the
/// CEL program computing it.
fn path_value(
    ctx: &mut Ctx,
    pv: &PathValue,
    at: &DocPath,
    computed: &mut Option<CelProgram>,
) -> Option<Value> {
    match (&pv.value, &pv.value_expression) {
        (Some(v), None) => Some(v.clone()),
        (None, Some(expr)) => {
            *computed = Some(ctx.cel(expr, &at.key("valueExpression"))?);
            Some(Value::Null)
        }
        (Some(_), Some(_)) => {
            ctx.error(
                &at.key("valueExpression"),
                ErrorKind::Conflict,
                "give `value` or `valueExpression`, not both",
            );
            None
        }
        (None, None) => {
            ctx.error(
                at,
                ErrorKind::Shape,
                "give the `value` to write, or a `valueExpression` computing it",
            );
            None
        }
    }
}

pub(super) fn mutation(ctx: &mut Ctx, m: &Mutation, at: &DocPath) -> Option<MutationIr> {
    let before = ctx.diags.len();
    let matcher = matcher(
        ctx,
        &m.resources,
        m.match_.as_ref(),
        m.pod_controllers.as_ref(),
        at,
    );
    // Below the match, `forEach` binds `element` and `elementIndex`.
    ctx.enter_for_each(m.for_each.as_ref());
    let mut ops = Vec::new();
    let given = [
        m.default.is_some(),
        m.set.is_some(),
        m.remove.is_some(),
        m.append.is_some(),
        m.json_patch.is_some(),
        m.merge_patch.is_some(),
        m.defaults.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    let meta = !m.add_labels.is_empty()
        || !m.remove_labels.is_empty()
        || !m.add_annotations.is_empty()
        || !m.remove_annotations.is_empty();
    if given > 1 || (given == 0 && !meta) {
        ctx.error(at, ErrorKind::Shape, "a mutation does one of `default`, `set`, `remove`, `append`, `jsonPatch`, `mergePatch`, `defaults` (label and annotation edits may go with it)");
        return None;
    }
    let path_of = |ctx: &mut Ctx, text: &str, key: &'static str| -> Option<Path> {
        let p = ctx.path(text, &at.key(key).key("path"))?;
        if p.is_root() {
            ctx.error(
                &at.key(key).key("path"),
                ErrorKind::Path,
                "a mutation may not replace the whole object",
            );
            return None;
        }
        if let Some(Segment::Key(k)) = p.segments().first()
            && matches!(k.as_str(), "apiVersion" | "kind")
        {
            ctx.error(
                &at.key(key).key("path"),
                ErrorKind::Path,
                format!("`{p}` may not be mutated"),
            );
            return None;
        }
        if matches!(
            p.segments().last(),
            Some(Segment::Wildcard | Segment::Index(_))
        ) && key != "remove"
        {
            ctx.error(
                &at.key(key).key("path"),
                ErrorKind::Path,
                format!("`{p}` must end with a field name"),
            );
            return None;
        }
        Some(p)
    };
    let mut computed: Option<CelProgram> = None;
    if let Some(d) = &m.default {
        let path = path_of(ctx, &d.path, "default");
        let value = path_value(ctx, d, &at.key("default"), &mut computed);
        ops.push(MutationOp::Default {
            path: path?,
            value: value?,
        });
    }
    if let Some(d) = &m.set {
        let path = path_of(ctx, &d.path, "set");
        let value = path_value(ctx, d, &at.key("set"), &mut computed);
        ops.push(MutationOp::Set {
            path: path?,
            value: value?,
        });
    }
    if let Some(d) = &m.remove {
        ops.push(MutationOp::Remove {
            path: path_of(ctx, &d.path, "remove")?,
        });
    }
    if let Some(d) = &m.append {
        let path = path_of(ctx, &d.path, "append");
        let value = path_value(ctx, d, &at.key("append"), &mut computed);
        ops.push(MutationOp::Append {
            path: path?,
            value: value?,
        });
    }
    if let Some(patch) = &m.json_patch {
        let pat = at.key("jsonPatch");
        if m.for_each.is_some() {
            ctx.error(&pat, ErrorKind::Invalid, "`jsonPatch` addresses the whole object and does not go with `forEach`; use `mergePatch` or `defaults` there");
            return None;
        }
        match serde_json::from_value::<json_patch::Patch>(Value::Array(patch.clone())) {
            Ok(p) => ops.push(MutationOp::JsonPatch(p)),
            Err(e) => {
                ctx.error(
                    &pat,
                    ErrorKind::Invalid,
                    format!("`jsonPatch` is not an RFC 6902 patch: {e}"),
                )
                .help =
                    Some("e.g. `[{op: add, path: /metadata/labels/team, value: payments}]`".into());
                return None;
            }
        }
    }
    for (key, doc, overlay) in [
        ("mergePatch", &m.merge_patch, false),
        ("defaults", &m.defaults, true),
    ] {
        let Some(v) = doc else { continue };
        let Some(obj) = v.as_object() else {
            ctx.error(
                &at.key(key),
                ErrorKind::Invalid,
                format!("`{key}` is an object of the fields to write"),
            );
            return None;
        };
        if let Some(k) = obj
            .keys()
            .find(|k| matches!(k.as_str(), "apiVersion" | "kind"))
        {
            ctx.error(
                &at.key(key),
                ErrorKind::Path,
                format!("`{k}` may not be mutated"),
            );
            return None;
        }
        let at = Path::root();
        ops.push(if overlay {
            MutationOp::Defaults {
                at,
                overlay: v.clone(),
            }
        } else {
            MutationOp::MergePatch {
                at,
                patch: v.clone(),
            }
        });
    }
    let for_each = match &m.for_each {
        Some(f) => Some(for_each(ctx, f, m.all_containers, &at.key("forEach"))?),
        None => None,
    };
    if m.all_containers && for_each.is_none() {
        let mut expanded = Vec::new();
        for op in ops {
            let (path, rebuild): (&Path, Box<dyn Fn(Path) -> MutationOp>) = match &op {
                MutationOp::Default { path, value } => {
                    let value = value.clone();
                    (
                        path,
                        Box::new(move |p| MutationOp::Default {
                            path: p,
                            value: value.clone(),
                        }),
                    )
                }
                MutationOp::Set { path, value } => {
                    let value = value.clone();
                    (
                        path,
                        Box::new(move |p| MutationOp::Set {
                            path: p,
                            value: value.clone(),
                        }),
                    )
                }
                MutationOp::Append { path, value } => {
                    let value = value.clone();
                    (
                        path,
                        Box::new(move |p| MutationOp::Append {
                            path: p,
                            value: value.clone(),
                        }),
                    )
                }
                MutationOp::Remove { path } => (path, Box::new(|p| MutationOp::Remove { path: p })),
                _ => {
                    expanded.push(op);
                    continue;
                }
            };
            match expand_containers(path) {
                Some(paths) => expanded.extend(paths.into_iter().map(rebuild)),
                None => {
                    ctx.error(&at.key("allContainers"), ErrorKind::Invalid, format!("`allContainers` needs a path through `containers`, and `{path}` has none"));
                    return None;
                }
            }
        }
        ops = expanded;
    }
    if let Some(expression) = computed {
        ops = ops
            .into_iter()
            .map(|op| match op {
                MutationOp::Default { .. } | MutationOp::Set { .. } | MutationOp::Append { .. } => {
                    MutationOp::Computed {
                        op: Box::new(op),
                        expression: expression.clone(),
                    }
                }
                other => other,
            })
            .collect();
    }
    for (field, add, remove, add_key, remove_key) in [
        (
            "labels",
            &m.add_labels,
            &m.remove_labels,
            "addLabels",
            "removeLabels",
        ),
        (
            "annotations",
            &m.add_annotations,
            &m.remove_annotations,
            "addAnnotations",
            "removeAnnotations",
        ),
    ] {
        for k in add.keys().chain(remove.iter()) {
            if let Some(problem) = crate::common::names::qualified_name_problem(k) {
                let key = if add.contains_key(k) {
                    add_key
                } else {
                    remove_key
                };
                ctx.error(
                    &at.key(key),
                    ErrorKind::Invalid,
                    format!(
                        "`{k}` is not a valid {} key: {problem}",
                        field.trim_end_matches('s')
                    ),
                );
            }
        }
        for k in remove {
            if add.contains_key(k) {
                ctx.error(
                    &at.key(remove_key),
                    ErrorKind::Conflict,
                    format!("`{k}` is both added ({add_key}) and removed"),
                );
            }
        }
        if !add.is_empty() || !remove.is_empty() {
            ops.push(MutationOp::Metadata {
                field,
                add: add.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                remove: remove.clone(),
            });
        }
    }
    if ctx.diags.len() > before {
        return None;
    }
    Some(MutationIr {
        name: m.name.clone(),
        matcher,
        ops,
        for_each,
        origin: format!("{} (mutation {})", ctx.doc.locate(at), m.name),
        loc: ctx.doc.locate(at),
    })
}
