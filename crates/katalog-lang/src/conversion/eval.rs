//! Stage 3: evaluate the IR to convert one object between versions.
//!
//! A conversion goes spoke → hub ("up") then hub → spoke ("down"). Within
//! one rule list, every rule first takes the values it reads out of the
//! object, then every rule writes its results: the rules of a list act
//! simultaneously, so their order never matters and a swap of two fields
//! works. Fields no rule names pass through untouched.

use serde_json::{Map, Value};

use crate::common::path::{Path, Segment, get_in, take_in};
use crate::front::document::Unmapped;
use crate::ir::{Direction, Ir, Op, ResourceIr, RuleId, RuleIr, Side, WrapHow};

use super::stash::{StashState, Stashed};
pub use crate::common::json::{json_eq, split_api_version};
use crate::common::json::{show, type_name};

use super::error::fail;
pub use super::error::{ANNOTATIONS_LIMIT, ConvertError};

mod values;

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
            let empty_parts = values::empty_parts_join(rule, dir, &input, obj)
                .or_else(|| values::placeholders_split(rule, dir, &input, obj, &mut emptied));
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
                vec![(target(0), values::coerce(&v, from_t, to_t, from_path)?)]
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
                let only_placeholders =
                    ph.and_then(|ph| values::all_placeholders(parts, splitter, ph));
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
                    let pieces = values::split(s, joined, parts, splitter, placeholder.as_deref())?;
                    // Lossless only if joining the pieces gives the string back.
                    let back =
                        values::join(&pieces, parts, splitter, placeholder.as_deref(), joined)?;
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
                    match values::join(&pieces, parts, splitter, placeholder.as_deref(), joined)? {
                        None => vec![],
                        Some(s) => {
                            let again =
                                values::split(&s, joined, parts, splitter, placeholder.as_deref())?;
                            if !values::same_pieces(&again, &pieces) {
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
                    match values::unwrap(v, how, wrapped)? {
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
                    vec![(map.clone(), values::list_to_map(v, list, key)?)]
                } else {
                    vec![(list.clone(), values::map_to_list(v, map, key)?)]
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
