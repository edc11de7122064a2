//! `katalog_runtime::cluster::housekeeper` against a real kube-apiserver and etcd
//! (katalog-testenv): it registers the served Katalog at start, restores
//! what is deleted or drifts (through its watches: the resync is 30 s), does
//! not loop on its own writes, and follows a Katalog reload. The apiserver
//! reaches the katalog server on 127.0.0.1 through `clientConfig.url` only.
//!
//! `cargo test -p katalog-tests --test housekeeper -- --nocapture` prints
//! the restore latencies.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use katalog_runtime::cluster;
use katalog_runtime::cluster::housekeeper::{self, HousekeeperHandle, Trigger};
use katalog_tests::*;
use kube::Api;

const NAME: &str = "katalog";
const VALIDATING: &str = "katalog-validating";
const MUTATING: &str = "katalog-mutating";
const CRD: &str = "crontabs.stable.example.com";

struct Clients {
    rt: tokio::runtime::Runtime,
    validating: Api<ValidatingWebhookConfiguration>,
    mutating: Api<MutatingWebhookConfiguration>,
    crds: Api<CustomResourceDefinition>,
}

impl Clients {
    fn new(kubeconfig: &Path) -> Clients {
        let (rt, client) = kube_client(kubeconfig);
        Clients {
            validating: Api::all(client.clone()),
            mutating: Api::all(client.clone()),
            crds: Api::all(client),
            rt,
        }
    }

    fn validating(&self) -> Option<ValidatingWebhookConfiguration> {
        self.rt
            .block_on(self.validating.get_opt(VALIDATING))
            .expect("GET the validating configuration")
    }

    fn mutating(&self) -> Option<MutatingWebhookConfiguration> {
        self.rt
            .block_on(self.mutating.get_opt(MUTATING))
            .expect("GET the mutating configuration")
    }

    fn crd(&self) -> CustomResourceDefinition {
        self.rt.block_on(self.crds.get(CRD)).expect("GET the CRD")
    }

    fn strategy(&self) -> String {
        self.crd()
            .spec
            .conversion
            .map(|c| c.strategy)
            .unwrap_or_default()
    }

    /// resourceVersions of the three objects the housekeeper owns.
    fn versions(&self) -> [Option<String>; 3] {
        [
            self.validating().and_then(|v| v.metadata.resource_version),
            self.mutating().and_then(|m| m.metadata.resource_version),
            self.crd().metadata.resource_version,
        ]
    }
}

fn ca_bundle_present(v: &ValidatingWebhookConfiguration) -> bool {
    v.webhooks
        .as_ref()
        .and_then(|w| w.first())
        .is_some_and(|w| w.client_config.ca_bundle.is_some())
}

/// Waits until no reconcile has run for `quiet`.
fn settle(hk: &HousekeeperHandle, quiet: Duration) {
    let started = Instant::now();
    let mut last = hk.status().reconciles;
    let mut since = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        let now = hk.status().reconciles;
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
    panic!("the housekeeper did not settle: {:?}", hk.status());
}

#[test]
fn housekeeper_restores_and_follows_the_katalog() {
    let t = "housekeeper";
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);

    let (katalog, server) = Katalog::crontab_with("housekeeper-katalog", CRONTAB_ADMISSION);
    let first = server.state.current().expect("the Katalog loaded");
    assert!(!first.ir.admission.mutations.is_empty());
    let url = format!("https://{}", server.addr);
    let reg = registration(NAME, &url);

    let kubeconfig = env.kubeconfig();
    let kube = Clients::new(&kubeconfig);

    // (a) Everything is registered at start.
    let started = Instant::now();
    let hk = housekeeper::spawn_with_kubeconfig(
        Some(kubeconfig.clone()),
        server.state.clone(),
        reg,
        Duration::from_secs(30),
    );
    let took = within("the first registration", || {
        kube.validating().is_some() && kube.mutating().is_some() && kube.strategy() == "Webhook"
    });
    eprintln!("[{t}] (a) registered at start in {}", secs(took));
    let status = hk.status();
    let first_outcome = status
        .last_change
        .clone()
        .expect("a reconcile that changed something");
    assert_eq!(first_outcome.trigger, Trigger::Start);
    assert!(first_outcome.result.is_ok(), "{first_outcome:?}");
    assert_eq!(status.errors, 0, "{status:?}");
    settle(&hk, Duration::from_millis(500));
    eprintln!(
        "[{t}] start: {} reconcile(s) in {}",
        hk.status().reconciles,
        secs(started.elapsed())
    );

    // (b) A deleted configuration comes back.
    let uid = kube.validating().and_then(|v| v.metadata.uid);
    ok(env.kubectl(["delete", "validatingwebhookconfiguration", VALIDATING]));
    let b = within("the deleted validating configuration", || {
        kube.validating()
            .is_some_and(|v| v.metadata.uid != uid && ca_bundle_present(&v))
    });
    eprintln!("[{t}] (b) deleted configuration restored in {}", secs(b));
    settle(&hk, Duration::from_millis(500));

    // (c) A stripped caBundle comes back.
    ok(env.kubectl([
        "patch",
        "validatingwebhookconfiguration",
        VALIDATING,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]"#,
    ]));
    let c = within("the stripped caBundle", || {
        kube.validating().is_some_and(|v| ca_bundle_present(&v))
    });
    eprintln!("[{t}] (c) stripped caBundle restored in {}", secs(c));
    settle(&hk, Duration::from_millis(500));

    // (d) A CRD whose conversion was turned off is pointed back at /convert.
    ok(env.kubectl([
        "patch",
        "crd",
        CRD,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"conversion":{"strategy":"None","webhook":null}}}"#,
    ]));
    let d = within("the CRD conversion", || kube.strategy() == "Webhook");
    eprintln!("[{t}] (d) CRD conversion restored in {}", secs(d));
    settle(&hk, Duration::from_millis(1000));

    // (e) No loop: with no external change, nothing is written.
    let before = hk.status();
    let versions = kube.versions();
    std::thread::sleep(Duration::from_secs(2));
    let after = hk.status();
    eprintln!(
        "[{t}] (e) over 2s without external change: {} reconcile(s), {} that changed something",
        after.reconciles - before.reconciles,
        after.changed - before.changed
    );
    assert_eq!(after.changed, before.changed, "{after:?}");
    assert!(after.reconciles - before.reconciles <= 1, "{after:?}");
    assert_eq!(kube.versions(), versions);
    assert_eq!(after.errors, 0, "{after:?}");
    // Its own writes were followed by reconciles that changed nothing.
    let last = after.last.expect("a last reconcile");
    assert!(!last.changed(), "{last:?}");

    // (f) A reload without the mutations: the mutating configuration goes.
    let without = CRONTAB_ADMISSION
        .split("    mutations:")
        .next()
        .expect("the validations");
    std::fs::write(katalog.path("admission.yaml"), without).expect("rewriting admission.yaml");
    let f = within("the reload without mutations", || kube.mutating().is_none());
    eprintln!(
        "[{t}] (f) mutating configuration deleted {} after the rewrite",
        secs(f)
    );
    let status = hk.status();
    let change = status.last_change.expect("the deletion");
    assert_eq!(change.trigger, Trigger::KatalogChanged, "{change:?}");
    assert_eq!(
        change
            .result
            .as_ref()
            .ok()
            .and_then(|r| r.action(cluster::Kind::MutatingWebhookConfiguration, MUTATING)),
        Some(cluster::Action::Deleted),
        "{change:?}"
    );
    assert!(kube.validating().is_some());
    assert_eq!(kube.strategy(), "Webhook");
    settle(&hk, Duration::from_millis(500));
    assert_eq!(hk.status().errors, 0, "{:?}", hk.status());

    let stopping = Instant::now();
    hk.stop();
    eprintln!("[{t}] stopped in {}", secs(stopping.elapsed()));
    drop(server);
    for (what, d) in [("delete", b), ("caBundle", c), ("CRD conversion", d)] {
        assert!(d < Duration::from_secs(2), "{what} restored in {}", secs(d));
    }
}

/// The caBundle of every webhook the housekeeper owns (validating, mutating,
/// CRD conversion), absent ones as empty.
fn registered_bundles(kube: &Clients) -> [Vec<u8>; 3] {
    let v = kube
        .validating()
        .and_then(|c| c.webhooks?.first()?.client_config.ca_bundle.clone());
    let m = kube
        .mutating()
        .and_then(|c| c.webhooks?.first()?.client_config.ca_bundle.clone());
    let c = kube
        .crd()
        .spec
        .conversion
        .and_then(|c| c.webhook?.client_config?.ca_bundle);
    [v, m, c].map(|b| b.map(|b| b.0).unwrap_or_default())
}

fn write_by_rename(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("writing the caBundle");
    std::fs::rename(&tmp, path).expect("renaming the caBundle");
}

/// `--ca-bundle FILE` (a mounted cert-manager `ca.crt`): when the file is
/// rewritten with a rotated CA, the housekeeper registers it everywhere; a
/// file that is not certificates keeps the previous bundle.
#[test]
fn a_rewritten_ca_bundle_file_is_registered_everywhere() {
    let t = "ca-bundle file";
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);
    let (_katalog, server) = Katalog::crontab_with("ca-file-katalog", CRONTAB_ADMISSION);
    let kube = Clients::new(&env.kubeconfig());
    let files = Scratch::new("ca-file");
    let path = files.path("ca.crt");
    let first = ca().ca_pem().to_string();
    write_by_rename(&path, &first);
    let (bundle, _watch) = katalog_runtime::serving::reload::watch_ca_bundle(
        &path,
        Duration::from_millis(100),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let hk = housekeeper::Housekeeper {
        ca_bundle: Some(bundle),
        ..housekeeper::Housekeeper::default()
    }
    .spawn_with_kubeconfig(
        Some(env.kubeconfig()),
        server.state.clone(),
        registration(NAME, &server.url()),
    );
    // The start pass has finished (not only written the bundle): a rotation
    // during it would be taken by that pass and recorded as its own.
    within("the first registration", || {
        registered_bundles(&kube) == [(); 3].map(|_| first.as_bytes().to_vec())
            && hk.status().last_change.is_some()
    });

    // cert-manager rotates: the new CA joins the bundle.
    let next = katalog_runtime::certs::tls::DevCa::generate().expect("a CA");
    let rotated = format!("{first}{}", next.ca_pem());
    write_by_rename(&path, &rotated);
    let took = within("the rotated caBundle", || {
        registered_bundles(&kube) == [(); 3].map(|_| rotated.as_bytes().to_vec())
    });
    eprintln!(
        "[{t}] rewritten caBundle registered everywhere in {}",
        secs(took)
    );
    let change = hk.status().last_change.expect("the change");
    assert_eq!(change.trigger, Trigger::CaBundleChanged, "{change:?}");

    // A broken file does not unregister the CA.
    write_by_rename(&path, "not a certificate\n");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        registered_bundles(&kube),
        [(); 3].map(|_| rotated.as_bytes().to_vec())
    );
    assert_eq!(hk.status().errors, 0, "{:?}", hk.status());
    hk.stop();
    drop(server);
    assert!(
        took < Duration::from_secs(2),
        "registered in {}",
        secs(took)
    );
}
