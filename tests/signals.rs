//! `katalog serve` as a process: SIGINT (Ctrl-C) drains the requests in
//! flight like SIGTERM does, SIGQUIT does not.

use std::time::Duration;

use katalog_runtime::certs::tls::DevCa;
use katalog_runtime::http::client::HttpsClient;
use katalog_tests::{Scratch, Serve, free_port};
use serde_json::{Value, json};

/// A Katalog whose one check is quadratic in the number of containers: a
/// review of a few hundred takes a while in a debug build.
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
    .expect("a review")
}

struct Server {
    serve: Serve,
    port: u16,
    ca: String,
    _scratch: Scratch,
}

/// A scratch directory with a serving certificate of a new CA
/// (`tls.crt`, `tls.key`) and the slow Katalog (`k.yaml`), and the CA.
fn serving_files(name: &str) -> (Scratch, DevCa) {
    let scratch = Scratch::new(name);
    let ca = DevCa::generate().expect("a CA");
    let (cert, key) = ca.issue(&[]).expect("a certificate");
    std::fs::write(scratch.path("tls.crt"), cert).expect("tls.crt");
    std::fs::write(scratch.path("tls.key"), key).expect("tls.key");
    std::fs::write(scratch.path("k.yaml"), SLOW_KATALOG).expect("k.yaml");
    (scratch, ca)
}

fn start(name: &str) -> Server {
    let (scratch, ca) = serving_files(name);
    let port = free_port();
    let path = |n: &str| scratch.path(n).to_string_lossy().into_owned();
    let mut serve = Serve::start(&[
        "serve".into(),
        "--katalog".into(),
        path("k.yaml"),
        "--tls-cert".into(),
        path("tls.crt"),
        "--tls-key".into(),
        path("tls.key"),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--request-timeout".into(),
        "120".into(),
        "--shutdown-grace".into(),
        "60".into(),
        // The quadratic check is over the default CEL budget, which would
        // deny it at once instead of keeping it in flight.
        "--cel-cost-limit".into(),
        "1000000000".into(),
    ]);
    serve.wait_for_line("katalog serving", Duration::from_secs(30));
    Server {
        serve,
        port,
        ca: ca.ca_pem().to_string(),
        _scratch: scratch,
    }
}

impl Server {
    fn client(&self) -> HttpsClient {
        HttpsClient::new(
            format!("127.0.0.1:{}", self.port)
                .parse()
                .expect("an address"),
            self.ca.as_bytes(),
            "localhost",
        )
        .expect("a client")
        .with_timeout(Duration::from_secs(120))
    }

    /// A slow review on its own thread, once the server counts it in flight.
    fn review_in_flight(&self) -> std::thread::JoinHandle<Result<u16, String>> {
        let mut first = self.client();
        let body = slow_review(500);
        let running = std::thread::spawn(move || {
            first
                .post_json("/validate", &body)
                .map(|r| r.status)
                .map_err(|e| e.to_string())
        });
        let mut probe = self.client();
        katalog_tests::eventually("the review in flight", Duration::from_secs(30), || {
            let text = probe.get("/metrics").map_err(|e| e.to_string())?.text();
            text.contains("katalog_reviews_in_flight 1")
                .then_some(())
                .ok_or(text)
        });
        running
    }
}

#[test]
fn sigint_drains_the_requests_in_flight_like_sigterm() {
    for signal in ["INT", "TERM"] {
        let mut server = start(&format!("sig{signal}"));
        let review = server.review_in_flight();
        server.serve.signal(signal);
        let status = review.join().expect("the review thread");
        assert_eq!(
            status,
            Ok(200),
            "SIG{signal}: the review in flight was not answered"
        );
        assert_eq!(server.serve.wait(Duration::from_secs(60)), Some(0));
        server
            .serve
            .wait_for_line(&format!("SIG{signal}: draining"), Duration::from_secs(1));
        server
            .serve
            .wait_for_line("katalog stopped", Duration::from_secs(1));
    }
}

#[test]
fn sigquit_stops_at_once() {
    let mut server = start("sigquit");
    let review = server.review_in_flight();
    server.serve.signal("QUIT");
    assert_eq!(server.serve.wait(Duration::from_secs(30)), Some(0));
    assert!(
        review.join().expect("the review thread").is_err(),
        "SIGQUIT let the review finish"
    );
}

/// `katalog serve` runs with mimalloc's purge delay at 50 ms (the setting
/// it is measured and deployed with) unless the operator set it — under
/// any case of the name, or mimalloc's older name — in which case the
/// operator's value stays; the process is the same one.
#[test]
fn serve_runs_with_the_allocator_purge_delay_unless_given() {
    let environ = |pid: u32| -> Vec<String> {
        std::fs::read(format!("/proc/{pid}/environ"))
            .expect("the environment of the process")
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .filter(|v| v.to_ascii_uppercase().starts_with("MIMALLOC_"))
            .collect()
    };
    let cases: [(Option<(&str, &str)>, &str); 4] = [
        (None, "MIMALLOC_PURGE_DELAY=50"),
        (
            Some(("MIMALLOC_PURGE_DELAY", "1000")),
            "MIMALLOC_PURGE_DELAY=1000",
        ),
        (
            Some(("mimalloc_purge_delay", "0")),
            "mimalloc_purge_delay=0",
        ),
        (Some(("MIMALLOC_RESET_DELAY", "")), "MIMALLOC_RESET_DELAY="),
    ];
    for (given, want) in cases {
        let scratch = Scratch::new("purge-delay");
        std::fs::write(scratch.path("k.yaml"), SLOW_KATALOG).expect("k.yaml");
        let port = free_port();
        let args: Vec<String> = [
            "serve",
            "--katalog",
            &scratch.path("k.yaml").to_string_lossy(),
            "--dev-cert-dir",
            &scratch.path("certs").to_string_lossy(),
            "--listen",
            &format!("127.0.0.1:{port}"),
        ]
        .map(String::from)
        .to_vec();
        let mut serve = Serve::start_with(&args, |c| {
            for (name, _) in std::env::vars_os() {
                if name
                    .to_string_lossy()
                    .to_ascii_uppercase()
                    .starts_with("MIMALLOC_")
                {
                    c.env_remove(name);
                }
            }
            if let Some((name, value)) = given {
                c.env(name, value);
            }
        });
        serve.wait_for_line("katalog serving", Duration::from_secs(30));
        assert_eq!(
            environ(serve.pid()),
            vec![want.to_string()],
            "given {given:?}"
        );
        serve.signal("TERM");
    }
}

/// Issue 35 item 4: `katalog serve ... 2>&1 | head -2`. Once the reader of
/// its log pipe has gone, every log line fails to be written; the server
/// goes on serving, and SIGTERM still drains it and it exits 0.
#[test]
fn a_closed_log_pipe_neither_stops_nor_deafens_the_server() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let (scratch, ca) = serving_files("closed-log-pipe");
    let port = free_port();
    let path = |n: &str| scratch.path(n).to_string_lossy().into_owned();
    // Both streams on one pipe, as `2>&1 |` gives them (`exec`: the shell's
    // process is the server's).
    let mut child = KillOnDrop(
        Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 2>&1"#)
            .arg(katalog_tests::katalog_bin())
            .args(["serve", "--katalog", &path("k.yaml")])
            .args([
                "--tls-cert",
                &path("tls.crt"),
                "--tls-key",
                &path("tls.key"),
            ])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .current_dir(katalog_tests::repo())
            .env_remove("KATALOG_KATALOG")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the katalog binary runs"),
    );
    let child = &mut child.0;
    // `head -2`: two lines, then the reader goes.
    let mut reader = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut seen = String::new();
    for _ in 0..2 {
        reader.read_line(&mut seen).expect("a line of the server");
    }
    drop(reader);
    let mut client = HttpsClient::new(
        format!("127.0.0.1:{port}").parse().expect("an address"),
        ca.ca_pem().as_bytes(),
        "localhost",
    )
    .expect("a client")
    .with_timeout(Duration::from_secs(30));
    // The server listens once it logged `katalog serving` (one of the two
    // lines, or the next one).
    katalog_tests::eventually("the server to answer", Duration::from_secs(30), || {
        client
            .get("/healthz")
            .map(|r| r.status)
            .map_err(|e| e.to_string())
    });
    // Each review logs a line, into the closed pipe.
    for _ in 0..5 {
        let r = client
            .post_json("/validate", &slow_review(1))
            .expect("a review is answered");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = child.try_wait().expect("the server's status") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        exited.map(|s| s.code()),
        Some(Some(0)),
        "after {seen:?} and a closed pipe, SIGTERM did not stop the server with 0 ({exited:?})"
    );
}

/// A child process killed (and reaped) when the test ends, also on a panic.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
