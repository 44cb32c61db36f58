#!/usr/bin/env bash
# Reproduces BENCHMARKS.md on this machine: the fake apiserver seeded with 10,000 realistic pods,
# kubeplex in front of it, and nginx serving the very bytes kubeplex answers as static files.
# Every figure is printed and appended as JSON to $OUT/results.jsonl.
#
#   scripts/bench.sh            # everything (about 10 minutes on 2 cores)
#   QUICK=1 scripts/bench.sh    # 1,000 pods, short runs, 1k watchers only
#   ONLY=watch scripts/bench.sh # only the watch runs (or ONLY=list, ONLY=idle, ONLY=mix)
#   BUILD=debug ONLY=mix scripts/bench.sh  # a debug build (call counts do not depend on speed)
#
# Needs nginx (apt-get install nginx-light) for the static-file ceiling; skipped without it.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-target/bench-run}
PODS=${PODS:-10000}
SECS=${SECS:-10}
WATCHERS=${WATCHERS:-"1000 10000"}
if [ -n "${QUICK:-}" ]; then PODS=1000; SECS=3; WATCHERS=1000; fi
SIM=127.0.0.1:26443
KP=127.0.0.1:28001
ADMIN=127.0.0.1:29090
NGINX_JSON=127.0.0.1:28080
NGINX_PB=127.0.0.1:28081

BUILD=${BUILD:-release}
case $BUILD in
  release) cargo build --release --bins -p kubeplex -p kubeplex-bench >&2 ;;
  debug) cargo build --bins -p kubeplex -p kubeplex-bench >&2 ;;
  *) echo "BUILD must be release or debug" >&2; exit 2 ;;
esac
K=target/$BUILD/kubeplex
B=target/$BUILD/kubeplex-bench
MIX_NODES=${MIX_NODES:-10}
MIX_SECS=${MIX_SECS:-20}
rm -rf "$OUT" && mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

$K sim --listen $SIM --write-kubeconfig "$OUT/sim.kubeconfig" --seed pods=0 >"$OUT/sim.log" 2>&1 &
SIM_PID=$!; pids+=($SIM_PID)
for _ in $(seq 100); do [ -f "$OUT/sim.kubeconfig" ] && break; sleep 0.1; done

run() { # label, then kubeplex-bench arguments
  local label=$1; shift
  echo "== $label" >&2
  $B --json "$@" | while read -r line; do
    echo "{\"label\":\"$label\",\"report\":$line}" >>"$OUT/results.jsonl"
    echo "$line" >&2
  done
}

# A node client mix started together (kubelets and kube-proxies of $MIX_NODES nodes, 3 agents, a
# ConfigMap informer, kubectl), directly and through a cold kubeplex (no --cache: every cache
# starts with its first reader), against the demo cluster (20 nodes, 3,000 pods) plus 100 pods
# the writer changes: the LIST and WATCH calls the upstream received.
mix() {
  local sim=127.0.0.1:26444 kp=127.0.0.1:28003 admin=127.0.0.1:29092
  $K sim --listen $sim --write-kubeconfig "$OUT/mix-sim.kubeconfig" --seed demo >"$OUT/mix-sim.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -f "$OUT/mix-sim.kubeconfig" ] && break; sleep 0.1; done
  run mix-seed --server http://$sim seed --kind pods --count 100 --nodes 20
  run mix-apiserver --server http://$sim --upstream-metrics http://$sim/metrics \
    mix --nodes "$MIX_NODES" --duration "$MIX_SECS"
  $K serve --kubeconfig "$OUT/mix-sim.kubeconfig" --listen $kp --admin-listen $admin >"$OUT/kubeplex-mix.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do curl -sf "http://$admin/readyz" >/dev/null && break; sleep 0.2; done
  run mix-kubeplex --server http://$kp --upstream-metrics http://$sim/metrics \
    mix --writer-server http://$sim --proxy-metrics http://$admin/metrics --nodes "$MIX_NODES" --duration "$MIX_SECS"
}
if [ "${ONLY:-}" = mix ]; then mix; echo "results: $OUT/results.jsonl" >&2; exit 0; fi

# 10,000 pods of ~8.4 KiB (as a real apiserver stores them, managedFields included) on 100
# nodes, and 100 small configmaps for the watch runs.
run seed-pods --server http://$SIM seed --kind pods --count "$PODS" --size 8400 --nodes 100 --concurrency 8
run seed-configmaps --server http://$SIM seed --kind configmaps --count 100

$K serve --kubeconfig "$OUT/sim.kubeconfig" --listen $KP --admin-listen $ADMIN \
  --cache pods,pods:protobuf,configmaps >"$OUT/kubeplex.log" 2>&1 &
KP_PID=$!; pids+=($KP_PID)
for _ in $(seq 300); do curl -sf "http://$ADMIN/readyz" >/dev/null && break; sleep 0.2; done

# The bytes kubeplex answers, as static files for nginx.
LIST=/api/v1/namespaces/bench/pods
mkdir -p "$OUT/www-json$LIST" "$OUT/www-pb$LIST" "$OUT/nginx-tmp"
rmdir "$OUT/www-json$LIST" "$OUT/www-pb$LIST"
curl -sf -o "$OUT/www-json$LIST" "http://$KP$LIST?resourceVersion=0"
curl -sf -H 'Accept: application/vnd.kubernetes.protobuf' -o "$OUT/www-pb$LIST" "http://$KP$LIST?resourceVersion=0"
ls -l "$OUT/www-json$LIST" "$OUT/www-pb$LIST" >&2
NGINX=$(command -v nginx || true)
if [ -n "$NGINX" ]; then
  cat >"$OUT/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $OUT/nginx-tmp;
  proxy_temp_path $OUT/nginx-tmp;
  fastcgi_temp_path $OUT/nginx-tmp;
  uwsgi_temp_path $OUT/nginx-tmp;
  scgi_temp_path $OUT/nginx-tmp;
  server { listen $NGINX_JSON; root $OUT/www-json; default_type application/json; }
  server { listen $NGINX_PB; root $OUT/www-pb; default_type application/vnd.kubernetes.protobuf; }
}
EOF
  "$NGINX" -c "$OUT/nginx.conf" -p "$OUT" >"$OUT/nginx.log" 2>&1 &
  pids+=($!)
  sleep 1
fi

# Lists of 10,000 pods at resourceVersion=0, 1 and 8 clients, JSON and protobuf.
[ "${ONLY:-list}" = list ] && for clients in 1 8; do
  run "list-json-c$clients-apiserver" --server http://$SIM list --rv zero --clients $clients --duration "$SECS"
  run "list-json-c$clients-kubeplex" --server http://$KP list --rv zero --clients $clients --duration "$SECS"
  [ -n "$NGINX" ] && run "list-json-c$clients-nginx" --server http://$NGINX_JSON list --rv zero --clients $clients --duration "$SECS"
  run "list-pb-c$clients-apiserver" --server http://$SIM list --rv zero --protobuf --clients $clients --duration "$SECS"
  run "list-pb-c$clients-kubeplex" --server http://$KP list --rv zero --protobuf --clients $clients --duration "$SECS"
  [ -n "$NGINX" ] && run "list-pb-c$clients-nginx" --server http://$NGINX_PB list --rv zero --protobuf --clients $clients --duration "$SECS"
done
[ "${ONLY:-list}" = list ] && {
run list-gzip-c8-kubeplex --server http://$KP list --rv zero --gzip --clients 8 --duration "$SECS"
run list-node-c8-kubeplex --server http://$KP list --rv zero --field-selector spec.nodeName=node-7 --clients 8 --duration "$SECS"
run list-node-c8-apiserver --server http://$SIM list --rv zero --field-selector spec.nodeName=node-7 --clients 8 --duration "$SECS"
}

# Watchers: idle RSS per watcher, and fan-out latency at 100 (and 10) events/s. The writer
# writes to the upstream, as controllers do; the watchers read kubeplex (or the upstream).
if [ "${ONLY:-watch}" = watch ]; then
for w in $WATCHERS; do
  for rate in ${RATES:-100 10}; do
    run "watch-w$w-r$rate-kubeplex" --server http://$KP --upstream-metrics http://$SIM/metrics watch --writer-server http://$SIM --kind configmaps --watchers "$w" --rate $rate --duration "$SECS" --objects 100 --settle 30 --pid $KP_PID
    run "watch-w$w-r$rate-apiserver" --server http://$SIM watch --kind configmaps --watchers "$w" --rate $rate --duration "$SECS" --objects 100 --settle 30 --pid $SIM_PID
  done
done
# The same watchers multiplexed over 100 HTTP/2 connections (what clients sharing a
# connection, like kubelets behind one agent, or a node-local kubeplex's h2 clients, do).
for w in $WATCHERS; do
  run "watch-h2-w$w-r100-kubeplex" --server http://$KP watch --writer-server http://$SIM --h2-connections 100 --kind configmaps --watchers "$w" --rate 100 --duration "$SECS" --objects 100 --settle 30 --pid $KP_PID
  run "watch-h2-w$w-r100-apiserver" --server http://$SIM watch --h2-connections 100 --kind configmaps --watchers "$w" --rate 100 --duration "$SECS" --objects 100 --settle 30 --pid $SIM_PID
done
run watch-node-w1000-r100-kubeplex --server http://$KP watch --writer-server http://$SIM --kind pods --watchers 1000 --rate 100 --duration "$SECS" --objects "$PODS" --nodes 100 --field-selector spec.nodeName=node-7 --pid $KP_PID
fi

# Idle watcher memory, each count in a fresh kubeplex (a process that served the runs above
# reuses the heap they freed, which reads low), over HTTP/1.1 through the lean server and
# through hyper (--http1-server hyper).
if [ "${ONLY:-idle}" = idle ] || [ "${ONLY:-}" = watch ]; then
for http1 in lean hyper; do
  for w in $WATCHERS; do
    $K serve --kubeconfig "$OUT/sim.kubeconfig" --listen 127.0.0.1:28002 --admin-listen 127.0.0.1:29091 \
      --cache configmaps --http1-server $http1 >"$OUT/kubeplex-idle.log" 2>&1 &
    IDLE_PID=$!; pids+=($IDLE_PID)
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:29091/readyz" >/dev/null && break; sleep 0.2; done
    run "idle-w$w-$http1" --server http://127.0.0.1:28002 watch --writer-server http://$SIM --kind configmaps --watchers "$w" --rate 1 --duration 2 --objects 100 --settle 5 --pid $IDLE_PID
    kill $IDLE_PID; wait $IDLE_PID 2>/dev/null || true
  done
done
fi

# What 100 clients (a list at RV=0 and a watch each) cost the upstream.
[ "${ONLY:-all}" = all ] || exit 0
run upstream-calls-kubeplex --server http://$KP --upstream-metrics http://$SIM/metrics upstream-calls --kind pods --clients 100
run upstream-calls-apiserver --server http://$SIM --upstream-metrics http://$SIM/metrics upstream-calls --kind pods --clients 100
mix

echo "results: $OUT/results.jsonl" >&2
