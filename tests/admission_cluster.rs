//! Admission rules that hold in a real cluster (a real kube-apiserver and
//! etcd from katalog-testenv; the apiserver reaches the katalog server on
//! 127.0.0.1 through `clientConfig.url` only):
//!
//! * a rule written against one version of a declared resource holds for
//!   requests at every served version, through create, replace, JSON and
//!   merge patches, server-side apply and delete, and a hub mutation is
//!   applied whatever version the object is written at;
//! * a rule's namespace selector is kept next to a rule without one;
//! * with the engine down, pods in kube-system can still be created.
//!
//! `cargo test -p katalog-tests --test admission_cluster -- --nocapture`
//! prints timings.

use std::time::{Duration, Instant};

use katalog_tests::*;
use serde_json::{Value, json};

const CRD: &str = "crontabs.stable.example.com";

/// Rules written against the hub (v1), beside katalogs/crontab.yaml
/// (v1beta1 renames `schedule` to `cronSpec` and keeps `timeoutSeconds` in
/// the stash annotation; v2 wraps `image` in `container`).
const ADMISSION: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-every-version
spec:
  admission:
    validations:
      - name: registry
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { prefix: registry.example.com/ }
        message: crontab images come from registry.example.com
      - name: timeout-cap
        resources: [stable.example.com/*/crontabs]
        path: spec.timeoutSeconds
        check: { maximum: 3600 }
      - name: restricted-namespace
        resources: [stable.example.com/v1/crontabs]
        match:
          namespaces: { include: [restricted] }
        check: { cel: "false" }
        message: no CronTabs in namespace restricted
      - name: keep
        resources: [stable.example.com/v1/crontabs]
        match: { operations: [DELETE] }
        path: metadata.labels.keep
        check: { notIn: ["true"] }
        message: remove the keep label first
      - name: prod-forbid
        resources: [stable.example.com/v1/crontabs]
        match:
          namespaces:
            selector: { matchLabels: { env: prod } }
        path: spec.concurrencyPolicy
        check: { in: [Forbid] }
        message: prod CronTabs use concurrencyPolicy Forbid
    mutations:
      - name: default-timeout
        resources: [stable.example.com/v1/crontabs]
        default: { path: spec.timeoutSeconds, value: 30 }
"#;

/// A CronTab at `version` with this image (the shape of each version).
fn crontab(version: &str, ns: &str, name: &str, image: &str) -> Value {
    let spec = match version {
        "v1beta1" => json!({"cronSpec": "* * * * */5", "image": image}),
        "v1" => json!({"schedule": "* * * * */5", "image": image}),
        "v2" => json!({"schedule": "* * * * */5", "container": {"image": image}}),
        other => panic!("no CronTab shape for {other}"),
    };
    json!({
        "apiVersion": format!("stable.example.com/{version}"),
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// The JSON pointer of the image at `version`.
fn image_pointer(version: &str) -> &'static str {
    if version == "v2" {
        "/spec/container/image"
    } else {
        "/spec/image"
    }
}

/// `crontabs.<version>.stable.example.com`: kubectl's way to pick the version.
fn at(version: &str) -> String {
    format!("crontabs.{version}.stable.example.com")
}

/// `kubectl patch` of a CronTab in `dev` at `version`, with a patch of this type.
fn patch(
    env: &katalog_testenv::TestEnv,
    version: &str,
    name: &str,
    kind: &str,
    patch: &Value,
) -> std::process::Output {
    env.kubectl([
        "patch",
        &at(version),
        name,
        "-n",
        "dev",
        &format!("--type={kind}"),
        "-p",
        &patch.to_string(),
    ])
}

#[track_caller]
fn denied_by(stderr: &str, rule: &str) {
    assert!(
        stderr.contains("denied the request") && stderr.contains(&format!("[{rule}]")),
        "expected a denial by [{rule}]: {stderr}"
    );
}

#[test]
fn rules_hold_at_every_served_version_and_keep_their_namespace_selector() {
    let t = "versions";
    let started = Instant::now();
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);
    let (_dir, katalog) = Katalog::crontab_with("versions", ADMISSION);
    let reg = registration("katalog-versions", &katalog.url());
    register_conversion(&env, &katalog.ir, &reg);
    register_admission(&env, &katalog.ir, &reg);
    for ns in ["dev", "prod", "restricted"] {
        ok(env.kubectl(["create", "namespace", ns]));
    }
    ok(env.kubectl(["label", "namespace", "prod", "env=prod"]));
    // The webhooks are live once a bad CronTab is refused.
    eventually("the webhooks are called", Duration::from_secs(20), || {
        let out = env.kubectl_stdin(
            ["create", "--dry-run=server", "-f", "-"],
            crontab("v1", "dev", "probe", "docker.io/x").to_string(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && stderr.contains("[registry]"))
            .then_some(())
            .ok_or(stderr)
    });
    let setup = started.elapsed();
    let phase = Instant::now();

    for version in ["v1beta1", "v1", "v2"] {
        let name = format!("nightly-{version}");
        let good = crontab(version, "dev", &name, "registry.example.com/backup:1");
        let bad = crontab(version, "dev", &name, "docker.io/backup:1");

        // CREATE at this version: the hub rule sees the converted object.
        denied_by(&fails(create(&env, &bad)), "registry");
        ok(create(&env, &good));
        // The hub mutation was applied whatever the version written.
        let hub = get_json(&env, &["get", &at("v1"), &name, "-n", "dev"]);
        assert_eq!(hub["spec"]["timeoutSeconds"], 30, "{version}: {hub}");
        assert_eq!(
            hub["spec"]["image"], "registry.example.com/backup:1",
            "{version}: {hub}"
        );

        // UPDATE (replace) at this version.
        let mut replaced = get_json(&env, &["get", &at(version), &name, "-n", "dev"]);
        *replaced
            .pointer_mut(image_pointer(version))
            .expect("the image") = json!("docker.io/backup:2");
        denied_by(
            &fails(env.kubectl_stdin(["replace", "-f", "-"], replaced.to_string())),
            "registry",
        );
        // JSON patch and merge patch at this version.
        let json_patch = json!([{"op": "replace", "path": image_pointer(version), "value": "docker.io/backup:3"}]);
        denied_by(
            &fails(patch(&env, version, &name, "json", &json_patch)),
            "registry",
        );
        let merge = if version == "v2" {
            json!({"spec": {"container": {"image": "docker.io/backup:4"}}})
        } else {
            json!({"spec": {"image": "docker.io/backup:4"}})
        };
        denied_by(
            &fails(patch(&env, version, &name, "merge", &merge)),
            "registry",
        );
        // Server-side apply at this version.
        denied_by(
            &fails(env.kubectl_stdin(
                [
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "--field-manager=e2e",
                    "-f",
                    "-",
                ],
                bad.to_string(),
            )),
            "registry",
        );
        // A hub-only field above the cap: v1beta1 carries it in the stash.
        let mut over = crontab(
            version,
            "dev",
            &format!("over-{version}"),
            "registry.example.com/a",
        );
        if version == "v1beta1" {
            over["metadata"]["annotations"] =
                json!({"katalog.dev/stash": "{\"v1\":{\"spec.timeoutSeconds\":99999}}"});
        } else {
            over["spec"]["timeoutSeconds"] = json!(99999);
        }
        denied_by(&fails(create(&env, &over)), "timeout-cap");
        // A namespace the hub rule forbids, at this version.
        let restricted = crontab(version, "restricted", &name, "registry.example.com/a");
        denied_by(&fails(create(&env, &restricted)), "restricted-namespace");

        // DELETE at this version of an object the hub rule keeps.
        ok(env.kubectl(["label", &at(version), &name, "-n", "dev", "keep=true"]));
        denied_by(
            &fails(env.kubectl(["delete", &at(version), &name, "-n", "dev"])),
            "keep",
        );
        ok(env.kubectl(["label", &at(version), &name, "-n", "dev", "keep-"]));
        ok(env.kubectl(["delete", &at(version), &name, "-n", "dev"]));
    }
    let versions_took = phase.elapsed();
    let phase = Instant::now();

    // A rule's namespace selector stays with it, beside rules without one.
    let mut allow = crontab("v1", "dev", "policy", "registry.example.com/a");
    allow["spec"]["concurrencyPolicy"] = json!("Allow");
    ok(create(&env, &allow));
    allow["metadata"]["namespace"] = json!("prod");
    denied_by(&fails(create(&env, &allow)), "prod-forbid");
    // At v2 the policy is spelled out; the hub rule still holds in prod.
    let mut v2 = crontab("v2", "prod", "policy-v2", "registry.example.com/a");
    v2["spec"]["concurrencyPolicy"] = json!("AllowConcurrent");
    denied_by(&fails(create(&env, &v2)), "prod-forbid");
    v2["spec"]["concurrencyPolicy"] = json!("ForbidConcurrent");
    ok(create(&env, &v2));
    let selectors_took = phase.elapsed();
    eprintln!(
        "[{t}] setup {}, 3 versions x (create, replace, json patch, merge patch, apply, stash, namespace, delete) {}, selectors {}",
        secs(setup),
        secs(versions_took),
        secs(selectors_took)
    );
}

/// A Pod in `ns` (with its ServiceAccount, which the ServiceAccount
/// admission plugin wants: no controller-manager creates it here).
fn pod(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "registry.example.com/app:1"}],
        },
    })
}

#[test]
fn pod_rules_hold_for_controllers_and_with_the_engine_down_pods_in_kube_system_can_still_be_created()
 {
    let t = "lockout";
    let env = start_env(t);
    let dir = Scratch::new("lockout");
    std::fs::write(
        dir.path("pods.yaml"),
        r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: { name: pods }
spec:
  admission:
    validations:
      - name: approved
        resources: [v1/pods]
        path: metadata.labels.approved
        check: { exists: true }
"#,
    )
    .expect("writing the Katalog");
    let katalog = Katalog::start(&dir.path("pods.yaml"));
    let reg = registration("katalog-lockout", &katalog.url());
    register_admission(&env, &katalog.ir, &reg);
    for ns in ["kube-system", "default"] {
        // The namespace may have it already.
        let _ = env.kubectl(["create", "serviceaccount", "default", "-n", ns]);
    }
    eventually("the webhook is called", Duration::from_secs(20), || {
        let out = env.kubectl_stdin(
            ["create", "--dry-run=server", "-f", "-"],
            pod("default", "probe").to_string(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && stderr.contains("[approved]"))
            .then_some(())
            .ok_or(stderr)
    });
    // Up: the rule applies outside kube-system only.
    ok(create(&env, &pod("kube-system", "up")));
    denied_by(&fails(create(&env, &pod("default", "up"))), "approved");
    // The Pod rule also holds for the pod template of a Deployment and a
    // CronJob (autogen): the generated webhook registers them too.
    let template = |labels: Value, restart: &str| {
        json!({
            "metadata": {"labels": labels},
            "spec": {
                "restartPolicy": restart,
                "containers": [{"name": "app", "image": "registry.example.com/app:1"}],
            },
        })
    };
    let deployment = |name: &str, labels: Value| {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": template(labels, "Always"),
            },
        })
    };
    let stderr = fails(create(&env, &deployment("web", json!({"app": "web"}))));
    denied_by(&stderr, "approved");
    assert!(
        stderr.contains("spec.template.metadata.labels.approved"),
        "the message names the real path: {stderr}"
    );
    ok(create(
        &env,
        &deployment("web", json!({"app": "web", "approved": "yes"})),
    ));
    let cronjob = json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": template(json!({"app": "nightly"}), "Never")}},
        },
    });
    denied_by(&fails(create(&env, &cronjob)), "approved");

    // Down: failurePolicy Fail refuses everywhere the webhook applies, but
    // kube-system is left out of it, so the cluster can recover.
    drop(katalog);
    let started = Instant::now();
    ok(create(&env, &pod("kube-system", "down")));
    let stderr = fails(create(&env, &pod("default", "down")));
    assert!(
        stderr.contains("failed calling webhook"),
        "expected the webhook call to fail: {stderr}"
    );
    eprintln!(
        "[{t}] with the engine down: kube-system pod created, default pod refused, in {}",
        secs(started.elapsed())
    );
}
