//! Never a panic, whatever comes in: random Katalog text, random paths,
//! random objects in ConversionReviews and AdmissionReviews.

use katalog_lang::admission::eval::Endpoint;
use katalog_lang::admission::review::review_admission;
use katalog_lang::path::Path;
use katalog_lang::review::review_conversion;
use katalog_lang::{Ir, Source, compile_sources};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::OnceLock;

fn example(name: &str) -> &'static Ir {
    static IRS: OnceLock<Vec<(&'static str, Ir)>> = OnceLock::new();
    let irs = IRS.get_or_init(|| {
        [
            "crontab.yaml",
            "pod-security.yaml",
            "platform.yaml",
            "protections.yaml",
        ]
        .into_iter()
        .map(|n| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../katalogs")
                .join(n);
            let text = std::fs::read_to_string(&path).unwrap();
            (n, compile_sources(&[Source::new(n, text)]).unwrap())
        })
        .collect()
    });
    &irs.iter()
        .find(|(n, _)| *n == name)
        .expect("a known example")
        .1
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "[a-z./~:*\\- ]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("v1"),
            Just("stable.example.com/v1"),
            Just("stable.example.com/v2"),
            Just("CronTab"),
            Just("Allow"),
            Just("localhost:8080")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("spec".to_string()),
                    Just("metadata".to_string()),
                    Just("annotations".to_string()),
                    Just("labels".to_string()),
                    Just("katalog.dev/stash".to_string()),
                    Just("schedule".to_string()),
                    Just("image".to_string()),
                    Just("container".to_string()),
                    Just("hostPort".to_string()),
                    Just("containers".to_string()),
                    Just("securityContext".to_string()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn katalog_text_never_panics(text in "(apiVersion: katalog.dev/v1alpha1\nkind: Katalog\n)?[ -~\n]{0,300}") {
        let _ = compile_sources(&[Source::new("fuzz.yaml", text)]);
    }

    #[test]
    fn paths_never_panic(text in "[a-z.\\[\\]\"'*0-9\\\\/~ ]{0,24}") {
        if let Ok(p) = Path::parse(&text) {
            // What prints, parses back to the same path.
            prop_assert_eq!(Path::parse(&p.to_string()).unwrap(), p);
        }
    }

    #[test]
    fn conversion_reviews_never_panic(objects in prop::collection::vec(json_value(), 0..4), spec in json_value(), annotation in json_value()) {
        let ir = example("crontab.yaml");
        let mut objects = objects;
        for version in ["v1", "v1beta1", "v2"] {
            objects.push(json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
                "metadata": {"name": "x", "annotations": {"katalog.dev/stash": annotation}}, "spec": spec}));
        }
        for desired in ["stable.example.com/v1", "stable.example.com/v1beta1", "stable.example.com/v2", "x/y"] {
            let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "request": {"uid": "u", "desiredAPIVersion": desired, "objects": objects}});
            let out = review_conversion(ir, &review).expect("a review with a request is always answered");
            prop_assert_eq!(&out["response"]["uid"], "u");
        }
    }

    #[test]
    fn admission_reviews_never_panic(object in json_value(), old in json_value(), op in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE"), Just("CONNECT"), Just("BOGUS")]) {
        for (katalog, resource) in [("pod-security.yaml", json!({"group": "", "version": "v1", "resource": "pods"})),
                                    ("platform.yaml", json!({"group": "apps", "version": "v1", "resource": "deployments"})),
                                    ("protections.yaml", json!({"group": "data.example.com", "version": "v1", "resource": "databases"}))] {
            let ir = example(katalog);
            let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": op, "resource": resource, "namespace": "default",
                            "userInfo": {"username": "fuzz"}, "object": object, "oldObject": old}});
            for endpoint in [Endpoint::Validate, Endpoint::Mutate, Endpoint::DeletionProtection, Endpoint::NamespaceProtection, Endpoint::StrictMode] {
                let out = review_admission(ir, &review, endpoint).expect("a review with a uid is always answered");
                prop_assert_eq!(&out["response"]["uid"], "u");
            }
        }
    }
}
