#!/usr/bin/env bash
# How long a change takes to reach a watcher against the real kube-apiserver 1.36
# (../shared/realcluster): directly, through one kubeplex, and through two chained (a node tier
# in front of a pool tier), from the writer's timestamp to the watcher reading the event
# (`kubeplex-bench watch`). The writer writes through `kubectl proxy` in every case, so its own
# path is the same; the watchers read the apiserver with the admin's token, or a kubeplex over
# plain HTTP on loopback (the sidecar mode: what is measured is the watch path, the same code in
# every mode). Prints each run's report and a line per case.
#
# Usage: watch-latency.sh [WATCHERS=50] [RATE=10] [SECONDS=30]
# Env: HARNESS (default ~/.cache/kubeplex-realcluster), KUBEPLEX_BIN, BENCH_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
WATCHERS=${1:-50}; RATE=${2:-10}; SECS=${3:-30}
H=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
KUBEPLEX=${KUBEPLEX_BIN:-target/release/kubeplex}
BENCH=${BENCH_BIN:-target/release/kubeplex-bench}
RUN=$(mktemp -d /tmp/watch-latency.XXXXXX)
PROXY_PORT=18011 FRONT=18081 POOL=18082
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
"$H/up.sh" >/dev/null
kubectl --kubeconfig "$H/kubeconfig" proxy --port=$PROXY_PORT >"$RUN/kubectl-proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PROXY_PORT/version" >/dev/null && break; sleep 0.2; done
writer=(--writer-server "http://127.0.0.1:$PROXY_PORT")
"$BENCH" --server "http://127.0.0.1:$PROXY_PORT" seed --kind configmaps --count 100 --namespace bench >/dev/null
# A kubeconfig for the front tier: the pool over plain HTTP, no credentials.
cat >"$RUN/pool.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: pool, cluster: {server: "http://127.0.0.1:$POOL"}}]
users: [{name: none, user: {}}]
contexts: [{name: pool, context: {cluster: pool, user: none}}]
current-context: pool
KC
start_kubeplex() { # NAME PORT KUBECONFIG
  "$KUBEPLEX" serve --kubeconfig "$3" --listen "127.0.0.1:$2" --admin-listen 127.0.0.1:0 \
    --cache configmaps >"$RUN/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$2/api/v1/namespaces/bench/configmaps?limit=1" >/dev/null && return
    sleep 0.2
  done
  echo "kubeplex $1 did not start" >&2; exit 1
}
run() { # NAME ARGS...
  local name=$1; shift
  echo "== $name"
  "$BENCH" "$@" watch --kind configmaps --namespace bench --watchers "$WATCHERS" --rate "$RATE" \
    --duration "$SECS" "${writer[@]}" | tee "$RUN/$name.txt"
}
run direct --kubeconfig "$H/kubeconfig"
start_kubeplex pool $POOL "$H/kubeconfig"
run one-tier --server "http://127.0.0.1:$POOL"
start_kubeplex front $FRONT "$RUN/pool.kubeconfig"
run two-tiers --server "http://127.0.0.1:$FRONT"
echo "runs in $RUN"
