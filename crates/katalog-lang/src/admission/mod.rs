//! Admission: validation, mutation and protections.
//!
//! Stages mirror conversion: `compile` turns the document's rules into the
//! checked IR below, `eval` evaluates it for one request (pure: values in,
//! verdict out), `review` speaks the AdmissionReview protocol.

pub mod autogen;
pub mod compile;
pub mod eval;
pub mod input;
pub mod known;
pub mod openapi;
pub mod review;
mod touched;
pub mod types;
pub(crate) mod versions;
pub mod webhooks;

// The IR the stages above compile and evaluate (it is one layer below them).
pub use crate::ir::admission::*;
pub use input::{AdmissionInput, Endpoint};
