//! The housekeeper: keeps the cluster registered with the Katalog the server
//! currently serves. It calls [`cluster::register`] (idempotent: nothing is
//! written when nothing differs) at start, when the served Katalog changes
//! (its hash is polled), when a watch sees the engine's webhook
//! configurations or a converted CRD change (deletions included), and every
//! `resync` to catch drift a watch missed. Bursts of triggers coalesce into
//! one reconcile.
//!
//! It runs on its own thread with its own current-thread tokio runtime, apart
//! from the server's actix runtime.
//!
//! With [`Housekeeper::leader_election`] set, only the holder of the Lease
//! `<registration name>-leader` reconciles (see [`crate::cluster::leader`]); the
//! others keep trying to acquire it every renew period.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use crate::cluster::leader::{Elector, LeaderElection};
use crate::cluster::registration::{Registration, SharedCaBundle, crd_conversion_patches};
use crate::cluster::{self, ClusterError, RegisterReport};
use crate::metrics::LeaseLabels;
use crate::serving::state::State;

/// How long the unregistration of `cleanupOnShutdown` may take at stop.
const CLEANUP_BOUND: Duration = Duration::from_secs(3);
/// How long the release of the leader lease may take at stop.
const RELEASE_BOUND: Duration = Duration::from_secs(1);

/// Why a reconcile ran (the first trigger of a coalesced burst).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    Start,
    /// The served Katalog's hash changed.
    KatalogChanged,
    /// A watch event on one of the objects the engine owns.
    Watch {
        kind: &'static str,
        name: String,
    },
    /// A watch (re)started: something may have been missed.
    WatchRestarted {
        kind: &'static str,
    },
    Resync,
    /// The `caBundle` changed (a self-signed CA rotated).
    CaBundleChanged,
    /// This housekeeper became the leader.
    Elected,
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Start => f.write_str("start"),
            Trigger::KatalogChanged => f.write_str("katalog changed"),
            Trigger::Watch { kind, name } => write!(f, "watch {kind} {name}"),
            Trigger::WatchRestarted { kind } => write!(f, "watch {kind} restarted"),
            Trigger::Resync => f.write_str("resync"),
            Trigger::CaBundleChanged => f.write_str("caBundle changed"),
            Trigger::Elected => f.write_str("elected leader"),
        }
    }
}

/// One reconcile.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub trigger: Trigger,
    /// Hash of the Katalog it registered.
    pub hash: String,
    pub at: SystemTime,
    pub took: Duration,
    /// The error is shared: an outcome is kept as the last one and the
    /// last change, and read from the status.
    pub result: Result<RegisterReport, Arc<ClusterError>>,
}

impl Outcome {
    pub fn changed(&self) -> bool {
        matches!(&self.result, Ok(r) if r.changed())
    }
}

/// What the housekeeper has done so far.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// Reconciles run (successful or not).
    pub reconciles: u64,
    /// Reconciles that created, updated or deleted something.
    pub changed: u64,
    /// Reconciles that failed.
    pub errors: u64,
    pub last: Option<Outcome>,
    /// The last reconcile that changed something.
    pub last_change: Option<Outcome>,
    /// Whether it may reconcile: it holds the lease, or leader election is
    /// off (then it is true once it runs).
    pub leader: bool,
    /// Its leader election identity, when leader election is on.
    pub identity: Option<String>,
}

impl Status {
    /// See [`Status::leader`].
    pub fn is_leader(&self) -> bool {
        self.leader
    }
}

/// Tuning of the housekeeper; [`Housekeeper::default`] is what [`spawn`] uses.
#[derive(Clone, Debug)]
pub struct Housekeeper {
    /// Full reconcile period (default 30 s).
    pub resync: Duration,
    /// Wait after the first trigger of a burst before reconciling (100 ms).
    pub debounce: Duration,
    /// How often the served Katalog's hash is checked (200 ms).
    pub poll: Duration,
    /// First and longest wait before a failed watch is restarted.
    pub backoff: (Duration, Duration),
    /// Lease-based leader election (default off: it always reconciles).
    pub leader_election: Option<LeaderElection>,
    /// Where the `caBundle` comes from when it can change while running
    /// (`--self-signed-secret`); default: the registration's, fixed.
    pub ca_bundle: Option<SharedCaBundle>,
}

impl Default for Housekeeper {
    fn default() -> Self {
        Housekeeper {
            resync: Duration::from_secs(30),
            debounce: Duration::from_millis(100),
            poll: Duration::from_millis(200),
            backoff: (Duration::from_millis(200), Duration::from_secs(10)),
            leader_election: None,
            ca_bundle: None,
        }
    }
}

/// A running housekeeper; [`HousekeeperHandle::stop`] ends it.
pub struct HousekeeperHandle {
    status: Arc<Mutex<Status>>,
    stop: watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HousekeeperHandle {
    /// A copy of what it has done so far.
    pub fn status(&self) -> Status {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops it; waits at most 5 s for the thread to end.
    pub fn stop(mut self) {
        self.shutdown(Duration::from_secs(5));
    }

    fn shutdown(&mut self, bound: Duration) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            match self.done.recv_timeout(bound) {
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = thread.join();
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    tracing::warn!("the housekeeper did not stop in time; leaving it");
                }
            }
        }
    }
}

impl Drop for HousekeeperHandle {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(5));
    }
}

enum Source {
    Client(Client),
    Kubeconfig(Option<PathBuf>),
}

/// Spawns a housekeeper with the default tuning and the given resync.
///
/// The client's request worker runs on the runtime the client was created
/// on, which must keep running (a multi-thread runtime, or a current-thread
/// runtime that keeps being driven); otherwise use [`spawn_with_kubeconfig`],
/// which creates the client on the housekeeper's own runtime.
pub fn spawn(
    client: Client,
    state: Arc<State>,
    reg: Registration,
    resync: Duration,
) -> HousekeeperHandle {
    Housekeeper {
        resync,
        ..Housekeeper::default()
    }
    .spawn(client, state, reg)
}

/// Spawns a housekeeper whose client is made from the kubeconfig at `path`
/// (or inferred as kubectl does) on the housekeeper's own runtime.
pub fn spawn_with_kubeconfig(
    kubeconfig: Option<PathBuf>,
    state: Arc<State>,
    reg: Registration,
    resync: Duration,
) -> HousekeeperHandle {
    Housekeeper {
        resync,
        ..Housekeeper::default()
    }
    .spawn_source(Source::Kubeconfig(kubeconfig), state, reg)
}

impl Housekeeper {
    /// See [`spawn`].
    pub fn spawn(self, client: Client, state: Arc<State>, reg: Registration) -> HousekeeperHandle {
        self.spawn_source(Source::Client(client), state, reg)
    }

    /// See [`spawn_with_kubeconfig`].
    pub fn spawn_with_kubeconfig(
        self,
        kubeconfig: Option<PathBuf>,
        state: Arc<State>,
        reg: Registration,
    ) -> HousekeeperHandle {
        self.spawn_source(Source::Kubeconfig(kubeconfig), state, reg)
    }

    fn spawn_source(
        self,
        source: Source,
        state: Arc<State>,
        reg: Registration,
    ) -> HousekeeperHandle {
        let status = Arc::new(Mutex::new(Status::default()));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let shared = status.clone();
        let thread = std::thread::Builder::new()
            .name("katalog-housekeeper".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(self.run(source, state, reg, shared, stop_rx)),
                    Err(e) => tracing::warn!(error = %e, "the housekeeper runtime did not start"),
                }
                let _ = done_tx.send(());
            })
            .ok();
        if thread.is_none() {
            tracing::warn!("the housekeeper thread did not start");
        }
        HousekeeperHandle {
            status,
            stop: stop_tx,
            done: done_rx,
            thread,
        }
    }

    async fn run(
        self,
        source: Source,
        state: Arc<State>,
        mut reg: Registration,
        status: Arc<Mutex<Status>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let client = match source {
            Source::Client(c) => c,
            Source::Kubeconfig(path) => loop {
                match cluster::client(path.as_deref()).await {
                    Ok(c) => break c,
                    Err(e) => {
                        tracing::warn!(error = %e, "housekeeper: no Kubernetes client; retrying");
                        tokio::select! {
                            _ = stop.changed() => return,
                            _ = tokio::time::sleep(self.backoff.1) => {}
                        }
                    }
                }
            },
        };

        let mut elector = self
            .leader_election
            .as_ref()
            .map(|config| Elector::new(client.clone(), config, &format!("{}-leader", reg.name)));
        let renew = self
            .leader_election
            .as_ref()
            .map_or(Duration::from_secs(3600), LeaderElection::renew_period);
        if let Some(e) = &mut elector {
            if let Ok(mut s) = status.lock() {
                s.identity = Some(e.identity().to_string());
            }
            tokio::select! {
                _ = stop.changed() => return,
                r = e.try_acquire_or_renew() => if let Err(err) = r {
                    tracing::warn!(error = %err, "housekeeper: leader election failed; retrying");
                },
            }
        }
        set_leader(&status, &state, elector.as_ref());
        let mut lease_tick = tokio::time::interval_at(tokio::time::Instant::now() + renew, renew);
        lease_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        let (tx, mut rx) = mpsc::unbounded_channel::<Trigger>();
        // Each object is watched by name (a `metadata.name` field selector,
        // which the apiserver authorizes as a request for that name): the
        // ClusterRole grants nothing cluster-wide.
        let by_name = |name: String| Selector {
            labels: None,
            fields: Some(format!("metadata.name={name}")),
        };
        let mut watches = vec![
            tokio::spawn(watch_loop(
                Api::<ValidatingWebhookConfiguration>::all(client.clone()),
                "ValidatingWebhookConfiguration",
                by_name(reg.validating_name()),
                |_: &str| true,
                tx.clone(),
                self.backoff,
            )),
            tokio::spawn(watch_loop(
                Api::<MutatingWebhookConfiguration>::all(client.clone()),
                "MutatingWebhookConfiguration",
                by_name(reg.mutating_name()),
                |_: &str| true,
                tx.clone(),
                self.backoff,
            )),
        ];
        // One watch per CRD the served Katalog converts, started and
        // stopped as the Katalog changes.
        let mut crd_watches: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();

        let mut pending = Some(Trigger::Start);
        let mut served: Option<String> = None;
        let mut poll = tokio::time::interval(self.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let resync = self.resync.max(Duration::from_millis(100));
        let mut resync_tick =
            tokio::time::interval_at(tokio::time::Instant::now() + resync, resync);
        resync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        'outer: loop {
            if let Some(trigger) = pending.take() {
                let leading = elector.as_ref().is_none_or(Elector::is_leader);
                if !leading {
                    tracing::debug!(%trigger, "housekeeper: not the leader; not reconciling");
                } else if let Some(loaded) = state.current() {
                    served = Some(loaded.hash.clone());
                    if let Some(bundle) = &self.ca_bundle {
                        reg.ca_bundle = bundle.load().as_ref().clone();
                    }
                    let crds: BTreeSet<String> = crd_conversion_patches(&loaded.ir, &reg)
                        .into_iter()
                        .map(|(name, _)| name)
                        .collect();
                    crd_watches.retain(|name, w| {
                        let keep = crds.contains(name);
                        if !keep {
                            w.abort();
                        }
                        keep
                    });
                    for name in crds {
                        if let std::collections::btree_map::Entry::Vacant(slot) =
                            crd_watches.entry(name)
                        {
                            let w = tokio::spawn(watch_loop(
                                Api::<CustomResourceDefinition>::all(client.clone()),
                                "CustomResourceDefinition",
                                by_name(slot.key().clone()),
                                |_: &str| true,
                                tx.clone(),
                                self.backoff,
                            ));
                            slot.insert(w);
                        }
                    }
                    let started = Instant::now();
                    let result = tokio::select! {
                        _ = stop.changed() => break 'outer,
                        r = cluster::register(client.clone(), &loaded.ir, &reg) => r,
                    };
                    let outcome = Outcome {
                        trigger,
                        hash: loaded.hash.clone(),
                        at: SystemTime::now(),
                        took: started.elapsed(),
                        result: result.map_err(Arc::new),
                    };
                    record(&status, outcome);
                }
                resync_tick.reset();
            }
            tokio::select! {
                _ = stop.changed() => break,
                t = rx.recv() => {
                    let Some(t) = t else { break };
                    tokio::select! {
                        _ = stop.changed() => break,
                        _ = tokio::time::sleep(self.debounce) => {}
                    }
                    while rx.try_recv().is_ok() {}
                    pending = Some(t);
                }
                _ = poll.tick() => {
                    let now = state.current().map(|l| l.hash.clone());
                    if now.is_some() && now != served {
                        pending = Some(Trigger::KatalogChanged);
                    } else if served.is_some()
                        && elector.as_ref().is_none_or(Elector::is_leader)
                        && self.ca_bundle.as_ref().is_some_and(|b| **b.load() != reg.ca_bundle)
                    {
                        pending = Some(Trigger::CaBundleChanged);
                    }
                }
                _ = resync_tick.tick() => pending = Some(Trigger::Resync),
                _ = lease_tick.tick() => {
                    if let Some(e) = &mut elector {
                        let was = e.is_leader();
                        tokio::select! {
                            _ = stop.changed() => break,
                            r = e.try_acquire_or_renew() => if let Err(err) = r {
                                tracing::warn!(error = %err, "housekeeper: leader election failed; retrying");
                            },
                        }
                        let now = e.is_leader();
                        if now && !was {
                            tracing::info!(identity = e.identity(), "housekeeper: became the leader");
                            pending = Some(Trigger::Elected);
                        } else if was && !now {
                            tracing::warn!(identity = e.identity(), "housekeeper: lost the leadership");
                        }
                        set_leader(&status, &state, Some(e));
                    }
                }
            }
        }
        watches.extend(crd_watches.into_values());
        for w in watches {
            w.abort();
        }
        // A graceful stop of a Katalog with `security.cleanupOnShutdown`:
        // remove the webhook configurations, bounded so the stop (which
        // waits 5 s) is not held up.
        // Only the leader cleans up: the others do not own the registration.
        let leading = elector.as_ref().is_none_or(Elector::is_leader);
        let cleanup = leading
            && state
                .current()
                .is_some_and(|l| l.ir.admission.security.cleanup_on_shutdown);
        if cleanup && *stop.borrow() {
            match tokio::time::timeout(CLEANUP_BOUND, cluster::unregister(client, &reg)).await {
                Ok(Ok(report)) => tracing::info!(
                    deleted = report.changes.len(),
                    "cleanupOnShutdown: removed the webhook configurations"
                ),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cleanupOnShutdown: unregistration failed")
                }
                Err(_) => tracing::warn!("cleanupOnShutdown: unregistration timed out"),
            }
        }
        // Hand the lease over at once instead of letting it expire.
        if let Some(mut e) = elector {
            let was = e.is_leader();
            if was {
                match tokio::time::timeout(RELEASE_BOUND, e.release()).await {
                    Ok(Ok(())) => tracing::info!("housekeeper: released the leadership"),
                    Ok(Err(err)) => {
                        tracing::warn!(error = %err, "housekeeper: lease release failed")
                    }
                    Err(_) => tracing::warn!("housekeeper: lease release timed out"),
                }
            }
            set_leader(&status, &state, Some(&e));
        }
    }
}

fn set_leader(status: &Mutex<Status>, state: &State, elector: Option<&Elector>) {
    if let Ok(mut s) = status.lock() {
        s.leader = elector.is_none_or(Elector::is_leader);
    }
    if let Some(e) = elector {
        let lease = LeaseLabels {
            lease: e.lease().to_string(),
        };
        state
            .metrics
            .leader
            .get_or_create(&lease)
            .set(i64::from(e.is_leader()));
    }
}

fn record(status: &Mutex<Status>, outcome: Outcome) {
    match &outcome.result {
        Ok(report) if report.changed() => {
            let what: Vec<String> = report
                .changes
                .iter()
                .filter(|c| c.action != cluster::Action::Unchanged)
                .map(ToString::to_string)
                .collect();
            tracing::info!(
                trigger = %outcome.trigger,
                hash = %outcome.hash,
                took_ms = outcome.took.as_millis() as u64,
                changes = %what.join("; "),
                "housekeeper reconciled the registration"
            );
        }
        Ok(_) => tracing::debug!(trigger = %outcome.trigger, "housekeeper: registration unchanged"),
        Err(e) => tracing::warn!(
            trigger = %outcome.trigger,
            error = %e,
            "housekeeper: registration failed; retrying on the next trigger"
        ),
    }
    if let Ok(mut s) = status.lock() {
        s.reconciles += 1;
        match &outcome.result {
            Ok(r) if r.changed() => {
                s.changed += 1;
                s.last_change = Some(outcome.clone());
            }
            Ok(_) => {}
            Err(_) => s.errors += 1,
        }
        s.last = Some(outcome);
    }
}

/// Which objects a watch sees.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selector {
    pub labels: Option<String>,
    pub fields: Option<String>,
}

/// Watches `api` (optionally by label and field selector) forever, sending a trigger
/// for each event on an object `relevant` accepts, and one each time the
/// watch has to be restarted after an error (events may have been missed).
pub(crate) async fn watch_loop<K>(
    api: Api<K>,
    kind: &'static str,
    selector: Selector,
    relevant: impl Fn(&str) -> bool,
    tx: mpsc::UnboundedSender<Trigger>,
    (first, longest): (Duration, Duration),
) where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + 'static,
{
    let mut backoff = first;
    let mut version: Option<String> = None;
    loop {
        if tx.is_closed() {
            return;
        }
        let rv = match &version {
            Some(v) => v.clone(),
            None => {
                let mut lp = ListParams::default().limit(1);
                if let Some(l) = &selector.labels {
                    lp = lp.labels(l);
                }
                if let Some(f) = &selector.fields {
                    lp = lp.fields(f);
                }
                match api.list_metadata(&lp).await {
                    Ok(list) => list.metadata.resource_version.unwrap_or_default(),
                    Err(e) => {
                        tracing::warn!(kind, error = %e, "list for a watch failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(longest);
                        continue;
                    }
                }
            }
        };
        let mut wp = WatchParams::default().timeout(290);
        if let Some(l) = &selector.labels {
            wp = wp.labels(l);
        }
        if let Some(f) = &selector.fields {
            wp = wp.fields(f);
        }
        let stream = match api.watch(&wp, &rv).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(kind, error = %e, "watch failed; retrying");
                version = None;
                let _ = tx.send(Trigger::WatchRestarted { kind });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(longest);
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        let mut failed = false;
        while let Some(event) = stream.next().await {
            let object = match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => o,
                Ok(WatchEvent::Bookmark(b)) => {
                    version = Some(b.metadata.resource_version);
                    continue;
                }
                Ok(WatchEvent::Error(status)) => {
                    tracing::debug!(kind, code = status.code, message = %status.message, "watch error");
                    failed = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!(kind, error = %e, "watch stream failed");
                    failed = true;
                    break;
                }
            };
            backoff = first;
            let meta = object.meta();
            if let Some(v) = &meta.resource_version {
                version = Some(v.clone());
            }
            let name = meta.name.clone().unwrap_or_default();
            if relevant(&name) && tx.send(Trigger::Watch { kind, name }).is_err() {
                return;
            }
        }
        if failed {
            // Start again from a fresh list; reconcile in case an event was
            // missed meanwhile.
            version = None;
            let _ = tx.send(Trigger::WatchRestarted { kind });
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(longest);
        }
    }
}
