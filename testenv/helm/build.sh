#!/usr/bin/env bash
# Builds the helm binary used by the chart tests (tests/helm.rs) from the
# wrapper module beside this script (go.mod pins helm.sh/helm/v4) into
# ${KATALOG_HELM_CACHE:-$HOME/.cache/katalog/helm}/<version>/helm, never into
# the repository. The build is skipped when that binary is already there.
# Logs go to stderr; stdout gets exactly one line: the binary's path.
#
#   testenv/helm/build.sh              build if needed, print the binary path
#   testenv/helm/build.sh --print-path print the binary path without building
#
# Environment:
#   KATALOG_HELM_CACHE   cache root (default $HOME/.cache/katalog/helm)
#   KATALOG_TESTENV_JOBS parallelism for the Go build (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
module=helm.sh/helm/v4

version=$(awk -v m="$module" '($1 == m && $2 ~ /^v/) { print $2; exit }
                              ($1 == "require" && $2 == m && $3 ~ /^v/) { print $3; exit }' "$here/go.mod")
if [[ -z $version ]]; then
    echo "helm/build.sh: cannot read the $module version from $here/go.mod" >&2
    exit 1
fi

out=${KATALOG_HELM_CACHE:-$HOME/.cache/katalog/helm}/$version
helm=$out/helm

if [[ ${1:-} == --print-path ]]; then
    echo "$helm"
    exit 0
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print-path]" >&2
    exit 2
fi

if [[ -x $helm ]]; then
    echo "reusing $helm (helm $version)" >&2
    echo "$helm"
    exit 0
fi

mkdir -p "$out"
# Serialise concurrent builds (parallel test binaries, a script and a test, ...).
exec 9>"$out/.build.lock"
if command -v flock >/dev/null && ! flock -n 9; then
    echo "helm/build.sh: another build holds $out/.build.lock; waiting for it" >&2
    flock 9
fi
if [[ -x $helm ]]; then # somebody else built it while we waited
    echo "reusing $helm (helm $version)" >&2
    echo "$helm"
    exit 0
fi

command -v go >/dev/null || { echo "helm/build.sh: the go command is required" >&2; exit 1; }

jobs=${KATALOG_TESTENV_JOBS:-2}
export CGO_ENABLED=0
# readonly: go.mod and go.sum are checked in and must not change during a build.
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOMAXPROCS=$jobs
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "building helm $version into $helm" >&2
echo "($(go version); -p $jobs, nice; the first build downloads modules and takes a while)" >&2
start=$SECONDS
# The version stamping of helm's own Makefile for a tagged release.
(
    cd "$here"
    nice -n 10 go build -p "$jobs" -trimpath \
        -ldflags="-s -w -X $module/internal/version.version=$version -X $module/internal/version.gitTreeState=clean" \
        -o "$tmp/helm" "$module/cmd/helm"
)
mv -f "$tmp/helm" "$helm"
echo "built helm $version in $((SECONDS - start))s" >&2
echo "$helm"
