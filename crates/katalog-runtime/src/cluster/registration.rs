//! What the engine registers with the apiserver, built from the compiled
//! Katalog: one webhook per declared capability, and the `spec.conversion`
//! patch of each CRD with conversion rules. Pure: `katalog manifests` prints
//! these for review, the housekeeper applies them.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use katalog_lang::Ir;
use katalog_lang::admission::SelectorIr;
use katalog_lang::admission::eval::Endpoint;
use katalog_lang::admission::webhooks::{self, WebhookGroup};
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

impl Registration {
    /// `<name>-validating`: the only ValidatingWebhookConfiguration the
    /// engine reads, writes or watches (the ClusterRole names it).
    pub fn validating_name(&self) -> String {
        format!("{}-validating", self.name)
    }

    /// `<name>-mutating`: the only MutatingWebhookConfiguration the engine
    /// reads, writes or watches.
    pub fn mutating_name(&self) -> String {
        format!("{}-mutating", self.name)
    }

    /// The namespace the engine runs in, when the registration knows it
    /// (the Service's): the generated webhooks leave it out.
    pub fn engine_namespace(&self) -> Option<&str> {
        match &self.target {
            Target::Service { namespace, .. } => Some(namespace),
            Target::Url(_) => None,
        }
    }

    /// Refuses what the apiserver would refuse or could not use: a URL that
    /// is not `https://HOST...` and a caBundle that is not PEM certificates.
    pub fn check(&self) -> Result<()> {
        if let Target::Url(url) = &self.target {
            check_url(url)?;
        }
        if !self.ca_bundle.is_empty() {
            check_ca_bundle(&self.ca_bundle)?;
        }
        Ok(())
    }
}

/// Why the apiserver would refuse a registration, or could not use it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("the webhook URL {0:?} is not HTTPS: the apiserver calls webhooks over https:// only")]
    NotHttps(String),
    #[error("the webhook URL {0:?} names no host")]
    NoHost(String),
    #[error("the webhook URL {0:?} may not carry a query or a fragment")]
    QueryOrFragment(String),
    #[error("the caBundle is not PEM certificates: {0}")]
    CaBundle(#[from] CaBundleError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why bytes are not a caBundle (PEM certificates).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CaBundleError {
    /// The PEM reader's complaint.
    #[error("{0}")]
    Pem(String),
    #[error("no CERTIFICATE block")]
    NoCertificate,
}

/// The apiserver calls webhooks over HTTPS only; a URL must name a host and
/// carry no query or fragment.
pub fn check_url(url: &str) -> Result<()> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(Error::NotHttps(url.into()));
    };
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(Error::NoHost(url.into()));
    }
    if url.contains(['?', '#']) {
        return Err(Error::QueryOrFragment(url.into()));
    }
    Ok(())
}

/// PEM text that holds certificates and nothing unreadable.
pub fn check_ca_bundle(bytes: &[u8]) -> Result<(), CaBundleError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(bytes) {
        cert.map_err(|e| CaBundleError::Pem(e.to_string()))?;
        n += 1;
    }
    if n == 0 {
        return Err(CaBundleError::NoCertificate);
    }
    Ok(())
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

fn webhook_rules(group: &WebhookGroup) -> Vec<RuleWithOperations> {
    group
        .registered
        .iter()
        .map(|r| RuleWithOperations {
            api_groups: Some(vec![r.group.clone()]),
            api_versions: Some(vec![r.version.clone()]),
            resources: Some(vec![r.resource.clone()]),
            operations: Some(r.operations.clone()),
            scope: Some("*".into()),
        })
        .collect()
}

/// The label every namespace carries with its own name (set by the apiserver).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The namespaces no validation or mutation webhook is called for: the
/// Katalog's `excludeNamespaces` and, unless it says otherwise, the
/// engine's own namespace.
pub fn excluded_namespaces(ir: &Ir, reg: &Registration) -> Vec<String> {
    let mut out = ir.admission.excluded_namespaces.clone();
    if ir.admission.exclude_engine_namespace
        && let Some(ns) = reg.engine_namespace()
    {
        out.push(ns.to_string());
    }
    out.sort();
    out.dedup();
    out
}

/// A group's namespace selector with the exclusions added (the
/// requirements of a selector are ANDed).
fn namespace_selector(group: &WebhookGroup, excluded: &[String]) -> Option<LabelSelector> {
    let mut sel = group.namespace_selector.as_ref().map(label_selector);
    if !excluded.is_empty() {
        let s = sel.get_or_insert_with(LabelSelector::default);
        s.match_expressions
            .get_or_insert_with(Vec::new)
            .push(LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: "NotIn".into(),
                values: Some(excluded.to_vec()),
            });
    }
    sel
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
    let excluded = excluded_namespaces(ir, reg);
    for group in webhooks::groups(ir, Endpoint::Validate) {
        let mut hook = webhook(
            &group.name(),
            &group.path(),
            webhook_rules(&group),
            adm.failure_policy,
        );
        hook.namespace_selector = namespace_selector(&group, &excluded);
        hook.object_selector = group.object_selector.as_ref().map(label_selector);
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
        metadata: meta(reg.validating_name()),
        webhooks: Some(hooks),
    })
}

/// The mutating configuration, when the Katalog declares mutations: one
/// webhook per group of mutations.
pub fn mutating_configuration(ir: &Ir, reg: &Registration) -> Option<MutatingWebhookConfiguration> {
    let adm = &ir.admission;
    let excluded = excluded_namespaces(ir, reg);
    let hooks: Vec<MutatingWebhook> = webhooks::groups(ir, Endpoint::Mutate)
        .into_iter()
        .map(|group| MutatingWebhook {
            name: format!("{}.katalog.dev", group.name()),
            admission_review_versions: REVIEW_VERSIONS.iter().map(|s| s.to_string()).collect(),
            client_config: client_config(reg, &group.path()),
            failure_policy: Some(policy(adm.failure_policy)),
            match_policy: Some("Equivalent".into()),
            rules: Some(webhook_rules(&group)),
            side_effects: "None".into(),
            timeout_seconds: Some(i32::from(adm.timeout_seconds)),
            // Mutations are idempotent, so a second call after other mutating
            // webhooks changed the object is safe.
            reinvocation_policy: Some("IfNeeded".into()),
            namespace_selector: namespace_selector(&group, &excluded),
            object_selector: group.object_selector.as_ref().map(label_selector),
            ..MutatingWebhook::default()
        })
        .collect();
    (!hooks.is_empty()).then(|| MutatingWebhookConfiguration {
        metadata: meta(reg.mutating_name()),
        webhooks: Some(hooks),
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

/// What the engine does besides registering, for [`rbac`]: each adds the
/// namespaced rules it needs.
#[derive(Clone, Debug, Default)]
pub struct RbacOptions {
    /// The ServiceAccount the engine runs as: `(namespace, name)`.
    pub service_account: (String, String),
    /// `--self-signed-secret NAMESPACE/NAME`: the certificate Secret.
    pub secret: Option<(String, String)>,
    /// `--leader-election-namespace`: the Lease `<name>-leader` there.
    pub leader_election_namespace: Option<String>,
}

fn rule(group: &str, resource: &str, names: &[String], verbs: &[&str]) -> Value {
    let mut r = json!({"apiGroups": [group], "resources": [resource]});
    if !names.is_empty() {
        r["resourceNames"] = json!(names);
    }
    r["verbs"] = json!(verbs);
    r
}

/// The least RBAC `katalog serve --register` needs for this Katalog and
/// registration: a ClusterRole whose every rule names its objects (the
/// registration's two webhook configurations, each under its own kind, and
/// the CRDs the Katalog converts), its binding, and per namespace a Role and
/// RoleBinding for the certificate Secret and the leader Lease. Every verb,
/// `create` included, is under `resourceNames` where the apiserver sees a
/// name: server-side apply is authorized as `create` of that name, and a
/// list or watch with a `metadata.name` field selector as a request for it.
/// Only a Secret's or a Lease's plain `create` carries no name.
pub fn rbac(ir: &Ir, reg: &Registration, options: &RbacOptions) -> Vec<Value> {
    const ADMISSION: &str = "admissionregistration.k8s.io";
    const ALL: [&str; 6] = ["get", "list", "watch", "create", "patch", "delete"];
    let (sa_namespace, sa_name) = &options.service_account;
    let subjects = json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}]);
    let mut cluster = vec![
        rule(
            ADMISSION,
            "validatingwebhookconfigurations",
            &[reg.validating_name()],
            &ALL,
        ),
        rule(
            ADMISSION,
            "mutatingwebhookconfigurations",
            &[reg.mutating_name()],
            &ALL,
        ),
    ];
    let crds: Vec<String> = crd_conversion_patches(ir, reg)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    if !crds.is_empty() {
        cluster.push(rule(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            &crds,
            &["get", "list", "watch", "patch"],
        ));
    }
    let mut out = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": reg.name}, "rules": cluster}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": reg.name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reg.name},
               "subjects": subjects}),
    ];
    let mut namespaced: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
    if let Some((namespace, name)) = &options.secret {
        let rules = namespaced.entry(namespace).or_default();
        rules.push(rule(
            "",
            "secrets",
            std::slice::from_ref(name),
            &["get", "list", "watch", "update"],
        ));
        rules.push(rule("", "secrets", &[], &["create"]));
    }
    if let Some(namespace) = &options.leader_election_namespace {
        let rules = namespaced.entry(namespace).or_default();
        rules.push(rule(
            "coordination.k8s.io",
            "leases",
            &[format!("{}-leader", reg.name)],
            &["get", "update"],
        ));
        rules.push(rule("coordination.k8s.io", "leases", &[], &["create"]));
    }
    for (namespace, rules) in namespaced {
        let meta = json!({"name": reg.name, "namespace": namespace});
        out.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                        "metadata": meta, "rules": rules}),
        );
        out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                        "metadata": meta,
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": reg.name},
                        "subjects": subjects}));
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
        for hook in m.webhooks.as_ref().unwrap() {
            assert_eq!(hook.reinvocation_policy.as_deref(), Some("IfNeeded"));
            let path = hook.client_config.service.as_ref().unwrap().path.clone();
            let id = hook
                .name
                .strip_prefix("mutate-")
                .and_then(|n| n.strip_suffix(".katalog.dev"))
                .unwrap_or_else(|| panic!("{}", hook.name));
            assert_eq!(path, Some(format!("/mutate/{id}")));
        }
    }

    const SELECTORS: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: t}
spec:
  resources:
    - {group: db.example.com, kind: Database, plural: databases, hub: v1, versions: [v1alpha1, v1]}
  admission:
    timeoutSeconds: 7
    validations:
      - name: prod-only
        resources: [v1/pods]
        match:
          namespaces:
            selector: {matchLabels: {env: prod}}
        path: spec.hostNetwork
        check: {equals: false}
      - name: everywhere
        resources: [v1/pods]
        path: spec.hostPID
        check: {equals: false}
      - name: labelled
        resources: [v1/pods]
        match:
          objectSelector: {matchLabels: {tier: web}}
        path: spec.hostIPC
        check: {equals: false}
      - name: db-hub
        resources: [db.example.com/v1/databases]
        path: spec.size
        check: {maximum: 10}
"#;

    fn validating(text: &str, target: Target) -> Vec<ValidatingWebhook> {
        let ir = compile_sources(&[Source::new("t.yaml", text)]).unwrap();
        validating_configuration(&ir, &reg(target))
            .unwrap()
            .webhooks
            .unwrap()
    }

    /// The engine's Service in katalog-system.
    fn service() -> Target {
        Target::Service {
            namespace: "katalog-system".into(),
            name: "katalog".into(),
            port: 443,
        }
    }

    fn names_in(sel: &Option<LabelSelector>) -> Vec<String> {
        sel.as_ref()
            .and_then(|s| s.match_expressions.as_ref())
            .into_iter()
            .flatten()
            .filter(|e| e.key == NAMESPACE_NAME_LABEL && e.operator == "NotIn")
            .flat_map(|e| e.values.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn every_rule_keeps_its_selectors_and_kube_system_and_the_engine_namespace_are_left_out() {
        let hooks = validating(SELECTORS, service());
        assert_eq!(hooks.len(), 3, "{hooks:#?}");
        for h in &hooks {
            assert_eq!(
                names_in(&h.namespace_selector),
                [
                    "katalog-system",
                    "kube-node-lease",
                    "kube-public",
                    "kube-system"
                ]
            );
            assert_eq!(h.timeout_seconds, Some(7));
            assert_eq!(h.side_effects, "None");
            assert_eq!(h.match_policy.as_deref(), Some("Equivalent"));
            assert_eq!(h.admission_review_versions, ["v1", "v1beta1"]);
        }
        let prod = hooks
            .iter()
            .find(|h| {
                h.namespace_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref())
                    .is_some_and(|l| l.get("env").map(String::as_str) == Some("prod"))
            })
            .expect("the prod-only rule keeps its namespace selector");
        assert!(prod.object_selector.is_none());
        let labelled = hooks
            .iter()
            .find(|h| h.object_selector.is_some())
            .expect("the labelled rule keeps its object selector");
        assert_eq!(
            labelled
                .object_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["tier"],
            "web"
        );
        // The declared resource is registered at every version: the engine converts.
        let db: Vec<&RuleWithOperations> = hooks
            .iter()
            .flat_map(|h| h.rules.iter().flatten())
            .filter(|r| r.resources.as_deref() == Some(&["databases".to_string()][..]))
            .collect();
        assert_eq!(db.len(), 1);
        assert_eq!(db[0].api_versions.as_deref(), Some(&["*".to_string()][..]));
    }

    #[test]
    fn exclusions_follow_the_katalog() {
        let url = || Target::Url("https://127.0.0.1:8443".into());
        // A URL target has no namespace of its own.
        let hooks = validating(SELECTORS, url());
        assert!(hooks.iter().all(|h| names_in(&h.namespace_selector)
            == ["kube-node-lease", "kube-public", "kube-system"]));
        let everywhere = SELECTORS.replace(
            "    timeoutSeconds: 7\n",
            "    timeoutSeconds: 7\n    excludeNamespaces: []\n    excludeEngineNamespace: false\n",
        );
        assert_ne!(everywhere, SELECTORS);
        let hooks = validating(&everywhere, service());
        assert!(
            hooks
                .iter()
                .all(|h| names_in(&h.namespace_selector).is_empty()),
            "{hooks:#?}"
        );
        let only_engine = SELECTORS.replace(
            "    timeoutSeconds: 7\n",
            "    timeoutSeconds: 7\n    excludeNamespaces: [ops]\n",
        );
        let hooks = validating(&only_engine, service());
        assert!(
            hooks
                .iter()
                .all(|h| names_in(&h.namespace_selector) == ["katalog-system", "ops"])
        );
    }

    #[test]
    fn registrations_refuse_plain_http_and_non_pem_bundles() {
        let mut r = reg(Target::Url("http://127.0.0.1:8443".into()));
        r.ca_bundle = Vec::new();
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("is not HTTPS"), "{e}");
        for bad in ["https://", "https:///x", "https://h/?a=b", "127.0.0.1:8443"] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        assert!(check_url("https://127.0.0.1:8443/base").is_ok());
        let mut r = reg(Target::Url("https://127.0.0.1:8443".into()));
        r.ca_bundle = b"not a certificate".to_vec();
        let e = r.check().unwrap_err().to_string();
        assert!(e.contains("not PEM certificates"), "{e}");
        r.ca_bundle = crate::certs::tls::DevCa::generate()
            .unwrap()
            .ca_pem()
            .as_bytes()
            .to_vec();
        assert_eq!(r.check(), Ok(()));
    }

    /// deploy/base/rbac.yaml is what `katalog manifests --rbac` prints for
    /// the deployed Katalog: rule for rule, names and verbs.
    #[test]
    fn the_shipped_rbac_is_the_generated_one() {
        let root = format!("{}/../..", env!("CARGO_MANIFEST_DIR"));
        let sources = crate::serving::files::read_katalog(std::path::Path::new(&format!(
            "{root}/deploy/base/katalog"
        )))
        .unwrap();
        let ir = crate::serving::files::compile_katalog(&sources).unwrap();
        let options = RbacOptions {
            service_account: ("katalog-system".into(), "katalog".into()),
            secret: Some(("katalog-system".into(), "katalog-tls".into())),
            leader_election_namespace: Some("katalog-system".into()),
        };
        let generated = rbac(&ir, &reg(service()), &options);
        let text = std::fs::read_to_string(format!("{root}/deploy/base/rbac.yaml")).unwrap();
        let shipped: Vec<Value> = katalog_lang::yaml::read_documents(&text)
            .unwrap()
            .iter()
            .map(|r| r.to_value())
            .collect();
        for kind in ["ClusterRole", "Role"] {
            let rules = |docs: &[Value]| -> Vec<Value> {
                docs.iter()
                    .filter(|d| d["kind"] == kind)
                    .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default())
                    .collect()
            };
            assert_eq!(rules(&shipped), rules(&generated), "{kind}");
        }
        // No rule of the ClusterRole is without names.
        for r in generated[0]["rules"].as_array().unwrap() {
            assert!(r["resourceNames"].is_array(), "{r}");
        }
    }
}
