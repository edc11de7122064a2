//! The Katalog document as written: plain serde types, faithful to the YAML.
//!
//! These types carry no locations; the loader keeps a located tree beside them
//! and the compiler reports errors at a document path it resolves there. The
//! JSON Schema in `schemas/` is generated from these types.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const API_VERSION: &str = "katalog.dev/v1alpha1";
pub const KIND: &str = "Katalog";
/// The annotation that keeps stashed fields unless a resource names its own.
pub const DEFAULT_STASH_ANNOTATION: &str = "katalog.dev/stash";
/// The annotation of a `stash: {remainder: true}` unless it names its own.
pub const DEFAULT_REMAINDER_ANNOTATION: &str = "katalog.dev/remainder";

/// One YAML document of a Katalog.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "Katalog")]
pub struct KatalogDocument {
    /// Always `katalog.dev/v1alpha1`.
    pub api_version: String,
    /// Always `Katalog`.
    pub kind: String,
    pub metadata: Metadata,
    pub spec: KatalogSpec,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KatalogSpec {
    /// The custom resources this Katalog declares, each keyed by group + kind.
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// Validation and mutation rules, for declared resources and any other.
    #[serde(default)]
    pub admission: Admission,
    /// Protections: deletion, namespaces, strict mode.
    #[serde(default)]
    pub security: Security,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Scope {
    #[default]
    Namespaced,
    Cluster,
}

/// A custom resource and how its API versions convert.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    /// API group, e.g. `stable.example.com`.
    pub group: String,
    /// Kind, e.g. `CronTab`.
    pub kind: String,
    /// Plural resource name, e.g. `crontabs`.
    pub plural: String,
    #[serde(default)]
    pub scope: Scope,
    /// The hub version: the storage version every conversion goes through.
    pub hub: String,
    /// Every served version, the hub included.
    pub versions: Vec<String>,
    /// Path of the CRD manifest, relative to the Katalog file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd: Option<String>,
    /// Annotation that keeps stashed fields (default `katalog.dev/stash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stash_annotation: Option<String>,
    /// Per spoke version, the ordered conversion rules, declared relative to
    /// the hub. A served version with no entry converts unchanged.
    #[serde(default)]
    pub conversion: BTreeMap<String, Vec<Rule>>,
    /// Overrides of the Katalog-wide protections for this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<ResourceProtection>,
    /// Paths whose values no built-in admission message prints (they read
    /// `<redacted>`), e.g. `spec.password` or `spec.users[*].token`: a
    /// denial goes to the client, the logs and `/katalog`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive: Vec<String>,
}

/// One conversion rule. Each names the hub side and the spoke side; the
/// compiler derives hub→spoke ("down") and spoke→hub ("up") from it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Rule {
    Rename(RenameRule),
    Stash(StashRule),
    Default(DefaultRule),
    Constant(ConstantRule),
    Delete(DeleteRule),
    EnumMap(EnumMapRule),
    Coerce(CoerceRule),
    Split(SplitRule),
    Join(JoinRule),
    Wrap(WrapRule),
    Unwrap(WrapRule),
    ListToMap(ListMapRule),
    MapToList(ListMapRule),
    ForEach(ForEachRule),
    Cel(CelRule),
}

impl Rule {
    /// The key the rule is written under.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Rule::Rename(_) => "rename",
            Rule::Stash(_) => "stash",
            Rule::Default(_) => "default",
            Rule::Constant(_) => "constant",
            Rule::Delete(_) => "delete",
            Rule::EnumMap(_) => "enumMap",
            Rule::Coerce(_) => "coerce",
            Rule::Split(_) => "split",
            Rule::Join(_) => "join",
            Rule::Wrap(_) => "wrap",
            Rule::Unwrap(_) => "unwrap",
            Rule::ListToMap(_) => "listToMap",
            Rule::MapToList(_) => "mapToList",
            Rule::ForEach(_) => "forEach",
            Rule::Cel(_) => "cel",
        }
    }
}

/// Move a field or a subtree: `hub` on the hub, `spoke` on the spoke.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameRule {
    pub hub: String,
    pub spoke: String,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// Keep a field one side cannot represent in an annotation: `hub` for a
/// hub-only field (stashed on the way down), `spoke` for a spoke-only field
/// (stashed on the hub on the way up). Give exactly one, or `remainder: true`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StashRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    /// Overrides the resource's stash annotation for this field (with
    /// `remainder: true`, the remainder annotation, `katalog.dev/remainder`
    /// by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
    /// Keep everything the spoke's CRD schema cannot represent, in one
    /// annotation (neither `hub` nor `spoke`; needs the resource's `crd:`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub remainder: bool,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// Give a hub-only field a value on the way up when the spoke object carries
/// no stashed value for it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultRule {
    pub hub: String,
    pub value: Value,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// Set a field that only one side has to a fixed value when converting to
/// that side, and drop it the other way. Always lossy.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConstantRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    pub value: Value,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// Drop a field that only one side has, without keeping it. Always lossy.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Unmapped {
    /// A value the map does not name passes through unchanged, unless it is
    /// one the other side maps to (that would not come back): then it fails.
    #[default]
    Passthrough,
    /// A value the map does not name fails the conversion.
    Fail,
}

/// Map enum values: `map` goes from hub value to spoke value and must be
/// one-to-one.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnumMapRule {
    pub hub: String,
    pub spoke: String,
    pub map: BTreeMap<String, String>,
    #[serde(default)]
    pub unmapped: Unmapped,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ScalarType {
    String,
    Integer,
    Number,
    Boolean,
}

/// Change a scalar's type, e.g. an integer on the hub, a string on the spoke.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoerceRule {
    pub hub: String,
    /// Defaults to the hub path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    pub hub_type: ScalarType,
    pub spoke_type: ScalarType,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// Where the pieces of a split string go.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Parts {
    /// One path: the pieces form a list there.
    List(String),
    /// Paths in order: the n-th piece goes to the n-th path (separator form).
    Fields(Vec<String>),
    /// Capture name → path (pattern form).
    Named(BTreeMap<String, String>),
}

/// How a string is cut and put back together.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Splitter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separator: Option<String>,
    /// A regex with named captures (anchored at both ends by the compiler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Join template naming captures as `{name}`; required with `pattern`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// A piece equal to this stands for "absent", both ways.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

/// The hub holds one string, the spoke holds its pieces.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SplitRule {
    pub hub: String,
    pub spoke: Parts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// The spoke holds one string, the hub holds its pieces.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinRule {
    pub hub: Parts,
    pub spoke: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// `wrap`: a value on the hub becomes `{key: value}` (with `key`) or
/// `[value]` (with `list: true`) on the spoke. `unwrap` is the mirror: the hub
/// holds the wrapped form.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WrapRule {
    pub hub: String,
    pub spoke: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub list: bool,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// `listToMap`: a list of objects on the hub, a map keyed by the elements'
/// `key` field on the spoke. `mapToList` is the mirror.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListMapRule {
    pub hub: String,
    pub spoke: String,
    pub key: String,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// Apply nested rules to every element of a list; nested paths are relative
/// to the element.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForEachRule {
    pub hub: String,
    /// Defaults to the hub path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    pub rules: Vec<Rule>,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

/// An escape hatch: a CEL expression for each direction. `self` is the
/// value at the source path, `object` the whole object. A null result leaves
/// the target absent.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelRule {
    pub hub: String,
    pub spoke: String,
    pub to_spoke: String,
    pub to_hub: String,
    /// Pairs checked both ways at compile time; with at least one, the rule
    /// counts as covered by a round-trip test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<CelExample>,
    #[serde(
        default,
        skip_serializing_if = "is_false",
        deserialize_with = "lossy_flag"
    )]
    #[schemars(with = "LossyAck")]
    pub lossy: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelExample {
    pub hub: Value,
    pub spoke: Value,
}

/// The admission half of a Katalog.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Admission {
    /// What the apiserver does when the engine cannot be reached for the
    /// validating and mutating webhooks (default Fail; protections always Fail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
    /// The apiserver's timeout for each webhook call, 1 to 30 (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 30))]
    pub timeout_seconds: Option<u8>,
    /// Namespaces in which no validation or mutation applies (default
    /// `[kube-system, kube-node-lease, kube-public]`, the namespaces the
    /// authority ceiling protects; `[]` applies them everywhere). The generated webhooks
    /// leave these namespaces out, so a cluster whose engine is down can
    /// still start the pods that bring it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_namespaces: Option<Vec<String>>,
    /// The generated webhooks also leave out the engine's own namespace
    /// (the Service's namespace, or `--engine-namespace`); default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_engine_namespace: Option<bool>,
    /// CEL variables every rule may use as `variables.NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<Validation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutations: Vec<Mutation>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Variable {
    pub name: String,
    /// A CEL expression over `object`, `oldObject`, `request`,
    /// `namespaceObject` and earlier variables.
    pub expression: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum FailurePolicy {
    #[default]
    Fail,
    Ignore,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Action {
    /// Reject the request.
    #[default]
    Deny,
    /// Admit it with a warning the client shows.
    Warn,
    /// Admit it and record an audit annotation.
    Audit,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// A validation rule: when `match` holds, the values at `path` (or the whole
/// object) must pass `check`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// A lowercase name (`a-z`, `0-9`, `-`, `.`), used in messages and audit keys.
    pub name: String,
    /// `group/version/resource` patterns (`apps/v1/deployments`, `v1/pods`,
    /// `stable.example.com/*/crontabs`); `*` matches any one part.
    pub resources: Vec<String>,
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_: Option<Match>,
    #[serde(default)]
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A CEL expression giving the message (same variables as `check.cel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expression: Option<String>,
    /// The field checked; `[*]` selects every element (forEach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// With a path through `containers[*]`, also check `initContainers[*]`
    /// and `ephemeralContainers[*]`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub all_containers: bool,
    pub check: Check,
    /// With a `[*]` path: `all` (the default) means every element the
    /// innermost wildcard reaches passes the check (`exists`: each element
    /// has the field); `any` means at least one element has the field and
    /// passes every test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantifier: Option<Quantifier>,
    /// Check each element of a list on its own: `path` and `check` are then
    /// relative to the element, and a denial names the element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
    /// For a rule on `v1/pods`: also check the pod templates of the workload
    /// controllers (Deployment, StatefulSet, DaemonSet, ReplicaSet,
    /// ReplicationController, Job, CronJob). `true` by default; `false` for
    /// Pods only, or a list of controller kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_controllers: Option<PodControllers>,
    /// CEL variables for this rule only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
}

/// How the elements a `[*]` path reaches must satisfy a check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Quantifier {
    /// Every element passes (the default).
    #[default]
    All,
    /// At least one element passes.
    Any,
}

/// Which pod controllers a Pod rule also applies to.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum PodControllers {
    /// `true`: every controller; `false`: Pods only.
    Enabled(bool),
    /// Only these kinds (`Deployment`, `StatefulSet`, `DaemonSet`,
    /// `ReplicaSet`, `ReplicationController`, `Job`, `CronJob`).
    Kinds(Vec<String>),
}

/// A rule applied to each element of a list.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForEach {
    /// The list: `spec.containers[*]` (or `spec.containers`).
    pub path: String,
    /// Only the elements that meet this condition; its paths are relative
    /// to the element, and CEL sees `element` and `elementIndex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
}

/// Tests on a value; every test given must pass.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Check {
    /// The path selects at least one value.
    #[serde(default, skip_serializing_if = "is_false")]
    pub exists: bool,
    /// The path selects nothing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub absent: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    #[serde(rename = "in", default, skip_serializing_if = "Option::is_none")]
    pub in_: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_in: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// `[min, max]`, both inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(serde_json::Number, serde_json::Number)>,
    /// In characters, for strings; in elements, for lists and maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// A regex the whole string must match (it is anchored at both ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// On UPDATE, a value that was set may not change or go away.
    #[serde(default, skip_serializing_if = "is_false")]
    pub immutable: bool,
    /// The selected values are pairwise different.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unique: bool,
    /// A CEL expression that must be true; `self` is the value checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<String>,
}

/// When a rule applies.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Default: CREATE and UPDATE.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<Operation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<NamespaceMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// Subresources to match (`status`, `scale`, `*`); by default only the
    /// main resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subresources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<IncludeExclude>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<IncludeExclude>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceMatch {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Labels of the namespace. Registration turns it into the webhook's
    /// `namespaceSelector`; offline it is checked against the namespace
    /// object when one is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncludeExclude {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

/// A Kubernetes label selector.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A condition over the object: exactly one of `all`, `any`, `not`, `cel`,
/// or `path` + `check`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<Box<Condition>>,
    /// A CEL expression that must be true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// With a `[*]` path: every element (`all`, the default) or at least one (`any`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantifier: Option<Quantifier>,
}

/// A mutation rule: when `match` holds, change the object. Give one of
/// `default`, `set`, `remove`, `append`, and/or label and annotation edits.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mutation {
    pub name: String,
    pub resources: Vec<String>,
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_: Option<Match>,
    /// Set the value where the field is absent. With `[*]`, on every element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<PathValue>,
    /// Set the value, replacing what is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<PathValue>,
    /// Remove the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<PathOnly>,
    /// Append the value to a list unless the list already holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<PathValue>,
    /// RFC 6902 operations; a failing `test` operation skips the mutation
    /// silently, any other failure skips it with a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patch: Option<Vec<Value>>,
    /// An RFC 7386 merge patch (`null` removes a field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_patch: Option<Value>,
    /// An overlay of defaults: fills only the fields that are absent,
    /// recursively through objects (lists and other values are never merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<Value>,
    /// With a path through `containers[*]`, also change `initContainers[*]`
    /// and `ephemeralContainers[*]`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub all_containers: bool,
    /// Change each element of a list on its own: the paths of `default`,
    /// `set`, `remove` and `append` are then relative to the element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
    /// For a mutation on `v1/pods`: also change the pod templates of the
    /// workload controllers (see validations); `true` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_controllers: Option<PodControllers>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_labels: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add_annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_annotations: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathValue {
    pub path: String,
    /// The value (`null` included); give this or `valueExpression`.
    #[serde(
        default,
        deserialize_with = "present_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub value: Option<Value>,
    /// A CEL expression computing the value (`object`, `oldObject`,
    /// `request`, `namespaceObject`, `variables`; in `forEach`, `element` and
    /// `elementIndex`); a CEL error skips the mutation with a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_expression: Option<String>,
}

/// A `value` that is present is `Some`, even when it is `null`.
fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PathOnly {
    pub path: String,
}

/// Protections. Each is served by its own webhook endpoint.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Security {
    #[serde(default)]
    pub deletion_protection: DeletionProtection,
    #[serde(default)]
    pub namespace_protection: NamespaceProtection,
    /// Deny an UPDATE that removes the protection label.
    #[serde(default, skip_serializing_if = "is_false")]
    pub strict_mode: bool,
    /// Remove the engine's webhook configurations on graceful exit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cleanup_on_shutdown: bool,
}

pub const DEFAULT_PROTECTION_LABEL: &str = "katalog.dev/protected";

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletionProtection {
    #[serde(default, skip_serializing_if = "is_false")]
    pub enabled: bool,
    /// Objects with this label set to `"true"` may not be deleted
    /// (default `katalog.dev/protected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Also protect the CRDs of the declared resources (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crds: Option<bool>,
    /// The engine's own objects, protected while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineObjects>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineObjects {
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceProtection {
    /// When not empty, declared resources may only be created here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_namespaces: Vec<String>,
    /// Declared resources may never be created here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restricted_namespaces: Vec<String>,
}

/// Per-resource overrides of the protections; namespace lists are merged
/// with the Katalog-wide ones.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceProtection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restricted_namespaces: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `lossy` on a rule: the author accepts that the rule (or what the schema
/// analysis finds about it) loses data. `true`, or the reason as a string
/// (`lossy: "v1beta1 has no field for the timeout"`), which says the same
/// and documents why.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its JSON Schema is used
enum LossyAck {
    Flag(bool),
    /// Why the loss is acceptable; not empty.
    Reason(String),
}

fn lossy_flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Bool(b) => Ok(b),
        Value::String(s) if !s.trim().is_empty() => Ok(true),
        _ => Err(serde::de::Error::custom(
            "`lossy` is `true`, `false`, or the reason for the loss as a non-empty string",
        )),
    }
}

/// The JSON Schema of a Katalog document, as checked in under `schemas/`.
pub fn json_schema() -> Value {
    let schema = schemars::schema_for!(KatalogDocument);
    serde_json::to_value(schema).unwrap_or(Value::Null)
}
