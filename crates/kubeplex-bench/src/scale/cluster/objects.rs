//! The objects of a scale run, as the run creates and changes them: its Nodes, the pods bound to
//! each, the apps' ConfigMaps and Secrets they mount, Services and their EndpointSlices, and
//! the pod statuses a kubelet writes.

use serde_json::{json, Value};

use crate::node::cluster::node_name;

/// The run's namespace, and the label on everything it creates outside it (its Nodes).
pub const NAMESPACE: &str = "kubeplex-scale";
pub const LABEL: &str = "kubeplex-bench.io/scale";
/// The writer's timestamp on each change (Unix microseconds), read by every watcher.
pub const STAMP: &str = "kubeplex-bench.io/stamp";
/// The shape of the run's cluster.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Shape {
    pub nodes: usize,
    pub pods_per_node: usize,
    pub services: usize,
    pub endpoints_per_slice: usize,
    /// Each node runs a CNI-like JSON agent besides its kubelet and kube-proxy
    /// (`node::agents::cni`'s reads).
    pub cni: bool,
    /// The CNI agent is Cilium's (`cni` set too): what a Cilium agent reads (its node's pods,
    /// its Node, namespaces, services and endpointslices in protobuf; every
    /// CiliumNode, CiliumEndpoint, CiliumIdentity and CiliumNetworkPolicy in JSON), and a
    /// CiliumEndpoint written with every pod (`cluster::cilium`).
    pub cilium: bool,
}

/// Apps: pod `slot` is app `slot % APPS` (its label) and mounts that app's ConfigMap and Secret.
pub const APPS: usize = 8;

impl Shape {
    /// The apps a node's pods belong to: each node's kubelet watches their ConfigMaps and
    /// Secrets by name.
    pub fn apps_per_node(&self) -> usize {
        self.pods_per_node.min(APPS)
    }
}

/// The ConfigMaps every pod's projected service account token volume names, whatever its app:
/// the cluster's CA (the ServiceAccount admission plugin) and, the realcluster's apiserver being
/// OpenShift's fork, its service CA. The kubelet watches each by name too.
pub const TOKEN_VOLUME_CONFIGMAPS: [&str; 2] = ["kube-root-ca.crt", "openshift-service-ca.crt"];

/// App `a`'s name, and its ConfigMap's and Secret's.
pub fn app_name(a: usize) -> String {
    format!("app-{a}")
}

pub fn pod_name(node: usize, slot: usize) -> String {
    format!("p-{node}-{slot}")
}

pub fn service_name(s: usize) -> String {
    format!("svc-{s}")
}

/// A pod's address: unique per (node, slot).
pub(super) fn pod_ip(node: usize, slot: usize) -> String {
    let n = node * 64 + slot;
    format!("10.{}.{}.{}", 64 + (n >> 16) % 64, (n >> 8) & 255, n & 255)
}

/// Pod `slot` of `node`, bound to it, stamped with `stamp` (Unix microseconds) if given.
pub fn pod(node: usize, slot: usize, stamp: Option<u64>) -> Value {
    let app = app_name(slot % APPS);
    let mut meta = json!({"name": pod_name(node, slot), "namespace": NAMESPACE,
        "labels": {"app": app}});
    if let Some(s) = stamp {
        meta["annotations"] = json!({STAMP: s.to_string()});
    }
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {
            "nodeName": node_name(node),
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "volumeMounts": [{"name": "config", "mountPath": "/etc/config"},
                                 {"name": "secret", "mountPath": "/etc/secret"},
                                 {"name": "kube-api-access", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            // The projected token volume the ServiceAccount admission plugin adds (here
            // already, so that the fake's pods reference what the real apiserver's do; the real
            // one adds no second), with the service CA OpenShift's fork adds: the kubelet
            // watches both ConfigMaps by name.
            "volumes": [{"name": "config", "configMap": {"name": app}},
                        {"name": "secret", "secret": {"secretName": app}},
                        {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": TOKEN_VOLUME_CONFIGMAPS[0],
                                "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                            {"configMap": {"name": TOKEN_VOLUME_CONFIGMAPS[1],
                                "items": [{"key": "service-ca.crt", "path": "service-ca.crt"}]}}]}}],
            "terminationGracePeriodSeconds": 0,
        },
    })
}

/// A pod's status as the kubelet first syncs it: its container being created.
pub fn pending_status() -> Value {
    let now = crate::node::cluster::chrono_now();
    json!({"status": {
        "phase": "Pending", "hostIP": "10.0.0.1", "startTime": now,
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                        "lastTransitionTime": now}],
    }})
}

/// A pod's status once its container runs, before it is ready.
pub fn started_status(node: usize, slot: usize) -> Value {
    let now = crate::node::cluster::chrono_now();
    json!({"status": {
        "phase": "Running", "podIP": pod_ip(node, slot), "podIPs": [{"ip": pod_ip(node, slot)}],
        "hostIP": "10.0.0.1", "startTime": now,
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                        "lastTransitionTime": now}],
    }})
}

/// A pod's status once the kubelet has started it.
pub fn running_status(node: usize, slot: usize) -> Value {
    let now = crate::node::cluster::chrono_now();
    json!({"status": {
        "phase": "Running", "podIP": pod_ip(node, slot), "podIPs": [{"ip": pod_ip(node, slot)}],
        "hostIP": "10.0.0.1", "startTime": now,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
    }})
}

pub(super) fn node(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name(i), "labels": {LABEL: "true", "kubernetes.io/hostname": node_name(i)}},
        "spec": {},
    })
}

pub(super) fn service(s: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(s), "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
    })
}

/// Service `s`'s EndpointSlice: `endpoints_per_slice` pods, spread over the nodes.
pub fn endpoint_slice(shape: &Shape, s: usize) -> Value {
    let endpoints: Vec<Value> = (0..shape.endpoints_per_slice)
        .map(|e| {
            let node = (s * shape.endpoints_per_slice + e) % shape.nodes.max(1);
            let slot = (s + e) % shape.pods_per_node.max(1);
            json!({
                "addresses": [pod_ip(node, slot)],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": node_name(node),
                "targetRef": {"kind": "Pod", "namespace": NAMESPACE, "name": pod_name(node, slot)},
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{}-1", service_name(s)), "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": service_name(s),
                       "endpointslice.kubernetes.io/managed-by": "kubeplex-bench"}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    })
}
