//! The compiled rule IR: what the engine evaluates.
//!
//! Rules live in one flat arena ([`Ir::rules`]) addressed by [`RuleId`];
//! resources and `forEach` rules hold lists of ids. Every rule records the
//! paths it reads and writes on each side, so later stages (the losslessness
//! analysis, the fast path that splices untouched JSON) know what a
//! conversion touches without running it.

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde_json::Value;

pub mod admission;

use crate::cel::CelProgram;
use crate::common::path::Path;
use crate::front::document::{ScalarType, Scope, Unmapped};
use crate::front::source::{DocPath, Loc};

/// Index of a rule in [`Ir::rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleId(pub u32);

/// Which way a conversion goes: `Down` is hub→spoke, `Up` is spoke→hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Down,
    Up,
}

/// A side of a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Hub,
    Spoke,
}

impl Side {
    /// The side a conversion in `dir` reads from.
    pub fn source_of(dir: Direction) -> Side {
        match dir {
            Direction::Down => Side::Hub,
            Direction::Up => Side::Spoke,
        }
    }
}

/// Why the compiler accepts a rule as lossless (or does not claim it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proof {
    /// The rule's two directions are inverse by construction (within the
    /// conditions the language reference lists for it).
    Invertible,
    /// CEL whose declared examples pass both ways.
    CoveredByExamples,
    /// The author acknowledged loss with `lossy: true`.
    AcknowledgedLossy,
}

/// The complete compiled Katalog.
#[derive(Debug)]
pub struct Ir {
    pub resources: Vec<ResourceIr>,
    pub rules: Vec<RuleIr>,
    /// Validation, mutation and protections.
    pub admission: admission::AdmissionIr,
    /// Names of the sources compiled, in order.
    pub sources: Vec<String>,
}

#[derive(Debug)]
pub struct ResourceIr {
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub scope: Scope,
    pub hub: String,
    pub versions: Vec<VersionIr>,
    pub stash_annotation: String,
    pub crd: Option<String>,
    /// The CRD `crd:` names, when it was read: the schema of each version.
    pub schemas: Option<std::sync::Arc<crate::schema::Crd>>,
    /// `sensitive:` paths: values no built-in admission message prints.
    pub sensitive: Vec<crate::common::path::Path>,
    pub loc: Option<Loc>,
}

#[derive(Debug)]
pub struct VersionIr {
    pub name: String,
    /// Empty for the hub and for spokes identical to it.
    pub rules: Vec<RuleId>,
    /// `stash: {remainder: true}`: what this spoke's schema cannot represent
    /// is kept in one annotation.
    pub remainder: Option<RemainderIr>,
}

/// A whole-remainder stash of one spoke.
#[derive(Debug)]
pub struct RemainderIr {
    pub annotation: String,
    /// The spoke's schema (the whole object's).
    pub schema: crate::schema::SchemaNode,
    /// Where the rule was written.
    pub origin: String,
}

/// One compiled rule. Its read and write paths are derived from its
/// operation by [`RuleIr::new`], never passed beside it.
#[derive(Debug)]
pub struct RuleIr {
    pub op: Op,
    /// Paths on the hub side: read on the way down, written on the way up.
    hub_paths: Vec<Path>,
    /// Paths on the spoke side: written on the way down, read on the way up.
    spoke_paths: Vec<Path>,
    pub proof: Proof,
    /// Where the rule was written, e.g. `crontab.yaml:12:11 (rename)`.
    pub origin: String,
    /// The rule's place in its Katalog document (`spec.resources[0].conversion.v2[1]`),
    /// so later analyses can locate what they find at its keys.
    pub at: DocPath,
}

impl RuleIr {
    /// A rule of this operation, its paths on each side derived from it.
    pub fn new(op: Op, proof: Proof, origin: String) -> RuleIr {
        RuleIr {
            hub_paths: op.paths(Side::Hub),
            spoke_paths: op.paths(Side::Spoke),
            op,
            proof,
            origin,
            at: DocPath::default(),
        }
    }

    /// The paths the rule names on `side` (relative to the element, for a
    /// rule under a `forEach`).
    pub fn paths(&self, side: Side) -> &[Path] {
        match side {
            Side::Hub => &self.hub_paths,
            Side::Spoke => &self.spoke_paths,
        }
    }

    /// Paths read when converting in `dir`.
    pub fn reads(&self, dir: Direction) -> &[Path] {
        match dir {
            Direction::Down => &self.hub_paths,
            Direction::Up => &self.spoke_paths,
        }
    }
    /// Paths written when converting in `dir`.
    pub fn writes(&self, dir: Direction) -> &[Path] {
        match dir {
            Direction::Down => &self.spoke_paths,
            Direction::Up => &self.hub_paths,
        }
    }
}

/// How a joined string is cut.
#[derive(Debug, Clone)]
pub enum Splitter {
    Separator(String),
    Pattern {
        regex: Regex,
        template: Vec<TemplatePiece>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplatePiece {
    Text(String),
    Capture(String),
}

/// An entry of a stash annotation: the annotation and the section (the
/// version that owns the field) it goes in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StashSlot {
    pub annotation: String,
    pub section: String,
}

/// Where the pieces go.
#[derive(Debug, Clone)]
pub enum PartsIr {
    List(Path),
    Fields(Vec<Path>),
    Named(Vec<(String, Path)>),
}

impl PartsIr {
    /// Where each piece goes.
    pub fn paths(&self) -> Vec<Path> {
        match self {
            PartsIr::List(p) => vec![p.clone()],
            PartsIr::Fields(ps) => ps.clone(),
            PartsIr::Named(ps) => ps.iter().map(|(_, p)| p.clone()).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WrapHow {
    Key(String),
    List,
}

/// One operation. Each is described by its hub form and its spoke form; the
/// evaluator derives both directions.
#[derive(Debug)]
pub enum Op {
    /// `hub` on the hub is `spoke` on the spoke.
    Move { hub: Path, spoke: Path },
    /// A field only `side` has, kept in an annotation while the object is on
    /// the other side. `section` is the version that owns the field.
    Stash {
        side: Side,
        path: Path,
        annotation: String,
        section: String,
        default: Option<Value>,
    },
    /// A hub-only field filled on the way up; dropped on the way down.
    Default { hub: Path, value: Value },
    /// A field only `side` has, set to `value` when converting to that side,
    /// dropped when converting away.
    Constant {
        side: Side,
        path: Path,
        value: Value,
    },
    /// A field only `side` has, dropped when converting away from it.
    Delete { side: Side, path: Path },
    EnumMap {
        hub: Path,
        spoke: Path,
        to_spoke: BTreeMap<String, String>,
        to_hub: BTreeMap<String, String>,
        unmapped: Unmapped,
    },
    Coerce {
        hub: Path,
        spoke: Path,
        hub_type: ScalarType,
        spoke_type: ScalarType,
    },
    /// `joined` (on `joined_side`) is one string; `parts` (other side) its pieces.
    Split {
        joined_side: Side,
        joined: Path,
        parts: PartsIr,
        splitter: Splitter,
        placeholder: Option<String>,
        /// Where the string of placeholders only is recorded while the object
        /// is on the parts side (every part is absent there, so nothing else
        /// says it was there). Set whenever `placeholder` is.
        marker: Option<StashSlot>,
    },
    /// `plain` (on the other side) is `wrapped` (on `wrapped_side`) unwrapped.
    Wrap {
        wrapped_side: Side,
        plain: Path,
        wrapped: Path,
        how: WrapHow,
    },
    /// `list` (on `list_side`) is a list of objects; `map` the same keyed by `key`.
    ListMap {
        list_side: Side,
        list: Path,
        map: Path,
        key: String,
    },
    ForEach {
        hub: Path,
        spoke: Path,
        rules: Vec<RuleId>,
    },
    Cel {
        hub: Path,
        spoke: Path,
        to_spoke: CelProgram,
        to_hub: CelProgram,
        /// The declared (hub, spoke) example pairs, each shown to convert
        /// both ways; the analysis checks each side against its schema.
        examples: Vec<(Value, Value)>,
    },
}

impl Op {
    /// The paths this operation names on `side`: what it reads when a
    /// conversion starts from that side, and writes when it ends there.
    /// (The stash annotations a rule keeps are on neither side: see
    /// [`crate::conversion::touch`].)
    pub fn paths(&self, side: Side) -> Vec<Path> {
        let on = |s: Side, p: &Path| if s == side { vec![p.clone()] } else { vec![] };
        let pick = |hub: &Path, spoke: &Path| match side {
            Side::Hub => vec![hub.clone()],
            Side::Spoke => vec![spoke.clone()],
        };
        match self {
            Op::Move { hub, spoke }
            | Op::EnumMap { hub, spoke, .. }
            | Op::Coerce { hub, spoke, .. }
            | Op::ForEach { hub, spoke, .. }
            | Op::Cel { hub, spoke, .. } => pick(hub, spoke),
            Op::Stash { side: s, path, .. }
            | Op::Constant { side: s, path, .. }
            | Op::Delete { side: s, path } => on(*s, path),
            Op::Default { hub, .. } => on(Side::Hub, hub),
            Op::Split {
                joined_side,
                joined,
                parts,
                ..
            } => {
                if *joined_side == side {
                    vec![joined.clone()]
                } else {
                    parts.paths()
                }
            }
            Op::Wrap {
                wrapped_side,
                plain,
                wrapped,
                ..
            } => {
                if *wrapped_side == side {
                    vec![wrapped.clone()]
                } else {
                    vec![plain.clone()]
                }
            }
            Op::ListMap {
                list_side,
                list,
                map,
                ..
            } => {
                if *list_side == side {
                    vec![list.clone()]
                } else {
                    vec![map.clone()]
                }
            }
        }
    }
}

impl Ir {
    pub fn rule(&self, id: RuleId) -> &RuleIr {
        &self.rules[id.0 as usize]
    }

    /// The resource with this group and kind.
    pub fn resource(&self, group: &str, kind: &str) -> Option<&ResourceIr> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.kind == kind)
    }
}

impl ResourceIr {
    pub fn version(&self, name: &str) -> Option<&VersionIr> {
        self.versions.iter().find(|v| v.name == name)
    }
    pub fn served(&self) -> impl Iterator<Item = &str> {
        self.versions.iter().map(|v| v.name.as_str())
    }
}

fn side_name(s: Side) -> &'static str {
    match s {
        Side::Hub => "hub",
        Side::Spoke => "spoke",
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Move { hub, spoke } => write!(f, "move hub:{hub} <-> spoke:{spoke}"),
            Op::Stash {
                side,
                path,
                annotation,
                section,
                default,
            } => {
                write!(
                    f,
                    "stash {}:{path} in annotation {annotation:?} section {section:?}",
                    side_name(*side)
                )?;
                if let Some(d) = default {
                    write!(f, " default {d}")?;
                }
                Ok(())
            }
            Op::Default { hub, value } => write!(f, "default hub:{hub} = {value}"),
            Op::Constant { side, path, value } => {
                write!(f, "constant {}:{path} = {value}", side_name(*side))
            }
            Op::Delete { side, path } => write!(f, "delete {}:{path}", side_name(*side)),
            Op::EnumMap {
                hub,
                spoke,
                to_spoke,
                unmapped,
                ..
            } => write!(
                f,
                "enumMap hub:{hub} <-> spoke:{spoke} {to_spoke:?} unmapped={unmapped:?}"
            ),
            Op::Coerce {
                hub,
                spoke,
                hub_type,
                spoke_type,
            } => write!(
                f,
                "coerce hub:{hub} ({hub_type:?}) <-> spoke:{spoke} ({spoke_type:?})"
            ),
            Op::Split {
                joined_side,
                joined,
                parts,
                splitter,
                placeholder,
                ..
            } => {
                write!(f, "split {}:{joined} <-> ", side_name(*joined_side))?;
                match parts {
                    PartsIr::List(p) => write!(f, "list {p}")?,
                    PartsIr::Fields(ps) => {
                        let v: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
                        write!(f, "fields [{}]", v.join(", "))?
                    }
                    PartsIr::Named(ps) => {
                        let v: Vec<String> = ps.iter().map(|(n, p)| format!("{n}={p}")).collect();
                        write!(f, "captures [{}]", v.join(", "))?
                    }
                }
                match splitter {
                    Splitter::Separator(s) => write!(f, " by {s:?}")?,
                    Splitter::Pattern { regex, .. } => write!(f, " by /{}/", regex.as_str())?,
                }
                if let Some(p) = placeholder {
                    write!(f, " placeholder {p:?}")?;
                }
                Ok(())
            }
            Op::Wrap {
                wrapped_side,
                plain,
                wrapped,
                how,
            } => {
                let how = match how {
                    WrapHow::Key(k) => format!("under key {k:?}"),
                    WrapHow::List => "as single-element list".into(),
                };
                write!(
                    f,
                    "wrap {plain} <-> {}:{wrapped} {how}",
                    side_name(*wrapped_side)
                )
            }
            Op::ListMap {
                list_side,
                list,
                map,
                key,
            } => write!(
                f,
                "listMap {}:{list} (list) <-> {map} (map by {key:?})",
                side_name(*list_side)
            ),
            Op::ForEach { hub, spoke, rules } => {
                write!(
                    f,
                    "forEach hub:{hub}[*] <-> spoke:{spoke}[*] rules {rules:?}"
                )
            }
            Op::Cel {
                hub,
                spoke,
                to_spoke,
                to_hub,
                ..
            } => write!(
                f,
                "cel hub:{hub} <-> spoke:{spoke} toSpoke `{}` toHub `{}`",
                to_spoke.source(),
                to_hub.source()
            ),
        }
    }
}

impl fmt::Display for Ir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# sources: {}", self.sources.join(", "))?;
        for r in &self.resources {
            writeln!(
                f,
                "resource {}/{} plural={} scope={:?} hub={} stash={:?}",
                r.group, r.kind, r.plural, r.scope, r.hub, r.stash_annotation
            )?;
            for v in &r.versions {
                if v.name == r.hub {
                    writeln!(f, "  version {} (hub)", v.name)?;
                    continue;
                }
                writeln!(f, "  version {} ({} rules)", v.name, v.rules.len())?;
                for id in &v.rules {
                    self.fmt_rule(f, *id, 4)?;
                }
            }
        }
        self.fmt_admission(f)
    }
}

impl Ir {
    fn fmt_admission(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.admission;
        for (name, prog) in &a.variables {
            writeln!(f, "variable {name} = `{}`", prog.source())?;
        }
        // As written: `v1/pods` for the core group.
        let pattern = |r: &admission::ResourcePattern| {
            let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "*".into());
            match r.group.as_deref() {
                Some("") => format!("{}/{}", part(&r.version), part(&r.resource)),
                _ => format!(
                    "{}/{}/{}",
                    part(&r.group),
                    part(&r.version),
                    part(&r.resource)
                ),
            }
        };
        let resources = |m: &admission::MatchIr| {
            m.resources
                .iter()
                .map(pattern)
                .collect::<Vec<_>>()
                .join(", ")
        };
        // Where else a rule applies: declared resources at the version it is
        // written against, pod templates of controllers (autogen).
        let extra = |m: &admission::MatchIr| {
            let mut out = String::new();
            for t in &m.declared {
                out.push_str(&format!(
                    "\n    at version {} of {}/{} (other versions converted)",
                    t.version, t.group, t.plural
                ));
            }
            for (r, template) in m.pod_controllers.iter() {
                out.push_str(&format!(
                    "\n    also the pod template of {} at {template}",
                    pattern(r)
                ));
            }
            out
        };
        let rules = !a.validations.is_empty() || !a.mutations.is_empty();
        if rules && !a.excluded_namespaces.is_empty() {
            writeln!(
                f,
                "excluded namespaces [{}]{}",
                a.excluded_namespaces.join(", "),
                if a.exclude_engine_namespace {
                    " and the engine's own"
                } else {
                    ""
                }
            )?;
        }
        for v in &a.validations {
            let ops: Vec<&str> = v.matcher.operations.iter().map(|o| o.as_str()).collect();
            let paths: Vec<String> = v.paths.iter().map(|p| p.to_string()).collect();
            writeln!(
                f,
                "validation {} ({:?}) on [{}] ops [{}] reads [{}] from {}{}",
                v.name,
                v.action,
                resources(&v.matcher),
                ops.join(", "),
                paths.join(", "),
                v.origin,
                extra(&v.matcher)
            )?;
        }
        for m in &a.mutations {
            let writes: Vec<String> = m.writes().iter().map(|p| p.to_string()).collect();
            writeln!(
                f,
                "mutation {} on [{}] writes [{}] from {}{}",
                m.name,
                resources(&m.matcher),
                writes.join(", "),
                m.origin,
                extra(&m.matcher)
            )?;
        }
        let s = &a.security;
        if s.deletion.enabled || s.protected.iter().any(|r| r.deletion || r.strict_mode) {
            writeln!(
                f,
                "security label={:?} deletion={} crds={} engine={:?}",
                s.deletion.label, s.deletion.enabled, s.deletion.crds, s.deletion.engine
            )?;
        }
        for r in &s.protected {
            if r.deletion
                || r.strict_mode
                || !r.allowed_namespaces.is_empty()
                || !r.restricted_namespaces.is_empty()
            {
                writeln!(
                    f,
                    "protect {}/{} deletion={} strictMode={} allowed={:?} restricted={:?}",
                    r.group,
                    r.kind,
                    r.deletion,
                    r.strict_mode,
                    r.allowed_namespaces,
                    r.restricted_namespaces
                )?;
            }
        }
        Ok(())
    }

    fn fmt_rule(&self, f: &mut fmt::Formatter<'_>, id: RuleId, indent: usize) -> fmt::Result {
        let rule = self.rule(id);
        let pad = " ".repeat(indent);
        let list = |ps: &[Path]| {
            ps.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(f, "{pad}#{} {}", id.0, rule.op)?;
        writeln!(
            f,
            "{pad}   hub paths [{}] spoke paths [{}] proof {:?} from {}",
            list(&rule.hub_paths),
            list(&rule.spoke_paths),
            rule.proof,
            rule.origin
        )?;
        if let Op::ForEach { rules, .. } = &rule.op {
            for nested in rules {
                self.fmt_rule(f, *nested, indent + 4)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Path {
        Path::parse(text).unwrap()
    }

    fn shown(paths: &[Path]) -> Vec<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_rule_derives_its_paths_on_each_side_from_its_operation() {
        let cases = [
            (
                Op::Move {
                    hub: p("spec.a"),
                    spoke: p("spec.b"),
                },
                vec!["spec.a"],
                vec!["spec.b"],
            ),
            (
                Op::Stash {
                    side: Side::Hub,
                    path: p("spec.x"),
                    annotation: "katalog.dev/stash".into(),
                    section: "v1".into(),
                    default: None,
                },
                vec!["spec.x"],
                vec![],
            ),
            (
                Op::Delete {
                    side: Side::Spoke,
                    path: p("spec.y"),
                },
                vec![],
                vec!["spec.y"],
            ),
            (
                Op::Wrap {
                    wrapped_side: Side::Spoke,
                    plain: p("spec.image"),
                    wrapped: p("spec.container"),
                    how: WrapHow::Key("image".into()),
                },
                vec!["spec.image"],
                vec!["spec.container"],
            ),
            (
                Op::Split {
                    joined_side: Side::Hub,
                    joined: p("spec.window"),
                    parts: PartsIr::Fields(vec![p("spec.start"), p("spec.end")]),
                    splitter: Splitter::Separator("-".into()),
                    placeholder: None,
                    marker: None,
                },
                vec!["spec.window"],
                vec!["spec.start", "spec.end"],
            ),
            (
                Op::ListMap {
                    list_side: Side::Spoke,
                    list: p("spec.ports"),
                    map: p("spec.portMap"),
                    key: "name".into(),
                },
                vec!["spec.portMap"],
                vec!["spec.ports"],
            ),
        ];
        for (op, hub, spoke) in cases {
            let shown_op = op.to_string();
            let rule = RuleIr::new(op, Proof::Invertible, "t.yaml:1:1".into());
            assert_eq!(shown(rule.paths(Side::Hub)), hub, "{shown_op}");
            assert_eq!(shown(rule.paths(Side::Spoke)), spoke, "{shown_op}");
            assert_eq!(rule.reads(Direction::Down), rule.paths(Side::Hub));
            assert_eq!(rule.writes(Direction::Down), rule.paths(Side::Spoke));
        }
    }
}
