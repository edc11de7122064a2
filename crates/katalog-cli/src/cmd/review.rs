//! `katalog review`: the server's answer to a ConversionReview or AdmissionReview, offline.

use katalog_lang::admission::eval::Endpoint;
use serde_json::Value;

use crate::args::*;
use crate::cmd::*;
use crate::exit::{Exit, RUNTIME, USAGE};
use crate::input::read_review;
use crate::output::{print_objects, write_out_bytes};

pub(crate) fn run(args: ReviewArgs) -> Result<(), Exit> {
    let ReviewArgs {
        katalog,
        endpoint,
        file,
        output,
    } = args;
    let ir = load_ir(&katalog)?;
    let body = read_review(&file)?;
    let kind = katalog_lang::json::node::parse_value(&body)
        .ok()
        .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string));
    // A review the server would answer 400 to is unusable input.
    // The answer is the server's, byte for byte: the calls its
    // /convert and admission endpoints make.
    let bytes = if kind.as_deref() == Some("AdmissionReview") {
        let endpoint = match endpoint {
            ReviewEndpoint::Validate => Endpoint::Validate,
            ReviewEndpoint::Mutate => Endpoint::Mutate,
            ReviewEndpoint::DeletionProtection => Endpoint::DeletionProtection,
            ReviewEndpoint::NamespaceProtection => Endpoint::NamespaceProtection,
            ReviewEndpoint::StrictModeProtection => Endpoint::StrictMode,
        };
        katalog_lang::admission::review::review_bytes(&ir, &body, endpoint, None)
            .map_err(|e| Exit(format!("error: {e}"), USAGE))?
            .bytes
    } else {
        katalog_lang::conversion::review_bytes(&ir, &body)
            .map_err(|e| Exit(format!("error: {e}"), USAGE))?
            .bytes
    };
    if matches!(output, Output::Json) {
        write_out_bytes(&bytes);
        return Ok(());
    }
    let response = katalog_lang::json::node::parse_value(&bytes)
        .map_err(|e| Exit(format!("error: failed to read the answer: {e}"), RUNTIME))?;
    print_objects(&[response], &output)
}
