//! ConversionReview benchmarks: the engine against the parse+serialize floor.
//!
//! `cargo bench -p katalog-benches` measures; `cargo test --all-targets`
//! runs every case once as a smoke test (see `katalog_benches::harness`).

use std::hint::black_box;

use katalog_benches::fixtures::{check_response, conversion_review, crontab_ir};
use katalog_benches::harness::{Mode, Stats, Variant, Work, report, run_group};
use katalog_lang::convert::convert;
use katalog_lang::review::{review_conversion, review_conversion_bytes};
use katalog_lang::{Ir, conversion};
use serde::de::IgnoredAny;
use serde_json::Value;

const V1BETA1: &str = "stable.example.com/v1beta1";
const V2: &str = "stable.example.com/v2";

/// What the server does with a request body: answer it (the fast path,
/// which splices untouched bytes, where it applies).
fn engine(ir: &Ir, body: &[u8]) -> Vec<u8> {
    conversion::review_bytes(ir, body)
        .expect("the review is well-formed")
        .bytes
}

/// The tree path alone (the reference): the whole review parsed into a
/// `Value`, converted, and written back.
fn tree(ir: &Ir, body: &[u8]) -> Vec<u8> {
    let response = review_conversion_bytes(ir, body).expect("the review is well-formed");
    serde_json::to_vec(&response).expect("a Value always serializes")
}

/// The floor: read the body into a Value and write it back out.
fn baseline(body: &[u8]) -> Vec<u8> {
    let value: Value = serde_json::from_slice(body).expect("the review is valid JSON");
    serde_json::to_vec(&value).expect("a Value always serializes")
}

/// The lower bound of any engine that must at least read its input: check
/// the body is valid JSON without building anything, and copy it out (as a
/// fast path that splices untouched bytes would).
fn scan_floor(body: &[u8]) -> Vec<u8> {
    let _: IgnoredAny = serde_json::from_slice(body).expect("the review is valid JSON");
    body.to_vec()
}

/// Build a review, check the engine answers it correctly, and print sizes.
fn prepare(ir: &Ir, name: &str, n: usize, desired: &str) -> Vec<u8> {
    let body = conversion_review(n, desired);
    let response = review_conversion_bytes(ir, &body).expect("the review is well-formed");
    if let Err(e) = check_response(&response, n, desired) {
        panic!("{name}: {e}");
    }
    let out = engine(ir, &body);
    let fast: Value = serde_json::from_slice(&out).expect("the answer is JSON");
    assert_eq!(
        fast, response,
        "{name}: the fast path and the tree path differ"
    );
    println!(
        "{name}: {n} object(s) stable.example.com/v1 -> {desired}: request {} bytes ({} per object), response {} bytes",
        body.len(),
        body.len() / n,
        out.len()
    );
    body
}

/// Engine vs baseline on one review.
fn compare(mode: &Mode, ir: &Ir, name: &str, n: usize, desired: &str) {
    if !mode.selected(name) {
        return;
    }
    let n = mode.objects(n);
    let body = prepare(ir, name, n, desired);
    let mut variants = [
        Variant::new("engine: conversion::review_bytes (fast path)", || {
            engine(ir, black_box(&body)).len()
        }),
        Variant::new("baseline: from_slice::<Value> + to_vec", || {
            baseline(black_box(&body)).len()
        }),
        Variant::new("scan floor: from_slice::<IgnoredAny> + copy bytes", || {
            scan_floor(black_box(&body)).len()
        }),
        Variant::new("tree path: review_conversion_bytes + to_vec", || {
            tree(ir, black_box(&body)).len()
        }),
    ];
    let stats = run_group(mode, &mut variants);
    let work = Work {
        objects: n,
        bytes: body.len(),
    };
    report(name, work, &stats, 1, "× baseline");
    if let [e, b, f, t] = stats.as_slice() {
        summary(name, e, b, f, t);
    }
}

fn summary(name: &str, engine: &Stats, baseline: &Stats, floor: &Stats, tree: &Stats) {
    let ratio = |a: &Stats, b: &Stats| {
        (
            a.median.as_secs_f64() / b.median.as_secs_f64(),
            a.min.as_secs_f64() / b.min.as_secs_f64(),
        )
    };
    let (bm, bn) = ratio(baseline, engine);
    let (fm, fnn) = ratio(engine, floor);
    let (tm, tn) = ratio(tree, engine);
    println!(
        "\n{name}: engine is {bm:.2}× faster than parse + serialize (median; {bn:.2}× min), \
         {fm:.2}× the scan floor ({fnn:.2}× min), {tm:.2}× faster than the tree path ({tn:.2}× min)"
    );
}

/// Where the engine's time goes on the 500-object v1 -> v2 review. Each
/// stage is measured on its own; the ratio column is against the whole.
fn breakdown(mode: &Mode, ir: &Ir) {
    let name = "convert_review_500_breakdown";
    if !mode.selected(name) {
        return;
    }
    let n = mode.objects(500);
    let body = conversion_review(n, V2);
    let parsed: Value = serde_json::from_slice(&body).expect("valid JSON");
    let objects: Vec<Value> = parsed["request"]["objects"]
        .as_array()
        .expect("the review has objects")
        .clone();
    let response = review_conversion(ir, &parsed).expect("the review is well-formed");
    check_response(&response, n, V2).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut variants = [
        Variant::new(
            "whole: review_conversion_bytes + to_vec (tree path)",
            || tree(ir, black_box(&body)).len(),
        ),
        Variant::new("parse: from_slice::<Value>", || {
            let v: Value = serde_json::from_slice(black_box(&body)).expect("valid JSON");
            v.as_object().map_or(0, |o| o.len())
        }),
        Variant::new(
            "review_conversion(&Value) (typed review + convert + to_value)",
            || {
                let r = review_conversion(ir, black_box(&parsed)).expect("well-formed");
                r.as_object().map_or(0, |o| o.len())
            },
        ),
        Variant::new("convert() of each parsed object", || {
            let mut k = 0;
            for o in black_box(&objects) {
                let out = convert(ir, o, V2).expect("converts");
                k += out.as_object().map_or(0, |m| m.len());
            }
            k
        }),
        Variant::new("clone the parsed request Value", || {
            let v = black_box(&parsed).clone();
            v.as_object().map_or(0, |o| o.len())
        }),
        Variant::new("serialize: to_vec(response Value)", || {
            serde_json::to_vec(black_box(&response))
                .expect("serializes")
                .len()
        }),
    ];
    let stats = run_group(mode, &mut variants);
    let work = Work {
        objects: n,
        bytes: body.len(),
    };
    report(name, work, &stats, 0, "share of whole");
}

fn main() {
    let mode = Mode::from_args();
    if !mode.measure {
        println!("katalog-benches: no --bench argument, running each case once (smoke test)");
    } else if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at start: {}", load.trim());
    }
    let ir = crontab_ir();
    compare(&mode, &ir, "convert_review_500", 500, V2);
    breakdown(&mode, &ir);
    compare(&mode, &ir, "convert_review_1", 1, V2);
    compare(&mode, &ir, "convert_review_500_stash", 500, V1BETA1);
}
