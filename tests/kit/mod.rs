//! The shared test kit of the cross-crate and cluster tests: the repository
//! root, scratch directories, the built `katalog` binary run as a process,
//! kubectl output helpers and bounded polling; in [`cluster`] a control plane,
//! a katalog server in the test process registered with it, and kubectl and
//! etcd helpers; in [`recorder`] a recording TLS proxy. Every test binary of
//! this crate uses it instead of carrying its own copies.

pub mod cluster;
pub mod recorder;

pub use cluster::*;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository root")
}

/// A path inside the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    repo().join(relative)
}

/// The `katalog` binary of this checkout, built once per test binary
/// (`cargo build --workspace --bins` as scripts/test runs it: a no-op there).
pub fn katalog_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--locked", "--workspace", "--bins"])
            .current_dir(repo())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the katalog binary failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target"));
        let bin = target.join("debug").join("katalog");
        assert!(bin.is_file(), "no binary at {}", bin.display());
        bin
    })
}

/// `katalog ARGS` in the repository root, with `stdin`; its output.
pub fn katalog(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(katalog_bin())
        .args(args)
        .current_dir(repo())
        .env_remove("KATALOG_KATALOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the katalog binary runs");
    if let Some(input) = stdin
        && let Some(mut pipe) = child.stdin.take()
    {
        pipe.write_all(input).expect("writing standard input");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("katalog ends")
}

/// A scratch directory, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "katalog-tests-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch directory");
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory laid out as the kubelet mounts a ConfigMap: the files are
/// `NAME -> ..data/NAME` symlinks, `..data` points at a hidden timestamped
/// directory, and an update writes a new one and swaps `..data` with one
/// rename (atomic, as the kubelet's AtomicWriter does).
pub struct ConfigMapDir {
    pub dir: PathBuf,
    generation: usize,
}

impl ConfigMapDir {
    pub fn new(dir: PathBuf, files: &[(&str, &str)]) -> ConfigMapDir {
        std::fs::create_dir_all(&dir).expect("creating the ConfigMap directory");
        let mut cm = ConfigMapDir { dir, generation: 0 };
        cm.update(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), cm.dir.join(name))
                .expect("linking a ConfigMap key");
        }
        cm
    }

    /// The kubelet's update: a new timestamped directory, `..data` swapped.
    pub fn update(&mut self, files: &[(&str, &str)]) {
        self.generation += 1;
        let stamp = format!("..2026_12_02_00_00_00.{:04}", self.generation);
        let data = self.dir.join(&stamp);
        std::fs::create_dir_all(&data).expect("creating a timestamped directory");
        for (name, text) in files {
            std::fs::write(data.join(name), text).expect("writing a ConfigMap key");
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&stamp, &tmp).expect("linking ..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swapping ..data");
    }
}

/// Standard output of a command that must succeed.
#[track_caller]
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "the command failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `attempt` every 100 ms until it answers `Ok`, for at most `within`.
#[track_caller]
pub fn eventually<T>(
    what: &str,
    within: Duration,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < within {
        match attempt() {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: still not so after {within:?}: {last}");
}

/// A free loopback port (bound, then released for a server to take).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `katalog serve` as a process; its standard-error lines are collected.
pub struct Serve {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Serve {
    /// `katalog ARGS` (ARGS starting with `serve`) in the repository root.
    pub fn start(args: &[String]) -> Serve {
        Serve::start_with(args, |_| {})
    }

    /// [`Serve::start`] with the command changed by `with` first (its
    /// environment, for one).
    pub fn start_with(args: &[String], with: impl FnOnce(&mut Command)) -> Serve {
        let mut command = Command::new(katalog_bin());
        with(&mut command);
        let mut child = command
            .args(args)
            .current_dir(repo())
            .env_remove("KATALOG_KATALOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the katalog binary runs");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[katalog serve] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Serve {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (at most `within`) for a standard-error line containing `text`.
    #[track_caller]
    pub fn wait_for_line(&mut self, text: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        if let Some(l) = self.seen.iter().find(|l| l.contains(text)) {
            return l.clone();
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "katalog serve did not log {text:?} within {within:?}; it logged:\n{}",
            self.seen.join("\n")
        );
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every standard-error line logged so far.
    pub fn lines_so_far(&mut self) -> &[String] {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        &self.seen
    }

    /// Sends `signal` (`TERM`, `INT`, ...) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits (at most `within`) for the process to exit; its exit code.
    /// Killed when it does not.
    #[track_caller]
    pub fn wait(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                while let Ok(line) = self.lines.try_recv() {
                    self.seen.push(line);
                }
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("katalog serve did not exit within {within:?}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
