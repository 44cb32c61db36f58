//! The objects a Cilium agent on every node writes and every other agent reads, shaped as
//! cilium/cilium writes them (scripts/realcluster/crds/CILIUM.md, from its source; the CRDs are
//! scripts/realcluster/crds/cilium-*.yaml): a CiliumNode per node (its addresses, health and
//! pod CIDR), a CiliumEndpoint per pod (its identity, addresses, state; no spec, and no status
//! subresource: written whole), a CiliumIdentity per label set (here per app), and the users'
//! CiliumNetworkPolicies.
//!
//! Approximations: the agent writes its CiliumNode and its pods' CiliumEndpoints itself (and
//! patches an endpoint's status once or twice after creating it); here the run's writer writes
//! each endpoint once with its pod, as cluster-admin — the apiserver and every reader see the
//! same objects and events, the writes come from one client instead of N. Identities are made
//! once per app (the operator's garbage collection never runs in a run).

use serde_json::{json, Value};

use super::objects::{app_name, pod_ip, pod_name, LABEL, NAMESPACE, STAMP};
use crate::node::cluster::node_name;

pub const GROUP_VERSION: &str = "/apis/cilium.io/v2";
/// The Cilium resources an agent reads (all of them, cluster-wide).
pub const CILIUM_RESOURCES: [&str; 4] =
    ["ciliumnodes", "ciliumendpoints", "ciliumidentities", "ciliumnetworkpolicies"];
/// The CiliumNetworkPolicies of a run.
pub const POLICIES: usize = 4;

/// The numeric identity of app `a` (the agent allocates from 256 up; the name is the number).
fn identity_id(a: usize) -> u64 {
    10_000 + a as u64
}

/// Node `i`'s CiliumNode (`pkg/nodediscovery`: spec with its addresses, health endpoint,
/// IPAM's pod CIDR; the operator's empty status).
pub fn cilium_node(i: usize) -> Value {
    let name = node_name(i);
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux", LABEL: "true"}},
        "spec": {
            "addresses": [{"type": "InternalIP", "ip": format!("172.18.{}.{}", i / 250, i % 250 + 1)},
                          {"type": "CiliumInternalIP", "ip": format!("10.{}.{}.1", 64 + i / 256, i % 256)}],
            "alibaba-cloud": {}, "azure": {}, "eni": {}, "encryption": {}, "ingress": {},
            "health": {"ipv4": format!("10.{}.{}.2", 64 + i / 256, i % 256)},
            "ipam": {"podCIDRs": [format!("10.{}.{}.0/24", 64 + i / 256, i % 256)], "pools": {}},
            "bootid": format!("5c2d1a3e-0000-4000-8000-{i:012}"),
        },
        "status": {"alibaba-cloud": {}, "azure": {}, "eni": {}, "ipam": {"operator-status": {}}},
    })
}

/// The CiliumEndpoint of pod `slot` on `node` (the endpoint manager's CEP sync: the pod's
/// labels, its identity, address and node, state `ready`), stamped as the pod is.
pub fn cilium_endpoint(node: usize, slot: usize, stamp: Option<u64>) -> Value {
    let (name, app) = (pod_name(node, slot), app_name(slot % super::objects::APPS));
    let mut meta = json!({"name": name, "namespace": NAMESPACE, "labels": {"app": app}});
    if let Some(s) = stamp {
        meta["annotations"] = json!({STAMP: s.to_string()});
    }
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint", "metadata": meta,
        "status": {
            "id": 1 + slot,
            "external-identifiers": {
                "container-id": format!("{:064x}", node * 64 + slot),
                "k8s-namespace": NAMESPACE, "k8s-pod-name": name,
                "pod-name": format!("{NAMESPACE}/{name}")},
            "identity": {"id": identity_id(slot % super::objects::APPS), "labels": labels(&app)},
            "networking": {"addressing": [{"ipv4": pod_ip(node, slot)}],
                           "node": format!("172.18.{}.{}", node / 250, node % 250 + 1)},
            "encryption": {},
            "policy": {"ingress": {"enforcing": false, "state": "<status disabled>"},
                       "egress": {"enforcing": false, "state": "<status disabled>"}},
            "state": "ready",
            "service-account": "default",
        },
    })
}

/// App `a`'s CiliumIdentity (crd identity allocation: the security labels, the namespace label).
pub fn cilium_identity(a: usize) -> Value {
    let app = app_name(a);
    let security: serde_json::Map<String, Value> = labels(&app)
        .into_iter()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), json!(v))))
        .collect();
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
        "metadata": {"name": identity_id(a).to_string(),
                     "labels": {"io.kubernetes.pod.namespace": NAMESPACE, LABEL: "true"}},
        "security-labels": security,
    })
}

/// Policy `p`: app `p`'s pods take HTTP from app `p + 1`'s.
pub fn cilium_policy(p: usize) -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
        "metadata": {"name": format!("allow-{p}"), "namespace": NAMESPACE},
        "spec": {"endpointSelector": {"matchLabels": {"app": app_name(p)}},
                 "ingress": [{"fromEndpoints": [{"matchLabels": {"app": app_name(p + 1)}}],
                              "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]}]},
    })
}

/// An identity's label set, as `k8s:key=value` sorted.
fn labels(app: &str) -> Vec<String> {
    vec![
        format!("k8s:app={app}"),
        format!("k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name={NAMESPACE}"),
        "k8s:io.cilium.k8s.policy.cluster=default".into(),
        "k8s:io.cilium.k8s.policy.serviceaccount=default".into(),
        format!("k8s:io.kubernetes.pod.namespace={NAMESPACE}"),
    ]
}

/// The cluster-scoped objects of a run (`cluster::remove` deletes them by its label; the
/// namespaced ones go with its namespace).
pub const CLUSTER_SCOPED: [&str; 2] = ["ciliumnodes", "ciliumidentities"];

/// What the run creates for its Cilium agents: (collection, object).
pub fn objects(nodes: usize, pods_per_node: usize) -> Vec<(String, Value)> {
    let ns = format!("{GROUP_VERSION}/namespaces/{NAMESPACE}");
    let mut all: Vec<(String, Value)> = (0..super::objects::APPS)
        .map(|a| (format!("{GROUP_VERSION}/ciliumidentities"), cilium_identity(a)))
        .collect();
    all.extend((0..POLICIES).map(|p| (format!("{ns}/ciliumnetworkpolicies"), cilium_policy(p))));
    all.extend((0..nodes).map(|i| (format!("{GROUP_VERSION}/ciliumnodes"), cilium_node(i))));
    for i in 0..nodes {
        for k in 0..pods_per_node {
            all.push((format!("{ns}/ciliumendpoints"), cilium_endpoint(i, k, None)));
        }
    }
    all
}
