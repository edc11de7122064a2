//! Numbers through the `katalog` binary: random doubles (every finite bit
//! pattern, subnormals, `-0`, the extremes, written as Go writes them) and
//! integers (the 64-bit edges and beyond) converted by `katalog convert`
//! come back bit for bit in its JSON and YAML output, and `katalog review`
//! answers with the server's bytes, byte for byte, for the same reviews.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use katalog_lang::admission::eval::Endpoint;
use katalog_lang::fuzz::Rng;
use katalog_lang::{Ir, Source, compile_sources};
use serde_json::Value;

const KATALOG: &str = "crates/katalog-lang/testdata/numbers/numbers.yaml";

/// How many objects each run carries (one process per run).
const OBJECTS: usize = 400;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ir() -> Ir {
    let text = std::fs::read_to_string(root().join(KATALOG)).unwrap();
    compile_sources(&[Source::new(KATALOG, text)]).unwrap()
}

/// Run the binary in the repository root with `stdin`; exit code, stdout.
fn katalog(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_katalog"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || input.write_all(&stdin));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    (out.status.code().unwrap_or(-1), out.stdout)
}

/// Random finite doubles: any bit pattern, subnormals, and the edges.
fn double(rng: &mut Rng, i: usize) -> f64 {
    const EDGES: [f64; 8] = [
        0.0,
        -0.0,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        5e-324,
        -9.068346387644875e23,
        0.3,
    ];
    loop {
        let f = match i {
            i if i < EDGES.len() => EDGES[i],
            i if i % 3 == 0 => f64::from_bits(rng.next_u64() & ((1 << 52) - 1)),
            _ => f64::from_bits(rng.next_u64()),
        };
        if f.is_finite() {
            return f;
        }
    }
}

/// Integers as text: i64, u64, the edges, and beyond 64 bits.
fn integer(rng: &mut Rng, i: usize) -> String {
    const EDGES: [&str; 6] = [
        "-9223372036854775808",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "1222222222222222222222222222",
    ];
    match i {
        i if i < EDGES.len() => EDGES[i].to_string(),
        i if i % 3 == 0 => (rng.next_u64() as i64).to_string(),
        i if i % 3 == 1 => rng.next_u64().to_string(),
        _ => format!("{}{:020}", rng.below(1_000_000) + 1, rng.next_u64()),
    }
}

fn fits_64(text: &str) -> bool {
    text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()
}

fn sample(ratio: &str, count: &str) -> String {
    format!(
        r#"{{"apiVersion":"numbers.example.com/v1","kind":"Sample","metadata":{{"name":"n","namespace":"d"}},"spec":{{"ratio":{ratio},"count":{count},"other":{{"f":{ratio},"i":{count}}}}},"status":{{"f":{ratio}}}}}"#
    )
}

fn cases(seed: u64) -> Vec<(f64, String)> {
    let mut rng = Rng::new(seed);
    (0..OBJECTS)
        .map(|i| (double(&mut rng, i), integer(&mut rng, i)))
        .collect()
}

/// Each converted object holds its double bit for bit and its integer text
/// for text (or, beyond 64 bits, the nearest double).
fn check(cases: &[(f64, String)], objects: &[Value], how: &str) {
    assert_eq!(objects.len(), cases.len(), "{how}");
    for ((f, count), object) in cases.iter().zip(objects) {
        for pointer in ["/spec/weight", "/spec/other/f", "/status/f"] {
            let got = object.pointer(pointer).and_then(Value::as_f64);
            assert_eq!(
                got.map(f64::to_bits),
                Some(f.to_bits()),
                "{how}: {pointer} of {} came back as {got:?}",
                katalog_lang::fuzz::go_json_float(*f)
            );
        }
        for pointer in ["/spec/total", "/spec/other/i"] {
            let got = object.pointer(pointer).unwrap();
            if fits_64(count) {
                assert_eq!(&got.to_string(), count, "{how}: {pointer}");
            } else {
                let want: f64 = count.parse().unwrap();
                assert_eq!(
                    got.as_f64().map(f64::to_bits),
                    Some(want.to_bits()),
                    "{how}: {pointer} of {count} came back as {got}"
                );
            }
        }
    }
}

#[test]
fn katalog_convert_keeps_every_number() {
    let cases = cases(35);
    let objects: Vec<String> = cases
        .iter()
        .map(|(f, count)| sample(&katalog_lang::fuzz::go_json_float(*f), count))
        .collect();
    let input = format!("[{}]", objects.join(","));
    let args = ["convert", "--katalog", KATALOG, "--to", "v2", "-o"];
    let (code, json) = katalog(&[&args[..], &["json", "-"]].concat(), input.as_bytes());
    assert_eq!(code, 0);
    // Several objects come out as one List, as kubectl prints them.
    let list: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(list["kind"], "List");
    let converted = list["items"].as_array().cloned().unwrap_or_default();
    check(&cases, &converted, "convert -o json");
    let (code, yaml) = katalog(&[&args[..], &["yaml", "-"]].concat(), input.as_bytes());
    assert_eq!(code, 0);
    let yaml = String::from_utf8(yaml).unwrap();
    let converted: Vec<Value> = katalog_lang::yaml::read_documents(&yaml)
        .unwrap()
        .iter()
        .map(|n| n.to_value())
        .collect();
    check(&cases, &converted, "convert -o yaml");
}

#[test]
fn katalog_review_answers_with_the_servers_bytes() {
    let ir = ir();
    let cases = cases(10);
    let objects: Vec<String> = cases
        .iter()
        .map(|(f, count)| sample(&katalog_lang::fuzz::go_json_float(*f), count))
        .collect();
    let conversion = format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u","desiredAPIVersion":"numbers.example.com/v2","objects":[{}]}}}}"#,
        objects.join(",")
    );
    let server = katalog_lang::conversion::review_bytes(&ir, conversion.as_bytes()).unwrap();
    let (code, cli) = katalog(
        &["review", "--katalog", KATALOG, "-"],
        conversion.as_bytes(),
    );
    assert_eq!(code, 0);
    assert!(
        cli == server.bytes,
        "the CLI's ConversionReview answer differs from the server's"
    );
    let answer: Value = serde_json::from_slice(&cli).unwrap();
    let converted = answer["response"]["convertedObjects"].as_array().unwrap();
    check(&cases, converted, "review");
    for (i, object) in objects.iter().enumerate().step_by(37) {
        let admission = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u{i}","kind":{{"group":"numbers.example.com","version":"v1","kind":"Sample"}},"resource":{{"group":"numbers.example.com","version":"v1","resource":"samples"}},"namespace":"d","operation":"CREATE","userInfo":{{"username":"u"}},"object":{object}}}}}"#
        );
        for (flag, endpoint) in [
            ("mutate", Endpoint::Mutate),
            ("validate", Endpoint::Validate),
        ] {
            let server = katalog_lang::admission::review::review_bytes(
                &ir,
                admission.as_bytes(),
                endpoint,
                None,
            )
            .unwrap();
            let (code, cli) = katalog(
                &["review", "--katalog", KATALOG, "--endpoint", flag, "-"],
                admission.as_bytes(),
            );
            assert_eq!(code, 0);
            assert!(
                cli == server.bytes,
                "the CLI's AdmissionReview answer at {flag} differs from the server's:\n{}\n{}",
                String::from_utf8_lossy(&cli),
                String::from_utf8_lossy(&server.bytes)
            );
        }
    }
}
