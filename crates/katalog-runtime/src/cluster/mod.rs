//! Registration against a cluster, with kube-rs: server-side apply of the
//! webhook configurations [`registration`](crate::cluster::registration) builds,
//! removal of those the Katalog no longer declares, and the CRD
//! `spec.conversion` merge patches, after checking that each CRD's storage
//! version is the Katalog's hub and that it serves every Katalog version.
//!
//! Every CRD is checked before anything is written, so a refusal leaves the
//! cluster as it was.
//!
//! Its submodules: what is registered ([`registration`]), the housekeeper
//! that keeps it registered ([`housekeeper`]) under leader election
//! ([`leader`]), storage migration ([`migrate`]) and a live cluster's CRDs
//! ([`live`]).

pub mod housekeeper;
pub mod leader;
pub mod live;
pub mod migrate;
pub mod registration;

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use katalog_lang::Ir;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cluster::registration::{
    MANAGED_BY_LABEL, MANAGER, Registration, crd_conversion_patches, mutating_configuration,
    validating_configuration,
};

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "katalog";

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("failed to load the kubeconfig: {0}")]
    Config(String),
    #[error("failed to create the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("failed to apply {kind} {name}: {source}")]
    Apply {
        kind: Kind,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to get {kind} {name}: {source}")]
    Get {
        kind: Kind,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to delete {kind} {name}: {source}")]
    Delete {
        kind: Kind,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "failed to find CustomResourceDefinition {name}: it does not exist; apply the CRD before registering"
    )]
    CrdMissing { name: String },
    #[error("failed to list CustomResourceDefinitions (for --live): {0}")]
    ListCrds(#[source] kube::Error),
    #[error("failed to get CustomResourceDefinition {name}: {source}")]
    GetCrd {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "failed to register conversion for CustomResourceDefinition {crd}: its storage version is {storage} but the Katalog's hub is {hub}; the hub is the version every conversion goes through, and registering requires it to be the storage version, so that what etcd holds is what the Katalog's rules are written against (`katalog check` only warns: converting through another hub is correct, for a storage migration); make {storage} the hub, or make {hub} the CRD's storage version and run `katalog migrate-storage`"
    )]
    StorageVersion {
        crd: String,
        storage: String,
        hub: String,
    },
    #[error(
        "failed to register conversion for CustomResourceDefinition {crd}: the Katalog converts {} but the CRD does not serve {} (it serves {})",
        katalog.join(", "),
        missing.join(", "),
        if served.is_empty() { "none".to_string() } else { served.join(", ") }
    )]
    NotServed {
        crd: String,
        katalog: Vec<String>,
        served: Vec<String>,
        missing: Vec<String>,
    },
    #[error("failed to patch spec.conversion of CustomResourceDefinition {name}: {source}")]
    PatchCrd {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The kinds of object registration touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ValidatingWebhookConfiguration,
    MutatingWebhookConfiguration,
    CustomResourceDefinition,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::ValidatingWebhookConfiguration => "ValidatingWebhookConfiguration",
            Kind::MutatingWebhookConfiguration => "MutatingWebhookConfiguration",
            Kind::CustomResourceDefinition => "CustomResourceDefinition",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Created,
    Updated,
    Unchanged,
    Deleted,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
            Action::Deleted => "deleted",
        })
    }
}

/// What happened to one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: Kind,
    pub name: String,
    pub action: Action,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.name, self.action)
    }
}

/// Every object registration looked at, in the order it did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterReport {
    pub changes: Vec<Change>,
}

impl RegisterReport {
    /// Whether anything was created, updated or deleted.
    pub fn changed(&self) -> bool {
        self.changes.iter().any(|c| c.action != Action::Unchanged)
    }

    /// The action taken on one object, if registration looked at it.
    pub fn action(&self, kind: Kind, name: &str) -> Option<Action> {
        self.changes
            .iter()
            .find(|c| c.kind == kind && c.name == name)
            .map(|c| c.action)
    }

    fn push(&mut self, kind: Kind, name: &str, action: Action) {
        self.changes.push(Change {
            kind,
            name: name.to_string(),
            action,
        });
    }
}

/// A client from the kubeconfig at `path`, or else inferred as kubectl does
/// (`KUBECONFIG`, `~/.kube/config`, then the in-cluster service account).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClusterError> {
    crate::certs::tls::install_crypto_provider();
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| ClusterError::Config(e.to_string()))?,
    };
    Client::try_from(config).map_err(ClusterError::Client)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A checked conversion patch: the CRD, and the merge patch when the CRD
/// differs from it.
struct CrdPlan {
    name: String,
    patch: Option<Value>,
}

/// RFC 7396 merge patch of `patch` onto `target`.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(serde_json::Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.shift_remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// Checks every CRD the Katalog converts, before anything is written.
async fn plan_crds(
    client: &Client,
    ir: &Ir,
    reg: &Registration,
) -> Result<Vec<CrdPlan>, ClusterError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut plans = Vec::new();
    for (name, patch) in crd_conversion_patches(ir, reg) {
        let Some(resource) = ir
            .resources
            .iter()
            .find(|r| format!("{}.{}", r.plural, r.group) == name)
        else {
            continue;
        };
        let crd = match api.get_opt(&name).await {
            Ok(Some(crd)) => crd,
            Ok(None) => return Err(ClusterError::CrdMissing { name }),
            Err(source) => return Err(ClusterError::GetCrd { name, source }),
        };
        let storage: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.clone())
            .collect();
        if storage.first() != Some(&resource.hub) {
            return Err(ClusterError::StorageVersion {
                crd: name,
                storage: if storage.is_empty() {
                    "none".into()
                } else {
                    storage.join(", ")
                },
                hub: resource.hub.clone(),
            });
        }
        let served: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect();
        let katalog: Vec<String> = resource.versions.iter().map(|v| v.name.clone()).collect();
        let missing: Vec<String> = katalog
            .iter()
            .filter(|v| !served.contains(v))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(ClusterError::NotServed {
                crd: name,
                katalog,
                served,
                missing,
            });
        }
        let current = serde_json::to_value(&crd).unwrap_or(Value::Null);
        let mut merged = current.clone();
        merge(&mut merged, &patch);
        let needed = merged["spec"]["conversion"] != current["spec"]["conversion"];
        plans.push(CrdPlan {
            name,
            patch: needed.then_some(patch),
        });
    }
    Ok(plans)
}

/// Server-side apply of one object; whether it was created, updated or left.
async fn apply<K>(api: &Api<K>, kind: Kind, object: &K) -> Result<Action, ClusterError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let err = |source| ClusterError::Apply {
        kind,
        name: name.clone(),
        source,
    };
    let before = api.get_opt(&name).await.map_err(err)?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let after = api
        .patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(err)?;
    Ok(match before {
        None => Action::Created,
        Some(b) if b.meta().resource_version == after.meta().resource_version => Action::Unchanged,
        Some(_) => Action::Updated,
    })
}

/// Deletes the registration's configuration of this kind, `name`
/// ([`Registration::validating_name`] or [`Registration::mutating_name`]),
/// when katalog manages it, unless it is in `keep`. Read by
/// name, never listed: the ClusterRole grants every verb on these two names
/// only. Another registration's configurations are never touched.
async fn prune<K>(
    api: &Api<K>,
    kind: Kind,
    name: String,
    keep: &BTreeSet<String>,
    report: &mut RegisterReport,
) -> Result<(), ClusterError>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug,
{
    if keep.contains(&name) {
        return Ok(());
    }
    let found = api
        .get_opt(&name)
        .await
        .map_err(|source| ClusterError::Get {
            kind,
            name: name.clone(),
            source,
        })?;
    let managed = found.as_ref().is_some_and(|item| {
        item.meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .is_some_and(|v| v == MANAGER)
    });
    if !managed {
        return Ok(());
    }
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => report.push(kind, &name, Action::Deleted),
        Err(e) if is_not_found(&e) => {}
        Err(source) => return Err(ClusterError::Delete { kind, name, source }),
    }
    Ok(())
}

/// Registers the Katalog: applies its webhook configurations (server-side
/// apply, field manager `katalog`, forced), deletes the managed ones it no
/// longer declares, and points each converted CRD at `/convert`.
pub async fn register(
    client: Client,
    ir: &Ir,
    reg: &Registration,
) -> Result<RegisterReport, ClusterError> {
    let crds = plan_crds(&client, ir, reg).await?;
    let mut report = RegisterReport::default();

    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mut keep = BTreeSet::new();
    if let Some(v) = validating_configuration(ir, reg) {
        let name = v.metadata.name.clone().unwrap_or_default();
        let action = apply(&validating, Kind::ValidatingWebhookConfiguration, &v).await?;
        report.push(Kind::ValidatingWebhookConfiguration, &name, action);
        keep.insert(name);
    }
    prune(
        &validating,
        Kind::ValidatingWebhookConfiguration,
        reg.validating_name(),
        &keep,
        &mut report,
    )
    .await?;

    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut keep = BTreeSet::new();
    if let Some(m) = mutating_configuration(ir, reg) {
        let name = m.metadata.name.clone().unwrap_or_default();
        let action = apply(&mutating, Kind::MutatingWebhookConfiguration, &m).await?;
        report.push(Kind::MutatingWebhookConfiguration, &name, action);
        keep.insert(name);
    }
    prune(
        &mutating,
        Kind::MutatingWebhookConfiguration,
        reg.mutating_name(),
        &keep,
        &mut report,
    )
    .await?;

    let api: Api<CustomResourceDefinition> = Api::all(client);
    for plan in crds {
        let action = match &plan.patch {
            None => Action::Unchanged,
            Some(patch) => {
                api.patch(&plan.name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map_err(|source| ClusterError::PatchCrd {
                        name: plan.name.clone(),
                        source,
                    })?;
                Action::Updated
            }
        };
        report.push(Kind::CustomResourceDefinition, &plan.name, action);
    }
    Ok(report)
}

/// Deletes the registration's two webhook configurations
/// (`<reg.name>-validating`, `<reg.name>-mutating`) when katalog manages them. CRD conversion settings are left as they are: the
/// objects stored at other versions still need them to be read.
pub async fn unregister(
    client: Client,
    reg: &Registration,
) -> Result<RegisterReport, ClusterError> {
    let mut report = RegisterReport::default();
    let none = BTreeSet::new();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    prune(
        &validating,
        Kind::ValidatingWebhookConfiguration,
        reg.validating_name(),
        &none,
        &mut report,
    )
    .await?;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client);
    prune(
        &mutating,
        Kind::MutatingWebhookConfiguration,
        reg.mutating_name(),
        &none,
        &mut report,
    )
    .await?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7396() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge(&mut t, &json!({"a": {"b": null, "e": 3}, "d": [2]}));
        assert_eq!(t, json!({"a": {"c": 2, "e": 3}, "d": [2]}));
    }

    #[test]
    fn errors_name_the_crd_and_both_versions() {
        let e = ClusterError::StorageVersion {
            crd: "crontabs.stable.example.com".into(),
            storage: "v1".into(),
            hub: "v2".into(),
        };
        let m = e.to_string();
        assert!(m.starts_with("failed to "), "{m}");
        for part in ["crontabs.stable.example.com", "v1", "v2"] {
            assert!(m.contains(part), "{m}");
        }
        // It says what the hub is and why registering needs it stored.
        assert!(
            m.contains("the hub is the version every conversion goes through"),
            "{m}"
        );
        let e = ClusterError::NotServed {
            crd: "crontabs.stable.example.com".into(),
            katalog: vec!["v1".into(), "v3".into()],
            served: vec!["v1".into()],
            missing: vec!["v3".into()],
        };
        assert!(e.to_string().contains("does not serve v3"), "{e}");
    }
}
