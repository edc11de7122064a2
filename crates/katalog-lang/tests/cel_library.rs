//! The expressions of k8s.io/apiserver's CEL library test tables
//! (`pkg/cel/library/*_test.go`: quantity, semver, IP, CIDR, format and the
//! cost tables' lists, regex, URL and string cases), each with cel-go's
//! answer in the Kubernetes environment, as data:
//! `testdata/cel/library-cases.jsonl`, written by
//! `testenv/celoracle/tables.sh`. Both evaluators must give cel-go's answer
//! (the same value, or an error where it errs), but for the known
//! differences of `testdata/cel/oracle-differences.yaml`. Needs no Go.

mod common;
mod oracle;

use common::repo;
use oracle::{Answer, Case, compare, known_differences};
use serde_json::Value;

#[test]
fn the_kubernetes_library_tables_get_cel_gos_answers() {
    let path = repo().join("testdata/cel/library-cases.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cases = Vec::new();
    let mut answers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
        cases.push(Case {
            expr: v["expr"].as_str().expect("an expr").to_owned(),
            bindings: Vec::new(),
        });
        answers.push(Answer::from_json(&v));
    }
    assert!(
        cases.len() >= 200,
        "expected the library tables, got {} cases",
        cases.len()
    );
    let known = known_differences(&repo());
    let new = compare("library tables", &cases, &answers, &known);
    assert!(
        new.is_empty(),
        "{} new differences from cel-go (fix them, or list them with the reason in \
         testdata/cel/oracle-differences.yaml):\n{}",
        new.len(),
        new.join("\n")
    );
}
