//! The JSON Schemas under `schemas/` are generated from the Rust types; this
//! test fails when they are stale. `BLESS=1` rewrites them.

use std::path::Path;

fn check(file: &str, schema: serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas")
        .join(file);
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; run with BLESS=1", path.display()));
    assert!(
        on_disk == text,
        "{} is stale: regenerate it with `BLESS=1 cargo test -p katalog-lang --test schema`",
        path.display()
    );
}

#[test]
fn katalog_schema_is_up_to_date() {
    let schema = katalog_lang::document::json_schema();
    // A few anchors, so a broken generator cannot pass by writing nonsense.
    let rules = &schema["$defs"]["Rule"]["oneOf"];
    assert!(rules.as_array().is_some_and(|r| r.len() == 15), "{rules}");
    assert_eq!(schema["title"], "Katalog");
    // The range `check` enforces (the apiserver's own, 1 to 30 seconds).
    let timeout = &schema["$defs"]["Admission"]["properties"]["timeoutSeconds"];
    assert_eq!(
        (&timeout["minimum"], &timeout["maximum"]),
        (&serde_json::json!(1), &serde_json::json!(30)),
        "{timeout}"
    );
    check("katalog.v1alpha1.json", schema);
}

#[test]
fn test_suite_schema_is_up_to_date() {
    let schema = katalog_lang::suite::json_schema();
    assert_eq!(schema["title"], "KatalogTest");
    check("katalogtest.v1alpha1.json", schema);
}
