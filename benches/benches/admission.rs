//! AdmissionReview benchmarks: `pod-security.yaml` and
//! `pod-security-baseline.yaml` on a realistic ~6 KB Pod, each against a
//! plain serde_json parse + serialize of the same review.
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
