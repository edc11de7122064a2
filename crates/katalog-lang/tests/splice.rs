//! The fast path of conversion (partial trees, spliced bytes) against the
//! tree path it must agree with: every object of every conversion suite and
//! objects generated from every example CRD, dressed as the apiserver sends
//! them, converted to every served version in ConversionReviews, must give
//! the same answer as JSON on both paths. And the touch sets the fast path
//! trusts are checked against the reference evaluator: changing a member
//! outside the touch set changes the converted object only there.

mod common;

use std::collections::BTreeSet;

use common::{katalog_ir, repo, suites};
use katalog_lang::conversion::{self, touch};
use katalog_lang::convert::{convert, split_api_version};
use katalog_lang::fuzz::{Generator, Rng};
use katalog_lang::json::node::parse_value;
use katalog_lang::{Ir, Source};
use serde_json::{Value, json};

/// Objects generated per version of every example CRD.
const GENERATED: u64 = 300;

/// Every Katalog with conversion suites, and the objects its cases name
/// (with their apiVersion).
fn suite_objects() -> Vec<(String, Ir, Vec<Value>)> {
    let mut files = Vec::new();
    for dir in ["katalogs", "testdata"] {
        suites(&repo().join(dir), &mut files);
    }
    let mut out = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a suite file");
        let source = Source::new(file.display().to_string(), text);
        let docs = katalog_lang::suite::load(&source).unwrap_or_else(|d| panic!("{}", d.render()));
        for suite in docs {
            let ir = katalog_ir(&file.parent().expect("a parent").join(&suite.spec.katalog));
            let mut objects = Vec::new();
            for case in &suite.spec.cases {
                let Some(c) = &case.conversion else { continue };
                for (version, object) in &c.versions {
                    objects.extend(with_api_version(&ir, object, Some(version)));
                }
                if let Some(input) = &c.input {
                    objects.extend(with_api_version(&ir, input, None));
                }
            }
            if !objects.is_empty() {
                out.push((file.display().to_string(), ir, objects));
            }
        }
    }
    out
}

/// The object with its apiVersion filled in from the resource of its kind.
fn with_api_version(ir: &Ir, object: &Value, version: Option<&str>) -> Option<Value> {
    let mut object = object.clone();
    let kind = object.get("kind")?.as_str()?.to_string();
    if object.get("apiVersion").is_none() {
        let resource = ir.resources.iter().find(|r| r.kind == kind)?;
        object.as_object_mut()?.insert(
            "apiVersion".into(),
            format!("{}/{}", resource.group, version?).into(),
        );
    }
    Some(object)
}

/// The object as an apiserver sends it: server-set metadata, managed
/// fields, a last-applied annotation, labels and a status no rule names.
fn dressed(object: &Value, n: usize) -> Value {
    let mut object = object.clone();
    let Some(map) = object.as_object_mut() else {
        return object;
    };
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("uid".into(), format!("0000-{n}").into());
        meta.insert("resourceVersion".into(), (1000 + n).to_string().into());
        meta.insert("generation".into(), json!(n % 7 + 1));
        meta.insert("creationTimestamp".into(), "2026-12-01T10:00:00Z".into());
        meta.insert(
            "managedFields".into(),
            json!([{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:x": {}}}}]),
        );
        if let Some(labels) = meta
            .entry("labels")
            .or_insert_with(|| json!({}))
            .as_object_mut()
        {
            labels.insert("app.kubernetes.io/name".into(), "demo".into());
        }
        if let Some(annotations) = meta
            .entry("annotations")
            .or_insert_with(|| json!({}))
            .as_object_mut()
        {
            annotations.insert(
                "kubectl.kubernetes.io/last-applied-configuration".into(),
                "{\"apiVersion\":\"x\",\"spec\":{\"a\":[1,2.5,\"\\u00e9\"]}}".into(),
            );
        }
    }
    map.entry("status").or_insert_with(
        || json!({"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]}),
    );
    object
}

fn review(objects: &[Value], desired: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "7a3b", "desiredAPIVersion": desired, "objects": objects},
    }))
    .expect("a review serializes")
}

#[derive(Default)]
struct Tally {
    reviews: usize,
    spliced: usize,
    failures: usize,
    mismatches: Vec<String>,
}

impl Tally {
    /// Answer `body` on both paths and compare.
    fn compare(&mut self, ir: &Ir, body: &[u8], what: &str) {
        let tree = conversion::review_tree(ir, body).expect("the tree path answers");
        let fast = conversion::review_bytes(ir, body).expect("the fast path answers");
        // No key is special (serde_json's raw-value key is a suite's member).
        let parse = |b: &[u8]| parse_value(b).expect("an answer is JSON");
        self.reviews += 1;
        self.spliced += fast.outcome.spliced;
        if tree.outcome.failure.is_some() {
            self.failures += 1;
        }
        let mut expected = tree.outcome.clone();
        expected.spliced = fast.outcome.spliced;
        if parse(&tree.bytes) != parse(&fast.bytes) || expected != fast.outcome {
            self.mismatches.push(format!(
                "{what}:\n  tree {}\n  fast {}\n  outcomes {:?} / {:?}",
                String::from_utf8_lossy(&tree.bytes),
                String::from_utf8_lossy(&fast.bytes),
                tree.outcome,
                fast.outcome
            ));
        }
    }

    /// Every object alone, and all of a kind in one review, to every served
    /// version; plain and dressed.
    fn compare_all(&mut self, name: &str, ir: &Ir, objects: &[Value]) {
        for resource in &ir.resources {
            let of_kind: Vec<Value> = objects
                .iter()
                .filter(|o| o["kind"] == resource.kind.as_str())
                .cloned()
                .collect();
            let dressed_all: Vec<Value> = of_kind
                .iter()
                .enumerate()
                .map(|(i, o)| dressed(o, i))
                .collect();
            for to in resource.served() {
                let desired = format!("{}/{to}", resource.group);
                for (i, (plain, dressed)) in of_kind.iter().zip(&dressed_all).enumerate() {
                    self.compare(ir, &review(std::slice::from_ref(plain), &desired), name);
                    let what = format!("{name}: object {i} dressed, to {to}");
                    self.compare(ir, &review(std::slice::from_ref(dressed), &desired), &what);
                }
                let what = format!("{name}: all {} dressed, to {to}", of_kind.len());
                self.compare(ir, &review(&dressed_all, &desired), &what);
            }
        }
    }
}

#[test]
fn every_suite_object_converts_the_same_on_both_paths() {
    let mut tally = Tally::default();
    let katalogs = suite_objects();
    assert!(
        katalogs.len() >= 10,
        "conversion suites: {}",
        katalogs.len()
    );
    for (name, ir, objects) in &katalogs {
        tally.compare_all(name, ir, objects);
    }
    eprintln!(
        "{} Katalogs: {} reviews, {} objects spliced, {} failures (answered by the tree path)",
        katalogs.len(),
        tally.reviews,
        tally.spliced,
        tally.failures
    );
    assert!(
        tally.mismatches.is_empty(),
        "{} of {} reviews differ:\n{}",
        tally.mismatches.len(),
        tally.reviews,
        tally.mismatches.join("\n")
    );
    // Most conversions are spliced, and failures are exercised too.
    assert!(
        tally.spliced > tally.reviews / 2,
        "{} spliced",
        tally.spliced
    );
    assert!(tally.failures > 10, "{} failures", tally.failures);
}

/// The example Katalogs with a CRD, compiled with it.
fn examples_with_crds() -> Vec<(String, Ir)> {
    let dir = repo().join("katalogs");
    let mut out = Vec::new();
    for name in ["crontab.yaml", "hostport.yaml"] {
        out.push((name.to_string(), katalog_ir(&dir.join(name))));
    }
    let remainder = repo().join("testdata/rules/remainder.yaml");
    out.push(("remainder.yaml".into(), katalog_ir(&remainder)));
    out
}

fn generated(ir: &Ir, seed: u64) -> Vec<Value> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for resource in &ir.resources {
        let Some(crd) = &resource.schemas else {
            continue;
        };
        for version in resource.served() {
            let Some(schema) = crd.version(version).and_then(|v| v.schema.as_ref()) else {
                continue;
            };
            let api_version = format!("{}/{version}", resource.group);
            let mut generator = Generator::new(&mut rng);
            for i in 0..GENERATED {
                out.push(generator.object(schema, &api_version, &resource.kind, &format!("g{i}")));
            }
        }
    }
    out
}

#[test]
fn objects_generated_from_every_example_crd_convert_the_same_on_both_paths() {
    let mut tally = Tally::default();
    for (name, ir) in examples_with_crds() {
        let objects = generated(&ir, 7);
        assert!(!objects.is_empty(), "{name}: no objects generated");
        tally.compare_all(&name, &ir, &objects);
    }
    eprintln!(
        "{} reviews, {} objects spliced, {} failures",
        tally.reviews, tally.spliced, tally.failures
    );
    assert!(
        tally.mismatches.is_empty(),
        "{} reviews differ:\n{}",
        tally.mismatches.len(),
        tally
            .mismatches
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(tally.spliced > 1000, "{} spliced", tally.spliced);
}

#[test]
fn the_apiserver_fixtures_convert_the_same_on_both_paths() {
    let ir = katalog_ir(&repo().join("katalogs/crontab.yaml"));
    let dir = repo().join("crates/katalog-lang/src/conversion/testdata");
    let mut tally = Tally::default();
    let mut files = Vec::new();
    for sub in [dir.clone(), dir.join("apiserver")] {
        for entry in std::fs::read_dir(&sub).expect("testdata") {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|x| x == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for path in &files {
        let body = std::fs::read(path).expect("a fixture");
        tally.compare(&ir, &body, &path.display().to_string());
    }
    assert!(
        tally.mismatches.is_empty(),
        "{}",
        tally.mismatches.join("\n")
    );
    assert!(tally.spliced >= files.len(), "{} spliced", tally.spliced);
}

/// Changing one member outside a conversion's touch set changes the
/// converted object at that member only (it passes through), on the tree
/// path: the touch set names everything the rules can see.
#[test]
fn members_outside_the_touch_set_pass_through_and_change_nothing_else() {
    let mut checked = 0usize;
    let mut sets = BTreeSet::new();
    let mut katalogs: Vec<(String, Ir, Vec<Value>)> = suite_objects();
    for (name, ir) in examples_with_crds() {
        let objects = generated(&ir, 11).into_iter().step_by(5).collect();
        katalogs.push((name, ir, objects));
    }
    for (name, ir, objects) in &katalogs {
        for (i, object) in objects.iter().enumerate() {
            let object = dressed(object, i);
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let kind = object["kind"].as_str().unwrap_or_default();
            let (group, from) = split_api_version(api_version);
            let Some(resource) = ir.resource(group, kind) else {
                continue;
            };
            if resource.version(from).is_none() {
                continue;
            }
            for to in resource.served() {
                let Some(touch) = touch::conversion(ir, resource, from, to) else {
                    continue;
                };
                sets.insert(format!("{name} {from}->{to}"));
                let desired = format!("{group}/{to}");
                let Ok(base) = convert(ir, &object, &desired) else {
                    continue;
                };
                for path in touch.untouched(&object) {
                    let marker = json!({"changed-outside-the-touch-set": path.to_string()});
                    let mut changed = object.clone();
                    path.set(&mut changed, marker.clone())
                        .expect("an existing member");
                    let mut expected = base.clone();
                    path.set(&mut expected, marker).expect("it passes through");
                    let got = convert(ir, &changed, &desired);
                    assert_eq!(
                        got.as_ref().ok(),
                        Some(&expected),
                        "{name}: object {i} from {from} to {to}, `{path}` changed: {got:?}"
                    );
                    checked += 1;
                }
            }
        }
    }
    eprintln!(
        "{checked} members changed outside {} touch sets",
        sets.len()
    );
    assert!(checked > 1000, "{checked}");
}
