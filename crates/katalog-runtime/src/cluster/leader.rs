//! Lease-based leader election, so that of several replicas only one
//! housekeeper reconciles the cluster registration.
//!
//! A small module rather than a crate: kube-runtime has no leader election,
//! and the `coordination.k8s.io/v1` Lease protocol is about a hundred lines.
//!
//! The protocol: the lease `<registration name>-leader` is acquired when it
//! is absent, expired (`renewTime + leaseDurationSeconds < now`), released
//! (empty `holderIdentity`) or already ours, by a create or a replace with
//! the resourceVersion that was read (optimistic concurrency: a 409 means
//! someone else won). The holder renews every `lease_duration / 3`; on stop
//! it releases the lease by emptying `holderIdentity`, so a hand-over is
//! immediate instead of waiting for the expiry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

/// Leader election settings of the housekeeper.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// Namespace of the Lease (default `default`).
    pub namespace: String,
    /// How long a lease is valid without renewal (default 15 s); it is
    /// renewed every third of it.
    pub lease_duration: Duration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            namespace: "default".into(),
            lease_duration: Duration::from_secs(15),
        }
    }
}

impl LeaderElection {
    /// How often the lease is renewed (or, by a non-leader, tried).
    pub fn renew_period(&self) -> Duration {
        (self.lease_duration / 3).max(Duration::from_millis(100))
    }
}

/// One candidate for the lease `name` in `namespace`.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    /// `NAMESPACE/NAME`, for logs and metrics.
    lease: String,
    identity: String,
    duration: Duration,
    /// When the lease was last acquired or renewed by us.
    renewed: Option<Instant>,
}

impl Elector {
    pub fn new(client: Client, config: &LeaderElection, name: &str) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            name: name.to_string(),
            lease: format!("{}/{name}", config.namespace),
            identity: identity(),
            duration: config.lease_duration,
            renewed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease, as `NAMESPACE/NAME`.
    pub fn lease(&self) -> &str {
        &self.lease
    }

    /// Whether we hold the lease: acquired or renewed less than a lease
    /// duration ago (so a leader that cannot renew steps down by itself).
    pub fn is_leader(&self) -> bool {
        self.renewed.is_some_and(|at| at.elapsed() < self.duration)
    }

    /// Acquires the lease, or renews it if it is ours; whether we lead.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let attempt = Instant::now();
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let result = match self.api.get_opt(&self.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                let holder = spec.holder_identity.clone().unwrap_or_default();
                if holder == self.identity {
                    spec.renew_time = Some(now);
                    spec.lease_duration_seconds = Some(seconds);
                } else if holder.is_empty() || expired(spec) {
                    spec.holder_identity = Some(self.identity.clone());
                    spec.lease_duration_seconds = Some(seconds);
                    spec.acquire_time = Some(now.clone());
                    spec.renew_time = Some(now);
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                } else {
                    self.renewed = None;
                    return Ok(false);
                }
                // The read resourceVersion is sent: a 409 if it changed.
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(_) => {
                self.renewed = Some(attempt);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                self.renewed = None;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up (empties `holderIdentity`) if it is ours.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        self.renewed = None;
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = Some(String::new());
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

/// `renewTime + leaseDurationSeconds < now` (a lease never renewed is
/// expired).
fn expired(spec: &LeaseSpec) -> bool {
    let Some(renewed) = &spec.renew_time else {
        return true;
    };
    let duration_ms = i64::from(spec.lease_duration_seconds.unwrap_or(0)) * 1000;
    renewed.0.as_millisecond() + duration_ms < Timestamp::now().as_millisecond()
}

/// hostname + pid + a suffix from the clock and a counter (unique even for
/// several candidates in one process).
fn identity() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "katalog".into());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{host}-{}-{nanos:08x}{n:x}", std::process::id())
}
