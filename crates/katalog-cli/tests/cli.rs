//! Golden tests of the `katalog` binary: each case runs the built binary in
//! the repository root and compares exit code, stdout and stderr with the
//! files in `tests/golden/`. `BLESS=1` rewrites them after a deliberate change.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    stdin: Option<&'static str>,
    code: i32,
}

const CASES: &[Case] = &[
    // Past what a Duration holds: a usage error, not a panic.
    Case {
        name: "serve-inline-limit-too-large",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--inline-limit",
            "1e20",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "serve-request-timeout-too-large",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--request-timeout",
            "1e20",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "serve-self-signed-bad-secret",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--self-signed-secret",
            "katalog-certs",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "serve-self-signed-bad-policy",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--self-signed-secret",
            "katalog-system/katalog-certs",
            "--cert-validity",
            "10d",
            "--cert-rotate-before",
            "10d",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "serve-self-signed-bad-duration",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--self-signed-secret",
            "katalog-system/katalog-certs",
            "--cert-validity",
            "3w",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "serve-self-signed-with-tls-cert",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--self-signed-secret",
            "katalog-system/katalog-certs",
            "--tls-cert",
            "tls.crt",
            "--tls-key",
            "tls.key",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "serve-self-signed-no-cluster",
        args: &[
            "serve",
            "--katalog",
            "katalogs/crontab.yaml",
            "--self-signed-secret",
            "katalog-system/katalog-certs",
            "--kubeconfig",
            "no/such/kubeconfig",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "register-missing-kubeconfig",
        args: &[
            "register",
            "--katalog",
            "katalogs/platform.yaml",
            "--url",
            "https://127.0.0.1:1",
            "--kubeconfig",
            "no/such/kubeconfig",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "check-ok",
        args: &["check", "katalogs/crontab.yaml", "katalogs/hostport.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "check-errors",
        args: &[
            "check",
            "crates/katalog-lang/testdata/errors/many-mistakes.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "check-crd-errors",
        args: &[
            "check",
            "crates/katalog-lang/testdata/schema-errors/crd-files.yaml",
            "crates/katalog-lang/testdata/schema-errors/admission-paths.yaml",
        ],
        stdin: None,
        code: 1,
    },
    // `crd:` leading out of the Katalog's directory: by `..`, an absolute
    // path (a device, too), a symlink.
    Case {
        name: "check-crd-escape",
        args: &[
            "check",
            "crates/katalog-cli/tests/golden/crd-escape/katalog.yaml",
        ],
        stdin: None,
        code: 1,
    },
    // Lock-out-prone registrations: warnings without a ceiling, errors
    // located at each rule and resource with one.
    Case {
        name: "check-lockout-warnings",
        args: &["check", "crates/katalog-cli/tests/golden/ceiling.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "check-over-the-ceiling",
        args: &[
            "check",
            "--allow-convert",
            "others.example.com",
            "--allow-mutations",
            "none",
            "--allow-register",
            "/pods,stable.example.com/crontabs",
            "crates/katalog-cli/tests/golden/ceiling.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "check-ceiling-bad-resource",
        args: &[
            "check",
            "--allow-register",
            "a/b/c",
            "katalogs/crontab.yaml",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "check-crd-hub-warning",
        args: &[
            "check",
            "crates/katalog-lang/testdata/schema-errors/hub-not-storage.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "check-missing-file",
        args: &["check", "no/such/katalog.yaml"],
        stdin: None,
        code: 2,
    },
    Case {
        name: "check-no-args",
        args: &["check"],
        stdin: None,
        code: 2,
    },
    Case {
        name: "convert-yaml",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v1beta1",
            "-",
        ],
        stdin: Some(CRONTAB_V1),
        code: 0,
    },
    Case {
        name: "convert-json",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "stable.example.com/v2",
            "-o",
            "json",
            "-",
        ],
        stdin: Some(CRONTAB_V1),
        code: 0,
    },
    Case {
        name: "convert-multi-doc",
        args: &[
            "convert",
            "--katalog",
            "katalogs/hostport.yaml",
            "--to",
            "v2",
            "-",
        ],
        stdin: Some(HOSTPORTS),
        code: 0,
    },
    Case {
        name: "convert-fails",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v9",
            "-",
        ],
        stdin: Some(CRONTAB_V1),
        code: 1,
    },
    Case {
        name: "review-v1",
        args: &[
            "review",
            "--katalog",
            "katalogs/crontab.yaml",
            "crates/katalog-lang/src/conversion/testdata/conversion-review-v1.json",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "review-malformed",
        args: &["review", "--katalog", "katalogs/crontab.yaml", "-"],
        stdin: Some("{\"kind\": "),
        code: 2,
    },
    Case {
        name: "debug-ir",
        args: &["debug", "ir", "--katalog", "katalogs/crontab.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "test-table",
        args: &["test", "katalogs/crontab.test.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "test-json-selected",
        args: &[
            "test",
            "-o",
            "json",
            "--case",
            "readiness",
            "katalogs/crontab.test.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "test-junit",
        args: &["test", "-o", "junit", "katalogs/crontab.test.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "test-fuzz",
        args: &[
            "test",
            "--fuzz",
            "300",
            "--seed",
            "3",
            "katalogs/hostport.test.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "test-fuzz-finding",
        args: &[
            "test",
            "--fuzz",
            "300",
            "crates/katalog-cli/tests/golden/fuzz-lossy.test.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "test-seed-without-fuzz",
        args: &["test", "--seed", "3", "katalogs/hostport.test.yaml"],
        stdin: None,
        code: 2,
    },
    Case {
        name: "test-failing",
        args: &["test", "crates/katalog-cli/tests/golden/failing.test.yaml"],
        stdin: None,
        code: 1,
    },
    Case {
        name: "test-failing-only",
        args: &[
            "test",
            "--fail-only",
            "-o",
            "junit",
            "crates/katalog-cli/tests/golden/failing.test.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-denied",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/pod.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-json",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "json",
            "crates/katalog-cli/tests/golden/pod.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-octal-file-modes",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/file-modes.yaml",
            "-o",
            "json",
            "crates/katalog-cli/tests/golden/pod-file-modes.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-delete",
        args: &[
            "admit",
            "--katalog",
            "katalogs/protections.yaml",
            "--operation",
            "DELETE",
            "crates/katalog-cli/tests/golden/protected-database.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-pod-security-baseline",
        args: &[
            "admit",
            "--katalog",
            "katalogs/pod-security.yaml",
            "katalogs/examples/pod-baseline.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "review-admission-mutate",
        args: &[
            "review",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "--endpoint",
            "mutate",
            "crates/katalog-lang/src/admission/testdata/pod-create-v1.json",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "review-admission-validate",
        args: &[
            "review",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-lang/src/admission/testdata/pod-create-v1.json",
        ],
        stdin: None,
        code: 0,
    },
    // serde_json's raw-value key first in the annotations (Go sorts `$`
    // first): still read as an AdmissionReview, the key an ordinary member.
    Case {
        name: "review-admission-raw-value-key",
        args: &[
            "review",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/pod-raw-value-key.json",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "check-admission",
        args: &[
            "check",
            "katalogs/platform.yaml",
            "katalogs/pod-security.yaml",
            "katalogs/protections.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "debug-ir-admission",
        args: &[
            "debug",
            "ir",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "manifests-service",
        args: &["manifests", "--katalog", "katalogs/protections.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "manifests-url",
        args: &[
            "manifests",
            "--katalog",
            "katalogs/crontab.yaml",
            "--url",
            "https://127.0.0.1:8443",
            "-o",
            "json",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "manifests-pods",
        args: &["manifests", "--katalog", "katalogs/platform.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "manifests-http-url",
        args: &[
            "manifests",
            "--katalog",
            "katalogs/platform.yaml",
            "--url",
            "http://127.0.0.1:8443",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "manifests-bad-ca-bundle",
        args: &[
            "manifests",
            "--katalog",
            "katalogs/platform.yaml",
            "--ca-bundle",
            "katalogs/platform.yaml",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "test-bad-suite",
        args: &[
            "test",
            "crates/katalog-cli/tests/golden/bad-suite.test.yaml",
        ],
        stdin: None,
        code: 2,
    },
    // The schema analysis (docs/analysis.md): a clean report, a report with
    // errors (exit 1, as `check`), and the JSON form.
    Case {
        name: "analyze-crontab",
        args: &["analyze", "katalogs/crontab.yaml"],
        stdin: None,
        code: 0,
    },
    // The whole-remainder stash counts the fields v1 does not declare as
    // stashed on the way down, not as unclaimed.
    Case {
        name: "analyze-remainder",
        args: &["analyze", "testdata/rules/remainder.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "analyze-errors",
        args: &[
            "analyze",
            "crates/katalog-lang/testdata/schema-errors/pruning.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "init-crontab",
        args: &["init", "--crd", "katalogs/crontab.crd.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "suggest-coverage",
        args: &[
            "suggest",
            "crates/katalog-lang/testdata/schema-errors/coverage.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "suggest-pruning",
        args: &[
            "suggest",
            "crates/katalog-lang/testdata/schema-errors/pruning.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "diff-coverage-fixed",
        args: &[
            "diff",
            "crates/katalog-lang/testdata/schema-errors/coverage.yaml",
            "crates/katalog-cli/tests/golden/coverage-fixed.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "diff-same",
        args: &["diff", "katalogs/crontab.yaml", "katalogs/crontab.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "analyze-json",
        args: &["analyze", "-o", "json", "katalogs/hostport.yaml"],
        stdin: None,
        code: 0,
    },
    // Batch dry runs, matched rules, warnings and every exit code (docs/cli.md).
    Case {
        name: "check-warnings",
        args: &["check", "crates/katalog-cli/tests/golden/unmatchable.yaml"],
        stdin: None,
        code: 0,
    },
    Case {
        name: "check-strict",
        args: &[
            "check",
            "--strict",
            "crates/katalog-cli/tests/golden/unmatchable.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-warnings-to-stderr",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/unmatchable.yaml",
            "-",
        ],
        stdin: Some(CRONTAB_V1),
        code: 0,
    },
    Case {
        name: "admit-list",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-list-json",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "json",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-list-junit",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "junit",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-documents-allowed",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-",
        ],
        stdin: Some(GOOD_PODS),
        code: 0,
    },
    Case {
        name: "admit-json-array-not-evaluated",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-",
        ],
        stdin: Some(
            r#"[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"team": "x"}}, "spec": {"containers": []}}, {"kind": "Pod", "metadata": {"name": "b"}}]"#,
        ),
        code: 2,
    },
    Case {
        name: "admit-old-with-several",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "--old",
            "crates/katalog-cli/tests/golden/pod.yaml",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "admit-delete-several",
        args: &[
            "admit",
            "--katalog",
            "katalogs/protections.yaml",
            "--operation",
            "DELETE",
            "-",
        ],
        stdin: Some(DATABASES),
        code: 1,
    },
    Case {
        name: "admit-delete-old-junit",
        args: &[
            "admit",
            "--katalog",
            "katalogs/protections.yaml",
            "--operation",
            "DELETE",
            "--old",
            "crates/katalog-cli/tests/golden/protected-database.yaml",
            "-o",
            "junit",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-empty-input",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-",
        ],
        stdin: Some("# nothing here\n"),
        code: 2,
    },
    Case {
        name: "admit-empty-list",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "json",
            "-",
        ],
        stdin: Some("{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}"),
        code: 0,
    },
    Case {
        name: "admit-broken-katalog",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/broken.yaml",
            "crates/katalog-cli/tests/golden/pod.yaml",
        ],
        stdin: None,
        code: 3,
    },
    Case {
        name: "admit-unparsable-input",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-",
        ],
        stdin: Some("kind: [Pod\n"),
        code: 2,
    },
    Case {
        name: "convert-typed-list-one-fails",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v2",
            "crates/katalog-cli/tests/golden/crontab-list.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "convert-list",
        args: &[
            "convert",
            "--katalog",
            "katalogs/hostport.yaml",
            "--to",
            "v2",
            "-o",
            "json",
            "-",
        ],
        stdin: Some(HOSTPORT_LIST),
        code: 0,
    },
    Case {
        name: "convert-broken-katalog",
        args: &[
            "convert",
            "--katalog",
            "crates/katalog-cli/tests/golden/broken.yaml",
            "--to",
            "v2",
            "-",
        ],
        stdin: Some(CRONTAB_V1),
        code: 3,
    },
    Case {
        name: "convert-missing-input",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v2",
            "no/such/objects.yaml",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "test-broken-katalog",
        args: &[
            "test",
            "crates/katalog-cli/tests/golden/broken-katalog.test.yaml",
        ],
        stdin: None,
        code: 3,
    },
    Case {
        name: "manifests-broken-katalog",
        args: &[
            "manifests",
            "--katalog",
            "crates/katalog-cli/tests/golden/broken.yaml",
        ],
        stdin: None,
        code: 3,
    },
    Case {
        name: "unregister-unreachable-cluster",
        args: &[
            "unregister",
            "--kubeconfig",
            "crates/katalog-cli/tests/golden/unreachable.kubeconfig",
        ],
        stdin: None,
        code: 4,
    },
];

const GOOD_PODS: &str = "apiVersion: v1
kind: Pod
metadata: {name: a, namespace: team-a, labels: {team: a}}
spec: {containers: [{name: app, image: registry.internal/a:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: team-b, labels: {team: b}}
spec: {containers: [{name: app, image: registry.internal/b:1}]}
";

const DATABASES: &str = "apiVersion: data.example.com/v1
kind: Database
metadata: {name: orders, namespace: data-prod, labels: {katalog.dev/protected: 'true'}}
---
apiVersion: data.example.com/v1
kind: Database
metadata: {name: scratch, namespace: data-dev}
";

const HOSTPORT_LIST: &str = "apiVersion: v1
kind: List
items:
  - {apiVersion: stable.example.com/v1, kind: HostPort, metadata: {name: a}, hostPort: 'localhost:8080'}
  - {apiVersion: stable.example.com/v1, kind: HostPort, metadata: {name: b}, hostPort: example.com}
";

const CRONTAB_V1: &str = "apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: nightly, namespace: default, labels: {app.kubernetes.io/name: backup}}
spec: {schedule: '0 3 * * *', image: busybox, timeoutSeconds: 600, concurrencyPolicy: Forbid}
status: {active: 1}
";

const HOSTPORTS: &str = "apiVersion: stable.example.com/v1
kind: HostPort
metadata: {name: a}
hostPort: localhost:8080
---
apiVersion: stable.example.com/v1
kind: HostPort
metadata: {name: b}
hostPort: example.com
";

fn run(case: &Case) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_katalog"))
        .args(case.args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("KATALOG_KATALOG")
        .spawn()
        .expect("the katalog binary runs");
    {
        let mut stdin = child.stdin.take().unwrap();
        if let Some(input) = case.stdin {
            stdin.write_all(input.as_bytes()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_output_matches_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    for case in CASES {
        let (code, stdout, stderr) = run(case);
        if code != case.code {
            failures.push(format!(
                "{}: exit code {code}, expected {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                case.name, case.code
            ));
        }
        for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            let path = dir.join(format!("{}.{stream}", case.name));
            if bless {
                if text.is_empty() {
                    let _ = std::fs::remove_file(&path);
                } else {
                    std::fs::write(&path, text).unwrap();
                }
                continue;
            }
            let expected = std::fs::read_to_string(&path).unwrap_or_default();
            if &expected != text {
                failures.push(format!(
                    "{}: {stream} differs from {}\n--- expected\n{expected}\n--- got\n{text}",
                    case.name,
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
