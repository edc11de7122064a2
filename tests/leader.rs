//! Leader election of `katalog_runtime::cluster::housekeeper` against a real
//! kube-apiserver and etcd (katalog-testenv): of two housekeepers with a
//! 3 s lease exactly one leads and only it reconciles; when it stops, it
//! releases the lease and the other takes over (within a renew period) and
//! restores a deleted webhook configuration.
//!
//! `cargo test -p katalog-tests --test leader -- --nocapture` prints the
//! hand-over time.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use katalog_runtime::cluster;
use katalog_runtime::cluster::housekeeper::{Housekeeper, HousekeeperHandle};
use katalog_runtime::cluster::leader::LeaderElection;
use katalog_tests::*;
use kube::Api;

const NAME: &str = "katalog";
const VALIDATING: &str = "katalog-validating";
const CRD: &str = "crontabs.stable.example.com";
const LEASE: Duration = Duration::from_secs(3);
const BOUND: Duration = Duration::from_secs(15);

const ADMISSION: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata:
  name: crontab-admission
spec:
  admission:
    validations:
      - name: crontab-registry
        resources: [stable.example.com/v1/crontabs]
        path: spec.image
        check: { prefix: registry.example.com/ }
        message: crontab images come from registry.example.com
"#;

/// Polls `done` every 20 ms, at most `BOUND`; how long it took.
#[track_caller]
fn within(what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    for _ in 0..2000 {
        if done() {
            return started.elapsed();
        }
        if started.elapsed() >= BOUND {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what}: not after {}", secs(started.elapsed()));
}

fn leaders(hks: &[&HousekeeperHandle]) -> usize {
    hks.iter().filter(|h| h.status().is_leader()).count()
}

#[test]
fn only_the_leader_reconciles_and_hands_over() {
    let t = "leader";
    let env = start_env(t);
    apply_crds(&env, &repo_path("katalogs/crontab.crd.yaml"), &[CRD]);

    let (_dir, server) = Katalog::crontab_with("leader-katalog", ADMISSION);
    server.state.current().expect("the Katalog loaded");
    let url = format!("https://{}", server.addr);
    let reg = registration(NAME, &url);

    let kubeconfig = env.kubeconfig();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let client = rt
        .block_on(cluster::client(Some(&kubeconfig)))
        .unwrap_or_else(|e| panic!("{e}"));
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let get = || {
        rt.block_on(validating.get_opt(VALIDATING))
            .expect("GET the validating configuration")
    };

    let election = LeaderElection {
        lease_duration: LEASE,
        ..LeaderElection::default()
    };
    let renew = election.renew_period();
    let options = Housekeeper {
        leader_election: Some(election),
        ..Housekeeper::default()
    };
    let a = options.clone().spawn_with_kubeconfig(
        Some(kubeconfig.clone()),
        server.state.clone(),
        reg.clone(),
    );
    let b = options.spawn_with_kubeconfig(Some(kubeconfig.clone()), server.state.clone(), reg);

    // Exactly one leads, and only it reconciles.
    let took = within("a leader", || leaders(&[&a, &b]) >= 1);
    eprintln!("[{t}] a leader elected in {}", secs(took));
    within("the registration", || get().is_some());
    // Several renew periods: still exactly one leader, the other idle.
    let watch_until = Instant::now() + renew * 3;
    while Instant::now() < watch_until {
        assert_eq!(
            leaders(&[&a, &b]),
            1,
            "a: {:?}\nb: {:?}",
            a.status(),
            b.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (leader, follower) = if a.status().is_leader() {
        (a, b)
    } else {
        (b, a)
    };
    let ls = leader.status();
    let fs = follower.status();
    eprintln!(
        "[{t}] leader {:?}: {} reconcile(s); follower {:?}: {} reconcile(s)",
        ls.identity, ls.reconciles, fs.identity, fs.reconciles
    );
    assert!(ls.reconciles >= 1, "{ls:?}");
    assert_eq!(ls.errors, 0, "{ls:?}");
    assert_eq!(fs.reconciles, 0, "{fs:?}");
    assert_ne!(ls.identity, fs.identity);

    // A deletion while the leader runs is restored by it, not the follower.
    ok(env.kubectl(["delete", "validatingwebhookconfiguration", VALIDATING]));
    within("the restore by the leader", || get().is_some());
    assert_eq!(follower.status().reconciles, 0, "{:?}", follower.status());

    // The leader stops and releases: the follower takes over.
    leader.stop();
    let handover = within("the hand-over", || follower.status().is_leader());
    eprintln!(
        "[{t}] hand-over in {} (renew period {}, lease {})",
        secs(handover),
        secs(renew),
        secs(LEASE)
    );
    assert!(
        handover <= renew + Duration::from_millis(500),
        "hand-over in {}",
        secs(handover)
    );

    // The new leader restores a deleted configuration.
    let uid = get().and_then(|v| v.metadata.uid);
    ok(env.kubectl(["delete", "validatingwebhookconfiguration", VALIDATING]));
    let restored = within("the restore by the new leader", || {
        get().is_some_and(|v| v.metadata.uid != uid)
    });
    eprintln!(
        "[{t}] the new leader restored the deletion in {}",
        secs(restored)
    );
    let s = follower.status();
    assert!(s.reconciles >= 1, "{s:?}");
    assert_eq!(s.errors, 0, "{s:?}");

    follower.stop();
    drop(server);
}
