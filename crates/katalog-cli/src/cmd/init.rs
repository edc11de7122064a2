//! `katalog init`: a first Katalog drafted from a CRD file.

use katalog_runtime::serving::files;

use crate::args::*;
use crate::exit::{Exit, USAGE};

pub(crate) fn run(args: InitArgs) -> Result<(), Exit> {
    let InitArgs { crd, name } = args;
    let text = std::fs::read_to_string(&crd).map_err(|e| {
        Exit(
            format!("error: failed to read {}: {e}\n", crd.display()),
            USAGE,
        )
    })?;
    let crds: Vec<katalog_lang::schema::Crd> = katalog_lang::yaml::read_documents(&text)
        .map_err(|e| {
            Exit(
                format!(
                    "error: failed to parse {}: {}\n",
                    crd.display(),
                    e.message()
                ),
                USAGE,
            )
        })?
        .iter()
        .filter_map(|root| {
            let loc = katalog_lang::source::Loc {
                file: crd.display().to_string().into(),
                line: root.line,
                column: root.column,
            };
            katalog_lang::schema::Crd::from_manifest(&root.to_value(), loc)
        })
        .collect();
    let Some(first) = crds.first() else {
        return Err(Exit(
            format!(
                "error: {} holds no CustomResourceDefinition\n",
                crd.display()
            ),
            USAGE,
        ));
    };
    let name = name.unwrap_or_else(|| first.plural.clone());
    let file_name = crd
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let render = |notes: &[std::collections::BTreeMap<String, Vec<String>>]| {
        let mut out = format!(
            "# yaml-language-server: $schema=https://katalog.dev/schemas/katalog.v1alpha1.json\n#\n# Written by `katalog init --crd {file_name}`: a first Katalog to complete.\napiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata:\n  name: {name}\nspec:\n  resources:\n"
        );
        for (i, c) in crds.iter().enumerate() {
            let empty = Default::default();
            out.push_str(&katalog_lang::analysis::init_katalog(
                c,
                &file_name,
                notes.get(i).unwrap_or(&empty),
            ));
        }
        out
    };
    let draft = render(&[]);
    // Analyse the draft as if it lived next to the CRD file.
    let here = crd.with_file_name(format!("{name}.katalog.yaml"));
    let source = katalog_lang::Source::new(here.display().to_string(), draft.clone());
    let mut notes = vec![std::collections::BTreeMap::new(); crds.len()];
    if let Ok((_, analysis)) = katalog_lang::analyze_with_crds(&[source], files::read_crd) {
        for r in &analysis.resources {
            let Some(i) = crds
                .iter()
                .position(|c| c.group == r.group && c.kind == r.kind)
            else {
                continue;
            };
            for d in &r.directions {
                let spoke = if d.direction == "down" {
                    &d.to
                } else {
                    &d.from
                };
                let entry: &mut Vec<String> = notes[i].entry(spoke.clone()).or_default();
                for u in &d.unclaimed {
                    entry.push(format!("`{u}` of {} has no place in {}", d.from, d.to));
                }
                if d.errors > d.unclaimed.len() {
                    entry.push(format!(
                        "{} more problem(s) {} -> {}: see `katalog check`",
                        d.errors - d.unclaimed.len(),
                        d.from,
                        d.to
                    ));
                }
            }
        }
    }
    out!("{}", render(&notes));
    Ok(())
}
