//! `katalog convert`: objects converted offline to `--to`, as the server would.

use katalog_lang::Ir;
use serde_json::Value;

use crate::args::*;
use crate::cmd::batch;
use crate::cmd::*;
use crate::exit::{Exit, NO, USAGE};
use crate::input::read_inputs;
use crate::output::{self, print_jsonpath};

pub(crate) fn run(args: ConvertArgs) -> Result<(), Exit> {
    let ConvertArgs {
        katalog,
        to,
        output,
        objects,
        namespace,
        file,
    } = args;
    let ir = load_ir(&katalog)?;
    check_to(&ir, &to)?;
    let mut files = objects.files(file.as_deref())?;
    if files.is_empty() {
        files.push("-".into());
    }
    let shape = match output {
        Output::Json => output::Shape::Json,
        Output::JsonPath(_) => output::Shape::Collect,
        _ => output::Shape::Yaml,
    };
    let mut run = batch::ConvertRun {
        ir: &ir,
        to: &to,
        namespace: namespace.as_deref(),
        writer: output::ObjectWriter::new(shape),
        index: 0,
        failures: 0,
    };
    read_inputs(&files, objects.limits(), &mut |e| run.event(e))?;
    run.writer.finish();
    if let Output::JsonPath(template) = &output {
        let value =
            std::mem::replace(&mut run.writer, output::ObjectWriter::new(shape)).into_value();
        print_jsonpath(template, &value)?;
    }
    if run.failures == 0 {
        Ok(())
    } else {
        Err(Exit::quiet(NO))
    }
}

/// `--to` names a version no resource of the Katalog has: a usage error,
/// said once before any object is read.
pub(crate) fn check_to(ir: &Ir, to: &str) -> Result<(), Exit> {
    let (group, version) = match to.rsplit_once('/') {
        Some((g, v)) => (Some(g), v),
        None => (None, to),
    };
    let fits = ir
        .resources
        .iter()
        .filter(|r| group.is_none_or(|g| r.group == g))
        .any(|r| r.version(version).is_some());
    if fits {
        return Ok(());
    }
    let mut known: Vec<String> = ir
        .resources
        .iter()
        .flat_map(|r| {
            r.versions
                .iter()
                .map(move |v| format!("{}/{}", r.group, v.name))
        })
        .collect();
    // Each once, in the Katalog's order (two kinds of a group share versions).
    let mut seen = std::collections::HashSet::new();
    known.retain(|v| seen.insert(v.clone()));
    Err(Exit(
        format!(
            "error: --to {to}: no resource of the Katalog has this version (it has {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ),
        USAGE,
    ))
}

/// An object to convert with `--to VERSION` that has no apiVersion to take
/// the group from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoApiVersion;

impl std::fmt::Display for NoApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the object has no apiVersion")
    }
}

impl std::error::Error for NoApiVersion {}

/// `--to v2` means the object's group at v2; a full apiVersion is taken as is.
pub(crate) fn desired_api_version(
    ir: &Ir,
    object: &Value,
    to: &str,
) -> Result<String, NoApiVersion> {
    if to.contains('/') {
        return Ok(to.to_string());
    }
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(NoApiVersion)?;
    let (group, _) = katalog_lang::convert::split_api_version(api_version);
    let _ = ir;
    Ok(format!("{group}/{to}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn to_a_version_takes_the_group_of_the_object() {
        let ir = katalog_lang::compile_sources(&[katalog_lang::Source::new(
            "crontab.yaml",
            include_str!("../../../../katalogs/crontab.yaml"),
        )])
        .expect("compiles");
        let object = serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab"});
        assert_eq!(
            super::desired_api_version(&ir, &object, "v2"),
            Ok("stable.example.com/v2".to_string())
        );
        let err = super::desired_api_version(&ir, &serde_json::json!({}), "v2").unwrap_err();
        assert_eq!(err, super::NoApiVersion);
        assert_eq!(err.to_string(), "the object has no apiVersion");
    }

    /// `--to` a version no resource has lists each known version once, in
    /// order, though two kinds of a group share them.
    #[test]
    fn an_unknown_to_version_lists_each_known_version_once() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec:\n  resources:\n    - {group: a.example.com, kind: A, plural: as, hub: v1, versions: [v1, v2]}\n    - {group: b.example.com, kind: C, plural: cs, hub: v1, versions: [v1]}\n    - {group: a.example.com, kind: B, plural: bs, hub: v1, versions: [v1, v2]}\n";
        let ir = katalog_lang::compile_sources(&[katalog_lang::Source::new("k.yaml", text)])
            .expect("compiles");
        let crate::exit::Exit(message, _) = super::check_to(&ir, "v9").unwrap_err();
        assert_eq!(
            message,
            "error: --to v9: no resource of the Katalog has this version (it has a.example.com/v1, a.example.com/v2, b.example.com/v1)"
        );
    }
}
