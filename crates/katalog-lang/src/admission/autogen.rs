//! Autogen: a rule written for Pods also applies to the pod templates of the
//! workload controllers, without being copied.
//!
//! The rule is evaluated on a *pod view* of the controller object:
//! `{apiVersion: v1, kind: Pod, metadata: <template.metadata + the
//! controller's namespace>, spec: <template.spec>}` (the same for
//! `oldObject`). The view's `metadata` and `spec` sit at
//! `<template>.metadata` and `<template>.spec` of the real object, so a path
//! in the view maps back by prefixing the template path; mutations write the
//! view's `metadata` and `spec` back into the template.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::input::AdmissionInput;
use super::{MatchIr, ResourcePattern};
use crate::common::json::ValueAt;
use crate::common::json::node::{Node, Obj};
use crate::common::path::{Path, SetError};
use crate::front::document::PodControllers;

/// `(kind, group, version, resource, template path)` of every pod controller.
pub const CONTROLLERS: [(&str, &str, &str, &str, &str); 7] = [
    ("Deployment", "apps", "v1", "deployments", "spec.template"),
    ("StatefulSet", "apps", "v1", "statefulsets", "spec.template"),
    ("DaemonSet", "apps", "v1", "daemonsets", "spec.template"),
    ("ReplicaSet", "apps", "v1", "replicasets", "spec.template"),
    (
        "ReplicationController",
        "",
        "v1",
        "replicationcontrollers",
        "spec.template",
    ),
    ("Job", "batch", "v1", "jobs", "spec.template"),
    (
        "CronJob",
        "batch",
        "v1",
        "cronjobs",
        "spec.jobTemplate.spec.template",
    ),
];

fn template_path(text: &str) -> Path {
    Path::parse(text).unwrap_or_default()
}

/// True when the patterns name Pods themselves (`v1/pods`, `*/pods`, ...).
pub(crate) fn names_pods(resources: &[ResourcePattern]) -> bool {
    resources.iter().any(|r| {
        r.resource.as_deref() == Some("pods") && r.group.as_deref().is_none_or(str::is_empty)
    })
}

pub use crate::ir::admission::Controllers;

/// The controller lists of one compile, each distinct one built once: the
/// rules of a Katalog on `v1/pods` mostly apply to the same controllers.
/// Keyed by which of [`CONTROLLERS`] a list holds (bit i: the i-th).
#[derive(Debug, Default)]
pub struct SharedControllers(HashMap<u8, Controllers>);

// Each of CONTROLLERS has its bit in the key of SharedControllers.
const _: () = assert!(CONTROLLERS.len() <= u8::BITS as usize);

/// The controllers a rule applies to: none unless it matches the Pod main
/// resource; `setting` limits them; a controller the rule names itself is
/// left to the rule (it sees the raw object there). `Err` names an unknown kind.
pub fn controllers_for(
    resources: &[ResourcePattern],
    subresources: &[String],
    setting: Option<&PodControllers>,
    shared: &mut SharedControllers,
) -> Result<Controllers, String> {
    let wanted: Option<&[String]> = match setting {
        None | Some(PodControllers::Enabled(true)) => None,
        Some(PodControllers::Enabled(false)) => Some(&[]),
        Some(PodControllers::Kinds(kinds)) => {
            for k in kinds {
                if !CONTROLLERS.iter().any(|(kind, ..)| kind == k) {
                    let known: Vec<&str> = CONTROLLERS.iter().map(|(k, ..)| *k).collect();
                    return Err(format!(
                        "`{k}` is not a pod controller kind; use {}",
                        known.join(", ")
                    ));
                }
            }
            Some(kinds)
        }
    };
    // Only a rule on the Pod itself (no subresource, or `""` among them)
    // applies to pod templates.
    let main_resource = subresources.is_empty() || subresources.iter().any(String::is_empty);
    let applies = names_pods(resources) && main_resource;
    // Bit i: the i-th of CONTROLLERS.
    let selected = CONTROLLERS
        .iter()
        .enumerate()
        .filter(|(_, (kind, g, v, r, _))| {
            applies
                && wanted.is_none_or(|w| w.iter().any(|k| k == kind))
                && !resources.iter().any(|p| p.matches(g, v, r))
        })
        .fold(0u8, |bits, (i, _)| bits | 1 << i);
    let built = shared.0.entry(selected).or_insert_with(|| {
        CONTROLLERS
            .iter()
            .enumerate()
            .filter(|(i, _)| selected & 1 << i != 0)
            .map(|(_, (_, g, v, r, t))| {
                (
                    ResourcePattern {
                        group: Some(g.to_string()),
                        version: Some(v.to_string()),
                        resource: Some(r.to_string()),
                    },
                    template_path(t),
                )
            })
            .collect()
    });
    Ok(Arc::clone(built))
}

/// A request on a pod controller, seen as a request on a Pod.
#[derive(Clone, Debug)]
pub struct PodView {
    /// `v1/pods`, the real operation, the pod views as object and oldObject.
    pub input: AdmissionInput,
    /// Where the pod template lives in the real object.
    pub template: Path,
}

/// The pod view of a request on a pod controller's main resource.
pub fn pod_view(input: &AdmissionInput) -> Option<PodView> {
    if !input.subresource.is_empty() {
        return None;
    }
    let (.., t) = CONTROLLERS
        .iter()
        .find(|(_, g, v, r, _)| *g == input.group && *v == input.version && *r == input.resource)?;
    let template = template_path(t);
    // An object read as a node gives a node: the view is not converted.
    let view = |obj: &Option<Obj>| {
        obj.as_ref().map(|o| match o.node() {
            Some(node) => Obj::from_node(node_view_of(node, &template, input)),
            None => Obj::from(view_of(o, &template, input)),
        })
    };
    // Field by field: the controller's objects are not copied, only viewed.
    Some(PodView {
        input: AdmissionInput {
            operation: input.operation,
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            subresource: input.subresource.clone(),
            kind: "Pod".into(),
            name: input.name.clone(),
            namespace: input.namespace.clone(),
            object: view(&input.object),
            old_object: view(&input.old_object),
            username: input.username.clone(),
            groups: input.groups.clone(),
            dry_run: input.dry_run,
            namespace_object: input.namespace_object.clone(),
            request: input.request.clone(),
        },
        template,
    })
}

fn view_of(obj: &Value, template: &Path, input: &AdmissionInput) -> Value {
    let t = template.get(obj);
    let mut metadata = t
        .and_then(|t| t.get("metadata"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let namespace = obj
        .at("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(&input.namespace);
    if !namespace.is_empty() && !metadata.contains_key("namespace") {
        metadata.insert("namespace".into(), Value::String(namespace.into()));
    }
    let mut pod = Map::new();
    pod.insert("apiVersion".into(), Value::String("v1".into()));
    pod.insert("kind".into(), Value::String("Pod".into()));
    pod.insert("metadata".into(), Value::Object(metadata));
    if let Some(spec) = t.and_then(|t| t.get("spec")) {
        pod.insert("spec".into(), spec.clone());
    }
    Value::Object(pod)
}

/// [`view_of`] of an object read as a [`Node`]: the same pod, as a node.
fn node_view_of(obj: &Node, template: &Path, input: &AdmissionInput) -> Node {
    let t = obj.at(template.segments());
    let mut metadata: Vec<(String, Node)> = match t.and_then(|t| t.get("metadata")) {
        Some(Node::Object(members)) => members
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let namespace = obj
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Node::as_str)
        .unwrap_or(&input.namespace);
    if !namespace.is_empty() && !metadata.iter().any(|(k, _)| k == "namespace") {
        metadata.push(("namespace".into(), Node::String(namespace.into())));
    }
    let mut pod = vec![
        ("apiVersion".into(), Node::String("v1".into())),
        ("kind".into(), Node::String("Pod".into())),
        ("metadata".into(), Node::object(metadata)),
    ];
    if let Some(spec) = t.and_then(|t| t.get("spec")) {
        pod.push(("spec".into(), spec.clone()));
    }
    Node::object(pod)
}

/// True when the rule applies to this controller request (its operation and
/// resource); the rest of the match is evaluated on the pod view.
pub fn applies(m: &MatchIr, input: &AdmissionInput) -> bool {
    // `pod_controller_operations`, without building the set.
    let operation_ok = m.operations.contains(&input.operation)
        || (input.operation == crate::front::document::Operation::Update
            && m.operations
                .contains(&crate::front::document::Operation::Create));
    input.subresource.is_empty()
        && operation_ok
        && m.pod_controllers
            .iter()
            .any(|(r, _)| r.matches(&input.group, &input.version, &input.resource))
}

/// Write a mutated pod view back into the controller object: its `metadata`
/// (without the namespace the view added) and `spec` go to the template.
pub fn write_back(view: &Value, real: &mut Value, template: &Path) -> Result<(), SetError> {
    let had_namespace = template
        .child("metadata")
        .child("namespace")
        .get(real)
        .is_some();
    let had_metadata = template.child("metadata").get(real).is_some();
    if let Some(Value::Object(meta)) = view.get("metadata") {
        let mut meta = meta.clone();
        if !had_namespace {
            meta.shift_remove("namespace");
        }
        if had_metadata || !meta.is_empty() {
            template.child("metadata").set(real, Value::Object(meta))?;
        }
    }
    if let Some(spec) = view.get("spec") {
        template.child("spec").set(real, spec.clone())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Source;
    use crate::front::document::Operation;

    fn matchers(rules: &str) -> Vec<crate::admission::MatchIr> {
        let text = format!(
            "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {{name: t}}\nspec:\n  admission:\n    validations:\n{rules}"
        );
        let ir = crate::compile_sources(&[Source::new("t.yaml", text)]).expect("compiles");
        ir.admission
            .validations
            .into_iter()
            .map(|v| v.matcher)
            .collect()
    }

    fn resources(m: &crate::admission::MatchIr) -> Vec<String> {
        m.registered_resources()
            .iter()
            .map(|r| {
                format!(
                    "{}/{}/{}",
                    r.group.as_deref().unwrap_or("*"),
                    r.version.as_deref().unwrap_or("*"),
                    r.resource.as_deref().unwrap_or("*")
                )
            })
            .collect()
    }

    /// The pod view of an object read as a node is the view of the same
    /// object as a `Value`, for every controller and odd shapes.
    #[test]
    fn a_nodes_pod_view_is_the_values() {
        use super::{CONTROLLERS, Node, Obj, pod_view};
        use crate::admission::AdmissionInput;
        use serde_json::json;
        let template = json!({
            "metadata": {"labels": {"app": "a"}, "annotations": {"x": "y"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "hostPID": true}
        });
        for (_, group, version, resource, path) in CONTROLLERS.iter() {
            let mut objects = vec![
                json!({"metadata": {"name": "d", "namespace": "ns"}}),
                json!({"metadata": {"name": "d"}}),
                json!({"metadata": "odd", "spec": 3}),
                json!(null),
            ];
            for namespace in [json!("own"), json!(null)] {
                let mut object = json!({"metadata": {"name": "d", "namespace": "ns"}});
                let mut t = template.clone();
                t["metadata"]["namespace"] = namespace.clone();
                if namespace.is_null() {
                    t["metadata"].as_object_mut().unwrap().remove("namespace");
                }
                let pointer = format!("/{}", path.replace('.', "/"));
                let mut at = &mut object;
                for key in pointer.split('/').skip(1) {
                    at = &mut at[key];
                }
                *at = t;
                objects.push(object);
            }
            for object in objects {
                let input = |o: Obj| AdmissionInput {
                    operation: Operation::Create,
                    group: group.to_string(),
                    version: version.to_string(),
                    resource: resource.to_string(),
                    subresource: String::new(),
                    kind: String::new(),
                    name: "d".into(),
                    namespace: "req".into(),
                    object: Some(o),
                    old_object: None,
                    username: String::new(),
                    groups: Vec::new(),
                    dry_run: false,
                    namespace_object: None,
                    request: serde_json::Value::Null,
                };
                let from_value = pod_view(&input(Obj::from(object.clone()))).unwrap();
                let from_node = pod_view(&input(Obj::from_node(Node::from(&object)))).unwrap();
                let node = from_node.input.object.as_ref().unwrap();
                assert!(node.node().is_some(), "a node's view is a node");
                assert_eq!(
                    serde_json::to_string(&**node).unwrap(),
                    serde_json::to_string(&**from_value.input.object.as_ref().unwrap()).unwrap(),
                    "{resource}: {object}"
                );
            }
        }
    }

    #[test]
    fn a_pod_rule_registers_every_controller_with_update_added_to_create() {
        let m = matchers(
            "      - {name: a, resources: [v1/pods], match: {operations: [CREATE]}, path: spec.hostPID, check: {equals: false}}\n",
        );
        assert_eq!(
            resources(&m[0]),
            [
                "/v1/pods",
                "apps/v1/deployments",
                "apps/v1/statefulsets",
                "apps/v1/daemonsets",
                "apps/v1/replicasets",
                "/v1/replicationcontrollers",
                "batch/v1/jobs",
                "batch/v1/cronjobs"
            ]
        );
        let rules = m[0].registered_rules();
        assert_eq!(
            rules[0].1.iter().copied().collect::<Vec<_>>(),
            [Operation::Create]
        );
        assert_eq!(
            rules[1].1.iter().copied().collect::<Vec<_>>(),
            [Operation::Create, Operation::Update]
        );
        assert_eq!(
            m[0].resources.len(),
            1,
            "controllers stay out of `resources`"
        );
    }

    #[test]
    fn opt_outs_subresources_and_other_resources_register_no_controller() {
        let m = matchers(concat!(
            "      - {name: a, resources: [v1/pods], podControllers: false, path: spec.hostPID, check: {equals: false}}\n",
            "      - {name: b, resources: [v1/pods], podControllers: [CronJob], path: spec.hostPID, check: {equals: false}}\n",
            "      - {name: c, resources: [v1/pods], match: {subresources: [ephemeralcontainers]}, path: spec.hostPID, check: {equals: false}}\n",
            "      - {name: d, resources: [v1/services], path: spec.type, check: {equals: ClusterIP}}\n",
            "      - {name: e, resources: [v1/pods, apps/v1/deployments], path: spec.hostPID, check: {equals: false}}\n",
        ));
        assert_eq!(resources(&m[0]), ["/v1/pods"]);
        assert_eq!(resources(&m[1]), ["/v1/pods", "batch/v1/cronjobs"]);
        assert_eq!(resources(&m[2]), ["/v1/pods"]);
        assert_eq!(resources(&m[3]), ["/v1/services"]);
        // A controller the rule names itself sees the raw object, not a view.
        assert_eq!(m[4].pod_controllers.len(), 6);
        let all = resources(&m[4]);
        assert_eq!(
            all.iter().filter(|r| *r == "apps/v1/deployments").count(),
            1
        );
    }

    #[test]
    fn an_unknown_controller_kind_is_an_error() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: t}\nspec:\n  admission:\n    validations:\n      - {name: a, resources: [v1/pods], podControllers: [Deploymnet], path: spec.hostPID, check: {equals: false}}\n";
        let err = crate::compile_sources(&[Source::new("t.yaml", text)]).unwrap_err();
        assert!(
            err.to_string()
                .contains("`Deploymnet` is not a pod controller kind"),
            "{err}"
        );
    }
}
