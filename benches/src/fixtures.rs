//! Realistic CronTab objects and ConversionReviews for `katalogs/crontab.yaml`.
//!
//! The objects look like what an apiserver sends a conversion webhook for a
//! resource managed with `kubectl apply` and a status-writing controller:
//! full metadata (labels, a `last-applied-configuration` blob, managedFields
//! mirroring the object's own fields), a `jobTemplate`-like subtree the rules
//! never touch, and a status with conditions. Everything is deterministic in
//! the object index.

use katalog_lang::{Ir, Source};
use serde_json::{Map, Value, json};

/// The Katalog the benchmarks convert with.
pub const CRONTAB_KATALOG: &str = include_str!("../../katalogs/crontab.yaml");

/// The group/version the fixture objects are stored at (the hub).
pub const HUB_API_VERSION: &str = "stable.example.com/v1";

/// Compile `katalogs/crontab.yaml`.
pub fn crontab_ir() -> Ir {
    match katalog_lang::compile_sources(&[Source::new("crontab.yaml", CRONTAB_KATALOG)]) {
        Ok(ir) => ir,
        Err(d) => panic!("katalogs/crontab.yaml does not compile:\n{}", d.render()),
    }
}

const NAMESPACES: [&str; 4] = ["team-storage", "team-payments", "batch", "default"];
const POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];

fn uid(seed: usize, salt: u64) -> String {
    // A splitmix-style hash, printed as a UUID.
    let mut x = (seed as u64)
        .wrapping_add(salt)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    let y = x.rotate_left(17) ^ 0x94D0_49BB_1331_11EB;
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        x >> 32,
        (x >> 16) & 0xffff,
        x & 0xfff,
        y >> 52,
        y & 0xffff_ffff_ffff
    )
}

fn timestamp(i: usize, day_offset: usize) -> String {
    let day = 1 + (i + day_offset) % 28;
    let month = 1 + (i / 28) % 12;
    format!(
        "2026-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        i % 24,
        (i * 7) % 60,
        (i * 13) % 60
    )
}

/// The `fieldsV1` a field manager would record for `value`: every map key
/// as `f:<key>` (with `.` for the map itself), lists of named maps keyed by
/// `k:{"name":…}` / `k:{"type":…}`, other lists and scalars as `{}`.
pub fn fields_v1(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut out = Map::new();
            out.insert(".".into(), json!({}));
            for (k, v) in m {
                out.insert(format!("f:{k}"), fields_v1(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Map::new();
            for item in items {
                let key = ["name", "type"]
                    .iter()
                    .find_map(|k| item.get(*k).map(|v| (*k, v)));
                if let Some((k, v)) = key {
                    let mut inner = fields_v1(item);
                    if let Value::Object(o) = &mut inner {
                        o.shift_remove(".");
                        o.shift_insert(0, ".".into(), json!({}));
                    }
                    out.insert(format!("k:{}", json!({ k: v })), inner);
                }
            }
            Value::Object(out)
        }
        _ => json!({}),
    }
}

/// The top level and `f:metadata` have no `.` entry in real managedFields.
fn top_fields(value: &Value) -> Value {
    let mut f = fields_v1(value);
    if let Value::Object(o) = &mut f {
        o.shift_remove(".");
        if let Some(Value::Object(m)) = o.get_mut("f:metadata") {
            m.shift_remove(".");
        }
    }
    f
}

/// One CronTab at `stable.example.com/v1`, as stored by the apiserver.
pub fn crontab_v1(i: usize) -> Value {
    let name = format!("nightly-backup-{i:04}");
    let namespace = NAMESPACES[i % NAMESPACES.len()];
    let policy = POLICIES[i % POLICIES.len()];
    let image = format!(
        "registry.example.com/platform/backup-runner:1.{}.{}",
        i % 7,
        i % 13
    );
    let generation = 1 + (i % 9) as u64;
    let labels = json!({
        "app.kubernetes.io/name": "backup-runner",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/version": "1.8.3",
        "app.kubernetes.io/component": "scheduler",
        "app.kubernetes.io/part-of": "platform-backups",
        "app.kubernetes.io/managed-by": "kubectl",
    });
    let job_labels = json!({
        "app.kubernetes.io/name": "backup-runner",
        "app.kubernetes.io/instance": name,
    });
    let spec = json!({
        "schedule": format!("{} {} * * *", i % 60, i % 24),
        "image": image,
        "timeoutSeconds": 600 + 60 * (i % 5),
        "concurrencyPolicy": policy,
        "suspend": false,
        "startingDeadlineSeconds": 200,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {
            "metadata": { "labels": job_labels },
            "spec": {
                "backoffLimit": 2,
                "activeDeadlineSeconds": 3600,
                "ttlSecondsAfterFinished": 86400,
                "template": {
                    "metadata": { "labels": job_labels },
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "serviceAccountName": "backup-runner",
                        "containers": [{
                            "name": "runner",
                            "image": image,
                            "args": ["--target=s3://backups/".to_string() + namespace, "--compress=zstd", "--verify"],
                            "env": [
                                { "name": "BACKUP_NAMESPACE", "value": namespace },
                                { "name": "BACKUP_RETENTION_DAYS", "value": "30" }
                            ],
                            "resources": {
                                "requests": { "cpu": "250m", "memory": "256Mi" },
                                "limits": { "cpu": "1", "memory": "1Gi" }
                            },
                            "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }]
                        }],
                        "volumes": [{ "name": "scratch", "emptyDir": { "sizeLimit": "10Gi" } }]
                    }
                }
            }
        }
    });
    let mut annotations = json!({
        "backup.example.com/retention": "30d",
        "backup.example.com/owner": "storage-oncall@example.com",
        "backup.example.com/description": format!("Nightly backup of the {namespace} namespace volumes to object storage"),
    });
    let last_applied = json!({
        "apiVersion": HUB_API_VERSION,
        "kind": "CronTab",
        "metadata": {
            "annotations": annotations,
            "labels": labels,
            "name": name,
            "namespace": namespace,
        },
        "spec": spec,
    });
    annotations["kubectl.kubernetes.io/last-applied-configuration"] =
        Value::String(format!("{last_applied}\n"));
    let status = json!({
        "lastScheduleTime": timestamp(i, 2),
        "lastSuccessfulTime": timestamp(i, 2),
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": generation,
                "lastTransitionTime": timestamp(i, 1),
                "reason": "Scheduled",
                "message": "The schedule is valid and the next run is queued"
            },
            {
                "type": "LastRunSucceeded",
                "status": "True",
                "observedGeneration": generation,
                "lastTransitionTime": timestamp(i, 2),
                "reason": "JobCompleted",
                "message": format!("Job {name}-29012345 completed in 4m12s")
            }
        ]
    });
    let applied_fields = top_fields(&json!({
        "metadata": { "annotations": annotations, "labels": labels },
        "spec": spec,
    }));
    let status_fields = top_fields(&json!({ "status": status }));
    json!({
        "apiVersion": HUB_API_VERSION,
        "kind": "CronTab",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid(i, 1),
            "resourceVersion": (48_213_007 + 31 * i).to_string(),
            "generation": generation,
            "creationTimestamp": timestamp(i, 0),
            "labels": labels,
            "annotations": annotations,
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": HUB_API_VERSION,
                    "time": timestamp(i, 0),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": applied_fields
                },
                {
                    "manager": "crontab-controller",
                    "operation": "Update",
                    "apiVersion": HUB_API_VERSION,
                    "time": timestamp(i, 2),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": status_fields,
                    "subresource": "status"
                }
            ]
        },
        "spec": spec,
        "status": status,
    })
}

/// A `apiextensions.k8s.io/v1` ConversionReview of `n` hub CronTabs to
/// `desired_api_version`, serialized as the apiserver would send it.
pub fn conversion_review(n: usize, desired_api_version: &str) -> Vec<u8> {
    let objects: Vec<Value> = (0..n).map(crontab_v1).collect();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": uid(n, 7),
            "desiredAPIVersion": desired_api_version,
            "objects": objects,
        }
    });
    serde_json::to_vec(&review).expect("a Value always serializes")
}

/// Check a ConversionReview response: `Success`, `n` converted objects, all
/// at `desired_api_version`. Returns a message on the first problem.
pub fn check_response(response: &Value, n: usize, desired_api_version: &str) -> Result<(), String> {
    let status = response.pointer("/response/result/status");
    if status != Some(&json!("Success")) {
        return Err(format!(
            "the conversion did not succeed: {}",
            response["response"]["result"]
        ));
    }
    let converted = response
        .pointer("/response/convertedObjects")
        .and_then(Value::as_array)
        .ok_or("the response has no convertedObjects")?;
    if converted.len() != n {
        return Err(format!(
            "expected {n} converted objects, got {}",
            converted.len()
        ));
    }
    if let Some(bad) = converted
        .iter()
        .find(|o| o["apiVersion"] != json!(desired_api_version))
    {
        return Err(format!("an object came back at {}", bad["apiVersion"]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_sized_like_real_ones() {
        let o = crontab_v1(3);
        let fields: usize = o["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["fieldsV1"].to_string().len())
            .sum();
        assert!(
            (1000..=2600).contains(&fields),
            "fieldsV1 is {fields} bytes"
        );
        assert_eq!(o["metadata"]["labels"].as_object().unwrap().len(), 6);
        assert_eq!(o["metadata"]["annotations"].as_object().unwrap().len(), 4);
        let size = o.to_string().len();
        assert!((4000..=9000).contains(&size), "an object is {size} bytes");
    }

    #[test]
    fn uids_look_like_uuids_and_differ() {
        let (a, b) = (uid(1, 1), uid(2, 1));
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }

    #[test]
    fn the_review_converts_to_every_version() {
        let ir = crontab_ir();
        for to in ["v1beta1", "v1", "v2"] {
            let desired = format!("stable.example.com/{to}");
            let body = conversion_review(5, &desired);
            let out = katalog_lang::review::review_conversion_bytes(&ir, &body).unwrap();
            check_response(&out, 5, &desired).unwrap();
        }
    }
}
