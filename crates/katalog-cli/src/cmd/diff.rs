//! `katalog diff`: what changes in the analysis between two Katalogs.

use std::path::Path;

use katalog_runtime::serving::files;

use crate::args::*;
use crate::cmd::*;
use crate::exit::{Exit, NO};

pub(crate) fn run(args: DiffArgs) -> Result<(), Exit> {
    let DiffArgs {
        before,
        after,
        live,
    } = args;
    let live = live.fetch()?;
    let (a, b) = (
        analysis_facts(&before, live.as_ref())?,
        analysis_facts(&after, live.as_ref())?,
    );
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let empty = std::collections::BTreeSet::new();
    let mut differ = false;
    for key in keys {
        let (fa, fb) = (a.get(key).unwrap_or(&empty), b.get(key).unwrap_or(&empty));
        if fa == fb {
            continue;
        }
        differ = true;
        outln!("{key}");
        for f in fa.difference(fb) {
            outln!("  - {f}");
        }
        for f in fb.difference(fa) {
            outln!("  + {f}");
        }
    }
    if differ {
        Err(Exit::quiet(NO))
    } else {
        outln!("no difference in coverage, claims, lossless flags or errors");
        Ok(())
    }
}

/// The compiled Katalog, warnings left to the caller.
/// What `katalog diff` compares: per resource, spoke and direction, one
/// line per fact (`claimed spec.x`, `lossless`, ...), and the errors
/// (without their location, which any edit moves).
pub(crate) fn analysis_facts(
    path: &Path,
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>, Exit> {
    let sources = files::read_katalog(path)?;
    let mut facts: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let errors = match analyze_sources(&sources, live) {
        Ok((_, analysis)) => {
            for r in &analysis.resources {
                for d in &r.directions {
                    let set = facts
                        .entry(format!("{}/{} {} -> {}", r.group, r.kind, d.from, d.to))
                        .or_default();
                    set.insert(if d.lossless { "lossless" } else { "lossy" }.to_string());
                    for (what, paths) in [
                        ("identical", &d.identical),
                        ("stashed", &d.stashed),
                        ("unclaimed", &d.unclaimed),
                    ] {
                        set.extend(paths.iter().map(|p| format!("{what} {p}")));
                    }
                    set.extend(d.claimed.iter().map(|c| format!("claimed {}", c.path)));
                }
            }
            analysis.diagnostics
        }
        Err(diags) => diags,
    };
    let set = facts.entry("errors".to_string()).or_default();
    set.extend(errors.iter().map(|d| match &d.help {
        Some(h) => format!("{} ({h})", d.message),
        None => d.message.clone(),
    }));
    facts.retain(|_, v| !v.is_empty());
    Ok(facts)
}
