//! A small std-only benchmark harness.
//!
//! A *group* holds variants that do comparable work on the same input (the
//! engine and its parse+serialize baseline). They are timed round-robin —
//! one call of each per round — so both see the same machine load, which
//! matters on a shared 2-core box where other builds come and go. Each call
//! is timed with [`Instant`]; the report gives min / median / p95 per call
//! and the throughput at the median.
//!
//! Modes, from the command line:
//! - `--bench` (what `cargo bench` passes): warm up, then measure.
//! - anything else (`cargo test --all-targets` runs the binary with no
//!   arguments): call every variant once, unmeasured, as a smoke test.
//!
//! Any other non-flag argument is a substring filter on group names
//! (`cargo bench -p katalog-benches -- convert_review_500`); a trailing `$`
//! asks for the exact name (`-- 'convert_review_500$'`).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// How a benchmark binary was invoked.
#[derive(Debug, Clone)]
pub struct Mode {
    /// Measure (`--bench`), or just run each variant once.
    pub measure: bool,
    filters: Vec<String>,
    /// Warm-up time per group.
    pub warm_up: Duration,
    /// Measuring time per group (at least `min_rounds` rounds).
    pub measure_time: Duration,
    pub min_rounds: usize,
    pub max_rounds: usize,
}

impl Mode {
    /// Read the mode from `std::env::args()`. `KATALOG_BENCH_SECS` sets the
    /// measuring time per group (default 5 s).
    pub fn from_args() -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let measure = args.iter().any(|a| a == "--bench");
        let filters = args.into_iter().filter(|a| !a.starts_with('-')).collect();
        let secs = std::env::var("KATALOG_BENCH_SECS")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| *s > 0.0)
            .unwrap_or(5.0);
        Self {
            measure,
            filters,
            warm_up: Duration::from_millis(500),
            measure_time: Duration::from_secs_f64(secs),
            min_rounds: 20,
            max_rounds: 1_000_000,
        }
    }

    /// How many objects a review of `n` objects gets: `n` when measuring,
    /// at most 5 in a smoke test (debug builds parse slowly).
    pub fn objects(&self, n: usize) -> usize {
        if self.measure { n } else { n.min(5) }
    }

    /// Whether the group `name` passes the command-line filters.
    pub fn selected(&self, name: &str) -> bool {
        self.filters.is_empty()
            || self.filters.iter().any(|f| match f.strip_suffix('$') {
                Some(exact) => name == exact,
                None => name.contains(f.as_str()),
            })
    }
}

/// Per-call timings of one variant.
#[derive(Debug, Clone)]
pub struct Stats {
    pub name: String,
    pub calls: usize,
    pub min: Duration,
    pub median: Duration,
    pub p95: Duration,
    pub mean: Duration,
}

impl Stats {
    fn from_samples(name: &str, mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let n = samples.len().max(1);
        let at = |q: f64| {
            samples
                .get(((n as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or_default()
        };
        let total: Duration = samples.iter().sum();
        Self {
            name: name.to_string(),
            calls: samples.len(),
            min: at(0.0),
            median: at(0.5),
            p95: at(0.95),
            mean: total / n as u32,
        }
    }
}

/// One variant of a group: a name and the work. The closure returns a size
/// (bytes written, say) so the optimizer cannot drop the work.
pub struct Variant<'a> {
    pub name: &'a str,
    pub run: Box<dyn FnMut() -> usize + 'a>,
}

impl<'a> Variant<'a> {
    pub fn new(name: &'a str, run: impl FnMut() -> usize + 'a) -> Self {
        Self {
            name,
            run: Box::new(run),
        }
    }
}

/// What a group's throughput is measured in.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    /// Objects per call.
    pub objects: usize,
    /// Request bytes per call.
    pub bytes: usize,
}

/// Time the variants of one group round-robin. In smoke mode each runs
/// once and the result has a single sample.
pub fn run_group(mode: &Mode, variants: &mut [Variant<'_>]) -> Vec<Stats> {
    if !mode.measure {
        for v in variants.iter_mut() {
            black_box((v.run)());
        }
        return Vec::new();
    }
    // For a profile of one variant: `KATALOG_BENCH_ONLY=engine` times only
    // the variants whose name contains it (the others report no calls).
    let only = std::env::var("KATALOG_BENCH_ONLY").unwrap_or_default();
    let runs = |v: &Variant<'_>| v.name.contains(only.as_str());
    let start = Instant::now();
    while start.elapsed() < mode.warm_up {
        for v in variants.iter_mut().filter(|v| runs(v)) {
            black_box((v.run)());
        }
    }
    let mut samples: Vec<Vec<Duration>> = variants.iter().map(|_| Vec::new()).collect();
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < mode.max_rounds
        && (rounds < mode.min_rounds || start.elapsed() < mode.measure_time)
    {
        for (v, s) in variants.iter_mut().zip(samples.iter_mut()) {
            if !runs(v) {
                continue;
            }
            let t = Instant::now();
            black_box((v.run)());
            s.push(t.elapsed());
        }
        rounds += 1;
    }
    variants
        .iter()
        .zip(samples)
        .map(|(v, s)| Stats::from_samples(v.name, s))
        .collect()
}

/// A duration in the most readable unit.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Print a group's results as a Markdown table. The last column is each
/// variant's median over the median of `stats[relative_to]`, headed
/// `ratio_header`.
pub fn report(title: &str, work: Work, stats: &[Stats], relative_to: usize, ratio_header: &str) {
    if stats.is_empty() {
        return;
    }
    println!("\n### {title}\n");
    println!("| variant | calls | min | median | p95 | objects/s | MB/s | {ratio_header} |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let base = stats
        .get(relative_to)
        .map(|s| s.median.as_secs_f64())
        .unwrap_or(1.0);
    for s in stats {
        let med = s.median.as_secs_f64();
        println!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.1} | {:.2} |",
            s.name,
            s.calls,
            fmt_duration(s.min),
            fmt_duration(s.median),
            fmt_duration(s.p95),
            work.objects as f64 / med,
            work.bytes as f64 / med / 1e6,
            med / base,
        );
    }
}
