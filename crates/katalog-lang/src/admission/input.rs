//! What the evaluator is asked: one admission request
//! ([`AdmissionInput`]) at one webhook endpoint ([`Endpoint`]). Its own
//! module so that the parts of `admission` that read a request
//! (`versions`, `autogen`, `webhooks`) need not import the evaluator.

use serde_json::Value;

use crate::common::json::node::Obj;
use crate::front::document::Operation;

pub use crate::ir::admission::Endpoint;

/// One admission request, as the evaluator needs it.
#[derive(Clone, Debug)]
pub struct AdmissionInput {
    pub operation: Operation,
    pub group: String,
    pub version: String,
    pub resource: String,
    /// Empty for the main resource.
    pub subresource: String,
    pub kind: String,
    pub name: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    /// The object and old object read as `&Value`s; parsed as
    /// [`Node`](crate::common::json::node::Node)s when only CEL reads them.
    pub object: Option<Obj>,
    pub old_object: Option<Obj>,
    pub username: String,
    pub groups: Vec<String>,
    pub dry_run: bool,
    /// The namespace the object lives in, when the caller has it (CEL's
    /// `namespaceObject`, and namespace label selectors).
    pub namespace_object: Option<Value>,
    /// The request as CEL's `request` sees it.
    pub request: Value,
}
