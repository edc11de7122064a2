#!/usr/bin/env bash
# Builds the cel-go oracle (testenv/celoracle: k8s.io/apiserver's CEL
# environment for a ValidatingAdmissionPolicy, see docs/cel.md) into
# ${KATALOG_CELORACLE_CACHE:-$HOME/.cache/katalog/celoracle}/<apiserver version>/celoracle.
#
# The build is skipped when the binary there was built from the same sources
# (a hash of oracle.go, go.mod and go.sum is kept beside it).
# Logs go to stderr; stdout gets exactly one line: the binary's path.
#
#   testenv/celoracle/build.sh
#
# Environment:
#   KATALOG_CELORACLE_CACHE  cache root (default $HOME/.cache/katalog/celoracle)
#   KATALOG_TESTENV_JOBS     parallelism for the Go build (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

version=$(awk '($1 == "k8s.io/apiserver" && $2 ~ /^v/) { print $2; exit }' "$here/go.mod")
if [[ -z $version ]]; then
    echo "build.sh: cannot read the k8s.io/apiserver version from $here/go.mod" >&2
    exit 1
fi

cache_root=${KATALOG_CELORACLE_CACHE:-$HOME/.cache/katalog/celoracle}
out=$cache_root/$version
binary=$out/celoracle
stamp=$(cat "$here"/*.go "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)

fresh() { [[ -x $binary && -f $out/stamp && $(cat "$out/stamp") == "$stamp" ]]; }

if fresh; then
    echo "reusing $binary (k8s.io/apiserver $version)" >&2
    echo "$binary"
    exit 0
fi

mkdir -p "$out"
# Serialise concurrent builds (parallel test binaries, a script and a test, ...).
exec 9>"$out/.build.lock"
if command -v flock >/dev/null && ! flock -n 9; then
    echo "build.sh: another build holds $out/.build.lock; waiting for it" >&2
    flock 9
fi
if fresh; then # somebody else built it while we waited
    echo "reusing $binary (k8s.io/apiserver $version)" >&2
    echo "$binary"
    exit 0
fi

command -v go >/dev/null || { echo "build.sh: the go command is required" >&2; exit 1; }

jobs=${KATALOG_TESTENV_JOBS:-2}
export CGO_ENABLED=0
# readonly: go.mod and go.sum are checked in and must not change during a build.
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOMAXPROCS=$jobs
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
echo "building the cel-go oracle (k8s.io/apiserver $version) into $binary" >&2
(
    cd "$here"
    nice go build -p "$jobs" -trimpath -ldflags="-s -w -X main.apiserverVersion=$version" \
        -o "$tmp/celoracle" .
)
mv -f "$tmp/celoracle" "$binary"
echo "$stamp" > "$out/stamp"
echo "built $binary in $((SECONDS - start))s" >&2
echo "$binary"
