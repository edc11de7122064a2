//! Several objects in one input: multi-document YAML, a JSON array, a
//! `kind: List` (what `kubectl get -o yaml` prints) or a typed `*List`;
//! `admit` and `convert` take them one by one.

use katalog_lang::Ir;
use katalog_lang::admission::eval::{Endpoint, SimulatedRequest, Verdict};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::exit::{Exit, NO, USAGE};

/// Lists inside Lists deeper than this are refused rather than followed.
const MAX_LIST_DEPTH: usize = 32;

/// The objects of one input, Lists flattened.
pub struct Objects {
    pub items: Vec<Value>,
    /// The input was one List: its wrapper (everything but `items`), so that
    /// an answer can be a List again.
    pub list: Option<Map<String, Value>>,
}

impl Objects {
    /// True unless the input was one plain object: the output then shows one
    /// line per object and a summary.
    pub fn is_batch(&self) -> bool {
        self.list.is_some() || self.items.len() != 1
    }
}

/// `kind: List`, or a typed list such as `PodList`, holding `items`.
fn is_list(v: &Value) -> bool {
    v.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && v.get("items").is_some_and(Value::is_array)
}

/// Flatten the documents of one input: each List becomes its items, nested
/// Lists included.
pub fn flatten(documents: Vec<Value>, name: &str) -> Result<Objects, Exit> {
    let list = match documents.as_slice() {
        [one] if is_list(one) => one.as_object().map(|m| {
            let mut wrapper = m.clone();
            wrapper.remove("items");
            wrapper
        }),
        _ => None,
    };
    let mut items = Vec::new();
    // (value, depth) in input order: a stack of reversed children.
    let mut stack: Vec<(Value, usize)> = documents.into_iter().rev().map(|d| (d, 0)).collect();
    while let Some((v, depth)) = stack.pop() {
        if !is_list(&v) {
            items.push(v);
            continue;
        }
        if depth >= MAX_LIST_DEPTH {
            return Err(Exit(
                format!("error: {name} nests Lists deeper than {MAX_LIST_DEPTH} levels"),
                USAGE,
            ));
        }
        if let Some(Value::Array(children)) = v.get("items") {
            stack.extend(children.iter().rev().cloned().map(|c| (c, depth + 1)));
        }
    }
    Ok(Objects { items, list })
}

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
    pub fn of(results: &[AdmitResult]) -> Self {
        let mut s = Summary {
            objects: results.len(),
            ..Default::default()
        };
        for r in results {
            match &r.verdict {
                None => s.errors += 1,
                Some(v) if !v.allowed => s.denied += 1,
                Some(v) => {
                    s.allowed += 1;
                    if !v.warnings.is_empty() {
                        s.warned += 1;
                    }
                }
            }
        }
        s
    }

    /// `3 objects: 2 allowed (1 with warnings), 1 denied`.
    pub fn line(&self) -> String {
        let mut out = format!(
            "{} object{}: {} allowed",
            self.objects,
            crate::plural(self.objects),
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

/// Dry-run admission of each object: `base` carries the flags; each object
/// is the request's object, or, for a DELETE without `--old`, its old object.
pub fn admit(
    ir: &Ir,
    base: &SimulatedRequest,
    objects: &[Value],
    delete: bool,
) -> Vec<AdmitResult> {
    objects
        .iter()
        .enumerate()
        .map(|(index, object)| {
            let mut request = base.clone();
            if delete && base.old_object.is_none() {
                request.old_object = Some(object.clone());
            } else {
                request.object = Some(object.clone());
            }
            let missing = ["apiVersion", "kind"]
                .into_iter()
                .find(|k| !object.get(k).is_some_and(Value::is_string));
            let input = match missing {
                // The apiserver never sends such an object; saying so beats
                // an `ALLOWED` that no rule looked at.
                Some(k) => Err(format!("the object has no {k}")),
                None => request.to_input(ir).map_err(|e| e.to_string()),
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
                id: Identity::of(index, object),
                label: describe(object),
                verdict,
                error,
            }
        })
        .collect()
}

fn rules_matched(v: &Verdict) -> String {
    let n = v.matched.len();
    format!("{n} rule{} matched", crate::plural(n))
}

/// One line per object, its denials and warnings indented, then the summary.
pub fn print_text(results: &[AdmitResult]) {
    for r in results {
        match (&r.verdict, &r.error) {
            (Some(v), _) => {
                outln!("{:<7}  {}  ({})", r.status(), r.label, rules_matched(v));
                for d in &v.denials {
                    outln!("    deny  [{}] {}", d.rule, d.message);
                }
                for w in v.warning_lines() {
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
    outln!("{}", Summary::of(results).line());
}

pub fn print_json(results: &[AdmitResult]) {
    let summary = Summary::of(results);
    outln!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "results": results,
            "summary": summary,
        }))
        .unwrap_or_default()
    );
}

/// One testcase per object; a denial is a failure, an object that could not
/// be evaluated an error.
pub fn print_junit(results: &[AdmitResult], suite: &str) {
    use crate::test_cmd::xml_escape;
    let s = Summary::of(results);
    outln!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    outln!("<testsuites>");
    outln!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">",
        xml_escape(suite),
        s.objects,
        s.denied,
        s.errors
    );
    for r in results {
        let name = xml_escape(&format!("{} {}", r.id.index, r.label));
        match (&r.verdict, &r.error) {
            (Some(v), _) if v.allowed && v.warnings.is_empty() => {
                outln!("    <testcase name=\"{name}\"/>");
            }
            (Some(v), _) => {
                outln!("    <testcase name=\"{name}\">");
                if !v.allowed {
                    outln!("      <failure message=\"{}\"/>", xml_escape(&v.message()));
                }
                if !v.warnings.is_empty() {
                    outln!(
                        "      <system-out>{}</system-out>",
                        xml_escape(&v.warning_lines().join("\n"))
                    );
                }
                outln!("    </testcase>");
            }
            (None, e) => {
                outln!("    <testcase name=\"{name}\">");
                outln!(
                    "      <error message=\"{}\"/>",
                    xml_escape(e.as_deref().unwrap_or_default())
                );
                outln!("    </testcase>");
            }
        }
    }
    outln!("  </testsuite>");
    outln!("</testsuites>");
}

/// Convert each object; the failures name the object and do not stop the others.
pub fn convert(ir: &Ir, objects: &Objects, to: &str) -> (Vec<Value>, Vec<String>) {
    let mut converted = Vec::new();
    let mut failures = Vec::new();
    for (i, object) in objects.items.iter().enumerate() {
        let result = crate::desired_api_version(ir, object, to)
            .map_err(|e| e.to_string())
            .and_then(|desired| {
                katalog_lang::review::convert_checked(ir, object, &desired)
                    .map_err(|e| e.to_string())
            });
        match result {
            Ok(v) => converted.push(v),
            Err(e) => failures.push(format!(
                "error: failed to convert object {i} ({}): {e}",
                describe(object)
            )),
        }
    }
    (converted, failures)
}

/// The converted objects as one List when the input was one, else as documents.
pub fn converted_output(objects: &Objects, converted: Vec<Value>) -> Vec<Value> {
    match &objects.list {
        None => converted,
        Some(wrapper) => {
            let mut list = wrapper.clone();
            // A typed list (`CronTabList`) follows its items' apiVersion.
            let typed = list.get("kind").and_then(Value::as_str) != Some("List");
            let first = converted.first().and_then(|v| v.get("apiVersion")).cloned();
            if typed
                && let Some(api_version) = first
                && converted
                    .iter()
                    .all(|v| v.get("apiVersion") == Some(&api_version))
            {
                list.insert("apiVersion".into(), api_version);
            }
            list.insert("items".into(), Value::Array(converted));
            vec![Value::Object(list)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}})
    }

    fn names(o: &Objects) -> Vec<String> {
        o.items.iter().map(describe).collect()
    }

    #[test]
    fn lists_are_flattened_in_order_nested_ones_too() {
        let input = json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": [pod("a"), {"apiVersion": "v1", "kind": "PodList", "items": [pod("b"), pod("c")]}, pod("d")]});
        let o = flatten(vec![input], "x").unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!(names(&o), ["Pod ns/a", "Pod ns/b", "Pod ns/c", "Pod ns/d"]);
        assert!(o.is_batch());
        let wrapper = o.list.unwrap_or_default();
        assert_eq!(wrapper.get("kind"), Some(&json!("List")));
        assert!(!wrapper.contains_key("items"));
    }

    #[test]
    fn documents_are_not_a_list_and_one_plain_object_is_not_a_batch() {
        let o = flatten(vec![pod("a"), pod("b")], "x").unwrap_or_else(|e| panic!("{}", e.0));
        assert!(o.list.is_none() && o.is_batch());
        let one = flatten(vec![pod("a")], "x").unwrap_or_else(|e| panic!("{}", e.0));
        assert!(!one.is_batch());
        // `items` that is not a list does not make a List.
        let odd = json!({"kind": "ThingList", "items": "no"});
        let o = flatten(vec![odd.clone()], "x").unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!(o.items, [odd]);
    }

    #[test]
    fn lists_nested_too_deep_are_refused() {
        let mut v = pod("deep");
        for _ in 0..=MAX_LIST_DEPTH {
            v = json!({"kind": "List", "items": [v]});
        }
        match flatten(vec![v], "deep.yaml") {
            Err(Exit(m, code)) => {
                assert_eq!(code, USAGE);
                assert_eq!(m, "error: deep.yaml nests Lists deeper than 32 levels");
            }
            Ok(o) => panic!("accepted {} objects", o.items.len()),
        }
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
