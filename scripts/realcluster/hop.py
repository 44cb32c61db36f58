#!/usr/bin/env python3
"""What one tier adds to a kubelet's request, against the real kube-apiserver.

The kubelet's status manager sends one pod's GET and status PATCH at a time, so what a tier
adds to each of them is paid once per pod queued ahead (issue 28: a pod's first status through
the tiers). This measures exactly that, side by side in one window of time: a kubelet's
identity (CN=system:node:hollow-node-0) sends GET pod (protobuf, as the kubelet asks) and
PATCH pod/status (strategic merge, as the status manager does) on a pod bound to its node, in
turns, directly to the apiserver, through a node tier (config/node.yaml) and through a node
tier whose upstream is a pool tier (deploy/base/pool/kubeplex.yaml) — round robin, so every
mode sees the same machine. With --hogs K, K busy processes share the 2 cores meanwhile (the
agents scenario saturates them).

  python3 scripts/realcluster/hop.py --requests 300 --hogs 0,4

Prints per mode and hog count: median / p90 / p99 of GET and PATCH, and each tier's median
added to direct; and the CPU-seconds each kubeplex used per request. Uses agents.py's
harness (PKI, processes, cleanup); everything it creates is labelled as agents.py's runs are
and removed at the end.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agents  # noqa: E402 — the harness's helpers
from agents import API, HARNESS, HOLLOW_LABEL, RUN_LABEL, Api, Failure, Pki, Procs, log  # noqa: E402

NODE = agents.NODE_PREFIX + "0"
PORTS = {"node": agents.KUBEPLEX_PORT_BASE, "pool": agents.KUBEPLEX_PORT_BASE + 1}
ADMINS = {"node": agents.KUBEPLEX_ADMIN_BASE, "pool": agents.KUBEPLEX_ADMIN_BASE + 1}
PROTOBUF = "application/vnd.kubernetes.protobuf,application/json"


def pick(xs, q):
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, int(q * len(s) + 0.5) - 1))] if s else float("nan")


class Hop:
    def __init__(self, args):
        self.args = args
        self.root = args.run_dir
        self.dir = os.path.join(self.root, "hop-" + time.strftime("%Y%m%d-%H%M%S"))
        os.makedirs(self.dir, exist_ok=True)
        self.pki = Pki(os.path.join(self.root, "pki"))
        self.procs = Procs(self.root)
        token = open(os.path.join(HARNESS, "pki", "admin.token")).read().strip()
        self.admin = Api(API, ca=self.pki.ca, token=token, timeout=60)
        self.ns = "agents-hop-" + time.strftime("%H%M%S")
        self.hogs = []

    # -- the cluster's side: a node, a namespace, a pod bound to the node ----------------------

    def objects(self):
        a = self.admin
        a.create("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE, "labels": {HOLLOW_LABEL: "true", RUN_LABEL: "hop"}}})
        a.create("/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": self.ns, "labels": {RUN_LABEL: "hop"}}})
        a.create("/api/v1/namespaces/%s/pods" % self.ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]}})

    # -- the tiers (as agents.py starts them, both at once) ------------------------------------

    def start_tiers(self):
        run = agents.Run.__new__(agents.Run)  # only its RBAC step, with this harness's admin
        run.admin = self.admin
        run.rbac()
        b = self.args.kubeplex_bin
        serving = self.pki.sign("kubeplex-serving", "kubeplex", server=True)
        common = ["--tls-cert-file", serving[0], "--tls-private-key-file", serving[1],
                  "--client-ca-file", self.pki.ca, "--shutdown-grace-period", "2s"]
        crt, key = self.pki.sign("kubeplex-pool-upstream", agents.POOL_USER)
        kc = self.pki.kubeconfig("kubeplex-pool-upstream", API, crt, key)
        self.procs.start("kubeplex-pool", [
            b, "serve", "--config", os.path.join(agents.REPO, "deploy/base/pool/kubeplex.yaml"),
            "--kubeconfig", kc, "--listen", "127.0.0.1:%d" % agents.POOL_PORT,
            "--admin-listen", "127.0.0.1:%d" % agents.POOL_ADMIN] + common,
            os.path.join(self.dir, "kubeplex-pool.log"))
        self.wait_ready("kubeplex-pool", agents.POOL_ADMIN)
        # Both node tiers are bound to NODE, with a token of their ServiceAccount (agents.py).
        token = agents.Run.node_tier_token(run, NODE)
        kc = self.pki.token_kubeconfig("kubeplex-node-upstream", API, token)
        for mode in ("node", "pool"):
            extra = []
            if mode == "pool":
                extra = ["--upstream", "https://127.0.0.1:%d" % agents.POOL_PORT,
                         "--upstreams-ca-file", self.pki.ca]
            self.procs.start("kubeplex-tier-" + mode, [
                b, "serve", "--config", os.path.join(agents.REPO, "config/node.yaml"),
                "--node-name", NODE, "--node-impersonation", "associated-node", "--kubeconfig", kc,
                "--listen", "127.0.0.1:%d" % PORTS[mode],
                "--admin-listen", "127.0.0.1:%d" % ADMINS[mode]] + common + extra,
                os.path.join(self.dir, "kubeplex-tier-%s.log" % mode))
        for mode in ("node", "pool"):
            self.wait_ready("kubeplex-tier-" + mode, ADMINS[mode])

    def wait_ready(self, name, port, timeout=90):
        agents.Run.wait_ready(self, name, port, timeout)  # uses self.procs only

    # -- the kubelet's requests ------------------------------------------------------------------

    def clients(self):
        crt, key = self.pki.sign("kubelet-" + NODE, "system:node:" + NODE, orgs=["system:nodes"])
        out = {"direct": Api(API, ca=self.pki.ca, cert=crt, key=key, timeout=30)}
        for mode in ("node", "pool"):
            out[mode] = Api("https://127.0.0.1:%d" % PORTS[mode], ca=self.pki.ca, cert=crt,
                            key=key, timeout=30)
        for c in out.values():  # the kubelet's Accept for pods
            c.headers = (lambda base: lambda extra=None: dict(
                base(extra), **({} if extra and "Content-Type" in extra else {"Accept": PROTOBUF})))(c.headers)
        return out

    def one(self, api, i):
        path = "/api/v1/namespaces/%s/pods/p" % self.ns
        t0 = time.perf_counter()
        st, _ = api.request("GET", path)
        t1 = time.perf_counter()
        if st != 200:
            raise Failure("GET pod: %d" % st)
        body = {"status": {"conditions": [{"type": "Ready", "status": "False",
                                           "reason": "Hop%d" % i,
                                           "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
        st, payload = api.request("PATCH", path + "/status", body,
                                  ctype="application/strategic-merge-patch+json")
        t2 = time.perf_counter()
        if st != 200:
            raise Failure("PATCH status: %d %s" % (st, payload[:200]))
        return (t1 - t0) * 1000.0, (t2 - t1) * 1000.0

    def hog(self, k):
        for _ in range(k):
            self.hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                              start_new_session=True))

    def unhog(self):
        for p in self.hogs:
            p.kill()
            p.wait()
        self.hogs = []

    def measure(self, clients, hogs):
        modes = ["direct", "node", "pool"]
        for m in modes:  # connections up, caches warm, the review answers cached
            for i in range(5):
                self.one(clients[m], i)
        self.hog(hogs)
        time.sleep(1.0)
        cpu0 = {m: self.procs.cpu("kubeplex-tier-" + m) for m in ("node", "pool")}
        pool0 = self.procs.cpu("kubeplex-pool")
        lat = {m: ([], []) for m in modes}
        try:
            for i in range(self.args.requests):
                for j in range(len(modes)):  # a rotating order: no mode always goes first
                    m = modes[(i + j) % len(modes)]
                    g, p = self.one(clients[m], i)
                    lat[m][0].append(g)
                    lat[m][1].append(p)
        finally:
            self.unhog()
        n = self.args.requests * 2
        cpu = {m: (self.procs.cpu("kubeplex-tier-" + m) - cpu0[m]) / n * 1e6 for m in ("node", "pool")}
        cpu["pool-tier"] = (self.procs.cpu("kubeplex-pool") - pool0) / n * 1e6
        return lat, cpu

    def report(self, hogs, lat, cpu):
        print("== %d busy processes beside; %d GET + %d PATCH per mode, in turns"
              % (hogs, self.args.requests, self.args.requests))
        print("%-8s %-26s %-26s %s" % ("", "GET pod ms p50/p90/p99", "PATCH status ms p50/p90/p99",
                                       "added p50 GET/PATCH"))
        base = [pick(lat["direct"][k], 0.5) for k in (0, 1)]
        row = {}
        for m in ("direct", "node", "pool"):
            g, p = lat[m]
            q = lambda xs: "%.1f / %.1f / %.1f" % (pick(xs, .5), pick(xs, .9), pick(xs, .99))  # noqa: E731
            added = "" if m == "direct" else "%+.1f / %+.1f" % (pick(g, .5) - base[0], pick(p, .5) - base[1])
            print("%-8s %-26s %-26s %s" % (m, q(g), q(p), added))
            row[m] = {"get": [pick(g, x) for x in (.5, .9, .99)], "patch": [pick(p, x) for x in (.5, .9, .99)]}
        print("kubeplex CPU per request (µs): node tier %.0f; node tier before a pool %.0f; pool %.0f"
              % (cpu["node"], cpu["pool"], cpu["pool-tier"]))
        row["cpu_us"] = cpu
        return row

    def clean(self):
        self.unhog()
        self.procs.stop()
        a = self.admin
        a.delete("/api/v1/namespaces/" + self.ns)
        a.delete("/api/v1/nodes/" + NODE)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=300, help="GET+PATCH pairs per mode (default 300)")
    p.add_argument("--hogs", default="0,4", help="busy processes beside, a run each (default 0,4)")
    p.add_argument("--run-dir", default="/tmp/agents-run")
    p.add_argument("--kubeplex-bin", default=os.path.join(agents.REPO, "target/release/kubeplex"))
    args = p.parse_args()
    if not 1 <= args.requests <= 5000:
        p.error("1 <= --requests <= 5000")
    hogs = [int(h) for h in args.hogs.split(",")]
    if any(h < 0 or h > 16 for h in hogs):
        p.error("0 <= hogs <= 16")
    agents.kill_leftovers(args.run_dir)
    h = Hop(args)
    rows = {}
    try:
        h.objects()
        h.start_tiers()
        clients = h.clients()
        for k in hogs:
            lat, cpu = h.measure(clients, k)
            rows[k] = h.report(k, lat, cpu)
    finally:
        h.clean()
    print(json.dumps({"hop": rows, "kubeplex": agents.binary_identity(args.kubeplex_bin)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
