//! Driving a webhook server process over TLS keep-alive on loopback, for
//! `katalog-load`: start it, wait until it answers, post the same body from
//! several client threads for a bounded time, and read its RSS and CPU time
//! from `/proc`.
//!
//! Every loop here is bounded by count and time.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use katalog_runtime::http::client::HttpsClient;
use serde_json::{Value, json};

/// No run posts more than this many requests, however fast the server.
pub const MAX_REQUESTS_PER_RUN: usize = 200_000;

/// A server process on 127.0.0.1, stopped (SIGTERM, then SIGKILL after
/// 10 s) when dropped.
pub struct Server {
    pub name: &'static str,
    pub child: Child,
    pub addr: std::net::SocketAddr,
    pub ca: Vec<u8>,
}

impl Server {
    /// Spawn `command` (which must listen on `addr`) and wait, at most 30 s,
    /// until `GET /readyz` answers 200 over TLS verified with the CA in
    /// `ca_file` (read once it exists: the server may be the one writing it).
    pub fn start(
        name: &'static str,
        mut command: Command,
        addr: std::net::SocketAddr,
        ca_file: &Path,
        log: &Path,
    ) -> Server {
        let child = command.spawn().unwrap_or_else(|e| {
            panic!("failed to start {name} ({:?}): {e}", command.get_program())
        });
        // From here the Drop of Server stops (and waits for) the child.
        let mut server = Server {
            name,
            child,
            addr,
            ca: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(ca) = std::fs::read(ca_file)
                && let Ok(mut c) = HttpsClient::new(addr, &ca, "localhost")
                && c.get("/readyz").is_ok_and(|r| r.status == 200)
            {
                server.ca = ca;
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("{name} exited ({status}); see {}", log.display());
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not become ready within 30 s; see {}",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A keep-alive client to this server.
    pub fn client(&self) -> HttpsClient {
        HttpsClient::new(self.addr, &self.ca, "localhost").expect("an HTTPS client")
    }

    /// POST `body` to `path` once and parse the answer.
    pub fn post(&self, path: &str, body: &[u8]) -> Result<Value, String> {
        let r = self
            .client()
            .post_json(path, body)
            .map_err(|e| format!("{}: POST {path} failed: {e}", self.name))?;
        if r.status != 200 {
            return Err(format!(
                "{}: POST {path} answered {}: {}",
                self.name,
                r.status,
                r.text()
            ));
        }
        r.json()
            .map_err(|e| format!("{}: POST {path}: the answer is not JSON: {e}", self.name))
    }
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
        let _ = self.child.wait();
    }
}

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Resident set size of a process, in KiB (0 if it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
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

/// CPU time a process has used (user + system, all threads), in clock ticks
/// (fields 14 and 15 of `/proc/PID/stat`).
pub fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name (field 2) may hold spaces; count from after it.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime field 15.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 if that fails, which is
/// what Linux uses on every common architecture).
pub fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// What one run of [`drive`] measured.
pub struct Outcome {
    /// Good answers.
    pub requests: usize,
    /// Failed requests and wrong answers.
    pub errors: usize,
    pub elapsed: Duration,
    /// Latency of every good answer, sorted.
    pub latencies: Vec<Duration>,
    pub peak_rss_kib: u64,
    /// Server CPU time used during the run, in clock ticks.
    pub cpu_ticks: u64,
}

/// The check of a load client's answers. The last answer that passed is
/// kept: an answer equal to it byte for byte passes too, without parsing
/// megabytes of JSON again on the cores the servers share; any other
/// answer is parsed and checked.
pub struct Answers {
    check: fn(&Value) -> bool,
    passed: Option<Vec<u8>>,
    /// How many answers were parsed.
    pub parsed: usize,
}

impl Answers {
    pub fn new(check: fn(&Value) -> bool) -> Self {
        Answers {
            check,
            passed: None,
            parsed: 0,
        }
    }

    /// Whether an answer with this status and body is a right one.
    pub fn ok(&mut self, status: u16, body: Vec<u8>) -> bool {
        if status != 200 {
            return false;
        }
        if self.passed.as_ref() == Some(&body) {
            return true;
        }
        self.parsed += 1;
        let right = serde_json::from_slice::<Value>(&body).is_ok_and(|v| (self.check)(&v));
        if right {
            self.passed = Some(body);
        }
        right
    }
}

/// Post `body` to `path` from `clients` threads, each on its own keep-alive
/// connection, for `secs` seconds (and at most [`MAX_REQUESTS_PER_RUN`]
/// requests), checking each answer with `check` (an answer byte for byte
/// equal to the last one that passed passes without being parsed again).
pub fn drive(
    server: &Server,
    path: &str,
    body: &[u8],
    clients: usize,
    secs: f64,
    check: fn(&Value) -> bool,
) -> Outcome {
    let pid = server.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let cpu_before = cpu_ticks(pid);
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (stop, done) = (stop.clone(), done.clone());
            let body = body.to_vec();
            let path = path.to_string();
            let mut client = server.client();
            std::thread::spawn(move || {
                let (mut latencies, mut errors) = (Vec::new(), 0);
                let mut answers = Answers::new(check);
                let deadline = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < deadline
                    && !stop.load(Ordering::Relaxed)
                    && (done.fetch_add(1, Ordering::Relaxed) as usize) < MAX_REQUESTS_PER_RUN
                {
                    let t = Instant::now();
                    let right = client
                        .post_json(&path, &body)
                        .is_ok_and(|r| answers.ok(r.status, r.body));
                    if right {
                        latencies.push(t.elapsed());
                    } else {
                        errors += 1;
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
    let cpu_after = cpu_ticks(pid);
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
    latencies.sort();
    Outcome {
        requests: latencies.len(),
        errors,
        elapsed,
        latencies,
        peak_rss_kib: peak.load(Ordering::Relaxed),
        cpu_ticks: cpu_after.saturating_sub(cpu_before),
    }
}

/// The `q` quantile of sorted latencies (zero when there are none).
pub fn pct(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// A ConversionReview answer that succeeded.
pub fn converted_ok(v: &Value) -> bool {
    v.pointer("/response/result/status").and_then(Value::as_str) == Some("Success")
}

/// An AdmissionReview answer that allows.
pub fn admitted_ok(v: &Value) -> bool {
    v.pointer("/response/allowed").and_then(Value::as_bool) == Some(true)
}

/// An AdmissionReview answer that denies.
pub fn denied_ok(v: &Value) -> bool {
    v.pointer("/response/allowed").and_then(Value::as_bool) == Some(false)
}

/// `katalogs/examples/pod-baseline.yaml`: a compliant 6.8 KB Pod.
pub fn example_pod(repo: &Path) -> Value {
    let text = std::fs::read_to_string(repo.join("katalogs/examples/pod-baseline.yaml"))
        .expect("katalogs/examples/pod-baseline.yaml");
    let nodes = katalog_lang::yaml::read_documents(&text).expect("valid YAML");
    nodes[0].to_value()
}

/// The example Pod, changed so that each of the eight controls of
/// `benches/peers/pod-security-subset.yaml` denies it.
pub fn denied_pod(repo: &Path) -> Value {
    let mut pod = example_pod(repo);
    let spec = &mut pod["spec"];
    spec["hostNetwork"] = json!(true);
    spec["hostPID"] = json!(true);
    spec["securityContext"]["sysctls"]
        .as_array_mut()
        .expect("sysctls")
        .push(json!({"name": "kernel.msgmax", "value": "65536"}));
    spec["volumes"].as_array_mut().expect("volumes").insert(
        0,
        json!({"name": "host-logs", "hostPath": {"path": "/var/log"}}),
    );
    let init = &mut spec["initContainers"][0]["securityContext"];
    init["privileged"] = json!(true);
    init["procMount"] = json!("Unmasked");
    spec["containers"][0]["securityContext"]["seccompProfile"]["type"] = json!("Unconfined");
    let envoy = &mut spec["containers"][1];
    envoy["securityContext"]["capabilities"]["add"] =
        json!(["NET_BIND_SERVICE", "SYS_ADMIN", "NET_RAW"]);
    envoy["ports"][1]["hostPort"] = json!(9901);
    pod
}

/// A CREATE AdmissionReview (admission.k8s.io/v1) of `pod`.
pub fn pod_review(pod: &Value) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_parsed_unless_it_repeats_the_last_right_one() {
        let mut answers = Answers::new(admitted_ok);
        let allowed = br#"{"response": {"allowed": true}}"#.to_vec();
        let denied = br#"{"response": {"allowed": false}}"#.to_vec();
        let spaced = br#"{"response": {"allowed":  true}}"#.to_vec();
        assert!(answers.ok(200, allowed.clone()));
        assert!(answers.ok(200, allowed.clone()));
        assert_eq!(answers.parsed, 1);
        assert!(!answers.ok(200, denied.clone()));
        assert!(!answers.ok(200, denied));
        assert!(!answers.ok(500, allowed.clone()));
        assert!(!answers.ok(200, b"{".to_vec()));
        assert!(answers.ok(200, spaced.clone()));
        assert!(answers.ok(200, spaced));
        assert_eq!(answers.parsed, 5);
    }

    #[test]
    fn this_process_uses_cpu_and_memory() {
        let pid = std::process::id();
        assert!(rss_kib(pid) > 0);
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        assert!(cpu_ticks(pid) > 0);
        assert!(clock_ticks_per_second() > 0);
    }

    #[test]
    fn quantiles_of_sorted_latencies() {
        let l: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(pct(&l, 0.5), Duration::from_millis(51));
        assert_eq!(pct(&l, 0.99), Duration::from_millis(99));
        assert_eq!(pct(&[], 0.5), Duration::ZERO);
    }
}
