//! Load tool: drive a real `katalog serve` process over TLS keep-alive on
//! loopback and report reviews/s, p50/p99 latency, and the server's RSS
//! idle and under load; then measure how long a Katalog reload takes to be
//! served.
//!
//! ```text
//! cargo build --release -p katalog-cli -p katalog-benches
//! target/release/katalog-load [--katalog-bin target/release/katalog] [--secs 10] [--clients 2]
//! ```
//!
//! Everything stays on 127.0.0.1; every loop is bounded by count and time.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use katalog_benches::fixtures::conversion_review;
use katalog_runtime::client::HttpsClient;
use serde_json::{Value, json};

const MAX_REQUESTS_PER_SCENARIO: usize = 200_000;

struct Args {
    katalog_bin: PathBuf,
    secs: f64,
    clients: usize,
}

fn args() -> Args {
    let mut a = Args {
        katalog_bin: PathBuf::from("target/release/katalog"),
        secs: 10.0,
        clients: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--katalog-bin" => a.katalog_bin = PathBuf::from(value),
            "--secs" => a.secs = value.parse().unwrap_or(a.secs),
            "--clients" => a.clients = value.parse().unwrap_or(a.clients).max(1),
            other => {
                eprintln!("unknown flag {other}; flags: --katalog-bin PATH --secs S --clients N");
                std::process::exit(2);
            }
        }
    }
    a
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

struct Server {
    child: Child,
    addr: std::net::SocketAddr,
    ca: Vec<u8>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
    }
}

fn start_server(bin: &Path, dir: &Path) -> Server {
    let port = free_port();
    let log = std::fs::File::create(dir.join("server.log")).expect("log file");
    let child = Command::new(bin)
        .args(["serve", "--katalog"])
        .arg(dir.join("katalog"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--dev-cert-dir")
        .arg(dir.join("certs"))
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "failed to start {}: {e} (build it with cargo build --release -p katalog-cli)",
                bin.display()
            )
        });
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    // From here the Drop of Server stops (and waits for) the child.
    let mut server = Server {
        child,
        addr,
        ca: Vec::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(ca) = std::fs::read(dir.join("certs/ca.crt"))
            && let Ok(mut c) = HttpsClient::new(addr, &ca, "localhost")
            && c.get("/readyz").is_ok_and(|r| r.status == 200)
        {
            server.ca = ca;
            return server;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not become ready; see {}",
            dir.join("server.log").display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Outcome {
    requests: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    peak_rss_kib: u64,
}

fn drive(
    server: &Server,
    path: &str,
    body: &[u8],
    clients: usize,
    secs: f64,
    check: fn(&Value) -> bool,
) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak, pid) = (stop.clone(), peak.clone(), server.child.id());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (stop, done) = (stop.clone(), done.clone());
            let body = body.to_vec();
            let path = path.to_string();
            let (addr, ca) = (server.addr, server.ca.clone());
            std::thread::spawn(move || {
                let mut client = HttpsClient::new(addr, &ca, "localhost").expect("client");
                let (mut latencies, mut errors) = (Vec::new(), 0);
                let deadline = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < deadline
                    && !stop.load(Ordering::Relaxed)
                    && (done.fetch_add(1, Ordering::Relaxed) as usize) < MAX_REQUESTS_PER_SCENARIO
                {
                    let t = Instant::now();
                    match client.post_json(&path, &body) {
                        Ok(r) if r.status == 200 && r.json().is_ok_and(|v| check(&v)) => {
                            latencies.push(t.elapsed())
                        }
                        _ => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for w in workers {
        let (l, e) = w.join().expect("worker");
        latencies.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    latencies.sort();
    Outcome {
        requests: latencies.len(),
        errors,
        elapsed,
        latencies,
        peak_rss_kib: peak.load(Ordering::Relaxed),
    }
}

fn pct(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn pod_review() -> Vec<u8> {
    let text = std::fs::read_to_string(repo().join("katalogs/examples/pod-baseline.yaml"))
        .expect("example pod");
    let nodes = katalog_lang::yaml::read_documents(&text).expect("valid YAML");
    let pod = nodes[0].to_value();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "3c1e6a52-0d5b-4a5e-9a52-6b3d2f1c9e10",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"], "operation": "CREATE",
            "userInfo": {"username": "load", "groups": ["system:authenticated"]},
            "object": pod, "oldObject": null, "dryRun": false
        }
    }))
    .expect("serializes")
}

fn converted_ok(v: &Value) -> bool {
    v.pointer("/response/result/status").and_then(Value::as_str) == Some("Success")
}

fn admitted_ok(v: &Value) -> bool {
    v.pointer("/response/allowed").and_then(Value::as_bool) == Some(true)
}

fn main() {
    let a = args();
    let bin = if a.katalog_bin.is_absolute() {
        a.katalog_bin.clone()
    } else {
        repo().join(&a.katalog_bin)
    };
    let dir = std::env::temp_dir().join(format!("katalog-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("katalog")).expect("scratch dir");
    for f in ["crontab.yaml", "pod-security.yaml"] {
        let text = std::fs::read_to_string(repo().join("katalogs").join(f)).expect("a Katalog");
        // Without its CRD: the reload rounds below rename the wrapped key,
        // which the CRD's schema would (rightly) refuse.
        let text = text.replace(
            "crd: crontab.crd.yaml",
            "# crd: left out for the reload rounds",
        );
        std::fs::write(dir.join("katalog").join(f), text).expect("copy Katalog");
    }
    let server = start_server(&bin, &dir);
    std::thread::sleep(Duration::from_secs(1));
    let idle = rss_kib(server.child.id());
    println!(
        "katalog-load: {} clients, {} s per scenario, server pid {}, idle RSS {:.1} MiB\n",
        a.clients,
        a.secs,
        server.child.id(),
        idle as f64 / 1024.0
    );
    println!(
        "| scenario | request bytes | reviews/s | p50 ms | p99 ms | max ms | errors | peak RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    // name, endpoint, request body, what a good answer looks like
    type Scenario = (&'static str, &'static str, Vec<u8>, fn(&Value) -> bool);
    let scenarios: Vec<Scenario> = vec![
        (
            "conversion, 1 object (v1→v2)",
            "/convert",
            conversion_review(1, "stable.example.com/v2"),
            converted_ok,
        ),
        (
            "conversion, 500 objects (v1→v2)",
            "/convert",
            conversion_review(500, "stable.example.com/v2"),
            converted_ok,
        ),
        (
            "admission, Pod on pod-security.yaml",
            "/validate",
            pod_review(),
            admitted_ok,
        ),
    ];
    for (name, path, body, check) in scenarios {
        let o = drive(&server, path, &body, a.clients, a.secs, check);
        println!(
            "| {name} | {} | {:.0} | {} | {} | {} | {} | {:.1} |",
            body.len(),
            o.requests as f64 / o.elapsed.as_secs_f64(),
            ms(pct(&o.latencies, 0.5)),
            ms(pct(&o.latencies, 0.99)),
            ms(o.latencies.last().copied().unwrap_or_default()),
            o.errors,
            o.peak_rss_kib as f64 / 1024.0
        );
    }
    println!(
        "\nidle RSS after load: {:.1} MiB",
        rss_kib(server.child.id()) as f64 / 1024.0
    );

    // Reload latency: rewrite the Katalog and poll until the change is served.
    let mut client = HttpsClient::new(server.addr, &server.ca, "localhost").expect("client");
    let original = std::fs::read_to_string(dir.join("katalog/crontab.yaml")).expect("crontab");
    let review = conversion_review(1, "stable.example.com/v2");
    let mut samples = Vec::new();
    for round in 0..5 {
        let key = if round % 2 == 0 { "image2" } else { "image" };
        let changed = original.replace(
            "spoke: spec.container, key: image }",
            &format!("spoke: spec.container, key: {key} }}"),
        );
        let target = dir.join("katalog/crontab.yaml");
        let tmp = dir.join("katalog/.crontab.yaml.tmp");
        std::fs::write(&tmp, &changed).expect("write");
        let t = Instant::now();
        std::fs::rename(&tmp, &target).expect("rename");
        let deadline = t + Duration::from_secs(10);
        loop {
            let r = client.post_json("/convert", &review).expect("convert");
            let v = r.json().expect("json");
            if v.pointer(&format!(
                "/response/convertedObjects/0/spec/container/{key}"
            ))
            .is_some()
            {
                samples.push(t.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "reload not served within 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    samples.sort();
    println!(
        "reload (write → served), 5 rounds: median {} ms, max {} ms",
        ms(samples[samples.len() / 2]),
        ms(*samples.last().expect("samples"))
    );
    drop(server);
    let mut log = String::new();
    let _ =
        std::fs::File::open(dir.join("server.log")).and_then(|mut f| f.read_to_string(&mut log));
    println!("server log lines: {}", log.lines().count());
    let _ = std::fs::remove_dir_all(&dir);
}
