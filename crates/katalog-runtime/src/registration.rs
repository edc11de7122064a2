//! What the engine registers with the apiserver, built from the compiled
//! Katalog: one webhook per declared capability, and the `spec.conversion`
//! patch of each CRD with conversion rules. Pure: `katalog manifests` prints
//! these for review, the housekeeper applies them.

use std::collections::BTreeSet;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use katalog_lang::Ir;
use katalog_lang::admission::{MatchIr, ResourcePattern, SelectorIr};
use katalog_lang::document::{FailurePolicy, Operation, SelectorOperator};
use serde_json::{Value, json};

/// Where the apiserver reaches the engine.
#[derive(Clone, Debug)]
pub enum Target {
    /// In cluster: a Service (port 443 by default).
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
    /// For development and tests: a base URL such as `https://127.0.0.1:8443`.
    Url(String),
}

#[derive(Clone, Debug)]
pub struct Registration {
    /// Base name of the configurations (`<name>-validating`, `<name>-mutating`).
    pub name: String,
    pub target: Target,
    /// PEM of the CA that signed the serving certificate.
    pub ca_bundle: Vec<u8>,
}

/// The `caBundle` to register when it can change while the engine runs (a
/// rotated self-signed CA, a rewritten `--ca-bundle` file): the housekeeper
/// registers whatever it holds.
pub type SharedCaBundle = std::sync::Arc<arc_swap::ArcSwap<Vec<u8>>>;

pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "katalog";

fn client_config(reg: &Registration, path: &str) -> WebhookClientConfig {
    let ca_bundle = (!reg.ca_bundle.is_empty()).then(|| ByteString(reg.ca_bundle.clone()));
    match &reg.target {
        Target::Service {
            namespace,
            name,
            port,
        } => WebhookClientConfig {
            ca_bundle,
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(path.to_string()),
                port: Some(*port),
            }),
            url: None,
        },
        Target::Url(base) => WebhookClientConfig {
            ca_bundle,
            service: None,
            url: Some(format!("{}{path}", base.trim_end_matches('/'))),
        },
    }
}

fn part(p: &Option<String>) -> String {
    p.clone().unwrap_or_else(|| "*".into())
}

/// Admission rules for a set of matchers, deduplicated.
fn rules_for<'a>(matchers: impl Iterator<Item = &'a MatchIr>) -> Vec<RuleWithOperations> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for m in matchers {
        let ops: Vec<String> = m
            .operations
            .iter()
            .map(|o| o.as_str().to_string())
            .collect();
        for r in &m.resources {
            let resources: Vec<String> = if m.subresources.is_empty() {
                vec![part(&r.resource)]
            } else {
                m.subresources
                    .iter()
                    .map(|s| {
                        if s.is_empty() {
                            part(&r.resource)
                        } else {
                            format!("{}/{s}", part(&r.resource))
                        }
                    })
                    .collect()
            };
            for resource in resources {
                let key = (
                    part(&r.group),
                    part(&r.version),
                    resource.clone(),
                    ops.clone(),
                );
                if seen.insert(key) {
                    out.push(rule(r, &resource, &ops));
                }
            }
        }
    }
    out
}

fn rule(r: &ResourcePattern, resource: &str, ops: &[String]) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![part(&r.group)]),
        api_versions: Some(vec![part(&r.version)]),
        resources: Some(vec![resource.to_string()]),
        operations: Some(ops.to_vec()),
        scope: Some("*".into()),
    }
}

fn label_selector(s: &SelectorIr) -> LabelSelector {
    LabelSelector {
        match_labels: (!s.match_labels.is_empty())
            .then(|| s.match_labels.iter().cloned().collect()),
        match_expressions: (!s.expressions.is_empty()).then(|| {
            s.expressions
                .iter()
                .map(|(key, op, values)| LabelSelectorRequirement {
                    key: key.clone(),
                    operator: match op {
                        SelectorOperator::In => "In",
                        SelectorOperator::NotIn => "NotIn",
                        SelectorOperator::Exists => "Exists",
                        SelectorOperator::DoesNotExist => "DoesNotExist",
                    }
                    .into(),
                    values: (!values.is_empty()).then(|| values.clone()),
                })
                .collect()
        }),
    }
}

/// A selector every rule of the webhook shares can be applied by the
/// apiserver; otherwise the engine applies each rule's own.
fn common<'a>(selectors: impl Iterator<Item = Option<&'a SelectorIr>>) -> Option<LabelSelector> {
    let all: Vec<Option<&SelectorIr>> = selectors.collect();
    let first = (*all.first()?)?;
    all.iter()
        .all(|s| *s == Some(first))
        .then(|| label_selector(first))
}

fn meta(name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(
            [(MANAGED_BY_LABEL.to_string(), MANAGER.to_string())]
                .into_iter()
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

fn policy(p: FailurePolicy) -> String {
    match p {
        FailurePolicy::Fail => "Fail".into(),
        FailurePolicy::Ignore => "Ignore".into(),
    }
}

fn protection_rules(
    ir: &Ir,
    op: Operation,
    pick: impl Fn(&katalog_lang::admission::ProtectedResource) -> bool,
) -> Vec<RuleWithOperations> {
    ir.admission
        .security
        .protected
        .iter()
        .filter(|r| pick(r))
        .map(|r| RuleWithOperations {
            api_groups: Some(vec![r.group.clone()]),
            api_versions: Some(vec!["*".into()]),
            resources: Some(vec![r.plural.clone()]),
            operations: Some(vec![op.as_str().into()]),
            scope: Some("*".into()),
        })
        .collect()
}

/// The validating configuration: validations and protections, one webhook each.
pub fn validating_configuration(
    ir: &Ir,
    reg: &Registration,
) -> Option<ValidatingWebhookConfiguration> {
    let adm = &ir.admission;
    let timeout = Some(i32::from(adm.timeout_seconds));
    let webhook = |name: &str,
                   path: &str,
                   rules: Vec<RuleWithOperations>,
                   failure: FailurePolicy| ValidatingWebhook {
        name: format!("{name}.katalog.dev"),
        admission_review_versions: REVIEW_VERSIONS.iter().map(|s| s.to_string()).collect(),
        client_config: client_config(reg, path),
        failure_policy: Some(policy(failure)),
        match_policy: Some("Equivalent".into()),
        rules: Some(rules),
        side_effects: "None".into(),
        timeout_seconds: timeout,
        ..ValidatingWebhook::default()
    };
    let mut hooks = Vec::new();
    if !adm.validations.is_empty() {
        let mut hook = webhook(
            "validate",
            "/validate",
            rules_for(adm.validations.iter().map(|v| &v.matcher)),
            adm.failure_policy,
        );
        hook.namespace_selector = common(
            adm.validations
                .iter()
                .map(|v| v.matcher.namespace_selector.as_ref()),
        );
        hook.object_selector = common(
            adm.validations
                .iter()
                .map(|v| v.matcher.object_selector.as_ref()),
        );
        hooks.push(hook);
    }
    let sec = &adm.security;
    let deletion = sec.deletion.enabled || sec.protected.iter().any(|r| r.deletion);
    if deletion {
        let mut rules = protection_rules(ir, Operation::Delete, |r| r.deletion);
        if sec.deletion.crds {
            rules.push(RuleWithOperations {
                api_groups: Some(vec!["apiextensions.k8s.io".into()]),
                api_versions: Some(vec!["*".into()]),
                resources: Some(vec!["customresourcedefinitions".into()]),
                operations: Some(vec!["DELETE".into()]),
                scope: Some("Cluster".into()),
            });
        }
        if sec.deletion.enabled {
            let mut engine: Vec<(&str, &str)> = sec
                .deletion
                .engine
                .iter()
                .map(|(g, r, _, _)| (g.as_str(), r.as_str()))
                .collect();
            engine.sort();
            engine.dedup();
            for (group, resource) in engine {
                rules.push(RuleWithOperations {
                    api_groups: Some(vec![group.into()]),
                    api_versions: Some(vec!["*".into()]),
                    resources: Some(vec![resource.into()]),
                    operations: Some(vec!["DELETE".into()]),
                    scope: Some("Namespaced".into()),
                });
            }
        }
        if !rules.is_empty() {
            hooks.push(webhook(
                "deletion-protection",
                "/deletion-protection",
                rules,
                FailurePolicy::Fail,
            ));
        }
    }
    let ns_rules = protection_rules(ir, Operation::Create, |r| {
        !r.allowed_namespaces.is_empty() || !r.restricted_namespaces.is_empty()
    });
    if !ns_rules.is_empty() {
        hooks.push(webhook(
            "namespace-protection",
            "/namespace-protection",
            ns_rules,
            FailurePolicy::Fail,
        ));
    }
    let strict_rules = protection_rules(ir, Operation::Update, |r| r.strict_mode);
    if !strict_rules.is_empty() {
        hooks.push(webhook(
            "strict-mode-protection",
            "/strict-mode-protection",
            strict_rules,
            FailurePolicy::Fail,
        ));
    }
    (!hooks.is_empty()).then(|| ValidatingWebhookConfiguration {
        metadata: meta(format!("{}-validating", reg.name)),
        webhooks: Some(hooks),
    })
}

/// The mutating configuration, when the Katalog declares mutations.
pub fn mutating_configuration(ir: &Ir, reg: &Registration) -> Option<MutatingWebhookConfiguration> {
    let adm = &ir.admission;
    if adm.mutations.is_empty() {
        return None;
    }
    let hook = MutatingWebhook {
        name: "mutate.katalog.dev".into(),
        admission_review_versions: REVIEW_VERSIONS.iter().map(|s| s.to_string()).collect(),
        client_config: client_config(reg, "/mutate"),
        failure_policy: Some(policy(adm.failure_policy)),
        match_policy: Some("Equivalent".into()),
        rules: Some(rules_for(adm.mutations.iter().map(|m| &m.matcher))),
        side_effects: "None".into(),
        timeout_seconds: Some(i32::from(adm.timeout_seconds)),
        // Mutations are idempotent, so a second call after other mutating
        // webhooks changed the object is safe.
        reinvocation_policy: Some("IfNeeded".into()),
        namespace_selector: common(
            adm.mutations
                .iter()
                .map(|m| m.matcher.namespace_selector.as_ref()),
        ),
        object_selector: common(
            adm.mutations
                .iter()
                .map(|m| m.matcher.object_selector.as_ref()),
        ),
        ..MutatingWebhook::default()
    };
    Some(MutatingWebhookConfiguration {
        metadata: meta(format!("{}-mutating", reg.name)),
        webhooks: Some(vec![hook]),
    })
}

/// `(CRD name, merge patch of spec.conversion)` for each declared resource
/// with more than one version.
pub fn crd_conversion_patches(ir: &Ir, reg: &Registration) -> Vec<(String, Value)> {
    ir.resources
        .iter()
        .filter(|r| r.versions.len() > 1)
        .map(|r| {
            let cc = serde_json::to_value(client_config(reg, "/convert")).unwrap_or(Value::Null);
            (
                format!("{}.{}", r.plural, r.group),
                json!({"spec": {"conversion": {
                    "strategy": "Webhook",
                    "webhook": {"clientConfig": cc, "conversionReviewVersions": REVIEW_VERSIONS},
                }}}),
            )
        })
        .collect()
}

/// Everything, as Kubernetes objects in JSON, in a stable order.
pub fn manifests(ir: &Ir, reg: &Registration) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(v) = validating_configuration(ir, reg) {
        let mut v = serde_json::to_value(v).unwrap_or(Value::Null);
        v["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        v["kind"] = json!("ValidatingWebhookConfiguration");
        out.push(v);
    }
    if let Some(m) = mutating_configuration(ir, reg) {
        let mut m = serde_json::to_value(m).unwrap_or(Value::Null);
        m["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        m["kind"] = json!("MutatingWebhookConfiguration");
        out.push(m);
    }
    for (name, patch) in crd_conversion_patches(ir, reg) {
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name}});
        crd["spec"] = patch["spec"].clone();
        out.push(crd);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use katalog_lang::{Source, compile_sources};

    fn ir(name: &str) -> Ir {
        let text = std::fs::read_to_string(format!(
            "{}/../../katalogs/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        compile_sources(&[Source::new(name, text)]).unwrap()
    }

    fn reg(target: Target) -> Registration {
        Registration {
            name: "katalog".into(),
            target,
            ca_bundle: b"-----BEGIN CERTIFICATE-----\n".to_vec(),
        }
    }

    #[test]
    fn conversion_patch_points_the_crd_at_convert() {
        let patches = crd_conversion_patches(
            &ir("crontab.yaml"),
            &reg(Target::Url("https://127.0.0.1:8443/".into())),
        );
        assert_eq!(patches.len(), 1);
        let (name, patch) = &patches[0];
        assert_eq!(name, "crontabs.stable.example.com");
        assert_eq!(patch["spec"]["conversion"]["strategy"], "Webhook");
        let w = &patch["spec"]["conversion"]["webhook"];
        assert_eq!(w["clientConfig"]["url"], "https://127.0.0.1:8443/convert");
        assert_eq!(w["conversionReviewVersions"], json!(["v1", "v1beta1"]));
        assert!(w["clientConfig"]["caBundle"].is_string());
    }

    #[test]
    fn one_webhook_per_capability_with_its_rules() {
        let target = Target::Service {
            namespace: "katalog-system".into(),
            name: "katalog".into(),
            port: 443,
        };
        let v = validating_configuration(&ir("protections.yaml"), &reg(target.clone())).unwrap();
        let names: Vec<&str> = v
            .webhooks
            .as_ref()
            .unwrap()
            .iter()
            .map(|w| w.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "deletion-protection.katalog.dev",
                "namespace-protection.katalog.dev",
                "strict-mode-protection.katalog.dev"
            ]
        );
        for w in v.webhooks.as_ref().unwrap() {
            assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
            assert_eq!(w.side_effects, "None");
            assert_eq!(w.admission_review_versions, ["v1", "v1beta1"]);
            let svc = w.client_config.service.as_ref().unwrap();
            assert_eq!(
                (svc.namespace.as_str(), svc.port),
                ("katalog-system", Some(443))
            );
        }
        let deletion = &v.webhooks.as_ref().unwrap()[0];
        let resources: Vec<String> = deletion
            .rules
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| r.resources.as_ref().unwrap()[0].clone())
            .collect();
        assert!(
            resources.contains(&"customresourcedefinitions".to_string()),
            "{resources:?}"
        );
        assert!(
            resources.contains(&"deployments".to_string()),
            "{resources:?}"
        );
        assert!(mutating_configuration(&ir("protections.yaml"), &reg(target.clone())).is_none());
        let m = mutating_configuration(&ir("platform.yaml"), &reg(target)).unwrap();
        let hook = &m.webhooks.as_ref().unwrap()[0];
        assert_eq!(hook.reinvocation_policy.as_deref(), Some("IfNeeded"));
        assert_eq!(
            hook.client_config.service.as_ref().unwrap().path.as_deref(),
            Some("/mutate")
        );
    }
}
