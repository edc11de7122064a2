//! Numbers survive conversion: every literal of `testdata/numbers/cases.txt`
//! is converted v1 → v1beta1 → v1 → v2 → v1 with `katalogs/crontab.yaml`, in
//! a field the rules stash (`spec.timeoutSeconds`) and in one they leave
//! alone (`spec.extra`), and must come back as the file says.

use std::path::Path;

use katalog_lang::review::review_conversion_bytes;
use katalog_lang::{Source, compile_sources};
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
