//! `katalog-load compare`: `katalog serve` next to the controller-runtime
//! peer of `benches/peers/` (the webhook a user would write in Go instead of
//! a Katalog), with the same requests, the same certificate, the same load.
//!
//! 1. Both servers start on 127.0.0.1 with one development certificate;
//!    katalog serves `katalogs/crontab.yaml` (with its CRD) and
//!    `benches/peers/pod-security-subset.yaml`.
//! 2. Their answers to every benchmark review are compared as JSON: the
//!    converted objects, the uid and the result of each ConversionReview;
//!    the uid, verdict, code, reason and message of each AdmissionReview
//!    (katalog prefixes its denials with `denied by katalog: `). Any
//!    difference stops the run before it measures anything.
//! 3. Each scenario runs against both servers in turns, `rounds` times,
//!    the order alternating from round to round, so that load that comes
//!    and goes on the machine hits both alike.
//! 4. One table: reviews/s, latency quantiles, errors, RSS before and at
//!    the peak, and the server's CPU time per review (from /proc/PID/stat).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixtures::conversion_review;
use crate::load::{self, Outcome, Server};

/// What `katalog-load compare` is asked to do.
pub struct Options {
    pub repo: PathBuf,
    pub katalog_bin: PathBuf,
    pub peer_bin: PathBuf,
    /// Seconds per scenario, per server, per round.
    pub secs: f64,
    pub rounds: usize,
    /// Run only the scenarios whose name contains this (all when empty).
    pub only: String,
}

/// One benchmark request and what a good answer to it is.
struct Review {
    name: &'static str,
    path: &'static str,
    body: Vec<u8>,
    check: fn(&Value) -> bool,
}

fn reviews(repo: &Path) -> Vec<Review> {
    let conversion = |name, n, to| Review {
        name,
        path: "/convert",
        body: conversion_review(n, to),
        check: load::converted_ok,
    };
    vec![
        conversion("conversion, 1 object, v1→v2", 1, "stable.example.com/v2"),
        conversion(
            "conversion, 500 objects, v1→v2",
            500,
            "stable.example.com/v2",
        ),
        conversion(
            "conversion, 1 object, v1→v1beta1",
            1,
            "stable.example.com/v1beta1",
        ),
        conversion(
            "conversion, 500 objects, v1→v1beta1",
            500,
            "stable.example.com/v1beta1",
        ),
        Review {
            name: "admission, compliant Pod",
            path: "/validate",
            body: load::pod_review(&load::example_pod(repo)),
            check: load::admitted_ok,
        },
        Review {
            name: "admission, Pod failing all 8 controls",
            path: "/validate",
            body: load::pod_review(&load::denied_pod(repo)),
            check: load::denied_ok,
        },
    ]
}

/// Where `a` and `b` first differ, as a JSON pointer with both values
/// (`None` if they are equal).
pub fn first_difference(a: &Value, b: &Value) -> Option<String> {
    fn walk(a: &Value, b: &Value, at: &mut String) -> Option<String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, v) in x {
                    let len = at.len();
                    at.push('/');
                    at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    match y.get(k) {
                        None => return Some(format!("{at}: only in the first")),
                        Some(w) => {
                            if let Some(d) = walk(v, w, at) {
                                return Some(d);
                            }
                        }
                    }
                    at.truncate(len);
                }
                y.keys()
                    .find(|k| !x.contains_key(*k))
                    .map(|k| format!("{at}/{k}: only in the second"))
            }
            (Value::Array(x), Value::Array(y)) => {
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{i}"));
                    if let Some(d) = walk(v, w, at) {
                        return Some(d);
                    }
                    at.truncate(len);
                }
                (x.len() != y.len()).then(|| format!("{at}: {} items against {}", x.len(), y.len()))
            }
            _ => (a != b).then(|| {
                let show = |v: &Value| {
                    let s = v.to_string();
                    if s.len() > 200 {
                        format!("{}…", &s[..s.floor_char_boundary(200)])
                    } else {
                        s
                    }
                };
                format!("{at}: {} against {}", show(a), show(b))
            }),
        }
    }
    walk(a, b, &mut String::new())
}

/// The parts of an answer both servers must agree on.
fn comparable(review: &Review, answer: &Value, katalog: bool) -> Value {
    let r = &answer["response"];
    if review.path == "/convert" {
        return serde_json::json!({
            "uid": r["uid"],
            "result.status": r["result"]["status"],
            "result.message": r["result"]["message"],
            "convertedObjects": r["convertedObjects"],
        });
    }
    let mut message = r["status"]["message"].clone();
    if katalog && let Some(m) = message.as_str() {
        message = Value::String(m.trim_start_matches("denied by katalog: ").to_string());
    }
    let denied = r["allowed"] == Value::Bool(false);
    serde_json::json!({
        "uid": r["uid"],
        "allowed": r["allowed"],
        "status.code": if denied { r["status"]["code"].clone() } else { Value::Null },
        "status.reason": if denied { r["status"]["reason"].clone() } else { Value::Null },
        "status.message": if denied { message } else { Value::Null },
    })
}

/// Post every review to both servers and compare the answers.
fn check_same_answers(katalog: &Server, peer: &Server, reviews: &[Review]) -> Result<(), String> {
    for review in reviews {
        let a = katalog.post(review.path, &review.body)?;
        let b = peer.post(review.path, &review.body)?;
        for (server, answer) in [(katalog, &a), (peer, &b)] {
            if !(review.check)(answer) {
                return Err(format!(
                    "{}: {}: unexpected answer: {}",
                    server.name,
                    review.name,
                    answer["response"]
                        .get("result")
                        .or(answer["response"].get("status"))
                        .unwrap_or(&answer["response"])
                ));
            }
        }
        let (a, b) = (comparable(review, &a, true), comparable(review, &b, false));
        if let Some(d) = first_difference(&a, &b) {
            return Err(format!(
                "{}: the answers differ (katalog against {}) at {d}",
                review.name, peer.name
            ));
        }
        println!("  same answer: {}", review.name);
    }
    Ok(())
}

/// One measured scenario.
struct Scenario {
    name: &'static str,
    review: usize,
    clients: usize,
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "conversion, 1 object (v1→v2)",
        review: 0,
        clients: 2,
    },
    Scenario {
        name: "admission, Pod, 8 controls",
        review: 4,
        clients: 2,
    },
    Scenario {
        name: "conversion, 500 objects (v1→v2)",
        review: 1,
        clients: 2,
    },
    Scenario {
        name: "conversion, 500 objects (v1→v2)",
        review: 1,
        clients: 8,
    },
];

/// Every round of one scenario on one server, added up.
#[derive(Default)]
struct Totals {
    requests: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    rss_before_kib: u64,
    peak_rss_kib: u64,
    cpu_ticks: u64,
}

impl Totals {
    fn add(&mut self, o: Outcome, rss_before_kib: u64) {
        if self.elapsed.is_zero() {
            self.rss_before_kib = rss_before_kib;
        }
        self.requests += o.requests;
        self.errors += o.errors;
        self.elapsed += o.elapsed;
        self.latencies.extend(o.latencies);
        self.peak_rss_kib = self.peak_rss_kib.max(o.peak_rss_kib);
        self.cpu_ticks += o.cpu_ticks;
    }
}

fn start_katalog(opts: &Options, dir: &Path, certs: &Path) -> Server {
    let port = load::free_port();
    let log = dir.join("katalog.log");
    let mut cmd = Command::new(&opts.katalog_bin);
    cmd.args(["serve", "--katalog"])
        .arg(dir.join("katalog"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--dev-cert-dir")
        .arg(certs)
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let addr = format!("127.0.0.1:{port}").parse().expect("address");
    Server::start("katalog", cmd, addr, &certs.join("ca.crt"), &log)
}

fn start_peer(opts: &Options, dir: &Path, certs: &Path) -> Server {
    let port = load::free_port();
    let log = dir.join("peer.log");
    let mut cmd = Command::new(&opts.peer_bin);
    cmd.args(["--port", &port.to_string(), "--cert-dir"])
        .arg(certs)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let addr = format!("127.0.0.1:{port}").parse().expect("address");
    Server::start("controller-runtime", cmd, addr, &certs.join("ca.crt"), &log)
}

/// Run the comparison; `Err` on a setup failure or different answers.
pub fn run(opts: &Options) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("katalog-peer-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("katalog")).map_err(|e| e.to_string())?;
    for (from, to) in [
        ("katalogs/crontab.yaml", "crontab.yaml"),
        ("katalogs/crontab.crd.yaml", "crontab.crd.yaml"),
        (
            "benches/peers/pod-security-subset.yaml",
            "pod-security-subset.yaml",
        ),
    ] {
        std::fs::copy(opts.repo.join(from), dir.join("katalog").join(to))
            .map_err(|e| format!("failed to copy {from}: {e}"))?;
    }
    // One certificate for both: written here, reused by `katalog serve`.
    let certs = dir.join("certs");
    katalog_runtime::certs::tls::write_dev_certificates(&certs, &[])
        .map_err(|e| format!("failed to write the development certificates: {e}"))?;

    let result = measure(opts, &dir, &certs);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("server logs kept in {}", dir.display());
    }
    result
}

fn measure(opts: &Options, dir: &Path, certs: &Path) -> Result<(), String> {
    let katalog = start_katalog(opts, dir, certs);
    let peer = start_peer(opts, dir, certs);
    std::thread::sleep(Duration::from_secs(1));
    let servers = [&katalog, &peer];
    let idle: Vec<u64> = servers.iter().map(|s| load::rss_kib(s.pid())).collect();

    let reviews = reviews(&opts.repo);
    println!("Checking that both servers give the same answers:");
    check_same_answers(&katalog, &peer, &reviews)?;

    let hz = load::clock_ticks_per_second() as f64;
    println!(
        "\nLoad: {} round(s) of {} s per scenario and server, servers in turns (order alternating); \
         idle RSS: katalog {:.1} MiB (pid {}), controller-runtime {:.1} MiB (pid {}).\n",
        opts.rounds,
        opts.secs,
        idle[0] as f64 / 1024.0,
        katalog.pid(),
        idle[1] as f64 / 1024.0,
        peer.pid()
    );
    println!(
        "| scenario | clients | server | reviews/s | p50 ms | p99 ms | max ms | errors | RSS before → peak MiB | CPU ms/review |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let started = Instant::now();
    for scenario in SCENARIOS.iter().filter(|s| s.name.contains(&opts.only)) {
        let review = &reviews[scenario.review];
        let mut totals = [Totals::default(), Totals::default()];
        for round in 0..opts.rounds {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let before = load::rss_kib(servers[i].pid());
                let o = load::drive(
                    servers[i],
                    review.path,
                    &review.body,
                    scenario.clients,
                    opts.secs,
                    review.check,
                );
                totals[i].add(o, before);
            }
        }
        for (server, t) in servers.iter().zip(totals.iter_mut()) {
            t.latencies.sort();
            let per_review = if t.requests == 0 {
                0.0
            } else {
                t.cpu_ticks as f64 / hz * 1000.0 / t.requests as f64
            };
            println!(
                "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {:.1} → {:.1} | {:.2} |",
                scenario.name,
                scenario.clients,
                server.name,
                t.requests as f64 / t.elapsed.as_secs_f64().max(1e-9),
                load::ms(load::pct(&t.latencies, 0.5)),
                load::ms(load::pct(&t.latencies, 0.99)),
                load::ms(t.latencies.last().copied().unwrap_or_default()),
                t.errors,
                t.rss_before_kib as f64 / 1024.0,
                t.peak_rss_kib as f64 / 1024.0,
                per_review
            );
        }
    }
    println!(
        "\nRSS after the load: katalog {:.1} MiB, controller-runtime {:.1} MiB; measured for {:.0} s.",
        load::rss_kib(katalog.pid()) as f64 / 1024.0,
        load::rss_kib(peer.pid()) as f64 / 1024.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_by_its_pointer() {
        let a = json!({"a": [1, {"b/c": 2}], "d": 1});
        assert_eq!(first_difference(&a, &a.clone()), None);
        let b = json!({"a": [1, {"b/c": 3}], "d": 1});
        assert_eq!(
            first_difference(&a, &b).as_deref(),
            Some("/a/1/b~1c: 2 against 3")
        );
        let c = json!({"a": [1, {"b/c": 2}], "d": 1, "e": 0});
        assert_eq!(
            first_difference(&a, &c).as_deref(),
            Some("/e: only in the second")
        );
        assert_eq!(
            first_difference(&json!([1]), &json!([1, 2])).as_deref(),
            Some(": 1 items against 2")
        );
    }

    #[test]
    fn the_denied_pod_is_denied_by_every_control() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(repo.join("benches/peers/pod-security-subset.yaml"))
            .expect("the subset Katalog");
        let ir = katalog_lang::compile_sources(&[katalog_lang::Source::new(
            "pod-security-subset.yaml",
            text,
        )])
        .unwrap_or_else(|d| panic!("{}", d.render()));
        let body = load::pod_review(&load::denied_pod(&repo));
        let out = katalog_lang::admission::review::review_admission_bytes(
            &ir,
            &body,
            katalog_lang::admission::eval::Endpoint::Validate,
        )
        .expect("an answer");
        let message = out["response"]["status"]["message"].as_str().unwrap();
        for rule in [
            "host-namespaces",
            "privileged",
            "capabilities",
            "host-path-volumes",
            "host-ports",
            "proc-mount",
            "seccomp",
            "sysctls",
        ] {
            assert!(message.contains(&format!("[{rule}] ")), "{message}");
        }
    }
}
