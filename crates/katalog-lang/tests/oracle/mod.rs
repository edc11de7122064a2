//! The cel-go oracle (`testenv/celoracle`, k8s.io/apiserver's CEL for a
//! ValidatingAdmissionPolicy) as the CEL tests use it: built by its script,
//! fed JSON Lines cases, answers read back in order; and the file of known
//! differences that the tests compare with.
// Each test binary uses a part of it.
#![allow(dead_code)]

pub mod cost;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use katalog_lang::cel::{CelProgram, interpreter_only};
use serde_json::{Value, json};

/// One case: an expression and the values bound to its variables.
#[derive(Debug, Clone)]
pub struct Case {
    pub expr: String,
    pub bindings: Vec<(String, Value)>,
}

/// An answer: a value, or an error (its text, for the report only).
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Value(Value),
    Error(String),
}

impl Answer {
    /// Whether `self` and `other` agree: both errors, or equal values.
    pub fn agrees(&self, other: &Answer) -> bool {
        match (self, other) {
            (Answer::Error(_), Answer::Error(_)) => true,
            (Answer::Value(a), Answer::Value(b)) => a == b,
            _ => false,
        }
    }

    /// The answer as a JSON object of a data file (`value` or `error`).
    pub fn to_json(&self) -> Value {
        match self {
            Answer::Value(v) => json!({ "value": v }),
            Answer::Error(e) => json!({ "error": e }),
        }
    }

    pub fn from_json(v: &Value) -> Answer {
        match v.get("error") {
            Some(e) => Answer::Error(format!(
                "{} ({})",
                e.as_str().unwrap_or_default(),
                v["stage"].as_str().unwrap_or_default()
            )),
            None => Answer::Value(v.get("value").cloned().unwrap_or(Value::Null)),
        }
    }
}

/// Builds the oracle (or reuses the cached binary) and returns its path.
pub fn build(repo: &Path) -> String {
    let script = repo.join("testenv/celoracle/build.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed ({}); it needs the go command, see docs/cel.md",
        script.display(),
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("a path")
        .trim()
        .to_owned()
}

/// The oracle's answer to each of `lines` (JSON cases), in order, from one
/// process run with `args`; a writer thread feeds it while its answers are
/// read, so neither side waits on a full pipe.
pub fn exchange(binary: &str, args: &[&str], lines: Vec<String>) -> Vec<Value> {
    let expected = lines.len();
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{binary}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(stdin, "{line}").expect("the oracle reads its input");
        }
    });
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let answers: Vec<Value> = stdout
        .lines()
        .map(|line| {
            let line = line.expect("a line from the oracle");
            serde_json::from_str(&line).expect("a JSON answer")
        })
        .collect();
    writer.join().expect("the writer thread");
    let status = child.wait().expect("the oracle exits");
    assert!(status.success(), "the oracle failed: {status}");
    assert_eq!(answers.len(), expected, "one answer per case");
    answers
}

/// The oracle's answers to `cases`, in order (one process for all); `args`
/// are the oracle's (`--math-and-base64`).
pub fn ask(binary: &str, args: &[&str], cases: &[Case]) -> Vec<Answer> {
    let lines: Vec<String> = cases
        .iter()
        .map(|c| {
            let bindings: serde_json::Map<String, Value> = c.bindings.iter().cloned().collect();
            json!({ "expr": c.expr, "bindings": bindings }).to_string()
        })
        .collect();
    exchange(binary, args, lines)
        .into_iter()
        .map(|v| match v.get("error") {
            Some(e) => Answer::Error(format!(
                "{} ({})",
                e.as_str().unwrap_or_default(),
                v["stage"].as_str().unwrap_or_default()
            )),
            None => Answer::Value(v["value"].clone()),
        })
        .collect()
}

/// katalog's answers: with the evaluator over JSON first (as rules run),
/// and with cel's interpreter alone.
pub fn katalog(case: &Case) -> (Answer, Answer) {
    let program = match CelProgram::compile(&case.expr) {
        Ok(p) => p,
        Err(e) => {
            let e = Answer::Error(e.to_string());
            return (e.clone(), e);
        }
    };
    let vars: Vec<(&str, &Value)> = case.bindings.iter().map(|(n, v)| (n.as_str(), v)).collect();
    let run = || match program.eval(&vars) {
        Ok(v) => Answer::Value(v),
        Err(e) => Answer::Error(e.to_string()),
    };
    let native = run();
    let interpreter = interpreter_only(run);
    (native, interpreter)
}

/// A known difference from cel-go: the cases it covers (a regex over the
/// expression, one over cel-go's answer, or both) and why it remains.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Known {
    /// Regex matched against the expression.
    #[serde(default, rename = "expr", with = "serde_regex")]
    pub expr: Option<regex::Regex>,
    /// Regex matched against cel-go's answer as the report prints it
    /// (`Value(...)`, or `Error("... (compile)")`).
    #[serde(default, rename = "cel-go", with = "serde_regex")]
    pub oracle: Option<regex::Regex>,
    /// Why katalog answers differently.
    pub reason: String,
}

impl Known {
    fn covers(&self, expr: &str, oracle: &Answer) -> bool {
        self.expr.as_ref().is_none_or(|r| r.is_match(expr))
            && self
                .oracle
                .as_ref()
                .is_none_or(|r| r.is_match(&format!("{oracle:?}")))
    }

    /// What the report prints for this entry.
    pub fn label(&self) -> String {
        let show = |r: &Option<regex::Regex>| r.as_ref().map(|r| r.as_str().to_owned());
        [show(&self.expr), show(&self.oracle)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" / ")
    }
}

mod serde_regex {
    use serde::Deserialize;

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<regex::Regex>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| regex::Regex::new(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

pub fn known_differences(repo: &Path) -> Vec<Known> {
    let path = repo.join("testdata/cel/oracle-differences.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let known: Vec<Known> =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for k in &known {
        assert!(
            k.expr.is_some() || k.oracle.is_some(),
            "{}: an entry needs `expr` or `cel-go` ({})",
            path.display(),
            k.reason
        );
    }
    known
}

/// The index of the first known difference that covers the case.
pub fn covered(known: &[Known], expr: &str, oracle: &Answer) -> Option<usize> {
    known.iter().position(|k| k.covers(expr, oracle))
}

/// Whether the oracle refused `answer` because the expression uses cel-go's
/// math or base64 extension, which Kubernetes' environment does not have.
pub fn outside_kubernetes(answer: &Answer) -> bool {
    matches!(answer, Answer::Error(e)
        if e.contains("undeclared reference to 'math'") || e.contains("undeclared reference to 'base64'"))
}

/// Asks the oracle, and asks again with cel-go's math and base64 extensions
/// the cases that use them (katalog has them, Kubernetes does not).
pub fn ask_all(binary: &str, cases: &[Case]) -> (Vec<Answer>, usize) {
    let mut answers = ask(binary, &[], cases);
    let outside: Vec<usize> = (0..cases.len())
        .filter(|&i| outside_kubernetes(&answers[i]))
        .collect();
    let again: Vec<Case> = outside.iter().map(|&i| cases[i].clone()).collect();
    for (i, a) in outside
        .iter()
        .zip(ask(binary, &["--math-and-base64"], &again))
    {
        answers[*i] = a;
    }
    (answers, outside.len())
}

/// Compares katalog with the oracle on every case; returns the report lines
/// of new differences, and prints the count per known difference.
pub fn compare(label: &str, cases: &[Case], oracle: &[Answer], known: &[Known]) -> Vec<String> {
    let mut counts = vec![0usize; known.len()];
    let mut new = Vec::new();
    let mut agreed = 0usize;
    for (case, want) in cases.iter().zip(oracle) {
        let (native, interpreter) = katalog(case);
        let mut wrong = Vec::new();
        if !native.agrees(want) {
            wrong.push(("evaluator first", &native));
        }
        if !interpreter.agrees(want) {
            wrong.push(("interpreter alone", &interpreter));
        }
        if wrong.is_empty() {
            agreed += 1;
            continue;
        }
        match covered(known, &case.expr, want) {
            Some(i) => counts[i] += 1,
            None => {
                let bindings: serde_json::Map<String, Value> =
                    case.bindings.iter().cloned().collect();
                let got: Vec<String> = wrong
                    .iter()
                    .map(|(how, a)| format!("{how}: {a:?}"))
                    .collect();
                new.push(format!(
                    "`{}`\n    with {}\n    cel-go: {want:?}\n    katalog {}",
                    case.expr,
                    Value::Object(bindings),
                    got.join("\n    katalog ")
                ));
            }
        }
    }
    if let Some(path) = std::env::var_os("CEL_ORACLE_REPORT") {
        std::fs::write(&path, new.join("\n")).expect("the report file");
    }
    let differ: usize = counts.iter().sum();
    eprintln!(
        "{label}: {} cases, {agreed} agree with cel-go on both evaluators, {differ} known differences, {} new",
        cases.len(),
        new.len()
    );
    for (k, n) in known.iter().zip(&counts) {
        if *n > 0 {
            eprintln!("  {n:6}  {}", k.label());
        }
    }
    new
}
