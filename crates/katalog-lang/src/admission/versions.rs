//! Write once, enforced at every version: a rule on a Katalog-declared
//! resource is written against one version (the hub, or the one its pattern
//! pins), and a request at any other served version is converted to it with
//! the Katalog's own conversion rules before the rule sees it. A mutation is
//! applied at the rule's version and converted back, so the patch the
//! engine answers with is valid for the request's version.
//!
//! The same thing happens whatever the registration: `katalog manifests`
//! registers declared resources at every version (`apiVersions: ["*"]`),
//! and a hand-made registration that lets the apiserver convert
//! (`matchPolicy: Equivalent`) sends the rule's version, which needs no
//! conversion here.

use serde_json::Value;

use super::MatchIr;
use super::input::AdmissionInput;
use crate::common::json::node::Obj;
use crate::conversion::{ConvertError, convert};
use crate::ir::Ir;

/// How a rule sees a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// The request is not on a declared resource, or already at the rule's version.
    AsIs,
    /// The request is on a declared resource the rule applies to, at
    /// another version: convert it to this one.
    Convert(&'a str),
    /// The request is on a declared resource the rule does not name.
    NotMatched,
}

/// The version a rule wants this request at.
pub(crate) fn target<'a>(ir: &Ir, m: &'a MatchIr, input: &AdmissionInput) -> Target<'a> {
    let declared = ir
        .resources
        .iter()
        .any(|r| r.group == input.group && r.plural == input.resource);
    if !declared {
        return Target::AsIs;
    }
    match m
        .declared
        .iter()
        .find(|t| t.group == input.group && t.plural == input.resource)
    {
        None => Target::NotMatched,
        Some(t) if t.version == input.version => Target::AsIs,
        Some(t) => Target::Convert(&t.version),
    }
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Convert one object of the request to `version`.
pub(crate) fn convert_object(
    ir: &Ir,
    object: &Value,
    group: &str,
    version: &str,
) -> Result<Value, ConvertError> {
    convert(ir, object, &api_version(group, version))
}

/// Why a request could not be seen at the version a rule is written against.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("failed to convert the {what} from {from} to {to}: {reason}")]
pub struct ViewError {
    /// `object` or `old object`.
    pub what: &'static str,
    /// The request's version.
    pub from: String,
    /// The rule's version.
    pub to: String,
    pub reason: ConvertError,
}

/// The request as a rule written against `version` sees it: object and
/// oldObject converted, `version` (and CEL's `request.kind` and
/// `request.resource`) at `version`, with `requestKind` and
/// `requestResource` keeping what was asked, as the apiserver does for a
/// webhook that matched through `matchPolicy: Equivalent`.
pub(crate) fn view_at(
    ir: &Ir,
    input: &AdmissionInput,
    version: &str,
) -> Result<AdmissionInput, ViewError> {
    let convert_one = |o: &Option<Obj>, what: &'static str| -> Result<Option<Obj>, ViewError> {
        o.as_deref()
            .map(|o| {
                convert_object(ir, o, &input.group, version).map_err(|reason| ViewError {
                    what,
                    from: input.version.clone(),
                    to: version.to_string(),
                    reason,
                })
            })
            .transpose()
            .map(|o| o.map(Obj::from))
    };
    let object = convert_one(&input.object, "object")?;
    let old_object = convert_one(&input.old_object, "old object")?;
    let mut request = input.request.clone();
    if let Value::Object(m) = &mut request {
        for (field, asked) in [("kind", "requestKind"), ("resource", "requestResource")] {
            if let Some(original) = m.get(field).cloned() {
                if m.get(asked).is_none_or(Value::is_null) {
                    m.insert(asked.into(), original);
                }
                if let Some(Value::Object(inner)) = m.get_mut(field) {
                    inner.insert("version".into(), Value::String(version.to_string()));
                }
            }
        }
    }
    Ok(AdmissionInput {
        version: version.to_string(),
        object,
        old_object,
        request,
        ..input.clone()
    })
}
