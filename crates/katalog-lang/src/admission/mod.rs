//! Admission: validation, mutation and protections.
//!
//! Stages mirror conversion: `compile` turns the document's rules into the
//! checked IR below, `eval` evaluates it for one request (pure: values in,
//! verdict out), `review` speaks the AdmissionReview protocol.

pub mod compile;
pub mod eval;
pub mod known;
pub mod review;
pub(crate) mod versions;
pub mod webhooks;

use std::collections::BTreeSet;

use regex::Regex;
use serde_json::Value;

use crate::cel::CelProgram;
use crate::document::{Action, Operation, SelectorOperator};
use crate::path::Path;

pub use eval::{AdmissionInput, Endpoint, Verdict, evaluate};

/// Everything admission needs, compiled.
#[derive(Debug, Default)]
pub struct AdmissionIr {
    pub failure_policy: crate::document::FailurePolicy,
    pub timeout_seconds: u8,
    pub variables: Vec<(String, CelProgram)>,
    /// Namespaces no validation or mutation applies in (Katalog-wide;
    /// default `kube-system`). The generated webhooks leave them out.
    pub excluded_namespaces: Vec<String>,
    /// Whether the generated webhooks also leave out the engine's own
    /// namespace (default true).
    pub exclude_engine_namespace: bool,
    pub validations: Vec<ValidationIr>,
    pub mutations: Vec<MutationIr>,
    pub security: SecurityIr,
    /// Located warnings (severity [`crate::error::Severity::Warning`]): the
    /// Katalog compiles, but something in it looks wrong.
    pub warnings: Vec<crate::Diagnostic>,
}

impl AdmissionIr {
    /// True when the Katalog declares anything the given endpoint serves.
    pub fn serves(&self, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::Validate => !self.validations.is_empty(),
            Endpoint::Mutate => !self.mutations.is_empty(),
            Endpoint::DeletionProtection => {
                self.security.deletion.enabled || self.security.protected.iter().any(|r| r.deletion)
            }
            Endpoint::NamespaceProtection => {
                self.security.protected.iter().any(|r| {
                    !r.allowed_namespaces.is_empty() || !r.restricted_namespaces.is_empty()
                })
            }
            Endpoint::StrictMode => self.security.protected.iter().any(|r| r.strict_mode),
            Endpoint::All => true,
        }
    }
}

/// `group/version/resource` with `None` for `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePattern {
    pub group: Option<String>,
    pub version: Option<String>,
    pub resource: Option<String>,
}

impl ResourcePattern {
    pub fn matches(&self, group: &str, version: &str, resource: &str) -> bool {
        let ok = |p: &Option<String>, v: &str| p.as_deref().is_none_or(|p| p == v);
        ok(&self.group, group) && ok(&self.version, version) && ok(&self.resource, resource)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectorIr {
    pub match_labels: Vec<(String, String)>,
    pub expressions: Vec<(String, SelectorOperator, Vec<String>)>,
}

/// A Katalog-declared resource a rule applies to, and the one version the
/// rule is written against: a request at any other served version is
/// converted to it (with the Katalog's own conversion rules) before the rule
/// sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTarget {
    pub group: String,
    pub plural: String,
    pub version: String,
}

#[derive(Debug, Default)]
pub struct MatchIr {
    pub resources: Vec<ResourcePattern>,
    /// The declared resources the patterns select, each with the version
    /// the rule is evaluated at (the pinned version, or the hub for `*`).
    pub declared: Vec<DeclaredTarget>,
    pub operations: BTreeSet<Operation>,
    pub namespaces_include: Vec<String>,
    pub namespaces_exclude: Vec<String>,
    pub namespace_selector: Option<SelectorIr>,
    pub object_selector: Option<SelectorIr>,
    /// Empty: the main resource only. `*`: any.
    pub subresources: Vec<String>,
    pub users_include: Vec<String>,
    pub users_exclude: Vec<String>,
    pub groups_include: Vec<String>,
    pub groups_exclude: Vec<String>,
    pub condition: Option<ConditionIr>,
}

#[derive(Debug)]
pub enum ConditionIr {
    All(Vec<ConditionIr>),
    Any(Vec<ConditionIr>),
    Not(Box<ConditionIr>),
    Cel(CelProgram),
    Check {
        paths: Vec<Path>,
        check: Box<CheckIr>,
    },
}

/// The compiled tests of a `check`.
#[derive(Debug, Default)]
pub struct CheckIr {
    pub exists: bool,
    pub absent: bool,
    pub equals: Option<Value>,
    pub in_: Option<Vec<Value>>,
    pub not_in: Option<Vec<Value>>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub pattern: Option<Regex>,
    pub prefix: Option<String>,
    pub suffix: Option<String>,
    pub immutable: bool,
    pub unique: bool,
    pub cel: Option<CelProgram>,
}

#[derive(Debug)]
pub struct ValidationIr {
    pub name: String,
    pub matcher: MatchIr,
    pub action: Action,
    pub message: Option<String>,
    pub message_expression: Option<CelProgram>,
    /// The paths checked (several when `allContainers` expands one); empty
    /// means the whole object.
    pub paths: Vec<Path>,
    pub check: CheckIr,
    pub variables: Vec<(String, CelProgram)>,
    /// Where the rule was written.
    pub origin: String,
}

#[derive(Debug)]
pub enum MutationOp {
    Default {
        path: Path,
        value: Value,
    },
    Set {
        path: Path,
        value: Value,
    },
    Remove {
        path: Path,
    },
    Append {
        path: Path,
        value: Value,
    },
    Metadata {
        field: &'static str,
        add: Vec<(String, String)>,
        remove: Vec<String>,
    },
}

#[derive(Debug)]
pub struct MutationIr {
    pub name: String,
    pub matcher: MatchIr,
    pub ops: Vec<MutationOp>,
    pub origin: String,
}

impl MutationIr {
    /// The paths this mutation writes (for analysis and the fast path).
    pub fn writes(&self) -> Vec<Path> {
        self.ops
            .iter()
            .map(|op| match op {
                MutationOp::Default { path, .. }
                | MutationOp::Set { path, .. }
                | MutationOp::Remove { path }
                | MutationOp::Append { path, .. } => path.clone(),
                MutationOp::Metadata { field, .. } => Path::root().child("metadata").child(*field),
            })
            .collect()
    }
}

#[derive(Debug, Default)]
pub struct DeletionIr {
    pub enabled: bool,
    pub label: String,
    pub crds: bool,
    /// (group, resource, namespace, name) of the engine's own objects.
    pub engine: Vec<(String, String, String, String)>,
}

/// A declared resource as the protections see it.
#[derive(Debug, Default)]
pub struct ProtectedResource {
    pub group: String,
    pub plural: String,
    pub kind: String,
    pub deletion: bool,
    /// True when the resource's own `protection.deletion` decides.
    pub deletion_set_on_resource: bool,
    pub strict_mode: bool,
    pub allowed_namespaces: Vec<String>,
    pub restricted_namespaces: Vec<String>,
}

#[derive(Debug, Default)]
pub struct SecurityIr {
    pub deletion: DeletionIr,
    pub protected: Vec<ProtectedResource>,
    pub cleanup_on_shutdown: bool,
}
