//! The HTTPS app: routes, handlers, limits, and starting and stopping it.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use futures_util::StreamExt;
use katalog_lang::admission::eval::Endpoint;
use katalog_lang::admission::review::{Verdict, review_bytes};
use katalog_lang::admission::webhooks;
use serde_json::json;

use crate::certs::tls;
use crate::metrics::{
    AdmissionKey, AdmissionLabels, ConversionKey, ConversionLabels, ReasonLabels,
};
use crate::serving::config::Config;
use crate::serving::state::State;

/// Set on a connection whose client presented a certificate the
/// `--client-ca` verified (rustls refuses the handshake of any other
/// certificate).
#[derive(Clone, Copy)]
struct ClientCertified;

fn mark_client_certified(conn: &dyn std::any::Any, ext: &mut actix_web::dev::Extensions) {
    type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
    if let Some(tls) = conn.downcast_ref::<Tls>()
        && tls.get_ref().1.peer_certificates().is_some()
    {
        ext.insert(ClientCertified);
    }
}

/// With `--client-ca`, admission (and the server's own counters) are
/// answered only on a connection with a verified client certificate; a 403
/// otherwise. `/convert` is not guarded: the apiserver presents no client
/// certificate to conversion webhooks (apiextensions-apiserver builds their
/// client without a kubeconfig), and `/healthz` and `/readyz` serve probes.
fn client_refused(req: &HttpRequest, state: &State) -> Option<HttpResponse> {
    if state.config.client_ca.is_none() || req.conn_data::<ClientCertified>().is_some() {
        return None;
    }
    Some(error(
        StatusCode::FORBIDDEN,
        "ClientCertificateRequired",
        format!(
            "{} needs a client certificate signed by the --client-ca",
            req.path()
        ),
        state,
    ))
}

/// A JSON error body with its status.
fn error(
    status: StatusCode,
    reason: &str,
    message: impl Into<String>,
    state: &State,
) -> HttpResponse {
    state
        .metrics
        .http_errors
        .get_or_create(&ReasonLabels {
            reason: reason.into(),
        })
        .inc();
    HttpResponse::build(status).json(json!({
        "error": message.into(),
        "reason": reason,
        "status": status.as_u16(),
    }))
}

/// Read the whole body within the limits, or answer why not. The bytes
/// are held in `in_flight` as they arrive (`--max-bytes-in-flight`); a
/// body still arriving takes no place among the reviews evaluated at once,
/// so clients that send their bodies slowly cannot starve the others.
async fn read_body(
    req: &HttpRequest,
    mut payload: web::Payload,
    state: &State,
    in_flight: &InFlight,
) -> Result<web::Bytes, HttpResponse> {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "expected Content-Type application/json, got {:?}",
                content_type
            ),
            state,
        ));
    }
    let limit = state.config.body_limit;
    let too_large = |state: &State| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BodyTooLarge",
            format!("the request body is over the limit of {limit} bytes (--body-limit)"),
            state,
        )
    };
    if let Some(len) = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > limit
    {
        return Err(too_large(state));
    }
    let read = async {
        let mut body = web::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| {
                error(
                    StatusCode::BAD_REQUEST,
                    "BadBody",
                    format!("failed to read the request body: {e}"),
                    state,
                )
            })?;
            if body.len() + chunk.len() > limit {
                return Err(too_large(state));
            }
            if !in_flight.hold_bytes(chunk.len(), state.config.max_bytes_in_flight) {
                return Err(too_many_bytes(state));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    let outcome = tokio::time::timeout(state.config.client_timeout, read).await;
    match outcome {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(resp)) => Err(closing(resp, payload)),
        Err(_) => {
            let resp = error(
                StatusCode::REQUEST_TIMEOUT,
                "SlowClient",
                format!(
                    "the request body did not arrive within {:?}",
                    state.config.client_timeout
                ),
                state,
            );
            Err(closing(resp, payload))
        }
    }
}

/// An answer to a request whose body was not read to its end: the
/// connection is closed after it. actix keeps a connection open to drain a
/// chunked body whose payload was dropped, so a client that stalls mid-body
/// would hold it (and a file descriptor) for good; holding the payload until
/// the answer is written makes actix close the connection instead (see
/// `should_close_for_unread_payload` in actix-http's h1 dispatcher).
fn closing(resp: HttpResponse, payload: web::Payload) -> HttpResponse {
    let status = resp.status();
    let headers: Vec<_> = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let body = match actix_web::body::MessageBody::try_into_bytes(resp.into_body()) {
        Ok(bytes) => bytes,
        Err(_) => web::Bytes::new(),
    };
    // The stream owns the payload until actix drops the body, which is
    // after it has looked at whether the request payload is still there.
    let stream = futures_util::StreamExt::map(
        futures_util::stream::iter([Ok::<_, actix_web::Error>(body)]),
        move |chunk| {
            let _held = &payload;
            chunk
        },
    );
    let mut builder = HttpResponse::build(status);
    for header in headers {
        builder.insert_header(header);
    }
    builder.force_close().streaming(stream)
}

/// Bodies up to this size are evaluated inline first (on the connection
/// thread, see [`evaluate`]). A Pod AdmissionReview is about 7 KB. Only CEL
/// evaluations and conversion objects check the deadline; the work between
/// checks (parsing, walking the object, writing the answer) grows with the
/// body, and this size is what bounds how far an inline review can run
/// past `--inline-limit` on a connection thread.
pub const INLINE_BODY_LIMIT: usize = 64 * 1024;

/// The largest estimated cost of one CEL evaluation inline: an expression
/// cannot be interrupted midway, so inline it may only be a tenth of the
/// default `--cel-cost-limit`; a costlier one stops the inline attempt (it
/// runs on the pool, where `--cel-cost-limit` applies).
pub const INLINE_CEL_COST_CAP: u64 = 100_000;

/// How long inline evaluation stays closed after an inline attempt was
/// stopped: a Katalog whose reviews overrun `--inline-limit` would
/// otherwise pay for a stopped attempt on every review.
pub const INLINE_CLOSED_AFTER_A_STOP: Duration = Duration::from_secs(10);

/// What became of an inline attempt.
enum Inline<T> {
    Answered(T),
    /// Out of its deadline or over [`INLINE_CEL_COST_CAP`]: no answer.
    Stopped,
    Panicked,
}

/// Run `work` on this thread under the inline `budget`; a panic is caught
/// (the thread is a connection thread: it keeps serving).
fn try_inline<T>(budget: katalog_lang::budget::Budget, work: impl FnOnce() -> T) -> Inline<T> {
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        katalog_lang::budget::scoped_stopped(budget, INLINE_CEL_COST_CAP, work)
    }));
    match attempt {
        Ok((value, false)) => Inline::Answered(value),
        Ok((_, true)) => Inline::Stopped,
        Err(_) => Inline::Panicked,
    }
}

/// 500: the evaluation panicked (inline or on the pool).
fn evaluation_failed(state: &State, why: impl std::fmt::Display) -> HttpResponse {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal",
        format!("evaluation failed: {why}"),
        state,
    )
}

/// Evaluate a review: a small one (`body_len` up to [`INLINE_BODY_LIMIT`])
/// inline first, under `--inline-limit` and [`INLINE_CEL_COST_CAP`], which
/// saves the handoff to the blocking pool (5–10% of the server's CPU in a
/// profile under load of ~7 KB Pod reviews); one stopped there, a large one, or any while the inline gate is
/// closed, on the pool ([`off_reactor`]) within what is left of
/// `--request-timeout`. `work` runs twice when the inline attempt stops.
async fn evaluate<T: Send + 'static>(
    state: &State,
    in_flight: &Arc<InFlight>,
    body_len: usize,
    work: impl Fn() -> T + Send + 'static,
) -> Result<T, HttpResponse> {
    let began = Instant::now();
    let config = &state.config;
    let evaluations = &state.metrics.evaluations;
    if body_len <= INLINE_BODY_LIMIT
        && !config.inline_limit.is_zero()
        && state.inline_gate.is_open(began)
    {
        let budget =
            katalog_lang::budget::Budget::until(inline_limit(config), config.cel_cost_limit);
        match try_inline(budget, &work) {
            Inline::Answered(value) => {
                evaluations.inline.inc();
                return Ok(value);
            }
            Inline::Panicked => {
                evaluations.inline.inc();
                return Err(evaluation_failed(state, "the evaluation panicked"));
            }
            Inline::Stopped => {
                evaluations.inline_stopped.inc();
                state
                    .inline_gate
                    .close_for(Instant::now(), INLINE_CLOSED_AFTER_A_STOP);
                tracing::debug!(
                    inline_limit = ?config.inline_limit,
                    "an inline evaluation was stopped: evaluating on the pool, inline closed for {INLINE_CLOSED_AFTER_A_STOP:?}"
                );
            }
        }
    }
    evaluations.pool.inc();
    let left = config.request_timeout.saturating_sub(began.elapsed());
    off_reactor(state, in_flight, left, work).await
}

/// The CPU time an inline attempt gets: `--inline-limit`, and at most a
/// tenth of `--request-timeout`, as a preempted trial may run
/// [`TRIAL_WALL_FACTOR`](katalog_lang::budget::TRIAL_WALL_FACTOR) times its
/// limit on the wall clock, which too stays within the request timeout.
fn inline_limit(config: &crate::serving::config::Config) -> Duration {
    config
        .inline_limit
        .min(config.request_timeout / katalog_lang::budget::TRIAL_WALL_FACTOR)
}

/// Run CPU-heavy evaluation off the event loop, bounded by `timeout` (what
/// is left of the request timeout). The evaluation keeps the review
/// counted in flight while it runs, also after the timeout answered 504,
/// until it notices its deadline.
async fn off_reactor<T: Send + 'static>(
    state: &State,
    in_flight: &Arc<InFlight>,
    timeout: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HttpResponse> {
    let counted = in_flight.clone();
    // The evaluation checks this deadline (per CEL evaluation, per object)
    // and stops soon after the 504 instead of running on.
    let budget = katalog_lang::budget::Budget::until(timeout, state.config.cel_cost_limit);
    let work = move || {
        let _counted = counted;
        katalog_lang::budget::scoped(budget, work)
    };
    match tokio::time::timeout(timeout, web::block(work)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(evaluation_failed(state, e)),
        Err(_) => Err(error(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!(
                "evaluation took longer than {:?} (--request-timeout)",
                state.config.request_timeout
            ),
            state,
        )),
    }
}

/// A review's share of the server's limits, given back when it is
/// dropped: the request bytes it holds (counted as they arrive, against
/// `--max-bytes-in-flight`) and, once its body is read, its place among the
/// reviews evaluated at once (`katalog_reviews_in_flight`, against
/// `--max-reviews-in-flight`). Shared with the evaluation, which goes on
/// after a 504 until it notices its deadline.
struct InFlight {
    gauge: prometheus_client::metrics::gauge::Gauge,
    /// Whether this review holds a place (counts in `gauge`).
    placed: std::sync::atomic::AtomicBool,
    bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// `bytes`, as `katalog_request_bytes_in_flight` shows it.
    bytes_gauge: prometheus_client::metrics::gauge::Gauge,
    held: std::sync::atomic::AtomicUsize,
}

impl InFlight {
    fn new(state: &State) -> Self {
        InFlight {
            gauge: state.metrics.in_flight.clone(),
            placed: std::sync::atomic::AtomicBool::new(false),
            bytes: state.bytes_in_flight.clone(),
            bytes_gauge: state.metrics.bytes_in_flight.clone(),
            held: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Whether every place is taken now (a review that would wait for its
    /// body only to be refused is refused before it is read).
    fn places_taken(state: &State) -> bool {
        usize::try_from(state.metrics.in_flight.get()).unwrap_or(0)
            >= state.config.max_reviews_in_flight
    }

    /// Take a place among the reviews evaluated at once, unless they are
    /// all taken.
    fn take_place(&self, state: &State) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        if self.placed.load(SeqCst) {
            return true;
        }
        let after = self.gauge.inc() + 1;
        if usize::try_from(after).unwrap_or(0) > state.config.max_reviews_in_flight {
            self.gauge.dec();
            return false;
        }
        self.placed.store(true, SeqCst);
        true
    }

    /// Hold `n` more request bytes, unless that takes the bytes of every
    /// review over `limit` while others hold some (one review alone is
    /// always let in, up to `--body-limit`).
    fn hold_bytes(&self, n: usize, limit: usize) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let before = self.bytes.fetch_add(n, SeqCst);
        if before.saturating_add(n) > limit && before > self.held.load(SeqCst) {
            self.bytes.fetch_sub(n, SeqCst);
            return false;
        }
        self.held.fetch_add(n, SeqCst);
        self.bytes_gauge
            .inc_by(i64::try_from(n).unwrap_or(i64::MAX));
        true
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if *self.placed.get_mut() {
            self.gauge.dec();
        }
        let held = *self.held.get_mut();
        self.bytes
            .fetch_sub(held, std::sync::atomic::Ordering::SeqCst);
        self.bytes_gauge
            .dec_by(i64::try_from(held).unwrap_or(i64::MAX));
    }
}

/// 429: the server holds as many reviews (or bytes) as it may; the
/// apiserver retries under its failure policy.
fn too_busy(state: &State, what: String) -> HttpResponse {
    let mut resp = error(StatusCode::TOO_MANY_REQUESTS, "TooManyReviews", what, state);
    resp.headers_mut().insert(
        actix_web::http::header::RETRY_AFTER,
        actix_web::http::header::HeaderValue::from_static("1"),
    );
    resp
}

/// 429: every place among the reviews evaluated at once is taken.
fn too_many_reviews(state: &State) -> HttpResponse {
    too_busy(
        state,
        format!(
            "more than {} reviews in flight (--max-reviews-in-flight); retry",
            state.config.max_reviews_in_flight
        ),
    )
}

/// 429: the bytes of a review would take the reviews in flight over
/// `--max-bytes-in-flight`.
fn too_many_bytes(state: &State) -> HttpResponse {
    too_busy(
        state,
        format!(
            "the reviews in flight hold over {} bytes (--max-bytes-in-flight); retry",
            state.config.max_bytes_in_flight
        ),
    )
}

/// Read a review's body and take its place among the reviews evaluated at
/// once, or answer why not: every place taken before the body is read
/// (its connection is closed), the body itself ([`read_body`]), or every
/// place taken once it is read.
async fn admit_review(
    req: &HttpRequest,
    payload: web::Payload,
    state: &State,
    in_flight: &InFlight,
) -> Result<web::Bytes, HttpResponse> {
    if InFlight::places_taken(state) {
        return Err(closing(too_many_reviews(state), payload));
    }
    let body = read_body(req, payload, state, in_flight).await?;
    if !in_flight.take_place(state) {
        return Err(too_many_reviews(state));
    }
    Ok(body)
}

/// The `last_error` of a stats entry for resources the Katalog does not
/// declare: a fixed text, never the sender's.
const UNDECLARED: &str = "a resource the Katalog does not declare";

async fn convert(req: HttpRequest, payload: web::Payload, state: web::Data<State>) -> HttpResponse {
    let started = Instant::now();
    let in_flight = Arc::new(InFlight::new(&state));
    let Some(loaded) = state.current() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "NotReady",
            "no Katalog is loaded yet",
            &state,
        );
    };
    if loaded.ir.resources.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            "NotDeclared",
            "the Katalog declares no resources: /convert is not served",
            &state,
        );
    }
    let body = match admit_review(&req, payload, &state, &in_flight).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let ir = loaded.ir.clone();
    let outcome = evaluate(&state, &in_flight, body.len(), move || {
        katalog_lang::conversion::review_bytes(&ir, &body).map_err(|e| e.to_string())
    })
    .await;
    let answer = match outcome {
        Ok(Ok(v)) => v,
        Ok(Err(message)) => {
            return error(StatusCode::BAD_REQUEST, "MalformedReview", message, &state);
        }
        Err(resp) => return resp,
    };
    let request = &answer.outcome;
    let from = if request.mixed {
        "mixed"
    } else {
        request.from.as_str()
    };
    // Label values from the Katalog, never from the request (see `labels`).
    let names = loaded
        .labels
        .conversion(&request.group, &request.kind, from, &request.to);
    let (group, kind, from, to) = (names.group, names.kind, names.from, names.to);
    let failed = request.failure.is_some();
    let elapsed = started.elapsed();
    let key = ConversionKey {
        group: group.into(),
        kind: kind.into(),
    };
    state
        .metrics
        .conversion_requests
        .get_or_create(&ConversionLabels {
            group: group.into(),
            kind: kind.into(),
            from: from.into(),
            to: to.into(),
            result: if failed {
                "failure".into()
            } else {
                "success".into()
            },
        })
        .inc();
    state
        .metrics
        .conversion_duration
        .get_or_create(&key)
        .observe(elapsed.as_secs_f64());
    let count = request.count;
    state
        .metrics
        .conversion_objects
        .get_or_create(&key)
        .observe(count as f64);
    // A resource or a version the Katalog does not declare is not from the
    // apiserver (it sends only what a CRD points here): its failure text
    // names what the sender chose, so the stats keep a fixed text instead.
    let message = request.failure.as_deref().unwrap_or("");
    let chosen_by_sender = !names.declared
        || from == crate::serving::labels::OTHER
        || to == crate::serving::labels::OTHER;
    let shown = if chosen_by_sender {
        UNDECLARED
    } else {
        message
    };
    state.stats.record(
        &format!("conversion {group}/{kind}"),
        elapsed.as_secs_f64() * 1000.0,
        failed.then_some(shown),
    );
    if !names.declared {
        // Counted, and logged at DEBUG only.
        state.metrics.undeclared.convert.inc();
        tracing::debug!(
            uid = request.uid.as_str(),
            detail = message,
            "conversion review of a resource the Katalog does not declare"
        );
    } else {
        tracing::info!(
            uid = request.uid.as_str(),
            kind,
            group,
            from,
            to,
            objects = count,
            spliced = request.spliced,
            result = if failed { "Failure" } else { "Success" },
            detail = if failed { shown } else { "" },
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            "conversion review"
        );
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.bytes)
}

async fn admission(
    endpoint: Endpoint,
    group: Option<String>,
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<State>,
) -> HttpResponse {
    if let Some(resp) = client_refused(&req, &state) {
        return closing(resp, payload);
    }
    let started = Instant::now();
    let in_flight = Arc::new(InFlight::new(&state));
    let Some(loaded) = state.current() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "NotReady",
            "no Katalog is loaded yet",
            &state,
        );
    };
    if !loaded.ir.admission.serves(endpoint) {
        return error(
            StatusCode::NOT_FOUND,
            "NotDeclared",
            format!(
                "the Katalog declares nothing for /{}: it is not served",
                endpoint.name()
            ),
            &state,
        );
    }
    let body = match admit_review(&req, payload, &state, &in_flight).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let ir = loaded.ir.clone();
    // A generated webhook names its group of rules; the apiserver applied
    // that group's selectors. An id the Katalog no longer has (a webhook
    // registered before the last reload, until the housekeeper re-registers)
    // gets every rule of the endpoint: more enforcement, never less.
    let only = group.and_then(|id| match webhooks::find(&ir, endpoint, &id) {
        Some(g) => Some(g.rules),
        None => {
            // The id is the sender's: counted, and warned about at most
            // once a minute (the apiserver sends one only in the moment
            // after a reload, until the housekeeper re-registers).
            state.metrics.unknown_webhook_groups.inc();
            if state.warn_unknown_group.allows(Instant::now()) {
                tracing::warn!(
                    endpoint = endpoint.name(),
                    "unknown webhook group (registered before a reload?): evaluating every rule; katalog_unknown_webhook_groups_total counts them, this is logged at most once a minute"
                );
            } else {
                tracing::debug!(endpoint = endpoint.name(), "unknown webhook group");
            }
            None
        }
    });
    let outcome = evaluate(&state, &in_flight, body.len(), move || {
        review_bytes(&ir, &body, endpoint, only.as_deref()).map_err(|e| e.to_string())
    })
    .await;
    let answer = match outcome {
        Ok(Ok(v)) => v,
        Ok(Err(message)) => {
            return error(StatusCode::BAD_REQUEST, "MalformedReview", message, &state);
        }
        Err(resp) => return resp,
    };
    let o = &answer.outcome;
    // Label values from the Katalog, never from the request (see `labels`).
    let names = loaded.labels.admission(&o.group, &o.version, &o.resource);
    let (group, version, resource) = (names.group, names.version, names.resource);
    let result = o.verdict.as_str();
    let elapsed = started.elapsed();
    state
        .metrics
        .admission_requests
        .get_or_create(&AdmissionLabels {
            endpoint: endpoint.name().into(),
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            result: result.into(),
        })
        .inc();
    state
        .metrics
        .admission_duration
        .get_or_create(&AdmissionKey {
            endpoint: endpoint.name().into(),
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        })
        .observe(elapsed.as_secs_f64());
    let denied = o.verdict == Verdict::Denied;
    let declared = names.declared;
    state.stats.record(
        &format!("{} {}/{}/{}", endpoint.name(), group, version, resource),
        elapsed.as_secs_f64() * 1000.0,
        denied.then_some(if declared {
            o.message.as_str()
        } else {
            UNDECLARED
        }),
    );
    if !declared {
        state.metrics.undeclared.admission.inc();
        tracing::debug!(
            uid = o.uid.as_str(),
            endpoint = endpoint.name(),
            result,
            "admission review of a resource the Katalog's webhooks are not registered for"
        );
        return HttpResponse::Ok()
            .content_type("application/json")
            .body(answer.bytes);
    }
    tracing::info!(
        uid = o.uid.as_str(),
        endpoint = endpoint.name(),
        resource = format!("{group}/{version}/{resource}"),
        operation = o.operation.as_str(),
        namespace = o.namespace.as_str(),
        name = o.name.as_str(),
        result,
        detail = o.message.as_str(),
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        "admission review"
    );
    HttpResponse::Ok()
        .content_type("application/json")
        .body(answer.bytes)
}

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
                admission(endpoint, None, req, payload, state)
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
                admission(endpoint, Some(group.into_inner()), req, payload, state)
            },
        ))
        .default_service(web::to(method_not_allowed))
}

/// The routes of the webhook server.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/convert")
            .route(web::post().to(convert))
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

#[cfg(test)]
mod tests {
    use super::*;
    use katalog_lang::budget::{self, Budget};

    #[test]
    fn an_inline_attempt_stays_within_the_request_timeout() {
        let config = |inline_ms, timeout_ms| crate::serving::config::Config {
            inline_limit: Duration::from_millis(inline_ms),
            request_timeout: Duration::from_millis(timeout_ms),
            ..crate::serving::config::Config::new("k".into(), "c".into(), "k".into())
        };
        assert_eq!(inline_limit(&config(2, 25_000)), Duration::from_millis(2));
        // At most a tenth: ten times that on the wall clock still fits.
        assert_eq!(
            inline_limit(&config(3_000, 25_000)),
            Duration::from_millis(2_500)
        );
    }

    #[test]
    fn an_inline_attempt_answers_stops_or_panics() {
        let roomy = Budget::until(Duration::from_secs(60), budget::DEFAULT_CEL_COST_LIMIT);
        let past = Budget {
            deadline: Some(Instant::now()),
            ..roomy
        };
        assert!(matches!(try_inline(roomy, || 7), Inline::Answered(7)));
        // What a review makes of its deadline is not an answer.
        let deadline_failed = || budget::check_deadline().map_err(|e| e.to_string());
        assert!(matches!(
            try_inline(roomy, deadline_failed),
            Inline::Answered(Ok(()))
        ));
        assert!(matches!(try_inline(past, deadline_failed), Inline::Stopped));
        // A panic is caught, and leaves the thread's budget as it was.
        assert!(matches!(
            try_inline(past, || -> u8 { panic!("inline boom") }),
            Inline::Panicked
        ));
        assert_eq!(budget::current(), Budget::default());
        assert_eq!(budget::check_deadline(), Ok(()));
    }
}
