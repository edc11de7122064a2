//! What the cluster tests share: a real control plane (katalog-testenv),
//! a katalog server in the test process registered with it by
//! `clientConfig.url` only, kubectl helpers, and a raw read of etcd to see
//! which version an object is stored at. (Scratch directories, `ok`,
//! `eventually` and `katalog serve` as a process are in the kit's root.)
//!
//! Everything listens and connects on 127.0.0.1 only.

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use katalog_lang::Ir;
use katalog_runtime::certs::tls::DevCa;
use katalog_runtime::cluster::registration::{self, Registration, Target};
use katalog_runtime::{Config, ServerThread};
use katalog_testenv::TestEnv;
use serde_json::{Value, json};

use crate::{Scratch, ok, repo_path};

/// A file of `tests/crds/` (CRDs the cluster tests apply).
pub fn fixture(name: &str) -> PathBuf {
    repo_path("tests/crds").join(name)
}

/// The CA that signs every webhook serving certificate of this process; its
/// PEM is the `caBundle` the apiserver is given.
pub fn ca() -> &'static DevCa {
    static CA: OnceLock<DevCa> = OnceLock::new();
    CA.get_or_init(|| DevCa::generate().expect("a development CA"))
}

/// Seconds with one decimal, for the timing lines.
pub fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// A current-thread runtime and a kube-rs client for `kubeconfig`; the
/// runtime drives the client's requests in `block_on`.
pub fn kube_client(kubeconfig: &Path) -> (tokio::runtime::Runtime, kube::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let client = rt
        .block_on(katalog_runtime::cluster::client(Some(kubeconfig)))
        .unwrap_or_else(|e| panic!("{e}"));
    (rt, client)
}

/// Starts a control plane and says how long it took.
pub fn start_env(test: &str) -> TestEnv {
    let started = Instant::now();
    let env = TestEnv::start().unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[{test}] control plane ready in {} at {}",
        secs(started.elapsed()),
        env.server_url()
    );
    env
}

/// Admission for CronTabs, served beside `katalogs/crontab.yaml` by the
/// cluster tests: a validation (images from registry.example.com) and a
/// mutation (a default timeout of 30).
pub const CRONTAB_ADMISSION: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-admission
spec:
  admission:
    validations:
      - name: crontab-registry
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { prefix: registry.example.com/ }
        message: crontab images come from registry.example.com
    mutations:
      - name: crontab-timeout
        resources: [stable.example.com/v1/crontabs]
        default: { path: spec.timeoutSeconds, value: 30 }
"#;

/// A katalog server on 127.0.0.1:<ephemeral> serving one Katalog, with a
/// certificate from [`ca`] for 127.0.0.1.
pub struct Katalog {
    server: Option<ServerThread>,
    _scratch: Scratch,
    pub addr: SocketAddr,
    pub ir: Arc<Ir>,
    /// The server's state (the housekeeper follows it).
    pub state: Arc<katalog_runtime::serving::state::State>,
}

impl Katalog {
    pub fn start(katalog: &Path) -> Katalog {
        let scratch = Scratch::new("server");
        let (cert, key) = ca().issue(&[]).expect("a serving certificate");
        std::fs::write(scratch.path("tls.crt"), cert).expect("writing tls.crt");
        std::fs::write(scratch.path("tls.key"), key).expect("writing tls.key");
        let (cert, key) = (scratch.path("tls.crt"), scratch.path("tls.key"));
        Katalog::start_with(katalog, &cert, &key, scratch)
    }

    /// Serve `katalog` with the certificate and key in the given files.
    pub fn start_with(katalog: &Path, cert: &Path, key: &Path, scratch: Scratch) -> Katalog {
        Katalog::start_configured(katalog, cert, key, scratch, |_| {})
    }

    /// [`Katalog::start_with`], with `tweak` applied to the configuration.
    pub fn start_configured(
        katalog: &Path,
        cert: &Path,
        key: &Path,
        scratch: Scratch,
        tweak: impl FnOnce(&mut Config),
    ) -> Katalog {
        let mut config = Config::new(katalog.to_path_buf(), cert.to_path_buf(), key.to_path_buf());
        config.listen = "127.0.0.1:0".parse().expect("an address");
        config.workers = 2;
        tweak(&mut config);
        let server = ServerThread::spawn(config).expect("the katalog server starts");
        let ir = server
            .state
            .current()
            .unwrap_or_else(|| {
                panic!(
                    "{} did not load: {:?}",
                    katalog.display(),
                    server.state.last_error()
                )
            })
            .ir
            .clone();
        Katalog {
            addr: server.addr,
            state: server.state.clone(),
            server: Some(server),
            _scratch: scratch,
            ir,
        }
    }

    /// Serve a directory Katalog made of `katalogs/crontab.yaml` and `extra`
    /// (as `admission.yaml`); the directory is returned so a test can change it.
    pub fn crontab_with(name: &str, extra: &str) -> (Scratch, Katalog) {
        let dir = Scratch::new(name);
        let crontab =
            std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).expect("crontab.yaml");
        std::fs::write(dir.path("crontab.yaml"), crontab).expect("writing crontab.yaml");
        // The CRD its `crd:` names, beside it (a file of CRDs is not a Katalog source).
        std::fs::copy(
            repo_path("katalogs/crontab.crd.yaml"),
            dir.path("crontab.crd.yaml"),
        )
        .expect("copying crontab.crd.yaml");
        std::fs::write(dir.path("admission.yaml"), extra).expect("writing admission.yaml");
        let server = Katalog::start(&dir.path(""));
        (dir, server)
    }

    /// `https://127.0.0.1:<port>`: the only way the apiserver reaches it.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The server's own counters (what `GET /katalog` answers, which the
    /// HTTPS port serves only behind `--client-ca`).
    pub fn stats(&self) -> Value {
        self.state.summary()
    }
}

impl Drop for Katalog {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// A registration that points the apiserver at `url` (never a Service).
pub fn registration(name: &str, url: &str) -> Registration {
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    Registration {
        name: name.into(),
        target: Target::Url(url.into()),
        ca_bundle: ca().ca_pem().as_bytes().to_vec(),
    }
}

/// Applies the webhook configurations of `registration::manifests` (the CRD
/// conversion patches are applied by [`register_conversion`]).
pub fn register_admission(env: &TestEnv, ir: &Ir, reg: &Registration) {
    let items: Vec<Value> = registration::manifests(ir, reg)
        .into_iter()
        .filter(|m| m["kind"] != "CustomResourceDefinition")
        .collect();
    assert!(!items.is_empty(), "the Katalog declares no admission");
    for item in &items {
        for hook in item["webhooks"].as_array().into_iter().flatten() {
            let url = hook["clientConfig"]["url"].as_str().unwrap_or("");
            assert!(url.starts_with("https://127.0.0.1:"), "{hook}");
            assert!(hook["clientConfig"].get("service").is_none(), "{hook}");
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    ok(env.kubectl_stdin(["apply", "-f", "-"], list.to_string()));
}

/// `kubectl patch crd NAME --type merge -p <patch>` for each conversion patch.
pub fn register_conversion(env: &TestEnv, ir: &Ir, reg: &Registration) {
    let patches = registration::crd_conversion_patches(ir, reg);
    assert!(!patches.is_empty(), "the Katalog declares no conversion");
    for (name, patch) in patches {
        let url = &patch["spec"]["conversion"]["webhook"]["clientConfig"]["url"];
        assert!(
            url.as_str()
                .is_some_and(|u| u.starts_with("https://127.0.0.1:")),
            "{patch}"
        );
        ok(env.kubectl([
            "patch",
            "crd",
            &name,
            "--type",
            "merge",
            "-p",
            &patch.to_string(),
        ]));
    }
}

/// Applies a CRD file and waits until it is Established.
pub fn apply_crds(env: &TestEnv, file: &Path, names: &[&str]) {
    ok(env.kubectl(["apply", "-f", &file.to_string_lossy()]));
    for name in names {
        ok(env.kubectl([
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
            "--timeout=30s",
        ]));
    }
}

/// Makes `version` the only storage version of the CRD (a JSON patch that
/// tests each version's name first).
pub fn set_storage_version(env: &TestEnv, crd: &str, version: &str) {
    let current = get_json(env, &["get", "crd", crd]);
    let mut ops = Vec::new();
    for (i, v) in current["spec"]["versions"]
        .as_array()
        .expect("spec.versions")
        .iter()
        .enumerate()
    {
        ops.push(
            json!({"op": "test", "path": format!("/spec/versions/{i}/name"), "value": v["name"]}),
        );
        ops.push(json!({"op": "replace", "path": format!("/spec/versions/{i}/storage"), "value": v["name"] == version}));
    }
    ok(env.kubectl([
        "patch",
        "crd",
        crd,
        "--type",
        "json",
        "-p",
        &Value::Array(ops).to_string(),
    ]));
    let after = get_json(env, &["get", "crd", crd]);
    let stored: Vec<&str> = after["spec"]["versions"]
        .as_array()
        .expect("spec.versions")
        .iter()
        .filter(|v| v["storage"] == true)
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(stored, [version], "{after}");
}

fn describe(out: &Output) -> String {
    format!(
        "kubectl exited with {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts kubectl failed; its stderr.
#[track_caller]
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure: {}",
        describe(&out)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kubectl <args> -o json`, parsed.
#[track_caller]
pub fn get_json(env: &TestEnv, args: &[&str]) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(env.kubectl(&all))).expect("kubectl printed JSON")
}

/// `kubectl <args> -o json`, parsed; `None` when kubectl fails (a poll's
/// "not yet").
pub fn try_get_json(env: &TestEnv, args: &[&str]) -> Option<Value> {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", "json"]);
    let out = env.kubectl(&all);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// `kubectl create -f -` of one object (JSON).
pub fn create(env: &TestEnv, object: &Value) -> Output {
    env.kubectl_stdin(["create", "-f", "-"], object.to_string())
}

/// How long a restore may take before a test fails (the target is 2 s; the
/// tests assert that separately, on the measured time).
pub const RESTORE: Duration = Duration::from_secs(10);

/// Polls `done` every 50 ms, at most [`RESTORE`]; how long it took.
#[track_caller]
pub fn within(what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    for _ in 0..1000 {
        if done() {
            return started.elapsed();
        }
        if started.elapsed() >= RESTORE {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not so after {}", secs(started.elapsed()));
}

/// The object as etcd stores it (the apiserver keeps custom resources as
/// JSON), read through etcd's JSON gateway on its loopback client URL.
pub fn etcd_get(env: &TestEnv, key: &str) -> Option<Value> {
    let addr: SocketAddr = env
        .etcd_url()
        .trim_start_matches("http://")
        .parse()
        .expect("etcd listens on an IP:port");
    assert!(addr.ip().is_loopback());
    let body = json!({"key": base64_encode(key.as_bytes())}).to_string();
    let mut tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("etcd");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok();
    tcp.set_write_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        tcp,
        "POST /v3/kv/range HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("writing to etcd");
    let response = katalog_runtime::http::client::read_response(&mut BufReader::new(tcp))
        .expect("etcd answers");
    assert_eq!(response.status, 200, "{}", response.text());
    let v = response.json().expect("etcd answers JSON");
    let value = v["kvs"][0]["value"].as_str()?;
    serde_json::from_slice(&base64_decode(value)).ok()
}

/// The apiVersion an object is stored at.
pub fn stored_version(env: &TestEnv, key: &str) -> String {
    etcd_get(env, key)
        .and_then(|v| v["apiVersion"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{key} is not in etcd"))
}

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let Some(v) = ALPHABET.iter().position(|a| *a == c) else {
            continue;
        };
        buf = (buf << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    out
}

/// The milliseconds kubectl `-v=6` reports for its (last) response.
pub fn request_millis(stderr: &str) -> Option<u64> {
    stderr.lines().rev().find_map(|line| {
        if let Some(rest) = line.split("milliseconds=").nth(1) {
            return rest.split_whitespace().next()?.parse().ok();
        }
        let before = line.split(" milliseconds").next()?;
        before.rsplit(' ').next()?.parse().ok()
    })
}

#[test]
fn base64_round_trips() {
    for s in ["", "a", "ab", "abc", "/registry/stable.example.com/x"] {
        assert_eq!(base64_decode(&base64_encode(s.as_bytes())), s.as_bytes());
    }
    assert_eq!(base64_encode(b"ab"), "YWI=");
}
