#!/usr/bin/env bash
# kubeplex's memory with a large cache, against the real kube-apiserver 1.36
# (../shared/realcluster): the 100,000 ConfigMaps of ~1 KB that cold-list.sh seeds (namespace
# `cold`; run it once first). A fresh kubeplex: its RSS idle; then with the cache of every
# ConfigMap in the first encoding (a whole list in it starts the cache and is its first load);
# then with a reader of the second encoding too (its cache rendered from the first's: issue 31).
# After each, the RSS above idle beside the bytes the caches hold (/debug/caches), and the
# list and watch calls kubeplex made upstream by encoding (kubeplex_upstream_calls_total).
#
# Usage: memory.sh [FIRST=json] [SECOND=protobuf]
# Env: HARNESS (default ~/.cache/kubeplex-realcluster), KUBEPLEX_BIN (default
# target/release/kubeplex), KUBEPLEX_ARGS (more flags for `kubeplex serve`), HEAPTRACK=1 to run
# kubeplex under heaptrack (its profile is left in the run directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
FIRST=${1:-json}; SECOND=${2:-protobuf}
H=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
KUBEPLEX=${KUBEPLEX_BIN:-target/release/kubeplex}
RUN=$(mktemp -d /tmp/memory.XXXXXX)
PORT=18093 ADMIN=18094
kp=
# kubeplex itself too: under heaptrack, $kp is heaptrack's, which leaves its child running.
cleanup() {
  [ -n "$kp" ] && { kill "$(kubeplex_pid)" 2>/dev/null; kill "$kp" 2>/dev/null; }
  wait 2>/dev/null || true
}
trap cleanup EXIT
"$H/up.sh" >/dev/null

accept() { case $1 in json) echo application/json ;; protobuf) echo application/vnd.kubernetes.protobuf ;; esac; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# kubeplex's pid (heaptrack runs it as a child).
kubeplex_pid() { pgrep -n -f "kubeplex serve .*127.0.0.1:$PORT" || echo "$kp"; }
caches() { curl -sf "http://127.0.0.1:$ADMIN/debug/caches"; }
# Seconds until the configmaps cache in encoding $1 is synced.
until_synced() {
  local start; start=$(date +%s.%N)
  for _ in $(seq 1200); do
    caches | python3 -c '
import json, sys
enc = sys.argv[1]
cs = [c for c in json.load(sys.stdin)["caches"] if c["resource"] == "configmaps/v1" and c["encoding"] == enc]
sys.exit(0 if cs and cs[0]["synced"] else 1)' "$1" && break
    sleep 0.1
  done
  python3 -c "import time; print(f'{time.time() - $start:.2f}')"
}
report() {
  local label=$1 pid; pid=$(kubeplex_pid)
  sleep 3  # loads' transient buffers freed
  local rss; rss=$(rss_kib "$pid")
  caches | python3 -c '
import json, sys
label, rss, idle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = sum(c["bytes"] for c in json.load(sys.stdin)["caches"] if c["resource"] == "configmaps/v1")
above = (rss - idle) * 1024
ratio = above / held if held else 0
print(f"{label:<34} RSS {rss / 1024:7.1f} MiB, above idle {above / 2**20:7.1f} MiB; caches hold {held / 2**20:7.1f} MiB: {ratio:.2f}x")
' "$label" "$rss" "$IDLE"
  curl -sf "http://127.0.0.1:$ADMIN/metrics" |
    awk '/^kubeplex_upstream_calls_total\{/ && /configmaps/ && $NF > 0 {print "    " $0}'
}

args=(serve --kubeconfig "$H/kubeconfig" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN")
# shellcheck disable=SC2206
args+=(${KUBEPLEX_ARGS:-})
if [ "${HEAPTRACK:-0}" = 1 ]; then
  heaptrack -o "$RUN/heaptrack" "$KUBEPLEX" "${args[@]}" >"$RUN/kubeplex.log" 2>&1 &
else
  "$KUBEPLEX" "${args[@]}" >"$RUN/kubeplex.log" 2>&1 &
fi
kp=$!
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null && break; sleep 0.1; done
sleep 1
IDLE=$(rss_kib "$(kubeplex_pid)")
echo "idle: RSS $((IDLE / 1024)) MiB ($RUN)"

list() {
  curl -s --compressed -A kubeplex-memory/1 -o /dev/null -w '%{http_code} %{time_total}s' \
    -H "Accept: $(accept "$1")" "http://127.0.0.1:$PORT/api/v1/configmaps?resourceVersion=0"
}
echo "a $FIRST list (starts its cache): $(list "$FIRST")"
echo "  $FIRST cache synced after $(until_synced "$FIRST") s"
report "with the $FIRST cache"
echo "a $SECOND list: $(list "$SECOND")"
echo "  $SECOND cache synced after $(until_synced "$SECOND") s"
report "with $FIRST and $SECOND caches"
echo "a $SECOND list from its cache: $(list "$SECOND")"
caches | python3 -c '
import json, sys
for c in json.load(sys.stdin)["caches"]:
    if c["resource"] == "configmaps/v1":
        enc, n, mib, src = c["encoding"], c["objects"], c["bytes"] / 2**20, c.get("rendered_from", "-")
        print(f"  {enc}: {n} objects, {mib:.1f} MiB, rendered from {src}")'
