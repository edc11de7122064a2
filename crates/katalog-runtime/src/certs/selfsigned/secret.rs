//! Applying the plan to the Secret ([`SelfSigned`]): read, plan, write
//! with the resourceVersion read, retried when another replica won.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

use super::material::*;
use super::policy::*;
use crate::certs::tls::serving_names;
use crate::cluster::registration::{MANAGED_BY_LABEL, MANAGER};

/// What one [`SelfSigned::ensure`] did to the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The Secret holds what is served and needs nothing.
    Unchanged,
    /// The Secret holds another usable certificate (another replica
    /// rotated, or it was replaced by hand): it is served from now on.
    Adopted,
    Created,
    Updated,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Unchanged => "unchanged",
            Action::Adopted => "adopted",
            Action::Created => "created",
            Action::Updated => "updated",
        })
    }
}

/// The outcome of [`SelfSigned::ensure`].
#[derive(Clone, Debug)]
pub struct Applied {
    pub action: Action,
    /// Why it was written (empty when nothing was).
    pub reasons: Vec<String>,
    /// What to serve now.
    pub material: Material,
}

/// A certificate kept in a Secret; see the module documentation.
#[derive(Clone, Debug)]
pub struct SelfSigned {
    pub secret: SecretRef,
    /// The names the serving certificate must be valid for
    /// ([`serving_names`](crate::certs::tls::serving_names)).
    pub names: Vec<String>,
    pub policy: Policy,
    /// How often expiry is checked (default 1 minute); a watch on the
    /// Secret catches deletions and edits at once.
    pub check_interval: Duration,
    /// First and longest wait before a failed watch is restarted.
    pub backoff: (Duration, Duration),
}

impl SelfSigned {
    /// The Secret `secret`, for `localhost`, `127.0.0.1`, `::1` and `extra_names`.
    pub fn new(secret: SecretRef, extra_names: &[String]) -> SelfSigned {
        SelfSigned {
            secret,
            names: serving_names(extra_names),
            policy: Policy::default(),
            check_interval: Duration::from_secs(60),
            backoff: (Duration::from_millis(200), Duration::from_secs(10)),
        }
    }

    pub(super) fn api(&self, client: &Client) -> Api<Secret> {
        Api::namespaced(client.clone(), &self.secret.namespace)
    }

    /// Make the Secret hold a usable certificate, once. `serving` is what
    /// this replica serves now (none at start): a Secret that was deleted or
    /// damaged is restored from it rather than replaced by a new CA.
    pub async fn ensure(&self, client: &Client, serving: Option<&Material>) -> Result<Applied> {
        self.policy.check()?;
        let api = self.api(client);
        let label = self.secret.to_string();
        for _ in 0..WRITE_ATTEMPTS {
            let existing =
                api.get_opt(&self.secret.name)
                    .await
                    .map_err(|source| SelfSignedError::Read {
                        secret: self.secret.clone(),
                        source,
                    })?;
            let stored = match &existing {
                Some(s) => Material::from_secret(s).map_err(Stored::Unusable),
                None => Err(Stored::Missing),
            };
            // A Secret katalog did not write is used only when it holds the
            // four keys (made by hand for katalog); anything else, such as
            // another tool's TLS Secret, is left alone.
            if let (Some(secret), Err(Stored::Unusable(why))) = (&existing, &stored) {
                let ours = secret
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(MANAGED_BY_LABEL))
                    .is_some_and(|v| v == MANAGER);
                if !ours {
                    return Err(SelfSignedError::Foreign {
                        secret: self.secret.clone(),
                        why: why.clone(),
                    });
                }
            }
            let now = SystemTime::now();
            let stored_plan = match &stored {
                Ok(m) => Some(plan(Ok(m), &label, &self.names, &self.policy, now)?),
                Err(_) => None,
            };
            if let (Ok(m), Some(Plan::Keep)) = (&stored, &stored_plan) {
                let action = match serving {
                    Some(s) if s != m => Action::Adopted,
                    _ => Action::Unchanged,
                };
                return Ok(Applied {
                    action,
                    reasons: Vec::new(),
                    material: m.clone(),
                });
            }
            // The Secret needs a change. When this replica serves something
            // else that needs none, that is restored: a deleted or damaged
            // Secret does not cost a new CA.
            let elsewhere = serving.filter(|s| Ok(*s) != stored.as_ref());
            let (material, reasons) = match (elsewhere, stored_plan) {
                (Some(s), stored_plan) => {
                    let why = match (&stored, &stored_plan) {
                        (Err(e), _) => e.to_string(),
                        (Ok(_), Some(Plan::Write { reasons, .. })) => {
                            format!("the Secret's own would need {}", reasons.join("; "))
                        }
                        (Ok(_), _) => "the Secret differs".into(),
                    };
                    let restored = format!("restored what is served: {why}");
                    match (
                        plan(Ok(s), &label, &self.names, &self.policy, now)?,
                        stored_plan,
                    ) {
                        (Plan::Keep, _) => (s.clone(), vec![restored]),
                        // Both need a change: renew the Secret's own.
                        (_, Some(Plan::Write { material, reasons })) => (material, reasons),
                        (Plan::Write { material, reasons }, _) => {
                            (material, std::iter::once(restored).chain(reasons).collect())
                        }
                    }
                }
                (None, Some(Plan::Write { material, reasons })) => (material, reasons),
                (None, _) => {
                    let why = stored
                        .as_ref()
                        .err()
                        .map_or_else(String::new, ToString::to_string);
                    fresh(&label, &self.names, &self.policy, unix(now), &why)?
                }
            };
            match self.write(&api, existing.as_ref(), &material).await {
                Ok(action) => {
                    tracing::info!(
                        secret = %self.secret,
                        %action,
                        reasons = %reasons.join("; "),
                        "self-signed certificate written"
                    );
                    return Ok(Applied {
                        action,
                        reasons,
                        material,
                    });
                }
                // Another writer got there first (or deleted the Secret
                // being replaced): read again. A 404 on create is a missing
                // namespace, which no retry fixes.
                Err(kube::Error::Api(s))
                    if s.code == 409 || (s.code == 404 && existing.is_some()) =>
                {
                    continue;
                }
                Err(source) => {
                    return Err(SelfSignedError::Write {
                        secret: self.secret.clone(),
                        source,
                    });
                }
            }
        }
        Err(SelfSignedError::Contended(self.secret.clone()))
    }

    async fn write(
        &self,
        api: &Api<Secret>,
        existing: Option<&Secret>,
        material: &Material,
    ) -> std::result::Result<Action, kube::Error> {
        let mut metadata = existing.map(|s| s.metadata.clone()).unwrap_or(ObjectMeta {
            name: Some(self.secret.name.clone()),
            namespace: Some(self.secret.namespace.clone()),
            ..ObjectMeta::default()
        });
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(MANAGED_BY_LABEL.into(), MANAGER.into());
        metadata.managed_fields = None;
        // Other keys someone added are kept.
        let mut data = existing.and_then(|s| s.data.clone()).unwrap_or_default();
        data.extend(material.data());
        let secret = Secret {
            metadata,
            // The type of a Secret cannot change: keep the existing one.
            type_: existing
                .and_then(|s| s.type_.clone())
                .or_else(|| Some("kubernetes.io/tls".into())),
            data: Some(data),
            ..Secret::default()
        };
        match existing {
            None => {
                api.create(&PostParams::default(), &secret).await?;
                Ok(Action::Created)
            }
            Some(_) => {
                api.replace(&self.secret.name, &PostParams::default(), &secret)
                    .await?;
                Ok(Action::Updated)
            }
        }
    }
}
