//! The AdmissionReview protocol as one pure function per endpoint.
//!
//! Checked against the apiserver's
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`:
//! the response must be an AdmissionReview of the request's apiVersion
//! (`admission.k8s.io/v1` or `v1beta1`) with the request's uid; a patch
//! needs `patchType: JSONPatch`, and only a mutating webhook may return one.

use kube_core::TypeMeta;
use kube_core::admission::AdmissionResponse;
use kube_core::response::Status;
use serde_json::Value;

use super::eval::{AdmissionInput, Endpoint, evaluate};
use crate::document::Operation;
use crate::ir::Ir;

pub const ADMISSION_REVIEW_VERSIONS: [&str; 2] =
    ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// A review that cannot be answered at all (nothing to echo).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionReviewError {
    #[error("failed to read the AdmissionReview: {0}")]
    Malformed(String),
    #[error(
        "unsupported AdmissionReview apiVersion `{0}` (expected admission.k8s.io/v1 or v1beta1)"
    )]
    UnsupportedVersion(String),
}

/// Answer an AdmissionReview (as bytes) for one endpoint.
pub fn review_admission_bytes(
    ir: &Ir,
    body: &[u8],
    endpoint: Endpoint,
) -> Result<Value, AdmissionReviewError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| AdmissionReviewError::Malformed(e.to_string()))?;
    review_admission(ir, &value, endpoint)
}

/// Answer an AdmissionReview (as JSON) for one endpoint. A request whose
/// uid can be read but whose content cannot is denied with the reason.
pub fn review_admission(
    ir: &Ir,
    review: &Value,
    endpoint: Endpoint,
) -> Result<Value, AdmissionReviewError> {
    let api_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| AdmissionReviewError::Malformed("it has no apiVersion".into()))?;
    if !ADMISSION_REVIEW_VERSIONS.contains(&api_version) {
        return Err(AdmissionReviewError::UnsupportedVersion(api_version.into()));
    }
    let request = review
        .get("request")
        .filter(|r| r.is_object())
        .ok_or_else(|| AdmissionReviewError::Malformed("it has no `request`".into()))?;
    let uid = request
        .get("uid")
        .and_then(Value::as_str)
        .ok_or_else(|| AdmissionReviewError::Malformed("the request has no uid".into()))?;
    let mut response = AdmissionResponse::invalid("");
    response.types = TypeMeta {
        api_version: api_version.to_string(),
        kind: "AdmissionReview".into(),
    };
    response.uid = uid.to_string();
    response.allowed = true;
    response.result = Status::success();
    match input_from_request(request) {
        Err(e) => {
            response.allowed = false;
            response.result = Status::failure(
                &format!("malformed AdmissionReview request: {e}"),
                "BadRequest",
            )
            .with_code(400);
        }
        Ok(input) => {
            let verdict = evaluate(ir, &input, endpoint);
            if !verdict.allowed {
                response.allowed = false;
                response.result = Status::failure(
                    &format!("denied by katalog: {}", verdict.message()),
                    "Forbidden",
                )
                .with_code(403);
            }
            let warnings = verdict.warning_lines();
            if !warnings.is_empty() {
                response.warnings = Some(warnings);
            }
            for audit in &verdict.audits {
                response
                    .audit_annotations
                    .insert(audit.rule.clone(), truncate_chars(&audit.message, 1024));
            }
            if endpoint == Endpoint::Mutate && verdict.allowed && !verdict.patch.is_empty() {
                let patch: json_patch::Patch =
                    serde_json::from_value(Value::Array(verdict.patch.clone())).map_err(|e| {
                        AdmissionReviewError::Malformed(format!("internal: patch: {e}"))
                    })?;
                response = response.with_patch(patch).map_err(|e| {
                    AdmissionReviewError::Malformed(format!("internal: patch: {e}"))
                })?;
            }
        }
    }
    serde_json::to_value(response.into_review())
        .map_err(|e| AdmissionReviewError::Malformed(e.to_string()))
}

fn truncate_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

fn string_at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Read what the evaluator needs from an AdmissionReview's `request`.
pub fn input_from_request(request: &Value) -> Result<AdmissionInput, String> {
    let operation = match request.get("operation").and_then(Value::as_str) {
        Some("CREATE") => Operation::Create,
        Some("UPDATE") => Operation::Update,
        Some("DELETE") => Operation::Delete,
        Some("CONNECT") => Operation::Connect,
        Some(other) => return Err(format!("unknown operation `{other}`")),
        None => return Err("the request has no operation".into()),
    };
    if request
        .pointer("/resource/resource")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err("the request has no resource".into());
    }
    let object = request.get("object").filter(|v| !v.is_null()).cloned();
    let old_object = request.get("oldObject").filter(|v| !v.is_null()).cloned();
    for (name, v) in [("object", &object), ("oldObject", &old_object)] {
        if let Some(v) = v
            && !v.is_object()
        {
            return Err(format!("`{name}` is not an object"));
        }
    }
    let groups = match request.pointer("/userInfo/groups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => return Err("userInfo.groups is not a list".into()),
    };
    // CEL's `request` is the request without the objects (they have their own variables).
    let mut cel_request = request.clone();
    if let Value::Object(m) = &mut cel_request {
        m.shift_remove("object");
        m.shift_remove("oldObject");
    }
    Ok(AdmissionInput {
        operation,
        group: string_at(request, "/resource/group"),
        version: string_at(request, "/resource/version"),
        resource: string_at(request, "/resource/resource"),
        subresource: string_at(request, "/subResource"),
        kind: string_at(request, "/kind/kind"),
        name: string_at(request, "/name"),
        namespace: string_at(request, "/namespace"),
        object,
        old_object,
        username: string_at(request, "/userInfo/username"),
        groups,
        dry_run: request
            .get("dryRun")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        namespace_object: None,
        request: cel_request,
    })
}
