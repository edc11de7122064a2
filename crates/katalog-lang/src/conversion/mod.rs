//! Conversion, the half of the language that moves objects between API
//! versions, stage by stage:
//! - [`eval`]: convert one object (a list of rules acts at once; both
//!   directions derived from each rule's hub and spoke forms);
//! - `stash`: the stash annotations a conversion keeps and takes back;
//! - [`remainder`]: the whole-remainder stash;
//! - [`touch`]: what a conversion touches, from the IR;
//! - [`review`]: the ConversionReview protocol on whole trees (the tree
//!   path, the reference);
//! - [`splice`]: the fast path, on partial trees, splicing untouched bytes;
//! - [`review_bytes`]: a ConversionReview answered from its bytes, on the
//!   fast path where it applies, with a typed [`ConversionOutcome`].
//!
//! The rules themselves are lowered from the Katalog by [`crate::conversion::compile`].
//!
//! ```
//! use katalog_lang::{Source, compile_sources, conversion};
//!
//! let ir = compile_sources(&[Source::new("crontab.yaml",
//!     include_str!("../../../../katalogs/crontab.yaml"))]).unwrap();
//! let body = br#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
//!   "request": {"uid": "u1", "desiredAPIVersion": "stable.example.com/v2", "objects": [
//!     {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
//!      "metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]},
//!      "spec": {"schedule": "* * * * *", "image": "busybox"}}]}}"#;
//! let answer = conversion::review_bytes(&ir, body).unwrap();
//! assert_eq!(answer.outcome.count, 1);
//! assert_eq!(answer.outcome.failure, None);
//! assert_eq!(answer.outcome.spliced, 1);
//! let out: serde_json::Value = serde_json::from_slice(&answer.bytes).unwrap();
//! assert_eq!(out["response"]["convertedObjects"][0]["spec"]["container"]["image"], "busybox");
//! ```

pub mod analysis;
pub mod compile;
mod error;
pub mod eval;
pub mod fuzz;
mod language;
pub mod remainder;
pub mod review;
pub mod splice;
mod stash;
pub mod touch;

pub use eval::{ConvertError, convert, convert_owned};

use serde_json::Value;

use crate::common::json::node::parse_value;
use crate::common::json::split_api_version;
use crate::ir::Ir;
use review::{ReviewError, review_conversion_owned};

/// What a ConversionReview asked and how it was answered: what the server
/// logs and counts, without looking into the answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConversionOutcome {
    pub uid: String,
    /// Group and kind of the first object (empty for a review of none).
    pub group: String,
    pub kind: String,
    /// The version of the first object.
    pub from: String,
    /// Whether the objects came at more than one version.
    pub mixed: bool,
    /// The desired version.
    pub to: String,
    /// How many objects the review carried.
    pub count: usize,
    /// The `Failure` message, when the review failed.
    pub failure: Option<String>,
    /// Objects converted on the fast path (partial trees, spliced bytes).
    pub spliced: usize,
}

/// A ConversionReview answer: the bytes to send and what they say.
#[derive(Clone, Debug)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub outcome: ConversionOutcome,
}

/// Answer a ConversionReview given as the request body. The fast path
/// answers when it can; anything else (a failure, a review of an unusual
/// shape) is answered by the tree path, whose answer is the reference.
pub fn review_bytes(ir: &Ir, body: &[u8]) -> Result<Answer, ReviewError> {
    if let Some(s) = splice::review(ir, body) {
        let (first_version, kind) = s.first.unwrap_or_default();
        let (group, from) = split_api_version(&first_version);
        let outcome = ConversionOutcome {
            uid: s.uid,
            group: group.to_string(),
            kind,
            from: from.to_string(),
            mixed: s.mixed,
            to: split_api_version(&s.desired_api_version).1.to_string(),
            count: s.count,
            failure: None,
            spliced: s.paths.spliced,
        };
        return Ok(Answer {
            bytes: s.bytes,
            outcome,
        });
    }
    review_tree(ir, body)
}

/// Answer on the tree path only: the reference the fast path is compared to.
pub fn review_tree(ir: &Ir, body: &[u8]) -> Result<Answer, ReviewError> {
    let value = parse_value(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    let mut outcome = summarize(&value);
    let response = review_conversion_owned(ir, value)?;
    if text(&response, "/response/result/status") == "Failure" {
        outcome.failure = Some(text(&response, "/response/result/message").to_string());
    }
    let bytes = serde_json::to_vec(&response).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    Ok(Answer { bytes, outcome })
}

fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn summarize(review: &Value) -> ConversionOutcome {
    let objects = review.pointer("/request/objects").and_then(Value::as_array);
    let first = objects.and_then(|o| o.first());
    let first_version = first.map_or("", |o| text(o, "/apiVersion"));
    let (group, from) = split_api_version(first_version);
    ConversionOutcome {
        uid: text(review, "/request/uid").to_string(),
        group: group.to_string(),
        kind: first.map_or("", |o| text(o, "/kind")).to_string(),
        from: from.to_string(),
        mixed: objects.is_some_and(|o| o.iter().any(|x| text(x, "/apiVersion") != first_version)),
        to: split_api_version(text(review, "/request/desiredAPIVersion"))
            .1
            .to_string(),
        count: objects.map_or(0, Vec::len),
        failure: None,
        spliced: 0,
    }
}
