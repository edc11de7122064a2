//! Several objects in one input: multi-document YAML, a JSON array, a
//! `kind: List` (what `kubectl get -o yaml` prints) or a typed `*List`;
//! `admit` and `convert` take them one by one.

use katalog_lang::Ir;
use katalog_lang::admission::eval::{Endpoint, SimulatedRequest, Verdict};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::exit::{Exit, NO, USAGE};
use crate::input::Event;
use crate::output::{ObjectWriter, indent_rest, yaml_item};

/// `Pod team-a/web`, `Namespace team-a`: how an object is named in reports.
pub fn describe(v: &Value) -> String {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("<no kind>");
    let meta = |k: &str| v.pointer(&format!("/metadata/{k}")).and_then(Value::as_str);
    let name = meta("name")
        .map(str::to_string)
        .or_else(|| meta("generateName").map(|g| format!("{g}*")))
        .unwrap_or_else(|| "<no name>".into());
    match meta("namespace") {
        Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}

/// Identity of one object in JSON reports.
#[derive(Serialize)]
pub struct Identity {
    pub index: usize,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl Identity {
    pub fn of(index: usize, v: &Value) -> Self {
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Identity {
            index,
            kind: s("/kind"),
            namespace: s("/metadata/namespace"),
            name: s("/metadata/name"),
        }
    }
}

/// The verdict on one object of a batch, or why it could not be evaluated.
#[derive(Serialize)]
pub struct AdmitResult {
    #[serde(flatten)]
    pub id: Identity,
    #[serde(skip)]
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl AdmitResult {
    fn status(&self) -> &'static str {
        match &self.verdict {
            None => "ERROR",
            Some(v) if !v.allowed => "DENIED",
            Some(v) if !v.warnings.is_empty() => "WARNED",
            Some(_) => "ALLOWED",
        }
    }
}

#[derive(Serialize, Default)]
pub struct Summary {
    pub objects: usize,
    /// Admitted, with or without warnings.
    pub allowed: usize,
    /// Of the allowed, those with warnings.
    pub warned: usize,
    pub denied: usize,
    /// Objects that could not be turned into a request.
    pub errors: usize,
}

impl Summary {
    #[cfg(test)]
    pub fn of(results: &[AdmitResult]) -> Self {
        let mut s = Summary::default();
        for r in results {
            s.add(r);
        }
        s
    }

    /// Count one more result.
    pub fn add(&mut self, r: &AdmitResult) {
        self.objects += 1;
        match &r.verdict {
            None => self.errors += 1,
            Some(v) if !v.allowed => self.denied += 1,
            Some(v) => {
                self.allowed += 1;
                if !v.warnings.is_empty() {
                    self.warned += 1;
                }
            }
        }
    }

    /// `3 objects: 2 allowed (1 with warnings), 1 denied`.
    pub fn line(&self) -> String {
        let mut out = format!(
            "{} object{}: {} allowed",
            self.objects,
            crate::output::plural(self.objects),
            self.allowed
        );
        if self.warned > 0 {
            out.push_str(&format!(" ({} with warnings)", self.warned));
        }
        out.push_str(&format!(", {} denied", self.denied));
        if self.errors > 0 {
            out.push_str(&format!(", {} not evaluated", self.errors));
        }
        out
    }

    /// Any object that could not be evaluated is a usage error; else any
    /// denial is the negative answer.
    pub fn outcome(&self) -> Result<(), Exit> {
        if self.errors > 0 {
            Err(Exit::quiet(USAGE))
        } else if self.denied > 0 {
            Err(Exit::quiet(NO))
        } else {
            Ok(())
        }
    }
}

fn rules_matched(v: &Verdict) -> String {
    let n = v.matched.len();
    format!("{n} rule{} matched", crate::output::plural(n))
}

/// Every warning in full, `[rule] message` (the server cuts them to what
/// the apiserver shows; a terminal need not).
pub fn warning_lines(v: &Verdict) -> Vec<String> {
    v.warnings
        .iter()
        .map(|w| format!("[{}] {}", w.rule, w.message))
        .collect()
}

/// Is an object of this kind in a namespace? The Katalog's resources, then
/// Kubernetes' built-in ones; any other kind is taken as namespaced, as
/// most custom resources are.
fn namespaced(ir: &Ir, object: &Value) -> bool {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, _) = katalog_lang::convert::split_api_version(api_version);
    if let Some(r) = ir.resource(group, kind) {
        return r.scope == katalog_lang::document::Scope::Namespaced;
    }
    katalog_lang::admission::known::builtin()
        .iter()
        .find(|k| k.group == group && k.kind == kind)
        .is_none_or(|k| k.namespaced)
}

/// As kubectl sends it: a namespaced object without `metadata.namespace`
/// is in `--namespace`, else `default`. Returns the namespace it was given.
pub fn default_namespace(ir: &Ir, namespace: Option<&str>, object: &mut Value) -> Option<String> {
    let has = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    if has || !object.is_object() || !namespaced(ir, object) {
        return None;
    }
    let ns = namespace.unwrap_or("default").to_string();
    let meta = object
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = meta {
        m.insert("namespace".into(), Value::String(ns.clone()));
        Some(ns)
    } else {
        None
    }
}

/// Why an object cannot be admitted before its rules are looked at.
pub fn not_an_object(object: &Value) -> Option<String> {
    match object.get("kind").and_then(Value::as_str) {
        Some(k @ ("AdmissionReview" | "ConversionReview")) => Some(format!(
            "this is a review ({k}), not an object to admit; `katalog review --katalog K FILE` answers it as the server would"
        )),
        _ => ["apiVersion", "kind"]
            .into_iter()
            .find(|k| !object.get(k).is_some_and(Value::is_string))
            // The apiserver never sends such an object; saying so beats an
            // `ALLOWED` that no rule looked at.
            .map(|k| format!("the object has no {k}")),
    }
}

/// Dry-run admission of one object of a batch: `base` carries the flags;
/// the object is the request's object, or, for a DELETE without `--old`,
/// its old object.
pub fn admit_one(
    ir: &Ir,
    base: &SimulatedRequest,
    index: usize,
    mut object: Value,
    delete: bool,
) -> AdmitResult {
    let problem = not_an_object(&object);
    if problem.is_none() {
        default_namespace(ir, base.namespace.as_deref(), &mut object);
    }
    let id = Identity::of(index, &object);
    let label = describe(&object);
    let input = match problem {
        Some(p) => Err(p),
        None => {
            let mut request = base.clone();
            if delete && base.old_object.is_none() {
                request.old_object = Some(object);
            } else {
                request.object = Some(object);
            }
            request.to_input(ir).map_err(|e| e.to_string())
        }
    };
    let (verdict, error) = match input {
        Ok(input) => (
            Some(katalog_lang::admission::eval::evaluate(
                ir,
                &input,
                Endpoint::All,
            )),
            None,
        ),
        Err(e) => (None, Some(e)),
    };
    AdmitResult {
        id,
        label,
        verdict,
        error,
    }
}

/// How `admit` prints several objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchFormat {
    Text,
    Json,
    Yaml,
    Junit,
    /// Collected, for a template.
    Collect,
}

/// The results of several objects, printed as they come (JUnit's counts
/// come first, so its test cases are held as text until the end).
pub struct BatchPrinter {
    format: BatchFormat,
    pub summary: Summary,
    junit: Vec<String>,
    pub collected: Vec<AdmitResult>,
    started: bool,
}

impl BatchPrinter {
    pub fn new(format: BatchFormat) -> Self {
        BatchPrinter {
            format,
            summary: Summary::default(),
            junit: Vec::new(),
            collected: Vec::new(),
            started: false,
        }
    }

    fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        match self.format {
            BatchFormat::Json => out!("{{\n  \"results\": ["),
            BatchFormat::Yaml => {}
            _ => {}
        }
    }

    pub fn result(&mut self, r: AdmitResult) {
        self.start();
        let first = self.summary.objects == 0;
        self.summary.add(&r);
        match self.format {
            BatchFormat::Text => print_text(&r),
            BatchFormat::Json => {
                let v = serde_json::to_value(&r).unwrap_or_default();
                out!(
                    "{}\n    {}",
                    if first { "" } else { "," },
                    indent_rest(&serde_json::to_string_pretty(&v).unwrap_or_default(), 2)
                );
            }
            BatchFormat::Yaml => {
                if first {
                    outln!("results:");
                }
                out!(
                    "{}",
                    yaml_item(&serde_json::to_value(&r).unwrap_or_default())
                );
            }
            BatchFormat::Junit => self.junit.push(junit_case(&r)),
            BatchFormat::Collect => self.collected.push(r),
        }
    }

    /// The summary (and, for JUnit, everything); the exit code.
    pub fn finish(&mut self, suite: &str) -> Result<(), Exit> {
        self.start();
        let s = &self.summary;
        match self.format {
            BatchFormat::Text => outln!("{}", s.line()),
            BatchFormat::Json => {
                let summary = serde_json::to_string_pretty(s).unwrap_or_default();
                outln!(
                    "{}],\n  \"summary\": {}\n}}",
                    if s.objects == 0 { "" } else { "\n  " },
                    indent_rest(&summary, 1)
                );
            }
            BatchFormat::Yaml => {
                if s.objects == 0 {
                    outln!("results: []");
                }
                out!(
                    "{}",
                    serde_saphyr::to_string(&serde_json::json!({ "summary": s }))
                        .unwrap_or_default()
                );
            }
            BatchFormat::Junit => {
                use crate::cmd::test::xml_escape;
                outln!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
                outln!("<testsuites>");
                outln!(
                    "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">",
                    xml_escape(suite),
                    s.objects,
                    s.denied,
                    s.errors
                );
                for case in &self.junit {
                    out!("{case}");
                }
                outln!("  </testsuite>");
                outln!("</testsuites>");
            }
            BatchFormat::Collect => {}
        }
        self.summary.outcome()
    }
}

/// One line per object, its denials and warnings indented.
fn print_text(r: &AdmitResult) {
    match (&r.verdict, &r.error) {
        (Some(v), _) => {
            outln!("{:<7}  {}  ({})", r.status(), r.label, rules_matched(v));
            for d in &v.denials {
                outln!("    deny  [{}] {}", d.rule, d.message);
            }
            for w in warning_lines(v) {
                outln!("    warn  {w}");
            }
        }
        (None, e) => outln!(
            "{:<7}  {}  {}",
            r.status(),
            r.label,
            e.as_deref().unwrap_or_default()
        ),
    }
}

/// One testcase per object; a denial is a failure, an object that could not
/// be evaluated an error.
fn junit_case(r: &AdmitResult) -> String {
    use crate::cmd::test::xml_escape;
    let name = xml_escape(&format!("{} {}", r.id.index, r.label));
    match (&r.verdict, &r.error) {
        (Some(v), _) if v.allowed && v.warnings.is_empty() => {
            format!("    <testcase name=\"{name}\"/>\n")
        }
        (Some(v), _) => {
            let mut out = format!("    <testcase name=\"{name}\">\n");
            if !v.allowed {
                out.push_str(&format!(
                    "      <failure message=\"{}\"/>\n",
                    xml_escape(&v.message())
                ));
            }
            if !v.warnings.is_empty() {
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    xml_escape(&warning_lines(v).join("\n"))
                ));
            }
            out.push_str("    </testcase>\n");
            out
        }
        (None, e) => format!(
            "    <testcase name=\"{name}\">\n      <error message=\"{}\"/>\n    </testcase>\n",
            xml_escape(e.as_deref().unwrap_or_default())
        ),
    }
}

/// `convert`: each object converted as it is read and written in the
/// input's shape; a failure names the object and does not stop the others.
pub struct ConvertRun<'a> {
    pub ir: &'a Ir,
    pub to: &'a str,
    pub namespace: Option<&'a str>,
    pub writer: ObjectWriter,
    pub index: usize,
    pub failures: usize,
}

impl ConvertRun<'_> {
    /// A typed list (`CronTabList`) follows its items' new apiVersion; a
    /// `kind: List` (apiVersion `v1`) stays as it is.
    fn retag(&self, members: &mut Map<String, Value>, kind_is_list: bool) {
        if kind_is_list {
            return;
        }
        let Some(api_version) = members.get("apiVersion").and_then(Value::as_str) else {
            return;
        };
        if api_version == "v1" {
            return;
        }
        let list = Value::Object(members.clone());
        if let Ok(desired) = crate::cmd::convert::desired_api_version(self.ir, &list, self.to) {
            members.insert("apiVersion".into(), Value::String(desired));
        }
    }

    pub fn event(&mut self, e: Event) -> Result<(), Exit> {
        match e {
            Event::ListBegin(mut before) => {
                let is_list = before.get("kind").and_then(Value::as_str) == Some("List");
                self.retag(&mut before, is_list);
                self.writer.list_begin(&before);
            }
            Event::ListEnd(mut after) => {
                let is_list = after.get("kind").and_then(Value::as_str) == Some("List");
                self.retag(&mut after, is_list);
                self.writer.list_end(&after);
            }
            Event::Object(mut object) => {
                let index = self.index;
                self.index += 1;
                if let Some(ns) = self.namespace {
                    default_namespace(self.ir, Some(ns), &mut object);
                }
                let result = crate::cmd::convert::desired_api_version(self.ir, &object, self.to)
                    .map_err(|e| e.to_string())
                    .and_then(|desired| {
                        katalog_lang::review::convert_checked(self.ir, &object, &desired)
                            .map_err(|e| e.to_string())
                    });
                match result {
                    Ok(v) => self.writer.object(&v),
                    Err(e) => {
                        self.failures += 1;
                        errln!(
                            "error: failed to convert object {index} ({}): {e}",
                            describe(&object)
                        );
                    }
                }
            }
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}})
    }

    #[test]
    fn objects_are_named_for_reports() {
        assert_eq!(describe(&pod("a")), "Pod ns/a");
        assert_eq!(
            describe(&json!({"kind": "Namespace", "metadata": {"name": "team-a"}})),
            "Namespace team-a"
        );
        assert_eq!(
            describe(&json!({"kind": "Pod", "metadata": {"generateName": "web-"}})),
            "Pod web-*"
        );
        assert_eq!(describe(&json!({})), "<no kind> <no name>");
    }

    #[test]
    fn the_summary_partitions_and_picks_the_exit_code() {
        let verdict = |allowed: bool, warned: bool| Verdict {
            allowed,
            warnings: if warned {
                vec![katalog_lang::admission::eval::Finding {
                    rule: "r".into(),
                    message: "m".into(),
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        let result = |v: Option<Verdict>| AdmitResult {
            id: Identity::of(0, &pod("a")),
            label: String::new(),
            error: v.is_none().then(|| "bad".into()),
            verdict: v,
        };
        let mut results = vec![
            result(Some(verdict(true, false))),
            result(Some(verdict(true, true))),
            result(Some(verdict(false, true))),
        ];
        let s = Summary::of(&results);
        assert_eq!(s.line(), "3 objects: 2 allowed (1 with warnings), 1 denied");
        assert!(matches!(s.outcome(), Err(Exit(_, NO))));
        results.push(result(None));
        let s = Summary::of(&results);
        assert_eq!(
            s.line(),
            "4 objects: 2 allowed (1 with warnings), 1 denied, 1 not evaluated"
        );
        assert!(matches!(s.outcome(), Err(Exit(_, USAGE))));
        assert!(Summary::of(&results[..2]).outcome().is_ok());
    }
}
