//! Each rule's verdict in one direction: the claimed values followed
//! through the rule (`check_rule`), whether what it writes fits the target
//! schema, list maps, coercion ranges and literal values, and whether the
//! rule is lossless there.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::path::Path;
use crate::ir::{Direction, Op, PartsIr, Proof, RuleId, Side, WrapHow};
use crate::schema::{Lookup, SchemaNode, lookup};

use super::{
    Cause, Kind, RuleVerdict, Walk, canonical, oriented, scalar_kind, value_problem, wild,
};

impl Walk<'_> {
    pub(super) fn check_rules(&mut self, rules: &[RuleId], sbase: &Path, tbase: &Path) {
        for id in rules {
            self.check_rule(*id, sbase, tbase);
        }
    }

    /// Follow a claimed value through its rule, and give the rule's verdict
    /// in this direction.
    fn check_rule(&mut self, id: RuleId, sbase: &Path, tbase: &Path) {
        let ir = self.ir;
        let rule = ir.rule(id);
        let dir = self.dir;
        let source_side = Side::source_of(dir);
        let (source, target) = (self.source, self.target);
        let find = |schema: &'_ SchemaNode, p: &Path| match lookup(schema, p) {
            Lookup::Found(n) => Some(n.clone()),
            _ => None,
        };
        let acknowledged = rule.proof == Proof::AcknowledgedLossy;
        let verdict = |walk: &mut Self, lossless: bool, why: &str| {
            walk.report.rules.push(RuleVerdict {
                rule: rule.origin.clone(),
                lossless: lossless && !acknowledged,
                why: if acknowledged && lossless {
                    "marked `lossy: true`".into()
                } else {
                    why.to_string()
                },
            });
        };
        match &rule.op {
            Op::Move { hub, spoke } => {
                let (s, t) = oriented(dir, hub, spoke);
                let (sp, tp) = (sbase.join(s), tbase.join(t));
                if let (Some(sn), Some(tn)) = (find(source, &sp), find(target, &tp)) {
                    self.fits(&sn, &sp, &tn, &tp, Cause::Rule(id));
                }
                verdict(self, true, "a rename is its own inverse");
            }
            Op::Stash { side, .. } => {
                let why = if *side == source_side {
                    "kept in the stash annotation"
                } else {
                    "restored from the stash annotation"
                };
                verdict(self, true, why);
            }
            Op::Default { hub, value } => {
                if dir == Direction::Up {
                    let tp = tbase.join(hub);
                    self.check_value(id, "value", &tp, value);
                    verdict(self, true, "fills the hub field with its default");
                } else {
                    verdict(self, false, "the hub field is dropped");
                }
            }
            Op::Constant { side, path, value } => {
                if *side == source_side {
                    verdict(self, false, "the field is dropped");
                } else {
                    let tp = tbase.join(path);
                    self.check_value(id, "value", &tp, value);
                    verdict(self, true, "sets the constant");
                }
            }
            Op::Delete { side, .. } => {
                if *side == source_side {
                    verdict(self, false, "the field is dropped");
                } else {
                    verdict(self, true, "nothing to do this way");
                }
            }
            Op::EnumMap {
                hub,
                spoke,
                to_spoke,
                to_hub,
                unmapped,
            } => {
                let (s, t) = oriented(dir, hub, spoke);
                let (sp, tp) = (sbase.join(s), tbase.join(t));
                let map = match dir {
                    Direction::Down => to_spoke,
                    Direction::Up => to_hub,
                };
                let outputs: BTreeSet<&String> = map.values().collect();
                let sn = find(source, &sp);
                let tn = find(target, &tp);
                let target_enum = tn
                    .as_ref()
                    .map(|n| n.enum_values.clone())
                    .unwrap_or_default();
                let mut problems = Vec::new();
                for v in sn.iter().flat_map(|n| &n.enum_values) {
                    let Some(text) = v.as_str() else { continue };
                    let passes = *unmapped == crate::front::document::Unmapped::Passthrough
                        && !outputs.contains(&text.to_string())
                        && (target_enum.is_empty() || target_enum.contains(v));
                    if !map.contains_key(text) && !passes {
                        problems.push(format!("`{text}`"));
                    }
                }
                if !problems.is_empty() {
                    let at = self.rule_at(id, Some("map"));
                    self.error(
                        &at,
                        format!(
                            "the schema of {} allows {} at `{sp}`, which the map does not name ({}): such an object fails to convert",
                            self.from,
                            problems.join(", "),
                            self.dirs()
                        ),
                        Some(format!("map every value {} allows", self.from)),
                    );
                }
                let bad: Vec<String> = map
                    .values()
                    .filter(|v| {
                        !target_enum.is_empty()
                            && !target_enum.contains(&Value::String((*v).clone()))
                    })
                    .map(|v| format!("`{v}`"))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !bad.is_empty() {
                    let at = self.rule_at(id, Some("map"));
                    self.error(
                        &at,
                        format!(
                            "the map writes {} at `{tp}`, which the schema of {} does not allow",
                            bad.join(", "),
                            self.to
                        ),
                        Some(format!(
                            "map to values of the enum of `{tp}` in {}",
                            self.to
                        )),
                    );
                }
                verdict(self, true, "a one-to-one map");
            }
            Op::Coerce {
                hub,
                spoke,
                hub_type,
                spoke_type,
            } => {
                let (s, t) = oriented(dir, hub, spoke);
                let (st, tt) = match dir {
                    Direction::Down => (hub_type, spoke_type),
                    Direction::Up => (spoke_type, hub_type),
                };
                let (sp, tp) = (sbase.join(s), tbase.join(t));
                let st = scalar_kind(*st);
                let tt = scalar_kind(*tt);
                let sn = find(source, &sp);
                if let Some(sn) = &sn
                    && !Kind::of(sn).fits_into(st)
                {
                    let at = self.rule_at(id, None);
                    self.error(
                        &at,
                        format!(
                            "the rule reads `{sp}` as {}, but the schema of {} makes it {}",
                            st.name(),
                            self.from,
                            Kind::of(sn).name()
                        ),
                        Some("set `hubType`/`spokeType` to the schema's types".into()),
                    );
                } else if let Some(sn) = &sn {
                    self.coerce_range(id, sn, &sp, st, tt);
                }
                if let Some(tn) = find(target, &tp)
                    && !tt.fits_into(Kind::of(&tn))
                {
                    let at = self.rule_at(id, None);
                    self.error(
                        &at,
                        format!(
                            "the rule writes {} at `{tp}`, but the schema of {} makes it {}",
                            tt.name(),
                            self.to,
                            Kind::of(&tn).name()
                        ),
                        Some("set `hubType`/`spokeType` to the schema's types".into()),
                    );
                }
                verdict(self, true, "only values that convert back are accepted");
            }
            Op::Split {
                joined_side,
                joined,
                parts,
                ..
            } => {
                if *joined_side == source_side {
                    // Parts are written: each must hold a string.
                    let paths: Vec<Path> = match parts {
                        PartsIr::List(p) => vec![wild(p)],
                        PartsIr::Fields(ps) => ps.clone(),
                        PartsIr::Named(ps) => ps.iter().map(|(_, p)| p.clone()).collect(),
                    };
                    for p in paths {
                        let tp = tbase.join(&p);
                        if let Some(tn) = find(target, &tp)
                            && !Kind::String.fits_into(Kind::of(&tn))
                        {
                            let at = self.rule_at(id, None);
                            self.error(
                                &at,
                                format!(
                                    "a split writes each part as a string, but `{tp}` is {} in {}",
                                    Kind::of(&tn).name(),
                                    self.to
                                ),
                                Some(format!(
                                    "declare `{tp}` `type: string` in {}, or convert the part with a `cel` rule",
                                    self.to
                                )),
                            );
                        }
                    }
                } else {
                    let tp = tbase.join(joined);
                    if let Some(tn) = find(target, &tp)
                        && !Kind::String.fits_into(Kind::of(&tn))
                    {
                        let at = self.rule_at(id, None);
                        self.error(
                            &at,
                            format!(
                                "a join writes a string, but `{tp}` is {} in {}",
                                Kind::of(&tn).name(),
                                self.to
                            ),
                            Some(format!(
                                "declare `{tp}` `type: string` in {}, or join with a `cel` rule",
                                self.to
                            )),
                        );
                    }
                }
                verdict(self, true, "split and join are inverse");
            }
            Op::Wrap {
                wrapped_side,
                plain,
                wrapped,
                how,
            } => {
                let inner = match how {
                    WrapHow::Key(k) => wrapped.child(k.clone()),
                    WrapHow::List => wild(wrapped),
                };
                let (s, t) = if *wrapped_side == source_side {
                    (inner, plain.clone())
                } else {
                    (plain.clone(), inner)
                };
                let (sp, tp) = (sbase.join(&s), tbase.join(&t));
                if let (Some(sn), Some(tn)) = (find(source, &sp), find(target, &tp)) {
                    self.fits(&sn, &sp, &tn, &tp, Cause::Rule(id));
                }
                verdict(self, true, "wrap and unwrap are inverse");
            }
            Op::ListMap {
                list_side,
                list,
                map,
                key,
            } => {
                let (hub, spoke) = match list_side {
                    Side::Hub => (list, map),
                    Side::Spoke => (map, list),
                };
                let (s, t) = oriented(dir, hub, spoke);
                let (sp, tp) = (sbase.join(s), tbase.join(t));
                if let (Some(sn), Some(tn)) = (find(source, &sp), find(target, &tp)) {
                    self.list_map(id, (&sn, &sp), (&tn, &tp), key, *list_side == source_side);
                }
                verdict(self, true, "list and map are inverse");
            }
            Op::ForEach { hub, spoke, rules } => {
                let (s, t) = oriented(dir, hub, spoke);
                let (sp, tp) = (wild(&sbase.join(s)), wild(&tbase.join(t)));
                let here = self.rule_at(id, None);
                let anchor = std::mem::replace(&mut self.anchor, here);
                let base = std::mem::replace(&mut self.base, sp.clone());
                if let Some(items) = find(source, &sp) {
                    self.cover(&items, &sp, &tp, rules, &sp);
                }
                let before = self.report.rules.len();
                self.check_rules(rules, &sp, &tp);
                self.anchor = anchor;
                self.base = base;
                let nested_lossy = self.report.rules[before..].iter().any(|r| !r.lossless);
                verdict(
                    self,
                    !nested_lossy,
                    if nested_lossy {
                        "a rule inside loses data"
                    } else {
                        "every rule inside is lossless"
                    },
                );
            }
            Op::Cel {
                hub,
                spoke,
                examples,
                ..
            } => {
                // What each example writes must be a value the target keeps.
                let (_, t) = oriented(dir, hub, spoke);
                let tp = tbase.join(t);
                if let Some(tn) = find(target, &tp) {
                    for (i, (h, s)) in examples.iter().enumerate() {
                        let written = match dir {
                            Direction::Down => s,
                            Direction::Up => h,
                        };
                        if let Some(problem) = value_problem(&tn, written) {
                            let at = self.rule_at(id, Some("examples")).index(i);
                            self.error(
                                &at,
                                format!(
                                    "example {i} writes {} at `{tp}`, which the schema of {} does not allow: {problem}",
                                    crate::common::json::show(written),
                                    self.to
                                ),
                                Some(format!(
                                    "the apiserver would refuse or prune it; make `{}` give a value the schema of {} allows",
                                    match dir {
                                        Direction::Down => "toSpoke",
                                        Direction::Up => "toHub",
                                    },
                                    self.to
                                )),
                            );
                        }
                    }
                }
                let why = match rule.proof {
                    Proof::CoveredByExamples => "its examples pass both ways",
                    _ => "its examples pass",
                };
                verdict(self, true, why);
            }
        }
    }

    /// `listToMap`/`mapToList` one way: the elements' `key` field is a
    /// string (it is the map's key), and every other field of an element
    /// fits the map's values (down from the list) or the other way round.
    fn list_map(
        &mut self,
        id: RuleId,
        (sn, sp): (&SchemaNode, &Path),
        (tn, tp): (&SchemaNode, &Path),
        key: &str,
        from_list: bool,
    ) {
        let (list, list_path, map, map_path, map_version) = if from_list {
            (sn, sp, tn, tp, self.to)
        } else {
            (tn, tp, sn, sp, self.from)
        };
        let at = self.rule_at(id, None);
        let Some(element) = list.items.as_deref().filter(|e| e.opaque.is_none()) else {
            return;
        };
        let list_version = if from_list { self.from } else { self.to };
        match element.properties.get(key) {
            Some(k) if !matches!(Kind::of(k), Kind::String | Kind::Untyped) => {
                self.error(
                    &at,
                    format!(
                        "the key `{key}` of the elements of `{list_path}` is {} in {list_version}, but a map key is a string",
                        Kind::of(k).name()
                    ),
                    Some(format!("declare `{key}` `type: string`, or key the map by another field")),
                );
            }
            None if !element.properties.is_empty() => {
                self.error(
                    &at,
                    format!(
                        "the elements of `{list_path}` in {list_version} declare no field `{key}`, the map's key"
                    ),
                    crate::error::did_you_mean(key, element.properties.keys().map(String::as_str))
                        .map(|s| format!("did you mean `key: {s}`?")),
                );
                return;
            }
            _ => {}
        }
        if map.opaque.is_some() && map.additional_properties.is_none() {
            // A preserved subtree keeps whatever it is given.
            return;
        }
        let Some(value) = map.additional_properties.as_deref() else {
            if Kind::of(map) == Kind::Object {
                self.error(
                    &at,
                    format!(
                        "`{map_path}` of {map_version} is an object with fixed fields, not a map (`additionalProperties`): an entry whose key it does not declare is pruned"
                    ),
                    Some(format!("declare `{map_path}` with `additionalProperties` (the schema of the elements without `{key}`)")),
                );
            }
            return;
        };
        let mut rest = element.clone();
        rest.properties.remove(key);
        rest.required.retain(|r| r != key);
        if from_list {
            self.fits(&rest, &wild(sp), value, &wild(tp), Cause::Rule(id));
        } else {
            self.fits(value, &wild(sp), &rest, &wild(tp), Cause::Rule(id));
        }
    }

    /// The source schema may allow values the coerce refuses.
    fn coerce_range(&mut self, id: RuleId, sn: &SchemaNode, sp: &Path, st: Kind, tt: Kind) {
        let bad: Vec<String> = match (st, tt) {
            (Kind::Number, Kind::Integer) => {
                if sn.enum_values.is_empty() {
                    vec!["2.5".into()]
                } else {
                    sn.enum_values
                        .iter()
                        .filter(|v| !(v.is_i64() || v.is_u64()))
                        .map(Value::to_string)
                        .collect()
                }
            }
            (Kind::String, tt) if !sn.enum_values.is_empty() => sn
                .enum_values
                .iter()
                .filter_map(Value::as_str)
                .filter(|text| !canonical(text, tt))
                .map(|t| format!("\"{t}\""))
                .collect(),
            // Without an enum: the shortest string the pattern and the
            // length bounds allow that does not convert.
            (Kind::String, Kind::Integer | Kind::Boolean) => {
                let takes = match tt {
                    Kind::Integer => crate::conversion::language::int64_strings(),
                    _ => crate::conversion::language::BOOLEAN_STRINGS.to_string(),
                };
                crate::conversion::language::string_outside(
                    sn.pattern.as_deref(),
                    sn.min_length,
                    sn.max_length,
                    &takes,
                )
                .map(|text| Value::String(text).to_string())
                .into_iter()
                .collect()
            }
            _ => Vec::new(),
        };
        if bad.is_empty() {
            return;
        }
        let restrict = match (st, tt) {
            (Kind::String, Kind::Integer) => {
                "an `enum`, `type: integer`, or a `pattern` of canonical integers such as `^(0|-?[1-9][0-9]{0,17})$`"
            }
            (Kind::String, Kind::Boolean) => "an `enum` or `pattern: ^(true|false)$`",
            (Kind::String, _) => "an `enum` of numbers in canonical form",
            _ => "an `enum` of integers, or `type: integer`",
        };
        let help = if sn.enum_values.is_empty() {
            format!(
                "restrict `{sp}` in {} ({restrict}) to values that convert",
                self.from
            )
        } else {
            format!(
                "drop {} from the `enum` of `{sp}` in {}",
                bad.join(", "),
                self.from
            )
        };
        let at = self.rule_at(id, None);
        self.error(
            &at,
            format!(
                "this coerce cannot round trip every value the schema of {} allows at `{sp}`: {} does not convert to {} and back",
                self.from,
                bad.join(", "),
                tt.name()
            ),
            Some(help),
        );
    }

    /// A value a rule writes at `tp` must be one the target schema accepts.
    fn check_value(&mut self, id: RuleId, key: &str, tp: &Path, value: &Value) {
        let Lookup::Found(node) = lookup(self.target, tp) else {
            return;
        };
        if let Some(problem) = value_problem(node, value) {
            let at = self.rule_at(id, Some(key));
            self.error(
                &at,
                format!(
                    "the value {value} does not fit `{tp}` in {}: {problem}",
                    self.to
                ),
                Some("write a value the CRD's schema accepts".into()),
            );
        }
    }
}
