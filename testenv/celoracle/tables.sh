#!/usr/bin/env bash
# Writes testdata/cel/library-cases.jsonl: every expression of the CEL
# library test tables of k8s.io/apiserver (pkg/cel/library/*_test.go, at the
# version of testenv/celoracle/go.mod, read from the Go module cache) with
# the oracle's answer. crates/katalog-lang/tests/cel_library.rs runs them on
# both of katalog's evaluators. Needs the go command; rerun after changing
# the version.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
binary=$("$here/build.sh")
version=$(awk '($1 == "k8s.io/apiserver" && $2 ~ /^v/) { print $2; exit }' "$here/go.mod")
dir=$(cd "$here" && GOFLAGS=-mod=readonly GOTOOLCHAIN=${GOTOOLCHAIN:-local} go mod download -json "k8s.io/apiserver@$version" |
    awk -F'"' '$2 == "Dir" { print $4 }')
out=$repo/testdata/cel/library-cases.jsonl
"$binary" --tables "$dir/pkg/cel/library" > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $(wc -l < "$out") cases from k8s.io/apiserver@$version to $out" >&2
