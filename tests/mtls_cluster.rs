//! Mutual TLS against a real kube-apiserver: the apiserver presents a client
//! certificate to admission webhooks (`--admission-control-config-file` with
//! a kubeconfig for webhooks, katalog-testenv's `webhook_client_cert`
//! option), and a katalog server started with `--client-ca` serves it, while
//! admission for a client without a certificate the CA signed is refused.
//! Conversion webhooks get no client certificate from the apiserver (its
//! conversion client has no kubeconfig), so `/convert` is served without one.
//!
//! `cargo test -p katalog-tests --test mtls_cluster -- --nocapture`

use std::time::{Duration, Instant};

use katalog_testenv::{Options, TestEnv};
use katalog_tests::*;
use serde_json::json;

const CRD: &str = "crontabs.stable.example.com";

const ADMISSION: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-mtls
spec:
  admission:
    validations:
      - name: registry
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { prefix: registry.example.com/ }
"#;

fn crontab(version: &str, name: &str, image: &str) -> serde_json::Value {
    let spec = match version {
        "v1beta1" => json!({"cronSpec": "* * * * */5", "image": image}),
        _ => json!({"schedule": "* * * * */5", "image": image}),
    };
    json!({
        "apiVersion": format!("stable.example.com/{version}"),
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

#[test]
fn the_apiserver_presents_its_client_certificate_and_others_are_refused() {
    let started = Instant::now();
    let env = TestEnv::start_with(Options::default().webhook_client_cert())
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("[mtls] control plane ready in {}", secs(started.elapsed()));
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);

    let dir = Scratch::new("mtls");
    std::fs::write(
        dir.path("crontab.yaml"),
        std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo_path("katalogs/crontab.crd.yaml"),
        dir.path("crontab.crd.yaml"),
    )
    .unwrap();
    std::fs::write(dir.path("admission.yaml"), ADMISSION).unwrap();
    // Clients must hold a certificate the testenv CA signed: the apiserver's
    // webhook client certificate is one.
    std::fs::write(dir.path("client-ca.crt"), env.ca_pem()).unwrap();
    let server_files = Scratch::new("mtls-server");
    let (cert, key) = ca().issue(&[]).unwrap();
    std::fs::write(server_files.path("tls.crt"), cert).unwrap();
    std::fs::write(server_files.path("tls.key"), key).unwrap();
    let client_ca = dir.path("client-ca.crt");
    let katalog = Katalog::start_configured(
        &dir.path(""),
        &server_files.path("tls.crt"),
        &server_files.path("tls.key"),
        server_files,
        |c| {
            c.client_ca = Some(client_ca);
            // The CN of the apiserver's webhook client certificate
            // (scripts/testenv); the same CA signs the admin's too.
            c.client_names = vec!["kube-apiserver-webhook-client".into()];
        },
    );
    let reg = registration("katalog-mtls", &katalog.url());
    register_admission(&env, &katalog.ir, &reg);
    register_conversion(&env, &katalog.ir, &reg);

    // Admission through mutual TLS: the rule denies.
    eventually(
        "the webhook denies a bad CronTab",
        Duration::from_secs(30),
        || {
            let out = env.kubectl_stdin(
                ["create", "--dry-run=server", "-f", "-"],
                crontab("v1", "probe", "docker.io/x").to_string(),
            );
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (!out.status.success() && stderr.contains("[registry]"))
                .then_some(())
                .ok_or(stderr)
        },
    );
    ok(create(
        &env,
        &crontab("v1", "good", "registry.example.com/app:1"),
    ));
    // Conversion with --client-ca set: written at v1beta1, read at v1 and v2.
    ok(create(
        &env,
        &crontab("v1beta1", "old", "registry.example.com/app:2"),
    ));
    let v1 = get_json(
        &env,
        &["get", "crontabs.v1.stable.example.com", "old", "-o", "json"],
    );
    assert_eq!(v1["spec"]["schedule"], "* * * * */5", "{v1}");
    let v2 = get_json(
        &env,
        &["get", "crontabs.v2.stable.example.com", "old", "-o", "json"],
    );
    assert_eq!(
        v2["spec"]["container"]["image"], "registry.example.com/app:2",
        "{v2}"
    );

    // Admission for a client without a certificate is refused.
    let mut anonymous = katalog_runtime::http::client::HttpsClient::new(
        katalog.addr,
        ca().ca_pem().as_bytes(),
        "localhost",
    )
    .unwrap();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE",
            "kind": {"group": "stable.example.com", "version": "v1", "kind": "CronTab"},
            "resource": {"group": "stable.example.com", "version": "v1", "resource": "crontabs"},
            "namespace": "default", "name": "x", "userInfo": {"username": "mallory"},
            "object": crontab("v1", "x", "docker.io/x")}
    });
    let r = anonymous
        .post_json("/validate", review.to_string().as_bytes())
        .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    // A certificate the same CA signed for another name (the admin's) is
    // refused at the handshake (--client-name), /convert included.
    for path in ["/katalog", "/convert"] {
        let refused = katalog_runtime::http::client::HttpsClient::new(
            katalog.addr,
            ca().ca_pem().as_bytes(),
            "localhost",
        )
        .unwrap()
        .with_client_cert(
            env.admin_cert_pem().as_bytes(),
            env.admin_key_pem().as_bytes(),
        )
        .unwrap()
        .post_json(path, b"{}");
        assert!(
            refused.is_err(),
            "the admin's certificate was served {path}: {:?}",
            refused.map(|r| r.status)
        );
    }
    let stats = katalog.stats();
    eprintln!("[mtls] katalog counters: {stats}");
    eprintln!("[mtls] done in {}", secs(started.elapsed()));
}
