//! Protections tried every way round against a real kube-apiserver (issue
//! 13): `katalogs/protections.yaml` registered, then every write path that
//! could sidestep deletion protection, strict mode and namespace protection.
//! Each attempt is a cell of the bypass matrix; the test prints the matrix
//! and requires every cell denied, with the object unchanged afterwards.
//!
//! `cargo test -p katalog-tests --test protections_cluster -- --nocapture`

use std::process::Output;
use std::time::Duration;

use katalog_testenv::TestEnv;
use katalog_tests::*;
use serde_json::{Value, json};

const DB: &str = "databases.v1.data.example.com";

fn database(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "data.example.com/v1",
        "kind": "Database",
        "metadata": {"name": name, "namespace": ns,
                     "labels": {"app": name, "katalog.dev/protected": "true"}},
        "spec": {"engine": "postgres", "version": "16", "storage": "20Gi"},
    })
}

/// One attempt: its name, what it did, and whether the apiserver refused it
/// because of katalog (the webhook's denial in stderr).
struct Cell {
    protection: &'static str,
    attempt: &'static str,
    out: Output,
    webhook: &'static str,
}

impl Cell {
    fn denied(&self) -> bool {
        !self.out.status.success()
            && String::from_utf8_lossy(&self.out.stderr).contains(&format!("[{}]", self.webhook))
    }
}

fn label_of(env: &TestEnv, name: &str) -> Option<String> {
    let out = env.kubectl(["get", DB, name, "-n", "data-prod", "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    let o: Value = serde_json::from_slice(&out.stdout).ok()?;
    o["metadata"]["labels"]["katalog.dev/protected"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn every_way_round_the_protections_is_denied() {
    let env = start_env("protections-matrix");
    let katalog = Katalog::start(&repo_path("katalogs/protections.yaml"));
    apply_crds(
        &env,
        &fixture("protections.yaml"),
        &["databases.data.example.com", "buckets.storage.example.com"],
    );
    for ns in ["data-prod", "katalog-system"] {
        ok(env.kubectl(["create", "namespace", ns]));
    }
    let reg = registration("katalog-matrix", &katalog.url());
    register_admission(&env, &katalog.ir, &reg);
    eventually(
        "the protections are called",
        Duration::from_secs(30),
        || {
            let out = env.kubectl_stdin(
                ["create", "--dry-run=server", "-f", "-"],
                database("default", "probe").to_string(),
            );
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (!out.status.success() && stderr.contains("[namespace-protection]"))
                .then_some(())
                .ok_or(stderr)
        },
    );
    ok(create(&env, &database("data-prod", "orders")));

    let mut cells = Vec::new();
    let mut cell = |protection, attempt, webhook, out| {
        cells.push(Cell {
            protection,
            attempt,
            out,
            webhook,
        })
    };
    // --- deletion protection ---
    let del = "deletion-protection";
    cell(
        "deletion",
        "kubectl delete",
        del,
        env.kubectl(["delete", DB, "orders", "-n", "data-prod"]),
    );
    cell(
        "deletion",
        "kubectl delete --cascade=orphan",
        del,
        env.kubectl([
            "delete",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--cascade=orphan",
        ]),
    );
    cell(
        "deletion",
        "kubectl delete --all (one DELETE each)",
        del,
        env.kubectl(["delete", DB, "--all", "-n", "data-prod"]),
    );
    cell(
        "deletion",
        "DELETE on the collection (deletecollection)",
        del,
        env.kubectl([
            "delete",
            "--raw",
            "/apis/data.example.com/v1/namespaces/data-prod/databases",
        ]),
    );
    cell(
        "deletion",
        "kubectl delete --grace-period=0 --force",
        del,
        env.kubectl([
            "delete",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--grace-period=0",
            "--force",
        ]),
    );
    // --- strict mode: the protection label may not be taken off ---
    let strict = "strict-mode-protection";
    cell(
        "strict mode",
        "kubectl label katalog.dev/protected-",
        strict,
        env.kubectl([
            "label",
            DB,
            "orders",
            "-n",
            "data-prod",
            "katalog.dev/protected-",
        ]),
    );
    cell(
        "strict mode",
        "kubectl label katalog.dev/protected=false --overwrite",
        strict,
        env.kubectl([
            "label",
            DB,
            "orders",
            "-n",
            "data-prod",
            "katalog.dev/protected=false",
            "--overwrite",
        ]),
    );
    cell(
        "strict mode",
        "JSON patch remove",
        strict,
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/labels/katalog.dev~1protected"}]"#,
        ]),
    );
    cell(
        "strict mode",
        "JSON patch replace all labels",
        strict,
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/metadata/labels","value":{"app":"orders"}}]"#,
        ]),
    );
    cell(
        "strict mode",
        "merge patch label: null",
        strict,
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"katalog.dev/protected":null}}}"#,
        ]),
    );
    cell(
        "strict mode",
        "merge patch labels: null",
        strict,
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":null}}"#,
        ]),
    );
    let mut unlabelled = database("data-prod", "orders");
    unlabelled["metadata"]["labels"] = json!({"app": "orders", "exempt": "true"});
    cell(
        "strict mode",
        "kubectl replace without the label, adding another",
        strict,
        env.kubectl_stdin(["replace", "-f", "-"], unlabelled.to_string()),
    );
    let mut relabelled = database("data-prod", "orders");
    relabelled["metadata"]["labels"]["katalog.dev/protected"] = json!("false");
    cell(
        "strict mode",
        "server-side apply label=false --force-conflicts",
        strict,
        env.kubectl_stdin(
            [
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=intruder",
                "-f",
                "-",
            ],
            relabelled.to_string(),
        ),
    );
    // --- namespace protection: no Database outside data-prod/data-staging ---
    let ns = "namespace-protection";
    let outside = database("default", "elsewhere");
    cell("namespace", "kubectl create", ns, create(&env, &outside));
    cell(
        "namespace",
        "kubectl apply (client-side)",
        ns,
        env.kubectl_stdin(["apply", "-f", "-"], outside.to_string()),
    );
    cell(
        "namespace",
        "kubectl apply --server-side",
        ns,
        env.kubectl_stdin(["apply", "--server-side", "-f", "-"], outside.to_string()),
    );
    let file = Scratch::new("matrix");
    std::fs::write(file.path("db.json"), outside.to_string()).unwrap();
    cell(
        "namespace",
        "POST --raw to the collection",
        ns,
        env.kubectl([
            "create",
            "--raw",
            "/apis/data.example.com/v1/namespaces/default/databases",
            "-f",
            &file.path("db.json").display().to_string(),
        ]),
    );
    let mut kube_system = outside.clone();
    kube_system["metadata"]["namespace"] = json!("kube-system");
    cell(
        "namespace",
        "kubectl create in kube-system",
        ns,
        create(&env, &kube_system),
    );

    eprintln!("\n| protection | attempt | outcome |\n|---|---|---|");
    let mut passed = Vec::new();
    for c in &cells {
        let outcome = if c.denied() {
            "denied".to_string()
        } else {
            let text = String::from_utf8_lossy(if c.out.status.success() {
                &c.out.stdout
            } else {
                &c.out.stderr
            });
            passed.push(format!("{} / {}: {}", c.protection, c.attempt, text.trim()));
            format!("NOT denied: {}", text.trim().lines().next().unwrap_or(""))
        };
        eprintln!("| {} | {} | {outcome} |", c.protection, c.attempt);
    }
    // The object is still there, still protected.
    assert_eq!(label_of(&env, "orders").as_deref(), Some("true"));
    assert!(
        fails(env.kubectl(["get", DB, "elsewhere", "-n", "default"])).contains("NotFound"),
        "a Database was created outside its namespaces"
    );
    assert!(passed.is_empty(), "bypasses:\n{}", passed.join("\n"));
}
