//! Admission rules as written → [`AdmissionIr`], with every error located.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    AdmissionIr, DeletionIr, ProtectedResource, ResourcePattern, SecurityIr, ValidationIr,
};
use crate::cel::CelProgram;
use crate::common::path::{Path, Segment};
use crate::error::{Diagnostic, Diagnostics, ErrorKind};
use crate::front::document::{DEFAULT_PROTECTION_LABEL, ForEach, Variable};
use crate::front::load::{Loaded, LoadedDocument};
use crate::front::source::DocPath;
use crate::ir::ResourceIr;

mod check;
mod mutate;
mod select;
mod validate;

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
            .map(check::elements_of)
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
            if let Some(v) = validate::validation(&mut ctx, v, &at) {
                ir.validations.push(v);
                validation_at.push((doc, at.key("path")));
            }
        }
        for (i, m) in &doc.mutations {
            ctx.scope = rule_scope.clone();
            let at = admission.key("mutations").index(*i);
            check_unique_name(&mut ctx, &mut seen_names, &m.name, &at, "mutation");
            if let Some(m) = mutate::mutation(&mut ctx, m, &at) {
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

fn number(n: &serde_json::Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}
