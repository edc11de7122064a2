//! What each fuzz target does with its input, shared by the targets and by
//! the regression test that replays `fuzz/regressions` and `fuzz/corpus`.
//! Every function must return normally whatever the input: a panic is a
//! finding.

use std::sync::OnceLock;

use katalog_lang::admission::eval::Endpoint;
use katalog_lang::admission::review::review_admission;
use katalog_lang::json::node::parse_value;
use katalog_lang::review::review_conversion_bytes;
use katalog_lang::{Ir, Source, compile_sources};
use serde_json::{Map, Value, json};

/// Every example Katalog under `katalogs/` that compiles on its own.
pub fn examples() -> &'static [(String, Ir)] {
    static IRS: OnceLock<Vec<(String, Ir)>> = OnceLock::new();
    IRS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../katalogs");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        paths.sort();
        paths
            .into_iter()
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                name.ends_with(".yaml")
                    && !name.ends_with(".crd.yaml")
                    && !name.ends_with(".test.yaml")
            })
            .filter_map(|p| {
                let text = std::fs::read_to_string(&p).ok()?;
                let name = p.display().to_string();
                let ir = compile_sources(&[Source::new(name.clone(), text)]).ok()?;
                Some((name, ir))
            })
            .collect()
    })
}

const ENDPOINTS: [Endpoint; 5] = [
    Endpoint::Validate,
    Endpoint::Mutate,
    Endpoint::DeletionProtection,
    Endpoint::NamespaceProtection,
    Endpoint::StrictMode,
];

/// Load and compile arbitrary text as a Katalog.
pub fn katalog(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = compile_sources(&[Source::new("fuzz.yaml", text.into_owned())]);
}

/// Parse arbitrary text as a path.
pub fn path(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(p) = katalog_lang::path::Path::parse(text)
    {
        // What parses prints back to something that parses again.
        let printed = p.to_string();
        assert!(
            katalog_lang::path::Path::parse(&printed).is_ok(),
            "{text:?} printed as {printed:?}, which does not parse"
        );
    }
}

/// Raw bytes as a ConversionReview, against every example Katalog.
pub fn conversion_review(data: &[u8]) {
    for (_, ir) in examples() {
        let _ = review_conversion_bytes(ir, data);
    }
}

/// Raw bytes as an AdmissionReview, at every endpoint of every example.
pub fn admission_review(data: &[u8]) {
    let Ok(review) = parse_value(data) else {
        return;
    };
    for (_, ir) in examples() {
        for endpoint in ENDPOINTS {
            let _ = review_admission(ir, &review, endpoint);
        }
    }
}

/// A JSON value built from bytes: every input is some value, and small
/// changes to the input make small changes to the value.
pub struct Gen<'a> {
    data: &'a [u8],
    at: usize,
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "containers",
    "initContainers",
    "image",
    "securityContext",
    "privileged",
    "capabilities",
    "add",
    "drop",
    "hostPort",
    "ports",
    "volumes",
    "hostPath",
    "schedule",
    "cronSpec",
    "timeoutSeconds",
    "concurrencyPolicy",
    "container",
    "replicas",
    "template",
    "katalog.dev/stash",
    "x",
];

impl<'a> Gen<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Gen { data, at: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn string(&mut self) -> String {
        match self.byte() % 4 {
            0 => KEYS[usize::from(self.byte()) % KEYS.len()].to_string(),
            1 => String::new(),
            2 => format!("registry.example.com/app:{}", self.byte()),
            _ => {
                let n = usize::from(self.byte() % 8);
                (0..n)
                    .map(|_| char::from(b' ' + self.byte() % 95))
                    .collect()
            }
        }
    }

    pub fn value(&mut self, depth: usize) -> Value {
        let pick = if depth > 5 {
            self.byte() % 5
        } else {
            self.byte() % 8
        };
        match pick {
            0 => Value::Null,
            1 => Value::Bool(self.byte() % 2 == 0),
            2 => json!(i64::from(self.byte() as i8) * i64::from(self.byte())),
            3 => match self.byte() % 4 {
                0 => json!(i64::MIN),
                1 => json!(u64::MAX),
                2 => json!(-0.0),
                _ => json!(1.5e300),
            },
            4 => Value::String(self.string()),
            5 | 6 => {
                let n = usize::from(self.byte() % 5);
                let mut m = Map::new();
                for _ in 0..n {
                    let k = self.string();
                    m.insert(k, self.value(depth + 1));
                }
                Value::Object(m)
            }
            _ => {
                let n = usize::from(self.byte() % 5);
                Value::Array((0..n).map(|_| self.value(depth + 1)).collect())
            }
        }
    }
}

/// Structure-aware: a generated object as the body of valid reviews (every
/// declared resource and version for conversion; CREATE, UPDATE and DELETE
/// at every endpoint for admission), against every example Katalog. This
/// also evaluates every CEL rule of the examples on arbitrary objects.
pub fn structured(data: &[u8]) {
    let mut g = Gen::new(data);
    let spec = g.value(1);
    let extra = g.value(1);
    for (_, ir) in examples() {
        for resource in &ir.resources {
            let mut versions: Vec<String> =
                resource.versions.iter().map(|v| v.name.clone()).collect();
            if !versions.contains(&resource.hub) {
                versions.push(resource.hub.clone());
            }
            let mut annotations = Map::new();
            annotations.insert(resource.stash_annotation.clone(), extra.clone());
            for from in &versions {
                let object = json!({
                    "apiVersion": format!("{}/{from}", resource.group),
                    "kind": resource.kind,
                    "metadata": {"name": "x", "namespace": "default", "annotations": annotations},
                    "spec": spec,
                });
                for to in &versions {
                    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                        "request": {"uid": "u", "desiredAPIVersion": format!("{}/{to}", resource.group), "objects": [object]}});
                    let bytes = serde_json::to_vec(&review).unwrap_or_default();
                    let _ = review_conversion_bytes(ir, &bytes);
                }
            }
        }
        for (group, version, resource, kind) in [
            ("", "v1", "pods", "Pod"),
            ("apps", "v1", "deployments", "Deployment"),
            ("", "v1", "namespaces", "Namespace"),
            ("data.example.com", "v1", "databases", "Database"),
            ("stable.example.com", "v1", "crontabs", "CronTab"),
        ] {
            let object = json!({"apiVersion": if group.is_empty() { version.to_string() } else { format!("{group}/{version}") },
                "kind": kind, "metadata": {"name": "x", "namespace": "default", "labels": extra}, "spec": spec});
            for op in ["CREATE", "UPDATE", "DELETE"] {
                let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {"uid": "u", "operation": op,
                        "kind": {"group": group, "version": version, "kind": kind},
                        "resource": {"group": group, "version": version, "resource": resource},
                        "namespace": "default", "name": "x", "userInfo": {"username": "fuzz"},
                        "object": if op == "DELETE" { Value::Null } else { object.clone() },
                        "oldObject": if op == "CREATE" { Value::Null } else { object.clone() }}});
                for endpoint in ENDPOINTS {
                    let _ = review_admission(ir, &review, endpoint);
                }
            }
        }
    }
}

/// Answer `body` on the fast path and on the tree path; when the tree path
/// answers, the fast path must give the same JSON. (Where only the fast
/// path answers, the body holds a number serde_json cannot represent in a
/// member no rule names, which the fast path passes as it came.)
fn same_on_both_paths(ir: &Ir, body: &[u8]) {
    let Ok(tree) = katalog_lang::conversion::review_tree(ir, body) else {
        return;
    };
    let fast = katalog_lang::conversion::review_bytes(ir, body)
        .expect("the fast path answers what the tree path answers");
    // No key is special: an answer may hold serde_json's raw-value key.
    let parse = |b: &[u8]| parse_value(b).expect("an answer is JSON");
    assert_eq!(
        parse(&fast.bytes),
        parse(&tree.bytes),
        "the fast path and the tree path differ on {}",
        String::from_utf8_lossy(body)
    );
    assert_eq!(fast.outcome.failure, tree.outcome.failure);
}

/// Differential, raw bytes: a ConversionReview for every example Katalog,
/// answered on both conversion paths.
pub fn splice_raw(data: &[u8]) {
    for (_, ir) in examples() {
        same_on_both_paths(ir, data);
    }
}

/// Differential, structure-aware: generated objects (metadata, spec,
/// status, stash annotations from the input) at every version of every
/// declared resource, in reviews to every version, answered on both
/// conversion paths.
pub fn splice(data: &[u8]) {
    let mut g = Gen::new(data);
    let spec = g.value(1);
    let status = g.value(2);
    let extra = g.value(2);
    let label = g.string();
    for (_, ir) in examples() {
        for resource in &ir.resources {
            let versions: Vec<String> = resource.versions.iter().map(|v| v.name.clone()).collect();
            let mut annotations = Map::new();
            annotations.insert(resource.stash_annotation.clone(), extra.clone());
            annotations.insert(
                "kubectl.kubernetes.io/last-applied-configuration".into(),
                json!("{}"),
            );
            let mut objects = Vec::new();
            for from in &versions {
                objects.push(json!({
                    "apiVersion": format!("{}/{from}", resource.group),
                    "kind": resource.kind,
                    "metadata": {"name": "x", "namespace": "default", "uid": "u-1",
                        "labels": {"app": label}, "annotations": annotations,
                        "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
                    "spec": spec,
                    "status": status,
                }));
            }
            for to in &versions {
                let desired = format!("{}/{to}", resource.group);
                for objects in objects.chunks(1).chain([objects.as_slice()]) {
                    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                        "request": {"uid": "u", "desiredAPIVersion": desired, "objects": objects}});
                    let bytes = serde_json::to_vec(&review).unwrap_or_default();
                    same_on_both_paths(ir, &bytes);
                }
            }
        }
    }
}

/// Differential: a CEL expression (the first line) over a JSON value (the
/// rest, bound as `object` and `self`; a fixed Pod when it is not JSON),
/// evaluated by the evaluator over the bound JSON and by cel's interpreter
/// alone. When the first answers, the interpreter must give the same
/// answer, word for word, unless the expression iterated a map of two or
/// more keys (whose order the interpreter does not keep).
pub fn cel(data: &[u8]) {
    use katalog_lang::cel::{CelProgram, interpreter_only, native_tally};
    // cel's parser panics on some inputs (an integer overflow with debug
    // assertions on, as fuzz builds have); `CelProgram::compile` runs it on
    // its own thread and turns the panic into a compile error. libFuzzer's
    // panic hook would abort on it all the same: let that one thread's
    // panics through, and every other panic still ends the run.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some("katalog-cel-parser") {
                previous(info);
            }
        }));
    });
    let text = String::from_utf8_lossy(data);
    let (expr, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let Ok(program) = CelProgram::compile(expr) else {
        return;
    };
    let object = serde_json::from_str::<Value>(rest).unwrap_or_else(|_| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "a"}},
            "spec": {"hostNetwork": true, "containers": [
                {"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}],
                 "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}}},
                {"name": "d", "image": "j"}]}})
    });
    let vars = [("object", &object), ("self", &object)];
    let show = |r: Result<Value, katalog_lang::cel::CelError>| match r {
        Ok(v) => Ok(v.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let before = native_tally();
    let got = show(program.eval(&vars));
    let after = native_tally();
    if after.native == before.native || after.map_orders > before.map_orders {
        return;
    }
    let want = interpreter_only(|| show(program.eval(&vars)));
    assert_eq!(
        got, want,
        "`{expr}` over {object}: the evaluator over the bound JSON and the interpreter disagree"
    );
}

#[cfg(test)]
mod tests {
    /// Every saved input (fuzz/corpus/TARGET and the crashes found, kept in
    /// fuzz/regressions/TARGET) goes through its target again.
    #[test]
    fn regressions_and_corpora_replay_cleanly() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let targets: [(&str, fn(&[u8])); 8] = [
            ("katalog", super::katalog),
            ("path", super::path),
            ("conversion_review", super::conversion_review),
            ("admission_review", super::admission_review),
            ("structured", super::structured),
            ("splice", super::splice),
            ("splice_raw", super::splice_raw),
            ("cel", super::cel),
        ];
        assert!(!super::examples().is_empty(), "no example Katalog compiled");
        let mut replayed = 0;
        for (name, run) in targets {
            for dir in ["regressions", "corpus"] {
                let Ok(entries) = std::fs::read_dir(root.join(dir).join(name)) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let data = std::fs::read(entry.path()).unwrap();
                    run(&data);
                    replayed += 1;
                }
            }
        }
        assert!(replayed > 0, "no saved inputs");
    }
}
