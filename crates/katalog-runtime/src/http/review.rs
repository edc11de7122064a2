//! The review endpoints: one handler ([`answer`]) for ConversionReviews
//! (`/convert`) and AdmissionReviews (`/validate`, `/mutate`, the
//! protections), over what sets the two apart ([`Review`]): whether the
//! endpoint is guarded and served, the evaluation, and what is counted and
//! logged of its outcome. Limits, reading the body, where the evaluation
//! runs and the error answers are the handler's, once.

use std::sync::Arc;
use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use katalog_lang::Ir;
use katalog_lang::admission::eval::Endpoint;
use katalog_lang::admission::review::{Verdict, review_bytes};
use katalog_lang::admission::webhooks;

use super::limits::{InFlight, admit_review, closing, evaluate};
use super::{client_refused, error};
use crate::metrics::{AdmissionKey, AdmissionLabels, ConversionKey, ConversionLabels};
use crate::serving::state::{Loaded, State};

/// The `last_error` of a stats entry for resources the Katalog does not
/// declare: a fixed text, never the sender's.
const UNDECLARED: &str = "a resource the Katalog does not declare";

/// What sets one kind of review apart; [`answer`] does the rest.
pub(super) trait Review: Send + 'static {
    /// What the evaluation gives: the answer's bytes and its outcome.
    type Answer: Send + 'static;

    /// Answered only on a connection with a client certificate the
    /// `--client-ca` verified ([`client_refused`]).
    const GUARDED: bool;

    /// Why the loaded Katalog does not serve this endpoint (404), if so.
    fn not_served(&self, ir: &Ir) -> Option<String>;

    /// The evaluation of `body`, run inline or on the blocking pool (twice
    /// when an inline attempt is stopped); an error is a malformed review.
    fn work(
        &self,
        ir: Arc<Ir>,
        body: web::Bytes,
        state: &State,
    ) -> impl Fn() -> Result<Self::Answer, String> + Send + 'static;

    /// Count, record and log the outcome (label values from the Katalog,
    /// never from the request: see `serving::labels`); the answer's bytes.
    fn record(
        &self,
        answer: Self::Answer,
        loaded: &Loaded,
        state: &State,
        started: Instant,
    ) -> Vec<u8>;
}

/// Answer one review: refused (client certificate, no Katalog loaded, not
/// served, over a limit, malformed, timed out) with an error response, or
/// evaluated and answered with the review's answer.
pub(super) async fn answer<R: Review>(
    review: R,
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<State>,
) -> HttpResponse {
    if R::GUARDED
        && let Some(resp) = client_refused(&req, &state)
    {
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
    if let Some(why) = review.not_served(&loaded.ir) {
        return error(StatusCode::NOT_FOUND, "NotDeclared", why, &state);
    }
    let body = match admit_review(&req, payload, &state, &in_flight).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let len = body.len();
    let work = review.work(loaded.ir.clone(), body, &state);
    let answer = match evaluate(&state, &in_flight, len, work).await {
        Ok(Ok(v)) => v,
        Ok(Err(message)) => {
            return error(StatusCode::BAD_REQUEST, "MalformedReview", message, &state);
        }
        Err(resp) => return resp,
    };
    let bytes = review.record(answer, &loaded, &state, started);
    HttpResponse::Ok()
        .content_type("application/json")
        .body(bytes)
}

/// `/convert`. Not guarded: the apiserver presents no client certificate
/// to conversion webhooks.
pub(super) struct Conversion;

impl Review for Conversion {
    type Answer = katalog_lang::conversion::Answer;
    const GUARDED: bool = false;

    fn not_served(&self, ir: &Ir) -> Option<String> {
        ir.resources
            .is_empty()
            .then(|| "the Katalog declares no resources: /convert is not served".into())
    }

    fn work(
        &self,
        ir: Arc<Ir>,
        body: web::Bytes,
        _: &State,
    ) -> impl Fn() -> Result<Self::Answer, String> + Send + 'static {
        move || katalog_lang::conversion::review_bytes(&ir, &body).map_err(|e| e.to_string())
    }

    fn record(
        &self,
        answer: Self::Answer,
        loaded: &Loaded,
        state: &State,
        started: Instant,
    ) -> Vec<u8> {
        let request = &answer.outcome;
        let from = if request.mixed {
            "mixed"
        } else {
            request.from.as_str()
        };
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
        // A resource or a version the Katalog does not declare is not from
        // the apiserver (it sends only what a CRD points here): its failure
        // text names what the sender chose, so the stats keep a fixed text.
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
        answer.bytes
    }
}

/// An admission endpoint, and the group of rules a generated webhook
/// names (`/validate/{group}`), if any.
pub(super) struct Admission {
    pub(super) endpoint: Endpoint,
    pub(super) group: Option<String>,
}

impl Review for Admission {
    type Answer = katalog_lang::admission::review::Answer;
    const GUARDED: bool = true;

    fn not_served(&self, ir: &Ir) -> Option<String> {
        (!ir.admission.serves(self.endpoint)).then(|| {
            format!(
                "the Katalog declares nothing for /{}: it is not served",
                self.endpoint.name()
            )
        })
    }

    fn work(
        &self,
        ir: Arc<Ir>,
        body: web::Bytes,
        state: &State,
    ) -> impl Fn() -> Result<Self::Answer, String> + Send + 'static {
        let endpoint = self.endpoint;
        // A generated webhook names its group of rules; the apiserver
        // applied that group's selectors. An id the Katalog no longer has (a
        // webhook registered before the last reload, until the housekeeper
        // re-registers) gets every rule of the endpoint: more enforcement,
        // never less.
        let only = self
            .group
            .as_ref()
            .and_then(|id| match webhooks::find(&ir, endpoint, id) {
                Some(g) => Some(g.rules),
                None => {
                    // The id is the sender's: counted, and warned about at
                    // most once a minute (the apiserver sends one only in
                    // the moment after a reload, until the housekeeper
                    // re-registers).
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
        move || review_bytes(&ir, &body, endpoint, only.as_deref()).map_err(|e| e.to_string())
    }

    fn record(
        &self,
        answer: Self::Answer,
        loaded: &Loaded,
        state: &State,
        started: Instant,
    ) -> Vec<u8> {
        let endpoint = self.endpoint;
        let o = &answer.outcome;
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
        } else {
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
        }
        answer.bytes
    }
}
