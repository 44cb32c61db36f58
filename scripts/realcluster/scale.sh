#!/usr/bin/env bash
# kubeplex at the scale it exists for (issue 30), against the real kube-apiserver 1.36 of
# ../shared/realcluster: `kubeplex-bench scale` with N emulated nodes (their kubelets' and
# kube-proxies' watches and writes directly, or their node tiers' through pool replicas of the
# shipped pool configuration), each node's identities signed by the cluster's CA. Prints the
# figures of each mode side by side (see crates/kubeplex-bench/src/scale/).
#
# Usage: scale.sh [kubeplex-bench scale flags], e.g. scale.sh --nodes 1000 --mode both
# Env: HARNESS (default ~/.cache/kubeplex-realcluster), KUBEPLEX_BIN (default
# target/release/kubeplex), BENCH_BIN (default target/release/kubeplex-bench), KEEP=1 to leave
# the run's namespace and nodes in the cluster (the next run reuses them).
set -euo pipefail
cd "$(dirname "$0")/../.."
H=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
KUBEPLEX=${KUBEPLEX_BIN:-target/release/kubeplex}
BENCH=${BENCH_BIN:-target/release/kubeplex-bench}
for b in "$KUBEPLEX" "$BENCH"; do
  [ -x "$b" ] || { echo "$b: build it (cargo build --release --locked -p kubeplex -p kubeplex-bench --bins)" >&2; exit 1; }
done
# A control plane just started is still syncing its controllers' informers (every object of
# the cluster as watch events): not the run's load.
if "$H/up.sh" | grep -q "started kube-apiserver"; then
  echo "the control plane just started: waiting 60 s for its controllers to sync" >&2
  sleep 60
fi
# kubeplex's RBAC as deploy/ ships it, bound to the harness's users (as agents.py applies it):
# the pool's user and the node tiers' group.
HARNESS=$H python3 - <<'PY'
import os, sys, types
sys.path.insert(0, "scripts/realcluster")
import agents
pki = os.path.join(agents.HARNESS, "pki")
admin = agents.Api(agents.API, ca=os.path.join(pki, "ca.crt"),
                   token=open(os.path.join(pki, "admin.token")).read().strip(), timeout=60)
agents.Run.rbac(types.SimpleNamespace(admin=admin))
PY
# With Cilium agents (--cilium): Cilium's CRDs as cilium/cilium ships them.
case " $* " in *" --cilium "*)
  for f in scripts/realcluster/crds/cilium-*.yaml; do
    kubectl --kubeconfig "$H/kubeconfig" apply --server-side -f "$f" >/dev/null
  done
  kubectl --kubeconfig "$H/kubeconfig" wait --for=condition=Established --timeout=60s \
    crd/ciliumnodes.cilium.io crd/ciliumendpoints.cilium.io crd/ciliumidentities.cilium.io \
    crd/ciliumnetworkpolicies.cilium.io >/dev/null
esac
# Many connections: each emulated node holds its own (and the pool its downstream ones).
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
bench() {
  "$BENCH" scale --kubeconfig "$H/kubeconfig" --ca-cert "$H/pki/ca.crt" --ca-key "$H/pki/ca.key" \
    --kubeplex-bin "$KUBEPLEX" "$@"
}
status=0
bench "$@" || status=$?
[ -n "${KEEP:-}" ] || bench --cleanup
exit $status
