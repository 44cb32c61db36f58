#!/usr/bin/env bash
# The real-agent soak (issue 47) with the control plane's own disruptions: agents.py's kubemark
# kubelets and kube-proxies through node tiers and a pool, with rollouts all along, while the
# kube-apiserver is restarted every `EVERY` seconds after etcd is compacted to its current
# revision — so that the pool's watches resume into a 410 and relist, finding the writes made
# while they were down (the path that lost deletions before 5a9c431). The disruptions are
# stamped in OUT/disruptions.txt (Unix seconds, label) and marked on the charts; agents.py's
# report says whether every kubelet's pods are the apiserver's at the end.
#
# Usage: agents-soak.sh OUT SECONDS EVERY [agents.py flags], e.g.
#   agents-soak.sh docs/soak/agents-3 3900 600 --nodes 5 --pods 50 --deployments 5 --kubeplex-bin B
# Env: HARNESS (the realcluster harness directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n 2,12p "$0"; exit 2; }
OUT=$1 SECONDS_TOTAL=$2 EVERY=$3
shift 3
H=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
mkdir -p "$OUT"
etcdctl=("$H/bin/etcdctl" --endpoints=http://127.0.0.1:2379)

# Compacts etcd to its current revision, then stops the apiserver (SIGTERM; SIGKILL after 60 s)
# and starts it again with the harness, which returns once it is ready (3 tries at most).
disrupt() {
  local rev pid
  rev=$("${etcdctl[@]}" endpoint status -w json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
  "${etcdctl[@]}" compact "$rev" >/dev/null
  pid=$(cat "$H/run/kube-apiserver.pid")
  kill "$pid"
  for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  for _ in 1 2 3; do "$H/up.sh" >/dev/null 2>&1 && return 0; done
  return 1
}

# The first disruption once the agents have churned a while (agents.py starts its churn after
# its nodes and pods are up: ~1 minute); the last leaves an interval to settle before the end.
: >"$OUT/disruptions.txt"
(
  deadline=$((SECONDS + SECONDS_TOTAL - EVERY))
  sleep "$EVERY"
  while [ "$SECONDS" -lt "$deadline" ]; do
    started=$(date +%s)
    if disrupt; then result=""; else result=" (failed)"; fi
    echo "$started etcd compacted; apiserver restarted$result" >>"$OUT/disruptions.txt"
    echo "$(date -u +%T) apiserver back$result ($(($(date +%s) - started)) s)" >&2
    sleep "$EVERY"
  done
) &
loop=$!
trap 'kill $loop 2>/dev/null || true' EXIT
status=0
python3 scripts/realcluster/agents.py --mode pool --churn "$SECONDS_TOTAL" \
  --samples "$OUT/samples.csv" --markers "$OUT/disruptions.txt" "$@" | tee "$OUT/report.txt" || status=$?
kill $loop 2>/dev/null || true
python3 scripts/realcluster/svgplot.py "$OUT/samples.csv" "$OUT" || true
exit $status
