//! `katalog suggest`: draft conversion rules for the fields that have no place.

use katalog_runtime::serving::files;

use crate::args::*;
use crate::cmd::*;
use crate::exit::{Exit, NO};

pub(crate) fn run(args: SuggestArgs) -> Result<(), Exit> {
    let SuggestArgs {
        path,
        katalog,
        live,
    } = args;
    let katalog = path.or(katalog).unwrap_or_default();
    let live = live.fetch()?;
    let sources = files::read_katalog(&katalog)?;
    let (_, analysis) =
        analyze_sources(&sources, live.as_ref()).map_err(|d| Exit::from(d).with_code(NO))?;
    outln!("# katalog suggest: draft rules, not checked; review each before adding it.");
    let mut any = false;
    for r in &analysis.resources {
        let mut by_spoke: std::collections::BTreeMap<
            &str,
            Vec<&katalog_lang::analysis::Suggestion>,
        > = Default::default();
        for d in &r.directions {
            let spoke = if d.direction == "down" {
                &d.to
            } else {
                &d.from
            };
            let list = by_spoke.entry(spoke.as_str()).or_default();
            for s in &d.suggestions {
                if !list
                    .iter()
                    .any(|x| x.rule == s.rule && x.for_each == s.for_each)
                {
                    list.push(s);
                }
            }
        }
        by_spoke.retain(|_, l| !l.is_empty());
        if by_spoke.is_empty() {
            continue;
        }
        any = true;
        outln!(
            "# {}/{} (hub {}): under `conversion:`",
            r.group,
            r.kind,
            r.hub
        );
        for (spoke, list) in by_spoke {
            outln!("{spoke}:");
            for s in list {
                match &s.for_each {
                    None => outln!("  - {}  # suggested: {}", s.rule, s.why),
                    Some(p) => outln!(
                        "  # inside the `forEach` over `{p}`:\n  # - {}  # suggested: {}",
                        s.rule,
                        s.why
                    ),
                }
            }
        }
    }
    if !any {
        outln!("# nothing to suggest: every field has a place");
    }
    Ok(())
}
