//! Schema-driven fuzzing of every example Katalog that names a CRD (a smaller
//! count than CI's `katalog test --fuzz 10000` in ./scripts/test): every
//! generated object valid for its version's schema must come back exactly
//! from each round trip through the hub (or through each spoke).

use std::path::{Path, PathBuf};

use katalog_lang::fuzz::{FuzzOptions, fuzz};
use katalog_lang::{Source, compile_with_crds};

/// Objects per version and trip.
const COUNT: u64 = 1_000;

fn read(p: &Path) -> Source {
    Source::new(
        p.display().to_string(),
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
}

#[test]
fn every_example_katalog_with_a_crd_survives_fuzzing() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("katalogs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.ends_with(".yaml") && !n.ends_with(".test.yaml") && !n.ends_with(".crd.yaml")
        })
        .collect();
    files.sort();
    let mut fuzzed = Vec::new();
    for file in &files {
        let ir = compile_with_crds(&[read(file)], |r| Ok(vec![read(&r.path())]))
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let report = fuzz(
            &ir,
            FuzzOptions {
                count: COUNT,
                seed: 0,
            },
        );
        if report.trips.is_empty() {
            continue;
        }
        eprintln!("{}:\n{report}", file.display());
        assert_eq!(report.findings(), 0, "{}:\n{report}", file.display());
        fuzzed.push(
            file.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string(),
        );
    }
    // The examples with a CRD today; a new one is fuzzed without a change here.
    for expected in ["crontab.yaml", "hostport.yaml"] {
        assert!(
            fuzzed.iter().any(|f| f == expected),
            "{expected} not fuzzed: {fuzzed:?}"
        );
    }
}

fn remainder_ir() -> katalog_lang::Ir {
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/rules/remainder.yaml");
    compile_with_crds(&[read(&file)], |r| Ok(vec![read(&r.path())]))
        .unwrap_or_else(|d| panic!("{}", d.render()))
}

#[test]
fn the_remainder_stash_survives_fuzzing() {
    let report = fuzz(
        &remainder_ir(),
        FuzzOptions {
            count: COUNT,
            seed: 0,
        },
    );
    eprintln!("{report}");
    assert_eq!(report.trips.len(), 2, "{report}");
    assert_eq!(report.findings(), 0, "{report}");
}

/// GET at v1 (the remainder is written), the user removes a field of `spec`,
/// PUT at v1 (converted up): what the user removed, and everything that
/// lived under it, never comes back at the hub.
#[test]
fn a_field_removed_at_the_spoke_never_comes_back() {
    use katalog_lang::convert::convert;
    use katalog_lang::fuzz::{Generator, Rng};
    let ir = remainder_ir();
    let resource = &ir.resources[0];
    let crd = resource.schemas.as_ref().expect("the CRD");
    let hub_schema = crd
        .version("v2")
        .and_then(|v| v.schema.as_ref())
        .expect("v2");
    let mut rng = Rng::new(0);
    let mut checked = 0;
    for i in 0..COUNT {
        let mut hub = Generator::new(&mut rng).object(
            hub_schema,
            "examples.katalog.dev/v2",
            "Database",
            &format!("db-{i}"),
        );
        hub["metadata"]["resourceVersion"] = format!("{i}").into();
        let spoke = convert(&ir, &hub, "examples.katalog.dev/v1").expect("down");
        let Some(spec) = spoke["spec"].as_object() else {
            continue;
        };
        for key in spec.keys() {
            let mut edited = spoke.clone();
            edited["spec"].as_object_mut().unwrap().shift_remove(key);
            let back = convert(&ir, &edited, "examples.katalog.dev/v2").expect("up");
            let hub_key = if key == "instances" {
                "replicas"
            } else {
                key.as_str()
            };
            assert!(
                back["spec"].get(hub_key).is_none(),
                "spec.{key} removed at v1 came back as spec.{hub_key}: {}\nspoke: {edited}",
                back["spec"]
            );
            checked += 1;
        }
    }
    assert!(checked > COUNT, "only {checked} removals checked");
}
