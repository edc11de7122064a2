//! Stage 3: the compiled conversion rules against the CRD schemas.
//!
//! For every spoke and each direction (hub→spoke, spoke→hub) the analysis
//! walks the schema of the version converted *from* and decides, for every
//! field, where its value goes:
//!
//! - **claimed** by a rule (one of the rule's read paths in that direction
//!   names the field or a parent of it); the rule's own check then follows
//!   the value to where the rule writes it ([`Walk::check_rule`]);
//! - **stashed** ([`Walk::lands_in_stash`]);
//! - **copied unchanged**: the engine leaves a field no rule names where it
//!   is, so the target version's schema must declare the same path with a
//!   compatible type ([`Walk::fits`]). A field the target does not declare
//!   is one the apiserver would prune: an error naming the field, the
//!   versions and a rule that would keep it.
//!
//! Opaque units ([`crate::schema::Opacity`]) are claimed whole or not at
//! all. The same structural comparison ([`Walk::fits`]) simulates pruning
//! for values a rule moves (`rename`, `wrap`, `forEach` elements). Type
//! checks follow the rule: a rename between a scalar and an object, an
//! `enumMap` that misses a value the source schema allows, `split` parts
//! the target cannot hold, a `default`/`constant` the target schema rejects,
//! a `coerce` whose source schema allows values that do not convert.
//!
//! Every rule and direction is reported lossless or lossy ([`Analysis`]); a
//! lossy direction is one the Katalog acknowledged (`lossy: true`, or a rule
//! that is lossy by nature and compiled only with it), since a loss it did
//! not acknowledge is an error here or in the compiler.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::common::path::{Path, Segment};
use crate::error::{Diagnostic, Diagnostics, ErrorKind, did_you_mean};
use crate::front::load::{Loaded, LoadedDocument};
use crate::front::source::DocPath;
use crate::ir::{Direction, Ir, Op, ResourceIr, RuleId};
use crate::schema::{Lookup, SchemaNode, Schemas, lookup};

mod rules;

/// What the analysis found: a report per resource, and its diagnostics
/// (errors make the Katalog fail to compile).
#[derive(Debug, Default, Serialize)]
pub struct Analysis {
    pub resources: Vec<ResourceReport>,
    #[serde(skip)]
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Serialize)]
pub struct ResourceReport {
    pub group: String,
    pub kind: String,
    pub hub: String,
    pub directions: Vec<DirectionReport>,
}

/// One spoke, one way.
#[derive(Debug, Serialize)]
pub struct DirectionReport {
    pub from: String,
    pub to: String,
    /// `down` (hub→spoke) or `up` (spoke→hub).
    pub direction: &'static str,
    /// True when no rule loses data this way (acknowledged loss makes it false).
    pub lossless: bool,
    /// Fields copied unchanged, found with the same type in the target.
    pub identical: Vec<Path>,
    /// Fields a rule claims (its read paths), with the rule.
    pub claimed: Vec<Claim>,
    /// Fields kept in a stash annotation.
    pub stashed: Vec<Path>,
    /// Fields with no place in the target (each is an error).
    pub unclaimed: Vec<Path>,
    pub rules: Vec<RuleVerdict>,
    /// Draft rules for what has no place (`katalog suggest`).
    pub suggestions: Vec<Suggestion>,
    /// How many errors the analysis reported for this direction.
    pub errors: usize,
}

/// A draft rule for a field that has no place in the target, as the YAML
/// of one list entry of the spoke's rules (`rename: {hub: a, spoke: b}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    pub rule: String,
    /// Inside the `forEach` of this list (hub path), or `None` at the top.
    pub for_each: Option<Path>,
    pub why: String,
}

#[derive(Debug, Serialize)]
pub struct Claim {
    pub path: Path,
    pub rule: String,
}

/// A rule in one direction.
#[derive(Debug, Serialize)]
pub struct RuleVerdict {
    pub rule: String,
    pub lossless: bool,
    /// Why it is lossy, or how it is shown lossless.
    pub why: String,
}

impl Analysis {
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == crate::error::Severity::Error)
    }
}

/// Analyse every resource of `ir` whose CRD is in `schemas`. Resources
/// without a CRD (or versions without a schema) are left out.
pub fn analyze(loaded: &Loaded, ir: &Ir, schemas: &Schemas) -> Analysis {
    let mut out = Analysis::default();
    for resource in &ir.resources {
        let Some(crd) = schemas.crd(&resource.group, &resource.kind) else {
            continue;
        };
        let Some((doc, res_at)) = find_resource(loaded, resource) else {
            continue;
        };
        let Some(hub) = crd.version(&resource.hub).and_then(|v| v.schema.as_ref()) else {
            continue;
        };
        let mut report = ResourceReport {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
            hub: resource.hub.clone(),
            directions: Vec::new(),
        };
        for version in &resource.versions {
            if version.name == resource.hub {
                continue;
            }
            let Some(spoke) = crd.version(&version.name).and_then(|v| v.schema.as_ref()) else {
                continue;
            };
            let conversion_at = res_at.key("conversion").key(version.name.clone());
            let anchor = if doc.root.key_node(&conversion_at).is_some() {
                conversion_at
            } else {
                let i = resource
                    .versions
                    .iter()
                    .position(|v| v.name == version.name)
                    .unwrap_or(0);
                res_at.key("versions").index(i)
            };
            for dir in [Direction::Down, Direction::Up] {
                let (from, to, source, target) = match dir {
                    Direction::Down => (&resource.hub, &version.name, hub, spoke),
                    Direction::Up => (&version.name, &resource.hub, spoke, hub),
                };
                let mut walk = Walk {
                    ir,
                    doc,
                    dir,
                    from,
                    to,
                    source,
                    target,
                    anchor: anchor.clone(),
                    base: Path::root(),
                    diags: &mut out.diagnostics,
                    errors: 0,
                    remainder: dir == Direction::Down && version.remainder.is_some(),
                    report: DirectionReport {
                        from: from.clone(),
                        to: to.clone(),
                        direction: match dir {
                            Direction::Down => "down",
                            Direction::Up => "up",
                        },
                        lossless: true,
                        identical: Vec::new(),
                        claimed: Vec::new(),
                        stashed: Vec::new(),
                        unclaimed: Vec::new(),
                        rules: Vec::new(),
                        suggestions: Vec::new(),
                        errors: 0,
                    },
                };
                let root = Path::root();
                walk.cover(source, &root, &root, &version.rules, &root);
                walk.check_rules(&version.rules, &root, &root);
                walk.report.lossless = walk.report.rules.iter().all(|r| r.lossless);
                walk.report.errors = walk.errors;
                report.directions.push(walk.report);
            }
        }
        out.resources.push(report);
    }
    out.diagnostics.sort();
    out
}

/// The document that declares `resource`, and the resource's place in it.
fn find_resource<'l>(
    loaded: &'l Loaded,
    resource: &ResourceIr,
) -> Option<(&'l LoadedDocument, DocPath)> {
    loaded.documents.iter().find_map(|doc| {
        doc.doc
            .spec
            .resources
            .iter()
            .position(|r| r.group == resource.group && r.kind == resource.kind)
            .map(|pos| {
                let ri = doc.resource_indices.get(pos).copied().unwrap_or(pos);
                (
                    doc,
                    DocPath::default().key("spec").key("resources").index(ri),
                )
            })
    })
}

/// The broad type of a schema node, as messages name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    IntOrString,
    Untyped,
}

impl Kind {
    fn of(n: &SchemaNode) -> Kind {
        if n.int_or_string {
            return Kind::IntOrString;
        }
        match n.type_.as_deref() {
            Some("object") => Kind::Object,
            Some("array") => Kind::Array,
            Some("string") => Kind::String,
            Some("integer") => Kind::Integer,
            Some("number") => Kind::Number,
            Some("boolean") => Kind::Boolean,
            _ => Kind::Untyped,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Object => "an object",
            Kind::Array => "a list",
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Number => "a number",
            Kind::Boolean => "a boolean",
            Kind::IntOrString => "an int-or-string",
            Kind::Untyped => "untyped",
        }
    }

    /// Whether every value of `self` is a value of `target`.
    fn fits_into(self, target: Kind) -> bool {
        self == target
            || matches!(
                (self, target),
                (_, Kind::Untyped)
                    | (Kind::Untyped, _)
                    | (Kind::Integer, Kind::Number)
                    | (Kind::Integer | Kind::String, Kind::IntOrString)
            )
    }
}

/// What claims a source path: why a rule's read path covers it.
enum Claimed {
    /// A read path names this field or a parent of it.
    Whole,
    /// Read paths name fields below it only.
    Part,
    No,
}

struct Walk<'a> {
    ir: &'a Ir,
    doc: &'a LoadedDocument,
    dir: Direction,
    from: &'a str,
    to: &'a str,
    source: &'a SchemaNode,
    target: &'a SchemaNode,
    /// Where coverage errors are located: the spoke's `conversion.<v>` key,
    /// or inside a `forEach` that rule.
    anchor: DocPath,
    /// Where the paths of the rules in scope start (inside `forEach`: the
    /// list element), so a suggested rule is written as it would be there.
    base: Path,
    diags: &'a mut Diagnostics,
    errors: usize,
    report: DirectionReport,
    /// Down to a spoke with `stash: {remainder: true}`.
    remainder: bool,
}

/// Where a value that is copied or moved came from, for messages.
#[derive(Clone, Copy)]
enum Cause {
    /// No rule names it: the engine copies it unchanged.
    Copied,
    /// This rule moves it.
    Rule(RuleId),
}

impl Walk<'_> {
    fn error(&mut self, at: &DocPath, message: String, help: Option<String>) {
        let mut d = Diagnostic::new(ErrorKind::Schema, message)
            .at(self.doc.locate(at), Some(&self.doc.source));
        d.help = help;
        self.diags.push(d);
        self.errors += 1;
    }

    /// A difference that loses nothing but changes what a client sees.
    fn warn(&mut self, at: &DocPath, message: String, help: Option<String>) {
        let mut d = Diagnostic::new(ErrorKind::Schema, message)
            .warning()
            .at(self.doc.locate(at), Some(&self.doc.source));
        d.help = help;
        self.diags.push(d);
    }

    fn rule_at(&self, id: RuleId, key: Option<&str>) -> DocPath {
        let rule = self.ir.rule(id);
        let at = match rule.at.0.is_empty() {
            true => self.anchor.clone(),
            false => rule.at.clone(),
        };
        match key {
            Some(k) => {
                let name = op_name(&rule.op, &rule.origin);
                let inner = at.key(name.to_string()).key(k.to_string());
                if self.doc.root.key_node(&inner).is_some() {
                    inner
                } else {
                    at
                }
            }
            None => at,
        }
    }

    fn dirs(&self) -> String {
        format!("{} → {}", self.from, self.to)
    }

    /// Whether a field the rules do not claim is kept in a stash on the way
    /// through this direction. A `stash:` rule claims its field by its read
    /// path; what is left is the spoke's whole-remainder stash
    /// (`stash: {remainder: true}`), which on the way down keeps every field
    /// the spoke's schema does not declare (`crate::conversion::remainder::keep`).
    fn lands_in_stash(&self, target_path: &Path) -> bool {
        self.remainder && matches!(lookup(self.target, target_path), Lookup::Missing { .. })
    }

    fn claims(&self, rules: &[RuleId], base: &Path, path: &Path) -> (Claimed, Option<RuleId>) {
        let mut part = false;
        for id in rules {
            for read in self.ir.rule(*id).reads(self.dir) {
                let read = base.join(read);
                if path.starts_with(&read) {
                    return (Claimed::Whole, Some(*id));
                }
                if read.starts_with(path) {
                    part = true;
                }
            }
        }
        if part {
            (Claimed::Part, None)
        } else {
            (Claimed::No, None)
        }
    }

    /// Coverage of the source subtree `node` at `sp` (copied, when no rule
    /// claims it, to `tp` in the target). `rules` are the rules of this
    /// scope, their paths relative to `base`.
    fn cover(&mut self, node: &SchemaNode, sp: &Path, tp: &Path, rules: &[RuleId], base: &Path) {
        match self.claims(rules, base, sp) {
            (Claimed::Whole, Some(id)) => {
                let rule = self.ir.rule(id);
                if matches!(rule.op, Op::Stash { .. }) {
                    self.report.stashed.push(sp.clone());
                }
                self.report.claimed.push(Claim {
                    path: sp.clone(),
                    rule: rule.origin.clone(),
                });
            }
            (Claimed::Whole, None) => {}
            (Claimed::Part, _) => {
                if let Some(why) = node.opaque
                    && !is_string_map_of_metadata(sp)
                {
                    let rule = rules
                        .iter()
                        .copied()
                        .find(|id| {
                            self.ir
                                .rule(*id)
                                .reads(self.dir)
                                .iter()
                                .any(|r| base.join(r).starts_with(sp))
                        })
                        .unwrap_or(RuleId(0));
                    let at = self.rule_at(rule, None);
                    self.error(
                        &at,
                        format!(
                            "this rule claims part of the opaque unit `{sp}` ({why}) of {}: an opaque unit is claimed whole or not at all",
                            self.from
                        ),
                        Some(format!("name `{sp}` itself in the rule")),
                    );
                    return;
                }
                for (k, child) in &node.properties {
                    self.cover(
                        child,
                        &sp.child(k.clone()),
                        &tp.child(k.clone()),
                        rules,
                        base,
                    );
                }
                if let Some(items) = &node.items {
                    self.cover(items, &wild(sp), &wild(tp), rules, base);
                }
            }
            (Claimed::No, _) => {
                if self.lands_in_stash(tp) {
                    self.report.stashed.push(sp.clone());
                    return;
                }
                match lookup(self.target, tp) {
                    Lookup::Found(t) => self.fits(node, sp, t, tp, Cause::Copied),
                    Lookup::Opaque { .. } => self.report.identical.push(sp.clone()),
                    _ => self.unclaimed(sp, tp),
                }
            }
        }
    }

    /// `p` as the rules in scope write it (relative inside a `forEach`).
    fn relative(&self, p: &Path) -> Path {
        match p.segments().strip_prefix(self.base.segments()) {
            Some(rest) => Path::from_segments(rest.to_vec()),
            None => p.clone(),
        }
    }

    fn suggest(&mut self, rule: String, why: String) {
        let for_each = (!self.base.is_root()).then(|| {
            let segs = self.base.segments();
            Path::from_segments(segs[..segs.len() - 1].to_vec())
        });
        let s = Suggestion {
            rule,
            for_each,
            why,
        };
        if !self.report.suggestions.contains(&s) {
            self.report.suggestions.push(s);
        }
    }

    /// A field no rule claims and the target does not declare.
    fn unclaimed(&mut self, sp: &Path, tp: &Path) {
        self.report.unclaimed.push(sp.clone());
        let side = match self.dir {
            Direction::Down => "hub",
            Direction::Up => "spoke",
        };
        let parent = parent_of(tp);
        let source_kind = match lookup(self.source, sp) {
            Lookup::Found(n) => Kind::of(n),
            _ => Kind::Untyped,
        };
        let similar = match (lookup(self.target, &parent), sp.segments().last()) {
            (Lookup::Found(p), Some(Segment::Key(k))) => {
                let theirs = match lookup(self.source, &parent_of(sp)) {
                    Lookup::Found(s) => s.properties.keys().cloned().collect(),
                    _ => BTreeSet::new(),
                };
                // A target field the source also has is not a rename target.
                did_you_mean(
                    k,
                    p.properties
                        .iter()
                        .filter(|(c, n)| !theirs.contains(*c) && source_kind.fits_into(Kind::of(n)))
                        .map(|(c, _)| c.as_str()),
                )
                .map(|s| parent.child(s.to_string()))
            }
            _ => None,
        };
        let relative = |p: &Path| match p.segments().strip_prefix(self.base.segments()) {
            Some(rest) => Path::from_segments(rest.to_vec()),
            None => p.clone(),
        };
        let (sp_rel, similar) = (relative(sp), similar.map(|s| relative(&s)));
        let suggestion = match (&similar, self.dir) {
            (Some(s), Direction::Down) => (
                format!("rename: {{ hub: {sp_rel}, spoke: {s} }}"),
                format!("{} has a field of a similar name and type", self.to),
            ),
            (Some(s), Direction::Up) => (
                format!("rename: {{ hub: {s}, spoke: {sp_rel} }}"),
                format!("{} has a field of a similar name and type", self.to),
            ),
            (None, _) => (
                format!("stash: {{ {side}: {sp_rel} }}"),
                format!("{} has no field like it", self.to),
            ),
        };
        self.suggest(suggestion.0, suggestion.1);
        let rename = similar.map(|s| match self.dir {
            Direction::Down => {
                format!("`rename: {{hub: {sp_rel}, spoke: {s}}}` if it is the same field, ")
            }
            Direction::Up => {
                format!("`rename: {{hub: {s}, spoke: {sp_rel}}}` if it is the same field, ")
            }
        });
        let inside = if self.base.is_root() {
            String::new()
        } else {
            " to the rules of this `forEach`".to_string()
        };
        let at = self.anchor.clone();
        let what = if parent_of(sp).is_root()
            || matches!(lookup(self.target, &parent), Lookup::Found(_))
        {
            format!("{} does not declare it", self.to)
        } else {
            format!("{} does not declare `{parent}`", self.to)
        };
        self.error(
            &at,
            format!(
                "`{sp}` of {} has no place in {} ({}): no rule claims it and {what}, so the apiserver would prune it",
                self.from,
                self.to,
                self.dirs()
            ),
            Some(format!(
                "add{inside} {}`stash: {{{side}: {sp_rel}}}` to keep it, or `delete: {{{side}: {sp_rel}, lossy: true}}` to drop it",
                rename.unwrap_or_default()
            )),
        );
    }

    /// The source subtree `s` (at `sp`) lands at `tp`, where the target's
    /// schema is `t`: every field of it must be declared there with a type
    /// that holds its values, or the apiserver prunes (or rejects) it.
    fn fits(&mut self, s: &SchemaNode, sp: &Path, t: &SchemaNode, tp: &Path, cause: Cause) {
        let (sk, tk) = (Kind::of(s), Kind::of(t));
        if let Some(why) = s.opaque {
            if t.opaque.is_some() || (tk == Kind::Untyped && t.properties.is_empty()) {
                if let (Some(sa), Some(ta)) = (&s.additional_properties, &t.additional_properties) {
                    return self.fits(sa, &wild(sp), ta, &wild(tp), cause);
                }
                self.identical(sp, cause);
                return;
            }
            let (at, rule) = self.cause_at(cause);
            self.error(
                &at,
                format!(
                    "`{sp}` is an opaque unit ({why}) in {} but {} declares its fields at `{tp}`{rule}: the unit is claimed whole or not at all",
                    self.from, self.to
                ),
                Some(format!(
                    "claim `{sp}` whole with a rule (a `stash`, or a `cel` that maps it), or make `{tp}` opaque in {} too",
                    self.to
                )),
            );
            return;
        }
        if !sk.fits_into(tk) {
            let scalar = |k: Kind| match k {
                Kind::String => Some("string"),
                Kind::Integer => Some("integer"),
                Kind::Number => Some("number"),
                Kind::Boolean => Some("boolean"),
                _ => None,
            };
            if let (Cause::Copied, Some(a), Some(b)) = (cause, scalar(sk), scalar(tk)) {
                let rel = self.relative(sp);
                let (hub_type, spoke_type) = match self.dir {
                    Direction::Down => (a, b),
                    Direction::Up => (b, a),
                };
                self.suggest(
                    format!(
                        "coerce: {{ hub: {rel}, hubType: {hub_type}, spokeType: {spoke_type} }}"
                    ),
                    "only the type changed".into(),
                );
            }
            let (at, rule) = self.cause_at(cause);
            self.error(
                &at,
                format!(
                    "`{sp}` is {} in {} but `{tp}` is {} in {}{rule}",
                    sk.name(),
                    self.from,
                    tk.name(),
                    self.to
                ),
                Some(
                    "give both the same type, or convert it with a rule (`coerce`, `wrap`, `cel`)"
                        .into(),
                ),
            );
            return;
        }
        if !t.enum_values.is_empty() {
            let missing: Vec<&Value> = if s.enum_values.is_empty() {
                Vec::new()
            } else {
                s.enum_values
                    .iter()
                    .filter(|v| !t.enum_values.contains(v))
                    .collect()
            };
            if s.enum_values.is_empty() || !missing.is_empty() {
                let (at, rule) = self.cause_at(cause);
                let what = if missing.is_empty() {
                    "any value".to_string()
                } else {
                    list_values(&missing)
                };
                self.error(
                    &at,
                    format!(
                        "`{sp}` of {} allows {what}, but `{tp}` of {} allows only {}{rule}",
                        self.from,
                        self.to,
                        list_values(&t.enum_values.iter().collect::<Vec<_>>())
                    ),
                    Some("map the values with an `enumMap`, or allow them in both versions".into()),
                );
                return;
            }
        }
        if let Some(why) = stricter(s, t, self.from) {
            let (at, rule) = self.cause_at(cause);
            self.error(
                &at,
                format!(
                    "`{sp}` of {} allows values that `{tp}` of {} does not: {why}{rule}",
                    self.from, self.to
                ),
                Some(
                    "give both versions the same constraints, or convert the value with a rule"
                        .into(),
                ),
            );
            return;
        }
        if matches!(self.dir, Direction::Down)
            && let Some(d) = &t.default
            && s.default.as_ref() != Some(d)
        {
            let (at, rule) = self.cause_at(cause);
            let theirs = match &s.default {
                Some(x) => format!("defaults to {}", crate::common::json::show(x)),
                None => "has no default".to_string(),
            };
            self.warn(
                &at,
                format!(
                    "`{tp}` of {} defaults to {} but `{sp}` of {} {theirs}{rule}: a {} client that reads an object without it and writes it back stores the default",
                    self.to,
                    crate::common::json::show(d),
                    self.from,
                    self.to
                ),
                Some("give both versions the same default (or none)".into()),
            );
        }
        if t.opaque.is_some() {
            // Whatever fits the source lands in a unit the target keeps.
            self.identical(sp, cause);
            return;
        }
        match sk {
            Kind::Object => {
                let mut any = false;
                for (k, child) in &s.properties {
                    any = true;
                    let (csp, ctp) = (sp.child(k.clone()), tp.child(k.clone()));
                    match t.properties.get(k) {
                        Some(tc) => self.fits(child, &csp, tc, &ctp, cause),
                        // Kept by the remainder stash once the rules have run.
                        None if self.remainder => self.report.stashed.push(csp),
                        None => match cause {
                            Cause::Copied => self.unclaimed(&csp, &ctp),
                            Cause::Rule(id) => self.pruned(id, &csp, &ctp),
                        },
                    }
                }
                if !any {
                    self.identical(sp, cause);
                }
            }
            Kind::Array => match (&s.items, &t.items) {
                (Some(si), Some(ti)) => self.fits(si, &wild(sp), ti, &wild(tp), cause),
                _ => self.identical(sp, cause),
            },
            _ => self.identical(sp, cause),
        }
    }

    /// A field copied unchanged that fits (a value a rule moves is claimed,
    /// not identical).
    fn identical(&mut self, sp: &Path, cause: Cause) {
        if let Cause::Copied = cause {
            self.report.identical.push(sp.clone());
        }
    }

    fn cause_at(&self, cause: Cause) -> (DocPath, String) {
        match cause {
            Cause::Copied => (
                self.anchor.clone(),
                " (no rule claims it: it is copied unchanged)".to_string(),
            ),
            Cause::Rule(id) => (self.rule_at(id, None), String::new()),
        }
    }

    /// A field a rule moves to a place the target does not declare.
    fn pruned(&mut self, id: RuleId, sp: &Path, tp: &Path) {
        let at = self.rule_at(id, None);
        self.error(
            &at,
            format!(
                "this rule moves `{sp}` of {} to `{tp}`, which {} does not declare: the apiserver would prune it",
                self.from, self.to
            ),
            Some(format!(
                "declare `{tp}` in {}, or claim `{sp}` with a rule of its own",
                self.to
            )),
        );
        self.report.unclaimed.push(sp.clone());
    }
}

/// Why `value` is not valid for `node`; the checks the apiserver makes that
/// are cheap here (type, enum, minimum/maximum, multipleOf, minLength/
/// maxLength, pattern, declared fields).
pub fn value_problem(node: &SchemaNode, value: &Value) -> Option<String> {
    if value.is_null() {
        return (!node.nullable).then(|| "the schema is not nullable".to_string());
    }
    let found = match value {
        Value::Bool(_) => Kind::Boolean,
        Value::Number(n) if n.is_i64() || n.is_u64() => Kind::Integer,
        Value::Number(_) => Kind::Number,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
        Value::Null => Kind::Untyped,
    };
    let want = Kind::of(node);
    if !found.fits_into(want) {
        return Some(format!(
            "it is {}, the schema wants {}",
            found.name(),
            want.name()
        ));
    }
    if !node.enum_values.is_empty() && !node.enum_values.contains(value) {
        return Some(format!(
            "the schema allows only {}",
            list_values(&node.enum_values.iter().collect::<Vec<_>>())
        ));
    }
    if let Some(x) = value.as_f64() {
        if let Some(min) = node.minimum {
            if x < min {
                return Some(format!("the minimum is {min}"));
            }
            if node.exclusive_minimum && x == min {
                return Some(format!(
                    "it must be greater than {min} (`exclusiveMinimum`)"
                ));
            }
        }
        if let Some(max) = node.maximum {
            if x > max {
                return Some(format!("the maximum is {max}"));
            }
            if node.exclusive_maximum && x == max {
                return Some(format!("it must be less than {max} (`exclusiveMaximum`)"));
            }
        }
        if let Some(m) = node.multiple_of
            && m > 0.0
            && (x / m).fract() != 0.0
        {
            return Some(format!("it is not a multiple of {m}"));
        }
    }
    if let Value::String(text) = value {
        // The apiserver counts characters (code points), not bytes.
        let length = text.chars().count() as u64;
        let long = if length == 1 {
            "character"
        } else {
            "characters"
        };
        if let Some(min) = node.min_length
            && length < min
        {
            return Some(format!("it is {length} {long} long, the minimum is {min}"));
        }
        if let Some(max) = node.max_length
            && length > max
        {
            return Some(format!("it is {length} {long} long, the maximum is {max}"));
        }
        // OpenAPI patterns are unanchored; one this engine cannot compile
        // is left to the apiserver.
        if let Some(pattern) = &node.pattern
            && let Ok(re) = regex::Regex::new(pattern)
            && !re.is_match(text)
        {
            return Some(format!("it does not match the pattern `{pattern}`"));
        }
    }
    if let Value::Object(m) = value
        && node.opaque.is_none()
    {
        for (k, v) in m {
            match node.properties.get(k) {
                Some(child) => {
                    if let Some(p) = value_problem(child, v) {
                        return Some(format!("`{k}`: {p}"));
                    }
                }
                None => return Some(format!("the schema declares no field `{k}`")),
            }
        }
        for r in &node.required {
            if !m.contains_key(r) {
                return Some(format!("it lacks the required field `{r}`"));
            }
        }
    }
    if let (Value::Array(items), Some(schema)) = (value, &node.items) {
        for (i, v) in items.iter().enumerate() {
            if let Some(p) = value_problem(schema, v) {
                return Some(format!("element {i}: {p}"));
            }
        }
    }
    None
}

/// Why a value the source schema allows may be one the target refuses (or
/// prunes), by `nullable`, `pattern`, `format`, `minLength`/`maxLength`,
/// `minimum`/`maximum`, `multipleOf` or `minItems`/`maxItems` (a source
/// `enum` is checked value by value); `None` when the target is not stricter.
fn stricter(s: &SchemaNode, t: &SchemaNode, from: &str) -> Option<String> {
    if s.nullable && !t.nullable {
        return Some(format!(
            "null, which {from} allows (`nullable: true`) and the apiserver prunes from a field that is not nullable"
        ));
    }
    if !s.enum_values.is_empty() {
        return s
            .enum_values
            .iter()
            .find_map(|v| value_problem(t, v).map(|p| format!("{v}: {p}")));
    }
    if let Some(p) = &t.pattern
        && s.pattern.as_ref() != Some(p)
    {
        return Some(format!("the pattern `{p}`, which {from} does not require"));
    }
    if let Some(max) = t.max_length
        && s.max_length.is_none_or(|m| m > max)
    {
        return Some(format!("maxLength {max}, {from} {}", bound(s.max_length)));
    }
    if let Some(min) = t.min_length
        && s.min_length.unwrap_or(0) < min
    {
        return Some(format!("minLength {min}, {from} {}", bound(s.min_length)));
    }
    if let Some(m) = t.multiple_of
        && m > 0.0
        && s.multiple_of.is_none_or(|sm| (sm / m).fract() != 0.0)
    {
        return Some(format!("multipleOf {m}, which {from} does not require"));
    }
    if let Some(f) = t.format.as_deref()
        && VALIDATED_FORMATS.contains(&f)
        && s.format.as_deref() != Some(f)
        && !(f == "date-time" && s.format.as_deref() == Some("datetime"))
        && !(f == "datetime" && s.format.as_deref() == Some("date-time"))
    {
        return Some(format!("the format `{f}`, which {from} does not require"));
    }
    if let Some(min) = t.minimum
        && s.minimum
            .is_none_or(|m| m < min || (m == min && t.exclusive_minimum && !s.exclusive_minimum))
    {
        return Some(format!(
            "minimum {min}{}, {from} {}{}",
            exclusive(t.exclusive_minimum),
            float_bound(s.minimum),
            exclusive(s.minimum.is_some() && s.exclusive_minimum)
        ));
    }
    if let Some(max) = t.maximum
        && s.maximum
            .is_none_or(|m| m > max || (m == max && t.exclusive_maximum && !s.exclusive_maximum))
    {
        return Some(format!(
            "maximum {max}{}, {from} {}{}",
            exclusive(t.exclusive_maximum),
            float_bound(s.maximum),
            exclusive(s.maximum.is_some() && s.exclusive_maximum)
        ));
    }
    if let Some(max) = t.max_items
        && s.max_items.is_none_or(|m| m > max)
    {
        return Some(format!("maxItems {max}, {from} {}", bound(s.max_items)));
    }
    if let Some(min) = t.min_items
        && s.min_items.unwrap_or(0) < min
    {
        return Some(format!("minItems {min}, {from} {}", bound(s.min_items)));
    }
    None
}

/// The string formats the apiserver validates in a CRD (the others, like
/// `int32`, are descriptions only).
const VALIDATED_FORMATS: [&str; 24] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "date",
    "duration",
    "datetime",
    "date-time",
];

fn exclusive(yes: bool) -> &'static str {
    if yes { " (exclusive)" } else { "" }
}

fn float_bound(b: Option<f64>) -> String {
    match b {
        Some(b) => format!("has {b}"),
        None => "has none".to_string(),
    }
}

fn bound(b: Option<u64>) -> String {
    match b {
        Some(b) => format!("has {b}"),
        None => "has none".to_string(),
    }
}

/// Whether the coerce accepts `text` as a value of `kind` (it converts back
/// to the same text).
fn canonical(text: &str, kind: Kind) -> bool {
    match kind {
        Kind::Boolean => text == "true" || text == "false",
        Kind::Integer => text.parse::<i64>().is_ok_and(|n| n.to_string() == text),
        Kind::Number => {
            serde_json::from_str::<serde_json::Number>(text).is_ok_and(|n| n.to_string() == text)
        }
        _ => true,
    }
}

fn scalar_kind(t: crate::front::document::ScalarType) -> Kind {
    use crate::front::document::ScalarType;
    match t {
        ScalarType::String => Kind::String,
        ScalarType::Integer => Kind::Integer,
        ScalarType::Number => Kind::Number,
        ScalarType::Boolean => Kind::Boolean,
    }
}

fn oriented<'p>(dir: Direction, hub: &'p Path, spoke: &'p Path) -> (&'p Path, &'p Path) {
    match dir {
        Direction::Down => (hub, spoke),
        Direction::Up => (spoke, hub),
    }
}

fn wild(p: &Path) -> Path {
    let mut segs = p.segments().to_vec();
    segs.push(Segment::Wildcard);
    Path::from_segments(segs)
}

fn parent_of(p: &Path) -> Path {
    let segs = p.segments();
    Path::from_segments(segs[..segs.len().saturating_sub(1)].to_vec())
}

/// `metadata.labels` and `metadata.annotations`: maps whose keys a rule may
/// claim one by one, the rest of the map being the same on both sides.
fn is_string_map_of_metadata(p: &Path) -> bool {
    matches!(p.segments(), [Segment::Key(m), Segment::Key(k)]
        if m == "metadata" && (k == "labels" || k == "annotations"))
}

fn list_values(values: &[&Value]) -> String {
    values
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("`{s}`"),
            other => format!("`{other}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rule's key in the document (`rename`, `unwrap`, ...), from its origin
/// (`file:line:col (rename)`).
fn op_name<'o>(_op: &Op, origin: &'o str) -> &'o str {
    origin
        .rsplit_once(" (")
        .map(|(_, n)| n.trim_end_matches(')'))
        .unwrap_or("")
}

/// A first Katalog for the CRD `crd` (read from `crd_file`, as the Katalog's
/// `crd:` names it): the storage version is the hub, every other version a
/// spoke with no rules yet. `notes` (by spoke version) are written above the
/// spoke's empty rule list as comments: what the analysis says has no place.
pub fn init_katalog(
    crd: &crate::schema::Crd,
    crd_file: &str,
    notes: &std::collections::BTreeMap<String, Vec<String>>,
) -> String {
    let hub = crd
        .storage_version()
        .or_else(|| crd.versions.first().map(|v| v.name.as_str()))
        .unwrap_or("v1");
    let versions: Vec<&str> = crd
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let scope = match crd.scope {
        Some(crate::front::document::Scope::Cluster) => "Cluster",
        _ => "Namespaced",
    };
    let mut out = format!(
        "    - group: {}\n      kind: {}\n      plural: {}\n      scope: {scope}\n      hub: {hub}\n      versions: [{}]\n      crd: {crd_file}\n",
        crd.group,
        crd.kind,
        crd.plural,
        versions.join(", ")
    );
    let spokes: Vec<&&str> = versions.iter().filter(|v| **v != hub).collect();
    if !spokes.is_empty() {
        out.push_str("      conversion:\n");
        for v in spokes {
            out.push_str(&format!("        {v}:\n"));
            let notes = notes.get(*v).map(Vec::as_slice).unwrap_or_default();
            if notes.is_empty() {
                out.push_str("          # every field is identical in both versions\n");
            } else {
                out.push_str("          # to resolve (`katalog check` reports each; `katalog suggest` drafts rules):\n");
                for n in notes {
                    out.push_str(&format!("          # - {n}\n"));
                }
            }
            out.push_str("          []\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked_against_the_schema() {
        let node = SchemaNode::from_openapi(&json!({
            "type": "object", "required": ["a"],
            "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 5},
                           "b": {"type": "string", "enum": ["x"]}}
        }));
        assert_eq!(value_problem(&node, &json!({"a": 3, "b": "x"})), None);
        assert_eq!(
            value_problem(&node, &json!({"a": 9})).as_deref(),
            Some("`a`: the maximum is 5")
        );
        assert_eq!(
            value_problem(&node, &json!({"b": "x"})).as_deref(),
            Some("it lacks the required field `a`")
        );
        assert_eq!(
            value_problem(&node, &json!({"a": 1, "c": 1})).as_deref(),
            Some("the schema declares no field `c`")
        );
        assert_eq!(
            value_problem(&node, &json!("a")).as_deref(),
            Some("it is a string, the schema wants an object")
        );
    }

    #[test]
    fn canonical_forms_are_those_coerce_accepts() {
        assert!(canonical("8443", Kind::Integer));
        assert!(!canonical("08443", Kind::Integer));
        assert!(!canonical("+1", Kind::Integer));
        assert!(canonical("0.25", Kind::Number));
        assert!(!canonical("0.250", Kind::Number));
        assert!(canonical("true", Kind::Boolean));
        assert!(!canonical("True", Kind::Boolean));
    }

    #[test]
    fn integers_fit_numbers_but_not_the_other_way() {
        assert!(Kind::Integer.fits_into(Kind::Number));
        assert!(!Kind::Number.fits_into(Kind::Integer));
        assert!(Kind::String.fits_into(Kind::IntOrString));
        assert!(!Kind::Object.fits_into(Kind::String));
    }
}
