//! `katalog test`: run test-suite files and report per case.

use std::path::{Path, PathBuf};

use katalog_lang::Source;
use katalog_lang::suite::{CaseResult, run_case};
use serde::Serialize;

use crate::exit::{Exit, NO, USAGE};
use katalog_runtime::serving::files;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Report {
    Table,
    Json,
    Junit,
}

#[derive(Serialize)]
struct SuiteResult {
    file: String,
    suite: String,
    cases: Vec<CaseResult>,
}

/// Suite files named directly, or `*.test.yaml` / `*.test.yml` found under directories.
fn suite_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Exit> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            collect(p, &mut out)
                .map_err(|e| Exit(format!("error: failed to read {}: {e}", p.display()), USAGE))?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(Exit(
                format!("error: {} does not exist", p.display()),
                USAGE,
            ));
        }
    }
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            collect(&p, out)?;
        } else if name.ends_with(".test.yaml") || name.ends_with(".test.yml") {
            out.push(p);
        }
    }
    Ok(())
}

/// `katalog test` from its flags.
pub(crate) fn command(args: crate::args::TestArgs) -> Result<(), Exit> {
    let crate::args::TestArgs {
        paths,
        output,
        fail_only,
        case,
        fuzz,
        seed,
        live,
    } = args;
    run(
        &paths,
        output,
        fail_only,
        case.as_deref(),
        fuzz.map(|count| katalog_lang::fuzz::FuzzOptions { count, seed }),
        live.fetch()?.as_ref(),
    )
}

pub fn run(
    paths: &[PathBuf],
    output: Report,
    fail_only: bool,
    select: Option<&str>,
    fuzz: Option<katalog_lang::fuzz::FuzzOptions>,
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<(), Exit> {
    let select = select
        .map(regex::Regex::new)
        .transpose()
        .map_err(|e| Exit(format!("error: --case is not a valid regex: {e}"), USAGE))?;
    let mut results = Vec::new();
    // Each Katalog once, in the order the suites name them.
    let mut fuzzed: Vec<(PathBuf, katalog_lang::fuzz::FuzzReport)> = Vec::new();
    for file in suite_files(paths)? {
        let text = std::fs::read_to_string(&file).map_err(|e| {
            Exit(
                format!("error: failed to read {}: {e}", file.display()),
                USAGE,
            )
        })?;
        let source = Source::new(file.display().to_string(), text);
        let suites = katalog_lang::suite::load(&source).map_err(|d| Exit(d.render(), USAGE))?;
        let base = file.parent().unwrap_or(Path::new("."));
        for suite in suites {
            let katalog_path = base.join(&suite.spec.katalog);
            // Unreadable: a usage error; not compiling: its own code (see `exit`).
            let sources = files::read_katalog(&katalog_path)?;
            let ir = match live {
                Some(crds) => katalog_lang::compile_with_live_crds(&sources, |r| crds.read(r))?,
                None => files::compile_katalog(&sources)?,
            };
            for w in &ir.admission.warnings {
                errln!("{}", w.render());
            }
            if let Some(options) = fuzz
                && !fuzzed.iter().any(|(p, _)| *p == katalog_path)
            {
                let report = katalog_lang::fuzz::fuzz(&ir, options);
                fuzzed.push((katalog_path.clone(), report));
            }
            let cases = suite
                .spec
                .cases
                .iter()
                .filter(|c| select.as_ref().is_none_or(|re| re.is_match(&c.name)))
                .map(|c| run_case(&ir, c))
                .collect();
            results.push(SuiteResult {
                file: file.display().to_string(),
                suite: suite.metadata.name.clone(),
                cases,
            });
        }
    }
    let total: usize = results.iter().map(|s| s.cases.len()).sum();
    let failed: usize = results
        .iter()
        .flat_map(|s| &s.cases)
        .filter(|c| !c.passed)
        .count();
    match output {
        Report::Table => print_table(&results, fail_only, total, failed),
        Report::Json => {
            let shown: Vec<SuiteResult> = results
                .into_iter()
                .map(|s| SuiteResult {
                    cases: s
                        .cases
                        .into_iter()
                        .filter(|c| !fail_only || !c.passed)
                        .collect(),
                    ..s
                })
                .collect();
            outln!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "suites": shown, "passed": total - failed, "failed": failed
                }))
                .unwrap_or_default()
            );
        }
        Report::Junit => print_junit(&results, fail_only),
    }
    let mut fuzz_findings = 0;
    for (katalog, report) in &fuzzed {
        // The suite report owns standard output in the json and junit forms.
        let text = if !report.trips.is_empty() {
            format!("fuzz {}:\n{report}", katalog.display())
        } else if !report.skipped.is_empty() {
            format!(
                "fuzz {}: no resource names a CRD (`crd:`), nothing to generate from\n",
                katalog.display()
            )
        } else {
            continue;
        };
        match output {
            Report::Table => out!("{text}"),
            Report::Json | Report::Junit => err!("{text}"),
        }
        fuzz_findings += report.findings();
    }
    if failed > 0 || fuzz_findings > 0 {
        return Err(Exit::quiet(NO));
    }
    // A run of `--fuzz` alone (suites with `cases: []`) is work done.
    let fuzz_ran = fuzzed.iter().any(|(_, r)| !r.trips.is_empty());
    if total == 0 && !fuzz_ran {
        return Err(Exit("error: no test case ran".into(), USAGE));
    }
    Ok(())
}

fn print_table(results: &[SuiteResult], fail_only: bool, total: usize, failed: usize) {
    for s in results {
        for c in &s.cases {
            if fail_only && c.passed {
                continue;
            }
            let mark = if c.passed { "PASS" } else { "FAIL" };
            outln!("{mark}  {} / {} / {}", s.file, s.suite, c.name);
            for f in &c.failures {
                outln!("      {f}");
            }
        }
    }
    outln!("{} passed, {} failed", total - failed, failed);
}

pub(crate) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn print_junit(results: &[SuiteResult], fail_only: bool) {
    outln!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    outln!("<testsuites>");
    for s in results {
        let failed = s.cases.iter().filter(|c| !c.passed).count();
        outln!(
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{failed}\">",
            xml_escape(&s.suite),
            xml_escape(&s.file),
            s.cases.len()
        );
        for c in &s.cases {
            if fail_only && c.passed {
                continue;
            }
            if c.passed {
                outln!("    <testcase name=\"{}\"/>", xml_escape(&c.name));
            } else {
                outln!("    <testcase name=\"{}\">", xml_escape(&c.name));
                outln!(
                    "      <failure message=\"{}\"/>",
                    xml_escape(&c.failures.join("; "))
                );
                outln!("    </testcase>");
            }
        }
        outln!("  </testsuite>");
    }
    outln!("</testsuites>");
}
