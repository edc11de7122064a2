//! `katalog admit`: objects admitted offline, with the verdict of each.

use katalog_lang::Ir;
use katalog_lang::admission::eval::{Endpoint, SimulatedRequest, Verdict};
use katalog_lang::document::Operation;
use serde_json::Value;

use crate::args::*;
use crate::cmd::batch;
use crate::cmd::*;
use crate::exit::{Exit, NO, USAGE};
use crate::input::{self, read_inputs};
use crate::output::{plural, print_jsonpath};

pub(crate) fn run(args: AdmitArgs) -> Result<(), Exit> {
    let AdmitArgs {
        katalog,
        operation,
        old,
        user,
        groups,
        namespace,
        resource,
        subresource,
        namespace_object,
        output,
        objects,
        file,
    } = args;
    let ir = load_ir(&katalog)?;
    let one = |path: &str, flag: &str| -> Result<Value, Exit> {
        let mut objects = input::read_all(path)?;
        match objects.len() {
            1 => Ok(objects.remove(0)),
            n => Err(Exit(
                format!("error: {flag}{path} holds {n} objects; give exactly one"),
                USAGE,
            )),
        }
    };
    let delete = matches!(operation, Some(OperationArg::Delete));
    let old_object = old
        .as_ref()
        .map(|p| one(&p.display().to_string(), "--old "))
        .transpose()?;
    let namespace_object = namespace_object
        .as_ref()
        .map(|p| one(&p.display().to_string(), "--namespace-object "))
        .transpose()?;
    let base = SimulatedRequest {
        resource,
        operation: operation.map(|o| match o {
            OperationArg::Create => Operation::Create,
            OperationArg::Update => Operation::Update,
            OperationArg::Delete => Operation::Delete,
            OperationArg::Connect => Operation::Connect,
        }),
        subresource,
        namespace,
        user,
        groups,
        object: None,
        old_object,
        namespace_object,
        dry_run: false,
    };
    let files = objects.files(file.as_deref())?;
    admit(&ir, base, delete, &output, &files, objects.limits())
}

/// `katalog admit`: objects are evaluated as they are read. One plain
/// object gets the detailed verdict; a List or several objects one result
/// each and a summary.
pub(crate) fn admit(
    ir: &Ir,
    mut base: SimulatedRequest,
    delete: bool,
    output: &Output,
    files: &[String],
    limits: input::Limits,
) -> Result<(), Exit> {
    use batch::{BatchFormat, BatchPrinter};
    let format = match output {
        Output::Text => BatchFormat::Text,
        Output::Yaml => BatchFormat::Yaml,
        Output::Json => BatchFormat::Json,
        Output::Junit => BatchFormat::Junit,
        Output::JsonPath(_) => BatchFormat::Collect,
    };
    let suite = files
        .first()
        .map_or("<stdin>", |f| input::display_name(f))
        .to_string();
    // `--operation DELETE --old FILE -o junit`: the old object is the one reported.
    if files.is_empty() {
        if format == BatchFormat::Junit
            && delete
            && let Some(old) = base.old_object.take()
        {
            let mut printer = BatchPrinter::new(format);
            printer.result(batch::admit_one(ir, &base, 0, old, delete));
            return printer.finish(&suite);
        }
        return admit_single(ir, base, None, delete, output);
    }
    let with_old = base.old_object.is_some();
    let mut printer = BatchPrinter::new(format.clone());
    let mut pending: Option<Value> = None;
    let mut batch = format == BatchFormat::Junit;
    let mut count = 0usize;
    let mut any = false;
    let mut lists = false;
    read_inputs(files, limits, &mut |e| {
        any = true;
        match e {
            input::Event::ListBegin(_) => lists = true,
            input::Event::ListEnd(_) => {}
            input::Event::Object(v) => {
                count += 1;
                if with_old {
                    // Counted only: `--old` describes one object.
                    if count == 1 {
                        pending = Some(v);
                    }
                    return Ok(());
                }
                if !batch && (lists || pending.is_some()) {
                    batch = true;
                }
                if !batch {
                    pending = Some(v);
                    return Ok(());
                }
                if let Some(first) = pending.take() {
                    printer.result(batch::admit_one(ir, &base, 0, first, delete));
                }
                printer.result(batch::admit_one(ir, &base, count - 1, v, delete));
            }
        }
        Ok(())
    })?;
    if with_old && (lists || count != 1) {
        return Err(Exit(
            format!(
                "error: --old is the object before the change of one object, but the input holds {count} objects; admit them one at a time"
            ),
            USAGE,
        ));
    }
    if !any || (count == 0 && !lists) {
        let name = if files.len() == 1 {
            input::display_name(&files[0]).to_string()
        } else {
            files.join(", ")
        };
        return Err(Exit(format!("error: {name} holds no object"), USAGE));
    }
    if lists && !batch {
        batch = true;
    }
    if batch {
        if let Some(first) = pending.take() {
            printer.result(batch::admit_one(ir, &base, 0, first, delete));
        }
        let outcome = printer.finish(&suite);
        if let Output::JsonPath(template) = output {
            let value = serde_json::json!({
                "results": printer.collected,
                "summary": printer.summary,
            });
            print_jsonpath(template, &value)?;
        }
        return outcome;
    }
    admit_single(ir, base, pending, delete, output)
}

/// One plain object: the detailed verdict.
pub(crate) fn admit_single(
    ir: &Ir,
    base: SimulatedRequest,
    object: Option<Value>,
    delete: bool,
    output: &Output,
) -> Result<(), Exit> {
    let mut request = base;
    request.object = object;
    // A DELETE carries the object being deleted as the old object.
    if delete && request.old_object.is_none() {
        request.old_object = request.object.take();
    }
    let mut defaulted = None;
    for o in [&mut request.object, &mut request.old_object]
        .into_iter()
        .flatten()
    {
        if let Some(problem) = batch::not_an_object(o) {
            return Err(Exit(format!("error: {problem}"), USAGE));
        }
        defaulted = defaulted.or(batch::default_namespace(
            ir,
            request.namespace.as_deref(),
            o,
        ));
    }
    let input = request
        .to_input(ir)
        .map_err(|e| Exit(format!("error: {e}"), USAGE))?;
    let verdict = katalog_lang::admission::eval::evaluate(ir, &input, Endpoint::All);
    match output {
        Output::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&verdict).unwrap_or_default()
        ),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&verdict).unwrap_or_default()),
        Output::JsonPath(template) => print_jsonpath(
            template,
            &serde_json::to_value(&verdict).unwrap_or_default(),
        )?,
        Output::Text | Output::Junit => {
            print_verdict(&verdict);
            if let Some(ns) = defaulted {
                outln!("namespace: {ns} (the object has none: kubectl's default, or --namespace)");
            }
        }
    }
    if verdict.allowed {
        Ok(())
    } else {
        Err(Exit::quiet(NO))
    }
}

pub(crate) fn print_verdict(v: &Verdict) {
    outln!("{}", if v.allowed { "ALLOWED" } else { "DENIED" });
    let n = v.matched.len();
    if n == 0 {
        outln!("matched: no rule");
    } else {
        outln!("matched: {n} rule{} ({})", plural(n), v.matched.join(", "));
    }
    for d in &v.denials {
        outln!("  deny  [{}] {}", d.rule, d.message);
    }
    for w in batch::warning_lines(v) {
        outln!("  warn  {w}");
    }
    for a in &v.audits {
        outln!("  audit [{}] {}", a.rule, a.message);
    }
    if !v.mutations.is_empty() {
        outln!("mutations: {}", v.mutations.join(", "));
        outln!("patch:");
        for op in &v.patch {
            outln!("  {}", serde_json::to_string(op).unwrap_or_default());
        }
    }
    if let Some(patched) = &v.patched {
        outln!("patched object:");
        out!("{}", serde_saphyr::to_string(patched).unwrap_or_default());
    }
}
