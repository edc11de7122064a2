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
        code: 2,
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
    // A suite with only fuzz work passes when every fuzz line does.
    Case {
        name: "test-fuzz-only",
        args: &[
            "test",
            "--fuzz",
            "300",
            "--seed",
            "3",
            "crates/katalog-cli/tests/golden/fuzz-only.test.yaml",
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
        name: "check-authoring-warnings",
        args: &[
            "check",
            "crates/katalog-cli/tests/golden/authoring-warnings.yaml",
        ],
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
    // Several objects as JSON are one List (kubectl's convention), which reads back.
    Case {
        name: "convert-json-several",
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
        stdin: Some(HOSTPORTS),
        code: 0,
    },
    // JSON Lines in.
    Case {
        name: "convert-json-lines",
        args: &["convert", "-k", "katalogs/hostport.yaml", "--to", "v2", "-"],
        stdin: Some(
            "{\"apiVersion\": \"stable.example.com/v1\", \"kind\": \"HostPort\", \"metadata\": {\"name\": \"a\"}, \"hostPort\": \"localhost:8080\"}\n{\"apiVersion\": \"stable.example.com/v1\", \"kind\": \"HostPort\", \"metadata\": {\"name\": \"b\"}, \"hostPort\": \"example.com\"}\n",
        ),
        code: 0,
    },
    // A version the Katalog does not have: a usage error, said once.
    Case {
        name: "convert-unknown-version",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v3",
            "-",
        ],
        stdin: Some(CRONTAB_LIST_KUBECTL),
        code: 2,
    },
    // kubectl's flags: -k, -f (repeatable, a directory), -n.
    Case {
        name: "convert-filename-directory",
        args: &[
            "convert",
            "-k",
            "katalogs/hostport.yaml",
            "--to",
            "v2",
            "-f",
            "crates/katalog-cli/tests/golden/objects",
            "-f",
            "-",
            "-n",
            "team-a",
        ],
        stdin: Some(HOSTPORTS),
        code: 0,
    },
    // A kubectl List (members after `items`) keeps its shape.
    Case {
        name: "convert-kubectl-list",
        args: &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v2",
            "-",
        ],
        stdin: Some(CRONTAB_LIST_KUBECTL),
        code: 0,
    },
    Case {
        name: "convert-jsonpath",
        args: &[
            "convert",
            "--katalog",
            "katalogs/hostport.yaml",
            "--to",
            "v2",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.host}{\"\\n\"}{end}",
            "-",
        ],
        stdin: Some(HOSTPORTS),
        code: 0,
    },
    Case {
        name: "admit-jsonpath",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "jsonpath={.results[?(@.verdict.allowed==false)].name} {.summary.denied}",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-yaml",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "yaml",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ],
        stdin: None,
        code: 1,
    },
    Case {
        name: "admit-admission-review",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/admission-review.yaml",
        ],
        stdin: None,
        code: 2,
    },
    Case {
        name: "review-yaml",
        args: &[
            "review",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/admission-review.yaml",
        ],
        stdin: None,
        code: 0,
    },
    // No metadata.namespace: in `default`, as kubectl sends it.
    Case {
        name: "admit-default-namespace",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/namespaced.yaml",
            "-",
        ],
        stdin: Some("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n"),
        code: 1,
    },
    Case {
        name: "admit-namespace-flag",
        args: &[
            "admit",
            "-k",
            "crates/katalog-cli/tests/golden/namespaced.yaml",
            "-n",
            "team-a",
            "-f",
            "-",
        ],
        stdin: Some("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n"),
        code: 0,
    },
    // A skipped mutation's warning is shown whole, its reason included.
    Case {
        name: "admit-skipped-mutation",
        args: &[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/skipped-mutation.yaml",
            "-",
        ],
        stdin: Some(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: team-a}\nspec: {nodeSelector: not-a-map, containers: []}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: db, namespace: team-a}\nspec: {nodeSelector: not-a-map, containers: []}\n",
        ),
        code: 0,
    },
    // The same -o on every command that prints objects.
    Case {
        name: "manifests-jsonpath",
        args: &[
            "manifests",
            "-k",
            "katalogs/platform.yaml",
            "--url",
            "https://127.0.0.1:8443",
            "-o",
            "jsonpath={range .items[*]}{.kind} {.metadata.name}{\"\\n\"}{end}",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "review-yaml-out",
        args: &[
            "review",
            "-k",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-o",
            "yaml",
            "crates/katalog-cli/tests/golden/admission-review.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "suggest-katalog-flag",
        args: &[
            "suggest",
            "-k",
            "crates/katalog-lang/testdata/schema-errors/coverage.yaml",
        ],
        stdin: None,
        code: 0,
    },
    Case {
        name: "check-katalog-flag",
        args: &["check", "-k", "katalogs/crontab.yaml"],
        stdin: None,
        code: 0,
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

/// As `kubectl get crontabs -o yaml` prints it: the List's members around
/// `items`, the items at column 0.
const CRONTAB_LIST_KUBECTL: &str = "apiVersion: v1
items:
- apiVersion: stable.example.com/v1
  kind: CronTab
  metadata:
    name: nightly
    namespace: default
  spec:
    schedule: 0 3 * * *
    image: busybox
- apiVersion: stable.example.com/v1
  kind: CronTab
  metadata:
    name: hourly
    namespace: default
  spec:
    schedule: 0 * * * *
    image: alpine
kind: List
metadata:
  resourceVersion: \"\"
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

/// The binary, with none of the `KATALOG_*` variables of the environment
/// the tests run in (a developer's `KATALOG_MAX_OBJECT_BYTES` or
/// `KATALOG_YAML_MAX_NODES` would change what the goldens see).
fn katalog() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_katalog"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("KATALOG_") {
            command.env_remove(name);
        }
    }
    command
}

fn run(case: &Case) -> (i32, String, String) {
    run_with(case.args, case.stdin.unwrap_or("").as_bytes())
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

/// Run the binary with `stdin`, returning (code, stdout, stderr).
fn run_with(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = katalog()
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the katalog binary runs");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // Written from a thread: the output is read while the input is still going in.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn crontab(i: usize) -> String {
    format!(
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: c{i}\n  namespace: default\nspec:\n  schedule: '0 3 * * *'\n  image: busybox\n  timeoutSeconds: {i}\n"
    )
}

/// Issue 33: 20,000 documents and a List of 20,000 items (past every budget
/// the YAML reader has for one file) are read object by object.
#[test]
fn twenty_thousand_documents_and_a_twenty_thousand_item_list_are_read() {
    const N: usize = 20_000;
    let documents: String = (0..N).map(|i| crontab(i) + "---\n").collect();
    let (code, stdout, stderr) = run_with(
        &["admit", "--katalog", "katalogs/crontab.yaml", "-"],
        documents.as_bytes(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.ends_with("20000 objects: 20000 allowed, 0 denied\n"),
        "{}",
        &stdout[stdout.len().saturating_sub(200)..]
    );

    // kubectl's shape: items at column 0, the List's members after them.
    let mut list = String::from("apiVersion: v1\nitems:\n");
    for i in 0..N {
        for (j, line) in crontab(i).lines().enumerate() {
            list.push_str(if j == 0 { "- " } else { "  " });
            list.push_str(line);
            list.push('\n');
        }
    }
    list.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    let (code, stdout, stderr) = run_with(
        &[
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v2",
            "-",
        ],
        list.as_bytes(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("apiVersion: v1\nitems:\n- apiVersion: stable.example.com/v2\n"));
    assert!(stdout.ends_with("kind: List\nmetadata:\n  resourceVersion: \"\"\n"));
    assert_eq!(
        stdout
            .matches("\n- apiVersion: stable.example.com/v2\n")
            .count(),
        N
    );
}

/// One object past `--max-object-bytes` is refused with a message that
/// names the limit, the file, the line and how to raise it.
#[test]
fn an_object_over_the_limit_is_named_with_the_flag() {
    let input = crontab(1) + "---\n" + &crontab(2);
    let (code, _, stderr) = run_with(
        &[
            "convert",
            "-k",
            "katalogs/crontab.yaml",
            "--to",
            "v2",
            "--max-object-bytes",
            "100",
            "-",
        ],
        input.as_bytes(),
    );
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: <stdin>:1: an object is larger than 100 bytes (--max-object-bytes); raise it with --max-object-bytes BYTES or KATALOG_MAX_OBJECT_BYTES\n"
    );
}

/// Every output format of `convert` reads back as input: converting the
/// output again to the same version gives the same output.
#[test]
fn every_output_format_reads_back() {
    let input = (0..3).map(crontab).collect::<Vec<_>>().join("---\n");
    for format in ["yaml", "json"] {
        let args = [
            "convert",
            "--katalog",
            "katalogs/crontab.yaml",
            "--to",
            "v2",
            "-o",
            format,
            "-",
        ];
        let (code, first, stderr) = run_with(&args, input.as_bytes());
        assert_eq!(code, 0, "{format}: {stderr}");
        let (code, again, stderr) = run_with(&args, first.as_bytes());
        assert_eq!(code, 0, "{format}: {stderr}");
        assert_eq!(first, again, "{format}");
    }
}

/// Issue 35: a closed standard output or error never panics (exit 101);
/// the command ends with its own code.
#[test]
fn closed_pipes_end_commands_with_their_own_code() {
    let closed = || {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        writer
    };
    let run_closed = |args: &[&str]| {
        katalog()
            .args(args)
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(closed())
            .stderr(closed())
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(run_closed(&["check", "no/such/katalog.yaml"]), Some(2));
    assert_eq!(run_closed(&["check", "katalogs/crontab.yaml"]), Some(0));
    assert_eq!(
        run_closed(&[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/pod.yaml",
        ]),
        Some(1)
    );
    // Warnings to standard error, then the answer to standard output.
    assert_eq!(
        run_closed(&["check", "crates/katalog-cli/tests/golden/unmatchable.yaml"]),
        Some(0)
    );
    assert_eq!(
        run_closed(&[
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "crates/katalog-cli/tests/golden/pods-list.yaml",
        ]),
        Some(1)
    );

    // `katalog admit ... 2>&1 | head -1`: both streams on one pipe whose
    // reader goes after the first line. Every object is denied, so the
    // code is 1 however far the command got.
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = katalog()
        .args([
            "admit",
            "--katalog",
            "crates/katalog-cli/tests/golden/admission.yaml",
            "-",
        ])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    let pods: String = (0..5000)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: team-a}}\nspec: {{containers: [{{name: app, image: docker.io/busybox}}]}}\n---\n"
            )
        })
        .collect();
    let mut input = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(pods.as_bytes());
    });
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(reader), &mut first).unwrap();
    // The reader is dropped here, as `head -1` exits.
    let code = child.wait().unwrap().code();
    feeder.join().unwrap();
    assert!(!first.is_empty());
    assert_eq!(code, Some(1), "first line: {first}");
}

/// Run the binary with `args` in `dir`: exit code, stdout, stderr.
fn run_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = katalog()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("the katalog binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A scratch directory of this test binary, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("katalog-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `crd:` naming a directory that holds CRD manifests only (it failed for
/// every resource with "holds CRD manifests but no Katalog").
#[test]
fn check_and_convert_with_a_crd_directory() {
    let dir = scratch("crd-dir");
    std::fs::create_dir_all(dir.join("crds")).unwrap();
    std::fs::copy(
        root().join("katalogs/crontab.crd.yaml"),
        dir.join("crds/crontab.crd.yaml"),
    )
    .unwrap();
    std::fs::copy(
        root().join("katalogs/hostport.crd.yaml"),
        dir.join("crds/hostport.crd.yaml"),
    )
    .unwrap();
    let katalog = std::fs::read_to_string(root().join("katalogs/crontab.yaml")).unwrap();
    let katalog = katalog.replace("crd: crontab.crd.yaml", "crd: crds");
    assert!(katalog.contains("crd: crds"));
    std::fs::write(dir.join("crontab.yaml"), katalog).unwrap();
    let (code, stdout, stderr) = run_in(&dir, &["check", "crontab.yaml"]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    assert!(stdout.starts_with("crontab.yaml: ok"), "{stdout}");
    std::fs::write(dir.join("v1.yaml"), CRONTAB_V1).unwrap();
    let (code, stdout, stderr) = run_in(
        &dir,
        &[
            "convert",
            "--katalog",
            "crontab.yaml",
            "--to",
            "v2",
            "v1.yaml",
        ],
    );
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    assert!(
        stdout.contains("apiVersion: stable.example.com/v2"),
        "{stdout}"
    );
    // A schema edit in the directory is seen: v1 no longer has `image`.
    let crd = std::fs::read_to_string(dir.join("crds/crontab.crd.yaml")).unwrap();
    std::fs::write(
        dir.join("crds/crontab.crd.yaml"),
        crd.replace("image: {type: string}", "picture: {type: string}"),
    )
    .unwrap();
    let (code, _, stderr) = run_in(&dir, &["check", "crontab.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("image"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CRD of `fields` fields that v1 has and v2 does not: `katalog init`
/// writes one comment line for each into the draft.
fn crd_with_fields_only_in_v1(fields: usize) -> String {
    let props: String = (0..fields)
        .map(|i| format!("                f{i}: {{type: string}}\n"))
        .collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: things.example.com}}
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: things, kind: Thing}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
{props}    - name: v2
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {{type: object, properties: {{other: {{type: string}}}}}}
"
    )
}

/// `katalog init` writes a block of one comment line per field to
/// resolve; 33 or more consecutive comment lines broke the YAML reader
/// ("too many buffered comments"), so `check` failed on init's own output.
#[test]
fn check_reads_what_init_wrote_however_many_comment_lines() {
    let dir = scratch("init-comments");
    std::fs::write(dir.join("things.crd.yaml"), crd_with_fields_only_in_v1(60)).unwrap();
    let (code, draft, stderr) = run_in(&dir, &["init", "--crd", "things.crd.yaml"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let run = draft
        .lines()
        .fold((0, 0), |(longest, now), line| {
            if line.trim_start().starts_with('#') {
                (longest.max(now + 1), now + 1)
            } else {
                (longest, 0)
            }
        })
        .0;
    assert!(run > 60, "{run} consecutive comment lines in\n{draft}");
    std::fs::write(dir.join("things.katalog.yaml"), &draft).unwrap();
    let (code, stdout, stderr) = run_in(&dir, &["check", "things.katalog.yaml"]);
    // The draft is read; what it leaves to resolve is reported, located.
    assert!(!stderr.contains("failed to parse YAML"), "{stderr}");
    assert!(!stderr.contains("buffered comments"), "{stderr}");
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("things.katalog.yaml:"), "{stderr}");
    // Objects too: a comment block in the input of `convert`.
    let comments: String = (0..100).map(|i| format!("# note {i}\n")).collect();
    let object = format!("{comments}{CRONTAB_V1}{comments}");
    std::fs::write(dir.join("object.yaml"), object).unwrap();
    let (code, stdout, stderr) = run_in(
        &dir,
        &[
            "convert",
            "--katalog",
            &root().join("katalogs/crontab.yaml").display().to_string(),
            "--to",
            "v2",
            "object.yaml",
        ],
    );
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Katalog past the nodes a file may hold: the message names the file,
/// the limit and the flag that raises it, and the flag (or its variable)
/// does raise it.
#[test]
fn a_file_past_the_yaml_node_limit_names_the_limit_and_the_flag() {
    let dir = scratch("yaml-limit");
    let katalog = std::fs::read_to_string(root().join("katalogs/crontab.yaml")).unwrap();
    std::fs::write(dir.join("crontab.yaml"), &katalog).unwrap();
    std::fs::copy(
        root().join("katalogs/crontab.crd.yaml"),
        dir.join("crontab.crd.yaml"),
    )
    .unwrap();
    let (code, _, stderr) = run_in(&dir, &["check", "--yaml-max-nodes", "50", "crontab.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("crontab.yaml:")
            && stderr.contains("more than 50 nodes")
            && stderr.contains("--yaml-max-nodes or KATALOG_YAML_MAX_NODES"),
        "{stderr}"
    );
    assert!(!stderr.contains("budget breached"), "{stderr}");
    let (code, stdout, stderr) = run_in(&dir, &["check", "crontab.yaml"]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    // The CRD file past the limit: named too.
    let (code, _, stderr) = run_in(&dir, &["check", "--yaml-max-nodes", "150", "crontab.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("crontab.crd.yaml:") && stderr.contains("more than 150 nodes"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
