//! Shared server state: the compiled Katalog (swapped atomically on
//! reload), the certificate, metrics and stats. Reloading reads the files
//! named in the [`Config`]; watching them is [`crate::serving::reload`]'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use katalog_lang::Ir;
use serde_json::{Value, json};

use crate::certs::tls::{ReloadingCert, TlsError};
use crate::metrics::{HashLabels, Metrics, Stats};
use crate::serving::config::Config;

/// Why a reload kept what was served before.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Katalog failed to load or compile: its rendered diagnostics
    /// (`failed to read ...`, or each mistake with its location).
    #[error("{0}")]
    Katalog(String),
    /// The certificate pair failed to load.
    #[error(transparent)]
    Certificate(#[from] TlsError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A compiled Katalog and where it came from.
pub struct Loaded {
    pub ir: Arc<Ir>,
    /// FNV-1a of the source names and texts.
    pub hash: String,
    pub loaded_at: SystemTime,
    pub sources: Vec<String>,
    /// The label values of metrics and stats this Katalog allows.
    pub labels: crate::serving::labels::Declared,
}

pub struct State {
    pub config: Config,
    pub cert: Arc<ReloadingCert>,
    /// `--client-ca`, read again when its file changes.
    pub client_ca: Option<Arc<crate::certs::tls::ReloadingClientCa>>,
    katalog: ArcSwapOption<Loaded>,
    last_error: Mutex<Option<String>>,
    /// Hash of the last content that failed to compile.
    failed_hash: Mutex<Option<String>>,
    pub metrics: Metrics,
    pub stats: Stats,
    /// Request bytes held by the reviews in flight (`--max-bytes-in-flight`).
    pub bytes_in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Whether small reviews are evaluated inline (closed for a while after
    /// one was stopped).
    pub inline_gate: InlineGate,
    /// The warning about an unknown webhook group id, at most once a minute.
    pub warn_unknown_group: RateLimit,
}

/// Lets one event through per period (a log line a stranger could
/// otherwise repeat at will).
pub struct RateLimit {
    gate: InlineGate,
    period: Duration,
}

impl RateLimit {
    pub fn new(period: Duration) -> Self {
        RateLimit {
            gate: InlineGate::default(),
            period,
        }
    }

    /// Whether the event at `now` may go through (then the next one waits
    /// a period).
    pub fn allows(&self, now: Instant) -> bool {
        let until = self
            .gate
            .since_epoch(now.checked_add(self.period).unwrap_or(now));
        let open_at = self.gate.since_epoch(now);
        self.gate
            .closed_until
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |closed| {
                (open_at >= closed).then_some(until)
            })
            .is_ok()
    }
}

/// Closes inline evaluation for a while: a Katalog whose reviews overrun the
/// inline limit would otherwise pay for the stopped attempt on every review.
pub struct InlineGate {
    /// What `closed_until` counts from.
    epoch: Instant,
    /// Nanoseconds after `epoch` until which the gate is closed.
    closed_until: AtomicU64,
}

impl Default for InlineGate {
    fn default() -> Self {
        InlineGate {
            epoch: Instant::now(),
            closed_until: AtomicU64::new(0),
        }
    }
}

impl InlineGate {
    fn since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether inline evaluation is open at `now`.
    pub fn is_open(&self, now: Instant) -> bool {
        self.since_epoch(now) >= self.closed_until.load(Ordering::Relaxed)
    }

    /// Close inline evaluation for `period` from `now` (never shortens a
    /// closing already under way).
    pub fn close_for(&self, now: Instant, period: Duration) {
        let until = self.since_epoch(now.checked_add(period).unwrap_or(now));
        self.closed_until.fetch_max(until, Ordering::Relaxed);
    }
}

fn fnv1a(parts: &[&[u8]]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Why a reload did not load anything new.
enum ReloadError {
    /// Content that already failed, unchanged since.
    Unchanged,
    Failed(String),
}
use ReloadError::{Failed, Unchanged};

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl State {
    pub fn new(config: Config, cert: Arc<ReloadingCert>) -> Self {
        let state = State {
            config,
            cert,
            client_ca: None,
            katalog: ArcSwapOption::empty(),
            last_error: Mutex::new(None),
            failed_hash: Mutex::new(None),
            metrics: Metrics::default(),
            stats: Stats::default(),
            bytes_in_flight: Arc::default(),
            inline_gate: InlineGate::default(),
            warn_unknown_group: RateLimit::new(Duration::from_secs(60)),
        };
        state.record_cert_expiry();
        state
    }

    /// `katalog_certificate_expiry_timestamp_seconds` of the certificate served now.
    fn record_cert_expiry(&self) {
        if let Some(t) = crate::certs::tls::not_after(&self.cert.current()) {
            self.metrics.cert_expiry.set(t);
        }
    }

    /// The Katalog being served; requests keep the one they started with.
    pub fn current(&self) -> Option<Arc<Loaded>> {
        self.katalog.load_full()
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_error(&self, e: Option<String>) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = e;
    }

    /// Load and compile the whole Katalog again and swap it in if it changed.
    /// On failure the previous Katalog keeps serving. Returns whether it changed.
    pub fn reload(&self) -> Result<bool> {
        let path = &self.config.katalog;
        let result = crate::serving::files::read_katalog(path)
            .map_err(|d| {
                // An unreadable file (not UTF-8, out of file descriptors) is
                // reported once too, until what is read or why changes.
                let message = d.render();
                let hash = fnv1a(&[b"unreadable", message.as_bytes()]);
                let mut failed = self.failed_hash.lock().unwrap_or_else(|p| p.into_inner());
                if failed.as_deref() == Some(hash.as_str()) {
                    Unchanged
                } else {
                    *failed = Some(hash);
                    Failed(message)
                }
            })
            .and_then(|sources| {
                // The CRDs count too: a schema edit can make the Katalog
                // (in)valid. Without `crd:` keys the hash is the same as before.
                let crds = crate::serving::files::read_crds_of(&sources);
                let parts: Vec<&[u8]> = sources
                    .iter()
                    .chain(&crds)
                    .flat_map(|s| [s.name.as_bytes(), s.text.as_bytes()])
                    .collect();
                let hash = fnv1a(&parts);
                if self.current().is_some_and(|c| c.hash == hash) {
                    return Ok(None);
                }
                // The same broken content is reported once, not at every poll.
                let mut failed = self.failed_hash.lock().unwrap_or_else(|p| p.into_inner());
                if failed.as_deref() == Some(hash.as_str()) {
                    return Err(Unchanged);
                }
                let ir = crate::serving::files::compile_katalog(&sources).map_err(|d| {
                    *failed = Some(hash.clone());
                    Failed(d.render())
                })?;
                if let Some(ceiling) = &self.config.ceiling {
                    let over = katalog_lang::ceiling::check(
                        &ir,
                        &sources,
                        ceiling,
                        self.config.engine_namespace.as_deref(),
                    );
                    if !over.is_empty() {
                        *failed = Some(hash.clone());
                        return Err(Failed(katalog_lang::Diagnostics(over).render()));
                    }
                }
                *failed = None;
                Ok(Some(Loaded {
                    labels: crate::serving::labels::Declared::of(&ir),
                    ir: Arc::new(ir),
                    hash,
                    loaded_at: SystemTime::now(),
                    sources: sources.iter().map(|s| s.name.to_string()).collect(),
                }))
            });
        match result {
            Ok(None) => {
                // The files are back to what is being served.
                self.set_error(None);
                Ok(false)
            }
            Ok(Some(loaded)) => {
                self.metrics.katalog_info.clear();
                self.metrics
                    .katalog_info
                    .get_or_create(&HashLabels {
                        hash: loaded.hash.clone(),
                    })
                    .set(1);
                self.metrics.reloads.inc();
                self.metrics.last_reload.set(unix(loaded.loaded_at));
                tracing::info!(hash = %loaded.hash, sources = ?loaded.sources, "katalog loaded");
                self.katalog.store(Some(Arc::new(loaded)));
                self.set_error(None);
                Ok(true)
            }
            Err(Unchanged) => Err(Error::Katalog(self.last_error().unwrap_or_default())),
            Err(Failed(e)) => {
                self.metrics.reload_failures.inc();
                if self.current().is_some() {
                    tracing::error!(error = %e, path = %path.display(), "katalog reload failed; the previous Katalog keeps serving");
                } else {
                    tracing::error!(error = %e, path = %path.display(), "katalog load failed; no Katalog is serving until the files compile");
                }
                self.set_error(Some(e.clone()));
                Err(Error::Katalog(e))
            }
        }
    }

    /// Load the certificate files again; a broken pair keeps the old one.
    pub fn reload_cert(&self) -> Result<bool> {
        match crate::certs::tls::load_pair(&self.config.tls_cert, &self.config.tls_key) {
            Ok(key) => {
                let current = self.cert.current();
                if current.cert == key.cert {
                    return Ok(false);
                }
                self.cert.swap(key);
                self.record_cert_expiry();
                self.metrics.cert_reloads.inc();
                tracing::info!(cert = %self.config.tls_cert.display(), "serving certificate rotated");
                Ok(true)
            }
            Err(e) => {
                self.metrics.cert_reload_failures.inc();
                tracing::error!(error = %e, "certificate reload failed; the previous certificate keeps serving");
                Err(e.into())
            }
        }
    }

    /// Read the `--client-ca` file again: a rotated CA verifies the next
    /// handshakes; an unreadable file or one without a certificate keeps
    /// the previous CA.
    pub fn reload_client_ca(&self) -> Result<bool> {
        let (Some(ca), Some(path)) = (&self.client_ca, &self.config.client_ca) else {
            return Ok(false);
        };
        let swapped = std::fs::read(path)
            .map_err(|source| TlsError::Read {
                path: path.display().to_string(),
                source,
            })
            .and_then(|pem| ca.swap_pem(&pem));
        match swapped {
            Ok(true) => {
                tracing::info!(client_ca = %path.display(), "client CA rotated");
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => {
                tracing::error!(error = %e, "client CA reload failed; the previous CA keeps verifying clients");
                Err(e.into())
            }
        }
    }

    /// The `/katalog` summary.
    pub fn summary(&self) -> Value {
        let current = self.current();
        let resources: Vec<Value> = current
            .as_ref()
            .map(|c| {
                c.ir.resources
                    .iter()
                    .map(|r| {
                        json!({
                            "group": r.group, "kind": r.kind, "plural": r.plural, "hub": r.hub,
                            "versions": r.served().collect::<Vec<_>>(),
                            "rules": r.versions.iter().map(|v| v.rules.len()).sum::<usize>(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        json!({
            "ready": current.is_some(),
            "katalog": current.as_ref().map(|c| json!({
                "hash": c.hash,
                "sources": c.sources,
                "loadedAt": unix(c.loaded_at),
                "validations": c.ir.admission.validations.len(),
                "mutations": c.ir.admission.mutations.len(),
            })),
            "resources": resources,
            "lastReloadError": self.last_error(),
            "stats": self.stats.snapshot(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(katalog: std::path::PathBuf) -> State {
        crate::certs::tls::install_crypto_provider();
        let dev = crate::certs::tls::generate_dev_certificates(&["localhost".into()]).unwrap();
        let key = crate::certs::tls::certified_key_from_pem(
            dev.cert_pem.as_bytes(),
            dev.key_pem.as_bytes(),
            "cert",
            "key",
        )
        .unwrap();
        let config = Config::new(katalog, "unused.crt".into(), "unused.key".into());
        State::new(config, Arc::new(ReloadingCert::new(key)))
    }

    #[test]
    fn a_rate_limit_lets_one_event_through_per_period() {
        let limit = RateLimit::new(Duration::from_secs(60));
        let now = Instant::now();
        assert!(limit.allows(now));
        assert!(!limit.allows(now));
        assert!(!limit.allows(now + Duration::from_secs(59)));
        assert!(limit.allows(now + Duration::from_secs(60)));
        assert!(!limit.allows(now + Duration::from_secs(61)));
    }

    #[test]
    fn the_inline_gate_closes_for_a_period() {
        let gate = InlineGate::default();
        let now = Instant::now();
        assert!(gate.is_open(now));
        gate.close_for(now, Duration::from_secs(10));
        assert!(!gate.is_open(now));
        assert!(!gate.is_open(now + Duration::from_millis(9_999)));
        assert!(gate.is_open(now + Duration::from_secs(10)));
        // A shorter closing does not reopen it earlier.
        gate.close_for(now, Duration::from_secs(1));
        assert!(!gate.is_open(now + Duration::from_secs(5)));
    }

    #[test]
    fn an_unreadable_katalog_is_reported_once_until_it_changes() {
        let dir = std::env::temp_dir().join(format!("katalog-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.yaml");
        std::fs::write(&file, b"\xff\xfe not UTF-8").unwrap();
        let state = state(file.clone());
        let first = state.reload().unwrap_err().to_string();
        assert!(first.contains("failed to read"), "{first}");
        for _ in 0..3 {
            assert_eq!(state.reload().unwrap_err().to_string(), first);
        }
        assert_eq!(state.metrics.reload_failures.get(), 1);
        // Another reason is reported again; a good Katalog clears it.
        std::fs::remove_file(&file).unwrap();
        assert_ne!(state.reload().unwrap_err().to_string(), first);
        assert_eq!(state.metrics.reload_failures.get(), 2);
        std::fs::write(
            &file,
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec: {}\n",
        )
        .unwrap();
        assert!(matches!(state.reload(), Ok(true)));
        assert_eq!(state.last_error(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What `reload` logs, captured.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_first_load_does_not_speak_of_a_previous_katalog() {
        let dir = std::env::temp_dir().join(format!("katalog-first-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.yaml");
        std::fs::write(&file, "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\n").unwrap();
        let state = state(file.clone());
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let text = || String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        tracing::subscriber::with_default(subscriber, || {
            assert!(state.reload().is_err());
            assert!(
                text()
                    .contains("katalog load failed; no Katalog is serving until the files compile"),
                "{}",
                text()
            );
            assert!(!text().contains("previous Katalog"), "{}", text());
            // Once one serves, a broken edit keeps it.
            std::fs::write(
                &file,
                "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec: {}\n",
            )
            .unwrap();
            assert!(matches!(state.reload(), Ok(true)));
            std::fs::write(&file, "apiVersion: katalog.dev/v1alpha1\nkind: Nope\n").unwrap();
            assert!(state.reload().is_err());
            assert!(
                text().contains("katalog reload failed; the previous Katalog keeps serving"),
                "{}",
                text()
            );
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_katalog_over_the_ceiling_is_refused_and_the_last_good_one_keeps_serving() {
        let dir = std::env::temp_dir().join(format!("katalog-ceiling-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.yaml");
        let good = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec:\n  admission:\n    validations:\n      - name: pod-owner\n        resources: [v1/pods]\n        path: metadata.labels.owner\n        check: {exists: true}\n";
        std::fs::write(&file, good).unwrap();
        let mut state = state(file.clone());
        state.config.ceiling = Some(katalog_lang::ceiling::Ceiling::default());
        state.config.engine_namespace = Some("katalog-system".into());
        assert!(matches!(state.reload(), Ok(true)));
        let served = state.current().unwrap().hash.clone();
        // Fail-closed on Nodes: over the default ceiling.
        let over = good.replace("[v1/pods]", "[v1/nodes]");
        std::fs::write(&file, &over).unwrap();
        let e = state.reload().unwrap_err().to_string();
        assert!(e.contains("k.yaml:7:"), "located at the rule: {e}");
        assert!(
            e.contains("fail-closed (failurePolicy Fail) on /nodes"),
            "{e}"
        );
        assert_eq!(state.current().unwrap().hash, served);
        assert_eq!(state.metrics.reload_failures.get(), 1);
        // Without excluding the engine's namespace, neither.
        let own = good.replace(
            "  admission:\n",
            "  admission:\n    excludeEngineNamespace: false\n",
        );
        std::fs::write(&file, &own).unwrap();
        let e = state.reload().unwrap_err().to_string();
        assert!(e.contains("in katalog-system"), "{e}");
        assert_eq!(state.current().unwrap().hash, served);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
