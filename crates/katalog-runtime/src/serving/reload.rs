//! Hot reload: watch the Katalog (and its CRD files), the certificate
//! files, the client CA and the caBundle.
//!
//! A mounted ConfigMap or Secret is updated by the kubelet writing a new
//! timestamped directory and renaming the `..data` symlink over the old one,
//! so the watch is on the directory, not on the files, and every change,
//! whatever it is, triggers a full reload (a no-op when the content hash is
//! unchanged). A slow poll backs the watch up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use notify::RecommendedWatcher;
use notify_debouncer_full::{Debouncer, RecommendedCache, new_debouncer};

use crate::cluster::registration::{SharedCaBundle, check_ca_bundle};
use crate::serving::state::State;

/// Why a watch could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("failed to watch {path}: {source}")]
    Watch {
        path: String,
        #[source]
        source: notify::Error,
    },
    #[error("failed to watch {path}: {source}")]
    Thread {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the caBundle {path}: {message}")]
    CaBundle { path: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Keeps the watches alive; dropping it stops them.
pub struct Watchers {
    _debouncers: Vec<Debouncer<RecommendedWatcher, RecommendedCache>>,
}

fn dir_of(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.to_path_buf()
    } else {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

fn watch_dirs(
    dirs: Vec<PathBuf>,
    debounce: Duration,
    poll: Duration,
    on_change: impl Fn() + Send + 'static,
) -> Result<Debouncer<RecommendedWatcher, RecommendedCache>> {
    let (tx, rx) = channel();
    let mut debouncer = new_debouncer(debounce, None, tx).map_err(|source| Error::Watch {
        path: format!("{dirs:?}"),
        source,
    })?;
    for dir in &dirs {
        debouncer
            .watch(dir, notify::RecursiveMode::NonRecursive)
            .map_err(|source| Error::Watch {
                path: dir.display().to_string(),
                source,
            })?;
    }
    std::thread::Builder::new()
        .name("katalog-watch".into())
        .spawn(move || {
            // Ends when the debouncer (and so the sender) is dropped.
            loop {
                match rx.recv_timeout(poll) {
                    // Our own reads of the files show up as access events:
                    // reacting to them would reload forever.
                    Ok(Ok(events)) if events.iter().all(|e| e.event.kind.is_access()) => {}
                    Ok(_) | Err(RecvTimeoutError::Timeout) => on_change(),
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        })
        .map_err(|source| Error::Thread {
            path: format!("{dirs:?}"),
            source,
        })?;
    Ok(debouncer)
}

/// Start watching the Katalog (with the CRD files its `crd:` keys name
/// at the start) and the certificate pair of `state`.
pub fn watch(state: Arc<State>) -> Result<Watchers> {
    let debounce = state.config.reload_debounce;
    let poll = state.config.reload_poll;
    let mut katalog_dirs = vec![dir_of(&state.config.katalog)];
    // A CRD kept apart from the Katalog: its directory too. A `crd:` key
    // added later is seen at the next poll.
    if let Ok(sources) = crate::serving::files::read_katalog(&state.config.katalog) {
        for path in crate::serving::files::crd_paths_of(&sources) {
            let dir = dir_of(&path);
            if dir.is_dir() && !katalog_dirs.contains(&dir) {
                katalog_dirs.push(dir);
            }
        }
    }
    let katalog = {
        let state = state.clone();
        watch_dirs(katalog_dirs, debounce, poll, move || {
            let _ = state.reload();
        })?
    };
    let mut cert_dirs = vec![
        dir_of(&state.config.tls_cert),
        dir_of(&state.config.tls_key),
    ];
    cert_dirs.extend(state.config.client_ca.as_deref().map(dir_of));
    cert_dirs.sort();
    cert_dirs.dedup();
    let cert = watch_dirs(cert_dirs, debounce, poll, move || {
        let _ = state.reload_cert();
        let _ = state.reload_client_ca();
    })?;
    Ok(Watchers {
        _debouncers: vec![katalog, cert],
    })
}

/// The caBundle in `path` (`--ca-bundle`, e.g. the `ca.crt` of a mounted
/// cert-manager Secret), read again whenever the file changes, so the
/// housekeeper registers a rotated CA. A file that is not PEM certificates
/// is an error at start and, later, keeps the previous bundle.
pub fn watch_ca_bundle(
    path: &Path,
    debounce: Duration,
    poll: Duration,
) -> Result<(SharedCaBundle, Watchers)> {
    let read = |path: &Path| -> std::result::Result<Vec<u8>, String> {
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        check_ca_bundle(&bytes).map_err(|e| e.to_string())?;
        Ok(bytes)
    };
    let first = read(path).map_err(|message| Error::CaBundle {
        path: path.display().to_string(),
        message,
    })?;
    let bundle: SharedCaBundle = Arc::new(arc_swap::ArcSwap::from_pointee(first));
    let watcher = {
        let bundle = bundle.clone();
        let path = path.to_path_buf();
        watch_dirs(vec![dir_of(&path)], debounce, poll, move || {
            match read(&path) {
                Ok(bytes) if **bundle.load() != bytes => {
                    tracing::info!(path = %path.display(), "caBundle changed; registering it");
                    bundle.store(Arc::new(bytes));
                }
                Ok(_) => {}
                Err(e) => tracing::error!(
                    path = %path.display(),
                    error = %e,
                    "caBundle unreadable; the previous one stays registered"
                ),
            }
        })?
    };
    Ok((
        bundle,
        Watchers {
            _debouncers: vec![watcher],
        },
    ))
}
