#!/usr/bin/env bash
# The pool soak (issue 47) against the real kube-apiserver 1.36 of ../shared/realcluster: the
# scale scenario's nodes through 2 pool replicas, then `--soak SECONDS` of churn with a
# disruption every `--soak-every` (node tiers rolled, a replica restarted, the kube-apiserver
# restarted, etcd compacted and the pool's connections cut, a 1-minute upstream outage, a burst
# of cold node tiers), sampled every 10 s. Renders the samples as SVG charts with the
# disruptions marked (svgplot.py) into OUT.
#
# Usage: soak.sh OUT [kubeplex-bench scale flags], e.g.
#   soak.sh docs/soak/pool --nodes 500 --pods-per-node 10 --soak 3600 --rollout 60 --kill-replica 10
# Env: as scale.sh (HARNESS, KUBEPLEX_BIN, BENCH_BIN, KEEP).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n 2,12p "$0"; exit 2; }
OUT=$1
shift
H=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
mkdir -p "$OUT"
# The apiserver stopped (SIGTERM, as a rolling control-plane upgrade does; SIGKILL after 60 s)
# and started again by the harness, which returns once it is ready.
restart="pid=\$(cat '$H/run/kube-apiserver.pid'); kill \$pid;"
restart+=" for i in \$(seq 120); do kill -0 \$pid 2>/dev/null || break; sleep 0.5; done;"
restart+=" kill -9 \$pid 2>/dev/null;"
# The harness's up.sh gives up after 3 minutes (an apiserver starting on a loaded machine):
# tried again, 3 times at most.
restart+=" for i in 1 2 3; do '$H/up.sh' >/dev/null 2>&1 && exit 0; done; exit 1"
# etcd compacted to its current revision (what the apiserver's own compaction does every 5
# minutes up to a revision 5 minutes old).
etcdctl="'$H/bin/etcdctl' --endpoints=http://127.0.0.1:2379"
compact="rev=\$($etcdctl endpoint status -w json | python3 -c"
compact+=" 'import json,sys; print(json.load(sys.stdin)[0][\"Status\"][\"header\"][\"revision\"])');"
compact+=" $etcdctl compact \$rev >/dev/null"
status=0
bash scripts/realcluster/scale.sh --mode pool --restart-apiserver "$restart" \
  --compact-etcd "$compact" --soak-samples "$OUT/samples.csv" "$@" | tee "$OUT/report.txt" \
  || status=$?
python3 scripts/realcluster/svgplot.py "$OUT/samples.csv" "$OUT"
echo "charts: $OUT/*.svg" >&2
exit $status
