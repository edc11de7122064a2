//! Test suites: Kubernetes-style documents that pair a Katalog with inputs
//! and expected outcomes, run by `katalog test` and by the project's own
//! tests. Pure: the caller reads the files and hands over their text.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::convert::{convert, json_eq, split_api_version};
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
    pub metadata: crate::document::Metadata,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Target version (`v2`) or apiVersion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Value>,
    /// A regex the error message must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// Run one case against a compiled Katalog.
pub fn run_case(ir: &Ir, case: &Case) -> CaseResult {
    let mut failures = Vec::new();
    match &case.conversion {
        Some(c) => run_conversion(ir, c, &mut failures),
        None => failures.push("the case has nothing to check (give `conversion`)".into()),
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
