#!/usr/bin/env python3
"""A CRD's lifecycle under kubeplex, against the real kube-apiserver 1.36 of
../shared/realcluster: what a client sees through kubeplex (caching the custom resource) beside
what it sees directly, while the CRD changes under open watches and a warm cache.

Phases, on the test CRD gadgets.test.kubeplex.io (scripts/realcluster/crds/gadgets.yaml):
  reads     lists and a get, as JSON, protobuf-first, and PartialObjectMetadata in JSON and in
            protobuf: the same bytes through kubeplex as directly
  storage   the storage version moves from v1 to v2 (the apiserver ends open watches, reads get
            429 "storage is (re)initializing" for a moment); then an object is created: it must
            reach the watch a client re-opened and a list through kubeplex
  deleted   the CRD is deleted (DELETED for every object, the watch ends, 404 after): through
            kubeplex no object may outlive it
  recreated the CRD created again with other objects: kubeplex lists those, never the old ones

For each phase it prints, directly and through kubeplex: the events an open watch got and how it
ended, and what a list gets afterwards. It exits 1 when kubeplex shows an object the apiserver
no longer has, or misses one it has.

    cargo build --release --bin kubeplex
    python3 scripts/realcluster/crd-lifecycle.py --kubeplex target/release/kubeplex
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("capture", os.path.join(HERE, "crd-capture.py"))
capture = importlib.util.module_from_spec(spec)
spec.loader.exec_module(capture)

NS = capture.NS
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.test.kubeplex.io"
V1 = "/apis/test.kubeplex.io/v1/namespaces/%s/gadgets" % NS
PROXY = "http://127.0.0.1:18001"


def proxy_get(path, accept="application/json"):
    req = urllib.request.Request(PROXY + path, headers={"Accept": accept,
                                                        "User-Agent": capture.USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except urllib.error.URLError as e:  # not listening yet
        return 0, str(e).encode()


class ProxyWatch(capture.Watch):
    """A watch through kubeplex (plain HTTP on loopback)."""

    def run(self):
        req = urllib.request.Request(PROXY + self.url, headers={
            "Accept": self.accept, "User-Agent": capture.USER_AGENT})
        start = time.time()
        try:
            with urllib.request.urlopen(req, timeout=self.seconds) as resp:
                self.opened.set()
                while True:
                    line = resp.readline()
                    if not line:
                        self.end = "ended after %.1f s" % (time.time() - start)
                        return
                    self.frames.append(line)
        except Exception as e:
            self.opened.set()
            if "timed out" not in str(e):
                self.end = "error: %s" % e


def names(body):
    try:
        return sorted(o["metadata"]["name"] for o in json.loads(body)["items"])
    except Exception:
        return None


def events(w):
    out = []
    for f in w.frames:
        try:
            e = json.loads(f)
            out.append("%s %s" % (e["type"], e["object"].get("metadata", {}).get("name", "")))
        except Exception:
            out.append(f[:60].decode(errors="replace"))
    return out


def settle(api, path, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        code, _, body = api.request("GET", path)
        if code == 200:
            return json.loads(body)["metadata"]["resourceVersion"]
        time.sleep(0.2)
    sys.exit("%s never answered" % path)


def phase(api, name, change, then=None, seconds=12):
    rv = settle(api, V1)
    query = "watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d" % (rv, seconds)
    direct = capture.Watch(api, V1, query, seconds=seconds + 5)
    proxied = ProxyWatch(api, V1, query, seconds=seconds + 5)
    for w in (direct, proxied):
        w.start()
        w.opened.wait(5)
    time.sleep(1)
    change()
    if then:
        then()
    direct.finish()
    proxied.finish()
    time.sleep(2)
    code_d, _, body_d = api.request("GET", V1)
    code_p, body_p = proxy_get(V1)
    print("== %s" % name)
    print("  watch directly:      %s; %s" % (", ".join(events(direct)) or "no events", direct.end))
    print("  watch via kubeplex:  %s; %s" % (", ".join(events(proxied)) or "no events", proxied.end))
    print("  list directly:       %d %s" % (code_d, names(body_d) if code_d == 200 else body_d[:80]))
    print("  list via kubeplex:   %d %s" % (code_p, names(body_p) if code_p == 200 else body_p[:80]))
    same = code_d == code_p and (code_d != 200 or names(body_d) == names(body_p))
    if not same:
        print("  DIFFERENT")
    return same


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeplex", default="target/release/kubeplex")
    a = p.parse_args()
    api = capture.Api()
    capture.clean(api)
    deadline = time.time() + 120
    left = ["/api/v1/namespaces/" + NS, CRD]
    while any(api.request("GET", x)[0] != 404 for x in left) and time.time() < deadline:
        time.sleep(1)
    api.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NS}})
    api.kubectl("apply", "--server-side", "-f", os.path.join(capture.CRDS, "gadgets.yaml"))
    api.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/gadgets.test.kubeplex.io")
    for n in range(4):
        api.ok("POST", V1, capture.gadget(n))
    kubeconfig = os.path.join(capture.HARNESS, "kubeconfig")
    proxy = subprocess.Popen(
        [a.kubeplex, "serve", "--kubeconfig", kubeconfig, "--listen", "127.0.0.1:18001",
         "--admin-listen", "127.0.0.1:19090", "--cache", "test.kubeplex.io/v1/gadgets"],
        stdout=subprocess.DEVNULL, stderr=open("/tmp/crd-lifecycle.kubeplex.log", "wb"))
    ok = True
    try:
        deadline = time.time() + 30
        while proxy_get(V1)[0] != 200:
            if time.time() > deadline or proxy.poll() is not None:
                sys.exit("kubeplex never answered")
            time.sleep(0.5)

        def patch_storage():
            doc = api.ok("GET", CRD)
            for v in doc["spec"]["versions"]:
                v["storage"] = v["name"] == "v2"
            api.ok("PUT", CRD, doc)

        def create_after():
            time.sleep(4)
            settle(api, V1)
            api.ok("POST", V1, capture.gadget(7))

        # Reads in every form a client asks custom resources for, from the warm cache.
        print("== reads (bytes directly and via kubeplex)")
        rv = settle(api, V1)
        time.sleep(1)
        for path in (V1 + "?resourceVersion=0", V1 + "?resourceVersion=%s" % rv,
                     V1 + "/gadget-1?resourceVersion=0"):
            one = "/gadget-" in path
            for accept in ("application/json",
                           "application/vnd.kubernetes.protobuf, application/json",
                           capture.META_ONE_JSON if one else capture.META_JSON,
                           (capture.PROTOBUF + ";as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
                           if one else capture.META_PB):
                code_d, _, body_d = api.request("GET", path, accept=accept)
                code_p, body_p = proxy_get(path, accept)
                same = code_d == code_p and body_d == body_p
                ok &= same
                print("  %-60s %-70s %d %d %s" % (path[len(V1) - 7:], accept, code_d, code_p,
                                                   "same bytes" if same else "DIFFERENT"))
        ok &= phase(api, "storage", patch_storage, create_after)
        ok &= phase(api, "deleted", lambda: api.ok("DELETE", CRD))

        def recreate():
            deadline = time.time() + 60
            while api.request("GET", CRD)[0] != 404 and time.time() < deadline:
                time.sleep(0.5)
            api.kubectl("apply", "--server-side", "-f", os.path.join(capture.CRDS, "gadgets.yaml"))
            api.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                        "crd/gadgets.test.kubeplex.io")
            time.sleep(2)
            for n in range(20, 23):
                api.ok("POST", V1, capture.gadget(n))
            time.sleep(3)

        # The watch of this phase opens on a CRD that is gone: both get its 404.
        code_d, _, _ = api.request("GET", V1)
        print("== recreated (the list before: directly %d, via kubeplex %d)" % (code_d, proxy_get(V1)[0]))
        recreate()
        code_d, _, body_d = api.request("GET", V1)
        code_p, body_p = proxy_get(V1)
        print("  list directly:       %d %s" % (code_d, names(body_d)))
        print("  list via kubeplex:   %d %s" % (code_p, names(body_p)))
        ok &= code_d == code_p and names(body_d) == names(body_p)
    finally:
        proxy.terminate()
        proxy.wait(30)
        capture.clean(api)
    print("ALL SAME" if ok else "DIFFERENT: see above")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
