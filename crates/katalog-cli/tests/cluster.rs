//! The built `katalog` binary against a real kube-apiserver and etcd
//! (katalog-testenv). `katalog serve --register --self-signed-secret`: the
//! flags reach the Secret, the server and the housekeeper; the apiserver
//! converts through the binary (reached at `https://127.0.0.1:PORT` only);
//! SIGTERM stops it cleanly and removes its private certificate directory; a
//! restart reuses the Secret; `katalog migrate-storage` rewrites through it;
//! with `cleanupOnShutdown`, SIGTERM removes the webhook configurations.

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use katalog_testenv::TestEnv;
use serde_json::{Value, json};

const SECRET: &str = "katalog-cli-certs";
const NAMESPACE: &str = "katalog-system";
const CRD: &str = "crontabs.stable.example.com";
const WAIT: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[track_caller]
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn get_json(env: &TestEnv, args: &[&str]) -> Option<Value> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = env.kubectl(&all);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Polls every 100 ms, at most `WAIT`.
#[track_caller]
fn eventually<T>(what: &str, mut attempt: impl FnMut() -> Result<T, String>) -> T {
    let started = Instant::now();
    let mut last = String::new();
    for _ in 0..600 {
        match attempt() {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        if started.elapsed() >= WAIT {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: still not so after {WAIT:?}: {last}");
}

/// A free loopback port (bound, then released for the server to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The running binary; its stderr lines arrive on `lines`.
struct Serve {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Serve {
    fn start(env: &TestEnv, port: u16) -> Serve {
        Serve::start_with(env, port, Path::new("katalogs/crontab.yaml"), "katalog-cli")
    }

    fn start_with(env: &TestEnv, port: u16, katalog: &Path, name: &str) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_katalog"))
            .args([
                "serve",
                "--katalog",
                &katalog.to_string_lossy(),
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--register",
                "--register-name",
                name,
                "--register-url",
                &format!("https://127.0.0.1:{port}"),
                "--self-signed-secret",
                &format!("{NAMESPACE}/{SECRET}"),
                "--kubeconfig",
                &env.kubeconfig().to_string_lossy(),
                "--workers",
                "1",
            ])
            .current_dir(root())
            .env_remove("KATALOG_KATALOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the katalog binary runs");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[katalog serve] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Serve {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `text`.
    #[track_caller]
    fn line(&mut self, text: &str) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.contains(text)) {
            return l.clone();
        }
        let deadline = Instant::now() + WAIT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(text) {
                        return l;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "katalog serve never printed {text:?}; it printed:\n{}",
            self.seen.join("\n")
        );
    }

    /// Every stderr line so far is plain text: no terminal colour codes
    /// when stderr is not a terminal (a log collector, a file).
    #[track_caller]
    fn assert_plain_logs(&mut self) {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        assert!(!self.seen.is_empty());
        for l in &self.seen {
            assert!(!l.contains('\x1b'), "a colour code on stderr: {l:?}");
        }
    }

    /// SIGTERM, then the exit status (SIGKILL after `WAIT`).
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("katalog serve did not stop within {WAIT:?} of SIGTERM");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn secret_ca(env: &TestEnv) -> Result<String, String> {
    get_json(env, &["get", "secret", SECRET, "-n", NAMESPACE])
        .and_then(|s| s["data"]["ca.crt"].as_str().map(String::from))
        .ok_or_else(|| "no Secret with a ca.crt yet".into())
}

fn crd_ca(env: &TestEnv) -> Option<String> {
    get_json(env, &["get", "crd", CRD]).and_then(|c| {
        c["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
            .as_str()
            .map(String::from)
    })
}

/// Create at v1beta1, read at v2: the apiserver converts through the binary.
fn convert_through(env: &TestEnv, name: &str) -> Result<(), String> {
    let object = json!({
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"cronSpec": "0 3 * * *", "image": "registry.example.com/backup:1"},
    });
    let out = env.kubectl_stdin(["create", "-f", "-"], object.to_string());
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let got = get_json(env, &["get", "crontabs.v2.stable.example.com", name])
        .ok_or("GET at v2 failed")?;
    if got["spec"]["container"]["image"] != "registry.example.com/backup:1" {
        return Err(format!("at v2: {got}"));
    }
    Ok(())
}

#[test]
fn serve_with_a_self_signed_secret_registers_converts_and_restarts() {
    let env = TestEnv::start().unwrap_or_else(|e| panic!("{e}"));
    ok(env.kubectl([
        "apply",
        "-f",
        &root().join("katalogs/crontab.crd.yaml").to_string_lossy(),
    ]));
    ok(env.kubectl([
        "wait",
        "--for=condition=Established",
        &format!("crd/{CRD}"),
        "--timeout=30s",
    ]));
    ok(env.kubectl(["create", "namespace", NAMESPACE]));

    let port = free_port();
    let mut serve = Serve::start(&env, port);
    let created = serve.line("certificate: Secret katalog-system/katalog-cli-certs");
    assert!(
        created.ends_with("created (a new CA and serving certificate: the Secret does not exist)"),
        "{created}"
    );
    let ca = eventually("the Secret", || secret_ca(&env));
    eventually("the CRD conversion with the Secret's CA", || {
        (crd_ca(&env).as_ref() == Some(&ca))
            .then_some(())
            .ok_or_else(|| format!("caBundle {:?}", crd_ca(&env)))
    });
    eventually("a conversion through the binary", || {
        convert_through(&env, "a")
    });

    // The private certificate directory exists while it serves ...
    let prefix = format!("katalog-{NAMESPACE}-{SECRET}-{}-", serve.child.id());
    let dirs: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
        .expect("the temporary directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    assert_eq!(dirs.len(), 1, "{prefix}*: {dirs:?}");
    let dir = dirs[0].clone();
    assert!(dir.join("tls.pem").is_file(), "{}", dir.display());
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&dir)
            .expect("the directory")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        let mode = std::fs::metadata(dir.join("tls.pem"))
            .expect("tls.pem")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    serve.assert_plain_logs();
    // ... and is removed by a graceful stop.
    let status = serve.terminate();
    assert!(status.success(), "katalog serve exited with {status}");
    assert!(!dir.exists(), "{} is left behind", dir.display());

    // A restart reuses the Secret: same CA, still registered, converting.
    let mut serve = Serve::start(&env, port);
    let reused = serve.line("certificate: Secret katalog-system/katalog-cli-certs");
    assert!(reused.ends_with(" unchanged"), "{reused}");
    assert_eq!(secret_ca(&env).as_ref(), Ok(&ca));
    eventually("a conversion through the restarted binary", || {
        convert_through(&env, "b")
    });
    assert_eq!(crd_ca(&env), Some(ca.clone()));

    // katalog migrate-storage through the binary, while it converts: both
    // CronTabs are rewritten at the storage version, one per page.
    let migrate = |crd: &str| {
        Command::new(env!("CARGO_BIN_EXE_katalog"))
            .args([
                "migrate-storage",
                "--crd",
                crd,
                "--page-size",
                "1",
                "--kubeconfig",
            ])
            .arg(env.kubeconfig())
            .current_dir(root())
            .output()
            .expect("the katalog binary runs")
    };
    let out = migrate(CRD);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "{CRD}: 2 rewritten at v1, 0 gone, 0 conflicts retried, 0 failed in "
        )) && stdout.ends_with("s; storedVersions [v1] left as they were (nothing to prune)\n"),
        "{stdout}"
    );
    let progress: Vec<&str> = stderr.lines().collect();
    assert_eq!(progress.len(), 2, "{stderr}");
    assert!(progress[0].starts_with("migrated 1/"), "{stderr}");
    assert!(
        progress[1].starts_with("migrated 2/")
            && progress[1].ends_with("continue token: (none: last page)"),
        "{stderr}"
    );
    let out = migrate("nope.example.com");
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: failed to find CustomResourceDefinition nope.example.com: it does not exist\n"
    );

    let status = serve.terminate();
    assert!(status.success(), "katalog serve exited with {status}");

    // With security.cleanupOnShutdown, a SIGTERM removes the configurations.
    let dir = std::env::temp_dir().join(format!("katalog-cli-cleanup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a Katalog directory");
    std::fs::copy(
        root().join("katalogs/crontab.yaml"),
        dir.join("crontab.yaml"),
    )
    .expect("copying crontab.yaml");
    // The CRD its `crd:` names, beside it.
    std::fs::copy(
        root().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    std::fs::write(dir.join("cleanup.yaml"), CLEANUP).expect("writing cleanup.yaml");
    let mut serve = Serve::start_with(&env, port, &dir, "katalog-cleanup");
    serve.line("certificate: Secret katalog-system/katalog-cli-certs unchanged");
    let vwc = "katalog-cleanup-validating";
    let registered = eventually("the validating configuration", || {
        get_json(&env, &["get", "validatingwebhookconfiguration", vwc])
            .ok_or_else(|| format!("no {vwc} yet"))
    });
    assert_eq!(
        registered["webhooks"][0]["clientConfig"]["caBundle"].as_str(),
        Some(ca.as_str())
    );
    let status = serve.terminate();
    assert!(status.success(), "katalog serve exited with {status}");
    let out = env.kubectl(["get", "validatingwebhookconfiguration", vwc]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{vwc} is still there after SIGTERM"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const CLEANUP: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-cleanup
spec:
  security:
    cleanupOnShutdown: true
  admission:
    validations:
      - name: crontab-registry
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { prefix: registry.example.com/ }
        message: crontab images come from registry.example.com
"#;
