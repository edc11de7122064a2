#!/usr/bin/env bash
# Builds the control-plane binaries used by katalog's Kubernetes tests:
#   kube-apiserver, kubectl  (from testenv/kube/go.mod: k8s.io/kubernetes)
#   etcd                     (from testenv/etcd/go.mod: go.etcd.io/etcd/server/v3)
# into ${KATALOG_TESTENV_CACHE:-$HOME/.cache/katalog/testenv}/<k8s>-<etcd>/bin/.
#
#   kube-controller-manager  (only with --controller-manager: tests that need the
#                            namespace controller ask for it)
#
# The build is skipped when the binaries asked for are already there.
# Logs go to stderr; stdout gets exactly one line: the bin directory.
#
#   testenv/build.sh                       build if needed, print the bin dir
#   testenv/build.sh --controller-manager  also kube-controller-manager
#   testenv/build.sh --print-bin-dir       print the bin dir without building
#
# Environment:
#   KATALOG_TESTENV_CACHE   cache root (default $HOME/.cache/katalog/testenv)
#   KATALOG_TESTENV_JOBS    parallelism for the Go build (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Module version as written in a wrapper's go.mod (offline, no go command needed).
mod_version() { # <go.mod> <module path>
    awk -v m="$2" '($1 == m && $2 ~ /^v/) { print $2; exit }
                   ($1 == "require" && $2 == m && $3 ~ /^v/) { print $3; exit }' "$1"
}

k8s_version=$(mod_version "$here/kube/go.mod" k8s.io/kubernetes)
etcd_version=$(mod_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)
if [[ -z $k8s_version || -z $etcd_version ]]; then
    echo "build.sh: cannot read versions from $here/{kube,etcd}/go.mod" >&2
    exit 1
fi

cache_root=${KATALOG_TESTENV_CACHE:-$HOME/.cache/katalog/testenv}
out=$cache_root/$k8s_version-$etcd_version
bin=$out/bin
binaries=(kube-apiserver kubectl etcd)

if [[ ${1:-} == --print-bin-dir ]]; then
    echo "$bin"
    exit 0
elif [[ ${1:-} == --controller-manager && $# -eq 1 ]]; then
    binaries+=(kube-controller-manager)
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print-bin-dir | --controller-manager]" >&2
    exit 2
fi

have_all() {
    local b
    for b in "${binaries[@]}"; do [[ -x $bin/$b ]] || return 1; done
}

missing() { [[ ! -x $bin/$1 ]]; }

if have_all; then
    echo "reusing $bin (kubernetes $k8s_version, etcd $etcd_version)" >&2
    echo "$bin"
    exit 0
fi

mkdir -p "$out"
# Serialise concurrent builds (parallel test binaries, a script and a test, ...).
exec 9>"$out/.build.lock"
if command -v flock >/dev/null && ! flock -n 9; then
    echo "build.sh: another build holds $out/.build.lock; waiting for it" >&2
    flock 9
fi
if have_all; then # somebody else built it while we waited
    echo "reusing $bin (kubernetes $k8s_version, etcd $etcd_version)" >&2
    echo "$bin"
    exit 0
fi

command -v go >/dev/null || { echo "build.sh: the go command is required" >&2; exit 1; }

jobs=${KATALOG_TESTENV_JOBS:-2}
export CGO_ENABLED=0
# readonly: go.mod and go.sum are checked in and must not change during a build.
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOMAXPROCS=$jobs
# The wrapper modules need Go >= 1.26.0 (see their go lines); use the installed one.
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "building kubernetes $k8s_version and etcd $etcd_version into $bin" >&2
echo "($(go version); -p $jobs; the first build downloads modules and takes a while)" >&2

# Same version stamping as kubernetes' hack/lib/version.sh, so `kubectl version`
# and /version report the real release instead of v0.0.0-master.
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
xflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    xflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    xflags+=" -X $pkg.gitTreeState=clean"
done

if missing kube-apiserver || missing kubectl; then
    start=$SECONDS
    (
        cd "$here/kube"
        go build -p "$jobs" -trimpath -ldflags="-s -w$xflags" -o "$tmp/" \
            k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
    )
    echo "built kube-apiserver and kubectl in $((SECONDS - start))s" >&2
fi
if missing etcd; then
    start=$SECONDS
    (
        cd "$here/etcd"
        go build -p "$jobs" -trimpath -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
    )
    echo "built etcd in $((SECONDS - start))s" >&2
fi
if [[ " ${binaries[*]} " == *" kube-controller-manager "* ]] && missing kube-controller-manager; then
    start=$SECONDS
    (
        cd "$here/kube"
        go build -p "$jobs" -trimpath -ldflags="-s -w$xflags" -o "$tmp/" \
            k8s.io/kubernetes/cmd/kube-controller-manager
    )
    echo "built kube-controller-manager in $((SECONDS - start))s" >&2
fi

mkdir -p "$bin"
for b in "${binaries[@]}"; do
    if [[ -e $tmp/$b ]]; then
        mv -f "$tmp/$b" "$bin/$b"
    fi
done
echo "built $bin" >&2
echo "$bin"
