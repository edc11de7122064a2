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
//! 1. `tls`, `metrics`, `files`, `config`, `client`, `registration`,
//!    `leader`: leaves (certificates, counters, reading Katalogs, the
//!    server settings, what is registered).
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
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: not in log files or collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
