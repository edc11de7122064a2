//! Admission rules as written → [`AdmissionIr`], with every error located.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    AdmissionIr, CheckIr, ConditionIr, DeclaredTarget, DeletionIr, ForEachIr, MatchIr, MutationIr,
    MutationOp, ProtectedResource, ResourcePattern, SecurityIr, SelectorIr, ValidationIr,
};
use crate::cel::CelProgram;
use crate::common::path::{Path, Segment};
use crate::error::{Diagnostic, Diagnostics, ErrorKind};
use crate::front::document::{
    Check, Condition, DEFAULT_PROTECTION_LABEL, ForEach, LabelSelector, Match, Mutation, Operation,
    PathValue, PodControllers, Quantifier, SelectorOperator, Validation, Variable,
};
use crate::front::load::{Loaded, LoadedDocument};
use crate::front::source::DocPath;
use crate::ir::ResourceIr;
use serde_json::Value;

struct Ctx<'a> {
    doc: &'a LoadedDocument,
    diags: &'a mut Diagnostics,
    /// The resources the Katalog declares (rules on them are evaluated at one version).
    resources: &'a [ResourceIr],
    /// Namespaces no rule applies in.
    excluded: &'a [String],
    scope: CelScope,
    /// The CRDs of the declared resources, to check rule paths against.
    schemas: &'a crate::schema::Schemas,
    /// The declared resources the current rule selects (paths are checked
    /// against the schema of each at the rule's version).
    targets: Vec<super::DeclaredTarget>,
    /// The resources the current rule names, for the types of well-known
    /// fields its conditions test.
    rule_resources: Vec<ResourcePattern>,
    /// The current rule also applies to pod controllers (autogen).
    rule_on_controllers: bool,
    /// Located warnings: the Katalog compiles, but this looks wrong.
    warnings: Vec<Diagnostic>,
    patterns: &'a mut crate::common::names::Patterns,
    controllers: &'a mut super::autogen::SharedControllers,
    /// Every expression compiled so far, by source: rules repeat their
    /// `match` conditions and variables, which then share one program (a
    /// request's evaluator remembers results by program).
    programs: &'a mut std::collections::HashMap<String, CelProgram>,
    /// The schemas of the built-in kinds the current rule selects, for the
    /// CEL type checks (the declared resources' are in `targets`).
    builtin: Vec<super::openapi::Kind>,
    /// Whether the current rule's objects are those of its resources (no
    /// subresource but `status` and `scale`, where only `immutable` runs):
    /// `exec`, `eviction`, `binding`, ... send other kinds.
    typed: bool,
    /// Every variable the current rule sees, by name: its expression, to
    /// type `variables.NAME`.
    variable_sources: Vec<(String, String)>,
    /// Where each Katalog-wide variable is declared (the first entries of
    /// `variable_sources`, in order): its type errors are reported there,
    /// once, when a rule whose objects have a schema reads it.
    wide_at: &'a [(&'a LoadedDocument, DocPath)],
    /// The type errors of Katalog-wide variables reported so far.
    wide_reported: &'a mut BTreeSet<String>,
}

/// The type of `namespaceObject`: a Namespace.
fn namespace_object() -> crate::cel::types::Type<'static> {
    super::openapi::schema("", "v1", "namespaces").map_or(crate::cel::types::Type::Dyn, |s| {
        crate::cel::types::Type::of_schema(s, false)
    })
}

/// The type an expression must give, where a known other is an error.
#[derive(Clone, Copy)]
enum Expected {
    /// `check.cel`: a bool.
    Check,
    /// A `match` condition: a bool.
    Condition,
    /// `messageExpression`: a string.
    Message,
}

impl Expected {
    fn type_(self) -> crate::cel::types::Type<'static> {
        match self {
            Expected::Check | Expected::Condition => crate::cel::types::Type::Bool,
            Expected::Message => crate::cel::types::Type::String,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Expected::Check => "a check",
            Expected::Condition => "a condition",
            Expected::Message => "a messageExpression",
        }
    }
}

/// What CEL may name where an expression is being compiled.
#[derive(Clone, Default)]
struct CelScope {
    /// The `variables.NAME`s declared (and evaluated) before this point.
    variables: Vec<String>,
    /// Inside `forEach`: `element` and `elementIndex`.
    element: bool,
    /// Inside `forEach`, the elements' path (`spec.containers[*]`), which
    /// the rule's relative paths are checked below; `None` when the
    /// `forEach.path` does not parse.
    element_base: Option<Path>,
}

/// What every admission expression sees: the request's parts
/// ([`crate::cel::REQUEST`]) and the variables.
const CEL_BINDINGS: [&str; 5] = {
    let [object, old_object, request, namespace_object] = crate::cel::REQUEST;
    [object, old_object, request, namespace_object, "variables"]
};

impl<'a> Ctx<'a> {
    fn error(
        &mut self,
        at: &DocPath,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        self.diags.push(
            Diagnostic::new(kind, message)
                .at(self.doc.locate_for(kind, at), Some(&self.doc.source)),
        );
        let n = self.diags.0.len() - 1;
        &mut self.diags.0[n]
    }

    fn warning(&mut self, at: &DocPath, kind: ErrorKind, message: impl Into<String>, help: String) {
        self.warnings.push(
            Diagnostic::new(kind, message)
                .at(self.doc.locate_for(kind, at), Some(&self.doc.source))
                .with_help(help)
                .warning(),
        );
    }

    /// An expression without `self` (conditions, messages, variables, values).
    fn cel(&mut self, expr: &str, at: &DocPath) -> Option<CelProgram> {
        self.cel_bound(expr, at, false, None, None)
    }

    /// An expression without `self` whose value must be `what` (a
    /// condition's a bool, a message's a string): a known other type is
    /// an error.
    fn cel_typed(&mut self, expr: &str, at: &DocPath, what: Expected) -> Option<CelProgram> {
        self.cel_bound(expr, at, false, None, Some(what))
    }

    /// An expression on a checked value (`check.cel`): `self` is bound, to
    /// the values of `path` (relative to the element inside `forEach`).
    fn cel_self(&mut self, expr: &str, at: &DocPath, path: &Path) -> Option<CelProgram> {
        self.cel_bound(expr, at, true, Some(path), Some(Expected::Check))
    }

    fn cel_bound(
        &mut self,
        expr: &str,
        at: &DocPath,
        with_self: bool,
        self_path: Option<&Path>,
        expected: Option<Expected>,
    ) -> Option<CelProgram> {
        let prog = match self.programs.get(expr) {
            Some(p) => p.clone(),
            None => match CelProgram::compile(expr) {
                Ok(p) => {
                    self.programs.insert(expr.to_owned(), p.clone());
                    p
                }
                Err(e) => {
                    self.error(at, ErrorKind::Cel, e.to_string());
                    return None;
                }
            },
        };
        let mut bound: Vec<&str> = CEL_BINDINGS.to_vec();
        if with_self {
            bound.push("self");
        }
        if self.scope.element {
            bound.extend(["element", "elementIndex"]);
        }
        let before = self.diags.len();
        for name in prog.unbound_identifiers(&bound) {
            let message = match name.as_str() {
                "self" => "`self` is not bound here: it is the checked value, in `check.cel` only"
                    .to_string(),
                "element" | "elementIndex" => {
                    format!("`{name}` is bound only in a rule with `forEach`")
                }
                _ => format!("`{name}` is not defined in this CEL expression"),
            };
            let help = crate::error::did_you_mean(&name, bound.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| {
                    format!(
                        "the expression sees {}",
                        bound
                            .iter()
                            .map(|b| format!("`{b}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
            self.error(at, ErrorKind::Cel, message).help = Some(help);
        }
        for name in prog.variable_names() {
            if self.scope.variables.contains(&name) {
                continue;
            }
            let help = crate::error::did_you_mean(&name, self.scope.variables.iter().map(String::as_str))
                .map(|s| format!("did you mean `variables.{s}`?"))
                .unwrap_or_else(|| "declare it under `variables` (Katalog-wide, or in the rule) before the expressions that use it".into());
            self.error(
                at,
                ErrorKind::Cel,
                format!("`variables.{name}` is not declared"),
            )
            .help = Some(help);
        }
        // Field selections on the object, where the schema is known.
        let root = Path::root();
        let element = self.scope.element_base.clone();
        let checked = self_path.map(|p| match &element {
            Some(base) => base.join(p),
            None => p.clone(),
        });
        let mut roots = vec![("object", &root), ("oldObject", &root)];
        if let Some(base) = &element {
            roots.push(("element", base));
        }
        // A checked path the schema lacks is reported at the rule's `path`.
        if let Some(p) = checked
            .as_ref()
            .filter(|p| self.schema_problems(p).is_empty())
        {
            roots.push(("self", p));
        }
        if !self.scope.element || element.is_some() {
            for path in prog.selections(&roots) {
                self.check_schema_at(&path, at);
            }
        }
        // On a pod controller `object` is the pod view, whose metadata is
        // the template's: it has no name.
        if self.rule_on_controllers {
            let name = Path::root().child("metadata").child("name");
            let named = |root: &str| {
                prog.selections(&[(root, &Path::root())])
                    .iter()
                    .any(|p| p.starts_with(&name))
            };
            if let Some(root) = ["object", "oldObject"].into_iter().find(|r| named(r)) {
                self.warning(
                    at,
                    ErrorKind::Cel,
                    format!("on the pod controllers this rule also applies to, `{root}` is the pod made from the template, whose metadata is the template's: `{root}.metadata.name` is absent there"),
                    "give the rule `podControllers: false` to keep it to Pods, or guard it (`has(object.metadata.name) ? ... : ...`); the controller's own name is `request.name`".into(),
                );
            }
        }
        if self.diags.len() == before {
            self.check_types(&prog, at, checked.as_ref(), expected);
        }
        (self.diags.len() == before).then_some(prog)
    }

    /// The declared resources the rule selects, each with its CRD at the
    /// rule's version (those whose CRD or version is not known are left out).
    fn target_crd_versions(
        &self,
    ) -> impl Iterator<
        Item = (
            &'a ResourceIr,
            &super::DeclaredTarget,
            &'a crate::schema::CrdVersion,
        ),
    > {
        let (resources, schemas) = (self.resources, self.schemas);
        self.targets.iter().filter_map(move |t| {
            let r = resources
                .iter()
                .find(|r| r.group == t.group && r.plural == t.plural)?;
            let v = schemas.crd(&r.group, &r.kind)?.version(&t.version)?;
            Some((r, t, v))
        })
    }

    /// The schemas the rule's objects have: each declared resource's CRD at
    /// the rule's version (its unknown fields are reported by the
    /// selection checks), then each built-in kind's.
    fn object_schemas(&self) -> Vec<(&'a crate::schema::SchemaNode, bool)> {
        let mut out: Vec<(&'a crate::schema::SchemaNode, bool)> = self
            .target_crd_versions()
            .filter_map(|(_, _, v)| v.schema.as_ref())
            .map(|schema| (schema, true))
            .collect();
        out.extend(self.builtin.iter().map(|k| (k.schema(), false)));
        out
    }

    /// Type-check `prog` against the schema of each object the rule
    /// selects (`crate::cel::types`); nothing to do when none is known.
    fn check_types(
        &mut self,
        prog: &CelProgram,
        at: &DocPath,
        checked: Option<&Path>,
        expected: Option<Expected>,
    ) {
        use crate::cel::types::{self, Type};
        use crate::schema::{Lookup, lookup};
        let mut reported: Vec<String> = Vec::new();
        if !self.typed {
            return;
        }
        for (root, selections_checked) in self.object_schemas() {
            let of_path = |path: &Path| match lookup(root, path) {
                Lookup::Found(node) => Type::of_schema(node, selections_checked),
                _ => Type::Dyn,
            };
            let object = Type::of_schema(root, selections_checked);
            let mut env = types::Env::default();
            env.idents.push(("object".into(), object.clone()));
            env.idents.push(("oldObject".into(), object.clone()));
            env.idents
                .push(("namespaceObject".into(), namespace_object()));
            if let Some(p) = checked {
                env.idents.push(("self".into(), of_path(p)));
            }
            if let Some(base) = &self.scope.element_base {
                env.idents.push(("element".into(), of_path(base)));
                env.idents.push(("elementIndex".into(), Type::Int));
            }
            for name in prog.variable_names() {
                let t = self.variable_type(&name, &object, 0);
                env.variables.insert(name, t);
            }
            let (t, errors) = types::check(prog, &env);
            let mut messages: Vec<(String, Option<String>)> = errors
                .into_iter()
                .map(|e| (e.to_string(), e.help))
                .collect();
            if let Some(what) = expected
                && messages.is_empty()
                && !matches!(t, Type::Dyn)
                && t != what.type_()
            {
                messages.push((
                    types::whole_expression_error(
                        prog.source(),
                        &format!(
                            "{} must give {}, and this gives {t}",
                            what.name(),
                            what.type_()
                        ),
                    ),
                    None,
                ));
            }
            for (e, help) in messages {
                let message = format!("failed to compile CEL expression `{}`: {e}", prog.source());
                if reported.contains(&message) {
                    continue;
                }
                reported.push(message.clone());
                self.error(at, ErrorKind::Cel, message).help = help;
            }
        }
    }

    /// The type of `variables.NAME` where `object` has the type `object`:
    /// its expression's; `dyn` when unknown. The expression's own errors
    /// are reported where it is declared.
    fn variable_type<'s>(
        &mut self,
        name: &str,
        object: &crate::cel::types::Type<'s>,
        depth: usize,
    ) -> crate::cel::types::Type<'s> {
        use crate::cel::types::{self, Type};
        const MAX_DEPTH: usize = 8;
        let Some(index) = self.variable_sources.iter().rposition(|(n, _)| n == name) else {
            return Type::Dyn;
        };
        let source = self.variable_sources[index].1.clone();
        let source = &source;
        if depth > MAX_DEPTH {
            return Type::Dyn;
        }
        let prog = match self.programs.get(source) {
            Some(p) => p.clone(),
            None => match CelProgram::compile(source) {
                Ok(p) => p,
                Err(_) => return Type::Dyn,
            },
        };
        // A Katalog-wide variable was compiled with no schema: its unknown
        // fields are reported here, not by the selection checks.
        let object = object.clone().unreported();
        let mut env = types::Env::default();
        env.idents.push(("object".into(), object.clone()));
        env.idents.push(("oldObject".into(), object.clone()));
        env.idents
            .push(("namespaceObject".into(), namespace_object()));
        for used in prog.variable_names() {
            if used != name {
                let t = self.variable_type(&used, &object, depth + 1);
                env.variables.insert(used, t);
            }
        }
        let (t, errors) = types::check(&prog, &env);
        if let Some((doc, at)) = self.wide_at.get(index) {
            for e in errors {
                let message = format!("failed to compile CEL expression `{source}`: {e}");
                if self.wide_reported.insert(message.clone()) {
                    let mut d = Diagnostic::new(ErrorKind::Cel, message)
                        .at(doc.locate(at), Some(&doc.source));
                    d.help = e.help;
                    self.diags.push(d);
                }
            }
        }
        t.unreported()
    }

    fn path(&mut self, text: &str, at: &DocPath) -> Option<Path> {
        match Path::parse(text) {
            Ok(p) => {
                self.check_schema(&p, at);
                self.below_a_label_value(&p, at);
                Some(p)
            }
            Err(e) => {
                self.error(at, ErrorKind::Path, e.to_string()).help = Some(
                    "paths look like `spec.replicas`, `spec.containers[*].image` or `metadata.labels[\"app.kubernetes.io/name\"]`"
                        .into(),
                );
                None
            }
        }
    }
}

impl Ctx<'_> {
    /// Warn of a path that goes on below a label or annotation value (a
    /// string): `metadata.labels.app.kubernetes["io/name"]` is the label
    /// `app`'s value's `kubernetes` field, not the label
    /// `app.kubernetes.io/name`.
    fn below_a_label_value(&mut self, p: &Path, at: &DocPath) {
        let segs = p.segments();
        let Some(i) = segs.windows(2).position(|w| {
            matches!(&w[0], Segment::Key(m) if m == "metadata")
                && matches!(&w[1], Segment::Key(k) if k == "labels" || k == "annotations")
        }) else {
            return;
        };
        let rest = &segs[i + 2..];
        if rest.len() < 2 {
            return;
        }
        let keys: Option<Vec<&str>> = rest
            .iter()
            .map(|s| match s {
                Segment::Key(k) => Some(k.as_str()),
                _ => None,
            })
            .collect();
        let map = Path::from_segments(segs[..i + 2].to_vec());
        let value = Path::from_segments(segs[..i + 3].to_vec());
        let help = match keys {
            Some(keys) => format!(
                "a key with dots or a slash is one segment, in quotes: `{}`",
                map.child(keys.join("."))
            ),
            None => "a label or annotation value is a string: nothing is below it".into(),
        };
        self.warning(
            at,
            ErrorKind::Path,
            format!("`{p}` goes on below `{value}`, a label or annotation value (a string): it never holds anything"),
            help,
        );
    }

    /// Enter the body of a rule with (or without) `forEach`: `element` is
    /// bound, and relative paths are checked below the list's elements.
    fn enter_for_each(&mut self, f: Option<&ForEach>) {
        self.scope.element = f.is_some();
        // A list the schema does not declare is reported once, at the
        // `forEach.path`, not again at every path below it.
        self.scope.element_base = f
            .and_then(|f| Path::parse(&f.path).ok())
            .map(elements_of)
            .filter(|base| self.schema_problems(base).is_empty());
    }

    /// Report a path of the rule (relative to the element inside
    /// `forEach`) that the schema of a declared resource the rule selects
    /// does not declare.
    fn check_schema(&mut self, path: &Path, at: &DocPath) {
        if !self.scope.element {
            return self.check_schema_at(path, at);
        }
        if let Some(base) = self.scope.element_base.clone() {
            self.check_schema_at(&base.join(path), at);
        }
    }

    /// Report a path from the object's root that the schema of a declared
    /// resource the rule selects does not declare.
    fn check_schema_at(&mut self, path: &Path, at: &DocPath) {
        for (message, help) in self.schema_problems(path) {
            self.error(at, ErrorKind::Schema, message).help = Some(help);
        }
    }

    /// Where the `scale` subresource writes the replicas of the declared
    /// resource the rule selects (its CRD's `specReplicasPath` at the
    /// rule's version), else `spec.replicas`.
    fn scale_replicas(&self) -> Path {
        self.target_crd_versions()
            .find_map(|(_, _, v)| v.scale_replicas.clone())
            .unwrap_or_else(|| Path::root().child("spec").child("replicas"))
    }

    /// Why the schemas of the declared resources the rule selects cannot
    /// hold `path` (from the object's root): a message and a help each.
    fn schema_problems(&self, path: &Path) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        for (r, t, v) in self.target_crd_versions() {
            let Some(schema) = v.schema.as_ref() else {
                continue;
            };
            let version = format!("{} {}", r.kind, t.version);
            problems.extend(crate::schema::path_problem(schema, path, &version));
        }
        problems
    }
}

/// A rule name usable as an audit-annotation key and in messages.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 63 {
        return Some("a rule name must be 1 to 63 characters");
    }
    let ok = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then_some("a rule name uses lowercase letters, digits, `-` and `.`, and starts and ends with a letter or digit")
}

/// The namespaces no rule applies in unless the Katalog says otherwise.
pub const DEFAULT_EXCLUDED_NAMESPACES: [&str; 3] = crate::ceiling::DEFAULT_PROTECTED_NAMESPACES;

/// Compile the admission rules and protections of every document; rules on
/// the declared `resources` are resolved to the one version they are
/// written against.
pub fn compile(
    loaded: &Loaded,
    resources: &[ResourceIr],
    schemas: &crate::schema::Schemas,
    diags: &mut Diagnostics,
) -> AdmissionIr {
    let mut ir = AdmissionIr {
        timeout_seconds: 10,
        exclude_engine_namespace: true,
        sensitive: resources
            .iter()
            .filter(|r| !r.sensitive.is_empty())
            .map(|r| (r.group.clone(), r.plural.clone(), r.sensitive.clone()))
            .collect(),
        ..AdmissionIr::default()
    };
    let mut excluded: Option<Vec<String>> = None;
    for doc in &loaded.documents {
        let adm = &doc.doc.spec.admission;
        if let Some(list) = &adm.exclude_namespaces {
            // Registered as the webhooks' namespaceSelector (`NotIn` on
            // the namespace's name label), which takes names, no globs.
            for (i, name) in list.iter().enumerate() {
                let problem = if name.contains('*') {
                    Some("these are registered as the webhooks' namespaceSelector, which takes names, not globs".to_string())
                } else {
                    super::namespace_pattern_problem(name)
                };
                if let Some(problem) = problem {
                    let at = DocPath::default()
                        .key("spec")
                        .key("admission")
                        .key("excludeNamespaces")
                        .index(i);
                    diags.push(
                        Diagnostic::new(
                            ErrorKind::Invalid,
                            format!("`{name}` in excludeNamespaces is not a namespace name: {problem}"),
                        )
                        .at(doc.locate(&at), Some(&doc.source))
                        .with_help("list each namespace by name; a rule's `match.namespaces.exclude` takes globs such as `kube-*`"),
                    );
                }
            }
            let all = excluded.get_or_insert_with(Vec::new);
            all.extend(list.iter().cloned());
        }
        if adm.exclude_engine_namespace == Some(false) {
            ir.exclude_engine_namespace = false;
        }
    }
    let mut excluded = excluded.unwrap_or_else(|| {
        DEFAULT_EXCLUDED_NAMESPACES
            .iter()
            .map(|s| s.to_string())
            .collect()
    });
    excluded.sort();
    excluded.dedup();
    ir.excluded_namespaces = excluded.clone();
    let excluded = excluded.as_slice();
    let mut seen_names: BTreeMap<String, crate::front::source::Loc> = BTreeMap::new();
    let mut security = SecurityIr {
        deletion: DeletionIr {
            label: DEFAULT_PROTECTION_LABEL.into(),
            crds: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut label_set_at: Option<crate::front::source::Loc> = None;
    // Rules see every Katalog-wide variable (all are evaluated first).
    let all_wide: Vec<String> = loaded
        .documents
        .iter()
        .flat_map(|d| {
            d.doc
                .spec
                .admission
                .variables
                .iter()
                .map(|v| v.name.clone())
        })
        .collect();
    let wide_sources: Vec<(String, String)> = loaded
        .documents
        .iter()
        .flat_map(|d| d.doc.spec.admission.variables.iter())
        .map(|v| (v.name.clone(), v.expression.clone()))
        .collect();
    let wide_at: Vec<(&LoadedDocument, DocPath)> = loaded
        .documents
        .iter()
        .flat_map(|d| {
            (0..d.doc.spec.admission.variables.len()).map(move |i| {
                let at = DocPath::default()
                    .key("spec")
                    .key("admission")
                    .key("variables")
                    .index(i)
                    .key("expression");
                (d, at)
            })
        })
        .collect();
    let mut wide_reported = BTreeSet::new();
    let mut wide_allowed = Vec::new();
    let mut wide_restricted = Vec::new();
    let mut strict = false;
    let mut patterns = crate::common::names::Patterns::default();
    let mut controllers = super::autogen::SharedControllers::default();
    let mut programs = std::collections::HashMap::new();
    let mut warnings: Vec<Diagnostic> = Vec::new();
    // Where each compiled validation's `path` is written.
    let mut validation_at: Vec<(&LoadedDocument, DocPath)> = Vec::new();
    for doc in &loaded.documents {
        let mut ctx = Ctx {
            doc,
            diags,
            resources,
            excluded,
            scope: CelScope {
                variables: ir.variables.iter().map(|(n, _)| n.clone()).collect(),
                element: false,
                element_base: None,
            },
            schemas,
            targets: Vec::new(),
            rule_resources: Vec::new(),
            rule_on_controllers: false,
            warnings: Vec::new(),
            patterns: &mut patterns,
            controllers: &mut controllers,
            programs: &mut programs,
            builtin: Vec::new(),
            typed: true,
            variable_sources: wide_sources.clone(),
            wide_at: &wide_at,
            wide_reported: &mut wide_reported,
        };
        let admission = DocPath::default().key("spec").key("admission");
        let adm_doc = &doc.doc.spec.admission;
        if let Some(p) = adm_doc.failure_policy {
            ir.failure_policy = p;
        }
        if let Some(t) = adm_doc.timeout_seconds {
            if (1..=30).contains(&t) {
                ir.timeout_seconds = t;
            } else {
                ctx.error(
                    &admission.key("timeoutSeconds"),
                    ErrorKind::Invalid,
                    format!("timeoutSeconds must be 1 to 30 (the apiserver's range), not {t}"),
                );
            }
        }
        ir.variables.extend(variables(
            &mut ctx,
            &doc.doc.spec.admission.variables,
            &admission.key("variables"),
        ));
        let rule_scope = CelScope {
            variables: all_wide.clone(),
            element: false,
            element_base: None,
        };
        for (i, v) in &doc.validations {
            ctx.scope = rule_scope.clone();
            let at = admission.key("validations").index(*i);
            check_unique_name(&mut ctx, &mut seen_names, &v.name, &at, "validation");
            if let Some(v) = validation(&mut ctx, v, &at) {
                ir.validations.push(v);
                validation_at.push((doc, at.key("path")));
            }
        }
        for (i, m) in &doc.mutations {
            ctx.scope = rule_scope.clone();
            let at = admission.key("mutations").index(*i);
            check_unique_name(&mut ctx, &mut seen_names, &m.name, &at, "mutation");
            if let Some(m) = mutation(&mut ctx, m, &at) {
                ir.mutations.push(m);
            }
        }
        ctx.targets.clear();
        ctx.builtin.clear();
        let sec = &doc.doc.spec.security;
        let sec_at = DocPath::default().key("spec").key("security");
        let dp = &sec.deletion_protection;
        security.deletion.enabled |= dp.enabled;
        if let Some(label) = &dp.label {
            let at = sec_at.key("deletionProtection").key("label");
            if let Some(first) = &label_set_at
                && *label != security.deletion.label
            {
                let first = first.clone();
                ctx.error(
                    &at,
                    ErrorKind::Conflict,
                    format!(
                        "a second protection label `{label}`; one Katalog has one protection label"
                    ),
                )
                .related = Some((first, "first set here".into()));
            } else {
                security.deletion.label = label.clone();
                label_set_at = Some(doc.locate(&at));
            }
        }
        if dp.crds == Some(false) {
            security.deletion.crds = false;
        }
        if let Some(engine) = &dp.engine {
            for (group, resource, name) in [
                ("apps", "deployments", &engine.deployment),
                ("", "services", &engine.service),
                ("", "secrets", &engine.secret),
            ] {
                if let Some(name) = name {
                    security.deletion.engine.push((
                        group.into(),
                        resource.into(),
                        engine.namespace.clone(),
                        name.clone(),
                    ));
                }
            }
        }
        wide_allowed.extend(sec.namespace_protection.allowed_namespaces.iter().cloned());
        wide_restricted.extend(
            sec.namespace_protection
                .restricted_namespaces
                .iter()
                .cloned(),
        );
        strict |= sec.strict_mode;
        security.cleanup_on_shutdown |= sec.cleanup_on_shutdown;
        warnings.append(&mut ctx.warnings);
    }
    for doc in &loaded.documents {
        for r in &doc.doc.spec.resources {
            let p = r.protection.clone().unwrap_or_default();
            let mut allowed = wide_allowed.clone();
            allowed.extend(p.allowed_namespaces.iter().cloned());
            let mut restricted = wide_restricted.clone();
            restricted.extend(p.restricted_namespaces.iter().cloned());
            allowed.sort();
            allowed.dedup();
            restricted.sort();
            restricted.dedup();
            security.protected.push(ProtectedResource {
                group: r.group.clone(),
                plural: r.plural.clone(),
                kind: r.kind.clone(),
                deletion: p.deletion.unwrap_or(security.deletion.enabled),
                deletion_set_on_resource: p.deletion.is_some(),
                strict_mode: p.strict_mode.unwrap_or(strict),
                allowed_namespaces: allowed,
                restricted_namespaces: restricted,
            });
        }
    }
    ir.security = security;
    ir.warnings = super::known::unmatchable_resources(loaded);
    ir.warnings.extend(warnings);
    ir.warnings
        .extend(controller_copies(&ir.validations, &validation_at));
    ir.warnings.sort_by(|a, b| a.loc.cmp(&b.loc));
    ir
}

/// Warnings for rules on a pod controller that check, in its pod template,
/// a path a Pod rule already checks there through its pod controllers: a
/// Katalog written before autogen, with the copies spelled out, reports
/// twice on each such object.
fn controller_copies(
    validations: &[ValidationIr],
    at: &[(&LoadedDocument, DocPath)],
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (copy, (doc, path_at)) in validations.iter().zip(at) {
        if copy.for_each.is_some() {
            continue;
        }
        for (kind, g, v, r, _) in super::autogen::CONTROLLERS {
            let named = copy
                .matcher
                .resources
                .iter()
                .any(|p| p.resource.as_deref() == Some(r) && p.matches(g, v, r));
            if !named {
                continue;
            }
            for pod_rule in validations {
                if pod_rule.for_each.is_some() {
                    continue;
                }
                let Some((_, template)) = pod_rule
                    .matcher
                    .pod_controllers
                    .iter()
                    .find(|(p, _)| p.matches(g, v, r))
                else {
                    continue;
                };
                let Some(copied) = copy
                    .paths
                    .iter()
                    .find(|cp| pod_rule.paths.iter().any(|pp| template.join(pp) == **cp))
                else {
                    continue;
                };
                out.push(
                    Diagnostic::new(
                        ErrorKind::Conflict,
                        format!(
                            "this rule checks `{copied}` on {kind}s, which rule `{}` (on Pods) already checks there through its pod controllers: each {kind} gets both findings",
                            pod_rule.name
                        ),
                    )
                    .at(doc.locate(path_at), Some(&doc.source))
                    .with_help(format!(
                        "remove this copy (pod controllers make it), or give `{}` `podControllers: false` to keep it to Pods",
                        pod_rule.name
                    ))
                    .warning(),
                );
            }
        }
    }
    out
}

fn check_unique_name(
    ctx: &mut Ctx,
    seen: &mut BTreeMap<String, crate::front::source::Loc>,
    name: &str,
    at: &DocPath,
    what: &str,
) {
    if let Some(problem) = name_problem(name) {
        ctx.error(
            &at.key("name"),
            ErrorKind::Invalid,
            format!("`{name}` is not a valid {what} name: {problem}"),
        );
        return;
    }
    let loc = ctx.doc.locate(&at.key("name"));
    if let Some(first) = seen.get(name) {
        let first = first.clone();
        ctx.error(
            &at.key("name"),
            ErrorKind::Duplicate,
            format!("two admission rules are named `{name}`"),
        )
        .related = Some((first, "first used here".into()));
    } else {
        seen.insert(name.to_string(), loc);
    }
}

fn variables(ctx: &mut Ctx, vars: &[Variable], at: &DocPath) -> Vec<(String, CelProgram)> {
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    for (i, v) in vars.iter().enumerate() {
        let vat = at.index(i);
        let valid = !v.name.is_empty()
            && v.name
                .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && v.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            ctx.error(
                &vat.key("name"),
                ErrorKind::Invalid,
                format!(
                    "`{}` is not a valid variable name (letters, digits, `_`)",
                    v.name
                ),
            );
            continue;
        }
        if !names.insert(v.name.clone()) {
            ctx.error(
                &vat.key("name"),
                ErrorKind::Duplicate,
                format!("variable `{}` is declared twice", v.name),
            );
            continue;
        }
        if let Some(p) = ctx.cel(&v.expression, &vat.key("expression")) {
            out.push((v.name.clone(), p));
        }
        // Later expressions (variables, the rule) may use it.
        ctx.scope.variables.push(v.name.clone());
    }
    out
}

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
) -> Vec<super::openapi::Kind> {
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
        for kind in super::openapi::select(group, p.version.as_deref(), plural) {
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

fn matcher(
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
    match super::autogen::controllers_for(
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
    if pod_controllers.is_some() && !super::autogen::names_pods(&ir.resources) {
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
                if let Some(problem) = super::namespace_pattern_problem(name) {
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
        && let Some(t) = super::types::field_type(&ctx.rule_resources, &full)
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

fn number(n: &serde_json::Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}

/// The tests of `c` on the values of `checked` (`self` in its CEL).
fn check(ctx: &mut Ctx, c: &Check, checked: &Path, at: &DocPath) -> Option<CheckIr> {
    let mut ok = true;
    let mut ir = CheckIr {
        exists: c.exists,
        absent: c.absent,
        equals: c.equals.clone(),
        in_: c.in_.clone(),
        not_in: c.not_in.clone(),
        minimum: c.minimum.as_ref().map(number),
        maximum: c.maximum.as_ref().map(number),
        min_length: c.min_length,
        max_length: c.max_length,
        prefix: c.prefix.clone(),
        suffix: c.suffix.clone(),
        immutable: c.immutable,
        unique: c.unique,
        ..Default::default()
    };
    if let Some((lo, hi)) = &c.range {
        if ir.minimum.is_some() || ir.maximum.is_some() {
            ctx.error(
                &at.key("range"),
                ErrorKind::Conflict,
                "give `range` or `minimum`/`maximum`, not both",
            );
            ok = false;
        }
        ir.minimum = Some(number(lo));
        ir.maximum = Some(number(hi));
    }
    if let (Some(lo), Some(hi)) = (ir.minimum, ir.maximum)
        && lo > hi
    {
        ctx.error(
            at,
            ErrorKind::Invalid,
            format!("the minimum {lo} is above the maximum {hi}: nothing can pass"),
        );
        ok = false;
    }
    if let (Some(lo), Some(hi)) = (ir.min_length, ir.max_length)
        && lo > hi
    {
        ctx.error(
            at,
            ErrorKind::Invalid,
            format!("minLength {lo} is above maxLength {hi}: nothing can pass"),
        );
        ok = false;
    }
    if c.exists && c.absent {
        ctx.error(
            at,
            ErrorKind::Conflict,
            "`exists` and `absent` together can never pass",
        );
        ok = false;
    }
    if let Some(p) = &c.pattern {
        match ctx.patterns.anchored(p) {
            Ok(r) => ir.pattern = Some(r),
            Err(e) => {
                ctx.error(&at.key("pattern"), ErrorKind::Pattern, e.to_string());
                ok = false;
            }
        }
    }
    if let Some(expr) = &c.cel {
        match ctx.cel_self(expr, &at.key("cel"), checked) {
            Some(p) => ir.cel = Some(p),
            None => ok = false,
        }
    }
    let any = c.exists
        || c.absent
        || c.equals.is_some()
        || c.in_.is_some()
        || c.not_in.is_some()
        || c.minimum.is_some()
        || c.maximum.is_some()
        || c.range.is_some()
        || c.min_length.is_some()
        || c.max_length.is_some()
        || c.pattern.is_some()
        || c.prefix.is_some()
        || c.suffix.is_some()
        || c.immutable
        || c.unique
        || c.cel.is_some();
    if !any {
        ctx.error(at, ErrorKind::Shape, "the check tests nothing")
            .help = Some("give at least one of exists, absent, equals, in, notIn, minimum, maximum, range, minLength, maxLength, pattern, prefix, suffix, immutable, unique, cel".into());
        ok = false;
    }
    ok.then_some(ir)
}

fn quantifier(
    ctx: &mut Ctx,
    q: Option<Quantifier>,
    paths: &[Path],
    at: &DocPath,
) -> Option<Quantifier> {
    if q.is_some() && !paths.iter().any(Path::has_wildcard) {
        ctx.error(
            &at.key("quantifier"),
            ErrorKind::Invalid,
            "`quantifier` says how the elements of a `[*]` path must pass, and this path has no `[*]`",
        )
        .help = Some("e.g. `path: spec.containers[*].image` with `quantifier: any`".into());
        return None;
    }
    Some(q.unwrap_or_default())
}

fn for_each(ctx: &mut Ctx, f: &ForEach, all_containers: bool, at: &DocPath) -> Option<ForEachIr> {
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

/// The elements of a `forEach` list: `spec.containers` and
/// `spec.containers[*]` both give `spec.containers[*]`.
fn elements_of(list: Path) -> Path {
    if matches!(list.segments().last(), Some(Segment::Wildcard)) {
        return list;
    }
    let mut segs = list.segments().to_vec();
    segs.push(Segment::Wildcard);
    Path::from_segments(segs)
}

/// `spec.containers[*]...` also as `initContainers` and `ephemeralContainers`.
fn expand_containers(path: &Path) -> Option<Vec<Path>> {
    let idx = path
        .segments()
        .iter()
        .position(|s| matches!(s, Segment::Key(k) if k == "containers"))?;
    let mut out = vec![path.clone()];
    for alt in ["initContainers", "ephemeralContainers"] {
        let mut segs = path.segments().to_vec();
        segs[idx] = Segment::Key(alt.into());
        out.push(Path::from_segments(segs));
    }
    Some(out)
}

/// `equals`, `in` and `notIn` literals that cannot be values of a field
/// whose type is known (`equals: "false"` on `hostNetwork`).
fn typed_literals(ctx: &mut Ctx, t: super::types::FieldType, path: &Path, c: &Check, at: &DocPath) {
    let lists = [
        ("equals", c.equals.iter().collect::<Vec<_>>()),
        ("in", c.in_.iter().flatten().collect()),
        ("notIn", c.not_in.iter().flatten().collect()),
    ];
    for (key, values) in lists {
        for v in values {
            if !super::types::mismatches(t, v) {
                continue;
            }
            let shown = crate::common::json::show(v);
            let help = match super::types::unquoted(t, v) {
                Some(fixed) if key == "equals" => format!("write `equals: {fixed}` (no quotes)"),
                Some(fixed) => format!("write `{fixed}` in `{key}` (no quotes)"),
                None if t == super::types::FieldType::Boolean => {
                    "a boolean is true or false, without quotes".to_string()
                }
                None => "write the number without quotes".to_string(),
            };
            ctx.error(
                &at.key(key),
                ErrorKind::Invalid,
                format!(
                    "`{path}` is {}, and `{key}` compares it with {shown} ({}): the test can never match",
                    t.name(),
                    crate::common::json::type_name(v)
                ),
            )
            .help = Some(help);
        }
    }
}

fn validation(ctx: &mut Ctx, v: &Validation, at: &DocPath) -> Option<ValidationIr> {
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
        && let Some(t) = super::types::field_type(&matcher.resources, &full)
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
    let variable_uses = super::VariableUse::of(&vars, &before_verdict, message_expression.as_ref());
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

fn mutation(ctx: &mut Ctx, m: &Mutation, at: &DocPath) -> Option<MutationIr> {
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
