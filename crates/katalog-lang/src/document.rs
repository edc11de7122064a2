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
    #[serde(default, skip_serializing_if = "is_false")]
    pub lossy: bool,
}

/// Keep a field one side cannot represent in an annotation: `hub` for a
/// hub-only field (stashed on the way down), `spoke` for a spoke-only field
/// (stashed on the hub on the way up). Give exactly one.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StashRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    /// Overrides the resource's stash annotation for this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub lossy: bool,
}

/// Give a hub-only field a value on the way up when the spoke object carries
/// no stashed value for it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultRule {
    pub hub: String,
    pub value: Value,
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
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
    #[serde(default, skip_serializing_if = "is_false")]
    pub lossy: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelExample {
    pub hub: Value,
    pub spoke: Value,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The JSON Schema of a Katalog document, as checked in under `schemas/`.
pub fn json_schema() -> Value {
    let schema = schemars::schema_for!(KatalogDocument);
    serde_json::to_value(schema).unwrap_or(Value::Null)
}
