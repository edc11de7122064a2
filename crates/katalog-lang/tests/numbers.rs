//! Numbers survive conversion: every literal of `testdata/numbers/cases.txt`
//! is converted v1 → v1beta1 → v1 → v2 → v1 with `katalogs/crontab.yaml`, in
//! a field the rules stash (`spec.timeoutSeconds`) and in one they leave
//! alone (`spec.extra`), and must come back as the file says.
//!
//! And a property: random doubles (every finite bit pattern, subnormals,
//! `-0`, the extremes, as Go and as serde_json write them) and integers
//! (the 64-bit edges and beyond) through every path that reads or writes an
//! object — the conversion fast path and tree path, the server's answer,
//! and a mutation's JSON Patch computed by CEL — come back bit for bit
//! (doubles) and text for text (64-bit integers).

use std::path::Path;

use base64::Engine as _;
use katalog_lang::admission::eval::Endpoint;
use katalog_lang::review::review_conversion_bytes;
use katalog_lang::{Source, compile_sources};
use proptest::prelude::*;
use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn crontab() -> katalog_lang::Ir {
    let path = repo().join("katalogs/crontab.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    compile_sources(&[Source::new(path.display().to_string(), text)]).unwrap()
}

/// Convert an object given as JSON text; the converted object as text.
fn convert(ir: &katalog_lang::Ir, object: &str, desired: &str) -> Result<String, String> {
    let review = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u","desiredAPIVersion":"{desired}","objects":[{object}]}}}}"#
    );
    let out = review_conversion_bytes(ir, review.as_bytes()).map_err(|e| e.to_string())?;
    let response = &out["response"];
    if response["result"]["status"] != "Success" {
        return Err(response["result"]["message"].to_string());
    }
    Ok(serde_json::to_string(&response["convertedObjects"][0]).unwrap())
}

fn crontab_v1(number: &str) -> String {
    format!(
        r#"{{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{{"name":"n","namespace":"d"}},"spec":{{"schedule":"* * * * *","image":"i","timeoutSeconds":{number},"extra":{{"n":{number},"list":[{number}]}}}}}}"#
    )
}

#[test]
fn numbers_come_back_as_the_apiserver_sent_them() {
    let ir = crontab();
    let cases =
        std::fs::read_to_string(repo().join("crates/katalog-lang/testdata/numbers/cases.txt"))
            .unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for line in cases
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (literal, expected) = line.split_once(' ').unwrap();
        let expected = if expected == "exact" {
            literal
        } else {
            expected
        };
        count += 1;
        let mut object = crontab_v1(literal);
        for version in ["v1beta1", "v1", "v2", "v1"] {
            object = match convert(&ir, &object, &format!("stable.example.com/{version}")) {
                Ok(o) => o,
                Err(e) => {
                    failures.push(format!("{literal}: to {version}: {e}"));
                    break;
                }
            };
        }
        let back: Value = serde_json::from_str(&object).unwrap();
        let want = crontab_v1(expected);
        let want: Value = serde_json::from_str(&want).unwrap();
        // Compare the text of each number, not only its value: `1` is not `1.0`.
        for pointer in [
            "/spec/timeoutSeconds",
            "/spec/extra/n",
            "/spec/extra/list/0",
        ] {
            let got = back.pointer(pointer).map(Value::to_string);
            let wanted = want.pointer(pointer).map(Value::to_string);
            if got != wanted {
                failures.push(format!(
                    "{literal} at {pointer}: got {got:?}, want {wanted:?}"
                ));
            }
        }
    }
    assert!(count >= 10, "the cases file lost its cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_number_no_float64_can_hold_is_a_malformed_review() {
    // The apiserver's JSON decoding refuses it before any webhook sees it
    // (`json: cannot unmarshal number 1e400 ...`); katalog refuses it the
    // same way instead of turning it into infinity or null.
    let ir = crontab();
    let err = convert(&ir, &crontab_v1("1e400"), "stable.example.com/v1beta1").unwrap_err();
    assert!(
        err.starts_with("failed to read the ConversionReview: number out of range"),
        "{err}"
    );
}

fn numbers_katalog() -> katalog_lang::Ir {
    let path = repo().join("crates/katalog-lang/testdata/numbers/numbers.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    compile_sources(&[Source::new(path.display().to_string(), text)]).unwrap()
}

/// A double and the text it is written as: as Go writes it, as serde_json
/// writes it, with all 17 significant digits, or with more digits than a
/// double holds (which still name one double, the correctly rounded one).
fn double() -> impl Strategy<Value = (f64, String)> {
    let bits = prop_oneof![
        4 => any::<u64>(),
        2 => 0u64..(1 << 52),                         // subnormals
        1 => prop::sample::select(vec![
            0.0f64.to_bits(), (-0.0f64).to_bits(), f64::MAX.to_bits(), f64::MIN.to_bits(),
            f64::MIN_POSITIVE.to_bits(), 1, (1u64 << 63) | 1, f64::EPSILON.to_bits(),
            0.1f64.to_bits(), 0.3f64.to_bits(), (-9.068346387644875e23f64).to_bits(),
            (u64::MAX as f64).to_bits(), 9007199254740993f64.to_bits(), 1e21f64.to_bits(),
            1e-6f64.to_bits(), 1e-7f64.to_bits(),
        ]),
    ];
    (
        bits.prop_filter("finite", |b| f64::from_bits(*b).is_finite()),
        0..4u8,
    )
        .prop_map(|(bits, form)| {
            let f = f64::from_bits(bits);
            let text = match form {
                0 => katalog_lang::fuzz::go_json_float(f),
                1 => serde_json::to_string(&f).unwrap(),
                2 => format!("{f:.16e}"),
                _ => format!("{f:.30e}"),
            };
            // The text names the double (Rust's parser rounds correctly).
            assert_eq!(text.parse::<f64>().map(f64::to_bits), Ok(bits), "{text}");
            (f, text)
        })
}

/// An integer as text: any i64 or u64, the 64-bit edges, and integers
/// beyond them (which no 64-bit integer holds).
fn integer() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        any::<u64>().prop_map(|u| u.to_string()),
        prop::sample::select(vec![
            i64::MIN.to_string(),
            i64::MAX.to_string(),
            u64::MAX.to_string(),
            (i64::MAX as u64 + 1).to_string(),
            (u64::MAX as i128 + 1).to_string(),
            (i64::MIN as i128 - 1).to_string(),
            "1222222222222222222222222222".to_string(),
        ]),
        "-?[1-9][0-9]{19,40}",
    ]
}

/// Whether an integer's text fits in an i64 or a u64 (held exactly).
fn fits_64(text: &str) -> bool {
    text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()
}

/// The double an integer's text names (correctly rounded).
fn nearest(text: &str) -> f64 {
    text.parse().unwrap()
}

fn sample(ratio: &str, count: &str) -> String {
    format!(
        r#"{{"apiVersion":"numbers.example.com/v1","kind":"Sample","metadata":{{"name":"n","namespace":"d","generation":{count}}},"spec":{{"ratio":{ratio},"count":{count},"other":{{"f":{ratio},"i":{count}}}}},"status":{{"f":{ratio},"list":[{ratio},{count}]}}}}"#
    )
}

fn conversion_review(object: &str, to: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u","desiredAPIVersion":"numbers.example.com/{to}","objects":[{object}]}}}}"#
    )
    .into_bytes()
}

fn bits_at(object: &Value, pointer: &str) -> Option<u64> {
    object.pointer(pointer)?.as_f64().map(f64::to_bits)
}

fn converted(answer: &[u8]) -> Value {
    let answer: Value = serde_json::from_slice(answer).unwrap();
    assert_eq!(
        answer["response"]["result"]["status"], "Success",
        "{answer}"
    );
    answer["response"]["convertedObjects"][0].clone()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A conversion never changes a number, on the fast path, the tree
    /// path and in the server's answer; an integer beyond 64 bits that the
    /// conversion does not touch keeps its text on the fast path, and one
    /// it touches is the same (correctly rounded) double on both paths.
    #[test]
    fn numbers_are_bit_exact_on_every_conversion_path(
        (f, ratio) in double(),
        count in integer(),
    ) {
        let ir = numbers_katalog();
        let body = conversion_review(&sample(&ratio, &count), "v2");
        let fast = katalog_lang::conversion::splice::review(&ir, &body).expect("the fast path answers");
        prop_assert_eq!(fast.paths.spliced, 1);
        let tree = katalog_lang::conversion::review_tree(&ir, &body).unwrap();
        let server = katalog_lang::conversion::review_bytes(&ir, &body).unwrap();
        prop_assert_eq!(&server.bytes, &fast.bytes, "the server answers on the fast path");
        let want = f.to_bits();
        let (fast_object, tree_object) = (converted(&fast.bytes), converted(&tree.bytes));
        for (path, object) in [("fast", &fast_object), ("tree", &tree_object)] {
            for pointer in ["/spec/weight", "/spec/other/f", "/status/f", "/status/list/0"] {
                prop_assert_eq!(bits_at(object, pointer), Some(want), "{} path, {} ({})", path, pointer, ratio);
            }
            for pointer in ["/spec/total", "/spec/other/i", "/status/list/1", "/metadata/generation"] {
                let got = object.pointer(pointer).unwrap();
                if fits_64(&count) {
                    prop_assert_eq!(got.to_string(), count.clone(), "{} path, {}", path, pointer);
                } else {
                    prop_assert_eq!(got.as_f64().map(f64::to_bits), Some(nearest(&count).to_bits()),
                        "{} path, {} ({})", path, pointer, count);
                }
            }
        }
        // Touched, both paths write the same text.
        prop_assert_eq!(fast_object["spec"]["total"].to_string(), tree_object["spec"]["total"].to_string());
        prop_assert_eq!(fast_object["spec"]["weight"].to_string(), tree_object["spec"]["weight"].to_string());
        // Untouched on the fast path, every number keeps its text.
        let text = String::from_utf8(fast.bytes.clone()).unwrap();
        let untouched = format!(r#""other":{{"f":{ratio},"i":{count}}}"#);
        prop_assert!(text.contains(&untouched), "{} not in {}", untouched, text);
        // And back to v1, on the fast path: the same doubles again.
        let back = converted(&katalog_lang::conversion::review_bytes(
            &ir,
            &conversion_review(&serde_json::to_string(&fast_object).unwrap(), "v1"),
        ).unwrap().bytes);
        prop_assert_eq!(bits_at(&back, "/spec/ratio"), Some(want));
        prop_assert_eq!(bits_at(&back, "/status/f"), Some(want));
        // The Value-level reference answers alike.
        let plain = review_conversion_bytes(&ir, &body).unwrap();
        prop_assert_eq!(bits_at(&plain["response"]["convertedObjects"][0], "/spec/weight"), Some(want));
    }

    /// A mutation's CEL reads the exact double: its patch holds
    /// `object.spec.ratio` and `object.spec.ratio * 2.0` bit for bit, the
    /// integer text for text, and nothing else of the object.
    #[test]
    fn a_mutation_patch_holds_the_exact_numbers(
        (f, ratio) in double(),
        count in integer(),
    ) {
        let ir = numbers_katalog();
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"numbers.example.com","version":"v1","kind":"Sample"}},"resource":{{"group":"numbers.example.com","version":"v1","resource":"samples"}},"namespace":"d","operation":"CREATE","userInfo":{{"username":"u"}},"object":{}}}}}"#,
            sample(&ratio, &count)
        );
        let answer = katalog_lang::admission::review::review_bytes(&ir, body.as_bytes(), Endpoint::Mutate, None).unwrap();
        let answer: Value = serde_json::from_slice(&answer.bytes).unwrap();
        prop_assert_eq!(&answer["response"]["allowed"], &Value::Bool(true), "{}", answer);
        let patch = answer["response"]["patch"].as_str().expect("a patch");
        let patch = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
        let patch: Vec<Value> = serde_json::from_slice(&patch).unwrap();
        let value = |path: &str| patch.iter().find(|op| op["path"] == path).map(|op| op["value"].clone());
        prop_assert_eq!(value("/spec/copied").and_then(|v| v.as_f64()).map(f64::to_bits), Some(f.to_bits()), "{}", ratio);
        // A double written as an integer (`1000`) is an int to CEL, which
        // has no `int * double`.
        let is_double = serde_json::from_str::<Value>(&ratio).unwrap().is_f64();
        if is_double && (f * 2.0).is_finite() {
            prop_assert_eq!(value("/spec/doubled").and_then(|v| v.as_f64()).map(f64::to_bits), Some((f * 2.0).to_bits()), "{}", ratio);
        }
        if count.parse::<i64>().is_ok() {
            prop_assert_eq!(value("/spec/counted").map(|v| v.to_string()), Some(count.clone()));
        }
        for op in &patch {
            let path = op["path"].as_str().unwrap_or("");
            prop_assert!(["/spec/copied", "/spec/doubled", "/spec/counted"].contains(&path), "{}", op);
        }
    }
}
