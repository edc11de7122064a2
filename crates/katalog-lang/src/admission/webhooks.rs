//! Which generated webhook holds which rules.
//!
//! The apiserver applies a webhook's `namespaceSelector` and
//! `objectSelector` to every rule it lists, and it sends a request to the
//! version a webhook's rule names only when no rule of that webhook names
//! the request's own version (`matchPolicy: Equivalent`). So rules are
//! grouped into webhooks such that, within one webhook:
//!
//! * every rule has the same namespace selector and object selector (a
//!   selector is never dropped because another rule has none), and
//! * no two rules name overlapping resources at different versions (`*`
//!   is never mixed with a pinned version, which would let a request at
//!   another version match the `*` rule directly and never be converted for
//!   the pinned one).
//!
//! Rules on Katalog-declared resources are registered at every version:
//! the engine converts those requests itself (see `versions`).
//!
//! A rule on the main resource with an `immutable` test is also registered
//! for the subresources that can write what it keeps fixed (see
//! [`implied_subresources`]), so `/status` and `/scale` cannot change it.
//!
//! Each group has a stable id derived from what it registers; the webhook
//! for a group calls `/validate/<id>` or `/mutate/<id>`, and the engine
//! evaluates only that group's rules there. Pure: the runtime builds the
//! webhook configurations from these groups.

use std::collections::BTreeSet;

use super::input::Endpoint;
use super::{MatchIr, ResourcePattern, SelectorIr, ValidationIr};
use crate::common::path::Path;
use crate::front::document::Operation;
use crate::ir::Ir;

/// One rule of a webhook: the apiserver's `RuleWithOperations`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WebhookRule {
    /// `*` for any.
    pub group: String,
    pub version: String,
    /// `resource` or `resource/subresource`; `*` for any.
    pub resource: String,
    pub operations: Vec<String>,
}

/// One generated webhook: the rules it holds and what it registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookGroup {
    pub endpoint: Endpoint,
    /// Stable while the group registers the same things: 8 hex digits.
    pub id: String,
    /// Indices into the validations (or mutations) of the IR.
    pub rules: Vec<usize>,
    pub namespace_selector: Option<SelectorIr>,
    pub object_selector: Option<SelectorIr>,
    pub registered: Vec<WebhookRule>,
}

impl WebhookGroup {
    /// `validate-1a2b3c4d`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.endpoint.name(), self.id)
    }

    /// `/validate/1a2b3c4d`.
    pub fn path(&self) -> String {
        format!("/{}/{}", self.endpoint.name(), self.id)
    }
}

fn part(p: &Option<String>) -> String {
    p.clone().unwrap_or_else(|| "*".into())
}

/// Whether the pattern selects a resource the Katalog declares (then the
/// engine converts, and every version is registered).
fn on_declared(ir: &Ir, r: &ResourcePattern) -> bool {
    ir.resources.iter().any(|d| {
        r.group.as_deref().is_some_and(|g| g == d.group)
            && r.resource.as_deref().is_some_and(|x| x == d.plural)
    })
}

/// The subresources through which the apiserver changes what an
/// `immutable` test of a main-resource rule keeps fixed: `status` writes
/// `status` (its strategy keeps everything else of the stored object),
/// `scale` writes the replicas, `spec.replicas` for every built-in and for a
/// CRD whose `specReplicasPath` is `.spec.replicas`. The apiserver calls a
/// webhook for a subresource only if a rule lists it, so such a rule is also
/// registered for these on UPDATE, and there only its `immutable` test runs
/// (on the `/scale` review's autoscaling/v1 Scale, whose `spec.replicas`
/// is the replicas). Empty for rules that name their subresources.
pub fn implied_subresources(v: &ValidationIr) -> Vec<&'static str> {
    let m = &v.matcher;
    if !v.check.immutable
        || !m.subresources.is_empty()
        || !m.operations.contains(&Operation::Update)
    {
        return Vec::new();
    }
    // The absolute paths the test compares (the whole object when none).
    let checked: Vec<Path> = match &v.for_each {
        Some(each) if v.paths.is_empty() => each.lists.clone(),
        Some(each) => each
            .lists
            .iter()
            .flat_map(|l| v.paths.iter().map(move |p| l.join(p)))
            .collect(),
        None if v.paths.is_empty() => vec![Path::root()],
        None => v.paths.clone(),
    };
    let written = [
        ("status", Path::root().child("status")),
        ("scale", v.scale_replicas.clone()),
    ];
    written
        .into_iter()
        .filter(|(_, w)| checked.iter().any(|p| p.overlaps(w)))
        .map(|(s, _)| s)
        .collect()
}

/// What one rule registers: its resources (and the subresources `implied`
/// for UPDATE), and the pod controllers a Pod rule also applies to
/// (autogen; their templates change on UPDATE too).
pub(crate) fn registered(ir: &Ir, m: &MatchIr, implied: &[&str]) -> Vec<WebhookRule> {
    let names = |ops: &BTreeSet<crate::front::document::Operation>| -> Vec<String> {
        ops.iter().map(|o| o.as_str().to_string()).collect()
    };
    let ops = names(&m.operations);
    let mut out = BTreeSet::new();
    let controller_ops = names(&m.pod_controller_operations());
    for (r, _) in m.pod_controllers.iter() {
        out.insert(WebhookRule {
            group: part(&r.group),
            version: part(&r.version),
            resource: part(&r.resource),
            operations: controller_ops.clone(),
        });
    }
    for r in &m.resources {
        let version = if on_declared(ir, r) {
            "*".to_string()
        } else {
            part(&r.version)
        };
        let base = part(&r.resource);
        let resources: Vec<String> = if m.subresources.is_empty() {
            vec![base]
        } else {
            m.subresources
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        base.clone()
                    } else {
                        format!("{base}/{s}")
                    }
                })
                .collect()
        };
        for resource in resources {
            out.insert(WebhookRule {
                group: part(&r.group),
                version: version.clone(),
                resource,
                operations: ops.clone(),
            });
        }
        for sub in implied {
            out.insert(WebhookRule {
                group: part(&r.group),
                version: version.clone(),
                resource: format!("{}/{sub}", part(&r.resource)),
                operations: vec![Operation::Update.as_str().to_string()],
            });
        }
    }
    out.into_iter().collect()
}

fn overlap(a: &str, b: &str) -> bool {
    a == "*" || b == "*" || a == b
}

/// Two registered rules that the apiserver could both match for one request,
/// at different versions.
fn conflict(a: &WebhookRule, b: &WebhookRule) -> bool {
    let resource = |r: &str| r.split('/').next().unwrap_or("").to_string();
    let sub = |r: &str| r.split_once('/').map(|(_, s)| s.to_string());
    overlap(&a.group, &b.group)
        && overlap(&resource(&a.resource), &resource(&b.resource))
        && match (sub(&a.resource), sub(&b.resource)) {
            (None, None) => true,
            (Some(x), Some(y)) => overlap(&x, &y),
            _ => false,
        }
        && a.version != b.version
}

/// FNV-1a, 64 bits: stable across Rust releases (std's hasher is not).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn selector_key(s: &Option<SelectorIr>) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!("{:?}|{:?}", s.match_labels, s.expressions),
    }
}

/// The webhooks for the validations or the mutations of a Katalog, in a
/// stable order (the order of each group's first rule).
pub fn groups(ir: &Ir, endpoint: Endpoint) -> Vec<WebhookGroup> {
    let matchers: Vec<(&MatchIr, Vec<&str>)> = match endpoint {
        Endpoint::Validate => ir
            .admission
            .validations
            .iter()
            .map(|v| (&v.matcher, implied_subresources(v)))
            .collect(),
        Endpoint::Mutate => ir
            .admission
            .mutations
            .iter()
            .map(|m| (&m.matcher, Vec::new()))
            .collect(),
        _ => return Vec::new(),
    };
    let mut groups: Vec<WebhookGroup> = Vec::new();
    for (i, (m, implied)) in matchers.iter().enumerate() {
        let rules = registered(ir, m, implied);
        let slot = groups.iter().position(|g| {
            g.namespace_selector == m.namespace_selector
                && g.object_selector == m.object_selector
                && !g
                    .registered
                    .iter()
                    .any(|a| rules.iter().any(|b| conflict(a, b)))
        });
        match slot {
            Some(g) => {
                let group = &mut groups[g];
                group.rules.push(i);
                for r in rules {
                    if !group.registered.contains(&r) {
                        group.registered.push(r);
                    }
                }
            }
            None => groups.push(WebhookGroup {
                endpoint,
                id: String::new(),
                rules: vec![i],
                namespace_selector: m.namespace_selector.clone(),
                object_selector: m.object_selector.clone(),
                registered: rules,
            }),
        }
    }
    let mut seen = BTreeSet::new();
    for g in &mut groups {
        g.registered.sort();
        let mut key = format!(
            "{}|{}|{}",
            endpoint.name(),
            selector_key(&g.namespace_selector),
            selector_key(&g.object_selector)
        );
        for r in &g.registered {
            key.push_str(&format!(
                "|{}/{}/{}:{}",
                r.group,
                r.version,
                r.resource,
                r.operations.join(",")
            ));
        }
        // Two groups cannot register the same things (they would have
        // been one), but keep ids unique whatever happens.
        let mut salt = 0u32;
        loop {
            let id = format!("{:08x}", fnv1a(format!("{key}#{salt}").as_bytes()) as u32);
            if seen.insert(id.clone()) {
                g.id = id;
                break;
            }
            salt += 1;
        }
    }
    groups
}

/// The group a webhook path's id names, if the Katalog still has it.
pub fn find(ir: &Ir, endpoint: Endpoint, id: &str) -> Option<WebhookGroup> {
    groups(ir, endpoint).into_iter().find(|g| g.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Source, compile_sources};

    fn ir(text: &str) -> Ir {
        compile_sources(&[Source::new("t.yaml", text)]).unwrap_or_else(|d| panic!("{}", d.render()))
    }

    const KATALOG: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: t}
spec:
  resources:
    - group: db.example.com
      kind: Database
      plural: databases
      hub: v1
      versions: [v1alpha1, v1]
  admission:
    validations:
      - name: pinned
        resources: [db.example.com/v1/databases]
        path: spec.size
        check: {maximum: 10}
      - name: any-version
        resources: [db.example.com/*/databases]
        path: spec.size
        check: {minimum: 1}
      - name: hpa-v2
        resources: [autoscaling/v2/horizontalpodautoscalers]
        path: spec.maxReplicas
        check: {maximum: 50}
      - name: hpa-any
        resources: [autoscaling/*/horizontalpodautoscalers]
        path: metadata.labels.team
        check: {exists: true}
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
"#;

    #[test]
    fn selectors_and_versions_split_webhooks_and_declared_resources_register_every_version() {
        let ir = ir(KATALOG);
        let groups = groups(&ir, Endpoint::Validate);
        let names = |g: &WebhookGroup| -> Vec<String> {
            g.rules
                .iter()
                .map(|i| ir.admission.validations[*i].name.clone())
                .collect()
        };
        let by_rules: Vec<Vec<String>> = groups.iter().map(names).collect();
        assert_eq!(
            by_rules,
            vec![
                vec!["pinned", "any-version", "hpa-v2", "everywhere"],
                vec!["hpa-any"],
                vec!["prod-only"],
            ]
        );
        // The declared resource is registered at every version (the engine converts).
        let first = &groups[0].registered;
        assert!(
            first
                .iter()
                .any(|r| r.resource == "databases" && r.version == "*"),
            "{first:?}"
        );
        assert!(
            !first
                .iter()
                .any(|r| r.resource == "databases" && r.version == "v1")
        );
        // A pinned built-in version never shares a webhook with `*` for the same resource.
        for g in &groups {
            let hpa: BTreeSet<&str> = g
                .registered
                .iter()
                .filter(|r| r.resource == "horizontalpodautoscalers")
                .map(|r| r.version.as_str())
                .collect();
            assert!(hpa.len() <= 1, "{hpa:?} in {}", g.name());
        }
        // A Pod rule also registers the pod controllers (autogen), with UPDATE.
        for (group, resource) in [
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("apps", "replicasets"),
            ("", "replicationcontrollers"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
        ] {
            let r = first
                .iter()
                .find(|r| r.group == group && r.resource == resource)
                .unwrap_or_else(|| panic!("{group}/{resource} in {first:?}"));
            assert_eq!(r.operations, ["CREATE", "UPDATE"], "{r:?}");
        }
        // The selector stays with its rule.
        assert!(groups[2].namespace_selector.is_some());
        assert!(groups[0].namespace_selector.is_none());
        // Ids are stable and distinct.
        let again = super::groups(&ir, Endpoint::Validate);
        assert_eq!(
            groups.iter().map(|g| &g.id).collect::<Vec<_>>(),
            again.iter().map(|g| &g.id).collect::<Vec<_>>()
        );
        let ids: BTreeSet<&String> = groups.iter().map(|g| &g.id).collect();
        assert_eq!(ids.len(), groups.len());
        assert_eq!(groups[0].path(), format!("/validate/{}", groups[0].id));
        assert!(find(&ir, Endpoint::Validate, &groups[1].id).is_some());
        assert!(find(&ir, Endpoint::Validate, "00000000").is_none());
    }

    const IMMUTABLE: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: t}
spec:
  resources:
    - group: db.example.com
      kind: Database
      plural: databases
      hub: v1
      versions: [v1alpha1, v1]
  admission:
    validations:
      - name: replicas-fixed
        resources: [db.example.com/v1/databases]
        path: spec.replicas
        check: {immutable: true, maximum: 5}
      - name: cluster-id-fixed
        resources: [db.example.com/v1/databases]
        path: status.clusterID
        check: {immutable: true}
      - name: engine-fixed
        resources: [db.example.com/v1/databases]
        path: spec.engine
        check: {immutable: true}
      - name: scale-named
        resources: [apps/v1/deployments]
        match: {subresources: [scale]}
        path: spec.replicas
        check: {immutable: true}
"#;

    #[test]
    fn immutable_rules_also_register_the_subresources_that_write_their_path() {
        let ir = ir(IMMUTABLE);
        let implied: Vec<Vec<&str>> = ir
            .admission
            .validations
            .iter()
            .map(implied_subresources)
            .collect();
        assert_eq!(implied, [vec!["scale"], vec!["status"], vec![], vec![]]);
        let registered: Vec<(String, Vec<String>)> = groups(&ir, Endpoint::Validate)
            .iter()
            .flat_map(|g| g.registered.clone())
            .filter(|r| r.group == "db.example.com")
            .map(|r| (r.resource, r.operations))
            .collect();
        let update = vec!["UPDATE".to_string()];
        assert!(
            registered.contains(&("databases/scale".into(), update.clone())),
            "{registered:?}"
        );
        assert!(
            registered.contains(&("databases/status".into(), update)),
            "{registered:?}"
        );
    }

    #[test]
    fn the_scale_subresource_writes_the_replicas_where_the_crd_keeps_them() {
        use crate::admission::eval::{AdmissionInput, evaluate};
        use serde_json::json;
        let katalog = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: t}
spec:
  resources:
    - group: cache.example.com
      kind: Cache
      plural: caches
      hub: v1
      versions: [v1]
      crd: cache.crd.yaml
  admission:
    validations:
      - name: size-fixed
        resources: [cache.example.com/v1/caches]
        path: spec.size
        check: {immutable: true}
      - name: tier-fixed
        resources: [cache.example.com/v1/caches]
        path: spec.tier
        check: {immutable: true}
"#;
        let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: caches.cache.example.com}
spec:
  group: cache.example.com
  scope: Namespaced
  names: {plural: caches, singular: cache, kind: Cache}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
                tier: {type: string}
      subresources:
        scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size}
"#;
        let ir = crate::compile_with_crds(&[Source::new("t.yaml", katalog)], |_| {
            Ok(vec![Source::new("cache.crd.yaml", crd)])
        })
        .unwrap_or_else(|d| panic!("{}", d.render()));
        let implied: Vec<Vec<&str>> = ir
            .admission
            .validations
            .iter()
            .map(implied_subresources)
            .collect();
        assert_eq!(implied, [vec!["scale"], vec![]]);
        let scale = |replicas: u64| {
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                   "metadata": {"name": "c", "namespace": "data"},
                   "spec": {"replicas": replicas}})
        };
        let input = |old: u64, new: u64| AdmissionInput {
            operation: Operation::Update,
            group: "cache.example.com".into(),
            version: "v1".into(),
            resource: "caches".into(),
            subresource: "scale".into(),
            kind: "Scale".into(),
            name: "c".into(),
            namespace: "data".into(),
            object: Some(scale(new).into()),
            old_object: Some(scale(old).into()),
            username: "u".into(),
            groups: Vec::new(),
            dry_run: false,
            namespace_object: None,
            request: json!({}),
        };
        let denials = |i: &AdmissionInput| evaluate(&ir, i, Endpoint::Validate).message();
        assert_eq!(
            denials(&input(3, 9)),
            "[size-fixed] `spec.size` is immutable: it was 3, now 9"
        );
        assert_eq!(denials(&input(3, 3)), "");
    }

    #[test]
    fn on_a_subresource_only_the_immutable_test_runs_on_what_the_apiserver_sends() {
        use crate::admission::eval::{AdmissionInput, evaluate};
        use serde_json::json;
        let ir = ir(IMMUTABLE);
        let db = |replicas: u64, cluster: &str| {
            json!({"apiVersion": "db.example.com/v1alpha1", "kind": "Database",
                   "metadata": {"name": "orders", "namespace": "data"},
                   "spec": {"replicas": replicas, "engine": "postgres"},
                   "status": {"clusterID": cluster}})
        };
        let scale = |replicas: u64| {
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                   "metadata": {"name": "orders", "namespace": "data"},
                   "spec": {"replicas": replicas}, "status": {"replicas": 3}})
        };
        let input = |sub: &str, kind: &str, old: serde_json::Value, new: serde_json::Value| {
            AdmissionInput {
                operation: Operation::Update,
                group: "db.example.com".into(),
                // Not the rules' version: a Database would be converted, a Scale is not.
                version: "v1alpha1".into(),
                resource: "databases".into(),
                subresource: sub.into(),
                kind: kind.into(),
                name: "orders".into(),
                namespace: "data".into(),
                object: Some(new.into()),
                old_object: Some(old.into()),
                username: "u".into(),
                groups: Vec::new(),
                dry_run: false,
                namespace_object: None,
                request: json!({}),
            }
        };
        let denials = |i: &AdmissionInput| evaluate(&ir, i, Endpoint::Validate).message();
        // /scale: the Scale's replicas are the replicas; 9 is above the
        // maximum, but there only the immutable test runs.
        assert_eq!(
            denials(&input("scale", "Scale", scale(3), scale(9))),
            "[replicas-fixed] `spec.replicas` is immutable: it was 3, now 9"
        );
        assert_eq!(denials(&input("scale", "Scale", scale(3), scale(3))), "");
        // /status: the whole object, converted to the rule's version.
        assert_eq!(
            denials(&input("status", "Database", db(9, "a"), db(9, "b"))),
            "[cluster-id-fixed] `status.clusterID` is immutable: it was \"a\", now \"b\""
        );
        assert_eq!(
            denials(&input("status", "Database", db(9, "a"), db(9, "a"))),
            ""
        );
        // The main resource: every test of every rule.
        let main = denials(&input("", "Database", db(3, "a"), db(9, "b")));
        assert!(
            main.contains("must be at most 5") && main.contains("[cluster-id-fixed]"),
            "{main}"
        );
    }
}
