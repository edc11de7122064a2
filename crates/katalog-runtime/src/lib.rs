//! The katalog webhook runtime: an HTTPS server (actix-web + rustls) that
//! answers ConversionReviews and AdmissionReviews with the compiled
//! Katalog, reloads it and its certificate when the files change, keeps the
//! cluster registered, and exports metrics.
//!
//! Library first: [`serve::Serve`] builds and runs all of `katalog serve`
//! from one [`ServeConfig`] (the CLI only maps flags to it);
//! [`server::start`] starts the bare server from a [`Config`];
//! [`server::routes`] is the app, for tests without sockets.
//!
//! # Layers
//!
//! Each module uses only the modules of the layers below it, so there is
//! no import cycle:
//!
//! 1. `tls`, `metrics`, `labels`, `files`, `config`, `client`,
//!    `registration`, `leader`: leaves (certificates, counters, the label
//!    values a Katalog allows, reading Katalogs, the server settings, what
//!    is registered).
//! 2. `cluster`, `live`, `migrate`: talking to the apiserver.
//! 3. `state`: the served Katalog ([`state::Loaded`]), the certificate and
//!    the metrics, and reloading them from the files a [`Config`] names.
//! 4. `reload` (watching those files), `housekeeper` (registration kept in
//!    step with the state).
//! 5. `selfsigned`: the certificate kept in a Secret, handed to the state
//!    and the housekeeper.
//! 6. `server`: routes, handlers, limits; starting and stopping.
//! 7. `serve`: everything above assembled from one [`ServeConfig`].
//!
//! Nothing depends on `server` but `serve`.

pub mod client;
pub mod cluster;
pub mod config;
pub mod files;
pub mod housekeeper;
pub mod labels;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod migrate;
pub mod registration;
pub mod reload;
pub mod selfsigned;
pub mod serve;
pub mod server;
pub mod state;
pub mod tls;

pub use config::Config;
pub use serve::{Serve, ServeConfig, ServeError};
pub use server::{Running, ServerThread, StartError, start};

/// Log format of `katalog serve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the tracing subscriber (`RUST_LOG` filters; default `info`).
/// The logs go to standard error through [`LogWriter`]: a log line that
/// cannot be written is dropped.
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: not in log files or collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // tracing-subscriber reports a failed write with `eprintln!`, which
        // panics when standard error is the pipe that failed.
        .log_internal_errors(false)
        .with_writer(|| LogWriter);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Standard error for the logs, where a write that fails is dropped: once
/// the reader of a log pipe has gone (`katalog serve 2>&1 | head -2`, a
/// pod's log pipe that broke), every write fails with `EPIPE`, and a
/// logger that reports it (or panics on it) would take down whichever
/// thread logged — the signal handler's among them, leaving the server deaf
/// to SIGTERM. After the first broken pipe nothing more is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogWriter;

static LOG_PIPE_BROKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering::Relaxed;
        if !LOG_PIPE_BROKEN.load(Relaxed)
            && let Err(e) = std::io::stderr().lock().write_all(buf)
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            LOG_PIPE_BROKEN.store(true, Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}
