//! Storage migration of a CRD after a storage-version change: every object
//! is rewritten at the storage version (a no-op update of the object as
//! read, so the apiserver re-encodes it), then `status.storedVersions` is
//! pruned to the storage version alone. The prune is refused when any object
//! failed to be rewritten: etcd may still hold it at an older version.

use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;

/// What to migrate and how fast.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// The CRD's name (`<plural>.<group>`).
    pub crd: String,
    /// Objects per list page.
    pub page_size: u32,
    /// Objects rewritten per second at most (0 or less: unlimited).
    pub rate: f64,
    /// Continue a previous run from this list continue token.
    pub resume_from: Option<String>,
    /// Re-reads and retries of one object after a 409 Conflict.
    pub conflict_retries: u32,
}

impl MigrateOptions {
    pub fn new(crd: impl Into<String>) -> MigrateOptions {
        MigrateOptions {
            crd: crd.into(),
            page_size: 100,
            rate: 50.0,
            resume_from: None,
            conflict_retries: 5,
        }
    }
}

/// Reported after each page.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Objects handled so far (rewritten or gone).
    pub migrated: u64,
    /// Objects handled so far plus those the apiserver says remain, when it
    /// says.
    pub total: Option<u64>,
    /// Where to resume; `None` after the last page.
    pub continue_token: Option<String>,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self
            .total
            .map(|t| t.to_string())
            .unwrap_or_else(|| "?".into());
        write!(
            f,
            "migrated {}/{total}, continue token: {}",
            self.migrated,
            self.continue_token
                .as_deref()
                .unwrap_or("(none: last page)")
        )
    }
}

/// One object that could not be rewritten.
#[derive(Clone, Debug)]
pub struct Failure {
    /// `namespace/name`, or `name` when cluster-scoped.
    pub object: String,
    pub error: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.error)
    }
}

/// What a migration did.
#[derive(Clone, Debug, Default)]
pub struct MigrateReport {
    pub crd: String,
    pub storage: String,
    /// Objects rewritten at the storage version.
    pub rewritten: u64,
    /// Objects deleted meanwhile (NotFound).
    pub skipped: u64,
    /// Conflicts retried.
    pub conflicts: u64,
    pub failures: Vec<Failure>,
    /// `status.storedVersions` before the prune.
    pub stored_before: Vec<String>,
    /// Whether `status.storedVersions` was patched.
    pub pruned: bool,
    pub took: Duration,
}

impl fmt::Display for MigrateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} rewritten at {}, {} gone, {} conflicts retried, {} failed in {:.2}s; storedVersions [{}] {}",
            self.crd,
            self.rewritten,
            self.storage,
            self.skipped,
            self.conflicts,
            self.failures.len(),
            self.took.as_secs_f64(),
            self.stored_before.join(", "),
            if self.pruned {
                format!("pruned to [{}]", self.storage)
            } else {
                "left as they were (nothing to prune)".into()
            }
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("failed to find CustomResourceDefinition {0}: it does not exist")]
    CrdMissing(String),
    #[error("failed to get CustomResourceDefinition {name}: {source}")]
    GetCrd {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("CustomResourceDefinition {0} has no storage version")]
    NoStorage(String),
    #[error(
        "failed to list {crd} at {version}: {source}{}",
        token.as_deref().map(|t| format!(" (continue token: {t})")).unwrap_or_default()
    )]
    List {
        crd: String,
        version: String,
        token: Option<String>,
        #[source]
        source: kube::Error,
    },
    #[error(
        "refusing to prune status.storedVersions of CustomResourceDefinition {}: {} object(s) failed to be rewritten at {}: {}",
        report.crd,
        report.failures.len(),
        report.storage,
        report.failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Incomplete { report: Box<MigrateReport> },
    #[error("failed to patch status.storedVersions of CustomResourceDefinition {name}: {source}")]
    Prune {
        name: String,
        #[source]
        source: kube::Error,
    },
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Rewrites every object of the CRD at its storage version, then prunes
/// `status.storedVersions` to it. `progress` is called after each page.
pub async fn migrate_storage(
    client: Client,
    opts: &MigrateOptions,
    mut progress: impl FnMut(&Progress),
) -> Result<MigrateReport, MigrateError> {
    let started = Instant::now();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = match crds.get_opt(&opts.crd).await {
        Ok(Some(c)) => c,
        Ok(None) => return Err(MigrateError::CrdMissing(opts.crd.clone())),
        Err(source) => {
            return Err(MigrateError::GetCrd {
                name: opts.crd.clone(),
                source,
            });
        }
    };
    let storage = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .ok_or_else(|| MigrateError::NoStorage(opts.crd.clone()))?;
    let gvk = GroupVersionKind::gvk(&crd.spec.group, &storage, &crd.spec.names.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);

    let mut report = MigrateReport {
        crd: opts.crd.clone(),
        storage: storage.clone(),
        ..MigrateReport::default()
    };
    let period = (opts.rate.is_finite() && opts.rate > 0.0)
        .then(|| Duration::from_secs_f64(1.0 / opts.rate));
    let mut next = tokio::time::Instant::now();
    let mut token = opts.resume_from.clone().filter(|t| !t.is_empty());
    let mut handled: u64 = 0;
    loop {
        let mut lp = ListParams::default().limit(opts.page_size.max(1));
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = all.list(&lp).await.map_err(|source| MigrateError::List {
            crd: opts.crd.clone(),
            version: storage.clone(),
            token: token.clone(),
            source,
        })?;
        let remaining = page.metadata.remaining_item_count;
        let next_token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        for object in page.items {
            if let Some(p) = period {
                tokio::time::sleep_until(next).await;
                next = next.max(tokio::time::Instant::now()) + p;
            }
            rewrite(&client, &ar, object, opts.conflict_retries, &mut report).await;
            handled += 1;
        }
        progress(&Progress {
            migrated: handled,
            total: match (&next_token, remaining) {
                (None, _) => Some(handled),
                (Some(_), Some(r)) => Some(handled + r.max(0) as u64),
                (Some(_), None) => None,
            },
            continue_token: next_token.clone(),
        });
        match next_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }

    report.stored_before = crd
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    if !report.failures.is_empty() {
        report.took = started.elapsed();
        return Err(MigrateError::Incomplete {
            report: Box::new(report),
        });
    }
    if report.stored_before != [storage.clone()] {
        let patch = json!({"status": {"storedVersions": [storage]}});
        crds.patch_status(&opts.crd, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| MigrateError::Prune {
                name: opts.crd.clone(),
                source,
            })?;
        report.pruned = true;
    }
    report.took = started.elapsed();
    Ok(report)
}

/// A no-op update of one object; re-read and retried on 409 Conflict.
async fn rewrite(
    client: &Client,
    ar: &ApiResource,
    mut object: DynamicObject,
    retries: u32,
    report: &mut MigrateReport,
) {
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = match &object.metadata.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    let id = match &object.metadata.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.clone(),
    };
    let mut attempt = 0;
    loop {
        match api.replace(&name, &PostParams::default(), &object).await {
            Ok(_) => {
                report.rewritten += 1;
                return;
            }
            Err(e) if code(&e) == Some(404) => {
                report.skipped += 1;
                return;
            }
            Err(e) if code(&e) == Some(409) && attempt < retries => {
                attempt += 1;
                report.conflicts += 1;
                match api.get_opt(&name).await {
                    Ok(Some(o)) => object = o,
                    Ok(None) => {
                        report.skipped += 1;
                        return;
                    }
                    Err(e) => {
                        report.failures.push(Failure {
                            object: id,
                            error: format!("re-reading after a conflict: {e}"),
                        });
                        return;
                    }
                }
            }
            Err(e) => {
                report.failures.push(Failure {
                    object: id,
                    error: e.to_string(),
                });
                return;
            }
        }
    }
}
