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
//! `katalog-load compare --peer-bin PATH` instead runs `katalog serve` next
//! to the controller-runtime webhook of `benches/peers/`, checks that they
//! answer the same, and measures both with the same load
//! (`katalog_benches::peer`; `scripts/peer-bench` builds everything and
//! runs it).
//!
//! Everything stays on 127.0.0.1; every loop is bounded by count and time.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use katalog_benches::fixtures::conversion_review;
use katalog_benches::load::{self, Server};
use katalog_benches::peer;

struct Args {
    katalog_bin: PathBuf,
    secs: f64,
    clients: usize,
}

const USAGE: &str = "usage:
  katalog-load [--katalog-bin PATH] [--secs S] [--clients N]
  katalog-load compare --peer-bin PATH [--katalog-bin PATH] [--secs S] [--rounds N] [--only TEXT] [--smoke]";

fn usage_error(message: &str) -> ! {
    eprintln!("katalog-load: {message}\n{USAGE}");
    std::process::exit(2);
}

fn args(mut it: impl Iterator<Item = String>) -> Args {
    let mut a = Args {
        katalog_bin: PathBuf::from("target/release/katalog"),
        secs: 10.0,
        clients: 2,
    };
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--katalog-bin" => a.katalog_bin = PathBuf::from(value),
            "--secs" => a.secs = value.parse().unwrap_or(a.secs),
            "--clients" => a.clients = value.parse().unwrap_or(a.clients).max(1),
            other => usage_error(&format!("unknown flag {other}")),
        }
    }
    a
}

fn compare_options(mut it: impl Iterator<Item = String>) -> peer::Options {
    let mut o = peer::Options {
        repo: repo(),
        katalog_bin: PathBuf::from("target/release/katalog"),
        peer_bin: PathBuf::new(),
        secs: 5.0,
        rounds: 2,
        only: String::new(),
    };
    let mut smoke = false;
    while let Some(flag) = it.next() {
        if flag == "--smoke" {
            smoke = true;
            continue;
        }
        let value = it.next().unwrap_or_default();
        let number = |v: &str| -> f64 {
            v.parse()
                .ok()
                .filter(|n: &f64| n.is_finite() && *n > 0.0)
                .unwrap_or_else(|| {
                    usage_error(&format!("{flag} needs a positive number, not {v:?}"))
                })
        };
        match flag.as_str() {
            "--katalog-bin" => o.katalog_bin = PathBuf::from(value),
            "--peer-bin" => o.peer_bin = PathBuf::from(value),
            "--secs" => o.secs = number(&value).min(600.0),
            "--rounds" => o.rounds = (number(&value) as usize).clamp(1, 100),
            "--only" => o.only = value,
            other => usage_error(&format!("unknown flag {other}")),
        }
    }
    if o.peer_bin.as_os_str().is_empty() {
        usage_error("compare needs --peer-bin (benches/peers/build.sh prints it)");
    }
    if smoke {
        o.secs = 1.0;
        o.rounds = 1;
    }
    o.katalog_bin = absolute(&o.katalog_bin);
    o.peer_bin = absolute(&o.peer_bin);
    o
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A relative path is relative to the repository.
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        repo().join(path)
    }
}

fn main() {
    let mut it = std::env::args().skip(1).peekable();
    if it.peek().map(String::as_str) == Some("compare") {
        it.next();
        let options = compare_options(it);
        if let Err(e) = peer::run(&options) {
            eprintln!("katalog-load compare: {e}");
            std::process::exit(1);
        }
        return;
    }
    serve_load(args(it));
}

fn start_katalog(bin: &Path, dir: &Path) -> Server {
    let port = load::free_port();
    let log = dir.join("server.log");
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["serve", "--katalog"])
        .arg(dir.join("katalog"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--dev-cert-dir")
        .arg(dir.join("certs"))
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let addr = format!("127.0.0.1:{port}").parse().expect("address");
    Server::start("katalog", cmd, addr, &dir.join("certs/ca.crt"), &log)
}

fn serve_load(a: Args) {
    let bin = absolute(&a.katalog_bin);
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
    let server = start_katalog(&bin, &dir);
    std::thread::sleep(Duration::from_secs(1));
    let idle = load::rss_kib(server.pid());
    println!(
        "katalog-load: {} clients, {} s per scenario, server pid {}, idle RSS {:.1} MiB\n",
        a.clients,
        a.secs,
        server.pid(),
        idle as f64 / 1024.0
    );
    println!(
        "| scenario | request bytes | reviews/s | p50 ms | p99 ms | max ms | errors | peak RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    // name, endpoint, request body, what a good answer looks like
    type Scenario = (
        &'static str,
        &'static str,
        Vec<u8>,
        fn(&serde_json::Value) -> bool,
    );
    let scenarios: Vec<Scenario> = vec![
        (
            "conversion, 1 object (v1→v2)",
            "/convert",
            conversion_review(1, "stable.example.com/v2"),
            load::converted_ok,
        ),
        (
            "conversion, 500 objects (v1→v2)",
            "/convert",
            conversion_review(500, "stable.example.com/v2"),
            load::converted_ok,
        ),
        (
            "admission, Pod on pod-security.yaml",
            "/validate",
            load::pod_review(&load::example_pod(&repo())),
            load::admitted_ok,
        ),
    ];
    for (name, path, body, check) in scenarios {
        let o = load::drive(&server, path, &body, a.clients, a.secs, check);
        println!(
            "| {name} | {} | {:.0} | {} | {} | {} | {} | {:.1} |",
            body.len(),
            o.requests as f64 / o.elapsed.as_secs_f64(),
            load::ms(load::pct(&o.latencies, 0.5)),
            load::ms(load::pct(&o.latencies, 0.99)),
            load::ms(o.latencies.last().copied().unwrap_or_default()),
            o.errors,
            o.peak_rss_kib as f64 / 1024.0
        );
    }
    println!(
        "\nidle RSS after load: {:.1} MiB",
        load::rss_kib(server.pid()) as f64 / 1024.0
    );

    // Reload latency: rewrite the Katalog and poll until the change is served.
    let mut client = server.client();
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
        load::ms(samples[samples.len() / 2]),
        load::ms(*samples.last().expect("samples"))
    );
    drop(server);
    let mut log = String::new();
    let _ =
        std::fs::File::open(dir.join("server.log")).and_then(|mut f| f.read_to_string(&mut log));
    println!("server log lines: {}", log.lines().count());
    let _ = std::fs::remove_dir_all(&dir);
}
