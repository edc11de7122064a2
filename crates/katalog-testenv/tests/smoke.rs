//! Starts a real control plane, uses it through kubectl, and checks that drop
//! stops it. Needs the binaries from testenv/build.sh (built on first use).

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use katalog_testenv::TestEnv;

fn repo_file(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

#[track_caller]
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Whether `pid` is still a running process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn control_plane_serves_crds_and_stops_on_drop() {
    let started = Instant::now();
    let env = TestEnv::start().unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "control plane ready in {:.1}s at {}",
        started.elapsed().as_secs_f64(),
        env.server_url()
    );
    assert!(env.server_url().starts_with("https://127.0.0.1:"));
    assert!(env.ca_pem().contains("BEGIN CERTIFICATE"));
    assert!(env.admin_cert_pem().contains("BEGIN CERTIFICATE"));
    assert!(env.admin_key_pem().contains("PRIVATE KEY"));
    assert!(env.kubeconfig().is_file());

    let namespaces = ok(env.kubectl(["get", "ns", "-o", "name"]));
    assert!(
        namespaces.lines().any(|l| l == "namespace/default"),
        "{namespaces}"
    );

    // The admin identity is in system:masters.
    assert_eq!(ok(env.kubectl(["auth", "can-i", "*", "*"])).trim(), "yes");

    ok(env.kubectl(["create", "-f", &repo_file("katalogs/crontab.crd.yaml")]));
    ok(env.kubectl([
        "wait",
        "--for=condition=Established",
        "crd/crontabs.stable.example.com",
        "--timeout=60s",
    ]));

    let crontab = r#"{
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"schedule": "0 3 * * *", "image": "busybox:1.36", "concurrencyPolicy": "Forbid"}
    }"#;
    ok(env.kubectl_stdin(["create", "-f", "-"], crontab));
    let got = ok(env.kubectl([
        "get",
        "crontabs.v1.stable.example.com",
        "nightly",
        "-n",
        "default",
        "-o",
        "jsonpath={.apiVersion} {.spec.schedule} {.spec.concurrencyPolicy}",
    ]));
    assert_eq!(got, "stable.example.com/v1 0 3 * * * Forbid");

    let (etcd, apiserver) = env.pids();
    let (etcd, apiserver) = (etcd.unwrap(), apiserver.unwrap());
    assert!(alive(etcd) && alive(apiserver));
    let dir = env.dir().to_path_buf();
    drop(env);
    assert!(!alive(etcd), "etcd (pid {etcd}) still running after drop");
    assert!(
        !alive(apiserver),
        "kube-apiserver (pid {apiserver}) still running after drop"
    );
    assert!(!dir.exists(), "{} not removed", dir.display());
}

#[test]
fn two_environments_do_not_collide() {
    let a = TestEnv::start().unwrap_or_else(|e| panic!("{e}"));
    let b = TestEnv::start().unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(a.server_url(), b.server_url());
    assert_ne!(a.dir(), b.dir());
    ok(a.kubectl(["create", "namespace", "only-in-a"]));
    let in_b = b.kubectl(["get", "namespace", "only-in-a"]);
    assert!(
        !in_b.status.success(),
        "namespace leaked between environments"
    );
    // A panic while an environment is alive still cleans up (drop on unwind).
    let dir = b.dir().to_path_buf();
    let (_, apiserver) = b.pids();
    let result = std::thread::spawn(move || {
        let _b = b;
        // resume_unwind unwinds like a panic without printing one.
        std::panic::resume_unwind(Box::new("deliberate"));
    })
    .join();
    assert!(result.is_err());
    let apiserver = apiserver.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(apiserver) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(apiserver),
        "kube-apiserver still running after a panic"
    );
    assert!(!dir.exists());
}
