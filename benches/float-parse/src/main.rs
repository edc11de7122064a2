//! Parse three reviews into `serde_json::Value` many times and print the
//! min and median per parse: a ConversionReview of 500 CronTabs as the
//! apiserver sends them (the conversion bench's shape: strings and small
//! integers), the Pod AdmissionReview of the admission tests, and a
//! ConversionReview of 2,000 objects each carrying a double written as Go
//! writes it (the case issue 35 measured), where the float parser is all
//! the work. Built once without and once with `--features roundtrip`.

use std::time::{Duration, Instant};

const CRONTAB: &str = include_str!(
    "../../../crates/katalog-lang/src/conversion/testdata/apiserver/conversion-review-v1-to-v1beta1.json"
);
const POD: &str =
    include_str!("../../../crates/katalog-lang/src/admission/testdata/pod-create-v1.json");

/// SplitMix64, for the doubles.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn review(objects: &[String]) -> String {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u","desiredAPIVersion":"stable.example.com/v2","objects":[{}]}}}}"#,
        objects.join(",")
    )
}

fn time(name: &str, text: &str) {
    let rounds = (100_000_000 / text.len()).clamp(20, 50_000);
    let mut times: Vec<Duration> = Vec::with_capacity(rounds);
    let mut sum = 0usize;
    for _ in 0..rounds {
        let start = Instant::now();
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        times.push(start.elapsed());
        sum += value.as_object().map_or(0, |m| m.len());
    }
    times.sort();
    println!(
        "{name:<34} {:>7} bytes  min {:>9.2} µs  median {:>9.2} µs  ({rounds} rounds, {sum})",
        text.len(),
        times[0].as_secs_f64() * 1e6,
        times[rounds / 2].as_secs_f64() * 1e6
    );
}

fn main() {
    let crontab: serde_json::Value = serde_json::from_str(CRONTAB).expect("JSON");
    let object = crontab["request"]["objects"][0].to_string();
    time(
        "ConversionReview, 500 CronTabs",
        &review(&vec![object; 500]),
    );
    time("AdmissionReview, one Pod", POD);
    let mut state = 35;
    let doubles: Vec<String> = (0..2006)
        .map(|i| {
            let f = loop {
                let f = f64::from_bits(next(&mut state));
                if f.is_finite() {
                    break f;
                }
            };
            format!(
                r#"{{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{{"name":"c{i}"}},"spec":{{"ratio":{f:e}}}}}"#
            )
        })
        .collect();
    time("ConversionReview, 2,006 doubles", &review(&doubles));
    println!(
        "float_roundtrip: {}",
        if cfg!(feature = "roundtrip") {
            "on"
        } else {
            "off"
        }
    );
}
