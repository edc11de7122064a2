//! CEL evaluation, katalog against cel-go: the VAP-style expressions of
//! `benches/data/cel-groups.json` over its Pod, by group (plain fields,
//! macros, optionals, strings and regexes, the Kubernetes libraries). Each
//! call evaluates every expression of the group once on the parsed object,
//! the programs compiled beforehand (warm); the per-evaluation time is the
//! median over the group's size. cel-go's figures for the same file come
//! from `go test -bench` in testenv/celoracle (see docs/benchmarks.md).
//!
//! `cargo bench -p katalog-benches --bench cel`; `cargo test --all-targets`
//! runs it once as a smoke test, which checks that every expression is true
//! on both evaluators.

use std::hint::black_box;

use katalog_benches::harness::{Mode, Variant, Work, fmt_duration, report, run_group};
use katalog_lang::cel::{CelProgram, interpreter_only};
use serde_json::Value;

fn main() {
    let mode = Mode::from_args();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/cel-groups.json");
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the data file")).expect("JSON");
    let object = data["object"].clone();
    for group in data["groups"].as_array().expect("groups") {
        let name = format!("cel_{}", group["name"].as_str().expect("a name"));
        if !mode.selected(&name) {
            continue;
        }
        let programs: Vec<CelProgram> = group["exprs"]
            .as_array()
            .expect("exprs")
            .iter()
            .map(|e| CelProgram::compile(e.as_str().expect("a string")).expect("compiles"))
            .collect();
        let vars = [("object", &object)];
        for p in &programs {
            assert!(
                p.eval_bool(&vars).expect("evaluates"),
                "`{}` is true",
                p.source()
            );
            assert!(
                interpreter_only(|| p.eval_bool(&vars)).expect("evaluates"),
                "`{}` is true with the interpreter alone",
                p.source()
            );
        }
        let run = || {
            programs
                .iter()
                .filter(|p| p.eval_bool(black_box(&vars)).unwrap_or(false))
                .count()
        };
        let mut variants = [
            Variant::new("katalog (evaluator over JSON first)", run),
            Variant::new("katalog (cel's interpreter alone)", || {
                interpreter_only(run)
            }),
        ];
        let stats = run_group(&mode, &mut variants);
        report(
            &name,
            Work {
                objects: programs.len(),
                bytes: 0,
            },
            &stats,
            0,
            "× evaluator",
        );
        for s in &stats {
            println!(
                "{name}: {} per evaluation ({} expressions), {}",
                fmt_duration(s.median / programs.len() as u32),
                programs.len(),
                s.name
            );
        }
    }
}
