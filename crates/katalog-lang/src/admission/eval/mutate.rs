//! Mutations: which apply to a request, their plan (the values computed
//! before any is written), and the writes, journaled so the patch the
//! apiserver receives is the minimal JSON Patch of what changed.

use serde_json::Value;

use crate::admission::touched::{Journal, Step, Touched, Want, anchor, pointer_wants};
use crate::admission::versions::{self, Target};
use crate::admission::{MutationIr, MutationOp, autogen};
use crate::common::json::node::Obj;
use crate::common::json::{json_eq, type_name};
use crate::common::path::{Path, Segment, get_in};
use crate::ir::Ir;

use super::{
    AdmissionInput, EvalError, Finding, MutationError, Vars, Verdict, for_each_scopes, matches,
    matches_scope,
};

pub(super) fn mutate(
    ir: &Ir,
    input: &AdmissionInput,
    verdict: &mut Verdict,
    picked: &dyn Fn(usize) -> bool,
) {
    let Some(original) = input.object.as_deref() else {
        return;
    };
    let Some((current, touched)) = run_mutations(ir, input, verdict, picked, None) else {
        return;
    };
    let patch = touched.diff(original, &current);
    verdict.patch = patch
        .0
        .iter()
        .filter_map(|op| serde_json::to_value(op).ok())
        .collect();
    if !verdict.patch.is_empty() {
        verdict.patched = Some(current);
    }
}

/// Run the mutations on a copy of the object: the object they leave and
/// the places they touched; `None` when none applies. With `whole_changed`,
/// also the names of those that changed the object by a whole-object
/// compare (for [`mutation_patch_check`]).
pub(super) fn run_mutations(
    ir: &Ir,
    input: &AdmissionInput,
    verdict: &mut Verdict,
    picked: &dyn Fn(usize) -> bool,
    mut whole_changed: Option<&mut Vec<String>>,
) -> Option<(Value, Touched)> {
    let adm = &ir.admission;
    let original = input.object.as_deref()?;
    // The request as each mutation sees it: its object is the one the
    // mutations before left. Made on the first mutation that may apply.
    let mut here: Option<AdmissionInput> = None;
    let mut touched = Touched::default();
    for (i, m) in adm.mutations.iter().enumerate() {
        if !picked(i) {
            continue;
        }
        // Decided before the object is copied for the mutation.
        let applies = applies(ir, m, input);
        if applies == Applies::Not {
            continue;
        }
        let here = here.get_or_insert_with(|| with_object(input, original.clone()));
        let before = whole_changed.is_some().then(|| here.object.clone());
        let warn = |verdict: &mut Verdict, message: String| {
            verdict.warnings.push(Finding {
                rule: m.name.clone(),
                message,
            })
        };
        let changed = match applies {
            Applies::Not => continue,
            // A mutation written against another version of a declared
            // resource changes the object there; the result is converted
            // back, and may differ anywhere.
            Applies::Converted(version) => {
                let mut view = match versions::view_at(ir, here, version) {
                    Ok(view) => view,
                    Err(e) => {
                        if m.matcher.operations.contains(&input.operation) {
                            warn(verdict, format!("skipped: {e}"));
                        }
                        continue;
                    }
                };
                let plan = {
                    let vars = Vars::new(adm, &view);
                    plan_mutation(m, &view, &vars, verdict, false)
                };
                let mut changed = view.object.take().map_or(Value::Null, Obj::into_value);
                let mut journal = Journal::default();
                apply_plan(m, plan, &mut changed, &mut journal, verdict);
                let current = &mut **here.object.get_or_insert_with(|| Value::Null.into());
                if !journal.changed(&changed) {
                    false
                } else {
                    match versions::convert_object(ir, &changed, &input.group, &input.version) {
                        Ok(back) => {
                            let differs = back != *current;
                            if differs {
                                touched.add(Vec::new());
                            }
                            *current = back;
                            differs
                        }
                        Err(e) => {
                            warn(
                                verdict,
                                format!(
                                    "skipped: failed to convert the mutated object back to {}: {e}",
                                    input.version
                                ),
                            );
                            false
                        }
                    }
                }
            }
            Applies::AsIs => {
                let plan = {
                    let vars = Vars::new(adm, here);
                    plan_mutation(m, here, &vars, verdict, false)
                };
                let current = &mut **here.object.get_or_insert_with(|| Value::Null.into());
                let mut journal = Journal::default();
                apply_plan(m, plan, current, &mut journal, verdict);
                let changed = journal.changed(current);
                touched.extend(journal.places());
                changed
            }
            Applies::PodView => match autogen::pod_view(here) {
                None => false,
                Some(mut pod) => {
                    // Autogen: mutate the pod view, then write it back into the template.
                    let plan = {
                        let mut vars = Vars::new(adm, &pod.input);
                        vars.shown_at = pod.template.clone();
                        plan_mutation(m, &pod.input, &vars, verdict, true)
                    };
                    let mut pod_object =
                        pod.input.object.take().map_or(Value::Null, Obj::into_value);
                    let mut pod_journal = Journal::default();
                    apply_plan(m, plan, &mut pod_object, &mut pod_journal, verdict);
                    let current = &mut **here.object.get_or_insert_with(|| Value::Null.into());
                    let journal = template_journal(current, &pod.template, pod_journal);
                    if let Err(e) = autogen::write_back(&pod_object, current, &pod.template) {
                        warn(verdict, format!("skipped: {e}"));
                    }
                    let changed = journal.changed(current);
                    touched.extend(journal.places());
                    changed
                }
            },
        };
        if let (Some(names), Some(before)) = (whole_changed.as_deref_mut(), before)
            && here.object != before
        {
            names.push(m.name.clone());
        }
        if changed {
            verdict.mutations.push(m.name.clone());
        }
    }
    Some((here?.object?.into_value(), touched))
}

/// `input` with `object` in place of its own (which is not copied).
fn with_object(input: &AdmissionInput, object: Value) -> AdmissionInput {
    AdmissionInput {
        operation: input.operation,
        group: input.group.clone(),
        version: input.version.clone(),
        resource: input.resource.clone(),
        subresource: input.subresource.clone(),
        kind: input.kind.clone(),
        name: input.name.clone(),
        namespace: input.namespace.clone(),
        object: Some(object.into()),
        old_object: input.old_object.clone(),
        username: input.username.clone(),
        groups: input.groups.clone(),
        dry_run: input.dry_run,
        namespace_object: input.namespace_object.clone(),
        request: input.request.clone(),
    }
}

/// The places of the controller object that writing the pod view back
/// (`autogen::write_back`) may change, recorded before it: those the pod
/// view's own writes touched, under the template; and the template's
/// `metadata` when it is there but not an object (the write-back makes it
/// one). Elsewhere the write-back puts back what the view copied.
fn template_journal(real: &Value, template: &Path, pod: Journal) -> Journal {
    let mut journal = Journal::default();
    fn under<'a>(template: &'a Path, rest: &'a [Step]) -> Vec<Want<'a>> {
        let mut wants: Vec<Want> = template.segments().iter().map(Want::from).collect();
        wants.extend(rest.iter().map(Want::from));
        wants
    }
    let metadata = template.child("metadata");
    if metadata.get(real).is_some_and(|m| !m.is_object()) {
        journal.record(
            real,
            anchor(real, metadata.segments().iter().map(Want::from)),
        );
    }
    for place in pod.places() {
        match place.first() {
            // The whole view: its metadata and spec.
            None => {
                for part in ["metadata", "spec"] {
                    let mut wants = under(template, &[]);
                    wants.push(Want::Key(part.into()));
                    journal.record(real, anchor(real, wants));
                }
            }
            Some(Step::Key(k)) if k == "metadata" || k == "spec" => {
                journal.record(real, anchor(real, under(template, &place)));
            }
            // `apiVersion` and `kind` of the view are not written back.
            Some(_) => {}
        }
    }
    journal
}

/// How mutation `m` may apply to `input`, from what the mutations before
/// it cannot change (resource, version, operation); the rest of its match
/// is decided on the object as they left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applies<'a> {
    /// It cannot: the object is not even copied for it.
    Not,
    /// On the object as sent.
    AsIs,
    /// On the object converted to this version, then converted back.
    Converted(&'a str),
    /// On the pod template of a controller (autogen).
    PodView,
}

fn applies<'a>(ir: &Ir, m: &'a MutationIr, input: &AdmissionInput) -> Applies<'a> {
    match versions::target(ir, &m.matcher, input) {
        Target::NotMatched => Applies::Not,
        // The operation is decided on the converted view.
        Target::Convert(version) => Applies::Converted(version),
        Target::AsIs
            if m.matcher
                .resources
                .iter()
                .any(|r| r.matches(&input.group, &input.version, &input.resource)) =>
        {
            if m.matcher.operations.contains(&input.operation) {
                Applies::AsIs
            } else {
                Applies::Not
            }
        }
        Target::AsIs if autogen::applies(&m.matcher, input) => Applies::PodView,
        Target::AsIs => Applies::Not,
    }
}

/// One op of a mutation as it will be applied (its path rebased on a
/// `forEach` element, its value computed), with how a warning names the
/// element; or the warning of an op that could not be made.
type Planned<'m> = Result<(std::borrow::Cow<'m, MutationOp>, Option<String>), String>;

/// What mutation `m` does to the object `input` carries (or its pod view),
/// decided on that object: nothing when it does not match, else its ops.
/// Nothing here changes the object, so it is not copied to be read.
fn plan_mutation<'m, 'i>(
    m: &'m MutationIr,
    input: &'i AdmissionInput,
    vars: &Vars<'i, 'i>,
    verdict: &mut Verdict,
    pod_view: bool,
) -> Vec<Planned<'m>> {
    let matched = if pod_view {
        matches_scope(&m.matcher, input, Some(vars))
    } else {
        matches(&m.matcher, input, Some(vars))
    };
    match matched {
        Ok(true) => verdict.matched.push(m.name.clone()),
        Ok(false) => return Vec::new(),
        Err(e) => {
            verdict.warnings.push(Finding {
                rule: m.name.clone(),
                message: format!("skipped: its match failed to evaluate: {e}"),
            });
            return Vec::new();
        }
    }
    let Some(each) = &m.for_each else {
        return m
            .ops
            .iter()
            .map(|op| {
                computed(op, vars)
                    .map(|op| (op, None))
                    .map_err(|e| e.to_string())
            })
            .collect();
    };
    let scopes = match for_each_scopes(each, input, vars) {
        Ok(s) => s,
        Err(e) => return vec![Err(format!("its forEach failed to evaluate: {e}"))],
    };
    let mut plan = Vec::new();
    for (scope, label) in scopes {
        for op in &m.ops {
            let rebased = op.rebased(&scope.base);
            plan.push(match computed(&rebased, &scope) {
                Ok(std::borrow::Cow::Owned(op)) => {
                    Ok((std::borrow::Cow::Owned(op), Some(label.clone())))
                }
                Ok(std::borrow::Cow::Borrowed(_)) => {
                    Ok((std::borrow::Cow::Owned(rebased), Some(label.clone())))
                }
                Err(e) => Err(format!("{label}: {e}")),
            });
        }
    }
    plan
}

/// Apply a [`plan_mutation`] to `obj`, recording in `journal` each place
/// before it is written; a failing op is skipped with a warning.
fn apply_plan(
    m: &MutationIr,
    plan: Vec<Planned>,
    obj: &mut Value,
    journal: &mut Journal,
    verdict: &mut Verdict,
) {
    let mut warn = |e: String| {
        verdict.warnings.push(Finding {
            rule: m.name.clone(),
            message: format!("skipped: {e}"),
        })
    };
    for planned in plan {
        match planned {
            Err(e) => warn(e),
            Ok((op, label)) => {
                if let Err(e) = apply_recorded(&op, obj, journal) {
                    let e = EvalError::from(e);
                    warn(match label {
                        Some(label) => format!("{label}: {e}"),
                        None => e.to_string(),
                    });
                }
            }
        }
    }
}

/// The op with its `valueExpression` evaluated.
fn computed<'o>(
    op: &'o MutationOp,
    vars: &Vars,
) -> Result<std::borrow::Cow<'o, MutationOp>, EvalError> {
    match op {
        MutationOp::Computed { op, expression } => {
            let value =
                vars.eval(expression, None, None)
                    .map_err(|e| EvalError::ValueExpression {
                        expression: expression.source().to_string(),
                        reason: Box::new(e),
                    })?;
            Ok(std::borrow::Cow::Owned(op.with_value(value)))
        }
        other => Ok(std::borrow::Cow::Borrowed(other)),
    }
}

/// Fill the fields of `target` that are absent from `overlay`, recursively
/// through objects; a present value (even `null`) is kept.
fn fill_defaults(target: &mut Value, overlay: &Value) {
    let (Value::Object(t), Value::Object(o)) = (target, overlay) else {
        return;
    };
    for (k, v) in o {
        match t.get_mut(k) {
            None => {
                t.insert(k.clone(), v.clone());
            }
            Some(existing) => fill_defaults(existing, v),
        }
    }
}

/// Record the place a write to `path` may change.
fn record(journal: &mut Journal, obj: &Value, path: &Path) {
    journal.record(obj, anchor(obj, path.segments().iter().map(Want::from)));
}

/// Record the places a JSON Patch may change: for each operation the
/// parent of its `path` (an `add` or `remove` at a list index shifts the
/// elements after it), and of its `from` for a `move`.
fn record_json_patch(journal: &mut Journal, obj: &Value, patch: &json_patch::Patch) {
    use json_patch::PatchOperation as Op;
    for op in &patch.0 {
        let (path, from) = match op {
            Op::Add(o) => (&o.path, None),
            Op::Remove(o) => (&o.path, None),
            Op::Replace(o) => (&o.path, None),
            Op::Move(o) => (&o.path, Some(&o.from)),
            Op::Copy(o) => (&o.path, None),
            Op::Test(_) => continue,
        };
        for pointer in std::iter::once(path).chain(from) {
            let mut wants = pointer_wants(pointer);
            wants.pop();
            journal.record(obj, anchor(obj, wants));
        }
    }
}

/// [`apply_recorded`], recording nowhere.
#[cfg(test)]
pub(super) fn apply(op: &MutationOp, obj: &mut Value) -> Result<(), MutationError> {
    apply_recorded(op, obj, &mut Journal::default())
}

/// Apply one op to `obj`, recording in `journal` each place before it is
/// written.
pub(super) fn apply_recorded(
    op: &MutationOp,
    obj: &mut Value,
    journal: &mut Journal,
) -> Result<(), MutationError> {
    match op {
        MutationOp::Computed { .. } => Err(MutationError::NotComputed),
        MutationOp::JsonPatch(patch) => {
            record_json_patch(journal, obj, patch);
            // What the patch may change, to put back when an operation fails.
            let mut undo = Journal::default();
            record_json_patch(&mut undo, obj, patch);
            match json_patch::patch_unsafe(obj, &patch.0) {
                Ok(()) => Ok(()),
                Err(e) => {
                    undo.restore(obj);
                    // A failing `test` is a guard: the patch does not apply here.
                    if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) {
                        Ok(())
                    } else {
                        Err(MutationError::JsonPatch {
                            operation: e.operation,
                            path: e.path.to_string(),
                            reason: e.kind.to_string(),
                        })
                    }
                }
            }
        }
        MutationOp::MergePatch { at, patch } => {
            match (get_in(at.segments(), obj), patch.as_object()) {
                // An object merged into an object writes only its members.
                (Some(Value::Object(_)), Some(members)) => {
                    for key in members.keys() {
                        record(journal, obj, &at.child(key.clone()));
                    }
                }
                (Some(_), _) => record(journal, obj, at),
                (None, _) => {}
            }
            match get_mut(obj, at) {
                Some(target) => {
                    json_patch::merge(target, patch);
                    Ok(())
                }
                None => Err(MutationError::NoMergeTarget { at: at.clone() }),
            }
        }
        MutationOp::Defaults { at, overlay } => {
            if let (Some(Value::Object(_)), Some(members)) =
                (get_in(at.segments(), obj), overlay.as_object())
            {
                for key in members.keys() {
                    record(journal, obj, &at.child(key.clone()));
                }
            }
            match get_mut(obj, at) {
                Some(target) if target.is_object() => {
                    fill_defaults(target, overlay);
                    Ok(())
                }
                Some(other) => Err(MutationError::NotAnObject {
                    at: at.clone(),
                    found: type_name(other),
                }),
                None => Err(MutationError::NoDefaultsTarget { at: at.clone() }),
            }
        }
        MutationOp::Default { path, value } => set_each(path, obj, value, false, journal),
        MutationOp::Set { path, value } => set_each(path, obj, value, true, journal),
        MutationOp::Remove { path } => {
            let mut targets: Vec<Path> = path.select(obj).into_iter().map(|(p, _)| p).collect();
            // Remove later list elements first so earlier indices stay valid.
            targets.reverse();
            for p in targets {
                match p.segments().split_last() {
                    // Removing an element shifts the ones after it: the list changes.
                    Some((Segment::Index(_), list)) => {
                        record(journal, obj, &Path::from_segments(list.to_vec()))
                    }
                    _ => record(journal, obj, &p),
                }
                remove_at(obj, &p);
            }
            Ok(())
        }
        MutationOp::Append { path, value } => {
            for parent in parents(path, obj) {
                let Some(Segment::Key(key)) = path.segments().last() else {
                    continue;
                };
                let target = parent.child(key.clone());
                match target.get(obj) {
                    None => {
                        record(journal, obj, &target);
                        target.set(obj, Value::Array(vec![value.clone()]))?
                    }
                    Some(Value::Array(items)) if items.iter().any(|x| json_eq(x, value)) => {}
                    Some(Value::Array(_)) => {
                        record(journal, obj, &target);
                        if let Some(Value::Array(items)) = get_mut(obj, &target) {
                            items.push(value.clone());
                        }
                    }
                    Some(other) => {
                        return Err(MutationError::NotAList {
                            at: target,
                            found: type_name(other),
                        });
                    }
                }
            }
            Ok(())
        }
        MutationOp::Metadata { field, add, remove } => {
            let path = Path::root().child("metadata").child(*field);
            for (k, v) in add {
                let p = path.child(k.clone());
                if p.get(obj).and_then(Value::as_str) != Some(v.as_str()) {
                    record(journal, obj, &p);
                    p.set(obj, Value::String(v.clone()))?;
                }
            }
            for k in remove {
                let p = path.child(k.clone());
                if p.get(obj).is_some() {
                    record(journal, obj, &p);
                    remove_at(obj, &p);
                }
            }
            Ok(())
        }
    }
}

/// The concrete parents of a path's last key (wildcards expanded; without a
/// wildcard, the parent even if it does not exist yet).
fn parents(path: &Path, obj: &Value) -> Vec<Path> {
    let Some((_, parent)) = path.segments().split_last() else {
        return vec![];
    };
    // Every existing element the wildcards select; below the last wildcard,
    // missing objects are created like any other parent.
    match parent.iter().rposition(|s| matches!(s, Segment::Wildcard)) {
        None => vec![Path::from_segments(parent.to_vec())],
        Some(last) => {
            let (through, rest) = parent.split_at(last + 1);
            Path::from_segments(through.to_vec())
                .select(obj)
                .into_iter()
                .filter(|(_, v)| v.is_object())
                .map(|(p, _)| p.join(&Path::from_segments(rest.to_vec())))
                .collect()
        }
    }
}

fn set_each(
    path: &Path,
    obj: &mut Value,
    value: &Value,
    replace: bool,
    journal: &mut Journal,
) -> Result<(), MutationError> {
    let Some(Segment::Key(key)) = path.segments().last() else {
        return Err(MutationError::NoFieldName { path: path.clone() });
    };
    for parent in parents(path, obj) {
        let target = parent.child(key.clone());
        match target.get(obj) {
            Some(existing) if !replace || json_eq(existing, value) => {}
            _ => {
                record(journal, obj, &target);
                target.set(obj, value.clone())?
            }
        }
    }
    Ok(())
}

fn get_mut<'v>(obj: &'v mut Value, path: &Path) -> Option<&'v mut Value> {
    let mut cur = obj;
    for seg in path.segments() {
        cur = match (seg, cur) {
            (Segment::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Segment::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Remove one concrete place, leaving its parents as they are.
fn remove_at(obj: &mut Value, path: &Path) {
    let Some((last, parent)) = path.segments().split_last() else {
        return;
    };
    let Some(container) = get_mut(obj, &Path::from_segments(parent.to_vec())) else {
        return;
    };
    match (last, container) {
        (Segment::Key(k), Value::Object(m)) => {
            m.shift_remove(k);
        }
        (Segment::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
        }
        _ => {}
    }
}
