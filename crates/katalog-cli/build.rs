//! Records the git commit the binary is built from, for `katalog version`.
//!
//! `KATALOG_GIT_COMMIT` in the environment wins (a container build has no
//! `.git`: `docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD)`);
//! otherwise `git rev-parse`; outside a git checkout (a source tarball,
//! `cargo install` from a copy) the commit is `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// A path that does not exist would make cargo rerun the script on every build.
fn rerun_if_changed(path: &str) {
    if std::path::Path::new(path).exists() {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=KATALOG_GIT_COMMIT");
    let commit = std::env::var("KATALOG_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it
    // names (a commit); both resolved by git, so worktrees work too.
    for path in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            rerun_if_changed(&p);
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &branch])
    {
        rerun_if_changed(&p);
    }
    println!("cargo:rustc-env=KATALOG_GIT_COMMIT={commit}");
}
