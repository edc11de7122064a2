//! CEL conformance cases as data: every `testdata/cel/*.cases` line is
//! `EXPRESSION => EXPECTED` (a JSON value, `error`, or `error: TEXT`), and
//! both evaluators must give EXPECTED: the default path (the evaluator over
//! the bound JSON, falling back to cel's interpreter) and the interpreter
//! alone. The header of each file says what the expressions see.

mod common;

use katalog_lang::cel::{CelProgram, interpreter_only};
use serde_json::{Value, json};

/// What every case sees as `object`.
fn object() -> Value {
    json!({"n": null, "s": "abc", "i": 1, "l": ["a", "b"], "m": {"a": 1}})
}

/// Whether `got` is what `want` asks for.
fn meets(got: &Result<Value, String>, want: &str) -> bool {
    match (got, want.strip_prefix("error")) {
        (Err(_), Some("")) => true,
        (Err(message), Some(rest)) => rest
            .strip_prefix(": ")
            .is_some_and(|text| message.contains(text)),
        (Ok(value), None) => serde_json::from_str::<Value>(want).is_ok_and(|w| w == *value),
        _ => false,
    }
}

#[test]
fn every_case_gives_its_answer_on_both_evaluators() {
    let dir = common::repo().join("testdata/cel");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("testdata/cel")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cases"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no case files in {}", dir.display());
    let object = object();
    let mut failures = Vec::new();
    let mut ran = 0usize;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a case file");
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{}:{}", file.display(), n + 1);
            let Some((expr, want)) = line.rsplit_once(" => ") else {
                failures.push(format!("{at}: not `EXPRESSION => EXPECTED`"));
                continue;
            };
            if let Some(text) = want.strip_prefix("compile error") {
                let text = text.trim_start_matches(':').trim();
                match CelProgram::compile(expr) {
                    Err(e) if e.to_string().contains(text) => {}
                    Err(e) => failures.push(format!("{at}: `{expr}`: want {want}, got {e}")),
                    Ok(_) => failures.push(format!("{at}: `{expr}`: want {want}, it compiles")),
                }
                ran += 1;
                continue;
            }
            let program = match CelProgram::compile(expr) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{at}: `{expr}` does not compile: {e}"));
                    continue;
                }
            };
            let vars = [("object", &object)];
            let eval = || program.eval(&vars).map_err(|e| e.to_string());
            for (evaluator, got) in [("default", eval()), ("interpreter", interpreter_only(eval))] {
                if !meets(&got, want) {
                    failures.push(format!(
                        "{at}: `{expr}` ({evaluator}): want {want}, got {got:?}"
                    ));
                }
            }
            ran += 1;
        }
    }
    println!("{ran} CEL cases run on both evaluators");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
