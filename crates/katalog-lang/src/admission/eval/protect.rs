//! Deletion, namespace and label protection, and strict mode: the rules
//! that refuse a request for what it does to a protected object rather than
//! for what the object holds.

use serde_json::Value;

use crate::admission::{AdmissionIr, ProtectedResource};
use crate::front::document::Operation;

use super::{AdmissionInput, Finding, Verdict, labels_of};

fn protected_resource<'a>(
    protected: &'a [ProtectedResource],
    input: &AdmissionInput,
) -> Option<&'a ProtectedResource> {
    protected
        .iter()
        .find(|r| r.group == input.group && r.plural == input.resource)
}

fn describe(input: &AdmissionInput) -> String {
    let who = if input.namespace.is_empty() {
        input.name.clone()
    } else {
        format!("{}/{}", input.namespace, input.name)
    };
    format!(
        "{} {who}",
        if input.kind.is_empty() {
            &input.resource
        } else {
            &input.kind
        }
    )
}

fn label_value<'v>(object: Option<&'v Value>, label: &str) -> Option<&'v str> {
    labels_of(object)?.get(label)?.as_str()
}

pub(super) fn deletion_protection(
    adm: &AdmissionIr,
    input: &AdmissionInput,
    verdict: &mut Verdict,
) {
    let del = &adm.security.deletion;
    if input.operation != Operation::Delete {
        return;
    }
    let rule = "deletion-protection".to_string();
    if input.group == "apiextensions.k8s.io"
        && input.resource == "customresourcedefinitions"
        && del.crds
    {
        if let Some(r) = adm
            .security
            .protected
            .iter()
            .find(|r| r.deletion && format!("{}.{}", r.plural, r.group) == input.name)
        {
            let how = if r.deletion_set_on_resource {
                format!(
                    "set `protection.deletion: false` on resource {}/{}",
                    r.group, r.kind
                )
            } else {
                format!(
                    "set `protection.deletion: false` on resource {}/{} (or `spec.security.deletionProtection.enabled: false`)",
                    r.group, r.kind
                )
            };
            verdict.denials.push(Finding {
                rule,
                message: format!(
                    "CustomResourceDefinition {} is protected by the Katalog; to delete it, {how} and let the Katalog reload",
                    input.name
                ),
            });
        }
        return;
    }
    if let Some(r) = protected_resource(&adm.security.protected, input)
        && r.deletion
        && label_value(input.old_object.as_deref(), &del.label) == Some("true")
    {
        let how = if r.strict_mode {
            "strict mode is on, so first set `protection.strictMode: false` for it in the Katalog, then remove the label"
        } else {
            "remove the label first"
        };
        verdict.denials.push(Finding {
            rule,
            message: format!(
                "{} carries the label {}=true and is protected from deletion; {how} (kubectl label {} {}{} {}-)",
                describe(input),
                del.label,
                r.plural,
                input.name,
                if input.namespace.is_empty() {
                    String::new()
                } else {
                    format!(" -n {}", input.namespace)
                },
                del.label
            ),
        });
        return;
    }
    if del.enabled
        && let Some((_, resource, _, name)) = del.engine.iter().find(|(g, res, ns, name)| {
            *g == input.group
                && *res == input.resource
                && *ns == input.namespace
                && *name == input.name
        })
    {
        verdict.denials.push(Finding {
            rule,
            message: format!(
                "{resource} {}/{name} belongs to the katalog engine and is protected while deletion protection is on; set `spec.security.deletionProtection.enabled: false` and let the Katalog reload first",
                input.namespace
            ),
        });
    }
}

pub(super) fn namespace_protection(
    protected: &[ProtectedResource],
    input: &AdmissionInput,
    verdict: &mut Verdict,
) {
    if input.operation != Operation::Create || input.namespace.is_empty() {
        return;
    }
    let Some(r) = protected_resource(protected, input) else {
        return;
    };
    let ns = &input.namespace;
    let rule = "namespace-protection".to_string();
    if r.restricted_namespaces.contains(ns) {
        verdict.denials.push(Finding {
            rule,
            message: format!(
                "namespace {ns} is restricted for {}/{}; create it in another namespace (restrictedNamespaces: {})",
                r.group,
                r.kind,
                r.restricted_namespaces.join(", ")
            ),
        });
    } else if !r.allowed_namespaces.is_empty() && !r.allowed_namespaces.contains(ns) {
        verdict.denials.push(Finding {
            rule,
            message: format!(
                "{}/{} may only be created in the namespaces {}; {ns} is not one of them",
                r.group,
                r.kind,
                r.allowed_namespaces.join(", ")
            ),
        });
    }
}

pub(super) fn strict_mode(adm: &AdmissionIr, input: &AdmissionInput, verdict: &mut Verdict) {
    if input.operation != Operation::Update {
        return;
    }
    let Some(r) = protected_resource(&adm.security.protected, input) else {
        return;
    };
    if !r.strict_mode {
        return;
    }
    let label = &adm.security.deletion.label;
    let was = label_value(input.old_object.as_deref(), label) == Some("true");
    let now = label_value(input.object.as_deref(), label) == Some("true");
    // Nothing else in the update counts: no label or annotation unlocks it.
    if was && !now {
        verdict.denials.push(Finding {
            rule: "strict-mode-protection".into(),
            message: format!(
                "{} may not lose the label {label}=true while strict mode is on; set `protection.strictMode: false` for {}/{} in the Katalog first",
                describe(input),
                r.group,
                r.kind
            ),
        });
    }
}
