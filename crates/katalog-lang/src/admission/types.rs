//! The types of well-known built-in fields, so that `equals: "false"` on a
//! boolean is a compile error rather than a rule that can never pass.
//!
//! A small table keyed by resource and path pattern; a schema-driven version
//! (CRDs, OpenAPI of the built-in types) can replace it.

use serde_json::Value;

use super::ResourcePattern;
use super::autogen::CONTROLLERS;
use crate::common::path::{Path, Segment};

/// The JSON type a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    Boolean,
    Integer,
}

impl FieldType {
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Boolean => "a boolean",
            FieldType::Integer => "an integer",
        }
    }

    fn holds(self, v: &Value) -> bool {
        match self {
            FieldType::Boolean => v.is_boolean(),
            FieldType::Integer => v.is_i64() || v.is_u64(),
        }
    }
}

/// Paths below a pod spec (`containers[*]` stands for every container list).
const POD_SPEC_FIELDS: &[(&str, FieldType)] = &[
    ("hostNetwork", FieldType::Boolean),
    ("hostPID", FieldType::Boolean),
    ("hostIPC", FieldType::Boolean),
    ("hostUsers", FieldType::Boolean),
    ("shareProcessNamespace", FieldType::Boolean),
    ("automountServiceAccountToken", FieldType::Boolean),
    ("enableServiceLinks", FieldType::Boolean),
    ("setHostnameAsFQDN", FieldType::Boolean),
    ("terminationGracePeriodSeconds", FieldType::Integer),
    ("activeDeadlineSeconds", FieldType::Integer),
    ("priority", FieldType::Integer),
    ("securityContext.runAsNonRoot", FieldType::Boolean),
    ("securityContext.runAsUser", FieldType::Integer),
    ("securityContext.runAsGroup", FieldType::Integer),
    ("securityContext.fsGroup", FieldType::Integer),
    (
        "securityContext.windowsOptions.hostProcess",
        FieldType::Boolean,
    ),
    ("containers[*].stdin", FieldType::Boolean),
    ("containers[*].stdinOnce", FieldType::Boolean),
    ("containers[*].tty", FieldType::Boolean),
    (
        "containers[*].securityContext.privileged",
        FieldType::Boolean,
    ),
    (
        "containers[*].securityContext.allowPrivilegeEscalation",
        FieldType::Boolean,
    ),
    (
        "containers[*].securityContext.runAsNonRoot",
        FieldType::Boolean,
    ),
    (
        "containers[*].securityContext.readOnlyRootFilesystem",
        FieldType::Boolean,
    ),
    (
        "containers[*].securityContext.runAsUser",
        FieldType::Integer,
    ),
    (
        "containers[*].securityContext.runAsGroup",
        FieldType::Integer,
    ),
    (
        "containers[*].securityContext.windowsOptions.hostProcess",
        FieldType::Boolean,
    ),
    ("containers[*].ports[*].hostPort", FieldType::Integer),
    ("containers[*].ports[*].containerPort", FieldType::Integer),
];

/// Controllers with `spec.replicas`.
const REPLICATED: &[&str] = &[
    "deployments",
    "statefulsets",
    "replicasets",
    "replicationcontrollers",
];

/// The path with indices as `[*]` and every container list as `containers`.
fn normalized(segments: &[Segment]) -> String {
    let segs: Vec<Segment> = segments
        .iter()
        .map(|s| match s {
            Segment::Index(_) => Segment::Wildcard,
            Segment::Key(k) if k == "initContainers" || k == "ephemeralContainers" => {
                Segment::Key("containers".into())
            }
            other => other.clone(),
        })
        .collect();
    Path::from_segments(segs).to_string()
}

fn matches_resource(p: &ResourcePattern, group: &str, version: &str, resource: &str) -> bool {
    p.matches(group, version, resource)
        && p.resource.is_some()
        && p.group.as_deref().is_some_and(|g| g == group)
}

/// The type of the field at `path` for rules on `resources`, when every
/// resource the rule names knows it (and agrees).
pub fn field_type(resources: &[ResourcePattern], path: &Path) -> Option<FieldType> {
    let mut found: Option<FieldType> = None;
    for r in resources {
        let mut this = None;
        let segs = path.segments();
        // Pod specs: the Pod's, and a controller's template.
        let mut prefixes: Vec<(Path, bool)> = Vec::new();
        if matches_resource(r, "", "v1", "pods") {
            prefixes.push((Path::root().child("spec"), true));
        }
        for (_, g, v, res, t) in CONTROLLERS {
            if matches_resource(r, g, v, res) {
                let t = Path::parse(t).unwrap_or_default();
                prefixes.push((t.child("spec"), true));
                if REPLICATED.contains(&res) {
                    prefixes.push((Path::root().child("spec"), false));
                }
            }
        }
        for (prefix, pod_spec) in prefixes {
            let Some(rest) = segs.strip_prefix(prefix.segments()) else {
                continue;
            };
            let text = normalized(rest);
            let t = if pod_spec {
                POD_SPEC_FIELDS
                    .iter()
                    .find(|(p, _)| *p == text)
                    .map(|(_, t)| *t)
            } else {
                (text == "replicas").then_some(FieldType::Integer)
            };
            if t.is_some() {
                this = t;
                break;
            }
        }
        match (this, found) {
            (None, _) => return None,
            (Some(t), None) => found = Some(t),
            (Some(t), Some(f)) if t != f => return None,
            _ => {}
        }
    }
    found
}

/// What to write instead of a literal of the wrong type, when it is a quoted
/// form of a right one (`"false"` → `false`, `"0"` → `0`).
pub fn unquoted(t: FieldType, v: &Value) -> Option<Value> {
    let s = v.as_str()?;
    let parsed: Value = serde_json::from_str(s).ok()?;
    t.holds(&parsed).then_some(parsed)
}

/// True when a literal cannot be a value of the type.
pub fn mismatches(t: FieldType, v: &Value) -> bool {
    !t.holds(v) && !v.is_null()
}
