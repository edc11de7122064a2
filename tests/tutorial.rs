//! docs/tutorial.md does what it says: its files (a code block after
//! `<!-- file: NAME -->`) are written to a scratch directory, and each
//! `$ katalog ...` line of a `console` block after `<!-- test -->` is run
//! there; its standard output must be the lines that follow it.

use std::process::Command;

use katalog_testenv::TestEnv;
use katalog_tests::{Scratch, katalog_bin, ok, repo_path};

/// (files, commands with their expected output), in page order.
type Page = (Vec<(String, String)>, Vec<(String, String)>);

fn read_page(text: &str) -> Page {
    let (mut files, mut runs) = (Vec::new(), Vec::new());
    let mut lines = text.lines();
    let mut pending: Option<Option<String>> = None;
    while let Some(line) = lines.next() {
        if let Some(name) = line
            .strip_prefix("<!-- file: ")
            .and_then(|r| r.strip_suffix(" -->"))
        {
            pending = Some(Some(name.to_string()));
            continue;
        }
        if line == "<!-- test -->" {
            pending = Some(None);
            continue;
        }
        if line.starts_with("```") {
            let block: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .collect();
            match pending.take() {
                Some(Some(name)) => files.push((name, block.join("\n") + "\n")),
                Some(None) => {
                    for line in block {
                        if let Some(command) = line.strip_prefix("$ ") {
                            runs.push((command.to_string(), String::new()));
                        } else if let Some((_, expected)) = runs.last_mut() {
                            expected.push_str(line);
                            expected.push('\n');
                        }
                    }
                }
                None => {}
            }
        }
    }
    (files, runs)
}

#[test]
fn the_offline_steps_of_the_tutorial_work_as_written() {
    let text = std::fs::read_to_string(repo_path("docs/tutorial.md")).expect("docs/tutorial.md");
    let (files, runs) = read_page(&text);
    assert_eq!(files.len(), 4, "{files:?}");
    assert_eq!(runs.len(), 3, "{runs:?}");
    let dir = Scratch::new("tutorial");
    for (name, content) in &files {
        std::fs::write(dir.path(name), content).expect("writing a tutorial file");
    }
    for (command, expected) in &runs {
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(args[0], "katalog", "{command}");
        let out = Command::new(katalog_bin())
            .args(&args[1..])
            .current_dir(dir.path(""))
            .env_remove("KATALOG_KATALOG")
            .output()
            .expect("katalog runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "`{command}` failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout, *expected, "`{command}` printed something else");
    }
}

/// Step 6: the overlay the tutorial writes (the heredoc of its
/// `my-katalog/kustomization.yaml`) replaces the example Katalog with the
/// tutorial's and is accepted by the apiserver.
#[test]
fn the_tutorials_own_overlay_is_accepted_by_the_apiserver() {
    let text = std::fs::read_to_string(repo_path("docs/tutorial.md")).expect("docs/tutorial.md");
    let (files, _) = read_page(&text);
    let start = "cat > my-katalog/kustomization.yaml <<'YAML'\n";
    let kustomization = text
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once("\nYAML\n"))
        .map(|(body, _)| format!("{body}\n"))
        .expect("the tutorial's kustomization.yaml");
    let dir = Scratch::new("tutorial-overlay");
    std::os::unix::fs::symlink(repo_path("deploy"), dir.path("deploy")).expect("linking deploy/");
    std::fs::create_dir_all(dir.path("my-katalog")).expect("my-katalog/");
    for (name, content) in &files {
        std::fs::write(dir.path(name), content).expect("a tutorial file");
        std::fs::write(dir.path(&format!("my-katalog/{name}")), content).expect("a tutorial file");
    }
    std::fs::write(dir.path("my-katalog/kustomization.yaml"), kustomization)
        .expect("kustomization.yaml");

    let env = TestEnv::start().unwrap_or_else(|e| panic!("the test apiserver: {e}"));
    let crd = dir.path("widget.crd.yaml");
    ok(env.kubectl(["apply", "-f", &crd.to_string_lossy()]));
    ok(env.kubectl([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &crd.to_string_lossy(),
    ]));
    ok(env.kubectl(["create", "namespace", "katalog-system"]));
    let overlay = dir.path("my-katalog");
    let out = ok(env.kubectl([
        "apply",
        "--dry-run=server",
        "-k",
        &overlay.to_string_lossy(),
    ]));
    assert!(
        out.contains("configmap/katalog created (server dry run)"),
        "{out}"
    );
    let rendered = ok(env.kubectl(["kustomize", &overlay.to_string_lossy()]));
    let configmap = katalog_lang::yaml::read_documents(&rendered)
        .expect("kustomize output")
        .iter()
        .map(|n| n.to_value())
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "katalog")
        .expect("the ConfigMap katalog");
    let keys: Vec<&String> = configmap["data"]
        .as_object()
        .expect("data")
        .keys()
        .collect();
    assert_eq!(keys, ["widget.crd.yaml", "widget.yaml"], "{configmap}");
}
