//! The ConversionReview protocol as one pure function.
//!
//! The apiserver (`webhook_converter.go`) sends `apiextensions.k8s.io/v1` or
//! `v1beta1` reviews; the response echoes the request's apiVersion and uid.
//! Either every object converts, or the response is a `Failure` naming the
//! first object that did not and the rule that stopped it.

use kube_core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube_core::response::Status;
use serde_json::Value;

use super::eval::{ConvertError, convert, convert_owned};
use crate::common::json::node::parse_value;
use crate::common::json::split_api_version;
use crate::ir::Ir;

/// The review versions the apiserver may send.
pub const CONVERSION_REVIEW_VERSIONS: [&str; 2] =
    ["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"];

/// A review that cannot be answered at all (no request to echo).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    #[error("failed to read the ConversionReview: {0}")]
    Malformed(String),
    #[error("failed to read the ConversionReview: it has no `request`")]
    NoRequest,
    #[error(
        "unsupported ConversionReview apiVersion `{0}` (expected apiextensions.k8s.io/v1 or v1beta1)"
    )]
    UnsupportedVersion(String),
}

/// Answer a ConversionReview given as JSON.
pub fn review_conversion(ir: &Ir, review: &Value) -> Result<Value, ReviewError> {
    review_conversion_owned(ir, review.clone())
}

/// [`review_conversion`] taking the review by value (no copy is made).
pub fn review_conversion_owned(ir: &Ir, mut review: Value) -> Result<Value, ReviewError> {
    // The objects skip the typed read and are put back after it: reading a
    // `Value` out of a `Value` takes a map whose first key is serde_json's
    // raw-value key for raw JSON text, where it is an ordinary member.
    let objects = match review.pointer_mut("/request/objects") {
        Some(Value::Array(objects)) => Some(std::mem::take(objects)),
        _ => None,
    };
    let review: ConversionReview =
        serde_json::from_value(review).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if !CONVERSION_REVIEW_VERSIONS.contains(&review.types.api_version.as_str()) {
        return Err(ReviewError::UnsupportedVersion(review.types.api_version));
    }
    let mut request = ConversionRequest::try_from(review).map_err(|_| ReviewError::NoRequest)?;
    if let Some(objects) = objects {
        request.objects = objects;
    }
    let response = answer(ir, request);
    serde_json::to_value(response.into_review()).map_err(|e| ReviewError::Malformed(e.to_string()))
}

/// Answer a ConversionReview given as bytes (what the server receives).
pub fn review_conversion_bytes(ir: &Ir, body: &[u8]) -> Result<Value, ReviewError> {
    let value = parse_value(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    review_conversion_owned(ir, value)
}

/// Convert one object as the webhook does: the conversion, then the checks
/// the apiserver makes of a webhook's answer (`kind`, and metadata other
/// than labels and annotations, unchanged). What `katalog convert` and
/// `katalog test` run, so they refuse what the apiserver would.
pub fn convert_checked(
    ir: &Ir,
    object: &Value,
    desired_api_version: &str,
) -> Result<Value, ConvertError> {
    let before = Invariants::of(object);
    let out = convert(ir, object, desired_api_version)?;
    before.check(&out)?;
    Ok(out)
}

fn answer(ir: &Ir, mut request: ConversionRequest) -> ConversionResponse {
    let desired = request.desired_api_version.clone();
    let objects = std::mem::take(&mut request.objects);
    let response = ConversionResponse::for_request(request);
    let mut converted = Vec::with_capacity(objects.len());
    for (i, object) in objects.into_iter().enumerate() {
        let who = describe(&object);
        let before = Invariants::of(&object);
        // Cooperative cancellation: a review past its deadline stops here.
        if let Err(e) = crate::common::budget::check_deadline() {
            let message = format!("failed to convert object {i} ({who}) to {desired}: {e}");
            return response.failure(Status::failure(&message, "ConversionFailed"));
        }
        match convert_owned(ir, object, &desired).and_then(|out| {
            before.check(&out)?;
            Ok(out)
        }) {
            Ok(out) => converted.push(out),
            Err(e) => {
                let message = format!("failed to convert object {i} ({who}) to {desired}: {e}");
                return response.failure(Status::failure(&message, "ConversionFailed"));
            }
        }
    }
    response.success(converted)
}

fn describe(object: &Value) -> String {
    let get = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (group, version) = split_api_version(get("/apiVersion"));
    let ns = get("/metadata/namespace");
    let name = get("/metadata/name");
    let who = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    };
    format!(
        "{} {who} at {}{version}",
        get("/kind"),
        if group.is_empty() {
            String::new()
        } else {
            format!("{group}/")
        }
    )
}

/// What `webhook_converter.go` rejects: a changed kind, and metadata changes
/// other than labels and annotations. Taken from the input before it is
/// converted in place.
pub(crate) struct Invariants {
    kind: Option<Value>,
    metadata: Value,
}

fn metadata_without_labels(object: &Value) -> Value {
    match object.get("metadata") {
        Some(Value::Object(m)) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "labels" && *k != "annotations")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

impl Invariants {
    /// Whether `output`'s metadata, labels and annotations aside, equals
    /// the input's (compared in place: no copy of the output's).
    fn same_metadata(&self, output: &Value) -> bool {
        let skipped = |k: &String| k == "labels" || k == "annotations";
        match (&self.metadata, output.get("metadata")) {
            (Value::Object(before), Some(Value::Object(after))) => {
                let mut count = 0;
                after.iter().filter(|(k, _)| !skipped(k)).all(|(k, v)| {
                    count += 1;
                    before.get(k) == Some(v)
                }) && count == before.len()
            }
            _ => self.metadata == metadata_without_labels(output),
        }
    }

    pub(crate) fn of(input: &Value) -> Self {
        Invariants {
            kind: input.get("kind").cloned(),
            metadata: metadata_without_labels(input),
        }
    }

    pub(crate) fn check(&self, output: &Value) -> Result<(), ConvertError> {
        let err = |message: &str| ConvertError {
            message: message.into(),
            rule: None,
        };
        if self.kind.as_ref() != output.get("kind") {
            return Err(err("the conversion changed `kind`"));
        }
        if !self.same_metadata(output) {
            return Err(err(
                "the conversion changed metadata other than labels and annotations",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Source;
    use serde_json::json;

    fn crontab() -> Ir {
        let text = include_str!("../../../../katalogs/crontab.yaml");
        crate::compile_sources(&[Source::new("crontab.yaml", text)]).expect("crontab compiles")
    }

    fn review(ir: &Ir, body: &str) -> Value {
        review_conversion_bytes(ir, body.as_bytes()).expect("a well-formed review")
    }

    #[test]
    fn v1_review_converts_mixed_source_versions_in_order() {
        let out = review(
            &crontab(),
            include_str!("testdata/conversion-review-v1.json"),
        );
        assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(out["kind"], "ConversionReview");
        let resp = &out["response"];
        assert_eq!(resp["uid"], "0000000-0000-0000-0000-000000000000");
        assert_eq!(resp["result"]["status"], "Success");
        let objs = resp["convertedObjects"].as_array().unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0]["apiVersion"], "stable.example.com/v2");
        assert_eq!(
            objs[0]["metadata"]["uid"],
            "6c9a5f5e-2a57-4c5b-9d4e-1f0e3b1c2d3e"
        );
        assert_eq!(
            objs[0]["spec"],
            json!({"schedule": "0 3 * * *", "container": {"image": "busybox"},
                   "timeoutSeconds": 600, "concurrencyPolicy": "ReplaceConcurrent"})
        );
        assert_eq!(
            objs[1]["metadata"],
            json!({"name": "legacy", "namespace": "team-a"})
        );
        assert_eq!(
            objs[1]["spec"],
            json!({"schedule": "*/5 * * * *", "container": {"image": "nginx"},
                   "concurrencyPolicy": "AllowConcurrent"})
        );
    }

    #[test]
    fn the_invariant_check_refuses_a_changed_kind_or_metadata() {
        let input = json!({"kind": "CronTab", "metadata": {"name": "a", "labels": {"x": "1"}}});
        let before = Invariants::of(&input);
        let same = json!({"kind": "CronTab", "metadata": {"name": "a", "annotations": {"y": "2"}}});
        assert_eq!(before.check(&same), Ok(()));
        let kind = json!({"kind": "Other", "metadata": {"name": "a"}});
        assert_eq!(
            before.check(&kind).unwrap_err().message,
            "the conversion changed `kind`"
        );
        let changed = "the conversion changed metadata other than labels and annotations";
        for output in [
            json!({"kind": "CronTab", "metadata": {"name": "b"}}),
            json!({"kind": "CronTab", "metadata": {"name": "a", "uid": "u"}}),
            json!({"kind": "CronTab", "metadata": {}}),
            json!({"kind": "CronTab", "metadata": {"labels": {"x": "1"}}}),
            json!({"kind": "CronTab"}),
            json!({"kind": "CronTab", "metadata": "a"}),
        ] {
            assert_eq!(
                before.check(&output).unwrap_err().message,
                changed,
                "{output}"
            );
        }
        // Key order does not count.
        let two = json!({"kind": "K", "metadata": {"name": "a", "namespace": "n"}});
        let swapped =
            json!({"kind": "K", "metadata": {"namespace": "n", "labels": {}, "name": "a"}});
        assert_eq!(Invariants::of(&two).check(&swapped), Ok(()));
    }

    #[test]
    fn v1beta1_review_echoes_its_api_version() {
        let out = review(
            &crontab(),
            include_str!("testdata/conversion-review-v1beta1.json"),
        );
        assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1beta1");
        assert_eq!(
            out["response"]["uid"],
            "11111111-2222-3333-4444-555555555555"
        );
        let obj = &out["response"]["convertedObjects"][0];
        assert_eq!(obj["apiVersion"], "stable.example.com/v1beta1");
        assert_eq!(
            obj["metadata"]["annotations"]["katalog.dev/stash"],
            r#"{"v1":{"spec.timeoutSeconds":600,"spec.concurrencyPolicy":"Forbid"}}"#
        );
    }

    #[test]
    fn one_bad_object_fails_the_whole_review_naming_it() {
        let body = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": "stable.example.com/v1", "objects": [
                {"apiVersion": "stable.example.com/v2", "kind": "CronTab", "metadata": {"name": "ok"}},
                {"apiVersion": "stable.example.com/v2", "kind": "CronTab",
                 "metadata": {"name": "bad", "namespace": "ns"},
                 "spec": {"container": {"image": "x", "command": ["sh"]}}}
            ]}
        });
        let out = review_conversion(&crontab(), &body).unwrap();
        let resp = &out["response"];
        assert_eq!(resp["uid"], "u1");
        assert_eq!(resp["result"]["status"], "Failure");
        let msg = resp["result"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with("failed to convert object 1 (CronTab ns/bad at stable.example.com/v2) to stable.example.com/v1: `spec.container` holds fields other than `image` (command)"),
            "{msg}"
        );
        assert!(msg.contains("(rule at crontab.yaml:26:13 (wrap))"), "{msg}");
        assert!(
            resp["convertedObjects"]
                .as_array()
                .is_none_or(|a| a.is_empty())
        );
    }

    #[test]
    fn unknown_kind_group_or_version_is_a_failure_not_a_panic() {
        let ir = crontab();
        for (object, desired, want) in [
            (
                json!({"apiVersion": "other.example.com/v1", "kind": "CronTab"}),
                "other.example.com/v2",
                "the Katalog declares no resource CronTab in group `other.example.com`",
            ),
            (
                json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab"}),
                "stable.example.com/v9",
                "stable.example.com/CronTab does not serve version `v9` (served: v1beta1, v1, v2)",
            ),
            (
                json!({"apiVersion": "stable.example.com/v1"}),
                "stable.example.com/v2",
                "the object has no kind",
            ),
            (
                json!("not an object"),
                "stable.example.com/v2",
                "expected an object, found a string",
            ),
            (
                json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab"}),
                "other.example.com/v2",
                "cannot convert CronTab from group `stable.example.com` to group `other.example.com`",
            ),
        ] {
            let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": "u", "desiredAPIVersion": desired, "objects": [object]}});
            let out = review_conversion(&ir, &body).unwrap();
            let msg = out["response"]["result"]["message"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(out["response"]["result"]["status"], "Failure");
            assert!(msg.contains(want), "{msg} should contain {want}");
        }
    }

    #[test]
    fn malformed_reviews_are_errors() {
        let ir = crontab();
        assert!(matches!(
            review_conversion_bytes(&ir, b"{not json"),
            Err(ReviewError::Malformed(_))
        ));
        assert!(matches!(
            review_conversion(
                &ir,
                &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"})
            ),
            Err(ReviewError::NoRequest)
        ));
        assert!(matches!(
            review_conversion(
                &ir,
                &json!({"apiVersion": "v1", "kind": "ConversionReview",
                "request": {"uid": "u", "desiredAPIVersion": "stable.example.com/v1", "objects": []}})
            ),
            Err(ReviewError::UnsupportedVersion(_))
        ));
        assert!(matches!(
            review_conversion(
                &ir,
                &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": 5}})
            ),
            Err(ReviewError::Malformed(_))
        ));
    }

    #[test]
    fn empty_object_list_succeeds() {
        let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": "stable.example.com/v1", "objects": []}});
        let out = review_conversion(&crontab(), &body).unwrap();
        assert_eq!(out["response"]["result"]["status"], "Success");
        assert_eq!(out["response"]["convertedObjects"], json!([]));
    }

    /// serde_json's raw-value key, first in a map (Go sorts `$` before
    /// letters, so a preserve-unknown-fields map or the annotations can
    /// start with it), is an ordinary member on the fast path, on the tree
    /// path and in a stash read back.
    #[test]
    fn the_raw_value_key_is_an_ordinary_member_on_every_path() {
        const KEY: &str = "$serde_json::private::RawValue";
        let text = include_str!("../../../../testdata/rules/stash.yaml");
        let ir = crate::compile_sources(&[Source::new("stash.yaml", text)]).expect("compiles");
        let object = json!({"apiVersion": "examples.katalog.dev/v1", "kind": "Backup",
            "metadata": {"name": "raw", "annotations": {KEY: "[1]", "a": "b"}},
            "spec": {"schedule": "@daily", "retentionDays": {KEY: {"x": 1}, "days": [{KEY: 2}]},
                     "extra": {KEY: 3, "y": 4}}});
        let review_to = |object: &Value, to: &str| {
            let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": "u", "desiredAPIVersion": format!("examples.katalog.dev/{to}"),
                            "objects": [object]}});
            serde_json::to_vec(&body).unwrap()
        };
        // The converted object, the same on every path.
        let convert = |object: &Value, to: &str| {
            let body = review_to(object, to);
            let converted = |answer: &[u8]| {
                let answer = parse_value(answer).expect("an answer is JSON");
                assert_eq!(
                    answer["response"]["result"]["status"], "Success",
                    "{answer}"
                );
                answer["response"]["convertedObjects"][0].clone()
            };
            let fast = crate::conversion::splice::review(&ir, &body).expect("spliced");
            let tree = crate::conversion::review_tree(&ir, &body).expect("answered");
            let plain = review_conversion_bytes(&ir, &body).expect("answered");
            let out = converted(&fast.bytes);
            assert_eq!(out, converted(&tree.bytes), "to {to}");
            assert_eq!(out, plain["response"]["convertedObjects"][0], "to {to}");
            out
        };
        let spoke = convert(&object, "v1alpha1");
        assert_eq!(spoke["metadata"]["annotations"]["a"], "b", "{spoke}");
        assert_eq!(spoke["metadata"]["annotations"][KEY], "[1]", "{spoke}");
        assert_eq!(
            spoke["spec"],
            json!({"schedule": "@daily", "extra": {KEY: 3, "y": 4}})
        );
        let stash = spoke["metadata"]["annotations"]["katalog.dev/stash"]
            .as_str()
            .expect("a stash");
        assert_eq!(
            parse_value(stash.as_bytes()).unwrap(),
            json!({"v1": {"spec.retentionDays": object["spec"]["retentionDays"]}})
        );
        assert_eq!(convert(&spoke, "v1"), object, "v1 -> v1alpha1 -> v1");
        assert_eq!(convert(&object, "v1"), object, "v1 -> v1");
    }

    /// Reviews a real kube-apiserver v1.36.3 sent (captured by the ignored
    /// `capture_apiserver_reviews` test in tests/e2e.rs):
    /// one object each, and an empty `response` stub. Stored at v1, the
    /// CronTab is converted to v1beta1 for that version's watch cache (as
    /// read from etcd: managedFields, no resourceVersion); replaced at
    /// v1beta1, it comes back with the stash and is converted to v1 for
    /// storage (no managedFields).
    #[test]
    fn reviews_captured_from_the_apiserver_round_trip_through_the_stash() {
        let ir = crontab();
        let fields_kept = |request: &Value, out: &Value| {
            // The apiserver refuses any metadata change but labels and annotations.
            let strip = |m: &Value| {
                let mut m = m.clone();
                m.as_object_mut().unwrap().shift_remove("annotations");
                m
            };
            let sent = &request["request"]["objects"][0]["metadata"];
            assert_eq!(strip(&out["metadata"]), strip(sent));
            assert!(sent["uid"].is_string());
            assert_eq!(out["metadata"]["labels"], sent["labels"]);
        };

        let text = include_str!("testdata/apiserver/conversion-review-v1-to-v1beta1.json");
        let request: Value = serde_json::from_str(text).unwrap();
        assert!(
            request.get("response").is_some(),
            "the apiserver sends a response stub"
        );
        let out = review(&ir, text);
        assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(out["kind"], "ConversionReview");
        assert_eq!(out["response"]["uid"], request["request"]["uid"]);
        assert_eq!(out["response"]["result"]["status"], "Success");
        let objs = out["response"]["convertedObjects"].as_array().unwrap();
        assert_eq!(objs.len(), 1);
        let beta = &objs[0];
        assert_eq!(beta["apiVersion"], "stable.example.com/v1beta1");
        assert_eq!(beta["kind"], "CronTab");
        assert_eq!(
            beta["spec"],
            json!({"cronSpec": "0 3 * * *", "image": "busybox:1.36"})
        );
        assert_eq!(
            beta["metadata"]["annotations"],
            json!({"katalog.dev/stash": r#"{"v1":{"spec.timeoutSeconds":600,"spec.concurrencyPolicy":"Forbid"}}"#})
        );
        fields_kept(&request, beta);

        let text = include_str!("testdata/apiserver/conversion-review-v1beta1-to-v1.json");
        let request: Value = serde_json::from_str(text).unwrap();
        let out = review(&ir, text);
        assert_eq!(out["response"]["uid"], request["request"]["uid"]);
        assert_eq!(out["response"]["result"]["status"], "Success");
        let hub = &out["response"]["convertedObjects"][0];
        assert_eq!(hub["apiVersion"], "stable.example.com/v1");
        assert_eq!(
            hub["spec"],
            json!({"schedule": "0 4 * * *", "image": "busybox:1.36",
                   "timeoutSeconds": 600, "concurrencyPolicy": "Forbid"})
        );
        assert!(
            hub["metadata"].get("annotations").is_none(),
            "the stash is consumed: {hub}"
        );
        fields_kept(&request, hub);
    }
}
