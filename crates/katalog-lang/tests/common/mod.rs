//! What the golden-file tests of katalog-lang share.

use std::path::Path;

/// Compare `rendered` with the golden file at `expected_path` (rewritten
/// instead with `BLESS=1`); a mismatch is pushed to `mismatches`, named `name`.
pub fn golden(name: &str, expected_path: &Path, rendered: &str, mismatches: &mut Vec<String>) {
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(expected_path, rendered).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(expected_path)
        .unwrap_or_else(|_| panic!("missing {}; run with BLESS=1", expected_path.display()));
    if expected != rendered {
        mismatches.push(format!(
            "--- {name}: expected\n{expected}\n--- got\n{rendered}"
        ));
    }
}
