//! The CRDs of a live cluster, for `--live`: listed once with kube-rs and
//! handed to the language crate as manifests
//! ([`katalog_lang::compile_with_live_crds`]), which stays free of any
//! client.

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use katalog_lang::Source;
use katalog_lang::load::CrdReference;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::cluster::ClusterError;

/// Every CustomResourceDefinition of a cluster, as listed.
#[derive(Debug, Clone, Default)]
pub struct LiveCrds {
    crds: Vec<CustomResourceDefinition>,
}

/// A client as kubectl makes one: the kubeconfig at `kubeconfig` (else
/// `KUBECONFIG`, `~/.kube/config`, then the in-cluster service account),
/// with its `context` (else the current one).
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClusterError> {
    if context.is_none() {
        return crate::cluster::client(kubeconfig).await;
    }
    crate::certs::tls::install_crypto_provider();
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?
        }
        None => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| ClusterError::Config(e.to_string()))?,
    };
    Client::try_from(config).map_err(ClusterError::Client)
}

impl LiveCrds {
    /// List the CRDs of the cluster `client` talks to (one request).
    pub async fn list(client: Client) -> Result<LiveCrds, ClusterError> {
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(ClusterError::ListCrds)?;
        Ok(LiveCrds { crds: list.items })
    }

    /// The CRD of the reference's resource, as one manifest named
    /// `cluster:customresourcedefinitions/NAME`; the error says it is not
    /// in the cluster.
    pub fn read(&self, reference: &CrdReference) -> Result<Vec<Source>, String> {
        let crd = self
            .crds
            .iter()
            .find(|c| c.spec.group == reference.group && c.spec.names.kind == reference.kind)
            .ok_or_else(|| {
                format!(
                    "the cluster has no CustomResourceDefinition for kind {} in group {}",
                    reference.kind, reference.group
                )
            })?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        let text = serde_json::to_string_pretty(crd)
            .map_err(|e| format!("failed to encode CustomResourceDefinition {name}: {e}"))?;
        Ok(vec![Source::new(
            format!("cluster:customresourcedefinitions/{name}"),
            text,
        )])
    }
}
