//! Katalog compile time: load + compile of a generated Katalog of 1,000
//! rules (500 conversion renames on one resource, 500 validations with a
//! pattern each), the figure issue 10 sets a target for (≤ 10 ms).
//!
//! `cargo bench -p katalog-benches --bench compile`; `cargo test
//! --all-targets` runs it once as a smoke test.

use std::fmt::Write as _;
use std::hint::black_box;

use katalog_benches::harness::{Mode, Variant, Work, report, run_group};
use katalog_lang::{Source, compile_sources};

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
    let stats = run_group(&mode, &mut variants);
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
