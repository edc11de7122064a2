//! katalog's static CEL cost estimate (`katalog_lang::cel::cost`) against
//! cel-go's with the Kubernetes cost estimator (the oracle's `--cost`,
//! `testenv/celoracle`): the minimum and the maximum must be cel-go's for
//! every expression of the library test tables
//! (`testdata/cel/library-cases.jsonl`) and of `testdata/cel/cost-cases.txt`
//! (one expression a line, `#` comments) that both compile, but for the known
//! differences of `testdata/cel/cost-differences.yaml`. The generated
//! expressions of `cel_oracle.rs` are compared there. Needs the go command.

mod common;
mod oracle;

use common::repo;
use oracle::build;
use oracle::cost::{ask_costs, compare_costs, known_cost_differences};
use serde_json::Value;

fn library_expressions() -> Vec<String> {
    let path = repo().join("testdata/cel/library-cases.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("a JSON line");
            v["expr"].as_str().expect("an expr").to_owned()
        })
        .collect()
}

fn cost_cases() -> Vec<String> {
    let path = repo().join("testdata/cel/cost-cases.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn estimates_are_cel_gos() {
    let binary = build(&repo());
    let known = known_cost_differences(&repo());
    let mut new = Vec::new();
    for (label, exprs) in [
        ("library tables", library_expressions()),
        ("cost cases", cost_cases()),
    ] {
        let answers = ask_costs(&binary, &exprs);
        new.extend(compare_costs(label, &exprs, &answers, &known));
    }
    assert!(
        new.is_empty(),
        "{} estimates differ from cel-go's (fix them, or list them with the reason in \
         testdata/cel/cost-differences.yaml):\n{}",
        new.len(),
        new.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}
