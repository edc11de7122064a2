#!/usr/bin/env bash
# Builds crontab-peer, the controller-runtime webhook of this directory, into
#   ${KATALOG_PEERS_CACHE:-$HOME/.cache/katalog/peers}/crontab-peer-<hash>/crontab-peer
# where <hash> covers go.mod, go.sum and every .go file here, so a change to
# the sources builds anew and an unchanged tree reuses the binary.
#
# Logs go to stderr; stdout gets exactly one line: the binary's path.
#
# Environment:
#   KATALOG_PEERS_CACHE   cache root (default $HOME/.cache/katalog/peers)
#   KATALOG_PEERS_JOBS    parallelism for the Go build (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

hash=$( (cat go.mod go.sum; find . -name '*.go' | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-12)
out=${KATALOG_PEERS_CACHE:-$HOME/.cache/katalog/peers}/crontab-peer-$hash
bin=$out/crontab-peer

if [[ -x $bin ]]; then
    echo "reusing $bin" >&2
    echo "$bin"
    exit 0
fi
command -v go >/dev/null || { echo "build.sh: the go command is required" >&2; exit 1; }

mkdir -p "$out"
exec 9>"$out/.build.lock"
if command -v flock >/dev/null && ! flock -n 9; then
    echo "build.sh: another build holds $out/.build.lock; waiting for it" >&2
    flock 9
fi
if [[ -x $bin ]]; then
    echo "reusing $bin" >&2
    echo "$bin"
    exit 0
fi

jobs=${KATALOG_PEERS_JOBS:-2}
export CGO_ENABLED=0
# go.mod and go.sum are checked in: a build must not change them.
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

echo "building crontab-peer into $out ($(go version); the first build downloads modules)" >&2
start=$SECONDS
tmp=$(mktemp "$out/.crontab-peer.XXXXXX")
trap 'rm -f "$tmp"' EXIT
go build -p "$jobs" -trimpath -o "$tmp" .
mv -f "$tmp" "$bin"
echo "built $bin in $((SECONDS - start))s" >&2
echo "$bin"
