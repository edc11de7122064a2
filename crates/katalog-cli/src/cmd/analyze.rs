//! `katalog analyze`: per resource and direction, where each field goes.

use std::path::Path;

use katalog_runtime::serving::files;

use crate::args::*;
use crate::cmd::*;
use crate::exit::{self, Exit, KATALOG, NO};
use crate::output::{plural, print_values};

pub(crate) fn run(args: AnalyzeArgs) -> Result<(), Exit> {
    let AnalyzeArgs {
        mut katalogs,
        katalog,
        output,
        live,
    } = args;
    katalogs.extend(katalog);
    let live = live.fetch()?;
    let mut worst = exit::SUCCESS;
    let mut json = Vec::new();
    for path in &katalogs {
        let analyzed = files::read_katalog(path)
            .map_err(Exit::from)
            .and_then(|sources| analyze_sources(&sources, live.as_ref()).map_err(Exit::from));
        match analyzed {
            Ok((_, analysis)) => {
                for d in analysis.diagnostics.iter() {
                    errln!("{}", d.render());
                }
                if analysis.has_errors() {
                    worst = worst.max(NO);
                }
                match output {
                        AnalyzeFormat::Table => {
                            out!("{}", analysis_table(path, &analysis))
                        }
                        AnalyzeFormat::Json => json.push(serde_json::json!({
                            "katalog": path.display().to_string(),
                            "resources": analysis.resources,
                            "errors": analysis.diagnostics.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                        })),
                    }
            }
            Err(Exit(message, code)) => {
                err!("{message}");
                worst = worst.max(if code == KATALOG { NO } else { code });
            }
        }
    }
    if let AnalyzeFormat::Json = output {
        print_values(&json, Format::Json);
    }
    match worst {
        exit::SUCCESS => Ok(()),
        code => Err(Exit::quiet(code)),
    }
}

/// `katalog analyze -o table`: per resource, each spoke and direction with
/// its verdict, the fields by fate, then each rule's verdict.
pub(crate) fn analysis_table(path: &Path, analysis: &katalog_lang::analysis::Analysis) -> String {
    let mut out = String::new();
    if analysis.resources.is_empty() {
        out.push_str(&format!(
            "{}: no resource with a `crd:` to analyse\n",
            path.display()
        ));
    }
    for r in &analysis.resources {
        out.push_str(&format!("{}/{} (hub {})\n", r.group, r.kind, r.hub));
        for d in &r.directions {
            let verdict = match (d.errors, d.lossless) {
                (0, true) => "lossless".to_string(),
                (0, false) => "lossy (acknowledged)".to_string(),
                (n, _) => format!("{n} error{}", plural(n)),
            };
            out.push_str(&format!(
                "  {} -> {}: {verdict}; {} identical, {} claimed, {} stashed, {} unclaimed\n",
                d.from,
                d.to,
                d.identical.len(),
                d.claimed.len(),
                d.stashed.len(),
                d.unclaimed.len()
            ));
            for u in &d.unclaimed {
                out.push_str(&format!("    unclaimed  {u}\n"));
            }
            for v in &d.rules {
                out.push_str(&format!(
                    "    {:<9}  {}: {}\n",
                    if v.lossless { "lossless" } else { "lossy" },
                    v.rule,
                    v.why
                ));
            }
        }
    }
    out
}
