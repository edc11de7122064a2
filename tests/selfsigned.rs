//! `--self-signed-secret` against a real kube-apiserver and etcd
//! (katalog-testenv): the CA and serving certificate are generated into a
//! Secret, reused across restarts, restored when the Secret is deleted or
//! damaged, and rotated before they expire while the apiserver keeps calling
//! the webhooks: the server reloads the certificate live and the housekeeper
//! registers the new caBundle everywhere. The apiserver reaches the server on
//! 127.0.0.1 through `clientConfig.url` only.
//!
//! `cargo test -p katalog-tests --test selfsigned -- --nocapture` prints
//! the restore latencies and the rotation timeline.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use katalog_runtime::certs::selfsigned::{
    Action, KeeperHandle, Material, Plan, Policy, SecretRef, SelfSigned, ServingFiles, plan,
};
use katalog_runtime::certs::tls;
use katalog_runtime::cluster::housekeeper::{Housekeeper, HousekeeperHandle};
use katalog_runtime::cluster::leader::LeaderElection;
use katalog_runtime::cluster::registration::{Registration, SharedCaBundle, Target};
use katalog_tests::*;
use kube::Api;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;

const NAMESPACE: &str = "katalog-system";
const CRD: &str = "crontabs.stable.example.com";

/// The kube-rs side of the test: reads of the Secret and of everything
/// that carries a caBundle.
struct Clients {
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    secrets: Api<Secret>,
}

impl Clients {
    fn new(kubeconfig: &Path) -> Clients {
        let (rt, client) = kube_client(kubeconfig);
        Clients {
            secrets: Api::namespaced(client.clone(), NAMESPACE),
            client,
            rt,
        }
    }

    fn secret(&self, name: &str) -> Option<Secret> {
        self.rt
            .block_on(self.secrets.get_opt(name))
            .expect("GET the Secret")
    }

    fn material(&self, name: &str) -> Option<Material> {
        self.secret(name)
            .and_then(|s| Material::from_secret(&s).ok())
    }

    /// The caBundles of the validating and mutating webhooks and of the CRD
    /// conversion (absent ones as empty).
    fn bundles(&self, reg: &str) -> [Vec<u8>; 3] {
        let vwc: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let mwc: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let v = self
            .rt
            .block_on(vwc.get_opt(&format!("{reg}-validating")))
            .expect("GET the validating configuration")
            .and_then(|c| c.webhooks?.first()?.client_config.ca_bundle.clone());
        let m = self
            .rt
            .block_on(mwc.get_opt(&format!("{reg}-mutating")))
            .expect("GET the mutating configuration")
            .and_then(|c| c.webhooks?.first()?.client_config.ca_bundle.clone());
        let c = self
            .rt
            .block_on(crds.get(CRD))
            .expect("GET the CRD")
            .spec
            .conversion
            .and_then(|c| c.webhook?.client_config?.ca_bundle);
        [v, m, c].map(|b| b.map(|b| b.0).unwrap_or_default())
    }
}

/// The leaf certificate the server presents to a client that trusts only
/// `bundle` (the handshake fails when the bundle does not trust it).
fn served_certificate(addr: SocketAddr, bundle: &[u8]) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let mut tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok();
    tcp.set_write_timeout(Some(Duration::from_secs(5))).ok();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("handshake: {e}"))?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response);
    if !response.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "GET /healthz: {}",
            String::from_utf8_lossy(&response)
        ));
    }
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| "no peer certificate".into())
}

fn pem_der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("a certificate")
        .to_vec()
}

/// A server, its certificate keeper and its housekeeper, all following
/// one Secret, as `katalog serve --register --self-signed-secret` runs them.
struct Engine {
    housekeeper: Option<HousekeeperHandle>,
    keeper: Option<KeeperHandle>,
    server: Option<Katalog>,
    ca_bundle: SharedCaBundle,
    initial: Action,
}

impl Engine {
    fn start(env: &katalog_testenv::TestEnv, katalog: &Path, selfsigned: &SelfSigned) -> Engine {
        Engine::start_as(
            &env.kubeconfig(),
            katalog,
            selfsigned,
            &selfsigned.secret.name,
            None,
        )
    }

    /// With the identity of `kubeconfig`, registered as `name`, optionally
    /// electing a leader.
    fn start_as(
        kubeconfig: &Path,
        katalog: &Path,
        selfsigned: &SelfSigned,
        name: &str,
        leader_election: Option<LeaderElection>,
    ) -> Engine {
        let kubeconfig = kubeconfig.to_path_buf();
        let scratch = Scratch::new("selfsigned");
        let prepared = selfsigned
            .prepare(
                Some(&kubeconfig),
                ServingFiles::create(scratch.path("certs")).expect("a private directory"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let initial = prepared.applied.action;
        let ca_bundle = prepared.ca_bundle.clone();
        let pair = prepared.files.pair();
        let server = Katalog::start_with(katalog, &pair, &pair, scratch);
        let keeper = prepared.keep(
            selfsigned.clone(),
            Some(kubeconfig.clone()),
            server.state.clone(),
        );
        let reg = Registration {
            name: name.into(),
            target: Target::Url(server.url()),
            ca_bundle: ca_bundle.load().as_ref().clone(),
        };
        let housekeeper = Housekeeper {
            ca_bundle: Some(ca_bundle.clone()),
            leader_election,
            ..Housekeeper::default()
        }
        .spawn_with_kubeconfig(Some(kubeconfig), server.state.clone(), reg);
        Engine {
            housekeeper: Some(housekeeper),
            keeper: Some(keeper),
            server: Some(server),
            ca_bundle,
            initial,
        }
    }

    fn keeper(&self) -> &KeeperHandle {
        self.keeper.as_ref().expect("a keeper")
    }

    fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("a server").addr
    }

    fn stop(mut self) {
        if let Some(h) = self.housekeeper.take() {
            h.stop();
        }
        if let Some(k) = self.keeper.take() {
            k.stop();
        }
        self.server.take();
    }
}

/// A usable certificate other than the one in the Secret.
fn new_material(selfsigned: &SelfSigned) -> Material {
    match plan(
        Err("replaced by hand"),
        "by-hand",
        &selfsigned.names,
        &selfsigned.policy,
        std::time::SystemTime::now(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
    {
        Plan::Write { material, .. } => material,
        Plan::Keep => panic!("a plan for a missing Secret writes"),
    }
}

/// Writes `material` into the Secret, as a person or another replica would.
fn replace_material(kube: &Clients, name: &str, material: &Material) {
    let mut secret = kube.secret(name).expect("the Secret");
    secret.metadata.managed_fields = None;
    secret.data = Some(
        [
            ("ca.crt", &material.ca_bundle),
            ("ca.key", &material.ca_key),
            ("tls.crt", &material.cert),
            ("tls.key", &material.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect(),
    );
    kube.rt
        .block_on(kube.secrets.replace(name, &Default::default(), &secret))
        .expect("replacing the Secret");
}

/// A CronTab created at v1beta1 (not the storage version): the apiserver
/// calls /mutate, /validate and /convert, each over TLS to the server.
fn create_crontab(env: &katalog_testenv::TestEnv, ns: &str, name: &str) -> Result<(), String> {
    let object = json!({
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"cronSpec": "*/5 * * * *", "image": "registry.example.com/backup:1"},
    });
    let out = create(env, &object);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let got = get_json(
        env,
        &["get", "crontabs.v2.stable.example.com", name, "-n", ns],
    );
    if got["spec"]["container"]["image"] != "registry.example.com/backup:1"
        || got["spec"]["timeoutSeconds"] != 30
    {
        return Err(format!("read back at v2: {got}"));
    }
    Ok(())
}

fn setup(t: &str) -> (katalog_testenv::TestEnv, Scratch) {
    tls::install_crypto_provider();
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);
    ok(env.kubectl(["create", "namespace", NAMESPACE]));
    ok(env.kubectl(["create", "namespace", "ct"]));
    let dir = Scratch::new(t);
    let crontab =
        std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).expect("crontab.yaml");
    std::fs::write(dir.path("crontab.yaml"), crontab).expect("writing crontab.yaml");
    // The CRD its `crd:` names, beside it (a file of CRDs is not a Katalog source).
    std::fs::copy(
        repo_path("katalogs/crontab.crd.yaml"),
        dir.path("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    std::fs::write(dir.path("admission.yaml"), CRONTAB_ADMISSION).expect("writing admission.yaml");
    (env, dir)
}

#[test]
fn the_secret_is_generated_reused_and_restored() {
    let t = "self-signed secret";
    let (env, katalog) = setup(t);
    let kube = Clients::new(&env.kubeconfig());
    let name = "katalog-certs";
    let mut selfsigned = SelfSigned::new(
        SecretRef {
            namespace: NAMESPACE.into(),
            name: name.into(),
        },
        &["katalog.katalog-system.svc".into()],
    );
    selfsigned.check_interval = Duration::from_secs(30);

    // A Secret in a namespace that does not exist: a clear error at once.
    let nowhere = SelfSigned::new(
        SecretRef {
            namespace: "no-such-namespace".into(),
            name: name.into(),
        },
        &[],
    );
    let err = kube
        .rt
        .block_on(nowhere.ensure(&kube.client, None))
        .expect_err("no namespace, no Secret")
        .to_string();
    assert!(
        err.starts_with("failed to write Secret no-such-namespace/katalog-certs: ")
            && err.contains("not found"),
        "{err}"
    );

    // Another Secret of that name, not katalog's: refused, left as it is.
    ok(env.kubectl([
        "create",
        "secret",
        "generic",
        "app-credentials",
        "-n",
        NAMESPACE,
        "--from-literal=password=hunter2",
    ]));
    let foreign = SelfSigned::new(
        SecretRef {
            namespace: NAMESPACE.into(),
            name: "app-credentials".into(),
        },
        &[],
    );
    let before = kube.secret("app-credentials").expect("the Secret");
    let err = kube
        .rt
        .block_on(foreign.ensure(&kube.client, None))
        .expect_err("not katalog's Secret")
        .to_string();
    assert_eq!(
        err,
        "failed to use Secret katalog-system/app-credentials: it exists, is not labelled app.kubernetes.io/managed-by=katalog, and it has no ca.crt; katalog does not overwrite it (name another Secret, or delete this one)"
    );
    let after = kube.secret("app-credentials").expect("the Secret");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );

    // (a) Generated into a new Secret, served, and registered.
    let engine = Engine::start(&env, &katalog.path(""), &selfsigned);
    assert_eq!(engine.initial, Action::Created);
    let secret = kube.secret(name).expect("the Secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let keys: BTreeSet<&str> = secret
        .data
        .as_ref()
        .map(|d| d.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        BTreeSet::from(["ca.crt", "ca.key", "tls.crt", "tls.key"])
    );
    assert_eq!(
        secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by")),
        Some(&"katalog".to_string())
    );
    let first = kube.material(name).expect("usable material");
    assert_eq!(first.ca_count(), 1);
    assert_eq!(*engine.keeper().current(), first);
    assert_eq!(**engine.ca_bundle.load(), first.ca_bundle.as_bytes());
    let registered = within("the caBundle registered everywhere", || {
        kube.bundles(name) == [(); 3].map(|_| first.ca_bundle.as_bytes().to_vec())
    });
    eprintln!("[{t}] (a) generated and registered in {}", secs(registered));
    assert_eq!(
        served_certificate(engine.addr(), first.ca_bundle.as_bytes()),
        Ok(pem_der(&first.cert))
    );
    eventually("the apiserver calls the webhooks", RESTORE, || {
        create_crontab(&env, "ct", "a")
    });

    // (b) A replica starting now reuses the Secret: nothing is written.
    let version = secret.metadata.resource_version.clone();
    let applied = kube
        .rt
        .block_on(selfsigned.ensure(&kube.client, None))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(applied.action, Action::Unchanged);
    assert_eq!(applied.material, first);
    assert_eq!(
        kube.secret(name).and_then(|s| s.metadata.resource_version),
        version
    );

    // (c) A deleted Secret comes back with the certificate being served.
    let uid = kube.secret(name).and_then(|s| s.metadata.uid);
    ok(env.kubectl(["delete", "secret", name, "-n", NAMESPACE]));
    let c = within("the deleted Secret", || {
        kube.secret(name).is_some_and(|s| s.metadata.uid != uid)
    });
    eprintln!("[{t}] (c) deleted Secret restored in {}", secs(c));
    assert_eq!(kube.material(name), Some(first.clone()));
    // The keeper records a check after its write is visible.
    within("the keeper's record of the restore", || {
        engine.keeper().status().writes == 1
    });
    let status = engine.keeper().status();
    assert_eq!(status.changes, 0, "{status:?}");
    assert_eq!(status.writes, 1, "{status:?}");
    let (action, reasons) = status.last_change.expect("the restore");
    assert_eq!(action, Action::Created);
    assert_eq!(
        reasons,
        ["restored what is served: the Secret does not exist"]
    );

    // (d) A damaged Secret is restored too.
    ok(env.kubectl([
        "patch",
        "secret",
        name,
        "-n",
        NAMESPACE,
        "--type",
        "merge",
        "-p",
        r#"{"data":{"tls.key":"anVuaw==","ca.crt":"anVuaw==","team-note":"a2VlcA=="}}"#,
    ]));
    let d = within("the damaged Secret", || {
        kube.material(name).as_ref() == Some(&first)
    });
    eprintln!("[{t}] (d) damaged Secret restored in {}", secs(d));
    // A key someone else added is kept by the repair.
    assert_eq!(
        kube.secret(name)
            .and_then(|s| s.data?.get("team-note").map(|v| v.0.clone())),
        Some(b"keep".to_vec())
    );
    within("the keeper's record of the repair", || {
        engine.keeper().status().writes == 2
    });
    let status = engine.keeper().status();
    assert_eq!(
        (status.changes, status.writes, status.errors),
        (0, 2, 0),
        "{status:?}"
    );
    assert_eq!(
        status.last_change.map(|(_, r)| r),
        Some(vec![
            "restored what is served: the Secret's own would need a new CA and serving certificate: ca.crt holds no certificate"
                .to_string()
        ])
    );
    assert_eq!(
        served_certificate(engine.addr(), first.ca_bundle.as_bytes()),
        Ok(pem_der(&first.cert))
    );
    create_crontab(&env, "ct", "b").unwrap_or_else(|e| panic!("{e}"));

    // (e) A restart serves the same certificate and registers the same CA.
    engine.stop();
    let engine = Engine::start(&env, &katalog.path(""), &selfsigned);
    assert_eq!(engine.initial, Action::Unchanged);
    assert_eq!(*engine.keeper().current(), first);
    within("the restarted engine registered", || {
        kube.bundles(name) == [(); 3].map(|_| first.ca_bundle.as_bytes().to_vec())
    });
    assert_eq!(
        served_certificate(engine.addr(), first.ca_bundle.as_bytes()),
        Ok(pem_der(&first.cert))
    );
    eventually("the apiserver calls the restarted server", RESTORE, || {
        create_crontab(&env, "ct", "c")
    });

    // (f) Another usable certificate written into the Secret (by another
    // replica, or by hand) is adopted: served, and its CA registered.
    let other = new_material(&selfsigned);
    replace_material(&kube, name, &other);
    let f = within("the replaced certificate served and registered", || {
        served_certificate(engine.addr(), other.ca_bundle.as_bytes()) == Ok(pem_der(&other.cert))
            && kube.bundles(name) == [(); 3].map(|_| other.ca_bundle.as_bytes().to_vec())
    });
    eprintln!(
        "[{t}] (f) a replaced Secret served and registered in {}",
        secs(f)
    );
    within("the keeper's record of the adoption", || {
        engine.keeper().status().last_change.map(|(a, _)| a) == Some(Action::Adopted)
    });
    assert_eq!(engine.keeper().status().changes, 1);
    assert_eq!(*engine.keeper().current(), other);
    assert_eq!(kube.material(name), Some(other.clone()));
    eventually(
        "the apiserver trusts the adopted certificate",
        RESTORE,
        || create_crontab(&env, "ct", "d"),
    );

    // (g) A change that cannot be served (say, the disk is full) is handed
    // over again at the next check, and only then counts as served.
    let calls = Arc::new(std::sync::Mutex::new(Vec::<Material>::new()));
    let mut quick = selfsigned.clone();
    quick.check_interval = Duration::from_millis(200);
    let flaky = quick.spawn(Some(env.kubeconfig()), other.clone(), {
        let calls = calls.clone();
        move |m: &Material| {
            let mut calls = calls.lock().expect("the calls");
            calls.push(m.clone());
            if calls.len() == 1 {
                Err("no space left on device".to_string())
            } else {
                Ok(())
            }
        }
    });
    let third = new_material(&selfsigned);
    replace_material(&kube, name, &third);
    within("the change handed over again", || {
        calls.lock().map(|c| c.len()).unwrap_or(0) >= 2
    });
    within("the change served", || *flaky.current() == third);
    let status = flaky.status();
    assert_eq!((status.errors, status.changes), (1, 1), "{status:?}");
    assert_eq!(
        status.last_error.as_deref(),
        Some("no space left on device")
    );
    assert!(calls.lock().expect("the calls").iter().all(|m| *m == third));
    flaky.stop();
    engine.stop();
    for (what, d) in [("deleted", c), ("damaged", d), ("replaced", f)] {
        assert!(
            d < Duration::from_secs(2),
            "{what} Secret restored in {}",
            secs(d)
        );
    }
}

#[test]
fn certificates_rotate_while_the_apiserver_calls() {
    let t = "rotation";
    let (env, katalog) = setup(t);
    let kube = Clients::new(&env.kubeconfig());
    let name = "katalog-rotating";
    let mut selfsigned = SelfSigned::new(
        SecretRef {
            namespace: NAMESPACE.into(),
            name: name.into(),
        },
        &[],
    );
    // Serving certificates live 8 s and are renewed 4 s before expiry; the
    // CA lives 30 s and gets a successor 12 s before its expiry: a new
    // serving certificate every 4 s, a second CA at 18 s, the first dropped
    // at 30 s (and the second's successor not before 36 s).
    selfsigned.policy = Policy {
        cert_validity: Duration::from_secs(8),
        cert_rotate_before: Duration::from_secs(4),
        ca_validity: Duration::from_secs(30),
        ca_rotate_before: Duration::from_secs(12),
        propagation: Duration::from_secs(3),
    };
    selfsigned.check_interval = Duration::from_millis(250);
    let engine = Engine::start(&env, &katalog.path(""), &selfsigned);
    let started = Instant::now();
    let first = kube.material(name).expect("the Secret");
    within("the first caBundle registered", || {
        kube.bundles(name) == [(); 3].map(|_| first.ca_bundle.as_bytes().to_vec())
    });

    let mut served: Vec<Vec<u8>> = Vec::new();
    let mut bundles: Vec<String> = vec![first.ca_bundle.clone()];
    let mut registered_after: Vec<Duration> = Vec::new();
    let mut created = 0;
    // Until the first CA has left the bundle (about 30 s), at most 45 s.
    while bundles.len() < 3 && started.elapsed() < Duration::from_secs(45) {
        let secret = kube.material(name).expect("the Secret");
        // What is served is trusted by the bundle the Secret holds (or, in
        // the moment between the Secret's write and the server's reload,
        // by the bundle the keeper serves with).
        let cert = served_certificate(engine.addr(), secret.ca_bundle.as_bytes())
            .or_else(|_| {
                served_certificate(
                    engine.addr(),
                    engine.keeper().current().ca_bundle.as_bytes(),
                )
            })
            .unwrap_or_else(|e| panic!("at {}: {e}", secs(started.elapsed())));
        if served.last() != Some(&cert) {
            eprintln!(
                "[{t}] {} serving certificate #{} (bundle of {} CA(s))",
                secs(started.elapsed()),
                served.len() + 1,
                secret.ca_count()
            );
            served.push(cert);
        }
        if bundles.last() != Some(&secret.ca_bundle) {
            bundles.push(secret.ca_bundle.clone());
            let want = secret.ca_bundle.as_bytes().to_vec();
            let took = within("the new caBundle registered everywhere", || {
                kube.bundles(name) == [(); 3].map(|_| want.clone())
            });
            eprintln!(
                "[{t}] {} caBundle of {} CA(s) registered everywhere {} after the Secret was seen changed",
                secs(started.elapsed()),
                secret.ca_count(),
                secs(took)
            );
            registered_after.push(took);
        }
        // The apiserver keeps reaching every webhook.
        created += 1;
        create_crontab(&env, "ct", &format!("r{created}"))
            .unwrap_or_else(|e| panic!("at {}: {e}", secs(started.elapsed())));
        std::thread::sleep(Duration::from_millis(250));
    }
    let status = engine.keeper().status();
    eprintln!(
        "[{t}] over {}: {} serving certificates, {} caBundles, {created} CronTabs created through the webhooks, keeper {status:?}",
        secs(started.elapsed()),
        served.len(),
        bundles.len()
    );
    let counts: Vec<usize> = bundles
        .iter()
        .map(|b| CertificateDer::pem_slice_iter(b.as_bytes()).count())
        .collect();
    assert_eq!(
        counts,
        [1, 2, 1],
        "a successor CA, then the old one dropped"
    );
    assert!(served.len() >= 5, "{} serving certificates", served.len());
    assert_eq!(status.errors, 0, "{status:?}");
    let reloads = engine
        .server
        .as_ref()
        .map(|s| s.state.metrics.cert_reloads.get())
        .unwrap_or_default();
    assert!(reloads >= 4, "{reloads} certificate reloads");
    for d in registered_after {
        assert!(
            d < Duration::from_secs(2),
            "caBundle registered after {}",
            secs(d)
        );
    }
    engine.stop();
}

/// A kubeconfig for the apiserver of `env` that authenticates with `token`
/// only (no client certificate).
fn token_kubeconfig(env: &katalog_testenv::TestEnv, token: &str, path: &Path) {
    let ca = base64_encode(env.ca_pem().as_bytes());
    let server = env.server_url();
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");
    std::fs::write(
        path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
  - name: testenv
    cluster: {{server: '{server}', certificate-authority-data: '{ca}'}}
users:
  - name: katalog
    user: {{token: '{token}'}}
contexts:
  - name: katalog
    context: {{cluster: testenv, user: katalog}}
current-context: katalog
"
        ),
    )
    .expect("writing the kubeconfig");
}

/// The whole cluster side (self-signed Secret, registration, housekeeping,
/// leader election) with the ServiceAccount of `deploy/base/rbac.yaml` and its
/// token only: every permission it needs is there, and what it does not
/// need is refused.
#[test]
fn least_privilege_from_deploy_rbac() {
    let t = "rbac";
    tls::install_crypto_provider();
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);
    ok(env.kubectl([
        "apply",
        "-f",
        &repo_path("deploy/base/rbac.yaml").to_string_lossy(),
    ]));
    ok(env.kubectl(["create", "namespace", "ct"]));
    let dir = Scratch::new(t);
    let crontab =
        std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).expect("crontab.yaml");
    std::fs::write(dir.path("crontab.yaml"), crontab).expect("writing crontab.yaml");
    // The CRD its `crd:` names, beside it (a file of CRDs is not a Katalog source).
    std::fs::copy(
        repo_path("katalogs/crontab.crd.yaml"),
        dir.path("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    std::fs::write(dir.path("admission.yaml"), CRONTAB_ADMISSION).expect("writing admission.yaml");
    let token = ok(env.kubectl([
        "create",
        "token",
        "katalog",
        "-n",
        NAMESPACE,
        "--duration=1h",
    ]));
    let kubeconfig = dir.path("katalog.kubeconfig");
    token_kubeconfig(&env, token.trim(), &kubeconfig);

    // What the ServiceAccount may not do.
    let sa = "--as=system:serviceaccount:katalog-system:katalog";
    for (verb, what, namespace) in [
        ("get", "secrets/other", NAMESPACE),
        ("list", "secrets", NAMESPACE),
        ("delete", "secrets/katalog-tls", NAMESPACE),
        ("get", "secrets/katalog-tls", "default"),
        ("list", "pods", NAMESPACE),
        ("delete", "customresourcedefinitions", ""),
        ("create", "customresourcedefinitions", ""),
        ("update", "leases/other", NAMESPACE),
        ("list", "crontabs.stable.example.com", "ct"),
        // Another webhook configuration: neither created nor read, and the
        // names are not crossed between the two kinds.
        ("create", "validatingwebhookconfigurations", ""),
        ("create", "validatingwebhookconfigurations/other", ""),
        ("create", "mutatingwebhookconfigurations/other", ""),
        ("patch", "validatingwebhookconfigurations/other", ""),
        (
            "create",
            "mutatingwebhookconfigurations/katalog-validating",
            "",
        ),
        (
            "create",
            "validatingwebhookconfigurations/katalog-mutating",
            "",
        ),
        ("list", "validatingwebhookconfigurations", ""),
        ("watch", "mutatingwebhookconfigurations", ""),
        // A CRD the Katalog does not convert, and all CRDs.
        ("patch", "customresourcedefinitions/others.example.com", ""),
        ("get", "customresourcedefinitions/others.example.com", ""),
        ("list", "customresourcedefinitions", ""),
        ("watch", "customresourcedefinitions", ""),
    ] {
        let mut args = vec!["auth", "can-i", verb, what, sa];
        if !namespace.is_empty() {
            args.extend(["-n", namespace]);
        }
        let out = env.kubectl(&args);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "no",
            "the ServiceAccount may {verb} {what} in {namespace:?}"
        );
    }

    // What it may: each by name.
    for (verb, what) in [
        (
            "create",
            "validatingwebhookconfigurations/katalog-validating",
        ),
        ("watch", "mutatingwebhookconfigurations/katalog-mutating"),
        (
            "patch",
            "customresourcedefinitions/crontabs.stable.example.com",
        ),
        (
            "watch",
            "customresourcedefinitions/crontabs.stable.example.com",
        ),
    ] {
        let out = env.kubectl(["auth", "can-i", verb, what, sa]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "yes",
            "the ServiceAccount may not {verb} {what}"
        );
    }

    let kube = Clients::new(&env.kubeconfig());
    let selfsigned = SelfSigned::new(
        SecretRef {
            namespace: NAMESPACE.into(),
            name: "katalog-tls".into(),
        },
        &["katalog.katalog-system.svc".into()],
    );
    let engine = Engine::start_as(
        &kubeconfig,
        &dir.path(""),
        &selfsigned,
        "katalog",
        Some(LeaderElection {
            namespace: NAMESPACE.into(),
            ..LeaderElection::default()
        }),
    );
    assert_eq!(engine.initial, Action::Created);
    let first = kube.material("katalog-tls").expect("the Secret");
    let took = within("registered with the ServiceAccount's permissions", || {
        kube.bundles("katalog") == [(); 3].map(|_| first.ca_bundle.as_bytes().to_vec())
    });
    eprintln!("[{t}] registered in {}", secs(took));
    eventually("the apiserver calls the webhooks", RESTORE, || {
        create_crontab(&env, "ct", "a")
    });
    let lease = get_json(&env, &["get", "lease", "katalog-leader", "-n", NAMESPACE]);
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{lease}"
    );

    // Restores need create (the Secret, a configuration) and watch.
    ok(env.kubectl(["delete", "secret", "katalog-tls", "-n", NAMESPACE]));
    within("the Secret restored", || {
        kube.material("katalog-tls").as_ref() == Some(&first)
    });
    ok(env.kubectl([
        "delete",
        "validatingwebhookconfiguration",
        "katalog-validating",
    ]));
    within("the validating configuration restored", || {
        kube.bundles("katalog")[0] == first.ca_bundle.as_bytes()
    });
    create_crontab(&env, "ct", "b").unwrap_or_else(|e| panic!("{e}"));

    let keeper = engine.keeper().status();
    assert_eq!(
        (keeper.errors, keeper.last_error.as_deref()),
        (0, None),
        "{keeper:?}"
    );
    let housekeeper = engine
        .housekeeper
        .as_ref()
        .map(HousekeeperHandle::status)
        .expect("a housekeeper");
    assert!(housekeeper.is_leader(), "{housekeeper:?}");
    assert_eq!(housekeeper.errors, 0, "{housekeeper:?}");
    engine.stop();
}
