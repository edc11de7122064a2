#!/usr/bin/env bash
# `scripts/testenv up` and `down` with stand-in binaries (no Go build, no real
# control plane), the run-etcd wrapper slowed down before its exec as a loaded
# machine slows it: `up` must wait for etcd instead of declaring it dead, and
# `down` must stop what `up` started. Bounded: every wait has a deadline.
# Run by `cargo test -p katalog-testenv --test script` (or directly).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/katalog-testenv-up-test.XXXXXX")
state=$work/state
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    KATALOG_TESTENV_STATE=$state KATALOG_TESTENV_CACHE=$work/cache \
        "$root/scripts/testenv" down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "up-test: FAIL: $*" >&2; exit 1; }

# Stand-in binaries where testenv/build.sh looks for them.
bin=$(KATALOG_TESTENV_CACHE=$work/cache "$root/testenv/build.sh" --print-bin-dir)
mkdir -p "$bin"
markers=$work/markers
mkdir -p "$markers"
for name in etcd kube-apiserver; do
    cat >"$bin/$name" <<EOF
#!/usr/bin/env bash
touch "$markers/$name"
exec sleep 60
EOF
done
# Ready once both stand-ins run.
cat >"$bin/kubectl" <<EOF
#!/usr/bin/env bash
[[ -f "$markers/etcd" && -f "$markers/kube-apiserver" ]]
EOF
chmod +x "$bin"/*

# Every bash script started below reads this first: the run-etcd wrapper
# takes 2 s before it execs etcd, as resolving its binary directory can under
# load (the liveness check used to call it dead then).
cat >"$work/slow-wrapper.sh" <<'EOF'
if [[ $0 == */scripts/testenv && ${1:-} == run-etcd ]]; then sleep 2; fi
EOF

# Some load on the machine too, bounded.
for _ in 1 2; do
    (end=$((SECONDS + 5)); while ((SECONDS < end)); do :; done) &
    pids+=($!)
done

out=$(KATALOG_TESTENV_STATE=$state KATALOG_TESTENV_CACHE=$work/cache \
    KATALOG_TESTENV_START_TIMEOUT=30 BASH_ENV=$work/slow-wrapper.sh \
    timeout 60 "$root/scripts/testenv" up 2>"$work/up.log") ||
    fail "up failed: $(cat "$work/up.log")"
[[ $out == "export KUBECONFIG=$state/kubeconfig" ]] || fail "up printed: $out"
grep -q "ready in" "$work/up.log" || fail "up did not say ready: $(cat "$work/up.log")"

# The pid files name the stand-ins (the wrappers exec'ed them, same pid).
read -r etcd_pid _ <"$state/etcd.pid"
read -r api_pid _ <"$state/apiserver.pid"
for pid in "$etcd_pid" "$api_pid"; do
    kill -0 "$pid" 2>/dev/null || fail "pid $pid is not running after up"
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q '^sleep 60' ||
        fail "pid $pid is not a stand-in: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
done

# A stale pid file (same pid, another start time) is not ours: env refuses.
cp "$state/apiserver.pid" "$work/apiserver.pid.real"
echo "$api_pid 1" >"$state/apiserver.pid"
if KATALOG_TESTENV_STATE=$state "$root/scripts/testenv" env >/dev/null 2>&1; then
    fail "env accepted a pid file whose start time is not the process's"
fi
cp "$work/apiserver.pid.real" "$state/apiserver.pid"
KATALOG_TESTENV_STATE=$state "$root/scripts/testenv" env >/dev/null ||
    fail "env refused the running control plane"

KATALOG_TESTENV_STATE=$state timeout 30 "$root/scripts/testenv" down 2>/dev/null ||
    fail "down failed"
for pid in "$etcd_pid" "$api_pid"; do
    for _ in $(seq 1 50); do
        [[ -e /proc/$pid ]] && [[ $(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) != Z ]] || break
        sleep 0.1
    done
    [[ ! -e /proc/$pid || $(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) == Z ]] ||
        fail "pid $pid still runs after down"
done
[[ ! -e $state ]] || fail "down left $state"
echo "up-test: ok"
