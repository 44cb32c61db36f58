#!/usr/bin/env bash
# The overlays in deploy/ as the real apiserver of ../shared/realcluster takes them: a
# server-side dry run (admission and validation included) of every object of a built-in kind.
# cert-manager's and the Prometheus Operator's objects need their CRDs, which this cluster does
# not have (.ci/check-deploy.py checks them against their schemas). Also the node overlay with
# components/legacy-impersonation, for apiservers without constrained impersonation.
#
# Usage: scripts/realcluster/dry-run-deploy.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
HARNESS=${HARNESS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeplex-realcluster}
export KUBECONFIG=$HARNESS/kubeconfig
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
builtin() {
  python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin)
        if d and d["apiVersion"].split("/")[0] not in ("cert-manager.io", "monitoring.coreos.com")]
print(yaml.safe_dump_all(docs))'
}
# kustomize takes only relative paths to bases: the legacy overlay lives in target/.
legacy=target/dry-run/legacy
mkdir -p "$legacy"
cat > "$legacy/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../../deploy/overlays/node
components:
  - ../../../deploy/components/legacy-impersonation
YAML
for overlay in deploy/overlays/node deploy/overlays/pool "$legacy"; do
  echo "== $overlay"
  kubectl kustomize "$overlay" | builtin > "$tmp/objects.yaml"
  kubectl apply --dry-run=server -f "$tmp/objects.yaml"
done
