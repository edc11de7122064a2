//! HTTP: the HTTPS app that answers ConversionReviews and AdmissionReviews
//! ([`server`]: routes, probes, starting and stopping; [`review`]: the one
//! review handler; [`limits`]: the body, the reviews and bytes in flight,
//! where a review is evaluated), and the small HTTPS client the tests and
//! the load tool speak to it with ([`client`]).
//!
//! Uses `serving` (the served state), `certs::tls` and `metrics`; only
//! [`crate::serve`] uses it.

pub mod client;
mod limits;
mod review;
pub mod server;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::json;

use crate::metrics::ReasonLabels;
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
