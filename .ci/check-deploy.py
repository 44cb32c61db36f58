#!/usr/bin/env python3
"""Checks deploy/: every kustomize overlay renders, and what it renders is what a cluster takes.

- Built-in kinds are validated against the Kubernetes 1.36 schemas, unknown fields refused
  (kubernetes-validate --strict; there is no cluster here to dry-run against).
- Custom resources have no schema there (kubernetes-validate only warns and passes them), so they
  get structural checks: cert-manager's Issuer/Certificate, the Prometheus Operator's PodMonitor
  and PrometheusRule (known fields, references that resolve, the PodMonitor selecting the pods
  and their admin port).
- Every PromQL expression (alerts, dashboard) parses, and every kubeplex_* metric it names is
  defined in src/ (tests/cli/deploy_metrics.rs checks they are in a real /metrics scrape too).
- Every alert has a summary, a description and a runbook section in docs/operations.md.
- The example kubeconfigs load in kubectl and point at kubeplex's TLS listener.

The configuration inside each overlay's ConfigMap is checked by `kubeplex config check` in
tests/cli/deploy_metrics.rs (it needs the built binary).
"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import promql_parser
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
OVERLAYS = sorted(p.parent for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
BUILTIN_GROUPS = {"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "policy/v1", "batch/v1"}

errors = []


def check(ok, what):
    if not ok:
        errors.append(what)


def render(path):
    r = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        errors.append(f"{path.relative_to(ROOT)}: kubectl kustomize failed: {r.stderr.strip()}")
        return []
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def validate_builtin(where, docs):
    builtin = [d for d in docs if d.get("apiVersion") in BUILTIN_GROUPS]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump_all(builtin, f)
        f.flush()
        r = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--kubernetes-version",
                            "1.36.0", "--strict", f.name], capture_output=True, text=True)
    check(r.returncode == 0, f"{where}: 1.36 schema validation:\n{r.stdout}{r.stderr}")
    return len(builtin)


# cert-manager.io/v1 fields (a typo is an unknown field).
ISSUER_SPEC = {"selfSigned", "ca", "acme", "vault", "venafi"}
CERT_SPEC = {"secretName", "secretTemplate", "commonName", "dnsNames", "ipAddresses", "uris",
             "emailAddresses", "subject", "literalSubject", "duration", "renewBefore",
             "renewBeforePercentage", "usages", "isCA", "privateKey", "issuerRef", "keystores",
             "revisionHistoryLimit", "additionalOutputFormats", "nameConstraints",
             "otherNames", "encodeUsagesInRequest", "signatureAlgorithm"}
PRIVATE_KEY = {"algorithm", "size", "encoding", "rotationPolicy"}


def check_cert_manager(where, docs):
    issuers, certs = {}, {}
    for d in docs:
        if not d.get("apiVersion", "").startswith("cert-manager.io/"):
            continue
        name = d.get("metadata", {}).get("name")
        at = f"{where}: {d.get('kind')}/{name}"
        check(d.get("apiVersion") == "cert-manager.io/v1", f"{at}: apiVersion")
        check(d.get("metadata", {}).get("namespace") == "kube-system", f"{at}: namespace")
        spec = d.get("spec") or {}
        if d.get("kind") == "Issuer":
            check(set(spec) <= ISSUER_SPEC and len(spec) == 1, f"{at}: spec {sorted(spec)}")
            issuers[name] = spec
        elif d.get("kind") == "Certificate":
            check(set(spec) <= CERT_SPEC, f"{at}: unknown fields {sorted(set(spec) - CERT_SPEC)}")
            check(set(spec.get("privateKey", {})) <= PRIVATE_KEY, f"{at}: privateKey fields")
            check(bool(spec.get("secretName")), f"{at}: secretName")
            ref = spec.get("issuerRef", {})
            check(ref.get("kind") == "Issuer" and ref.get("group") == "cert-manager.io",
                  f"{at}: issuerRef")
            certs[name] = spec
        else:
            errors.append(f"{at}: unexpected kind")
    for name, spec in certs.items():
        check(spec.get("issuerRef", {}).get("name") in issuers,
              f"{where}: Certificate/{name}: no such Issuer")
    for name, spec in issuers.items():
        if "ca" in spec:
            secret = spec["ca"].get("secretName")
            check(any(c.get("secretName") == secret and c.get("isCA") for c in certs.values()),
                  f"{where}: Issuer/{name}: CA Secret {secret} is made by no CA Certificate")
    serving = [c for c in certs.values() if c.get("secretName") == "kubeplex-serving-cert"]
    check(len(serving) == 1, f"{where}: no Certificate makes the Secret kubeplex-serving-cert")
    for c in serving:
        check({"127.0.0.1", "::1"} <= set(c.get("ipAddresses", [])), f"{where}: serving IP SANs")
        check("localhost" in c.get("dnsNames", []), f"{where}: serving cert DNS SAN localhost")
        check("server auth" in c.get("usages", []) and not c.get("isCA"),
              f"{where}: serving cert usages")
    return len(issuers) + len(certs)


def pod_templates(docs):
    """(kind/name, pod spec, pod labels) of every workload."""
    for d in docs:
        kind, name = d.get("kind"), d.get("metadata", {}).get("name")
        if kind == "Pod":
            yield f"Pod/{name}", d["spec"], d["metadata"].get("labels", {})
        elif kind in ("DaemonSet", "Deployment", "StatefulSet"):
            t = d["spec"]["template"]
            yield f"{kind}/{name}", t["spec"], t["metadata"].get("labels", {})


def kubeplex_container(spec):
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c.get("name") == "kubeplex":
            return c
    return None


def check_workloads(where, docs):
    """The kubeplex container runs with the ConfigMap it mounts, and the ConfigMap exists."""
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    found = 0
    for at, spec, _ in pod_templates(docs):
        c = kubeplex_container(spec)
        if c is None:
            continue
        found += 1
        args = c.get("args", [])
        check(args[:2] == ["serve", "--config"], f"{where}: {at}: args {args}")
        path = args[2] if len(args) > 2 else ""
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        volume = mounts.get(str(pathlib.PurePosixPath(path).parent))
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        cm = volumes.get(volume, {}).get("configMap", {}).get("name")
        check(cm in configmaps, f"{where}: {at}: --config {path} is in no rendered ConfigMap")
        if cm in configmaps:
            key = pathlib.PurePosixPath(path).name
            check(key in configmaps[cm].get("data", {}), f"{where}: {at}: {cm} has no {key}")
            # Generated, so that a changed configuration rolls the pods.
            check(cm.startswith("kubeplex-config-"), f"{where}: {at}: {cm} has no content hash")
            # Every file the configuration names is in a volume the container mounts.
            config = yaml.safe_load(configmaps[cm].get("data", {}).get(key, "")) or {}
            for k, value in config.items():
                if k.endswith("File") or k in ("kubeconfig", "diskStateDir"):
                    check(any(pathlib.PurePosixPath(value).is_relative_to(m) for m in mounts),
                          f"{where}: {at}: {k} {value} is not in a mounted volume")
        env = {e["name"]: e for e in c.get("env", [])}
        check("KUBEPLEX_ADMIN_LISTEN" in env, f"{where}: {at}: admin listener not on the pod IP")
        check_state_dir(where, at, spec, c, env)
        check(any(p.get("name") == "admin" for p in c.get("ports", [])),
              f"{where}: {at}: no port named admin")
        # Files named by KUBEPLEX_*_FILE variables are in mounted volumes too.
        for name, e in env.items():
            if name.startswith("KUBEPLEX_") and name.endswith("_FILE"):
                value = e.get("value", "")
                check(any(pathlib.PurePosixPath(value).is_relative_to(m) for m in mounts),
                      f"{where}: {at}: {name} {value} is not in a mounted volume")
        if spec.get("hostNetwork"):
            # A node's kubeplex holds its serving certificate (and, with a pool tier, the CA
            # that signs the pool's, from the same Secret); never another Secret of the cluster
            # — every Secret a node's pod mounts is readable with that node's kubelet
            # credential. Its credential for a pool is its ServiceAccount token.
            secrets = sorted(s["secret"]["name"] for v in spec.get("volumes", [])
                             for s in v.get("projected", {}).get("sources", []) if "secret" in s)
            check("kubeplex-serving-cert" in secrets and set(secrets) == {"kubeplex-serving-cert"},
                  f"{where}: {at}: mounts Secrets {secrets}")
    check(found > 0, f"{where}: no kubeplex container")


def check_pool(where, docs):
    """The pool tier: 2+ replicas never on one node, a PodDisruptionBudget and a Service that
    select them, a serving certificate for the Service's names, and node tiers whose first
    upstream is that Service, with the CA file they name mounted and no client certificate."""
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
    pools = [d for d in by_kind.get("Deployment", [])
             if d["spec"]["template"]["metadata"].get("labels", {}).get(
                 "app.kubernetes.io/component") == "pool"]
    check(len(pools) == 1, f"{where}: one pool Deployment")
    for d in pools:
        spec, labels = d["spec"], d["spec"]["template"]["metadata"]["labels"]
        check(spec.get("replicas", 1) >= 2, f"{where}: pool replicas {spec.get('replicas')}")
        anti = spec["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
        terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        check(any(t.get("topologyKey") == "kubernetes.io/hostname" and all(
            labels.get(k) == v for k, v in t["labelSelector"]["matchLabels"].items())
            for t in terms), f"{where}: pool replicas may share a node")
        pdbs = [p for p in by_kind.get("PodDisruptionBudget", []) if all(
            labels.get(k) == v for k, v in p["spec"]["selector"]["matchLabels"].items())]
        check(len(pdbs) == 1 and pdbs[0]["spec"].get("minAvailable") == 1,
              f"{where}: no PodDisruptionBudget keeps a pool replica")
        services = [v for v in by_kind.get("Service", []) if all(
            labels.get(k) == x for k, x in v["spec"].get("selector", {}).items())]
        check(len(services) == 1, f"{where}: no Service selects the pool")
        for svc in services:
            name, ns = svc["metadata"]["name"], svc["metadata"]["namespace"]
            port = svc["spec"]["ports"][0]
            c = kubeplex_container(spec["template"]["spec"])
            check(any(p.get("name") == port.get("targetPort") for p in c.get("ports", [])),
                  f"{where}: Service {name} targets no pool port")
            url = f"https://{name}.{ns}.svc:{port['port']}"
            certs = [c for c in by_kind.get("Certificate", [])
                     if c["spec"].get("secretName") == "kubeplex-pool-serving-cert"]
            check(len(certs) == 1 and f"{name}.{ns}.svc" in certs[0]["spec"].get("dnsNames", []),
                  f"{where}: the pool's serving certificate does not name {name}.{ns}.svc")
            for at, pod, _ in pod_templates(docs):
                if not pod.get("hostNetwork"):
                    continue
                env = {e["name"]: e.get("value") for e in kubeplex_container(pod).get("env", [])}
                check((env.get("KUBEPLEX_UPSTREAMS") or "").split(",")[0] == url,
                      f"{where}: {at}: first upstream is not {url}")
                check(bool(env.get("KUBEPLEX_UPSTREAMS_CA_FILE")),
                      f"{where}: {at}: KUBEPLEX_UPSTREAMS_CA_FILE unset")
                # A node tier authenticates to the pool with its ServiceAccount token, bound to
                # its node: no client certificate shared by every node.
                for key in ("KUBEPLEX_UPSTREAMS_CLIENT_CERT_FILE",
                            "KUBEPLEX_UPSTREAMS_CLIENT_KEY_FILE"):
                    check(not env.get(key), f"{where}: {at}: {key} set")
    return len(pools)


def check_state_dir(where, at, spec, c, env):
    """A state directory set by variable is in a writable volume; a hostPath one is prepared for
    kubeplex's user by a `kubeplex state-dir` init container that mounts it first."""
    state = env.get("KUBEPLEX_DISK_STATE_DIR", {}).get("value")
    if not state:
        return
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    mount = mounts.get(state)
    check(mount is not None and not mount.get("readOnly"),
          f"{where}: {at}: diskStateDir {state} is not a writable mount")
    if mount is None:
        return
    volume = {v["name"]: v for v in spec.get("volumes", [])}.get(mount["name"], {})
    if "hostPath" not in volume:
        return
    pod = spec.get("securityContext", {})
    owner = f"{pod.get('runAsUser')}:{pod.get('runAsGroup')}"
    inits = [i for i in spec.get("initContainers", []) if i.get("args", [])[:1] == ["state-dir"]]
    check(len(inits) == 1, f"{where}: {at}: hostPath {state} without a state-dir init container")
    for i in inits:
        check(i.get("args") == ["state-dir", state, "--owner", owner],
              f"{where}: {at}: state-dir args {i.get('args')} (owner should be {owner})")
        check(any(m["mountPath"] == state and m["name"] == mount["name"]
                  for m in i.get("volumeMounts", [])),
              f"{where}: {at}: the state-dir init container does not mount {state}")
        caps = i.get("securityContext", {}).get("capabilities", {})
        check(caps.get("drop") == ["ALL"] and set(caps.get("add", [])) <= {
            "CHOWN", "FOWNER", "DAC_READ_SEARCH"}, f"{where}: {at}: state-dir capabilities {caps}")


POD_MONITOR_SPEC = {"selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel",
                    "podTargetLabels", "sampleLimit", "targetLimit", "labelLimit",
                    "attachMetadata", "scrapeProtocols", "scrapeClass"}
ENDPOINT = {"port", "portNumber", "targetPort", "path", "scheme", "params", "interval",
            "scrapeTimeout", "honorLabels", "honorTimestamps", "relabelings",
            "metricRelabelings", "tlsConfig", "bearerTokenSecret", "basicAuth", "authorization",
            "oauth2", "followRedirects", "enableHttp2", "filterRunning", "proxyUrl"}
RULE = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}


def check_monitoring(where, docs, metrics_in_src):
    monitors = [d for d in docs if d.get("kind") == "PodMonitor"]
    rules = [d for d in docs if d.get("kind") == "PrometheusRule"]
    check(len(monitors) == 1 and len(rules) == 1, f"{where}: one PodMonitor, one PrometheusRule")
    for m in monitors:
        check(m.get("apiVersion") == "monitoring.coreos.com/v1", f"{where}: PodMonitor apiVersion")
        spec = m.get("spec", {})
        check(set(spec) <= POD_MONITOR_SPEC, f"{where}: PodMonitor fields {sorted(spec)}")
        want = spec.get("selector", {}).get("matchLabels", {})
        selected = [(at, s) for at, s, labels in pod_templates(docs)
                    if want and all(labels.get(k) == v for k, v in want.items())]
        check(any(kubeplex_container(s) for _, s in selected),
              f"{where}: the PodMonitor selects no pod with kubeplex")
        for e in spec.get("podMetricsEndpoints", []):
            check(set(e) <= ENDPOINT, f"{where}: podMetricsEndpoint fields {sorted(e)}")
            for at, s in selected:
                c = kubeplex_container(s)
                check(c is not None and any(p.get("name") == e.get("port")
                                            for p in c.get("ports", [])),
                      f"{where}: {at}: no port {e.get('port')} to scrape")
    anchors = doc_anchors(ROOT / "docs" / "operations.md")
    alerts = 0
    for r in rules:
        check(r.get("apiVersion") == "monitoring.coreos.com/v1", f"{where}: PrometheusRule apiVersion")
        for g in r.get("spec", {}).get("groups", []):
            for rule in g.get("rules", []):
                name = rule.get("alert") or rule.get("record")
                check(set(rule) <= RULE, f"{where}: rule {name}: fields {sorted(rule)}")
                check_expr(f"{where}: rule {name}", rule.get("expr", ""), metrics_in_src)
                if "alert" in rule:
                    alerts += 1
                    notes = rule.get("annotations", {})
                    check({"summary", "description", "runbook"} <= set(notes),
                          f"{where}: alert {name}: summary, description, runbook")
                    check(rule.get("labels", {}).get("severity") in ("critical", "warning", "info"),
                          f"{where}: alert {name}: severity")
                    anchor = notes.get("runbook", "").partition("#")[2]
                    check(anchor == name.lower() and anchor in anchors,
                          f"{where}: alert {name}: runbook #{anchor} is not a docs/operations.md section")
    dashboards = [d for d in docs if d.get("kind") == "ConfigMap"
                  and d.get("metadata", {}).get("labels", {}).get("grafana_dashboard") == "1"]
    check(len(dashboards) == 1, f"{where}: one dashboard ConfigMap labelled grafana_dashboard")
    panels = 0
    for d in dashboards:
        for key, text in d.get("data", {}).items():
            dash = json.loads(text)
            check(dash.get("uid") and dash.get("schemaVersion", 0) >= 36, f"{where}: {key}: uid, schemaVersion")
            for p in dash.get("panels", []):
                for t in p.get("targets", []):
                    panels += 1
                    check_expr(f"{where}: {key}: panel {p.get('title')!r}", t.get("expr", ""),
                               metrics_in_src)
    return alerts, panels


def check_expr(where, expr, metrics_in_src):
    # Grafana's variables, as Grafana substitutes them before Prometheus sees the query.
    query = (expr.replace("$__rate_interval", "5m").replace("$namespace", ".*")
             .replace("$pod", ".*"))
    try:
        promql_parser.parse(query)
    except ValueError as e:
        errors.append(f"{where}: PromQL does not parse: {e}: {expr}")
    for name in re.findall(r"\bkubeplex_[a-z_]+", expr):
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        check(family in metrics_in_src, f"{where}: {name} is not a metric kubeplex exports")


def doc_anchors(path):
    """GitHub's heading anchors of a Markdown file."""
    anchors = set()
    for line in path.read_text().splitlines() if path.exists() else []:
        m = re.match(r"#+\s+(.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def metrics_defined_in_src():
    names = set()
    for f in (ROOT / "src").rglob("*.rs"):
        names.update(re.findall(r'"(kubeplex_[a-z_]+)"', f.read_text()))
    return names


def check_kubeconfigs(where, docs):
    kubeconfigs = {"deploy/node/kubelet.conf": (DEPLOY / "node" / "kubelet.conf").read_text()}
    for d in docs:
        if d.get("kind") == "ConfigMap" and "kubeconfig" in d.get("data", {}):
            kubeconfigs[f"{where} ({d['metadata']['name']})"] = d["data"]["kubeconfig"]
    for at, text in kubeconfigs.items():
        with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig") as f:
            f.write(text)
            f.flush()
            r = subprocess.run(["kubectl", "--kubeconfig", f.name, "config", "view", "--minify",
                                "-o", "jsonpath={.clusters[0].cluster.server}"],
                               capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout == "https://127.0.0.1:6443",
              f"{at}: {r.stdout or r.stderr.strip()}")
    return len(kubeconfigs)


def main():
    check({o.name for o in OVERLAYS} >= {"sidecar", "node", "pool"},
          "deploy/overlays: expected the sidecar, node and pool overlays")
    metrics = metrics_defined_in_src()
    for overlay in OVERLAYS:
        where = str(overlay.relative_to(ROOT))
        docs = render(overlay)
        if not docs:
            continue
        builtin = validate_builtin(where, docs)
        check_workloads(where, docs)
        cm = check_cert_manager(where, docs) if any(
            d.get("apiVersion", "").startswith("cert-manager.io/") for d in docs) else 0
        alerts, panels = check_monitoring(where, docs, metrics)
        kubeconfigs = check_kubeconfigs(where, docs) if overlay.name in ("node", "pool") else 0
        if overlay.name == "pool":
            check_pool(where, docs)
        if overlay.name in ("node", "pool"):
            check(cm >= 4, f"{where}: the {overlay.name} overlay makes its serving certificate")
        print(f"{where}: {len(docs)} objects: {builtin} built-in valid for 1.36, "
              f"{cm} cert-manager, {alerts} alerts, {panels} dashboard queries, "
              f"{kubeconfigs} kubeconfigs checked")
    if errors:
        sys.exit("deploy/ checks failed:\n  " + "\n  ".join(errors))


if __name__ == "__main__":
    main()
