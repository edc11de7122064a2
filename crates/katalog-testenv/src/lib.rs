//! A real Kubernetes control plane for tests: etcd and kube-apiserver, built
//! from their Go modules by `testenv/build.sh` and started as child processes
//! on 127.0.0.1.
//!
//! ```no_run
//! let env = katalog_testenv::TestEnv::start().expect("control plane");
//! let out = env.kubectl(["get", "ns", "-o", "name"]);
//! assert!(String::from_utf8_lossy(&out.stdout).contains("namespace/default"));
//! // Dropping `env` stops both processes and removes its directory.
//! ```
//!
//! There is one implementation of everything that is not process supervision:
//! the binaries come from `testenv/build.sh`, and certificates, the kubeconfig
//! and the etcd / kube-apiserver flags from `scripts/testenv` (the same script
//! that `scripts/testenv up` uses by hand). This crate picks free loopback
//! ports, runs those pieces in a fresh directory per [`TestEnv`], waits for
//! `/readyz`, and cleans up on drop (also when a test panics). If the test
//! process dies without unwinding, the script's watcher kills the servers
//! within a second, and the next [`TestEnv::start`] removes the directory.
//!
//! Environment variables:
//! - `KATALOG_TESTENV_CACHE`: binary cache root (see `testenv/build.sh`).
//! - `KATALOG_TESTENV_START_TIMEOUT`: seconds to wait for readiness (120).
//! - `KATALOG_TESTENV_KEEP`: if set, keep each environment's directory (certs,
//!   logs) on drop and print where it is.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// How long [`TestEnv::start`] waits for `/readyz` unless
/// `KATALOG_TESTENV_START_TIMEOUT` says otherwise.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

/// How many times [`TestEnv::start`] tries fresh ports when a server could
/// not bind the ones it was given (another process took them meanwhile).
const PORT_ATTEMPTS: usize = 3;

const DIR_PREFIX: &str = "katalog-testenv.";

/// Why a control plane could not be started.
#[derive(Debug)]
pub enum Error {
    /// A file or process operation failed.
    Io { context: String, source: io::Error },
    /// `testenv/build.sh` failed; `output` is what it printed (the tail).
    Build { status: ExitStatus, output: String },
    /// A `scripts/testenv` helper (certificates, kubeconfig) failed.
    Script {
        command: String,
        status: ExitStatus,
        output: String,
    },
    /// etcd or kube-apiserver exited before the control plane was ready.
    Exited {
        process: &'static str,
        status: ExitStatus,
        log_tail: String,
    },
    /// `/readyz` did not answer ok in time.
    Timeout {
        waited: Duration,
        last_error: String,
        etcd_log_tail: String,
        apiserver_log_tail: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Build { status, output } => write!(
                f,
                "testenv/build.sh failed ({status}); building kube-apiserver, etcd and \
                 kubectl needs the go command and the Go module proxy:\n{output}"
            ),
            Error::Script {
                command,
                status,
                output,
            } => write!(
                f,
                "`scripts/testenv {command}` failed ({status}):\n{output}"
            ),
            Error::Exited {
                process,
                status,
                log_tail,
            } => write!(
                f,
                "{process} exited ({status}) before the control plane was ready; log tail:\n{log_tail}"
            ),
            Error::Timeout {
                waited,
                last_error,
                etcd_log_tail,
                apiserver_log_tail,
            } => write!(
                f,
                "the control plane was not ready after {}s (last /readyz answer: {last_error})\n\
                 --- etcd log (tail) ---\n{etcd_log_tail}\n\
                 --- kube-apiserver log (tail) ---\n{apiserver_log_tail}",
                waited.as_secs()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// How to start a [`TestEnv`] (the default is what [`TestEnv::start`] does).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// The apiserver presents a client certificate signed by the testenv CA
    /// ([`TestEnv::ca_pem`]) to every admission webhook, configured as a
    /// cluster operator would: `--admission-control-config-file` with a
    /// kubeconfig for webhooks.
    pub webhook_client_cert: bool,
    /// Also run kube-controller-manager with the namespace controller only,
    /// so a deleted namespace is emptied and removed as in a cluster. Its
    /// binary is built (once, then cached) by `testenv/build.sh
    /// --controller-manager` the first time a test asks for it.
    pub controller_manager: bool,
}

impl Options {
    pub fn webhook_client_cert(mut self) -> Self {
        self.webhook_client_cert = true;
        self
    }

    pub fn controller_manager(mut self) -> Self {
        self.controller_manager = true;
        self
    }
}

/// A running etcd + kube-apiserver on 127.0.0.1, with an admin kubeconfig.
///
/// Each instance has its own ports and directory, so several can run in one
/// test binary. Dropping it kills both processes and removes the directory.
pub struct TestEnv {
    dir: PathBuf,
    bin_dir: PathBuf,
    apiserver_port: u16,
    etcd_port: u16,
    etcd: Option<Child>,
    apiserver: Option<Child>,
    controller_manager: Option<Child>,
    ca_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
}

impl fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestEnv")
            .field("dir", &self.dir)
            .field("server_url", &self.server_url())
            .field("etcd_url", &self.etcd_url())
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    /// Builds the binaries if they are not cached yet (this can take a long
    /// time once; the build's output is streamed to stderr), then starts etcd
    /// and kube-apiserver and waits until `/readyz` is ok.
    pub fn start() -> Result<TestEnv, Error> {
        Self::start_with(Options::default())
    }

    /// [`TestEnv::start`] with [`Options`].
    pub fn start_with(options: Options) -> Result<TestEnv, Error> {
        let bin_dir = binaries()?;
        if options.controller_manager {
            build(&["--controller-manager"], &["kube-controller-manager"])?;
        }
        remove_stale_dirs();
        let timeout = start_timeout();
        let mut attempt = 1;
        loop {
            match Self::start_once(&bin_dir, timeout, &options) {
                Err(Error::Exited {
                    process,
                    status,
                    log_tail,
                }) if attempt < PORT_ATTEMPTS && log_tail.contains("address already in use") => {
                    let _ = writeln!(
                        io::stderr(),
                        "katalog-testenv: {process} could not bind its port ({status}); retrying with new ports"
                    );
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once(bin_dir: &Path, timeout: Duration, options: &Options) -> Result<TestEnv, Error> {
        let dir = new_dir()?;
        let [etcd_port, peer_port, apiserver_port] = free_ports()?;
        // From here on, dropping `env` (on any error) cleans up.
        let mut env = TestEnv {
            dir,
            bin_dir: bin_dir.to_path_buf(),
            apiserver_port,
            etcd_port,
            etcd: None,
            apiserver: None,
            controller_manager: None,
            ca_pem: String::new(),
            admin_cert_pem: String::new(),
            admin_key_pem: String::new(),
        };
        let dir = env.dir.to_string_lossy().into_owned();
        script(&["certs", &dir])?;
        script(&["kubeconfig", &dir, &apiserver_port.to_string()])?;
        env.ca_pem = env.read("ca.crt")?;
        env.admin_cert_pem = env.read("admin.crt")?;
        env.admin_key_pem = env.read("admin.key")?;

        env.etcd = Some(env.spawn(
            "etcd",
            &[
                "run-etcd",
                &dir,
                &etcd_port.to_string(),
                &peer_port.to_string(),
            ],
        )?);
        let admission_config =
            format!("--admission-control-config-file={dir}/admission-config.yaml");
        let apiserver_port_arg = apiserver_port.to_string();
        let etcd_port_arg = etcd_port.to_string();
        let mut apiserver_args = vec![
            "run-apiserver",
            dir.as_str(),
            apiserver_port_arg.as_str(),
            etcd_port_arg.as_str(),
        ];
        if options.webhook_client_cert {
            script(&["webhook-client", &dir])?;
            apiserver_args.push(&admission_config);
        }
        env.apiserver = Some(env.spawn("kube-apiserver", &apiserver_args)?);
        env.wait_ready(timeout)?;
        if options.controller_manager {
            env.controller_manager =
                Some(env.spawn("kube-controller-manager", &["run-controller-manager", &dir])?);
        }
        Ok(env)
    }

    fn read(&self, name: &str) -> Result<String, Error> {
        let path = self.dir.join(name);
        fs::read_to_string(&path).map_err(io_err(format!("reading {}", path.display())))
    }

    fn spawn(&self, name: &str, args: &[&str]) -> Result<Child, Error> {
        let log_path = self.dir.join(format!("{name}.log"));
        let log = fs::File::create(&log_path)
            .map_err(io_err(format!("creating {}", log_path.display())))?;
        let log2 = log
            .try_clone()
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        Command::new(script_path())
            .args(args)
            .env("KATALOG_TESTENV_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(io_err(format!("starting {name} via scripts/testenv")))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let start = Instant::now();
        loop {
            for (process, child) in [
                ("etcd", &mut self.etcd),
                ("kube-apiserver", &mut self.apiserver),
            ] {
                let Some(child) = child.as_mut() else {
                    continue;
                };
                if let Some(status) = child
                    .try_wait()
                    .map_err(io_err(format!("waiting for {process}")))?
                {
                    return Err(Error::Exited {
                        process,
                        status,
                        log_tail: log_tail(&self.dir.join(format!("{process}.log")), 40),
                    });
                }
            }
            let out = self
                .kubectl_command()
                .args(["get", "--raw=/readyz", "--request-timeout=5s"])
                .stdin(Stdio::null())
                .output()
                .map_err(io_err("running kubectl"))?;
            if out.status.success() {
                return Ok(());
            }
            let mut last_error = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if last_error.is_empty() {
                last_error = String::from_utf8_lossy(&out.stdout).trim().to_string();
            }
            if start.elapsed() >= timeout {
                return Err(Error::Timeout {
                    waited: start.elapsed(),
                    last_error,
                    etcd_log_tail: log_tail(&self.dir.join("etcd.log"), 20),
                    apiserver_log_tail: log_tail(&self.dir.join("kube-apiserver.log"), 40),
                });
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The admin kubeconfig (client certificate in group `system:masters`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// `http://127.0.0.1:<port>`: etcd's client URL.
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// The CA that signed the apiserver's serving certificate and the admin
    /// client certificate, and that the apiserver trusts for client certs.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA's private key (PEM, PKCS#8), e.g. to sign a webhook's serving
    /// certificate that the apiserver is then told to trust.
    pub fn ca_key_pem(&self) -> Result<String, Error> {
        self.read("ca.key")
    }

    /// The admin client certificate (PEM; `O=system:masters`).
    pub fn admin_cert_pem(&self) -> &str {
        &self.admin_cert_pem
    }

    /// The admin client key (PEM, PKCS#8, P-256).
    pub fn admin_key_pem(&self) -> &str {
        &self.admin_key_pem
    }

    /// This environment's directory: certificates, kubeconfig, etcd data and
    /// the logs `etcd.log`, `kube-apiserver.log` (and
    /// `kube-controller-manager.log` when it runs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where kube-apiserver, etcd and kubectl are.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// The built kubectl.
    pub fn kubectl_path(&self) -> PathBuf {
        self.bin_dir.join("kubectl")
    }

    /// Process ids of etcd and kube-apiserver (`None` once stopped).
    pub fn pids(&self) -> (Option<u32>, Option<u32>) {
        (
            self.etcd.as_ref().map(Child::id),
            self.apiserver.as_ref().map(Child::id),
        )
    }

    /// A `Command` for the built kubectl with this environment's kubeconfig
    /// (and a private discovery cache).
    pub fn kubectl_command(&self) -> Command {
        let mut cmd = Command::new(self.kubectl_path());
        cmd.env("KUBECONFIG", self.kubeconfig())
            .env("KUBECACHEDIR", self.dir.join("kube-cache"));
        cmd
    }

    /// Runs kubectl with `args` and returns its output (whatever the exit code).
    ///
    /// # Panics
    /// If kubectl cannot be run at all.
    pub fn kubectl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.kubectl_command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", self.kubectl_path().display()))
    }

    /// Like [`TestEnv::kubectl`], with `stdin` on its standard input
    /// (e.g. `kubectl_stdin(["apply", "-f", "-"], yaml)`).
    ///
    /// # Panics
    /// If kubectl cannot be run at all.
    pub fn kubectl_stdin<I, S>(&self, args: I, stdin: impl AsRef<[u8]>) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = self
            .kubectl_command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", self.kubectl_path().display()));
        let input = stdin.as_ref().to_vec();
        let mut pipe = child.stdin.take().expect("piped stdin");
        let writer = thread::spawn(move || pipe.write_all(&input));
        let out = child.wait_with_output().expect("waiting for kubectl");
        let _ = writer.join();
        out
    }

    /// Whether kube-controller-manager was started and is still running.
    pub fn controller_manager_running(&mut self) -> bool {
        self.controller_manager
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops kube-controller-manager, kube-apiserver, then etcd, and waits
    /// for them. Drop does this too.
    pub fn stop(&mut self) {
        for child in [
            self.controller_manager.take(),
            self.apiserver.take(),
            self.etcd.take(),
        ]
        .into_iter()
        .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.stop();
        if std::env::var_os("KATALOG_TESTENV_KEEP").is_some() {
            let _ = writeln!(
                io::stderr(),
                "katalog-testenv: keeping {}",
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script_path() -> PathBuf {
    repo_root().join("scripts/testenv")
}

fn start_timeout() -> Duration {
    std::env::var("KATALOG_TESTENV_START_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(DEFAULT_START_TIMEOUT, Duration::from_secs)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `testenv/build.sh` once per process (it reuses cached binaries) and
/// returns the bin directory.
fn binaries() -> Result<PathBuf, Error> {
    static BIN_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut cached = lock(&BIN_DIR);
    if let Some(dir) = cached.as_ref() {
        return Ok(dir.clone());
    }
    let dir = build(&[], &["etcd", "kube-apiserver", "kubectl"])?;
    *cached = Some(dir.clone());
    Ok(dir)
}

/// Runs `testenv/build.sh ARGS`, checks that it left `expected` in the bin
/// directory it printed, and returns that directory. Its stderr is
/// streamed to ours as it goes.
fn build(args: &[&str], expected: &[&str]) -> Result<PathBuf, Error> {
    let build = repo_root().join("testenv/build.sh");
    let mut child = Command::new(&build)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("running {}", build.display())))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let stdout_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    // Keep the last lines for the error; the Go build can print hundreds.
    let mut tail: Vec<String> = Vec::new();
    for line in BufReader::new(child.stderr.take().expect("piped stderr")).lines() {
        let Ok(line) = line else { break };
        // Straight to fd 2 so it shows even when the test harness captures output.
        let _ = writeln!(io::stderr(), "[testenv/build.sh] {line}");
        tail.push(line);
        if tail.len() > 200 {
            tail.remove(0);
        }
    }
    let status = child
        .wait()
        .map_err(io_err(format!("waiting for {}", build.display())))?;
    let stdout = stdout_reader.join().unwrap_or_default();
    if !status.success() {
        return Err(Error::Build {
            status,
            output: format!("{}\n{stdout}", tail.join("\n")),
        });
    }
    let dir = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    for name in expected {
        if !dir.join(name).is_file() {
            return Err(Error::Build {
                status,
                output: format!(
                    "{}\nbuild.sh succeeded but {} is missing",
                    tail.join("\n"),
                    dir.join(name).display()
                ),
            });
        }
    }
    Ok(dir)
}

/// Runs a `scripts/testenv` helper that must succeed.
fn script(args: &[&str]) -> Result<(), Error> {
    let out = Command::new(script_path())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(format!("running scripts/testenv {}", args[0])))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Script {
            command: args.join(" "),
            status: out.status,
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}

/// A fresh directory `$TMPDIR/katalog-testenv.<pid>.<n>`.
fn new_dir() -> Result<PathBuf, Error> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{pid}.{n}"));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Left by an earlier process with the same pid.
                let _ = fs::remove_dir_all(&dir);
            }
            Err(e) => return Err(io_err(format!("creating {}", dir.display()))(e)),
        }
    }
}

/// Removes directories left by test processes that died without dropping
/// their environments (their servers were killed by the script's watcher).
fn remove_stale_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Three distinct free loopback ports, never handed out twice in this process.
fn free_ports() -> Result<[u16; 3], Error> {
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut handed_out = lock(&HANDED_OUT);
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    // Hold every listener until all three are chosen so they differ.
    let mut listeners = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..100 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(io_err("binding a free port on 127.0.0.1"))?;
        let port = listener
            .local_addr()
            .map_err(io_err("reading a bound port"))?
            .port();
        listeners.push(listener);
        if handed_out.insert(port) {
            ports.push(port);
            if ports.len() == 3 {
                return Ok([ports[0], ports[1], ports[2]]);
            }
        }
    }
    Err(Error::Io {
        context: "choosing free ports".into(),
        source: io::Error::other("no unused loopback port after 100 tries"),
    })
}

/// The last `lines` lines of a log file.
fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(text) = fs::read_to_string(path) else {
        return format!("({} could not be read)", path.display());
    };
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_across_calls() {
        let a = free_ports().unwrap();
        let b = free_ports().unwrap();
        let all: HashSet<u16> = a.iter().chain(b.iter()).copied().collect();
        assert_eq!(all.len(), 6);
    }

    #[test]
    fn dirs_are_distinct() {
        let a = new_dir().unwrap();
        let b = new_dir().unwrap();
        assert_ne!(a, b);
        fs::remove_dir_all(a).unwrap();
        fs::remove_dir_all(b).unwrap();
    }

    #[test]
    fn log_tail_keeps_last_lines() {
        let dir = new_dir().unwrap();
        let path = dir.join("x.log");
        fs::write(&path, "a\nb\nc\n").unwrap();
        assert_eq!(log_tail(&path, 2), "b\nc");
        fs::remove_dir_all(dir).unwrap();
    }
}
