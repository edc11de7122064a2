//! The built `katalog` binary against a real kube-apiserver and etcd
//! (katalog-testenv). `katalog serve --register --self-signed-secret`: the
//! flags reach the Secret, the server and the housekeeper; the apiserver
//! converts through the binary (reached at `https://127.0.0.1:PORT` only);
//! SIGTERM stops it cleanly and removes its private certificate directory; a
//! restart reuses the Secret; `katalog migrate-storage` rewrites through it;
//! with `cleanupOnShutdown`, SIGTERM removes the webhook configurations.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use katalog_testenv::TestEnv;
use katalog_tests::{Scratch, Serve, eventually, free_port, katalog_bin, ok, repo, try_get_json};
use serde_json::json;

const SECRET: &str = "katalog-cli-certs";
const NAMESPACE: &str = "katalog-system";
const CRD: &str = "crontabs.stable.example.com";
const WAIT: Duration = Duration::from_secs(30);

/// `katalog serve --register --self-signed-secret` of `katalog` on `port`.
fn start_serve_with(env: &TestEnv, port: u16, katalog: &Path, name: &str) -> Serve {
    start_serve_with_args(env, port, katalog, name, &[])
}

/// [`start_serve_with`], with more flags.
fn start_serve_with_args(
    env: &TestEnv,
    port: u16,
    katalog: &Path,
    name: &str,
    extra: &[&str],
) -> Serve {
    let mut args = vec![
        "serve".to_string(),
        "--katalog".into(),
        katalog.to_string_lossy().into_owned(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--register".into(),
        "--register-name".into(),
        name.into(),
        "--register-url".into(),
        format!("https://127.0.0.1:{port}"),
        "--self-signed-secret".into(),
        format!("{NAMESPACE}/{SECRET}"),
        "--kubeconfig".into(),
        env.kubeconfig().to_string_lossy().into_owned(),
        "--workers".into(),
        "1".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    Serve::start(&args)
}

fn start_serve(env: &TestEnv, port: u16) -> Serve {
    start_serve_with(env, port, Path::new("katalogs/crontab.yaml"), "katalog-cli")
}

/// SIGTERM, then the exit code (killed, and the test fails, after `WAIT`).
fn terminate(mut serve: Serve) -> Option<i32> {
    serve.signal("TERM");
    serve.wait(WAIT)
}

fn secret_ca(env: &TestEnv) -> Result<String, String> {
    try_get_json(env, &["get", "secret", SECRET, "-n", NAMESPACE])
        .and_then(|s| s["data"]["ca.crt"].as_str().map(String::from))
        .ok_or_else(|| "no Secret with a ca.crt yet".into())
}

fn crd_ca(env: &TestEnv) -> Option<String> {
    try_get_json(env, &["get", "crd", CRD]).and_then(|c| {
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
    let got = try_get_json(env, &["get", "crontabs.v2.stable.example.com", name])
        .ok_or("GET at v2 failed")?;
    if got["spec"]["container"]["image"] != "registry.example.com/backup:1" {
        return Err(format!("at v2: {got}"));
    }
    Ok(())
}

#[test]
fn serve_with_a_self_signed_secret_registers_converts_and_restarts() {
    let env = katalog_tests::start_env("serve_cluster");
    ok(env.kubectl([
        "apply",
        "-f",
        &repo().join("katalogs/crontab.crd.yaml").to_string_lossy(),
    ]));
    ok(env.kubectl([
        "wait",
        "--for=condition=Established",
        &format!("crd/{CRD}"),
        "--timeout=30s",
    ]));
    ok(env.kubectl(["create", "namespace", NAMESPACE]));

    let port = free_port();
    let mut serve = start_serve(&env, port);
    let created = serve.wait_for_line("certificate: Secret katalog-system/katalog-cli-certs", WAIT);
    assert!(
        created.ends_with("created (a new CA and serving certificate: the Secret does not exist)"),
        "{created}"
    );
    let ca = eventually("the Secret", WAIT, || secret_ca(&env));
    eventually("the CRD conversion with the Secret's CA", WAIT, || {
        (crd_ca(&env).as_ref() == Some(&ca))
            .then_some(())
            .ok_or_else(|| format!("caBundle {:?}", crd_ca(&env)))
    });
    eventually("a conversion through the binary", WAIT, || {
        convert_through(&env, "a")
    });

    // The private certificate directory exists while it serves ...
    let prefix = format!("katalog-{NAMESPACE}-{SECRET}-{}-", serve.pid());
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
    // Every stderr line so far is plain text: no terminal colour codes
    // when stderr is not a terminal (a log collector, a file).
    let logged = serve.lines_so_far();
    assert!(!logged.is_empty());
    for l in logged {
        assert!(!l.contains('\x1b'), "a colour code on stderr: {l:?}");
    }
    // ... and is removed by a graceful stop.
    let status = terminate(serve);
    assert_eq!(status, Some(0), "katalog serve exited with {status:?}");
    assert!(!dir.exists(), "{} is left behind", dir.display());

    // A restart reuses the Secret: same CA, still registered, converting.
    let mut serve = start_serve(&env, port);
    let reused = serve.wait_for_line("certificate: Secret katalog-system/katalog-cli-certs", WAIT);
    assert!(reused.ends_with(" unchanged"), "{reused}");
    assert_eq!(secret_ca(&env).as_ref(), Ok(&ca));
    eventually("a conversion through the restarted binary", WAIT, || {
        convert_through(&env, "b")
    });
    assert_eq!(crd_ca(&env), Some(ca.clone()));

    // katalog migrate-storage through the binary, while it converts: both
    // CronTabs are rewritten at the storage version, one per page.
    let migrate = |crd: &str| {
        Command::new(katalog_bin())
            .args([
                "migrate-storage",
                "--crd",
                crd,
                "--page-size",
                "1",
                "--kubeconfig",
            ])
            .arg(env.kubeconfig())
            .current_dir(repo())
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

    let status = terminate(serve);
    assert_eq!(status, Some(0), "katalog serve exited with {status:?}");

    // With security.cleanupOnShutdown, a SIGTERM removes the configurations.
    let scratch = Scratch::new("cleanup");
    let dir = scratch.path("");
    std::fs::copy(
        repo().join("katalogs/crontab.yaml"),
        dir.join("crontab.yaml"),
    )
    .expect("copying crontab.yaml");
    // The CRD its `crd:` names, beside it.
    std::fs::copy(
        repo().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    std::fs::write(dir.join("cleanup.yaml"), CLEANUP).expect("writing cleanup.yaml");
    let mut serve = start_serve_with(&env, port, &dir, "katalog-cleanup");
    serve.wait_for_line(
        "certificate: Secret katalog-system/katalog-cli-certs unchanged",
        WAIT,
    );
    let vwc = "katalog-cleanup-validating";
    let registered = eventually("the validating configuration", WAIT, || {
        try_get_json(&env, &["get", "validatingwebhookconfiguration", vwc])
            .ok_or_else(|| format!("no {vwc} yet"))
    });
    assert_eq!(
        registered["webhooks"][0]["clientConfig"]["caBundle"].as_str(),
        Some(ca.as_str())
    );
    let status = terminate(serve);
    assert_eq!(status, Some(0), "katalog serve exited with {status:?}");
    let out = env.kubectl(["get", "validatingwebhookconfiguration", vwc]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{vwc} is still there after SIGTERM"
    );
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

/// Fail-closed on Nodes: over the default ceiling.
const OVER_THE_CEILING: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: node-labels
spec:
  admission:
    validations:
      - name: node-team
        resources: [v1/nodes]
        path: metadata.labels.team
        check: { exists: true }
"#;

#[test]
fn a_katalog_over_the_ceiling_is_refused_and_the_old_one_keeps_serving() {
    let env = katalog_tests::start_env("serve_ceiling");
    ok(env.kubectl([
        "apply",
        "-f",
        &repo().join("katalogs/crontab.crd.yaml").to_string_lossy(),
    ]));
    ok(env.kubectl([
        "wait",
        "--for=condition=Established",
        &format!("crd/{CRD}"),
        "--timeout=30s",
    ]));
    ok(env.kubectl(["create", "namespace", NAMESPACE]));
    let scratch = Scratch::new("ceiling");
    let dir = scratch.path("");
    std::fs::copy(
        repo().join("katalogs/crontab.yaml"),
        dir.join("crontab.yaml"),
    )
    .expect("copying crontab.yaml");
    std::fs::copy(
        repo().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .expect("copying crontab.crd.yaml");
    std::fs::write(dir.join("cleanup.yaml"), CLEANUP).expect("writing cleanup.yaml");
    let port = free_port();
    let vwc = "katalog-ceiling-validating";
    let mut serve = start_serve_with_args(&env, port, &dir, "katalog-ceiling", &["--ceiling"]);
    let registered = eventually("the validating configuration", WAIT, || {
        try_get_json(&env, &["get", "validatingwebhookconfiguration", vwc])
            .ok_or_else(|| format!("no {vwc} yet"))
    });
    eventually("a conversion through the binary", WAIT, || {
        convert_through(&env, "a")
    });

    // Hot reload of a Katalog over the ceiling: refused, located, counted.
    std::fs::write(dir.join("nodes.yaml"), OVER_THE_CEILING).expect("writing nodes.yaml");
    let refused = serve.wait_for_line("katalog reload failed", WAIT);
    assert!(
        refused.contains("nodes.yaml:9:") && refused.contains("on /nodes"),
        "{refused}"
    );
    // The old one keeps serving and stays registered as it was: nothing on
    // Nodes, conversions go on.
    eventually("a conversion after the refusal", WAIT, || {
        convert_through(&env, "b")
    });
    let now = try_get_json(&env, &["get", "validatingwebhookconfiguration", vwc])
        .expect("the validating configuration");
    assert_eq!(now["webhooks"], registered["webhooks"]);
    assert!(!now.to_string().contains("\"nodes\""), "{now}");
    let status = terminate(serve);
    assert_eq!(status, Some(0), "katalog serve exited with {status:?}");
}
