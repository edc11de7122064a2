//! Certificates: loading and rotating the serving certificate and the
//! client CA, and development certificates ([`tls`]); a self-signed serving
//! certificate kept in a Secret and renewed before it expires
//! ([`selfsigned`]).

pub mod selfsigned;
pub mod tls;
