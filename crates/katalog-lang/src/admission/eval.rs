//! Evaluate admission rules for one request: values in, verdict out.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use serde_json::{Map, Value};

use super::versions::{self, Target, ViewError};
use super::{
    AdmissionIr, CheckIr, ConditionIr, ForEachIr, MatchIr, SelectorIr, ValidationIr, VariableUse,
    autogen, webhooks,
};
use crate::cel::{Bound, CelArg, CelBindings, CelError, CelProgram, CelValue};
use crate::common::json::node::Obj;
use crate::common::json::{ValueAt, json_eq, show, truncate, type_name};
use crate::common::path::{Path, Segment, SetError, get_in};
use crate::front::document::{Action, Operation, Quantifier, SelectorOperator};
use crate::ir::Ir;

pub use super::input::{AdmissionInput, Endpoint};

mod mutate;
mod protect;

/// Why a rule could not be evaluated (it fails closed: a validation
/// reports it as its finding, a mutation is skipped with a warning).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A CEL expression failed to evaluate (the review's deadline passing
    /// included).
    #[error(transparent)]
    Cel(#[from] CelError),
    /// A Katalog-wide variable the expression reads failed to evaluate.
    #[error("variable `{name}`: {reason}")]
    Variable {
        name: String,
        reason: Box<EvalError>,
    },
    /// A `match` condition's expression gave something else than a boolean.
    #[error("condition `{expression}` gave {found}, not a boolean")]
    ConditionNotBoolean {
        expression: String,
        found: &'static str,
    },
    /// A check's `cel` gave something else than a boolean.
    #[error("`{expression}` gave {found}, not a boolean")]
    CheckNotBoolean {
        expression: String,
        found: &'static str,
    },
    /// A mutation's `valueExpression` failed.
    #[error("valueExpression `{expression}` failed: {reason}")]
    ValueExpression {
        expression: String,
        reason: Box<EvalError>,
    },
    /// A mutation could not be applied to the object.
    #[error(transparent)]
    Mutation(#[from] MutationError),
    /// The review's deadline passed before the rule (or during a long
    /// check, e.g. `unique` over many values).
    #[error(transparent)]
    Deadline(#[from] crate::common::budget::DeadlineExceeded),
}

/// Why a mutation could not change the object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MutationError {
    /// A `valueExpression` op reached `apply` without its value.
    #[error("the value was not computed")]
    NotComputed,
    /// An operation of a `jsonPatch` failed (a failing `test` is not an error).
    #[error("jsonPatch operation {operation} failed at `{path}`: {reason}")]
    JsonPatch {
        /// Its index in the patch.
        operation: usize,
        /// Its JSON Pointer.
        path: String,
        reason: String,
    },
    /// `mergePatch`: there is no value at `at`.
    #[error("`{at}` is not there to merge into")]
    NoMergeTarget { at: Path },
    /// `defaults`: there is no value at `at`.
    #[error("`{at}` is not there to fill")]
    NoDefaultsTarget { at: Path },
    /// `defaults`: the value at `at` is not an object.
    #[error("`{at}` is {found}, not an object")]
    NotAnObject { at: Path, found: &'static str },
    /// `append`: the value at `at` is not a list.
    #[error("`{at}` is {found}, not a list")]
    NotAList { at: Path, found: &'static str },
    /// `set` or `default` on a path that does not end with a key.
    #[error("`{path}` must end with a field name")]
    NoFieldName { path: Path },
    /// The value could not be written.
    #[error(transparent)]
    Set(#[from] SetError),
}

/// Why a [`SimulatedRequest`] gives no evaluator input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Every operation but DELETE needs `object`.
    #[error("{} needs an object", .operation.as_str())]
    NoObject { operation: Operation },
    /// `resource` is not `group/version/resource` or `version/resource`.
    #[error("`{resource}` is not group/version/resource")]
    BadResource { resource: String },
    /// No `resource`, and no object with apiVersion and kind to derive it from.
    #[error("cannot tell the resource: give `resource` or an object with apiVersion and kind")]
    UnknownResource,
}

/// A rule's finding.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub rule: String,
    pub message: String,
}

/// The outcome of evaluating a request.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Verdict {
    pub allowed: bool,
    pub denials: Vec<Finding>,
    pub warnings: Vec<Finding>,
    pub audits: Vec<Finding>,
    /// Names of the mutations that changed the object.
    pub mutations: Vec<String>,
    /// Names of the mutations and validations whose match held, in the
    /// order they ran (mutations first).
    pub matched: Vec<String>,
    /// RFC 6902 operations turning the object into `patched`.
    pub patch: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patched: Option<Value>,
}

/// Warnings are shown by kubectl one per line; the apiserver truncates long ones.
pub const WARNING_MAX_CHARS: usize = 120;
pub const WARNINGS_MAX_TOTAL: usize = 4096;

impl Verdict {
    /// The denial message: every denying rule, named.
    pub fn message(&self) -> String {
        self.denials
            .iter()
            .map(|f| format!("[{}] {}", f.rule, f.message))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Warnings as sent: at most 120 characters each, 4096 in total.
    pub fn warning_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut total = 0;
        for (i, w) in self.warnings.iter().enumerate() {
            let line = truncate(&format!("[{}] {}", w.rule, w.message), WARNING_MAX_CHARS);
            if total + line.len() > WARNINGS_MAX_TOTAL - 40 {
                out.push(format!("... and {} more warnings", self.warnings.len() - i));
                break;
            }
            total += line.len();
            out.push(line);
        }
        out
    }
}

/// Evaluate the Katalog's admission rules for one request.
pub fn evaluate(ir: &Ir, input: &AdmissionInput, endpoint: Endpoint) -> Verdict {
    evaluate_only(ir, input, endpoint, None)
}

/// [`evaluate`], limited to some rules: with `only`, the validations (for
/// [`Endpoint::Validate`]) or mutations (for [`Endpoint::Mutate`]) at these
/// indices, as one generated webhook holds them (see
/// [`webhooks`](super::webhooks)).
pub fn evaluate_only(
    ir: &Ir,
    input: &AdmissionInput,
    endpoint: Endpoint,
    only: Option<&[usize]>,
) -> Verdict {
    let adm = &ir.admission;
    let mut verdict = Verdict {
        allowed: true,
        ..Default::default()
    };
    // No validation or mutation applies in an excluded namespace (the
    // generated webhooks leave them out; offline the same holds).
    let excluded = !input.namespace.is_empty()
        && adm.excluded_namespaces.contains(&input.namespace)
        // A Namespace object is cluster-scoped: its own name is not "its namespace".
        || (input.group.is_empty()
            && input.resource == "namespaces"
            && adm.excluded_namespaces.contains(&input.name));
    let picked = |i: usize| only.is_none_or(|o| o.contains(&i));
    if matches!(endpoint, Endpoint::Mutate | Endpoint::All) && !excluded {
        mutate::mutate(ir, input, &mut verdict, &picked);
    }
    let input_after = if matches!(endpoint, Endpoint::All) && verdict.patched.is_some() {
        let mut i = input.clone();
        i.object = verdict.patched.clone().map(Obj::from);
        std::borrow::Cow::Owned(i)
    } else {
        std::borrow::Cow::Borrowed(input)
    };
    let input = input_after.as_ref();
    if matches!(endpoint, Endpoint::Validate | Endpoint::All) && !excluded {
        validate_all(ir, input, &mut verdict, &picked);
    }
    let sec = &adm.security;
    if matches!(endpoint, Endpoint::DeletionProtection | Endpoint::All) {
        protect::deletion_protection(adm, input, &mut verdict);
    }
    if matches!(endpoint, Endpoint::NamespaceProtection | Endpoint::All) {
        protect::namespace_protection(&sec.protected, input, &mut verdict);
    }
    if matches!(endpoint, Endpoint::StrictMode | Endpoint::All) {
        protect::strict_mode(adm, input, &mut verdict);
    }
    verdict.allowed = verdict.denials.is_empty();
    verdict
}

/// The validations, on the request and on its views: the pod view of a
/// controller (autogen) and the request converted to the versions rules are
/// written against, each view made once per request, and each with one CEL
/// activation shared by every rule that sees it.
fn validate_all(
    ir: &Ir,
    input: &AdmissionInput,
    verdict: &mut Verdict,
    picked: &dyn Fn(usize) -> bool,
) {
    let adm = &ir.admission;
    let vars = Vars::new(adm, input);
    // Autogen: Pod rules also see the pod template of a controller.
    let any_pod_rule = adm
        .validations
        .iter()
        .enumerate()
        .any(|(i, v)| picked(i) && autogen::applies(&v.matcher, input));
    let pod_view = any_pod_rule.then(|| autogen::pod_view(input)).flatten();
    let pod_vars = pod_view.as_ref().map(|pv| {
        let mut vars = Vars::new(adm, &pv.input);
        vars.shown_at = pv.template.clone();
        vars
    });
    // The versions rules want the request at, each converted once.
    let mut views: Vec<(&str, Result<AdmissionInput, ViewError>)> = Vec::new();
    for (i, v) in adm.validations.iter().enumerate() {
        if let (true, Target::Convert(version)) =
            (picked(i), versions::target(ir, &v.matcher, input))
            && !views.iter().any(|(at, _)| *at == version)
        {
            let view = if of_declared_kind(ir, input) {
                versions::view_at(ir, input, version)
            } else {
                // Not the resource itself (`/scale` sends an autoscaling/v1
                // Scale): nothing to convert, the rule sees it as sent.
                Ok(AdmissionInput {
                    version: version.to_string(),
                    ..input.clone()
                })
            };
            views.push((version, view));
        }
    }
    let mut view_vars: Vec<Option<Vars<'_, '_>>> = views.iter().map(|_| None).collect();
    for (i, v) in adm.validations.iter().enumerate() {
        if !picked(i) {
            continue;
        }
        // A main-resource rule sees a subresource request only for the
        // immutable test it was registered there for.
        let implied = !input.subresource.is_empty()
            && webhooks::implied_subresources(v).contains(&input.subresource.as_str());
        let how = Rule { v, implied };
        match versions::target(ir, &v.matcher, input) {
            Target::NotMatched => {}
            Target::AsIs => {
                validate(how, input, &vars, verdict, false);
                if let (Some(pv), Some(pod_vars)) = (&pod_view, &pod_vars)
                    && autogen::applies(&v.matcher, input)
                {
                    validate(how, &pv.input, pod_vars, verdict, true);
                }
            }
            Target::Convert(version) => {
                let at = views
                    .iter()
                    .position(|(at, _)| *at == version)
                    .expect("every version a rule wants was converted to");
                match &views[at].1 {
                    Ok(view) => {
                        let view_vars = view_vars[at].get_or_insert_with(|| Vars::new(adm, view));
                        validate(how, view, view_vars, verdict, false)
                    }
                    Err(e) if v.matcher.operations.contains(&input.operation) => {
                        // Fail closed: the object cannot be seen as the rule is written.
                        let finding = Finding {
                            rule: v.name.clone(),
                            message: format!("failed to evaluate the rule: {e}"),
                        };
                        match v.action {
                            Action::Deny => verdict.denials.push(finding),
                            Action::Warn => verdict.warnings.push(finding),
                            Action::Audit => verdict.audits.push(finding),
                        }
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

/// What CEL sees of one request (or one view of it): `object`,
/// `oldObject`, `request` and `namespaceObject` (read in place, converted
/// for cel's interpreter once, when an expression first needs it), and the
/// Katalog-wide variables; shared by every rule and every `forEach` element
/// that sees the request. Variables are kept as the evaluator gave them,
/// borrowing the request and the programs (`'i`).
struct Activation<'i> {
    bindings: CelBindings<'i>,
    variables: CelValue<'i>,
    /// Katalog-wide variables that failed to evaluate, with why; only rules
    /// that use one of them fail.
    failed: Vec<(String, EvalError)>,
    /// Results of the expressions that read nothing but the request (the
    /// same `match` condition or `containers` variable in many rules), by
    /// source: evaluated once per request.
    request_only: RefCell<Vec<RequestOnly<'i>>>,
}

/// An expression that reads only the request, evaluated once: the same
/// source (rules repeat their `match` conditions and variables) with the
/// same largest collection for its cost estimate gives the same result.
struct RequestOnly<'i> {
    program: CelProgram,
    largest: u64,
    result: Result<CelValue<'i>, CelError>,
}

static NULL: Value = Value::Null;

impl<'i> Activation<'i> {
    /// What CEL sees of `input`: read in place, converted for cel's
    /// interpreter only when an expression needs it.
    fn bindings(input: &'i AdmissionInput) -> CelBindings<'i> {
        // The names a request-only expression reads (`cel::REQUEST`).
        let [object, old_object, request, namespace_object] = crate::cel::REQUEST;
        let obj = |o: &'i Option<Obj>| o.as_ref().map_or(Bound::Json(&NULL), Bound::Obj);
        CelBindings::with(&[
            (object, obj(&input.object)),
            (old_object, obj(&input.old_object)),
            (request, Bound::Json(&input.request)),
            (
                namespace_object,
                Bound::Json(input.namespace_object.as_ref().unwrap_or(&NULL)),
            ),
        ])
    }

    /// The error of a failed Katalog-wide variable `prog` reads, if any.
    fn failed_variable(&self, prog: &CelProgram) -> Result<(), EvalError> {
        match self
            .failed
            .iter()
            .find(|(name, _)| prog.reads_variable(name))
        {
            Some((name, e)) => Err(EvalError::Variable {
                name: name.clone(),
                reason: Box::new(e.clone()),
            }),
            None => Ok(()),
        }
    }

    /// Whether `prog` reads only the request, and the largest collection
    /// its cost estimate counts (every bound value, the variables it does
    /// not read included).
    fn request_only(prog: &CelProgram, variables: &CelValue<'_>) -> (bool, u64) {
        let largest = if prog.iterates() {
            variables.largest()
        } else {
            0
        };
        (prog.reads_only_request(), largest)
    }

    /// The result of a request-only `prog` evaluated before, if it was.
    fn cached<T>(
        &self,
        prog: &CelProgram,
        largest: u64,
        pick: impl FnOnce(&CelValue<'i>) -> T,
    ) -> Option<Result<T, EvalError>> {
        let cache = self.request_only.borrow();
        let found = cache
            .iter()
            .find(|r| r.largest == largest && r.program.same(prog))?;
        // As evaluating it again would: past the deadline, it fails.
        if let Err(e) = prog.check_deadline() {
            return Some(Err(e.into()));
        }
        Some(
            found
                .result
                .as_ref()
                .map(pick)
                .map_err(|e| EvalError::Cel(e.clone())),
        )
    }

    fn remember(&self, prog: &CelProgram, largest: u64, result: Result<CelValue<'i>, CelError>) {
        self.request_only.borrow_mut().push(RequestOnly {
            program: prog.clone(),
            largest,
            result,
        });
    }

    /// The value of a variable `prog` with the variables `local` (the
    /// Katalog-wide ones plus a rule's own), ready to be bound again.
    fn eval_value(
        &self,
        prog: &'i CelProgram,
        local: Option<&CelValue<'i>>,
    ) -> Result<CelValue<'i>, EvalError> {
        self.failed_variable(prog)?;
        let variables = local.unwrap_or(&self.variables);
        let (request_only, largest) = Self::request_only(prog, variables);
        if request_only && let Some(found) = self.cached(prog, largest, CelValue::clone) {
            return found;
        }
        let out =
            prog.eval_shared_value(&self.bindings, &[("variables", CelArg::Value(variables))]);
        let picked = out.clone().map_err(EvalError::Cel);
        if request_only {
            self.remember(prog, largest, out);
        }
        picked
    }

    /// Evaluate `prog` with `self` (a value the rule checks), `element` and
    /// `elementIndex` (in `forEach`), and the variables (`local`: the
    /// Katalog-wide ones plus a rule's own).
    fn eval(
        &self,
        prog: &CelProgram,
        this: Option<Bound<'_>>,
        element: Option<&(&Value, Value)>,
        local: Option<&CelValue<'_>>,
    ) -> Result<Value, EvalError> {
        self.failed_variable(prog)?;
        let variables = local.unwrap_or(&self.variables);
        let (request_only, largest) = Self::request_only(prog, variables);
        if request_only && let Some(found) = self.cached(prog, largest, |v| v.as_json().clone()) {
            return found;
        }
        let mut args: Vec<(&str, CelArg<'_, '_>)> = vec![("variables", CelArg::Value(variables))];
        if let Some(s) = this {
            args.push(("self", CelArg::Part(s)));
        }
        if let Some((element, index)) = element {
            args.push(("element", CelArg::Part(Bound::Json(element))));
            args.push(("elementIndex", CelArg::Copied(index)));
        }
        let out = prog.eval_shared(&self.bindings, &args);
        if request_only {
            self.remember(
                prog,
                largest,
                out.as_ref().map(CelValue::from_json).map_err(Clone::clone),
            );
        }
        out.map_err(EvalError::Cel)
    }
}

/// What a message prints instead of a sensitive value.
pub const REDACTED: &str = "<redacted>";

/// The paths of `input`'s object whose values messages do not print: a
/// Secret's `data` and `stringData` (whatever the Katalog says), and the
/// `sensitive:` paths of the declared resource it is.
fn sensitive_paths(adm: &AdmissionIr, input: &AdmissionInput) -> Vec<Path> {
    let mut out = Vec::new();
    if input.group.is_empty() && input.resource == "secrets" {
        out.extend(["data", "stringData"].map(|k| Path::root().child(k)));
    }
    for (group, plural, paths) in &adm.sensitive {
        if *group == input.group && *plural == input.resource {
            out.extend(paths.iter().cloned());
        }
    }
    out
}

/// The CEL activation a rule runs with, and where it looks; `'e`: the
/// object its `forEach` element is read from.
#[derive(Clone)]
struct Vars<'i, 'e> {
    activation: Rc<Activation<'i>>,
    /// Paths of the request's object whose values no message prints: a
    /// Secret's `data` and `stringData`, and a declared resource's
    /// `sensitive:` paths.
    sensitive: Rc<Vec<Path>>,
    /// Shown before every path in messages (the pod template, for autogen).
    shown_at: Path,
    /// Rule paths are relative to this (the element, in `forEach`).
    base: Path,
    /// `element` and `elementIndex`, in `forEach`.
    element: Option<(&'e Value, Value)>,
}

impl<'i, 'e> Vars<'i, 'e> {
    fn new(adm: &'i AdmissionIr, input: &'i AdmissionInput) -> Self {
        let mut activation = Activation {
            bindings: Activation::bindings(input),
            variables: CelValue::empty_map(),
            failed: Vec::new(),
            request_only: RefCell::new(Vec::new()),
        };
        for (name, prog) in &adm.variables {
            match activation.eval_value(prog, None) {
                Ok(v) => activation.variables.set_field(name, &v),
                Err(e) => activation.failed.push((name.clone(), e)),
            }
        }
        Vars {
            activation: Rc::new(activation),
            sensitive: Rc::new(sensitive_paths(adm, input)),
            shown_at: Path::root(),
            base: Path::root(),
            element: None,
        }
    }

    /// A value found at `at` (below the subject) as a message prints it:
    /// [`REDACTED`] at or below a sensitive path.
    fn show_at(&self, at: &dyn Concrete, v: &Value) -> String {
        if self.redacts(at) {
            REDACTED.to_string()
        } else {
            show(v)
        }
    }

    /// Whether the value at `at`, or any below it, is sensitive (a value
    /// above a sensitive path contains it).
    fn redacts(&self, at: &dyn Concrete) -> bool {
        if self.sensitive.is_empty() {
            return false;
        }
        let at = at.concrete();
        self.sensitive.iter().any(|s| s.meets(&at))
    }

    fn eval(
        &self,
        prog: &CelProgram,
        this: Option<&Value>,
        local: Option<&CelValue<'_>>,
    ) -> Result<Value, EvalError> {
        self.activation
            .eval(prog, this.map(Bound::Json), self.element.as_ref(), local)
    }

    /// [`Vars::eval`] with `self` bound as given (a request's object, read
    /// as it was parsed).
    fn eval_bound(
        &self,
        prog: &CelProgram,
        this: Bound<'_>,
        local: Option<&CelValue<'_>>,
    ) -> Result<Value, EvalError> {
        self.activation
            .eval(prog, Some(this), self.element.as_ref(), local)
    }

    /// A rule's variable: in a `forEach` element's scope, it sees `element`
    /// and `elementIndex`.
    fn variable(
        &self,
        prog: &'i CelProgram,
        vars: &CelValue<'i>,
    ) -> Result<CelValue<'i>, EvalError> {
        match &self.element {
            Some(element) => self
                .activation
                .eval(prog, None, Some(element), Some(vars))
                .map(CelValue::from_owned_json),
            None => self.activation.eval_value(prog, Some(vars)),
        }
    }

    /// The Katalog-wide variables plus the rule's own its check reads (see
    /// [`VariableUse`]), evaluated in order. A rule's variables are
    /// evaluated once, before its `forEach`, unless one reads `element`:
    /// then in each element's scope.
    fn check_locals(&self, v: &'i ValidationIr) -> Result<Option<CelValue<'i>>, EvalError> {
        if !v.variable_uses.contains(&VariableUse::Check) {
            return Ok(None);
        }
        let mut vars = self.activation.variables.clone();
        for ((name, prog), _) in v
            .variables
            .iter()
            .zip(&v.variable_uses)
            .filter(|(_, u)| **u == VariableUse::Check)
        {
            let value = self.variable(prog, &vars)?;
            vars.set_field(name, &value);
        }
        Ok(Some(vars))
    }

    /// The variables the rule's message sees: the Katalog-wide ones and the
    /// rule's own that its check or its message reads, in order, each
    /// seeing only those declared before it. A check's variable is taken
    /// from `checked` (evaluated when it is not there: the `scale`
    /// subresource's immutability check reads none), a message's is
    /// evaluated; the one that fails is named.
    fn message_locals(
        &self,
        v: &'i ValidationIr,
        checked: Option<&CelValue<'i>>,
    ) -> Result<Option<CelValue<'i>>, EvalError> {
        let complete = checked.is_some() || !v.variable_uses.contains(&VariableUse::Check);
        if complete && !v.variable_uses.contains(&VariableUse::Message) {
            return Ok(checked.cloned());
        }
        let mut vars = self.activation.variables.clone();
        for ((name, prog), used) in v.variables.iter().zip(&v.variable_uses) {
            let value = match (used, checked.and_then(|c| c.field(name))) {
                (VariableUse::Unused, _) => continue,
                (VariableUse::Check, Some(value)) => value.clone(),
                _ => self
                    .variable(prog, &vars)
                    .map_err(|e| EvalError::Variable {
                        name: name.clone(),
                        reason: Box::new(e),
                    })?,
            };
            vars.set_field(name, &value);
        }
        Ok(Some(vars))
    }
}

fn labels_of(object: Option<&Value>) -> Option<&Map<String, Value>> {
    object?.at("/metadata/labels")?.as_object()
}

fn selector_matches(sel: &SelectorIr, labels: Option<&Map<String, Value>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    sel.match_labels
        .iter()
        .all(|(k, v)| get(k) == Some(v.as_str()))
        && sel.expressions.iter().all(|(k, op, values)| match op {
            SelectorOperator::In => get(k).is_some_and(|v| values.iter().any(|x| x == v)),
            SelectorOperator::NotIn => get(k).is_none_or(|v| !values.iter().any(|x| x == v)),
            SelectorOperator::Exists => get(k).is_some(),
            SelectorOperator::DoesNotExist => get(k).is_none(),
        })
}

/// The object rules look at: the new one, or for DELETE the old one.
fn subject(input: &AdmissionInput) -> Option<&Value> {
    input.object.as_deref().or(input.old_object.as_deref())
}

fn matches(m: &MatchIr, input: &AdmissionInput, vars: Option<&Vars>) -> Result<bool, EvalError> {
    if !m.operations.contains(&input.operation) {
        return Ok(false);
    }
    if !m
        .resources
        .iter()
        .any(|r| r.matches(&input.group, &input.version, &input.resource))
    {
        return Ok(false);
    }
    matches_scope(m, input, vars)
}

/// The match past operation and resource (what a pod view is matched on).
fn matches_scope(
    m: &MatchIr,
    input: &AdmissionInput,
    vars: Option<&Vars>,
) -> Result<bool, EvalError> {
    let sub_ok = if m.subresources.is_empty() {
        input.subresource.is_empty()
    } else {
        m.subresources
            .iter()
            .any(|s| s == "*" || super::short_eq(s, &input.subresource))
    };
    if !sub_ok {
        return Ok(false);
    }
    let listed = |list: &[String]| {
        list.iter()
            .any(|p| super::namespace_matches(p, &input.namespace))
    };
    if !m.namespaces_include.is_empty()
        && (input.namespace.is_empty() || !listed(&m.namespaces_include))
    {
        return Ok(false);
    }
    if !input.namespace.is_empty() && listed(&m.namespaces_exclude) {
        return Ok(false);
    }
    // Without the namespace object the apiserver has applied the selector
    // already (registration turns it into the webhook's namespaceSelector).
    if let (Some(sel), Some(ns)) = (&m.namespace_selector, &input.namespace_object)
        && !selector_matches(sel, labels_of(Some(ns)))
    {
        return Ok(false);
    }
    if let Some(sel) = &m.object_selector {
        let new = input
            .object
            .as_ref()
            .is_some_and(|o| selector_matches(sel, labels_of(Some(o))));
        let old = input
            .old_object
            .as_ref()
            .is_some_and(|o| selector_matches(sel, labels_of(Some(o))));
        if !new && !old {
            return Ok(false);
        }
    }
    if !m.users_include.is_empty() && !m.users_include.contains(&input.username) {
        return Ok(false);
    }
    if m.users_exclude.contains(&input.username) {
        return Ok(false);
    }
    if !m.groups_include.is_empty() && !input.groups.iter().any(|g| m.groups_include.contains(g)) {
        return Ok(false);
    }
    if input.groups.iter().any(|g| m.groups_exclude.contains(g)) {
        return Ok(false);
    }
    match &m.condition {
        None => Ok(true),
        Some(c) => {
            let Some(vars) = vars else { return Ok(true) };
            condition_holds(c, input, vars)
        }
    }
}

fn condition_holds(
    c: &ConditionIr,
    input: &AdmissionInput,
    vars: &Vars,
) -> Result<bool, EvalError> {
    Ok(match c {
        ConditionIr::All(items) => {
            for i in items {
                if !condition_holds(i, input, vars)? {
                    return Ok(false);
                }
            }
            true
        }
        ConditionIr::Any(items) => {
            for i in items {
                if condition_holds(i, input, vars)? {
                    return Ok(true);
                }
            }
            false
        }
        ConditionIr::Not(inner) => !condition_holds(inner, input, vars)?,
        ConditionIr::Cel(prog) => match vars.eval(prog, None, None)? {
            Value::Bool(b) => b,
            other => {
                return Err(EvalError::ConditionNotBoolean {
                    expression: prog.source().to_string(),
                    found: type_name(&other),
                });
            }
        },
        ConditionIr::Check { paths, check } => {
            // A condition about a field the object does not have is false
            // (unless it asks for the field to be absent).
            let null = Value::Null;
            let object = subject(input).unwrap_or(&null);
            if !paths.is_empty()
                && !check.absent
                && selected(&rebased(paths, &vars.base), object).is_empty()
            {
                false
            } else {
                run_check(check, paths, input, vars, None)?.is_empty()
            }
        }
    })
}

/// Values a rule looks at, with their concrete paths.
fn selected<'v>(paths: &[Path], object: &'v Value) -> Vec<(Path, &'v Value)> {
    if paths.is_empty() {
        return vec![(Path::root(), object)];
    }
    paths.iter().flat_map(|p| p.select(object)).collect()
}

/// A check's violations, each with the `[*]` element it is about (as a
/// message shows its path), when the check's path has a `[*]`: a rule's own
/// message is repeated for each element, as the built-in ones are.
type Violations = Vec<(Option<String>, String)>;

/// The violations of a check (empty: it passes). Errors are evaluation failures.
///
/// A `[*]` path reaches *elements* (the values of its innermost wildcard; with
/// several paths, as from `allContainers`, the elements of all of them); each
/// element's value is what the rest of the path names there, or nothing.
/// `all`: every element passes (`exists`: each has the value; other tests
/// skip an absent value; no elements at all pass). `any`: at least one
/// element has the value and passes every test (or, for `absent`, lacks it).
fn run_check(
    check: &CheckIr,
    paths: &[Path],
    input: &AdmissionInput,
    vars: &Vars,
    locals: Option<&CelValue<'_>>,
) -> Result<Violations, EvalError> {
    let paths = rebased(paths, &vars.base);
    if paths.is_empty()
        && check.cel_only()
        && let Some(prog) = &check.cel
    {
        return whole_object_by_cel(check, prog, input, vars, locals);
    }
    check_paths(check, &paths, input, vars, locals)
}

/// The violation of `quantifier: any` when no element passes.
fn none_passes(path_text: &str, why: &[String]) -> String {
    format!(
        "no element of {path_text} passes (quantifier: any): {}",
        why.join("; ")
    )
}

/// [`run_check`] on `paths` (rebased), the general way.
fn check_paths(
    check: &CheckIr,
    paths: &[Path],
    input: &AdmissionInput,
    vars: &Vars,
    locals: Option<&CelValue<'_>>,
) -> Result<Violations, EvalError> {
    let mut out: Violations = Vec::new();
    let null = Value::Null;
    let object = subject(input).unwrap_or(&null);
    // Formatted only into a message.
    let at = &vars.shown_at;
    let path_text = || {
        paths
            .first()
            .map(|p| shown(at, p).to_string())
            .unwrap_or_default()
    };
    let elems = elements(paths, object);
    let mut per = Vec::with_capacity(elems.len());
    for (p, v) in &elems {
        let mut found = Vec::new();
        match v {
            None if check.exists => found.push(format!("{} is required", shown(at, p))),
            None => {}
            Some(v) => {
                if check.absent {
                    found.push(format!("{} must not be set", shown(at, p)));
                }
                let redact = vars.redacts(p);
                found.extend(value_violations(
                    check,
                    &shown(at, p),
                    v,
                    redact,
                    vars,
                    locals,
                )?);
            }
        }
        per.push(found);
    }
    // The element a violation is about, for a `[*]` path.
    let element = |p: &dyn Concrete, wildcard: bool| wildcard.then(|| shown(at, p).to_string());
    match check.quantifier {
        Quantifier::All => {
            for ((p, _), found) in elems.iter().zip(per) {
                let e = element(p, p.pattern.has_wildcard());
                out.extend(found.into_iter().map(|f| (e.clone(), f)));
            }
        }
        Quantifier::Any => {
            let passing = elems
                .iter()
                .zip(&per)
                .any(|((_, v), found)| found.is_empty() && (v.is_some() || check.absent));
            if elems.is_empty() {
                out.push((
                    None,
                    format!(
                        "{} selects nothing; at least one element must pass",
                        path_text()
                    ),
                ));
            } else if !passing {
                let why: Vec<String> = elems
                    .iter()
                    .zip(per)
                    .flat_map(|((p, _), found)| {
                        if found.is_empty() {
                            vec![format!("{} is not set", shown(at, p))]
                        } else {
                            found
                        }
                    })
                    .collect();
                out.push((None, none_passes(&path_text(), &why)));
            }
        }
    }
    if check.unique {
        let values: Vec<(&Picked, &Value)> = elems
            .iter()
            .filter_map(|(p, v)| v.map(|v| (p, v)))
            .collect();
        for (i, (p, v)) in values.iter().enumerate() {
            // Quadratic in the values: a long list checks the deadline.
            if i % 256 == 255 {
                crate::common::budget::check_deadline()?;
            }
            if let Some((q, _)) = values[..i].iter().find(|(_, w)| json_eq(v, w)) {
                out.push((
                    element(*p, true),
                    format!(
                        "{} repeats the value {} of {}",
                        shown(at, *p),
                        vars.show_at(*p, v),
                        shown(at, *q)
                    ),
                ));
            }
        }
    }
    if check.immutable
        && input.operation == Operation::Update
        && let (Some(old), Some(new)) = (&input.old_object, &input.object)
    {
        let wildcard = paths.iter().any(Path::has_wildcard);
        for (p, was) in selected(paths, old) {
            match p.get(new) {
                None => out.push((
                    element(&p, wildcard),
                    format!(
                        "{} is immutable and may not be removed (was {})",
                        shown(at, &p),
                        vars.show_at(&p, was)
                    ),
                )),
                Some(now) if !json_eq(now, was) => out.push((
                    element(&p, wildcard),
                    format!(
                        "{} is immutable: it was {}, now {}",
                        shown(at, &p),
                        vars.show_at(&p, was),
                        vars.show_at(&p, now)
                    ),
                )),
                Some(_) => {}
            }
        }
    }
    Ok(out)
}

/// The root path, for a check on the whole object.
static ROOT: std::sync::LazyLock<Path> = std::sync::LazyLock::new(Path::root);

/// [`run_check`] of a check that is a CEL expression on the whole object:
/// `self` is the object as it was parsed (a node is read as it is, not
/// converted), with the same violations as the general case gives it.
fn whole_object_by_cel(
    check: &CheckIr,
    prog: &CelProgram,
    input: &AdmissionInput,
    vars: &Vars,
    locals: Option<&CelValue<'_>>,
) -> Result<Violations, EvalError> {
    let this = input
        .object
        .as_ref()
        .or(input.old_object.as_ref())
        .map_or(Bound::Json(&NULL), Bound::Obj);
    let whole = Picked {
        pattern: &ROOT,
        picks: Vec::new(),
    };
    let at = shown(&vars.shown_at, &whole);
    let mut found = Vec::new();
    cel_test(prog, &at, vars.eval_bound(prog, this, locals)?, &mut found)?;
    Ok(match check.quantifier {
        // The whole object is the one element; its path is written as none.
        Quantifier::Any if !found.is_empty() => vec![(None, none_passes("", &found))],
        Quantifier::All | Quantifier::Any => found.into_iter().map(|f| (None, f)).collect(),
    })
}

/// A path as messages show it: "the object", or `` `spec.x` `` below where
/// the rule looks (the pod template, for autogen). Formatted only when a
/// message is written.
struct Shown<'p> {
    at: &'p Path,
    path: &'p dyn Concrete,
}

fn shown<'p>(at: &'p Path, path: &'p dyn Concrete) -> Shown<'p> {
    Shown { at, path }
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.concrete();
        if path.is_root() && self.at.is_root() {
            f.write_str("the object")
        } else {
            write!(f, "`{}`", self.at.join(&path))
        }
    }
}

/// A concrete path, or what builds one when a message needs it.
trait Concrete {
    fn concrete(&self) -> std::borrow::Cow<'_, Path>;
}

impl Concrete for Path {
    fn concrete(&self) -> std::borrow::Cow<'_, Path> {
        std::borrow::Cow::Borrowed(self)
    }
}

/// What a wildcard picked: a list index or an object key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick<'v> {
    Index(usize),
    Key(&'v str),
}

/// A selected element's path as its pattern and what each wildcard of it
/// picked: the concrete path is built only for a message.
#[derive(Clone, Debug)]
struct Picked<'p, 'v> {
    pattern: &'p Path,
    picks: Vec<Pick<'v>>,
}

impl Concrete for Picked<'_, '_> {
    fn concrete(&self) -> std::borrow::Cow<'_, Path> {
        if self.picks.is_empty() {
            return std::borrow::Cow::Borrowed(self.pattern);
        }
        let mut picks = self.picks.iter();
        let segments = self
            .pattern
            .segments()
            .iter()
            .map(|s| match s {
                Segment::Wildcard => match picks.next() {
                    Some(Pick::Index(i)) => Segment::Index(*i),
                    Some(Pick::Key(k)) => Segment::Key((*k).to_string()),
                    None => Segment::Wildcard,
                },
                s => s.clone(),
            })
            .collect();
        std::borrow::Cow::Owned(Path::from_segments(segments))
    }
}

/// Every value `segments` select below `value` (wildcards expanded), with
/// what each wildcard picked, as [`Path::select`] visits them.
fn pick_into<'v>(
    segments: &[Segment],
    value: &'v Value,
    picks: &mut Vec<Pick<'v>>,
    out: &mut Vec<(Vec<Pick<'v>>, &'v Value)>,
) {
    let Some((first, rest)) = segments.split_first() else {
        out.push((picks.clone(), value));
        return;
    };
    match (first, value) {
        (Segment::Key(k), Value::Object(m)) => {
            if let Some(v) = crate::common::json::member(m, k) {
                pick_into(rest, v, picks, out);
            }
        }
        (Segment::Index(i), Value::Array(a)) => {
            if let Some(v) = a.get(*i) {
                pick_into(rest, v, picks, out);
            }
        }
        (Segment::Wildcard, Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                picks.push(Pick::Index(i));
                pick_into(rest, v, picks, out);
                picks.pop();
            }
        }
        (Segment::Wildcard, Value::Object(m)) => {
            for (k, v) in m {
                picks.push(Pick::Key(k));
                pick_into(rest, v, picks, out);
                picks.pop();
            }
        }
        _ => {}
    }
}

/// Paths relative to `base` (the `forEach` element), made absolute.
fn rebased<'p>(paths: &'p [Path], base: &Path) -> std::borrow::Cow<'p, [Path]> {
    if base.is_root() {
        std::borrow::Cow::Borrowed(paths)
    } else if paths.is_empty() {
        std::borrow::Cow::Owned(vec![base.clone()])
    } else {
        std::borrow::Cow::Owned(paths.iter().map(|p| base.join(p)).collect())
    }
}

/// The elements a check looks at: concrete path and value (`None`: absent).
fn elements<'p, 'v>(
    paths: &'p [Path],
    object: &'v Value,
) -> Vec<(Picked<'p, 'v>, Option<&'v Value>)> {
    if paths.is_empty() {
        let whole = Picked {
            pattern: &ROOT,
            picks: Vec::new(),
        };
        return vec![(whole, Some(object))];
    }
    let mut out = Vec::new();
    let mut found = Vec::new();
    for p in paths {
        let segs = p.segments();
        match segs.iter().rposition(|s| matches!(s, Segment::Wildcard)) {
            None => {
                let at = Picked {
                    pattern: p,
                    picks: Vec::new(),
                };
                out.push((at, p.get(object)));
            }
            Some(last) => {
                let (through, rest) = segs.split_at(last + 1);
                found.clear();
                pick_into(through, object, &mut Vec::new(), &mut found);
                for (picks, ev) in found.drain(..) {
                    let at = Picked { pattern: p, picks };
                    out.push((at, get_in(rest, ev)));
                }
            }
        }
    }
    out
}

/// Two scalars of different types (`"false"` and `false`): a comparison
/// that can never match, worth saying so.
fn different_scalars(a: &Value, b: &Value) -> bool {
    let scalar = |v: &Value| v.is_boolean() || v.is_number() || v.is_string();
    scalar(a) && scalar(b) && !(a.is_number() && b.is_number()) && type_name(a) != type_name(b)
}

/// The violations of the tests on one present value.
fn value_violations(
    check: &CheckIr,
    at: &dyn std::fmt::Display,
    v: &Value,
    redact: bool,
    vars: &Vars,
    locals: Option<&CelValue<'_>>,
) -> Result<Vec<String>, EvalError> {
    let mut out = Vec::new();
    // The value found (never what the Katalog wants) may be sensitive.
    let found = |x: &Value| {
        if redact {
            REDACTED.to_string()
        } else {
            show(x)
        }
    };
    if let Some(want) = &check.equals
        && !json_eq(v, want)
    {
        if different_scalars(want, v) {
            out.push(format!(
                "{at} must be {} ({}), found {} ({})",
                show(want),
                type_name(want),
                found(v),
                type_name(v)
            ));
        } else {
            out.push(format!("{at} must be {}, found {}", show(want), found(v)));
        }
    }
    if let Some(list) = &check.in_
        && !list.iter().any(|x| json_eq(x, v))
    {
        let allowed: Vec<String> = list.iter().map(show).collect();
        let types = if !list.is_empty() && list.iter().all(|x| different_scalars(x, v)) {
            format!(" ({} compared with {})", type_name(v), type_name(&list[0]))
        } else {
            String::new()
        };
        out.push(format!(
            "{at} is {}, not one of {}{types}",
            found(v),
            allowed.join(", ")
        ));
    }
    if let Some(list) = &check.not_in
        && list.iter().any(|x| json_eq(x, v))
    {
        out.push(format!("{at} may not be {}", found(v)));
    }
    if check.minimum.is_some() || check.maximum.is_some() {
        match v.as_f64() {
            Some(n) => {
                if let Some(min) = check.minimum
                    && n < min
                {
                    out.push(format!("{at} must be at least {min}, found {}", found(v)));
                }
                if let Some(max) = check.maximum
                    && n > max
                {
                    out.push(format!("{at} must be at most {max}, found {}", found(v)));
                }
            }
            None => out.push(format!("{at} must be a number, found {}", type_name(v))),
        }
    }
    if check.min_length.is_some() || check.max_length.is_some() {
        let len = match v {
            Value::String(s) => Some(s.chars().count() as u64),
            Value::Array(a) => Some(a.len() as u64),
            Value::Object(m) => Some(m.len() as u64),
            _ => None,
        };
        match len {
            Some(n) => {
                if let Some(min) = check.min_length
                    && n < min
                {
                    out.push(format!(
                        "{at} must have a length of at least {min}, found {n}"
                    ));
                }
                if let Some(max) = check.max_length
                    && n > max
                {
                    out.push(format!(
                        "{at} must have a length of at most {max}, found {n}"
                    ));
                }
            }
            None => out.push(format!("{at} has no length: it is {}", type_name(v))),
        }
    }
    if check.pattern.is_some() || check.prefix.is_some() || check.suffix.is_some() {
        match v.as_str() {
            Some(s) => {
                if let Some(re) = &check.pattern
                    && !re.is_match(s)
                {
                    let shown = re
                        .as_str()
                        .trim_start_matches("^(?:")
                        .trim_end_matches(")$");
                    out.push(format!("{at} = {} does not match /{shown}/", found(v)));
                }
                if let Some(pre) = &check.prefix
                    && !s.starts_with(pre.as_str())
                {
                    out.push(format!("{at} = {} must start with {pre:?}", found(v)));
                }
                if let Some(suf) = &check.suffix
                    && !s.ends_with(suf.as_str())
                {
                    out.push(format!("{at} = {} must end with {suf:?}", found(v)));
                }
            }
            None => out.push(format!("{at} must be a string, found {}", type_name(v))),
        }
    }
    if let Some(prog) = &check.cel {
        cel_test(prog, at, vars.eval(prog, Some(v), locals)?, &mut out)?;
    }
    Ok(out)
}

/// The violation of a `check.cel` that gave `result` at `at`, if any.
fn cel_test(
    prog: &CelProgram,
    at: &dyn std::fmt::Display,
    result: Value,
    out: &mut Vec<String>,
) -> Result<(), EvalError> {
    match result {
        Value::Bool(true) => {}
        Value::Bool(false) => out.push(format!("{at} fails `{}`", prog.source())),
        other => {
            return Err(EvalError::CheckNotBoolean {
                expression: prog.source().to_string(),
                found: type_name(&other),
            });
        }
    }
    Ok(())
}

/// `pod_view`: `input` is the pod view of a controller (autogen), already
/// matched on operation and resource.
/// A validation, and whether it runs only its `immutable` test on a
/// subresource request (see [`webhooks::implied_subresources`]).
#[derive(Clone, Copy)]
struct Rule<'a> {
    v: &'a ValidationIr,
    implied: bool,
}

/// Whether the request's object is the declared resource's own kind (a
/// subresource such as `scale` sends another).
fn of_declared_kind(ir: &Ir, input: &AdmissionInput) -> bool {
    input.subresource.is_empty()
        || input.kind.is_empty()
        || ir
            .resources
            .iter()
            .any(|r| r.group == input.group && r.plural == input.resource && r.kind == input.kind)
}

fn validate<'i>(
    Rule { v, implied }: Rule<'i>,
    input: &'i AdmissionInput,
    vars: &Vars<'i, 'i>,
    verdict: &mut Verdict,
    pod_view: bool,
) {
    let main_resource;
    let immutable_only;
    let (input, check) = if implied {
        // A Scale holds only the replicas, at `spec.replicas`: the rule
        // sees them where the object keeps them (`specReplicasPath`).
        let scale = input.subresource == "scale";
        let as_object = |o: &Option<Obj>| match o {
            Some(s) if scale => {
                let mut object = Value::Object(Default::default());
                if let Some(replicas) = s.at("/spec/replicas") {
                    // Only keys: setting into an empty object cannot fail.
                    let _ = v.scale_replicas.set(&mut object, replicas.clone());
                }
                Some(Obj::from(object))
            }
            other => other.clone(),
        };
        main_resource = AdmissionInput {
            subresource: String::new(),
            object: as_object(&input.object),
            old_object: as_object(&input.old_object),
            ..input.clone()
        };
        immutable_only = CheckIr {
            immutable: true,
            quantifier: v.check.quantifier,
            ..CheckIr::default()
        };
        (&main_resource, &immutable_only)
    } else {
        (input, &v.check)
    };
    let outcome = (|| -> Result<Option<String>, EvalError> {
        // Rules without CEL check no deadline of their own.
        crate::common::budget::check_deadline()?;
        let matched = if pod_view {
            matches_scope(&v.matcher, input, Some(vars))?
        } else {
            matches(&v.matcher, input, Some(vars))?
        };
        if !matched {
            return Ok(None);
        }
        verdict.matched.push(v.name.clone());
        // The `scale` subresource's immutability check reads no variable.
        // Per-element variables are evaluated in each element's scope.
        let locals = if implied || v.variables_per_element {
            None
        } else {
            vars.check_locals(v)?
        };
        // Built once, when the first message needs them.
        let message_locals = OnceCell::new();
        let for_message = || {
            message_locals
                .get_or_init(|| vars.message_locals(v, locals.as_ref()))
                .clone()
        };
        let Some(each) = &v.for_each else {
            let violations = run_check(check, &v.paths, input, vars, locals.as_ref())?;
            return Ok((!violations.is_empty())
                .then(|| violation_message(v, vars, violations, &for_message)));
        };
        let mut parts = Vec::new();
        for (scope, label) in for_each_scopes(each, input, vars)? {
            // Variables that read `element` are the element's own.
            let own = (v.variables_per_element && !implied)
                .then(|| scope.check_locals(v))
                .transpose()?;
            let locals = own.as_ref().unwrap_or(&locals);
            let violations = run_check(check, &v.paths, input, &scope, locals.as_ref())?;
            if !violations.is_empty() {
                let message = if v.variables_per_element {
                    let own_message = || scope.message_locals(v, locals.as_ref());
                    violation_message(v, &scope, violations, &own_message)
                } else {
                    violation_message(v, &scope, violations, &for_message)
                };
                parts.push(format!("{label}: {message}"));
            }
        }
        Ok((!parts.is_empty()).then(|| parts.join("; ")))
    })();
    let message = match outcome {
        Ok(None) => return,
        Ok(Some(message)) => message,
        // A rule that cannot be evaluated fails closed.
        Err(e) => format!("failed to evaluate the rule: {e}"),
    };
    let finding = Finding {
        rule: v.name.clone(),
        message,
    };
    match v.action {
        Action::Deny => verdict.denials.push(finding),
        Action::Warn => verdict.warnings.push(finding),
        Action::Audit => verdict.audits.push(finding),
    }
}

/// The elements of a `forEach` that meet its `when`, each with the scope its
/// rule runs in and how a message names it (`spec.containers[1] (name: sidecar)`).
fn for_each_scopes<'i, 'e>(
    each: &ForEachIr,
    input: &'e AdmissionInput,
    vars: &Vars<'i, 'e>,
) -> Result<Vec<(Vars<'i, 'e>, String)>, EvalError> {
    let object = subject(input).unwrap_or(&NULL);
    let mut out = Vec::new();
    for list in &each.lists {
        for (p, element) in rebased(std::slice::from_ref(list), &vars.base)[0].select(object) {
            let index = match p.segments().last() {
                Some(Segment::Index(i)) => Value::from(*i),
                Some(Segment::Key(k)) => Value::String(k.clone()),
                _ => Value::Null,
            };
            let mut scope = vars.clone();
            scope.base = p.clone();
            scope.element = Some((element, index));
            if let Some(when) = &each.when
                && !condition_holds(when, input, &scope)?
            {
                continue;
            }
            let mut label = vars.shown_at.join(&p).to_string();
            if let Some(name) = element.get("name").and_then(Value::as_str) {
                label.push_str(&format!(" (name: {name})"));
            }
            out.push((scope, label));
        }
    }
    Ok(out)
}

/// The message of a failing rule: its own, or the violations.
fn violation_message<'i>(
    v: &'i ValidationIr,
    vars: &Vars<'i, '_>,
    violations: Violations,
    locals: &dyn Fn() -> Result<Option<CelValue<'i>>, EvalError>,
) -> String {
    // A rule's own message, once for each `[*]` element that fails, after
    // the element's path when several do.
    let mut elements: Vec<String> = Vec::new();
    for (e, _) in &violations {
        if let Some(e) = e
            && !elements.contains(e)
        {
            elements.push(e.clone());
        }
    }
    let violations: Vec<String> = violations.into_iter().map(|(_, text)| text).collect();
    let custom = match &v.message_expression {
        Some(prog) => match locals().and_then(|locals| vars.eval(prog, None, locals.as_ref())) {
            Ok(Value::String(s)) => Some(s),
            Ok(other) => Some(format!(
                "{} (messageExpression gave {})",
                violations.join("; "),
                type_name(&other)
            )),
            Err(e) => Some(format!(
                "{} (messageExpression failed: {e})",
                violations.join("; ")
            )),
        },
        None => v.message.clone(),
    };
    let custom = custom.map(|message| {
        if elements.len() < 2 {
            message
        } else {
            elements
                .iter()
                .map(|e| format!("{e}: {message}"))
                .collect::<Vec<_>>()
                .join("; ")
        }
    });
    match custom {
        // A rule's own message on a controller says where the pod template is.
        Some(message) if !vars.shown_at.is_root() => {
            format!("{message} (pod template at `{}`)", vars.shown_at)
        }
        Some(message) => message,
        None => violations.join("; "),
    }
}
/// For tests: the patch [`evaluate`] gives for `input`'s mutations (all of
/// them, on any endpoint) next to the whole-object diff, and the names of
/// the mutations found to change the object each way. They must agree.
#[doc(hidden)]
pub fn mutation_patch_check(ir: &Ir, input: &AdmissionInput) -> MutationPatchCheck {
    let mut check = MutationPatchCheck::default();
    let mut verdict = Verdict::default();
    let mut whole_changed = Vec::new();
    if let Some(original) = input.object.as_deref()
        && let Some((current, touched)) =
            mutate::run_mutations(ir, input, &mut verdict, &|_| true, Some(&mut whole_changed))
    {
        let json = |p: json_patch::Patch| -> Vec<Value> {
            p.0.iter()
                .filter_map(|op| serde_json::to_value(op).ok())
                .collect()
        };
        check.touched = json(touched.diff(original, &current));
        check.whole = json(json_patch::diff(original, &current));
    }
    check.touched_changed = verdict.mutations;
    check.whole_changed = whole_changed;
    check
}

/// See [`mutation_patch_check`].
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct MutationPatchCheck {
    pub touched: Vec<Value>,
    pub whole: Vec<Value>,
    pub touched_changed: Vec<String>,
    pub whole_changed: Vec<String>,
}

/// A request described the way a person writes it (CLI flags, test cases):
/// the evaluator's input is derived from it.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimulatedRequest {
    /// `group/version/resource` (`apps/v1/deployments`, `v1/pods`); by
    /// default derived from the object's apiVersion and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Default CREATE (UPDATE when `oldObject` is given with `object`,
    /// DELETE when only `oldObject` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// Default: the object's `metadata.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_object: Option<Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `Pod` → `pods`, `Ingress` → `ingresses`, `NetworkPolicy` → `networkpolicies`.
fn guess_plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    // Kinds whose resource name is not the regular plural.
    if matches!(lower.as_str(), "endpoints") {
        return lower;
    }
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

impl SimulatedRequest {
    /// The evaluator's input; the Katalog supplies plurals of its resources.
    pub fn to_input(&self, ir: &Ir) -> Result<AdmissionInput, InputError> {
        let operation = self
            .operation
            .unwrap_or(match (&self.object, &self.old_object) {
                (Some(_), Some(_)) => Operation::Update,
                (None, Some(_)) => Operation::Delete,
                _ => Operation::Create,
            });
        let subject = self.object.as_ref().or(self.old_object.as_ref());
        if operation != Operation::Delete && self.object.is_none() {
            return Err(InputError::NoObject { operation });
        }
        let api_version = subject
            .and_then(|o| o.get("apiVersion"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = subject
            .and_then(|o| o.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (group, version) = crate::common::json::split_api_version(api_version);
        let (group, version, resource) = match &self.resource {
            Some(r) => {
                let parts: Vec<&str> = r.split('/').collect();
                match parts.as_slice() {
                    [v, r] => (String::new(), v.to_string(), r.to_string()),
                    [g, v, r] => (g.to_string(), v.to_string(), r.to_string()),
                    _ => {
                        return Err(InputError::BadResource {
                            resource: r.clone(),
                        });
                    }
                }
            }
            None => {
                if kind.is_empty() {
                    return Err(InputError::UnknownResource);
                }
                let plural = ir
                    .resource(group, &kind)
                    .map(|r| r.plural.clone())
                    .unwrap_or_else(|| guess_plural(&kind));
                (group.to_string(), version.to_string(), plural)
            }
        };
        let meta = |field: &str| {
            subject
                .and_then(|o| o.at(&format!("/metadata/{field}")))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let namespace = self.namespace.clone().unwrap_or_else(|| meta("namespace"));
        let name = meta("name");
        let username = self.user.clone().unwrap_or_else(|| "katalog-cli".into());
        let request = serde_json::json!({
            "uid": "00000000-0000-0000-0000-000000000000",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "subResource": self.subresource.clone().unwrap_or_default(),
            "name": name,
            "namespace": namespace,
            "operation": operation.as_str(),
            "userInfo": {"username": username, "groups": self.groups},
            "dryRun": self.dry_run,
        });
        Ok(AdmissionInput {
            operation,
            group,
            version,
            resource,
            subresource: self.subresource.clone().unwrap_or_default(),
            kind,
            name,
            namespace,
            object: self.object.clone().map(Obj::from),
            old_object: self.old_object.clone().map(Obj::from),
            username,
            groups: self.groups.clone(),
            dry_run: self.dry_run,
            namespace_object: self.namespace_object.clone(),
            request,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::mutate::{apply, apply_recorded};
    use super::*;
    use crate::Source;
    use crate::admission::MutationOp;
    use crate::admission::touched::{Journal, Step, Touched};

    fn p(text: &str) -> Path {
        Path::parse(text).unwrap()
    }

    /// A CEL check of the whole object takes a shortcut (`self` bound to
    /// the object as parsed): it answers as the general check does, for
    /// both quantifiers, where messages show the object (the root, a pod
    /// template) and results true, false and not a boolean; with the
    /// object read as a value and as a node.
    #[test]
    fn the_whole_object_shortcut_answers_as_the_general_check() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\nspec:\n  admission:\n    validations:\n      - name: r\n        resources: [v1/pods]\n        check: {cel: 'true'}\n";
        let ir = crate::compile_sources(&[Source::new("t.yaml", text)]).expect("compiles");
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        let request = SimulatedRequest {
            object: Some(pod.clone()),
            ..Default::default()
        };
        let input = request.to_input(&ir).expect("a request");
        let as_node = AdmissionInput {
            object: Some(Obj::from_node(crate::common::json::node::Node::from(&pod))),
            ..input.clone()
        };
        let mut compared = 0;
        for input in [&input, &as_node] {
            for shown_at in [Path::root(), p("spec.template")] {
                let mut vars = Vars::new(&ir.admission, input);
                vars.shown_at = shown_at;
                for cel in [
                    "object.metadata.name == 'p'",
                    "self.metadata.name == 'q'",
                    "1",
                ] {
                    for quantifier in [Quantifier::All, Quantifier::Any] {
                        let check = CheckIr {
                            cel: Some(CelProgram::compile(cel).unwrap()),
                            quantifier,
                            ..CheckIr::default()
                        };
                        let general = check_paths(&check, &[], input, &vars, None);
                        let shortcut = run_check(&check, &[], input, &vars, None);
                        assert_eq!(shortcut, general, "{cel} {quantifier:?}");
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, 24);
    }

    mod touched_patch {
        //! The patch from the places mutations touched is the whole-object
        //! diff, on random objects and random ops at random paths.
        use proptest::prelude::*;
        use serde_json::{Value, json};

        use super::{Journal, MutationOp, Touched, apply_recorded};
        use crate::common::path::{Path, Segment};

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                (0..3i64).prop_map(|n| json!(n)),
                prop::sample::select(&["x", "y"][..]).prop_map(|s| json!(s)),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::vec((key(), inner), 0..4)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        fn key() -> impl Strategy<Value = String> {
            prop::sample::select(&["a", "b", "c", "0", "1"][..]).prop_map(String::from)
        }

        fn segment() -> impl Strategy<Value = Segment> {
            prop_oneof![
                4 => key().prop_map(Segment::Key),
                2 => (0..3usize).prop_map(Segment::Index),
                1 => Just(Segment::Wildcard),
            ]
        }

        fn path() -> impl Strategy<Value = Path> {
            prop::collection::vec(segment(), 1..4).prop_map(Path::from_segments)
        }

        fn pointer() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop_oneof![key(), Just("-".to_string()), Just("2".to_string())],
                0..4,
            )
            .prop_map(|t| t.iter().map(|t| format!("/{t}")).collect())
        }

        fn json_patch_op() -> impl Strategy<Value = Value> {
            prop_oneof![
                (pointer(), value()).prop_map(|(p, v)| json!({"op": "add", "path": p, "value": v})),
                pointer().prop_map(|p| json!({"op": "remove", "path": p})),
                (pointer(), value())
                    .prop_map(|(p, v)| json!({"op": "replace", "path": p, "value": v})),
                (pointer(), pointer())
                    .prop_map(|(f, p)| json!({"op": "move", "from": f, "path": p})),
                (pointer(), pointer())
                    .prop_map(|(f, p)| json!({"op": "copy", "from": f, "path": p})),
                (pointer(), value())
                    .prop_map(|(p, v)| json!({"op": "test", "path": p, "value": v})),
            ]
        }

        fn op() -> impl Strategy<Value = MutationOp> {
            prop_oneof![
                (path(), value()).prop_map(|(path, value)| MutationOp::Set { path, value }),
                (path(), value()).prop_map(|(path, value)| MutationOp::Default { path, value }),
                path().prop_map(|path| MutationOp::Remove { path }),
                (path(), value()).prop_map(|(path, value)| MutationOp::Append { path, value }),
                (
                    prop::sample::select(&["labels", "annotations"][..]),
                    prop::collection::vec((key(), key()), 0..3),
                    prop::collection::vec(key(), 0..2)
                )
                    .prop_map(|(field, add, remove)| MutationOp::Metadata {
                        field,
                        add,
                        remove
                    }),
                (prop::collection::vec(segment(), 0..3), value()).prop_map(|(at, patch)| {
                    MutationOp::MergePatch {
                        at: Path::from_segments(at),
                        patch,
                    }
                }),
                (prop::collection::vec(segment(), 0..3), value()).prop_map(|(at, overlay)| {
                    MutationOp::Defaults {
                        at: Path::from_segments(at),
                        overlay,
                    }
                }),
                prop::collection::vec(json_patch_op(), 1..4).prop_filter_map(
                    "a valid JSON Patch",
                    |ops| serde_json::from_value(Value::Array(ops))
                        .ok()
                        .map(MutationOp::JsonPatch)
                ),
            ]
        }

        /// A mutation's ops, each mutation with its own journal, as `mutate` runs them.
        fn run(original: &Value, mutations: &[Vec<MutationOp>]) -> Result<(), TestCaseError> {
            let mut current = original.clone();
            let mut touched = Touched::default();
            for ops in mutations {
                let before = current.clone();
                let mut journal = Journal::default();
                for op in ops {
                    let _ = apply_recorded(op, &mut current, &mut journal);
                }
                prop_assert_eq!(
                    journal.changed(&current),
                    current != before,
                    "changed, after {:?}",
                    ops
                );
                touched.extend(journal.places());
            }
            let whole = json_patch::diff(original, &current);
            let ours = touched.diff(original, &current);
            prop_assert_eq!(
                serde_json::to_value(&ours).unwrap(),
                serde_json::to_value(&whole).unwrap(),
                "from {} to {}",
                original,
                current
            );
            Ok(())
        }

        fn jp(ops: Value) -> MutationOp {
            MutationOp::JsonPatch(serde_json::from_value(ops).unwrap())
        }

        #[test]
        fn a_move_within_a_list_touches_the_list() {
            // Same length after: each element between the two indices moved.
            let original = json!({"a": ["x", "y", "z"], "b": 1});
            run(
                &original,
                &[vec![jp(
                    json!([{"op": "move", "from": "/a/0", "path": "/a/2"}]),
                )]],
            )
            .unwrap();
        }

        #[test]
        fn a_parent_created_then_removed_is_no_change() {
            let set = MutationOp::Set {
                path: Path::parse("x.y.z").unwrap(),
                value: json!(1),
            };
            let remove = MutationOp::Remove {
                path: Path::parse("x").unwrap(),
            };
            run(&json!({"a": 1}), &[vec![set, remove]]).unwrap();
        }

        #[test]
        fn a_list_whose_length_changed_is_diffed_whole() {
            // Outside the contract (the element added is not a touched
            // place), a list of another length is still diffed whole.
            let mut touched = Touched::default();
            touched.add(vec![super::Step::Key("a".into()), super::Step::Index(0)]);
            let (original, current) = (json!({"a": [1]}), json!({"a": [2, 3]}));
            assert_eq!(
                touched.diff(&original, &current),
                json_patch::diff(&original, &current)
            );
        }

        /// A JSON Patch as the copy-and-patch it replaces: applied whole,
        /// or (a failing op, a failing `test`) not at all, members in
        /// their order.
        fn json_patch_as_a_copy(original: &Value, op: &MutationOp) -> Result<(), TestCaseError> {
            let MutationOp::JsonPatch(patch) = op else {
                return Ok(());
            };
            let mut reference = original.clone();
            if json_patch::patch_unsafe(&mut reference, &patch.0).is_err() {
                reference = original.clone();
            }
            let mut ours = original.clone();
            let _ = apply_recorded(op, &mut ours, &mut Journal::default());
            prop_assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&reference).unwrap(),
                "after {:?}",
                op
            );
            Ok(())
        }

        #[test]
        fn a_failing_json_patch_leaves_the_object_as_it_was() {
            let original = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]});
            for ops in [
                json!([{"op": "remove", "path": "/a"}, {"op": "add", "path": "/z", "value": 0}, {"op": "test", "path": "/e/0", "value": 9}]),
                json!([{"op": "remove", "path": "/b/c"}, {"op": "add", "path": "/e/0", "value": 0}, {"op": "remove", "path": "/missing"}]),
            ] {
                json_patch_as_a_copy(&original, &jp(ops)).unwrap();
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn a_json_patch_applies_as_on_a_copy(
                original in prop::collection::vec((key(), value()), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ops in prop::collection::vec(json_patch_op(), 1..4),
            ) {
                if let Ok(patch) = serde_json::from_value(Value::Array(ops)) {
                    json_patch_as_a_copy(&original, &MutationOp::JsonPatch(patch))?;
                }
            }

            #[test]
            fn the_touched_places_patch_as_the_whole_diff(
                original in prop::collection::vec((key(), value()), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                mutations in prop::collection::vec(prop::collection::vec(op(), 1..4), 1..4),
            ) {
                run(&original, &mutations)?;
            }

            /// A Kubernetes-shaped object: the ops reach into metadata and lists.
            #[test]
            fn on_an_object_with_metadata_and_lists(
                labels in prop::collection::vec((key(), key()), 0..3),
                list in prop::collection::vec(value(), 0..4),
                mutations in prop::collection::vec(prop::collection::vec(op(), 1..4), 1..4),
            ) {
                let labels: serde_json::Map<String, Value> =
                    labels.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
                let original = json!({
                    "metadata": {"labels": labels, "b": list.clone()},
                    "a": list.clone(),
                    "b": {"c": list, "0": {"1": "x"}},
                });
                run(&original, &mutations)?;
            }
        }
    }

    #[test]
    fn a_rule_without_cel_checks_the_deadline_and_stops_a_trial() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\nspec:\n  admission:\n    validations:\n      - {name: u, resources: [v1/pods], path: 'spec.containers[*].name', check: {unique: true}}\n";
        let ir = crate::compile_sources(&[Source::new("t.yaml", text)]).expect("compiles");
        let containers: Vec<Value> = (0..600).map(|i| json!({"name": format!("c{i}")})).collect();
        let input = SimulatedRequest {
            object: Some(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": containers}})),
            ..SimulatedRequest::default()
        }
        .to_input(&ir)
        .expect("input");
        assert!(evaluate(&ir, &input, Endpoint::Validate).allowed);
        let past = crate::common::budget::Budget {
            deadline: Some(std::time::Instant::now()),
            ..crate::common::budget::Budget::default()
        };
        let (verdict, stopped) = crate::common::budget::scoped_stopped(past, u64::MAX, || {
            evaluate(&ir, &input, Endpoint::Validate)
        });
        assert!(stopped, "the trial went on past its deadline");
        assert_eq!(
            verdict.denials[0].message,
            "failed to evaluate the rule: evaluation stopped: the review ran out of time (--request-timeout)"
        );
    }

    #[test]
    fn a_simulated_request_that_names_no_resource_is_refused() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\nspec:\n  admission:\n    validations:\n      - {name: a, resources: [v1/pods], path: spec.hostPID, check: {equals: false}}\n";
        let ir = crate::compile_sources(&[Source::new("t.yaml", text)]).expect("compiles");
        let err = SimulatedRequest::default().to_input(&ir).unwrap_err();
        assert_eq!(
            err,
            InputError::NoObject {
                operation: Operation::Create
            }
        );
        assert_eq!(err.to_string(), "CREATE needs an object");
        let request = SimulatedRequest {
            resource: Some("a/b/c/d".into()),
            object: Some(json!({})),
            ..SimulatedRequest::default()
        };
        assert_eq!(
            request.to_input(&ir).unwrap_err().to_string(),
            "`a/b/c/d` is not group/version/resource"
        );
        let request = SimulatedRequest {
            object: Some(json!({"metadata": {"name": "x"}})),
            ..SimulatedRequest::default()
        };
        assert_eq!(
            request.to_input(&ir).unwrap_err(),
            InputError::UnknownResource
        );
    }

    #[test]
    fn a_mutation_that_cannot_write_says_where() {
        let mut obj = json!({"spec": {"tags": "no", "a": 1}});
        let append = MutationOp::Append {
            path: p("spec.tags"),
            value: json!("x"),
        };
        let err = apply(&append, &mut obj).unwrap_err();
        assert_eq!(
            err,
            MutationError::NotAList {
                at: p("spec.tags"),
                found: "a string"
            }
        );
        assert_eq!(err.to_string(), "`spec.tags` is a string, not a list");
        let set = MutationOp::Set {
            path: p("spec.a.b"),
            value: json!(2),
        };
        let err = apply(&set, &mut obj).unwrap_err();
        assert!(matches!(
            err,
            MutationError::Set(SetError::NotAnObject { .. })
        ));
        assert_eq!(
            err.to_string(),
            "cannot set `spec.a.b`: `spec.a` is not an object"
        );
        let set = MutationOp::Set {
            path: p("spec.list[0]"),
            value: json!(2),
        };
        assert_eq!(
            apply(&set, &mut obj).unwrap_err().to_string(),
            "`spec.list[0]` must end with a field name"
        );
    }
}
