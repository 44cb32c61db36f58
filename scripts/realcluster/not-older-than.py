#!/usr/bin/env python3
"""How long a WatchList not older than an RV from another resource takes to start, against the
real kube-apiserver 1.36 (../shared/realcluster): directly, and through a kubeplex whose cache
of the namespace is running and quiet.

Each round writes a Secret (the cluster's RV moves on; the namespace's ConfigMaps stay quiet),
then opens `GET /api/v1/namespaces/NS/configmaps?watch=1&sendInitialEvents=true&
resourceVersion=<the Secret's RV>&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`
directly and through kubeplex, in alternating order, and times the initial-events-end bookmark
(the state is complete). Prints each round and the medians, and how many upstream proof calls
kubeplex made (its kubeplex_upstream_calls_total: proof_list, proof_watch).

Usage: not-older-than.py [--rounds 20] [--namespace bench] [--configmaps 20]
Env: HARNESS (default ~/.cache/kubeplex-realcluster), KUBEPLEX_BIN (default
target/release/kubeplex). Standard library only.
"""

import argparse
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request

HARNESS = os.environ.get("HARNESS", os.path.expanduser("~/.cache/kubeplex-realcluster"))
KUBEPLEX = os.environ.get("KUBEPLEX_BIN", "target/release/kubeplex")
PORT, ADMIN = 18085, 18086


def token():
    with open(os.path.join(HARNESS, "kubeconfig")) as f:
        for line in f:
            if "token:" in line:
                return line.split()[-1]
    sys.exit("no token in the harness kubeconfig")


TOKEN = token()
CTX = ssl._create_unverified_context()  # loopback apiserver with the harness's own CA


def apiserver(method, path, body=None):
    conn = http.client.HTTPSConnection("127.0.0.1", 6443, context=CTX, timeout=30)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
               "User-Agent": "not-older-than/1"}
    conn.request(method, path, body=json.dumps(body) if body else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def until_bookmark(direct, path):
    """Seconds from sending the WatchList to its initial-events-end bookmark."""
    if direct:
        conn = http.client.HTTPSConnection("127.0.0.1", 6443, context=CTX, timeout=30)
        headers = {"Authorization": f"Bearer {TOKEN}"}
    else:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        headers = {}
    headers.update({"Accept": "application/json", "User-Agent": "not-older-than/1"})
    start = time.monotonic()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    if resp.status != 200:
        sys.exit(f"{'direct' if direct else 'kubeplex'}: {resp.status} {resp.read()[:300]}")
    while True:
        line = resp.readline()
        if not line:
            sys.exit("the watch ended before its bookmark")
        if json.loads(line).get("type") == "BOOKMARK":
            took = time.monotonic() - start
            conn.close()
            return took


def proof_calls():
    text = urllib.request.urlopen(f"http://127.0.0.1:{ADMIN}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kubeplex_upstream_calls_total{") and 'resource="configmaps/v1"' in line:
            verb = line.split('verb="')[1].split('"')[0]
            out[verb] = out.get(verb, 0) + float(line.rsplit(" ", 1)[1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--namespace", default="bench")
    ap.add_argument("--configmaps", type=int, default=20)
    args = ap.parse_args()
    ns = args.namespace
    subprocess.run([os.path.join(HARNESS, "up.sh")], check=True, stdout=subprocess.DEVNULL)
    apiserver("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    for i in range(args.configmaps):
        apiserver("POST", f"/api/v1/namespaces/{ns}/configmaps",
                  {"metadata": {"name": f"quiet-{i}"}, "data": {"k": "v" * 200}})
    kubeconfig = os.path.join(HARNESS, "kubeconfig")
    proc = subprocess.Popen([KUBEPLEX, "serve", "--kubeconfig", kubeconfig,
                             "--listen", f"127.0.0.1:{PORT}", "--admin-listen", f"127.0.0.1:{ADMIN}"],
                            stdout=subprocess.DEVNULL, stderr=open("/tmp/not-older-than.log", "w"))
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{ADMIN}/readyz", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        # Start the namespace's cache and let it settle.
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{PORT}/api/v1/namespaces/{ns}/configmaps?resourceVersion=0",
            headers={"User-Agent": "not-older-than/1"}), timeout=30).read()
        time.sleep(2)
        before = proof_calls()
        direct, through = [], []
        for r in range(args.rounds):
            status, body = apiserver("POST", "/api/v1/namespaces/default/secrets",
                                     {"metadata": {"generateName": "not-older-than-"}})
            if status != 201:
                sys.exit(f"secret: {status}")
            rv = json.loads(body)["metadata"]["resourceVersion"]
            path = (f"/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true"
                    f"&resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
                    f"&allowWatchBookmarks=true&timeoutSeconds=10")
            order = [True, False] if r % 2 == 0 else [False, True]
            for d in order:
                (direct if d else through).append(until_bookmark(d, path))
            print(f"round {r}: rv {rv} direct {direct[-1] * 1000:.1f} ms, "
                  f"kubeplex {through[-1] * 1000:.1f} ms", flush=True)
        after = proof_calls()
        calls = {k: int(after.get(k, 0) - before.get(k, 0)) for k in ("proof_list", "proof_watch")}
        p = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1000
        print(f"WatchList not older than another resource's RV, {args.rounds} rounds: "
              f"direct median {statistics.median(direct) * 1000:.1f} ms p90 {p(direct, 0.9):.1f} ms | "
              f"kubeplex median {statistics.median(through) * 1000:.1f} ms p90 {p(through, 0.9):.1f} ms | "
              f"kubeplex upstream proof calls {calls}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
