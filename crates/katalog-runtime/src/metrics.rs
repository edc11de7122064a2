//! Prometheus metrics and the per-resource stats behind `/katalog`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::Serialize;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConversionLabels {
    pub group: String,
    pub kind: String,
    pub from: String,
    pub to: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConversionKey {
    pub group: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    pub endpoint: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionKey {
    pub endpoint: String,
    pub group: String,
    pub version: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// `NAMESPACE/NAME` of the leader-election Lease.
    pub lease: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HashLabels {
    pub hash: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlaceLabels {
    /// `inline`, `pool` or `inline_stopped`.
    pub place: String,
}

/// `katalog_evaluations_total{place}`: where reviews were evaluated. The
/// three series exist from the start and are counted without a look-up.
pub struct Evaluations {
    /// Answered from an evaluation on the connection (actix worker) thread.
    pub inline: Counter,
    /// Evaluated on the blocking pool (a stopped inline attempt's review too).
    pub pool: Counter,
    /// Inline attempts stopped by the inline limit, then evaluated on the pool.
    pub inline_stopped: Counter,
}

impl Evaluations {
    fn new(family: &Family<PlaceLabels, Counter>) -> Self {
        let place = |place: &str| {
            family
                .get_or_create(&PlaceLabels {
                    place: place.into(),
                })
                .clone()
        };
        Evaluations {
            inline: place("inline"),
            pool: place("pool"),
            inline_stopped: place("inline_stopped"),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// `conversion` or `admission`.
    pub review: String,
}

/// `katalog_undeclared_requests_total{review}`: reviews of a resource the
/// Katalog does not declare (counted under `other` in the other metrics).
/// Both series exist from the start.
pub struct Undeclared {
    pub convert: Counter,
    pub admission: Counter,
}

impl Undeclared {
    fn new(family: &Family<ReviewLabels, Counter>) -> Self {
        let review = |review: &str| {
            family
                .get_or_create(&ReviewLabels {
                    review: review.into(),
                })
                .clone()
        };
        Undeclared {
            convert: review("conversion"),
            admission: review("admission"),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

fn latency_histogram() -> Histogram {
    // 100 µs to ~3.3 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

fn objects_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

/// Every metric the server exports.
pub struct Metrics {
    pub registry: Registry,
    pub conversion_requests: Family<ConversionLabels, Counter>,
    pub conversion_duration: Family<ConversionKey, Histogram, fn() -> Histogram>,
    pub conversion_objects: Family<ConversionKey, Histogram, fn() -> Histogram>,
    pub admission_requests: Family<AdmissionLabels, Counter>,
    pub admission_duration: Family<AdmissionKey, Histogram, fn() -> Histogram>,
    pub http_errors: Family<ReasonLabels, Counter>,
    pub reloads: Counter,
    pub reload_failures: Counter,
    pub last_reload: Gauge<f64, AtomicU64>,
    pub katalog_info: Family<HashLabels, Gauge>,
    pub cert_reloads: Counter,
    pub cert_reload_failures: Counter,
    /// Reviews being evaluated right now (bodies still arriving are not counted).
    pub in_flight: Gauge,
    /// Request bytes the reviews in flight hold, bodies still arriving
    /// included (what `--max-bytes-in-flight` bounds).
    pub bytes_in_flight: Gauge,
    pub evaluations: Evaluations,
    /// When the serving certificate expires (Unix seconds).
    pub cert_expiry: Gauge,
    /// 1 while this replica holds the leader Lease, else 0; only exported
    /// with leader election (one series per Lease).
    pub leader: Family<LeaseLabels, Gauge>,
    pub undeclared: Undeclared,
    /// Admission requests to `/validate/<id>` or `/mutate/<id>` with an id
    /// the Katalog does not have.
    pub unknown_webhook_groups: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("katalog");
        let evaluations: Family<PlaceLabels, Counter> = Family::default();
        let undeclared: Family<ReviewLabels, Counter> = Family::default();
        let m = Metrics {
            conversion_requests: Family::default(),
            conversion_duration: Family::new_with_constructor(latency_histogram),
            conversion_objects: Family::new_with_constructor(objects_histogram),
            admission_requests: Family::default(),
            admission_duration: Family::new_with_constructor(latency_histogram),
            http_errors: Family::default(),
            reloads: Counter::default(),
            reload_failures: Counter::default(),
            last_reload: Gauge::default(),
            katalog_info: Family::default(),
            cert_reloads: Counter::default(),
            cert_reload_failures: Counter::default(),
            in_flight: Gauge::default(),
            bytes_in_flight: Gauge::default(),
            evaluations: Evaluations::new(&evaluations),
            cert_expiry: Gauge::default(),
            leader: Family::default(),
            undeclared: Undeclared::new(&undeclared),
            unknown_webhook_groups: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "conversion_requests",
            "ConversionReviews answered, by resource, versions and result",
            m.conversion_requests.clone(),
        );
        registry.register(
            "conversion_duration_seconds",
            "Time to answer a ConversionReview",
            m.conversion_duration.clone(),
        );
        registry.register(
            "conversion_objects",
            "Objects per ConversionReview",
            m.conversion_objects.clone(),
        );
        registry.register(
            "admission_requests",
            "AdmissionReviews answered, by endpoint, resource and result",
            m.admission_requests.clone(),
        );
        registry.register(
            "admission_duration_seconds",
            "Time to answer an AdmissionReview",
            m.admission_duration.clone(),
        );
        registry.register(
            "http_errors",
            "Requests refused before evaluation, by reason",
            m.http_errors.clone(),
        );
        registry.register(
            "reloads",
            "Katalog reloads that took effect",
            m.reloads.clone(),
        );
        registry.register(
            "reload_failures",
            "Katalog reloads that failed (the previous Katalog kept serving)",
            m.reload_failures.clone(),
        );
        registry.register(
            "last_reload_timestamp_seconds",
            "Unix time of the last successful Katalog load",
            m.last_reload.clone(),
        );
        registry.register(
            "katalog_info",
            "The content hash of the Katalog being served",
            m.katalog_info.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Serving certificate rotations that took effect",
            m.cert_reloads.clone(),
        );
        registry.register(
            "certificate_reload_failures",
            "Serving certificate rotations refused (the previous certificate kept serving)",
            m.cert_reload_failures.clone(),
        );
        registry.register(
            "reviews_in_flight",
            "Reviews being evaluated right now (bodies still arriving are not counted)",
            m.in_flight.clone(),
        );
        registry.register(
            "request_bytes_in_flight",
            "Request bytes held by the reviews in flight, bodies still arriving included (--max-bytes-in-flight)",
            m.bytes_in_flight.clone(),
        );
        registry.register(
            "evaluations",
            "Review evaluations, by place: inline, pool, or inline_stopped (stopped by --inline-limit, then evaluated on the pool)",
            evaluations,
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "Unix time at which the serving certificate expires",
            m.cert_expiry.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease, else 0 (with leader election only)",
            m.leader.clone(),
        );
        registry.register(
            "undeclared_requests",
            "Reviews of a resource the Katalog does not declare, by review (conversion or admission); the other metrics count them under the label value other",
            undeclared,
        );
        registry.register(
            "unknown_webhook_groups",
            "Admission requests for a webhook group id the Katalog does not have (evaluated with every rule of the endpoint)",
            m.unknown_webhook_groups.clone(),
        );
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        registry.register("build_info", "The katalog build", build);
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

const WINDOW: usize = 1024;

/// Most stats entries kept: keys come from the Katalog (see `labels`), and
/// past this many (a Katalog with rules on hundreds of resources) the
/// rest share one entry, `other`.
pub const MAX_STATS_KEYS: usize = 512;

#[derive(Default)]
struct Window {
    count: u64,
    failures: u64,
    latencies_ms: VecDeque<f64>,
    last_error: Option<String>,
}

/// Per-resource request stats over a recent window, for `/katalog`.
#[derive(Default)]
pub struct Stats {
    windows: Mutex<BTreeMap<String, Window>>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct StatsEntry {
    pub key: String,
    pub count: u64,
    pub failures: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl Stats {
    pub fn record(&self, key: &str, millis: f64, error: Option<&str>) {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let key = if windows.len() >= MAX_STATS_KEYS && !windows.contains_key(key) {
            crate::serving::labels::OTHER
        } else {
            key
        };
        let w = windows.entry(key.to_string()).or_default();
        w.count += 1;
        if let Some(e) = error {
            w.failures += 1;
            w.last_error = Some(e.chars().take(500).collect());
        }
        if w.latencies_ms.len() == WINDOW {
            w.latencies_ms.pop_front();
        }
        w.latencies_ms.push_back(millis);
    }

    pub fn snapshot(&self) -> Vec<StatsEntry> {
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        windows
            .iter()
            .map(|(key, w)| {
                let mut sorted: Vec<f64> = w.latencies_ms.iter().copied().collect();
                sorted.sort_by(f64::total_cmp);
                let pick = |q: f64| {
                    if sorted.is_empty() {
                        0.0
                    } else {
                        let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
                        (sorted[i] * 1000.0).round() / 1000.0
                    }
                };
                StatsEntry {
                    key: key.clone(),
                    count: w.count,
                    failures: w.failures,
                    p50_ms: pick(0.5),
                    p95_ms: pick(0.95),
                    max_ms: pick(1.0),
                    last_error: w.last_error.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_percentiles_over_the_window() {
        let s = Stats::default();
        for i in 1..=100 {
            s.record("a", i as f64, None);
        }
        s.record("a", 0.5, Some("boom"));
        let snap = s.snapshot();
        assert_eq!(snap.len(), 1);
        let e = &snap[0];
        assert_eq!((e.count, e.failures), (101, 1));
        assert_eq!((e.p50_ms, e.p95_ms, e.max_ms), (50.0, 95.0, 100.0));
        assert_eq!(e.last_error.as_deref(), Some("boom"));
    }

    #[test]
    fn stats_keep_at_most_max_stats_keys_entries() {
        let s = Stats::default();
        for i in 0..MAX_STATS_KEYS + 100 {
            s.record(&format!("k{i}"), 1.0, None);
        }
        let snap = s.snapshot();
        assert_eq!(snap.len(), MAX_STATS_KEYS + 1);
        let other = snap.iter().find(|e| e.key == "other").unwrap();
        assert_eq!(other.count, 100);
    }

    #[test]
    fn metrics_render_in_text_exposition() {
        let m = Metrics::default();
        m.reload_failures.inc();
        m.conversion_requests
            .get_or_create(&ConversionLabels {
                group: "g".into(),
                kind: "K".into(),
                from: "v1".into(),
                to: "v2".into(),
                result: "success".into(),
            })
            .inc();
        let text = m.render();
        assert!(text.contains("katalog_reload_failures_total 1"), "{text}");
        assert!(
            text.contains(r#"katalog_conversion_requests_total{group="g",kind="K",from="v1",to="v2",result="success"} 1"#),
            "{text}"
        );
        assert!(text.contains("katalog_build_info{version="), "{text}");
        // Every place is there from the start.
        m.evaluations.inline.inc();
        let text = m.render();
        for line in [
            r#"katalog_evaluations_total{place="inline"} 1"#,
            r#"katalog_evaluations_total{place="pool"} 0"#,
            r#"katalog_evaluations_total{place="inline_stopped"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    /// The series the alerts of deploy/monitoring read: the leader gauge
    /// only once an election runs, the certificate expiry always.
    #[test]
    fn leader_and_certificate_expiry_series() {
        let m = Metrics::default();
        assert!(!m.render().contains("katalog_leader{"), "{}", m.render());
        m.cert_expiry.set(1_900_000_000);
        m.leader
            .get_or_create(&LeaseLabels {
                lease: "katalog-system/katalog-leader".into(),
            })
            .set(1);
        let text = m.render();
        assert!(
            text.contains("katalog_certificate_expiry_timestamp_seconds 1900000000"),
            "{text}"
        );
        assert!(
            text.contains(r#"katalog_leader{lease="katalog-system/katalog-leader"} 1"#),
            "{text}"
        );
    }
}
