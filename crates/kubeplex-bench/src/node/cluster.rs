//! The cluster a node run reads: the fake apiserver with an identity policy (the Node and RBAC
//! authorizers on, the agents' and kubeplex's identities as a kubeadm cluster and the shipped
//! DaemonSet grant them) and its objects before the run (nodes, namespaces, apps with their
//! ConfigMap, Secret, Service and EndpointSlice, pods bound to nodes, runtime classes, CSI
//! drivers, the service CIDR).

use std::path::Path;

use anyhow::{bail, Context};
use kubeplex_sim::auth::{Auth, Rule, Subject, UserInfo};
use serde_json::{json, Value};

use super::NodeSpec;

/// The pool tier's ServiceAccount (`kubeplex-pool`, deploy/base/pool).
pub const POOL_TOKEN: &str = "kubeplex-pool-sa-token";
/// kube-proxy's ServiceAccount, bound to `system:node-proxier` as kubeadm binds it.
const KUBE_PROXY_SA: &str = "kube-proxy";
/// The CNI-like and log-agent-like DaemonSets' ServiceAccounts.
pub const CNI_SA: &str = "cni-agent";
const LOGS_SA: &str = "log-agent";

/// Node `i`'s name.
pub fn node_name(i: usize) -> String {
    format!("node-{i}")
}

/// The bearer tokens of node `i`'s agents: each pod of a DaemonSet has a token of its own (a
/// projected ServiceAccount token), all of them the same ServiceAccount.
pub fn kube_proxy_token(i: usize) -> String {
    format!("kube-proxy-{i}")
}
pub fn cni_token(i: usize) -> String {
    format!("cni-agent-{i}")
}
pub fn logs_token(i: usize) -> String {
    format!("log-agent-{i}")
}
/// Node `i`'s node tier's token: the ServiceAccount `kube-system/kubeplex`
/// (deploy/base/node/daemonset.yaml) bound to its pod on node `i`, as the kubelet projects it.
pub fn node_tier_token(i: usize) -> String {
    format!("kubeplex-node-tier-{i}")
}
/// The kubelet's token for the direct mode: the fake apiserver authenticates bearer tokens only
/// (no x509), so a direct kubelet presents a token that maps to the identity its client
/// certificate carries through kubeplex (`system:node:NAME` in `system:nodes`).
pub fn kubelet_token(i: usize) -> String {
    format!("kubelet-{i}")
}

/// The fake apiserver's policy for a run of `nodes` nodes, with kubeplex's RBAC read from the
/// shipped DaemonSet manifest (its ClusterRoles and ClusterRoleBindings).
pub fn policy(nodes: usize, daemonset: &Path, pool: &Path) -> anyhow::Result<Auth> {
    let mut auth = Auth::new()
        .service_account_token(POOL_TOKEN, "kube-system", "kubeplex-pool")
        // kubeadm's binding of kube-proxy's ServiceAccount.
        .cluster_role_binding(
            "kubeadm:node-proxier",
            "system:node-proxier",
            vec![Subject::service_account("kube-system", KUBE_PROXY_SA)],
        )
        .cluster_role(
            CNI_SA,
            vec![
                Rule::read(&[""], &["pods", "nodes", "namespaces", "services"]),
                Rule::read(&["discovery.k8s.io"], &["endpointslices"]),
                // A Cilium agent's besides (`scale --cilium`).
                Rule::read(&["networking.k8s.io"], &["networkpolicies"]),
                Rule::read(
                    &["cilium.io"],
                    &[
                        "ciliumnodes",
                        "ciliumendpoints",
                        "ciliumidentities",
                        "ciliumnetworkpolicies",
                    ],
                ),
            ],
        )
        .cluster_role_binding(CNI_SA, CNI_SA, vec![Subject::service_account("kube-system", CNI_SA)])
        .cluster_role(LOGS_SA, vec![Rule::new(&["get"], &[""], &["pods"])])
        .cluster_role_binding(
            LOGS_SA,
            LOGS_SA,
            vec![Subject::service_account("kube-system", LOGS_SA)],
        );
    for i in 0..nodes {
        let node = node_name(i);
        auth = auth
            // The node tier's: its pod's token, bound to its node (deploy/base/node).
            .bound_service_account_token(
                &node_tier_token(i),
                "kube-system",
                "kubeplex",
                &format!("kubeplex-{node}"),
                &node,
            )
            .token(&kubelet_token(i), UserInfo::node(&node_name(i)))
            .service_account_token(&kube_proxy_token(i), "kube-system", KUBE_PROXY_SA)
            .service_account_token(&cni_token(i), "kube-system", CNI_SA)
            .service_account_token(&logs_token(i), "kube-system", LOGS_SA);
    }
    // kubeplex's RBAC as deploy/ ships it: the node tier's, and the pool tier's (its
    // ServiceAccount's, and the node tiers' certificate group's).
    for manifest in [daemonset, pool] {
        let text = std::fs::read_to_string(manifest)
            .with_context(|| format!("reading kubeplex's RBAC from {}", manifest.display()))?;
        auth =
            with_manifest_rbac(auth, &text).with_context(|| format!("{}", manifest.display()))?;
    }
    Ok(auth)
}

/// Adds the ClusterRoles and ClusterRoleBindings of a multi-document manifest.
fn with_manifest_rbac(mut auth: Auth, manifest: &str) -> anyhow::Result<Auth> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(manifest).context("not YAML")?;
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
    };
    let mut roles = 0;
    for doc in &docs {
        let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        match doc.get("kind").and_then(Value::as_str) {
            Some("ClusterRole") => {
                let rules = doc["rules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| Rule {
                        verbs: strings(&r["verbs"]),
                        api_groups: strings(&r["apiGroups"]),
                        resources: strings(&r["resources"]),
                        resource_names: strings(&r["resourceNames"]),
                        non_resource_urls: strings(&r["nonResourceURLs"]),
                    })
                    .collect();
                auth = auth.cluster_role(name, rules);
                roles += 1;
            }
            Some("ClusterRoleBinding") => {
                let role = doc.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
                let subjects = doc["subjects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| {
                        let name = s["name"].as_str()?;
                        Some(match s["kind"].as_str()? {
                            "ServiceAccount" => Subject::service_account(
                                s["namespace"].as_str().unwrap_or("default"),
                                name,
                            ),
                            "Group" => Subject::group(name),
                            _ => Subject::user(name),
                        })
                    })
                    .collect();
                auth = auth.cluster_role_binding(name, role, subjects);
            }
            _ => {}
        }
    }
    if roles == 0 {
        bail!("no ClusterRole in the manifest");
    }
    Ok(auth)
}

/// The namespace of app `a`.
pub fn app_namespace(spec: &NodeSpec, a: usize) -> String {
    format!("team-{}", a % spec.namespaces.max(1))
}

pub fn app_name(a: usize) -> String {
    format!("app-{a}")
}

/// Whether app `a`'s Service is headless (`clusterIP: None`): the kubelet's and kube-proxy's
/// selectors leave those out.
fn headless(a: usize) -> bool {
    a % 5 == 4
}

/// Whether app `a`'s Service is implemented by another proxy (kube-proxy leaves it out).
fn other_proxy(a: usize) -> bool {
    a % 7 == 6
}

/// Everything that exists before the run, namespaces first.
pub fn objects(spec: &NodeSpec) -> Vec<Value> {
    let mut out = Vec::new();
    for n in 0..spec.namespaces.max(1) {
        let ns = format!("team-{n}");
        out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        // Every namespace has the cluster's CA bundle, which every pod mounts.
        out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt", "namespace": ns},
            "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n"}}));
    }
    out.extend((0..spec.nodes).map(kubeplex_sim::seed::node));
    for a in 0..spec.apps {
        let (ns, app) = (app_namespace(spec, a), app_name(a));
        out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{app}-config"), "namespace": ns, "labels": {"app": app}},
            "data": {"app.yaml": format!("name: {app}\nreplicas: 3\nlogLevel: info\n")}}));
        out.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{app}-secret"), "namespace": ns, "labels": {"app": app}},
            "type": "Opaque", "data": {"password": "c2VjcmV0"}}));
        out.push(service(spec, a, 0));
    }
    out.push(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "runc"}, "handler": "runc"}));
    out.push(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "gvisor"}, "handler": "runsc",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}}}));
    out.push(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": "ebs.csi.example.com"},
        "spec": {"attachRequired": true, "podInfoOnMount": false,
            "volumeLifecycleModes": ["Persistent"], "fsGroupPolicy": "File"}}));
    out.push(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": "secrets-store.csi.example.com"},
        "spec": {"attachRequired": false, "podInfoOnMount": true,
            "volumeLifecycleModes": ["Ephemeral"],
            "tokenRequests": [{"audience": "vault"}], "requiresRepublish": true}}));
    // The default ServiceCIDR the apiserver creates from --service-cluster-ip-range.
    out.push(json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12"]}}));
    out
}

/// App `a`'s Service, at its `version`-th change.
pub fn service(spec: &NodeSpec, a: usize, version: u64) -> Value {
    let (ns, app) = (app_namespace(spec, a), app_name(a));
    let mut labels = json!({"app": app});
    if other_proxy(a) {
        labels["service.kubernetes.io/service-proxy-name"] = json!("other-proxy");
    }
    let ip = format!("10.96.{}.{}", a / 250, a % 250 + 10);
    let (cluster_ip, ips) =
        if headless(a) { (json!("None"), json!(["None"])) } else { (json!(ip), json!([ip])) };
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": app, "namespace": ns, "labels": labels,
            "annotations": {"kubeplex-bench/version": version.to_string()}},
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "selector": {"app": app}, "clusterIP": cluster_ip, "clusterIPs": ips, "type": "ClusterIP",
            "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"},
        "status": {"loadBalancer": {}}})
}

/// A running pod of an app, as the churn places it.
#[derive(Debug, Clone)]
pub struct PodRef {
    pub name: String,
    pub node: String,
    pub ip: String,
    pub uid: String,
}

/// App `a`'s EndpointSlice for its pods, with the labels the EndpointSlice controller sets
/// (the service's name, the controller, and the headless and service-proxy-name labels it
/// copies from the Service).
pub fn endpoint_slice(spec: &NodeSpec, a: usize, pods: &[PodRef]) -> Value {
    let (ns, app) = (app_namespace(spec, a), app_name(a));
    let mut labels = json!({"kubernetes.io/service-name": app,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"});
    if headless(a) {
        labels["service.kubernetes.io/headless"] = json!("");
    }
    if other_proxy(a) {
        labels["service.kubernetes.io/service-proxy-name"] = json!("other-proxy");
    }
    let endpoints: Vec<Value> = pods
        .iter()
        .map(|p| {
            json!({"addresses": [p.ip], "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": p.node,
                "targetRef": {"kind": "Pod", "namespace": ns, "name": p.name, "uid": p.uid}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{app}-slice"), "namespace": ns, "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": app,
                "uid": "00000000-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}]},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]})
}

/// A pod of app `a` bound to `node` (created with `spec.nodeName` set, as after the
/// scheduler's binding), referencing the app's ConfigMap (a volume), its Secret (an env var)
/// and the namespace's CA bundle (a projected volume). `running` pods carry the status a
/// kubelet reported; new ones have none (Pending).
pub fn pod(spec: &NodeSpec, a: usize, name: &str, node: &str, ip: &str, running: bool) -> Value {
    let (ns, app) = (app_namespace(spec, a), app_name(a));
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-5d8f7c9b6"),
                "uid": "00000000-0000-4000-8000-000000000002", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "containers": [{"name": "app", "image": format!("registry.example/{app}:1.0"),
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{app}-secret"), "key": "password"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                    {"name": "kube-api-access", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": node,
            "automountServiceAccountToken": false, "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"}});
    if running {
        pod["status"] = running_status(node, ip);
    }
    pod
}

/// A pod's status once its container runs, as a kubelet reports it.
pub fn running_status(node: &str, ip: &str) -> Value {
    let host_ip = host_ip(node);
    let now = chrono_now();
    json!({"phase": "Running",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": null, "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
        "containerStatuses": [{"name": "app", "state": {"running": {"startedAt": now}}, "lastState": {},
            "ready": true, "restartCount": 0, "image": "registry.example/app:1.0",
            "imageID": "registry.example/app@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "containerID": "containerd://0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "started": true}],
        "qosClass": "Burstable"})
}

/// A pending pod's status while its container is created.
pub fn pending_status(node: &str) -> Value {
    let host_ip = host_ip(node);
    let now = chrono_now();
    json!({"phase": "Pending",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "False", "lastProbeTime": null, "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": now},
            {"type": "Ready", "status": "False", "lastProbeTime": null, "lastTransitionTime": now,
                "reason": "ContainersNotReady", "message": "containers with unready status: [app]"},
            {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "startTime": now,
        "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {}, "ready": false, "restartCount": 0, "image": "registry.example/app:1.0",
            "imageID": "", "started": false}],
        "qosClass": "Burstable"})
}

/// Node `node-i`'s address (as `kubeplex_sim::seed::node` sets it).
fn host_ip(node: &str) -> String {
    let i: usize = node.trim_start_matches("node-").parse().unwrap_or(0);
    format!("192.168.0.{}", i % 250 + 1)
}

/// The time as the apiserver writes `metav1.Time`.
pub fn chrono_now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now as a `metav1.MicroTime` (a Lease's `renewTime`): RFC 3339 with exactly six fractional
/// digits, which the real apiserver requires (it answers 400 to a time without them).
pub fn micro_now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The ConfigMaps and Secrets a pod references, `(configmaps, secrets)` — what the kubelet's
/// managers watch one by one (volumes, projected sources, env, envFrom, image pull secrets).
pub fn references(pod: &Value) -> (Vec<String>, Vec<String>) {
    let (mut configmaps, mut secrets) = (Vec::new(), Vec::new());
    let push = |list: &mut Vec<String>, v: Option<&Value>| {
        if let Some(n) = v.and_then(Value::as_str) {
            if !list.iter().any(|x| x == n) {
                list.push(n.to_string());
            }
        }
    };
    let spec = &pod["spec"];
    for v in spec["volumes"].as_array().into_iter().flatten() {
        push(&mut configmaps, v.pointer("/configMap/name"));
        push(&mut secrets, v.pointer("/secret/secretName"));
        for s in v.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten() {
            push(&mut configmaps, s.pointer("/configMap/name"));
            push(&mut secrets, s.pointer("/secret/name"));
        }
    }
    for s in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        push(&mut secrets, s.get("name"));
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["envFrom"].as_array().into_iter().flatten() {
                push(&mut configmaps, e.pointer("/configMapRef/name"));
                push(&mut secrets, e.pointer("/secretRef/name"));
            }
            for e in c["env"].as_array().into_iter().flatten() {
                push(&mut configmaps, e.pointer("/valueFrom/configMapKeyRef/name"));
                push(&mut secrets, e.pointer("/valueFrom/secretKeyRef/name"));
            }
        }
    }
    (configmaps, secrets)
}

#[cfg(test)]
mod tests;
