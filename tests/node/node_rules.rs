//! The Node authorizer's rules that kubeplex applies itself (`nodeAuthorizer: true`,
//! `src/auth/node_rules.rs`) grant a node's read through a pod only while kubeplex's view of
//! that pod is live: the grant ends when the pod is deleted, a pod recreated under the same name
//! is a new binding, a pod of another namespace grants nothing here, an ephemeral container's
//! reference is the apiserver's to judge, and a cache of pods whose watch cannot come back
//! grants nothing at all — the read is reviewed, and the kubelet gets the apiserver's own
//! answer (kube-apiserver 1.36's graph drops a deleted pod's edges at once).

use kubeplex_test_support as support;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::node::{Node, NodeOptions};
use support::tls::{Credentials, TlsClient};

/// Past the time kubeplex gives the apiserver's graph to hold a binding (twice nodeGraphLag
/// with the tests' 1.5 s: 3 s).
const SETTLED: Duration = Duration::from_millis(3200);
/// Past the fake apiserver's graph lag (900 ms), which follows deletions as it follows
/// bindings.
const APISERVER_GRAPH: Duration = Duration::from_millis(1200);

fn configmap(namespace: &str, name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": {"k": data}})
}

/// A pod on node-0 in `namespace` that mounts the ConfigMap `mounted`.
fn pod(namespace: &str, name: &str, mounted: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}],
            "volumes": [{"name": "v", "configMap": {"name": mounted}}]}})
}

struct Kubelet {
    client: TlsClient,
    addr: String,
}

impl Kubelet {
    fn of(node: &Node) -> Kubelet {
        let cert = node.pki.client("system:node:node-0", &["system:nodes"]);
        Kubelet {
            client: TlsClient::new(&node.pki.ca_pem, &Credentials::cert(cert), false),
            addr: node.addr(),
        }
    }

    /// The kubelet's read of a ConfigMap by name, as its reflector's first list asks for it:
    /// the status and the body.
    async fn configmap(&self, namespace: &str, name: &str) -> (u16, String) {
        let path = format!("/api/v1/namespaces/{namespace}/configmaps/{name}?resourceVersion=0");
        let resp = self.client.get(&self.addr, &path).await;
        (resp.status, String::from_utf8_lossy(&resp.body).into_owned())
    }

    /// Waits (at most 5 s) until kubeplex's list of node-0's pods shows `name` (or no longer
    /// does, with `present: false`).
    async fn sees_pod(&self, namespace: &str, name: &str, present: bool) {
        let path = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-0&resourceVersion=0";
        let started = Instant::now();
        loop {
            let list: Value = serde_json::from_slice(&self.client.get(&self.addr, path).await.body)
                .unwrap_or(Value::Null);
            let found =
                list["items"].as_array().into_iter().flatten().any(|p| {
                    p["metadata"]["name"] == name && p["metadata"]["namespace"] == namespace
                });
            if found == present {
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "{namespace}/{name}: {present}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn start() -> Node {
    Node::start_with(NodeOptions { node_authorizer: true, ..Default::default() }).await
}

/// Reads granted by the rules, on whichever tier granted them.
fn by_rules(node: &Node) -> u64 {
    node.tiers_metric("kubeplex_auth_decisions_total", &[("source", "node_rules")])
}

/// A pod's ConfigMap is granted by rule while the pod is bound to the node, and no longer once
/// kubeplex's live watch has brought the pod's deletion: the read is reviewed, and the kubelet
/// gets the apiserver's refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grant_ends_when_the_pod_is_deleted() {
    let node = start().await;
    let kubelet = Kubelet::of(&node);
    node.sim.create(configmap("team-0", "mounted", "v1")).unwrap();
    node.sim.create(pod("team-0", "p", "mounted")).unwrap();
    kubelet.sees_pod("team-0", "p", true).await;
    tokio::time::sleep(SETTLED).await;
    let granted = by_rules(&node);
    let (status, body) = kubelet.configmap("team-0", "mounted").await;
    assert_eq!(status, 200, "{body}");
    assert!(by_rules(&node) > granted, "granted by the rule");

    node.sim.delete("", "pods", "team-0", "p").unwrap();
    kubelet.sees_pod("team-0", "p", false).await;
    tokio::time::sleep(APISERVER_GRAPH).await;
    let (granted, reviews) = (by_rules(&node), node.sim_reviews("subjectaccessreview"));
    let (status, body) = kubelet.configmap("team-0", "mounted").await;
    assert_eq!(status, 403, "no pod of node-0 uses it any more: {body}");
    assert!(body.contains("no relationship found between node 'node-0'"), "{body}");
    assert_eq!(by_rules(&node), granted, "no grant by rule for a deleted pod");
    assert!(node.sim_reviews("subjectaccessreview") > reviews, "reviewed");
}

/// The pool's watch of pods cannot come back (the apiserver's watch cache for pods is
/// reinitializing: its watches are answered 429) while ConfigMaps flow: the pod is deleted
/// and its ConfigMap changed. The cache still shows the pod, synced — but its view has a gap,
/// so nothing is granted through it: the kubelet gets the apiserver's 403, not the new data.
/// Once the watch is back and has run for the settling time, the rules grant again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_of_pods_whose_watch_cannot_come_back_grants_nothing() {
    let node = start().await;
    let kubelet = Kubelet::of(&node);
    node.sim.create(configmap("team-0", "mounted", "old")).unwrap();
    node.sim.create(configmap("team-0", "later", "x")).unwrap();
    node.sim.create(pod("team-0", "p", "mounted")).unwrap();
    kubelet.sees_pod("team-0", "p", true).await;
    tokio::time::sleep(SETTLED).await;
    let (status, body) = kubelet.configmap("team-0", "mounted").await;
    assert_eq!((status, body.contains("\"old\"")), (200, true), "{body}");

    node.sim.reinitializing("", "pods", true);
    // The tier that watches the apiserver sees its watch lost (`/debug/caches`).
    let upstream_tier = node.behind.as_ref().unwrap_or(&node.proxy);
    let admin = upstream_tier.admin_addr.expect("admin listener").to_string();
    let pods_watching = || async {
        let all = support::get(&admin, "/debug/caches").await.json();
        all.as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["resource"] == "pods/v1")
            .map(|c| (c["synced"] == true, c["watching"] == true))
            .collect::<Vec<_>>()
    };
    let started = Instant::now();
    while pods_watching().await.iter().any(|(_, watching)| *watching) {
        assert!(started.elapsed() < Duration::from_secs(5), "the pods watch never failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(pods_watching().await.iter().all(|(synced, _)| *synced), "still serving its state");
    node.sim.delete("", "pods", "team-0", "p").unwrap();
    node.sim
        .modify("", "configmaps", "team-0", "mounted", |v| v["data"]["k"] = json!("new"))
        .unwrap();
    tokio::time::sleep(APISERVER_GRAPH).await;
    let granted = by_rules(&node);
    let (status, body) = kubelet.configmap("team-0", "mounted").await;
    assert_eq!(status, 403, "the apiserver's answer, not the new data: {body}");
    assert!(!body.contains("\"new\""), "{body}");
    assert_eq!(by_rules(&node), granted, "nothing granted through a view with a gap");

    node.sim.reinitializing("", "pods", false);
    node.sim.create(pod("team-0", "q", "later")).unwrap();
    let started = Instant::now();
    while pods_watching().await.iter().any(|(_, watching)| !*watching) {
        assert!(started.elapsed() < Duration::from_secs(10), "the pods watch never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kubelet.sees_pod("team-0", "q", true).await;
    tokio::time::sleep(SETTLED).await;
    let granted = by_rules(&node);
    let (status, body) = kubelet.configmap("team-0", "later").await;
    assert_eq!(status, 200, "{body}");
    assert!(by_rules(&node) > granted, "the rules grant again through the live view");
}

/// A pod deleted and created again under the same name, bound to the same node, is a new
/// binding: its new ConfigMap is not granted by rule until the graph has had time to add it,
/// and the old pod's ConfigMap is the apiserver's to refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_recreated_under_the_same_name_is_a_new_binding() {
    let node = start().await;
    let kubelet = Kubelet::of(&node);
    node.sim.create(configmap("team-0", "first", "1")).unwrap();
    node.sim.create(configmap("team-0", "second", "2")).unwrap();
    node.sim.create(pod("team-0", "p", "first")).unwrap();
    kubelet.sees_pod("team-0", "p", true).await;
    tokio::time::sleep(SETTLED).await;
    assert_eq!(kubelet.configmap("team-0", "first").await.0, 200);

    node.sim.delete("", "pods", "team-0", "p").unwrap();
    node.sim.create(pod("team-0", "p", "second")).unwrap();
    // Until kubeplex's cache shows the new pod, and then within the settling time, the new
    // reference is not taken by rule.
    let started = Instant::now();
    loop {
        let path = "/api/v1/namespaces/team-0/pods/p?resourceVersion=0";
        let body = kubelet.client.get(&kubelet.addr, path).await.body;
        if String::from_utf8_lossy(&body).contains("\"second\"") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the new pod never showed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let granted = by_rules(&node);
    let _ = kubelet.configmap("team-0", "second").await;
    assert_eq!(by_rules(&node), granted, "a new binding is the apiserver's to judge");
    tokio::time::sleep(APISERVER_GRAPH).await;
    let (status, body) = kubelet.configmap("team-0", "first").await;
    assert_eq!(status, 403, "the old pod's ConfigMap: {body}");
    tokio::time::sleep(SETTLED).await;
    let granted = by_rules(&node);
    assert_eq!(kubelet.configmap("team-0", "second").await.0, 200);
    assert!(by_rules(&node) > granted, "granted by rule once settled");
}

/// A pod of node-0 in team-1 that mounts `shared` grants team-1's `shared`, never team-0's:
/// the graph's edges are namespaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_another_namespace_grants_nothing_in_this_one() {
    let node = start().await;
    let kubelet = Kubelet::of(&node);
    node.sim.create(configmap("team-0", "shared", "zero")).unwrap();
    node.sim.create(configmap("team-1", "shared", "one")).unwrap();
    node.sim.create(pod("team-1", "p", "shared")).unwrap();
    kubelet.sees_pod("team-1", "p", true).await;
    tokio::time::sleep(SETTLED).await;
    let granted = by_rules(&node);
    let (status, body) = kubelet.configmap("team-1", "shared").await;
    assert_eq!((status, body.contains("\"one\"")), (200, true), "{body}");
    assert!(by_rules(&node) > granted);
    let granted = by_rules(&node);
    let (status, body) = kubelet.configmap("team-0", "shared").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(by_rules(&node), granted);
}

/// A ConfigMap that only an ephemeral container of a pod names (added by an update, as
/// `kubectl debug` does) is not among the references kubeplex reads: the read is reviewed and
/// answered as the apiserver decides (its graph links ephemeral containers' references).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_containers_references_are_reviewed() {
    let node = start().await;
    let kubelet = Kubelet::of(&node);
    node.sim.create(configmap("team-0", "mounted", "m")).unwrap();
    node.sim.create(configmap("team-0", "debugging", "d")).unwrap();
    node.sim.create(pod("team-0", "p", "mounted")).unwrap();
    node.sim
        .modify("", "pods", "team-0", "p", |v| {
            v["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "busybox",
                "envFrom": [{"configMapRef": {"name": "debugging"}}]}]);
        })
        .unwrap();
    kubelet.sees_pod("team-0", "p", true).await;
    tokio::time::sleep(SETTLED).await;
    let (granted, reviews) = (by_rules(&node), node.sim_reviews("subjectaccessreview"));
    let (status, body) = kubelet.configmap("team-0", "debugging").await;
    assert_eq!((status, body.contains("\"d\"")), (200, true), "the apiserver grants it: {body}");
    assert_eq!(by_rules(&node), granted, "not by kubeplex's rules");
    assert!(node.sim_reviews("subjectaccessreview") > reviews, "reviewed");
}

/// The apiserver stops answering after the rules granted a kubelet's read of its pod's
/// ConfigMap: the rules grant no more (the view is no longer live) and no review can be asked,
/// but the grant, made from a view as current as a review, stands in as a reviewed grant does
/// (`source="last_known"`), so the kubelet's cached read goes on through the outage as any
/// reviewed client's does (before: 503, and at the 2026-11-29 soak's outages every node tier's
/// read granted by the rules).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_by_the_rules_stands_in_through_an_outage() {
    let node = start().await;
    let kubelet = Kubelet::of(&node);
    node.sim.create(configmap("team-0", "mounted", "v1")).unwrap();
    node.sim.create(pod("team-0", "p", "mounted")).unwrap();
    kubelet.sees_pod("team-0", "p", true).await;
    tokio::time::sleep(SETTLED).await;
    let (status, before) = kubelet.configmap("team-0", "mounted").await;
    assert_eq!(status, 200, "{before}");
    let granted = by_rules(&node);
    assert!(granted > 0, "granted by the rule");

    node.sim.stop_serving();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last_known = || {
        node.tiers_metric(
            "kubeplex_auth_decisions_total",
            &[("kind", "access"), ("source", "last_known")],
        )
    };
    for _ in 0..3 {
        let (status, during) = kubelet.configmap("team-0", "mounted").await;
        assert_eq!(status, 200, "{during}");
        assert_eq!(during, before, "the cached answer from before the outage");
    }
    assert!(last_known() > 0, "the rules' grant stood in");
    node.sim.restart().await.expect("restart");
}
