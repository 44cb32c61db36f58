#!/usr/bin/env bash
# A cold kubeplex's first list against the real kube-apiserver 1.36 (../shared/realcluster):
# 100,000 ConfigMaps of ~1 KB (seeded once, namespace `cold`), listed whole — directly, and as
# the first read of a kubeplex that has just started (no cache yet: the read starts it) — in
# JSON and protobuf, at resourceVersion unset (a consistent list) and 0, the client asking for
# gzip as client-go does. Then 50 readers at once on a kubeplex that has just started, and how
# many lists the apiserver served for them (its own apiserver_request_total). Prints a line per
# case: each run's seconds, and their median.
#
# Usage: cold-list.sh [RUNS=3] [COUNT=100000]
# Env: ENCODINGS (default "json protobuf"), RVS (default "- resourceVersion=0"; "-" is
# unset), FIFTY=0 to leave out the 50 readers, HARNESS (default ~/.cache/kubeplex-realcluster), KUBEPLEX_BIN, BENCH_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}; COUNT=${2:-100000}
H=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
KUBEPLEX=${KUBEPLEX_BIN:-target/release/kubeplex}
BENCH=${BENCH_BIN:-target/release/kubeplex-bench}
RUN=$(mktemp -d /tmp/cold-list.XXXXXX)
PROXY_PORT=18012 PORT=18083 ADMIN=18084
APISERVER=https://127.0.0.1:6443
TOKEN=$(awk '/token:/ {print $2; exit}' "$H/kubeconfig")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
"$H/up.sh" >/dev/null
kubectl --kubeconfig "$H/kubeconfig" proxy --port=$PROXY_PORT >"$RUN/kubectl-proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PROXY_PORT/version" >/dev/null && break; sleep 0.2; done

have=$(curl -sf "http://127.0.0.1:$PROXY_PORT/api/v1/namespaces/cold/configmaps?limit=1" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["items"]) + d["metadata"].get("remainingItemCount", 0))' ||
  echo 0)
if [ "$have" -lt "$COUNT" ]; then
  echo "seeding $COUNT ConfigMaps in namespace cold (have $have)"
  kubectl --kubeconfig "$H/kubeconfig" create namespace cold 2>/dev/null || true
  "$BENCH" --server "http://127.0.0.1:$PROXY_PORT" seed --kind configmaps --namespace cold \
    --count "$COUNT" --size 1000 --concurrency 16 >/dev/null
fi

accept() { case $1 in json) echo application/json ;; protobuf) echo application/vnd.kubernetes.protobuf ;; esac; }
# The apiserver's count of configmaps LISTs so far.
lists() {
  curl -sk -m 30 -H "Authorization: Bearer $TOKEN" "$APISERVER/metrics" |
    awk '/^apiserver_request_total\{/ && /resource="configmaps"/ && /verb="LIST"/ {s += $NF} END {printf "%d\n", s}'
}
# Seconds for one whole list: URL ENCODING [AUTH].
timed() {
  local auth=()
  [ -n "${3:-}" ] && auth=(-H "Authorization: Bearer $3")
  # Not curl's own User-Agent: the apiserver indents JSON for curl, and kubeplex passes
  # such reads through (indenting is the apiserver's to do).
  curl -sk --compressed -A kubeplex-cold-list/1 -o /dev/null -w '%{time_total} %{http_code}\n' "${auth[@]}" \
    -H "Accept: $(accept "$2")" "$1"
}
start_kubeplex() {
  "$KUBEPLEX" serve --kubeconfig "$H/kubeconfig" --listen "127.0.0.1:$PORT" \
    --admin-listen "127.0.0.1:$ADMIN" >"$RUN/kubeplex.log" 2>&1 &
  kp=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null && return; sleep 0.1; done
  echo "kubeplex did not start" >&2; exit 1
}
# Seconds until kubeplex's cache has synced (its first load applied), polled every 0.1 s.
until_synced() {
  local start; start=$(date +%s.%N)
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$ADMIN/debug/caches" | grep -q '"synced": true' && break
    sleep 0.1
  done
  python3 -c "import time; print(f'{time.time() - $start:.2f}')"
}
stop_kubeplex() { kill "$kp" 2>/dev/null || true; wait "$kp" 2>/dev/null || true; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for enc in ${ENCODINGS:-json protobuf}; do
  for rv in ${RVS:-- resourceVersion=0}; do
    [ "$rv" = - ] && rv=
    query=${rv:+?$rv}
    direct=() cold=() warm=()
    for _ in $(seq "$RUNS"); do
      read -r t code < <(timed "$APISERVER/api/v1/configmaps$query" "$enc" "$TOKEN")
      [ "$code" = 200 ] || { echo "direct: $code" >&2; exit 1; }
      direct+=("$t")
      start_kubeplex
      before=$(lists)
      read -r t code < <(timed "http://127.0.0.1:$PORT/api/v1/configmaps$query" "$enc")
      [ "$code" = 200 ] || { echo "through kubeplex: $code" >&2; exit 1; }
      cold+=("$t")
      synced_after=$(until_synced)
      listed=$(($(lists) - before))
      read -r t code < <(timed "http://127.0.0.1:$PORT/api/v1/configmaps$query" "$enc")
      warm+=("$t")
      echo "  run: direct ${direct[-1]} s, cold ${cold[-1]} s (apiserver lists $listed; cache synced ${synced_after} s after), then from the cache ${warm[-1]} s"
      stop_kubeplex
    done
    d=$(echo "${direct[*]}" | median) c=$(echo "${cold[*]}" | median)
    echo "$enc ${rv:-rv-unset}: direct ${direct[*]} (median $d) | cold kubeplex ${cold[*]} (median $c, $(python3 -c "print(f'{$c/$d:.2f}')")x) | warm ${warm[*]}"
  done
done

# 50 readers at once on a kubeplex that has just started: one upstream list for all.
[ "${FIFTY:-1}" = 0 ] && exit 0
start_kubeplex
before=$(lists)
readers=()
for i in $(seq 50); do
  timed "http://127.0.0.1:$PORT/api/v1/configmaps" json >"$RUN/reader-$i.txt" &
  readers+=($!)
done
wait "${readers[@]}"
cat "$RUN"/reader-*.txt >"$RUN/fifty.txt"
sleep 2
ok=$(awk '$2 == 200' "$RUN/fifty.txt" | wc -l)
slowest=$(awk '{print $1}' "$RUN/fifty.txt" | sort -n | tail -1)
echo "50 cold readers: $ok answered 200, slowest $slowest s; apiserver lists $(($(lists) - before))"
stop_kubeplex
echo "runs in $RUN"
