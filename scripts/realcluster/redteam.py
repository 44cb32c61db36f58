#!/usr/bin/env python3
"""A node tier's credential, stolen, against the real kube-apiserver 1.36 (issue 44).

Holding node A's node-tier credential — the token of the node tiers' ServiceAccount bound to its
pod on node A, with the RBAC deploy/base/node grants it — this tries, through a pool kubeplex
(deploy/base/pool/kubeplex.yaml) and straight at the apiserver, what only node B's kubelet may
do: B's pods (a list with B's spec.nodeName, a get by name), B's Node, a Secret and a ConfigMap
only B's pod uses, status patches of B's Node and B's pod, and impersonating system:node:B,
system:masters and a ServiceAccount — each as the token itself, as node B and as node A. Every
attempt must be refused with the apiserver's status (printed beside what A's kubelet gets
directly), and A's own reads must work.

Then the stale-view sequence: pod P on A mounts Secret S; A's kubelet reads S through the pool
(granted by the Node authorizer's rules the pool applies itself); the pool's watch of pods is
cut (a TLS proxy between the pool and the apiserver that drops pods watches and refuses new
ones, everything else passing through); P is deleted and S updated; A's kubelet reads S through
the pool again: it must get the apiserver's 403, never S's new data.

  python3 scripts/realcluster/redteam.py        # needs target/release/kubeplex and the cluster

The apiserver must run NodeRestriction, as kubeadm and the managed clusters run it (the harness's
defaults leave it out): APISERVER_EXTRA_ARGS=--enable-admission-plugins=NodeRestriction
$HARNESS/up.sh after $HARNESS/down.sh kube-apiserver. Without it the apiserver lets any node
patch any Node's and pod's status, directly as through a tier.

Exit 0 when every attempt was answered as it must be. Everything it creates is labelled as
agents.py's runs are and removed at the end (the RBAC copies stay, as agents.py leaves them).
"""

import argparse
import base64
import http.client
import http.server
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agents  # noqa: E402 — the harness's helpers
from agents import API, HARNESS, REPO, RUN_LABEL, Api, Failure, Pki, Procs, log  # noqa: E402

A, B = "redteam-a", "redteam-b"
POOL_PORT, POOL_ADMIN, PROXY_PORT = 16950, 16951, 16952


# ----------------------------------------------------------------------------- the cut

class Cut:
    """A TLS proxy in front of the apiserver for the pool: every request passes through as it
    is (the pool's own with the pool's client certificate), until `cut` — then the pool's open
    watches of pods end and new lists and watches of pods are answered 503, as an apiserver
    that cannot serve that one resource (the pool's other caches keep flowing)."""

    def __init__(self, pki, crt, key):
        self.cut = False
        self.open = []  # upstream connections of pods watches
        self.lock = threading.Lock()
        # The pool's own requests present its certificate; what it passes on as its client
        # carries the client's token, and goes on a connection without a certificate (the
        # apiserver tries a certificate first).
        self.own_ctx = ssl.create_default_context(cafile=pki.ca)
        self.own_ctx.load_cert_chain(crt, key)
        self.as_is_ctx = ssl.create_default_context(cafile=pki.ca)
        serving = pki.sign("redteam-proxy", "redteam-proxy", server=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*serving)
        ctx.set_alpn_protocols(["http/1.1"])
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_any(self):
                path = self.path
                url = urllib.parse.urlsplit(path)
                pods = url.path in ("/api/v1/pods",) or url.path.endswith("/pods")
                if proxy.cut and pods:
                    body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                       "status": "Failure", "message": "cut by redteam.py",
                                       "reason": "ServiceUnavailable", "code": 503}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                ctx = proxy.as_is_ctx if self.headers.get("Authorization") else proxy.own_ctx
                conn = http.client.HTTPSConnection("127.0.0.1", 6443, context=ctx, timeout=600)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection", "keep-alive", "proxy-connection")}
                conn.request(self.command, path, body=body, headers=headers)
                resp = conn.getresponse()
                watch = pods and "watch=" in (url.query or "")
                if watch:
                    with proxy.lock:
                        proxy.open.append(conn)
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while True:
                        chunk = resp.read1(65536)
                        if not chunk:
                            break
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (OSError, http.client.HTTPException):
                    self.close_connection = True
                finally:
                    conn.close()
                    if watch:
                        with proxy.lock:
                            if conn in proxy.open:
                                proxy.open.remove(conn)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_any

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = super().get_request()
                return ctx.wrap_socket(sock, server_side=True), addr

        self.server = Server(("127.0.0.1", PROXY_PORT), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def cut_pods(self):
        self.cut = True
        with self.lock:
            for conn in self.open:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except (OSError, AttributeError):
                    pass

    def restore(self):
        self.cut = False


# ----------------------------------------------------------------------------- the run

def status_of(api, method, path, headers=(), body=None):
    h = dict(headers)
    ctype = h.pop("Content-Type", "application/json")
    api_headers = api.headers
    api.headers = lambda extra=None: {**api_headers(extra), **h}
    try:
        st, payload = api.request(method, path, body, ctype=ctype)
    finally:
        api.headers = api_headers
    return st, payload


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeplex-bin", default=os.path.join(REPO, "target/release/kubeplex"))
    ap.add_argument("--run-dir", default="/tmp/redteam-run")
    args = ap.parse_args()
    os.makedirs(args.run_dir, exist_ok=True)
    pki = Pki(os.path.join(args.run_dir, "pki"))
    procs = Procs(args.run_dir)
    admin = Api(API, ca=pki.ca, token=open(os.path.join(HARNESS, "pki", "admin.token")).read().strip(),
                timeout=60)
    run = agents.Run.__new__(agents.Run)  # its RBAC and token steps, with this admin
    run.admin = admin
    ns = "redteam-" + time.strftime("%H%M%S")
    ok = True
    try:
        run.rbac()
        admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": ns, "labels": {RUN_LABEL: "redteam"}}})
        for node in (A, B):
            admin.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                           "metadata": {"name": node, "labels": {RUN_LABEL: "redteam"}}})
        for name in ("a-only", "b-only", "s2"):
            admin.create("/api/v1/namespaces/%s/secrets" % ns, {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "data": {"k": base64.b64encode(b"old-" + name.encode()).decode()}})
            admin.create("/api/v1/namespaces/%s/configmaps" % ns, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                "data": {"k": "old-" + name}})

        def pod(name, node, uses):
            admin.create("/api/v1/namespaces/%s/pods" % ns, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeName": node, "automountServiceAccountToken": False,
                         "containers": [{"name": "c", "image": "app:1"}],
                         "volumes": [{"name": "s", "secret": {"secretName": uses}},
                                     {"name": "c", "configMap": {"name": uses}}]}})
        pod("on-a", A, "a-only")
        pod("on-b", B, "b-only")
        token = run.node_tier_token(A)

        # The pool, in front of the apiserver through the cut.
        crt, key = pki.sign("kubeplex-pool-upstream", agents.POOL_USER)
        cut = Cut(pki, crt, key)
        kc = pki.kubeconfig("redteam-pool", "https://127.0.0.1:%d" % PROXY_PORT, crt, key)
        serving = pki.sign("kubeplex-serving", "kubeplex", server=True)
        procs.start("kubeplex-pool", [
            args.kubeplex_bin, "serve", "--config", os.path.join(REPO, "deploy/base/pool/kubeplex.yaml"),
            "--kubeconfig", kc, "--listen", "127.0.0.1:%d" % POOL_PORT,
            "--admin-listen", "127.0.0.1:%d" % POOL_ADMIN,
            "--tls-cert-file", serving[0], "--tls-private-key-file", serving[1],
            "--shutdown-grace-period", "2s"], os.path.join(args.run_dir, "kubeplex-pool.log"))
        agents.Run.wait_ready(type("R", (), {"procs": procs})(), "kubeplex-pool", POOL_ADMIN, 120)
        log("pool ready")

        stolen = {"pool": Api("https://127.0.0.1:%d" % POOL_PORT, ca=pki.ca, token=token),
                  "direct": Api(API, ca=pki.ca, token=token)}
        kcrt, kkey = pki.sign("kubelet-" + A, "system:node:" + A, orgs=["system:nodes"])
        kubelet_a = Api(API, ca=pki.ca, cert=kcrt, key=kkey)
        as_b = {"Impersonate-User": "system:node:" + B}
        as_a = {"Impersonate-User": "system:node:" + A}
        patch = {"Content-Type": "application/merge-patch+json"}
        time.sleep(4)  # past the time the pool gives the apiserver's graph (3 s)

        def attempt(what, method, path, headers, body=None, want=403, kubelet=True):
            nonlocal ok
            got = {}
            for way, api in stolen.items():
                st, payload = status_of(api, method, path, headers, body)
                got[way] = (st, payload)
            kst = status_of(kubelet_a, method, path, {k: v for k, v in headers.items()
                                                        if not k.startswith("Impersonate")},
                            body)[0] if kubelet else "-"
            line = "%-58s %6s %6s %8s" % (what, got["pool"][0], got["direct"][0], kst)
            bad = got["pool"][0] != want or got["direct"][0] != want
            if want == 403 and got["pool"][1] != got["direct"][1]:
                bad = True
                line += "  (bodies differ)"
            if bad:
                ok = False
                line += "  <-- expected %d: %s" % (want, got["pool"][1][:200])
            print(line)

        print("%-58s %6s %6s %8s" % ("holding node %s's node-tier token:" % A, "pool", "direct",
                                     "kubelet"))
        refused = [
            ("node B's pods (spec.nodeName)", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s" % B, None),
            ("a pod of node B by name", "GET", "/api/v1/namespaces/%s/pods/on-b" % ns, None),
            ("node B's Node", "GET", "/api/v1/nodes/" + B, None),
            ("a Secret only B's pod uses", "GET", "/api/v1/namespaces/%s/secrets/b-only" % ns, None),
            ("a ConfigMap only B's pod uses", "GET", "/api/v1/namespaces/%s/configmaps/b-only" % ns, None),
            ("a status patch of B's Node", "PATCH", "/api/v1/nodes/%s/status" % B, b"{}"),
            ("a status patch of B's pod", "PATCH", "/api/v1/namespaces/%s/pods/on-b/status" % ns, b"{}"),
        ]
        for what, method, path, body in refused:
            for how, headers in (("itself", {}), ("as node B", as_b), ("as node A", as_a)):
                h = dict(headers, **(patch if body else {}))
                attempt("%s, %s" % (what, how), method, path, h, body)
        for what, headers in (("impersonating system:node:" + B, as_b),
                              ("impersonating system:masters", {"Impersonate-User": "admin",
                                                                "Impersonate-Group": "system:masters"}),
                              ("impersonating a ServiceAccount",
                               {"Impersonate-User": "system:serviceaccount:kube-system:default"})):
            attempt(what, "GET", "/api/v1/namespaces/%s/configmaps" % ns, headers, kubelet=False)
        before = pool_counts()
        # As the kubelet reads them: in protobuf, its reflectors' first lists at resourceVersion=0.
        kubelet_reads = dict(as_a, Accept="application/vnd.kubernetes.protobuf")
        for what, path in (("node A's pods", "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&resourceVersion=0" % A),
                           ("node A's Node", "/api/v1/nodes?fieldSelector=metadata.name%%3D%s&resourceVersion=0" % A),
                           ("a Secret A's pod uses", "/api/v1/namespaces/%s/secrets?fieldSelector=metadata.name%%3Da-only&resourceVersion=0" % ns),
                           ("a ConfigMap A's pod uses", "/api/v1/namespaces/%s/configmaps?fieldSelector=metadata.name%%3Da-only&resourceVersion=0" % ns)):
            attempt("%s, as node A" % what, "GET", path, kubelet_reads, want=200)
        after = pool_counts()
        print("node A's own reads through the pool: %d answered from its cache, %d granted by the "
              "Node authorizer's rules, %d reviews asked (constrained impersonation's, shared by "
              "every node tier)" % tuple(a - b for a, b in zip(after, before)))

        # The stale view.
        print("\nthe stale view: pod p on node A mounts Secret s2; the pool's watch of pods is cut")
        pod("p", A, "s2")
        time.sleep(4)
        s2 = "/api/v1/namespaces/%s/secrets?fieldSelector=metadata.name%%3Ds2&resourceVersion=0" % ns

        def read_s2(label, want, new_data_ok):
            nonlocal ok
            st, payload = status_of(stolen["pool"], "GET", s2, kubelet_reads)
            kst = status_of(kubelet_a, "GET", s2)[0]
            new = b"bmV3" in payload  # base64 of "new"
            line = "%-58s %6s %6s %8s" % (label, st, "-", kst)
            if st != want or (new and not new_data_ok):
                ok = False
                line += "  <-- expected %d%s" % (want, "" if new_data_ok else ", never the new data")
            print(line)
        before = pool_counts()
        read_s2("node A's kubelet reads s2 through the pool", 200, False)
        after = pool_counts()
        print("  (from the pool's cache: %d, granted by the Node authorizer's rules: %d)"
              % (after[0] - before[0], after[1] - before[1]))
        cut.cut_pods()
        deadline = time.time() + 30
        while time.time() < deadline:
            caches = json.loads(urllib_get("http://127.0.0.1:%d/debug/caches" % POOL_ADMIN))["caches"]
            if all(not c["watching"] for c in caches if c["resource"] == "pods/v1"):
                break
            time.sleep(0.2)
        else:
            ok = False
            print("  <-- the pool's pods watch never showed the cut")
        admin.delete("/api/v1/namespaces/%s/pods/p" % ns)
        admin.patch("/api/v1/namespaces/%s/secrets/s2" % ns,
                    {"data": {"k": base64.b64encode(b"new").decode()}})
        time.sleep(3)
        caches = json.loads(urllib_get("http://127.0.0.1:%d/debug/caches" % POOL_ADMIN))["caches"]
        pods = [c for c in caches if c["resource"] == "pods/v1"]
        print("the pool's caches of pods: %s" % ", ".join(
            "synced=%s stale=%s watching=%s" % (c["synced"], c["stale"], c["watching"]) for c in pods))
        before = pool_counts()
        read_s2("p deleted, s2 updated: A's kubelet reads s2 via the pool", 403, False)
        after = pool_counts()
        print("  (granted by the Node authorizer's rules: %d, reviews asked: %d; the 403 is the "
              "apiserver's)" % (after[1] - before[1], after[2] - before[2]))
        cut.restore()
    except Failure as e:
        print("FAILED: %s" % e)
        ok = False
    finally:
        procs.stop()
        admin.delete("/api/v1/namespaces/" + ns)
        for node in (A, B):
            admin.delete("/api/v1/nodes/" + node)
        admin.delete("/api/v1/namespaces/kube-system/pods/agents-harness-kubeplex-" + A)
    print("\nALL REFUSED AS THE APISERVER REFUSES" if ok else "\nSOMETHING WAS ANSWERED THAT MUST NOT BE")
    return 0 if ok else 1


def pool_counts():
    """(reads the pool answered from its cache, grants by the Node authorizer's rules, reviews it
    asked the apiserver), from its /metrics."""
    text = urllib_get("http://127.0.0.1:%d/metrics" % POOL_ADMIN).decode()
    cache = rules = reviews = 0.0
    for name, labels, v in agents.parse_metrics(text, ("kubeplex_requests_total",
                                                      "kubeplex_auth_decisions_total")):
        if name == "kubeplex_requests_total" and labels.get("source") == "cache":
            cache += v
        if name == "kubeplex_auth_decisions_total" and labels.get("source") == "node_rules":
            rules += v
        if name == "kubeplex_auth_decisions_total" and labels.get("source") == "review":
            reviews += v
    return int(cache), int(rules), int(reviews)


def urllib_get(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


if __name__ == "__main__":
    sys.exit(main())
