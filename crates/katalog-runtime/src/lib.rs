//! The katalog webhook runtime: an HTTPS server (actix-web + rustls) that
//! answers ConversionReviews and AdmissionReviews with the compiled
//! Katalog, reloads it and its certificate when the files change, keeps the
//! cluster registered, and exports metrics.
//!
//! # The API
//!
//! What the CLI, the integration tests and the benchmarks use, and nothing
//! else is public:
//!
//! - [`Serve`] builds and runs all of `katalog serve` from one
//!   [`ServeConfig`] (the CLI only maps flags to it); [`init_tracing`] its
//!   logs.
//! - [`start`] and [`ServerThread`] start the bare server from a
//!   [`Config`]; [`http::client::HttpsClient`] speaks to it.
//! - [`cluster`]: `katalog register`, `unregister`, `manifests`, `rbac`,
//!   `migrate` and `--live` ([`cluster::registration`],
//!   [`cluster::migrate`], [`cluster::live`]), and the housekeeper and
//!   leader election the cluster tests drive.
//! - [`certs`]: development certificates, the TLS settings, and the
//!   self-signed certificate kept in a Secret.
//! - [`serving::files`]: reading and compiling a Katalog from disk.
//!
//! # Layout
//!
//! - [`metrics`]: the counters, their one table, and the stats (a leaf but
//!   for the label values of [`serving::labels`]).
//! - [`certs`]: certificates (`tls` a leaf; `selfsigned` above the state and
//!   the housekeeper it hands the certificate to).
//! - [`serving`]: the settings, the files, the served state, reloading.
//! - [`cluster`]: talking to the apiserver (registration, housekeeper,
//!   leader, migration, live CRDs).
//! - [`http`]: routes, handlers, limits; starting and stopping.
//! - [`serve`]: everything above assembled from one [`ServeConfig`].
//!
//! Each file uses only files below it (`crates/katalog-lang/tests/structure.rs`
//! finds any import cycle); nothing depends on `http` but `serve`.

pub mod certs;
pub mod cluster;
pub mod http;
pub mod metrics;
pub mod serve;
pub mod serving;

pub use http::server::{Running, ServerThread, StartError, start};
pub use serve::{Serve, ServeConfig, ServeError};
pub use serving::config::Config;
pub use serving::log::{LogFormat, LogWriter, init_tracing};
