//! `katalog_runtime::cluster::migrate` against a real kube-apiserver and etcd
//! (katalog-testenv): CronTabs stored at v1 are rewritten at v2 after the
//! storage version changes (conversion through the katalog server on
//! 127.0.0.1), then `status.storedVersions` is pruned; the prune is refused
//! while one object cannot be rewritten. Also `security.cleanupOnShutdown`:
//! a stopped housekeeper removes the webhook configurations.
//!
//! `cargo test -p katalog-tests --test migrate -- --nocapture` prints timings.

use std::path::Path;
use std::time::{Duration, Instant};

use katalog_runtime::cluster;
use katalog_runtime::cluster::housekeeper;
use katalog_runtime::cluster::migrate::{MigrateError, MigrateOptions, Progress, migrate_storage};
use katalog_tests::*;
use serde_json::{Value, json};

const CRD: &str = "crontabs.stable.example.com";
const NS: &str = "mig";
const COUNT: usize = 30;
const BLOCKED: &str = "ct-07";
const BLOCKER: &str = "katalog-test-deny-update";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn stored_versions(env: &katalog_testenv::TestEnv) -> Value {
    get_json(env, &["get", "crd", CRD])["status"]["storedVersions"].clone()
}

fn name(i: usize) -> String {
    format!("ct-{i:02}")
}

/// Every CronTab reads correctly at v1 and at v2.
fn check_objects(env: &katalog_testenv::TestEnv) {
    let v1 = get_json(env, &["get", "crontabs.v1.stable.example.com", "-n", NS]);
    let v2 = get_json(env, &["get", "crontabs.v2.stable.example.com", "-n", NS]);
    let (v1, v2) = (
        v1["items"].as_array().unwrap(),
        v2["items"].as_array().unwrap(),
    );
    assert_eq!(v1.len(), COUNT);
    assert_eq!(v2.len(), COUNT);
    for (a, b) in v1.iter().zip(v2) {
        let n = a["metadata"]["name"].as_str().unwrap();
        assert_eq!(a["metadata"]["name"], b["metadata"]["name"]);
        assert_eq!(a["apiVersion"], "stable.example.com/v1", "{a}");
        assert_eq!(b["apiVersion"], "stable.example.com/v2", "{b}");
        let image = format!("registry.example.com/{n}:1");
        assert_eq!(a["spec"]["image"], image.as_str(), "{a}");
        assert_eq!(a["spec"]["schedule"], "*/5 * * * *", "{a}");
        assert_eq!(a["spec"]["concurrencyPolicy"], "Forbid", "{a}");
        assert_eq!(b["spec"]["container"]["image"], image.as_str(), "{b}");
        assert_eq!(b["spec"]["concurrencyPolicy"], "ForbidConcurrent", "{b}");
        assert_eq!(b["spec"]["schedule"], "*/5 * * * *", "{b}");
    }
}

#[test]
fn migrate_storage_rewrites_prunes_and_refuses() {
    let t = "migrate";
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);
    ok(env.kubectl(["create", "namespace", NS]));

    let scratch = Scratch::new("migrate-katalog");
    let crontab =
        std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).expect("crontab.yaml");
    std::fs::write(scratch.path("crontab.yaml"), crontab).expect("writing crontab.yaml");
    // The CRD its `crd:` names, beside it (a file of CRDs is not a Katalog source).
    std::fs::copy(
        repo_path("katalogs/crontab.crd.yaml"),
        scratch.path("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    let katalog = Katalog::start(&scratch.path(""));
    let reg = registration("katalog-migrate", &katalog.url());

    let rt = runtime();
    let client = rt
        .block_on(cluster::client(Some(Path::new(&env.kubeconfig()))))
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(cluster::register(client.clone(), &katalog.ir, &reg))
        .unwrap_or_else(|e| panic!("{e}"));

    // 30 CronTabs stored at v1.
    let items: Vec<Value> = (0..COUNT)
        .map(|i| {
            let mut labels = json!({});
            if name(i) == BLOCKED {
                labels = json!({"katalog-test/deny-update": "true"});
            }
            json!({
                "apiVersion": "stable.example.com/v1",
                "kind": "CronTab",
                "metadata": {"name": name(i), "namespace": NS, "labels": labels},
                "spec": {
                    "schedule": "*/5 * * * *",
                    "image": format!("registry.example.com/{}:1", name(i)),
                    "concurrencyPolicy": "Forbid",
                },
            })
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    ok(env.kubectl_stdin(["create", "-f", "-"], list.to_string()));
    let key = |i: usize| format!("/registry/stable.example.com/crontabs/{NS}/{}", name(i));
    assert_eq!(stored_version(&env, &key(0)), "stable.example.com/v1");

    set_storage_version(&env, CRD, "v2");
    assert_eq!(stored_versions(&env), json!(["v1", "v2"]));

    let opts = MigrateOptions {
        page_size: 7,
        rate: 500.0,
        ..MigrateOptions::new(CRD)
    };
    let migrate = |progress: &mut Vec<Progress>| {
        let started = Instant::now();
        let r = rt.block_on(migrate_storage(client.clone(), &opts, |p| {
            eprintln!("[{t}] {p}");
            progress.push(p.clone());
        }));
        (r, started.elapsed())
    };

    // (a) One object cannot be rewritten (a webhook on 127.0.0.1:1 that
    // refuses connections, failurePolicy Fail, for UPDATE of that object
    // only): nothing is pruned and the error names it.
    let blocker = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": BLOCKER},
        "webhooks": [{
            "name": "deny-update.katalog.test",
            "clientConfig": {"url": "https://127.0.0.1:1/deny"},
            "rules": [{
                "apiGroups": ["stable.example.com"],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["crontabs"],
            }],
            "objectSelector": {"matchLabels": {"katalog-test/deny-update": "true"}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    });
    ok(env.kubectl_stdin(["apply", "-f", "-"], blocker.to_string()));
    // The webhook is in force once a labelled UPDATE is refused.
    eventually(
        "the blocking webhook is in force",
        Duration::from_secs(30),
        || {
            let out = env.kubectl([
                "annotate",
                "--overwrite",
                "-n",
                NS,
                "crontab",
                BLOCKED,
                "probe=1",
            ]);
            if out.status.success() {
                Err("the update went through".into())
            } else {
                Ok(())
            }
        },
    );
    let mut progress = Vec::new();
    let (result, took) = migrate(&mut progress);
    eprintln!("[{t}] (a) refused migration took {}", secs(took));
    match result {
        Err(MigrateError::Incomplete { report }) => {
            assert_eq!(report.failures.len(), 1, "{report:?}");
            assert_eq!(report.failures[0].object, format!("{NS}/{BLOCKED}"));
            assert_eq!(report.rewritten, (COUNT - 1) as u64, "{report:?}");
            assert!(!report.pruned);
            let message = MigrateError::Incomplete { report }.to_string();
            assert!(message.contains(&format!("{NS}/{BLOCKED}")), "{message}");
            assert!(message.contains("refusing to prune"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(stored_versions(&env), json!(["v1", "v2"]));
    assert_eq!(stored_version(&env, &key(7)), "stable.example.com/v1");
    assert_eq!(stored_version(&env, &key(8)), "stable.example.com/v2");

    // (b) Without the blocker: every object is rewritten at v2, over
    // ceil(30/7) = 5 pages, and storedVersions is pruned to [v2].
    ok(env.kubectl(["delete", "validatingwebhookconfiguration", BLOCKER]));
    let report = eventually("the migration succeeds", Duration::from_secs(30), || {
        let mut progress = Vec::new();
        let (result, took) = migrate(&mut progress);
        result
            .map(|r| (r, progress, took))
            .map_err(|e| e.to_string())
    });
    let (report, progress, took) = report;
    eprintln!("[{t}] (b) {report}");
    eprintln!("[{t}] (b) migration of {COUNT} objects took {}", secs(took));
    assert!(report.pruned, "{report:?}");
    assert_eq!(report.rewritten, COUNT as u64, "{report:?}");
    assert_eq!(report.stored_before, ["v1", "v2"]);
    assert_eq!(report.storage, "v2");
    assert_eq!(progress.len(), 5, "{progress:?}");
    assert_eq!(progress.last().unwrap().migrated, COUNT as u64);
    assert!(progress.last().unwrap().continue_token.is_none());
    assert!(progress[..4].iter().all(|p| p.continue_token.is_some()));
    assert_eq!(stored_versions(&env), json!(["v2"]));
    for i in 0..COUNT {
        assert_eq!(
            stored_version(&env, &key(i)),
            "stable.example.com/v2",
            "{i}"
        );
    }
    check_objects(&env);

    // (c) Again: nothing to prune, still fine.
    let mut progress = Vec::new();
    let (result, took) = migrate(&mut progress);
    let report = result.unwrap_or_else(|e| panic!("{e}"));
    eprintln!("[{t}] (c) {report} (took {})", secs(took));
    assert!(!report.pruned);
    assert!(report.failures.is_empty());
    assert_eq!(stored_versions(&env), json!(["v2"]));
    check_objects(&env);

    // (d) Resuming from a continue token handles only the rest.
    let opts_first = MigrateOptions {
        page_size: 7,
        rate: 0.0,
        ..MigrateOptions::new(CRD)
    };
    let mut tokens = Vec::new();
    rt.block_on(migrate_storage(client.clone(), &opts_first, |p| {
        tokens.push(p.continue_token.clone())
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let resume = MigrateOptions {
        resume_from: tokens[0].clone(),
        ..opts_first
    };
    let report = rt
        .block_on(migrate_storage(client.clone(), &resume, |_| {}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.rewritten, (COUNT - 7) as u64, "{report:?}");
}

const CLEANUP: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-admission
spec:
  security:
    cleanupOnShutdown: true
  admission:
    validations:
      - name: crontab-registry
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { prefix: registry.example.com/ }
        message: crontab images come from registry.example.com
"#;

#[test]
fn cleanup_on_shutdown_unregisters_at_stop() {
    let t = "cleanup";
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);
    let (_dir, server) = Katalog::crontab_with("cleanup-katalog", CLEANUP);
    let loaded = server.state.current().expect("the Katalog loaded");
    assert!(loaded.ir.admission.security.cleanup_on_shutdown);
    let reg = registration("katalog-cleanup", &format!("https://{}", server.addr));

    let hk = housekeeper::spawn_with_kubeconfig(
        Some(env.kubeconfig()),
        server.state.clone(),
        reg,
        Duration::from_secs(30),
    );
    let name = "katalog-cleanup-validating";
    eventually("the registration", Duration::from_secs(30), || {
        let out = env.kubectl(["get", "validatingwebhookconfiguration", name, "-o", "name"]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    let started = Instant::now();
    hk.stop();
    eprintln!("[{t}] housekeeper stopped in {}", secs(started.elapsed()));
    let out = env.kubectl(["get", "validatingwebhookconfiguration", name, "-o", "name"]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{name} is still there after the stop"
    );
    drop(server);
}
