//! Conformance of `katalogs/pod-security-{baseline,restricted}.yaml` with the
//! official fixtures of the Pod Security Admission reference implementation
//! (`k8s.io/pod-security-admission`, `test/testdata/LEVEL/v1.N/{pass,fail}`).
//!
//! For the newest `v1.N` directory, every `pass/*.yaml` Pod must be allowed
//! and every `fail/*.yaml` Pod denied, by the rule of the control the fixture
//! is named after (`hostports1.yaml` → `hostPorts` → `host-ports`), and no
//! rule may fail to evaluate. 100% agreement; the counts are printed
//! (`cargo test -p katalog-lang --test pss_conformance -- --nocapture`).
//!
//! The fixtures come from `KATALOG_PSS_FIXTURES` (the module directory or its
//! `test/testdata`), else from the Go module cache:
//! `go mod download -json k8s.io/pod-security-admission` in `testenv/pss`,
//! whose go.mod and go.sum pin the release. See docs/pod-security.md.
//!
//! Every fixture is also evaluated with cel's interpreter alone: the verdict
//! must be the same, word for word, as with the CEL evaluator over borrowed
//! JSON that answers most evaluations (see tests/cel_native.rs).

use katalog_lang::admission::eval::evaluate;
use katalog_lang::admission::eval::{Endpoint, SimulatedRequest, Verdict};
use katalog_lang::cel::interpreter_only;
use katalog_lang::{Ir, Source, compile_sources};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const MODULE: &str = "k8s.io/pod-security-admission";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `test/testdata` of the pinned module: from `KATALOG_PSS_FIXTURES`, else
/// through the Go module cache.
fn testdata() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = match std::env::var_os("KATALOG_PSS_FIXTURES") {
            Some(dir) => PathBuf::from(dir),
            None => download_module(),
        };
        if dir.join("test/testdata").is_dir() {
            dir.join("test/testdata")
        } else if dir.join("baseline").is_dir() {
            dir
        } else {
            panic!(
                "failed to find the PSS fixtures: {} has neither test/testdata/ nor baseline/",
                dir.display()
            )
        }
    })
}

/// `go mod download -json MODULE` in testenv/pss: the directory of the
/// release its go.mod pins (verified against its go.sum).
fn download_module() -> PathBuf {
    let pin = repo_root().join("testenv/pss");
    let out = Command::new("go")
        .args(["mod", "download", "-json", MODULE])
        .current_dir(&pin)
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "failed to run `go mod download` for the PSS fixtures ({e}): install Go, \
                 or set KATALOG_PSS_FIXTURES to a checkout of {MODULE}"
            )
        });
    let info: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    match info.get("Dir").and_then(Value::as_str) {
        Some(dir) if out.status.success() => PathBuf::from(dir),
        _ => panic!(
            "failed to download {MODULE} in {}: {}{}",
            pin.display(),
            info.get("Error").and_then(Value::as_str).unwrap_or(""),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// The newest `v1.N` directory of a level (by N, not by name: v1.37 > v1.9).
fn newest_version(level: &str) -> (String, PathBuf) {
    let dir = testdata().join(level);
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("failed to read {}: {e}", dir.display()));
    entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let minor: u32 = name.strip_prefix("v1.")?.parse().ok()?;
            Some((minor, name))
        })
        .max()
        .map(|(_, name)| (name.clone(), dir.join(name)))
        .unwrap_or_else(|| panic!("failed to find a v1.* directory in {}", dir.display()))
}

/// A fixture file as a JSON value, read like the CLI reads objects.
fn load_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    let docs: Vec<katalog_lang::source::Node> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("failed to parse {}: {e}", path.display()));
    match docs.as_slice() {
        [doc] => doc.to_value(),
        _ => panic!("{}: expected one YAML document", path.display()),
    }
}

fn katalog(level: &str) -> &'static Ir {
    static IRS: OnceLock<Vec<(String, Ir)>> = OnceLock::new();
    let irs = IRS.get_or_init(|| {
        ["baseline", "restricted"]
            .into_iter()
            .map(|level| {
                let name = format!("pod-security-{level}.yaml");
                let path = repo_root().join("katalogs").join(&name);
                let text = std::fs::read_to_string(&path).unwrap();
                let ir = compile_sources(&[Source::new(name.as_str(), text)])
                    .unwrap_or_else(|d| panic!("failed to compile {name}: {d:?}"));
                (level.to_string(), ir)
            })
            .collect()
    });
    &irs.iter().find(|(l, _)| l == level).expect("a level").1
}

/// The version a Katalog states it implements (`pod-security.kubernetes.io/version`).
fn katalog_version(level: &str) -> String {
    let path = repo_root().join(format!("katalogs/pod-security-{level}.yaml"));
    let doc = load_yaml(&path);
    doc.pointer("/metadata/labels/pod-security.kubernetes.io~1version")
        .and_then(Value::as_str)
        .unwrap_or_else(|| {
            panic!(
                "{}: no pod-security.kubernetes.io/version label",
                path.display()
            )
        })
        .to_string()
}

/// The rule that implements a PSA check, by the check's fixture name
/// (`policy/check_*.go` IDs, lowercased). In restricted, the restricted
/// checks replace the baseline checks they override, as in PSA.
fn rule_for(level: &str, check: &str) -> Option<&'static str> {
    let baseline = match check {
        "windowshostprocess" => Some("host-process"),
        "hostnamespaces" => Some("host-namespaces"),
        "privileged" => Some("privileged"),
        "hostports" => Some("host-ports"),
        "hostprobesandhostlifecycle" => Some("probe-and-lifecycle-hosts"),
        "apparmorprofile" => Some("apparmor"),
        "selinuxoptions" => Some("selinux"),
        "sysctls" => Some("sysctls"),
        _ => None,
    };
    match level {
        "baseline" => baseline.or(match check {
            "capabilities_baseline" => Some("capabilities"),
            "hostpathvolumes" => Some("host-path-volumes"),
            "procmount" => Some("proc-mount"),
            "seccompprofile_baseline" => Some("seccomp"),
            _ => None,
        }),
        _ => baseline.or(match check {
            "capabilities_baseline" | "capabilities_restricted" => Some("capabilities-restricted"),
            "hostpathvolumes" | "restrictedvolumes" => Some("volume-types"),
            "procmount" | "procmount_restricted" => Some("proc-mount-restricted"),
            "seccompprofile_baseline" | "seccompprofile_restricted" => Some("seccomp-restricted"),
            "allowprivilegeescalation" => Some("allow-privilege-escalation"),
            "runasnonroot" => Some("run-as-non-root"),
            "runasuser" => Some("run-as-user"),
            _ => None,
        }),
    }
}

/// How a fixture is submitted: as the Pod itself, or as the pod template of
/// a Deployment (checked once autogen covers pod controllers).
#[derive(Clone, Copy)]
enum Wrap {
    Pod,
    Deployment,
}

impl Wrap {
    fn object(self, pod: &Value) -> Value {
        match self {
            Wrap::Pod => pod.clone(),
            Wrap::Deployment => {
                let name = pod
                    .pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(json!("pod"));
                let labels = pod
                    .pointer("/metadata/labels")
                    .cloned()
                    .unwrap_or_else(|| json!({"app": name}));
                let mut template_meta = json!({ "labels": labels });
                if let Some(a) = pod.pointer("/metadata/annotations") {
                    template_meta["annotations"] = a.clone();
                }
                json!({
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": { "name": name, "namespace": "pss" },
                    "spec": {
                        "selector": { "matchLabels": labels },
                        "template": { "metadata": template_meta, "spec": pod["spec"] },
                    },
                })
            }
        }
    }

    /// Whether a finding of `found` is one of the rule `rule`. A Pod is
    /// denied by the rule itself; how autogen names the findings of a pod
    /// template is its own affair, so any name containing the rule's counts
    /// (no rule name of these Katalogs contains another's of the same level
    /// that a fixture expects).
    fn is_rule(self, found: &str, rule: &str) -> bool {
        match self {
            Wrap::Pod => found == rule,
            Wrap::Deployment => found.contains(rule),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Wrap::Pod => "",
            Wrap::Deployment => " (as Deployments)",
        }
    }
}

fn admit(ir: &Ir, object: Value) -> Verdict {
    let request = SimulatedRequest {
        object: Some(object),
        ..Default::default()
    };
    let input = request.to_input(ir).expect("a request");
    evaluate(ir, &input, Endpoint::All)
}

/// Runs every fixture of the newest version of `level`; prints the counts
/// and panics listing every disagreement.
fn conformance(level: &str, wrap: Wrap) {
    let (version, dir) = newest_version(level);
    assert_eq!(
        katalog_version(level),
        version,
        "katalogs/pod-security-{level}.yaml states another version than the newest fixtures \
         ({}): update the Katalog to it",
        dir.display()
    );
    let ir = katalog(level);
    let mut disagreements = Vec::new();
    // Fixtures seen, and fixtures with the expected verdict, of pass/ and fail/.
    let mut seen = [0usize; 2];
    let mut agreed = [0usize; 2];
    for (i, expect_allowed) in [(0, true), (1, false)] {
        let sub = dir.join(if expect_allowed { "pass" } else { "fail" });
        let mut files: Vec<PathBuf> = std::fs::read_dir(&sub)
            .unwrap_or_else(|e| panic!("failed to read {}: {e}", sub.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            let check = stem.trim_end_matches(|c: char| c.is_ascii_digit());
            let shown = format!(
                "{}/{stem}.yaml",
                if expect_allowed { "pass" } else { "fail" }
            );
            let object = wrap.object(&load_yaml(&file));
            let verdict = admit(ir, object.clone());
            seen[i] += 1;
            let before = disagreements.len();
            // The CEL evaluator over borrowed JSON against cel's interpreter
            // alone (see tests/cel_native.rs): the same verdict, word for word.
            let reference = interpreter_only(|| admit(ir, object));
            let (got, want) = (
                serde_json::to_string(&verdict).unwrap(),
                serde_json::to_string(&reference).unwrap(),
            );
            if got != want {
                disagreements.push(format!(
                    "{shown}: the CEL evaluator gave {got}, the interpreter {want}"
                ));
            }
            let broken: Vec<_> = verdict
                .denials
                .iter()
                .chain(&verdict.warnings)
                .filter(|f| {
                    f.message.contains("failed to evaluate")
                        || f.message.contains("messageExpression")
                })
                .collect();
            if !broken.is_empty() {
                disagreements.push(format!(
                    "{shown}: a rule failed to evaluate: {}",
                    verdict.message()
                ));
            } else if expect_allowed && !verdict.allowed {
                disagreements.push(format!(
                    "{shown}: expected allowed, denied: {}",
                    verdict.message()
                ));
            } else if !expect_allowed && verdict.allowed {
                disagreements.push(format!(
                    "{shown}: expected denied (control {check}), allowed"
                ));
            } else if !expect_allowed {
                match rule_for(level, check) {
                    None => disagreements.push(format!(
                        "{shown}: no rule implements the control `{check}` (new in {version}?)"
                    )),
                    Some(rule) if !verdict.denials.iter().any(|f| wrap.is_rule(&f.rule, rule)) => {
                        disagreements.push(format!(
                            "{shown}: expected a denial by [{rule}], got: {}",
                            verdict.message()
                        ))
                    }
                    Some(_) => {}
                }
            }
            if disagreements.len() == before {
                agreed[i] += 1;
            }
        }
    }
    println!(
        "pss {level} {version}{}: {} pass fixtures allowed, {} fail fixtures denied, {} disagreements",
        wrap.label(),
        agreed[0],
        agreed[1],
        disagreements.len()
    );
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "no fixtures found in {}",
        dir.display()
    );
    assert!(
        disagreements.is_empty(),
        "pss {level} {version}{}: {} disagreements with {}:\n  {}",
        wrap.label(),
        disagreements.len(),
        dir.display(),
        disagreements.join("\n  ")
    );
}

#[test]
fn baseline_pods() {
    conformance("baseline", Wrap::Pod);
}

#[test]
fn restricted_pods() {
    conformance("restricted", Wrap::Pod);
}

#[test]
fn baseline_deployments() {
    conformance("baseline", Wrap::Deployment);
}

#[test]
fn restricted_deployments() {
    conformance("restricted", Wrap::Deployment);
}

/// The restricted Katalog is standalone: its copies of the baseline rules
/// must stay identical to the baseline Katalog's, and it must have every
/// baseline rule but the four that restricted rules replace.
#[test]
fn restricted_repeats_baseline() {
    let rules = |level: &str| -> Vec<Value> {
        let doc = load_yaml(&repo_root().join(format!("katalogs/pod-security-{level}.yaml")));
        doc.pointer("/spec/admission/validations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let restricted = rules("restricted");
    let replaced = ["capabilities", "host-path-volumes", "proc-mount", "seccomp"];
    let mut problems = Vec::new();
    for rule in rules("baseline") {
        let name = rule["name"].as_str().unwrap_or_default();
        let copy = restricted.iter().find(|r| r["name"] == rule["name"]);
        match (replaced.contains(&name), copy) {
            (true, Some(_)) => {
                problems.push(format!("`{name}` is replaced in restricted, yet present"))
            }
            (false, None) => problems.push(format!("`{name}` is missing from restricted")),
            (false, Some(copy)) if *copy != rule => {
                problems.push(format!("`{name}` differs between baseline and restricted"))
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
