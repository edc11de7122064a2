//! The OpenAPI schemas of built-in kinds (Pod, Deployment, ...), for the
//! compile-time CEL type checks (`crate::cel::types`) of rules that select
//! them.
//!
//! Read from the `k8s-openapi` crate's types (the Kubernetes version of its
//! `latest` feature) through their `schemars::JsonSchema` implementations,
//! so the schemas are those of the same API types the runtime decodes, with
//! no generated file to keep in step. Each kind's schema is built on first
//! use and kept.
//!
//! Why not a generated table: a file of compact schemas would need a
//! generator (built with the same feature, or a live apiserver's
//! `/openapi/v3`) and a test that it is current; the `schemars` feature of
//! `k8s-openapi` costs one rebuild of that crate (about 4 minutes on the 2
//! shared cores, measured with three other builds running) and about a
//! tenth of a second the first time a kind is checked in a debug build.
//! Both follow the `latest` Kubernetes version of the workspace's
//! `k8s-openapi`, as the known resources of `known.rs` follow a
//! kube-apiserver's discovery.

use std::sync::OnceLock;

use k8s_openapi::Resource;
use k8s_openapi::api::{apps, autoscaling, batch, core, networking, policy, rbac, storage};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;

use crate::schema::SchemaNode;

/// The whole object's schema of `T`, subschemas inlined (a recursive
/// type's inner `$ref` stays: an untyped node, `dyn`).
fn schema_of<T: JsonSchema>() -> SchemaNode {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let root = settings.into_generator().into_root_schema_for::<T>();
    SchemaNode::resource(&root.to_value())
}

type Entry = (&'static str, &'static str, &'static str, fn() -> SchemaNode);

macro_rules! kinds {
    ($($t:ty),* $(,)?) => {
        &[$((
            <$t as Resource>::GROUP,
            <$t as Resource>::VERSION,
            <$t as Resource>::URL_PATH_SEGMENT,
            schema_of::<$t> as fn() -> SchemaNode,
        )),*]
    };
}

/// The built-in kinds whose schemas the checks know: the ones admission
/// rules are written for.
const KINDS: &[Entry] = kinds![
    core::v1::Pod,
    core::v1::Service,
    core::v1::ConfigMap,
    core::v1::Secret,
    core::v1::Namespace,
    core::v1::ServiceAccount,
    core::v1::PersistentVolumeClaim,
    core::v1::PersistentVolume,
    core::v1::ReplicationController,
    core::v1::LimitRange,
    core::v1::ResourceQuota,
    core::v1::Node,
    apps::v1::Deployment,
    apps::v1::StatefulSet,
    apps::v1::DaemonSet,
    apps::v1::ReplicaSet,
    batch::v1::Job,
    batch::v1::CronJob,
    networking::v1::Ingress,
    networking::v1::NetworkPolicy,
    networking::v1::IngressClass,
    policy::v1::PodDisruptionBudget,
    rbac::v1::Role,
    rbac::v1::RoleBinding,
    rbac::v1::ClusterRole,
    rbac::v1::ClusterRoleBinding,
    autoscaling::v2::HorizontalPodAutoscaler,
    storage::v1::StorageClass,
];

/// The schema of the built-in resource `group/version/plural` (the core
/// group is `""`); `None` for a resource the table does not have.
pub fn schema(group: &str, version: &str, plural: &str) -> Option<&'static SchemaNode> {
    select(group, Some(version), plural)
        .first()
        .map(|k| k.schema())
}

/// A built-in kind of the table, its schema built when first asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind(usize);

impl Kind {
    /// The kind's schema, built on first use and kept for the process.
    pub fn schema(self) -> &'static SchemaNode {
        static BUILT: [OnceLock<SchemaNode>; KINDS.len()] =
            [const { OnceLock::new() }; KINDS.len()];
        BUILT[self.0].get_or_init(KINDS[self.0].3)
    }
}

/// The kinds of `group/plural` the table has, at `version` (every version
/// for `None`, a rule pattern's `*`).
pub fn select(group: &str, version: Option<&str>, plural: &str) -> Vec<Kind> {
    KINDS
        .iter()
        .enumerate()
        .filter(|(_, (g, v, p, _))| {
            *g == group && *p == plural && version.is_none_or(|version| version == *v)
        })
        .map(|(i, _)| Kind(i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::path::Path;
    use crate::schema::{Lookup, lookup};

    #[test]
    fn every_kind_has_an_object_schema_with_its_fields() {
        for (g, v, p, _) in KINDS {
            let s = schema(g, v, p).unwrap();
            assert_eq!(s.type_.as_deref(), Some("object"), "{g}/{v}/{p}");
            assert!(s.properties.contains_key("metadata"), "{g}/{v}/{p}");
        }
        let pod = schema("", "v1", "pods").unwrap();
        let image = lookup(pod, &Path::parse("spec.containers[*].image").unwrap());
        assert!(
            matches!(image, Lookup::Found(n) if n.type_.as_deref() == Some("string")),
            "{image:?}"
        );
        let port = lookup(
            pod,
            &Path::parse("spec.containers[*].ports[*].containerPort").unwrap(),
        );
        assert!(matches!(port, Lookup::Found(n) if n.type_.as_deref() == Some("integer")));
        let replicas = lookup(
            schema("apps", "v1", "deployments").unwrap(),
            &Path::parse("spec.replicas").unwrap(),
        );
        assert!(matches!(replicas, Lookup::Found(n) if n.type_.as_deref() == Some("integer")));
        assert!(schema("", "v1", "widgets").is_none());
        assert_eq!(select("apps", None, "deployments").len(), 1);
    }
}

/// Expressions written as ValidatingAdmissionPolicies write them type-check
/// against the built-in schemas: no false errors.
#[cfg(test)]
mod idioms {
    use crate::cel::CelProgram;
    use crate::cel::types::{Env, Type, check};

    fn errors(kind: (&str, &str, &str), expr: &str) -> Vec<String> {
        let schema = super::schema(kind.0, kind.1, kind.2).unwrap();
        let object = Type::of_schema(schema, false);
        let env = Env {
            idents: vec![
                ("object".into(), object.clone()),
                ("oldObject".into(), object),
                ("request".into(), Type::Dyn),
            ],
            ..Env::default()
        };
        let program = CelProgram::compile(expr).unwrap();
        check(&program, &env)
            .1
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn well_typed_policies_on_pods_and_deployments_pass() {
        const POD: (&str, &str, &str) = ("", "v1", "pods");
        const DEPLOYMENT: (&str, &str, &str) = ("apps", "v1", "deployments");
        for (kind, expr) in [
            (
                POD,
                "!has(object.spec.hostNetwork) || object.spec.hostNetwork == false",
            ),
            (
                POD,
                "object.metadata.labels['app'] == 'x' && 'app' in object.metadata.labels",
            ),
            (
                POD,
                "object.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || c.securityContext.privileged == false)",
            ),
            (
                POD,
                "object.spec.containers.all(c, quantity(c.resources.limits.memory).compareTo(quantity('1Gi')) <= 0)",
            ),
            (
                POD,
                "object.spec.containers.all(c, c.resources.requests.cpu != null && c.resources.limits['cpu'] != '')",
            ),
            (
                POD,
                "object.spec.containers.all(c, c.ports.all(p, p.hostPort == 0 && p.containerPort > 0u))",
            ),
            (POD, "object.spec.volumes.all(v, !has(v.hostPath))"),
            (
                POD,
                "object.spec.containers.filter(c, c.image.endsWith(':latest')).map(c, c.name).join(', ') == ''",
            ),
            (
                POD,
                "'%s has %d containers'.format([object.metadata.name, size(object.spec.containers)]) != ''",
            ),
            (POD, "object.metadata.?labels.?app.orValue('') == 'x'"),
            (
                POD,
                "object.spec.?securityContext.?runAsNonRoot.orValue(false) == true",
            ),
            (
                POD,
                "object.spec.securityContext.runAsUser >= 1000 && object.spec.securityContext.seccompProfile.type == 'RuntimeDefault'",
            ),
            (
                POD,
                "(object.spec.containers + object.spec.?initContainers.orValue([])).all(c, c.image != '')",
            ),
            (
                POD,
                "[object.spec.containers, object.spec.initContainers].all(l, l.all(c, c.name != ''))",
            ),
            (
                POD,
                "object.spec.containers.exists_one(c, c.name == 'main') && object.kind == 'Pod'",
            ),
            (
                POD,
                "object.metadata.annotations['a'].split(',').all(s, s.size() > 0)",
            ),
            (
                POD,
                "object.metadata.creationTimestamp != null && object.spec.containers[0].name != ''",
            ),
            (
                POD,
                "object.spec.containers.all(c, c.env.exists(e, e.name == 'X' && e.valueFrom.secretKeyRef.name != ''))",
            ),
            (
                POD,
                "object.spec.tolerations.all(t, t.tolerationSeconds > 0 && t.effect in ['NoSchedule', 'NoExecute'])",
            ),
            (
                POD,
                "object.spec.containers.all(c, c.livenessProbe.httpGet.port == 8080 || c.livenessProbe.httpGet.port == 'http')",
            ),
            (
                POD,
                "request.operation == 'CREATE' || oldObject == null || object.metadata.name == oldObject.metadata.name",
            ),
            (
                DEPLOYMENT,
                "object.spec.replicas <= 5 && (has(object.spec.replicas) ? object.spec.replicas : 1) > 0",
            ),
            (
                DEPLOYMENT,
                "oldObject == null || object.spec.replicas >= oldObject.spec.replicas",
            ),
            (
                DEPLOYMENT,
                "object.spec.template.spec.containers.all(c, c.image.startsWith('registry/'))",
            ),
            (
                DEPLOYMENT,
                "object.spec.template.metadata.labels.app == object.spec.selector.matchLabels.app",
            ),
            (
                DEPLOYMENT,
                "object.spec.strategy.rollingUpdate.maxSurge == '25%' || object.spec.strategy.rollingUpdate.maxSurge == 1",
            ),
            (
                DEPLOYMENT,
                "'replicas ' + string(object.spec.replicas) + ' too many' != ''",
            ),
            (
                DEPLOYMENT,
                "object.spec.template.spec.containers.map(c, c.ports).all(ps, ps.all(p, p.protocol == 'TCP'))",
            ),
        ] {
            assert_eq!(errors(kind, expr), Vec::<String>::new(), "{expr}");
        }
    }
}
