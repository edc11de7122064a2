//! AdmissionReview benchmarks: `pod-security.yaml` and
//! `pod-security-baseline.yaml` on a realistic ~6 KB Pod, and the
//! mutations of `platform.yaml` on a large Deployment UPDATE (long
//! `managedFields`, env lists and `status`), each against a plain
//! serde_json parse + serialize of the same review.
//!
//! `cargo bench -p katalog-benches --bench admission` measures; `cargo test
//! --all-targets` runs each case once as a smoke test.

use std::hint::black_box;

use katalog_benches::harness::{Mode, Variant, Work, report, run_group};
use katalog_lang::admission::eval::Endpoint;
use katalog_lang::admission::review::{Verdict, review_bytes};
use katalog_lang::{Ir, Source, compile_sources};
use serde_json::{Value, json};

fn repo_file(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("failed to read {}: {e}", p.display()))
}

fn katalog(file: &str) -> Ir {
    compile_sources(&[Source::new(file, repo_file(&format!("katalogs/{file}")))])
        .unwrap_or_else(|e| panic!("{file} compiles: {e:?}"))
}

/// A CREATE review of the baseline-compliant example Pod, as the apiserver sends it.
fn review() -> Vec<u8> {
    let nodes =
        katalog_lang::yaml::read_documents(&repo_file("katalogs/examples/pod-baseline.yaml"))
            .expect("valid YAML");
    let pod = nodes[0].to_value();
    let name = pod["metadata"]["name"].clone();
    let namespace = pod["metadata"]["namespace"].clone();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3c1e6a52-0d5b-4a5e-9a52-6b3d2f1c9e10",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name, "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                         "uid": "7a9f1f3e-4d8f-4a52-8d3c-2f1e9b7c6a5d",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    }))
    .expect("serializes")
}

fn main() {
    let mode = Mode::from_args();
    let body = review();
    for (name, file) in [
        ("admission_pod_security_baseline", "pod-security.yaml"),
        (
            "admission_pss_baseline_katalog",
            "pod-security-baseline.yaml",
        ),
    ] {
        if mode.selected(name) {
            group(&mode, name, &katalog(file), &body);
        }
    }
    let name = "admission_mutate_deployment";
    if mode.selected(name) {
        mutation_group(&mode, name, &katalog("platform.yaml"), &deployment_review());
    }
}

/// A Deployment as a cluster holds it after a few rollouts: three
/// containers with long env lists, five managers in `managedFields`, a
/// `status`; nothing the mutations of `platform.yaml` add is there yet.
fn deployment() -> Value {
    let env = |c: usize| -> Vec<Value> {
        (0..40)
            .map(|i| json!({"name": format!("SETTING_{c}_{i}"), "value": format!("value-{i}-of-container-{c}")}))
            .collect()
    };
    let containers: Vec<Value> = (0..3)
        .map(|c| {
            json!({
                "name": format!("app-{c}"),
                "image": format!("registry.example.com/team/app-{c}:1.{c}.7"),
                "ports": [{"containerPort": 8080 + c, "name": "http", "protocol": "TCP"}],
                "env": env(c),
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080 + c}, "periodSeconds": 10},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]
            })
        })
        .collect();
    // managedFields mirror the spec, one entry per manager, as the apiserver keeps them.
    let fields_of_env = |c: usize| -> Value {
        let mut m = serde_json::Map::new();
        for i in 0..40 {
            m.insert(
                format!("k:{{\"name\":\"SETTING_{c}_{i}\"}}"),
                json!({".": {}, "f:name": {}, "f:value": {}}),
            );
        }
        Value::Object(m)
    };
    let managed: Vec<Value> = (0..5)
        .map(|k| {
            let mut containers = serde_json::Map::new();
            for c in 0..3 {
                containers.insert(
                    format!("k:{{\"name\":\"app-{c}\"}}"),
                    json!({".": {}, "f:env": fields_of_env(c), "f:image": {}, "f:name": {}, "f:resources": {"f:limits": {"f:cpu": {}, "f:memory": {}}}}),
                );
            }
            json!({
                "manager": format!("deployer-{k}"),
                "operation": "Apply",
                "apiVersion": "apps/v1",
                "time": "2026-12-01T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": containers}}}}
            })
        })
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "shop-frontend",
            "namespace": "shop",
            "uid": "0b6c3f3e-8f61-4c1a-9d0b-2d9a4f0f8e11",
            "resourceVersion": "918273",
            "generation": 14,
            "creationTimestamp": "2026-11-20T08:00:00Z",
            "annotations": {"deployment.kubernetes.io/revision": "14"},
            "managedFields": managed
        },
        "spec": {
            "selector": {"matchLabels": {"app": "shop-frontend"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "shop-frontend"}},
                "spec": {
                    "containers": containers,
                    "volumes": [{"name": "config", "configMap": {"name": "shop-frontend"}}]
                }
            }
        },
        "status": {
            "observedGeneration": 14,
            "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.", "lastUpdateTime": "2026-12-01T10:01:00Z", "lastTransitionTime": "2026-11-20T08:01:00Z"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet \"shop-frontend-7d9c\" has successfully progressed.", "lastUpdateTime": "2026-12-01T10:01:00Z", "lastTransitionTime": "2026-11-20T08:00:00Z"}
            ]
        }
    })
}

/// An UPDATE review of [`deployment`] (`oldObject` the same object, as
/// after a `kubectl apply` that changed nothing the mutations read).
fn deployment_review() -> Vec<u8> {
    let object = deployment();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "5d0c8f0a-1e2b-4c3d-8e9f-0a1b2c3d4e5f",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "shop-frontend", "namespace": "shop", "operation": "UPDATE",
            "userInfo": {"username": "ci-deployer", "groups": ["system:authenticated"]},
            "object": object.clone(),
            "oldObject": object,
            "dryRun": false,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    }))
    .expect("serializes")
}

/// The engine's mutating answer next to a parse + serialize of `body`,
/// timed in turns.
fn mutation_group(mode: &Mode, name: &str, ir: &Ir, body: &[u8]) {
    let answer = review_bytes(ir, body, Endpoint::Mutate, None).expect("well-formed");
    let reply: Value = serde_json::from_slice(&answer.bytes).expect("the answer is JSON");
    assert!(
        reply["response"]["patch"].is_string(),
        "the mutations patch the Deployment: {reply}"
    );
    println!(
        "{name}: {} mutations, review {} bytes, answer {} bytes",
        ir.admission.mutations.len(),
        body.len(),
        answer.bytes.len()
    );
    let mut variants = [
        Variant::new("engine: admission::review::review_bytes(mutate)", || {
            review_bytes(ir, black_box(body), Endpoint::Mutate, None)
                .expect("well-formed")
                .bytes
                .len()
        }),
        Variant::new("baseline: from_slice::<Value> + to_vec", || {
            let v: Value = serde_json::from_slice(black_box(body)).expect("valid JSON");
            serde_json::to_vec(&v).expect("serializes").len()
        }),
    ];
    let stats = run_group(mode, &mut variants);
    report(
        name,
        Work {
            objects: 1,
            bytes: body.len(),
        },
        &stats,
        1,
        "× baseline",
    );
}

/// The engine's validating answer next to a parse + serialize of `body`,
/// timed in turns.
fn group(mode: &Mode, name: &str, ir: &Ir, body: &[u8]) {
    let answer = review_bytes(ir, body, Endpoint::Validate, None).expect("well-formed");
    assert_eq!(
        answer.outcome.verdict,
        Verdict::Allowed,
        "the example Pod is baseline-compliant: {}",
        String::from_utf8_lossy(&answer.bytes)
    );
    println!(
        "{name}: {} validations, review {} bytes",
        ir.admission.validations.len(),
        body.len()
    );
    let mut variants = [
        Variant::new("engine: admission::review::review_bytes(validate)", || {
            review_bytes(ir, black_box(body), Endpoint::Validate, None)
                .expect("well-formed")
                .bytes
                .len()
        }),
        Variant::new("baseline: from_slice::<Value> + to_vec", || {
            let v: Value = serde_json::from_slice(black_box(body)).expect("valid JSON");
            serde_json::to_vec(&v).expect("serializes").len()
        }),
    ];
    let stats = run_group(mode, &mut variants);
    report(
        name,
        Work {
            objects: 1,
            bytes: body.len(),
        },
        &stats,
        1,
        "× baseline",
    );
}
