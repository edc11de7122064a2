//! Prometheus metrics and the per-resource stats behind `/katalog`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
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

/// What a metric is, as exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Exported with the suffix `_total`.
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// Its name in the text exposition's `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric of [`METRICS`].
#[derive(Clone, Copy, Debug)]
pub struct Def {
    /// Its name without the `katalog_` prefix and a counter's `_total`.
    pub name: &'static str,
    pub kind: Kind,
    /// Its label names, in the order of its label set.
    pub labels: &'static [&'static str],
    /// Its `# HELP` text.
    pub help: &'static str,
}

impl Def {
    /// The name of its samples: `katalog_conversion_requests_total`.
    pub fn exported(&self) -> String {
        let total = if self.kind == Kind::Counter {
            "_total"
        } else {
            ""
        };
        format!("katalog_{}{total}", self.name)
    }
}

/// Every metric the server exports, in the order of `/metrics`: the one
/// list of their names, types, labels and help, which [`Metrics`]
/// registers from and the table of docs/server.md (`## Metrics`) is
/// checked against (`the_docs_table_is_the_metrics_table`).
pub const METRICS: &[Def] = &[
    Def {
        name: "conversion_requests",
        kind: Kind::Counter,
        labels: &["group", "kind", "from", "to", "result"],
        help: "ConversionReviews answered, by resource, versions and result",
    },
    Def {
        name: "conversion_duration_seconds",
        kind: Kind::Histogram,
        labels: &["group", "kind"],
        help: "Time to answer a ConversionReview",
    },
    Def {
        name: "conversion_objects",
        kind: Kind::Histogram,
        labels: &["group", "kind"],
        help: "Objects per ConversionReview",
    },
    Def {
        name: "admission_requests",
        kind: Kind::Counter,
        labels: &["endpoint", "group", "version", "resource", "result"],
        help: "AdmissionReviews answered, by endpoint, resource and result",
    },
    Def {
        name: "admission_duration_seconds",
        kind: Kind::Histogram,
        labels: &["endpoint", "group", "version", "resource"],
        help: "Time to answer an AdmissionReview",
    },
    Def {
        name: "http_errors",
        kind: Kind::Counter,
        labels: &["reason"],
        help: "Requests refused before evaluation, by reason",
    },
    Def {
        name: "reloads",
        kind: Kind::Counter,
        labels: &[],
        help: "Katalog reloads that took effect",
    },
    Def {
        name: "reload_failures",
        kind: Kind::Counter,
        labels: &[],
        help: "Katalog reloads that failed (the previous Katalog kept serving)",
    },
    Def {
        name: "last_reload_timestamp_seconds",
        kind: Kind::Gauge,
        labels: &[],
        help: "Unix time of the last successful Katalog load",
    },
    Def {
        name: "katalog_info",
        kind: Kind::Gauge,
        labels: &["hash"],
        help: "The content hash of the Katalog being served",
    },
    Def {
        name: "certificate_reloads",
        kind: Kind::Counter,
        labels: &[],
        help: "Serving certificate rotations that took effect",
    },
    Def {
        name: "certificate_reload_failures",
        kind: Kind::Counter,
        labels: &[],
        help: "Serving certificate rotations refused (the previous certificate kept serving)",
    },
    Def {
        name: "reviews_in_flight",
        kind: Kind::Gauge,
        labels: &[],
        help: "Reviews being evaluated right now (bodies still arriving are not counted)",
    },
    Def {
        name: "request_bytes_in_flight",
        kind: Kind::Gauge,
        labels: &[],
        help: "Request bytes held by the reviews in flight, bodies still arriving included (--max-bytes-in-flight)",
    },
    Def {
        name: "evaluations",
        kind: Kind::Counter,
        labels: &["place"],
        help: "Review evaluations, by place: inline, pool, or inline_stopped (stopped by --inline-limit, then evaluated on the pool)",
    },
    Def {
        name: "certificate_expiry_timestamp_seconds",
        kind: Kind::Gauge,
        labels: &[],
        help: "Unix time at which the serving certificate expires",
    },
    Def {
        name: "leader",
        kind: Kind::Gauge,
        labels: &["lease"],
        help: "1 while this replica holds the leader Lease, else 0 (with leader election only)",
    },
    Def {
        name: "undeclared_requests",
        kind: Kind::Counter,
        labels: &["review"],
        help: "Reviews of a resource the Katalog does not declare, by review (conversion or admission); the other metrics count them under the label value other",
    },
    Def {
        name: "unknown_webhook_groups",
        kind: Kind::Counter,
        labels: &[],
        help: "Admission requests for a webhook group id the Katalog does not have (evaluated with every rule of the endpoint)",
    },
    Def {
        name: "build_info",
        kind: Kind::Gauge,
        labels: &["version"],
        help: "The katalog build",
    },
];

/// Register `metric` under its entry of [`METRICS`].
fn register(registry: &mut Registry, name: &str, metric: impl Metric) {
    // A name missing from the table is a programming error that every test
    // building `Metrics` would show; register it without help rather than
    // panic in a server.
    let help = METRICS
        .iter()
        .find(|d| d.name == name)
        .map_or("", |d| d.help);
    registry.register(name, help, metric);
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
        register(
            &mut registry,
            "conversion_requests",
            m.conversion_requests.clone(),
        );
        register(
            &mut registry,
            "conversion_duration_seconds",
            m.conversion_duration.clone(),
        );
        register(
            &mut registry,
            "conversion_objects",
            m.conversion_objects.clone(),
        );
        register(
            &mut registry,
            "admission_requests",
            m.admission_requests.clone(),
        );
        register(
            &mut registry,
            "admission_duration_seconds",
            m.admission_duration.clone(),
        );
        register(&mut registry, "http_errors", m.http_errors.clone());
        register(&mut registry, "reloads", m.reloads.clone());
        register(&mut registry, "reload_failures", m.reload_failures.clone());
        register(
            &mut registry,
            "last_reload_timestamp_seconds",
            m.last_reload.clone(),
        );
        register(&mut registry, "katalog_info", m.katalog_info.clone());
        register(&mut registry, "certificate_reloads", m.cert_reloads.clone());
        register(
            &mut registry,
            "certificate_reload_failures",
            m.cert_reload_failures.clone(),
        );
        register(&mut registry, "reviews_in_flight", m.in_flight.clone());
        register(
            &mut registry,
            "request_bytes_in_flight",
            m.bytes_in_flight.clone(),
        );
        register(&mut registry, "evaluations", evaluations);
        register(
            &mut registry,
            "certificate_expiry_timestamp_seconds",
            m.cert_expiry.clone(),
        );
        register(&mut registry, "leader", m.leader.clone());
        register(&mut registry, "undeclared_requests", undeclared);
        register(
            &mut registry,
            "unknown_webhook_groups",
            m.unknown_webhook_groups.clone(),
        );
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        register(&mut registry, "build_info", build);
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

    /// What `/metrics` exports is [`METRICS`]: each metric with its help,
    /// type and labels, and no other.
    #[test]
    fn the_exported_metrics_are_the_metrics_table() {
        let m = Metrics::default();
        // A sample in every family, so that its labels show.
        let conversion = ConversionKey {
            group: "g".into(),
            kind: "K".into(),
        };
        let admission = AdmissionKey {
            endpoint: "validate".into(),
            group: "g".into(),
            version: "v1".into(),
            resource: "rs".into(),
        };
        m.conversion_requests
            .get_or_create(&ConversionLabels {
                group: "g".into(),
                kind: "K".into(),
                from: "v1".into(),
                to: "v2".into(),
                result: "success".into(),
            })
            .inc();
        m.conversion_duration
            .get_or_create(&conversion)
            .observe(1.0);
        m.conversion_objects.get_or_create(&conversion).observe(1.0);
        m.admission_requests
            .get_or_create(&AdmissionLabels {
                endpoint: "validate".into(),
                group: "g".into(),
                version: "v1".into(),
                resource: "rs".into(),
                result: "allowed".into(),
            })
            .inc();
        m.admission_duration.get_or_create(&admission).observe(1.0);
        m.http_errors
            .get_or_create(&ReasonLabels { reason: "R".into() })
            .inc();
        m.katalog_info
            .get_or_create(&HashLabels { hash: "h".into() })
            .set(1);
        m.leader
            .get_or_create(&LeaseLabels {
                lease: "ns/l".into(),
            })
            .set(1);
        let text = m.render();
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(helps, METRICS.len(), "{text}");
        for d in METRICS {
            let base = format!("katalog_{}", d.name);
            let help = format!("# HELP {base} {}.", d.help);
            assert!(text.lines().any(|l| l == help), "{help} in {text}");
            let kind = format!("# TYPE {base} {}", d.kind.as_str());
            assert!(text.lines().any(|l| l == kind), "{kind} in {text}");
            // A histogram's labels are on its `_sum`.
            let sample = match d.kind {
                Kind::Histogram => format!("{base}_sum"),
                _ => d.exported(),
            };
            let line = text
                .lines()
                .find(|l| {
                    l.strip_prefix(sample.as_str())
                        .is_some_and(|rest| rest.starts_with(['{', ' ']))
                })
                .unwrap_or_else(|| panic!("no sample of {sample} in {text}"));
            let labels: Vec<&str> = match line.split_once('{') {
                None => Vec::new(),
                Some((_, rest)) => rest
                    .split_once('}')
                    .map_or("", |(inside, _)| inside)
                    .split(',')
                    .filter_map(|pair| pair.split_once('=').map(|(name, _)| name))
                    .collect(),
            };
            assert_eq!(labels, d.labels, "{line}");
        }
    }

    /// The table of docs/server.md (`## Metrics`) is [`METRICS`]: the same
    /// metrics in the same order, with their types and labels.
    #[test]
    fn the_docs_table_is_the_metrics_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/server.md");
        let docs = std::fs::read_to_string(path).expect("docs/server.md");
        let section = docs
            .split_once("\n## Metrics\n")
            .map(|(_, s)| s.split("\n## ").next().unwrap_or(s))
            .expect("a `## Metrics` section in docs/server.md");
        let backticked = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        };
        let rows: Vec<(String, String, Vec<String>)> = section
            .lines()
            .filter(|l| l.starts_with("| `katalog_"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (
                    cells[1].trim_matches('`').to_string(),
                    cells[2].to_string(),
                    backticked(cells[3]),
                )
            })
            .collect();
        let table: Vec<(String, String, Vec<String>)> = METRICS
            .iter()
            .map(|d| {
                (
                    d.exported(),
                    d.kind.as_str().to_string(),
                    d.labels.iter().map(|l| l.to_string()).collect(),
                )
            })
            .collect();
        assert_eq!(
            rows, table,
            "docs/server.md's metrics table against metrics.rs's METRICS"
        );
    }
}
