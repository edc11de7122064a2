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

use super::eval::{AdmissionInput, Endpoint, evaluate_only};
use crate::common::json::ValueAt;
use crate::common::json::node::{Node, Obj};
use crate::front::document::Operation;
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

/// Why an AdmissionReview's `request` cannot be evaluated (the review is
/// answered, denied with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    #[error("unknown operation `{0}`")]
    UnknownOperation(String),
    #[error("the request has no operation")]
    NoOperation,
    #[error("the request has no resource")]
    NoResource,
    /// `object` or `oldObject` is something else than an object.
    #[error("`{field}` is not an object")]
    NotAnObject { field: &'static str },
    /// A CREATE or an UPDATE without its object.
    #[error("{} {} request has no `object`", article(.operation), .operation.as_str())]
    NoObject { operation: Operation },
    #[error("an UPDATE request has no `oldObject`")]
    NoOldObject,
    #[error("userInfo.groups is not a list")]
    GroupsNotAList,
}

fn article(operation: &Operation) -> &'static str {
    if *operation == Operation::Update {
        "an"
    } else {
        "a"
    }
}

/// Answer an AdmissionReview (as bytes) for one endpoint.
pub fn review_admission_bytes(
    ir: &Ir,
    body: &[u8],
    endpoint: Endpoint,
) -> Result<Value, AdmissionReviewError> {
    let (_, response) = parse_and_answer(ir, body, endpoint, None)?;
    Ok(response)
}

/// How an answered AdmissionReview came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Allowed with a patch (the mutating endpoint).
    Patched,
    Denied,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Patched => "patched",
            Verdict::Denied => "denied",
        }
    }
}

/// What a server records of an answered AdmissionReview: read from the
/// request and the answer once, so that the caller inspects no JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub uid: String,
    /// `request.resource`.
    pub group: String,
    pub version: String,
    pub resource: String,
    pub operation: String,
    pub namespace: String,
    pub name: String,
    pub verdict: Verdict,
    /// The answer's `status.message` (why it was denied; empty otherwise).
    pub message: String,
}

/// An AdmissionReview's answer: its bytes, and how it came out.
#[derive(Debug, Clone)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub outcome: Outcome,
}

/// The one call a server makes for an AdmissionReview's body: the answer's
/// bytes and a typed [`Outcome`], for the rules of one generated webhook
/// (`only`, see [`review_admission_only`]) or all of the endpoint's. The
/// request's objects move into the evaluator (no copy). An error is a
/// review that cannot be answered (400).
pub fn review_bytes(
    ir: &Ir,
    body: &[u8],
    endpoint: Endpoint,
    only: Option<&[usize]>,
) -> Result<Answer, AdmissionReviewError> {
    let (review, response) = parse_and_answer(ir, body, endpoint, only)?;
    let at = |v: &Value, pointer: &str| {
        v.at(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let allowed = response
        .at("/response/allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let verdict = match (allowed, response.at("/response/patch").is_some()) {
        (false, _) => Verdict::Denied,
        (true, true) => Verdict::Patched,
        (true, false) => Verdict::Allowed,
    };
    let outcome = Outcome {
        uid: at(&review, "/request/uid"),
        group: at(&review, "/request/resource/group"),
        version: at(&review, "/request/resource/version"),
        resource: at(&review, "/request/resource/resource"),
        operation: at(&review, "/request/operation"),
        namespace: at(&review, "/request/namespace"),
        name: at(&review, "/request/name"),
        verdict,
        message: at(&response, "/response/status/message"),
    };
    let bytes = serde_json::to_vec(&response)
        .map_err(|e| AdmissionReviewError::Malformed(format!("internal: {e}")))?;
    Ok(Answer { bytes, outcome })
}

/// Parse a review, move its objects out of it into the evaluator's input,
/// and answer it: the review (without its objects) and the answer.
fn parse_and_answer(
    ir: &Ir,
    body: &[u8],
    endpoint: Endpoint,
    only: Option<&[usize]>,
) -> Result<(Value, Value), AdmissionReviewError> {
    let malformed = |e: serde_json::Error| AdmissionReviewError::Malformed(e.to_string());
    // The review is ours: the objects move into the evaluator's input
    // instead of being copied.
    let (value, objects) = if ir.admission.objects_read_by_cel_only(endpoint) {
        // Read as nodes: only CEL reads them (see `Obj`).
        let mut review = Node::parse(body).map_err(malformed)?;
        let objects = match review.get_mut("request") {
            Some(request) if request.is_object() => (
                request.take("object").map(Obj::from_node),
                request.take("oldObject").map(Obj::from_node),
            ),
            _ => (None, None),
        };
        (review.into_value(), objects)
    } else {
        // No key is special (see `parse_value`): both parses read the same.
        let mut value: Value = crate::common::json::node::parse_value(body).map_err(malformed)?;
        let objects = match value.get_mut("request") {
            Some(Value::Object(request)) => (
                request.shift_remove("object").map(Obj::from),
                request.shift_remove("oldObject").map(Obj::from),
            ),
            _ => (None, None),
        };
        (value, objects)
    };
    let response = answer(ir, &value, endpoint, only, Some(objects))?;
    Ok((value, response))
}

/// Answer an AdmissionReview (as JSON) for one endpoint. A request whose
/// uid can be read but whose content cannot is denied with the reason.
pub fn review_admission(
    ir: &Ir,
    review: &Value,
    endpoint: Endpoint,
) -> Result<Value, AdmissionReviewError> {
    review_admission_only(ir, review, endpoint, None)
}

/// [`review_admission`] for the rules of one generated webhook (indices of
/// validations or mutations, see [`webhooks`](super::webhooks)).
pub fn review_admission_only(
    ir: &Ir,
    review: &Value,
    endpoint: Endpoint,
    only: Option<&[usize]>,
) -> Result<Value, AdmissionReviewError> {
    answer(ir, review, endpoint, only, None)
}

/// `taken`: the request's `object` and `oldObject`, when they were moved
/// out of `review`.
fn answer(
    ir: &Ir,
    review: &Value,
    endpoint: Endpoint,
    only: Option<&[usize]>,
    taken: Option<(Option<Obj>, Option<Obj>)>,
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
    let input = match taken {
        Some((object, old_object)) => input_from_parts(request, object, old_object),
        None => input_from_request(request),
    };
    match input {
        Err(e) => {
            response.allowed = false;
            response.result = Status::failure(
                &format!("malformed AdmissionReview request: {e}"),
                "BadRequest",
            )
            .with_code(400);
        }
        Ok(input) => {
            let verdict = evaluate_only(ir, &input, endpoint, only);
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
    let mut out = serde_json::to_value(response.into_review())
        .map_err(|e| AdmissionReviewError::Malformed(e.to_string()))?;
    // kube-core serializes the patch bytes as a list of numbers; Kubernetes
    // (Go's []byte) writes base64, and that is what clients expect to read.
    if let Some(patch) = out.pointer_mut("/response/patch")
        && let Value::Array(bytes) = patch
    {
        let raw: Vec<u8> = bytes
            .iter()
            .filter_map(Value::as_u64)
            .map(|b| b as u8)
            .collect();
        *patch = Value::String(base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            raw,
        ));
    }
    Ok(out)
}

fn truncate_chars(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

fn string_at(v: &Value, pointer: &str) -> String {
    v.at(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Read what the evaluator needs from an AdmissionReview's `request`.
pub fn input_from_request(request: &Value) -> Result<AdmissionInput, RequestError> {
    input_from_parts(
        request,
        request.get("object").cloned().map(Obj::from),
        request.get("oldObject").cloned().map(Obj::from),
    )
}

/// [`input_from_request`] with the objects given apart (`request` may still
/// hold them; they are not read from it).
fn input_from_parts(
    request: &Value,
    object: Option<Obj>,
    old_object: Option<Obj>,
) -> Result<AdmissionInput, RequestError> {
    let operation = match request.get("operation").and_then(Value::as_str) {
        Some("CREATE") => Operation::Create,
        Some("UPDATE") => Operation::Update,
        Some("DELETE") => Operation::Delete,
        Some("CONNECT") => Operation::Connect,
        Some(other) => return Err(RequestError::UnknownOperation(other.to_string())),
        None => return Err(RequestError::NoOperation),
    };
    if request
        .at("/resource/resource")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err(RequestError::NoResource);
    }
    let object = object.filter(|v| !v.is_null());
    let old_object = old_object.filter(|v| !v.is_null());
    for (field, v) in [("object", &object), ("oldObject", &old_object)] {
        if let Some(v) = v
            && !v.is_object()
        {
            return Err(RequestError::NotAnObject { field });
        }
    }
    // The apiserver always sends the object of a CREATE and an UPDATE, and
    // the old object of an UPDATE: without them no rule could be evaluated.
    if matches!(operation, Operation::Create | Operation::Update) && object.is_none() {
        return Err(RequestError::NoObject { operation });
    }
    if operation == Operation::Update && old_object.is_none() {
        return Err(RequestError::NoOldObject);
    }
    let groups = match request.at("/userInfo/groups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => return Err(RequestError::GroupsNotAList),
    };
    // A DELETE of a collection (deletecollection, the namespace controller
    // emptying a namespace) is reviewed once per object with an empty
    // `name`: the object's own name is the one the rules must see.
    let mut name = string_at(request, "/name");
    if name.is_empty()
        && operation == Operation::Delete
        && let Some(n) = old_object.as_ref().and_then(|o| match o.node() {
            Some(node) => match node.get("metadata")?.get("name")? {
                Node::String(name) => Some(name.as_str()),
                _ => None,
            },
            None => o.at("/metadata/name").and_then(Value::as_str),
        })
    {
        name = n.to_string();
    }
    // CEL's `request` is the request without the objects (they have their own variables).
    let cel_request = match request {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "object" && *k != "oldObject")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    };
    Ok(AdmissionInput {
        operation,
        group: string_at(request, "/resource/group"),
        version: string_at(request, "/resource/version"),
        resource: string_at(request, "/resource/resource"),
        subresource: string_at(request, "/subResource"),
        kind: string_at(request, "/kind/kind"),
        name,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;
    use serde_json::json;

    const KATALOG: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: t}
spec:
  admission:
    validations:
      - name: internal-images
        resources: [v1/pods]
        path: spec.containers[*].image
        check: {prefix: "registry.internal/"}
      - name: long-warning
        resources: [v1/pods]
        action: Warn
        message: "this warning is deliberately far longer than the one hundred and twenty characters that the apiserver accepts per warning line"
        path: metadata.labels.team
        check: {exists: true}
      - name: audited
        resources: [v1/pods]
        action: Audit
        message: "no team label"
        path: metadata.labels.team
        check: {exists: true}
    mutations:
      - name: managed-by
        resources: [v1/pods]
        addLabels: {app.kubernetes.io/managed-by: katalog}
"#;

    fn ir() -> Ir {
        crate::compile_sources(&[Source::new("t.yaml", KATALOG)]).expect("compiles")
    }

    fn answer(fixture: &str, endpoint: Endpoint) -> Value {
        review_admission_bytes(&ir(), fixture.as_bytes(), endpoint).expect("well-formed")
    }

    #[test]
    fn validate_denies_with_403_naming_the_rule_and_echoes_uid_and_version() {
        let out = answer(
            include_str!("testdata/pod-create-v1.json"),
            Endpoint::Validate,
        );
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(out["kind"], "AdmissionReview");
        let r = &out["response"];
        assert_eq!(r["uid"], "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4");
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 403);
        assert_eq!(r["status"]["reason"], "Forbidden");
        assert_eq!(
            r["status"]["message"],
            "denied by katalog: [internal-images] `spec.containers[0].image` = \"jmalloc/echo-server\" must start with \"registry.internal/\""
        );
        // The validating endpoint never returns a patch, even with mutations declared.
        assert!(
            r.get("patch").is_none() && r.get("patchType").is_none(),
            "{r}"
        );
        let warnings = r["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 1);
        let w = warnings[0].as_str().unwrap();
        assert_eq!(w.chars().count(), 120, "{w}");
        assert!(w.starts_with("[long-warning] this warning") && w.ends_with('…'));
        assert_eq!(r["auditAnnotations"], json!({"audited": "no team label"}));
    }

    #[test]
    fn the_bytes_entry_point_answers_as_the_json_one_with_its_outcome() {
        let ir = ir();
        let body = include_str!("testdata/pod-create-v1.json").as_bytes();
        let cases = [
            (Endpoint::Validate, Verdict::Denied),
            (Endpoint::Mutate, Verdict::Patched),
        ];
        for (endpoint, verdict) in cases {
            let got = review_bytes(&ir, body, endpoint, None).expect("well-formed");
            let json = review_admission_bytes(&ir, body, endpoint).expect("well-formed");
            let bytes: Value = serde_json::from_slice(&got.bytes).expect("JSON");
            assert_eq!(bytes, json, "{endpoint:?}");
            let o = &got.outcome;
            assert_eq!(o.verdict, verdict, "{endpoint:?}");
            assert_eq!(o.uid, "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4");
            assert_eq!(
                (o.group.as_str(), o.version.as_str(), o.resource.as_str()),
                ("", "v1", "pods")
            );
            assert_eq!(o.operation, "CREATE");
            assert_eq!(
                (o.namespace.as_str(), o.name.as_str()),
                ("team-a", "echo-pod")
            );
            assert_eq!(
                o.message,
                json["response"]["status"]["message"].as_str().unwrap_or("")
            );
        }
        // Only the rules of one webhook: the denying rule left out.
        let only: Vec<usize> = ir
            .admission
            .validations
            .iter()
            .enumerate()
            .filter(|(_, v)| v.name != "internal-images")
            .map(|(i, _)| i)
            .collect();
        let got = review_bytes(&ir, body, Endpoint::Validate, Some(&only)).expect("well-formed");
        assert_eq!(got.outcome.verdict, Verdict::Allowed);
        assert_eq!(got.outcome.message, "");
        // Unanswerable: the same errors as the JSON entry point.
        for bad in [
            &b"{"[..],
            br#"{"apiVersion": "admission.k8s.io/v2", "request": {}}"#,
        ] {
            assert_eq!(
                review_bytes(&ir, bad, Endpoint::Validate, None).map(|a| a.bytes),
                review_admission_bytes(&ir, bad, Endpoint::Validate)
                    .map(|v| serde_json::to_vec(&v).unwrap())
            );
            assert!(review_bytes(&ir, bad, Endpoint::Validate, None).is_err());
        }
    }

    #[test]
    fn mutate_returns_an_escaped_json_patch() {
        let out = answer(
            include_str!("testdata/pod-create-v1.json"),
            Endpoint::Mutate,
        );
        let r = &out["response"];
        assert_eq!(r["allowed"], true);
        assert_eq!(r["patchType"], "JSONPatch");
        let bytes = base64_decode(r["patch"].as_str().unwrap());
        let patch: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "katalog"}])
        );
    }

    #[test]
    fn v1beta1_dry_run_is_evaluated_and_echoed() {
        let out = answer(
            include_str!("testdata/pod-create-v1beta1.json"),
            Endpoint::Validate,
        );
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(
            out["response"]["uid"],
            "11111111-aaaa-bbbb-cccc-222222222222"
        );
        assert_eq!(out["response"]["allowed"], true);
    }

    #[test]
    fn a_delete_in_a_collection_is_judged_by_the_name_of_its_object() {
        // What the apiserver sends for each object of a deletecollection
        // (and of the namespace controller emptying a namespace): no `name`.
        let ir = crate::compile_sources(&[Source::new(
            "protections.yaml",
            include_str!("../../../../katalogs/protections.yaml"),
        )])
        .expect("compiles");
        let review = |group: &str, resource: &str, ns: &str, name: &str| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "u", "operation": "DELETE", "name": "", "namespace": ns,
                "kind": {"group": group, "version": "v1", "kind": "K"},
                "resource": {"group": group, "version": "v1", "resource": resource},
                "userInfo": {"username": "admin"},
                "oldObject": {"metadata": {"name": name, "namespace": ns}},
            }})
        };
        for (group, resource, ns, name) in [
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
                "databases.data.example.com",
            ),
            ("apps", "deployments", "katalog-system", "katalog"),
            ("", "secrets", "katalog-system", "katalog-tls"),
        ] {
            let request = review(group, resource, ns, name);
            assert_eq!(input_from_request(&request["request"]).unwrap().name, name);
            let out = review_admission(&ir, &request, Endpoint::DeletionProtection).unwrap();
            assert_eq!(out["response"]["allowed"], false, "{name}: {out}");
        }
    }

    #[test]
    fn malformed_reviews() {
        let ir = ir();
        assert!(matches!(
            review_admission_bytes(&ir, b"[1,2]", Endpoint::Validate),
            Err(AdmissionReviewError::Malformed(_))
        ));
        assert!(matches!(
            review_admission(
                &ir,
                &json!({"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}),
                Endpoint::Validate
            ),
            Err(AdmissionReviewError::UnsupportedVersion(_))
        ));
        assert!(matches!(
            review_admission(&ir, &json!({"apiVersion": "admission.k8s.io/v1", "request": {"operation": "CREATE"}}), Endpoint::Validate),
            Err(AdmissionReviewError::Malformed(m)) if m.contains("uid")
        ));
        // With a uid the answer is a well-formed denial saying what is wrong.
        for (request, want) in [
            (json!({"uid": "u"}), "the request has no operation"),
            (
                json!({"uid": "u", "operation": "PATCH", "resource": {"resource": "pods"}}),
                "unknown operation `PATCH`",
            ),
            (
                json!({"uid": "u", "operation": "CREATE"}),
                "the request has no resource",
            ),
            (
                json!({"uid": "u", "operation": "CREATE", "resource": {"resource": "pods"}, "object": [1]}),
                "`object` is not an object",
            ),
            (
                json!({"uid": "u", "operation": "CREATE", "resource": {"resource": "pods"}, "object": {}, "userInfo": {"groups": "x"}}),
                "userInfo.groups is not a list",
            ),
            // No rule here uses `exists`: an absent object must still not pass.
            (
                json!({"uid": "u", "operation": "CREATE", "resource": {"resource": "pods"}, "object": null}),
                "a CREATE request has no `object`",
            ),
            (
                json!({"uid": "u", "operation": "CREATE", "resource": {"resource": "pods"}}),
                "a CREATE request has no `object`",
            ),
            (
                json!({"uid": "u", "operation": "UPDATE", "resource": {"resource": "pods"}, "oldObject": {}}),
                "an UPDATE request has no `object`",
            ),
            (
                json!({"uid": "u", "operation": "UPDATE", "resource": {"resource": "pods"}, "object": {}}),
                "an UPDATE request has no `oldObject`",
            ),
        ] {
            let out = review_admission(&ir, &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}), Endpoint::Validate).unwrap();
            assert_eq!(out["response"]["uid"], "u");
            assert_eq!(out["response"]["allowed"], false);
            assert_eq!(out["response"]["status"]["code"], 400);
            let msg = out["response"]["status"]["message"].as_str().unwrap();
            assert!(msg.contains(want), "{msg} should contain {want}");
        }
    }

    /// With the baseline Pod Security Katalog (CEL only) a review's
    /// objects are parsed as nodes and answered without a conversion, as
    /// the JSON entry point (objects as `Value`s) answers them: compliant
    /// and denied Pods, a CREATE and an UPDATE.
    #[test]
    fn a_review_whose_objects_only_cel_reads_is_answered_without_converting_them() {
        let text = include_str!("../../../../katalogs/pod-security-baseline.yaml");
        let baseline = crate::compile_sources(&[Source::new("pod-security-baseline.yaml", text)])
            .expect("compiles");
        assert!(
            baseline
                .admission
                .objects_read_by_cel_only(Endpoint::Validate)
        );
        assert!(
            !baseline
                .admission
                .objects_read_by_cel_only(Endpoint::Mutate)
        );
        assert!(!ir().admission.objects_read_by_cel_only(Endpoint::Validate));
        // An expression only cel's interpreter runs would convert them.
        let interpreted = |cel: &str| {
            let text = format!(
                "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {{name: t}}\nspec:\n  admission:\n    validations:\n      - name: r\n        resources: [v1/pods]\n        check: {{cel: \"{cel}\"}}\n"
            );
            let ir = crate::compile_sources(&[Source::new("t.yaml", text)]).expect("compiles");
            ir.admission.objects_read_by_cel_only(Endpoint::Validate)
        };
        assert!(interpreted("size(object.metadata.name) > 0"));
        assert!(!interpreted(
            "quantity('1Gi').isGreaterThan(quantity('1Mi'))"
        ));
        let create: Value =
            serde_json::from_str(include_str!("testdata/pod-create-v1.json")).unwrap();
        let mut privileged = create.clone();
        privileged["request"]["object"]["spec"]["containers"][0]["securityContext"] =
            json!({"privileged": true, "capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}});
        privileged["request"]["object"]["spec"]["hostNetwork"] = json!(true);
        let mut update = privileged.clone();
        update["request"]["operation"] = json!("UPDATE");
        update["request"]["oldObject"] = create["request"]["object"].clone();
        let mut relabel = create.clone();
        relabel["request"]["operation"] = json!("UPDATE");
        relabel["request"]["oldObject"] = privileged["request"]["object"].clone();
        relabel["request"]["oldObject"]["spec"] = create["request"]["object"]["spec"].clone();
        // A Deployment: its pod template is viewed as a Pod (autogen).
        let mut deployment = privileged.clone();
        let pod = privileged["request"]["object"].clone();
        deployment["request"]["kind"] =
            json!({"group": "apps", "version": "v1", "kind": "Deployment"});
        deployment["request"]["resource"] =
            json!({"group": "apps", "version": "v1", "resource": "deployments"});
        deployment["request"]["object"] = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"replicas": 2, "template": {"metadata": pod["metadata"], "spec": pod["spec"]}}
        });
        let verdicts = [
            Verdict::Allowed,
            Verdict::Denied,
            Verdict::Denied,
            Verdict::Allowed,
            Verdict::Denied,
            Verdict::Allowed,
        ];
        // serde_json's raw-value key, first in a map (Go sorts `$` first):
        // an ordinary member on both paths (the Value path of `ir()` too).
        let mut raw_key = create.clone();
        raw_key["request"]["object"]["metadata"]["annotations"] =
            json!({"$serde_json::private::RawValue": "[1]", "a": "b"});
        let body = serde_json::to_vec(&raw_key).unwrap();
        let denied = review_bytes(&ir(), &body, Endpoint::Validate, None).expect("answered");
        assert_eq!(denied.outcome.verdict, Verdict::Denied, "internal-images");
        let reviews = [create, privileged, update, relabel, deployment, raw_key];
        for (review, verdict) in reviews.iter().zip(verdicts) {
            let body = serde_json::to_vec(review).unwrap();
            let before = crate::common::json::node::CONVERSIONS.with(|c| c.get());
            let got = review_bytes(&baseline, &body, Endpoint::Validate, None).expect("answered");
            let converted = crate::common::json::node::CONVERSIONS.with(|c| c.get()) - before;
            assert_eq!(converted, 0, "objects converted for {review}");
            assert_eq!(
                got.outcome.verdict,
                verdict,
                "{}",
                String::from_utf8_lossy(&got.bytes)
            );
            let want = review_admission(&baseline, review, Endpoint::Validate).expect("answered");
            let got: Value = serde_json::from_slice(&got.bytes).unwrap();
            assert_eq!(got, want);
        }
    }

    fn platform() -> Ir {
        let text = include_str!("../../../../katalogs/platform.yaml");
        crate::compile_sources(&[Source::new("platform.yaml", text)]).expect("platform compiles")
    }

    /// Reviews a real kube-apiserver v1.36.3 sent under katalogs/platform.yaml
    /// (captured by the ignored `capture_apiserver_reviews` test in
    /// tests/e2e.rs): a cluster admin creates a Deployment
    /// of a public image (the mutating webhook's request, after the
    /// apiserver's defaulting), then declares 0 replicas (the validating
    /// webhook's request, with the old object).
    #[test]
    fn deployment_reviews_captured_from_the_apiserver() {
        let ir = platform();
        let create = include_str!("testdata/apiserver/deployment-create-v1.json");
        let request: Value = serde_json::from_str(create).unwrap();
        assert_eq!(request["request"]["operation"], "CREATE");
        assert_eq!(
            request["request"]["userInfo"]["groups"][0],
            "system:masters"
        );

        let out = review_admission_bytes(&ir, create.as_bytes(), Endpoint::Mutate).unwrap();
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(out["kind"], "AdmissionReview");
        let r = &out["response"];
        assert_eq!(r["uid"], request["request"]["uid"]);
        assert_eq!(r["allowed"], true);
        assert_eq!(r["patchType"], "JSONPatch");
        let patch: Value =
            serde_json::from_slice(&base64_decode(r["patch"].as_str().unwrap())).unwrap();
        // Replicas and the pull policy were already set by the apiserver's
        // defaulting, so only the labels and the pull secret are added.
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "platform"},
                {"op": "add", "path": "/metadata/labels/platform.example.com~1policy", "value": "v1"},
                {"op": "add", "path": "/spec/template/spec/imagePullSecrets", "value": [{"name": "registry-internal"}]}
            ])
        );
        // The public image is allowed: system:masters is exempt.
        let out = review_admission_bytes(&ir, create.as_bytes(), Endpoint::Validate).unwrap();
        assert_eq!(out["response"]["allowed"], true, "{out}");
        assert!(out["response"].get("patch").is_none());

        let update = include_str!("testdata/apiserver/deployment-update-v1.json");
        let request: Value = serde_json::from_str(update).unwrap();
        assert_eq!(request["request"]["operation"], "UPDATE");
        assert_eq!(request["request"]["oldObject"]["spec"]["replicas"], 2);
        assert_eq!(request["request"]["object"]["spec"]["replicas"], 0);
        let out = review_admission_bytes(&ir, update.as_bytes(), Endpoint::Validate).unwrap();
        let r = &out["response"];
        assert_eq!(r["uid"], request["request"]["uid"]);
        assert_eq!(r["allowed"], false);
        assert_eq!(r["status"]["code"], 403);
        assert_eq!(r["status"]["reason"], "Forbidden");
        assert_eq!(
            r["status"]["message"],
            "denied by katalog: [replicas-minimum] spec.replicas must be at least 1; to stop the \
             workload, scale it down with kubectl scale --replicas=0 instead of declaring 0"
        );
        // Already labelled and given the pull secret: nothing to patch.
        let out = review_admission_bytes(&ir, update.as_bytes(), Endpoint::Mutate).unwrap();
        assert_eq!(out["response"]["allowed"], true);
        assert!(out["response"].get("patch").is_none(), "{out}");
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        let mut buf = 0u32;
        let mut bits = 0;
        for c in s.bytes().filter(|c| *c != b'=') {
            let v = ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
            buf = (buf << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((buf >> bits) as u8);
                buf &= (1 << bits) - 1;
            }
        }
        out
    }
}
