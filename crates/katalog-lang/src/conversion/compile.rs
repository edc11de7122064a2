//! Stage 2: typed documents → checked rule IR.
//!
//! The compiler records every error it finds and keeps going, so one run
//! reports every mistake. Inverses are derived here: each document rule
//! becomes one [`Op`] whose hub form and spoke form the evaluator reads both
//! ways; `unwrap`, `join` and `mapToList` become the ops of their mirrors
//! with the sides swapped.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::common::names::{is_dns_label_char, qualified_name_problem};
use crate::common::path::{Path, Segment};
use crate::error::{Diagnostic, Diagnostics, ErrorKind};
use crate::front::document::{DEFAULT_STASH_ANNOTATION, Resource, Rule};
use crate::front::load::{Loaded, LoadedDocument};
use crate::front::source::{DocPath, Loc};
use crate::ir::{
    Direction, Ir, Op, Proof, RemainderIr, ResourceIr, RuleId, RuleIr, Side, TemplatePiece,
    VersionIr,
};
use crate::schema::{Crd, Schemas};

mod rules;

/// Compile loaded documents into the IR.
pub fn compile(loaded: &Loaded) -> Result<Ir, Diagnostics> {
    compile_with_schemas(loaded, &Schemas::default())
}

/// Compile loaded documents into the IR, checking each resource that names a
/// `crd:` against that CRD (see [`crate::schema`]): its names, scope and
/// versions, and every conversion path against the schema of the side it
/// names. A resource without a CRD in `schemas` is compiled unchecked.
/// The rules are then checked against the schemas by
/// [`crate::conversion::analysis::analyze`]; its errors are compile errors.
pub fn compile_with_schemas(loaded: &Loaded, schemas: &Schemas) -> Result<Ir, Diagnostics> {
    let mut ir = compile_unanalyzed(loaded, schemas)?;
    // The conversion rules against the CRD schemas: a Katalog that can lose
    // data does not compile; its warnings are the Katalog's warnings.
    if !schemas.crds.is_empty() {
        let analysis = crate::conversion::analysis::analyze(loaded, &ir, schemas);
        if analysis.has_errors() {
            return Err(analysis.diagnostics);
        }
        ir.admission.warnings.extend(analysis.diagnostics.0);
    }
    Ok(ir)
}

/// [`compile_with_schemas`] without the analysis (for `katalog analyze`,
/// which reports it instead).
pub(crate) fn compile_unanalyzed(loaded: &Loaded, schemas: &Schemas) -> Result<Ir, Diagnostics> {
    let mut c = Compiler {
        rules: Vec::new(),
        diags: Diagnostics::default(),
        warnings: Vec::new(),
        schemas,
    };
    let mut resources: Vec<ResourceIr> = Vec::new();
    let mut seen: BTreeMap<(String, String), Loc> = BTreeMap::new();
    for doc in &loaded.documents {
        for (pos, resource) in doc.doc.spec.resources.iter().enumerate() {
            let ri = doc.resource_indices.get(pos).copied().unwrap_or(pos);
            let at = DocPath::default().key("spec").key("resources").index(ri);
            let loc = doc.locate(&at);
            let key = (resource.group.clone(), resource.kind.clone());
            if let Some(first) = seen.get(&key) {
                c.diags.push(
                    Diagnostic::new(
                        ErrorKind::Duplicate,
                        format!(
                            "resource {}/{} is declared twice",
                            resource.group, resource.kind
                        ),
                    )
                    .at(loc.clone(), Some(&doc.source))
                    .with_related(first.clone(), "first declared here")
                    .with_help("declare each group + kind once; merge the two declarations"),
                );
                continue;
            }
            seen.insert(key, loc.clone());
            if let Some(r) = c.resource(doc, resource, ri, loc) {
                resources.push(r);
            }
        }
    }
    let warnings = c.warnings;
    let mut diags = c.diags;
    let mut admission = crate::admission::compile::compile(loaded, &resources, schemas, &mut diags);
    diags.sort();
    if !diags.is_empty() {
        return Err(diags);
    }
    // Warnings about the CRDs are reported with the admission ones.
    admission.warnings.extend(warnings);
    Ok(Ir {
        resources,
        rules: c.rules,
        admission,
        sources: {
            let mut names: Vec<String> = loaded
                .documents
                .iter()
                .map(|d| d.source.name.to_string())
                .collect();
            names.dedup();
            names
        },
    })
}

struct Compiler<'s> {
    rules: Vec<RuleIr>,
    diags: Diagnostics,
    /// Warnings, kept apart: a resource with an error is left out of the IR.
    warnings: Vec<Diagnostic>,
    schemas: &'s Schemas,
}

/// What a rule list is compiled against.
struct Scope<'a> {
    doc: &'a LoadedDocument,
    hub_version: &'a str,
    spoke_version: &'a str,
    annotation: &'a str,
    /// True inside `forEach`, where paths are relative to a list element.
    nested: bool,
    /// Original positions of the rules, when some did not load.
    indices: Option<&'a [usize]>,
    /// The resource's CRD, when its `crd:` was read.
    crd: Option<&'a Crd>,
    /// Where relative paths start on each side (inside `forEach`: the list
    /// path with `[*]`).
    hub_base: &'a Path,
    spoke_base: &'a Path,
}

fn list_names<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    if names.is_empty() {
        "no version".into()
    } else {
        names.join(", ")
    }
}

impl Compiler<'_> {
    fn error(
        &mut self,
        doc: &LoadedDocument,
        at: &DocPath,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        self.diags
            .push(Diagnostic::new(kind, message).at(doc.locate_for(kind, at), Some(&doc.source)));
        let n = self.diags.0.len() - 1;
        &mut self.diags.0[n]
    }

    fn resource(
        &mut self,
        doc: &LoadedDocument,
        r: &Resource,
        ri: usize,
        loc: Loc,
    ) -> Option<ResourceIr> {
        let at = &DocPath::default().key("spec").key("resources").index(ri);
        let before = self.diags.len();
        if r.group.is_empty()
            || !r
                .group
                .split('.')
                .all(|l| !l.is_empty() && l.chars().all(is_dns_label_char))
        {
            self.error(
                doc,
                &at.key("group"),
                ErrorKind::Invalid,
                format!("`{}` is not a valid API group", r.group),
            )
            .help = Some("use a lowercase DNS name such as `stable.example.com`".into());
        }
        if r.kind.is_empty() || !r.kind.starts_with(|c: char| c.is_ascii_uppercase()) {
            self.error(
                doc,
                &at.key("kind"),
                ErrorKind::Invalid,
                format!("`{}` is not a valid kind", r.kind),
            )
            .help = Some("kinds are CamelCase, e.g. `CronTab`".into());
        }
        if r.plural.is_empty() || !r.plural.chars().all(is_dns_label_char) {
            self.error(
                doc,
                &at.key("plural"),
                ErrorKind::Invalid,
                format!("`{}` is not a valid plural", r.plural),
            )
            .help = Some("plurals are lowercase, e.g. `crontabs`".into());
        }
        let mut served = BTreeSet::new();
        for (i, v) in r.versions.iter().enumerate() {
            if !served.insert(v.as_str()) {
                self.error(
                    doc,
                    &at.key("versions").index(i),
                    ErrorKind::Duplicate,
                    format!("version `{v}` is listed twice"),
                );
            }
        }
        if !served.contains(r.hub.as_str()) {
            self.error(
                doc,
                &at.key("hub"),
                ErrorKind::Version,
                format!("hub version `{}` is not among the served versions", r.hub),
            )
            .help = Some(format!("add `{}` to `versions`", r.hub));
        }
        let annotation = r
            .stash_annotation
            .clone()
            .unwrap_or_else(|| DEFAULT_STASH_ANNOTATION.to_string());
        if let Some(problem) = qualified_name_problem(&annotation) {
            self.error(
                doc,
                &at.key("stashAnnotation"),
                ErrorKind::Invalid,
                format!("`{annotation}` is not a valid annotation key: {problem}"),
            );
        }
        let crd = self.schemas.crd(&r.group, &r.kind);
        if let Some(crd) = crd {
            self.check_crd(doc, r, at, crd);
        }
        let root = Path::root();
        let mut versions = Vec::new();
        for v in &r.versions {
            let mut ids = Vec::new();
            let mut remainder = None;
            if let Some(rules) = r.conversion.get(v) {
                if *v == r.hub {
                    self.error(
                        doc,
                        &at.key("conversion").key(v.clone()),
                        ErrorKind::Version,
                        format!("`{v}` is the hub; rules are declared on spoke versions only"),
                    );
                } else {
                    let scope = Scope {
                        doc,
                        hub_version: &r.hub,
                        spoke_version: v,
                        annotation: &annotation,
                        nested: false,
                        indices: doc.rule_indices.get(&(ri, v.clone())).map(Vec::as_slice),
                        crd,
                        hub_base: &root,
                        spoke_base: &root,
                    };
                    ids = self.rule_list(&scope, rules, &at.key("conversion").key(v.clone()));
                    remainder = self.remainder(&scope, rules, &at.key("conversion").key(v.clone()));
                }
            }
            versions.push(VersionIr {
                name: v.clone(),
                rules: ids,
                remainder,
            });
        }
        for v in r.conversion.keys() {
            if !served.contains(v.as_str()) {
                let help = crate::error::did_you_mean(v, served.iter().copied())
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| "add it to `versions` or remove these rules".into());
                self.error(
                    doc,
                    &at.key("conversion").key(v.clone()),
                    ErrorKind::Version,
                    format!("rules for version `{v}`, which the resource does not serve"),
                )
                .help = Some(help);
            }
        }
        let mut sensitive = Vec::new();
        for (i, text) in r.sensitive.iter().enumerate() {
            match Path::parse(text) {
                Ok(p) if !p.is_root() => sensitive.push(p),
                Ok(_) => {
                    self.error(
                        doc,
                        &at.key("sensitive").index(i),
                        ErrorKind::Path,
                        "an empty path: name the fields whose values are sensitive".to_string(),
                    );
                }
                Err(e) => {
                    self.error(
                        doc,
                        &at.key("sensitive").index(i),
                        ErrorKind::Path,
                        e.to_string(),
                    )
                    .help = Some("paths look like `spec.password` or `spec.users[*].token`".into());
                }
            }
        }
        if self.diags.len() > before {
            return None;
        }
        Some(ResourceIr {
            sensitive,
            group: r.group.clone(),
            kind: r.kind.clone(),
            plural: r.plural.clone(),
            scope: r.scope,
            hub: r.hub.clone(),
            versions,
            stash_annotation: annotation,
            crd: r.crd.clone(),
            schemas: crd.map(|c| std::sync::Arc::new(c.clone())),
            loc: Some(loc),
        })
    }

    /// The version's `stash: {remainder: true}`, if it has one: it needs the
    /// spoke's schema from the resource's CRD.
    fn remainder(&mut self, scope: &Scope, rules: &[Rule], at: &DocPath) -> Option<RemainderIr> {
        let position = |i: usize| scope.indices.and_then(|ix| ix.get(i).copied()).unwrap_or(i);
        let mut found: Option<RemainderIr> = None;
        for (i, rule) in rules.iter().enumerate() {
            let Rule::Stash(s) = rule else { continue };
            if !s.remainder {
                continue;
            }
            let rat = at.index(position(i));
            let here = rat.key("stash");
            let origin = format!("{} (stash remainder)", scope.doc.locate(&rat));
            if found.is_some() {
                self.error(
                    scope.doc,
                    &here.key("remainder"),
                    ErrorKind::Duplicate,
                    "a version has at most one `remainder: true` stash",
                );
                continue;
            }
            let annotation = s.annotation.clone().unwrap_or_else(|| {
                crate::front::document::DEFAULT_REMAINDER_ANNOTATION.to_string()
            });
            if let Some(problem) = qualified_name_problem(&annotation) {
                self.error(
                    scope.doc,
                    &here.key("annotation"),
                    ErrorKind::Invalid,
                    format!("`{annotation}` is not a valid annotation key: {problem}"),
                );
                continue;
            }
            if annotation == scope.annotation {
                self.error(
                    scope.doc,
                    &here.key("annotation"),
                    ErrorKind::Invalid,
                    format!("`{annotation}` is the resource's stash annotation; the remainder needs its own"),
                );
                continue;
            }
            let schema = scope
                .crd
                .and_then(|crd| crd.version(scope.spoke_version))
                .and_then(|v| v.schema.clone());
            let Some(schema) = schema else {
                let (why, help) = match scope.crd {
                    None => (
                        "the resource names no readable `crd:`".to_string(),
                        "set `crd:` on the resource to the CRD manifest".to_string(),
                    ),
                    Some(crd) => (
                        format!(
                            "CRD `{}` gives no schema for `{}`",
                            crd.name, scope.spoke_version
                        ),
                        format!(
                            "give `{}` a `schema.openAPIV3Schema` in the CRD",
                            scope.spoke_version
                        ),
                    ),
                };
                self.error(
                    scope.doc,
                    &here.key("remainder"),
                    ErrorKind::Schema,
                    format!("`remainder: true` is computed from the spoke's CRD schema, but {why}"),
                )
                .help = Some(help);
                continue;
            };
            found = Some(RemainderIr {
                annotation,
                schema,
                origin,
            });
        }
        found
    }

    /// Compile an ordered list of rules, then check that no two of them read
    /// or write the same place.
    fn rule_list(&mut self, scope: &Scope, rules: &[Rule], at: &DocPath) -> Vec<RuleId> {
        // A `default` on a stashed hub field becomes the stash's default.
        let mut defaults: BTreeMap<String, (Value, usize)> = BTreeMap::new();
        let stashed: BTreeSet<String> = rules
            .iter()
            .filter_map(|r| match r {
                Rule::Stash(s) => s
                    .hub
                    .as_deref()
                    .and_then(|p| Path::parse(p).ok())
                    .map(|p| p.to_string()),
                _ => None,
            })
            .collect();
        for (i, r) in rules.iter().enumerate() {
            if let Rule::Default(d) = r
                && let Ok(p) = Path::parse(&d.hub)
                && stashed.contains(&p.to_string())
            {
                defaults.insert(p.to_string(), (d.value.clone(), i));
            }
        }
        let mut ids = Vec::new();
        let mut owners: Vec<(usize, RuleId)> = Vec::new();
        let position = |i: usize| scope.indices.and_then(|ix| ix.get(i).copied()).unwrap_or(i);
        for (i, rule) in rules.iter().enumerate() {
            let rat = at.index(position(i));
            if let Rule::Default(d) = rule
                && let Ok(p) = Path::parse(&d.hub)
                && defaults.get(&p.to_string()).is_some_and(|(_, j)| *j == i)
            {
                continue; // merged into its stash
            }
            if let Some(id) = self.rule(scope, rule, &rat, &defaults) {
                self.rules[id.0 as usize].at = rat.clone();
                ids.push(id);
                owners.push((position(i), id));
            }
        }
        self.check_overlaps(scope, at, &owners, Direction::Down);
        self.check_overlaps(scope, at, &owners, Direction::Up);
        ids
    }

    fn check_overlaps(
        &mut self,
        scope: &Scope,
        at: &DocPath,
        owners: &[(usize, RuleId)],
        dir: Direction,
    ) {
        let side = match dir {
            Direction::Down => "hub",
            Direction::Up => "spoke",
        };
        // Two rules overlap when a path of one is a prefix of a path of the
        // other. Every read path is indexed once and each path's prefixes
        // are looked up, so the cost follows the total path length, not
        // every pair of rules; the pairs found are then reported as the
        // pairwise check would, in rule order.
        let mut by_path: HashMap<&[Segment], Vec<usize>> = HashMap::new();
        for (n, (_, r)) in owners.iter().enumerate() {
            for p in self.rules[r.0 as usize].reads(dir) {
                by_path.entry(p.segments()).or_default().push(n);
            }
        }
        let mut earlier: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); owners.len()];
        for (n, (_, r)) in owners.iter().enumerate() {
            for p in self.rules[r.0 as usize].reads(dir) {
                let segs = p.segments();
                for k in 0..=segs.len() {
                    for &m in by_path.get(&segs[..k]).into_iter().flatten() {
                        if m != n {
                            earlier[n.max(m)].insert(n.min(m));
                        }
                    }
                }
            }
        }
        let mut conflicts = Vec::new();
        for (n, (i, a)) in owners.iter().enumerate() {
            for &m in &earlier[n] {
                let (j, b) = &owners[m];
                let ra = &self.rules[a.0 as usize];
                let rb = &self.rules[b.0 as usize];
                let hit = ra.reads(dir).iter().find_map(|pa| {
                    rb.reads(dir)
                        .iter()
                        .find(|pb| pa.overlaps(pb))
                        .map(|pb| (pa.clone(), pb.clone()))
                });
                if let Some((pa, pb)) = hit {
                    conflicts.push((*i, *j, pa, pb));
                }
            }
        }
        for (i, j, pa, pb) in conflicts {
            let first = scope.doc.locate(&at.index(j));
            self.error(
                scope.doc,
                &at.index(i),
                ErrorKind::Conflict,
                format!("this rule and an earlier one both use {side} path `{pa}` (the other uses `{pb}`)"),
            )
            .related = Some((first, "the earlier rule".into()));
        }
    }

    fn path(&mut self, scope: &Scope, text: &str, at: &DocPath, side: Side) -> Option<Path> {
        let path = match Path::parse(text) {
            Ok(p) => p,
            Err(e) => {
                self.error(scope.doc, at, ErrorKind::Path, e.to_string())
                    .help = Some(
                    "paths look like `spec.a.b` or `metadata.annotations[\"example.com/x\"]`"
                        .into(),
                );
                return None;
            }
        };
        if !path.is_keys_only() {
            self.error(
                scope.doc,
                at,
                ErrorKind::Path,
                format!("`{path}` names list elements; conversion paths name object keys only"),
            )
            .help = Some("use `forEach` to apply rules to every element of a list".into());
            return None;
        }
        let segs = path.segments();
        if !scope.nested {
            let first = match segs.first() {
                Some(Segment::Key(k)) => k.as_str(),
                _ => "",
            };
            if matches!(first, "apiVersion" | "kind") {
                self.error(
                    scope.doc,
                    at,
                    ErrorKind::Metadata,
                    format!("`{path}` is set by the engine; rules may not touch it"),
                );
                return None;
            }
            if first == "metadata" {
                let ok = matches!(segs.get(1), Some(Segment::Key(k)) if k == "labels" || k == "annotations")
                    && segs.len() == 3;
                if !ok {
                    self.error(scope.doc, at, ErrorKind::Metadata, format!("`{path}` is metadata the apiserver does not let a conversion change"))
                        .help = Some("only single labels and annotations may change, e.g. `metadata.annotations[\"example.com/x\"]`".into());
                    return None;
                }
                if let Some(Segment::Key(k)) = segs.get(2)
                    && k == scope.annotation
                {
                    self.error(
                        scope.doc,
                        at,
                        ErrorKind::Conflict,
                        format!("`{path}` is the stash annotation the engine manages"),
                    );
                    return None;
                }
            }
        }
        self.check_schema(scope, &path, at, side);
        Some(path)
    }

    /// The resource's names, scope and versions against its CRD.
    fn check_crd(&mut self, doc: &LoadedDocument, r: &Resource, at: &DocPath, crd: &Crd) {
        let related = (crd.loc.clone(), format!("CRD `{}`", crd.name));
        if crd.plural != r.plural {
            self.error(
                doc,
                &at.key("plural"),
                ErrorKind::Schema,
                format!("the CRD's plural is `{}`, not `{}`", crd.plural, r.plural),
            )
            .related = Some(related.clone());
        }
        if let Some(scope) = crd.scope
            && scope != r.scope
        {
            let name = |s: crate::front::document::Scope| match s {
                crate::front::document::Scope::Namespaced => "Namespaced",
                crate::front::document::Scope::Cluster => "Cluster",
            };
            let at = if doc.root.key_node(&at.key("scope")).is_some() {
                at.key("scope")
            } else {
                at.clone()
            };
            self.error(
                doc,
                &at,
                ErrorKind::Schema,
                format!(
                    "the CRD is {}-scoped; the resource says {}",
                    name(scope),
                    name(r.scope)
                ),
            )
            .help = Some(format!("set `scope: {}`", name(scope)));
        }
        for (i, v) in r.versions.iter().enumerate() {
            let served = crd.version(v).is_some_and(|cv| cv.served);
            if !served {
                let candidates: Vec<&str> = crd
                    .versions
                    .iter()
                    .filter(|cv| cv.served && !r.versions.contains(&cv.name))
                    .map(|cv| cv.name.as_str())
                    .collect();
                let help = match crate::error::did_you_mean(v, candidates.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!(
                        "the CRD serves {}",
                        list_names(
                            crd.versions
                                .iter()
                                .filter(|cv| cv.served)
                                .map(|cv| &cv.name)
                        )
                    ),
                };
                let what = if crd.version(v).is_some() {
                    "does not serve"
                } else {
                    "has no version"
                };
                self.error(
                    doc,
                    &at.key("versions").index(i),
                    ErrorKind::Schema,
                    format!("the CRD {what} `{v}`"),
                )
                .help = Some(help);
            }
        }
        for cv in crd.versions.iter().filter(|cv| cv.served) {
            if !r.versions.contains(&cv.name) {
                self.error(
                    doc,
                    &at.key("versions"),
                    ErrorKind::Schema,
                    format!(
                        "the CRD serves `{}`, which `versions` does not list",
                        cv.name
                    ),
                )
                .help = Some(format!(
                    "add `{}` to `versions`: the apiserver sends its objects to the webhook",
                    cv.name
                ));
            }
        }
        if let Some(storage) = crd.storage_version()
            && storage != r.hub
            && r.versions.contains(&r.hub)
        {
            let d = Diagnostic::new(
                ErrorKind::Schema,
                format!(
                    "the hub `{hub}` is not the CRD's storage version `{storage}`: the hub is the version every conversion goes through, so conversion stays correct, but every object is stored at `{storage}` and converted through `{hub}` on each read and write",
                    hub = r.hub
                ),
            )
            .at(doc.locate(&at.key("hub")), Some(&doc.source))
            .with_help(format!(
                "make `{storage}` the hub (stored objects then need no conversion); a hub that differs from the storage version is only expected during a storage migration (`katalog migrate-storage`), until the hub follows the CRD"
            ))
            .warning();
            self.warnings.push(d);
        }
    }

    /// Report a path the CRD's schema of its side does not declare.
    fn check_schema(&mut self, scope: &Scope, path: &Path, at: &DocPath, side: Side) {
        let Some(crd) = scope.crd else { return };
        let (version, base) = match side {
            Side::Hub => (scope.hub_version, scope.hub_base),
            Side::Spoke => (scope.spoke_version, scope.spoke_base),
        };
        let Some(schema) = crd.version(version).and_then(|v| v.schema.as_ref()) else {
            return;
        };
        let full = base.join(path);
        if let Some((message, help)) = crate::schema::path_problem(schema, &full, version) {
            self.error(scope.doc, at, ErrorKind::Schema, message).help = Some(help);
        }
    }

    /// Add a rule; its paths come from its operation ([`RuleIr::new`]).
    fn push(&mut self, op: Op, proof: Proof, origin: String) -> RuleId {
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(RuleIr::new(op, proof, origin));
        id
    }

    fn require_lossy(
        &mut self,
        scope: &Scope,
        at: &DocPath,
        lossy: bool,
        why: &str,
    ) -> Option<Proof> {
        if lossy {
            Some(Proof::AcknowledgedLossy)
        } else {
            self.error(
                scope.doc,
                at,
                ErrorKind::Lossy,
                format!("this rule loses data: {why}"),
            )
            .help = Some("add `lossy: true` to the rule to accept the loss".into());
            None
        }
    }

    fn one_side(
        &mut self,
        scope: &Scope,
        at: &DocPath,
        hub: &Option<String>,
        spoke: &Option<String>,
    ) -> Option<(Side, Path)> {
        match (hub, spoke) {
            (Some(h), None) => Some((Side::Hub, self.path(scope, h, &at.key("hub"), Side::Hub)?)),
            (None, Some(s)) => Some((
                Side::Spoke,
                self.path(scope, s, &at.key("spoke"), Side::Spoke)?,
            )),
            _ => {
                self.error(
                    scope.doc,
                    at,
                    ErrorKind::Shape,
                    "give exactly one of `hub` (a hub-only field) or `spoke` (a spoke-only field)",
                );
                None
            }
        }
    }
}

/// `"{host}:{port}"` → pieces; `{{` and `}}` stand for literal braces.
pub(crate) fn parse_template(t: &str) -> Result<Vec<TemplatePiece>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) if c.is_alphanumeric() || c == '_' => name.push(c),
                        Some(c) => {
                            return Err(format!("unexpected `{c}` in a template capture name"));
                        }
                        None => return Err("unclosed `{` in the template".into()),
                    }
                }
                if name.is_empty() {
                    return Err("empty `{}` in the template".into());
                }
                if !text.is_empty() {
                    out.push(TemplatePiece::Text(std::mem::take(&mut text)));
                }
                out.push(TemplatePiece::Capture(name));
            }
            '}' => {
                return Err("unmatched `}` in the template; write `}}` for a literal brace".into());
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        out.push(TemplatePiece::Text(text));
    }
    Ok(out)
}
