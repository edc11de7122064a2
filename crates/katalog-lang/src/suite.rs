//! Test suites: Kubernetes-style documents that pair a Katalog with inputs
//! and expected outcomes, run by `katalog test` and by the project's own
//! tests. Pure: the caller reads the files and hands over their text.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::admission::eval::{Endpoint, SimulatedRequest, evaluate};
use crate::common::json::{json_eq, split_api_version};
use crate::conversion::review::convert_checked as convert;
use crate::ir::Ir;

pub const SUITE_KIND: &str = "KatalogTest";

/// One test-suite document.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "KatalogTest")]
pub struct SuiteDocument {
    /// Always `katalog.dev/v1alpha1`.
    pub api_version: String,
    /// Always `KatalogTest`.
    pub kind: String,
    pub metadata: crate::front::document::Metadata,
    pub spec: SuiteSpec,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuiteSpec {
    /// The Katalog under test: a file or directory, relative to this file.
    pub katalog: String,
    pub cases: Vec<Case>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<ConversionCase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<AdmissionCase>,
}

/// An admission request and what must come of it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionCase {
    #[serde(flatten)]
    pub request: SimulatedRequest,
    /// Which webhook to ask (default `all`: mutations, then validations and
    /// protections on the mutated object).
    #[serde(default)]
    pub endpoint: EndpointName,
    pub expect: AdmissionExpect,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointName {
    #[default]
    All,
    Validate,
    Mutate,
    DeletionProtection,
    NamespaceProtection,
    StrictModeProtection,
}

impl From<EndpointName> for Endpoint {
    fn from(e: EndpointName) -> Endpoint {
        match e {
            EndpointName::All => Endpoint::All,
            EndpointName::Validate => Endpoint::Validate,
            EndpointName::Mutate => Endpoint::Mutate,
            EndpointName::DeletionProtection => Endpoint::DeletionProtection,
            EndpointName::NamespaceProtection => Endpoint::NamespaceProtection,
            EndpointName::StrictModeProtection => Endpoint::StrictMode,
        }
    }
}

/// Expected outcome; every key that is given is checked, and a key that is
/// left out is not. Only `patched` may be `null` (it means "no change");
/// a `null` anywhere else is an error, so a mistyped expectation cannot pass
/// unchecked.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionExpect {
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "bool")]
    pub allowed: Option<bool>,
    /// A regex the denial message (`[rule] message; ...`) must match.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "String")]
    pub message: Option<String>,
    /// Regexes that must each match one warning; `[]` means no warning.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Vec<String>")]
    pub warnings: Option<Vec<String>>,
    /// Names of the rules that must have recorded an audit annotation, in
    /// order; `[]` means no audit.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Vec<String>")]
    pub audits: Option<Vec<String>>,
    /// The object after mutation; `null` means no change at all.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Value")]
    pub patched: Option<Option<Value>>,
    /// The exact JSON Patch; `[]` means no change.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Vec<Value>")]
    pub patch: Option<Vec<Value>>,
}

/// A key that is present: `Some` of its value, so that `Option<Option<T>>`
/// tells `key: null` (`Some(None)`) from a key left out (`None`, by
/// `#[serde(default)]`), and a `null` given for a non-optional `T` is an
/// error instead of "not checked".
fn given<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Either `versions` (the same object at several versions; every ordered
/// pair is converted and compared), or `input` + `to` with `expect` or
/// `expectError`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversionCase {
    /// Version → the object at that version (`apiVersion` may be left out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, Value>,
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    pub input: Option<Value>,
    /// Target version (`v2`) or apiVersion.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "String")]
    pub to: Option<String>,
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    pub expect: Option<Value>,
    /// A regex the error message must match.
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "String")]
    pub expect_error: Option<String>,
}

/// The outcome of one case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub passed: bool,
    /// Why it failed: one line per mismatch.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// Load the test-suite documents (`kind: KatalogTest`) of a source, with
/// located errors; the Katalog loader ([`crate::front::load`]) never sees them.
pub fn load(source: &crate::Source) -> Result<Vec<SuiteDocument>, crate::Diagnostics> {
    use crate::error::ErrorKind;
    use crate::front::source::{DocPath, Node, NodeKind};
    let mut diags = crate::Diagnostics::default();
    let roots = crate::front::load::read_yaml(source)?;
    let mut out = Vec::new();
    for root in roots.iter().filter(|r| !matches!(r.kind, NodeKind::Null)) {
        let mut ctx = crate::front::load::Ctx {
            source,
            root,
            diags: &mut diags,
        };
        let top = DocPath::default();
        match root.get("kind").map(Node::to_value) {
            Some(Value::String(k)) if k == SUITE_KIND => {}
            other => {
                ctx.error(
                    ErrorKind::Shape,
                    &top.key("kind"),
                    format!(
                        "expected kind `{SUITE_KIND}`, found {}",
                        other.map_or("nothing".to_string(), |v| v.to_string())
                    ),
                );
                continue;
            }
        }
        if let Some(doc) = ctx.decode::<SuiteDocument>(root.to_value(), &top) {
            out.push(doc);
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

/// Run one case against a compiled Katalog.
pub fn run_case(ir: &Ir, case: &Case) -> CaseResult {
    let mut failures = Vec::new();
    match (&case.conversion, &case.admission) {
        (Some(c), None) => run_conversion(ir, c, &mut failures),
        (None, Some(a)) => run_admission(ir, a, &mut failures),
        _ => failures.push("a case checks exactly one of `conversion` or `admission`".into()),
    }
    CaseResult {
        name: case.name.clone(),
        passed: failures.is_empty(),
        failures,
    }
}

/// Fill in `apiVersion` from the version key when the object leaves it out.
fn at_version(ir: &Ir, object: &Value, version: &str) -> Value {
    let mut o = object.clone();
    if let Value::Object(m) = &mut o
        && !m.contains_key("apiVersion")
    {
        let kind = m.get("kind").and_then(Value::as_str).unwrap_or("");
        let group = ir
            .resources
            .iter()
            .find(|r| r.kind == kind)
            .map(|r| r.group.as_str())
            .unwrap_or("");
        m.insert(
            "apiVersion".into(),
            Value::String(format!("{group}/{version}")),
        );
    }
    o
}

fn desired(object: &Value, to: &str) -> String {
    if to.contains('/') {
        return to.to_string();
    }
    let (group, _) = split_api_version(
        object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    format!("{group}/{to}")
}

fn run_conversion(ir: &Ir, c: &ConversionCase, failures: &mut Vec<String>) {
    for (from, object) in &c.versions {
        let input = at_version(ir, object, from);
        for (to, expected) in &c.versions {
            if from == to {
                continue;
            }
            let want = at_version(ir, expected, to);
            let target = desired(&input, to);
            match convert(ir, &input, &target) {
                Ok(got) if json_eq(&got, &want) => {}
                Ok(got) => failures.push(format!(
                    "{from} → {to}: {}",
                    describe_difference(&want, &got)
                )),
                Err(e) => failures.push(format!("{from} → {to}: failed: {e}")),
            }
        }
    }
    if let Some(input) = &c.input {
        let Some(to) = &c.to else {
            failures.push("`input` needs `to`".into());
            return;
        };
        let target = desired(input, to);
        let result = convert(ir, input, &target);
        match (&c.expect, &c.expect_error, result) {
            (_, Some(pattern), Err(e)) => match regex::Regex::new(pattern) {
                Ok(re) if re.is_match(&e.to_string()) => {}
                Ok(_) => failures.push(format!("error `{e}` does not match /{pattern}/")),
                Err(err) => failures.push(format!("expectError is not a valid regex: {err}")),
            },
            (_, Some(pattern), Ok(got)) => failures.push(format!(
                "expected an error matching /{pattern}/, got {}",
                compact(&got)
            )),
            (Some(want), None, Ok(got)) => {
                let want = at_version(ir, want, split_api_version(&target).1);
                if !json_eq(&want, &got) {
                    failures.push(describe_difference(&want, &got));
                }
            }
            (Some(_), None, Err(e)) => failures.push(format!("failed: {e}")),
            (None, None, _) => failures.push("`input` needs `expect` or `expectError`".into()),
        }
    }
    if c.versions.is_empty() && c.input.is_none() {
        failures.push("the conversion case needs `versions` or `input`".into());
    }
}

fn regex_or_fail(pattern: &str, failures: &mut Vec<String>) -> Option<regex::Regex> {
    match regex::Regex::new(pattern) {
        Ok(r) => Some(r),
        Err(e) => {
            failures.push(format!("/{pattern}/ is not a valid regex: {e}"));
            None
        }
    }
}

fn run_admission(ir: &Ir, case: &AdmissionCase, failures: &mut Vec<String>) {
    let input = match case.request.to_input(ir) {
        Ok(i) => i,
        Err(e) => {
            failures.push(format!("cannot build the request: {e}"));
            return;
        }
    };
    let verdict = evaluate(ir, &input, case.endpoint.into());
    let e = &case.expect;
    let message = verdict.message();
    if let Some(allowed) = e.allowed
        && allowed != verdict.allowed
    {
        failures.push(if verdict.allowed {
            "expected a denial, but the request was allowed".to_string()
        } else {
            format!("expected it to be allowed, but it was denied: {message}")
        });
    }
    if let Some(p) = &e.message
        && let Some(re) = regex_or_fail(p, failures)
        && !re.is_match(&message)
    {
        failures.push(format!(
            "the denial message {message:?} does not match /{p}/"
        ));
    }
    if let Some(expected) = &e.warnings {
        let lines = verdict.warning_lines();
        if expected.is_empty() && !lines.is_empty() {
            failures.push(format!("expected no warning, got {lines:?}"));
        }
        for p in expected {
            if let Some(re) = regex_or_fail(p, failures)
                && !lines.iter().any(|l| re.is_match(l))
            {
                failures.push(format!("no warning matches /{p}/ (warnings: {lines:?})"));
            }
        }
    }
    if let Some(expected) = &e.audits {
        let got: Vec<&str> = verdict.audits.iter().map(|a| a.rule.as_str()).collect();
        if got != expected.iter().map(String::as_str).collect::<Vec<_>>() {
            failures.push(format!("expected audits {expected:?}, got {got:?}"));
        }
    }
    if let Some(want) = &e.patched {
        match (&verdict.patched, want) {
            (None, None) => {}
            (None, Some(_)) => failures.push("expected a mutation, but nothing changed".into()),
            (Some(_), None) => failures.push(format!(
                "expected no change, but the mutation patched {}",
                compact(&Value::Array(verdict.patch.clone()))
            )),
            (Some(got), Some(want)) if !json_eq(got, want) => failures.push(format!(
                "patched object: {}",
                describe_difference(want, got)
            )),
            _ => {}
        }
    }
    if let Some(want) = &e.patch
        && *want != verdict.patch
    {
        failures.push(format!(
            "expected patch {}, got {}",
            compact(&Value::Array(want.clone())),
            compact(&Value::Array(verdict.patch.clone()))
        ));
    }
    // Mutations must be idempotent: the apiserver may call the webhook again.
    if let Some(patched) = &verdict.patched {
        let mut again = input.clone();
        again.object = Some(patched.clone().into());
        let second = evaluate(ir, &again, Endpoint::Mutate);
        if !second.patch.is_empty() {
            failures.push(format!(
                "mutation is not idempotent: a second pass patches {}",
                compact(&Value::Array(second.patch))
            ));
        }
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The first places where two values differ, as `path: expected X, got Y`.
pub fn describe_difference(want: &Value, got: &Value) -> String {
    let mut diffs = Vec::new();
    diff(want, got, String::new(), &mut diffs);
    if diffs.is_empty() {
        return "values differ".into();
    }
    let more = diffs.len().saturating_sub(5);
    let mut s = diffs.into_iter().take(5).collect::<Vec<_>>().join("; ");
    if more > 0 {
        s.push_str(&format!("; and {more} more"));
    }
    s
}

fn diff(want: &Value, got: &Value, at: String, out: &mut Vec<String>) {
    let here = if at.is_empty() {
        "<root>".to_string()
    } else {
        at.clone()
    };
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match b.get(k) {
                    Some(w) => diff(v, w, p, out),
                    None => out.push(format!("{p}: expected {}, missing", compact(v))),
                }
            }
            for (k, v) in b {
                if !a.contains_key(k) {
                    let p = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    out.push(format!("{p}: unexpected {}", compact(v)));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                diff(v, w, format!("{at}[{i}]"), out);
            }
        }
        _ if json_eq(want, got) => {}
        _ => out.push(format!(
            "{here}: expected {}, got {}",
            compact(want),
            compact(got)
        )),
    }
}

/// The JSON Schema of a test-suite document.
pub fn json_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(SuiteDocument)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patched_null_is_an_expectation_and_a_left_out_key_is_not() {
        let given: AdmissionExpect = serde_json::from_value(json!({"patched": null})).unwrap();
        assert_eq!(given.patched, Some(None));
        let left_out: AdmissionExpect = serde_json::from_value(json!({})).unwrap();
        assert_eq!(left_out.patched, None);
        let object: AdmissionExpect = serde_json::from_value(json!({"patched": {"a": 1}})).unwrap();
        assert_eq!(object.patched, Some(Some(json!({"a": 1}))));
    }

    #[test]
    fn null_is_rejected_where_it_would_mean_not_checked() {
        for key in ["allowed", "message", "warnings", "audits", "patch"] {
            let r = serde_json::from_value::<AdmissionExpect>(json!({ key: null }));
            assert!(r.is_err(), "`{key}: null` must not load");
        }
        for key in ["to", "expectError"] {
            let r = serde_json::from_value::<ConversionCase>(json!({ key: null }));
            assert!(r.is_err(), "`{key}: null` must not load");
        }
        let empty: AdmissionExpect =
            serde_json::from_value(json!({"warnings": [], "audits": [], "patch": []})).unwrap();
        assert_eq!(
            (empty.warnings, empty.audits, empty.patch),
            (Some(vec![]), Some(vec![]), Some(vec![]))
        );
    }
}
