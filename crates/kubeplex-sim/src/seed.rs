//! Realistic cluster contents for the demo and for load tests: nodes, namespaces, pods spread
//! over nodes (with the specs and managedFields a real apiserver stores), configmaps, services,
//! and a churn loop that keeps watchers busy.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::{json, Value};

use super::Sim;

/// Size of a generated cluster.
#[derive(Debug, Clone, Copy)]
pub struct ClusterShape {
    pub nodes: usize,
    pub namespaces: usize,
    pub pods: usize,
    pub configmaps: usize,
    pub services: usize,
}

impl Default for ClusterShape {
    fn default() -> Self {
        ClusterShape { nodes: 20, namespaces: 10, pods: 3000, configmaps: 300, services: 100 }
    }
}

const TIMESTAMP: &str = "2026-11-22T10:00:00Z";

pub fn node(i: usize) -> Value {
    let name = format!("node-{i}");
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
        "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": TIMESTAMP,
                "lastTransitionTime": TIMESTAMP, "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": format!("192.168.0.{}", i % 250 + 1)},
                {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.36.2", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}
        }
    })
}

/// A pod as a Deployment would create it, scheduled and running, with managedFields.
pub fn pod(namespace: &str, i: usize, nodes: usize) -> Value {
    let app = format!("app-{}", i % 25);
    let name = format!("{app}-{:05}", i);
    let node = format!("node-{}", i % nodes.max(1));
    let ip = format!("10.244.{}.{}", i % nodes.max(1), i % 250 + 2);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": {"app": app, "pod-template-hash": "7d4b9c8f6", "tier": if i % 3 == 0 { "backend" } else { "frontend" }},
            "annotations": {"kubectl.kubernetes.io/restartedAt": TIMESTAMP},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7d4b9c8f6"),
                "uid": "5b0e2a8e-1c1f-4d5e-9f3a-2b7c8d9e0f1a", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                "time": TIMESTAMP, "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                        "f:ownerReferences": {".": {}, "k:{\"uid\":\"5b0e2a8e-1c1f-4d5e-9f3a-2b7c8d9e0f1a\"}": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {},
                        "f:name": {}, "f:ports": {}, "f:resources": {}, "f:terminationMessagePath": {}}},
                        "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": TIMESTAMP,
                 "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {
                    "f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                    "f:podIPs": {}, "f:startTime": {}}}}]
        },
        "spec": {
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
                "defaultMode": 420}}],
            "containers": [{
                "name": "app", "image": format!("registry.example/{app}:1.{}", i % 7),
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "APP_NAME", "value": app}, {"name": "LOG_LEVEL", "value": "info"}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": node,
            "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": TIMESTAMP},
                {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": TIMESTAMP},
                {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": TIMESTAMP},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": TIMESTAMP}],
            "hostIP": format!("192.168.0.{}", i % nodes.max(1) % 250 + 1),
            "hostIPs": [{"ip": format!("192.168.0.{}", i % nodes.max(1) % 250 + 1)}],
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": TIMESTAMP,
            "containerStatuses": [{"name": "app", "state": {"running": {"startedAt": TIMESTAMP}},
                "lastState": {}, "ready": true, "restartCount": 0,
                "image": format!("registry.example/{app}:1.{}", i % 7),
                "imageID": "registry.example/app@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
                "containerID": format!("containerd://{:064x}", i), "started": true}],
            "qosClass": "Burstable"
        }
    })
}

pub fn configmap(namespace: &str, i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("config-{i}"), "namespace": namespace, "labels": {"app": format!("app-{}", i % 25)}},
        "data": {"settings.yaml": format!("replicas: {}\nlogLevel: info\nfeature: {}\n", i % 5 + 1, i % 2 == 0)}})
}

pub fn service(namespace: &str, i: usize) -> Value {
    let app = format!("app-{}", i % 25);
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("svc-{i}"), "namespace": namespace, "labels": {"app": app}},
        "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "selector": {"app": app}, "clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1),
            "clusterIPs": [format!("10.96.{}.{}", i / 250, i % 250 + 1)], "type": "ClusterIP",
            "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"},
        "status": {"loadBalancer": {}}})
}

/// Every object of a cluster of the given shape, namespaces first.
pub fn cluster(shape: ClusterShape) -> Vec<Value> {
    let namespaces: Vec<String> =
        (0..shape.namespaces.max(1)).map(|i| format!("team-{i}")).collect();
    let mut out: Vec<Value> = namespaces
        .iter()
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    out.extend((0..shape.nodes).map(node));
    let ns = |i: usize| namespaces[i % namespaces.len()].as_str();
    out.extend((0..shape.pods).map(|i| pod(ns(i), i, shape.nodes)));
    out.extend((0..shape.configmaps).map(|i| configmap(ns(i), i)));
    out.extend((0..shape.services).map(|i| service(ns(i), i)));
    out
}

/// Keeps changing the cluster: pod label and annotation updates, configmap create/delete.
/// Runs until the returned task is aborted; `per_second` writes per second.
pub fn churn(sim: Arc<Sim>, shape: ClusterShape, per_second: u32) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = Duration::from_secs_f64(1.0 / f64::from(per_second.max(1)));
        let mut tick = tokio::time::interval(period);
        let mut n: usize = 0;
        loop {
            tick.tick().await;
            n += 1;
            let (pick, ns_i) = {
                let mut rng = rand::rng();
                (
                    rng.random_range(0..shape.pods.max(1)),
                    rng.random_range(0..shape.namespaces.max(1)),
                )
            };
            let ns = format!("team-{ns_i}");
            match n % 4 {
                0 | 1 => {
                    let pod_ns = format!("team-{}", pick % shape.namespaces.max(1));
                    let name = format!("app-{}-{:05}", pick % 25, pick);
                    let _ = sim.modify("", "pods", &pod_ns, &name, |v| {
                        v["metadata"]["annotations"]["kubeplex.io/churn"] = json!(n.to_string());
                    });
                }
                2 => {
                    let _ = sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("churn-{n}"), "namespace": ns, "labels": {"churn": "true"}},
                        "data": {"n": n.to_string()}}));
                }
                _ => {
                    // Delete an earlier churn configmap, keeping the set bounded.
                    let old = n.saturating_sub(40);
                    for i in 0..shape.namespaces.max(1) {
                        let _ = sim.delete(
                            "",
                            "configmaps",
                            &format!("team-{i}"),
                            &format!("churn-{}", old.saturating_sub(2)),
                        );
                    }
                }
            }
        }
    })
}
