#!/usr/bin/env python3
"""Captures custom resources from the real kube-apiserver of ../shared/realcluster, for the
custom-resource differential (src/cache/object/tests/custom.rs) and the CRD lifecycle the fake
apiserver models (crates/kubeplex-sim): what kubeplex answers from a cache of custom resources
must be these bytes.

It installs Cilium's CRDs as the agent's source ships them (scripts/realcluster/crds/cilium-*.yaml,
from cilium/cilium main; crds/CILIUM.md says what the agent reads and writes, with citations:
CiliumNode and CiliumIdentity cluster-scoped, CiliumEndpoint namespaced) and gadgets.yaml (two
served versions, selectableFields, printer columns of every type), creates objects shaped as a
Cilium agent writes them, and writes tests/fixtures/realcluster/custom/:

- <resource>.json: the list (JSON; custom resources have no protobuf form);
- <resource>.page.json: its first page of 2 (a continue token, remainingItemCount);
- <resource>.watch.json: a WatchList (sendInitialEvents) to its initial-events-end BOOKMARK;
- <resource>.meta.json / .meta.pb: the list as a PartialObjectMetadataList, at the list's RV;
- <resource>.meta.watch.json: the WatchList as PartialObjectMetadata events;
- <resource>.table.json (+ .table.date): the list as a meta.k8s.io/v1 Table;
- <resource>.events.json: a watch from the list's RV while objects are changed, a status
  patched, one deleted and one created;
- gadgets.v2.*: the same through the second served version; gadgets.selected.json: a list by a
  selectable field (spec.color=red);
- lifecycle.*: a watch open while the storage version changes, while a version stops being
  served, while a version is served (again: added), and while the CRD is deleted (.watch.json its frames, .end how and when it ended),
  what reads get in the 5 s after the change (.reads: each different answer once, with when),
  and what a read gets afterwards (.get.json, .get.code).

Run it on a cluster with nothing of these CRDs (it deletes them at the end):

    python3 scripts/realcluster/crd-capture.py
"""
import argparse
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.environ.get("HARNESS", os.path.expanduser("~/.cache/kubeplex-realcluster"))
SERVER = "https://127.0.0.1:6443"
CRDS = os.path.join(REPO, "scripts", "realcluster", "crds")
NS = "crd-capture"
# The uids of the objects that own the captured ones (install()).
OWNERS = {}

# (fixture name, group, version, resource, namespaced)
KINDS = [
    ("ciliumnodes", "cilium.io", "v2", "ciliumnodes", False),
    ("ciliumendpoints", "cilium.io", "v2", "ciliumendpoints", True),
    ("ciliumidentities", "cilium.io", "v2", "ciliumidentities", False),
    ("ciliumnetworkpolicies", "cilium.io", "v2", "ciliumnetworkpolicies", True),
    ("gadgets", "test.kubeplex.io", "v1", "gadgets", True),
    ("gadgets.v2", "test.kubeplex.io", "v2", "gadgets", True),
]

CRD_NAMES = ["ciliumnodes.cilium.io", "ciliumendpoints.cilium.io", "ciliumidentities.cilium.io",
             "ciliumnetworkpolicies.cilium.io", "gadgets.test.kubeplex.io"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
META_JSON = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
META_ONE_JSON = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
META_PB = PROTOBUF + ";as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
# Not curl's: with curl's User-Agent the apiserver indents JSON.
USER_AGENT = "kubeplex-crd-capture/1"


class Api:
    def __init__(self):
        self.ctx = ssl.create_default_context(cafile=os.path.join(HARNESS, "pki", "ca.crt"))
        with open(os.path.join(HARNESS, "pki", "admin.token")) as f:
            self.token = f.read().strip()

    def request(self, method, path, body=None, accept="application/json",
                content_type="application/json"):
        """(status, headers, body) — errors included."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Accept": accept, "Authorization": "Bearer " + self.token,
                   "User-Agent": USER_AGENT}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(SERVER + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def ok(self, method, path, body=None, **kw):
        code, _, out = self.request(method, path, body, **kw)
        if code >= 300:
            sys.exit("%s %s: %d %s" % (method, path, code, out[:300]))
        return json.loads(out) if out else None

    def kubectl(self, *args):
        subprocess.run(["kubectl", "--server", SERVER, "--token", self.token,
                        "--certificate-authority", os.path.join(HARNESS, "pki", "ca.crt"), *args],
                       check=True, stdout=subprocess.DEVNULL)


def collection(group, version, resource, namespaced):
    base = "/apis/%s/%s" % (group, version)
    return base + ("/namespaces/%s/%s" % (NS, resource) if namespaced else "/" + resource)


class Watch(threading.Thread):
    """A JSON watch read in the background: its frames, and how and when it ended."""

    def __init__(self, api, path, query, accept="application/json", until_bookmark=False,
                 seconds=60):
        super().__init__(daemon=True)
        self.api, self.url, self.accept = api, path + "?" + query, accept
        self.until_bookmark, self.seconds = until_bookmark, seconds
        self.frames, self.end, self.opened = [], "open at the capture's timeout", threading.Event()

    def run(self):
        req = urllib.request.Request(SERVER + self.url, headers={
            "Accept": self.accept, "Authorization": "Bearer " + self.api.token,
            "User-Agent": USER_AGENT})
        start = time.time()
        try:
            with urllib.request.urlopen(req, context=self.api.ctx, timeout=self.seconds) as resp:
                self.opened.set()
                while True:
                    line = resp.readline()
                    if not line:
                        self.end = "ended by the apiserver after %.1f s" % (time.time() - start)
                        return
                    self.frames.append(line)
                    if self.until_bookmark and b'"type":"BOOKMARK"' in line:
                        self.end = "initial-events-end bookmark"
                        return
        except Exception as e:  # the read timed out: the watch was still open
            self.opened.set()
            if "timed out" not in str(e):
                self.end = "error: %s" % e

    def finish(self, seconds=None):
        self.join(seconds if seconds is not None else self.seconds + 5)
        return b"".join(self.frames)


def write(out, name, body):
    with open(os.path.join(out, name), "wb") as f:
        f.write(body if isinstance(body, bytes) else body.encode())


def install(api):
    for f in sorted(os.listdir(CRDS)):
        if f.endswith(".yaml"):
            api.kubectl("apply", "--server-side", "-f", os.path.join(CRDS, f))
    for name in CRD_NAMES:
        api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/" + name)
    ns = api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": NS}})
    OWNERS["namespace"] = ns["metadata"]["uid"]
    cm = api.ok("POST", "/api/v1/namespaces/%s/configmaps" % NS,
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})
    OWNERS["configmap"] = cm["metadata"]["uid"]


def node(n):
    """A CiliumNode as the agent writes its own (pkg/nodediscovery: spec with addresses, health,
    IPAM pool; status from the operator's IPAM)."""
    ip = "10.0.%d.%d" % (n // 250, n % 250 + 1)
    return {
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": "node-%d" % n,
                     "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "node-%d" % n,
                                "kubernetes.io/os": "linux"},
                     # The agent's owner is the Node; here an object that exists (the garbage
                     # collector deletes what a missing owner owns), in the same shape.
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": NS,
                                          "uid": OWNERS["namespace"]}]},
        "spec": {
            "addresses": [{"type": "InternalIP", "ip": ip},
                          {"type": "CiliumInternalIP", "ip": "10.244.%d.1" % n}],
            "alibaba-cloud": {}, "azure": {}, "eni": {},
            "health": {"ipv4": "10.244.%d.17" % n},
            "ingress": {},
            "encryption": {},
            "ipam": {"podCIDRs": ["10.244.%d.0/24" % n],
                     "pool": {}, "pools": {}},
            "bootid": "d1c3a4b2-%04d-4e5f-9a8b-7c6d5e4f3a2b" % n,
        },
        "status": {"alibaba-cloud": {}, "azure": {}, "eni": {}, "ipam": {"operator-status": {}}},
    }


def endpoint(n, identity):
    """A CiliumEndpoint as the agent writes one per local pod (pkg/endpointmanager, the CEP
    sync: status only — the CRD has no status subresource)."""
    return {
        "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {"name": "pod-%d" % n, "namespace": NS,
                     "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6"},
                     # The agent's owner is the Pod; here a ConfigMap that exists.
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                          "uid": OWNERS["configmap"], "blockOwnerDeletion": True}]},
        "status": {
            "id": 1000 + n,
            "external-identifiers": {
                "cni-attachment-id": "%064x:eth0" % (n + 1), "container-id": "%064x" % (n + 1),
                "k8s-namespace": NS, "k8s-pod-name": "pod-%d" % n, "pod-name": "%s/pod-%d" % (NS, n)},
            "identity": {"id": identity, "labels": [
                "k8s:app=web",
                "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=" + NS,
                "k8s:io.cilium.k8s.policy.cluster=default",
                "k8s:io.cilium.k8s.policy.serviceaccount=default",
                "k8s:io.kubernetes.pod.namespace=" + NS]},
            "networking": {"addressing": [{"ipv4": "10.244.%d.%d" % (n % 4, 20 + n)}],
                           "node": "10.0.0.%d" % (n % 4 + 1)},
            "encryption": {},
            "policy": {"ingress": {"enforcing": False, "state": "<status disabled>"},
                       "egress": {"enforcing": False, "state": "<status disabled>"}},
            "state": "ready",
            "named-ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "service-account": "default",
        },
    }


def identity(n):
    """A CiliumIdentity as the agent allocates one for a new label set (pkg/identity/cache,
    crd allocation mode): labels on metadata, the label set as security-labels."""
    labels = {
        "k8s:app": "app-%d" % n,
        "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name": NS,
        "k8s:io.cilium.k8s.policy.cluster": "default",
        "k8s:io.cilium.k8s.policy.serviceaccount": "default",
        "k8s:io.kubernetes.pod.namespace": NS,
    }
    return {
        "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
        "metadata": {"name": str(10000 + n),
                     "labels": {"io.kubernetes.pod.namespace": NS}},
        "security-labels": labels,
    }


def policy(n):
    """A CiliumNetworkPolicy as users write them (an L3/L4 ingress rule, an L7 HTTP one)."""
    rule = {"endpointSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "client-%d" % n}}],
                         "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]}]}
    if n % 2:
        rule["ingress"][0]["toPorts"][0]["rules"] = {"http": [{"method": "GET", "path": "/api/.*"}]}
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
            "metadata": {"name": "allow-%d" % n, "namespace": NS},
            "spec": rule}


def gadget(n, version="v1"):
    colors = ["red", "green", "blue"]
    spec = {"color": colors[n % 3], "size": n, "tags": ["t%d" % i for i in range(n % 3)]}
    if n % 2:
        spec["weight"] = 0.5 + n
    if n % 3 == 0:
        spec["extra"] = {"z": [1, {"b": None, "a": "x"}], "a": {"nested": True}, "m": "\u00e9<&>"}
    return {"apiVersion": "test.kubeplex.io/" + version, "kind": "Gadget",
            "metadata": {"name": "gadget-%d" % n, "namespace": NS,
                         "labels": {"color": colors[n % 3]},
                         "annotations": {"note": "line\nbreak \"quoted\""} if n == 1 else None},
            "spec": spec}


def create(api):
    for n in range(4):
        api.ok("POST", "/apis/cilium.io/v2/ciliumnodes", node(n))
    for n in range(4):
        api.ok("POST", "/apis/cilium.io/v2/ciliumidentities", identity(n))
    for n in range(8):
        api.ok("POST", "/apis/cilium.io/v2/namespaces/%s/ciliumendpoints" % NS,
               endpoint(n, 10000 + n % 4))
    for n in range(3):
        api.ok("POST", "/apis/cilium.io/v2/namespaces/%s/ciliumnetworkpolicies" % NS, policy(n))
    base = "/apis/test.kubeplex.io/%s/namespaces/%s/gadgets"
    for n in range(6):
        api.ok("POST", base % ("v1", NS), gadget(n))
    for n in range(6, 8):
        api.ok("POST", base % ("v2", NS), gadget(n, "v2"))
    for n in (0, 2):
        api.ok("PATCH", base % ("v1", NS) + "/gadget-%d/status" % n,
               {"status": {"ready": n == 0, "message": "checked"}},
               content_type="application/merge-patch+json")


def capture(api, out, most):
    for name, group, version, resource, namespaced in KINDS:
        path = collection(group, version, resource, namespaced)
        first = json.loads(api.request("GET", path)[2])
        rv = first["metadata"]["resourceVersion"]
        exact = "resourceVersion=%s&resourceVersionMatch=Exact" % rv
        write(out, name + ".json", api.request("GET", path + "?" + exact)[2])
        write(out, name + ".page.json", api.request("GET", path + "?limit=2&" + exact)[2])
        write(out, name + ".meta.json", api.request("GET", path + "?" + exact, accept=META_JSON)[2])
        write(out, name + ".meta.pb", api.request("GET", path + "?" + exact, accept=META_PB)[2])
        _, headers, table = api.request("GET", path + "?" + exact, accept=TABLE)
        write(out, name + ".table.json", table)
        write(out, name + ".table.date", headers.get("Date", "") + "\n")
        query = ("watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                 "&resourceVersionMatch=NotOlderThan&resourceVersion=%s&timeoutSeconds=30" % rv)
        for ext, accept in (("watch.json", "application/json"), ("meta.watch.json", META_ONE_JSON)):
            w = Watch(api, path, query, accept=accept, until_bookmark=True, seconds=30)
            w.start()
            write(out, "%s.%s" % (name, ext), w.finish())
        n = len(json.loads(api.request("GET", path + "?" + exact)[2])["items"])
        print("%-18s %3d items at RV %s" % (name, n, rv))
    # One object of each kind as a get, whole and metadata-only.
    for name, path in (("ciliumnodes.get", "/apis/cilium.io/v2/ciliumnodes/node-1"),
                       ("ciliumendpoints.get",
                        "/apis/cilium.io/v2/namespaces/%s/ciliumendpoints/pod-1" % NS),
                       ("gadgets.get", "/apis/test.kubeplex.io/v1/namespaces/%s/gadgets/gadget-1" % NS)):
        write(out, name + ".json", api.request("GET", path)[2])
        write(out, name + ".meta.json", api.request("GET", path, accept=META_ONE_JSON)[2])
    gadgets = collection("test.kubeplex.io", "v1", "gadgets", True)
    write(out, "gadgets.selected.json", api.request("GET", gadgets + "?fieldSelector=spec.color%3Dred")[2])


def changes(api, out):
    """Watches from the current RV of each kind while objects change."""
    gadgets = collection("test.kubeplex.io", "v1", "gadgets", True)
    watched = {}
    for name, group, version, resource, namespaced in KINDS:
        path = collection(group, version, resource, namespaced)
        rv = json.loads(api.request("GET", path)[2])["metadata"]["resourceVersion"]
        w = Watch(api, path, "watch=true&resourceVersion=%s&timeoutSeconds=8" % rv, seconds=15)
        w.start()
        w.opened.wait(5)
        watched[name] = w
    time.sleep(1)
    cep = collection("cilium.io", "v2", "ciliumendpoints", True)
    api.ok("PATCH", cep + "/pod-2", {"status": {"state": "regenerating"}},
           content_type="application/merge-patch+json")
    api.ok("DELETE", cep + "/pod-3")
    api.ok("POST", cep, endpoint(9, 10001))
    api.ok("PATCH", "/apis/cilium.io/v2/ciliumnodes/node-2",
           {"spec": {"health": {"ipv4": "10.244.2.18"}}}, content_type="application/merge-patch+json")
    api.ok("DELETE", "/apis/cilium.io/v2/ciliumidentities/10003")
    api.ok("POST", "/apis/cilium.io/v2/ciliumidentities", identity(4))
    api.ok("PATCH", gadgets + "/gadget-4", {"spec": {"color": "red", "size": 40}},
           content_type="application/merge-patch+json")
    api.ok("PATCH", gadgets + "/gadget-4/status", {"status": {"ready": True}},
           content_type="application/merge-patch+json")
    api.ok("DELETE", gadgets + "/gadget-5")
    api.ok("POST", gadgets, gadget(9))
    for name, w in watched.items():
        write(out, name + ".events.json", w.finish())
        print("%-18s %3d events, %s" % (name, len(w.frames), w.end))


def lifecycle(api, out):
    """What a watch and a read see while the CRD changes under them."""
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.test.kubeplex.io"
    v1 = collection("test.kubeplex.io", "v1", "gadgets", True)
    v2 = collection("test.kubeplex.io", "v2", "gadgets", True)

    def settled(path):
        """A list's RV once the path answers one (right after a CRD changes, it may not)."""
        deadline = time.time() + 15
        while True:
            code, _, body = api.request("GET", path)
            if code == 200 or time.time() > deadline:
                return json.loads(body)["metadata"]["resourceVersion"]
            time.sleep(0.2)

    def during(name, path, change, seconds=20, after=None):
        rv = settled(path)
        w = Watch(api, path, "watch=true&allowWatchBookmarks=true&resourceVersion=%s" % rv,
                  seconds=seconds)
        w.start()
        w.opened.wait(5)
        time.sleep(1)
        change()
        # What reads get meanwhile, each different answer once, with when it came.
        changed, reads, seen = time.time(), [], set()
        while time.time() - changed < 5:
            code, _, body = api.request("GET", after or path)
            answer = (code, body if code != 200 else b"(a list)")
            if answer not in seen:
                seen.add(answer)
                reads.append("+%.2fs %d %s" % (time.time() - changed, code, answer[1].decode().strip()))
            time.sleep(0.1)
        write(out, "lifecycle.%s.reads" % name, "\n".join(reads) + "\n")
        write(out, "lifecycle.%s.watch.json" % name, w.finish())
        write(out, "lifecycle.%s.end" % name, w.end + "\n")
        print("lifecycle %-10s %d frames, %s" % (name, len(w.frames), w.end))
        code, _, body = api.request("GET", after or path)
        write(out, "lifecycle.%s.get.json" % name, body)
        write(out, "lifecycle.%s.get.code" % name, "%d\n" % code)

    def patch_versions(served_v2, storage_v2):
        doc = api.ok("GET", crd)
        for v in doc["spec"]["versions"]:
            if v["name"] == "v2":
                v["served"], v["storage"] = served_v2, storage_v2
            else:
                v["storage"] = not storage_v2
        api.ok("PUT", crd, doc)

    # The storage version moves to v2: a watch of v1 open meanwhile.
    during("storage", v1, lambda: patch_versions(True, True))
    # v2 is no longer served: a watch of v2 open meanwhile, and a read of v2 after.
    during("unserved", v2, lambda: patch_versions(False, True))
    # v2 is served again — a version added to what the CRD serves: a watch of v1 open meanwhile,
    # and a read of v2 after.
    during("added", v1, lambda: patch_versions(True, True), after=v2)
    # The CRD deleted: a watch of v1 open meanwhile (its objects' DELETED events), the read after.
    during("deleted", v1, lambda: api.ok("DELETE", crd), seconds=40)


def clean(api):
    for name in CRD_NAMES:
        api.request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
    api.request("DELETE", "/api/v1/namespaces/" + NS)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "realcluster", "custom"))
    p.add_argument("--max", type=int, default=20)
    p.add_argument("--lifecycle-only", action="store_true",
                   help="capture only lifecycle.* (the other fixtures stay as they are)")
    a = p.parse_args()
    api = Api()
    os.makedirs(a.out, exist_ok=True)
    clean(api)
    # What the last run left is gone first (a CRD being deleted cannot be applied again).
    left = ["/api/v1/namespaces/" + NS] + [
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + n for n in CRD_NAMES]
    deadline = time.time() + 120
    while any(api.request("GET", p)[0] != 404 for p in left) and time.time() < deadline:
        time.sleep(1)
    install(api)
    create(api)
    if not a.lifecycle_only:
        capture(api, a.out, a.max)
        changes(api, a.out)
    lifecycle(api, a.out)
    clean(api)


if __name__ == "__main__":
    main()
