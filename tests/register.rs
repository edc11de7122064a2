//! `katalog_runtime::cluster` against a real kube-apiserver and etcd
//! (katalog-testenv): registration with kube-rs (server-side apply, pruning,
//! CRD conversion checks and patch), then a conversion and admission round
//! trip through the apiserver to prove the registration works, then
//! unregistration. The apiserver reaches the katalog server on 127.0.0.1
//! through `clientConfig.url` only.
//!
//! `cargo test -p katalog-tests --test register -- --nocapture` prints timings.

use std::path::Path;
use std::time::{Duration, Instant};

use katalog_lang::{Ir, Source, compile_sources};
use katalog_runtime::cluster::registration::{self, Registration};
use katalog_runtime::cluster::{self, Action, ClusterError, Kind, RegisterReport};
use katalog_tests::*;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const NAME: &str = "katalog-cluster";
const VALIDATING: &str = "katalog-cluster-validating";
const MUTATING: &str = "katalog-cluster-mutating";
const CRD: &str = "crontabs.stable.example.com";

const ADMISSION: &str = CRONTAB_ADMISSION;

/// The admission Katalog without its mutations.
fn validations_only() -> String {
    ADMISSION
        .split("    mutations:")
        .next()
        .expect("the validations")
        .to_string()
}

fn compile(sources: &[(&str, String)]) -> Ir {
    let sources: Vec<Source> = sources
        .iter()
        .map(|(name, text)| Source::new(*name, text.clone()))
        .collect();
    compile_sources(&sources).unwrap_or_else(|e| panic!("{}", e.render()))
}

fn crontab_text() -> String {
    std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).expect("katalogs/crontab.yaml")
}

/// A Katalog of CronTabs with another hub or other versions, no rules.
fn crontab_with(hub: &str, versions: &str) -> String {
    format!(
        r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-other
spec:
  resources:
    - group: stable.example.com
      kind: CronTab
      plural: crontabs
      hub: {hub}
      versions: {versions}
"#
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn show(report: &RegisterReport) -> String {
    report
        .changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn absent(env: &katalog_testenv::TestEnv, kind: &str, name: &str) -> bool {
    let out = env.kubectl(["get", kind, name, "-o", "name"]);
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
}

/// What `registration::manifests` builds for `kind`, for comparison.
fn expected(ir: &Ir, reg: &Registration, kind: &str) -> Value {
    registration::manifests(ir, reg)
        .into_iter()
        .find(|m| m["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the manifests"))
}

fn crontab(name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": "ct"},
        "spec": {"schedule": "*/5 * * * *", "image": image},
    })
}

#[test]
fn register_prune_refuse_convert_unregister() {
    let t = "cluster";
    let started = Instant::now();
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);

    let scratch = Scratch::new("cluster-katalog");
    std::fs::write(scratch.path("crontab.yaml"), crontab_text()).expect("writing crontab.yaml");
    // The CRD its `crd:` names, beside it (a file of CRDs is not a Katalog source).
    std::fs::copy(
        repo_path("katalogs/crontab.crd.yaml"),
        scratch.path("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    std::fs::write(scratch.path("admission.yaml"), ADMISSION).expect("writing admission.yaml");
    let katalog = Katalog::start(&scratch.path(""));
    let ir = &katalog.ir;
    let url = katalog.url();
    let reg = registration(NAME, &url);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let rt = runtime();
    let client = rt
        .block_on(cluster::client(Some(Path::new(&env.kubeconfig()))))
        .unwrap_or_else(|e| panic!("{e}"));
    let setup = started.elapsed();

    // First registration: everything is new.
    let step = Instant::now();
    let report = rt
        .block_on(cluster::register(client.clone(), ir, &reg))
        .unwrap_or_else(|e| panic!("{e}"));
    let first = step.elapsed();
    eprintln!("[{t}] first register: {}", show(&report));
    assert_eq!(
        report.action(Kind::ValidatingWebhookConfiguration, VALIDATING),
        Some(Action::Created)
    );
    assert_eq!(
        report.action(Kind::MutatingWebhookConfiguration, MUTATING),
        Some(Action::Created)
    );
    assert_eq!(
        report.action(Kind::CustomResourceDefinition, CRD),
        Some(Action::Updated)
    );
    assert!(report.changed());

    // The objects are what registration builds: webhooks, URLs, caBundle.
    // One webhook per group of rules, named after the group.
    let group_names = |endpoint| -> Vec<String> {
        katalog_lang::admission::webhooks::groups(ir, endpoint)
            .iter()
            .map(|g| format!("{}.katalog.dev", g.name()))
            .collect()
    };
    use katalog_lang::admission::eval::Endpoint;
    for (kind, name, hook_names) in [
        (
            "ValidatingWebhookConfiguration",
            VALIDATING,
            group_names(Endpoint::Validate),
        ),
        (
            "MutatingWebhookConfiguration",
            MUTATING,
            group_names(Endpoint::Mutate),
        ),
    ] {
        assert_eq!(hook_names.len(), 1, "{hook_names:?}");
        let got = get_json(
            &env,
            &["get", &kind.to_lowercase(), name, "--show-managed-fields"],
        );
        let want = expected(ir, &reg, kind);
        assert_eq!(
            got["metadata"]["labels"]["app.kubernetes.io/managed-by"], "katalog",
            "{got}"
        );
        let hooks = got["webhooks"].as_array().expect("webhooks");
        let names: Vec<&str> = hooks.iter().filter_map(|h| h["name"].as_str()).collect();
        assert_eq!(names, hook_names, "{got}");
        for (hook, want_hook) in hooks.iter().zip(want["webhooks"].as_array().unwrap()) {
            assert_eq!(hook["clientConfig"], want_hook["clientConfig"], "{hook}");
            assert!(hook["clientConfig"]["caBundle"].is_string(), "{hook}");
            let hook_url = hook["clientConfig"]["url"].as_str().unwrap();
            assert!(hook_url.starts_with(&format!("{url}/")), "{hook_url}");
            assert_eq!(hook["rules"], want_hook["rules"], "{hook}");
        }
        let managers: Vec<&str> = got["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["manager"].as_str())
            .collect();
        assert!(managers.contains(&"katalog"), "{managers:?}");
    }
    let crd = get_json(&env, &["get", "crd", CRD]);
    let conversion = &crd["spec"]["conversion"];
    assert_eq!(conversion["strategy"], "Webhook", "{conversion}");
    assert_eq!(
        conversion["webhook"]["clientConfig"]["url"],
        format!("{url}/convert")
    );
    assert_eq!(
        conversion["webhook"]["clientConfig"]["caBundle"],
        expected(ir, &reg, "CustomResourceDefinition")["spec"]["conversion"]["webhook"]["clientConfig"]
            ["caBundle"]
    );

    // Again: nothing changes.
    let step = Instant::now();
    let report = rt
        .block_on(cluster::register(client.clone(), ir, &reg))
        .unwrap_or_else(|e| panic!("{e}"));
    let again = step.elapsed();
    eprintln!("[{t}] second register: {}", show(&report));
    assert!(!report.changed(), "{report:?}");
    assert_eq!(report.changes.len(), 3, "{report:?}");

    // Without mutations, the mutating configuration goes.
    let no_mutations = compile(&[
        ("crontab.yaml", crontab_text()),
        ("admission.yaml", validations_only()),
    ]);
    assert!(no_mutations.admission.mutations.is_empty());
    let report = rt
        .block_on(cluster::register(client.clone(), &no_mutations, &reg))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("[{t}] register without mutations: {}", show(&report));
    assert_eq!(
        report.action(Kind::MutatingWebhookConfiguration, MUTATING),
        Some(Action::Deleted)
    );
    assert_eq!(
        report.action(Kind::ValidatingWebhookConfiguration, VALIDATING),
        Some(Action::Unchanged)
    );
    assert_eq!(
        report.action(Kind::CustomResourceDefinition, CRD),
        Some(Action::Unchanged)
    );
    assert!(absent(&env, "mutatingwebhookconfiguration", MUTATING));
    assert!(!absent(&env, "validatingwebhookconfiguration", VALIDATING));

    // A hub that is not the CRD's storage version is refused, before any write.
    let rv_before = get_json(&env, &["get", "crd", CRD])["metadata"]["resourceVersion"].clone();
    let other_hub = compile(&[
        ("other.yaml", crontab_with("v2", "[v1, v2]")),
        ("admission.yaml", ADMISSION.to_string()),
    ]);
    let err = rt
        .block_on(cluster::register(client.clone(), &other_hub, &reg))
        .expect_err("a hub other than the storage version is refused");
    let msg = err.to_string();
    eprintln!("[{t}] refused: {msg}");
    assert!(
        matches!(err, ClusterError::StorageVersion { .. }),
        "{err:?}"
    );
    assert!(msg.starts_with("failed to "), "{msg}");
    assert!(msg.contains(CRD), "{msg}");
    assert!(
        msg.contains("storage version is v1") && msg.contains("hub is v2"),
        "{msg}"
    );
    assert!(
        absent(&env, "mutatingwebhookconfiguration", MUTATING),
        "nothing is written when the CRD check fails"
    );
    // A version the CRD does not serve is refused too.
    let unserved = compile(&[("other.yaml", crontab_with("v1", "[v1, v3]"))]);
    let err = rt
        .block_on(cluster::register(client.clone(), &unserved, &reg))
        .expect_err("a version the CRD does not serve is refused");
    let msg = err.to_string();
    eprintln!("[{t}] refused: {msg}");
    assert!(matches!(err, ClusterError::NotServed { .. }), "{err:?}");
    assert!(msg.starts_with("failed to ") && msg.contains(CRD), "{msg}");
    assert!(msg.contains("does not serve v3"), "{msg}");
    assert_eq!(
        get_json(&env, &["get", "crd", CRD])["metadata"]["resourceVersion"],
        rv_before,
        "the CRD is untouched by refused registrations"
    );

    // Back to the whole Katalog, then prove it works through the apiserver.
    let report = rt
        .block_on(cluster::register(client.clone(), ir, &reg))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        report.action(Kind::MutatingWebhookConfiguration, MUTATING),
        Some(Action::Created),
        "{report:?}"
    );
    ok(env.kubectl(["create", "namespace", "ct"]));
    let step = Instant::now();
    // Validation (the apiserver sends v1, the rule's version): a bad image is denied.
    let denied = eventually("the validating webhook denies", WAIT, || {
        let out = create(&env, &crontab("bad", "docker.io/cron:1"));
        if out.status.success() {
            ok(env.kubectl([
                "delete",
                "crontabs.v1.stable.example.com",
                "bad",
                "-n",
                "ct",
            ]));
            Err("created".to_string())
        } else {
            Ok(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    assert!(
        denied.contains("crontab images come from registry.example.com"),
        "{denied}"
    );
    // Mutation: the timeout is defaulted; conversion: read at v2.
    eventually("the mutating webhook defaults the timeout", WAIT, || {
        ok(create(
            &env,
            &crontab("good", "registry.example.com/cron:1"),
        ));
        let o = get_json(
            &env,
            &["get", "crontabs.v1.stable.example.com", "good", "-n", "ct"],
        );
        if o["spec"]["timeoutSeconds"] == 30 {
            Ok(())
        } else {
            ok(env.kubectl([
                "delete",
                "crontabs.v1.stable.example.com",
                "good",
                "-n",
                "ct",
            ]));
            Err(format!("not mutated: {o}"))
        }
    });
    let at_v2 = eventually("the v1 object reads converted at v2", WAIT, || {
        let o = get_json(
            &env,
            &["get", "crontabs.v2.stable.example.com", "good", "-n", "ct"],
        );
        if o["spec"].get("container").is_some() {
            Ok(o)
        } else {
            Err(format!("not converted yet: {o}"))
        }
    });
    assert_eq!(at_v2["apiVersion"], "stable.example.com/v2");
    assert_eq!(
        at_v2["spec"]["container"],
        json!({"image": "registry.example.com/cron:1"})
    );
    assert_eq!(at_v2["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(at_v2["spec"]["timeoutSeconds"], 30);
    assert!(at_v2["spec"].get("image").is_none(), "{at_v2}");
    let round_trip = step.elapsed();

    // Unregister: both configurations go; a second time finds nothing.
    let report = rt
        .block_on(cluster::unregister(client.clone(), &reg))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("[{t}] unregister: {}", show(&report));
    assert_eq!(
        report.action(Kind::ValidatingWebhookConfiguration, VALIDATING),
        Some(Action::Deleted)
    );
    assert_eq!(
        report.action(Kind::MutatingWebhookConfiguration, MUTATING),
        Some(Action::Deleted)
    );
    assert!(absent(&env, "validatingwebhookconfiguration", VALIDATING));
    assert!(absent(&env, "mutatingwebhookconfiguration", MUTATING));
    let report = rt
        .block_on(cluster::unregister(client, &reg))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!report.changed(), "{report:?}");

    eprintln!(
        "[{t}] setup {}; first register {}; second register {}; admission and conversion round trip {}; whole test {}; katalog stats {}",
        secs(setup),
        secs(first),
        secs(again),
        secs(round_trip),
        secs(started.elapsed()),
        katalog.stats()["stats"]
    );
}
