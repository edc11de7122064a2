//! The OpenAPI schemas of built-in kinds (Pod, Deployment, ...), for the
//! compile-time CEL type checks (`crate::cel::types`) of rules that select
//! them.
//!
//! Read from the `k8s-openapi` crate's types (the Kubernetes version of its
//! `latest` feature) through their `schemars::JsonSchema` implementations,
//! so the schemas are those of the same API types the runtime decodes, with
//! no generated file to keep in step. Each kind's schema is built on first
//! use and kept.

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
    static BUILT: [OnceLock<SchemaNode>; KINDS.len()] = [const { OnceLock::new() }; KINDS.len()];
    let i = KINDS
        .iter()
        .position(|(g, v, p, _)| *g == group && *v == version && *p == plural)?;
    Some(BUILT[i].get_or_init(KINDS[i].3))
}

/// The versions of `group/plural` the table has, for a rule pattern that
/// names no version (`*`).
pub fn versions<'q>(group: &'q str, plural: &'q str) -> impl Iterator<Item = &'static str> + 'q {
    KINDS
        .iter()
        .filter(move |(g, _, p, _)| *g == group && *p == plural)
        .map(|(_, v, _, _)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Path;
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
        assert_eq!(versions("apps", "deployments").collect::<Vec<_>>(), ["v1"]);
    }
}
