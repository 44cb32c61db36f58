#!/usr/bin/env python3
"""Real node agents against a real kube-apiserver, directly and through kubeplex tiers.

Runs kubemark hollow nodes (the real Kubernetes 1.36 kubelet and kube-proxy code with a fake
container runtime) against the real control plane of /work/shared/realcluster ($HARNESS), in
one of three modes:

  direct  every agent talks to the apiserver (https://127.0.0.1:6443);
  node    one kubeplex per node (node mode, config/node.yaml) between that node's agents and
          the apiserver;
  pool    as node, with the node tiers' upstreams a pool tier (one kubeplex in node mode,
          deploy/base/pool/kubeplex.yaml) first and the apiserver as the fallback;
  all     the three, one after another, then a comparison table.

The scenario: clean state; the scheduler, the tiers, then per node a hollow kubelet and a
hollow kube-proxy; every node Ready (its not-ready taint removed); deployments totalling
--pods pods (each pod mounting a ConfigMap and a Secret of its deployment, besides the
projected token) and a Service each; a minute of churn (rolling restarts, scaling); settled.
Figures: from the kubelets' own logs (klog, round_trippers at V6), the delay from a pod
reaching its kubelet (SyncLoop ADD, source api) to the kubelet's first PATCH of its status,
and the 403s the kubelets got; from the apiserver's /metrics and /proc, its requests and CPU
over the run; each kubeplex's node-graph metrics. At the end every kubelet's /pods is compared
with the apiserver's pods of its node, everything the run started is stopped, and a one-line
JSON summary is printed. Logs and pid files are under --run-dir (default /tmp/agents-run).

Python 3 and the standard library only; openssl for the certificates.
"""

import argparse
import datetime
import glob
import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

HARNESS = os.environ.get("HARNESS") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kubeplex-realcluster")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
API = "https://127.0.0.1:6443"

# Labels and names of everything a run creates (and the next run deletes).
RUN_LABEL = "agents.kubeplex.io/run"
HOLLOW_LABEL = "agents.kubeplex.io/hollow"
NODE_PREFIX = "hollow-node-"
# Mode mixed: node i's agents go the way MIXED[i % 3].
MIXED = ("direct", "node", "pool")
# The workload's namespace is new in every run ("agents-MODE-HHMMSS"): the apiserver's
# NamespaceLifecycle admission looks a namespace deleted a moment ago up live on every write in
# a namespace of that name (hundreds of GETs), which reusing one name would add to a run.
NAMESPACE_PREFIX = "agents-"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
# The harness's copies of kubeplex's RBAC (deploy/) are prefixed so that they can never collide
# with a real deployment's.
RBAC_PREFIX = "agents-harness:"
# The node tiers' identity: a ServiceAccount, each node tier with a token bound to a pod on its
# node (what a DaemonSet pod's projected token is), acting as its node alone (deploy/base/node).
NODE_TIER_ACCOUNT = "agents-harness-kubeplex-node"
POOL_USER = "agents-harness-kubeplex-pool"        # the pool's identity at the apiserver

# Loopback ports (the hollow kubelet binds its port on 0.0.0.0: kubemark hard-codes that).
KUBELET_PORT_BASE = 11250
KUBEPLEX_PORT_BASE = 17000
KUBEPLEX_ADMIN_BASE = 17500
POOL_PORT = 16900
POOL_ADMIN = 16901

T_START = time.time()


def log(msg):
    print("[%7.1fs] %s" % (time.time() - T_START, msg), file=sys.stderr, flush=True)


class Failure(Exception):
    pass


# ----------------------------------------------------------------------------- HTTP client

class Api:
    """A small Kubernetes REST client (JSON), one persistent connection per thread."""

    def __init__(self, base, ca=None, token=None, cert=None, key=None, verify=True, timeout=30,
                 ride_out=0):
        # ride_out: for this many seconds, a request the server does not answer (refused,
        # reset) or answers 429/5xx is sent again — an apiserver restarted under a soak.
        self.ride_out = ride_out
        u = urllib.parse.urlparse(base)
        self.scheme, self.host = u.scheme, u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.token, self.timeout = token, timeout
        self.ctx = None
        if self.scheme == "https":
            if verify:
                self.ctx = ssl.create_default_context(cafile=ca)
            else:
                self.ctx = ssl._create_unverified_context()  # a hollow kubelet's self-signed port
            if cert:
                self.ctx.load_cert_chain(cert, key)
        self.local = threading.local()

    def connect(self, timeout=None):
        t = timeout or self.timeout
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=t)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def headers(self, extra=None):
        h = {"Accept": "application/json", "User-Agent": "agents-harness"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, ctype="application/json", timeout=None):
        data = None
        extra = {}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            extra["Content-Type"] = ctype
        deadline = time.time() + self.ride_out
        attempt = 0
        while True:
            conn = getattr(self.local, "conn", None)
            if conn is None or timeout:
                conn = self.connect(timeout)
                if not timeout:
                    self.local.conn = conn
            try:
                conn.request(method, path, body=data, headers=self.headers(extra))
                r = conn.getresponse()
                payload = r.read()
                if timeout:
                    conn.close()
                if r.status in (429, 500, 502, 503, 504) and time.time() < deadline:
                    time.sleep(1.0)
                    continue
                return r.status, payload
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                attempt += 1
                if attempt >= 3 and time.time() >= deadline:
                    raise
                time.sleep(min(1.0, 0.2 * attempt))

    def json(self, method, path, body=None, ctype="application/json", ok=(200, 201, 202),
             timeout=None):
        st, payload = self.request(method, path, body, ctype, timeout)
        if st not in ok:
            raise Failure("%s %s: %d %s" % (method, path, st, payload[:300].decode("utf-8", "replace")))
        return json.loads(payload) if payload else None

    def get(self, path, **kw):
        return self.json("GET", path, **kw)

    def create(self, path, obj):
        """POST, an existing object being fine."""
        st, payload = self.request("POST", path, obj)
        if st not in (200, 201, 202, 409):
            raise Failure("POST %s: %d %s" % (path, st, payload[:300].decode("utf-8", "replace")))
        return st

    def apply(self, path, obj):
        """Server-side apply."""
        return self.json("PATCH", path + "?fieldManager=agents-harness&force=true", obj,
                         ctype="application/apply-patch+yaml")

    def patch(self, path, body, kind="merge"):
        ctype = {"merge": "application/merge-patch+json",
                 "strategic": "application/strategic-merge-patch+json",
                 "json": "application/json-patch+json"}[kind]
        return self.json("PATCH", path, body, ctype=ctype)

    def delete(self, path, body=None):
        st, payload = self.request("DELETE", path, body)
        if st not in (200, 202, 404):
            raise Failure("DELETE %s: %d %s" % (path, st, payload[:300].decode("utf-8", "replace")))
        return st


# ----------------------------------------------------------------------------- informers

class Shared:
    """One lock and condition for every informer: a predicate over several of them is waited
    for with wait_until, which returns the wall time of the event that made it true."""

    def __init__(self):
        self.cond = threading.Condition()
        self.last_event = time.time()

    def wait_until(self, pred, timeout, tick=None):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                if pred():
                    return self.last_event
                left = deadline - time.time()
                if left <= 0:
                    return None
                if tick:
                    self.cond.release()
                    try:
                        tick()
                    finally:
                        self.cond.acquire()
                    if pred():
                        return self.last_event
                self.cond.wait(min(left, 0.5))


class Gone(Exception):
    pass


class Informer(threading.Thread):
    """List+watch of one collection into a dict keyed by namespace/name (JSON)."""

    def __init__(self, api, path, shared, selector="", hook=None):
        super().__init__(daemon=True)
        self.api, self.path, self.shared = api, path, shared
        # Called with (object, wall time of its arrival), the lock held, for each object listed
        # or changed: what a figure needs the exact time of.
        self.hook = hook
        self.query = ("labelSelector=" + urllib.parse.quote(selector)) if selector else ""
        self.objs = {}
        self.synced = False
        self.stopping = False
        self.conn = None
        self.errors = 0

    @staticmethod
    def key(o):
        m = o["metadata"]
        return "%s/%s" % (m.get("namespace", ""), m["name"])

    def run(self):
        while not self.stopping:
            try:
                lst = self.api.get("%s?%s" % (self.path, self.query))
                rv = lst["metadata"]["resourceVersion"]
                with self.shared.cond:
                    self.objs = {self.key(o): o for o in lst.get("items") or []}
                    self.synced = True
                    self.shared.last_event = time.time()
                    if self.hook:
                        for o in self.objs.values():
                            self.hook(o, self.shared.last_event)
                    self.shared.cond.notify_all()
                while not self.stopping:
                    rv = self.watch(rv)
            except Gone:
                continue
            except Exception as e:  # noqa: BLE001 — keep informing; counted and retried
                if self.stopping:
                    break
                self.errors += 1
                if self.errors < 5:
                    log("informer %s: %s (retrying)" % (self.path, e))
                time.sleep(1)

    def watch(self, rv):
        conn = self.api.connect(timeout=90)
        self.conn = conn
        try:
            q = "%s&watch=1&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=60" % (
                self.query, rv)
            conn.request("GET", "%s?%s" % (self.path, q), headers=self.api.headers())
            r = conn.getresponse()
            if r.status == 410:
                raise Gone()
            if r.status != 200:
                raise Failure("watch %s: %d" % (self.path, r.status))
            while not self.stopping:
                line = r.readline()
                if not line:
                    break
                ev = json.loads(line)
                typ, o = ev.get("type"), ev.get("object") or {}
                if typ == "ERROR":
                    if o.get("code") == 410:
                        raise Gone()
                    raise Failure("watch %s: %s" % (self.path, o.get("message")))
                rv = o["metadata"]["resourceVersion"]
                if typ == "BOOKMARK":
                    continue
                with self.shared.cond:
                    k = self.key(o)
                    if typ == "DELETED":
                        self.objs.pop(k, None)
                    else:
                        self.objs[k] = o
                    self.shared.last_event = time.time()
                    if self.hook and typ != "DELETED":
                        self.hook(o, self.shared.last_event)
                    self.shared.cond.notify_all()
            return rv
        finally:
            conn.close()

    def stop(self):
        self.stopping = True
        c = self.conn
        try:
            if c is not None and c.sock is not None:
                c.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def items(self):
        return list(self.objs.values())


# ----------------------------------------------------------------------------- processes

def proc_starttime(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def proc_cpu_seconds(pid):
    """utime + stime of a process, in seconds (None if gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def proc_rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class Procs:
    """The processes a run starts. Each has a pid file (pid and start time) under
    RUN_DIR/pids, so that a later run stops exactly those (never by name)."""

    def __init__(self, run_dir):
        self.piddir = os.path.join(run_dir, "pids")
        os.makedirs(self.piddir, exist_ok=True)
        self.procs = {}  # name -> (Popen, log path)

    def start(self, name, argv, logpath, env=None):
        logf = open(logpath, "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True, env=env)
        logf.close()
        with open(os.path.join(self.piddir, name + ".pid"), "w") as f:
            f.write("%d %s\n" % (p.pid, proc_starttime(p.pid) or "?"))
        self.procs[name] = (p, logpath)
        return p

    def check_alive(self, names=None):
        dead = []
        for name, (p, logpath) in self.procs.items():
            if names is not None and name not in names:
                continue
            if p.poll() is not None:
                dead.append("%s (exit %s, log %s)" % (name, p.returncode, logpath))
        if dead:
            raise Failure("exited: " + "; ".join(dead))

    def cpu(self, prefix):
        total = 0.0
        for name, (p, _) in self.procs.items():
            if name.startswith(prefix):
                total += proc_cpu_seconds(p.pid) or 0.0
        return total

    def rss(self, prefix):
        total = 0.0
        for name, (p, _) in self.procs.items():
            if name.startswith(prefix):
                total += proc_rss_mib(p.pid) or 0.0
        return total

    def stop(self, names=None, grace=15):
        """SIGTERM, then SIGKILL after `grace` seconds."""
        if names is None:  # everything: the agents, then the node tiers, the pool, the rest
            order = ("kubelet-", "kube-proxy-", "kubeplex-hollow", "kubeplex-", "")
            for prefix in order:
                self.stop([n for n in self.procs if n.startswith(prefix)], grace)
            return
        chosen = [(n, p) for n, (p, _) in self.procs.items() if n in names]
        for _, p in chosen:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + grace
        for _, p in chosen:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for n, _ in chosen:
            try:
                os.unlink(os.path.join(self.piddir, n + ".pid"))
            except FileNotFoundError:
                pass
            self.procs.pop(n, None)


def kill_leftovers(run_root):
    """Stops the processes of earlier runs, by the pid files they left (pid and start time
    must both match, so a reused pid is never hit)."""
    piddir = os.path.join(run_root, "pids")
    victims = []
    for f in sorted(glob.glob(os.path.join(piddir, "*.pid"))):
        try:
            pid_s, start = open(f).read().split()
            pid = int(pid_s)
        except (OSError, ValueError):
            os.unlink(f)
            continue
        if proc_starttime(pid) == start:
            victims.append(pid)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os.unlink(f)
    deadline = time.time() + 15
    for pid in victims:
        while time.time() < deadline and proc_starttime(pid) is not None:
            time.sleep(0.2)
        if proc_starttime(pid) is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if victims:
        log("stopped %d leftover processes of an earlier run" % len(victims))


def clean_hollow_files(dirs_named):
    """Removes the hollow kubelets' root dirs named in this run's logs, every other
    /tmp/hollow-kubelet.* when no kubemark runs on the machine at all, and fake-runtime
    sockets nobody listens on."""
    kubemark_running = False
    for cmd in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmd, "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0.endswith(b"kubemark"):
            kubemark_running = True
            break
    dirs = set(d for d in dirs_named if d.startswith("/tmp/hollow-kubelet."))
    if not kubemark_running:
        dirs |= set(glob.glob("/tmp/hollow-kubelet.*"))
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    listening = set()
    try:
        with open("/proc/net/unix") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 8:
                    listening.add(parts[7])
    except OSError:
        pass
    n = 0
    for s in glob.glob("/tmp/kubelet_remote_*.sock"):
        if s not in listening:
            try:
                os.unlink(s)
                n += 1
            except OSError:
                pass
    return len(dirs), n


def port_free(port, host="127.0.0.1"):
    for h in (host, "0.0.0.0"):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((h, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


# ----------------------------------------------------------------------------- PKI

class Pki:
    """Certificates signed by the cluster CA ($HARNESS/pki/ca.key), in one directory."""

    def __init__(self, d):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.ca = os.path.join(HARNESS, "pki", "ca.crt")
        self.ca_key = os.path.join(HARNESS, "pki", "ca.key")

    def _valid(self, crt):
        if not os.path.exists(crt):
            return False
        r = subprocess.run(["openssl", "verify", "-CAfile", self.ca, crt],
                           capture_output=True, timeout=30)
        return r.returncode == 0

    def sign(self, name, cn, orgs=(), server=False):
        """Returns (crt, key); reuses a certificate this CA signed before."""
        crt, key = os.path.join(self.dir, name + ".crt"), os.path.join(self.dir, name + ".key")
        if self._valid(crt) and os.path.exists(key):
            return crt, key
        subj = "".join("/O=" + o for o in orgs) + "/CN=" + cn
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
            if server:
                f.write("extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
            else:
                f.write("extendedKeyUsage=clientAuth\n")
        csr = os.path.join(self.dir, name + ".csr")
        run = lambda *a: subprocess.run(a, check=True, capture_output=True, timeout=60)  # noqa: E731
        run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
        os.chmod(key, 0o600)
        run("openssl", "req", "-new", "-key", key, "-subj", subj, "-out", csr)
        run("openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "30", "-sha256",
            "-extfile", ext, "-out", crt)
        os.unlink(csr)
        return crt, key

    def token_kubeconfig(self, name, server, token):
        path = os.path.join(self.dir, name + ".kubeconfig")
        with open(path, "w") as f:
            f.write("""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: u
  user:
    token: %s
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
""" % (server, self.ca, token))
        os.chmod(path, 0o600)
        return path

    def kubeconfig(self, name, server, crt, key):
        path = os.path.join(self.dir, name + ".kubeconfig")
        with open(path, "w") as f:
            f.write("""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: u
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
""" % (server, self.ca, crt, key))
        return path


# ----------------------------------------------------------------------------- metrics

METRIC_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text, prefixes):
    """[(name, {labels}, value)] of the samples whose name starts with one of `prefixes`."""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#" or not line.startswith(prefixes):
            continue
        m = METRIC_RE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), dict(LABEL_RE.findall(m.group(3) or "")), v))
    return out


def apiserver_snapshot(admin):
    st, body = admin.request("GET", "/metrics", timeout=60)
    if st != 200:
        raise Failure("apiserver /metrics: %d" % st)
    samples = parse_metrics(body.decode("utf-8", "replace"),
                            ("apiserver_request_total", "apiserver_watch_events_total",
                             "apiserver_watch_events_sizes_sum", "apiserver_longrunning_requests"))
    snap = {"requests": {}, "watch_events": 0.0, "watch_bytes": 0.0}
    for name, labels, v in samples:
        if name == "apiserver_request_total":
            k = (labels.get("verb", ""), labels.get("code", ""), labels.get("resource", ""),
                 labels.get("subresource", ""), labels.get("system_client", ""))
            snap["requests"][k] = snap["requests"].get(k, 0.0) + v
        elif name == "apiserver_watch_events_total":
            snap["watch_events"] += v
        elif name == "apiserver_watch_events_sizes_sum":
            snap["watch_bytes"] += v
    pid = read_pid(os.path.join(HARNESS, "run", "kube-apiserver.pid"))
    snap["cpu"] = proc_cpu_seconds(pid) if pid else None
    epid = read_pid(os.path.join(HARNESS, "run", "etcd.pid"))
    snap["etcd_cpu"] = proc_cpu_seconds(epid) if epid else None
    # The machine's CPU, to tell what else ran meanwhile: busy seconds of all CPUs, those of
    # the rest of the control plane, and those of this harness and every process it started
    # (its children are all waited for by the second snapshot).
    snap["host_busy"] = host_busy_seconds()
    snap["control_plane_other"] = sum(
        proc_cpu_seconds(p) or 0.0 for p in
        (read_pid(os.path.join(HARNESS, "run", n + ".pid")) for n in ("kube-controller-manager", "reaper"))
        if p)
    import resource
    ru_s, ru_c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    snap["harness"] = ru_s.ru_utime + ru_s.ru_stime + ru_c.ru_utime + ru_c.ru_stime
    return snap


def host_busy_seconds():
    """Busy CPU seconds of the machine since boot (all CPUs: user, nice, system, irq, softirq,
    steal), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def git_head():
    """The repository's commit, and whether its tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=20).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=20).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def binary_identity(path):
    """Which kubeplex ran: its build time and a hash prefix (the binary may predate HEAD)."""
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"path": path, "sha256": h.hexdigest()[:16],
            "built": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(os.path.getmtime(path)))}


def read_pid(path):
    try:
        return int(open(path).read().strip())
    except (OSError, ValueError):
        return None


def control_plane_cpu():
    return sum(proc_cpu_seconds(p) or 0.0 for p in
               (read_pid(os.path.join(HARNESS, "run", n + ".pid"))
                for n in ("kube-apiserver", "etcd", "kube-controller-manager", "reaper")) if p)


def wait_quiet(timeout, window=5.0, max_cores=0.2):
    """Waits (at most `timeout` seconds) until the processes outside the control plane use
    less than `max_cores` CPUs over `window` seconds: a build or a test suite running beside a
    run slows every figure of it. Returns the last measurement (cores)."""
    deadline = time.time() + timeout
    other = None
    while True:
        h0, c0 = host_busy_seconds(), control_plane_cpu()
        time.sleep(window)
        h1, c1 = host_busy_seconds(), control_plane_cpu()
        if h0 is None or h1 is None:
            return None
        other = ((h1 - h0) - (c1 - c0)) / window
        if other < max_cores or time.time() >= deadline:
            return round(other, 2)
        log("machine busy (%.2f CPUs outside the control plane); waiting for it to be quiet" % other)
        time.sleep(25)


def apiserver_delta(before, after):
    """What the apiserver served between two snapshots: all clients, and the clients it does
    not recognise as a system component (its `system_client` label is empty: the node agents,
    kubeplex, this harness and the reaper; not the controller manager, the scheduler or the
    apiserver itself). Authorization refusals (the Node authorizer's 403s) are not counted in
    apiserver_request_total at all: the kubelets' logs count those."""
    d = {}
    for k, v in after["requests"].items():
        dv = v - before["requests"].get(k, 0.0)
        if dv:
            d[k] = dv

    def totals(keep):
        tot = lambda pred: int(round(sum(v for k, v in d.items() if keep(k) and pred(k))))  # noqa: E731
        return {
            "total": tot(lambda k: True),
            "list_watch": tot(lambda k: k[0] in ("LIST", "WATCH")),
            "list": tot(lambda k: k[0] == "LIST"),
            "watch": tot(lambda k: k[0] == "WATCH"),
            "get": tot(lambda k: k[0] == "GET"),
            "code_403": tot(lambda k: k[1] == "403"),
            "writes": tot(lambda k: k[0] in ("POST", "PUT", "PATCH", "DELETE", "APPLY")),
        }

    by_resource, system = {}, {}
    for (verb, code, res, sub, sc), v in d.items():
        if verb in ("LIST", "WATCH", "GET"):
            key = "%s %s%s" % (verb, res, "/" + sub if sub else "")
            if sc == "":
                by_resource[key] = by_resource.get(key, 0) + int(round(v))
            else:
                key = "%s: %s" % (sc, key)
                system[key] = system.get(key, 0) + int(round(v))
    delta = lambda k: (None if before[k] is None or after[k] is None  # noqa: E731
                       else round(after[k] - before[k], 1))
    out = totals(lambda k: True)
    out.update({
        "nonsystem": totals(lambda k: k[4] == ""),
        "watch_events": int(round(after["watch_events"] - before["watch_events"])),
        "watch_bytes": int(round(after["watch_bytes"] - before["watch_bytes"])),
        "cpu_s": delta("cpu"),
        "etcd_cpu_s": delta("etcd_cpu"),
        "host_busy_s": delta("host_busy"),
        # What ran besides the control plane and this run (another build or test suite makes
        # every latency of the run worse): compare runs only when this is small.
        "host_other_s": None if delta("host_busy") is None else round(
            delta("host_busy") - (delta("cpu") or 0) - (delta("etcd_cpu") or 0)
            - delta("control_plane_other") - delta("harness"), 1),
        "nonsystem_reads": dict(sorted(by_resource.items(), key=lambda kv: -kv[1])[:14]),
        "system_reads": dict(sorted(system.items(), key=lambda kv: -kv[1])[:6]),
    })
    return out


def kubeplex_metrics(admin_ports):
    """Sums over every kubeplex of the node-graph metrics (whatever this binary has), the
    requests by source, and the review decisions."""
    graph, sources, decisions, scraped = {}, {}, {}, 0
    proofs, waits, calls = {}, {}, {}
    for port in admin_ports:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/metrics")
            r = conn.getresponse()
            text = r.read().decode("utf-8", "replace")
            conn.close()
        except OSError as e:
            log("kubeplex admin :%d /metrics: %s" % (port, e))
            continue
        scraped += 1
        for name, labels, v in parse_metrics(text, ("kubeplex_auth_node_graph_",
                                                    "kubeplex_requests_total",
                                                    "kubeplex_auth_decisions_total",
                                                    "kubeplex_freshness_proofs_total",
                                                    "kubeplex_freshness_wait_seconds_sum",
                                                    "kubeplex_freshness_wait_seconds_count",
                                                    "kubeplex_upstream_calls_total")):
            if name == "kubeplex_freshness_proofs_total":
                k = "%s %s %s" % (labels.get("resource"), labels.get("read"), labels.get("proof"))
                proofs[k] = proofs.get(k, 0.0) + v
            elif name.startswith("kubeplex_freshness_wait_seconds"):
                k = "%s %s" % (labels.get("resource"), labels.get("read"))
                w = waits.setdefault(k, [0.0, 0.0])
                w[0 if name.endswith("_sum") else 1] += v
            elif name == "kubeplex_upstream_calls_total":
                calls[labels.get("verb", "?")] = calls.get(labels.get("verb", "?"), 0.0) + v
            elif name.startswith("kubeplex_auth_node_graph_"):
                k = name + ("{%s}" % ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
                            if labels else "")
                graph[k] = graph.get(k, 0.0) + v
            elif name == "kubeplex_requests_total":
                s = labels.get("source", "?")
                sources[s] = sources.get(s, 0.0) + v
            else:
                k = "%s/%s/%s" % (labels.get("kind"), labels.get("result"), labels.get("source"))
                decisions[k] = decisions.get(k, 0.0) + v
    return {"scraped": scraped, "graph": graph,
            "requests_by_source": {k: int(v) for k, v in sorted(sources.items())},
            "auth_decisions": {k: int(v) for k, v in sorted(decisions.items())},
            "freshness_proofs": {k: int(v) for k, v in sorted(proofs.items()) if v},
            # resource read -> [seconds waited in all, reads]
            "freshness_waits": {k: [round(v[0], 2), int(v[1])] for k, v in sorted(waits.items()) if v[1]},
            "upstream_calls": {k: int(v) for k, v in sorted(calls.items())}}


# ----------------------------------------------------------------------------- kubelet logs

KLOG_RE = re.compile(r'^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s+\d+\s+([^\]]*)\] (.*)$')
ADD_RE = re.compile(r'"SyncLoop ADD" source="api" pods=\[([^\]]*)\]')
RESP_RE = re.compile(r'"Response" verb="(\w+)" url="([^"]*)" status="([^"]*)"(?: milliseconds=(\d+))?')
STATUS_URL_RE = re.compile(r'/api/v1/namespaces/([^/]+)/pods/([^/?]+)/status')
POD_URL_RE = re.compile(r'/api/v1/namespaces/([^/]+)/pods/([^/?]+)')


# The soak's samples of each kubeplex (issue 47): (column, metric, label filter, unit).
SAMPLED = [
    ("rss_mib", "process_resident_memory_bytes", None, 1 << 20),
    # The anonymous part: without the binary's pages, touched as code paths first run.
    ("rss_anon_mib", "kubeplex_process_resident_anonymous_bytes", None, 1 << 20),
    ("heap_in_use_mib", "kubeplex_allocator_heap_bytes", ("state", "in_use"), 1 << 20),
    # What the heap holds that can grow with time: the watch history (at least 100 events per
    # cache, however old: a quiet cache's fills over hours) and the objects' bytes.
    ("watch_history_mib", "kubeplex_watch_history_bytes", None, 1 << 20),
    ("cache_mib", "kubeplex_cache_bytes", None, 1 << 20),
    ("tasks", "kubeplex_runtime_alive_tasks", None, 1),
    ("client_connections", "kubeplex_client_connections", None, 1),
    ("open_fds", "process_open_fds", None, 1),
    ("watchers", "kubeplex_watchers", None, 1),
    ("review_cache_entries", "kubeplex_auth_cache_entries", None, 1),
]
# Their trend is judged after this many seconds (caches and arenas grow to their size first).
SOAK_WARM_UP = 600


def least_squares(points):
    """(mean of y, slope of y over x) of [(x, y)]; None for fewer than 3 points."""
    if len(points) < 3:
        return None
    n = float(len(points))
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    return my, sum((x - mx) * (y - my) for x, y in points) / sxx


class Sampler(threading.Thread):
    """Every `every` seconds, each kubeplex's memory, CPU and counts (its /metrics) as a row of
    `path` (a CSV that scripts/realcluster/svgplot.py renders: columns `series:kubeplex`)."""

    def __init__(self, path, ports, every=10.0, markers_from=None):
        super().__init__(daemon=True)
        self.path, self.ports, self.every = path, ports, every
        # A file another process appends "UNIX-SECONDS label" lines to (agents-soak.sh's
        # disruptions): each becomes a marker at its time.
        self.markers_from, self.markers_read = markers_from, 0
        self.names = {p: ("pool" if p == POOL_ADMIN else "node-tier-%d" % (p - KUBEPLEX_ADMIN_BASE))
                      for p in ports}
        self.columns = ["%s:%s" % (c, self.names[p]) for c, *_ in SAMPLED for p in ports]
        self.columns += ["cpu_cores:%s" % self.names[p] for p in ports]
        self.rows, self.markers = [], []
        self.stopping = threading.Event()
        self.t0 = time.time()

    def mark(self, label):
        self.markers.append((time.time() - self.t0, label))

    def read_markers(self):
        if not self.markers_from:
            return
        try:
            with open(self.markers_from) as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines[self.markers_read:]:
            at, _, label = line.partition(" ")
            try:
                self.markers.append((float(at) - self.t0, label.replace(",", ";")))
            except ValueError:
                pass
        self.markers_read = len(lines)

    def scrape(self, port):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode("utf-8", "replace")
            conn.close()
            return parse_metrics(text, ("process_", "kubeplex_"))
        except OSError:
            return None

    def run(self):
        last_cpu, last_t = {}, time.time()
        with open(self.path, "w") as f:
            f.write(",".join(["t"] + self.columns) + "\n")
            written = 0
            while not self.stopping.wait(self.every):
                now = time.time()
                dt = max(0.001, now - last_t)
                last_t = now
                scraped = {p: self.scrape(p) for p in self.ports}
                row = []
                for _, metric, label, unit in SAMPLED:
                    for p in self.ports:
                        samples = scraped[p]
                        if samples is None:
                            row.append(None)
                            continue
                        row.append(sum(v for n, l, v in samples if n == metric and
                                       (label is None or l.get(label[0]) == label[1])) / unit)
                for p in self.ports:
                    cpu = [v for n, _, v in scraped[p] or [] if n == "process_cpu_seconds_total"]
                    before = last_cpu.get(p)
                    row.append((cpu[0] - before) / dt if cpu and before is not None and cpu[0] >= before else None)
                    last_cpu[p] = cpu[0] if cpu else None
                t = now - self.t0
                self.rows.append((t, row))
                self.read_markers()
                for at, label in self.markers[written:]:
                    f.write("#marker,%.1f,%s\n" % (at, label))
                written = len(self.markers)
                f.write("%.1f,%s\n" % (t, ",".join("" if v is None else "%.3f" % v for v in row)))
                f.flush()

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)

    def slopes(self):
        """Each memory and count series' least-squares slope after the warm-up, per hour and
        in % of its mean per hour."""
        out = []
        for i, col in enumerate(self.columns):
            if col.startswith("cpu_cores:"):
                continue
            pts = [(t / 3600.0, r[i]) for t, r in self.rows if t >= SOAK_WARM_UP and r[i] is not None]
            fit = least_squares(pts)
            if fit is None:
                continue
            mean, per_hour = fit
            out.append({"series": col, "mean": round(mean, 2), "per_hour": round(per_hour, 3),
                        "percent_per_hour": round(per_hour / mean * 100, 2) if mean else 0.0})
        return out


def klog_time(m, year):
    mon, day, hh, mm, ss, us = (int(m.group(i)) for i in range(2, 8))
    return datetime.datetime(year, mon, day, hh, mm, ss, us).timestamp()


def request_kind(verb, url):
    """(verb, resource) as the apiserver would name them: get/list/watch/patch/...."""
    u = urllib.parse.urlparse(url)
    q = urllib.parse.parse_qs(u.query)
    segs = [s for s in u.path.split("/") if s]
    if segs[:1] == ["api"]:
        rest = segs[2:]
    elif segs[:1] == ["apis"]:
        rest = segs[3:]
    else:
        return verb.lower(), u.path
    name = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    if not rest:
        return verb.lower(), "namespaces"
    resource = rest[0]
    if len(rest) >= 2:
        name = rest[1]
    if len(rest) >= 3:
        resource += "/" + rest[2]
    v = verb.lower()
    if v == "get":
        if q.get("watch", [""])[0] in ("true", "1"):
            v = "watch"
        elif name is None:
            v = "list"
    return v, resource


def parse_agent_log(path, year, namespace):
    """From a hollow kubelet's (or kube-proxy's) log: each pod's first SyncLoop ADD and first
    status PATCH (time, status), the non-2xx answers by (verb, resource, code), the requests,
    and the kubelet's root dir."""
    adds, patches = {}, {}
    errors, requests = {}, 0
    deleted, after_delete = set(), {}
    latency = {}  # kind -> [(time, milliseconds)]
    root = None
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            m = KLOG_RE.match(line)
            if not m:
                continue
            msg = m.group(9)
            if msg.startswith('"Response"'):
                r = RESP_RE.match(msg)
                if not r:
                    continue
                requests += 1
                verb, url, status = r.group(1), r.group(2), r.group(3)
                code = status.split(" ", 1)[0] if status else "none"
                if r.group(4) is not None and code.startswith("2"):
                    v, res = request_kind(verb, url)
                    latency.setdefault("%s %s" % (v, res), []).append(
                        (klog_time(m, year), int(r.group(4))))
                if not code.startswith("2"):
                    k = request_kind(verb, url) + (code,)
                    errors[k] = errors.get(k, 0) + 1
                    # A pod the kubelet was told is deleted (the harness's reaper deletes pods
                    # at once, while the kubelet still syncs them): not a refusal on the way up.
                    s = POD_URL_RE.search(url)
                    if code == "403" and s and "%s/%s" % (s.group(1), s.group(2)) in deleted:
                        after_delete[k] = after_delete.get(k, 0) + 1
                if verb == "PATCH":
                    s = STATUS_URL_RE.search(url)
                    if s and s.group(1) == namespace:
                        pod = "%s/%s" % (s.group(1), s.group(2))
                        if pod not in patches:
                            patches[pod] = (klog_time(m, year), code)
            elif msg.startswith('"SyncLoop ADD"'):
                a = ADD_RE.match(msg)
                if not a:
                    continue
                t = klog_time(m, year)
                for pod in re.findall(r'"([^"]+)"', a.group(1)):
                    if pod.startswith(namespace + "/") and pod not in adds:
                        adds[pod] = t
            elif msg.startswith(('"SyncLoop DELETE"', '"SyncLoop REMOVE"')):
                a = re.search(r'pods=\[([^\]]*)\]', msg)
                if a:
                    deleted.update(re.findall(r'"([^"]+)"', a.group(1)))
            elif root is None and "as root dir for hollow-kubelet" in msg:
                g = re.search(r'(/tmp/hollow-kubelet\.\S+)', msg)
                if g:
                    root = g.group(1).rstrip('"')
    return {"adds": adds, "patches": patches, "errors": errors, "requests": requests, "root": root,
            "after_delete": after_delete, "latency": latency}


def quantiles(xs):
    if not xs:
        return {"n": 0, "median": None, "p90": None, "max": None}
    s = sorted(xs)
    pick = lambda q: s[max(0, math.ceil(q * len(s)) - 1)]  # noqa: E731 — nearest rank
    return {"n": len(s), "median": round(pick(0.5), 3), "p90": round(pick(0.9), 3),
            "max": round(s[-1], 3)}


# ----------------------------------------------------------------------------- the run

class Run:
    def __init__(self, args, mode):
        self.args, self.mode = args, mode
        self.n = args.nodes
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = args.run_dir
        self.dir = os.path.join(self.root, "%s-%s" % (mode, stamp))
        self.ns = "%s%s-%s" % (NAMESPACE_PREFIX, mode, stamp.split("-")[1])
        self.logs = os.path.join(self.dir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.pki = Pki(os.path.join(self.root, "pki"))
        self.procs = Procs(self.root)
        token = open(os.path.join(HARNESS, "pki", "admin.token")).read().strip()
        self.admin = Api(API, ca=self.pki.ca, token=token, timeout=60,
                         ride_out=180 if args.samples else 0)
        self.shared = Shared()
        self.informers = {}
        self.nodes = [NODE_PREFIX + str(i) for i in range(self.n)]
        # How each node's agents reach the apiserver: all alike, or in mode mixed one node in
        # three each way, so that the three are compared in one run (one machine state).
        self.node_mode = {node: (MIXED[i % len(MIXED)] if mode == "mixed" else mode)
                          for i, node in enumerate(self.nodes)}
        self.kubeplex_admin_ports = []
        self.sampler = None
        self.generations = {}   # deployment -> the generation of its last patch
        self.rollout = (0.0, 0.0)
        self.last_action = time.time()
        self.result = {"mode": mode, "nodes": self.n, "pods": args.pods, "run_dir": self.dir,
                       "namespace": self.ns}

    # -- 1. clean state --------------------------------------------------------------------

    def control_plane_up(self):
        r = subprocess.run([os.path.join(HARNESS, "up.sh")], capture_output=True, text=True,
                           timeout=400)
        if r.returncode != 0:
            raise Failure("up.sh failed: %s" % r.stderr[-2000:])

    def clean(self):
        kill_leftovers(self.root)
        a = self.admin
        # Namespaces (their pods are force-deleted by the harness's reaper), then nodes, leases.
        nss = a.get("/api/v1/namespaces?labelSelector=" + urllib.parse.quote(RUN_LABEL))["items"]
        for ns in nss:
            a.delete("/api/v1/namespaces/" + ns["metadata"]["name"])
        # The node tiers' pods (their tokens are bound to them).
        for p in a.get("/api/v1/namespaces/kube-system/pods?labelSelector="
                       + urllib.parse.quote(RUN_LABEL))["items"]:
            a.delete("/api/v1/namespaces/kube-system/pods/" + p["metadata"]["name"])
        nodes = a.get("/api/v1/nodes?labelSelector=" + urllib.parse.quote(HOLLOW_LABEL))["items"]
        names = set(n["metadata"]["name"] for n in nodes) | set(self.nodes)
        for n in nodes:
            a.delete("/api/v1/nodes/" + n["metadata"]["name"])
        for lease in a.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]:
            if lease["metadata"]["name"] in names:
                a.delete("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
                         + lease["metadata"]["name"])
        deadline = time.time() + self.args.cleanup_timeout
        while time.time() < deadline:
            left = a.get("/api/v1/namespaces?labelSelector=" + urllib.parse.quote(RUN_LABEL))["items"]
            pods = [p for p in a.get("/api/v1/pods")["items"]
                    if p["spec"].get("nodeName", "").startswith(NODE_PREFIX)]
            if not left and not pods:
                break
            time.sleep(1)
        else:
            raise Failure("earlier run's namespaces/pods not gone within %ds" % self.args.cleanup_timeout)
        dirs, socks = clean_hollow_files([])
        if nss or nodes or dirs or socks:
            log("cleaned: %d namespaces, %d nodes, %d hollow dirs, %d sockets"
                % (len(nss), len(nodes), dirs, socks))

    # -- RBAC and identities -----------------------------------------------------------------

    def rbac(self):
        """kubeplex's RBAC as deploy/ ships it (node tier: deploy/base/node/daemonset.yaml;
        pool: deploy/base/pool/pool.yaml), with the ServiceAccounts replaced by the users of
        the harness's client certificates and the harness's prefix on every name."""
        import yaml  # PyYAML (installed with the kubernetes client); only the tiers need it
        user = lambda name: {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}  # noqa: E731
        subject_for = {("kube-system", "kubeplex"): {"kind": "ServiceAccount", "name": NODE_TIER_ACCOUNT,
                                                     "namespace": "kube-system"},
                       ("kube-system", "kubeplex-pool"): user(POOL_USER)}
        self.admin.apply("/api/v1/namespaces/kube-system/serviceaccounts/" + NODE_TIER_ACCOUNT,
                         {"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": NODE_TIER_ACCOUNT, "namespace": "kube-system",
                                       "labels": {RUN_LABEL: "rbac"}}})
        docs = []
        for rel in ("deploy/base/node/daemonset.yaml", "deploy/base/pool/pool.yaml"):
            with open(os.path.join(REPO, rel)) as f:
                docs.extend(d for d in yaml.safe_load_all(f) if d)
        own_roles = set(d["metadata"]["name"] for d in docs if d.get("kind") == "ClusterRole")
        n = 0
        for d in docs:
            kind = d.get("kind")
            if kind not in ("ClusterRole", "ClusterRoleBinding"):
                continue
            d = json.loads(json.dumps(d))
            d["metadata"] = {"name": RBAC_PREFIX + d["metadata"]["name"],
                             "labels": {RUN_LABEL: "rbac"}}
            if kind == "ClusterRoleBinding":
                if d["roleRef"]["name"] in own_roles:
                    d["roleRef"]["name"] = RBAC_PREFIX + d["roleRef"]["name"]
                subjects = []
                for s in d.get("subjects") or []:
                    if s.get("kind") == "ServiceAccount":
                        s = subject_for.get((s.get("namespace"), s.get("name")))
                        if s is None:
                            raise Failure("unexpected ServiceAccount subject %s" % s)
                    subjects.append(s)
                d["subjects"] = subjects
                path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
            else:
                path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/"
            self.admin.apply(path + d["metadata"]["name"], d)
            n += 1
        log("applied %d ClusterRoles/ClusterRoleBindings from deploy/ (subjects: ServiceAccount "
            "kube-system/%s, user %s)" % (n, NODE_TIER_ACCOUNT, POOL_USER))

    def node_tier_token(self, node):
        """A token of the node tiers' ServiceAccount bound to a pod on `node`, as the kubelet
        projects into a DaemonSet's pod: the apiserver writes the node into it, and the node
        tier can act as that node alone (constrained impersonation)."""
        name = "agents-harness-kubeplex-" + node
        pod = self.admin.apply("/api/v1/namespaces/kube-system/pods/" + name, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "kube-system", "labels": {RUN_LABEL: "node-tier"}},
            "spec": {"nodeName": node, "serviceAccountName": NODE_TIER_ACCOUNT,
                     "automountServiceAccountToken": False,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "kubeplex", "image": "kubeplex:latest"}]}})
        uid = pod["metadata"]["uid"] if pod else self.admin.get(
            "/api/v1/namespaces/kube-system/pods/" + name)["metadata"]["uid"]
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": 7200,
                            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": name, "uid": uid}}}
        answer = self.admin.json("POST", "/api/v1/namespaces/kube-system/serviceaccounts/%s/token"
                                 % NODE_TIER_ACCOUNT, request)
        return answer["status"]["token"]

    # -- 2. processes ------------------------------------------------------------------------

    def start_informers(self):
        self.ready_at = {}
        self.bound_at, self.running_at = {}, {}
        specs = {
            "nodes": ("/api/v1/nodes", HOLLOW_LABEL, self.node_seen),
            "pods": ("/api/v1/namespaces/%s/pods" % self.ns, "", self.pod_seen),
            "slices": ("/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices" % self.ns, "", None),
            "deployments": ("/apis/apps/v1/namespaces/%s/deployments" % self.ns, "", None),
        }
        for name, (path, sel, hook) in specs.items():
            inf = Informer(self.admin, path, self.shared, sel, hook)
            inf.start()
            self.informers[name] = inf
        ok = self.shared.wait_until(lambda: all(i.synced for i in self.informers.values()), 30)
        if ok is None:
            raise Failure("harness informers did not sync")

    def start_scheduler(self):
        crt, key = self.pki.sign("kube-scheduler", "system:kube-scheduler")
        kc = self.pki.kubeconfig("kube-scheduler", API, crt, key)
        cfg = os.path.join(self.dir, "scheduler.yaml")
        with open(cfg, "w") as f:
            f.write("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "clientConnection:\n  kubeconfig: %s\nleaderElection:\n  leaderElect: false\n" % kc)
        self.procs.start("kube-scheduler", [os.path.join(HARNESS, "bin", "kube-scheduler"),
                                            "--config", cfg, "--secure-port=0", "--v=1"],
                         os.path.join(self.logs, "kube-scheduler.log"))

    def wait_ready(self, name, port, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.procs.check_alive([name])
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
                conn.request("GET", "/readyz")
                st = conn.getresponse().status
                conn.close()
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise Failure("%s not ready within %ds (log %s)" % (name, timeout, self.procs.procs[name][1]))

    def kubeplex_bin(self):
        b = self.args.kubeplex_bin
        if not os.access(b, os.X_OK):
            raise Failure("%s: no kubeplex binary (cargo build --release --locked --bin kubeplex)" % b)
        return b

    def start_tiers(self):
        """Mode node: one kubeplex per node in front of the apiserver. Mode pool: a pool
        kubeplex in front of the apiserver, and node tiers with upstreams [pool, apiserver]."""
        self.rbac()
        b = self.kubeplex_bin()
        serving = self.pki.sign("kubeplex-serving", "kubeplex", server=True)
        common = ["--tls-cert-file", serving[0], "--tls-private-key-file", serving[1],
                  "--client-ca-file", self.pki.ca, "--shutdown-grace-period", "2s"]
        pool_args = []
        if "pool" in self.node_mode.values():
            crt, key = self.pki.sign("kubeplex-pool-upstream", POOL_USER)
            kc = self.pki.kubeconfig("kubeplex-pool-upstream", API, crt, key)
            for p in (POOL_PORT, POOL_ADMIN):
                if not port_free(p):
                    raise Failure("port %d is taken" % p)
            self.procs.start("kubeplex-pool", [
                b, "serve", "--config", os.path.join(REPO, "deploy/base/pool/kubeplex.yaml"),
                "--kubeconfig", kc, "--listen", "127.0.0.1:%d" % POOL_PORT,
                "--admin-listen", "127.0.0.1:%d" % POOL_ADMIN] + common,
                os.path.join(self.logs, "kubeplex-pool.log"))
            self.kubeplex_admin_ports.append(POOL_ADMIN)
            t = time.time()
            self.wait_ready("kubeplex-pool", POOL_ADMIN, timeout=90)
            log("pool ready in %.1fs" % (time.time() - t))
            # A node tier presents the pool its token, as the apiserver (no client certificate).
            pool_args = ["--upstream", "https://127.0.0.1:%d" % POOL_PORT,
                         "--upstreams-ca-file", self.pki.ca]
        tiered = [(i, node) for i, node in enumerate(self.nodes) if self.node_mode[node] != "direct"]
        for i, node in tiered:
            port, admin = KUBEPLEX_PORT_BASE + i, KUBEPLEX_ADMIN_BASE + i
            for p in (port, admin):
                if not port_free(p):
                    raise Failure("port %d is taken" % p)
            kc = self.pki.token_kubeconfig("kubeplex-" + node, API, self.node_tier_token(node))
            self.procs.start("kubeplex-" + node, [
                b, "serve", "--config", os.path.join(REPO, "config/node.yaml"),
                "--node-name", node, "--node-impersonation", "associated-node", "--kubeconfig", kc,
                "--listen", "127.0.0.1:%d" % port, "--admin-listen", "127.0.0.1:%d" % admin]
                + common + (pool_args if self.node_mode[node] == "pool" else []),
                os.path.join(self.logs, "kubeplex-%s.log" % node))
            self.kubeplex_admin_ports.append(admin)
        t = time.time()
        for i, node in tiered:
            self.wait_ready("kubeplex-" + node, KUBEPLEX_ADMIN_BASE + i, timeout=60)
        log("%d node tiers ready in %.1fs" % (len(tiered), time.time() - t))

    def agent_server(self, i):
        if self.node_mode[self.nodes[i]] == "direct":
            return API
        return "https://127.0.0.1:%d" % (KUBEPLEX_PORT_BASE + i)

    def start_agents(self):
        kubemark = os.path.join(HARNESS, "bin", "kubemark")
        proxy_crt, proxy_key = self.pki.sign("kube-proxy", "system:kube-proxy")
        max_pods = max(110, 2 * math.ceil((self.args.pods * 1.5) / self.n))
        argvs = []
        for i, node in enumerate(self.nodes):
            kport = KUBELET_PORT_BASE + i
            if not port_free(kport):
                raise Failure("port %d is taken" % kport)
            crt, key = self.pki.sign("kubelet-" + node, "system:node:" + node, orgs=["system:nodes"])
            server = self.agent_server(i)
            kkc = self.pki.kubeconfig("kubelet-%s-%s" % (node, self.mode), server, crt, key)
            pkc = self.pki.kubeconfig("kube-proxy-%s-%s" % (node, self.mode), server, proxy_crt, proxy_key)
            argvs.append(("kubelet-" + node, [
                kubemark, "--morph=kubelet", "--name=" + node, "--kubeconfig=" + kkc,
                "--kubelet-port=%d" % kport, "--kubelet-read-only-port=0",
                "--use-host-image-service=false", "--kube-api-qps=50", "--kube-api-burst=100",
                "--max-pods=%d" % max_pods,
                "--node-labels=%s=true,%s=%s" % (HOLLOW_LABEL, RUN_LABEL, self.mode),
                "--v=2", "--vmodule=round_trippers=6"]))
            argvs.append(("kube-proxy-" + node, [
                kubemark, "--morph=proxy", "--name=" + node, "--kubeconfig=" + pkc,
                "--v=2", "--vmodule=round_trippers=6"]))
        t0 = time.time()
        for name, argv in argvs:
            self.procs.start(name, argv, os.path.join(self.logs, name + ".log"))
        return t0

    @staticmethod
    def node_ready(n):
        for c in n.get("status", {}).get("conditions") or []:
            if c["type"] == "Ready":
                return c["status"] == "True"
        return False

    def node_seen(self, n, t):
        """The nodes informer's hook: when each node was first seen Ready."""
        name = n["metadata"]["name"]
        if name in self.nodes and name not in self.ready_at and self.node_ready(n):
            self.ready_at[name] = t

    def pod_seen(self, p, t):
        """The pods informer's hook: when each pod was first seen bound to a node, and first
        seen Running and Ready (by this harness's watch of the apiserver)."""
        key = "%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])
        if p["spec"].get("nodeName") and key not in self.bound_at:
            self.bound_at[key] = t
        st = p.get("status", {})
        if (key not in self.running_at and st.get("phase") == "Running"
                and any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or [])):
            self.running_at[key] = t

    POD_INFORMER_SYNCED = re.compile(r'"Caches populated" type="\*v1\.Pod" reflector="pkg/kubelet/config/')

    def wait_pod_informers(self, t0, timeout=60):
        """Waits until every kubelet's informer of its pods has synced (its log's "Caches
        populated" line for *v1.Pod): a node can be Ready before its kubelet sees its pods,
        and pods created meanwhile would wait for that. Returns (last, median) seconds after
        t0 (klog's time)."""
        year = time.localtime().tm_year
        synced = {}
        deadline = time.time() + timeout
        while len(synced) < self.n:
            self.procs.check_alive()
            for node in self.nodes:
                if node in synced:
                    continue
                with open(os.path.join(self.logs, "kubelet-%s.log" % node), "rb") as f:
                    for raw in f:
                        if b'type="*v1.Pod"' not in raw:
                            continue
                        line = raw.decode("utf-8", "replace")
                        m = KLOG_RE.match(line)
                        if m and self.POD_INFORMER_SYNCED.search(line):
                            synced[node] = klog_time(m, year)
                            break
            if len(synced) == self.n:
                break
            if time.time() > deadline:
                raise Failure("kubelets' pod informers not synced within %ds: %s"
                              % (timeout, sorted(set(self.nodes) - set(synced))))
            time.sleep(0.2)
        ts = sorted(synced.values())
        return round(ts[-1] - t0, 2), round(ts[len(ts) // 2] - t0, 2)

    def wait_nodes_ready(self, t0):
        nodes = self.informers["nodes"]
        ready_at = self.ready_at
        untainted = {}

        def tainted(n):
            return any(t.get("key") == NOT_READY_TAINT for t in n.get("spec", {}).get("taints") or [])

        def pred():
            return len(ready_at) == self.n and all(
                not tainted(nodes.objs.get("/" + name, {})) for name in self.nodes)

        def untaint():
            self.procs.check_alive()
            for name in list(ready_at):
                n = nodes.objs.get("/" + name)
                if n and tainted(n) and time.time() - untainted.get(name, 0) > 2:
                    untainted[name] = time.time()
                    taints = [t for t in n["spec"].get("taints") or [] if t.get("key") != NOT_READY_TAINT]
                    self.admin.patch("/api/v1/nodes/" + name, {"spec": {"taints": taints or None}})

        done = self.shared.wait_until(pred, self.args.ready_timeout, tick=untaint)
        if done is None:
            raise Failure("nodes not Ready within %ds: ready %s" % (self.args.ready_timeout, sorted(ready_at)))
        last = max(ready_at.values()) - t0
        med = sorted(ready_at.values())[len(ready_at) // 2] - t0
        return round(last, 2), round(med, 2)

    # -- 3. workload ---------------------------------------------------------------------------

    def deployments(self):
        d = self.args.deployments
        base, extra = divmod(self.args.pods, d)
        return [("app-%d" % k, base + (1 if k < extra else 0)) for k in range(d)]

    def prepare_namespace(self):
        a = self.admin
        a.create("/api/v1/namespaces", {"metadata": {"name": self.ns, "labels": {RUN_LABEL: self.mode}}})
        with open(self.pki.ca) as f:
            ca = f.read()
        a.create("/api/v1/namespaces/%s/configmaps" % self.ns,
                 {"metadata": {"name": "openshift-service-ca.crt"}, "data": {"service-ca.crt": ca}})
        for app, _ in self.deployments():
            a.create("/api/v1/namespaces/%s/configmaps" % self.ns,
                     {"metadata": {"name": app + "-config", "labels": {"app": app}},
                      "data": {"app.yaml": "name: %s\nlogLevel: info\n" % app}})
            a.create("/api/v1/namespaces/%s/secrets" % self.ns,
                     {"metadata": {"name": app + "-secret", "labels": {"app": app}},
                      "type": "Opaque", "data": {"password": "c2VjcmV0"}})
            a.create("/api/v1/namespaces/%s/services" % self.ns,
                     {"metadata": {"name": app, "labels": {"app": app}},
                      "spec": {"selector": {"app": app},
                               "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
        # The pods' ServiceAccount and root CA come from the controller manager.
        deadline = time.time() + 60
        while time.time() < deadline:
            st1, _ = a.request("GET", "/api/v1/namespaces/%s/serviceaccounts/default" % self.ns)
            st2, _ = a.request("GET", "/api/v1/namespaces/%s/configmaps/kube-root-ca.crt" % self.ns)
            if st1 == 200 and st2 == 200:
                return
            time.sleep(0.5)
        raise Failure("namespace %s: no default ServiceAccount / kube-root-ca.crt within 60s" % self.ns)

    def deployment_obj(self, app, replicas):
        return {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "labels": {"app": app}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {
                        "nodeSelector": {HOLLOW_LABEL: "true"},
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{
                            "name": "app", "image": "registry.k8s.io/pause:3.10",
                            "ports": [{"containerPort": 8080, "name": "http"}],
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                                             {"name": "secret", "mountPath": "/etc/secret"}]}],
                        "volumes": [{"name": "config", "configMap": {"name": app + "-config"}},
                                    {"name": "secret", "secret": {"secretName": app + "-secret"}}],
                    },
                },
            },
        }

    def pods_state(self):
        """(running ready pods' names, all pods, endpoints ready pod names) — lock held."""
        pods = self.informers["pods"].objs.values()
        running = set()
        for p in pods:
            if p["metadata"].get("deletionTimestamp"):
                continue
            st = p.get("status", {})
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or [])
            if st.get("phase") == "Running" and ready:
                running.add(p["metadata"]["name"])
        endpoints = set()
        for s in self.informers["slices"].objs.values():
            for e in s.get("endpoints") or []:
                ref = e.get("targetRef") or {}
                if ref.get("kind") == "Pod" and (e.get("conditions") or {}).get("ready"):
                    endpoints.add(ref["name"])
        return running, len(pods), endpoints

    def wait_all_running(self, want):
        """Returns (every pod Running and Ready, and also in its Service's EndpointSlice as
        ready): wall times of the events that completed each."""
        def pred_running():
            running, total, _ = self.pods_state()
            return total == want and len(running) == want

        def pred():
            running, total, endpoints = self.pods_state()
            return total == want and len(running) == want and running <= endpoints

        def tick():
            self.procs.check_alive()

        deadline = time.time() + self.args.pods_timeout
        running = self.shared.wait_until(pred_running, self.args.pods_timeout, tick=tick)
        done = running and self.shared.wait_until(pred, max(1, deadline - time.time()), tick=tick)
        if done is None:
            with self.shared.cond:
                running, total, endpoints = self.pods_state()
            raise Failure("pods not all Running within %ds: %d pods, %d running+ready, %d with ready endpoints"
                          % (self.args.pods_timeout, total, len(running), len(running & endpoints)))
        return running, done

    def settled(self):
        """Deployments rolled out at their replicas, no extra pods, endpoints ready."""
        want = 0
        deps = self.informers["deployments"].objs
        for app, gen in self.generations.items():
            d = deps.get("%s/%s" % (self.ns, app))
            if d is None or d["metadata"].get("generation", 0) < gen:
                return False
        for d in deps.values():
            spec, st = d["spec"], d.get("status", {})
            r = spec["replicas"]
            want += r
            if st.get("observedGeneration", 0) < d["metadata"].get("generation", 0):
                return False
            for f in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
                if st.get(f, 0) != r:
                    return False
        running, total, endpoints = self.pods_state()
        return total == want and len(running) == want and running <= endpoints

    def churn(self):
        """Rolling restarts and scaling for --churn seconds, then every deployment back at
        its replicas."""
        deps = self.deployments()
        base = dict(deps)
        scaled = {}
        step, restarts, scalings = 0, 0, 0
        t_end = time.time() + self.args.churn
        while time.time() < t_end:
            self.procs.check_alive()
            if step % 2 == 0:
                app = deps[(step // 2) % len(deps)][0]
                self.patch_deployment(app, {"spec": {"template": {"metadata": {"annotations": {
                    "agents.kubeplex.io/restartedAt": "%.3f" % time.time()}}}}})
                restarts += 1
            else:
                app = deps[(step // 2 + len(deps) // 2) % len(deps)][0]
                if app in scaled:
                    r = base[app]
                    del scaled[app]
                else:
                    r = base[app] + max(1, base[app] // 2)
                    scaled[app] = r
                self.patch_deployment(app, {"spec": {"replicas": r}})
                scalings += 1
            step += 1
            time.sleep(min(self.args.churn_interval, max(0, t_end - time.time())))
        for app in list(scaled):
            self.patch_deployment(app, {"spec": {"replicas": base[app]}})
            scalings += 1
        return restarts, scalings, self.last_action

    def patch_deployment(self, app, body):
        """A strategic merge patch of a deployment; its new generation is remembered, so that
        `settled` never judges an older state of it."""
        d = self.admin.patch("/apis/apps/v1/namespaces/%s/deployments/%s" % (self.ns, app),
                             body, kind="strategic")
        self.last_action = time.time()
        with self.shared.cond:
            self.generations[app] = d["metadata"]["generation"]

    # -- 5. correctness -------------------------------------------------------------------------

    def check_kubelets(self):
        """Each kubelet's /pods equals the apiserver's pods of its node (namespace/name/uid)."""
        deadline = time.time() + 30
        while True:
            bad = []
            for i, node in enumerate(self.nodes):
                # The hollow kubelet serves plain HTTP (no serving certificate configured).
                kl, err = None, None
                for scheme in ("http", "https"):
                    k = Api("%s://127.0.0.1:%d" % (scheme, KUBELET_PORT_BASE + i), verify=False, timeout=10)
                    try:
                        kl = k.get("/pods")
                        break
                    except (Failure, OSError, http.client.HTTPException) as e:
                        err = e
                if kl is None:
                    bad.append("%s: kubelet /pods: %s" % (node, err))
                    continue
                mine = set((p["metadata"].get("namespace"), p["metadata"]["name"], p["metadata"].get("uid"))
                           for p in kl.get("items") or [])
                sel = urllib.parse.quote("spec.nodeName=" + node)
                ap = self.admin.get("/api/v1/pods?fieldSelector=" + sel)
                theirs = set((p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"])
                             for p in ap["items"])
                if mine != theirs:
                    line = ("%s: kubelet has %d, apiserver %d (only kubelet: %s; only apiserver: %s)"
                            % (node, len(mine), len(theirs), sorted(mine - theirs)[:3],
                               sorted(theirs - mine)[:3]))
                    if time.time() > deadline:
                        line += self.layers_of(i, node, sel, theirs)
                    bad.append(line)
            if not bad or time.time() > deadline:
                return bad
            time.sleep(2)

    def layers_of(self, i, node, sel, theirs):
        """Where a kubelet's wrong view comes from: what its node tier's cache answers the kubelet's
        own identity (resourceVersion=0) and what the pool's does, against the apiserver's."""
        def differs(api, what):
            try:
                got = api.get("/api/v1/pods?resourceVersion=0&fieldSelector=" + sel)
            except (Failure, OSError, http.client.HTTPException) as e:
                return "; %s: %s" % (what, e)
            have = set((p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"])
                       for p in got.get("items") or [])
            return "; %s at RV %s: %d, only there: %s" % (
                what, got.get("metadata", {}).get("resourceVersion"), len(have),
                sorted(have - theirs)[:3])
        out = ""
        if self.node_mode[node] != "direct":
            crt, key = self.pki.sign("kubelet-" + node, "system:node:" + node, orgs=["system:nodes"])
            out += differs(Api(self.agent_server(i), ca=self.pki.ca, cert=crt, key=key), "node tier")
        if self.node_mode[node] == "pool":
            out += differs(Api("https://127.0.0.1:%d" % POOL_PORT, ca=self.pki.ca,
                               token=self.admin.token), "pool")
        return out

    # -- 4. figures -----------------------------------------------------------------------------

    LATENCY_KINDS = ("get pods", "patch pods/status", "post serviceaccounts/token")

    def agent_figures(self, rollout):
        year = time.localtime().tm_year
        delays, not2xx, missing = [], 0, 0
        bound_to_add, add_to_running = [], []
        kubelet_errors, proxy_errors, after_delete = {}, {}, {}
        latency = {}
        kubelet_requests = proxy_requests = 0
        roots = []
        per_pod = {}
        groups = {}  # mode -> what its nodes' kubelets saw (mode mixed)
        for node in self.nodes:
            kl = parse_agent_log(os.path.join(self.logs, "kubelet-%s.log" % node), year, self.ns)
            g = groups.setdefault(self.node_mode[node], {"delays": [], "bound_to_add": [],
                                                        "get": [], "patch": [], "watch": [], "c403": 0})
            g["c403"] += sum(v for k, v in kl["errors"].items() if k[-1] == "403")
            g["c403"] -= sum(v for k, v in kl["after_delete"].items() if k[-1] == "403")
            for kind, key in (("get pods", "get"), ("patch pods/status", "patch"),
                              ("watch configmaps", "watch"), ("watch secrets", "watch")):
                g[key].extend(ms / 1000.0 for t, ms in kl["latency"].get(kind, [])
                              if rollout[0] <= t <= rollout[1])
            for pod, t_add in kl["adds"].items():
                per_pod[pod] = {"node": node, "bound": self.bound_at.get(pod), "add": t_add,
                                "first_patch": (kl["patches"].get(pod) or (None,))[0],
                                "running": self.running_at.get(pod)}
            if kl["root"]:
                roots.append(kl["root"])
            kubelet_requests += kl["requests"]
            for k, v in kl["errors"].items():
                kubelet_errors[k] = kubelet_errors.get(k, 0) + v
            for k, v in kl["after_delete"].items():
                after_delete[k] = after_delete.get(k, 0) + v
            for k, v in kl["latency"].items():
                latency.setdefault(k, []).extend(v)
            for pod, t_add in kl["adds"].items():
                if pod in self.bound_at:
                    bound_to_add.append(t_add - self.bound_at[pod])
                    g["bound_to_add"].append(t_add - self.bound_at[pod])
                if pod in kl["patches"]:
                    g["delays"].append(kl["patches"][pod][0] - t_add)
                if pod in self.running_at:
                    add_to_running.append(self.running_at[pod] - t_add)
                p = kl["patches"].get(pod)
                if p is None:
                    missing += 1
                    continue
                delays.append(p[0] - t_add)
                if not p[1].startswith("2"):
                    not2xx += 1
            px = parse_agent_log(os.path.join(self.logs, "kube-proxy-%s.log" % node), year, self.ns)
            proxy_requests += px["requests"]
            for k, v in px["errors"].items():
                proxy_errors[k] = proxy_errors.get(k, 0) + v
        # Per way to the apiserver (mode mixed): the same figures for its nodes alone, and when
        # its nodes were Ready and its pods of the first rollout Running.
        by_mode = {}
        if len(groups) > 1:
            for m, g in groups.items():
                nodes = [n for n in self.nodes if self.node_mode[n] == m]
                ready = [self.ready_at[n] - self.t_agents for n in nodes if n in self.ready_at]
                running = [t - rollout[0] for pod, t in self.running_at.items()
                           if per_pod.get(pod, {}).get("node") in nodes and t <= rollout[1]]
                by_mode[m] = {"nodes": len(nodes), "status_delay_s": quantiles(g["delays"]),
                              "bound_to_add_s": quantiles(g["bound_to_add"]),
                              "get_pod_s": quantiles(g["get"]), "patch_status_s": quantiles(g["patch"]),
                              "named_watch_s": quantiles(g["watch"]),
                              "nodes_ready_s": round(max(ready), 2) if ready else None,
                              "pods_running_s": round(max(running), 2) if running else None,
                              "pods_running_n": len(running), "kubelet_403": g["c403"]}
        # Per pod, wall times (seconds since the epoch), for a closer look later.
        with open(os.path.join(self.dir, "pods.json"), "w") as f:
            json.dump({"deployments_created": rollout[0], "pods": per_pod}, f, indent=0, sort_keys=True)
        return {
            "by_mode": by_mode,
            "status_delay_s": quantiles(delays),
            # Seen bound by the harness's watch of the apiserver -> the kubelet's SyncLoop ADD:
            # how fast a binding reaches the kubelet (through kubeplex's cache, in modes
            # node and pool).
            "bound_to_add_s": quantiles(bound_to_add),
            # SyncLoop ADD -> seen Running and Ready at the apiserver.
            "add_to_running_s": quantiles(add_to_running),
            "first_patch_not_2xx": not2xx,
            "pods_without_status_patch": missing,
            "kubelet_requests": kubelet_requests,
            "kubelet_errors": {" ".join(k): v for k, v in sorted(kubelet_errors.items())},
            "kubelet_403_after_delete": {" ".join(k): v for k, v in sorted(after_delete.items())},
            # Successful non-watch requests' time as the kubelet saw it, in seconds: the
            # status manager sends one pod's GET and PATCH at a time, so these set how fast
            # its queue drains.
            "kubelet_latency_s": {k: quantiles([ms / 1000.0 for _, ms in latency[k]])
                                  for k in self.LATENCY_KINDS if k in latency},
            # The same during the rollout (creating the deployments -> all pods Running), when
            # the machine is busiest. A watch's time is to its response's head.
            "kubelet_rollout_latency_s": {
                k: quantiles([ms / 1000.0 for t, ms in latency[k] if rollout[0] <= t <= rollout[1]])
                for k in self.LATENCY_KINDS + ("watch configmaps", "watch secrets") if k in latency},
            "proxy_requests": proxy_requests,
            "proxy_errors": {" ".join(k): v for k, v in sorted(proxy_errors.items())},
        }, roots

    def kubeplex_log_summary(self):
        levels, samples = {}, []
        for path in glob.glob(os.path.join(self.logs, "kubeplex-*.log")):
            with open(path, errors="replace") as f:
                for line in f:
                    lvl = None
                    try:
                        j = json.loads(line)
                        lvl = (j.get("level") or "").upper()
                        msg = j.get("fields", {}).get("message") or j.get("message") or line
                    except ValueError:
                        m = re.search(r'\b(ERROR|WARN)\b', line)
                        lvl = m.group(1) if m else None
                        msg = line
                    if lvl in ("ERROR", "WARN"):
                        levels[lvl] = levels.get(lvl, 0) + 1
                        short = "%s %s: %s" % (lvl, os.path.basename(path), str(msg)[:200].strip())
                        if len(samples) < 8 and not any(short.split(": ", 1)[1] in s for s in samples):
                            samples.append(short)
        return levels, samples

    # -- everything ------------------------------------------------------------------------------

    def execute(self):
        a = self.args
        roots = []
        try:
            self.control_plane_up()
            self.result["repo_head"] = git_head()
            if self.mode != "direct":
                self.result["kubeplex_bin"] = binary_identity(self.kubeplex_bin())
            self.clean()
            self.start_informers()
            self.start_scheduler()
            if self.mode != "direct":
                self.start_tiers()
            if a.samples and self.kubeplex_admin_ports:
                self.sampler = Sampler(a.samples, self.kubeplex_admin_ports,
                                       markers_from=a.markers)
                self.sampler.start()
            before = apiserver_snapshot(self.admin)
            t0 = self.start_agents()
            self.t_agents = t0
            ready_last, ready_med = self.wait_nodes_ready(t0)
            self.result["nodes_ready_s"] = ready_last
            self.result["nodes_ready_median_s"] = ready_med
            log("nodes Ready: last %.2fs, median %.2fs" % (ready_last, ready_med))
            inf_last, inf_med = self.wait_pod_informers(t0)
            self.result["pod_informers_synced_s"] = inf_last
            self.result["pod_informers_synced_median_s"] = inf_med
            log("kubelets' pod informers synced: last %.2fs, median %.2fs" % (inf_last, inf_med))

            self.prepare_namespace()
            t1 = time.time()
            for app, r in self.deployments():
                self.admin.create("/apis/apps/v1/namespaces/%s/deployments" % self.ns,
                                  self.deployment_obj(app, r))
            running, done = self.wait_all_running(a.pods)
            self.rollout = (t1, done)
            self.result["pods_running_only_s"] = round(running - t1, 2)
            self.result["pods_running_s"] = round(done - t1, 2)
            log("all %d pods Running with ready endpoints: %.2fs" % (a.pods, done - t1))

            if self.sampler:
                self.sampler.mark("churn")
            restarts, scalings, t2 = self.churn()
            if self.sampler:
                self.sampler.mark("churn ends")
            done = self.shared.wait_until(self.settled, a.settle_timeout,
                                          tick=lambda: self.procs.check_alive())
            if done is None:
                raise Failure("not settled within %ds after the churn" % a.settle_timeout)
            settle = round(max(0.0, done - t2), 2)
            self.result["churn"] = {"seconds": a.churn, "restarts": restarts, "scalings": scalings,
                                    "settled_s": settle}
            log("churn: %d restarts, %d scalings; settled %.2fs after the last" % (restarts, scalings, settle))

            bad = self.check_kubelets()
            if self.sampler:
                self.sampler.stop()
                self.result["soak"] = {"samples": len(self.sampler.rows), "csv": a.samples,
                                       "slopes": self.sampler.slopes()}
                for sl in self.result["soak"]["slopes"]:
                    log("slope after %d s: %-36s mean %10.1f  %+9.2f/h  %+7.2f %%/h" % (
                        SOAK_WARM_UP, sl["series"], sl["mean"], sl["per_hour"], sl["percent_per_hour"]))
            self.result["kubelets_match_apiserver"] = not bad
            self.result["mismatches"] = bad
            kp = None
            if self.kubeplex_admin_ports:
                tiers = [p for p in self.kubeplex_admin_ports if p != POOL_ADMIN]
                kp = {"node_tiers": kubeplex_metrics(tiers)}
                if POOL_ADMIN in self.kubeplex_admin_ports:
                    kp["pool"] = kubeplex_metrics([POOL_ADMIN])
            self.result["cpu_s"] = {"kubelets": round(self.procs.cpu("kubelet-"), 1),
                                    "kube_proxies": round(self.procs.cpu("kube-proxy-"), 1),
                                    "kubeplex": round(self.procs.cpu("kubeplex-"), 1)}
            self.result["rss_mib"] = {"kubelets": round(self.procs.rss("kubelet-")),
                                      "kube_proxies": round(self.procs.rss("kube-proxy-")),
                                      "kubeplex": round(self.procs.rss("kubeplex-"))}
            # The agents and tiers stop before the second scrape, so that their watches,
            # counted by the apiserver when they end, are in it.
            # Agents first, then the tiers (whose draining would otherwise end the agents'
            # watches under them).
            self.procs.stop([n for n in self.procs.procs if n.startswith(("kubelet-", "kube-proxy-"))])
            self.procs.stop([n for n in self.procs.procs if n.startswith("kubeplex-hollow")])
            self.procs.stop([n for n in self.procs.procs if n.startswith("kubeplex-")])
            time.sleep(2)
            after = apiserver_snapshot(self.admin)
            self.result["apiserver"] = apiserver_delta(before, after)
            figures, roots = self.agent_figures(self.rollout)
            self.result.update(figures)
            if kp is not None:
                self.result["kubeplex"] = kp
                levels, samples = self.kubeplex_log_summary()
                self.result["kubeplex"]["log_levels"] = levels
                self.result["kubeplex"]["log_samples"] = samples
            self.result["ok"] = not bad
        except BaseException as e:
            self.result["ok"] = False
            self.result["error"] = "%s: %s" % (type(e).__name__, e)
            if isinstance(e, KeyboardInterrupt):
                raise
        finally:
            for inf in self.informers.values():
                inf.stop()
            self.procs.stop(grace=15)
            if not roots:
                for node in self.nodes:
                    p = os.path.join(self.logs, "kubelet-%s.log" % node)
                    if os.path.exists(p):
                        r = parse_agent_log(p, time.localtime().tm_year, self.ns)["root"]
                        if r:
                            roots.append(r)
            clean_hollow_files(roots)
            with open(os.path.join(self.dir, "summary.json"), "w") as f:
                json.dump(self.result, f, indent=1, sort_keys=True)
        return self.result


# ----------------------------------------------------------------------------- output

def fmt_s(v):
    return "-" if v is None else "%.2f s" % v


def errors_line(errs, limit=8):
    if not errs:
        return "0"
    total = sum(errs.values())
    parts = sorted(errs.items(), key=lambda kv: -kv[1])
    s = ", ".join("%s: %d" % (k, n) for k, n in parts[:limit])
    return "%d (%s%s)" % (total, s, ", ..." if len(parts) > limit else "")


def report(r):
    lines = []
    add = lines.append
    add("== mode %s: %d nodes, %d pods (logs %s)" % (r["mode"], r["nodes"], r["pods"], r["run_dir"]))
    kb = r.get("kubeplex_bin")
    add("   repo %s%s" % (r.get("repo_head"), "; kubeplex built %s, sha256 %s" % (kb["built"], kb["sha256"]) if kb else ""))
    if r.get("error"):
        add("   FAILED: %s" % r["error"])
    add("   nodes Ready (agent start -> last node Ready):  %s (median node %s)"
        % (fmt_s(r.get("nodes_ready_s")), fmt_s(r.get("nodes_ready_median_s"))))
    add("   kubelets' pod informers synced (agent start ->): %s (median node %s)"
        % (fmt_s(r.get("pod_informers_synced_s")), fmt_s(r.get("pod_informers_synced_median_s"))))
    add("   all pods Running and Ready:                    %s; and in their EndpointSlices as ready: %s"
        % (fmt_s(r.get("pods_running_only_s")), fmt_s(r.get("pods_running_s"))))
    ch = r.get("churn")
    if ch:
        add("   churn %ds: %d rolling restarts, %d scalings; settled %s after the last"
            % (ch["seconds"], ch["restarts"], ch["scalings"], fmt_s(ch["settled_s"])))
    d = r.get("status_delay_s")
    if d:
        add("   SyncLoop ADD -> first status PATCH, %d pods:   median %s, p90 %s, max %s"
            % (d["n"], fmt_s(d["median"]), fmt_s(d["p90"]), fmt_s(d["max"])))
        add("     (first PATCH not 2xx: %d; pods ADDed but never PATCHed: %d)"
            % (r["first_patch_not_2xx"], r["pods_without_status_patch"]))
        for label, key in (("pod bound (harness's watch) -> SyncLoop ADD", "bound_to_add_s"),
                           ("SyncLoop ADD -> Running+Ready (harness's watch)", "add_to_running_s")):
            q = r.get(key)
            if q and q["n"]:
                add("   %-47s median %s, p90 %s, max %s (%d pods)"
                    % (label + ":", fmt_s(q["median"]), fmt_s(q["p90"]), fmt_s(q["max"]), q["n"]))
        add("   kubelets: %d requests; 403s: %s" % (r["kubelet_requests"], errors_line(
            {k: v for k, v in r["kubelet_errors"].items() if k.endswith(" 403")})))
        for label, key in (("whole run", "kubelet_latency_s"), ("rollout", "kubelet_rollout_latency_s")):
            for k, q in (r.get(key) or {}).items():
                if q["n"]:
                    add("     kubelet %-9s %-27s n %4d: median %s, p90 %s, max %s"
                        % (label, k, q["n"], fmt_s(q["median"]), fmt_s(q["p90"]), fmt_s(q["max"])))
        ad = r.get("kubelet_403_after_delete") or {}
        add("     of those 403s, for a pod the kubelet had seen deleted: %s" % errors_line(ad))
        other = {k: v for k, v in r["kubelet_errors"].items() if not k.endswith(" 403")}
        if other:
            add("     other non-2xx: %s" % errors_line(other))
        add("   kube-proxies: %d requests; non-2xx: %s" % (r["proxy_requests"], errors_line(r["proxy_errors"])))
    bm = r.get("by_mode")
    if bm:
        add("   by the way each node's agents went (nodes i %% 3: %s), in this one run:" % ", ".join(MIXED))
        for label, f in MIXED_ROWS:
            cells = []
            for m in MIXED:
                try:
                    v = f(bm[m])
                except (KeyError, TypeError):
                    v = None
                cells.append("-" if v is None else ("%.3f" % v if isinstance(v, float) else str(v)))
            add("     %-40s" % label + "".join("%10s" % c for c in cells))
    ap = r.get("apiserver")
    if ap:
        for label, t in (("all clients", ap), ("non-system clients", ap["nonsystem"])):
            add("   apiserver, %-18s %6d requests: LIST+WATCH %d (LIST %d, WATCH %d), GET %d, writes %d, 403 %d"
                % (label + ":", t["total"], t["list_watch"], t["list"], t["watch"], t["get"],
                   t["writes"], t["code_403"]))
        add("     (non-system = agents, kubeplex, this harness, the reaper; authorization 403s are not in"
            " apiserver_request_total)")
        add("     apiserver CPU %s s (etcd %s s); watch events sent %d (%.1f MiB)"
            % (ap["cpu_s"], ap["etcd_cpu_s"], ap["watch_events"], ap["watch_bytes"] / 2**20))
        add("     machine: %s CPU-s busy over the run, of which %s s by processes outside the control plane"
            " and this run%s" % (ap["host_busy_s"], ap["host_other_s"],
                                 "  <-- NOT QUIET: figures are slowed" if (ap["host_other_s"] or 0) > 10 else ""))
        add("     non-system reads: " + ", ".join("%s %d" % kv for kv in ap["nonsystem_reads"].items()))
        add("     system reads (top): " + ", ".join("%s %d" % kv for kv in ap["system_reads"].items()))
    cpu = r.get("cpu_s")
    if cpu:
        add("   CPU: kubelets %.1f s, kube-proxies %.1f s, kubeplex %.1f s; RSS kubelets %d MiB, kubeplex %d MiB"
            % (cpu["kubelets"], cpu["kube_proxies"], cpu["kubeplex"],
               r["rss_mib"]["kubelets"], r["rss_mib"]["kubeplex"]))
    kp = r.get("kubeplex")
    if kp:
        for tier in ("node_tiers", "pool"):
            t = kp.get(tier)
            if not t:
                continue
            add("   kubeplex %s (%d scraped): requests by source %s"
                % (tier.replace("_", " "), t["scraped"], t["requests_by_source"]))
            add("     auth decisions: %s" % t["auth_decisions"])
            add("     upstream calls: %s" % t.get("upstream_calls"))
            if t.get("freshness_waits"):
                add("     freshness waits (s in all / reads): %s" % ", ".join(
                    "%s %.2f/%d" % (k, v[0], v[1]) for k, v in t["freshness_waits"].items()))
                add("     freshness proofs: %s" % t.get("freshness_proofs"))
            if t["graph"]:
                for k, v in sorted(t["graph"].items()):
                    if "_bucket" not in k:
                        add("     %s %g" % (k, v))
            else:
                add("     kubeplex_auth_node_graph_* : none in this binary")
        add("   kubeplex logs: %s" % (kp.get("log_levels") or "no WARN/ERROR"))
        for s in kp.get("log_samples") or []:
            add("       " + s)
    if "kubelets_match_apiserver" in r:
        if r["kubelets_match_apiserver"]:
            add("   correctness: every kubelet's /pods equals the apiserver's pods of its node")
        else:
            add("   correctness: MISMATCH")
            for m in r["mismatches"]:
                add("     " + m)
    return lines


def median(xs):
    """The median (the mean of the middle two for an even count); None for none."""
    s = sorted(xs)
    if not s:
        return None
    return s[(len(s) - 1) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


# Mode mixed's figures per way (direct, node, pool): label, getter of a by_mode entry.
MIXED_ROWS = (
    ("nodes", lambda g: g["nodes"]),
    ("ADD -> status PATCH median, s", lambda g: g["status_delay_s"]["median"]),
    ("ADD -> status PATCH p90, s", lambda g: g["status_delay_s"]["p90"]),
    ("bound -> ADD median, s", lambda g: g["bound_to_add_s"]["median"]),
    ("rollout: kubelet GET pod median, s", lambda g: g["get_pod_s"]["median"]),
    ("rollout: kubelet PATCH status median, s", lambda g: g["patch_status_s"]["median"]),
    ("rollout: named ConfigMap/Secret watch, s", lambda g: g["named_watch_s"]["median"]),
    ("its nodes Ready (agent start ->), s", lambda g: g["nodes_ready_s"]),
    ("its first rollout's pods Running, s", lambda g: g["pods_running_s"]),
    ("kubelet 403s (not for deleted pods)", lambda g: g["kubelet_403"]),
)


def mixed_comparison(results):
    """Mode mixed over several runs: per figure, each way's median over the runs, and the
    tiers' difference from direct *within each run* (median and range over the runs): the
    machine's run-to-run swings cancel in the difference."""
    rs = [r for r in results if r.get("by_mode")]
    lines = ["%-40s%10s%10s%10s%26s%26s" % ("", "direct", "node", "pool", "node - direct", "pool - direct")]

    def fmt(v):
        return "-" if v is None else ("%.3f" % v if isinstance(v, float) else str(v))
    for label, f in MIXED_ROWS[1:]:
        per = {m: [] for m in MIXED}
        diff = {m: [] for m in MIXED[1:]}
        for r in rs:
            try:
                vals = {m: f(r["by_mode"][m]) for m in MIXED}
            except (KeyError, TypeError):
                continue
            if any(v is None for v in vals.values()):
                continue
            for m in MIXED:
                per[m].append(vals[m])
            for m in MIXED[1:]:
                diff[m].append(vals[m] - vals["direct"])
        cells = ["%10s" % fmt(median(per[m])) for m in MIXED]
        for m in MIXED[1:]:
            d = diff[m]
            cells.append("%26s" % ("-" if not d else "%+.3f (%+.3f..%+.3f)" % (median(d), min(d), max(d))
                                   if isinstance(d[0], float) else "%+d (%+d..%+d)" % (median(d), min(d), max(d))))
        lines.append("%-40s" % label + "".join(cells))
    return lines


def summary_json(r):
    """The one-line summary: the figures, without the long tables."""
    keep = {k: v for k, v in r.items() if k not in ("kubelet_errors", "proxy_errors", "mismatches")}
    keep["kubelet_403"] = {k[:-4]: v for k, v in r.get("kubelet_errors", {}).items()
                           if k.endswith(" 403")}
    keep["kubelet_403_total"] = sum(keep["kubelet_403"].values())
    keep["kubelet_403_after_delete_total"] = sum(r.get("kubelet_403_after_delete", {}).values())
    keep.pop("kubelet_403_after_delete", None)
    keep["proxy_non2xx_total"] = sum(r.get("proxy_errors", {}).values())
    if "kubeplex" in keep:
        kp = {}
        for k, v in keep["kubeplex"].items():
            if k == "log_samples":
                continue
            if isinstance(v, dict) and "graph" in v:
                v = dict(v, graph={g: x for g, x in v["graph"].items() if "_bucket" not in g})
            kp[k] = v
        keep["kubeplex"] = kp
    return json.dumps(keep, sort_keys=True, separators=(",", ":"))


def comparison(results):
    """One column per mode; with several runs of a mode (--repeat), the median of its runs
    and their range."""
    cols = []
    for r in results:
        if r["mode"] not in cols:
            cols.append(r["mode"])
    width = 12 if len(results) == len(cols) else 24

    def cell(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "-"
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return ",".join(str(v) for v in vals)
        floats = any(isinstance(v, float) for v in vals)
        fmt = (lambda x: "%.2f" % x) if floats else (lambda x: str(int(round(x))))
        s = sorted(vals)
        med = median(s)
        if len(s) == 1:
            return fmt(s[0])
        return "%s (%s-%s)" % (fmt(med), fmt(s[0]), fmt(s[-1]))

    def row(label, f):
        out = []
        for c in cols:
            vals = []
            for r in results:
                if r["mode"] != c:
                    continue
                try:
                    vals.append(f(r))
                except (KeyError, TypeError, AttributeError):
                    vals.append(None)
            out.append(cell(vals))
        return "%-44s" % label + "".join(("%" + str(width) + "s") % v for v in out)

    lines = ["%-44s" % "" + "".join(("%" + str(width) + "s") % c for c in cols)]
    lines.append(row("nodes Ready, s", lambda r: r["nodes_ready_s"]))
    lines.append(row("kubelets' pod informers synced, s", lambda r: r["pod_informers_synced_s"]))
    lines.append(row("all pods Running+Ready, s", lambda r: r["pods_running_only_s"]))
    lines.append(row("  ... and endpoints ready, s", lambda r: r["pods_running_s"]))
    lines.append(row("settled after the churn's last action, s", lambda r: r["churn"]["settled_s"]))
    lines.append(row("bound -> ADD median, s", lambda r: r["bound_to_add_s"]["median"]))
    lines.append(row("bound -> ADD p90, s", lambda r: r["bound_to_add_s"]["p90"]))
    lines.append(row("ADD -> Running median, s", lambda r: r["add_to_running_s"]["median"]))
    lines.append(row("ADD -> Running p90, s", lambda r: r["add_to_running_s"]["p90"]))
    lines.append(row("ADD -> status PATCH median, s", lambda r: r["status_delay_s"]["median"]))
    lines.append(row("ADD -> status PATCH p90, s", lambda r: r["status_delay_s"]["p90"]))
    lines.append(row("ADD -> status PATCH max, s", lambda r: r["status_delay_s"]["max"]))
    for what in ("median", "p90"):
        lines.append(row("rollout: kubelet GET pod %s, s" % what,
                         lambda r, w=what: r["kubelet_rollout_latency_s"]["get pods"][w]))
        lines.append(row("rollout: kubelet PATCH status %s, s" % what,
                         lambda r, w=what: r["kubelet_rollout_latency_s"]["patch pods/status"][w]))
    lines.append(row("rollout: kubelet watch configmap median, s",
                     lambda r: r["kubelet_rollout_latency_s"]["watch configmaps"]["median"]))
    lines.append(row("kubelet 403s", lambda r: sum(v for k, v in r["kubelet_errors"].items() if k.endswith(" 403"))))
    lines.append(row("  of which for pods seen deleted", lambda r: sum(r["kubelet_403_after_delete"].values())))
    lines.append(row("apiserver requests", lambda r: r["apiserver"]["total"]))
    lines.append(row("apiserver LIST+WATCH", lambda r: r["apiserver"]["list_watch"]))
    lines.append(row("apiserver GET", lambda r: r["apiserver"]["get"]))
    lines.append(row("apiserver 403 (counted ones)", lambda r: r["apiserver"]["code_403"]))
    lines.append(row("  non-system requests", lambda r: r["apiserver"]["nonsystem"]["total"]))
    lines.append(row("  non-system LIST+WATCH", lambda r: r["apiserver"]["nonsystem"]["list_watch"]))
    lines.append(row("  non-system GET", lambda r: r["apiserver"]["nonsystem"]["get"]))
    lines.append(row("apiserver watch events", lambda r: r["apiserver"]["watch_events"]))
    lines.append(row("apiserver CPU, s", lambda r: r["apiserver"]["cpu_s"]))
    lines.append(row("kubeplex CPU, s", lambda r: r["cpu_s"]["kubeplex"]))
    lines.append(row("kubeplex graph retry requests", lambda r: int(sum(
        t["graph"].get("kubeplex_auth_node_graph_retry_requests_total", 0)
        for t in (r["kubeplex"].get("node_tiers"), r["kubeplex"].get("pool")) if t))))
    lines.append(row("kubelets == apiserver", lambda r: r["kubelets_match_apiserver"]))
    lines.append(row("other CPU on the machine, s", lambda r: r["apiserver"]["host_other_s"]))
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["direct", "node", "pool", "all", "mixed"], default="direct",
                   help="mixed: in each run, node i's agents go MIXED[i %% 3] (direct, node, pool)")
    p.add_argument("--nodes", type=int, default=10, help="hollow nodes (default 10)")
    p.add_argument("--pods", type=int, default=200, help="pods in total (default 200)")
    p.add_argument("--deployments", type=int, default=10, help="deployments (default 10)")
    p.add_argument("--churn", type=int, default=60, help="seconds of churn (default 60)")
    p.add_argument("--churn-interval", type=float, default=6.0,
                   help="seconds between churn actions (default 6)")
    p.add_argument("--run-dir", default="/tmp/agents-run", help="logs and pid files (default /tmp/agents-run)")
    p.add_argument("--kubeplex-bin", default=os.path.join(REPO, "target/release/kubeplex"))
    p.add_argument("--ready-timeout", type=int, default=180)
    p.add_argument("--pods-timeout", type=int, default=300)
    p.add_argument("--settle-timeout", type=int, default=300)
    p.add_argument("--cleanup-timeout", type=int, default=180)
    p.add_argument("--repeat", type=int, default=1,
                   help="run the mode (or the three, interleaved) this many times (default 1)")
    p.add_argument("--wait-quiet", type=int, default=0, metavar="SECONDS",
                   help="before each mode, wait up to SECONDS for the machine to be quiet (under"
                        " 0.2 CPUs used outside the control plane); default 0: do not wait")
    p.add_argument("--samples", metavar="CSV",
                   help="the soak (issue 47): every 10 s, each kubeplex's RSS, heap, CPU, tasks,"
                        " connections, descriptors, watchers and review-cache entries to CSV"
                        " (svgplot.py renders it); the report gives each series' slope after"
                        " the first %d s" % SOAK_WARM_UP)
    p.add_argument("--markers", metavar="FILE",
                   help="with --samples: a file of \"UNIX-SECONDS label\" lines another process"
                        " appends to (agents-soak.sh's disruptions), marked on the charts")
    p.add_argument("--keep", action="store_true",
                   help="leave the namespace and nodes of the last run in the cluster")
    args = p.parse_args()
    if args.nodes < 1 or args.nodes > 100 or args.pods < args.deployments or args.deployments < 1:
        p.error("need 1 <= --nodes <= 100 and --pods >= --deployments >= 1")
    os.makedirs(args.run_dir, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)

    modes = (["direct", "node", "pool"] if args.mode == "all" else [args.mode]) * args.repeat
    results = []
    run = None
    try:
        for mode in modes:
            if args.wait_quiet:
                busy = wait_quiet(args.wait_quiet)
                log("machine: %s CPUs in use outside the control plane" % busy)
            log("mode %s: %d nodes, %d pods" % (mode, args.nodes, args.pods))
            run = Run(args, mode)
            r = run.execute()
            results.append(r)
            for line in report(r):
                print(line, flush=True)
            print(summary_json(r), flush=True)
        if args.mode == "mixed":
            print("== mixed: %d runs of %d nodes (a third each way), %d pods; medians over the runs,"
                  " and each tier's difference from direct within a run" % (len(results), args.nodes, args.pods))
            for line in mixed_comparison(results):
                print(line)
        elif len(results) > 1:
            print("== comparison (%d nodes, %d pods%s)" % (
                args.nodes, args.pods, "; median of %d runs (range)" % args.repeat if args.repeat > 1 else ""))
            for line in comparison(results):
                print(line)
    finally:
        if run is not None and not args.keep:
            try:
                run.clean()
            except Exception as e:  # noqa: BLE001 — best effort at the very end
                log("final cleanup: %s" % e)
    return 0 if results and all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
