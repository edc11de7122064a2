//! `katalog check --live`, `analyze --live`, `suggest --live`, `diff --live`
//! and `test --live --fuzz` against the real
//! kube-apiserver (katalog-testenv): a Katalog without `crd:` is checked
//! against the CRD the cluster serves, so a rule naming a field the live CRD
//! lacks fails with the located error and a good Katalog passes; a resource
//! whose CRD is not in the cluster is a located error; an unreachable
//! cluster exits 4 and an unknown `--context` exits 2.

use std::process::Output;

use katalog_testenv::TestEnv;
use katalog_tests::{Scratch, free_port, katalog, ok, repo_path};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// katalogs/crontab.yaml without its `crd:` key, the CronTab's hub rename
/// spoke renamed to `spoke` (`spec.cronSpec` is what v1beta1 declares).
fn crontab_without_crd(spoke: &str) -> String {
    let text = std::fs::read_to_string(repo_path("katalogs/crontab.yaml")).expect("crontab.yaml");
    assert!(text.contains("      crd: crontab.crd.yaml\n"));
    assert!(text.contains("spoke: spec.cronSpec }"));
    text.replace("      crd: crontab.crd.yaml\n", "")
        .replace("spoke: spec.cronSpec }", &format!("spoke: {spoke} }}"))
}

#[test]
fn check_and_analyze_read_the_crds_of_a_live_cluster() {
    let env = TestEnv::start().unwrap_or_else(|e| panic!("the test apiserver: {e}"));
    let kubeconfig = env.kubeconfig().to_string_lossy().into_owned();
    let crd = repo_path("katalogs/crontab.crd.yaml");
    ok(env.kubectl(["apply", "-f", &crd.to_string_lossy()]));

    let dir = Scratch::new("live");
    let good = dir.path("good.yaml");
    std::fs::write(&good, crontab_without_crd("spec.cronSpec")).unwrap();
    let bad = dir.path("bad.yaml");
    std::fs::write(&bad, crontab_without_crd("spec.cronSpek")).unwrap();
    let (good, bad) = (good.to_string_lossy(), bad.to_string_lossy());

    // Without --live, nothing knows the schema: both compile.
    ok(katalog(&["check", &bad], None));

    let out = katalog(
        &["check", "--live", "--kubeconfig", &kubeconfig, &good],
        None,
    );
    let stdout = ok(out);
    assert!(
        stdout.starts_with(&format!("{good}: ok (1 resource")),
        "{stdout}"
    );

    let out = katalog(
        &["check", "--live", "--kubeconfig", &kubeconfig, &bad],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{bad}:20:50: error: no such field `spec.cronSpek` in v1beta1\n"
        )),
        "{err}"
    );
    assert!(err.contains("did you mean `spec.cronSpec`?"), "{err}");

    // analyze --live: the live CRD gives the coverage of every direction.
    let out = katalog(
        &["analyze", "--live", "--kubeconfig", &kubeconfig, &good],
        None,
    );
    let table = ok(out);
    assert!(
        table.contains("stable.example.com/CronTab (hub v1)\n"),
        "{table}"
    );
    assert!(table.contains("  v1 -> v1beta1: "), "{table}");
    let out = katalog(
        &["analyze", "--live", "--kubeconfig", &kubeconfig, &bad],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no such field `spec.cronSpek` in v1beta1"));

    // suggest --live: the draft for a field with no rule, from the live CRD.
    let unstashed = dir.path("unstashed.yaml");
    let text = crontab_without_crd("spec.cronSpec");
    assert!(text.contains("          - stash: { hub: spec.timeoutSeconds }\n"));
    std::fs::write(
        &unstashed,
        text.replace("          - stash: { hub: spec.timeoutSeconds }\n", ""),
    )
    .unwrap();
    let unstashed = unstashed.to_string_lossy();
    let drafts = ok(katalog(
        &["suggest", "--live", "--kubeconfig", &kubeconfig, &unstashed],
        None,
    ));
    assert!(
        drafts.contains("v1beta1:\n  - stash: { hub: spec.timeoutSeconds }  # suggested: v1beta1 has no field like it\n"),
        "{drafts}"
    );
    // Without --live there is no schema, so no draft.
    let drafts = ok(katalog(&["suggest", &unstashed], None));
    assert!(!drafts.contains("stash"), "{drafts}");

    // diff --live: the typo is an edit that changes the analysis (a claim
    // of a field the live CRD lacks, an error); without --live both are
    // unanalysed and the same.
    let out = katalog(
        &["diff", "--live", "--kubeconfig", &kubeconfig, &good, &bad],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let changes = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        changes.contains("+ no such field `spec.cronSpek` in v1beta1"),
        "{changes}"
    );
    let same = ok(katalog(&["diff", &good, &bad], None));
    assert!(same.starts_with("no difference"), "{same}");

    // test --live --fuzz: the suite's Katalog has no `crd:`, so only the
    // cluster's CRD gives the fuzzer schemas to generate from.
    let suite = dir.path("good.test.yaml");
    std::fs::write(
        &suite,
        "apiVersion: katalog.dev/v1alpha1\nkind: KatalogTest\nmetadata: {name: live}\nspec:\n  katalog: good.yaml\n  cases:\n    - name: v1 to v2\n      conversion:\n        input: {apiVersion: stable.example.com/v1, kind: CronTab, metadata: {name: a}, spec: {schedule: '* * * * *', image: busybox}}\n        to: v2\n        expect: {apiVersion: stable.example.com/v2, kind: CronTab, metadata: {name: a}, spec: {schedule: '* * * * *', container: {image: busybox}}}\n",
    )
    .unwrap();
    let suite = suite.to_string_lossy();
    let fuzzed = ok(katalog(
        &[
            "test",
            "--fuzz",
            "200",
            "--live",
            "--kubeconfig",
            &kubeconfig,
            &suite,
        ],
        None,
    ));
    assert!(
        fuzzed.contains("ok    stable.example.com/CronTab v1 → v2 → v1: 200 objects"),
        "{fuzzed}"
    );
    let unfuzzed = ok(katalog(&["test", "--fuzz", "200", &suite], None));
    assert!(unfuzzed.contains("nothing to generate from"), "{unfuzzed}");

    // A resource whose CRD the cluster does not have.
    let missing = dir.path("missing.yaml");
    std::fs::write(
        &missing,
        crontab_without_crd("spec.cronSpec").replace("kind: CronTab\n", "kind: CronJab\n"),
    )
    .unwrap();
    let missing = missing.to_string_lossy();
    let out = katalog(
        &["check", "--live", "--kubeconfig", &kubeconfig, &missing],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{missing}:13:7: error: failed to read the CRD of stable.example.com/CronJab from the cluster: the cluster has no CustomResourceDefinition for kind CronJab in group stable.example.com\n"
        )),
        "{err}"
    );

    // An unknown context is a usage error, as for kubectl.
    let out = katalog(
        &[
            "check",
            "--live",
            "--kubeconfig",
            &kubeconfig,
            "--context",
            "nowhere",
            &good,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nowhere"), "{}", stderr(&out));

    // A cluster that cannot be reached: exit 4 (runtime), for check and analyze.
    let text = std::fs::read_to_string(env.kubeconfig()).unwrap();
    assert!(text.contains(&env.server_url()));
    let away = text.replace(
        &env.server_url(),
        &format!("https://127.0.0.1:{}", free_port()),
    );
    let unreachable = dir.path("unreachable.kubeconfig");
    std::fs::write(&unreachable, away).unwrap();
    let unreachable = unreachable.to_string_lossy();
    for command in ["check", "analyze"] {
        let out = katalog(
            &[command, "--live", "--kubeconfig", &unreachable, &good],
            None,
        );
        assert_eq!(out.status.code(), Some(4), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("error: failed to list CustomResourceDefinitions"),
            "{command}: {}",
            stderr(&out)
        );
    }
}
