#!/usr/bin/env python3
"""Calibration of `kubeplex-bench scale` (issue 30): what its emulated nodes send the apiserver
against what real node agents send it, in the same cluster and the same scenario.

Two runs against the real kube-apiserver 1.36 of /work/shared/realcluster ($HARNESS), each from
a clean cluster (the scenario's namespace and nodes removed):

  kubemark  `kubeplex-bench scale --agents external`: the bench creates the scenario's objects
            (N nodes' pods, services and endpoint slices, the apps' ConfigMaps and Secrets),
            then real 1.36 agents — a kubemark hollow kubelet and kube-proxy per node, named as
            the scenario's nodes (`node-I`) — start, and after --hold seconds the bench's writer
            changes endpoint slices, services and pods for --duration seconds;
  emulated  `kubeplex-bench scale --mode direct`: the same, with the bench's emulated agents.

The judge is the apiserver's own record: it runs with an audit log (Metadata level, only the
node agents' identities: the group system:nodes and the user system:kube-proxy) while this
script runs; the apiserver is started again without it at the end (--keep-audit leaves it on).
Each run's requests are counted by agent (kubelet, kube-proxy), verb and resource, in the
start-up (the agents' start → the writer's) and in the steady run (the writer's start → its
end and settling), and the two runs compared side by side; the node reads (get, list, watch)
are what the issue asks to agree within 10%.

Python 3 and the standard library; the helpers of agents.py (certificates, processes).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agents  # noqa: E402
from agents import API, HARNESS, REPO, Failure, log  # noqa: E402

AUDIT_DIR = os.path.join(HARNESS, "audit")
AUDIT_LOG = os.path.join(AUDIT_DIR, "audit.log")
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: Metadata
  users: ["system:kube-proxy"]
- level: None
"""
NAMESPACE = "kubeplex-scale"
KUBELET_PORT_BASE = 11250
READS = ("get", "list", "watch")


# ----------------------------------------------------------------------------- the apiserver

def apiserver_cmdline():
    pid = agents.read_pid(os.path.join(HARNESS, "run", "kube-apiserver.pid"))
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except (OSError, TypeError):
        return []


def restart_apiserver(extra):
    """Stops the apiserver and starts it again with `extra` flags (up.sh starts what is down)."""
    subprocess.run([os.path.join(HARNESS, "down.sh"), "kube-apiserver"], check=True,
                   capture_output=True, timeout=120)
    env = dict(os.environ, APISERVER_EXTRA_ARGS=extra)
    r = subprocess.run([os.path.join(HARNESS, "up.sh")], env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise Failure("up.sh: %s" % r.stderr[-2000:])


def audited():
    return any(a.startswith(b"--audit-log-path=") for a in apiserver_cmdline())


def audit_on():
    os.makedirs(AUDIT_DIR, exist_ok=True)
    policy = os.path.join(AUDIT_DIR, "policy.yaml")
    with open(policy, "w") as f:
        f.write(POLICY)
    if audited():
        return
    log("starting the apiserver again with an audit log of the node agents' requests")
    restart_apiserver("--audit-policy-file=%s --audit-log-path=%s --audit-log-maxsize=1000 "
                      "--audit-log-maxbackup=1 --audit-log-format=json" % (policy, AUDIT_LOG))
    # Its informers and the controllers' watches come back: not the runs' load.
    time.sleep(30)


def audit_off():
    if audited():
        log("starting the apiserver again without the audit log")
        restart_apiserver(os.environ.get("APISERVER_EXTRA_ARGS", ""))


def audit_offset():
    try:
        return os.path.getsize(AUDIT_LOG)
    except OSError:
        return 0


def rfc3339(s):
    """The audit log's timestamps (RFC 3339, microseconds, Z) as Unix seconds."""
    s = s.rstrip("Z")
    frac = 0.0
    if "." in s:
        s, f = s.split(".", 1)
        frac = float("0." + f)
    t = datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + frac


def agent_of(user):
    if user == "system:kube-proxy":
        return "kube-proxy"
    if user.startswith("system:node:node-"):
        return "kubelet"
    return None


def audit_counts(offset, windows):
    """{window: {(agent, verb, resource): requests}} from the audit log past `offset`, each
    request once (its audit ID), by the time the apiserver received it."""
    out = {w: {} for w in windows}
    seen = set()
    with open(AUDIT_LOG, "rb") as f:
        f.seek(offset)
        for raw in f:
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if e.get("auditID") in seen:
                continue
            agent = agent_of(e.get("user", {}).get("username", ""))
            if agent is None:
                continue
            seen.add(e.get("auditID"))
            t = rfc3339(e.get("requestReceivedTimestamp", "1970-01-01T00:00:00Z"))
            ref = e.get("objectRef") or {}
            res = ref.get("resource") or urllib.parse.urlparse(e.get("requestURI", "")).path
            if ref.get("subresource"):
                res += "/" + ref["subresource"]
            key = (agent, e.get("verb", ""), res)
            for w, (a, b) in windows.items():
                if a <= t < b:
                    out[w][key] = out[w].get(key, 0) + 1
    return out


# ----------------------------------------------------------------------------- the runs

class Calibration:
    def __init__(self, args):
        self.args = args
        self.dir = os.path.join(args.run_dir, time.strftime("%Y%m%d-%H%M%S"))
        self.logs = os.path.join(self.dir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.pki = agents.Pki(os.path.join(args.run_dir, "pki"))
        self.procs = agents.Procs(args.run_dir)
        token = open(os.path.join(HARNESS, "pki", "admin.token")).read().strip()
        self.admin = agents.Api(API, ca=self.pki.ca, token=token, timeout=60)
        self.nodes = ["node-%d" % i for i in range(args.nodes)]

    def bench(self, *extra):
        return [self.args.bench_bin, "--json", "scale", "--kubeconfig", os.path.join(HARNESS, "kubeconfig"),
                "--ca-cert", os.path.join(HARNESS, "pki", "ca.crt"),
                "--ca-key", os.path.join(HARNESS, "pki", "ca.key"),
                "--kubeplex-bin", self.args.kubeplex_bin] + list(extra)

    def clean(self):
        """The scenario's namespace, nodes and leases removed, and gone."""
        agents.kill_leftovers(self.args.run_dir)
        r = subprocess.run(self.bench("--cleanup"), capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise Failure("bench --cleanup: %s" % r.stderr[-2000:])
        deadline = time.time() + 300
        while time.time() < deadline:
            st, _ = self.admin.request("GET", "/api/v1/namespaces/" + NAMESPACE)
            pods = [p for p in self.admin.get("/api/v1/pods")["items"]
                    if p["spec"].get("nodeName", "").startswith("node-")]
            if st == 404 and not pods:
                break
            time.sleep(2)
        else:
            raise Failure("the namespace %s not gone within 300 s" % NAMESPACE)
        agents.clean_hollow_files([])

    def scenario(self):
        a = self.args
        return ["--nodes", str(a.nodes), "--pods-per-node", str(a.pods_per_node),
                "--services", str(a.services), "--duration", str(a.duration),
                "--write-rate", str(a.write_rate), "--hold", str(a.hold), "--mode", "direct"]

    def run(self, who):
        """One run; returns (phases, the bench's report)."""
        self.clean()
        work = os.path.join(self.dir, who)
        os.makedirs(work, exist_ok=True)
        argv = self.bench(*(self.scenario() + ["--work-dir", work, "--agents",
                                               "external" if who == "kubemark" else "emulated"]))
        out = open(os.path.join(self.logs, "bench-%s.json" % who), "wb")
        err = open(os.path.join(self.logs, "bench-%s.log" % who), "wb")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        log("%s run: %s" % (who, " ".join(argv)))
        bench = subprocess.Popen(argv, stdout=out, stderr=err, env=env, start_new_session=True)
        try:
            if who == "kubemark":
                cue = os.path.join(work, "agents-start")
                deadline = time.time() + 600
                while not os.path.exists(cue):
                    if bench.poll() is not None or time.time() > deadline:
                        raise Failure("the bench gave no cue (log %s)" % err.name)
                    time.sleep(0.05)
                self.start_kubemark()
            limit = self.args.hold + self.args.duration + 900
            bench.wait(timeout=limit)
        finally:
            if bench.poll() is None:
                bench.kill()
                bench.wait()
            self.procs.stop()
            out.close()
            err.close()
        if bench.returncode != 0:
            raise Failure("the bench failed (log %s)" % err.name)
        report = json.load(open(out.name))
        phases = report["modes"][0]["phases"]
        return phases, report

    def start_kubemark(self):
        kubemark = os.path.join(HARNESS, "bin", "kubemark")
        proxy_crt, proxy_key = self.pki.sign("kube-proxy", "system:kube-proxy")
        pkc = self.pki.kubeconfig("kube-proxy-direct", API, proxy_crt, proxy_key)
        for i, node in enumerate(self.nodes):
            port = KUBELET_PORT_BASE + i
            if not agents.port_free(port):
                raise Failure("port %d is taken" % port)
            crt, key = self.pki.sign("kubelet-" + node, "system:node:" + node, orgs=["system:nodes"])
            kkc = self.pki.kubeconfig("kubelet-%s-direct" % node, API, crt, key)
            self.procs.start("kubelet-" + node, [
                kubemark, "--morph=kubelet", "--name=" + node, "--kubeconfig=" + kkc,
                "--kubelet-port=%d" % port, "--kubelet-read-only-port=0",
                "--use-host-image-service=false", "--kube-api-qps=50", "--kube-api-burst=100",
                "--max-pods=%d" % max(110, 2 * self.args.pods_per_node), "--v=2"],
                os.path.join(self.logs, "kubelet-%s.log" % node))
            self.procs.start("kube-proxy-" + node, [
                kubemark, "--morph=proxy", "--name=" + node, "--kubeconfig=" + pkc, "--v=2"],
                os.path.join(self.logs, "kube-proxy-%s.log" % node))
        log("started %d hollow kubelets and kube-proxies" % len(self.nodes))

    def execute(self):
        r = subprocess.run([os.path.join(HARNESS, "up.sh")], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise Failure("up.sh: %s" % r.stderr[-2000:])
        audit_on()
        counts, reports = {}, {}
        try:
            for who in self.args.order:
                offset = audit_offset()
                phases, report = self.run(who)
                windows = {"startup": (phases["nodes_start"], phases["writer_start"]),
                           "steady": (phases["writer_start"], phases["steady_end"])}
                # The audit log is written as requests end: a moment for the last ones.
                time.sleep(2)
                counts[who] = audit_counts(offset, windows)
                reports[who] = {"phases": phases, "written": report["modes"][0].get("written")}
        finally:
            self.clean()
            if not self.args.keep_audit:
                audit_off()
        return {"args": vars(self.args), "dir": self.dir, "commit": agents.git_head(),
                "counts": {who: {w: {" ".join(k): v for k, v in sorted(c.items())}
                                 for w, c in by.items()} for who, by in counts.items()},
                "runs": reports, "table": table(with_whole(counts))}


def with_whole(counts):
    """The counts with a third window, `whole`: the start-up and the steady run together. The
    real kubelets' work moves between the two from run to run (a kubelet slower to start
    mounts its pods' volumes, and opens their watches, after the writer started)."""
    for by in counts.values():
        whole = {}
        for w in ("startup", "steady"):
            for k, v in by.get(w, {}).items():
                whole[k] = whole.get(k, 0) + v
        by["whole"] = whole
    return counts


def table(counts):
    """Rows (window, agent, verb, resource, kubemark, emulated, ratio, read?)."""
    rows = []
    for w in ("startup", "steady", "whole"):
        keys = set()
        for who in ("kubemark", "emulated"):
            keys |= set(counts.get(who, {}).get(w, {}))
        for k in sorted(keys):
            km = counts.get("kubemark", {}).get(w, {}).get(k, 0)
            em = counts.get("emulated", {}).get(w, {}).get(k, 0)
            ratio = round(em / km, 2) if km else None
            rows.append({"window": w, "agent": k[0], "verb": k[1], "resource": k[2],
                         "kubemark": km, "emulated": em, "ratio": ratio, "read": k[1] in READS})
    return rows


def print_table(result):
    print("\n%-8s %-10s %-7s %-34s %9s %9s %6s" % ("window", "agent", "verb", "resource",
                                                  "kubemark", "emulated", "e/k"))
    off = 0
    for r in result["table"]:
        ratio = "-" if r["ratio"] is None else "%.2f" % r["ratio"]
        flag = ""
        if r["read"] and (r["ratio"] is None or abs(r["ratio"] - 1) > 0.10):
            flag = "  <- read off by more than 10%"
            off += 1
        print("%-8s %-10s %-7s %-34s %9d %9d %6s%s" % (r["window"], r["agent"], r["verb"],
                                                        r["resource"], r["kubemark"], r["emulated"],
                                                        ratio, flag))
    print("\nnode reads off by more than 10%%: %d (%d over the whole run)"
          % (off, sum(1 for r in result["table"] if r["window"] == "whole" and r["read"]
                      and (r["ratio"] is None or abs(r["ratio"] - 1) > 0.10))))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=10)
    p.add_argument("--pods-per-node", type=int, default=30)
    p.add_argument("--services", type=int, default=100)
    p.add_argument("--duration", type=int, default=60, help="the writer's seconds (default 60)")
    p.add_argument("--write-rate", type=float, default=4.0)
    p.add_argument("--hold", type=int, default=90,
                   help="the start-up's seconds: the writer starts this long after the agents (default 90)")
    p.add_argument("--order", nargs="+", default=["kubemark", "emulated"],
                   choices=["kubemark", "emulated"])
    p.add_argument("--run-dir", default="/tmp/calibrate-run")
    p.add_argument("--bench-bin", default=os.path.join(REPO, "target/release/kubeplex-bench"))
    p.add_argument("--kubeplex-bin", default=os.path.join(REPO, "target/release/kubeplex"))
    p.add_argument("--keep-audit", action="store_true",
                   help="leave the apiserver running with the audit log")
    p.add_argument("--report", metavar="CALIBRATION_JSON",
                   help="print the table of an earlier run's calibration.json, and stop")
    args = p.parse_args()
    if args.report:
        with open(args.report) as f:
            result = json.load(f)
        counts = {who: {w: {tuple(k.split(" ", 2)): v for k, v in c.items()}
                        for w, c in by.items() if w != "whole"}
                  for who, by in result["counts"].items()}
        result["table"] = table(with_whole(counts))
        print_table(result)
        return
    if args.nodes > 20:
        p.error("at most 20 hollow nodes on this machine")
    for b in (args.bench_bin, args.kubeplex_bin):
        if not os.access(b, os.X_OK):
            p.error("%s: build it (cargo build --release --locked -p kubeplex -p kubeplex-bench --bins)" % b)
    c = Calibration(args)
    try:
        result = c.execute()
    except Failure as e:
        log("FAILED: %s" % e)
        c.procs.stop()
        sys.exit(1)
    with open(os.path.join(c.dir, "calibration.json"), "w") as f:
        json.dump(result, f, indent=1)
    print_table(result)
    print("\n" + os.path.join(c.dir, "calibration.json"))


if __name__ == "__main__":
    main()
