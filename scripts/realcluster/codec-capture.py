#!/usr/bin/env python3
"""Captures, from the real kube-apiserver of ../shared/realcluster, every built-in kind the node
agents read (and the ones a sidecar commonly serves) as a list in JSON and in protobuf, for the
codec's differential test (crates/kubeplex-wire/src/codec/tests/realcluster.rs): each item the
apiserver wrote in JSON, rendered to protobuf by the codec, must be the bytes it wrote in
protobuf, and the other way round.

Run it while the cluster has objects of every kind with real status — during an agents run:

    python3 scripts/realcluster/agents.py --mode direct --nodes 3 --pods 30 &
    python3 scripts/realcluster/codec-capture.py --wait-namespace agents-direct-

Writes tests/fixtures/realcluster/<name>.json and .pb (at most --max items per list, the
first ones by the apiserver's order, and the same ones in both encodings: the lists are taken at
one resourceVersion), and for the renderings a cache serves besides (issue 31's differential,
src/cache/transcode/tests/renderings.rs):
- <name>.watch.json / .watch.pb: a WatchList (sendInitialEvents) in each encoding, its first
  --max ADDED events as the apiserver framed them (JSON lines; protobuf length-prefixed frames);
- <name>.meta.json / .meta.pb: the list as a PartialObjectMetadataList at the same RV;
- <name>.table.json (+ .table.date, the response's Date: when the apiserver computed the ages):
  the list as a meta.k8s.io/v1 Table, for the kinds kubeplex prints (TABLES).
"""
import argparse
import json
import os
import ssl
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.environ.get("HARNESS", os.path.expanduser("~/.cache/kubeplex-realcluster"))
SERVER = "https://127.0.0.1:6443"

# (fixture name, collection path): the node agents' reads (kubelet, kube-proxy, a CNI agent)
# and what a sidecar commonly serves.
KINDS = [
    ("pods", "/api/v1/pods"),
    ("nodes", "/api/v1/nodes"),
    ("services", "/api/v1/services"),
    ("endpointslices", "/apis/discovery.k8s.io/v1/endpointslices"),
    ("configmaps", "/api/v1/configmaps"),
    ("secrets", "/api/v1/secrets"),
    ("namespaces", "/api/v1/namespaces"),
    ("deployments", "/apis/apps/v1/deployments"),
    ("replicasets", "/apis/apps/v1/replicasets"),
    ("leases", "/apis/coordination.k8s.io/v1/leases"),
    ("events", "/api/v1/events"),
    ("endpoints", "/api/v1/endpoints"),
    ("runtimeclasses", "/apis/node.k8s.io/v1/runtimeclasses"),
    ("csidrivers", "/apis/storage.k8s.io/v1/csidrivers"),
    ("servicecidrs", "/apis/networking.k8s.io/v1/servicecidrs"),
]

# The kinds whose Tables kubeplex prints from its cache (wire::table::supports).
TABLES = {"pods", "nodes", "services", "endpointslices", "configmaps", "secrets", "namespaces",
          "deployments", "replicasets", "events", "endpoints"}

PROTOBUF = "application/vnd.kubernetes.protobuf"
META_JSON = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
META_PB = PROTOBUF + ";as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"

# Not curl's: with curl's User-Agent the apiserver indents JSON.
USER_AGENT = "kubeplex-codec-capture/1"


def token():
    with open(os.path.join(HARNESS, "pki", "admin.token")) as f:
        return f.read().strip()


def get(path, accept, ctx, tok):
    req = urllib.request.Request(SERVER + path, headers={
        "Accept": accept, "Authorization": "Bearer " + tok, "User-Agent": USER_AGENT})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        return resp.read()


def get_dated(path, accept, ctx, tok):
    """The body and the response's Date header."""
    req = urllib.request.Request(SERVER + path, headers={
        "Accept": accept, "Authorization": "Bearer " + tok, "User-Agent": USER_AGENT})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
        return resp.read(), resp.headers.get("Date", "")


def watch_list(path, rv, protobuf, most, ctx, tok):
    """A WatchList's first `most` ADDED events (fewer if its initial events end first), as the
    apiserver framed them: JSON lines, or protobuf frames with their 4-byte length."""
    query = ("?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
             "&resourceVersionMatch=NotOlderThan&resourceVersion=%s&timeoutSeconds=30" % rv)
    req = urllib.request.Request(SERVER + path + query, headers={
        "Accept": PROTOBUF if protobuf else "application/json",
        "Authorization": "Bearer " + tok, "User-Agent": USER_AGENT})
    frames = []
    with urllib.request.urlopen(req, context=ctx, timeout=60) as resp:
        while len(frames) < most:
            if protobuf:
                head = resp.read(4)
                if len(head) < 4:
                    break
                frame = head + resp.read(int.from_bytes(head, "big"))
                bookmark = b"BOOKMARK" in frame[:64]
            else:
                frame = resp.readline()
                if not frame:
                    break
                bookmark = json.loads(frame).get("type") == "BOOKMARK"
            if bookmark:
                break
            frames.append(frame)
    return b"".join(frames), len(frames)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "realcluster"))
    p.add_argument("--max", type=int, default=20, help="items per list (default 20)")
    p.add_argument("--wait-namespace", default="",
                   help="wait until a namespace with this prefix has all its pods Running")
    p.add_argument("--timeout", type=int, default=600)
    a = p.parse_args()
    ctx = ssl.create_default_context(cafile=os.path.join(HARNESS, "pki", "ca.crt"))
    tok = token()
    if a.wait_namespace:
        deadline = time.time() + a.timeout
        while True:
            pods = json.loads(get("/api/v1/pods", "application/json", ctx, tok))["items"]
            ours = [q for q in pods if q["metadata"]["namespace"].startswith(a.wait_namespace)]
            if ours and all(q.get("status", {}).get("phase") == "Running" for q in ours):
                break
            if time.time() > deadline:
                sys.exit("no namespace %s* with every pod Running" % a.wait_namespace)
            time.sleep(2)
    os.makedirs(a.out, exist_ok=True)
    for name, path in KINDS:
        # One RV for both encodings, so that they hold the same objects: a list at the RV the
        # JSON list was served at (resourceVersionMatch=Exact).
        first = json.loads(get(path + "?limit=%d" % a.max, "application/json", ctx, tok))
        rv = first["metadata"]["resourceVersion"]
        query = "?limit=%d&resourceVersion=%s&resourceVersionMatch=Exact" % (a.max, rv)
        body_json = get(path + query, "application/json", ctx, tok)
        body_pb = get(path + query, "application/vnd.kubernetes.protobuf", ctx, tok)
        n = len(json.loads(body_json)["items"])
        for ext, body in (("json", body_json), ("pb", body_pb)):
            with open(os.path.join(a.out, "%s.%s" % (name, ext)), "wb") as f:
                f.write(body)
        print("%-16s %3d items at RV %s (%d B JSON, %d B protobuf)" % (name, n, rv, len(body_json), len(body_pb)))
        renderings = {
            "meta.json": get(path + query, META_JSON, ctx, tok),
            "meta.pb": get(path + query, META_PB, ctx, tok),
        }
        for ext, protobuf in (("watch.json", False), ("watch.pb", True)):
            renderings[ext], events = watch_list(path, rv, protobuf, a.max, ctx, tok)
            print("%-16s %3d watch events (%s)" % ("", events, ext))
        if name in TABLES:
            renderings["table.json"], date = get_dated(path + query, TABLE, ctx, tok)
            renderings["table.date"] = (date + "\n").encode()
        for ext, body in renderings.items():
            with open(os.path.join(a.out, "%s.%s" % (name, ext)), "wb") as f:
                f.write(body)


if __name__ == "__main__":
    main()
