//! The HTTPS server end to end: a real server on an ephemeral loopback port,
//! a real TLS client verifying it against a generated CA.

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use katalog_runtime::certs::tls::DevCa;
use katalog_runtime::http::client::{HttpsClient, read_response};
use katalog_runtime::{Config, ServerThread};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "katalog-test-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ca() -> &'static DevCa {
    static CA: OnceLock<DevCa> = OnceLock::new();
    CA.get_or_init(|| DevCa::generate().unwrap())
}

/// Write a file atomically (write aside, rename over), as tools and the kubelet do.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp-write");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Harness {
    server: Option<ServerThread>,
    scratch: Scratch,
}

impl Harness {
    /// Start a server for `katalog_path` with certificates issued by the test CA.
    fn start(name: &str, katalog_path: Option<&Path>, tweak: impl FnOnce(&mut Config)) -> Harness {
        let scratch = Scratch::new(name);
        let (cert, key) = ca().issue(&[]).unwrap();
        std::fs::write(scratch.path("tls.crt"), cert).unwrap();
        std::fs::write(scratch.path("tls.key"), key).unwrap();
        let katalog = match katalog_path {
            Some(p) => p.to_path_buf(),
            None => scratch.path("katalog.yaml"),
        };
        let mut config = Config::new(katalog, scratch.path("tls.crt"), scratch.path("tls.key"));
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.workers = 2;
        config.reload_debounce = Duration::from_millis(50);
        config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        tweak(&mut config);
        let server = ServerThread::spawn(config).expect("the server starts");
        Harness {
            server: Some(server),
            scratch,
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.server.as_ref().unwrap().addr
    }

    fn client(&self) -> HttpsClient {
        HttpsClient::new(self.addr(), ca().ca_pem().as_bytes(), "localhost").unwrap()
    }

    /// `GET path` on the plain-HTTP monitoring listener.
    fn monitoring_get(&self, path: &str) -> katalog_runtime::http::client::Response {
        let addr = self.server.as_ref().unwrap().metrics_addr.unwrap();
        let mut sock = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            sock,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        read_response(&mut BufReader::new(sock)).unwrap()
    }

    /// The `/katalog` summary, from the monitoring listener.
    fn summary(&self) -> Value {
        self.monitoring_get("/katalog").json().unwrap()
    }

    fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop();
    }
}

fn crontab() -> PathBuf {
    repo().join("katalogs/crontab.yaml")
}

fn crontab_object(i: usize, version: &str) -> Value {
    let spec = match version {
        "v1" => {
            json!({"schedule": "*/5 * * * *", "image": format!("registry.example.com/job:{i}"), "timeoutSeconds": i, "concurrencyPolicy": "Forbid"})
        }
        "v1beta1" => {
            json!({"cronSpec": "*/5 * * * *", "image": format!("registry.example.com/job:{i}")})
        }
        _ => {
            json!({"schedule": "*/5 * * * *", "container": {"image": format!("registry.example.com/job:{i}")}})
        }
    };
    json!({
        "apiVersion": format!("stable.example.com/{version}"),
        "kind": "CronTab",
        "metadata": {"name": format!("job-{i}"), "namespace": "default", "uid": format!("uid-{i}"),
                     "labels": {"app.kubernetes.io/name": "job"}},
        "spec": spec,
    })
}

fn conversion_review(api_version: &str, desired: &str, objects: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "ConversionReview",
        "request": {"uid": "7b8c2c8e-1111-2222-3333-444455556666", "desiredAPIVersion": desired, "objects": objects},
    }))
    .unwrap()
}

#[test]
fn converts_v1_and_v1beta1_reviews() {
    let h = Harness::start("convert", Some(&crontab()), |_| {});
    let mut c = h.client();
    for review_version in ["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"] {
        let body = conversion_review(
            review_version,
            "stable.example.com/v2",
            vec![crontab_object(1, "v1"), crontab_object(2, "v1beta1")],
        );
        let r = c.post_json("/convert", &body).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json().unwrap();
        assert_eq!(v["apiVersion"], review_version);
        assert_eq!(v["response"]["uid"], "7b8c2c8e-1111-2222-3333-444455556666");
        assert_eq!(v["response"]["result"]["status"], "Success");
        let objs = v["response"]["convertedObjects"].as_array().unwrap();
        assert_eq!(objs[0]["spec"]["concurrencyPolicy"], "ForbidConcurrent");
        assert_eq!(
            objs[1]["spec"]["container"]["image"],
            "registry.example.com/job:2"
        );
        assert_eq!(objs[1]["spec"]["concurrencyPolicy"], "AllowConcurrent");
    }
    let stats = h.summary();
    assert_eq!(stats["ready"], true);
    assert_eq!(
        stats["stats"][0]["key"],
        "conversion stable.example.com/CronTab"
    );
    assert_eq!(stats["stats"][0]["count"], 2);
    let metrics = c.get("/metrics").unwrap().text();
    assert!(
        metrics.contains(r#"katalog_conversion_requests_total{group="stable.example.com",kind="CronTab",from="mixed",to="v2",result="success"} 2"#),
        "{metrics}"
    );
}

#[test]
fn converts_500_objects_and_a_5_mb_review() {
    let h = Harness::start("large", Some(&crontab()), |_| {});
    let mut c = h.client();
    let objects: Vec<Value> = (0..500).map(|i| crontab_object(i, "v1")).collect();
    let r = c
        .post_json(
            "/convert",
            &conversion_review(
                "apiextensions.k8s.io/v1",
                "stable.example.com/v1beta1",
                objects,
            ),
        )
        .unwrap();
    assert_eq!(r.status, 200);
    let v = r.json().unwrap();
    let out = v["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(out.len(), 500);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(o["metadata"]["name"], format!("job-{i}"), "order is kept");
        assert_eq!(o["apiVersion"], "stable.example.com/v1beta1");
    }
    // ~5 MB: objects carrying a large annotation each.
    let blob = "x".repeat(10_000);
    let objects: Vec<Value> = (0..500)
        .map(|i| {
            let mut o = crontab_object(i, "v2");
            o["metadata"]["annotations"] = json!({"example.com/blob": blob});
            o
        })
        .collect();
    let body = conversion_review("apiextensions.k8s.io/v1", "stable.example.com/v1", objects);
    assert!(body.len() > 5_000_000, "{}", body.len());
    let r = c.post_json("/convert", &body).unwrap();
    assert_eq!(r.status, 200);
    let v = r.json().unwrap();
    assert_eq!(v["response"]["result"]["status"], "Success");
    assert_eq!(
        v["response"]["convertedObjects"].as_array().unwrap().len(),
        500
    );
}

const ADMISSION_KATALOG: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: admission}
spec:
  admission:
    validations:
      - name: internal-images
        resources: [v1/pods]
        path: spec.containers[*].image
        check: {prefix: "registry.internal/"}
    mutations:
      - name: managed-by
        resources: [v1/pods]
        addLabels: {app.kubernetes.io/managed-by: katalog}
"#;

fn pod_review(image: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "a1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": image}]}}
        }
    }))
    .unwrap()
}

/// A webhook group id the Katalog does not have (a webhook registered
/// before a reload) gets every rule of its endpoint, and is counted.
#[test]
fn an_unknown_webhook_group_gets_every_rule_and_is_counted() {
    let scratch = Scratch::new("unknown-group");
    std::fs::write(scratch.path("k.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("unknown-group", Some(&scratch.path("k.yaml")), |_| {});
    let mut c = h.client();
    for _ in 0..2 {
        let r = c
            .post_json("/validate/nope", &pod_review("docker.io/app"))
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(r["response"]["allowed"], false, "{r}");
        assert!(
            r["response"]["status"]["message"]
                .as_str()
                .unwrap()
                .contains("[internal-images]"),
            "{r}"
        );
    }
    let r = c
        .post_json("/mutate/gone", &pod_review("docker.io/app"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["response"]["patchType"], "JSONPatch", "{r}");
    let metrics = c.get("/metrics").unwrap().text();
    assert!(
        metrics.contains("katalog_unknown_webhook_groups_total 3"),
        "{metrics}"
    );
}

#[test]
fn admission_allows_denies_and_patches() {
    let scratch = Scratch::new("admission-katalog");
    std::fs::write(scratch.path("k.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("admission", Some(&scratch.path("k.yaml")), |_| {});
    let mut c = h.client();
    let r = c
        .post_json("/validate", &pod_review("registry.internal/app"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["response"]["allowed"], true);
    let r = c
        .post_json("/validate", &pod_review("docker.io/app"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(r["response"]["status"]["code"], 403);
    assert!(
        r["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("[internal-images]")
    );
    let r = c
        .post_json("/mutate", &pod_review("docker.io/app"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["response"]["allowed"], true);
    assert_eq!(r["response"]["patchType"], "JSONPatch");
    assert!(r["response"]["patch"].is_string());
    // Not declared by this Katalog.
    for path in [
        "/convert",
        "/deletion-protection",
        "/namespace-protection",
        "/strict-mode-protection",
    ] {
        let r = c.post_json(path, b"{}").unwrap();
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.json().unwrap()["reason"], "NotDeclared", "{path}");
    }
}

#[test]
fn bad_requests_get_clear_4xx_and_the_server_keeps_serving() {
    let h = Harness::start("bad", Some(&crontab()), |c| {
        c.body_limit = 64 * 1024;
        c.client_timeout = Duration::from_millis(800);
    });
    let mut c = h.client();
    // method, path, content type, body, expected status, expected reason
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/convert",
            Some("text/plain"),
            b"{}".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "POST",
            "/convert",
            None,
            b"{}".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "POST",
            "/convert",
            Some("application/json"),
            b"{not json".to_vec(),
            400,
            "MalformedReview",
        ),
        (
            "POST",
            "/convert",
            Some("application/json"),
            b"{\"apiVersion\":\"apiextensions.k8s.io/v1\"}".to_vec(),
            400,
            "MalformedReview",
        ),
        (
            "POST",
            "/convert",
            Some("application/json"),
            vec![b' '; 100 * 1024],
            413,
            "BodyTooLarge",
        ),
        (
            "POST",
            "/nowhere",
            Some("application/json"),
            b"{}".to_vec(),
            404,
            "NoRoute",
        ),
        ("GET", "/convert", None, Vec::new(), 405, "MethodNotAllowed"),
        (
            "DELETE",
            "/validate",
            None,
            Vec::new(),
            405,
            "MethodNotAllowed",
        ),
    ];
    for (method, path, ct, body, status, reason) in cases {
        let r = c.request(method, path, ct, &body).unwrap();
        assert_eq!(r.status, status, "{method} {path} {ct:?}: {}", r.text());
        if r.header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
        {
            assert_eq!(r.json().unwrap()["reason"], reason, "{method} {path}");
        }
    }
    // A client that sends half a body and stalls gets 408.
    let mut raw = c.connect().unwrap();
    let body = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v2",
        vec![crontab_object(1, "v1")],
    );
    write!(raw, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
    raw.write_all(&body[..body.len() / 2]).unwrap();
    raw.flush().unwrap();
    let r = read_response(&mut BufReader::new(raw)).unwrap();
    assert_eq!(r.status, 408, "{}", r.text());
    // A stalled chunked body gets 408 too, and its connection is closed
    // (an open one would hold a file descriptor for good).
    let mut raw = c.connect().unwrap();
    write!(raw, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n", body.len()).unwrap();
    raw.write_all(&body[..body.len() / 2]).unwrap();
    raw.flush().unwrap();
    let mut reader = BufReader::new(raw);
    let r = read_response(&mut reader).unwrap();
    assert_eq!(r.status, 408, "{}", r.text());
    reader
        .get_ref()
        .sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rest = Vec::new();
    match std::io::Read::read_to_end(&mut reader, &mut rest) {
        Ok(_) => {}
        Err(e) => assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "the connection of a stalled chunked body is still open after 5 s: {e}"
        ),
    }
    // Still serving.
    let r = c.post_json("/convert", &body).unwrap();
    assert_eq!(r.status, 200);
    let metrics = c.get("/metrics").unwrap().text();
    assert!(
        metrics.contains(r#"katalog_http_errors_total{reason="BodyTooLarge"} 1"#),
        "{metrics}"
    );
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        if check() {
            return started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

const HOSTPORT_V1: &str = include_str!("../../../katalogs/hostport.yaml");

/// hostport.yaml without its `crd:` (the line stays, so locations do), for
/// tests about the Katalog alone, written where its CRD is not.
fn hostport_without_crd() -> String {
    let katalog = HOSTPORT_V1.replace("crd: hostport.crd.yaml", "# no crd");
    assert_ne!(katalog, HOSTPORT_V1);
    katalog
}

fn hostport_review() -> Vec<u8> {
    conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v2",
        vec![
            json!({"apiVersion": "stable.example.com/v1", "kind": "HostPort", "metadata": {"name": "h"}, "hostPort": "localhost:8080"}),
        ],
    )
}

#[test]
fn katalog_reload_good_is_served_bad_keeps_the_old() {
    let scratch = Scratch::new("reload-katalog");
    let path = scratch.path("hostport.yaml");
    let katalog = hostport_without_crd();
    std::fs::write(&path, &katalog).unwrap();
    let h = Harness::start("reload", Some(&path), |_| {});
    let mut c = h.client();
    let host = |c: &mut HttpsClient| {
        let v = c
            .post_json("/convert", &hostport_review())
            .unwrap()
            .json()
            .unwrap();
        v["response"]["convertedObjects"][0].clone()
    };
    assert_eq!(host(&mut c)["host"], "localhost");
    // A good change: v2 now calls them `hostname` and `portNumber`.
    let changed = katalog.replace("spoke: [host, port]", "spoke: [hostname, portNumber]");
    assert_ne!(changed, katalog);
    write_atomic(&path, &changed);
    let took = wait_for("the new Katalog to be served", || {
        host(&mut c)["hostname"] == "localhost"
    });
    eprintln!("reload took effect after {took:?}");
    // A broken change: the old one keeps serving, the error is reported.
    write_atomic(&path, &changed.replace("separator", "separtor"));
    wait_for("the reload failure to be reported", || {
        h.summary()["lastReloadError"].is_string()
    });
    assert_eq!(host(&mut c)["hostname"], "localhost");
    let summary = h.summary();
    let err = summary["lastReloadError"].as_str().unwrap();
    assert!(
        err.contains("hostport.yaml:20:") && err.contains("unknown key `separtor`"),
        "{err}"
    );
    let metrics = c.get("/metrics").unwrap().text();
    assert!(
        metrics.contains("katalog_reload_failures_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains("katalog_reloads_total 2"), "{metrics}");
}

const HOSTPORT_CRD: &str = include_str!("../../../katalogs/hostport.crd.yaml");

#[test]
fn katalog_reload_follows_its_crd() {
    // The Katalog and its CRD side by side in one directory, as in a
    // ConfigMap: the file of CRDs is not read as a Katalog source.
    let scratch = Scratch::new("reload-crd");
    std::fs::write(scratch.path("hostport.yaml"), HOSTPORT_V1).unwrap();
    let crd = scratch.path("hostport.crd.yaml");
    std::fs::write(&crd, HOSTPORT_CRD).unwrap();
    let h = Harness::start("reload-crd", Some(&scratch.path("")), |_| {});
    let mut c = h.client();
    let converted = c
        .post_json("/convert", &hostport_review())
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        converted["response"]["convertedObjects"][0]["host"], "localhost",
        "{converted}"
    );
    // Only the CRD changes: v2 no longer declares `port`. The reload sees
    // it, refuses the Katalog at the rule's location and keeps serving.
    let edited = HOSTPORT_CRD.replace("port: {type: string}", "portNumber: {type: string}");
    assert_ne!(edited, HOSTPORT_CRD);
    write_atomic(&crd, &edited);
    wait_for("the CRD change to fail the reload", || {
        h.summary()["lastReloadError"].is_string()
    });
    let summary = h.summary();
    let err = summary["lastReloadError"].as_str().unwrap();
    assert!(
        err.contains("hostport.yaml:20:") && err.contains("no such field `port` in v2"),
        "{err}"
    );
    let again = c
        .post_json("/convert", &hostport_review())
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        again["response"]["convertedObjects"][0]["host"],
        "localhost"
    );
}

#[test]
fn katalog_reload_follows_its_crd_in_another_directory() {
    // The CRD in a directory of its own below the Katalog's (`crd:
    // crds/hostport.crd.yaml`; `..` would lead out of the Katalog's
    // directory, which is refused), and no poll within the test: only a
    // watch on the CRD's directory can see the edit.
    let scratch = Scratch::new("reload-crd-apart");
    std::fs::create_dir_all(scratch.path("katalog/crds")).unwrap();
    let katalog = HOSTPORT_V1.replace("crd: hostport.crd.yaml", "crd: crds/hostport.crd.yaml");
    assert_ne!(katalog, HOSTPORT_V1);
    std::fs::write(scratch.path("katalog/hostport.yaml"), katalog).unwrap();
    let crd = scratch.path("katalog/crds/hostport.crd.yaml");
    std::fs::write(&crd, HOSTPORT_CRD).unwrap();
    let h = Harness::start(
        "reload-crd-apart",
        Some(&scratch.path("katalog/hostport.yaml")),
        |c| c.reload_poll = Duration::from_secs(3600),
    );
    assert!(
        h.summary()["lastReloadError"].is_null(),
        "the Katalog loads with its CRD"
    );
    let edited = HOSTPORT_CRD.replace("port: {type: string}", "portNumber: {type: string}");
    write_atomic(&crd, &edited);
    wait_for("the CRD change to fail the reload", || {
        h.summary()["lastReloadError"].is_string()
    });
    let summary = h.summary();
    let err = summary["lastReloadError"].as_str().unwrap();
    assert!(err.contains("no such field `port` in v2"), "{err}");
}

#[test]
fn katalog_reload_follows_a_crd_directory() {
    // `crd: crds` names a directory that holds CRD manifests only (it
    // was refused: "holds CRD manifests but no Katalog"); no poll within
    // the test, so the watch on that directory must see the edit.
    let scratch = Scratch::new("reload-crd-dir");
    std::fs::create_dir_all(scratch.path("katalog")).unwrap();
    std::fs::create_dir_all(scratch.path("katalog/crds")).unwrap();
    let katalog = HOSTPORT_V1.replace("crd: hostport.crd.yaml", "crd: crds");
    assert_ne!(katalog, HOSTPORT_V1);
    std::fs::write(scratch.path("katalog/hostport.yaml"), katalog).unwrap();
    let crd = scratch.path("katalog/crds/hostport.crd.yaml");
    std::fs::write(&crd, HOSTPORT_CRD).unwrap();
    std::fs::write(
        scratch.path("katalog/crds/crontab.crd.yaml"),
        include_str!("../../../katalogs/crontab.crd.yaml"),
    )
    .unwrap();
    let h = Harness::start(
        "reload-crd-dir",
        Some(&scratch.path("katalog/hostport.yaml")),
        |c| c.reload_poll = Duration::from_secs(3600),
    );
    let mut c = h.client();
    let summary = h.summary();
    assert!(
        summary["lastReloadError"].is_null(),
        "the Katalog loads with its CRD directory: {summary}"
    );
    let converted = c
        .post_json("/convert", &hostport_review())
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        converted["response"]["convertedObjects"][0]["host"], "localhost",
        "{converted}"
    );
    let edited = HOSTPORT_CRD.replace("port: {type: string}", "portNumber: {type: string}");
    write_atomic(&crd, &edited);
    wait_for("the CRD change to fail the reload", || {
        h.summary()["lastReloadError"].is_string()
    });
    let summary = h.summary();
    let err = summary["lastReloadError"].as_str().unwrap();
    assert!(err.contains("no such field `port` in v2"), "{err}");
    // Put back: served again.
    write_atomic(&crd, HOSTPORT_CRD);
    wait_for("the CRD fix to be served", || {
        h.summary()["lastReloadError"].is_null()
    });
    let converted = c
        .post_json("/convert", &hostport_review())
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        converted["response"]["convertedObjects"][0]["host"], "localhost",
        "{converted}"
    );
}

#[test]
fn configmap_style_symlink_swap_is_picked_up() {
    let scratch = Scratch::new("configmap");
    let mount = scratch.path("mount");
    std::fs::create_dir_all(mount.join("..2026_11_30_01")).unwrap();
    std::fs::write(
        mount.join("..2026_11_30_01/hostport.yaml"),
        hostport_without_crd(),
    )
    .unwrap();
    std::os::unix::fs::symlink("..2026_11_30_01", mount.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/hostport.yaml", mount.join("hostport.yaml")).unwrap();
    let h = Harness::start("configmap", Some(&mount), |_| {});
    let mut c = h.client();
    let out = |c: &mut HttpsClient| {
        c.post_json("/convert", &hostport_review())
            .unwrap()
            .json()
            .unwrap()["response"]["convertedObjects"][0]
            .clone()
    };
    assert_eq!(out(&mut c)["port"], "8080");
    // The kubelet's update: a new timestamped directory, a new symlink, an atomic rename.
    std::fs::create_dir_all(mount.join("..2026_11_30_02")).unwrap();
    std::fs::write(
        mount.join("..2026_11_30_02/hostport.yaml"),
        hostport_without_crd().replace("spoke: [host, port]", "spoke: [server, port]"),
    )
    .unwrap();
    std::os::unix::fs::symlink("..2026_11_30_02", mount.join("..data_tmp")).unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    std::fs::remove_dir_all(mount.join("..2026_11_30_01")).unwrap();
    let took = wait_for("the swapped ConfigMap to be served", || {
        out(&mut c)["server"] == "localhost"
    });
    eprintln!("symlink swap took effect after {took:?}");
}

#[test]
fn certificate_rotation_during_a_stream_of_requests_fails_nothing() {
    let h = Harness::start("rotation", Some(&crontab()), |_| {});
    let (addr, cert_path, key_path) = (
        h.addr(),
        h.scratch.path("tls.crt"),
        h.scratch.path("tls.key"),
    );
    let first = std::fs::read_to_string(&cert_path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let body = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v2",
        vec![crontab_object(1, "v1")],
    );
    let streamer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut ok, mut failed, mut served_new) = (0, Vec::new(), false);
            // Bounded: at most 2000 requests or 20 s.
            let started = Instant::now();
            while !stop.load(Ordering::SeqCst)
                && ok + failed.len() < 2000
                && started.elapsed() < Duration::from_secs(20)
            {
                // A new connection each time, so every request is a new handshake.
                let mut c = HttpsClient::new(addr, ca().ca_pem().as_bytes(), "localhost").unwrap();
                match c.post_json("/convert", &body) {
                    Ok(r) if r.status == 200 => ok += 1,
                    Ok(r) => failed.push(format!("status {}", r.status)),
                    Err(e) => failed.push(e.to_string()),
                }
                let conn = c.connect().unwrap();
                let served = conn.conn.peer_certificates().unwrap()[0].as_ref().to_vec();
                served_new |= !first.contains(&b64(&served)[..64]);
            }
            (ok, failed, served_new)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // cert-manager style: a new leaf from the same CA; the key lands first,
    // so for a moment the pair does not match and must be refused.
    let (cert, key) = ca().issue(&[]).unwrap();
    write_atomic(&key_path, &key);
    std::thread::sleep(Duration::from_millis(200));
    write_atomic(&cert_path, &cert);
    wait_for("the new certificate to be served", || {
        let c = HttpsClient::new(addr, ca().ca_pem().as_bytes(), "localhost").unwrap();
        let conn = c.connect().unwrap();
        let served = conn.conn.peer_certificates().unwrap()[0].as_ref().to_vec();
        cert.contains(&b64(&served)[..64])
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    let (ok, failed, served_new) = streamer.join().unwrap();
    assert!(
        failed.is_empty(),
        "failed requests during rotation: {failed:?}"
    );
    assert!(ok > 10, "only {ok} requests ran");
    assert!(served_new, "the stream never saw the new certificate");
    let metrics = h.client().get("/metrics").unwrap().text();
    assert!(
        metrics.contains("katalog_certificate_reloads_total 1"),
        "{metrics}"
    );
}

/// Standard base64 of DER, as it appears in a PEM body.
fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[test]
fn graceful_shutdown_finishes_requests_in_flight() {
    let mut h = Harness::start("shutdown", Some(&crontab()), |c| {
        c.shutdown_grace = Duration::from_secs(10)
    });
    let c = h.client();
    let body = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v2",
        (0..200).map(|i| crontab_object(i, "v1")).collect(),
    );
    let mut raw = c.connect().unwrap();
    write!(raw, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
    raw.write_all(&body[..body.len() / 2]).unwrap();
    raw.flush().unwrap();
    // Stop while the request is in flight (the server holds bytes of its
    // body: a body still arriving takes no place among the reviews
    // evaluated), then finish sending it.
    let mut probe = h.client();
    wait_for("the request to be in flight", || {
        probe.get("/metrics").unwrap().text().lines().any(|l| {
            l.strip_prefix("katalog_request_bytes_in_flight ")
                .is_some_and(|n| n != "0")
        })
    });
    let server = h.server.take().unwrap();
    let addr = server.addr;
    let stopper = std::thread::spawn(move || server.stop());
    std::thread::sleep(Duration::from_millis(300));
    raw.write_all(&body[body.len() / 2..]).unwrap();
    raw.flush().unwrap();
    let r = read_response(&mut BufReader::new(raw)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json().unwrap()["response"]["convertedObjects"]
            .as_array()
            .unwrap()
            .len(),
        200
    );
    stopper.join().unwrap();
    // New connections are refused once stopped.
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

#[test]
fn readiness_waits_for_a_katalog() {
    let scratch = Scratch::new("not-ready");
    let path = scratch.path("k.yaml");
    std::fs::write(&path, "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: x}\nspec: {resources: 7}\n").unwrap();
    let h = Harness::start("not-ready", Some(&path), |_| {});
    let mut c = h.client();
    let r = c.get("/readyz").unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("no Katalog is loaded"), "{}", r.text());
    // Why is for the logs, not for a stranger.
    assert!(!r.text().contains("k.yaml"), "{}", r.text());
    assert_eq!(c.get("/healthz").unwrap().status, 200);
    assert_eq!(
        c.post_json("/convert", &hostport_review()).unwrap().status,
        503
    );
    write_atomic(&path, &hostport_without_crd());
    wait_for("readiness", || c.get("/readyz").unwrap().status == 200);
    assert_eq!(
        c.post_json("/convert", &hostport_review()).unwrap().status,
        200
    );
}

/// A Katalog whose one check is quadratic in the number of containers: a
/// review of a few hundred takes seconds in a debug build.
const SLOW_KATALOG: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: slow}
spec:
  admission:
    validations:
      - name: quadratic
        resources: [v1/pods]
        check:
          cel: "object.spec.containers.all(a, object.spec.containers.all(b, a.name != b.name || a == b))"
"#;

/// A CREATE review of a Pod with `n` containers.
fn slow_review(n: usize) -> Vec<u8> {
    let containers: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("c{i}"), "image": "registry.internal/app"}))
        .collect();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "slow", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": containers}}
        }
    }))
    .unwrap()
}

/// A slow review (500 containers) sent on its own thread, once the server
/// counts it in flight; its status comes from the handle. Also a client to
/// probe the server with.
fn slow_review_in_flight(
    h: &Harness,
) -> (
    std::thread::JoinHandle<u16>,
    katalog_runtime::http::client::HttpsClient,
) {
    let mut first = h.client();
    let body = slow_review(500);
    let running = std::thread::spawn(move || first.post_json("/validate", &body).unwrap().status);
    let mut probe = h.client();
    wait_for("the first review to be in flight", || {
        probe
            .get("/metrics")
            .unwrap()
            .text()
            .contains("katalog_reviews_in_flight 1")
    });
    (running, probe)
}

#[test]
fn a_timed_out_evaluation_stays_counted_in_flight_until_it_ends() {
    let scratch = Scratch::new("slow-katalog");
    std::fs::write(scratch.path("k.yaml"), SLOW_KATALOG).unwrap();
    let h = Harness::start("slow", Some(&scratch.path("k.yaml")), |c| {
        c.request_timeout = Duration::from_millis(200);
        // One long CEL evaluation: it cannot be stopped midway.
        c.cel_cost_limit = u64::MAX;
    });
    let mut c = h.client();
    let review = slow_review(600);
    let started = Instant::now();
    let r = c.post_json("/validate", &review).unwrap();
    assert_eq!(r.status, 504, "{}", r.text());
    // The answer is sent; the evaluation goes on and is still counted.
    let mut probe = h.client();
    let gauge = |probe: &mut katalog_runtime::http::client::HttpsClient| {
        probe
            .get("/metrics")
            .unwrap()
            .text()
            .lines()
            .find(|l| l.starts_with("katalog_reviews_in_flight "))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert_eq!(gauge(&mut probe), "katalog_reviews_in_flight 1");
    // ... until it ends (bounded: the quadratic check over 600 containers).
    let mut ended = false;
    for _ in 0..1200 {
        if gauge(&mut probe) == "katalog_reviews_in_flight 0" {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ended, "the evaluation did not end within 120 s");
    eprintln!(
        "a timed-out evaluation stayed counted for {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn reviews_beyond_the_limits_get_429_and_the_server_keeps_serving() {
    let scratch = Scratch::new("busy-katalog");
    std::fs::write(scratch.path("k.yaml"), SLOW_KATALOG).unwrap();
    let h = Harness::start("busy", Some(&scratch.path("k.yaml")), |c| {
        c.max_reviews_in_flight = 1;
        c.max_bytes_in_flight = 1024;
        c.cel_cost_limit = u64::MAX;
    });
    let slow = slow_review;
    let (running, mut probe) = slow_review_in_flight(&h);
    // A second review while the first one holds the only place.
    let mut c = h.client();
    let r = c.post_json("/validate", &slow(1)).unwrap();
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json().unwrap()["reason"], "TooManyReviews");
    assert_eq!(running.join().unwrap(), 200);
    // Room again: a review is answered.
    let mut c = h.client();
    let r = c.post_json("/validate", &slow(1)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let metrics = probe.get("/metrics").unwrap().text();
    assert!(
        metrics.contains(r#"katalog_http_errors_total{reason="TooManyReviews"} 1"#),
        "{metrics}"
    );
    drop(h);

    // The same with room for reviews but not for their bytes.
    let h = Harness::start("busy-bytes", Some(&scratch.path("k.yaml")), |c| {
        c.max_reviews_in_flight = 8;
        c.max_bytes_in_flight = 1024;
        c.cel_cost_limit = u64::MAX;
    });
    let (running, _probe) = slow_review_in_flight(&h);
    let mut c = h.client();
    let r = c.post_json("/validate", &slow(1)).unwrap();
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.text().contains("--max-bytes-in-flight"), "{}", r.text());
    assert_eq!(running.join().unwrap(), 200);
    let r = c.post_json("/validate", &slow(1)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Issue 29 item 1 (and issue 31 item 7): clients that send their headers
/// and the start of a body, then stall, hold no place among the reviews
/// evaluated at once. More of them than there are places (70 > 64), on
/// `/convert` without a client certificate while `--client-ca` is set
/// (the apiserver presents none to conversion webhooks, so anyone may),
/// and every real review is still answered while they hold their
/// connections.
#[test]
fn slow_partial_bodies_do_not_starve_the_reviews() {
    let scratch = Scratch::new("slow-bodies");
    let client_ca = DevCa::generate().unwrap();
    std::fs::write(scratch.path("client-ca.crt"), client_ca.ca_pem()).unwrap();
    let dir = scratch.path("katalog");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(crontab(), dir.join("crontab.yaml")).unwrap();
    std::fs::copy(
        repo().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("admission.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("slow-bodies", Some(&dir), |c| {
        c.client_ca = Some(scratch.path("client-ca.crt"));
        // Longer than the test: no slow client is timed out meanwhile.
        c.client_timeout = Duration::from_secs(120);
    });
    assert_eq!(
        Config::new("k".into(), "c".into(), "k".into()).max_reviews_in_flight,
        64
    );
    let anonymous = h.client();
    let mut slow = Vec::new();
    for i in 0..70 {
        let mut raw = anonymous
            .connect()
            .unwrap_or_else(|e| panic!("slow client {i}: {e}"));
        write!(raw, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"a\":").unwrap();
        raw.flush().unwrap();
        slow.push(raw);
    }
    // Without a certificate, a body to an admission endpoint is not even
    // waited for: 403 at once, and the connection closed.
    let mut unread = anonymous.connect().unwrap();
    write!(unread, "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"a\":").unwrap();
    unread.flush().unwrap();
    unread
        .sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let r = read_response(&mut BufReader::new(&mut unread)).unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    // Time for the server to take them all into its handlers.
    std::thread::sleep(Duration::from_millis(500));
    let (cert, key) = client_ca.issue_client("kube-apiserver").unwrap();
    let mut trusted = h
        .client()
        .with_client_cert(cert.as_bytes(), key.as_bytes())
        .unwrap();
    let mut anonymous = h.client();
    let review = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v1",
        vec![crontab_object(1, "v1beta1")],
    );
    let pod = pod_review("registry.internal/app:1");
    for i in 0..12 {
        let r = trusted.post_json("/validate", &pod).unwrap();
        assert_eq!(r.status, 200, "admission review {i}: {}", r.text());
        let r = anonymous.post_json("/convert", &review).unwrap();
        assert_eq!(r.status, 200, "conversion review {i}: {}", r.text());
    }
    // The slow clients were held all along: none has an answer yet.
    for (i, raw) in slow.iter_mut().enumerate() {
        raw.sock
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0u8; 1];
        match std::io::Read::read(raw, &mut buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            other => panic!("slow client {i} was not held: {other:?}"),
        }
    }
    let metrics = trusted.get("/metrics").unwrap().text();
    assert!(!metrics.contains(r#"reason="TooManyReviews""#), "{metrics}");
    // What they hold: their bytes (`{"a":`, 5 each), no place.
    assert!(metrics.contains("katalog_reviews_in_flight 0"), "{metrics}");
    assert!(
        metrics.contains("katalog_request_bytes_in_flight 350"),
        "{metrics}"
    );
}

/// An AdmissionReview of `group/version/resource`, whatever that is.
fn review_of(group: &str, version: &str, resource: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1", "kind": {"group": group, "version": version, "kind": "Thing"},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": "t", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "mallory"},
            "object": {"apiVersion": format!("{group}/{version}"), "kind": "Thing",
                       "metadata": {"name": "t", "namespace": "default"}}
        }
    }))
    .unwrap()
}

/// Issue 31 item 1: label values and stats keys come from the Katalog, so
/// requests naming what it does not declare add no series and no entry.
#[test]
fn undeclared_resources_add_no_metric_series_and_no_stats_entries() {
    let scratch = Scratch::new("undeclared");
    let dir = scratch.path("katalog");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(crontab(), dir.join("crontab.yaml")).unwrap();
    std::fs::copy(
        repo().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("admission.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("undeclared", Some(&dir), |_| {});
    let state = h.server.as_ref().unwrap().state.clone();
    let mut c = h.client();
    let undeclared_conversion = |i: usize| {
        let mut object = crontab_object(i, "v1");
        object["apiVersion"] = json!(format!("evil{i}.example.com/v{i}"));
        object["kind"] = json!(format!("Kind{i}"));
        conversion_review(
            "apiextensions.k8s.io/v1",
            &format!("evil{i}.example.com/w{i}"),
            vec![object],
        )
    };
    // A declared resource at versions it does not serve.
    let undeclared_versions = |i: usize| {
        let mut object = crontab_object(i, "v1");
        object["apiVersion"] = json!(format!("stable.example.com/v{}", i + 10));
        conversion_review(
            "apiextensions.k8s.io/v1",
            &format!("stable.example.com/x{i}"),
            vec![object],
        )
    };
    let undeclared_admission = |i: usize| {
        review_of(
            &format!("evil{i}.example.com"),
            &format!("v{i}"),
            &format!("things{i}"),
        )
    };
    // Once of each, and the declared ones: every series there will be.
    let declared = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v2",
        vec![crontab_object(1, "v1")],
    );
    let pod = pod_review("docker.io/app");
    let send = |c: &mut HttpsClient, path: &str, body: &[u8]| {
        let r = c.post_json(path, body).unwrap();
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json().unwrap()
    };
    send(&mut c, "/convert", &declared);
    send(&mut c, "/validate", &pod);
    send(&mut c, "/mutate", &pod);
    let r = send(&mut c, "/convert", &undeclared_conversion(0));
    assert_eq!(r["response"]["result"]["status"], "Failure");
    send(&mut c, "/convert", &undeclared_versions(0));
    send(&mut c, "/validate", &undeclared_admission(0));
    send(&mut c, "/mutate", &undeclared_admission(0));
    let series = |c: &mut HttpsClient| {
        let text = c.get("/metrics").unwrap().text();
        let lines = text.lines().filter(|l| !l.starts_with('#')).count();
        (lines, text)
    };
    let (before, _) = series(&mut c);
    let entries = state.stats.snapshot().len();
    for i in 1..=1_000 {
        match i % 4 {
            0 => send(&mut c, "/convert", &undeclared_conversion(i)),
            1 => send(&mut c, "/convert", &undeclared_versions(i)),
            2 => send(&mut c, "/validate", &undeclared_admission(i)),
            _ => send(&mut c, "/mutate", &undeclared_admission(i)),
        };
    }
    let (after, text) = series(&mut c);
    assert_eq!(after, before, "{text}");
    assert_eq!(state.stats.snapshot().len(), entries);
    assert!(!text.contains("evil"), "{text}");
    for line in [
        r#"katalog_undeclared_requests_total{review="conversion"} 251"#,
        r#"katalog_undeclared_requests_total{review="admission"} 502"#,
        r#"katalog_conversion_requests_total{group="other",kind="other",from="other",to="other",result="failure"} 251"#,
        r#"katalog_conversion_requests_total{group="stable.example.com",kind="CronTab",from="other",to="other",result="failure"} 251"#,
        r#"katalog_admission_requests_total{endpoint="validate",group="other",version="other",resource="other",result="allowed"} 251"#,
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    // The stats keep no text the sender chose: neither its groups nor the
    // versions it asked a declared resource for.
    let stats = serde_json::to_string(&state.stats.snapshot()).unwrap();
    assert!(!stats.contains("evil"), "{stats}");
    assert!(!stats.contains("x997"), "{stats}");
}

/// Open `n` TCP connections that never send a ClientHello (each connect
/// bounded; the ones the server's queue refuses are not counted).
fn idle_connections(addr: std::net::SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .filter_map(|_| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()
        })
        .collect()
}

#[test]
fn connections_that_never_send_a_client_hello_do_not_hold_up_real_clients() {
    let h = Harness::start("idle-hello", Some(&crontab()), |c| {
        c.tls_handshake_timeout = Duration::from_secs(20);
    });
    // More idle connections than actix's default handshake limit
    // (256 per worker) and its accept queue (1024) together.
    let idle = idle_connections(h.addr(), 2000);
    std::thread::sleep(Duration::from_millis(300));
    let review = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v1",
        vec![crontab_object(1, "v1beta1")],
    );
    let started = Instant::now();
    let mut c = h.client().with_timeout(Duration::from_secs(15));
    let r = c.post_json("/convert", &review).unwrap();
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{}", r.text());
    eprintln!(
        "{} idle connections held: a conversion review took {:.0} ms",
        idle.len(),
        took.as_secs_f64() * 1000.0
    );
    // Generous: unhindered it takes milliseconds; queued behind the idle
    // connections it waits for their handshake timeout (20 s here).
    assert!(took < Duration::from_secs(5), "took {took:?}");
    drop(idle);
}

#[test]
fn a_connection_that_never_finishes_its_handshake_is_closed_after_the_timeout() {
    use std::io::Read;
    let h = Harness::start("hello-timeout", Some(&crontab()), |c| {
        c.tls_handshake_timeout = Duration::from_millis(500);
    });
    let mut idle = std::net::TcpStream::connect(h.addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    // The server closes it: read ends (0 bytes or a reset), not times out.
    let outcome = idle.read(&mut buf);
    let took = started.elapsed();
    assert!(
        matches!(outcome, Ok(0))
            || matches!(&outcome, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{outcome:?} after {took:?}"
    );
    assert!(
        took < Duration::from_millis(2500),
        "closed only after {took:?}"
    );
}

/// The quadratic check of `SLOW_KATALOG`, `n` times over (rules `q0`...).
/// Each rule's expression differs (`&& i >= 0`): the engine evaluates an
/// expression that reads only the request once per request, so `n` copies
/// of one expression would cost as much as one.
fn many_slow_rules(n: usize) -> String {
    let rules: String = (0..n)
        .map(|i| {
            format!(
                "      - name: q{i}\n        resources: [v1/pods]\n        check:\n          cel: \"object.spec.containers.all(a, object.spec.containers.all(b, a.name != b.name || a == b)) && {i} >= 0\"\n"
            )
        })
        .collect();
    format!(
        "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {{name: slow}}\nspec:\n  admission:\n    validations:\n{rules}"
    )
}

fn in_flight_gauge(probe: &mut katalog_runtime::http::client::HttpsClient) -> String {
    probe
        .get("/metrics")
        .unwrap()
        .text()
        .lines()
        .find(|l| l.starts_with("katalog_reviews_in_flight "))
        .map(str::to_string)
        .unwrap_or_default()
}

#[test]
fn a_timed_out_evaluation_stops_at_its_next_rule() {
    let scratch = Scratch::new("many-slow");
    std::fs::write(scratch.path("k.yaml"), many_slow_rules(60)).unwrap();
    let h = Harness::start("many-slow", Some(&scratch.path("k.yaml")), |c| {
        c.request_timeout = Duration::from_millis(300);
        c.cel_cost_limit = u64::MAX;
    });
    let mut c = h.client();
    // One rule over 150 containers takes a few hundred ms in a debug build:
    // all 60 would take tens of seconds.
    let review = slow_review(150);
    let r = c.post_json("/validate", &review).unwrap();
    assert_eq!(r.status, 504, "{}", r.text());
    let answered = Instant::now();
    let mut probe = h.client();
    let mut stopped = None;
    for _ in 0..600 {
        if in_flight_gauge(&mut probe) == "katalog_reviews_in_flight 0" {
            stopped = Some(answered.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = stopped.expect("the evaluation did not stop within 30 s of the 504");
    eprintln!(
        "the evaluation stopped {:.0} ms after the 504",
        stopped.as_secs_f64() * 1000.0
    );
    // Generous: at most the one rule that was running finishes.
    assert!(
        stopped < Duration::from_secs(8),
        "stopped only after {stopped:?}"
    );
}

#[test]
fn a_review_over_the_cel_budget_is_denied_at_once_naming_the_rule() {
    let scratch = Scratch::new("budget");
    std::fs::write(scratch.path("k.yaml"), SLOW_KATALOG).unwrap();
    let h = Harness::start("budget", Some(&scratch.path("k.yaml")), |_| {});
    // Four quadratic reviews of 5,000 containers at once (unbudgeted, each
    // ran until the 25 s timeout), and a small review measured meanwhile.
    let hostile: Vec<_> = (0..4)
        .map(|_| {
            let mut c = h.client().with_timeout(Duration::from_secs(60));
            std::thread::spawn(move || {
                let started = Instant::now();
                let r = c.post_json("/validate", &slow_review(5_000)).unwrap();
                (r.status, r.json().unwrap(), started.elapsed())
            })
        })
        .collect();
    let mut c = h.client();
    let mut small = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let r = c.post_json("/validate", &slow_review(3)).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(
            r.json().unwrap()["response"]["allowed"],
            true,
            "{}",
            r.text()
        );
        small.push(started.elapsed());
    }
    for t in hostile {
        let (status, review, took) = t.join().unwrap();
        assert_eq!(status, 200);
        let response = &review["response"];
        assert_eq!(response["allowed"], false, "{review}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("denied by katalog: [quadratic] failed to evaluate the rule: ")
                && message.contains("not evaluated: its estimated cost 325055007 is over the budget of 1000000 per evaluation (--cel-cost-limit), for a largest list or map of 5000 items"),
            "{message}"
        );
        eprintln!(
            "an over-budget review of 5,000 containers was answered in {:.0} ms",
            took.as_secs_f64() * 1000.0
        );
        assert!(took < Duration::from_secs(20), "took {took:?}");
    }
    small.sort();
    eprintln!(
        "meanwhile a 3-container review: median {:.1} ms, max {:.1} ms",
        small[small.len() / 2].as_secs_f64() * 1000.0,
        small[small.len() - 1].as_secs_f64() * 1000.0
    );
}

#[test]
fn with_a_client_ca_admission_is_served_only_to_clients_it_signed() {
    let scratch = Scratch::new("mtls");
    let client_ca = DevCa::generate().unwrap();
    std::fs::write(scratch.path("client-ca.crt"), client_ca.ca_pem()).unwrap();
    // Conversion and admission: crontab.yaml and the slow check side by side.
    let dir = scratch.path("katalog");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(crontab(), dir.join("crontab.yaml")).unwrap();
    std::fs::copy(
        repo().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("slow.yaml"), SLOW_KATALOG).unwrap();
    let h = Harness::start("mtls", Some(&dir), |c| {
        c.client_ca = Some(scratch.path("client-ca.crt"));
    });
    let review = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v1",
        vec![crontab_object(1, "v1beta1")],
    );
    let pod = pod_review("registry.internal/app:1");
    // Signed by the client CA: everything is served.
    let (cert, key) = client_ca.issue_client("kube-apiserver").unwrap();
    let mut trusted = h
        .client()
        .with_client_cert(cert.as_bytes(), key.as_bytes())
        .unwrap();
    for path in ["/convert", "/validate"] {
        let body = if path == "/convert" { &review } else { &pod };
        let r = trusted.post_json(path, body).unwrap();
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
    assert_eq!(trusted.get("/metrics").unwrap().status, 200);
    // No certificate: conversion (the apiserver presents none to conversion
    // webhooks) and probes only.
    let mut anonymous = h.client();
    let r = anonymous.post_json("/validate", &pod).unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        r.json().unwrap()["error"],
        "/validate needs a client certificate signed by the --client-ca"
    );
    let mut anonymous = h.client();
    for path in ["/metrics", "/katalog"] {
        assert_eq!(anonymous.get(path).unwrap().status, 403, "{path}");
    }
    assert_eq!(anonymous.get("/healthz").unwrap().status, 200);
    let r = anonymous.post_json("/convert", &review).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // A certificate another CA signed: the handshake fails.
    let other = DevCa::generate().unwrap();
    let (cert, key) = other.issue_client("kube-apiserver").unwrap();
    let mut impostor = h
        .client()
        .with_client_cert(cert.as_bytes(), key.as_bytes())
        .unwrap();
    match impostor.post_json("/convert", &review) {
        Ok(r) => panic!("another CA's certificate was served with {}", r.status),
        Err(e) => eprintln!("another CA's certificate: refused: {e}"),
    }
    let r = trusted.post_json("/validate", &pod).unwrap();
    assert_eq!(r.status, 200);

    // The client CA rotates (the file is replaced): new handshakes are
    // verified against the new CA, without a restart.
    write_atomic(&scratch.path("client-ca.crt"), other.ca_pem());
    let fresh = |cert: &str, key: &str| {
        h.client()
            .with_client_cert(cert.as_bytes(), key.as_bytes())
            .unwrap()
    };
    wait_for("the rotated client CA to verify its certificates", || {
        fresh(&cert, &key)
            .post_json("/validate", &pod)
            .is_ok_and(|r| r.status == 200)
    });
    let (old_cert, old_key) = client_ca.issue_client("kube-apiserver").unwrap();
    assert!(
        fresh(&old_cert, &old_key)
            .post_json("/convert", &review)
            .is_err(),
        "a certificate of the replaced CA is refused"
    );
}

/// Issue 31 item 6: `/katalog` (stats, last errors, the reload error) is
/// not served on the webhook port to anyone who reaches it: only on the
/// monitoring listener, or to clients with a certificate under --client-ca.
#[test]
fn the_summary_is_served_on_the_monitoring_listener_not_the_webhook_port() {
    let h = Harness::start("summary-port", Some(&crontab()), |_| {});
    let r = h.client().get("/katalog").unwrap();
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(
        r.json().unwrap()["error"],
        "/katalog is served on the --metrics-listen listener, or here with --client-ca to clients with a certificate"
    );
    assert_eq!(h.summary()["ready"], true);
    // With --client-ca: to clients with a certificate only.
    let scratch = Scratch::new("summary-port-ca");
    let client_ca = DevCa::generate().unwrap();
    std::fs::write(scratch.path("client-ca.crt"), client_ca.ca_pem()).unwrap();
    let h = Harness::start("summary-port-mtls", Some(&crontab()), |c| {
        c.client_ca = Some(scratch.path("client-ca.crt"));
    });
    assert_eq!(h.client().get("/katalog").unwrap().status, 403);
    let (cert, key) = client_ca.issue_client("kube-apiserver").unwrap();
    let mut trusted = h
        .client()
        .with_client_cert(cert.as_bytes(), key.as_bytes())
        .unwrap();
    let r = trusted.get("/katalog").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json().unwrap()["ready"], true);
}

/// Issue 31 item 8: with `--client-name`, a certificate the client CA
/// signed for another name fails its handshake, on every endpoint.
#[test]
fn with_client_names_only_the_pinned_names_are_served() {
    let scratch = Scratch::new("mtls-names");
    let client_ca = DevCa::generate().unwrap();
    std::fs::write(scratch.path("client-ca.crt"), client_ca.ca_pem()).unwrap();
    let dir = scratch.path("katalog");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(crontab(), dir.join("crontab.yaml")).unwrap();
    std::fs::copy(
        repo().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("admission.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("mtls-names", Some(&dir), |c| {
        c.client_ca = Some(scratch.path("client-ca.crt"));
        c.client_names = vec!["kube-apiserver".into(), "apiserver.example.com".into()];
    });
    let review = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v1",
        vec![crontab_object(1, "v1beta1")],
    );
    let pod = pod_review("registry.internal/app:1");
    let with = |cert: &str, key: &str| {
        h.client()
            .with_client_cert(cert.as_bytes(), key.as_bytes())
            .unwrap()
    };
    // The pinned name, as the common name or as a DNS name.
    for (cn, dns) in [
        ("kube-apiserver", vec![]),
        ("front-proxy", vec!["apiserver.example.com".to_string()]),
    ] {
        let (cert, key) = client_ca.issue_client_with_dns(cn, &dns).unwrap();
        let mut pinned = with(&cert, &key);
        for (path, body) in [("/validate", &pod), ("/convert", &review)] {
            let r = pinned.post_json(path, body).unwrap();
            assert_eq!(r.status, 200, "{cn} {dns:?} {path}: {}", r.text());
        }
    }
    // Signed by the same CA for another name: refused at the handshake.
    for (cn, dns) in [
        ("mallory", vec![]),
        (
            "mallory",
            vec!["kube-apiserver.evil.example.com".to_string()],
        ),
        ("kube-apiserver-2", vec![]),
    ] {
        let (cert, key) = client_ca.issue_client_with_dns(cn, &dns).unwrap();
        for (path, body) in [("/validate", &pod), ("/convert", &review)] {
            match with(&cert, &key).post_json(path, body) {
                Ok(r) => panic!("{cn} {dns:?} was served {path} with {}", r.text()),
                Err(e) => eprintln!("{cn} {dns:?} {path}: refused: {e}"),
            }
        }
    }
    // No certificate: as without names (conversion and probes only).
    let mut anonymous = h.client();
    assert_eq!(anonymous.post_json("/validate", &pod).unwrap().status, 403);
    let mut anonymous = h.client();
    assert_eq!(
        anonymous.post_json("/convert", &review).unwrap().status,
        200
    );
}

/// `katalog_evaluations_total` by place: (inline, pool, inline_stopped).
fn evaluations(probe: &mut HttpsClient) -> (u64, u64, u64) {
    let metrics = probe.get("/metrics").unwrap().text();
    let count = |place: &str| {
        let series = format!("katalog_evaluations_total{{place=\"{place}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series}in {metrics}"))
            .parse()
            .unwrap()
    };
    (count("inline"), count("pool"), count("inline_stopped"))
}

#[test]
fn a_small_review_is_evaluated_inline() {
    let scratch = Scratch::new("inline-katalog");
    std::fs::write(scratch.path("k.yaml"), ADMISSION_KATALOG).unwrap();
    // The default inline limit (2 ms); this Katalog has no CEL, whose
    // evaluations are what checks it, so a slow debug build is not stopped.
    let h = Harness::start("inline", Some(&scratch.path("k.yaml")), |_| {});
    let mut c = h.client();
    let r = c
        .post_json("/validate", &pod_review("docker.io/app"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["response"]["allowed"], false, "{r}");
    assert!(
        r["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("[internal-images]"),
        "{r}"
    );
    let r = c
        .post_json("/mutate", &pod_review("registry.internal/app"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["response"]["patchType"], "JSONPatch", "{r}");
    assert_eq!(evaluations(&mut c), (2, 0, 0));
    assert_eq!(in_flight_gauge(&mut c), "katalog_reviews_in_flight 0");
    drop(h);

    // A ConversionReview too.
    let h = Harness::start("inline-convert", Some(&crontab()), |c| {
        c.inline_limit = Duration::from_secs(60);
    });
    let mut c = h.client();
    let body = conversion_review(
        "apiextensions.k8s.io/v1",
        "stable.example.com/v2",
        vec![crontab_object(1, "v1")],
    );
    let r = c.post_json("/convert", &body).unwrap().json().unwrap();
    assert_eq!(r["response"]["result"]["status"], "Success", "{r}");
    assert_eq!(evaluations(&mut c), (1, 0, 0));
}

#[test]
fn with_no_inline_limit_every_review_goes_to_the_pool() {
    let scratch = Scratch::new("no-inline-katalog");
    std::fs::write(scratch.path("k.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("no-inline", Some(&scratch.path("k.yaml")), |c| {
        c.inline_limit = Duration::ZERO;
    });
    let mut c = h.client();
    for _ in 0..2 {
        let r = c
            .post_json("/validate", &pod_review("registry.internal/app"))
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(r["response"]["allowed"], true, "{r}");
    }
    assert_eq!(evaluations(&mut c), (0, 2, 0));
}

/// A CREATE review of a Pod with `n` containers (`n` ≥ 2) whose last one
/// takes the name of the one before it, with another image: the quadratic
/// checks of [`many_slow_rules`] fail, but only near their end.
fn duplicate_name_review(n: usize) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&slow_review(n)).unwrap();
    let containers = &mut review["request"]["object"]["spec"]["containers"];
    containers[n - 1] = json!({"name": format!("c{}", n - 2), "image": "registry.internal/other"});
    serde_json::to_vec(&review).unwrap()
}

#[test]
fn a_review_stopped_inline_is_answered_from_the_pool_and_closes_inline() {
    let scratch = Scratch::new("inline-stopped");
    std::fs::write(scratch.path("k.yaml"), many_slow_rules(5)).unwrap();
    // Stopped by the inline deadline: over 80 containers each rule is
    // estimated under the inline cost cap (100,000) but takes about 8 ms in
    // a debug build, so the second rule at the latest finds it passed.
    let h = Harness::start("inline-stopped", Some(&scratch.path("k.yaml")), |c| {
        c.inline_limit = Duration::from_millis(1);
    });
    let mut c = h.client();
    let r = c
        .post_json("/validate", &duplicate_name_review(80))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = r.json().unwrap();
    // The verdict of every rule run to its end, none stopped.
    assert_eq!(r["response"]["allowed"], false, "{r}");
    let message = r["response"]["status"]["message"].as_str().unwrap();
    for i in 0..5 {
        assert!(
            message.contains(&format!("[q{i}] the object fails `")),
            "{message}"
        );
    }
    for stop in [
        "evaluation stopped",
        "failed to evaluate",
        "--cel-cost-limit",
    ] {
        assert!(!message.contains(stop), "{message}");
    }
    assert_eq!(evaluations(&mut c), (0, 1, 1));
    // Inline is closed for 10 s: a small review goes to the pool.
    let r = c.post_json("/validate", &slow_review(3)).unwrap();
    assert_eq!(r.json().unwrap()["response"]["allowed"], true);
    assert_eq!(evaluations(&mut c), (0, 2, 1));
    assert_eq!(in_flight_gauge(&mut c), "katalog_reviews_in_flight 0");
    drop(h);

    // Stopped by the inline cost cap: over 100 containers one rule is
    // estimated at 131,107, so the attempt stops before it runs, however
    // long the inline limit.
    let h = Harness::start("inline-capped", Some(&scratch.path("k.yaml")), |c| {
        c.inline_limit = Duration::from_secs(60);
    });
    let mut c = h.client();
    let r = c.post_json("/validate", &slow_review(100)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = r.json().unwrap();
    assert_eq!(r["response"]["allowed"], true, "{r}");
    assert_eq!(evaluations(&mut c), (0, 1, 1));
}

#[test]
fn a_review_over_64_kib_goes_to_the_pool() {
    let scratch = Scratch::new("large-admission");
    std::fs::write(scratch.path("k.yaml"), ADMISSION_KATALOG).unwrap();
    let h = Harness::start("large-admission", Some(&scratch.path("k.yaml")), |c| {
        c.inline_limit = Duration::from_secs(60);
    });
    let mut c = h.client();
    let small = pod_review("registry.internal/app");
    let mut review: Value = serde_json::from_slice(&small).unwrap();
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"example.com/blob": "x".repeat(64 * 1024)});
    let large = serde_json::to_vec(&review).unwrap();
    assert!(large.len() > 64 * 1024, "{}", large.len());
    for body in [&small, &large] {
        let r = c.post_json("/validate", body).unwrap().json().unwrap();
        assert_eq!(r["response"]["allowed"], true, "{r}");
    }
    assert_eq!(evaluations(&mut c), (1, 1, 0));
}

/// A check that reads its pattern from the object (the Pod's `pattern`
/// annotation) and searches every container's name with it.
const PATTERN_FROM_THE_OBJECT: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: pattern}
spec:
  admission:
    validations:
      - name: pattern
        resources: [v1/pods]
        check:
          cel: "object.spec.containers.all(c, !c.name.matches(object.metadata.annotations['pattern']))"
"#;

/// A Pod review of `n` containers whose `pattern` annotation is `len`
/// bytes long (and matches none of them).
fn long_pattern_review(len: usize, n: usize) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&slow_review(n)).unwrap();
    review["request"]["object"]["metadata"]["annotations"] = json!({"pattern": "a".repeat(len)});
    serde_json::to_vec(&review).unwrap()
}

/// Issue 29 item 2: a 34 KB pattern from the object over 200 containers,
/// in a review small enough to be evaluated inline. Each `matches()` is
/// charged ten units per byte of a pattern that long before it compiles:
/// the inline attempt stops at its cost cap (the connection thread is not
/// kept compiling), and on the pool the rule fails closed when the charges
/// pass the budget instead of compiling the pattern 200 times.
#[test]
fn a_long_pattern_from_the_object_is_charged_and_leaves_the_connection_threads() {
    let scratch = Scratch::new("long-pattern");
    std::fs::write(scratch.path("k.yaml"), PATTERN_FROM_THE_OBJECT).unwrap();
    let h = Harness::start("long-pattern", Some(&scratch.path("k.yaml")), |c| {
        // However long inline may take, the charges stop it.
        c.inline_limit = Duration::from_secs(2);
    });
    let mut c = h.client();
    let review = long_pattern_review(34_000, 200);
    assert!(review.len() < 64 * 1024, "evaluated inline first");
    let r = c.post_json("/validate", &review).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = r.json().unwrap();
    assert_eq!(r["response"]["allowed"], false, "{r}");
    let message = r["response"]["status"]["message"].as_str().unwrap();
    // Charged 340,000 units before it compiles: over the inline cap, so
    // never compiled inline. On the pool each compile fails (over 1 MiB), an
    // error `all` absorbs as cel-go's does until an element decides; the
    // third charge passes the budget of 1,000,000 and ends the evaluation
    // (an error past the budget is never absorbed): two compiles, not 200.
    assert!(
        message.contains("[pattern]")
            && message.contains("matches(): stopped: its regular expressions cost over the budget"),
        "{message}"
    );
    assert!(
        message.len() < 2_000,
        "the pattern is not copied whole: {message}"
    );
    assert_eq!(evaluations(&mut c), (0, 1, 1));
    // A short pattern is answered as before.
    let r = c
        .post_json("/validate", &long_pattern_review(3, 5))
        .unwrap();
    assert_eq!(r.json().unwrap()["response"]["allowed"], true);
}

/// Whether a TLS 1.2-only client (rustls, AEAD suites) completes its
/// handshake with the server at `addr`.
fn tls12_handshake(addr: std::net::SocketAddr) -> Result<(), String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca().ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Bounded: a handshake is a few round trips.
    for _ in 0..20 {
        if !conn.is_handshaking() {
            return Ok(());
        }
        conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    Err("the handshake did not finish".into())
}

#[test]
fn tls_min_version_1_3_refuses_a_tls_1_2_client() {
    // By default a TLS 1.2 client is served (the test client works).
    let h = Harness::start("tls12", Some(&crontab()), |_| {});
    assert_eq!(tls12_handshake(h.addr()), Ok(()));
    drop(h);
    let h = Harness::start("tls13", Some(&crontab()), |c| {
        c.tls_min_version = katalog_runtime::certs::tls::TlsMinVersion::Tls13;
    });
    let e = tls12_handshake(h.addr()).unwrap_err();
    assert!(
        e.contains("ProtocolVersion") || e.contains("protocol version"),
        "{e}"
    );
    // A TLS 1.3 client is served.
    assert_eq!(h.client().get("/healthz").unwrap().status, 200);
}
