//! One conversion rule lowered to its [`Op`] and [`Proof`]: the arm of
//! each rule kind (`Compiler::rule`), and the parts of the kinds that need
//! more than an arm (`wrap`, `listMap`, `cel`, split/join parts and their
//! splitter).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cel::CelProgram;
use crate::common::names::{anchored_regex, qualified_name_problem};
use crate::common::path::{Path, Segment};
use crate::error::ErrorKind;
use crate::front::document::{CelRule, ListMapRule, Parts, Rule, ScalarType, WrapRule};
use crate::front::source::DocPath;
use crate::ir::{Op, PartsIr, Proof, RuleId, Side, Splitter, StashSlot, TemplatePiece, WrapHow};

use super::{Compiler, Scope, parse_template};

impl Compiler<'_> {
    pub(super) fn rule(
        &mut self,
        scope: &Scope,
        rule: &Rule,
        rat: &DocPath,
        defaults: &BTreeMap<String, (Value, usize)>,
    ) -> Option<RuleId> {
        let name = rule.kind_name();
        let at = rat.key(name);
        let origin = format!("{} ({name})", scope.doc.locate(rat));
        match rule {
            Rule::Rename(r) => {
                let hub = self.path(scope, &r.hub, &at.key("hub"), Side::Hub);
                let spoke = self.path(scope, &r.spoke, &at.key("spoke"), Side::Spoke);
                let (hub, spoke) = (hub?, spoke?);
                let proof = if r.lossy {
                    Proof::AcknowledgedLossy
                } else {
                    Proof::Invertible
                };
                Some(self.push(
                    Op::Move {
                        hub: hub.clone(),
                        spoke: spoke.clone(),
                    },
                    proof,
                    origin,
                ))
            }
            Rule::Stash(s) if s.remainder => {
                // Compiled with its version (see `remainder`); here only
                // where it may not stand.
                if scope.nested {
                    self.error(
                        scope.doc,
                        &at.key("remainder"),
                        ErrorKind::Shape,
                        "`remainder: true` keeps what a whole spoke cannot represent; it cannot stand inside `forEach`",
                    )
                    .help = Some("move it to the version's rule list".into());
                } else if s.hub.is_some() || s.spoke.is_some() {
                    self.error(
                        scope.doc,
                        &at,
                        ErrorKind::Shape,
                        "`remainder: true` stashes every field the spoke's schema lacks; it takes no `hub` or `spoke`",
                    );
                }
                None
            }
            Rule::Stash(s) => {
                let (side, path) = self.one_side(scope, &at, &s.hub, &s.spoke)?;
                let annotation = s
                    .annotation
                    .clone()
                    .unwrap_or_else(|| scope.annotation.to_string());
                if let Some(problem) = qualified_name_problem(&annotation) {
                    self.error(
                        scope.doc,
                        &at.key("annotation"),
                        ErrorKind::Invalid,
                        format!("`{annotation}` is not a valid annotation key: {problem}"),
                    );
                    return None;
                }
                let (section, default) = match side {
                    Side::Hub => (
                        scope.hub_version.to_string(),
                        defaults.get(&path.to_string()).map(|(v, _)| v.clone()),
                    ),
                    Side::Spoke => (scope.spoke_version.to_string(), None),
                };
                let proof = if s.lossy {
                    Proof::AcknowledgedLossy
                } else {
                    Proof::Invertible
                };
                Some(self.push(
                    Op::Stash {
                        side,
                        path,
                        annotation,
                        section,
                        default,
                    },
                    proof,
                    origin,
                ))
            }
            Rule::Default(d) => {
                let hub = self.path(scope, &d.hub, &at.key("hub"), Side::Hub)?;
                if !d.lossy {
                    self.error(
                        scope.doc,
                        &at,
                        ErrorKind::Lossy,
                        format!("this rule loses data: a hub value of `{hub}` other than the default does not survive a round trip through the spoke"),
                    )
                    .help = Some(format!(
                        "add a `stash: {{hub: {hub}}}` rule to keep the value (then the default applies only to objects created at this version), or `lossy: true`"
                    ));
                    return None;
                }
                Some(self.push(
                    Op::Default {
                        hub: hub.clone(),
                        value: d.value.clone(),
                    },
                    Proof::AcknowledgedLossy,
                    origin,
                ))
            }
            Rule::Constant(k) => {
                let (side, path) = self.one_side(scope, &at, &k.hub, &k.spoke)?;
                self.require_lossy(
                    scope,
                    &at,
                    k.lossy,
                    &format!("whatever `{path}` held is replaced by the constant on the way back"),
                )?;
                Some(self.push(
                    Op::Constant {
                        side,
                        path,
                        value: k.value.clone(),
                    },
                    Proof::AcknowledgedLossy,
                    origin,
                ))
            }
            Rule::Delete(k) => {
                let (side, path) = self.one_side(scope, &at, &k.hub, &k.spoke)?;
                self.require_lossy(
                    scope,
                    &at,
                    k.lossy,
                    &format!("`{path}` is dropped without being kept; use `stash` to keep it"),
                )?;
                Some(self.push(Op::Delete { side, path }, Proof::AcknowledgedLossy, origin))
            }
            Rule::EnumMap(e) => {
                let hub = self.path(scope, &e.hub, &at.key("hub"), Side::Hub);
                let spoke = self.path(scope, &e.spoke, &at.key("spoke"), Side::Spoke);
                let mut to_hub: BTreeMap<String, String> = BTreeMap::new();
                let mut ok = true;
                for (h, s) in &e.map {
                    if let Some(prev) = to_hub.insert(s.clone(), h.clone()) {
                        ok = false;
                        if !e.lossy {
                            self.error(scope.doc, &at.key("map").key(h.clone()), ErrorKind::NotOneToOne, format!("`{h}` and `{prev}` both map to `{s}`, so `{s}` cannot be mapped back"))
                                .help = Some("an enum map must be one-to-one; give each hub value its own spoke value".into());
                        }
                    }
                }
                if e.map.is_empty() {
                    self.error(
                        scope.doc,
                        &at.key("map"),
                        ErrorKind::Invalid,
                        "the map is empty",
                    );
                    return None;
                }
                let (hub, spoke) = (hub?, spoke?);
                if !ok && !e.lossy {
                    return None;
                }
                let proof = if e.lossy {
                    Proof::AcknowledgedLossy
                } else {
                    Proof::Invertible
                };
                Some(self.push(
                    Op::EnumMap {
                        hub: hub.clone(),
                        spoke: spoke.clone(),
                        to_spoke: e.map.clone(),
                        to_hub,
                        unmapped: e.unmapped,
                    },
                    proof,
                    origin,
                ))
            }
            Rule::Coerce(k) => {
                let hub = self.path(scope, &k.hub, &at.key("hub"), Side::Hub);
                let spoke = match &k.spoke {
                    Some(s) => self.path(scope, s, &at.key("spoke"), Side::Spoke),
                    None => hub.clone(),
                };
                use ScalarType::*;
                let supported = matches!(
                    (k.hub_type, k.spoke_type),
                    (String, Integer | Number | Boolean)
                        | (Integer | Number | Boolean, String)
                        | (Integer, Number)
                        | (Number, Integer)
                );
                if !supported {
                    let msg = if k.hub_type == k.spoke_type {
                        "both sides have the same type: nothing to coerce".to_string()
                    } else {
                        format!(
                            "cannot coerce between {:?} and {:?}",
                            k.hub_type, k.spoke_type
                        )
                        .to_lowercase()
                    };
                    self.error(scope.doc, &at.key("spokeType"), ErrorKind::Invalid, msg)
                        .help = Some("coerce between string and integer / number / boolean, or between integer and number".into());
                    return None;
                }
                let (hub, spoke) = (hub?, spoke?);
                let proof = if k.lossy {
                    Proof::AcknowledgedLossy
                } else {
                    Proof::Invertible
                };
                Some(self.push(
                    Op::Coerce {
                        hub: hub.clone(),
                        spoke: spoke.clone(),
                        hub_type: k.hub_type,
                        spoke_type: k.spoke_type,
                    },
                    proof,
                    origin,
                ))
            }
            Rule::Split(s) => self.split(
                scope,
                &at,
                SplitDoc {
                    joined_side: Side::Hub,
                    joined: &s.hub,
                    parts: &s.spoke,
                    separator: &s.separator,
                    pattern: &s.pattern,
                    template: &s.template,
                    placeholder: &s.placeholder,
                    lossy: s.lossy,
                },
                origin,
            ),
            Rule::Join(s) => self.split(
                scope,
                &at,
                SplitDoc {
                    joined_side: Side::Spoke,
                    joined: &s.spoke,
                    parts: &s.hub,
                    separator: &s.separator,
                    pattern: &s.pattern,
                    template: &s.template,
                    placeholder: &s.placeholder,
                    lossy: s.lossy,
                },
                origin,
            ),
            Rule::Wrap(w) => self.wrap(scope, w, &at, Side::Spoke, origin),
            Rule::Unwrap(w) => self.wrap(scope, w, &at, Side::Hub, origin),
            Rule::ListToMap(l) => self.list_map(scope, l, &at, Side::Hub, origin),
            Rule::MapToList(l) => self.list_map(scope, l, &at, Side::Spoke, origin),
            Rule::ForEach(f) => {
                let hub = self.path(scope, &f.hub, &at.key("hub"), Side::Hub);
                let spoke = match &f.spoke {
                    Some(s) => self.path(scope, s, &at.key("spoke"), Side::Spoke),
                    None => hub.clone(),
                };
                let each = |base: &Path, p: &Option<Path>| {
                    p.as_ref().map(|p| {
                        let mut segs = base.join(p).segments().to_vec();
                        segs.push(Segment::Wildcard);
                        Path::from_segments(segs)
                    })
                };
                let (hub_base, spoke_base) = (
                    each(scope.hub_base, &hub).unwrap_or_default(),
                    each(scope.spoke_base, &spoke).unwrap_or_default(),
                );
                // An element path is checked only when its list path is.
                let checked = hub.is_some() && spoke.is_some();
                let inner = Scope {
                    nested: true,
                    indices: None,
                    crd: scope.crd.filter(|_| checked),
                    hub_base: &hub_base,
                    spoke_base: &spoke_base,
                    ..*scope
                };
                let rules = self.rule_list(&inner, &f.rules, &at.key("rules"));
                let (hub, spoke) = (hub?, spoke?);
                if f.rules.is_empty() {
                    self.error(
                        scope.doc,
                        &at.key("rules"),
                        ErrorKind::Invalid,
                        "forEach needs at least one rule",
                    );
                    return None;
                }
                let proof = if f.lossy {
                    Proof::AcknowledgedLossy
                } else {
                    Proof::Invertible
                };
                Some(self.push(
                    Op::ForEach {
                        hub: hub.clone(),
                        spoke: spoke.clone(),
                        rules,
                    },
                    proof,
                    origin,
                ))
            }
            Rule::Cel(c) => self.cel(scope, c, &at, origin),
        }
    }

    fn wrap(
        &mut self,
        scope: &Scope,
        w: &WrapRule,
        at: &DocPath,
        wrapped_side: Side,
        origin: String,
    ) -> Option<RuleId> {
        let before = self.diags.len();
        let hub = self.path(scope, &w.hub, &at.key("hub"), Side::Hub);
        let spoke = self.path(scope, &w.spoke, &at.key("spoke"), Side::Spoke);
        let paths_ok = self.diags.len() == before;
        let how = match (&w.key, w.list) {
            (Some(k), false) => Some(WrapHow::Key(k.clone())),
            (None, true) => Some(WrapHow::List),
            _ => {
                self.error(scope.doc, at, ErrorKind::Shape, "give exactly one of `key: NAME` (wrap in an object) or `list: true` (wrap in a one-element list)");
                None
            }
        };
        let (hub, spoke, how) = (hub?, spoke?, how?);
        let (plain, wrapped) = match wrapped_side {
            Side::Spoke => (hub.clone(), spoke.clone()),
            Side::Hub => (spoke.clone(), hub.clone()),
        };
        // The wrapper's key (or element) must exist in the wrapped side's schema too.
        if paths_ok {
            let (inner, key_at) = match &how {
                WrapHow::Key(k) => (wrapped.child(k.clone()), at.key("key")),
                WrapHow::List => (wrapped.index(0), at.key("list")),
            };
            self.check_schema(scope, &inner, &key_at, wrapped_side);
        }
        let proof = if w.lossy {
            Proof::AcknowledgedLossy
        } else {
            Proof::Invertible
        };
        Some(self.push(
            Op::Wrap {
                wrapped_side,
                plain,
                wrapped,
                how,
            },
            proof,
            origin,
        ))
    }

    fn list_map(
        &mut self,
        scope: &Scope,
        l: &ListMapRule,
        at: &DocPath,
        list_side: Side,
        origin: String,
    ) -> Option<RuleId> {
        let before = self.diags.len();
        let hub = self.path(scope, &l.hub, &at.key("hub"), Side::Hub);
        let spoke = self.path(scope, &l.spoke, &at.key("spoke"), Side::Spoke);
        let paths_ok = self.diags.len() == before;
        if l.key.is_empty() {
            self.error(
                scope.doc,
                &at.key("key"),
                ErrorKind::Invalid,
                "the key field name may not be empty",
            );
            return None;
        }
        let (hub, spoke) = (hub?, spoke?);
        let (list, map) = match list_side {
            Side::Hub => (hub.clone(), spoke.clone()),
            Side::Spoke => (spoke.clone(), hub.clone()),
        };
        // Every element of the list holds the key field.
        if paths_ok {
            let mut element = list.segments().to_vec();
            element.push(Segment::Wildcard);
            let key = Path::from_segments(element).child(l.key.clone());
            self.check_schema(scope, &key, &at.key("key"), list_side);
        }
        let proof = if l.lossy {
            Proof::AcknowledgedLossy
        } else {
            Proof::Invertible
        };
        Some(self.push(
            Op::ListMap {
                list_side,
                list,
                map,
                key: l.key.clone(),
            },
            proof,
            origin,
        ))
    }

    fn cel(&mut self, scope: &Scope, c: &CelRule, at: &DocPath, origin: String) -> Option<RuleId> {
        let hub = self.path(scope, &c.hub, &at.key("hub"), Side::Hub);
        let spoke = self.path(scope, &c.spoke, &at.key("spoke"), Side::Spoke);
        let compile =
            |this: &mut Self, expr: &str, key: &'static str| match CelProgram::compile(expr) {
                // A conversion expression sees `self` (the value) and `object`.
                Ok(p) => match p.unbound_identifiers(&["self", "object"]).first() {
                    None => Some(p),
                    Some(name) => {
                        let help = crate::error::did_you_mean(name, ["self", "object"])
                            .map(|s| format!("did you mean `{s}`?"))
                            .unwrap_or_else(|| {
                                "a conversion expression sees `self` (the value) and `object`"
                                    .into()
                            });
                        this.error(
                            scope.doc,
                            &at.key(key),
                            ErrorKind::Cel,
                            format!("`{name}` is not defined in this CEL expression"),
                        )
                        .help = Some(help);
                        None
                    }
                },
                Err(e) => {
                    this.error(scope.doc, &at.key(key), ErrorKind::Cel, e.to_string());
                    None
                }
            };
        let to_spoke = compile(self, &c.to_spoke, "toSpoke");
        let to_hub = compile(self, &c.to_hub, "toHub");
        let (hub, spoke, to_spoke, to_hub) = (hub?, spoke?, to_spoke?, to_hub?);
        let mut failed = false;
        for (i, ex) in c.examples.iter().enumerate() {
            let eat = at.key("examples").index(i);
            for (prog, input, want, dir) in [
                (&to_spoke, &ex.hub, &ex.spoke, "toSpoke"),
                (&to_hub, &ex.spoke, &ex.hub, "toHub"),
            ] {
                match prog.eval(&[("self", input), ("object", &Value::Null)]) {
                    Ok(got) if crate::common::json::json_eq(&got, want) => {}
                    Ok(got) => {
                        failed = true;
                        self.error(
                            scope.doc,
                            &eat,
                            ErrorKind::Cel,
                            format!("example {i}: {dir} of {input} gives {got}, expected {want}"),
                        );
                    }
                    Err(e) => {
                        failed = true;
                        self.error(scope.doc, &eat, ErrorKind::Cel, format!("example {i}: {e}"));
                    }
                }
            }
        }
        if failed {
            return None;
        }
        let proof = if c.lossy {
            Proof::AcknowledgedLossy
        } else if !c.examples.is_empty() {
            Proof::CoveredByExamples
        } else {
            self.error(
                scope.doc,
                at,
                ErrorKind::Lossy,
                "a cel rule is unproven: nothing shows `toHub` undoes `toSpoke`",
            )
            .help = Some(
                "add `examples:` (hub/spoke pairs checked both ways), or `lossy: true`".into(),
            );
            return None;
        };
        Some(
            self.push(
                Op::Cel {
                    hub: hub.clone(),
                    spoke: spoke.clone(),
                    to_spoke,
                    to_hub,
                    examples: c
                        .examples
                        .iter()
                        .map(|e| (e.hub.clone(), e.spoke.clone()))
                        .collect(),
                },
                proof,
                origin,
            ),
        )
    }

    /// A `split` (the joined string on the hub) or a `join` (on the
    /// spoke): one op, `Op::Split`, named by the side that holds the string;
    /// the placeholder's marker goes in the stash section of that side's
    /// version.
    fn split(
        &mut self,
        scope: &Scope,
        at: &DocPath,
        s: SplitDoc,
        origin: String,
    ) -> Option<RuleId> {
        let (joined_key, parts_key, parts_side, section) = match s.joined_side {
            Side::Hub => ("hub", "spoke", Side::Spoke, scope.hub_version),
            Side::Spoke => ("spoke", "hub", Side::Hub, scope.spoke_version),
        };
        let joined = self.path(scope, s.joined, &at.key(joined_key), s.joined_side);
        let parts = self.parts(scope, s.parts, &at.key(parts_key), parts_side);
        let splitter = self.splitter(scope, at, s.separator, s.pattern, s.template);
        let (joined, parts, splitter) = (joined?, parts?, splitter?);
        self.check_parts_fit(scope, &at.key(parts_key), &parts, &splitter)?;
        let proof = if s.lossy {
            Proof::AcknowledgedLossy
        } else {
            Proof::Invertible
        };
        Some(self.push(
            Op::Split {
                joined_side: s.joined_side,
                joined,
                parts,
                splitter,
                placeholder: s.placeholder.clone(),
                marker: s.placeholder.as_ref().map(|_| StashSlot {
                    annotation: scope.annotation.to_string(),
                    section: section.to_string(),
                }),
            },
            proof,
            origin,
        ))
    }

    fn parts(&mut self, scope: &Scope, parts: &Parts, at: &DocPath, side: Side) -> Option<PartsIr> {
        match parts {
            Parts::List(p) => Some(PartsIr::List(self.path(scope, p, at, side)?)),
            Parts::Fields(ps) => {
                if ps.is_empty() {
                    self.error(scope.doc, at, ErrorKind::Invalid, "name at least one field");
                    return None;
                }
                let mut out = Vec::new();
                let mut ok = true;
                for (i, p) in ps.iter().enumerate() {
                    match self.path(scope, p, &at.index(i), side) {
                        Some(p) => out.push(p),
                        None => ok = false,
                    }
                }
                ok.then_some(PartsIr::Fields(out))
            }
            Parts::Named(m) => {
                let mut out = Vec::new();
                let mut ok = true;
                for (name, p) in m {
                    match self.path(scope, p, &at.key(name.clone()), side) {
                        Some(p) => out.push((name.clone(), p)),
                        None => ok = false,
                    }
                }
                ok.then_some(PartsIr::Named(out))
            }
        }
    }

    fn splitter(
        &mut self,
        scope: &Scope,
        at: &DocPath,
        separator: &Option<String>,
        pattern: &Option<String>,
        template: &Option<String>,
    ) -> Option<Splitter> {
        match (separator, pattern) {
            (Some(sep), None) => {
                if sep.is_empty() {
                    self.error(
                        scope.doc,
                        &at.key("separator"),
                        ErrorKind::Invalid,
                        "the separator may not be empty",
                    );
                    return None;
                }
                if template.is_some() {
                    self.error(
                        scope.doc,
                        &at.key("template"),
                        ErrorKind::Invalid,
                        "`template` goes with `pattern`, not `separator`",
                    );
                    return None;
                }
                Some(Splitter::Separator(sep.clone()))
            }
            (None, Some(pat)) => {
                let regex = match anchored_regex(pat) {
                    Ok(r) => r,
                    Err(e) => {
                        self.error(
                            scope.doc,
                            &at.key("pattern"),
                            ErrorKind::Pattern,
                            e.to_string(),
                        );
                        return None;
                    }
                };
                let Some(t) = template else {
                    self.error(
                        scope.doc,
                        at,
                        ErrorKind::Shape,
                        "a `pattern` needs a `template` to join the pieces back",
                    )
                    .help = Some("e.g. `template: \"{host}:{port}\"`".into());
                    return None;
                };
                let pieces = match parse_template(t) {
                    Ok(p) => p,
                    Err(e) => {
                        self.error(scope.doc, &at.key("template"), ErrorKind::Pattern, e);
                        return None;
                    }
                };
                let names: BTreeSet<&str> = regex.capture_names().flatten().collect();
                let used: BTreeSet<&str> = pieces
                    .iter()
                    .filter_map(|p| match p {
                        TemplatePiece::Capture(n) => Some(n.as_str()),
                        TemplatePiece::Text(_) => None,
                    })
                    .collect();
                if names != used {
                    self.error(
                        scope.doc,
                        &at.key("template"),
                        ErrorKind::Pattern,
                        format!(
                            "the template uses {{{}}} but the pattern captures {{{}}}",
                            used.into_iter().collect::<Vec<_>>().join(", "),
                            names.into_iter().collect::<Vec<_>>().join(", ")
                        ),
                    )
                    .help = Some("every named capture must appear in the template exactly as `{name}`, and nothing else".into());
                    return None;
                }
                Some(Splitter::Pattern {
                    regex,
                    template: pieces,
                })
            }
            _ => {
                self.error(
                    scope.doc,
                    at,
                    ErrorKind::Shape,
                    "give exactly one of `separator` or `pattern` (with `template`)",
                );
                None
            }
        }
    }

    fn check_parts_fit(
        &mut self,
        scope: &Scope,
        at: &DocPath,
        parts: &PartsIr,
        splitter: &Splitter,
    ) -> Option<()> {
        match (splitter, parts) {
            (Splitter::Separator(_), PartsIr::List(_) | PartsIr::Fields(_)) => Some(()),
            (Splitter::Separator(_), PartsIr::Named(_)) => {
                self.error(
                    scope.doc,
                    at,
                    ErrorKind::Shape,
                    "with a `separator`, give a list of paths (or one path for a list)",
                )
                .help = Some("named pieces need `pattern` with named captures".into());
                None
            }
            (Splitter::Pattern { regex, .. }, PartsIr::Named(named)) => {
                let names: BTreeSet<&str> = regex.capture_names().flatten().collect();
                let given: BTreeSet<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
                if names != given {
                    self.error(
                        scope.doc,
                        at,
                        ErrorKind::Pattern,
                        format!(
                            "the pieces are named {{{}}} but the pattern captures {{{}}}",
                            given.into_iter().collect::<Vec<_>>().join(", "),
                            names.into_iter().collect::<Vec<_>>().join(", ")
                        ),
                    );
                    return None;
                }
                Some(())
            }
            (Splitter::Pattern { .. }, _) => {
                self.error(
                    scope.doc,
                    at,
                    ErrorKind::Shape,
                    "with a `pattern`, give a map of capture name to path",
                );
                None
            }
        }
    }
}

/// What `split` and `join` have in common, as written: the joined string's
/// path, the parts, how they are cut, and the placeholder.
struct SplitDoc<'d> {
    joined_side: Side,
    joined: &'d str,
    parts: &'d Parts,
    separator: &'d Option<String>,
    pattern: &'d Option<String>,
    template: &'d Option<String>,
    placeholder: &'d Option<String>,
    lossy: bool,
}
