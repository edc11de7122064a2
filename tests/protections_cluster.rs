//! Protections tried every way round against a real kube-apiserver (issue
//! 13): `katalogs/protections.yaml` registered, then every write path that
//! could sidestep deletion protection, strict mode, namespace protection and
//! `immutable` validations: the main resource, the `status` and `scale`
//! subresources, every served version of a converting CRD. Each attempt is
//! a cell of the bypass matrix; the tests print the matrix and require
//! every cell denied by katalog (or, where the apiserver itself refuses or
//! ignores the write, without effect), with the object unchanged afterwards.
//!
//! `cargo test -p katalog-tests --test protections_cluster -- --nocapture`

use std::process::Output;
use std::time::{Duration, Instant};

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
/// because of katalog (the webhook's or rule's name in the denial).
struct Cell {
    protection: String,
    attempt: String,
    out: Output,
    /// The webhook or rule that must deny it; `None`: the apiserver itself
    /// refuses or ignores this write, and only "without effect" is required.
    webhook: Option<&'static str>,
    /// What was wrong with the protected state right after the attempt.
    damage: Option<String>,
}

impl Cell {
    fn denied(&self) -> bool {
        self.webhook.is_some_and(|w| {
            !self.out.status.success()
                && String::from_utf8_lossy(&self.out.stderr).contains(&format!("[{w}]"))
        })
    }

    /// The matrix cell, and whether it is a bypass.
    fn outcome(&self) -> (String, bool) {
        let text = |b: &[u8]| {
            let line = String::from_utf8_lossy(b)
                .trim()
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            match line.char_indices().nth(160) {
                Some((i, _)) => format!("{}...", &line[..i]),
                None => line,
            }
        };
        let (outcome, bypass) = if self.denied() {
            ("denied".to_string(), false)
        } else if self.webhook.is_some() {
            let out = if self.out.status.success() {
                text(&self.out.stdout)
            } else {
                text(&self.out.stderr)
            };
            (format!("NOT denied: {out}"), true)
        } else if self.out.status.success() {
            (
                "accepted by the apiserver, without effect".to_string(),
                false,
            )
        } else {
            (
                format!("refused by the apiserver: {}", text(&self.out.stderr)),
                false,
            )
        };
        match &self.damage {
            Some(d) => (format!("{outcome}; CHANGED: {d}"), true),
            None => (outcome, bypass),
        }
    }
}

/// Prints the matrix; panics listing every bypass.
fn report(title: &str, cells: &[Cell]) {
    eprintln!("\n{title}\n| protection | attempt | outcome |\n|---|---|---|");
    let mut bypasses = Vec::new();
    for c in cells {
        let (outcome, bypass) = c.outcome();
        eprintln!("| {} | {} | {outcome} |", c.protection, c.attempt);
        if bypass {
            bypasses.push(format!("{} / {}: {outcome}", c.protection, c.attempt));
        }
    }
    assert!(bypasses.is_empty(), "bypasses:\n{}", bypasses.join("\n"));
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

/// Serve the Katalog at `katalog_path` with the Database and Bucket CRDs,
/// the `data-prod` and `katalog-system` namespaces, and its admission
/// webhooks registered as `name`; returns once the protections answer.
fn protected_databases(env: &TestEnv, katalog_path: &std::path::Path, name: &str) -> Katalog {
    let katalog = Katalog::start(katalog_path);
    apply_crds(
        env,
        &fixture("protections.yaml"),
        &["databases.data.example.com", "buckets.storage.example.com"],
    );
    for ns in ["data-prod", "katalog-system"] {
        ok(env.kubectl(["create", "namespace", ns]));
    }
    let reg = registration(name, &katalog.url());
    register_admission(env, &katalog.ir, &reg);
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
    katalog
}

#[test]
fn every_way_round_the_protections_is_denied() {
    let env = start_env("protections-matrix");
    // Kept to the end of the test: dropping it stops the server.
    let _katalog = protected_databases(
        &env,
        &repo_path("katalogs/protections.yaml"),
        "katalog-matrix",
    );
    ok(create(&env, &database("data-prod", "orders")));

    let mut cells = Vec::new();
    let mut cell = |protection: &str, attempt: &str, webhook, out| {
        cells.push(Cell {
            protection: protection.into(),
            attempt: attempt.into(),
            out,
            webhook: Some(webhook),
            damage: None,
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
    // --- deletion protection of the CRDs and of the engine's own objects:
    // a collection DELETE reviews each object with an empty `name` ---
    ok(env.kubectl(["label", "crd", "buckets.storage.example.com", "victim=true"]));
    cell(
        "deletion (CRDs)",
        "kubectl delete crd -l (one DELETE each)",
        del,
        env.kubectl(["delete", "crd", "-l", "victim=true"]),
    );
    cell(
        "deletion (CRDs)",
        "DELETE on the CRD collection (deletecollection)",
        del,
        env.kubectl([
            "delete",
            "--raw",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?labelSelector=victim%3Dtrue",
        ]),
    );
    let engine = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "katalog", "namespace": "katalog-system"},
         "spec": {"selector": {"matchLabels": {"app": "katalog"}},
                  "template": {"metadata": {"labels": {"app": "katalog"}},
                               "spec": {"containers": [{"name": "katalog", "image": "katalog"}]}}}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "katalog-tls", "namespace": "katalog-system"},
         "stringData": {"tls.crt": "x"}},
    ]});
    ok(create(&env, &engine));
    cell(
        "deletion (engine)",
        "kubectl delete deployment katalog",
        del,
        env.kubectl(["delete", "deployment", "katalog", "-n", "katalog-system"]),
    );
    cell(
        "deletion (engine)",
        "DELETE on the Deployment collection (deletecollection)",
        del,
        env.kubectl([
            "delete",
            "--raw",
            "/apis/apps/v1/namespaces/katalog-system/deployments",
        ]),
    );
    cell(
        "deletion (engine)",
        "DELETE on the Secret collection (deletecollection)",
        del,
        env.kubectl([
            "delete",
            "--raw",
            "/api/v1/namespaces/katalog-system/secrets?fieldSelector=metadata.name%3Dkatalog-tls",
        ]),
    );

    report("protections on the main resource", &cells);
    // The objects are still there, still protected.
    for (kind, name, ns) in [
        ("crd", "buckets.storage.example.com", ""),
        ("deployment", "katalog", "katalog-system"),
        ("secret", "katalog-tls", "katalog-system"),
    ] {
        let mut args = vec!["get", kind, name];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        assert!(
            env.kubectl(&args).status.success(),
            "{kind} {name} was deleted"
        );
    }
    assert_eq!(label_of(&env, "orders").as_deref(), Some("true"));
    assert!(
        fails(env.kubectl(["get", DB, "elsewhere", "-n", "default"])).contains("NotFound"),
        "a Database was created outside its namespaces"
    );
}

/// Immutable fields of a Database, beside `katalogs/protections.yaml`: the
/// replicas (which `/scale` writes), a status field (which `/status`
/// writes) and a spec field (which neither can write).
const IMMUTABLE_DATABASE: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: database-immutable
spec:
  admission:
    validations:
      - name: replicas-fixed
        resources: [data.example.com/v1/databases]
        path: spec.replicas
        check: { immutable: true }
      - name: cluster-id-fixed
        resources: [data.example.com/v1/databases]
        path: status.clusterID
        check: { immutable: true }
      - name: engine-fixed
        resources: [data.example.com/v1/databases]
        path: spec.engine
        check: { immutable: true }
"#;

/// What the subresource attempts must leave as it is: the Database, its
/// protection label, replicas, engine and cluster id; no Database elsewhere.
fn database_damage(env: &TestEnv) -> Option<String> {
    let out = env.kubectl(["get", DB, "orders", "-n", "data-prod", "-o", "json"]);
    if !out.status.success() {
        return Some(format!(
            "orders is gone: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let o: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut wrong = Vec::new();
    for (pointer, want) in [
        ("/metadata/labels/katalog.dev~1protected", json!("true")),
        ("/spec/replicas", json!(3)),
        ("/spec/engine", json!("postgres")),
        ("/status/clusterID", json!("c-1")),
    ] {
        let got = o.pointer(pointer).cloned().unwrap_or(Value::Null);
        if got != want {
            wrong.push(format!("{pointer} is {got}, was {want}"));
        }
    }
    if env
        .kubectl(["get", DB, "elsewhere", "-n", "default"])
        .status
        .success()
    {
        wrong.push("a Database was created in default".into());
    }
    (!wrong.is_empty()).then(|| wrong.join(", "))
}

#[test]
fn the_status_and_scale_subresources_sidestep_nothing() {
    let env = start_env("protections-subresources");
    let dir = Scratch::new("subresources");
    std::fs::copy(
        repo_path("katalogs/protections.yaml"),
        dir.path("protections.yaml"),
    )
    .expect("copying protections.yaml");
    std::fs::write(dir.path("immutable.yaml"), IMMUTABLE_DATABASE).expect("writing the Katalog");
    // Kept to the end of the test: dropping it stops the server.
    let _katalog = protected_databases(&env, &dir.path(""), "katalog-subresources");
    let mut orders = database("data-prod", "orders");
    orders["spec"]["replicas"] = json!(3);
    ok(create(&env, &orders));
    // A status field may be set once (it was not set before).
    let status = |extra: &str| {
        [
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--subresource=status",
            "--type=merge",
            "-p",
        ]
        .into_iter()
        .map(str::to_string)
        .chain([extra.to_string()])
        .collect::<Vec<String>>()
    };
    ok(env.kubectl(status(r#"{"status":{"clusterID":"c-1","replicas":3}}"#)));
    assert_eq!(database_damage(&env), None);

    let file = Scratch::new("subresource-bodies");
    let path_of = |name: &str, body: &Value| {
        std::fs::write(file.path(name), body.to_string()).expect("writing a body");
        file.path(name).display().to_string()
    };
    let base = "/apis/data.example.com/v1/namespaces/data-prod/databases/orders";
    let mut cells = Vec::new();
    let mut cell = |protection: &str, attempt: &str, webhook, out: Output| {
        cells.push(Cell {
            protection: protection.into(),
            attempt: attempt.into(),
            out,
            webhook,
            damage: database_damage(&env),
        })
    };
    // Unconditional writes: no resourceVersion to conflict on.
    let mut stored = get_json(&env, &["get", DB, "orders", "-n", "data-prod"]);
    stored["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");

    // --- the main resource, for comparison: the immutable rules hold ---
    cell(
        "immutable spec.replicas",
        "merge patch of the main resource",
        Some("replicas-fixed"),
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":5}}"#,
        ]),
    );
    // --- /status ---
    cell(
        "immutable status.clusterID",
        "merge patch --subresource=status",
        Some("cluster-id-fixed"),
        env.kubectl(status(r#"{"status":{"clusterID":"c-2"}}"#)),
    );
    cell(
        "immutable status.clusterID",
        "JSON patch remove --subresource=status",
        Some("cluster-id-fixed"),
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--subresource=status",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/status/clusterID"}]"#,
        ]),
    );
    let mut moved = stored.clone();
    moved["status"]["clusterID"] = json!("c-3");
    cell(
        "immutable status.clusterID",
        "kubectl replace --subresource=status",
        Some("cluster-id-fixed"),
        env.kubectl_stdin(
            ["replace", "--subresource=status", "-f", "-"],
            moved.to_string(),
        ),
    );
    let applied = json!({
        "apiVersion": "data.example.com/v1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "data-prod"},
        "status": {"clusterID": "c-4"},
    });
    cell(
        "immutable status.clusterID",
        "server-side apply --subresource=status --force-conflicts",
        Some("cluster-id-fixed"),
        env.kubectl_stdin(
            [
                "apply",
                "--server-side",
                "--subresource=status",
                "--force-conflicts",
                "--field-manager=intruder",
                "-f",
                "-",
            ],
            applied.to_string(),
        ),
    );
    // A raw PUT must name the current resourceVersion.
    let mut current = get_json(&env, &["get", DB, "orders", "-n", "data-prod"]);
    current["status"]["clusterID"] = json!("c-5");
    cell(
        "immutable status.clusterID",
        "PUT --raw on /status",
        Some("cluster-id-fixed"),
        env.kubectl([
            "replace",
            "--raw",
            &format!("{base}/status"),
            "-f",
            &path_of("current.json", &current),
        ]),
    );
    cell(
        "immutable spec.engine",
        "merge patch of spec --subresource=status",
        None,
        env.kubectl(status(r#"{"spec":{"engine":"mysql","replicas":7}}"#)),
    );
    cell(
        "strict mode",
        "merge patch label: null --subresource=status",
        None,
        env.kubectl(status(
            r#"{"metadata":{"labels":{"katalog.dev/protected":null}}}"#,
        )),
    );
    let mut unlabelled = stored.clone();
    unlabelled["metadata"]["labels"] = json!({"app": "orders"});
    cell(
        "strict mode",
        "kubectl replace --subresource=status without the label",
        None,
        env.kubectl_stdin(
            ["replace", "--subresource=status", "-f", "-"],
            unlabelled.to_string(),
        ),
    );
    cell(
        "deletion",
        "DELETE on /status",
        None,
        env.kubectl(["delete", "--raw", &format!("{base}/status")]),
    );
    let mut outside = database("default", "elsewhere");
    outside["status"] = json!({"clusterID": "x"});
    cell(
        "namespace",
        "POST to /status in default",
        None,
        env.kubectl([
            "create",
            "--raw",
            "/apis/data.example.com/v1/namespaces/default/databases/elsewhere/status",
            "-f",
            &path_of("outside.json", &outside),
        ]),
    );
    // --- /scale: the review's object is an autoscaling/v1 Scale ---
    cell(
        "immutable spec.replicas",
        "kubectl scale --replicas=5",
        Some("replicas-fixed"),
        env.kubectl(["scale", DB, "orders", "-n", "data-prod", "--replicas=5"]),
    );
    cell(
        "immutable spec.replicas",
        "merge patch --subresource=scale",
        Some("replicas-fixed"),
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--subresource=scale",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":6}}"#,
        ]),
    );
    cell(
        "immutable spec.replicas",
        "JSON patch --subresource=scale",
        Some("replicas-fixed"),
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--subresource=scale",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/replicas","value":7}]"#,
        ]),
    );
    let mut scale = get_json(
        &env,
        &[
            "get",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--subresource=scale",
        ],
    );
    assert_eq!(scale["kind"], "Scale", "{scale}");
    scale["spec"]["replicas"] = json!(8);
    scale["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");
    cell(
        "immutable spec.replicas",
        "PUT --raw of a Scale on /scale",
        Some("replicas-fixed"),
        env.kubectl([
            "replace",
            "--raw",
            &format!("{base}/scale"),
            "-f",
            &path_of("scale.json", &scale),
        ]),
    );
    cell(
        "strict mode",
        "merge patch label: null --subresource=scale",
        None,
        env.kubectl([
            "patch",
            DB,
            "orders",
            "-n",
            "data-prod",
            "--subresource=scale",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"katalog.dev/protected":null}}}"#,
        ]),
    );
    cell(
        "deletion",
        "DELETE on /scale",
        None,
        env.kubectl(["delete", "--raw", &format!("{base}/scale")]),
    );
    // Writes the rules allow still go through both subresources.
    ok(env.kubectl(status(r#"{"status":{"replicas":2}}"#)));
    ok(env.kubectl(["scale", DB, "orders", "-n", "data-prod", "--replicas=3"]));
    report(
        "protections through the status and scale subresources",
        &cells,
    );
}

/// Immutable CronTab fields, written once against the hub (v1) beside
/// `katalogs/crontab.yaml`: v1beta1 has the image at the same place, v2
/// wraps it in `container`; the status is the same at every version.
/// A Cache declared with its CRD (`tests/crds/cache.yaml`, replicas at
/// `.spec.size`) and its size immutable.
const IMMUTABLE_CACHE: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: cache-immutable
spec:
  resources:
    - group: cache.example.com
      kind: Cache
      plural: caches
      hub: v1
      versions: [v1]
      crd: cache.crd.yaml
  admission:
    validations:
      - name: size-fixed
        resources: [cache.example.com/v1/caches]
        path: spec.size
        check: { immutable: true }
"#;

#[test]
fn scale_writes_are_held_where_the_crd_keeps_the_replicas() {
    let env = start_env("protections-scale-path");
    let dir = Scratch::new("scale-path");
    std::fs::copy(fixture("cache.yaml"), dir.path("cache.crd.yaml")).expect("copying the CRD");
    std::fs::write(dir.path("cache.yaml"), IMMUTABLE_CACHE).expect("writing the Katalog");
    let katalog = Katalog::start(&dir.path("cache.yaml"));
    let v = &katalog.ir.admission.validations[0];
    assert_eq!(v.scale_replicas.to_string(), "spec.size");
    apply_crds(&env, &fixture("cache.yaml"), &["caches.cache.example.com"]);
    register_admission(
        &env,
        &katalog.ir,
        &registration("katalog-scale-path", &katalog.url()),
    );
    let cache = json!({"apiVersion": "cache.example.com/v1", "kind": "Cache",
                       "metadata": {"name": "hot", "namespace": "default"},
                       "spec": {"size": 3, "tier": "gold"}});
    ok(create(&env, &cache));
    const CACHE: &str = "caches.v1.cache.example.com";
    let scale_patch = |replicas: u64, dry_run: bool| {
        let mut args = vec![
            "patch".to_string(),
            CACHE.into(),
            "hot".into(),
            "--subresource=scale".into(),
            "--type=merge".into(),
            "-p".into(),
            format!(r#"{{"spec":{{"replicas":{replicas}}}}}"#),
        ];
        if dry_run {
            args.push("--dry-run=server".into());
        }
        env.kubectl(args)
    };
    eventually(
        "the webhook is called for /scale",
        Duration::from_secs(30),
        || {
            let out = scale_patch(7, true);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (!out.status.success() && stderr.contains("[size-fixed]"))
                .then_some(())
                .ok_or(stderr)
        },
    );
    let size = || {
        let out = ok(env.kubectl(["get", CACHE, "hot", "-o", "jsonpath={.spec.size}"]));
        out.trim().to_string()
    };
    let denied = fails(env.kubectl(["scale", CACHE, "hot", "--replicas=5"]));
    assert!(
        denied.contains("[size-fixed] `spec.size` is immutable: it was 3, now 5"),
        "{denied}"
    );
    let denied = fails(scale_patch(6, false));
    assert!(denied.contains("[size-fixed]"), "{denied}");
    assert_eq!(size(), "3", "the Cache was scaled");
    // The main resource too, and another field stays writable.
    let denied = fails(env.kubectl([
        "patch",
        CACHE,
        "hot",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":4}}"#,
    ]));
    assert!(denied.contains("[size-fixed]"), "{denied}");
    ok(env.kubectl([
        "patch",
        CACHE,
        "hot",
        "--type=merge",
        "-p",
        r#"{"spec":{"tier":"silver"}}"#,
    ]));
    assert_eq!(size(), "3");
}

const IMMUTABLE_CRONTAB: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-immutable
spec:
  admission:
    validations:
      - name: image-fixed
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { immutable: true }
      - name: started-by-fixed
        resources: [stable.example.com/v1/crontabs]
        path: status.startedBy
        check: { immutable: true }
"#;

/// A CronTab at `version` with this image (the shape of each version).
fn crontab(version: &str, name: &str, image: &str) -> Value {
    let spec = match version {
        "v1beta1" => json!({"cronSpec": "0 3 * * *", "image": image}),
        "v1" => json!({"schedule": "0 3 * * *", "image": image}),
        "v2" => json!({"schedule": "0 3 * * *", "container": {"image": image}}),
        other => panic!("no CronTab shape for {other}"),
    };
    json!({
        "apiVersion": format!("stable.example.com/{version}"),
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": "jobs"},
        "spec": spec,
    })
}

#[test]
fn immutable_fields_hold_every_way_round_at_every_served_version() {
    let env = start_env("protections-immutable");
    apply_crds(
        &env,
        &repo_path("katalogs/crontab.crd.yaml"),
        &["crontabs.stable.example.com"],
    );
    let (_dir, katalog) = Katalog::crontab_with("immutable", IMMUTABLE_CRONTAB);
    let reg = registration("katalog-immutable", &katalog.url());
    register_conversion(&env, &katalog.ir, &reg);
    register_admission(&env, &katalog.ir, &reg);
    ok(env.kubectl(["create", "namespace", "jobs"]));
    let image = "registry.example.com/backup:1";
    ok(create(&env, &crontab("v1", "probe", image)));
    eventually("the webhooks are called", Duration::from_secs(30), || {
        let out = env.kubectl([
            "patch",
            "crontabs.v1.stable.example.com",
            "probe",
            "-n",
            "jobs",
            "--dry-run=server",
            "--type=merge",
            "-p",
            r#"{"spec":{"image":"other"}}"#,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && stderr.contains("[image-fixed]"))
            .then_some(())
            .ok_or(stderr)
    });

    let mut cells = Vec::new();
    for version in ["v1beta1", "v1", "v2"] {
        let name = format!("nightly-{version}");
        let kind = format!("crontabs.{version}.stable.example.com");
        let k = |args: &[&str]| -> Vec<String> {
            [kind.as_str(), name.as_str(), "-n", "jobs"]
                .iter()
                .chain(args)
                .map(|s| s.to_string())
                .collect()
        };
        let run = |verb: &str, args: &[&str]| {
            let mut all = vec![verb.to_string()];
            all.extend(k(args));
            env.kubectl(all)
        };
        ok(create(&env, &crontab(version, &name, image)));
        // Set once: allowed.
        ok(run(
            "patch",
            &[
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"startedBy":"scheduler-a"}}"#,
            ],
        ));
        let damage = || -> Option<String> {
            let hub = try_get_json(
                &env,
                &["get", "crontabs.v1.stable.example.com", &name, "-n", "jobs"],
            )?;
            let mut wrong = Vec::new();
            if hub["spec"]["image"] != image {
                wrong.push(format!("spec.image is {}", hub["spec"]["image"]));
            }
            if hub["status"]["startedBy"] != "scheduler-a" {
                wrong.push(format!(
                    "status.startedBy is {}",
                    hub["status"]["startedBy"]
                ));
            }
            (!wrong.is_empty()).then(|| wrong.join(", "))
        };
        let image_at = if version == "v2" {
            "/spec/container/image"
        } else {
            "/spec/image"
        };
        let other = "docker.io/backup:2";
        let spec_merge = if version == "v2" {
            json!({"spec": {"container": {"image": other}}})
        } else {
            json!({"spec": {"image": other}})
        };
        // Unconditional writes: no resourceVersion to conflict on.
        let mut stored = get_json(&env, &["get", &kind, &name, "-n", "jobs"]);
        stored["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("resourceVersion");
        let mut replaced = stored.clone();
        *replaced.pointer_mut(image_at).expect("the image") = json!(other);
        let mut restarted = stored.clone();
        restarted["status"]["startedBy"] = json!("scheduler-b");
        // Each attempt, with the state right after it.
        let mut attempt = |rule: &'static str, attempt: &str, out: Output| {
            cells.push(Cell {
                protection: format!("immutable ({rule}) at {version}"),
                attempt: attempt.into(),
                out,
                webhook: Some(rule),
                damage: damage(),
            })
        };
        attempt(
            "image-fixed",
            "JSON patch replace",
            run(
                "patch",
                &[
                    "--type=json",
                    "-p",
                    &json!([{"op": "replace", "path": image_at, "value": other}]).to_string(),
                ],
            ),
        );
        // v2's schema requires the image inside `container`: remove the wrapper.
        let removed = if version == "v2" {
            "/spec/container"
        } else {
            image_at
        };
        attempt(
            "image-fixed",
            "JSON patch remove",
            run(
                "patch",
                &[
                    "--type=json",
                    "-p",
                    &json!([{"op": "remove", "path": removed}]).to_string(),
                ],
            ),
        );
        attempt(
            "image-fixed",
            "merge patch",
            run("patch", &["--type=merge", "-p", &spec_merge.to_string()]),
        );
        attempt(
            "image-fixed",
            "kubectl replace",
            env.kubectl_stdin(["replace", "-f", "-"], replaced.to_string()),
        );
        attempt(
            "image-fixed",
            "server-side apply --force-conflicts",
            env.kubectl_stdin(
                [
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "--field-manager=intruder",
                    "-f",
                    "-",
                ],
                crontab(version, &name, other).to_string(),
            ),
        );
        attempt(
            "started-by-fixed",
            "merge patch --subresource=status",
            run(
                "patch",
                &[
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    r#"{"status":{"startedBy":"scheduler-b"}}"#,
                ],
            ),
        );
        attempt(
            "started-by-fixed",
            "kubectl replace --subresource=status",
            env.kubectl_stdin(
                ["replace", "--subresource=status", "-f", "-"],
                restarted.to_string(),
            ),
        );
        // What the rules allow still goes through at this version.
        let schedule = if version == "v1beta1" {
            "cronSpec"
        } else {
            "schedule"
        };
        ok(run(
            "patch",
            &[
                "--type=merge",
                "-p",
                &json!({"spec": {schedule: "0 4 * * *"}}).to_string(),
            ],
        ));
        ok(run(
            "patch",
            &[
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"lastRun":"now"}}"#,
            ],
        ));
    }
    report("immutable fields at every served version", &cells);
}

/// The type and message of each condition of a Namespace.
fn conditions(ns: &Value) -> Vec<(String, String)> {
    ns["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True")
        .map(|c| {
            (
                c["type"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn deleting_the_namespace_of_a_protected_object_stops_at_the_object() {
    let t = "protections-namespace";
    let started = Instant::now();
    let mut env = katalog_testenv::TestEnv::start_with(
        katalog_testenv::Options::default().controller_manager(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[{t}] control plane with kube-controller-manager ready in {}",
        secs(started.elapsed())
    );
    // Kept to the end of the test: dropping it stops the server.
    let _katalog = protected_databases(
        &env,
        &repo_path("katalogs/protections.yaml"),
        "katalog-namespace",
    );
    ok(create(&env, &database("data-prod", "orders")));
    // Two unprotected Databases, listed before and after the protected one.
    for name in ["analytics", "scratch"] {
        let mut db = database("data-prod", name);
        db["metadata"]["labels"] = json!({"app": name});
        ok(create(&env, &db));
    }
    ok(env.kubectl([
        "create",
        "configmap",
        "settings",
        "-n",
        "data-prod",
        "--from-literal=a=b",
    ]));

    let deleting = Instant::now();
    ok(env.kubectl(["delete", "namespace", "data-prod", "--wait=false"]));
    // The namespace controller deletes what it may and reports what it
    // could not, naming the webhook's denial.
    let (ns, took) = {
        let ns = eventually(
            "the namespace reports the denied deletion",
            Duration::from_secs(60),
            || {
                let ns = try_get_json(&env, &["get", "namespace", "data-prod"])
                    .ok_or("the namespace is gone, and what it held with it")?;
                let failed = conditions(&ns).iter().any(|(kind, message)| {
                    kind == "NamespaceDeletionContentFailure"
                        && message.contains("deletion-protection")
                });
                failed.then_some(ns.clone()).ok_or_else(|| ns.to_string())
            },
        );
        (ns, deleting.elapsed())
    };
    assert!(env.controller_manager_running());
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    for (kind, message) in conditions(&ns) {
        eprintln!("[{t}] condition {kind}: {message}");
    }
    // The other resources are emptied. The Databases are deleted as one
    // collection, in name order (the apiserver's default
    // --delete-collection-workers=1), which stops at the first denial: the
    // one before the protected Database goes, the one after it stays.
    let left = |what: &[&str]| -> bool {
        let mut args = vec!["get"];
        args.extend(what);
        args.extend(["-n", "data-prod"]);
        env.kubectl(&args).status.success()
    };
    eventually(
        "the unprotected objects before the protected one are deleted",
        Duration::from_secs(30),
        || {
            let still: Vec<&str> = [
                ("databases/analytics", left(&[DB, "analytics"])),
                ("configmaps/settings", left(&["configmap", "settings"])),
            ]
            .into_iter()
            .filter(|(_, there)| *there)
            .map(|(name, _)| name)
            .collect();
            still
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("still there: {}", still.join(", ")))
        },
    );
    assert!(left(&[DB, "scratch"]), "scratch was deleted");
    assert_eq!(label_of(&env, "orders").as_deref(), Some("true"));
    let waited = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(label_of(&env, "orders").as_deref(), Some("true"));
    let ns = get_json(&env, &["get", "namespace", "data-prod"]);
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    eprintln!(
        "[{t}] namespace Terminating with the denial reported after {}; orders still there {} later",
        secs(took),
        secs(waited.elapsed())
    );

    // Lifting it: without katalog's webhooks (deleted here; in a cluster, a
    // Katalog without the protection), the namespace goes at its next sync,
    // which a change to the namespace starts at once.
    ok(env.kubectl([
        "delete",
        "validatingwebhookconfiguration",
        "katalog-namespace-validating",
    ]));
    // The controller's own retry may have removed it already (NotFound):
    // either way the check below waits for it to be gone.
    let _ = env.kubectl(["label", "namespace", "data-prod", "resync=1"]);
    let lifted = Instant::now();
    eventually("the namespace is gone", Duration::from_secs(60), || {
        let out = env.kubectl(["get", "namespace", "data-prod"]);
        (!out.status.success())
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    eprintln!(
        "[{t}] without the webhooks the namespace was removed in {}",
        secs(lifted.elapsed())
    );
}
