//! The places mutations touched. Each write of a mutation first records
//! the place it may change, with what was there ([`Journal`]); whether the
//! mutation changed the object, and the JSON Patch of all the mutations
//! ([`Touched::diff`]), are then computed on those places only, not on the
//! whole object (a Deployment's `managedFields` and `status` are most of it
//! and no mutation writes them).
//!
//! The rule that keeps this exact: every change lies within a recorded
//! place. A write records the deepest place that exists along its path
//! (a missing parent it creates is recorded instead of the field below it),
//! and a write that may shift list elements (removing one, a JSON Patch
//! `add` at an index) records the list.

use std::borrow::Cow;

use json_patch::jsonptr::{Pointer, PointerBuf};
use serde_json::Value;

use crate::common::path::Segment;

/// One step into a value: an object member or a list element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// A concrete place in a value; empty is the whole value.
pub(crate) type Place = Vec<Step>;

/// One step of a path a write names, before it is resolved on the value.
pub(crate) enum Want<'a> {
    Key(Cow<'a, str>),
    Index(usize),
    /// A wildcard: the write may go to any element.
    Any,
}

impl<'a> From<&'a Segment> for Want<'a> {
    fn from(s: &'a Segment) -> Self {
        match s {
            Segment::Key(k) => Want::Key(Cow::Borrowed(k)),
            Segment::Index(i) => Want::Index(*i),
            Segment::Wildcard => Want::Any,
        }
    }
}

impl<'a> From<&'a Step> for Want<'a> {
    fn from(s: &'a Step) -> Self {
        match s {
            Step::Key(k) => Want::Key(Cow::Borrowed(k)),
            Step::Index(i) => Want::Index(*i),
        }
    }
}

/// The wants of a JSON Pointer's tokens.
pub(crate) fn pointer_wants(pointer: &Pointer) -> Vec<Want<'static>> {
    pointer
        .tokens()
        .map(|t| Want::Key(Cow::Owned(t.decoded().into_owned())))
        .collect()
}

/// Where a write along `wants` may change `value`: the deepest place along
/// them that exists, one step below the last container that exists (a
/// missing member is added to its object, nothing else changes there), or
/// the value that is not the container the next step needs (it may be
/// replaced, e.g. a `null` parent by an object). A list element that does
/// not exist, and a wildcard, stop at the list.
pub(crate) fn anchor<'a>(value: &Value, wants: impl IntoIterator<Item = Want<'a>>) -> Place {
    let mut place = Place::new();
    let mut node = value;
    for want in wants {
        match (want, node) {
            (Want::Key(k), Value::Object(m)) => match m.get(k.as_ref()) {
                Some(child) => {
                    place.push(Step::Key(k.into_owned()));
                    node = child;
                }
                None => {
                    place.push(Step::Key(k.into_owned()));
                    break;
                }
            },
            (Want::Index(i), Value::Array(a)) if i < a.len() => {
                place.push(Step::Index(i));
                node = &a[i];
            }
            // A JSON Pointer token on a list (`-` and bad indices stop here).
            (Want::Key(k), Value::Array(a)) => match k.parse::<usize>() {
                Ok(i) if i < a.len() => {
                    place.push(Step::Index(i));
                    node = &a[i];
                }
                _ => break,
            },
            _ => break,
        }
    }
    place
}

fn get<'v>(value: &'v Value, place: &[Step]) -> Option<&'v Value> {
    let mut cur = value;
    for step in place {
        cur = match (step, cur) {
            (Step::Key(k), Value::Object(m)) => m.get(k)?,
            (Step::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn get_mut<'v>(value: &'v mut Value, place: &[Step]) -> Option<&'v mut Value> {
    let mut cur = value;
    for step in place {
        cur = match (step, cur) {
            (Step::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Step::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Put `was` (what was at `place`, `None` for nothing) back at `place` in
/// `value`, in place. Where the parent is gone nothing is put back.
fn put_back(value: &mut Value, place: &[Step], was: Option<Value>) {
    let Some((last, parent)) = place.split_last() else {
        if let Some(was) = was {
            *value = was;
        }
        return;
    };
    match (last, get_mut(value, parent), was) {
        (Step::Key(k), Some(Value::Object(m)), Some(was)) => match m.get_mut(k) {
            Some(slot) => *slot = was,
            None => {
                m.insert(k.clone(), was);
            }
        },
        (Step::Key(k), Some(Value::Object(m)), None) => {
            m.shift_remove(k);
        }
        (Step::Index(i), Some(Value::Array(a)), Some(was)) if *i < a.len() => a[*i] = was,
        _ => {}
    }
}

/// The places one mutation recorded, each with what was there before it.
/// No place is below another.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    entries: Vec<(Place, Option<Value>)>,
}

impl Journal {
    /// Record `place` (an [`anchor`] on `value`) before a write there.
    pub(crate) fn record(&mut self, value: &Value, place: Place) {
        if self.entries.iter().any(|(p, _)| place.starts_with(p)) {
            return;
        }
        let mut before = get(value, &place).cloned();
        // Places recorded below it were written since: what was there first
        // goes back into the copy.
        self.entries.retain_mut(|(p, was)| {
            if !p.starts_with(&place) {
                return true;
            }
            if let Some(b) = before.as_mut() {
                put_back(b, &p[place.len()..], was.take());
            }
            false
        });
        self.entries.push((place, before));
    }

    /// True when `value` differs from what it was at some recorded place.
    pub(crate) fn changed(&self, value: &Value) -> bool {
        self.entries
            .iter()
            .any(|(place, before)| get(value, place) != before.as_ref())
    }

    /// Put back what was at each recorded place (in place: members keep
    /// their order).
    pub(crate) fn restore(self, value: &mut Value) {
        for (place, before) in self.entries {
            put_back(value, &place, before);
        }
    }

    pub(crate) fn places(self) -> impl Iterator<Item = Place> {
        self.entries.into_iter().map(|(p, _)| p)
    }
}

/// The places all the mutations of a request touched.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    places: Vec<Place>,
}

impl Touched {
    pub(crate) fn add(&mut self, place: Place) {
        self.places.push(place);
    }

    pub(crate) fn extend(&mut self, places: impl IntoIterator<Item = Place>) {
        self.places.extend(places);
    }

    /// The RFC 6902 patch from `original` to `current`: the same as
    /// `json_patch::diff(original, current)` when every change lies within
    /// a touched place, in the same order (the whole diff's walk, entering
    /// only the members and elements on the way to a touched place).
    pub(crate) fn diff(mut self, original: &Value, current: &Value) -> json_patch::Patch {
        // Only the outermost places: what is below one is diffed with it.
        self.places.sort_by_key(Vec::len);
        let mut outermost: Vec<&[Step]> = Vec::new();
        for p in &self.places {
            if !outermost.iter().any(|o| p.starts_with(o)) {
                outermost.push(p);
            }
        }
        let mut patch = json_patch::Patch::default();
        if !outermost.is_empty() {
            diff_below(
                original,
                current,
                &outermost,
                &mut PointerBuf::new(),
                &mut patch,
            );
        }
        patch
    }
}

/// Diff `left` and `right` at `pointer`, where `places` (relative to it)
/// hold every change.
fn diff_below(
    left: &Value,
    right: &Value,
    places: &[&[Step]],
    pointer: &mut PointerBuf,
    patch: &mut json_patch::Patch,
) {
    if places.iter().any(|p| p.is_empty()) {
        return diff_whole(left, right, pointer, patch);
    }
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            let below = |key: &str| -> Vec<&[Step]> {
                places
                    .iter()
                    .filter_map(|p| match p.split_first() {
                        Some((Step::Key(k), rest)) if k == key => Some(rest),
                        _ => None,
                    })
                    .collect()
            };
            // As the whole diff: members of `right` in order, then the removed ones.
            for (key, rv) in r {
                let places = below(key);
                if places.is_empty() {
                    continue;
                }
                pointer.push_back(key);
                match l.get(key) {
                    Some(lv) => diff_below(lv, rv, &places, pointer, patch),
                    None => {
                        patch
                            .0
                            .push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                                path: pointer.clone(),
                                value: rv.clone(),
                            }))
                    }
                }
                pointer.pop_back();
            }
            for key in l.keys() {
                if !r.contains_key(key) && !below(key).is_empty() {
                    pointer.push_back(key);
                    patch.0.push(json_patch::PatchOperation::Remove(
                        json_patch::RemoveOperation {
                            path: pointer.clone(),
                        },
                    ));
                    pointer.pop_back();
                }
            }
        }
        // Lists of one length are diffed element by element.
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            let mut indices: Vec<usize> = places
                .iter()
                .filter_map(|p| match p.first() {
                    Some(Step::Index(i)) if *i < l.len() => Some(*i),
                    _ => None,
                })
                .collect();
            indices.sort_unstable();
            indices.dedup();
            for i in indices {
                let places: Vec<&[Step]> = places
                    .iter()
                    .filter_map(|p| match p.split_first() {
                        Some((Step::Index(j), rest)) if *j == i => Some(rest),
                        _ => None,
                    })
                    .collect();
                pointer.push_back(i);
                diff_below(&l[i], &r[i], &places, pointer, patch);
                pointer.pop_back();
            }
        }
        // A replaced value, or a list whose length changed.
        _ => diff_whole(left, right, pointer, patch),
    }
}

/// `json_patch::diff` of the values at `pointer`, its paths below it.
fn diff_whole(left: &Value, right: &Value, pointer: &PointerBuf, patch: &mut json_patch::Patch) {
    let below = json_patch::diff(left, right);
    if pointer.is_root() {
        return patch.0.extend(below.0);
    }
    patch
        .0
        .extend(below.0.into_iter().map(|op| prefixed(op, pointer)));
}

fn prefixed(op: json_patch::PatchOperation, prefix: &Pointer) -> json_patch::PatchOperation {
    use json_patch::PatchOperation as Op;
    match op {
        Op::Add(mut o) => {
            o.path = prefix.concat(&o.path);
            Op::Add(o)
        }
        Op::Remove(mut o) => {
            o.path = prefix.concat(&o.path);
            Op::Remove(o)
        }
        Op::Replace(mut o) => {
            o.path = prefix.concat(&o.path);
            Op::Replace(o)
        }
        Op::Move(mut o) => {
            o.path = prefix.concat(&o.path);
            o.from = prefix.concat(&o.from);
            Op::Move(o)
        }
        Op::Copy(mut o) => {
            o.path = prefix.concat(&o.path);
            o.from = prefix.concat(&o.from);
            Op::Copy(o)
        }
        Op::Test(mut o) => {
            o.path = prefix.concat(&o.path);
            Op::Test(o)
        }
    }
}
