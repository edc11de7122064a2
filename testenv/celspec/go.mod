// Pins the cel-spec release whose conformance cases
// (tests/simple/testdata/*.textproto) crates/katalog-lang/tests/cel_spec.rs
// runs through both CEL evaluators. The module is only downloaded (go mod
// download, into ~/.cache/katalog/go-mod), never built. See docs/katalog.md.
module github.com/katalog-dev/katalog/testenv/celspec

go 1.26.0

require github.com/google/cel-spec v0.24.0
