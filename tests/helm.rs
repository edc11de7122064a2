//! The Helm chart `deploy/helm/katalog` against the kustomize tree it sits
//! beside: `helm template` with the default values renders the objects and
//! fields of `kubectl kustomize deploy/overlays/self-signed`, with
//! `certificates.mode=cert-manager` those of `deploy/overlays/cert-manager`,
//! and with monitoring on those of `deploy/monitoring` (the Namespace is
//! Helm's `--create-namespace`; the only extra fields are Helm's labels, and
//! the base's two labels on the objects kustomize leaves unlabelled); other values rename and move everything together; bad values
//! are refused with the value named. Then the rendered chart passes a
//! server-side dry run on the real kube-apiserver (katalog-testenv), and a
//! real `helm install --create-namespace` gives the ServiceAccount what the
//! base's RBAC gives it, under the release's names.
//!
//! The `helm` binary is built from its Go module by testenv/helm/build.sh
//! (cached under ~/.cache/katalog/helm), kubectl by testenv/build.sh.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use katalog_testenv::TestEnv;
use katalog_tests::{Scratch, ok, repo, repo_path};
use serde_json::{Map, Value};

const CHART: &str = "deploy/helm/katalog";
const NAMESPACE: &str = "katalog-system";

/// Labels Helm charts carry that the kustomize base has not: the release
/// (also in the selectors, so two releases never select each other's pods),
/// the chart and the app version.
const HELM_LABELS: [&str; 4] = [
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
];

/// The single line a build script prints on standard output.
fn build(script: &str, what: &str) -> PathBuf {
    let out = Command::new(repo_path(script))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(out.status.success(), "{script} failed: no {what}");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn helm_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("testenv/helm/build.sh", "helm binary"))
}

fn kubectl_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("testenv/build.sh", "control plane").join("kubectl"))
}

/// `helm ARGS` in the repository root, with its own config, cache, data and
/// discovery-cache directories under `home` (nothing written to the user's).
fn helm(home: &Path, args: &[&str]) -> Output {
    Command::new(helm_bin())
        .args(args)
        .current_dir(repo())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECACHEDIR", home.join("kube-cache"))
        .stdin(Stdio::null())
        .output()
        .expect("helm runs")
}

fn objects(text: &str, what: &str) -> Vec<Value> {
    katalog_lang::yaml::read_documents(text)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{text}"))
        .iter()
        .map(|n| n.to_value())
        .filter(|v| !v.is_null())
        .collect()
}

/// `helm template katalog deploy/helm/katalog -n katalog-system SET...`.
fn template_text(home: &Path, release: &str, namespace: &str, set: &[&str]) -> String {
    let mut args = vec!["template", release, CHART, "--namespace", namespace];
    for s in set {
        args.extend(["--set", s]);
    }
    ok(helm(home, &args))
}

fn template(home: &Path, set: &[&str]) -> Vec<Value> {
    let text = template_text(home, "katalog", NAMESPACE, set);
    objects(&text, &format!("helm template --set {set:?}"))
}

/// `kubectl kustomize deploy/DIR`, as objects.
fn kustomize(dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl_bin())
        .arg("kustomize")
        .arg(repo_path(&format!("deploy/{dir}")))
        .stdin(Stdio::null())
        .output()
        .expect("kubectl runs");
    objects(&ok(out), &format!("kustomize deploy/{dir}"))
}

fn key(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// `labels` without Helm's own keys; the release label also leaves every
/// selector (`matchLabels`, a Service's `selector`).
fn strip_helm_labels(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("app.kubernetes.io/instance");
            if let Some(Value::Object(labels)) = map.get_mut("labels") {
                for label in HELM_LABELS {
                    labels.remove(label);
                }
            }
            map.values_mut().for_each(strip_helm_labels);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_helm_labels),
        _ => {}
    }
}

/// The chart's `metadata.labels` may add the base's own two (every chart
/// object carries them; deploy/monitoring and the overlays' own objects do
/// not) to kustomize's; with that, both are compared whole.
fn same_labels(chart: &mut Value, kustomize: &Value, what: &str) {
    let wanted = kustomize["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let labels: Map<String, Value> = chart["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (k, v) in &labels {
        match wanted.get(k) {
            Some(w) => assert_eq!(v, w, "{what}: label {k}"),
            None => assert!(
                ["app.kubernetes.io/name", "app.kubernetes.io/part-of"].contains(&k.as_str()),
                "{what}: the chart adds the label {k}"
            ),
        }
    }
    for k in wanted.keys() {
        assert!(
            labels.contains_key(k),
            "{what}: the chart lacks the label {k}"
        );
    }
    match &kustomize["metadata"]["labels"] {
        Value::Null => {
            chart["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("labels");
        }
        l => chart["metadata"]["labels"] = l.clone(),
    }
}

/// Every object of `kustomized` (but the Namespace) is in `chart` with the
/// same fields, and the chart has no other object.
fn assert_same_objects(chart: &[Value], kustomized: &[Value], what: &str) {
    let chart_keys: Vec<String> = chart.iter().map(key).collect();
    let mut wanted: Vec<String> = kustomized
        .iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(key)
        .collect();
    let mut have = chart_keys.clone();
    wanted.sort();
    have.sort();
    assert_eq!(have, wanted, "{what}: the objects differ");
    for object in kustomized.iter().filter(|o| o["kind"] != "Namespace") {
        let k = key(object);
        let mut mine = chart
            .iter()
            .find(|o| key(o) == k)
            .expect("listed above")
            .clone();
        strip_helm_labels(&mut mine);
        same_labels(&mut mine, object, &format!("{what}: {k}"));
        if let Some((path, a, b)) = first_difference(&mine, object, String::new()) {
            panic!(
                "{what}: {k} differs at {path}: helm template has {a}, kubectl kustomize {b}\n\
                 --- helm template\n{}\n--- kubectl kustomize\n{}",
                serde_json::to_string_pretty(&mine).expect("json"),
                serde_json::to_string_pretty(object).expect("json")
            );
        }
    }
}

/// The first place (a JSON pointer) where `a` and `b` differ, with both values there.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<(String, Value, Value)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let (xa, yb) = (x.get(k), y.get(k));
                let path = format!("{path}/{k}");
                match (xa, yb) {
                    (Some(xa), Some(yb)) => first_difference(xa, yb, path),
                    _ => Some((
                        path,
                        xa.cloned().unwrap_or(Value::Null),
                        yb.cloned().unwrap_or(Value::Null),
                    )),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (xa, yb))| first_difference(xa, yb, format!("{path}/{i}"))),
        _ => (a != b).then(|| (path, a.clone(), b.clone())),
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

const MONITORING: [&str; 3] = [
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.dashboard.enabled=true",
];

#[test]
fn the_chart_renders_the_kustomize_objects_for_each_certificate_mode() {
    let scratch = Scratch::new("helm-render");
    let home = scratch.path("helm");
    ok(helm(&home, &["lint", "--strict", CHART]));
    ok(helm(
        &home,
        &[
            "lint",
            "--strict",
            CHART,
            "--set",
            "certificates.mode=cert-manager",
        ],
    ));

    // The files under files/ are links into deploy/: `helm package` copies
    // what they point at, so the packaged chart renders the same.
    let package_dir = scratch.path("package");
    ok(helm(
        &home,
        &["package", CHART, "-d", &package_dir.to_string_lossy()],
    ));
    let package = std::fs::read_dir(&package_dir)
        .expect("the package directory")
        .next()
        .expect("a packaged chart")
        .expect("a directory entry")
        .path();
    let from_package = ok(helm(
        &home,
        &[
            "template",
            "katalog",
            &package.to_string_lossy(),
            "-n",
            NAMESPACE,
        ],
    ));
    assert_eq!(
        from_package,
        template_text(&home, "katalog", NAMESPACE, &[])
    );

    assert_same_objects(
        &template(&home, &[]),
        &kustomize("overlays/self-signed"),
        "default values against overlays/self-signed",
    );
    assert_same_objects(
        &template(&home, &["certificates.mode=cert-manager"]),
        &kustomize("overlays/cert-manager"),
        "certificates.mode=cert-manager against overlays/cert-manager",
    );

    // Monitoring adds exactly deploy/monitoring's objects, in either mode.
    let monitoring = kustomize("monitoring");
    for mode in ["self-signed", "cert-manager"] {
        let mut set = MONITORING.to_vec();
        let mode_value = format!("certificates.mode={mode}");
        set.push(&mode_value);
        let without: Vec<String> = template(&home, &[&mode_value]).iter().map(key).collect();
        let added: Vec<Value> = template(&home, &set)
            .into_iter()
            .filter(|o| !without.contains(&key(o)))
            .collect();
        assert_same_objects(&added, &monitoring, &format!("monitoring ({mode})"));
    }
}

#[test]
fn values_rename_move_and_replace_objects_together() {
    let scratch = Scratch::new("helm-values");
    let helm_home = scratch.path("helm");

    // Another release and namespace: every name, namespace and reference
    // follows, and the RBAC still names only this release's objects.
    let text = template_text(&helm_home, "platform", "webhooks", &[]);
    let rendered = objects(&text, "release platform");
    assert!(!text.contains("katalog-system"), "{text}");
    for object in &rendered {
        assert!(
            object["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("platform-katalog")),
            "{}",
            key(object)
        );
        let cluster_scoped =
            ["ClusterRole", "ClusterRoleBinding"].contains(&object["kind"].as_str().unwrap_or(""));
        assert_eq!(
            object["metadata"]["namespace"].as_str(),
            (!cluster_scoped).then_some("webhooks"),
            "{}",
            key(object)
        );
    }
    let names = |kind: &str| -> Vec<String> {
        find(&rendered, kind, "platform-katalog")["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .flat_map(|r| r["resourceNames"].as_array().cloned().unwrap_or_default())
            .map(|n| n.as_str().expect("a name").to_string())
            .collect()
    };
    // (Other names, a CRD's say, may join the base's rules: they stay.)
    for (kind, wanted) in [
        (
            "ClusterRole",
            ["platform-katalog-validating", "platform-katalog-mutating"],
        ),
        ("Role", ["platform-katalog-tls", "platform-katalog-leader"]),
    ] {
        let names = names(kind);
        for name in wanted {
            assert!(names.contains(&name.to_string()), "{kind}: {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.starts_with("katalog-")),
            "{kind}: {names:?}"
        );
    }
    let deployment = find(&rendered, "Deployment", "platform-katalog");
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    for arg in [
        "--register-name=platform-katalog",
        "--self-signed-secret=webhooks/platform-katalog-tls",
        "--service-name=platform-katalog",
        "--service-namespace=webhooks",
        "--leader-election-namespace=webhooks",
    ] {
        assert!(
            args.as_array().expect("args").contains(&Value::from(arg)),
            "{arg} not in {args}"
        );
    }

    // The Katalog from a file of one's own, or from an existing ConfigMap.
    let katalog = repo_path("katalogs/pod-security.yaml");
    let file_value = format!("katalog.files.pods\\.yaml={}", katalog.display());
    let out = ok(helm(
        &helm_home,
        &[
            "template",
            "katalog",
            CHART,
            "-n",
            NAMESPACE,
            "--set-file",
            &file_value,
        ],
    ));
    let rendered = objects(&out, "--set-file katalog.files");
    let data = &find(&rendered, "ConfigMap", "katalog")["data"];
    assert_eq!(
        data,
        &serde_json::json!({"pods.yaml": std::fs::read_to_string(&katalog).expect("the Katalog")})
    );
    let rendered = template(
        &helm_home,
        &["katalog.existingConfigMap=mine", "replicaCount=3"],
    );
    assert!(!rendered.iter().any(|o| o["kind"] == "ConfigMap"));
    let spec = &find(&rendered, "Deployment", "katalog")["spec"];
    assert_eq!(spec["replicas"], 3);
    assert_eq!(
        spec["template"]["spec"]["volumes"][0]["configMap"]["name"],
        "mine"
    );

    // cert-manager with a ClusterIssuer of one's own: no Issuer chain.
    let rendered = template(
        &helm_home,
        &[
            "certificates.mode=cert-manager",
            "certificates.certManager.issuerRef.name=corp-ca",
            "certificates.certManager.issuerRef.kind=ClusterIssuer",
        ],
    );
    assert!(!rendered.iter().any(|o| o["kind"] == "Issuer"));
    assert_eq!(
        find(&rendered, "Certificate", "katalog")["spec"]["issuerRef"],
        serde_json::json!({"name": "corp-ca", "kind": "ClusterIssuer"})
    );

    // cert-manager with a Katalog of one's own: its registration objects,
    // each with the CA injector's annotation.
    let registration = r#"registration=[{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"katalog-validating","annotations":{"team":"platform"}},"webhooks":[]}]"#;
    let out = ok(helm(
        &helm_home,
        &[
            "template",
            "katalog",
            CHART,
            "-n",
            NAMESPACE,
            "--set",
            "certificates.mode=cert-manager",
            "--set-file",
            &file_value,
            "--set-json",
            registration,
        ],
    ));
    let rendered = objects(&out, "--set-json registration");
    assert_eq!(
        find(
            &rendered,
            "ValidatingWebhookConfiguration",
            "katalog-validating"
        )["metadata"]["annotations"],
        serde_json::json!({"team": "platform", "cert-manager.io/inject-ca-from": "katalog-system/katalog"})
    );
    assert!(
        !rendered
            .iter()
            .any(|o| o["kind"] == "CustomResourceDefinition")
    );

    // Bad values are refused, naming the value.
    for (set, says) in [
        (
            vec!["--set", "certificates.mode=selfsigned"],
            "at '/certificates/mode': value must be one of 'self-signed', 'cert-manager'",
        ),
        (
            vec!["--set", "replicaCount=0"],
            "at '/replicaCount': minimum",
        ),
        (vec!["--set", "replicas=2"], "'replicas' not allowed"),
        (
            vec![
                "--set",
                "certificates.mode=cert-manager",
                "--set-file",
                file_value.as_str(),
            ],
            "certificates.mode=cert-manager with your own Katalog needs `registration`",
        ),
    ] {
        let mut args = vec!["template", "katalog", CHART];
        args.extend(set.iter().copied());
        let out = helm(&helm_home, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(says),
            "{set:?}: {}{stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn the_rendered_chart_is_accepted_by_the_apiserver_and_installs() {
    let env = TestEnv::start().unwrap_or_else(|e| panic!("the test apiserver: {e}"));
    for crds in [
        "tests/crds/cert-manager.yaml",
        "tests/crds/prometheus-operator.yaml",
    ] {
        let file = repo_path(crds);
        ok(env.kubectl(["apply", "-f", &file.to_string_lossy()]));
        ok(env.kubectl([
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &file.to_string_lossy(),
        ]));
    }
    let scratch = Scratch::new("helm-cluster");
    let helm_home = scratch.path("helm");

    // A server-side dry run of every object, in each mode with monitoring.
    ok(env.kubectl(["create", "namespace", NAMESPACE]));
    for mode in ["self-signed", "cert-manager"] {
        let mode_value = format!("certificates.mode={mode}");
        let mut set = MONITORING.to_vec();
        set.push(&mode_value);
        let text = template_text(&helm_home, "katalog", NAMESPACE, &set);
        let out = ok(env.kubectl_stdin(["apply", "--dry-run=server", "-f", "-"], &text));
        eprintln!("[dry-run {mode}]\n{out}");
        let count = objects(&text, mode).len();
        assert_eq!(
            out.matches("(server dry run)").count(),
            count,
            "{mode}: {out}"
        );
    }

    // A real install into a namespace Helm creates; the ServiceAccount may
    // do what the base's RBAC lets it do, under this release's names only.
    let kubeconfig = env.kubeconfig();
    let kubeconfig = kubeconfig.to_string_lossy();
    ok(helm(
        &helm_home,
        &[
            "install",
            "katalog",
            CHART,
            "--namespace",
            "webhooks",
            "--create-namespace",
            "--kubeconfig",
            &kubeconfig,
        ],
    ));
    let sa = "--as=system:serviceaccount:webhooks:katalog";
    for (verb, what, namespace, answer) in [
        ("get", "secrets/katalog-tls", "webhooks", "yes"),
        ("get", "secrets/other", "webhooks", "no"),
        ("update", "leases/katalog-leader", "webhooks", "yes"),
        ("get", "secrets/katalog-tls", NAMESPACE, "no"),
        (
            "patch",
            "validatingwebhookconfigurations/katalog-validating",
            "",
            "yes",
        ),
        (
            "patch",
            "validatingwebhookconfigurations/someone-elses",
            "",
            "no",
        ),
        ("create", "customresourcedefinitions", "", "no"),
    ] {
        let mut args = vec!["auth", "can-i", verb, what, sa];
        if !namespace.is_empty() {
            args.extend(["-n", namespace]);
        }
        let out = env.kubectl(&args);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            answer,
            "may the ServiceAccount {verb} {what} in {namespace:?}?"
        );
    }
    let deployment = ok(env.kubectl([
        "get",
        "deployment",
        "katalog",
        "-n",
        "webhooks",
        "-o",
        "json",
    ]));
    let deployment: Value = serde_json::from_str(&deployment).expect("json");
    assert_eq!(
        deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    ok(helm(
        &helm_home,
        &[
            "uninstall",
            "katalog",
            "--namespace",
            "webhooks",
            "--kubeconfig",
            &kubeconfig,
        ],
    ));
    let out = env.kubectl(["get", "deployment", "katalog", "-n", "webhooks"]);
    assert!(
        !out.status.success(),
        "the Deployment outlived helm uninstall"
    );
}

/// `rbac.crds` names the CRDs of the Katalog the release serves: the
/// ClusterRole's CRD rule grants those and no other; the webhook
/// configuration rules keep their names.
#[test]
fn rbac_crds_name_the_crds_the_katalog_converts() {
    let scratch = Scratch::new("helm-rbac-crds");
    let helm_home = scratch.path("helm");
    let crd_rule = |objects: &[Value]| -> Value {
        let role = find(objects, "ClusterRole", "katalog");
        role["rules"]
            .as_array()
            .and_then(|rules| {
                rules
                    .iter()
                    .find(|r| r["resources"] == serde_json::json!(["customresourcedefinitions"]))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no CRD rule in {role}"))
    };
    let default = template(&helm_home, &[]);
    assert_eq!(
        crd_rule(&default)["resourceNames"],
        serde_json::json!(["crontabs.stable.example.com"])
    );
    let own = template(
        &helm_home,
        &["rbac.crds={widgets.example.com,gadgets.example.com}"],
    );
    assert_eq!(
        crd_rule(&own)["resourceNames"],
        serde_json::json!(["widgets.example.com", "gadgets.example.com"])
    );
    let role = find(&own, "ClusterRole", "katalog");
    let names: Vec<&Value> = role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["resourceNames"])
        .collect();
    assert_eq!(
        names[..2],
        [
            &serde_json::json!(["katalog-validating"]),
            &serde_json::json!(["katalog-mutating"])
        ]
    );
}
