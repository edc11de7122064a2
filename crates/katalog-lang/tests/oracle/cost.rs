//! cel-go's static cost estimates (the oracle's `--cost`) against katalog's
//! (`katalog_lang::cel::cost`, `CelProgram::estimated_cost`): the same
//! minimum and maximum for every expression both compile, but for the known
//! differences of `testdata/cel/cost-differences.yaml`.

use std::path::Path;

use katalog_lang::cel::CelProgram;
use serde_json::json;

/// cel-go's answer for one expression: its estimate, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Estimated {
    /// `(min, max)`.
    Range(u64, u64),
    /// cel-go does not compile the expression (the message).
    Refused(String),
}

/// The oracle's `--cost` answers for `exprs`, in order (no bindings: the
/// static estimate does not depend on them).
pub fn ask_costs(binary: &str, exprs: &[String]) -> Vec<Estimated> {
    let lines: Vec<String> = exprs
        .iter()
        .map(|e| json!({ "expr": e, "bindings": {} }).to_string())
        .collect();
    super::exchange(binary, &["--cost"], lines)
        .into_iter()
        .map(|v| match (v["min"].as_u64(), v["max"].as_u64()) {
            (Some(min), Some(max)) => Estimated::Range(min, max),
            _ => Estimated::Refused(v["error"].as_str().unwrap_or_default().to_owned()),
        })
        .collect()
}

/// A known difference of the estimate: the expressions it covers and why.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownCost {
    /// Regex matched against the expression.
    #[serde(with = "serde_regex")]
    pub expr: regex::Regex,
    /// Why katalog's estimate differs.
    pub reason: String,
}

mod serde_regex {
    use serde::Deserialize;

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<regex::Regex, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text).map_err(serde::de::Error::custom)
    }
}

pub fn known_cost_differences(repo: &Path) -> Vec<KnownCost> {
    let path = repo.join("testdata/cel/cost-differences.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str::<Option<Vec<KnownCost>>>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap_or_default()
}

/// Compares katalog's estimates with cel-go's; returns the report lines of
/// new differences and prints the counts.
pub fn compare_costs(
    label: &str,
    exprs: &[String],
    oracle: &[Estimated],
    known: &[KnownCost],
) -> Vec<String> {
    let mut counts = vec![0usize; known.len()];
    let (mut equal, mut refused_by_cel_go, mut refused_by_katalog) = (0usize, 0usize, 0usize);
    let mut new = Vec::new();
    for (expr, want) in exprs.iter().zip(oracle) {
        let Estimated::Range(min, max) = want else {
            refused_by_cel_go += 1;
            continue;
        };
        let Ok(program) = CelProgram::compile(expr) else {
            refused_by_katalog += 1;
            continue;
        };
        let got = program.estimated_cost();
        if matches!(&got, Ok(e) if (e.min, e.max) == (*min, *max)) {
            equal += 1;
            continue;
        }
        match known.iter().position(|k| k.expr.is_match(expr)) {
            Some(i) => counts[i] += 1,
            None => new.push(format!(
                "{expr}\n    cel-go: min {min}, max {max}\n    katalog: {got:?}"
            )),
        }
    }
    eprintln!(
        "{label}: {} expressions; {equal} estimates equal cel-go's, {} differ \
         ({} known, {} new); {refused_by_cel_go} not compiled by cel-go, \
         {refused_by_katalog} not compiled by katalog",
        exprs.len(),
        counts.iter().sum::<usize>() + new.len(),
        counts.iter().sum::<usize>(),
        new.len(),
    );
    for (k, n) in known.iter().zip(&counts) {
        if *n > 0 {
            eprintln!("  {n:>5}  {}", k.expr.as_str());
        }
    }
    new
}
