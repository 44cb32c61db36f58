#!/usr/bin/env python3
"""How long the real kube-apiserver's Node authorizer refuses a node's reads of a pod just bound
to it, and of a ConfigMap the pod uses (its graph follows the pods through an informer).

Creates COUNT pods already bound to a made-up node (as the scheduler's binding leaves them), one
at a time, each using a ConfigMap of its own; right after each create returns, reads the pod and
the ConfigMap as that node (a client certificate CN=system:node:NODE, O=system:nodes, signed by
the cluster CA) every STEP ms until granted, and prints the distribution of the time from the
create's answer to the first grant, and how many reads were refused at all. Loopback only.

Usage: graph-lag.py [--count 100] [--step-ms 5] [--harness DIR]
"""
import argparse, base64, http.client, json, os, ssl, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--count", type=int, default=100)
ap.add_argument("--step-ms", type=float, default=5)
ap.add_argument("--harness", default=os.environ.get("HARNESS", os.path.expanduser("~/.cache/kubeplex-realcluster")))
ap.add_argument("--namespace", default="graph-lag-probe")
ap.add_argument("--node", default="graph-lag-node")
args = ap.parse_args()
H = args.harness
token = open(f"{H}/pki/admin.token").read().strip()
work = tempfile.mkdtemp(prefix="graph-lag-")
key, csr, crt = (os.path.join(work, n) for n in ("node.key", "node.csr", "node.crt"))
subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
subprocess.run(["openssl", "req", "-new", "-key", key, "-subj", f"/O=system:nodes/CN=system:node:{args.node}", "-out", csr], check=True, capture_output=True)
subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", f"{H}/pki/ca.crt", "-CAkey", f"{H}/pki/ca.key", "-CAcreateserial", "-days", "1", "-out", crt], check=True, capture_output=True)

def conn(cert=None):
    ctx = ssl.create_default_context(cafile=f"{H}/pki/ca.crt")
    if cert:
        ctx.load_cert_chain(cert, key)
    return http.client.HTTPSConnection("127.0.0.1", 6443, context=ctx, timeout=10)

admin, node = conn(), conn(crt)

def call(c, method, path, body=None, auth=True):
    headers = {"Accept": "application/json"}
    if auth:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    return r.status, data

ns = args.namespace
call(admin, "DELETE", f"/api/v1/namespaces/{ns}")
deadline = time.time() + 120
while call(admin, "GET", f"/api/v1/namespaces/{ns}")[0] != 404:
    if time.time() > deadline:
        sys.exit("namespace never went away")
    time.sleep(0.5)
call(admin, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
deadline = time.time() + 60
while call(admin, "GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")[0] != 200:
    if time.time() > deadline:
        sys.exit("no default ServiceAccount")
    time.sleep(0.2)

def first_grant(path, since, limit=5.0):
    refused = 0
    while True:
        status, body = call(node, "GET", path, auth=False)
        if status == 200:
            return time.monotonic() - since, refused
        if status != 403 or b"no relationship found" not in body:
            raise SystemExit(f"{path}: {status} {body[:300]!r}")
        refused += 1
        if time.monotonic() - since > limit:
            return None, refused
        time.sleep(args.step_ms / 1000)

pod_lags, cm_lags, pod_refused, cm_refused = [], [], 0, 0
for i in range(args.count):
    cm = f"cm-{i}"
    call(admin, "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": cm}, "data": {"k": "v"}})
    pod = {"metadata": {"name": f"p-{i}"}, "spec": {"nodeName": args.node, "automountServiceAccountToken": False,
           "containers": [{"name": "c", "image": "x"}],
           "volumes": [{"name": "v", "configMap": {"name": cm}}]}}
    status, body = call(admin, "POST", f"/api/v1/namespaces/{ns}/pods", pod)
    created = time.monotonic()
    if status != 201:
        sys.exit(f"create: {status} {body[:300]!r}")
    lag, refused = first_grant(f"/api/v1/namespaces/{ns}/pods/p-{i}", created)
    pod_lags.append(lag); pod_refused += refused > 0
    lag, refused = first_grant(f"/api/v1/namespaces/{ns}/configmaps/{cm}", created)
    cm_lags.append(lag); cm_refused += refused > 0
    time.sleep(0.05)

def summary(name, lags, refused):
    got = sorted(l for l in lags if l is not None)
    q = lambda p: got[min(len(got) - 1, int(p * len(got)))] * 1000
    print(f"{name}: {len(lags)} reads, {refused} refused at first; first grant after the create's answer: "
          f"p50 {q(0.5):.0f} ms, p90 {q(0.9):.0f} ms, p99 {q(0.99):.0f} ms, max {got[-1]*1000:.0f} ms; never within 5 s: {len(lags)-len(got)}")
    return {"reads": len(lags), "refused_first": refused, "p50_ms": q(0.5), "p90_ms": q(0.9), "max_ms": got[-1] * 1000,
            "ms": [round(l * 1000, 1) if l is not None else None for l in lags]}

out = {"pod": summary("pod GET", pod_lags, pod_refused), "configmap": summary("ConfigMap GET", cm_lags, cm_refused)}
print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "ms"} for k, v in out.items()}))
json.dump(out, open(os.path.join(work, "graph-lag.json"), "w"))
print(f"samples: {work}/graph-lag.json")
call(admin, "DELETE", f"/api/v1/namespaces/{ns}")
