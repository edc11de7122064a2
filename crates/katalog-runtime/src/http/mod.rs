//! HTTP: the HTTPS app that answers ConversionReviews and AdmissionReviews
//! (routes, handlers, limits, starting and stopping it) and the small
//! HTTPS client the tests and the load tool speak to it with.
//!
//! Uses `serving` (the served state), `certs::tls` and `metrics`; nothing
//! below it uses `http`, and only [`crate::serve`] above it.

pub mod client;
pub mod server;
