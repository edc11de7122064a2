//! The admission half of the IR: what [`crate::admission::compile`] makes of
//! a Katalog's validations, mutations and protections, and what
//! [`crate::admission::eval`] evaluates. Data and the questions asked of it
//! (which resources a rule selects, which paths a mutation writes); no
//! evaluation of a request.

use std::collections::BTreeSet;

use regex::Regex;
use serde_json::Value;

use crate::cel::CelProgram;
use crate::common::path::{Path, Segment};
use crate::front::document::{Action, Operation, Quantifier, SelectorOperator};

/// Which webhook endpoint is asking; `All` simulates them in the
/// apiserver's order: mutations, then validations and protections on the
/// mutated object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Validate,
    Mutate,
    DeletionProtection,
    NamespaceProtection,
    StrictMode,
    All,
}

impl Endpoint {
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
            Endpoint::DeletionProtection => "deletion-protection",
            Endpoint::NamespaceProtection => "namespace-protection",
            Endpoint::StrictMode => "strict-mode-protection",
            Endpoint::All => "all",
        }
    }
}

/// The workload kinds whose pod template a rule on Pods also checks, with
/// the path of the template in each (see [`crate::admission::autogen`]).
pub type Controllers = std::sync::Arc<[(ResourcePattern, Path)]>;

/// Everything admission needs, compiled.
#[derive(Debug, Default)]
pub struct AdmissionIr {
    pub failure_policy: crate::front::document::FailurePolicy,
    pub timeout_seconds: u8,
    pub variables: Vec<(String, CelProgram)>,
    /// Namespaces no validation or mutation applies in (Katalog-wide;
    /// default `kube-system`, `kube-node-lease`, `kube-public`). The generated
    /// webhooks leave them out.
    pub excluded_namespaces: Vec<String>,
    /// Whether the generated webhooks also leave out the engine's own
    /// namespace (default true).
    pub exclude_engine_namespace: bool,
    pub validations: Vec<ValidationIr>,
    pub mutations: Vec<MutationIr>,
    pub security: SecurityIr,
    /// Per declared resource (`group`, `plural`), its `sensitive:` paths.
    pub sensitive: Vec<(String, String, Vec<Path>)>,
    /// Located warnings (severity [`crate::error::Severity::Warning`]): the
    /// Katalog compiles, but something in it looks wrong.
    pub warnings: Vec<crate::Diagnostic>,
    /// [`AdmissionIr::objects_read_by_cel_only`] at the validating
    /// endpoint, decided on its first use (the IR does not change after
    /// it is compiled).
    pub(crate) objects_cel_only: std::sync::OnceLock<bool>,
}

impl AdmissionIr {
    /// Whether, at `endpoint`, nothing but CEL reads a request's objects:
    /// every validation is a CEL check of the whole object, with no path, no
    /// `forEach` and no object selector. Then a review's objects are parsed
    /// into [`Node`](crate::common::json::node::Node)s, which CEL reads as they are;
    /// otherwise into `Value`s. Only the speed depends on it: an object read
    /// as a node becomes a `Value` when anything else reads it.
    pub fn objects_read_by_cel_only(&self, endpoint: Endpoint) -> bool {
        endpoint == Endpoint::Validate && *self.objects_cel_only.get_or_init(|| self.cel_only())
    }

    /// Whether only CEL reads the objects at the validating endpoint.
    fn cel_only(&self) -> bool {
        let matcher_cel_only = |m: &MatchIr| {
            m.object_selector.is_none() && m.condition.as_ref().is_none_or(ConditionIr::cel_only)
        };
        // An expression only cel's interpreter runs reads the objects as
        // JSON: they would be converted on every request.
        fn native<'p>(mut programs: impl Iterator<Item = &'p CelProgram>) -> bool {
            programs.all(CelProgram::runs_natively)
        }
        native(self.variables.iter().map(|(_, p)| p))
            && self.validations.iter().all(|v| {
                let mut programs = Vec::new();
                if let Some(c) = &v.matcher.condition {
                    c.programs(&mut programs);
                }
                v.paths.is_empty()
                    && v.for_each.is_none()
                    && v.check.cel_only()
                    && matcher_cel_only(&v.matcher)
                    && native(
                        programs
                            .into_iter()
                            .chain(&v.check.cel)
                            .chain(&v.message_expression)
                            .chain(v.variables.iter().map(|(_, p)| p)),
                    )
            })
    }

    /// True when the Katalog declares anything the given endpoint serves.
    pub fn serves(&self, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::Validate => !self.validations.is_empty(),
            Endpoint::Mutate => !self.mutations.is_empty(),
            Endpoint::DeletionProtection => {
                self.security.deletion.enabled || self.security.protected.iter().any(|r| r.deletion)
            }
            Endpoint::NamespaceProtection => {
                self.security.protected.iter().any(|r| {
                    !r.allowed_namespaces.is_empty() || !r.restricted_namespaces.is_empty()
                })
            }
            Endpoint::StrictMode => self.security.protected.iter().any(|r| r.strict_mode),
            Endpoint::All => true,
        }
    }
}

/// `group/version/resource` with `None` for `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePattern {
    pub group: Option<String>,
    pub version: Option<String>,
    pub resource: Option<String>,
}

impl ResourcePattern {
    /// Resource first: it tells most patterns apart by its length alone.
    /// Compared inline (these are short names; a call to `memcmp` for each
    /// was a tenth of a Pod review's evaluation).
    pub fn matches(&self, group: &str, version: &str, resource: &str) -> bool {
        let ok = |p: &Option<String>, v: &str| p.as_deref().is_none_or(|p| short_eq(p, v));
        ok(&self.resource, resource) && ok(&self.version, version) && ok(&self.group, group)
    }
}

/// `a == b` for short strings, without a call to `memcmp`.
#[inline]
pub(crate) fn short_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// Whether `namespace` matches a `match.namespaces` entry: a name, or a
/// prefix or suffix glob as Gatekeeper's (`kube-*`, `*-system`; `*` alone
/// matches every namespace).
pub fn namespace_matches(pattern: &str, namespace: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        return namespace.starts_with(prefix);
    }
    if let Some(suffix) = pattern.strip_prefix('*') {
        return namespace.ends_with(suffix);
    }
    pattern == namespace
}

/// Why a `match.namespaces` entry can match no namespace: a namespace is a
/// DNS label (lowercase letters, digits and `-`, at most 63, starting and
/// ending with a letter or digit), and a glob has one `*`, at its start or
/// its end.
pub fn namespace_pattern_problem(pattern: &str) -> Option<String> {
    let stars = pattern.matches('*').count();
    let body = pattern.trim_start_matches('*').trim_end_matches('*');
    if stars > 1
        || (stars == 1 && pattern.len() > 1 && !pattern.starts_with('*') && !pattern.ends_with('*'))
    {
        return Some(
            "a glob has one `*`, at the start or at the end (`kube-*`, `*-system`)".into(),
        );
    }
    if body.len() > 63 || (stars == 0 && body.is_empty()) {
        return Some("a namespace name is 1 to 63 characters".into());
    }
    if !body
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("a namespace name has only lowercase letters, digits and `-`".into());
    }
    let edge_ok = |c: Option<u8>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if (!pattern.starts_with('*') && !edge_ok(body.bytes().next()))
        || (!pattern.ends_with('*') && !edge_ok(body.bytes().last()))
    {
        return Some("a namespace name starts and ends with a letter or digit".into());
    }
    None
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectorIr {
    pub match_labels: Vec<(String, String)>,
    pub expressions: Vec<(String, SelectorOperator, Vec<String>)>,
}

/// A Katalog-declared resource a rule applies to, and the one version the
/// rule is written against: a request at any other served version is
/// converted to it (with the Katalog's own conversion rules) before the rule
/// sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTarget {
    pub group: String,
    pub plural: String,
    pub version: String,
}

#[derive(Debug, Default)]
pub struct MatchIr {
    pub resources: Vec<ResourcePattern>,
    /// The declared resources the patterns select, each with the version
    /// the rule is evaluated at (the pinned version, or the hub for `*`).
    pub declared: Vec<DeclaredTarget>,
    pub operations: BTreeSet<Operation>,
    pub namespaces_include: Vec<String>,
    pub namespaces_exclude: Vec<String>,
    pub namespace_selector: Option<SelectorIr>,
    pub object_selector: Option<SelectorIr>,
    /// Empty: the main resource only. `*`: any.
    pub subresources: Vec<String>,
    pub users_include: Vec<String>,
    pub users_exclude: Vec<String>,
    pub groups_include: Vec<String>,
    pub groups_exclude: Vec<String>,
    pub condition: Option<ConditionIr>,
    /// Pod controllers (and where their pod template lives) that a rule on
    /// `v1/pods` also applies to, on a pod view of the template; empty for
    /// other rules. Not part of `resources`: the rule never sees the raw
    /// controller object.
    pub pod_controllers: Controllers,
}

impl MatchIr {
    /// Every resource the webhook must be registered for: `resources` and
    /// the pod controllers.
    pub fn registered_resources(&self) -> Vec<ResourcePattern> {
        let mut out = self.resources.clone();
        out.extend(self.pod_controllers.iter().map(|(r, _)| r.clone()));
        out
    }

    /// The operations on pod controllers: the rule's own, plus UPDATE when
    /// it has CREATE (a Pod's spec is fixed once created, a template is not).
    pub fn pod_controller_operations(&self) -> BTreeSet<Operation> {
        let mut ops = self.operations.clone();
        if ops.contains(&Operation::Create) {
            ops.insert(Operation::Update);
        }
        ops
    }

    /// `(resource, operations)` pairs to register: `resources` with
    /// `operations`, the pod controllers with [`Self::pod_controller_operations`].
    pub fn registered_rules(&self) -> Vec<(ResourcePattern, BTreeSet<Operation>)> {
        let mut out: Vec<_> = self
            .resources
            .iter()
            .map(|r| (r.clone(), self.operations.clone()))
            .collect();
        let ops = self.pod_controller_operations();
        out.extend(
            self.pod_controllers
                .iter()
                .map(|(r, _)| (r.clone(), ops.clone())),
        );
        out
    }
}

#[derive(Debug)]
pub enum ConditionIr {
    All(Vec<ConditionIr>),
    Any(Vec<ConditionIr>),
    Not(Box<ConditionIr>),
    Cel(CelProgram),
    Check {
        paths: Vec<Path>,
        check: Box<CheckIr>,
    },
}

impl ConditionIr {
    /// Whether only CEL reads the object here (no path is checked).
    pub fn cel_only(&self) -> bool {
        match self {
            ConditionIr::All(cs) | ConditionIr::Any(cs) => cs.iter().all(ConditionIr::cel_only),
            ConditionIr::Not(c) => c.cel_only(),
            ConditionIr::Cel(_) => true,
            ConditionIr::Check { .. } => false,
        }
    }

    /// Every CEL expression of the condition, added to `out`.
    pub fn programs<'a>(&'a self, out: &mut Vec<&'a CelProgram>) {
        match self {
            ConditionIr::All(cs) | ConditionIr::Any(cs) => cs.iter().for_each(|c| c.programs(out)),
            ConditionIr::Not(c) => c.programs(out),
            ConditionIr::Cel(p) => out.push(p),
            ConditionIr::Check { check, .. } => out.extend(check.cel.iter()),
        }
    }
}

/// The compiled tests of a `check`.
#[derive(Debug, Default)]
pub struct CheckIr {
    pub exists: bool,
    pub absent: bool,
    pub equals: Option<Value>,
    pub in_: Option<Vec<Value>>,
    pub not_in: Option<Vec<Value>>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub pattern: Option<Regex>,
    pub prefix: Option<String>,
    pub suffix: Option<String>,
    pub immutable: bool,
    pub unique: bool,
    pub cel: Option<CelProgram>,
    /// How the elements of a `[*]` path must pass.
    pub quantifier: Quantifier,
}

impl CheckIr {
    /// Whether the check is a CEL expression and nothing else.
    pub fn cel_only(&self) -> bool {
        // Every test named: a new one must say whether it reads the object.
        let CheckIr {
            exists,
            absent,
            equals,
            in_,
            not_in,
            minimum,
            maximum,
            min_length,
            max_length,
            pattern,
            prefix,
            suffix,
            immutable,
            unique,
            cel,
            quantifier: _,
        } = self;
        cel.is_some()
            && !(*exists || *absent || *immutable || *unique)
            && equals.is_none()
            && in_.is_none()
            && not_in.is_none()
            && minimum.is_none()
            && maximum.is_none()
            && min_length.is_none()
            && max_length.is_none()
            && pattern.is_none()
            && prefix.is_none()
            && suffix.is_none()
    }
}

/// `forEach`: the list, and which of its elements the rule applies to.
#[derive(Debug)]
pub struct ForEachIr {
    /// The lists, each ending with `[*]` (several with `allContainers`).
    pub lists: Vec<Path>,
    pub when: Option<ConditionIr>,
}

/// When a rule's own variable is evaluated: as CEL's variables are, when
/// something reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariableUse {
    /// Before the check: the check (or `forEach.when`) reads it, or a
    /// variable that one reads does.
    Check,
    /// Only when the rule fails: only its `messageExpression` reads it
    /// (or a variable only that one reads).
    Message,
    /// Never: nothing reads it.
    Unused,
}

impl VariableUse {
    /// When each of `variables` is needed: `check` are the expressions
    /// evaluated before the verdict, `message` the message's.
    pub fn of(
        variables: &[(String, CelProgram)],
        check: &[&CelProgram],
        message: Option<&CelProgram>,
    ) -> Vec<VariableUse> {
        let mut uses = vec![VariableUse::Unused; variables.len()];
        // A variable reads only the ones before it: from the last one back,
        // each one's readers are settled before it.
        for i in (0..variables.len()).rev() {
            let name = variables[i].0.as_str();
            let read_by = |when: VariableUse| {
                variables[i + 1..]
                    .iter()
                    .zip(&uses[i + 1..])
                    .any(|((_, p), u)| *u == when && p.reads_variable(name))
            };
            uses[i] = if check.iter().any(|p| p.reads_variable(name)) || read_by(VariableUse::Check)
            {
                VariableUse::Check
            } else if message.is_some_and(|p| p.reads_variable(name))
                || read_by(VariableUse::Message)
            {
                VariableUse::Message
            } else {
                VariableUse::Unused
            };
        }
        uses
    }
}

#[derive(Debug)]
pub struct ValidationIr {
    pub name: String,
    pub matcher: MatchIr,
    pub action: Action,
    pub message: Option<String>,
    pub message_expression: Option<CelProgram>,
    /// The paths checked (several when `allContainers` expands one); empty
    /// means the whole object.
    pub paths: Vec<Path>,
    pub check: CheckIr,
    pub variables: Vec<(String, CelProgram)>,
    /// When each of `variables` is evaluated (see [`VariableUse`]).
    pub variable_uses: Vec<VariableUse>,
    /// With `forEach`, a variable reads `element` or `elementIndex`: the
    /// variables are evaluated for each element instead of once.
    pub variables_per_element: bool,
    /// With `forEach`, `paths` are relative to each element.
    pub for_each: Option<ForEachIr>,
    /// Where the object keeps what the `scale` subresource writes: the
    /// `specReplicasPath` of the CRD of the resource the rule selects, at
    /// the rule's version, when the Katalog declares it with `crd:`;
    /// otherwise `spec.replicas`.
    pub scale_replicas: Path,
    /// Where the rule was written.
    pub origin: String,
    /// Where the rule was written, for located errors about it (the
    /// ceiling's).
    pub loc: crate::front::source::Loc,
}

#[derive(Debug, Clone)]
pub enum MutationOp {
    Default {
        path: Path,
        value: Value,
    },
    Set {
        path: Path,
        value: Value,
    },
    Remove {
        path: Path,
    },
    Append {
        path: Path,
        value: Value,
    },
    Metadata {
        field: &'static str,
        add: Vec<(String, String)>,
        remove: Vec<String>,
    },
    /// `op` (a `Default`, `Set` or `Append`) with its value computed by CEL
    /// for each request.
    Computed {
        op: Box<MutationOp>,
        expression: CelProgram,
    },
    /// RFC 6902 operations, applied at the object's root.
    JsonPatch(json_patch::Patch),
    /// RFC 7386 merge patch, applied at `at`.
    MergePatch {
        at: Path,
        patch: Value,
    },
    /// Fill the absent fields under `at` from `overlay`, recursively.
    Defaults {
        at: Path,
        overlay: Value,
    },
}

impl MutationOp {
    /// The op with its path below `base` (a `forEach` element).
    pub fn rebased(&self, base: &Path) -> MutationOp {
        let mut op = self.clone();
        match &mut op {
            MutationOp::Default { path, .. }
            | MutationOp::Set { path, .. }
            | MutationOp::Remove { path }
            | MutationOp::Append { path, .. } => *path = base.join(path),
            MutationOp::MergePatch { at, .. } | MutationOp::Defaults { at, .. } => {
                *at = base.join(at)
            }
            MutationOp::Computed { op, .. } => **op = op.rebased(base),
            MutationOp::Metadata { .. } | MutationOp::JsonPatch(_) => {}
        }
        op
    }

    /// The op with the value CEL computed.
    pub fn with_value(&self, new: Value) -> MutationOp {
        let mut op = self.clone();
        match &mut op {
            MutationOp::Default { value, .. }
            | MutationOp::Set { value, .. }
            | MutationOp::Append { value, .. } => *value = new,
            _ => {}
        }
        op
    }

    fn writes(&self, out: &mut Vec<Path>) {
        match self {
            MutationOp::Default { path, .. }
            | MutationOp::Set { path, .. }
            | MutationOp::Remove { path }
            | MutationOp::Append { path, .. } => out.push(path.clone()),
            MutationOp::Metadata { field, .. } => {
                out.push(Path::root().child("metadata").child(*field))
            }
            MutationOp::Computed { op, .. } => op.writes(out),
            MutationOp::JsonPatch(patch) => out.extend(patch.0.iter().map(|op| {
                let pointer = match op {
                    json_patch::PatchOperation::Add(o) => o.path.to_string(),
                    json_patch::PatchOperation::Remove(o) => o.path.to_string(),
                    json_patch::PatchOperation::Replace(o) => o.path.to_string(),
                    json_patch::PatchOperation::Move(o) => o.path.to_string(),
                    json_patch::PatchOperation::Copy(o) => o.path.to_string(),
                    json_patch::PatchOperation::Test(o) => o.path.to_string(),
                };
                Path::from_segments(
                    pointer
                        .split('/')
                        .skip(1)
                        .map(|k| Segment::Key(k.replace("~1", "/").replace("~0", "~")))
                        .collect(),
                )
            })),
            MutationOp::MergePatch { at, patch: v } | MutationOp::Defaults { at, overlay: v } => {
                match v.as_object() {
                    Some(m) => out.extend(m.keys().map(|k| at.child(k.clone()))),
                    None => out.push(at.clone()),
                }
            }
        }
    }
}

#[derive(Debug)]
pub struct MutationIr {
    pub name: String,
    pub matcher: MatchIr,
    pub ops: Vec<MutationOp>,
    /// With `forEach`, the ops' paths are relative to each element.
    pub for_each: Option<ForEachIr>,
    pub origin: String,
    /// Where the rule was written.
    pub loc: crate::front::source::Loc,
}

impl MutationIr {
    /// The paths this mutation writes (for analysis and the fast path).
    pub fn writes(&self) -> Vec<Path> {
        let mut out = Vec::new();
        for op in &self.ops {
            op.writes(&mut out);
        }
        out
    }
}

#[derive(Debug, Default)]
pub struct DeletionIr {
    pub enabled: bool,
    pub label: String,
    pub crds: bool,
    /// (group, resource, namespace, name) of the engine's own objects.
    pub engine: Vec<(String, String, String, String)>,
}

/// A declared resource as the protections see it.
#[derive(Debug, Default)]
pub struct ProtectedResource {
    pub group: String,
    pub plural: String,
    pub kind: String,
    pub deletion: bool,
    /// True when the resource's own `protection.deletion` decides.
    pub deletion_set_on_resource: bool,
    pub strict_mode: bool,
    pub allowed_namespaces: Vec<String>,
    pub restricted_namespaces: Vec<String>,
}

#[derive(Debug, Default)]
pub struct SecurityIr {
    pub deletion: DeletionIr,
    pub protected: Vec<ProtectedResource>,
    pub cleanup_on_shutdown: bool,
}
