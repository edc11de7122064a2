//! The settings of the webhook server, shared by the state that reloads
//! from them and the server that listens with them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The HTTPS server: where the Katalog and the certificate are, where to
/// listen, and the limits. What `katalog serve` adds around it (generated
/// certificates, registration) is [`crate::serve::ServeConfig`].
#[derive(Clone, Debug)]
pub struct Config {
    /// A Katalog file or directory (a mounted ConfigMap).
    pub katalog: PathBuf,
    pub listen: SocketAddr,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    /// With a CA file (PEM), only clients presenting a certificate it
    /// signed are served (mutual TLS); read once at start.
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: the names a client certificate must carry, as its
    /// common name or a DNS name (any one of them); empty: any name.
    pub client_names: Vec<String>,
    /// A plain-HTTP listener for /metrics, /healthz and /readyz only.
    pub metrics_listen: Option<SocketAddr>,
    /// Largest request body accepted (a LIST page of 500 objects is several MB).
    pub body_limit: usize,
    /// Reviews read or evaluated at once; more are answered 429 (a timed-out
    /// evaluation counts until it ends).
    pub max_reviews_in_flight: usize,
    /// Request bytes held by reviews in flight; a review that would go over
    /// is answered 429. Memory per review is a multiple of its size.
    pub max_bytes_in_flight: usize,
    /// Longest evaluation of one review (the apiserver gives up after 30 s);
    /// also the deadline the evaluation checks to stop after a 504.
    pub request_timeout: Duration,
    /// Largest estimated cost of one CEL evaluation (see
    /// `katalog_lang::budget`); over it the expression is not run.
    pub cel_cost_limit: u64,
    /// How long a small review may be evaluated on the connection thread
    /// before it is stopped and evaluated again on the blocking pool (see
    /// `crate::http::limits::INLINE_BODY_LIMIT`); zero: never inline.
    pub inline_limit: Duration,
    /// Longest time a client may take to send its request.
    pub client_timeout: Duration,
    /// Longest TLS handshake; a connection that has not finished it by then
    /// (e.g. never sent a ClientHello) is closed.
    pub tls_handshake_timeout: Duration,
    /// TLS handshakes under way at once (all workers together); beyond it
    /// the server stops accepting until one finishes or times out. Idle
    /// handshakes cost a file descriptor each, nothing else.
    pub max_pending_handshakes: usize,
    /// How long in-flight requests may finish after SIGTERM / SIGINT.
    pub shutdown_grace: Duration,
    pub workers: usize,
    /// Quiet time after a file change before reloading.
    pub reload_debounce: Duration,
    /// Each watch also reloads when this much time passes without an
    /// event, in case one is lost (or a file outside the watched
    /// directories changed).
    pub reload_poll: Duration,
    /// The authority ceiling a Katalog must stay under to be served (see
    /// [`katalog_lang::ceiling`]); one over it is refused at load and the
    /// last good one keeps serving. `None`: no ceiling.
    pub ceiling: Option<katalog_lang::ceiling::Ceiling>,
    /// The engine's own namespace, protected by the ceiling too.
    pub engine_namespace: Option<String>,
    /// The oldest TLS version accepted (`--tls-min-version`).
    pub tls_min_version: crate::certs::tls::TlsMinVersion,
}

impl Config {
    pub fn new(katalog: PathBuf, tls_cert: PathBuf, tls_key: PathBuf) -> Self {
        Config {
            katalog,
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            tls_cert,
            tls_key,
            client_ca: None,
            client_names: Vec::new(),
            metrics_listen: None,
            body_limit: 32 * 1024 * 1024,
            max_reviews_in_flight: 64,
            max_bytes_in_flight: 128 * 1024 * 1024,
            request_timeout: Duration::from_secs(25),
            cel_cost_limit: katalog_lang::budget::DEFAULT_CEL_COST_LIMIT,
            inline_limit: Duration::from_millis(2),
            client_timeout: Duration::from_secs(10),
            tls_handshake_timeout: Duration::from_secs(5),
            max_pending_handshakes: 8192,
            shutdown_grace: Duration::from_secs(20),
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            reload_debounce: Duration::from_millis(150),
            reload_poll: Duration::from_secs(10),
            ceiling: None,
            engine_namespace: None,
            tls_min_version: crate::certs::tls::TlsMinVersion::Tls12,
        }
    }
}
