//! Stage 3: evaluate the IR to convert one object between versions.
//!
//! A conversion goes spoke → hub ("up") then hub → spoke ("down"). Within
//! one rule list, every rule first takes the values it reads out of the
//! object, then every rule writes its results: the rules of a list act
//! simultaneously, so their order never matters and a swap of two fields
//! works. Fields no rule names pass through untouched.

use serde_json::{Map, Value};

use crate::common::path::{Path, Segment, get_in, take_in};
use crate::front::document::{ScalarType, Unmapped};
use crate::ir::{
    Direction, Ir, Op, PartsIr, ResourceIr, RuleId, RuleIr, Side, Splitter, TemplatePiece, WrapHow,
};

use super::stash::{StashState, Stashed};
pub use crate::common::json::{json_eq, split_api_version};
use crate::common::json::{show, type_name};

use super::error::fail;
pub use super::error::{ANNOTATIONS_LIMIT, ConvertError};

/// Convert one object to `desired_api_version`. The object may be at any
/// served version of its resource.
pub fn convert(ir: &Ir, object: &Value, desired_api_version: &str) -> Result<Value, ConvertError> {
    convert_owned(ir, object.clone(), desired_api_version)
}

/// [`convert`] taking the object by value (no copy of it is made).
pub fn convert_owned(
    ir: &Ir,
    mut object: Value,
    desired_api_version: &str,
) -> Result<Value, ConvertError> {
    let Value::Object(obj) = &object else {
        return fail(format!("expected an object, found {}", type_name(&object)));
    };
    let Some(api_version) = obj.get("apiVersion").and_then(Value::as_str) else {
        return fail("the object has no apiVersion");
    };
    let Some(kind) = obj.get("kind").and_then(Value::as_str) else {
        return fail("the object has no kind");
    };
    let (group, from) = split_api_version(api_version);
    let (group, from, kind) = (group.to_string(), from.to_string(), kind.to_string());
    let (group, from, kind) = (group.as_str(), from.as_str(), kind.as_str());
    let (to_group, to) = split_api_version(desired_api_version);
    if group != to_group {
        return fail(format!(
            "cannot convert {kind} from group `{group}` to group `{to_group}`: a conversion keeps the group"
        ));
    }
    let Some(resource) = ir.resource(group, kind) else {
        return fail(format!(
            "the Katalog declares no resource {kind} in group `{group}`"
        ));
    };
    for v in [from, to] {
        if resource.version(v).is_none() {
            return fail(format!(
                "{group}/{kind} does not serve version `{v}` (served: {})",
                resource.served().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if from != to {
        convert_between(ir, resource, &mut object, from, to)?;
    }
    if let Value::Object(m) = &mut object {
        m.insert(
            "apiVersion".into(),
            Value::String(desired_api_version.to_string()),
        );
    }
    Ok(object)
}

fn convert_between(
    ir: &Ir,
    resource: &ResourceIr,
    obj: &mut Value,
    from: &str,
    to: &str,
) -> Result<(), ConvertError> {
    // Whether the input had the map and it was already empty.
    let had = |field: &str| matches!(obj.get("metadata").and_then(|m| m.get(field)), Some(Value::Object(m)) if m.is_empty());
    let (had_labels, had_annotations) = (had("labels"), had("annotations"));
    // The remainder comes back first, at the spoke paths it was taken from,
    // so the rules carry it to the hub like any other field.
    if from != resource.hub
        && let Some(r) = resource.version(from).and_then(|v| v.remainder.as_ref())
    {
        super::remainder::restore(r, obj).map_err(|e| ConvertError {
            message: e.to_string(),
            rule: Some(r.origin.clone()),
        })?;
    }
    let mut stash = StashState::with_original(obj);
    // CEL's `object` is the object as it came in; copied only when needed.
    let uses_cel = |v: &str| {
        resource
            .version(v)
            .is_some_and(|v| rules_use_cel(ir, &v.rules))
    };
    let root = if uses_cel(from) || uses_cel(to) {
        obj.clone()
    } else {
        Value::Null
    };
    let legs = [(from, Direction::Up), (to, Direction::Down)];
    for (version, dir) in legs {
        if version == resource.hub {
            continue;
        }
        let rules = resource
            .version(version)
            .map(|v| v.rules.as_slice())
            .unwrap_or(&[]);
        let mut ctx = Ctx {
            ir,
            deferred: Vec::new(),
            stash: &mut stash,
            root: &root,
        };
        ctx.run(rules, dir, obj, &Path::root(), &Path::root())?;
    }
    stash.write_back(obj)?;
    if to != resource.hub
        && let Some(r) = resource.version(to).and_then(|v| v.remainder.as_ref())
    {
        super::remainder::keep(r, obj).map_err(|e| ConvertError {
            message: e.to_string(),
            rule: Some(r.origin.clone()),
        })?;
    }
    // Label and annotation maps the conversion emptied (a constant label
    // taken away, say) go, as Kubernetes leaves empty maps out; a map that
    // came in empty stays.
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        for (field, had) in [("labels", had_labels), ("annotations", had_annotations)] {
            if !had && matches!(meta.get(field), Some(Value::Object(m)) if m.is_empty()) {
                meta.shift_remove(field);
            }
        }
    }
    Ok(())
}

/// A stash decision that depends on the converted object: a value equal to
/// its default is stashed only if its parent does not survive (the default
/// could not come back); an absent field is marked absent only if its
/// parent does (the default would fill it).
struct Deferred {
    annotation: String,
    section: String,
    key: String,
    /// `None`: the field was absent.
    value: Option<Value>,
    path: Path,
}

struct Ctx<'a> {
    ir: &'a Ir,
    deferred: Vec<Deferred>,
    stash: &'a mut StashState,
    /// The object as it came in, for CEL's `object`.
    root: &'a Value,
}

impl Ctx<'_> {
    fn run(
        &mut self,
        rules: &[RuleId],
        dir: Direction,
        obj: &mut Value,
        hub_prefix: &Path,
        spoke_prefix: &Path,
    ) -> Result<(), ConvertError> {
        let ir = self.ir;
        let deferred_outer = std::mem::take(&mut self.deferred);
        // Defaults, absence markers and constants apply only where the
        // field's parent object exists, so an object without `spec` converts
        // unchanged.
        let parent_of = |op: &Op, obj: &Value| match op {
            Op::Stash { path, .. } | Op::Default { hub: path, .. } | Op::Constant { path, .. } => {
                parent_exists(path, obj)
            }
            _ => true,
        };
        let before: Vec<bool> = rules
            .iter()
            .map(|id| parent_of(&ir.rule(*id).op, obj))
            .collect();
        // Taking the last field out of an object removes the object too, so
        // that what a write created on the way there does not linger on the
        // way back; but never an object the rule's other side also lives in
        // (it is still there), and never for a rule with no other side
        // (nothing would bring an emptied object back). Every rule that took
        // something from under an object votes; the object goes only if all
        // of them agree, once all have taken, so rule order never matters.
        let mut votes: Vec<(&[Segment], bool)> = Vec::new();
        let inputs: Vec<Vec<Option<Value>>> = rules
            .iter()
            .map(|id| {
                let rule = ir.rule(*id);
                let others = rule.writes(dir);
                rule.reads(dir)
                    .iter()
                    .map(|p| {
                        let keep = others
                            .iter()
                            .map(|o| p.common_prefix_len(o).min(o.len().saturating_sub(1)))
                            .max()
                            .unwrap_or(p.len())
                            .min(p.len().saturating_sub(1));
                        let taken = p.take_keeping(obj, p.len().saturating_sub(1));
                        if taken.is_some() {
                            for depth in 1..p.len() {
                                votes.push((&p.segments()[..depth], depth <= keep));
                            }
                        }
                        taken
                    })
                    .collect()
            })
            .collect();
        prune_emptied(obj, votes);
        // Parents a split of placeholders only left empty: (path, rule origin).
        let mut emptied: Vec<(Path, String)> = Vec::new();
        for ((id, input), parent) in rules.iter().zip(inputs).zip(before) {
            let rule = ir.rule(*id);
            let empty_parts = empty_parts_join(rule, dir, &input, obj)
                .or_else(|| placeholders_split(rule, dir, &input, obj, &mut emptied));
            let writes = match empty_parts {
                Some(result) => result,
                None => self.apply(rule, dir, input, parent, hub_prefix, spoke_prefix),
            }
            .map_err(|mut e| {
                if e.rule.is_none() {
                    e.rule = Some(rule.origin.clone());
                }
                e
            })?;
            for (path, value) in writes {
                // A default only fills a field that is absent.
                if matches!(rule.op, Op::Default { .. }) && path.get(obj).is_some() {
                    continue;
                }
                // A rule never replaces data that no rule read: that would lose it.
                if let Some(existing) = path.get(obj)
                    && *existing != value
                {
                    return Err(ConvertError {
                        message: format!(
                            "`{path}` already holds {}, which no rule reads; writing {} there would lose it",
                            show(existing),
                            show(&value)
                        ),
                        rule: Some(rule.origin.clone()),
                    });
                }
                path.set(obj, value).map_err(|e| ConvertError {
                    message: e.to_string(),
                    rule: Some(rule.origin.clone()),
                })?;
            }
        }
        // An empty parent stands for the string of placeholders only if it
        // is still empty once every rule has written.
        for (parent, origin) in emptied {
            if !matches!(parent.get(obj), Some(Value::Object(m)) if m.is_empty()) {
                return Err(ConvertError {
                    message: format!(
                        "a string of placeholders only converts to an empty `{parent}`, but another rule writes into it"
                    ),
                    rule: Some(origin),
                });
            }
        }
        // Decided on the converted object, the one the other direction will
        // start from: it applies the default exactly where the parent exists.
        for d in std::mem::replace(&mut self.deferred, deferred_outer) {
            match (d.value, parent_exists(&d.path, obj)) {
                (Some(v), false) => self.stash.put(&d.annotation, &d.section, &d.key, v)?,
                (None, true) => self.stash.mark_absent(&d.annotation, &d.section, &d.key)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn apply(
        &mut self,
        rule: &RuleIr,
        dir: Direction,
        mut input: Vec<Option<Value>>,
        parent: bool,
        hub_prefix: &Path,
        spoke_prefix: &Path,
    ) -> Result<Vec<(Path, Value)>, ConvertError> {
        let target = |i: usize| rule.writes(dir)[i].clone();
        let first = input.first_mut().and_then(Option::take);
        let source_side = Side::source_of(dir);
        let prefix_of = |side: Side| match side {
            Side::Hub => hub_prefix,
            Side::Spoke => spoke_prefix,
        };
        let out = match &rule.op {
            Op::Move { .. } => first.map(|v| (target(0), v)).into_iter().collect(),
            Op::Stash {
                side,
                path,
                annotation,
                section,
                default,
            } => {
                let key = prefix_of(*side).join(path).to_string();
                if *side == source_side {
                    match first {
                        // The default brings it back, as long as its parent is
                        // still there on the other side to show where it goes:
                        // decided once the whole list has written.
                        Some(v) if default.as_ref() == Some(&v) => self.deferred.push(Deferred {
                            annotation: annotation.clone(),
                            section: section.clone(),
                            key,
                            value: Some(v),
                            path: path.clone(),
                        }),
                        Some(v) => self.stash.put(annotation, section, &key, v)?,
                        None if default.is_some() => self.deferred.push(Deferred {
                            annotation: annotation.clone(),
                            section: section.clone(),
                            key,
                            value: None,
                            path: path.clone(),
                        }),
                        None => {}
                    }
                    vec![]
                } else {
                    match self.stash.take(annotation, section, &key, true)? {
                        Some(Stashed::Value(v)) => vec![(path.clone(), v)],
                        Some(Stashed::Absent) => vec![],
                        None if parent => {
                            default.iter().map(|d| (path.clone(), d.clone())).collect()
                        }
                        None => vec![],
                    }
                }
            }
            Op::Default { hub, value } => match dir {
                Direction::Down => vec![],
                Direction::Up if parent => vec![(hub.clone(), value.clone())],
                Direction::Up => vec![],
            },
            Op::Constant { side, path, value } => {
                if *side == source_side || !parent {
                    vec![]
                } else {
                    vec![(path.clone(), value.clone())]
                }
            }
            Op::Delete { .. } => vec![],
            Op::EnumMap {
                hub,
                spoke,
                to_spoke,
                to_hub,
                unmapped,
            } => {
                let Some(v) = first else { return Ok(vec![]) };
                let (map, back, from) = match dir {
                    Direction::Down => (to_spoke, to_hub, hub),
                    Direction::Up => (to_hub, to_spoke, spoke),
                };
                let mapped = match v.as_str() {
                    Some(s) => match map.get(s) {
                        Some(m) => Value::String(m.clone()),
                        None if *unmapped == Unmapped::Fail => {
                            return fail(format!(
                                "`{}` holds `{s}`, which the enum map does not name (known: {})",
                                from,
                                map.keys().cloned().collect::<Vec<_>>().join(", ")
                            ));
                        }
                        None if back.contains_key(s) => {
                            return fail(format!(
                                "`{from}` holds `{s}`, which the enum map does not name and which would map back as `{}`",
                                back[s]
                            ));
                        }
                        None => v,
                    },
                    None if *unmapped == Unmapped::Fail => {
                        return fail(format!(
                            "`{from}` holds {}, not one of the enum map's strings",
                            type_name(&v)
                        ));
                    }
                    None => v,
                };
                vec![(target(0), mapped)]
            }
            Op::Coerce {
                hub,
                spoke,
                hub_type,
                spoke_type,
            } => {
                let Some(v) = first else { return Ok(vec![]) };
                let (from_path, from_t, to_t) = match dir {
                    Direction::Down => (hub, *hub_type, *spoke_type),
                    Direction::Up => (spoke, *spoke_type, *hub_type),
                };
                vec![(target(0), coerce(&v, from_t, to_t, from_path)?)]
            }
            Op::Split {
                joined_side,
                joined,
                parts,
                splitter,
                placeholder,
                marker,
            } => {
                let marker_key = prefix_of(*joined_side).join(joined).to_string();
                // A marker left on the object is never trusted: the joined
                // side recomputes it, and the parts side consumes it.
                let old_marker = match marker {
                    Some(slot) if self.stash.has(&slot.annotation) => {
                        self.stash
                            .take(&slot.annotation, &slot.section, &marker_key, false)?
                    }
                    _ => None,
                };
                let ph = placeholder.as_deref();
                let only_placeholders = ph.and_then(|ph| all_placeholders(parts, splitter, ph));
                if *joined_side == source_side {
                    let Some(v) = first else { return Ok(vec![]) };
                    // Every part absent: only the marker says it was there.
                    if let (Some(slot), Some(all)) = (marker, &only_placeholders)
                        && v.as_str() == Some(all.as_str())
                    {
                        self.stash
                            .put(&slot.annotation, &slot.section, &marker_key, v)?;
                        return Ok(vec![]);
                    }
                    let Some(s) = v.as_str() else {
                        return fail(format!(
                            "`{joined}` must be a string to split, found {}",
                            type_name(&v)
                        ));
                    };
                    let pieces = split(s, joined, parts, splitter, placeholder.as_deref())?;
                    // Lossless only if joining the pieces gives the string back.
                    let back = join(&pieces, parts, splitter, placeholder.as_deref(), joined)?;
                    if back.as_deref() != Some(s) {
                        return fail(format!(
                            "`{joined}` = {v} cannot be split so that it joins back unchanged"
                        ));
                    }
                    pieces
                } else {
                    if let Some(first) = first {
                        input[0] = Some(first);
                    }
                    let pieces: Vec<(Path, Value)> = parts
                        .paths()
                        .into_iter()
                        .zip(input)
                        .filter_map(|(p, v)| v.map(|v| (p, v)))
                        .collect();
                    if pieces.is_empty()
                        && let (Some(Stashed::Value(v)), Some(all)) =
                            (old_marker, &only_placeholders)
                        && v.as_str() == Some(all.as_str())
                    {
                        return Ok(vec![(joined.clone(), v)]);
                    }
                    match join(&pieces, parts, splitter, placeholder.as_deref(), joined)? {
                        None => vec![],
                        Some(s) => {
                            let again = split(&s, joined, parts, splitter, placeholder.as_deref())?;
                            if !same_pieces(&again, &pieces) {
                                return fail(format!(
                                    "the pieces of `{joined}` cannot be joined so that they split back unchanged (joined: {s:?})"
                                ));
                            }
                            vec![(joined.clone(), Value::String(s))]
                        }
                    }
                }
            }
            Op::Wrap {
                wrapped_side,
                plain,
                wrapped,
                how,
            } => {
                let Some(v) = first else { return Ok(vec![]) };
                if *wrapped_side == source_side {
                    match unwrap(v, how, wrapped)? {
                        Some(inner) => vec![(plain.clone(), inner)],
                        None => vec![],
                    }
                } else {
                    let w = match how {
                        WrapHow::Key(k) => {
                            let mut m = Map::new();
                            m.insert(k.clone(), v);
                            Value::Object(m)
                        }
                        WrapHow::List => Value::Array(vec![v]),
                    };
                    vec![(wrapped.clone(), w)]
                }
            }
            Op::ListMap {
                list_side,
                list,
                map,
                key,
            } => {
                let Some(v) = first else { return Ok(vec![]) };
                if *list_side == source_side {
                    vec![(map.clone(), list_to_map(v, list, key)?)]
                } else {
                    vec![(list.clone(), map_to_list(v, map, key)?)]
                }
            }
            Op::ForEach { hub, spoke, rules } => {
                let Some(v) = first else { return Ok(vec![]) };
                let Value::Array(items) = v else {
                    let from = match dir {
                        Direction::Down => hub,
                        Direction::Up => spoke,
                    };
                    return fail(format!(
                        "forEach expects a list at `{from}`, found {}",
                        type_name(&v)
                    ));
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, mut item) in items.into_iter().enumerate() {
                    let hp = hub_prefix.join(hub).index(i);
                    let sp = spoke_prefix.join(spoke).index(i);
                    self.run(rules, dir, &mut item, &hp, &sp)?;
                    out.push(item);
                }
                // Entries stashed for elements that no longer exist would
                // otherwise come back in unrelated elements later.
                let restoring = match dir {
                    Direction::Down => Side::Spoke,
                    Direction::Up => Side::Hub,
                };
                let list = match restoring {
                    Side::Hub => hub_prefix.join(hub),
                    Side::Spoke => spoke_prefix.join(spoke),
                };
                let mut stashes = Vec::new();
                nested_stashes(self.ir, rules, restoring, &mut stashes);
                for (annotation, section) in stashes {
                    self.stash
                        .purge_prefix(&annotation, &section, &format!("{list}["))?;
                }
                vec![(target(0), Value::Array(out))]
            }
            Op::Cel {
                to_spoke, to_hub, ..
            } => {
                let Some(v) = first else { return Ok(vec![]) };
                let prog = match dir {
                    Direction::Down => to_spoke,
                    Direction::Up => to_hub,
                };
                let result = prog
                    .eval(&[("self", &v), ("object", self.root)])
                    .map_err(|e| ConvertError {
                        message: e.to_string(),
                        rule: None,
                    })?;
                if result.is_null() {
                    vec![]
                } else {
                    vec![(target(0), result)]
                }
            }
        };
        Ok(out)
    }
}

/// (annotation, section) of every stash under these rules that restores
/// fields on `side`.
fn nested_stashes(ir: &Ir, rules: &[RuleId], side: Side, out: &mut Vec<(String, String)>) {
    for id in rules {
        match &ir.rule(*id).op {
            Op::Stash {
                side: s,
                annotation,
                section,
                ..
            } if *s == side => out.push((annotation.clone(), section.clone())),
            Op::Split {
                joined_side,
                marker: Some(slot),
                ..
            } if *joined_side == side => out.push((slot.annotation.clone(), slot.section.clone())),
            Op::ForEach { rules, .. } => nested_stashes(ir, rules, side, out),
            _ => {}
        }
    }
}

/// Remove the emptied objects every voter agreed to remove, deepest first.
fn prune_emptied(obj: &mut Value, mut votes: Vec<(&[Segment], bool)>) {
    if votes.is_empty() {
        return;
    }
    votes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(b.0)));
    let mut i = 0;
    while i < votes.len() {
        let path = votes[i].0;
        let mut remove = true;
        while i < votes.len() && votes[i].0 == path {
            remove &= !votes[i].1;
            i += 1;
        }
        if remove && matches!(get_in(path, obj), Some(Value::Object(m)) if m.is_empty()) {
            take_in(path, obj, path.len().saturating_sub(1));
        }
    }
}

fn rules_use_cel(ir: &Ir, rules: &[RuleId]) -> bool {
    rules.iter().any(|id| match &ir.rule(*id).op {
        Op::Cel { .. } => true,
        Op::ForEach { rules, .. } => rules_use_cel(ir, rules),
        _ => false,
    })
}

fn parent_exists(path: &Path, obj: &Value) -> bool {
    // Every object has labels and annotations, even when Kubernetes leaves
    // the empty maps out.
    if let [Segment::Key(m), Segment::Key(f), _] = path.segments()
        && m == "metadata"
        && (f == "labels" || f == "annotations")
    {
        return true;
    }
    match path.segments().split_last() {
        Some((_, parent)) => get_in(parent, obj).is_some(),
        None => true,
    }
}

/// The object that holds every part of a split, when the parts have one of
/// their own (`spec.range.from`, `spec.range.to` → `spec.range`). The
/// empty-object form of the placeholders-only string is used only when this
/// is the joined path itself: there the other version holds a string, so an
/// empty object cannot have come from it.
fn parts_parent(parts: &PartsIr) -> Option<Path> {
    let paths = match parts {
        PartsIr::List(_) => return None,
        PartsIr::Fields(ps) => ps.clone(),
        PartsIr::Named(ps) => ps.iter().map(|(_, p)| p.clone()).collect(),
    };
    let first = paths.first()?;
    let n = paths
        .iter()
        .map(|p| first.common_prefix_len(p))
        .min()?
        .min(paths.iter().map(|p| p.len().saturating_sub(1)).min()?);
    (n > 0).then(|| Path::from_segments(first.segments()[..n].to_vec()))
}

/// The joined string whose every piece is the placeholder.
fn all_placeholders(parts: &PartsIr, splitter: &Splitter, ph: &str) -> Option<String> {
    match (splitter, parts) {
        (Splitter::Separator(sep), PartsIr::Fields(paths)) => Some(vec![ph; paths.len()].join(sep)),
        (Splitter::Pattern { template, .. }, PartsIr::Named(_)) => Some(
            template
                .iter()
                .map(|piece| match piece {
                    TemplatePiece::Text(t) => t.as_str(),
                    TemplatePiece::Capture(_) => ph,
                })
                .collect(),
        ),
        _ => None,
    }
}

/// A split of the string made of placeholders only: every part is absent,
/// and their own parent object is left empty to say so (joined back by
/// [`empty_parts_join`]). It fails when that parent already holds other
/// fields, and the caller checks it is still empty once every rule wrote.
fn placeholders_split(
    rule: &RuleIr,
    dir: Direction,
    input: &[Option<Value>],
    obj: &Value,
    emptied: &mut Vec<(Path, String)>,
) -> Option<Result<Vec<(Path, Value)>, ConvertError>> {
    let Op::Split {
        joined_side,
        joined,
        parts,
        splitter,
        placeholder: Some(ph),
        ..
    } = &rule.op
    else {
        return None;
    };
    if *joined_side != Side::source_of(dir) {
        return None;
    }
    let Some(Some(Value::String(s))) = input.first() else {
        return None;
    };
    let parent = parts_parent(parts).filter(|p| p == joined)?;
    if all_placeholders(parts, splitter, ph).as_deref() != Some(s.as_str()) {
        return None;
    }
    if parent.get(obj).is_some() {
        return Some(fail(format!(
            "`{joined}` = {s:?} is placeholders only, which converts to an empty `{parent}`, but `{parent}` holds other fields"
        )));
    }
    emptied.push((parent.clone(), rule.origin.clone()));
    Some(Ok(vec![(parent, Value::Object(Map::new()))]))
}

/// A join whose parts are all absent while their own parent object is there
/// and empty: the empty object is the string of placeholders (see the split
/// side above), taken out so it is never copied into the joined field.
/// Without a placeholder it has no string form, and converting fails rather
/// than copy `{}` where the other version holds a string. `None`: not this
/// case, the rule applies as usual.
fn empty_parts_join(
    rule: &RuleIr,
    dir: Direction,
    input: &[Option<Value>],
    obj: &mut Value,
) -> Option<Result<Vec<(Path, Value)>, ConvertError>> {
    let Op::Split {
        joined_side,
        joined,
        parts,
        splitter,
        placeholder,
        ..
    } = &rule.op
    else {
        return None;
    };
    if *joined_side == Side::source_of(dir) || input.iter().any(Option::is_some) {
        return None;
    }
    let parent = parts_parent(parts).filter(|p| p == joined)?;
    if !matches!(parent.get(obj), Some(Value::Object(m)) if m.is_empty()) {
        return None;
    }
    let Some(ph) = placeholder.as_deref() else {
        return Some(fail(format!(
            "`{parent}` is an empty object; with no `placeholder` it has no string form for `{joined}`"
        )));
    };
    let s = all_placeholders(parts, splitter, ph)?;
    parent.take(obj);
    Some(Ok(vec![(joined.clone(), Value::String(s))]))
}

fn same_pieces(a: &[(Path, Value)], b: &[(Path, Value)]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

fn split(
    s: &str,
    joined: &Path,
    parts: &PartsIr,
    splitter: &Splitter,
    placeholder: Option<&str>,
) -> Result<Vec<(Path, Value)>, ConvertError> {
    let keep = |piece: &str| placeholder != Some(piece);
    match (splitter, parts) {
        (Splitter::Separator(sep), PartsIr::List(p)) => {
            let items: Vec<Value> = if s.is_empty() {
                vec![]
            } else {
                s.split(sep.as_str())
                    .map(|x| Value::String(x.to_string()))
                    .collect()
            };
            Ok(vec![(p.clone(), Value::Array(items))])
        }
        (Splitter::Separator(sep), PartsIr::Fields(paths)) => Ok(s
            .splitn(paths.len(), sep.as_str())
            .zip(paths)
            .filter(|(piece, _)| keep(piece))
            .map(|(piece, p)| (p.clone(), Value::String(piece.to_string())))
            .collect()),
        (Splitter::Pattern { regex, .. }, PartsIr::Named(named)) => {
            let Some(caps) = regex.captures(s) else {
                return fail(format!(
                    "`{joined}` = {s:?} does not match the pattern /{}/",
                    regex.as_str()
                ));
            };
            Ok(named
                .iter()
                .filter_map(|(name, p)| {
                    let m = caps.name(name)?;
                    keep(m.as_str()).then(|| (p.clone(), Value::String(m.as_str().to_string())))
                })
                .collect())
        }
        _ => fail("internal: split parts do not fit the splitter"),
    }
}

fn join(
    pieces: &[(Path, Value)],
    parts: &PartsIr,
    splitter: &Splitter,
    placeholder: Option<&str>,
    joined: &Path,
) -> Result<Option<String>, ConvertError> {
    let get = |p: &Path| -> Result<Option<&str>, ConvertError> {
        match pieces.iter().find(|(q, _)| q == p) {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s.as_str())),
            Some((_, v)) => fail(format!(
                "`{p}` must be a string to be joined into `{joined}`, found {}",
                type_name(v)
            )),
        }
    };
    match (splitter, parts) {
        (Splitter::Separator(sep), PartsIr::List(p)) => {
            let Some((_, v)) = pieces.iter().find(|(q, _)| q == p) else {
                return Ok(None);
            };
            let Value::Array(items) = v else {
                return fail(format!(
                    "`{p}` must be a list of strings, found {}",
                    type_name(v)
                ));
            };
            let mut strs = Vec::with_capacity(items.len());
            for item in items {
                let Some(s) = item.as_str() else {
                    return fail(format!(
                        "`{p}` must hold strings only, found {}",
                        type_name(item)
                    ));
                };
                if s.contains(sep.as_str()) {
                    return fail(format!(
                        "an element of `{p}` ({s:?}) contains the separator {sep:?}, so it would not split back"
                    ));
                }
                strs.push(s);
            }
            Ok(Some(strs.join(sep)))
        }
        (Splitter::Separator(sep), PartsIr::Fields(paths)) => {
            let mut values = Vec::new();
            for p in paths {
                values.push(get(p)?);
            }
            if values.iter().all(Option::is_none) {
                return Ok(None);
            }
            // Trailing absent pieces are left out; absent pieces inside need a placeholder.
            while values.last().is_some_and(Option::is_none) && placeholder.is_none() {
                values.pop();
            }
            let mut out = Vec::new();
            for (i, v) in values.iter().enumerate() {
                match (v, placeholder) {
                    (Some(s), _) => out.push(*s),
                    (None, Some(ph)) => out.push(ph),
                    (None, None) => {
                        return fail(format!(
                            "`{}` is absent but a later piece of `{joined}` is not; set `placeholder` to join it",
                            paths[i]
                        ));
                    }
                }
            }
            Ok(Some(out.join(sep)))
        }
        (Splitter::Pattern { template, .. }, PartsIr::Named(named)) => {
            let mut any = false;
            let mut out = String::new();
            for piece in template {
                match piece {
                    TemplatePiece::Text(t) => out.push_str(t),
                    TemplatePiece::Capture(name) => {
                        let path = named.iter().find(|(n, _)| n == name).map(|(_, p)| p);
                        let v = match path {
                            Some(p) => get(p)?,
                            None => None,
                        };
                        match (v, placeholder) {
                            (Some(s), _) => {
                                any = true;
                                out.push_str(s);
                            }
                            (None, Some(ph)) => out.push_str(ph),
                            (None, None) => {}
                        }
                    }
                }
            }
            Ok(any.then_some(out))
        }
        _ => fail("internal: split parts do not fit the splitter"),
    }
}

fn unwrap(v: Value, how: &WrapHow, at: &Path) -> Result<Option<Value>, ConvertError> {
    match (how, v) {
        (WrapHow::Key(k), Value::Object(mut m)) => {
            let inner = m.shift_remove(k);
            if !m.is_empty() {
                let extra: Vec<&String> = m.keys().collect();
                return fail(format!(
                    "`{at}` holds fields other than `{k}` ({}), which the other version cannot hold",
                    extra
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok(inner)
        }
        (WrapHow::List, Value::Array(mut a)) => match a.len() {
            0 => Ok(None),
            1 => Ok(a.pop()),
            n => fail(format!(
                "`{at}` holds {n} elements; only a one-element list converts"
            )),
        },
        (WrapHow::Key(_), other) => fail(format!(
            "`{at}` must be an object, found {}",
            type_name(&other)
        )),
        (WrapHow::List, other) => fail(format!(
            "`{at}` must be a list, found {}",
            type_name(&other)
        )),
    }
}

fn list_to_map(v: Value, at: &Path, key: &str) -> Result<Value, ConvertError> {
    let Value::Array(items) = v else {
        return fail(format!("`{at}` must be a list, found {}", type_name(&v)));
    };
    let mut out = Map::new();
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(mut m) = item else {
            return fail(format!(
                "`{at}[{i}]` must be an object with a `{key}` field, found {}",
                type_name(&item)
            ));
        };
        let name = match m.shift_remove(key) {
            Some(Value::String(s)) => s,
            Some(other) => {
                return fail(format!(
                    "`{at}[{i}].{key}` must be a string, found {}",
                    type_name(&other)
                ));
            }
            None => return fail(format!("`{at}[{i}]` has no `{key}`")),
        };
        if out.contains_key(&name) {
            return fail(format!(
                "`{at}` has two elements with {key} `{name}`; a map cannot hold both"
            ));
        }
        out.insert(name, Value::Object(m));
    }
    Ok(Value::Object(out))
}

fn map_to_list(v: Value, at: &Path, key: &str) -> Result<Value, ConvertError> {
    let Value::Object(m) = v else {
        return fail(format!("`{at}` must be a map, found {}", type_name(&v)));
    };
    let mut out = Vec::with_capacity(m.len());
    for (name, item) in m {
        let Value::Object(fields) = item else {
            return fail(format!(
                "`{at}.{name}` must be an object, found {}",
                type_name(&item)
            ));
        };
        if fields.contains_key(key) {
            return fail(format!(
                "`{at}.{name}` already has a `{key}` field; it would clash with the map key"
            ));
        }
        let mut element = Map::new();
        element.insert(key.to_string(), Value::String(name));
        element.extend(fields);
        out.push(Value::Object(element));
    }
    Ok(Value::Array(out))
}

fn coerce(v: &Value, from: ScalarType, to: ScalarType, at: &Path) -> Result<Value, ConvertError> {
    use ScalarType::*;
    let wrong = || {
        fail(format!(
            "`{at}` should be {}, found {}",
            type_word(from),
            type_name(v)
        ))
    };
    match (from, to, v) {
        (Integer, String, Value::Number(n)) if n.is_i64() || n.is_u64() => {
            Ok(Value::String(n.to_string()))
        }
        (Number, String, Value::Number(n)) => Ok(Value::String(n.to_string())),
        (Boolean, String, Value::Bool(b)) => Ok(Value::String(b.to_string())),
        (String, Integer, Value::String(s)) => {
            let n: Option<serde_json::Number> = s
                .parse::<i64>()
                .map(serde_json::Number::from)
                .or_else(|_| s.parse::<u64>().map(serde_json::Number::from))
                .ok();
            match n {
                Some(n) if n.to_string() == *s => Ok(Value::Number(n)),
                _ => fail(format!(
                    "`{at}` = {s:?} is not an integer in canonical form, so it cannot become one and come back"
                )),
            }
        }
        (String, Number, Value::String(s)) => {
            let n = s
                .parse::<i64>()
                .map(serde_json::Number::from)
                .ok()
                .or_else(|| s.parse::<f64>().ok().and_then(serde_json::Number::from_f64));
            match n {
                Some(n) if n.to_string() == *s => Ok(Value::Number(n)),
                _ => fail(format!(
                    "`{at}` = {s:?} is not a number in canonical form, so it cannot become one and come back"
                )),
            }
        }
        (String, Boolean, Value::String(s)) => match s.as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => fail(format!("`{at}` = {s:?} is not `true` or `false`")),
        },
        (Integer, Number, Value::Number(n)) if n.is_i64() || n.is_u64() => {
            Ok(Value::Number(n.clone()))
        }
        (Number, Integer, Value::Number(n)) => {
            if n.is_i64() || n.is_u64() {
                Ok(Value::Number(n.clone()))
            } else {
                let why = if n.as_f64().is_some_and(|f| f.fract() != 0.0) {
                    "has a fraction"
                } else {
                    "is a floating-point number"
                };
                fail(format!("`{at}` = {n} {why} and cannot become an integer"))
            }
        }
        _ => wrong(),
    }
}

fn type_word(t: ScalarType) -> &'static str {
    match t {
        ScalarType::String => "a string",
        ScalarType::Integer => "an integer",
        ScalarType::Number => "a number",
        ScalarType::Boolean => "a boolean",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;
    use serde_json::json;

    fn crontab() -> Ir {
        crate::compile_sources(&[Source::new(
            "crontab.yaml",
            include_str!("../../../../katalogs/crontab.yaml"),
        )])
        .unwrap()
    }

    #[test]
    fn a_stash_over_the_annotation_limit_fails_the_conversion() {
        let ir = crontab();
        let big = "x".repeat(ANNOTATIONS_LIMIT);
        let hub = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "big"}, "spec": {"timeoutSeconds": 1, "concurrencyPolicy": big}});
        let err = convert(&ir, &hub, "stable.example.com/v1beta1").unwrap_err();
        assert!(
            err.message
                .starts_with("stashing makes the object's annotations ")
                && err
                    .message
                    .ends_with("bytes, over the apiserver's limit of 262144 (256 KiB)"),
            "{err}"
        );
        // Just under the limit converts and comes back.
        let fits = "y".repeat(ANNOTATIONS_LIMIT - 200);
        let hub = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "fits"}, "spec": {"concurrencyPolicy": fits}});
        let spoke = convert(&ir, &hub, "stable.example.com/v1beta1").unwrap();
        assert_eq!(convert(&ir, &spoke, "stable.example.com/v1").unwrap(), hub);
    }

    #[test]
    fn a_tampered_stash_annotation_is_an_error_not_a_loss() {
        let ir = crontab();
        let spoke = json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
            "metadata": {"name": "t", "annotations": {"katalog.dev/stash": "not json"}},
            "spec": {"cronSpec": "* * * * *"}});
        let err = convert(&ir, &spoke, "stable.example.com/v1").unwrap_err();
        assert_eq!(
            err.message,
            "annotation `katalog.dev/stash` is not a stash the engine wrote (it must be a JSON object); remove it or fix it"
        );
    }

    #[test]
    fn other_annotations_and_labels_survive_untouched() {
        let ir = crontab();
        let hub = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a", "labels": {"a.b/c": "d"}, "annotations": {"x.io/y": "z"}},
            "spec": {"timeoutSeconds": 5}});
        let spoke = convert(&ir, &hub, "stable.example.com/v1beta1").unwrap();
        assert_eq!(spoke["metadata"]["labels"], json!({"a.b/c": "d"}));
        assert_eq!(spoke["metadata"]["annotations"]["x.io/y"], "z");
        assert_eq!(convert(&ir, &spoke, "stable.example.com/v1").unwrap(), hub);
    }
}
