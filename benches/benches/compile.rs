//! Katalog compile time: load + compile of a generated Katalog of 1,000
//! rules (500 conversion renames on one resource, 500 validations with a
//! pattern each), the figure issue 10 sets a target for (≤ 10 ms); and
//! Katalogs of 100, 200 and 400 resources whose CRDs come from one bundle
//! (every resource naming it) or from one file per resource, compiled from
//! disk as the CLI and the server do, with the reload poll's read of the
//! CRD files (issue 35: the bundle was read once per resource).
//!
//! `cargo bench -p katalog-benches --bench compile`; `cargo test
//! --all-targets` runs it once as a smoke test.

use std::fmt::Write as _;
use std::hint::black_box;

use katalog_benches::harness::{Mode, Variant, Work, report, run_group};
use katalog_lang::{Source, compile_sources};
use katalog_runtime::serving::files;

/// A Katalog of `n` rules: half conversion renames, half validations.
fn katalog(n: usize) -> String {
    let mut text = String::from(
        "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: big}\nspec:\n  resources:\n    - group: bench.katalog.dev\n      kind: Widget\n      plural: widgets\n      hub: v1\n      versions: [v1, v2]\n      conversion:\n        v2:\n",
    );
    for i in 0..n / 2 {
        let _ = writeln!(
            text,
            "          - rename: {{hub: spec.field{i}, spoke: spec.renamed{i}}}"
        );
    }
    text.push_str("  admission:\n    validations:\n");
    for i in 0..n - n / 2 {
        let _ = writeln!(
            text,
            "      - name: label-{i}\n        resources: [v1/pods]\n        path: metadata.labels[\"example.com/l{i}\"]\n        check: {{ pattern: \"[a-z][a-z0-9-]{{0,{}}}\" }}",
            i % 60 + 1
        );
    }
    text
}

fn main() {
    let mode = Mode::from_args();
    compile_1000_rules(&mode);
    for n in [100, 200, 400] {
        crd_bundle(&mode, n);
    }
    yaml_past_the_old_cliff(&mode);
}

/// Reading a YAML of 100,000 nodes against one of 200,000 (past 125,000,
/// half of serde-saphyr's budget, the one-pass reader used to step aside
/// for the careful path, 2.7× slower per node): linear now, the second
/// about twice the first.
fn yaml_past_the_old_cliff(mode: &Mode) {
    let name = "yaml_past_the_old_cliff";
    if !mode.selected(name) {
        return;
    }
    // 1 list + items × (1 map + 4 scalars).
    let text = |items: usize| -> String {
        (0..items)
            .map(|i| format!("- {{name: n{i}, value: {i}}}\n"))
            .collect()
    };
    let scale = if mode.measure { 1 } else { 100 };
    let (small, large) = (text(20_000 / scale), text(40_000 / scale));
    println!(
        "{name}: {} and {} nodes, {} and {} bytes",
        20_000 / scale * 5 + 1,
        40_000 / scale * 5 + 1,
        small.len(),
        large.len()
    );
    let read = |t: &str| {
        katalog_lang::yaml::read_documents(black_box(t))
            .expect("parses")
            .len()
    };
    let mut variants = [
        Variant::new("100,001 nodes", || read(&small)),
        Variant::new("200,001 nodes", || read(&large)),
    ];
    let stats = run_group(mode, &mut variants);
    report(
        name,
        Work {
            objects: 1,
            bytes: large.len(),
        },
        &stats,
        0,
        "× 100,001 nodes",
    );
}

/// The CRD of resource `i`: three versions, v1 (storage, the hub) with
/// `spec.a0..a3` and `spec.b0..b3`, v1beta1 with `x0..x3` for the `a`s,
/// v1alpha1 with `y0..y3` for the `b`s, and a status.
fn crd(i: usize) -> String {
    let version = |name: &str, storage: bool, a: &str, b: &str| {
        let fields: String = (0..4)
            .map(|j| {
                format!(
                    "                {a}{j}: {{type: string}}\n                {b}{j}: {{type: integer, minimum: 0}}\n"
                )
            })
            .collect();
        format!(
            "    - name: {name}\n      served: true\n      storage: {storage}\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            spec:\n              type: object\n              properties:\n{fields}            status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n      subresources: {{status: {{}}}}\n"
        )
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widget{i}s.g{i}.bench.katalog.dev\nspec:\n  group: g{i}.bench.katalog.dev\n  scope: Namespaced\n  names: {{plural: widget{i}s, singular: widget{i}, kind: Widget{i}}}\n  versions:\n{}{}{}",
        version("v1alpha1", false, "a", "y"),
        version("v1beta1", false, "x", "b"),
        version("v1", true, "a", "b"),
    )
}

/// A Katalog of `n` resources with 3 versions and 8 conversion rules
/// each; resource `i` names `crd(i)`.
fn bundle_katalog(n: usize, crd: impl Fn(usize) -> String) -> String {
    let mut text = String::from(
        "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: bundle}\nspec:\n  resources:\n",
    );
    for i in 0..n {
        let _ = write!(
            text,
            "    - group: g{i}.bench.katalog.dev\n      kind: Widget{i}\n      plural: widget{i}s\n      hub: v1\n      versions: [v1alpha1, v1beta1, v1]\n      crd: {}\n      conversion:\n        v1beta1:\n",
            crd(i)
        );
        for j in 0..4 {
            let _ = writeln!(
                text,
                "          - rename: {{hub: spec.a{j}, spoke: spec.x{j}}}"
            );
        }
        text.push_str("        v1alpha1:\n");
        for j in 0..4 {
            let _ = writeln!(
                text,
                "          - rename: {{hub: spec.b{j}, spoke: spec.y{j}}}"
            );
        }
    }
    text
}

/// Compile from disk (what `katalog check` and every reload do) a Katalog
/// of `n` resources whose CRDs are one bundle, against the same with one
/// CRD file per resource; and the reload poll's read of the CRD files.
fn crd_bundle(mode: &Mode, n: usize) {
    let name = format!("crd_bundle_{n}");
    if !mode.selected(&name) {
        return;
    }
    let n = if mode.measure { n } else { 3 };
    let dir = std::env::temp_dir().join(format!("katalog-bench-crd-bundle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("crds")).expect("a scratch directory");
    let bundle: String = (0..n).map(|i| format!("---\n{}", crd(i))).collect();
    std::fs::write(dir.join("crds.yaml"), &bundle).expect("written");
    for i in 0..n {
        std::fs::write(dir.join(format!("crds/widget{i}.crd.yaml")), crd(i)).expect("written");
    }
    std::fs::write(
        dir.join("bundle.yaml"),
        bundle_katalog(n, |_| "crds.yaml".into()),
    )
    .expect("written");
    std::fs::write(
        dir.join("per-file.yaml"),
        bundle_katalog(n, |i| format!("crds/widget{i}.crd.yaml")),
    )
    .expect("written");
    let sources = |file: &str| files::read_katalog(&dir.join(file)).expect("readable");
    let (bundled, per_file) = (sources("bundle.yaml"), sources("per-file.yaml"));
    for s in [&bundled, &per_file] {
        let ir = files::compile_katalog(s)
            .unwrap_or_else(|d| panic!("the generated Katalog compiles: {}", d.render()));
        assert_eq!(ir.resources.len(), n);
        assert_eq!(ir.rules.len(), 8 * n);
    }
    println!(
        "{name}: {n} resources, 3 versions and 8 conversion rules each; bundle {} bytes",
        bundle.len()
    );
    let mut variants = [
        Variant::new("a file per resource: read + load + compile", || {
            let ir = files::compile_katalog(black_box(&per_file)).expect("compiles");
            ir.rules.len()
        }),
        Variant::new("one bundle: read + load + compile", || {
            let ir = files::compile_katalog(black_box(&bundled)).expect("compiles");
            ir.rules.len()
        }),
        Variant::new("a file per resource: reload poll's read", || {
            files::read_crds_of(black_box(&per_file)).len()
        }),
        Variant::new("one bundle: reload poll's read", || {
            files::read_crds_of(black_box(&bundled)).len()
        }),
    ];
    let stats = run_group(mode, &mut variants);
    report(
        &name,
        Work {
            objects: n,
            bytes: bundle.len(),
        },
        &stats,
        0,
        "× a file per resource (compile)",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn compile_1000_rules(mode: &Mode) {
    let name = "compile_1000_rules";
    if !mode.selected(name) {
        return;
    }
    let n = if mode.measure { 1000 } else { 10 };
    let text = katalog(n);
    let ir = compile_sources(&[Source::new("big.yaml", text.clone())])
        .unwrap_or_else(|d| panic!("the generated Katalog compiles: {}", d.render()));
    assert_eq!(ir.rules.len(), n / 2, "conversion rules");
    assert_eq!(ir.admission.validations.len(), n - n / 2, "validations");
    println!("{name}: {n} rules, {} bytes of YAML", text.len());
    let mut variants = [
        Variant::new("load + compile", || {
            let ir = compile_sources(&[Source::new("big.yaml", black_box(text.clone()))])
                .expect("compiles");
            ir.rules.len()
        }),
        Variant::new(
            "YAML read only (katalog_lang::yaml::read_documents)",
            || {
                katalog_lang::yaml::read_documents(black_box(&text))
                    .expect("parses")
                    .len()
            },
        ),
    ];
    let stats = run_group(mode, &mut variants);
    report(
        name,
        Work {
            objects: n,
            bytes: text.len(),
        },
        &stats,
        1,
        "× YAML parse",
    );
}
