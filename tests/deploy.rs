//! `deploy/` against the real kube-apiserver (katalog-testenv): every
//! kustomization is accepted by `kubectl apply --dry-run=server -k`; the
//! Deployment's pod passes the restricted Pod Security Katalog; and the
//! engine, run outside the cluster with the flags of the self-signed
//! overlay's Deployment and a token of its ServiceAccount, registers,
//! injects its Secret CA, leads, converts, reloads a ConfigMap update
//! without a restart, and `migrate-storage` works beside it, while
//! `kubectl auth can-i` shows what the ServiceAccount may not do.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::Duration;

use katalog_testenv::TestEnv;
use katalog_tests::{ConfigMapDir, Scratch, Serve, eventually, free_port, katalog, ok, repo_path};
use serde_json::Value;

const NAMESPACE: &str = "katalog-system";
const CRD: &str = "crontabs.stable.example.com";
const SA: &str = "--as=system:serviceaccount:katalog-system:katalog";
const WAIT: Duration = Duration::from_secs(60);

fn start_env() -> TestEnv {
    TestEnv::start().unwrap_or_else(|e| panic!("the test apiserver: {e}"))
}

/// `kubectl kustomize deploy/DIR`, as objects.
fn render(env: &TestEnv, dir: &str) -> Vec<Value> {
    let path = repo_path(&format!("deploy/{dir}"));
    let text = ok(env.kubectl(["kustomize", &path.to_string_lossy()]));
    katalog_lang::yaml::read_documents(&text)
        .unwrap_or_else(|e| panic!("kustomize output of {dir}: {e}"))
        .iter()
        .map(|n| n.to_value())
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn apply_crds(env: &TestEnv, file: &Path) {
    ok(env.kubectl(["apply", "-f", &file.to_string_lossy()]));
    ok(env.kubectl([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &file.to_string_lossy(),
    ]));
}

fn get_json(env: &TestEnv, args: &[&str]) -> Result<Value, String> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = env.kubectl(&all);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// The deploy/ copies of the example Katalog are the example, and the
/// cert-manager overlay's registration is what `katalog manifests` prints.
#[test]
fn deploy_copies_are_current() {
    for (copy, original) in [
        ("deploy/base/katalog/crontab.yaml", "katalogs/crontab.yaml"),
        (
            "deploy/base/katalog/crontab.crd.yaml",
            "katalogs/crontab.crd.yaml",
        ),
        (
            "deploy/overlays/cert-manager/crd.yaml",
            "katalogs/crontab.crd.yaml",
        ),
    ] {
        let read = |p: &str| std::fs::read_to_string(repo_path(p)).expect(p);
        assert!(
            read(copy) == read(original),
            "{copy} differs from {original}: copy it again"
        );
    }
    let printed = ok(katalog(
        &["manifests", "--katalog", "deploy/base/katalog"],
        None,
    ));
    let shipped = std::fs::read_to_string(repo_path("deploy/overlays/cert-manager/manifests.yaml"))
        .expect("manifests.yaml");
    assert!(
        printed == shipped,
        "deploy/overlays/cert-manager/manifests.yaml is stale: regenerate it with \
         `katalog manifests --katalog deploy/base/katalog > deploy/overlays/cert-manager/manifests.yaml`"
    );
}

/// The pod of a Deployment, as `katalog admit` takes it.
fn pod_of(deployment: &Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "katalog-pod", "namespace": NAMESPACE,
                     "labels": deployment["spec"]["template"]["metadata"]["labels"]},
        "spec": deployment["spec"]["template"]["spec"],
    })
}

fn admit_restricted(pod: &Value) -> std::process::Output {
    katalog(
        &[
            "admit",
            "--katalog",
            "katalogs/pod-security-restricted.yaml",
            "-",
        ],
        Some(&serde_json::to_vec(pod).expect("a pod")),
    )
}

#[test]
fn every_kustomization_is_accepted_by_the_apiserver_and_the_pod_is_restricted() {
    let env = start_env();
    apply_crds(&env, &repo_path("tests/crds/cert-manager.yaml"));
    apply_crds(&env, &repo_path("tests/crds/prometheus-operator.yaml"));
    // A server-side dry run does not create the Namespace it also holds.
    ok(env.kubectl(["create", "namespace", NAMESPACE]));
    for dir in [
        "base",
        "overlays/self-signed",
        "overlays/cert-manager",
        "monitoring",
    ] {
        let path = repo_path(&format!("deploy/{dir}"));
        let out = ok(env.kubectl(["apply", "--dry-run=server", "-k", &path.to_string_lossy()]));
        eprintln!("[dry-run {dir}]\n{out}");
        assert!(out.contains("(server dry run)"), "{dir}: {out}");
    }

    for dir in ["base", "overlays/self-signed", "overlays/cert-manager"] {
        let objects = render(&env, dir);
        let deployment = find(&objects, "Deployment", "katalog");
        let pod = pod_of(deployment);
        let out = admit_restricted(&pod);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && text.starts_with("ALLOWED"),
            "{dir}: the pod fails restricted Pod Security: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The check is live: the same pod with a capability added is denied.
        let mut weaker = pod.clone();
        weaker["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] =
            serde_json::json!(["NET_ADMIN"]);
        let out = admit_restricted(&weaker);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{dir}: a weaker pod was not denied"
        );
    }

    // The cert-manager overlay: no RBAC, the CA injector's annotation on the CRD.
    let objects = render(&env, "overlays/cert-manager");
    assert!(
        !objects.iter().any(|o| o["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("rbac.authorization.k8s.io"))),
        "the cert-manager overlay needs no RBAC"
    );
    let crd = find(&objects, "CustomResourceDefinition", CRD);
    assert_eq!(
        crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "katalog-system/katalog"
    );
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
}

/// The container args of the self-signed overlay's Deployment, made to run
/// on this machine: the Katalog from `katalog_dir`, listeners on loopback,
/// the apiserver calling 127.0.0.1 (no Service here), the token's kubeconfig.
fn local_args(
    deployment: &Value,
    katalog_dir: &Path,
    port: u16,
    metrics: u16,
    kubeconfig: &Path,
) -> Vec<String> {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("an arg").to_string())
        .map(|a| match a.split_once('=') {
            Some(("--katalog", _)) => format!("--katalog={}", katalog_dir.display()),
            Some(("--listen", _)) => format!("--listen=127.0.0.1:{port}"),
            Some(("--metrics-listen", _)) => format!("--metrics-listen=127.0.0.1:{metrics}"),
            _ => a,
        })
        .collect();
    args.push(format!("--register-url=https://127.0.0.1:{port}"));
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    args.push("--workers=1".into());
    args
}

fn metrics(port: u16) -> Result<String, String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    Ok(text)
}

fn crontab(env: &TestEnv, version: &str, name: &str, spec: &str) -> Result<String, String> {
    let doc = format!(
        "apiVersion: stable.example.com/{version}\nkind: CronTab\nmetadata: {{name: {name}, namespace: ct}}\nspec: {spec}\n"
    );
    let out = env.kubectl_stdin(["apply", "-f", "-"], doc);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_engine_with_the_deployed_service_account() {
    let env = start_env();
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"));
    let overlay = repo_path("deploy/overlays/self-signed");
    ok(env.kubectl(["apply", "-k", &overlay.to_string_lossy()]));
    ok(env.kubectl(["create", "namespace", "ct"]));

    // What the ServiceAccount may not do, with one thing it may (the
    // checks answer for this identity, not for anyone).
    for (verb, what, namespace, answer) in [
        ("get", "secrets/katalog-tls", "default", "no"),
        ("list", "secrets", "kube-system", "no"),
        ("get", "secrets/other", NAMESPACE, "no"),
        ("list", "secrets", NAMESPACE, "no"),
        ("create", "customresourcedefinitions", "", "no"),
        (
            "update",
            "customresourcedefinitions/crontabs.stable.example.com",
            "",
            "no",
        ),
        (
            "delete",
            "customresourcedefinitions/crontabs.stable.example.com",
            "",
            "no",
        ),
        (
            "patch",
            "validatingwebhookconfigurations/someone-elses",
            "",
            "no",
        ),
        (
            "delete",
            "mutatingwebhookconfigurations/someone-elses",
            "",
            "no",
        ),
        (
            "patch",
            "validatingwebhookconfigurations/katalog-validating",
            "",
            "yes",
        ),
        (
            "delete",
            "mutatingwebhookconfigurations/katalog-mutating",
            "",
            "yes",
        ),
    ] {
        let mut args = vec!["auth", "can-i", verb, what, SA];
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

    // A token of the deployed ServiceAccount (TokenRequest), in a kubeconfig.
    let scratch = Scratch::new("deploy");
    let token = ok(env.kubectl([
        "create",
        "token",
        "katalog",
        "-n",
        NAMESPACE,
        "--duration=1h",
    ]));
    std::fs::write(scratch.path("ca.crt"), env.ca_pem()).expect("ca.crt");
    let kubeconfig = scratch.path("katalog.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster: {{server: '{}', certificate-authority: '{}'}}\nusers:\n- name: katalog\n  user: {{token: '{}'}}\ncontexts:\n- name: katalog\n  context: {{cluster: testenv, user: katalog}}\ncurrent-context: katalog\n",
            env.server_url(),
            scratch.path("ca.crt").display(),
            token.trim()
        ),
    )
    .expect("the kubeconfig");

    // The Katalog ConfigMap of the overlay, laid out on disk as the kubelet mounts it.
    let objects = render(&env, "overlays/self-signed");
    let configmap = find(&objects, "ConfigMap", "katalog");
    let data = configmap["data"].as_object().expect("ConfigMap data");
    let files: Vec<(String, String)> = data
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("text").to_string()))
        .collect();

    let mut mount = ConfigMapDir::new(scratch.path("katalog"), &borrow(&files));

    let (port, metrics_port) = (free_port(), free_port());
    let deployment = find(&objects, "Deployment", "katalog");
    let args = local_args(deployment, &mount.dir, port, metrics_port, &kubeconfig);
    eprintln!("katalog {}", args.join(" "));
    let mut serve = Serve::start(&args);
    serve.wait_for_line("katalog serving", WAIT);

    // The Secret CA, injected as the CRD's caBundle; the leader Lease.
    let ca = eventually("the Secret CA", WAIT, || {
        let secret = get_json(&env, &["get", "secret", "katalog-tls", "-n", NAMESPACE])?;
        secret["data"]["ca.crt"]
            .as_str()
            .map(str::to_string)
            .ok_or(secret.to_string())
    });
    eventually("the caBundle injected into the CRD", WAIT, || {
        let crd = get_json(&env, &["get", "crd", CRD])?;
        let bundle = &crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"];
        (bundle.as_str() == Some(ca.as_str()))
            .then_some(())
            .ok_or(bundle.to_string())
    });
    eventually("a leader", WAIT, || {
        let lease = get_json(&env, &["get", "lease", "katalog-leader", "-n", NAMESPACE])?;
        lease["spec"]["holderIdentity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(|_| ())
            .ok_or(lease.to_string())
    });
    let text = eventually("the leader and certificate metrics", WAIT, || {
        let text = metrics(metrics_port)?;
        text.contains(r#"katalog_leader{lease="katalog-system/katalog-leader"} 1"#)
            .then_some(text.clone())
            .ok_or(text)
    });
    let expiry: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("katalog_certificate_expiry_timestamp_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .expect("katalog_certificate_expiry_timestamp_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock")
        .as_secs() as i64;
    assert!(
        expiry > now + 80 * 86400,
        "the certificate expires at {expiry}"
    );

    // The apiserver converts through the engine.
    eventually(
        "a v1beta1 CronTab written through the webhook",
        WAIT,
        || {
            crontab(
                &env,
                "v1beta1",
                "a",
                "{cronSpec: '0 3 * * *', image: backup:1}",
            )
        },
    );
    let v1 = get_json(
        &env,
        &["get", "crontabs.v1.stable.example.com", "a", "-n", "ct"],
    )
    .expect("CronTab a at v1");
    assert_eq!(v1["spec"]["schedule"], "0 3 * * *", "{v1}");
    assert_eq!(v1["spec"]["concurrencyPolicy"], "Allow", "{v1}");

    // A ConfigMap update (the kubelet's ..data swap) is served without a
    // restart: the default of v1beta1's missing concurrencyPolicy changes.
    let changed: Vec<(String, String)> = files
        .iter()
        .map(|(k, v)| {
            let v = if k == "crontab.yaml" {
                let new = v.replace(
                    "default: { hub: spec.concurrencyPolicy, value: Allow }",
                    "default: { hub: spec.concurrencyPolicy, value: Forbid }",
                );
                assert_ne!(&new, v, "the example's default moved: update this test");
                new
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    mount.update(&borrow(&changed));
    eventually("the update reloaded", WAIT, || {
        let text = metrics(metrics_port)?;
        text.contains("katalog_reloads_total 2")
            .then_some(())
            .ok_or(text)
    });
    eventually("CronTab b converted by the reloaded Katalog", WAIT, || {
        crontab(
            &env,
            "v1beta1",
            "b",
            "{cronSpec: '0 4 * * *', image: backup:1}",
        )?;
        let v1 = get_json(
            &env,
            &["get", "crontabs.v1.stable.example.com", "b", "-n", "ct"],
        )?;
        (v1["spec"]["concurrencyPolicy"] == "Forbid")
            .then_some(())
            .ok_or(v1.to_string())
    });

    // migrate-storage (an administrator's run) beside the engine: an old
    // version in storedVersions is pruned once every object is rewritten.
    ok(env.kubectl([
        "patch",
        "crd",
        CRD,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"storedVersions":["v1beta1","v1"]}}"#,
    ]));
    let out = std::process::Command::new(katalog_tests::katalog_bin())
        .args(["migrate-storage", "--crd", CRD, "--kubeconfig"])
        .arg(env.kubeconfig())
        .output()
        .expect("migrate-storage runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("{CRD}: 2 rewritten at v1, ")),
        "{stdout}"
    );
    let crd = get_json(&env, &["get", "crd", CRD]).expect("the CRD");
    assert_eq!(
        crd["status"]["storedVersions"],
        serde_json::json!(["v1"]),
        "{stdout}"
    );

    // Still the same process, and it stops cleanly.
    assert!(!serve.seen.iter().any(|l| l.contains("katalog stopped")));
    serve.signal("TERM");
    assert_eq!(serve.wait(WAIT), Some(0));
}

fn borrow(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Every `katalog_*` series the alerts, the dashboard and docs/operations.md
/// name is one the engine exports.
#[test]
fn monitoring_names_only_real_metrics() {
    // The names of metrics.rs's `METRICS` table, which registration reads
    // (a Family without samples is not rendered, so the source is the
    // list; `the_exported_metrics_are_the_metrics_table` in metrics.rs keeps
    // the registered metrics equal to the table).
    let source = std::fs::read_to_string(repo_path("crates/katalog-runtime/src/metrics.rs"))
        .expect("metrics.rs");
    let table = source
        .split("pub const METRICS: &[Def] = &[")
        .nth(1)
        .and_then(|rest| rest.split("\n];").next())
        .expect("the METRICS table in metrics.rs");
    let names: Vec<String> = table
        .split("name: \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(|n| format!("katalog_{n}"))
        .collect();
    assert!(names.len() > 10, "{names:?}");
    let known = |name: &str| {
        names.iter().any(|n| {
            name == *n
                || ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| name == format!("{n}{suffix}"))
        })
    };
    for file in [
        "deploy/monitoring/prometheusrule.yaml",
        "deploy/monitoring/grafana-dashboard.json",
        "docs/operations.md",
    ] {
        let text = std::fs::read_to_string(repo_path(file)).expect(file);
        let mut seen = 0;
        for (i, _) in text.match_indices("katalog_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            // Not a name: inside another word or a path, or `katalog_*`.
            let inside = text[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/');
            if inside || name.ends_with('_') {
                continue;
            }
            seen += 1;
            assert!(
                known(&name),
                "{file} names {name}, which the engine does not export ({names:?})"
            );
        }
        assert!(seen > 3, "{file}: no metric found");
    }
}
