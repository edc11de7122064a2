//! The HTTPS app: its routes, the probes and counters, and starting and
//! stopping it. The reviews are answered by [`super::review`], within the
//! limits of [`super::limits`].

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use katalog_lang::admission::eval::Endpoint;

use super::review::{self, Admission, Conversion};
use super::{ClientCertified, client_refused, error, mark_client_certified};
use crate::certs::tls;
use crate::serving::config::Config;
use crate::serving::state::State;

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// Probes are unauthenticated: why the Katalog failed to load (its text,
/// paths and values) is told only to a client with a certificate the
/// `--client-ca` signed; everyone else finds it in the logs.
async fn readyz(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    let certified =
        state.config.client_ca.is_some() && req.conn_data::<ClientCertified>().is_some();
    match state.current() {
        Some(_) => HttpResponse::Ok().content_type("text/plain").body("ok\n"),
        None => HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body(match state.last_error() {
                Some(e) if certified => format!("not ready: no Katalog is loaded ({e})\n"),
                Some(_) => "not ready: no Katalog is loaded (the reason is in the logs)\n".into(),
                None => "not ready: no Katalog is loaded\n".into(),
            }),
    }
}

async fn metrics(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    if let Some(resp) = client_refused(&req, &state) {
        return resp;
    }
    monitoring_metrics(state).await
}

/// `/metrics` on the plain `--metrics-listen` listener (never guarded).
async fn monitoring_metrics(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}

/// `/katalog` on the HTTPS listener: only behind client authentication
/// (`--client-ca`, a client certificate), as its stats and reload error
/// describe the rules and their denials; else on the monitoring listener.
async fn katalog_stats(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    if state.config.client_ca.is_none() {
        return error(
            StatusCode::NOT_FOUND,
            "NotServedHere",
            "/katalog is served on the --metrics-listen listener, or here with --client-ca to clients with a certificate",
            &state,
        );
    }
    if let Some(resp) = client_refused(&req, &state) {
        return resp;
    }
    HttpResponse::Ok().json(state.summary())
}

/// `/katalog` on the plain `--metrics-listen` listener.
async fn monitoring_katalog_stats(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok().json(state.summary())
}

async fn not_found(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "NoRoute",
        format!("no route for {} {}", req.method(), req.path()),
        &state,
    )
}

async fn method_not_allowed(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("{} does not accept {}", req.path(), req.method()),
        &state,
    )
}

fn post(path: &str, endpoint: Endpoint) -> actix_web::Resource {
    web::resource(path)
        .route(web::post().to(
            move |req: HttpRequest, payload: web::Payload, state: web::Data<State>| {
                review::answer(
                    Admission {
                        endpoint,
                        group: None,
                    },
                    req,
                    payload,
                    state,
                )
            },
        ))
        .default_service(web::to(method_not_allowed))
}

/// `/validate/{group}` and `/mutate/{group}`: the rules of one generated webhook.
fn post_group(path: &str, endpoint: Endpoint) -> actix_web::Resource {
    web::resource(path)
        .route(web::post().to(
            move |req: HttpRequest,
                  group: web::Path<String>,
                  payload: web::Payload,
                  state: web::Data<State>| {
                let group = Some(group.into_inner());
                review::answer(Admission { endpoint, group }, req, payload, state)
            },
        ))
        .default_service(web::to(method_not_allowed))
}

/// The routes of the webhook server.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/convert")
            .route(web::post().to(
                |req: HttpRequest, payload: web::Payload, state: web::Data<State>| {
                    review::answer(Conversion, req, payload, state)
                },
            ))
            .default_service(web::to(method_not_allowed)),
    )
    .service(post("/validate", Endpoint::Validate))
    .service(post_group("/validate/{group}", Endpoint::Validate))
    .service(post("/mutate", Endpoint::Mutate))
    .service(post_group("/mutate/{group}", Endpoint::Mutate))
    .service(post("/deletion-protection", Endpoint::DeletionProtection))
    .service(post("/namespace-protection", Endpoint::NamespaceProtection))
    .service(post("/strict-mode-protection", Endpoint::StrictMode))
    .service(web::resource("/healthz").route(web::get().to(healthz)))
    .service(web::resource("/readyz").route(web::get().to(readyz)))
    .service(web::resource("/metrics").route(web::get().to(metrics)))
    .service(web::resource("/katalog").route(web::get().to(katalog_stats)))
    .default_service(web::to(not_found));
}

fn monitoring_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/healthz").route(web::get().to(healthz)))
        .service(web::resource("/readyz").route(web::get().to(readyz)))
        .service(web::resource("/metrics").route(web::get().to(monitoring_metrics)))
        .service(web::resource("/katalog").route(web::get().to(monitoring_katalog_stats)))
        .default_service(web::to(not_found));
}

/// A started server.
pub struct Running {
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub handle: actix_web::dev::ServerHandle,
    pub state: Arc<State>,
    pub server: actix_web::dev::Server,
    metrics_server: Option<actix_web::dev::Server>,
    _watchers: crate::serving::reload::Watchers,
}

impl Running {
    /// Serve until stopped (SIGTERM / SIGINT, or [`Running::handle`]).
    pub async fn wait(self) -> std::io::Result<()> {
        let metrics_handle = self.metrics_server.as_ref().map(|s| s.handle());
        if let Some(m) = self.metrics_server {
            actix_web::rt::spawn(m);
        }
        let result = self.server.await;
        if let Some(h) = metrics_handle {
            h.stop(false).await;
        }
        result
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Watch(#[from] crate::serving::reload::Error),
    #[error("failed to start the server thread: it ended before it listened")]
    Ended,
}

pub type Result<T, E = StartError> = std::result::Result<T, E>;

/// Load the certificate and the Katalog, start watching both, bind and
/// start serving. Must run inside an actix system.
pub async fn start(config: Config) -> Result<Running> {
    tls::install_crypto_provider();
    let cert = Arc::new(tls::ReloadingCert::new(tls::load_pair(
        &config.tls_cert,
        &config.tls_key,
    )?));
    let client_ca = match &config.client_ca {
        None => None,
        Some(path) => {
            let pem = std::fs::read(path).map_err(|source| tls::TlsError::Read {
                path: path.display().to_string(),
                source,
            })?;
            Some(Arc::new(
                tls::ReloadingClientCa::from_pem(&pem, &path.display().to_string())?
                    .with_names(config.client_names.clone()),
            ))
        }
    };
    let mut state = State::new(config.clone(), cert.clone());
    state.client_ca = client_ca.clone();
    let state = Arc::new(state);
    if let Err(e) = state.reload() {
        tracing::error!(error = %e, "the Katalog did not load; serving not ready until it does");
    }
    let watchers = crate::serving::reload::watch(state.clone())?;
    let tls_config = tls::server_config_with_min_version(cert, client_ca, config.tls_min_version)?;
    let listener = TcpListener::bind(config.listen).map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let data = web::Data::from(state.clone());
    let server = {
        let data = data.clone();
        HttpServer::new(move || App::new().app_data(data.clone()).configure(routes))
            .on_connect(mark_client_certified)
            .workers(config.workers.max(1))
            .client_request_timeout(config.client_timeout)
            // actix-tls stops accepting on a worker that has this many
            // handshakes under way (256 by default): connections that never
            // send a ClientHello then queue real clients behind them until
            // they time out. A high count and a short timeout keep real
            // handshakes prompt while the descriptors stay bounded.
            .tls_handshake_timeout(config.tls_handshake_timeout)
            .max_connection_rate((config.max_pending_handshakes / config.workers.max(1)).max(1))
            .shutdown_timeout(config.shutdown_grace.as_secs().max(1))
            // actix stops at once on SIGINT; `run` drains on SIGINT too.
            .disable_signals()
            .listen_rustls_0_23(listener, tls_config)
            .map_err(|source| StartError::Listen { addr, source })?
            .run()
    };
    let (metrics_server, metrics_addr) = match config.metrics_listen {
        None => (None, None),
        Some(maddr) => {
            let l = TcpListener::bind(maddr).map_err(|source| StartError::Listen {
                addr: maddr,
                source,
            })?;
            let bound = l.local_addr().map_err(|source| StartError::Listen {
                addr: maddr,
                source,
            })?;
            let data = data.clone();
            let s = HttpServer::new(move || {
                App::new()
                    .app_data(data.clone())
                    .configure(monitoring_routes)
            })
            .workers(1)
            .disable_signals()
            .listen(l)
            .map_err(|source| StartError::Listen {
                addr: bound,
                source,
            })?
            .run();
            (Some(s), Some(bound))
        }
    };
    tracing::info!(%addr, katalog = %config.katalog.display(), "katalog serving");
    Ok(Running {
        addr,
        metrics_addr,
        handle: server.handle(),
        state,
        server,
        metrics_server,
        _watchers: watchers,
    })
}

/// A server running on its own thread with its own actix system (for tests
/// and tools that are not async themselves).
pub struct ServerThread {
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub handle: actix_web::dev::ServerHandle,
    pub state: Arc<State>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl ServerThread {
    pub fn spawn(config: Config) -> Result<ServerThread> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                match start(config).await {
                    Ok(running) => {
                        let info = (
                            running.addr,
                            running.metrics_addr,
                            running.handle.clone(),
                            running.state.clone(),
                        );
                        let _ = tx.send(Ok(info));
                        running.wait().await
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        Ok(())
                    }
                }
            })
        });
        match rx.recv() {
            Ok(Ok((addr, metrics_addr, handle, state))) => Ok(ServerThread {
                addr,
                metrics_addr,
                handle,
                state,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StartError::Ended),
        }
    }

    /// Stop gracefully (in-flight requests finish) and wait for the thread.
    pub fn stop(mut self) {
        let handle = self.handle.clone();
        let stopper = std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(handle.stop(true));
        });
        let _ = stopper.join();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// SIGTERM and SIGINT (Ctrl-C) both stop gracefully: no new connections,
/// requests in flight get `shutdown_grace` to finish. SIGQUIT stops at once.
async fn stop_on_signals(handle: actix_web::dev::ServerHandle) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::quit()),
    ) else {
        tracing::error!("failed to install the signal handlers; stop the server with SIGKILL");
        return;
    };
    let graceful = tokio::select! {
        _ = term.recv() => {
            tracing::info!("SIGTERM: draining the requests in flight");
            true
        }
        _ = int.recv() => {
            tracing::info!("SIGINT: draining the requests in flight");
            true
        }
        _ = quit.recv() => {
            tracing::info!("SIGQUIT: stopping at once");
            false
        }
    };
    handle.stop(graceful).await;
}

/// Start and serve until SIGTERM / SIGINT; the entry point of `katalog serve`.
/// `on_start` is told the bound address and the state once the server
/// listens; what it returns (e.g. a housekeeper handle) is kept until the
/// server has stopped, then dropped.
pub fn run<G>(
    config: Config,
    on_start: impl FnOnce(SocketAddr, Arc<State>) -> G + Send + 'static,
) -> Result<(), StartError> {
    actix_web::rt::System::new().block_on(async move {
        let running = start(config).await?;
        actix_web::rt::spawn(stop_on_signals(running.handle.clone()));
        let guard = on_start(running.addr, running.state.clone());
        let addr = running.addr;
        let waited = running.wait().await;
        drop(guard);
        waited.map_err(|source| StartError::Listen { addr, source })?;
        tracing::info!("katalog stopped");
        Ok(())
    })
}
