#!/usr/bin/env python3
"""Captures kube-apiserver 1.36's answers to impersonation by a ServiceAccount whose token is
bound to a pod on a node (constrained impersonation, on by default in 1.36), for the fake
apiserver's tests (crates/kubeplex-sim/tests/sim/sim_auth.rs). Needs the real cluster of
../shared/realcluster running; creates the Nodes probe-a and probe-b, the ServiceAccount
kube-system/tier, its pod tier-a bound to probe-a, and a ClusterRole letting it impersonate its
associated node for get, list and watch only.

Usage: capture-impersonation.py [OUT_DIR]   (default tests/fixtures/realcluster/impersonation)
"""
import json
import os
import ssl
import subprocess
import sys
import urllib.request

HARNESS = os.environ.get("HARNESS", os.path.expanduser("~/.cache/kubeplex-realcluster"))
API = "https://127.0.0.1:6443"
OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/realcluster/impersonation"
KUBECTL = ["kubectl", "--kubeconfig", f"{HARNESS}/kubeconfig"]

SETUP = """
apiVersion: v1
kind: Node
metadata: {name: probe-a}
---
apiVersion: v1
kind: Node
metadata: {name: probe-b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: tier, namespace: kube-system}
---
apiVersion: v1
kind: Pod
metadata: {name: tier-a, namespace: kube-system}
spec:
  nodeName: probe-a
  serviceAccountName: tier
  automountServiceAccountToken: false
  containers: [{name: c, image: x}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: probe-tier}
rules:
- apiGroups: [authentication.k8s.io]
  resources: [nodes]
  verbs: ["impersonate:associated-node"]
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["impersonate-on:associated-node:get", "impersonate-on:associated-node:list", "impersonate-on:associated-node:watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: probe-tier}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: probe-tier}
subjects: [{kind: ServiceAccount, name: tier, namespace: kube-system}]
"""

# name: (method, path, impersonation headers, body)
CASES = {
    "own-node": ("GET", "/api/v1/nodes/probe-a", [("Impersonate-User", "system:node:probe-a")], None),
    "other-node": ("GET", "/api/v1/nodes/probe-b", [("Impersonate-User", "system:node:probe-b")], None),
    "own-node-with-group": ("GET", "/api/v1/nodes/probe-a", [("Impersonate-User", "system:node:probe-a"), ("Impersonate-Group", "system:nodes")], None),
    "own-node-patch-not-granted": ("PATCH", "/api/v1/nodes/probe-a/status", [("Impersonate-User", "system:node:probe-a"), ("Content-Type", "application/merge-patch+json")], b"{}"),
    "groups-without-user": ("GET", "/api/v1/nodes/probe-a", [("Impersonate-Group", "devs")], None),
    "masters": ("GET", "/api/v1/nodes", [("Impersonate-User", "admin"), ("Impersonate-Group", "system:masters")], None),
    "serviceaccount": ("GET", "/api/v1/nodes", [("Impersonate-User", "system:serviceaccount:kube-system:default")], None),
}


def main():
    subprocess.run(KUBECTL + ["apply", "-f", "-"], input=SETUP.encode(), check=True, stdout=subprocess.DEVNULL)
    uid = subprocess.check_output(KUBECTL + ["-n", "kube-system", "get", "pod", "tier-a", "-o", "jsonpath={.metadata.uid}"]).decode()
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": 3600, "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "tier-a", "uid": uid}}}
    answer = subprocess.check_output(KUBECTL + ["create", "--raw", "/api/v1/namespaces/kube-system/serviceaccounts/tier/token", "-f", "-"], input=json.dumps(request).encode())
    token = json.loads(answer)["status"]["token"]
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    os.makedirs(OUT, exist_ok=True)
    for name, (method, path, headers, body) in CASES.items():
        req = urllib.request.Request(API + path, data=body, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", "capture-impersonation")
        for k, v in headers:
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, context=ctx) as resp:
                code, data = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            code, data = e.code, e.read()
        print(f"{name}: {code}")
        if name == "own-node":
            data = b""  # the Node itself: only the status is compared
        with open(f"{OUT}/{name}.json", "wb") as f:
            f.write(json.dumps({"request": {"method": method, "path": path, "headers": headers},
                                "code": code, "body": data.decode()}, indent=1).encode() + b"\n")


if __name__ == "__main__":
    main()
