//! Keeping the certificate current ([`SelfSigned::spawn`]): a watch of the
//! Secret and a timer, the changes handed to the server and the housekeeper.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};

use super::files::*;
use super::material::*;
use super::policy::*;
use super::secret::*;
use crate::cluster::registration::SharedCaBundle;

/// What the keeper has done so far.
#[derive(Clone, Debug, Default)]
pub struct KeeperStatus {
    /// Times the Secret was checked.
    pub checks: u64,
    /// Checks that changed what is served (rotation or adoption).
    pub changes: u64,
    /// Checks that wrote the Secret.
    pub writes: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    /// The last check that wrote or adopted something.
    pub last_change: Option<(Action, Vec<String>)>,
}

/// A running keeper; [`KeeperHandle::stop`] ends it.
pub struct KeeperHandle {
    status: Arc<Mutex<KeeperStatus>>,
    current: Arc<ArcSwap<Material>>,
    stop: watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
    files: Option<Arc<ServingFiles>>,
}

impl KeeperHandle {
    pub fn status(&self) -> KeeperStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// What is served now.
    pub fn current(&self) -> Arc<Material> {
        self.current.load_full()
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Stops the thread; waits at most 5 s for it (a request to the
    /// apiserver in flight is abandoned).
    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            match self.done.recv_timeout(Duration::from_secs(5)) {
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = t.join();
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    tracing::warn!("the certificate keeper did not stop in time; leaving it");
                }
            }
        }
    }
}

impl Drop for KeeperHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What [`SelfSigned::prepare`] made: the files the server is started from
/// and the `caBundle` to register.
pub struct Prepared {
    pub files: ServingFiles,
    pub ca_bundle: SharedCaBundle,
    pub applied: Applied,
}

impl Prepared {
    /// Keep the certificate (see [`SelfSigned::spawn`]) for a running server:
    /// a change is written to the files, loaded by the server at once, and
    /// handed to the housekeeper as the new `caBundle`.
    pub fn keep(
        self,
        selfsigned: SelfSigned,
        kubeconfig: Option<PathBuf>,
        state: Arc<crate::serving::state::State>,
    ) -> KeeperHandle {
        let Prepared {
            files,
            ca_bundle,
            applied,
        } = self;
        let files = Arc::new(files);
        let on_change = {
            let files = files.clone();
            move |m: &Material| -> std::result::Result<(), ChangeError> {
                files.write(m)?;
                state.reload_cert()?;
                ca_bundle.store(Arc::new(m.ca_bundle.as_bytes().to_vec()));
                Ok(())
            }
        };
        let mut handle = selfsigned.spawn(kubeconfig, applied.material, on_change);
        handle.files = Some(files);
        handle
    }
}

impl SelfSigned {
    /// At start, before the server listens: ensure the Secret (a client from
    /// `kubeconfig`, or inferred as kubectl does) and write what to serve
    /// into `files`.
    pub fn prepare(&self, kubeconfig: Option<&Path>, files: ServingFiles) -> Result<Prepared> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SelfSignedError::Client(e.to_string()))?;
        let applied = rt.block_on(async {
            let client = crate::cluster::client(kubeconfig)
                .await
                .map_err(|e| SelfSignedError::Client(e.to_string()))?;
            self.ensure(&client, None).await
        })?;
        files.write(&applied.material)?;
        Ok(Prepared {
            ca_bundle: Arc::new(ArcSwap::from_pointee(
                applied.material.ca_bundle.as_bytes().to_vec(),
            )),
            files,
            applied,
        })
    }

    /// Keeps the Secret and `serving` in step on a thread of its own: at
    /// start, on every watch event on the Secret and every `check_interval`.
    /// Each change of what is served is handed to `on_change`; until that
    /// succeeds, what was served before still counts as served, so the next
    /// check hands the change over again.
    pub fn spawn<E: fmt::Display>(
        self,
        kubeconfig: Option<PathBuf>,
        serving: Material,
        on_change: impl FnMut(&Material) -> std::result::Result<(), E> + Send + 'static,
    ) -> KeeperHandle {
        let status = Arc::new(Mutex::new(KeeperStatus::default()));
        let current = Arc::new(ArcSwap::from_pointee(serving));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let thread = {
            let status = status.clone();
            let current = current.clone();
            std::thread::Builder::new()
                .name("katalog-certificates".into())
                .spawn(move || {
                    match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => {
                            rt.block_on(self.run(kubeconfig, current, status, on_change, stop_rx))
                        }
                        Err(e) => tracing::error!(error = %e, "the certificate keeper did not start: certificates will not rotate"),
                    }
                    let _ = done_tx.send(());
                })
        };
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, "the certificate keeper thread did not start: certificates will not rotate");
                None
            }
        };
        KeeperHandle {
            status,
            current,
            stop: stop_tx,
            done: done_rx,
            thread,
            files: None,
        }
    }

    async fn run<E: fmt::Display>(
        self,
        kubeconfig: Option<PathBuf>,
        current: Arc<ArcSwap<Material>>,
        status: Arc<Mutex<KeeperStatus>>,
        mut on_change: impl FnMut(&Material) -> std::result::Result<(), E>,
        mut stop: watch::Receiver<bool>,
    ) {
        let client = loop {
            let made = tokio::select! {
                _ = stop.changed() => return,
                c = crate::cluster::client(kubeconfig.as_deref()) => c,
            };
            match made {
                Ok(c) => break c,
                Err(e) => {
                    tracing::warn!(error = %e, "certificates: no Kubernetes client; retrying");
                    tokio::select! {
                        _ = stop.changed() => return,
                        _ = tokio::time::sleep(self.backoff.1) => {}
                    }
                }
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let name = self.secret.name.clone();
        let watcher = tokio::spawn(crate::cluster::housekeeper::watch_loop(
            self.api(&client),
            "Secret",
            crate::cluster::housekeeper::Selector {
                labels: None,
                fields: Some(format!("metadata.name={name}")),
            },
            move |n: &str| n == name,
            tx,
            self.backoff,
        ));
        // The first tick is at once: what changed since `prepare` is seen.
        let mut tick = tokio::time::interval(self.check_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                t = rx.recv() => {
                    if t.is_none() { break }
                    // A burst of events (our own write among them) is one check.
                    tokio::select! {
                        _ = stop.changed() => break,
                        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                    while rx.try_recv().is_ok() {}
                }
                _ = tick.tick() => {}
            }
            let serving = current.load_full();
            let result = tokio::select! {
                _ = stop.changed() => break,
                r = self.ensure(&client, Some(&serving)) => r,
            };
            let Ok(mut s) = status.lock().map(|s| s.clone()) else {
                break;
            };
            s.checks += 1;
            // Served only once the status counts it: whoever sees the new
            // certificate sees the change in the status too.
            let mut serve = None;
            match result {
                Ok(applied) => {
                    if applied.action != Action::Unchanged {
                        s.last_change = Some((applied.action, applied.reasons.clone()));
                    }
                    if matches!(applied.action, Action::Created | Action::Updated) {
                        s.writes += 1;
                    }
                    if applied.material != *serving {
                        match on_change(&applied.material) {
                            Ok(()) => {
                                s.changes += 1;
                                tracing::info!(
                                    secret = %self.secret,
                                    action = %applied.action,
                                    cas = applied.material.ca_count(),
                                    "serving a new self-signed certificate"
                                );
                                serve = Some(applied.material);
                            }
                            Err(e) => {
                                tracing::error!(secret = %self.secret, error = %e, "the new certificate could not be served; the previous one keeps serving; retrying at the next check");
                                s.errors += 1;
                                s.last_error = Some(e.to_string());
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(secret = %self.secret, error = %e, "certificates: check failed; retrying on the next trigger");
                    s.errors += 1;
                    s.last_error = Some(e.to_string());
                }
            }
            if let Ok(mut shared) = status.lock() {
                *shared = s;
            }
            if let Some(material) = serve {
                current.store(Arc::new(material));
            }
        }
        watcher.abort();
    }
}
