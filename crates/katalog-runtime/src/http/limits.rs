//! A review's limits: its body (type, size, how long it takes to arrive),
//! its share of the reviews and bytes in flight ([`InFlight`]), and where
//! it is evaluated (inline on the connection thread or on the blocking
//! pool, within `--request-timeout`: [`evaluate`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;

use super::error;
use crate::serving::state::State;

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
pub(super) fn closing(resp: HttpResponse, payload: web::Payload) -> HttpResponse {
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
pub(super) async fn evaluate<T: Send + 'static>(
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
pub(super) struct InFlight {
    gauge: prometheus_client::metrics::gauge::Gauge,
    /// Whether this review holds a place (counts in `gauge`).
    placed: std::sync::atomic::AtomicBool,
    bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// `bytes`, as `katalog_request_bytes_in_flight` shows it.
    bytes_gauge: prometheus_client::metrics::gauge::Gauge,
    held: std::sync::atomic::AtomicUsize,
}

impl InFlight {
    pub(super) fn new(state: &State) -> Self {
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
pub(super) async fn admit_review(
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
