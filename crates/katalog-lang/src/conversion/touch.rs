//! What a conversion touches: the parts of an object its rules can read or
//! write, implicit touches included, so that everything else can pass
//! through as the bytes it came as.
//!
//! A touch set is a tree of object keys. A key marked *whole* is read or
//! written as a whole value (a renamed field, a list a `forEach` walks, a
//! stash annotation); a key with children is an object only some of whose
//! members matter. Any member not named is untouched.
//!
//! What a conversion between two versions touches, besides the paths its
//! rules name on either side:
//! - `apiVersion` (written) and `kind` (read by the invariant check);
//! - every stash annotation a rule of either leg keeps or restores
//!   (`metadata.annotations[…]`), with `metadata.resourceVersion`, which
//!   the stash records and compares;
//! - the parents of all of these: they are created, emptied or removed, so
//!   they are objects with some members touched.
//!
//! A conversion whose rules evaluate CEL (its `object` is the whole input)
//! or keep a whole-remainder stash (computed from the whole object against
//! the schema) touches everything: it has no touch set.

use crate::common::path::{Path, Segment};
use crate::ir::{Ir, Op, ResourceIr, RuleId, Side};

/// The parts of an object a conversion reads or writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touch {
    whole: bool,
    /// Sorted by key. A handful of keys per object: a scan that compares
    /// lengths first beats a tree search on the fast path's hot loop.
    children: Vec<(String, Touch)>,
}

impl Touch {
    /// What telling any object's conversion apart needs: `apiVersion` and
    /// `kind`.
    pub fn identity() -> Touch {
        let mut touch = Touch::default();
        for key in ["apiVersion", "kind"] {
            touch.add(&Path::root().child(key));
        }
        touch
    }

    /// Everything under this key is touched.
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// The touch set of a member, or `None` when it is untouched.
    pub fn child(&self, key: &str) -> Option<&Touch> {
        self.children
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, t)| t)
    }

    /// The touch set of a member, added (untouched) when missing.
    fn child_mut(&mut self, key: &str) -> &mut Touch {
        let i = match self.children.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(i) => i,
            Err(i) => {
                self.children.insert(i, (key.to_string(), Touch::default()));
                i
            }
        };
        &mut self.children[i].1
    }

    /// Whether `path` (from the object's root) lies inside the touch set:
    /// a path that only leads to touched members (a parent) counts too.
    pub fn covers(&self, path: &Path) -> bool {
        let mut node = self;
        for segment in path.segments() {
            if node.whole {
                return true;
            }
            match segment {
                Segment::Key(k) => match node.child(k) {
                    Some(child) => node = child,
                    None => return false,
                },
                _ => return false,
            }
        }
        true
    }

    /// Add `path` as touched: its key prefix leads there, and the value at
    /// the end of it (or at its first list segment) is touched whole.
    pub fn add(&mut self, path: &Path) {
        let mut node = self;
        for segment in path.segments() {
            if node.whole {
                return;
            }
            match segment {
                Segment::Key(k) => node = node.child_mut(k),
                Segment::Index(_) | Segment::Wildcard => break,
            }
        }
        node.whole = true;
        node.children.clear();
    }

    /// The members of `value` outside the touch set (what the fast path
    /// keeps as bytes), in document order.
    pub fn untouched(&self, value: &serde_json::Value) -> Vec<Path> {
        fn walk(t: &Touch, value: &serde_json::Value, at: &Path, out: &mut Vec<Path>) {
            let serde_json::Value::Object(map) = value else {
                return;
            };
            if t.whole {
                return;
            }
            for (k, v) in map {
                match t.child(k) {
                    Some(child) => walk(child, v, &at.child(k.clone()), out),
                    None => out.push(at.child(k.clone())),
                }
            }
        }
        let mut out = Vec::new();
        walk(self, value, &Path::root(), &mut out);
        out
    }

    /// Add everything `other` touches.
    pub fn merge(&mut self, other: &Touch) {
        if self.whole {
            return;
        }
        if other.whole {
            self.whole = true;
            self.children.clear();
            return;
        }
        for (key, child) in &other.children {
            self.child_mut(key).merge(child);
        }
    }

    /// The paths of the touch set, for display: `spec.image`, `metadata.annotations["k"]`.
    pub fn paths(&self) -> Vec<Path> {
        fn walk(t: &Touch, at: &Path, out: &mut Vec<Path>) {
            if t.whole {
                out.push(at.clone());
                return;
            }
            for (k, child) in &t.children {
                walk(child, &at.child(k.clone()), out);
            }
        }
        let mut out = Vec::new();
        walk(self, &Path::root(), &mut out);
        out
    }
}

/// What converting an object of `resource` from version `from` to version
/// `to` touches, or `None` when it touches the whole object (CEL rules, a
/// whole-remainder stash).
pub fn conversion(ir: &Ir, resource: &ResourceIr, from: &str, to: &str) -> Option<Touch> {
    let mut touch = Touch::identity();
    if from == to {
        return Some(touch);
    }
    for version in [from, to] {
        if version == resource.hub {
            continue;
        }
        let v = resource.version(version)?;
        if v.remainder.is_some() {
            return None;
        }
        rules(ir, &v.rules, true, &mut touch)?;
    }
    Some(touch)
}

fn annotation(name: &str) -> Path {
    Path::root()
        .child("metadata")
        .child("annotations")
        .child(name.to_string())
}

/// A stash annotation, and the `resourceVersion` its sections record and
/// compare.
fn stash(name: &str, touch: &mut Touch) {
    touch.add(&annotation(name));
    touch.add(&Path::root().child("metadata").child("resourceVersion"));
}

/// Add what these rules touch. `top`: the rules are a version's own, whose
/// paths start at the object's root (rules under a `forEach` are relative
/// to an element, which the `forEach` touches whole). `None` for CEL.
fn rules(ir: &Ir, ids: &[RuleId], top: bool, touch: &mut Touch) -> Option<()> {
    for id in ids {
        let rule = ir.rule(*id);
        if top {
            for side in [Side::Hub, Side::Spoke] {
                for p in rule.paths(side) {
                    touch.add(p);
                }
            }
        }
        match &rule.op {
            Op::Cel { .. } => return None,
            Op::Stash { annotation: a, .. } => stash(a, touch),
            Op::Split {
                marker: Some(slot), ..
            } => stash(&slot.annotation, touch),
            Op::ForEach { rules: nested, .. } => rules(ir, nested, false, touch)?,
            _ => {}
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;

    fn crontab() -> Ir {
        let text = include_str!("../../../../katalogs/crontab.yaml");
        crate::compile_sources(&[Source::new("crontab.yaml", text)]).expect("crontab compiles")
    }

    fn shown(t: &Touch) -> Vec<String> {
        t.paths().iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_path_is_touched_whole_up_to_its_first_list_segment() {
        let mut t = Touch::default();
        t.add(&Path::parse("spec.containers[*].image").unwrap());
        t.add(&Path::parse("spec.template.metadata").unwrap());
        t.add(&Path::parse("spec.template.metadata.labels.app").unwrap());
        assert_eq!(shown(&t), ["spec.containers", "spec.template.metadata"]);
        assert!(t.covers(&Path::parse("spec").unwrap()));
        assert!(t.covers(&Path::parse("spec.template.metadata.name").unwrap()));
        assert!(!t.covers(&Path::parse("spec.replicas").unwrap()));
        assert!(!t.covers(&Path::parse("status").unwrap()));
    }

    #[test]
    fn the_crontab_conversions_touch_what_their_rules_name_and_the_stash() {
        let ir = crontab();
        let r = ir.resource("stable.example.com", "CronTab").unwrap();
        let to_v2 = conversion(&ir, r, "v1", "v2").expect("no CEL, no remainder");
        let paths = shown(&to_v2);
        for expected in [
            "apiVersion",
            "kind",
            "spec.image",
            "spec.container",
            "spec.concurrencyPolicy",
        ] {
            assert!(
                paths.iter().any(|p| p == expected),
                "{expected} in {paths:?}"
            );
        }
        // No rule between v1 and v2 stashes: metadata is not read at all.
        assert!(!to_v2.covers(&Path::parse("metadata").unwrap()));
        let to_v1beta1 = conversion(&ir, r, "v2", "v1beta1").unwrap();
        assert!(
            to_v1beta1
                .covers(&Path::parse(r#"metadata.annotations["katalog.dev/stash"]"#).unwrap())
        );
        assert!(!to_v1beta1.covers(&Path::parse("metadata.managedFields").unwrap()));
        assert!(!to_v1beta1.covers(&Path::parse("metadata.annotations.other").unwrap()));
        assert!(!to_v2.covers(&Path::parse("status").unwrap()));
        assert!(!to_v2.covers(&Path::parse("spec.jobTemplate").unwrap()));
        // The same version: only the apiVersion it keeps.
        let same = conversion(&ir, r, "v2", "v2").unwrap();
        assert_eq!(shown(&same), ["apiVersion", "kind"]);
    }
}
